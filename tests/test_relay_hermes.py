"""hermes: `chat -Q --query=<brief>`, --yolo or the file-tools-only read-only run, the
session line on stderr or stdout, resume, and discover."""

from __future__ import annotations

import os

import pytest
from conftest import PYTHON, fleet_doc, run, write_json
from discoverkit import install
from fakes import ROOT
from relaykit import DETECT_ONLY, Bench, argv_of

BRIEF = "smoke brief: run until killed.\n"
QUERY = f"--query={BRIEF}"
SESSION = "20261207_031434_c2f839"

# What hermes 0.19.0 printed for `hermes chat -q 'Run the probe with the terminal tool.
# [nest-probe]' -Q --yolo` against a scripted model (exit 0): stdout, then stderr.
STDOUT = (
    "  ⚠ tirith security scanner enabled but not available — command scanning will use "
    "pattern matching only\r\nDone: probe ran.\n"
)
STDERR = "\nsession_id: 20261207_031434_c2f839\n"
# The same run resumed with --resume: stderr names the session first.
RESUMED_STDERR = (
    "↻ Resumed session 20261207_031434_c2f839 (1 user message, 4 total messages)\n\n"
    "session_id: 20261207_031434_c2f839\n"
)
# hermes 0.19.0 for an unknown --resume id (exit 1).
NOT_FOUND = (
    "Session not found: nope\nUse a session ID from a previous CLI run (hermes sessions list).\n"
)


def scripted(stdout: str = STDOUT, stderr: str = STDERR, exit: int = 0) -> dict:
    return {"actions": [{"stdout": stdout}, {"stderr": stderr}], "exit": exit}


@pytest.fixture
def bench(tmp_path, home):
    bench = Bench(tmp_path, "hermes")
    bench.script(scripted(), env_keys=["HERMES_WRITE_SAFE_ROOT"])
    return bench


# ---------------------------------------------------------------- argv per mode


@pytest.mark.parametrize(
    ("flags", "head"),
    [
        ([], ["chat", "-Q", "--yolo"]),
        (["--read-only"], ["chat", "-Q", "-t", "file"]),
        (
            ["--model", "anthropic/claude-sonnet-4.6"],
            ["chat", "-Q", "--yolo", "-m", "anthropic/claude-sonnet-4.6"],
        ),
        (
            ["--provider", "openrouter", "--model", "x/y"],
            ["chat", "-Q", "--yolo", "-m", "x/y", "--provider", "openrouter"],
        ),
        (["--provider", "custom"], ["chat", "-Q", "--yolo", "--provider", "custom"]),
        (["--max-turns", "12"], ["chat", "-Q", "--yolo", "--max-turns", "12"]),
        (["--session", SESSION], ["chat", "-Q", "--yolo", "--resume", SESSION]),
        (["--resume-last"], ["chat", "-Q", "--yolo", "--continue"]),
        (
            ["--read-only", "--session", SESSION, "--model", "m"],
            ["chat", "-Q", "-t", "file", "-m", "m", "--resume", SESSION],
        ),
    ],
)
def test_argv(bench, flags, head):
    assert argv_of(bench, *flags, env=bench.fake.env(**DETECT_ONLY)) == [*head, QUERY]


def test_a_brief_that_starts_with_a_dash_stays_the_query(bench):
    done = bench.relay(stdin="--help me\n- a list\n")
    assert done.code == 0, done
    call = bench.fake.run_call()
    assert call["argv"] == ["chat", "-Q", "--yolo", "--query=--help me\n- a list\n"]
    assert call["stdin"] == ""
    assert done.result["implementerArgv"] == ["hermes", "chat", "-Q", "--yolo", "--query=<brief>"]


def test_a_brief_too_big_for_argv_is_refused(bench):
    bench.brief.write_text("x" * (121 * 1024))
    done = bench.relay()
    assert done.code == 2
    assert done.err == (
        "relay: brief is 121KB; hermes takes the query as a command-line argument, which the OS "
        "caps (~128KB on Linux). Trim it, or have hermes read large context from the repository.\n"
    )
    assert bench.fake.calls() == []


