"""pi: argv, the read-only tool set, --approve, provider needs model, JSON events, stopReason failures."""

from __future__ import annotations

import json

import pytest
from conftest import commit_all, fleet_doc, write_json
from relaykit import BRIEF, DETECT_ONLY, Bench, argv_of


@pytest.fixture
def bench(tmp_path, home):
    bench = Bench(tmp_path, "pi")
    bench.script({})
    return bench


def events(*items: dict) -> str:
    return "".join(json.dumps(item) + "\n" for item in items)


USAGE = {
    "input": 7,
    "output": 2,
    "cacheRead": 1,
    "cacheWrite": 0,
    "totalTokens": 10,
    "cost": {"total": 0.001},
}


def assistant(text, stop="stop", **extra) -> dict:
    content = [{"type": "text", "text": text}] if isinstance(text, str) else text
    message = {
        "role": "assistant",
        "content": content,
        "api": "openai-completions",
        "provider": "google",
        "model": "fake-model",
        "usage": USAGE,
        "stopReason": stop,
        **extra,
    }
    return {"type": "message_end", "message": message}


def pi_stream(*messages: dict) -> str:
    return events(
        {"type": "session", "version": 3, "id": "pi-session-1", "cwd": "/w"},
        {"type": "agent_start"},
        {"type": "message_end", "message": {"role": "user", "content": [{"type": "text", "text": BRIEF}]}},
        *messages,
        {"type": "agent_end", "messages": []},
    )  # fmt: skip


def test_default_argv_and_stdin(bench):
    assert argv_of(bench) == ["--mode", "json", "--no-approve"]
    call = bench.fake.run_call()
    assert (call["stdin"], call["cwd"]) == (BRIEF, str(bench.work))
    assert [c["argv"] for c in bench.fake.calls("version")] == [["--version"]]


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (
            ["--provider", "google", "--model", "google/fake-model", "--read-only"],
            ["--provider", "google", "--model", "google/fake-model", "--no-approve", "--tools", "read,grep,find,ls"],
        ),
        (["--approve"], ["--approve"]),
        (["--model", "loop/fake-model"], ["--model", "loop/fake-model", "--no-approve"]),
        (["--resume-last"], ["--continue", "--no-approve"]),
        (["--session", "01a2280c-7e1f"], ["--session", "01a2280c-7e1f", "--no-approve"]),
        (
            ["--session", "s1", "--model", "m", "--approve", "--read-only"],
            ["--model", "m", "--session", "s1", "--approve", "--tools", "read,grep,find,ls"],
        ),
    ],
)  # fmt: skip
def test_each_flag(bench, flags, expected):
    assert argv_of(bench, *flags) == ["--mode", "json", *expected]


@pytest.mark.parametrize(
    ("lane", "flags", "expected"),
    [
        (
            {"provider": "google", "model": "google/lane-model", "readOnly": True},
            [],
            ["--provider", "google", "--model", "google/lane-model", "--no-approve", "--tools", "read,grep,find,ls"],
        ),
        (
            {"provider": "google", "model": "google/lane-model"},
            ["--provider", "loop", "--model", "loop/flag-model"],
            ["--provider", "loop", "--model", "loop/flag-model", "--no-approve"],
        ),
        ({"model": "lane/model", "timeout": "5m"}, ["--approve"], ["--model", "lane/model", "--approve"]),
    ],
)  # fmt: skip
def test_lane_dials_and_flags_win(bench, global_config, lane, flags, expected):
    write_json(global_config, fleet_doc({"work": {"implementer": "pi", **lane}}))
    assert argv_of(bench, "--lane", "work", *flags) == ["--mode", "json", *expected]
    assert bench.result["laneSource"] == "global"


SAFE = "contains unsupported characters (allowed: letters, digits, . _ : / -)"
PROVIDER_ALONE = (
    "--provider requires --model (pi 1.x refuses a provider alone); "
    "pass both, e.g. --provider google --model <pattern>"
)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ["--resume-last", "--session", "s"],
            "--resume-last and --session are mutually exclusive; pass only one",
        ),
        (["--provider", "google & whoami", "--model", "m"], f"--provider value {SAFE}"),
        (["--model", "google/*"], f"--model value {SAFE}"),
        (["--model", ""], f"--model value {SAFE}"),
        (["--session", "../x"], f"--session value {SAFE}"),
        (
            ["--timeout", "NONSENSE"],
            '--timeout "NONSENSE" is not a duration; use h/m/s strings like 30m, 90s, or 1h30m',
        ),
        (
            ["--timeout", "0s"],
            '--timeout "0s" is not a duration; use h/m/s strings like 30m, 90s, or 1h30m',
        ),
        # pi 1.6.0: `--provider google` alone exits 1 with
        # "Error: --provider requires --model …"; the relay refuses it up front.
        (["--provider", "google"], PROVIDER_ALONE),
        (["--provider", "google", "--resume-last"], PROVIDER_ALONE),
        (["--thinking", "high"], "unknown option: --thinking"),
    ],
)
def test_usage_errors(bench, flags, message):
    run = bench.relay(*flags)
    assert (run.code, run.err) == (2, f"relay: {message}\n")
    assert not bench.out.exists()


