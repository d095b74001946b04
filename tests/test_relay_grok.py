"""grok: autonomy argv, the prompt file, lanes, streaming JSON, self-cancelled runs, fallback probe."""

from __future__ import annotations

import json

import pytest
from conftest import commit_all, fleet_doc, write_json
from relaykit import DETECT_ONLY, Bench, argv_of


@pytest.fixture
def bench(tmp_path, home):
    bench = Bench(tmp_path, "grok")
    bench.script({})
    return bench


def head(bench) -> list[str]:
    return [
        "--no-auto-update", "--no-alt-screen", "--output-format", "streaming-json",
        "--cwd", str(bench.work),
    ]  # fmt: skip


def prompt(bench) -> list[str]:
    return ["--prompt-file", str(bench.out / "brief.txt")]


WORKSPACE = ["--always-approve", "--sandbox", "workspace"]
READ_ONLY = ["--sandbox", "read-only", "--permission-mode", "plan"]
FULL = ["--always-approve", "--sandbox", "off"]


def events(*items: dict) -> str:
    return "".join(json.dumps(item) + "\n" for item in items)


def test_default_argv_prompt_file_and_cwd(bench):
    assert argv_of(bench) == [*head(bench), *WORKSPACE, *prompt(bench)]
    call = bench.fake.run_call()
    assert call["stdin"] == ""
    assert call["cwd"] == str(bench.work)
    assert (bench.out / "brief.txt").read_text() == "smoke brief: run until killed.\n"
    assert [c["argv"] for c in bench.fake.calls("version")] == [["version"]]


@pytest.mark.parametrize(
    ("flags", "middle"),
    [
        (["--read-only"], READ_ONLY),
        (["--full-access"], FULL),
        (["--read-only", "--full-access"], FULL),
        (["--full-access", "--read-only"], READ_ONLY),
        (["--model", "grok-code-fast-1"], [*WORKSPACE, "--model", "grok-code-fast-1"]),
        (["--effort", "high"], [*WORKSPACE, "--effort", "high"]),
        (["--max-turns", "3"], [*WORKSPACE, "--max-turns", "3"]),
        (["--resume-last"], ["--continue", *WORKSPACE]),
        (["--session", "abc123"], ["--resume", "abc123", *WORKSPACE]),
        (["--session", "abc123", "--read-only"], ["--resume", "abc123", *READ_ONLY]),
        (
            ["--max-turns", "3", "--effort", "low", "--model", "m", "--full-access"],
            [*FULL, "--model", "m", "--effort", "low", "--max-turns", "3"],
        ),
    ],
)
def test_each_flag(bench, flags, middle):
    assert argv_of(bench, *flags) == [*head(bench), *middle, *prompt(bench)]


def test_a_read_only_lane_refuses_full_access(bench, global_config):
    """Node lets --full-access win over a read-only lane; ours refuses it."""
    write_json(global_config, fleet_doc({"work": {"implementer": "grok", "readOnly": True}}))
    run = bench.relay("--lane", "work", "--full-access")
    assert run.code == 2
    assert "lane work is read-only, and --full-access would let" in run.err


@pytest.mark.parametrize(
    ("lane", "flags", "middle", "autonomy"),
    [
        ({"readOnly": True}, [], READ_ONLY, "read-only"),
        ({"sandbox": "off"}, [], FULL, "full-access"),
        ({"sandbox": "workspace"}, [], WORKSPACE, "workspace-write"),
        ({"sandbox": "off"}, ["--read-only"], READ_ONLY, "read-only"),
        (
            {"model": "lane-model", "effort": "low"},
            ["--model", "flag-model"],
            [*WORKSPACE, "--model", "flag-model", "--effort", "low"],
            "workspace-write",
        ),
    ],
)
def test_lane_dials_and_flags_win(bench, global_config, lane, flags, middle, autonomy):
    write_json(global_config, fleet_doc({"work": {"implementer": "grok", **lane}}))
    assert argv_of(bench, "--lane", "work", *flags) == [*head(bench), *middle, *prompt(bench)]
    result = bench.result
    assert (result["lane"], result["laneSource"], result["autonomy"]) == (
        "work",
        "global",
        autonomy,
    )