# ---------------------------------------------------------------- the read-only run


def test_read_only_offers_file_tools_and_refuses_every_write(bench):
    done = bench.relay("--read-only", env=bench.fake.env(**DETECT_ONLY))
    assert done.code == 0, done
    assert bench.fake.run_call()["env"] == {"HERMES_WRITE_SAFE_ROOT": os.devnull}
    result = done.result
    assert (result["readOnly"], result["toolsets"], result["yolo"]) == (True, "file", False)
    assert result["readOnlyViolation"] is False
    assert "mode: read-only: file tools only, writes refused" in done.out


def test_a_write_run_leaves_the_users_safe_root_alone(bench):
    done = bench.relay(env=bench.fake.env(HERMES_WRITE_SAFE_ROOT="/srv/www"))
    assert done.code == 0, done
    assert bench.fake.run_call()["env"] == {"HERMES_WRITE_SAFE_ROOT": "/srv/www"}
    result = done.result
    assert (result["readOnly"], result["toolsets"], result["yolo"]) == (False, None, True)


def test_a_read_only_run_overrides_the_users_safe_root(bench):
    bench.relay("--read-only", env=bench.fake.env(HERMES_WRITE_SAFE_ROOT="/srv", **DETECT_ONLY))
    assert bench.fake.run_call()["env"] == {"HERMES_WRITE_SAFE_ROOT": os.devnull}


def test_a_write_that_still_lands_trips_the_wire(bench):
    bench.script({"actions": [{"write": ["hello.txt", "hi\n"]}, {"stdout": "Done.\n"}]})
    done = bench.relay("--read-only", env=bench.fake.env(**DETECT_ONLY))
    assert (done.result["readOnlyViolation"], done.result["readOnlyChanges"]) == (
        True,
        ["hello.txt"],
    )


# ---------------------------------------------------------------- the report and the session


def test_reply_and_session_from_what_hermes_prints(bench):
    done = bench.relay()
    assert done.code == 0, done
    result = done.result
    assert (result["status"], result["sessionId"], result["finalMessage"]) == (
        "completed",
        SESSION,
        "Done: probe ran.",
    )
    assert (bench.out / "final.txt").read_text() == "Done: probe ran."
    assert (bench.out / "stdout.txt").read_bytes().decode() == STDOUT
    assert (result["finalPath"], result["stderrPath"]) == (
        str(bench.out / "final.txt"),
        str(bench.out / "stderr.txt"),
    )
    assert result["usage"] is None  # hermes chat prints no token counts
    assert f"session id (resume with: --session {SESSION}): {SESSION}" in done.out


def test_an_older_hermes_that_prints_the_session_on_stdout(bench):
    bench.script(scripted(stdout=f"Done.\n\nsession_id: {SESSION}\n", stderr=""))
    result = bench.relay().result
    assert (result["sessionId"], result["finalMessage"]) == (SESSION, "Done.")


def test_the_last_session_line_wins(bench):
    bench.script(scripted(stdout="Done.\n", stderr="session_id: 20260101_000000_aaaaaa\n" + STDERR))
    assert bench.relay().result["sessionId"] == SESSION


def test_warnings_inside_the_reply_are_kept(bench):
    text = "Fixed it.\n\n⚠️ File-mutation verifier: 1 file(s) were NOT modified this turn.\n"
    bench.script(scripted(stdout=text))
    assert bench.relay().result["finalMessage"] == text.strip()


def test_a_run_that_prints_no_reply_failed(bench):
    bench.script(scripted(stdout="  ⚠ tirith security scanner enabled but not available\n"))
    done = bench.relay()
    assert done.code == 1, done
    result = done.result
    assert (result["status"], result["error"], result["sessionId"]) == (
        "failed",
        "hermes exited without a reply; inspect stderr.txt",
        SESSION,
    )


