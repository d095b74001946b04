"""vibe: agents (ask for read-only), limits, resume, tools, the argv brief, streaming lines."""

from __future__ import annotations

import json

import pytest
from conftest import commit_all, fleet_doc, write_json
from relaykit import BRIEF, DETECT_ONLY, Bench, argv_of


@pytest.fixture
def bench(tmp_path, home):
    bench = Bench(tmp_path, "vibe")
    bench.script({})
    return bench


HEAD = ["--output", "streaming", "--agent"]
PROMPT = f"--prompt={BRIEF}"


def lines(*items: dict, last_newline: bool = True) -> str:
    text = "\n".join(json.dumps(item) for item in items)
    return text + ("\n" if last_newline else "")


def test_default_argv_and_no_stdin(bench):
    assert argv_of(bench) == [*HEAD, "accept-edits", "--trust", PROMPT]
    call = bench.fake.run_call()
    assert (call["stdin"], call["cwd"]) == ("", str(bench.work))
    assert [c["argv"] for c in bench.fake.calls("version")] == [["--version"]]


@pytest.mark.parametrize(
    ("flags", "tail"),
    [
        # vibe 3.0.2 rejects `--agent plan` ("Agent 'plan' not found", exit 2); its
        # builtin agents are ask, accept-edits, smart-approve and auto-approve, and
        # `ask` refused write_file and the shell headlessly. So read-only is `ask`.
        (["--plan-only"], ["ask", "--trust"]),
        (
            ["--full-access", "--max-turns", "3", "--max-price", "0.50", "--max-tokens", "1000"],
            ["auto-approve", "--trust", "--max-turns", "3", "--max-price", "0.5", "--max-tokens", "1000"],
        ),
        (["--max-price", "2.0"], ["accept-edits", "--trust", "--max-price", "2"]),
        (["--max-price", "10.25"], ["accept-edits", "--trust", "--max-price", "10.25"]),
        (
            ["--session", "vibe-session-1", "--enabled-tools", "read_file", "--disabled-tools", "bash"],
            [
                "accept-edits", "--trust", "--resume", "vibe-session-1",
                "--enabled-tools", "read_file", "--disabled-tools", "bash",
            ],
        ),
        (
            ["--enabled-tools", "read_file", "--enabled-tools", "grep", "--resume-last"],
            [
                "accept-edits", "--trust", "--continue",
                "--enabled-tools", "read_file", "--enabled-tools", "grep",
            ],
        ),
    ],
)  # fmt: skip
def test_each_flag(bench, flags, tail):
    assert argv_of(bench, *flags) == [*HEAD, *tail, PROMPT]


def test_plan_only_records_the_ask_agent_and_arms_the_tripwire(bench):
    (bench.work / "tracked.txt").write_text("x\n")
    commit_all(bench.work)
    run = bench.relay("--plan-only", env=bench.fake.env(**DETECT_ONLY))
    result = run.result
    assert (result["agent"], result["readOnlyViolation"]) == ("ask", False)
    assert "agent: ask" in run.out
    bench.script({"actions": [{"append": ["tracked.txt", "edited\n"]}]})
    assert (
        bench.relay("--plan-only", env=bench.fake.env(**DETECT_ONLY)).result["readOnlyViolation"]
        is True
    )
    assert "readOnlyViolation" not in bench.relay().result


@pytest.mark.parametrize(
    ("lane", "flags", "agent"),
    [
        ({"readOnly": True}, [], "ask"),
        ({"readOnly": False}, [], "accept-edits"),
        ({"readOnly": True, "timeout": "5m"}, ["--timeout", "10m"], "ask"),
    ],
)
def test_lane_dials_and_flags_win(bench, global_config, lane, flags, agent):
    write_json(global_config, fleet_doc({"review": {"implementer": "vibe", **lane}}))
    argv = argv_of(bench, "--lane", "review", *flags)
    assert argv[:4] == [*HEAD, agent]
    assert (bench.result["agent"], bench.result["laneSource"]) == (agent, "global")


def test_a_read_only_lane_refuses_full_access(bench, global_config):
    write_json(global_config, fleet_doc({"review": {"implementer": "vibe", "readOnly": True}}))
    run = bench.relay("--lane", "review", "--full-access")
    assert run.code == 2
    assert "lane review is read-only, and --full-access would let" in run.err


def test_lane_model_is_refused(bench, global_config):
    write_json(global_config, fleet_doc({"x": {"implementer": "vibe", "model": "m"}}))
    run = bench.relay("--lane", "x")
    assert run.code == 2
    assert "vibe does not support model" in run.err
    assert not bench.out.exists()


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--max-turns", "0"], "--max-turns must be a positive safe integer; got: 0"),
        (
            ["--max-turns", "9007199254740992"],
            "--max-turns must be a positive safe integer; got: 9007199254740992",
        ),
        (["--max-tokens", "1.5"], "--max-tokens must be a positive safe integer; got: 1.5"),
        (["--max-price", "0"], "--max-price must be a positive decimal number; got: 0"),
        (["--max-price", "0.0"], "--max-price must be a positive decimal number; got: 0.0"),
        (["--max-price", ".5"], "--max-price must be a positive decimal number; got: .5"),
        (["--max-price", "1e3"], "--max-price must be a positive decimal number; got: 1e3"),
        (["--max-price", "007"], "--max-price must be a positive decimal number; got: 007"),
        (
            ["--resume-last", "--session", "s"],
            "--resume-last and --session are mutually exclusive; pass only one",
        ),
        (["--session", "  "], "--session must not be empty"),
        (["--plan-only", "--full-access"], "--plan-only and --full-access are mutually exclusive"),
        (["--enabled-tools", ""], "--enabled-tools must not be empty"),
        (
            ["--disabled-tools", "bash", "--disabled-tools", " "],
            "--disabled-tools must not be empty",
        ),
        (["--model", "m"], "unknown option: --model"),
        (["--read-only"], "unknown option: --read-only"),
    ],
)
def test_usage_errors(bench, flags, message):
    run = bench.relay(*flags)
    assert (run.code, run.err) == (2, f"relay: {message}\n")
    assert not bench.out.exists()


