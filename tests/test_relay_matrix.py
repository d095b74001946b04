"""The engine's promises, checked for every relay: a new adapter joins every case."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest
from conftest import commit_all, delegate, fleet_doc, git, write_json
from fakes import alive, wait_for
from relaykit import (
    ALL_RELAYS,
    BRIEF,
    RELAYS,
    ROOT,
    SHORT_GRACE,
    SWITCHES,
    VALUE_FLAGS,
    Bench,
    adapter,
    binary,
    finish,
    needs,
    read_pid,
    signal_number,
)


def hanging_run(bench: Bench, on_term, grand_ignores_term: bool) -> dict:
    return {
        "on_term": on_term,
        "actions": [
            {
                "grandchild": {
                    "ignore_term": grand_ignores_term,
                    "pid_file": str(bench.pid_file("grand.pid")),
                }
            },
            {"pid_file": str(bench.pid_file("child.pid"))},
            {"wait": "forever"},
        ],
    }


@pytest.mark.parametrize("key", RELAYS)
def test_watchdog_kills_a_tree_that_ignores_sigterm(tmp_path, key):
    bench = Bench(tmp_path, key)
    bench.script(hanging_run(bench, "ignore", grand_ignores_term=False))
    started = time.monotonic()
    run = bench.relay("--timeout", "1s", env=bench.fake.env(**SHORT_GRACE))
    assert run.code == 137, run
    assert time.monotonic() - started < 30
    result = run.result
    assert (result["status"], result["exitCode"], result["signal"]) == ("timeout", 137, "SIGKILL")
    assert result["error"] == (
        f"{adapter(key).label} did not finish within --timeout 1s; killed by the relay watchdog"
    )
    assert isinstance(result["stderrTail"], list)
    for name in ("child.pid", "grand.pid"):
        pid = int(bench.pid_file(name).read_text())
        wait_for(lambda pid=pid: not alive(pid), timeout=5)


@pytest.mark.parametrize("key", RELAYS)
def test_watchdog_sweeps_a_grandchild_left_behind(tmp_path, key):
    bench = Bench(tmp_path, key)
    bench.script(hanging_run(bench, {"exit": 0}, grand_ignores_term=True))
    run = bench.relay("--timeout", "1s", env=bench.fake.env(**SHORT_GRACE))
    assert run.code == 1, run
    assert (run.result["status"], run.result["exitCode"], run.result["signal"]) == (
        "timeout",
        1,
        None,
    )
    grand = int(bench.pid_file("grand.pid").read_text())
    wait_for(lambda: not alive(grand), timeout=5)


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGINT", "SIGHUP"])
@pytest.mark.parametrize("key", RELAYS)
def test_signal_to_the_relay_aborts_the_run(tmp_path, key, signame):
    bench = Bench(tmp_path, key)
    late = bench.work / "late-file.txt"
    run = hanging_run(
        bench,
        {"write": [str(late), "flushed during shutdown\n"], "exit": 0},
        grand_ignores_term=True,
    )
    bench.script(run)
    # The child exits at its first SIGTERM; a roomy grace keeps a loaded machine
    # from SIGKILLing it before it has written the late file.
    proc = bench.start(env=bench.fake.env(DELEGATE_RELAY_ABORT_GRACE="20"))
    child = read_pid(bench.pid_file("child.pid"))
    grand = int(bench.pid_file("grand.pid").read_text())
    proc.send_signal(signal_number(signame))
    code, out, _err = finish(proc)
    number = signal_number(signame)
    assert code == 128 + number
    result = bench.result
    assert (result["status"], result["exitCode"], result["signal"]) == (
        "aborted",
        128 + number,
        signame,
    )
    assert result["error"].startswith(f"the relay was killed by {signame}; ")
    assert "?? late-file.txt" in result["touchedFiles"]
    assert out.count("relay: aborted") == 1
    wait_for(lambda: not alive(child) and not alive(grand), timeout=5)


def test_an_aborted_tree_that_ignores_sigterm_is_killed_after_the_grace(tmp_path):
    bench = Bench(tmp_path, "codex")
    bench.script(hanging_run(bench, "ignore", grand_ignores_term=True))
    proc = bench.start(env=bench.fake.env(DELEGATE_RELAY_ABORT_GRACE="0.5"))
    child = read_pid(bench.pid_file("child.pid"))
    grand = int(bench.pid_file("grand.pid").read_text())
    proc.send_signal(signal.SIGTERM)
    code, _out, _err = finish(proc)
    assert code == 128 + signal.SIGTERM
    assert bench.result["status"] == "aborted"
    wait_for(lambda: not alive(child) and not alive(grand), timeout=5)


@pytest.mark.parametrize("key", RELAYS)
def test_sigterm_as_soon_as_events_appear_still_aborts(tmp_path, key):
    bench = Bench(tmp_path, key)
    bench.script(version={"hang": True})
    proc = bench.start("--timeout", "30s")
    first = adapter(key).events_name or adapter(key).brief_name
    wait_for(lambda: (bench.out / first).exists())
    proc.send_signal(signal.SIGTERM)
    code, _out, _err = finish(proc)
    assert code == 143
    result = bench.result
    assert (result["status"], result["signal"]) == ("aborted", "SIGTERM")
    assert "was not dispatched" in result["error"]
    assert bench.fake.calls("run") == []


@pytest.mark.parametrize("key", RELAYS)
def test_missing_binary_is_127_with_a_result(tmp_path, key):
    bench = Bench(tmp_path, key)
    os.unlink(bench.fake.bin / binary(key))
    run = bench.relay()
    assert run.code == 127, run
    assert run.result["status"] == adapter(key).unavailable_status
    assert run.result["exitCode"] == 127
    assert f"`{binary(key)}` not found on PATH" in run.err


@pytest.mark.parametrize("key", RELAYS)
def test_child_exit_code_is_kept(tmp_path, key):
    bench = Bench(tmp_path, key)
    bench.script({"actions": [{"stderr": "boom\n"}], "exit": 9})
    run = bench.relay()
    assert run.code == 9, run
    result = run.result
    assert (result["status"], result["exitCode"]) == ("failed", 9)
    assert result["stderrTail"] == ["boom"]
    assert run.out.count("relay: failed") == 1


@pytest.mark.parametrize("key", RELAYS)
def test_child_killed_by_a_signal_is_128_plus_n(tmp_path, key):
    bench = Bench(tmp_path, key)
    bench.script({"die_by": "SIGKILL"})
    run = bench.relay()
    assert run.code == 137, run
    assert (run.result["status"], run.result["signal"]) == ("failed", "SIGKILL")
    assert "hint: the host killed the process" in run.out


@pytest.mark.parametrize(
    "value",
    ["NONSENSE", "", "10", "10s-junk", "1.5s", "1h30", "0s", "596h31m24s", "600h", "10000h"],
)
@pytest.mark.parametrize("key", RELAYS)
def test_bad_timeouts_are_usage_errors_with_no_artifacts(tmp_path, capfd, key, value):
    bench = Bench(tmp_path, key)
    code, out, err = bench.in_process(capfd, "--timeout", value)
    assert (code, out) == (2, "")
    assert err.startswith("relay: ") and err.count("\n") == 1
    assert not bench.out.exists()


@pytest.mark.parametrize("key", RELAYS)
def test_usage_error_exit_code_and_no_artifacts_in_a_real_process(tmp_path, key):
    bench = Bench(tmp_path, key)
    run = bench.relay("--timeout", "NONSENSE")
    assert run.code == 2, run
    assert run.err.startswith("relay: ")
    assert not bench.out.exists()


@pytest.mark.parametrize("key", RELAYS)
def test_longest_timeout_is_accepted(tmp_path, key):
    from delegate_skills.relay.engine import Relay

    bench = Bench(tmp_path, key)
    relay = Relay(adapter(key))
    assert relay.configure(bench.args("--timeout", "596h31m23s")) == BRIEF
    assert relay.opts["timeout"] == "596h31m23s"
    # 2,147,483 s: the last whole second under Node's 2**31 - 1 ms timer ceiling.
    assert adapter(key).watchdog_ms(relay.opts) == 2_147_483_000


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--bogus"], "relay: unknown option: --bogus\n"),
        (["--timeout"], "relay: --timeout requires a value\n"),
        (["--cd", "/nonexistent/dir"], "relay: --cd directory not found: /nonexistent/dir\n"),
    ],
)
@pytest.mark.parametrize("key", RELAYS)
def test_usage_errors(tmp_path, capfd, key, args, message):
    bench = Bench(tmp_path, key)
    assert bench.in_process(capfd, *args) == (2, "", message)
    assert not bench.out.exists()


@pytest.mark.parametrize("key", RELAYS)
def test_empty_brief_and_missing_brief(tmp_path, capfd, key):
    bench = Bench(tmp_path, key)
    bench.brief.write_text(" \n\ufeff\t")
    assert bench.in_process(capfd) == (
        2,
        "",
        "relay: empty brief (pass --brief <file> or pipe the brief on stdin)\n",
    )
    bench.brief.unlink()
    assert bench.in_process(capfd) == (2, "", f"relay: brief file not found: {bench.brief}\n")
    assert not bench.out.exists()


#: How each implementer is handed the brief, written out.
BRIEF_BY = {
    **dict.fromkeys(
        ["claude", "cline", "codex", "commandcode", "opencode", "cursor", "pi", "omp",
         "gemini", "qwen", "kilo"],
        "stdin",
    ),
    **dict.fromkeys(["agy", "kimi", "qoder", "vibe", "warp", "hermes"], "argv"),
    **dict.fromkeys(["grok", "aider", "zcode", "copilot", "auggie"], "file"),
    # dsh takes a task on argv only: the task names the brief's file.
    "dsh": "pointer",
}  # fmt: skip
#: The relays that call a run which exits 0 having printed nothing a failure (exit 1):
#: claude and cline as the Node relays do (no result event); agy, qoder and hermes by
#: this port's own stricter rules; gemini, qwen and auggie, which end every run they
#: finish with a result. Every other relay calls it a success.
SILENT_RUN_FAILS = ["claude", "cline", "agy", "qoder", "gemini", "qwen", "auggie", "hermes"]


@pytest.mark.parametrize("key", RELAYS)
def test_brief_from_stdin(tmp_path, key):
    bench = Bench(tmp_path, key)
    bench.script({})
    run = bench.relay(stdin="piped brief\n")
    assert run.code == (1 if key in SILENT_RUN_FAILS else 0), run
    brief_file = bench.out / adapter(key).brief_name
    assert brief_file.read_text() == "piped brief\n"
    call = bench.fake.run_call()
    if BRIEF_BY[key] == "stdin":
        assert call["stdin"] == "piped brief\n"
    elif BRIEF_BY[key] == "argv":
        assert any(arg.endswith("piped brief\n") for arg in call["argv"]), call["argv"]
    elif BRIEF_BY[key] == "pointer":
        assert call["argv"][-1] == f"Read the task brief at {brief_file} and execute it fully."
    else:
        assert any(arg.endswith(str(brief_file)) for arg in call["argv"]), call["argv"]


@pytest.mark.parametrize("key", RELAYS)
def test_help(tmp_path, capfd, key):
    bench = Bench(tmp_path, key)
    code, out, _err = bench.in_process(capfd, "--help")
    assert code == 0
    assert f"{key}-delegate" in out
    assert "--timeout <dur>" in out
    assert not bench.out.exists()


@pytest.mark.parametrize("key", RELAYS)
def test_version_preflight_hang_is_cut_by_the_timeout(tmp_path, key):
    bench = Bench(tmp_path, key)
    bench.script(version={"hang": True})
    started = time.monotonic()
    run = bench.relay("--timeout", "1s")
    assert run.code == 124, run
    assert time.monotonic() - started < 8
    result = run.result
    assert result["status"] == "timeout"
    assert "preflight timed out after 1000ms" in result["error"]
    assert result["error"].endswith("was not dispatched")
    assert bench.fake.calls("run") == []


@pytest.mark.parametrize("key", RELAYS)
def test_version_preflight_failure_is_reported(tmp_path, key):
    bench = Bench(tmp_path, key)
    bench.script(version={"stdout": "", "stderr": "fake version failure\n", "exit": 7})
    run = bench.relay("--timeout", "1m")
    assert run.code == 7, run
    result = run.result
    assert (result["status"], result["exitCode"]) == ("failed", 7)
    assert result["stderrTail"] == ["fake version failure"]
    assert "preflight failed with exit 7" in result["error"]
    assert bench.fake.calls("run") == []


def test_version_preflight_hang_is_cut_at_10s_without_a_timeout(tmp_path):
    bench = Bench(tmp_path, "codex")
    bench.script(version={"hang": True})
    started = time.monotonic()
    run = bench.relay()
    took = time.monotonic() - started
    assert run.code == 124, run
    assert 9.5 < took < 20
    assert "timed out after 10000ms" in run.result["error"]


@pytest.mark.parametrize("key", RELAYS)
def test_touched_files(tmp_path, key):
    bench = Bench(tmp_path, key)
    (bench.work / "tracked.txt").write_text("original\n")
    (bench.work / "other.txt").write_text("other\n")
    commit_all(bench.work)
    bench.script(
        {
            "actions": [
                {"write": ["edited.txt", "x"]},
                {"append": ["tracked.txt", "more\n"]},
                {"git": ["mv", "other.txt", "moved.txt"]},
            ]
        }
    )
    run = bench.relay()
    # `git status --porcelain` line for line: the leading space of " M" is kept.
    assert run.result["touchedFiles"] == [
        "R  other.txt -> moved.txt",
        " M tracked.txt",
        "?? edited.txt",
    ]
    # The skill texts name this field as the id to resume with.
    session_field = adapter(key).session_field
    assert not session_field or session_field in run.result
    bench.script({})
    git(bench.work, "reset", "-q", "--hard")
    (bench.work / "edited.txt").unlink()
    assert bench.relay().result["touchedFiles"] == []


@pytest.mark.parametrize("key", RELAYS)
def test_touched_files_is_null_outside_git(tmp_path, key):
    bench = Bench(tmp_path, key, repo=False)
    bench.script({})
    assert bench.relay().result["touchedFiles"] is None


@pytest.mark.parametrize("key", RELAYS)
def test_symlinked_artifacts_never_write_outside_the_out_dir(tmp_path, key):
    bench = Bench(tmp_path, key)
    outside = tmp_path / "outside"
    outside.mkdir()
    bench.out.mkdir()
    # An earlier relay run's directory: its artifacts are the relay's to replace.
    (bench.out / "run.json").write_text('{"schema": "delegate-run.v1"}\n')
    a = adapter(key)
    names = {"result.json", "final.txt", "stderr.txt", a.brief_name, a.events_name}
    for name in names:
        (bench.out / name).symlink_to(outside / name)
    bench.script({"actions": [{"stdout": '{"type":"text"}\n'}, {"stderr": "noise\n"}]})
    run = bench.relay()
    assert run.has_result, run
    assert list(outside.iterdir()) == []
    for name in ("result.json", a.brief_name):
        assert (bench.out / name).is_file() and not (bench.out / name).is_symlink()


@pytest.mark.parametrize("name", ["final.txt", "result.json"])
@pytest.mark.parametrize("key", ["claude", "grok", "codex", "aider"])
def test_an_out_dir_holding_a_users_file_is_refused(tmp_path, key, name):
    bench = Bench(tmp_path, key)
    elsewhere = tmp_path / "notes.txt"
    elsewhere.write_text("the user's own notes\n")
    bench.out.mkdir()
    (bench.out / name).symlink_to(elsewhere)
    bench.script({})
    run = bench.relay()
    assert run.code == 2, run
    assert run.err == (
        f"relay: --out-dir {bench.out} already holds {name}, which no relay run wrote; "
        f"move {bench.out / name} aside or choose a new --out-dir\n"
    )
    assert (bench.out / name).is_symlink()
    assert elsewhere.read_text() == "the user's own notes\n"
    assert sorted(p.name for p in bench.out.iterdir()) == [name]
    assert bench.fake.calls() == []


@pytest.mark.parametrize("key", RELAYS)
def test_result_is_never_seen_half_written(tmp_path, key):
    """An aborted run writes result.json, waits for its implementer, then writes it again.

    The implementer takes 0.3 s to stop, so the first result is there to read
    while the relay still runs; every read must be whole JSON.
    """
    bench = Bench(tmp_path, key)
    stopped = tmp_path / "stopped.txt"
    bench.script(
        {
            "on_term": {"delay": 0.3, "write": [str(stopped), "stopped\n"], "exit": 0},
            "actions": [{"pid_file": str(bench.pid_file("child.pid"))}, {"wait": "forever"}],
        }
    )
    proc = bench.start(env=bench.fake.env(DELEGATE_RELAY_ABORT_GRACE="20"))
    read_pid(bench.pid_file("child.pid"))
    proc.send_signal(signal.SIGTERM)
    path = bench.out / "result.json"
    seen = []
    while proc.poll() is None:
        if path.exists():
            seen.append(json.loads(path.read_text()))  # a half-written file would not parse
        time.sleep(0.002)
    finish(proc)
    assert seen, "result.json never appeared while the relay waited for the implementer"
    assert {(r["schema"], r["status"], r["signal"]) for r in seen} == {
        ("delegate-relay.result.v1", "aborted", "SIGTERM")
    }
    assert stopped.read_text() == "stopped\n"
    assert bench.result["status"] == "aborted"
    assert [p.name for p in bench.out.iterdir() if ".tmp" in p.name] == []


@pytest.mark.parametrize("key", RELAYS)
def test_lane_bound_to_another_implementer_names_its_skill(
    tmp_path, capfd, home, global_config, key
):
    other = "kimi" if key != "kimi" else "vibe"
    write_json(global_config, fleet_doc({"elsewhere": {"implementer": other}}))
    bench = Bench(tmp_path, key)
    code, _out, err = bench.in_process(capfd, "--lane", "elsewhere")
    assert code == 2
    assert (
        err
        == f'relay: fleet lane "elsewhere" → {other} (use {other}-delegate); this relay is {key}\n'
    )
    assert not bench.out.exists()


@pytest.mark.parametrize("key", RELAYS)
def test_untrusted_project_lane_is_refused(tmp_path, capfd, home, key):
    bench = Bench(tmp_path, key)
    lane = {"implementer": key, **({"model": "a/b"} if key == "opencode" else {})}
    write_json(bench.work / ".delegate" / "config.json", fleet_doc({"mine": lane}))
    code, _out, err = bench.in_process(capfd, "--lane", "mine")
    assert code == 2
    assert "project fleet config is not trusted" in err
    assert not bench.out.exists()


@pytest.mark.parametrize("key", RELAYS)
def test_approved_project_lane_is_recorded(tmp_path, home, key):
    bench = Bench(tmp_path, key)
    lane = {"implementer": key, "timeout": "5m", **({"model": "a/b"} if key == "opencode" else {})}
    source = write_json(tmp_path / "lanes.json", fleet_doc({"mine": lane}))
    assert (
        delegate(
            "config", "write", "--scope", "project", "--cwd", str(bench.work), str(source)
        ).code
        == 0
    )
    bench.script({})
    run = bench.relay("--lane", "mine")
    assert (run.result["lane"], run.result["laneSource"]) == ("mine", "project")


@pytest.mark.parametrize("key", RELAYS)
def test_every_adapter_loads(key):
    loaded = adapter(key)
    assert loaded.key == key
    assert loaded.version_field.endswith("Version")
    assert (ROOT / "skills" / f"{key}-delegate" / "scripts" / "relay.py").is_file()


@pytest.mark.parametrize("key", ALL_RELAYS)
def test_every_flag_table_is_the_written_one(key):
    """A flag that goes missing (or turns up unlisted) fails here; it never drops out."""
    table = adapter(key).flag_table()
    assert [flag.name for flag in table if flag.value] == VALUE_FLAGS[key]
    assert [flag.name for flag in table if not flag.value] == SWITCHES[key]


def test_the_written_tables_name_every_relay():
    assert sorted(RELAYS) == sorted(ALL_RELAYS)
    assert sorted(VALUE_FLAGS) == sorted(SWITCHES) == sorted(ALL_RELAYS)
    assert needs("--clean-env") == ["codex", "commandcode"]
    assert needs("--no-snapshot") == ["warp"]


def test_default_run_dir_is_private(tmp_path, monkeypatch):
    bench = Bench(tmp_path, "codex")
    bench.script({})
    env = bench.fake.env(TMPDIR=str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    from fakes import relay as run_relay

    run = run_relay(
        "codex", "--brief", str(bench.brief), "--cd", str(bench.work), env=env, out_dir=bench.out
    )
    assert run.code == 0, run
    line = next(line for line in run.out.splitlines() if line.startswith("result: "))
    run_dir = os.path.dirname(line[len("result: ") :])
    assert run_dir.startswith(str(tmp_path / "tmp" / "delegate-relay" / "work-"))
    assert os.stat(run_dir).st_mode & 0o777 == 0o700
    for name in ("brief.txt", "events.jsonl", "result.json"):
        assert os.stat(os.path.join(run_dir, name)).st_mode & 0o777 == 0o600


def _default_run(tmp_path, bench):
    from fakes import relay as run_relay

    env = bench.fake.env(TMPDIR=str(tmp_path / "tmp"))
    return run_relay(
        "codex", "--brief", str(bench.brief), "--cd", str(bench.work), env=env, out_dir=bench.out
    )


def test_the_shared_run_root_is_created_private(tmp_path):
    bench = Bench(tmp_path, "codex")
    bench.script({})
    (tmp_path / "tmp").mkdir()
    assert _default_run(tmp_path, bench).code == 0
    assert os.stat(tmp_path / "tmp" / "delegate-relay").st_mode & 0o777 == 0o700


def test_a_shared_run_root_left_open_is_made_private(tmp_path):
    bench = Bench(tmp_path, "codex")
    bench.script({})
    root = tmp_path / "tmp" / "delegate-relay"
    root.mkdir(parents=True)
    root.chmod(0o777)
    assert _default_run(tmp_path, bench).code == 0
    assert os.stat(root).st_mode & 0o777 == 0o700


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give the directory away")
def test_a_shared_run_root_owned_by_another_user_is_refused(tmp_path):
    bench = Bench(tmp_path, "codex")
    bench.script({})
    root = tmp_path / "tmp" / "delegate-relay"
    root.mkdir(parents=True)
    os.chown(root, 54321, 54321)
    run = _default_run(tmp_path, bench)
    assert run.code == 2, run
    assert run.err == (
        f"relay: cannot prepare run artifacts: {root} belongs to another user (uid 54321); "
        "remove it, or pass --out-dir\n"
    )
    assert list(root.iterdir()) == []
