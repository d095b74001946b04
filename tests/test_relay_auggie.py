"""auggie: the brief as an instruction file, --ask plus deny rules, one JSON result."""

from __future__ import annotations

import json
import subprocess

import pytest
from conftest import fleet_doc, write_json
from relaykit import DETECT_ONLY, Bench, argv_of

BRIEF = "smoke brief: run until killed.\n"
SESSION = "3f6c2a9e-8d41-4b7a-9c1e-5a2b7d0e4f18"
#: What a read-only run adds: ask mode, and a deny rule for every auggie 0.36.0 tool
#: that writes files (save-file, str-replace-editor, apply_patch, remove-files) or
#: starts, drives or kills a process (launch-process, write-process, kill-process).
READ_ONLY = [
    "--ask",
    "--permission", "save-file:deny",
    "--permission", "str-replace-editor:deny",
    "--permission", "apply_patch:deny",
    "--permission", "remove-files:deny",
    "--permission", "launch-process:deny",
    "--permission", "write-process:deny",
    "--permission", "kill-process:deny",
]  # fmt: skip


def result_line(**fields) -> str:
    """The one line `auggie --print --output-format json` prints at the end (0.36.0's shape)."""
    base = {
        "type": "result",
        "result": "Done: fixed the parser and added a test.",
        "is_error": False,
        "subtype": "success",
        "session_id": SESSION,
        "num_turns": 3,
        "request_id": "51df3bc5-ba53-4309-b9a5-72c1f7fb9ec8",
    }
    return json.dumps({**base, **fields}) + "\n"


def scripted(*chunks: str, exit: int = 0, stderr: str = "") -> dict:
    actions = [{"stderr": stderr}] if stderr else []
    return {"actions": [*actions, {"stdout": "".join(chunks)}], "exit": exit}


@pytest.fixture
def bench(tmp_path, home):
    bench = Bench(tmp_path, "auggie")
    bench.script(scripted(result_line()))
    return bench


def head(bench) -> list[str]:
    return [
        "--print",
        "--output-format",
        "json",
        "--instruction-file",
        str(bench.out / "brief.txt"),
    ]


