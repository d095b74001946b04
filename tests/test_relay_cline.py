"""cline: act/plan argv, the brief through a real pipe, run events, refused resume."""

from __future__ import annotations

import json
import sys

import pytest
from conftest import commit_all, fleet_doc, write_json
from fakes import SHIM_PYTHON
from relaykit import DETECT_ONLY, Bench, argv_of

PROMPT = "Follow the task instructions provided on stdin."
HEAD = ["--json", "-v", "--auto-approve"]


@pytest.fixture
def bench(tmp_path, home):
    bench = Bench(tmp_path, "cline")
    bench.script(completed_run())
    return bench


def lines(*events: dict) -> str:
    return "".join(json.dumps(e) + "\n" for e in events)


RUN_START = {
    "ts": 1,
    "type": "run_start",
    "providerId": "fake",
    "modelId": "fake-model",
    "catalog": "bundled",
    "thinking": "off",
    "mode": "act",
}


def run_result(reason: str = "completed", text: str = "fake cline completed") -> dict:
    return {
        "ts": 2,
        "type": "run_result",
        "finishReason": reason,
        "iterations": 1,
        "usage": {"inputTokens": 7, "outputTokens": 2},
        "durationMs": 42,
        "text": text,
        "model": {"id": "fake-model", "provider": "fake"},
    }


def completed_run(*extra: dict, exit: int = 0) -> dict:
    agent = {"type": "agent_event", "event": {"type": "text", "text": "working"}}
    events = lines(RUN_START, agent, run_result(), *extra)
    return {"actions": [{"stdout": events}], "exit": exit}


def test_default_run(bench):
    run = bench.relay()
    assert (run.code, bench.fake.run_call()["argv"]) == (0, [*HEAD, "true", PROMPT]), run
    call = bench.fake.run_call()
    assert call["stdin"] == "smoke brief: run until killed.\n"
    assert call["cwd"] == str(bench.work)
    result = run.result
    assert (result["status"], result["exitCode"], result["signal"]) == ("completed", 0, None)
    assert (result["planMode"], result["autoApprove"]) == (False, True)
    assert (result["actualProvider"], result["actualModel"]) == ("fake", "fake-model")
    assert (result["finishReason"], result["durationMs"]) == ("completed", 42)
    assert result["usage"] == {"inputTokens": 7, "outputTokens": 2}
    assert result["sessionId"] is None
    assert result["finalMessage"] == "fake cline completed"
    assert (bench.out / "final.txt").read_text() == "fake cline completed"
    assert result["clineVersion"] == "fake-cli 0.0.0"
    assert "readOnlyViolation" not in result
    assert "model: fake-model (provider: fake)" in run.out


def test_brief_reaches_cline_through_a_real_pipe(bench):
    # cline reads piped stdin only when fd 0 is a FIFO or a regular file.
    shim = bench.fake.bin / "cline"
    shim.write_text(
        f"#!{SHIM_PYTHON} -S\n"
        "import json, os, stat, sys\n"
        "if '--version' in sys.argv: print('3.0.65'); sys.exit(0)\n"
        "kind = 'fifo' if stat.S_ISFIFO(os.fstat(0).st_mode) else 'not a fifo'\n"
        "brief = sys.stdin.read()\n"
        "text = kind + ': ' + brief\n"
        "print(json.dumps({'type': 'run_result', 'finishReason': 'completed', 'text': text}))\n"
    )
    run = bench.relay(stdin="piped brief\n")
    assert run.code == 0, run
    assert run.result["finalMessage"] == "fifo: piped brief\n"
    assert run.result["clineVersion"] == "3.0.65"


@pytest.mark.parametrize(
    ("flags", "tail"),
    [
        (["--plan"], ["false", "--plan", PROMPT]),
        (["--plan", "--auto-approve", "false"], ["false", "--plan", PROMPT]),
        (["--auto-approve", "false"], ["false", PROMPT]),
        (["--provider", "fake"], ["true", "--provider", "fake", PROMPT]),
        (["--model", "provider-local-model"], ["true", "--model", "provider-local-model", PROMPT]),
        (
            ["--provider", "openrouter", "--model", "a/b:c", "--auto-approve", "false"],
            ["false", "--provider", "openrouter", "--model", "a/b:c", PROMPT],
        ),
        (["--timeout", "90s"], ["true", PROMPT]),
    ],
)
def test_argv(bench, flags, tail):
    argv = argv_of(bench, *flags)
    assert argv == [*HEAD, *tail]
    assert "-t" not in argv and "--timeout" not in argv and "--cwd" not in argv


