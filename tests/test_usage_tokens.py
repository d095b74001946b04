"""Token usage: every relay records what its CLI reported as `tokenUsage`, one shape for all,
beside the fields the Node relays write; `runs list`, `runs compare` and fanout show it.

Each case below is one CLI's own event shape (from a capture of the real CLI where the
comment says so), with the counts written out as the relay must record them.
"""

from __future__ import annotations

import json

import pytest
from relaykit import Bench
from test_relay_dsh import needs_zstd
from test_relay_dsh import record as dsh_session_record
from test_worktree import BRIEF_EDIT, Source

from delegate_skills.commands.fanout import table as fanout_table
from delegate_skills.commands.runs_cli import compare_text, runs_table


def lines(*events) -> str:
    return "".join((e if isinstance(e, str) else json.dumps(e)) + "\n" for e in events)


def usage(inp, cached, out, reasoning, total, cost) -> dict:
    return {"inputTokens": inp, "cachedInputTokens": cached, "outputTokens": out,
            "reasoningTokens": reasoning, "totalTokens": total, "costUsd": cost}  # fmt: skip


# ---------------------------------------------------------------- one case per event shape

CODEX_USAGE = {"input_tokens": 24763, "cached_input_tokens": 24448, "output_tokens": 122,
               "reasoning_output_tokens": 64}  # fmt: skip
CODEX = lines(
    {"type": "thread.started", "thread_id": "0199a213-81c0-7800-8aa1-bbab2a035a53"},
    {"type": "turn.started"},
    {"type": "item.completed", "item": {"id": "item_0", "type": "agent_message", "text": "Done."}},
    {"type": "turn.completed", "usage": CODEX_USAGE},
)

CLAUDE_USAGE = {"input_tokens": 5, "cache_creation_input_tokens": 1200,
                "cache_read_input_tokens": 18000, "output_tokens": 340}  # fmt: skip
CLAUDE = lines(
    {"type": "system", "subtype": "init", "session_id": "11111111-1111-4111-8111-111111111111",
     "permissionMode": "acceptEdits"},
    {"type": "result", "subtype": "success", "is_error": False,
     "session_id": "11111111-1111-4111-8111-111111111111", "result": "Done.", "num_turns": 2,
     "total_cost_usd": 0.0421, "usage": CLAUDE_USAGE},
)  # fmt: skip

# gemini 0.61.0's stream-json lines against a mock model, with a cache hit in its stats.
GEMINI_STATS = {"total_tokens": 28, "input_tokens": 22, "output_tokens": 6, "cached": 4,
                "input": 18, "duration_ms": 151, "tool_calls": 1}  # fmt: skip
GEMINI = lines(
    '{"type":"init","timestamp":"2026-12-02T02:25:16.438Z",'
    '"session_id":"ef3f4d1a-d7cc-4b5d-afe7-d953382ee6b5","model":"gemini-2.5-flash"}',
    '{"type":"message","timestamp":"2026-12-02T02:25:16.496Z","role":"assistant",'
    '"content":"Hello from mock","delta":true}',
    {"type": "result", "timestamp": "2026-12-02T02:25:16.589Z", "status": "success",
     "stats": GEMINI_STATS},
)  # fmt: skip


def _step(cost: float, total: int, inp: int, out: int, reasoning: int, read: int, write: int):
    tokens = {"total": total, "input": inp, "output": out, "reasoning": reasoning,
              "cache": {"read": read, "write": write}}  # fmt: skip
    return {"type": "step_finish", "sessionID": "ses_A",
            "part": {"type": "step-finish", "cost": cost, "tokens": tokens}}  # fmt: skip


OPENCODE = lines(
    {"type": "text", "sessionID": "ses_A", "part": {"id": "p1", "type": "text", "text": "Done."}},
    _step(0.0125, 1290, 100, 40, 10, 1000, 140),
    _step(0.0075, 1260, 50, 60, 0, 1150, 0),
)

# What kilo 7.7.7 printed for a two-step run against a scripted model: its step_finish
# lines, trimmed to the fields a relay reads.
KILO_STEP = (
    '{"type":"step_finish","timestamp":1796608100189,"sessionID":"ses_db1d00d2cffeq0wmabZKcf4WH5",'
    '"part":{"type":"step-finish","reason":"tool-calls","cost":0,"tokens":{"total":14,"input":11,'
    '"output":3,"reasoning":0,"cache":{"read":0,"write":0}}}}'
)
KILO = lines(
    '{"type":"text","timestamp":1796608100501,"sessionID":"ses_db1d00d2cffeq0wmabZKcf4WH5",'
    '"part":{"id":"prt_1","type":"text","text":"Done: probe ran."}}',
    KILO_STEP,
    KILO_STEP,
)

PI_USAGE = {"input": 7, "output": 2, "cacheRead": 1, "cacheWrite": 0, "totalTokens": 10,
            "cost": {"total": 0.001}}  # fmt: skip
PI = lines(
    {"type": "session", "version": 3, "id": "pi-session-1", "cwd": "/work"},
    {"type": "message_end", "message": {"role": "assistant", "provider": "google",
     "model": "fake-model", "content": [{"type": "text", "text": "Done."}], "usage": PI_USAGE,
     "stopReason": "stop"}},
    {"type": "agent_end"},
)  # fmt: skip