def test_resume_by_id_keeps_the_session(bench):
    bench.script(scripted(stdout="Done: probe ran.\n", stderr=RESUMED_STDERR))
    done = bench.relay("--session", SESSION)
    result = done.result
    assert (result["resumed"], result["sessionRequested"], result["sessionChanged"]) == (
        True,
        SESSION,
        False,
    )
    assert "mode: resumed an existing session" in done.out


def test_an_unknown_session_fails_with_hermes_exit_code(bench):
    bench.script(scripted(stdout=NOT_FOUND, stderr="", exit=1))
    done = bench.relay("--session", "nope")
    assert done.code == 1
    result = done.result
    assert (result["status"], result["sessionId"], result["sessionChanged"]) == (
        "failed",
        None,
        None,
    )
    assert result["finalMessage"] == NOT_FOUND.strip()


def test_the_version_is_its_first_line(bench):
    version = "Hermes Agent v0.19.0 (2026.7.20)\nInstall method: pip\nUp to date\n"
    bench.script(scripted(), version={"stdout": version})
    assert bench.relay().result["hermesVersion"] == "Hermes Agent v0.19.0 (2026.7.20)"


# ---------------------------------------------------------------- options and lanes


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--max-turns", "0"], "--max-turns must be a positive integer"),
        (["--max-turns", "three"], "--max-turns must be a positive integer"),
        (
            ["--provider", "open router"],
            "--provider contains unsupported characters (allowed: letters, digits, . _ : / -)",
        ),
        (
            ["--model", "a;b"],
            "--model contains unsupported characters (allowed: letters, digits, . _ : / -)",
        ),
        (
            ["--session", "s", "--resume-last"],
            "--resume-last and --session are mutually exclusive; pass only one",
        ),
        (
            ["--session", "a b"],
            "--session contains unsupported characters (allowed: letters, digits, . _ : -)",
        ),
    ],
)
def test_usage_errors(bench, flags, message):
    done = bench.relay(*flags)
    assert (done.code, done.err) == (2, f"relay: {message}\n")
    assert not bench.out.exists()


def test_lanes_model_provider_and_read_only(bench, global_config):
    write_json(
        global_config,
        fleet_doc(
            {
                "feature": {"implementer": "hermes", "model": "x/y", "provider": "openrouter"},
                "review": {"implementer": "hermes", "readOnly": True},
            }
        ),
    )
    bench.relay("--lane", "feature")
    assert bench.fake.calls("run")[-1]["argv"] == [
        "chat", "-Q", "--yolo", "-m", "x/y", "--provider", "openrouter", QUERY,
    ]  # fmt: skip
    done = bench.relay("--lane", "review", env=bench.fake.env(**DETECT_ONLY))
    assert bench.fake.calls("run")[-1]["argv"] == ["chat", "-Q", "-t", "file", QUERY]
    assert (done.result["lane"], done.result["readOnly"]) == ("review", True)


def test_missing_binary(tmp_path, home):
    bench = Bench(tmp_path, "hermes")
    (bench.fake.bin / "hermes").unlink()
    done = bench.relay()
    assert done.code == 127
    assert (done.result["status"], done.result["exitCode"]) == ("hermes_unavailable", 127)
    assert "`hermes` not found on PATH. Install Hermes Agent (`pip install hermes-agent`" in (
        done.err
    )


# ---------------------------------------------------------------- discover


def test_discover_reads_the_first_line_of_the_version(tmp_path, home):
    bindir = install(
        tmp_path / "bin",
        {"hermes": {"--version": ("Hermes Agent v0.19.0 (2026.7.20)\nUp to date\n", "", 0)}},
    )
    script = ROOT / "skills" / "hermes-delegate" / "scripts" / "discover.py"
    done = run([PYTHON, str(script)], env={"PATH": f"{bindir}:/usr/bin:/bin", "HOME": str(home)})
    assert done.code == 0, done
    found = next(e for e in done.json()["discovered"] if e["key"] == "hermes")
    assert (found["version"], found["authenticated"]) == ("Hermes Agent v0.19.0 (2026.7.20)", None)
    assert found["supports"] == ["model", "provider", "timeout", "readOnly"]
