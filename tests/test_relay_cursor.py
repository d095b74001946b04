"""cursor: --force/--no-force, plan mode, per-dispatch sandbox, resume, stream-json events."""

from __future__ import annotations

import json

import pytest
from conftest import fleet_doc, write_json
from relaykit import DETECT_ONLY, Bench, argv_of

HEAD = ["--print", "--output-format", "stream-json", "--trust"]
MODEL = "claude-opus-4-8[context=1m,effort=high,fast=false]"


def lines(*events: dict) -> str:
    return "".join(json.dumps(e) + "\n" for e in events)


def init(mode: str = "default") -> dict:
    return {
        "type": "system",
        "subtype": "init",
        "session_id": "cursor-session-1",
        "model": MODEL,
        "permissionMode": mode,
    }


def result_event(text: str = "fake cursor completed", is_error: bool = False) -> dict:
    return {
        "type": "result",
        "subtype": "success",
        "is_error": is_error,
        "session_id": "cursor-session-1",
        "result": text,
        "usage": {"input_tokens": 11, "output_tokens": 4},
    }


def scripted(*events: dict, exit: int = 0) -> dict:
    return {"actions": [{"stdout": lines(*events)}], "exit": exit}


@pytest.fixture
def bench(tmp_path, home):
    bench = Bench(tmp_path, "cursor")
    bench.script(scripted(init(), result_event()))
    return bench


def test_default_run(bench):
    run = bench.relay()
    assert (run.code, bench.fake.run_call()["argv"]) == (0, [*HEAD, "--force"]), run
    call = bench.fake.run_call()
    assert (call["stdin"], call["cwd"]) == ("smoke brief: run until killed.\n", str(bench.work))
    result = run.result
    assert (result["status"], result["tool"], result["force"], result["readOnly"]) == (
        "completed",
        "cursor-agent",
        True,
        False,
    )
    assert (result["sessionId"], result["resolvedModel"], result["permissionMode"]) == (
        "cursor-session-1",
        MODEL,
        "default",
    )
    assert result["usage"] == {"input_tokens": 11, "output_tokens": 4}
    assert result["finalMessage"] == "fake cursor completed"
    assert "readOnlyViolation" not in result
    assert f"model: {MODEL}  ·  permission mode: default" in run.out


def test_reference_success_argv_with_spaces(tmp_path, home):
    bench = Bench(tmp_path / "work success cursor", "cursor")
    bench.script(scripted(init(), result_event()))
    extra = tmp_path / "work success cursor" / "add dir"
    argv = argv_of(
        bench, "--session", "cursor-session-0", "--model", MODEL, "--add-dir", str(extra),
        "--no-force",
    )  # fmt: skip
    assert argv == [
        *HEAD, "--model", MODEL, "--resume", "cursor-session-0", "--add-dir", str(extra),
    ]  # fmt: skip
    result = bench.result
    assert (result["force"], result["sandbox"], result["resumed"]) == (False, None, True)


@pytest.mark.parametrize(
    ("flags", "tail"),
    [
        (["--force"], ["--force"]),
        (["--no-force"], []),
        (["--sandbox", "disabled"], ["--force", "--sandbox", "disabled"]),
        (["--sandbox", "enabled", "--no-force"], ["--sandbox", "enabled"]),
        (["--resume-last"], ["--force", "--continue"]),
        (["--model", "gpt-5"], ["--force", "--model", "gpt-5"]),
        (["--add-dir", "docs"], ["--force", "--add-dir", "{work}/docs"]),
    ],
)
def test_argv(bench, flags, tail):
    expected = [part.format(work=bench.work) for part in tail]
    assert argv_of(bench, *flags) == [*HEAD, *expected]


def test_read_only_plan_run(bench):
    bench.script(scripted(init("plan"), result_event("Reviewed.")))
    run = bench.relay("--read-only", "--sandbox", "enabled", "--resume-last")
    assert run.code == 0, run
    assert bench.fake.run_call()["argv"] == [
        *HEAD, "--mode", "plan", "--sandbox", "enabled", "--continue",
    ]  # fmt: skip
    result = run.result
    assert (result["readOnly"], result["force"], result["sandbox"]) == (True, False, "enabled")
    assert result["permissionMode"] == "plan"
    assert result["readOnlyViolation"] is False
    assert "mode: read-only (plan)" in run.out


def test_read_only_with_no_force_is_fine(bench):
    assert argv_of(bench, "--read-only", "--no-force") == [*HEAD, "--mode", "plan"]