GROK_USAGE = {"input_tokens": 120, "output_tokens": 30, "total_tokens": 150}
GROK = lines(
    {"type": "text", "data": "Done."},
    {"type": "end", "stopReason": "end_turn", "sessionId": "grok-session-1", "usage": GROK_USAGE},
)

# qwen 0.24.4's result line against a mock model.
QWEN_USAGE = {"input_tokens": 22, "output_tokens": 6, "cache_read_input_tokens": 0,
              "total_tokens": 28}  # fmt: skip
QWEN = lines(
    '{"type":"result","subtype":"success","uuid":"ea06f75d-42fa-49e4-bfe4-b125309f467f",'
    '"session_id":"17280d85-0bb7-4226-952d-62e27e516f1f","is_error":false,'
    '"duration_ms":782,"duration_api_ms":453,"num_turns":1,"result":"Hello from mock",'
    '"usage":{"input_tokens":22,"output_tokens":6,"cache_read_input_tokens":0,'
    '"total_tokens":28},"permission_denials":[]}'
)

CURSOR_USAGE = {"input_tokens": 11, "output_tokens": 4}
CURSOR = lines(
    {"type": "system", "subtype": "init", "session_id": "cursor-session-1", "model": "m"},
    {"type": "result", "subtype": "success", "is_error": False, "session_id": "cursor-session-1",
     "result": "Done.", "usage": CURSOR_USAGE},
)  # fmt: skip

CLINE_USAGE = {"inputTokens": 7, "outputTokens": 2}
CLINE = lines(
    {"ts": 1, "type": "run_start", "providerId": "fake", "modelId": "fake-model"},
    {"ts": 2, "type": "run_result", "finishReason": "completed", "iterations": 1,
     "usage": CLINE_USAGE, "durationMs": 42, "text": "Done.",
     "model": {"id": "fake-model", "provider": "fake"}},
)  # fmt: skip

COMMANDCODE_USAGE = {"inputTokens": 7, "outputTokens": 2, "cacheReadTokens": 1,
                     "cacheWriteTokens": 0}  # fmt: skip
COMMANDCODE = lines(
    {"type": "event", "event": {"type": "run_start", "sessionId": "cc-session-1"}},
    {"type": "event", "event": {"type": "run_end", "result": {}}},
    {"type": "result", "subtype": "success", "sessionId": "cc-session-1",
     "stopReason": "end_turn", "usage": COMMANDCODE_USAGE, "durationMs": 42,
     "finalText": "Done."},
)  # fmt: skip

KILO_SUMMED = {"input": 22, "output": 6, "reasoning": 0, "total": 28,
               "cache": {"read": 0, "write": 0}}  # fmt: skip

CASES = {
    # key: (stdout, the result's tokenUsage, the Node fields the result keeps as they were)
    "codex": (CODEX, usage(24763, 24448, 122, 64, 24885, None), {}),
    "claude": (
        CLAUDE,
        usage(19205, 18000, 340, None, 19545, 0.0421),
        {"usage": CLAUDE_USAGE, "totalCostUsd": 0.0421},
    ),
    "gemini": (GEMINI, usage(22, 4, 6, None, 28, None), {"usage": GEMINI_STATS}),
    "opencode": (OPENCODE, usage(2440, 2150, 100, 10, 2550, 0.02), {"cost": 0.02}),
    "kilo": (KILO, usage(22, 0, 6, 0, 28, 0), {"usage": KILO_SUMMED, "cost": 0}),
    "pi": (PI, usage(8, 1, 2, None, 10, 0.001), {"usage": PI_USAGE}),
    "grok": (GROK, usage(120, None, 30, None, 150, None), {"usage": GROK_USAGE}),
    "qwen": (QWEN, usage(22, 0, 6, None, 28, None), {"usage": QWEN_USAGE}),
    "cursor": (CURSOR, usage(11, None, 4, None, 15, None), {"usage": CURSOR_USAGE}),
    "cline": (CLINE, usage(7, None, 2, None, 9, None), {"usage": CLINE_USAGE}),
    "commandcode": (COMMANDCODE, usage(8, 1, 2, None, 10, None), {"usage": COMMANDCODE_USAGE}),
}


@pytest.mark.parametrize("key", list(CASES))
def test_each_cli_s_usage_is_recorded_in_one_shape(tmp_path, home, key):
    stdout, expected, node_fields = CASES[key]
    bench = Bench(tmp_path, key)
    bench.script({"actions": [{"stdout": stdout}]})
    run = bench.relay()
    assert run.code == 0, run
    result = run.result
    assert result["status"] == "completed"
    assert result["tokenUsage"] == expected
    assert {name: result[name] for name in node_fields} == node_fields
    if key in ("codex", "opencode"):  # their Node results have no `usage`: none is added
        assert "usage" not in result
    keys = list(result)  # beside the adapter's own fields, right before touchedFiles
    assert keys.index("tokenUsage") + 1 == keys.index("touchedFiles")