SAFE = "contains unsupported characters (allowed: letters, digits, . _ : / -)"


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ["--resume-last", "--session", "abc"],
            "--resume-last and --session are mutually exclusive",
        ),
        (["--model", "grok & whoami"], f"--model value {SAFE}"),
        (["--model", ""], f"--model value {SAFE}"),
        (["--effort", "-high"], f"--effort value {SAFE}"),
        (["--session", "a b"], f"--session value {SAFE}"),
        (["--max-turns", "0"], "--max-turns must be a positive integer"),
        (["--max-turns", "three"], "--max-turns must be a positive integer"),
        (
            ["--timeout", "soon"],
            '--timeout "soon" is invalid or too long; use a positive h/m/s duration no longer than about 24 days',
        ),
        (["--sandbox", "off"], "unknown option: --sandbox"),
    ],
)
def test_usage_errors(bench, flags, message):
    run = bench.relay(*flags)
    assert (run.code, run.err) == (2, f"relay: {message}\n")
    assert not bench.out.exists()


def test_session_final_message_and_usage_from_the_stream(bench):
    usage = {"input_tokens": 120, "output_tokens": 30, "total_tokens": 150}
    stream = events(
        {"type": "available_commands", "tools": ["read", "write"], "commands": []},
        {"type": "thought", "data": "thinking out loud"},
        {"type": "text", "data": "Edited "},
        {"type": "tool_call", "toolCallId": "t1", "title": "write"},
        {"type": "text", "data": "two files."},
        {
            "type": "usage",
            "messageId": "m1",
            "stopReason": "end_turn",
            "usage": {"input_tokens": 1},
        },
        {"type": "end", "stopReason": "end_turn", "sessionId": "grok-session-1", "usage": usage},
    )
    bench.script({"actions": [{"stdout": stream}]})
    run = bench.relay()
    assert run.code == 0, run
    result = run.result
    assert result["status"] == "completed"
    assert result["sessionId"] == "grok-session-1"
    assert result["finalMessage"] == "Edited two files."
    assert result["usage"] == usage
    assert (bench.out / "final.txt").read_text() == "Edited two files."
    assert "session id (resume with: --session grok-session-1): grok-session-1" in run.out
    assert "tokens: 150 total (in 120, out 30)" in run.out
    assert "autonomy: workspace-write" in run.out
    assert (bench.out / "events.jsonl").read_text() == stream


def test_resumed_session_keeps_its_id_when_grok_does_not_echo_it(bench):
    run = bench.relay("--session", "abc123")
    assert run.result["sessionId"] == "abc123"


def test_resume_last_says_so(bench):
    run = bench.relay("--resume-last")
    assert "mode: resumed most recent session (--continue)" in run.out
    assert run.result["resumeLast"] is True


def test_final_path_exists_even_without_text(bench):
    run = bench.relay()
    assert run.result["finalPath"] == str(bench.out / "final.txt")
    assert run.result["finalMessage"] == ""


CANCEL_UPDATE = {
    "type": "tool_call_update",
    "toolCallId": "t1",
    "status": "failed",
    "content": [{"type": "text", "text": "User cancelled the execution for tool `write`"}],
}


@pytest.mark.parametrize(
    ("stream", "said"),
    [
        (
            [CANCEL_UPDATE, {"type": "end", "stopReason": "cancelled", "sessionId": "s-1"}],
            "(User cancelled the execution for tool `write`)",
        ),
        (
            [{"type": "end", "stopReason": "cancelled", "sessionId": "s-1"}],
            '(stopReason "cancelled")',
        ),
        (
            [{"type": "error", "message": "User cancelled the execution"}],
            "(User cancelled the execution)",
        ),
    ],
    ids=["tool-update-then-end", "end-only", "error-event"],
)
def test_a_run_grok_cancels_itself_is_failed(bench, stream, said):
    bench.script({"actions": [{"stdout": events(*stream)}, {"stderr": "cancelled\n"}]})
    run = bench.relay("--read-only")
    assert run.code == 1, run
    result = run.result
    assert (result["status"], result["exitCode"]) == ("failed", 1)
    assert result["error"].startswith(f"grok cancelled the run itself {said}: ")
    assert result["stderrTail"] == ["cancelled"]
    assert run.out.count("relay: failed") == 1


def test_a_cancelled_step_the_run_recovers_from_is_completed(bench):
    stream = events(
        CANCEL_UPDATE,
        {"type": "text", "data": "Could not write; here is the plan instead."},
        {"type": "end", "stopReason": "end_turn", "sessionId": "s-2"},
    )
    bench.script({"actions": [{"stdout": stream}]})
    run = bench.relay()
    assert run.code == 0, run
    assert run.result["status"] == "completed"