def git_blob_id(text: str) -> str:
    done = subprocess.run(
        ["git", "hash-object", "--stdin"], input=text, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


# ---------------------------------------------------------------- argv and the brief


def test_a_plain_write_run(bench):
    run = bench.relay()
    assert run.code == 0, run
    call = bench.fake.run_call()
    assert call["argv"] == [
        "--print", "--output-format", "json", "--instruction-file", str(bench.out / "brief.txt"),
    ]  # fmt: skip
    assert (call["stdin"], call["cwd"]) == ("", str(bench.work))
    result = run.result
    assert (result["status"], result["exitCode"], result["signal"]) == ("completed", 0, None)
    assert (result["readOnly"], result["resumed"], result["model"]) == (False, False, None)
    assert (result["maxTurns"], result["permissions"]) == (None, [])
    assert result["sessionId"] == SESSION
    assert result["finalMessage"] == "Done: fixed the parser and added a test."
    assert (bench.out / "final.txt").read_text() == "Done: fixed the parser and added a test."
    assert (result["resultSubtype"], result["numTurns"]) == ("success", 3)
    assert (result["tool"], result["auggieVersion"]) == ("auggie", "fake-cli 0.0.0")
    assert result["briefPath"] == str(bench.out / "brief.txt")
    assert "readOnlyViolation" not in result
    assert "error" not in result
    assert "tools: every tool, shell included" in run.out
    assert f"session id (resume with: --session {SESSION}): {SESSION}" in run.out


def test_the_brief_is_in_the_instruction_file_while_auggie_runs(bench):
    brief = "--help me\nfix the parser, then -p it\n"
    bench.brief.write_text(brief)
    path = str(bench.out / "brief.txt")
    # The fake stores what the file holds at that moment in the work repo's object store.
    script = scripted(result_line())
    script["actions"].insert(0, {"git": ["hash-object", "-w", path]})
    bench.script(script)
    assert argv_of(bench)[-2:] == ["--instruction-file", path]
    assert bench.fake.run_call()["stdin"] == ""
    blob = subprocess.run(
        ["git", "-C", str(bench.work), "cat-file", "-p", git_blob_id(brief)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert blob.stdout == brief
    assert (bench.out / "brief.txt").read_text() == brief


@pytest.mark.parametrize(
    ("flags", "tail"),
    [
        (["--read-only"], READ_ONLY),
        (["--model", "sonnet4.5"], ["--model", "sonnet4.5"]),
        (["--session", SESSION], ["--resume", SESSION]),
        (["--session", "3f6c2a9e"], ["--resume", "3f6c2a9e"]),
        (["--resume-last"], ["--continue"]),
        (["--max-turns", "12"], ["--max-turns", "12"]),
        (["--permission", "launch-process:allow"], ["--permission", "launch-process:allow"]),
        (
            ["--permission", "web-fetch:deny", "--permission", "view:ask-user"],
            ["--permission", "web-fetch:deny", "--permission", "view:ask-user"],
        ),
        (["--timeout", "5m"], []),
        (
            ["--read-only", "--resume-last", "--model", "m1"],
            ["--model", "m1", "--continue", *READ_ONLY],
        ),
    ],
)
def test_argv(bench, flags, tail):
    assert argv_of(bench, *flags) == [*head(bench), *tail]


def test_every_flag_at_once(bench):
    argv = argv_of(
        bench, "--read-only", "--permission", "web-fetch:deny", "--max-turns", "7",
        "--session", SESSION, "--model", "m1",
    )  # fmt: skip
    assert argv == [
        *head(bench), "--model", "m1", "--resume", SESSION, "--max-turns", "7",
        "--permission", "web-fetch:deny", *READ_ONLY,
    ]  # fmt: skip
    result = bench.result
    assert (result["readOnly"], result["resumed"], result["model"]) == (True, True, "m1")
    assert (result["maxTurns"], result["permissions"]) == (7, ["web-fetch:deny"])


def test_a_resumed_run_says_so(bench):
    run = bench.relay("--session", SESSION)
    assert run.code == 0, run
    assert run.result["resumed"] is True
    assert "mode: resumed an existing session" in run.out


# ---------------------------------------------------------------- lanes


def test_a_read_only_lane_takes_the_read_only_route(bench, global_config):
    write_json(global_config, fleet_doc({"review": {"implementer": "auggie", "readOnly": True}}))
    assert argv_of(bench, "--lane", "review") == [*head(bench), *READ_ONLY]
    result = bench.result
    assert (result["lane"], result["readOnly"], result["readOnlyViolation"]) == (
        "review",
        True,
        False,
    )


def test_lane_dials_apply_and_flags_win(bench, global_config):
    lane = {"implementer": "auggie", "model": "lane-model", "readOnly": True, "timeout": "5m"}
    write_json(global_config, fleet_doc({"review": lane}))
    assert argv_of(bench, "--lane", "review") == [*head(bench), "--model", "lane-model", *READ_ONLY]
    argv = argv_of(bench, "--lane", "review", "--model", "flag-model")
    assert argv == [*head(bench), "--model", "flag-model", *READ_ONLY]


def test_a_read_only_flag_beats_a_write_lane(bench, global_config):
    write_json(global_config, fleet_doc({"feature": {"implementer": "auggie", "readOnly": False}}))
    assert argv_of(bench, "--lane", "feature", "--read-only") == [*head(bench), *READ_ONLY]
    assert bench.result["readOnly"] is True


def test_a_lane_permission_mode_is_refused(bench, global_config):
    lane = {"implementer": "auggie", "permissionMode": "yolo"}
    write_json(global_config, fleet_doc({"fast": lane}))
    run = bench.relay("--lane", "fast")
    assert run.code == 2, run
    assert "auggie does not support permissionMode" in run.err
    assert not bench.out.exists()


# ---------------------------------------------------------------- refusals


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ["--resume-last", "--session", SESSION],
            "--resume-last and --session are mutually exclusive; pass only one",
        ),
        (
            ["--model", "sonnet 4.5"],
            "--model contains unsupported characters (allowed: letters, digits, . _ : / -)",
        ),
        (
            ["--session", "a b"],
            "--session contains unsupported characters (allowed: letters, digits, . _ : -)",
        ),
        (["--max-turns", "0"], "--max-turns must be a positive integer"),
        (["--max-turns", "012"], "--max-turns must be a positive integer"),
        (["--max-turns", "1.5"], "--max-turns must be a positive integer"),
        (["--max-turns", "ten"], "--max-turns must be a positive integer"),
        (
            ["--permission", "save-file"],
            'invalid --permission "save-file" (expected <tool>:allow, <tool>:deny or '
            "<tool>:ask-user)",
        ),
        (
            ["--permission", "save-file:block"],
            'invalid --permission "save-file:block" (expected <tool>:allow, <tool>:deny or '
            "<tool>:ask-user)",
        ),
        (
            ["--permission", "view:allow", "--permission", "launch-process:allow;rm"],
            'invalid --permission "launch-process:allow;rm" (expected <tool>:allow, '
            "<tool>:deny or <tool>:ask-user)",
        ),
        (
            ["--permission", ":deny"],
            'invalid --permission ":deny" (expected <tool>:allow, <tool>:deny or <tool>:ask-user)',
        ),
        (["--max-turns"], "--max-turns requires a value"),
        (["--approval-mode", "yolo"], "unknown option: --approval-mode"),
        (["--add-dir", "../docs"], "unknown option: --add-dir"),
    ],
)
def test_usage_errors(bench, flags, message):
    run = bench.relay(*flags)
    assert (run.code, run.err, run.out) == (2, f"relay: {message}\n", "")
    assert not bench.out.exists()
    assert bench.fake.calls() == []


