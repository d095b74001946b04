"""omp: argv, yolo and read-only tools, project trust, thinking, resume, the event stream."""

from __future__ import annotations

import json

import pytest
from conftest import fleet_doc, write_json
from relaykit import Bench, argv_of

HEAD = ["--mode", "json"]
UNTRUSTED = ["--no-extensions", "--no-skills", "--no-rules"]


def lines(*events: dict) -> str:
    return "".join(json.dumps(event) + "\n" for event in events)


def assistant_end(content, **extra) -> dict:
    return {"type": "message_end", "message": {"role": "assistant", "content": content, **extra}}


SUCCESS = lines(
    {"type": "session", "version": 3, "id": "omp-session-1", "cwd": "/work"},
    {"type": "agent_start"},
    {"type": "message_start", "message": {"role": "assistant", "content": "draft"}},
    {"type": "message_end", "message": {"role": "user", "content": "the brief"}},
    assistant_end(
        [
            {"type": "thinking", "thinking": "hmm"},
            {"type": "text", "text": "fake omp completed"},
            {"type": "toolCall", "name": "read"},
        ],
        provider="google",
        model="fake-model",
        usage={"input": 7, "output": 2, "cacheRead": 1, "cacheWrite": 0, "totalTokens": 10},
        stopReason="stop",
    ),
    {"type": "agent_end", "isTerminal": True},
)


@pytest.fixture
def bench(tmp_path, home):
    bench = Bench(tmp_path, "omp")
    bench.script({"actions": [{"stdout": SUCCESS}]})
    return bench


def test_default_argv_stdin_and_cwd(bench):
    assert argv_of(bench) == [*HEAD, "--yolo", *UNTRUSTED]
    call = bench.fake.run_call()
    assert call["stdin"] == "smoke brief: run until killed.\n"
    assert call["cwd"] == str(bench.work)
    assert [c["argv"] for c in bench.fake.calls("version")] == [["--version"]]


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (["--approve"], [*HEAD, "--yolo"]),
        (["--read-only"], [*HEAD, "--tools", "read,grep,glob", *UNTRUSTED]),
        (["--read-only", "--approve"], [*HEAD, "--tools", "read,grep,glob"]),
        (["--provider", "google"], [*HEAD, "--provider", "google", "--yolo", *UNTRUSTED]),
        (["--model", "google/m-1"], [*HEAD, "--model", "google/m-1", "--yolo", *UNTRUSTED]),
        (["--thinking", "max"], [*HEAD, "--thinking", "max", "--yolo", *UNTRUSTED]),
        (
            ["--session", "omp-session-1"],
            [*HEAD, "--session", "omp-session-1", "--yolo", *UNTRUSTED],
        ),
        (["--resume-last"], [*HEAD, "--continue", "--yolo", *UNTRUSTED]),
        (
            [
                "--provider", "google", "--model", "google/fake-model", "--thinking", "high",
                "--read-only",
            ],
            [
                *HEAD, "--provider", "google", "--model", "google/fake-model",
                "--thinking", "high", "--tools", "read,grep,glob", *UNTRUSTED,
            ],
        ),
    ],
)  # fmt: skip
def test_argv_per_flag(bench, flags, expected):
    assert argv_of(bench, *flags) == expected


def test_success_run_fields(bench):
    run = bench.relay("--provider", "google", "--model", "google/fake-model", "--read-only")
    assert run.code == 0, run
    result = run.result
    assert result["status"] == "completed"
    assert result["sessionId"] == "omp-session-1"
    assert result["finalMessage"] == "fake omp completed"
    assert (result["readOnly"], result["yolo"], result["projectTrusted"]) == (True, False, False)
    assert (result["actualProvider"], result["actualModel"]) == ("google", "fake-model")
    assert (result["usage"]["input"], result["usage"]["output"]) == (7, 2)
    assert (result["stopReason"], result["resumed"]) == ("stop", False)
    assert result["readOnlyViolation"] is False
    assert (bench.out / "final.txt").read_text() == "fake omp completed"
    assert "mode: read-only (tools read,grep,glob)" in run.out
    assert "model: google/fake-model" in run.out
    assert "session id (resume with: --session omp-session-1): omp-session-1" in run.out


def test_write_run_and_approve_are_recorded(bench):
    run = bench.relay("--approve")
    assert (run.result["yolo"], run.result["projectTrusted"]) == (True, True)
    assert "mode: --yolo (tools.approvalMode yolo)" in run.out
    assert "mode: project resources trusted (--approve)" in run.out


@pytest.mark.parametrize("flags", [["--resume-last"], ["--session", "omp-session-1"]])
def test_resume_is_recorded(bench, flags):
    run = bench.relay(*flags)
    assert run.result["resumed"] is True
    assert "mode: resumed an existing session" in run.out


def test_every_assistant_message_joins_the_report(bench):
    stream = lines(
        {"type": "session", "id": "s-1"},
        assistant_end("First part.", provider="p1", model="m1"),
        assistant_end([{"type": "text", "text": "Second"}, {"type": "text", "text": "part."}]),
        {"type": "session", "id": "s-2"},
    )
    bench.script({"actions": [{"stdout": "\x1b[0m noise " + stream}]})
    result = bench.relay().result
    assert result["finalMessage"] == "First part.\n\nSecond\n\npart."
    assert result["sessionId"] == "s-2"
    assert (result["actualProvider"], result["actualModel"]) == ("p1", "m1")