def test_a_plan_run_that_writes_trips_the_wire(bench):
    script = scripted(init("plan"), result_event())
    script["actions"].append({"write": ["sneaky.txt", "x"]})
    bench.script(script)
    assert (
        bench.relay("--read-only", env=bench.fake.env(**DETECT_ONLY)).result["readOnlyViolation"]
        is True
    )


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--sandbox", ""], '--sandbox "" is invalid; expected enabled or disabled'),
        (["--sandbox", "off"], '--sandbox "off" is invalid; expected enabled or disabled'),
        (["--sandbox"], "--sandbox requires a value"),
        (
            ["--resume-last", "--session", "s1"],
            "--resume-last and --session are mutually exclusive; pass only one",
        ),
        (
            ["--read-only", "--force"],
            "--read-only and --force are mutually exclusive; pass only one",
        ),
        *[
            (
                ["--model", value],
                "--model contains unsupported characters "
                "(allowed: letters, digits, . _ : @ / [ ] , = -)",
            )
            for value in ("", "--help", "model & whoami")
        ],
        *[
            (
                ["--session", value],
                "--session contains unsupported characters (allowed: letters, digits, . _ : -)",
            )
            for value in ("", "--continue", "session & whoami")
        ],
    ],
)
def test_usage_errors(bench, flags, message):
    run = bench.relay(*flags)
    assert (run.code, run.err) == (2, f"relay: {message}\n")
    assert not bench.out.exists()


def test_sandbox_missing_value_fails_before_the_preflight(bench):
    bench.script(version={"hang": True})
    run = bench.relay("--sandbox")
    assert (run.code, run.err) == (2, "relay: --sandbox requires a value\n")
    assert bench.fake.calls() == []


def test_preflight_failure_keeps_the_sandbox_field(bench):
    bench.script(version={"hang": True})
    run = bench.relay("--timeout", "1s", "--sandbox", "enabled")
    assert run.code == 124
    assert (run.result["status"], run.result["sandbox"]) == ("timeout", "enabled")
    assert run.result["error"] == (
        "cursor-agent --version preflight timed out after 1000ms; Cursor was not dispatched"
    )


def test_missing_binary_is_cursor_agent_unavailable(bench):
    (bench.fake.bin / "cursor-agent").unlink()
    run = bench.relay()
    assert run.code == 127
    assert run.result["status"] == "cursor_agent_unavailable"
    started, missing = run.err.splitlines(keepends=True)
    assert started.startswith(f"relay: cursor-agent run started · {bench.out} · relay pid ")
    assert missing == (
        "relay: `cursor-agent` not found on PATH. Get Cursor's CLI "
        "(https://cursor.com/cli), then sign in: `cursor-agent login`.\n"
    )


def test_error_result_fails(bench):
    bench.script(scripted(init(), result_event("rate limited", is_error=True)))
    run = bench.relay()
    assert run.code == 1
    result = run.result
    assert (result["status"], result["finalMessage"]) == ("failed", "rate limited")
    assert result["error"] == (
        "cursor-agent reported an error result (is_error: true in its result event)"
    )


def test_blank_result_falls_back_to_assistant_text(bench):
    def said(text: str) -> dict:
        return {
            "type": "assistant",
            "message": {"role": "assistant", "content": [{"type": "text", "text": text}]},
            "session_id": "cursor-session-2",
        }

    bench.script(scripted(init(), said("Part one."), said("Part two."), result_event("  \n")))
    result = bench.relay().result
    assert result["finalMessage"] == "Part one.\n\nPart two."
    assert result["sessionId"] == "cursor-session-1"


def test_lane_dials_apply(bench, global_config):
    lane = {"implementer": "cursor", "model": MODEL, "force": False, "timeout": "5m"}
    write_json(global_config, fleet_doc({"feature": lane}))
    assert argv_of(bench, "--lane", "feature") == [*HEAD, "--model", MODEL]
    assert bench.result["force"] is False
    assert argv_of(bench, "--lane", "feature", "--force") == [*HEAD, "--force", "--model", MODEL]


def test_read_only_lane(bench, global_config):
    write_json(global_config, fleet_doc({"review": {"implementer": "cursor", "readOnly": True}}))
    assert argv_of(bench, "--lane", "review") == [*HEAD, "--mode", "plan"]
    assert argv_of(bench, "--lane", "review", "--no-force") == [*HEAD, "--mode", "plan"]
    # An explicit --force would widen the read-only lane: refused (Node lets the flag win).
    run = bench.relay("--lane", "review", "--force")
    assert run.code == 2
    assert "lane review is read-only, and --force would let" in run.err


def test_read_only_flag_beats_a_forcing_lane(bench, global_config):
    write_json(global_config, fleet_doc({"feature": {"implementer": "cursor", "force": True}}))
    assert argv_of(bench, "--lane", "feature", "--read-only") == [*HEAD, "--mode", "plan"]


def test_result_field_order(bench):
    bench.relay()
    assert list(bench.result) == [
        "schema", "lane", "laneSource", "tool", "workdir", "model", "readOnly", "force",
        "sandbox", "resumed", "cursorAgentVersion", "startedAt", "finishedAt", "briefPath",
        "finalPath", "eventsPath", "stderrPath", "status", "exitCode", "signal", "sessionId",
        "resolvedModel", "permissionMode", "usage", "finalMessage", "tokenUsage", "touchedFiles", "changes", "overlap", "relayRunId", "implementerArgv",
    ]  # fmt: skip