def test_qwen_counts_its_cache_reads_inside_its_input(tmp_path, home):
    """Qwen Code counts as Gemini CLI does: cache_read_input_tokens is part of input_tokens."""
    counted = {"input_tokens": 1200, "output_tokens": 50, "cache_read_input_tokens": 1000,
               "total_tokens": 1250}  # fmt: skip
    bench = Bench(tmp_path, "qwen")
    event = {"type": "result", "subtype": "success", "session_id": "q-1", "is_error": False,
             "num_turns": 1, "result": "Done.", "usage": counted}  # fmt: skip
    bench.script({"actions": [{"stdout": lines(event)}]})
    run = bench.relay()
    assert run.code == 0, run
    assert run.result["tokenUsage"] == usage(1200, 1000, 50, None, 1250, None)
    assert run.result["usage"] == counted


@needs_zstd
def test_dsh_s_usage_is_summed_from_its_session_record(tmp_path, home):
    """dsh 0.1.0-rc.8's session record of a two-step run: 11 in and 3 out per step."""
    bench = Bench(tmp_path, "dsh")
    bench.script({"actions": [{"stdout": "Done: probe ran.\n"}]})
    dsh_home = tmp_path / "dsh-home"
    dsh_home.mkdir()
    dsh_session_record(dsh_home, bench.work)
    run = bench.relay(env=bench.fake.env(DSH_HOME=str(dsh_home)))
    assert run.code == 0, run
    result = run.result
    assert result["tokenUsage"] == usage(22, None, 6, None, 28, None)
    assert result["usage"] == {"inputTokens": 22, "outputTokens": 6, "assistantMessages": 2}
    assert result["sessionHarvest"] == "ok"


def test_a_run_whose_cli_reports_no_usage_has_no_token_usage(tmp_path, home):
    bench = Bench(tmp_path, "codex")
    bench.script({"actions": [{"stdout": lines({"type": "thread.started", "thread_id": "t-1"})}]})
    run = bench.relay()
    assert run.code == 0, run
    assert "tokenUsage" not in run.result


def test_codex_s_last_turn_completed_is_the_one_recorded(tmp_path, home):
    second = {"input_tokens": 30000, "cached_input_tokens": 29000, "output_tokens": 500,
              "reasoning_output_tokens": 100}  # fmt: skip
    bench = Bench(tmp_path, "codex")
    stdout = CODEX + lines({"type": "turn.completed", "usage": second})
    bench.script({"actions": [{"stdout": stdout}]})
    run = bench.relay()
    assert run.result["tokenUsage"] == usage(30000, 29000, 500, 100, 30500, None)


# ---------------------------------------------------------------- runs list, compare, fanout


@pytest.fixture
def source(tmp_path, home) -> Source:
    return Source(tmp_path)


def _codex_run(source: Source, out_name: str, turn: dict | None) -> str:
    events = [{"type": "thread.started", "thread_id": f"thread-{out_name}"}]
    if turn is not None:
        events.append({"type": "turn.completed", "usage": turn})
    source.bench.script({"actions": [{"stdout": lines(*events)}, *BRIEF_EDIT["actions"]]})
    run = source.relay(out=source.bench.tmp / out_name)
    assert run.code == 0, run
    return run.result["relayRunId"]


def test_runs_list_and_compare_show_the_tokens(source):
    first = _codex_run(source, "out-1", CODEX_USAGE)
    second = _codex_run(source, "out-2", None)

    listed = source.delegate("runs", "list", "--json")
    assert listed.code == 0, listed
    rows = {row["id"]: row for row in json.loads(listed.out)["runs"]}
    assert (rows[first]["tokens"], rows[second]["tokens"]) == (24885, None)
    table = runs_table([rows[first], rows[second]]).splitlines()
    assert table[0].split() == ["id", "age", "implementer", "status", "landing", "repository",
                                "changes", "tokens"]  # fmt: skip
    assert table[1].split()[-1] == "24885"
    assert table[2].split()[-1] == "-"

    compared = source.delegate("runs", "compare", first, second, "--json")
    assert compared.code == 0, compared
    report = json.loads(compared.out)
    assert [(r["id"], r["tokens"]) for r in report["runs"]] == [(first, 24885), (second, None)]
    text = compare_text(report).splitlines()
    header = text[0].split()
    tokens = header.index("tokens")
    assert (text[1].split()[tokens], text[2].split()[tokens]) == ("24885", "-")


def test_fanout_shows_the_tokens_of_each_run(source):
    events = lines({"type": "thread.started", "thread_id": "t-1"},
                   {"type": "turn.completed", "usage": CODEX_USAGE})  # fmt: skip
    source.bench.script({"actions": [{"stdout": events}]})
    done = source.delegate("fanout", "--brief", str(source.bench.brief), "--cd",
                           str(source.repo), "--implementer", "codex", "--json")  # fmt: skip
    report = json.loads(done.out)
    assert done.code == 0, (done.err, report)
    assert [row["tokens"] for row in report["runs"]] == [24885]
    text = fanout_table(report["runs"]).splitlines()
    assert text[0].split()[-1] == "tokens"
    assert text[1].split()[-1] == "24885"