def test_assistant_error_fails_an_exit_zero_run(bench):
    stream = lines(
        {"type": "session", "id": "omp-session-1"},
        assistant_end([], stopReason="error", errorMessage="fake provider failure"),
        assistant_end("later words", stopReason="error"),
    )
    bench.script({"actions": [{"stdout": stream}]})
    run = bench.relay()
    assert run.code == 1, run
    result = run.result
    assert (result["status"], result["exitCode"], result["stopReason"]) == ("failed", 1, "error")
    assert result["error"] == "fake provider failure"
    assert result["stderrTail"] == []


def test_assistant_error_on_a_nonzero_exit_is_kept(bench):
    stream = lines(assistant_end([], stopReason="error", errorMessage="getaddrinfo ENOTFOUND x"))
    bench.script({"actions": [{"stdout": stream}], "exit": 1})
    result = bench.relay().result
    assert (result["status"], result["exitCode"]) == ("failed", 1)
    assert result["error"] == "getaddrinfo ENOTFOUND x"


def test_aborted_stop_without_a_message(bench):
    bench.script({"actions": [{"stdout": lines(assistant_end("half", stopReason="aborted"))}]})
    result = bench.relay().result
    assert result["status"] == "failed"
    assert result["error"] == 'omp ended with stopReason "aborted"'


def test_plain_nonzero_exit_has_no_error_key(bench):
    bench.script(
        {"actions": [{"stderr": "No models available. Use /login or set an API key.\n"}], "exit": 1}
    )
    result = bench.relay().result
    assert (result["status"], result["exitCode"]) == ("failed", 1)
    assert "error" not in result
    assert result["stderrTail"] == ["No models available. Use /login or set an API key."]


def test_lane_effort_becomes_thinking_and_flags_win(bench, global_config):
    lane = {
        "implementer": "omp",
        "provider": "google",
        "model": "google/fake-model",
        "effort": "high",
    }
    write_json(global_config, fleet_doc({"feature": lane}))
    assert argv_of(bench, "--lane", "feature") == [
        *HEAD, "--provider", "google", "--model", "google/fake-model", "--thinking", "high",
        "--yolo", *UNTRUSTED,
    ]  # fmt: skip
    result = bench.result
    assert (result["lane"], result["laneSource"]) == ("feature", "global")
    assert (result["thinking"], result["model"]) == ("high", "google/fake-model")
    argv = argv_of(bench, "--lane", "feature", "--thinking", "low", "--provider", "anthropic")
    assert argv[argv.index("--thinking") + 1] == "low"
    assert argv[argv.index("--provider") + 1] == "anthropic"
    assert bench.result["thinking"] == "low"


def test_read_only_lane(bench, global_config):
    write_json(global_config, fleet_doc({"review": {"implementer": "omp", "readOnly": True}}))
    assert argv_of(bench, "--lane", "review") == [*HEAD, "--tools", "read,grep,glob", *UNTRUSTED]
    assert bench.result["readOnly"] is True


def test_unsafe_lane_value_is_a_usage_error(bench, global_config):
    write_json(
        global_config, fleet_doc({"odd": {"implementer": "omp", "provider": "google & whoami"}})
    )
    run = bench.relay("--lane", "odd")
    assert run.code == 2
    assert not bench.out.exists()


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ["--resume-last", "--session", "omp-session-1"],
            "--resume-last and --session are mutually exclusive; pass only one",
        ),
        (
            ["--provider", "google & whoami"],
            "--provider value contains unsupported characters (allowed: letters, digits, . _ : / -)",
        ),
        (
            ["--model", "-x"],
            "--model value contains unsupported characters (allowed: letters, digits, . _ : / -)",
        ),
        (
            ["--session", ""],
            "--session value contains unsupported characters (allowed: letters, digits, . _ : / -)",
        ),
        (
            ["--thinking", "inherit"],
            'invalid --thinking "inherit" (expected: off, auto, minimal, low, medium, high, '
            "xhigh, max)",
        ),
        (["--list-models"], "unknown option: --list-models"),
        (
            ["--timeout", "0s"],
            '--timeout "0s" is not a duration; use h/m/s strings like 30m, 90s, or 1h30m',
        ),
    ],
)
def test_usage_errors(bench, flags, message):
    run = bench.relay(*flags)
    assert (run.code, run.err) == (2, f"relay: {message}\n")
    assert not bench.out.exists()


def test_help_points_at_omp_models(bench):
    out = " ".join(bench.relay("--help").out.split())
    assert "`omp models`" in out
    assert "--list-models" in out
    assert " pi " not in out.replace("Oh My Pi", "")


def test_preflight_failure_names_the_probe(bench):
    bench.script(version={"stdout": "", "exit": 3})
    result = bench.relay().result
    assert result["error"] == "omp --version preflight failed with exit 3; omp was not dispatched"
    assert result["ompVersion"] is None


def test_version_is_stored_raw(bench):
    bench.script(version={"stdout": "omp/18.2.3\n"}, run={"actions": [{"stdout": SUCCESS}]})
    run = bench.relay()
    assert run.result["ompVersion"] == "omp/18.2.3"
    assert "·  omp/18.2.3\n" in run.out


def test_result_field_order(bench):
    bench.relay()
    assert list(bench.result) == [
        "schema", "lane", "laneSource", "tool", "workdir", "provider", "model", "thinking",
        "readOnly", "yolo", "projectTrusted", "resumed", "ompVersion", "startedAt", "finishedAt",
        "briefPath", "finalPath", "eventsPath", "stderrPath", "status", "exitCode", "signal",
        "sessionId", "actualProvider", "actualModel", "usage", "stopReason", "finalMessage",
        "tokenUsage", "touchedFiles", "changes", "overlap", "relayRunId", "implementerArgv",
    ]  # fmt: skip
    assert bench.result["tool"] == "omp"