# ---------------------------------------------------------------- reading the result


def test_an_error_result_fails(bench):
    bench.script(
        scripted(result_line(is_error=True, subtype="error_max_turns", result="Ran out of turns."))
    )
    run = bench.relay("--max-turns", "2")
    assert run.code == 1, run
    result = run.result
    assert (result["status"], result["exitCode"]) == ("failed", 1)
    assert result["error"] == "auggie ended with an error result (error_max_turns)"
    assert (result["resultSubtype"], result["finalMessage"]) == (
        "error_max_turns",
        "Ran out of turns.",
    )
    assert result["maxTurns"] == 2


def test_an_error_result_without_a_subtype(bench):
    line = json.dumps({"type": "result", "result": "", "is_error": True, "session_id": SESSION})
    bench.script(scripted(line + "\n"))
    run = bench.relay()
    assert (run.code, run.result["error"]) == (1, "auggie ended with an error result (error)")
    assert run.result["resultSubtype"] is None


def test_an_error_during_execution_with_a_non_zero_exit(bench):
    bench.script(scripted(result_line(is_error=True, subtype="error_during_execution"), exit=1))
    run = bench.relay()
    assert run.code == 1, run
    assert run.result["error"] == "auggie ended with an error result (error_during_execution)"


def test_a_fatal_error_prints_no_json_and_fails(bench):
    stderr = (
        "\u274c No auth provided. Please log in with `auggie login` or set the "
        "AUGMENT_SESSION_AUTH environment variable.\n"
        "\u274c Failed to initialize API connection\n"
    )
    bench.script(scripted(exit=1, stderr=stderr))
    run = bench.relay()
    assert run.code == 1, run
    result = run.result
    assert (result["status"], result["exitCode"]) == ("failed", 1)
    assert (result["sessionId"], result["finalMessage"]) == (None, "")
    assert (result["resultSubtype"], result["numTurns"]) == (None, None)
    assert result["stderrTail"][0].startswith("\u274c No auth provided.")
    assert (bench.out / "stderr.txt").read_text() == stderr


def test_exit_zero_without_a_json_result_fails(bench):
    bench.script(scripted("Hello, I edited the file.\n"))
    run = bench.relay()
    assert run.code == 1, run
    result = run.result
    assert (result["status"], result["exitCode"]) == ("failed", 1)
    assert result["error"] == (
        "auggie exited without a result event; inspect events.jsonl and stderr.txt"
    )


def test_other_json_objects_are_not_the_result(bench):
    bench.script(scripted('{"type":"warning","message":"x","session_id":"nope"}\n'))
    run = bench.relay()
    assert run.code == 1, run
    assert run.result["sessionId"] is None


def test_num_turns_must_be_a_number(bench):
    bench.script(scripted(result_line(num_turns=True)))
    assert bench.relay().result["numTurns"] is None
    bench.script(scripted(result_line(num_turns="3")))
    assert bench.relay().result["numTurns"] is None


def test_billing_and_retry_stats_do_not_disturb_the_result(bench):
    line = result_line(
        billing={"usage_unit": "credits", "total_cost": 12, "parent_cost": 12, "sub_agent_cost": 0},
        retry_stats={"total_retries": 1, "total_backoff_ms": 500, "events": []},
    )
    bench.script(scripted(line))
    run = bench.relay()
    assert (run.code, run.result["status"]) == (0, "completed"), run
    assert (bench.out / "events.jsonl").read_text() == line


# ---------------------------------------------------------------- the read-only tripwire


def test_a_read_only_run_that_changes_nothing(bench):
    run = bench.relay("--read-only")
    assert run.code == 0, run
    assert (run.result["readOnly"], run.result["readOnlyViolation"]) == (True, False)
    assert "tools: read-only (--ask, write and process tools denied)" in run.out


def test_a_read_only_run_that_writes_trips_the_wire(bench):
    script = scripted(result_line())
    script["actions"].append({"write": ["hello.txt", "hi\n"]})
    bench.script(script)
    result = bench.relay("--read-only", env=bench.fake.env(**DETECT_ONLY)).result
    assert result["readOnlyViolation"] is True
    assert result["touchedFiles"] == ["?? hello.txt"]