def test_brief_with_a_nul_byte_is_refused(bench):
    bench.brief.write_text("hello\0world\n")
    run = bench.relay()
    assert (run.code, run.err) == (
        2,
        "relay: brief contains a NUL byte, which cannot be passed in --prompt\n",
    )
    assert not bench.out.exists()


def test_brief_over_120_kib_is_refused(bench):
    bench.brief.write_text("x" * (120 * 1024 + 600))
    run = bench.relay()
    assert (run.code, run.err) == (
        2,
        "relay: brief is 121KB; keep large context in workspace files instead of argv\n",
    )
    assert not bench.out.exists()
    bench.brief.write_text("x" * (120 * 1024))
    assert bench.relay().code == 0


def test_last_assistant_message_and_session_id(bench):
    stream = lines(
        {"type": "message", "role": "user", "sessionId": "5d0c-uuid", "content": [{"type": "text", "text": BRIEF}]},
        {"type": "message", "role": "assistant", "sessionId": "5d0c-uuid", "content": "working"},
        {"type": "effect", "sessionId": "5d0c-uuid", "title": "file_system.bash"},
        {
            "type": "message",
            "role": "assistant",
            "sessionId": "5d0c-uuid",
            "content": [{"type": "text", "text": "fake vibe "}, {"type": "text", "text": "completed"}],
        },
        {"type": "message", "role": "assistant", "sessionId": "5d0c-uuid", "content": []},
        last_newline=False,
    )  # fmt: skip
    bench.script({"actions": [{"stdout": stream}]})
    run = bench.relay()
    assert run.code == 0, run
    result = run.result
    assert (result["status"], result["finalMessage"]) == ("completed", "fake vibe completed")
    assert result["sessionId"] == "5d0c-uuid"
    assert "session id (resume with: --session 5d0c-uuid): 5d0c-uuid" in run.out
    assert (bench.out / "final.txt").read_text() == "fake vibe completed"


def test_session_id_stays_null_when_the_stream_has_none(bench):
    stream = lines(
        {"role": "assistant", "content": "working"}, {"role": "assistant", "content": "done"}
    )
    bench.script({"actions": [{"stdout": stream}]})
    result = bench.relay().result
    assert (result["finalMessage"], result["sessionId"], result["resumed"]) == ("done", None, False)


def test_a_resumed_session_reports_only_what_vibe_said(bench):
    stream = lines({"role": "assistant", "content": "working"})
    stream += json.dumps({"role": "assistant", "content": "fake vibe completed"})
    bench.script({"actions": [{"stdout": stream}]})
    flags = ["--enabled-tools", "read_file", "--disabled-tools", "bash"]
    run = bench.relay("--session", "vibe-session-1", *flags)
    assert run.code == 0, run
    result = run.result
    assert (result["status"], result["finalMessage"]) == ("completed", "fake vibe completed")
    assert (result["resumed"], result["sessionId"]) == (True, None)
    assert "mode: resumed an existing session" in run.out
    assert "vibe-session-1)" not in run.out


def test_resumed_plan_only_warns_that_the_agent_is_pinned(bench):
    run = bench.relay("--session", "vibe-session-1", "--plan-only")
    result = run.result
    assert (result["resumed"], result["sessionId"]) == (True, None)
    assert "mode: resumed an existing session" in run.out
    assert "keeps the agent it started with" in run.out


def test_a_limit_stop_is_failed_exit_3_with_a_hint(bench):
    bench.script({"actions": [{"stderr": "Stopped: turn_limit\n"}], "exit": 3})
    run = bench.relay("--max-turns", "1")
    assert run.code == 3, run
    result = run.result
    assert (result["status"], result["exitCode"], result["maxTurns"]) == ("failed", 3, 1)
    assert result["stderrTail"] == ["Stopped: turn_limit"]
    assert (
        "hint: vibe exits 3 when a --max-turns/--max-price/--max-tokens limit stops it." in run.out
    )


def test_help_names_the_ask_agent(bench):
    out = " ".join(bench.relay("--help").out.split())
    assert "ask for --plan-only" in out
    assert "--model" not in out


def test_result_field_order(bench):
    bench.relay("--max-price", "0.5")
    result = bench.result
    assert list(result) == [
        "schema", "lane", "laneSource", "tool", "workdir", "agent", "maxTurns", "maxPrice",
        "maxTokens", "resumed", "sessionId", "vibeVersion", "startedAt", "finishedAt",
        "briefPath", "finalPath", "eventsPath", "stderrPath", "status", "exitCode", "signal",
        "finalMessage", "touchedFiles", "changes", "overlap", "relayRunId", "implementerArgv",
    ]  # fmt: skip
    assert (result["maxPrice"], result["maxTurns"], result["tool"]) == (0.5, None, "vibe")
    assert result["vibeVersion"] == "fake-cli 0.0.0"
    assert '"maxPrice": 0.5,' in (bench.out / "result.json").read_text()