def test_plan_run_records_modes_and_arms_the_tripwire(bench):
    (bench.work / "tracked.txt").write_text("x\n")
    commit_all(bench.work)
    run = bench.relay("--plan")
    assert run.code == 0, run
    result = run.result
    assert (result["planMode"], result["autoApprove"]) == (True, False)
    assert result["readOnlyViolation"] is False
    assert "mode: plan-only (analysis, no edits)" in run.out


def test_a_plan_run_that_writes_trips_the_wire(bench):
    script = completed_run()
    script["actions"].append({"write": ["sneaky.txt", "x"]})
    bench.script(script)
    assert (
        bench.relay("--plan", env=bench.fake.env(**DETECT_ONLY)).result["readOnlyViolation"] is True
    )


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ["--plan", "--auto-approve", "true"],
            "--plan conflicts with --auto-approve true; plan mode requires auto-approve "
            "false to prevent a switch to act mode",
        ),
        (["--auto-approve", "yes"], "--auto-approve must be true or false"),
        (["--auto-approve", ""], "--auto-approve must be true or false"),
        (["--session", "cline-session-9"], "unknown option: --session"),
        (["--resume-last"], "unknown option: --resume-last"),
        (
            ["--provider", "fake & whoami"],
            "--provider value contains unsupported characters "
            "(allowed: letters, digits, . _ : / -)",
        ),
        (
            ["--model", "-m"],
            "--model value contains unsupported characters (allowed: letters, digits, . _ : / -)",
        ),
        (
            ["--timeout", "10"],
            '--timeout "10" is not a positive schedulable duration; use h/m/s strings like '
            "30m, 90s, or 1h30m (maximum ~24.8 days)",
        ),
        (["--provider"], "--provider requires a value"),
        (["--id", "x"], "unknown option: --id"),
    ],
)
def test_usage_errors(bench, flags, message):
    run = bench.relay(*flags)
    assert (run.code, run.err) == (2, f"relay: {message}\n")
    assert not bench.out.exists()


def test_error_finish_reason_fails(bench):
    bench.script({"actions": [{"stdout": lines(RUN_START, run_result("error", "boom"))}]})
    run = bench.relay()
    assert run.code == 1, run
    result = run.result
    assert (result["status"], result["exitCode"]) == ("failed", 1)
    assert result["finishReason"] == "error"
    assert result["error"] == 'cline ended with finishReason "error"'
    assert result["finalMessage"] == "boom"


def test_real_error_then_run_aborted_keeps_the_error_reason(bench):
    # cline 3.0.65 sends run_aborted right after a failing run_result.
    failed = run_result("error", 'Unknown or disabled provider "fake".')
    aborted = {"type": "run_aborted", "reason": "local_abort"}
    bench.script({"actions": [{"stdout": lines(RUN_START, failed, aborted)}], "exit": 1})
    run = bench.relay()
    assert run.code == 1
    assert run.result["finishReason"] == "error"


def test_abort_event_without_a_result_fails_as_aborted(bench):
    bench.script({"actions": [{"stdout": lines(RUN_START, {"type": "run_abort_requested"})}]})
    run = bench.relay()
    assert (run.code, run.result["finishReason"]) == (1, "aborted")
    assert run.result["error"] == 'cline ended with finishReason "aborted"'


def test_exit_zero_without_a_run_result_fails(bench):
    bench.script({"actions": [{"stdout": lines(RUN_START)}]})
    run = bench.relay()
    assert run.code == 1, run
    assert run.result["status"] == "failed"
    assert run.result["finishReason"] is None
    assert run.result["error"] == (
        "cline exited without a run_result event; inspect events.jsonl and stderr.txt"
    )


def test_session_id_and_model_fallbacks(bench):
    start = {"type": "run_start", "sessionId": "sess-1", "model": "m-1", "provider": "p-1"}
    result_event = {**run_result(), "model": "m-2"}
    bench.script({"actions": [{"stdout": lines(start, result_event)}]})
    run = bench.relay()
    result = run.result
    assert (result["sessionId"], result["actualModel"], result["actualProvider"]) == (
        "sess-1",
        "m-2",
        "p-1",
    )
    assert "session id: sess-1" in run.out