def test_a_lane_with_a_provider_and_no_model_is_refused(bench, global_config):
    write_json(global_config, fleet_doc({"work": {"implementer": "pi", "provider": "google"}}))
    run = bench.relay("--lane", "work")
    assert (run.code, run.err) == (2, f"relay: {PROVIDER_ALONE}\n")
    assert not bench.out.exists()


def test_session_report_and_metrics_from_the_events(bench):
    bench.script({"actions": [{"stdout": pi_stream(assistant("fake pi completed"))}]})
    run = bench.relay("--provider", "google", "--model", "google/fake-model", "--read-only")
    assert run.code == 0, run
    result = run.result
    assert result["status"] == "completed"
    assert result["sessionId"] == "pi-session-1"
    assert result["finalMessage"] == "fake pi completed"
    assert (result["readOnly"], result["projectTrusted"], result["resumed"]) == (True, False, False)
    assert (result["provider"], result["model"]) == ("google", "google/fake-model")
    assert (result["actualProvider"], result["actualModel"]) == ("google", "fake-model")
    assert result["usage"] == USAGE
    assert result["stopReason"] == "stop"
    assert result["readOnlyViolation"] is False
    for line in (
        "mode: read-only (tools read,grep,find,ls)",
        "model: google/fake-model",
        "session id (resume with: --session pi-session-1): pi-session-1",
    ):
        assert line in run.out


def test_every_assistant_text_is_kept_and_the_last_message_decides(bench):
    stream = pi_stream(
        assistant([{"type": "text", "text": "Step one."}, {"type": "toolCall", "name": "read"}], stop="toolUse"),
        assistant([{"type": "text", "text": "Done."}, {"type": "text", "text": ""}]),
    )  # fmt: skip
    bench.script({"actions": [{"stdout": stream}]})
    result = bench.relay().result
    assert result["finalMessage"] == "Step one.\n\nDone."
    assert (result["status"], result["stopReason"]) == ("completed", "stop")


@pytest.mark.parametrize(
    ("message", "error"),
    [
        (
            assistant("fake pi failed", stop="error", errorMessage="fake provider failure"),
            "fake provider failure",
        ),
        (assistant([], stop="aborted"), 'pi ended with stopReason "aborted"'),
    ],
)
def test_an_error_stop_fails_a_zero_exit(bench, message, error):
    bench.script({"actions": [{"stdout": pi_stream(message)}]})
    run = bench.relay()
    assert run.code == 1, run
    result = run.result
    assert (result["status"], result["exitCode"], result["error"]) == ("failed", 1, error)
    assert result["stopReason"] == message["message"]["stopReason"]
    assert result["stderrTail"] == []


def test_a_failed_retry_then_success_is_completed(bench):
    stream = pi_stream(
        assistant([], stop="error", errorMessage="Connection error."),
        assistant("recovered"),
    )
    bench.script({"actions": [{"stdout": stream}]})
    result = bench.relay().result
    assert (result["status"], result["finalMessage"]) == ("completed", "recovered")


def test_approve_and_resume_lines(bench):
    run = bench.relay("--approve", "--resume-last")
    assert (run.result["projectTrusted"], run.result["resumed"]) == (True, True)
    assert "mode: project resources trusted (--approve)" in run.out
    assert "mode: resumed an existing session" in run.out


def test_read_only_write_trips_the_wire(bench):
    (bench.work / "tracked.txt").write_text("x\n")
    commit_all(bench.work)
    bench.script({"actions": [{"append": ["tracked.txt", "more\n"]}]})
    run = bench.relay("--read-only", env=bench.fake.env(**DETECT_ONLY))
    assert run.result["readOnlyViolation"] is True
    assert "readOnlyViolation" not in bench.relay().result


def test_help_says_there_is_no_sandbox(bench):
    out = " ".join(bench.relay("--help").out.split())
    assert "neither a sandbox nor permission modes" in out
    assert "needs --model whenever --provider is given" in out


def test_result_field_order(bench):
    bench.relay()
    assert list(bench.result) == [
        "schema", "lane", "laneSource", "tool", "workdir", "provider", "model", "readOnly",
        "projectTrusted", "resumed", "piVersion", "startedAt", "finishedAt", "briefPath",
        "finalPath", "eventsPath", "stderrPath", "status", "exitCode", "signal", "sessionId",
        "actualProvider", "actualModel", "usage", "stopReason", "finalMessage", "touchedFiles", "changes", "overlap", "relayRunId", "implementerArgv",
    ]  # fmt: skip