def test_the_phrase_in_the_model_s_own_text_is_not_a_cancellation(bench):
    stream = events(
        {"type": "text", "data": "Grok prints 'User cancelled the execution' when denied."},
        {"type": "end", "sessionId": "s-3"},
    )
    bench.script({"actions": [{"stdout": stream}]})
    assert bench.relay().result["status"] == "completed"


def test_read_only_is_reported_never_claimed(bench):
    (bench.work / "tracked.txt").write_text("x\n")
    commit_all(bench.work)
    run = bench.relay("--read-only", env=bench.fake.env(**DETECT_ONLY))
    assert run.result["readOnlyViolation"] is False
    assert "read-only is best-effort for grok" in run.out
    assert "does not enforce" in run.out
    bench.script({"actions": [{"write": ["sneaky.txt", "x"]}]})
    run = bench.relay("--read-only", env=bench.fake.env(**DETECT_ONLY))
    assert run.result["readOnlyViolation"] is True
    assert run.result["status"] == "completed"


def test_help_says_read_only_is_best_effort(bench):
    out = " ".join(bench.relay("--help").out.split())
    assert "best-effort" in out
    assert "never claims enforcement" in out
    assert "--full-access" in out


def test_version_falls_back_to_dash_dash_version(bench):
    good = json.dumps(
        {"record_dir": str(bench.fake.calls_dir), "version": {"stdout": "grok 1.0.41\n"}}
    )
    bench.script(
        {},
        version={
            "actions": [{"write": [str(bench.fake.scenario_path), good]}],
            "stdout": "",
            "stderr": "error: unrecognized subcommand 'version'\n",
            "exit": 2,
        },
    )
    run = bench.relay()
    assert run.code == 0, run
    assert [c["argv"] for c in bench.fake.calls("version")] == [["version"], ["--version"]]
    assert run.result["grokVersion"] == "grok 1.0.41"


def test_both_probes_failing_is_reported_and_not_dispatched(bench):
    bench.script({}, version={"stdout": "", "stderr": "nope\n", "exit": 7})
    run = bench.relay()
    assert run.code == 7, run
    result = run.result
    assert result["error"] == "grok version preflight failed with exit 7; Grok was not dispatched"
    assert [c["argv"] for c in bench.fake.calls("version")] == [["version"], ["--version"]]
    assert bench.fake.calls("run") == []


def test_unavailable_has_no_session_line(bench):
    (bench.fake.bin / "grok").unlink()
    run = bench.relay("--session", "abc123")
    assert run.code == 127
    assert run.result["status"] == "grok_unavailable"
    assert "session id" not in run.out


def test_result_field_order(bench):
    bench.relay()
    assert list(bench.result) == [
        "schema", "lane", "laneSource", "tool", "workdir", "autonomy", "model", "effort",
        "resumeLast", "grokVersion", "startedAt", "finishedAt", "briefPath", "eventsPath",
        "finalPath", "status", "exitCode", "signal", "sessionId", "finalMessage", "usage",
        "touchedFiles", "changes", "overlap", "relayRunId", "implementerArgv",
    ]  # fmt: skip
    bench.script({"exit": 3})
    bench.relay("--read-only", env=bench.fake.env(**DETECT_ONLY))
    assert tail_from(bench.result, "usage") == [
        "usage", "touchedFiles", "changes", "overlap", "relayRunId", "implementerArgv", "confined", "confinedUnavailable", "readOnlyViolation", "readOnlyEnforced",
        "readOnlyUnenforced", "stderrTail",
    ]  # fmt: skip


def test_grok_vanishing_after_its_probe_is_a_failed_run(bench):
    # The probe answers, then grok is gone: the launch fails, which is not a missing install.
    bench.script(version={"actions": [{"unlink": str(bench.fake.bin / "grok")}]})
    run = bench.relay("--read-only", env=bench.fake.env(PATH=str(bench.fake.bin)))
    assert run.code == 1, run
    result = run.result
    assert (result["status"], result["exitCode"], result["signal"]) == ("failed", 1, None)
    assert result["grokVersion"] == "fake-cli 0.0.0"
    assert result["readOnlyViolation"] is None  # no git on this PATH
    assert result["error"].startswith("could not start grok: ")
    assert run.out.count("relay: failed") == 1
    assert bench.fake.calls("run") == []


def tail_from(result: dict, first: str) -> list:
    """The result's field names from `first` on (what these tests pin)."""
    keys = list(result)
    return keys[keys.index(first) :]