def test_final_message_is_kept_untrimmed(bench):
    bench.script({"actions": [{"stdout": lines(run_result(text="  done\n"))}]})
    assert bench.relay().result["finalMessage"] == "  done\n"


def test_stderr_is_kept_in_full(bench):
    script = completed_run()
    script["actions"].append({"stderr": '{"type":"error","message":"noise"}\n'})
    bench.script(script)
    run = bench.relay()
    assert (bench.out / "stderr.txt").read_text() == '{"type":"error","message":"noise"}\n'
    assert run.result["stderrPath"] == str(bench.out / "stderr.txt")


def test_lane_dials_apply_and_flags_win(bench, global_config):
    lane = {"implementer": "cline", "provider": "lane-p", "model": "lane-m", "timeout": "5m"}
    write_json(global_config, fleet_doc({"feature": lane}))
    assert argv_of(bench, "--lane", "feature") == [
        *HEAD, "true", "--provider", "lane-p", "--model", "lane-m", PROMPT,
    ]  # fmt: skip
    assert (bench.result["lane"], bench.result["laneSource"]) == ("feature", "global")
    argv = argv_of(bench, "--lane", "feature", "--model", "flag-m", "--provider", "flag-p")
    assert argv == [*HEAD, "true", "--provider", "flag-p", "--model", "flag-m", PROMPT]


def test_result_field_order(bench):
    bench.relay()
    assert list(bench.result) == [
        "schema", "lane", "laneSource", "tool", "workdir", "provider", "model", "planMode",
        "autoApprove", "clineVersion", "startedAt", "finishedAt", "briefPath", "finalPath",
        "eventsPath", "stderrPath", "status", "exitCode", "signal", "sessionId",
        "actualProvider", "actualModel", "usage", "finishReason", "durationMs", "finalMessage",
        "tokenUsage", "touchedFiles", "changes", "overlap", "relayRunId", "implementerArgv",
    ]  # fmt: skip


def test_failed_result_field_order(bench):
    bench.script({"actions": [{"stdout": lines(run_result("error"))}]})
    bench.relay("--plan", env=bench.fake.env(**DETECT_ONLY))
    assert tail_from(bench.result, "finalMessage") == [
        "finalMessage", "tokenUsage", "touchedFiles", "changes", "overlap", "relayRunId", "implementerArgv", "confined", "confinedUnavailable",
        "readOnlyViolation", "readOnlyEnforced", "readOnlyUnenforced", "stderrTail", "error",
    ]  # fmt: skip


def test_help_says_resume_is_refused(bench):
    run = bench.relay("--help")
    assert run.code == 0
    assert "cannot resume a session" in run.out
    assert "--auto-approve <bool>" in run.out


def test_a_hub_daemon_left_running_is_named(bench, home):
    """Cline 3's hub outlives runs by design: the result and summary name it."""
    import json as _json
    import subprocess

    hub = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(600)", "--cline-hub-daemon", "--port", "1"],
        stdin=subprocess.DEVNULL,
    )
    try:
        record = home / ".cline" / "data" / "locks" / "hub" / "production.json"
        record.parent.mkdir(parents=True)
        url = "ws://127.0.0.1:25463/hub"
        record.write_text(_json.dumps({"pid": hub.pid, "url": url, "authToken": "x"}))
        run = bench.relay()
        assert run.code == 0, run
        assert run.result["hubDaemon"] == {"pid": hub.pid, "url": url}
        assert (
            f"cline hub daemon still running by design (pid {hub.pid}, {url}); "
            "stop it with: cline hub stop"
        ) in run.out
    finally:
        hub.kill()
        hub.wait()


def test_no_hub_field_without_a_live_hub(bench, home):
    record = home / ".cline" / "data" / "locks" / "hub" / "production.json"
    record.parent.mkdir(parents=True)
    record.write_text('{"pid": 1, "url": "ws://x"}')  # pid 1 is not a hub
    run = bench.relay()
    assert run.code == 0, run
    assert "hubDaemon" not in run.result
    assert "hub daemon" not in run.out


def tail_from(result: dict, first: str) -> list:
    """The result's field names from `first` on (what these tests pin)."""
    keys = list(result)
    return keys[keys.index(first) :]
