"""qoder: permission modes, the read-only route qodercli 1.1.52 honours, resume, events."""

from __future__ import annotations

import json

import pytest
from conftest import fleet_doc, write_json
from relaykit import DETECT_ONLY, Bench, argv_of

BRIEF = "smoke brief: run until killed.\n"
HEAD = ["--output-format", "stream-json"]
#: What qodercli 1.1.52 really needs for a read-only run (`plan` is no longer honoured).
READ_ONLY = [
    "--permission-mode", "default", "--tools", "Read,Grep,Glob", "--strict-mcp-config",
]  # fmt: skip
ALL_TOOLS = ["Agent", "Bash", "Edit", "Glob", "Grep", "NotebookEdit", "Read", "Write"]


def lines(*events: dict) -> str:
    return "".join(json.dumps(e) + "\n" for e in events)


def init(mode: str = "auto", tools=None, model: str = "auto", session: str = "qs-1") -> dict:
    return {
        "type": "system",
        "subtype": "init",
        "apiKeySource": "none",
        "qodercli_version": "1.1.52",
        "cwd": "/work",
        "tools": ALL_TOOLS if tools is None else tools,
        "mcp_servers": [],
        "model": model,
        "permissionMode": mode,
        "session_id": session,
    }


def assistant(text: str, session: str = "qs-1") -> dict:
    message = {"role": "assistant", "content": [{"type": "text", "text": text}]}
    return {"type": "assistant", "message": message, "session_id": session}


def result_event(text: str = "fake qoder completed", is_error: bool = False, **extra) -> dict:
    return {
        "type": "result",
        "subtype": "success",
        "is_error": is_error,
        "session_id": "qs-1",
        "result": text,
        "usage": {"input_tokens": 7, "output_tokens": 2},
        "permission_denials": [],
        "terminal_reason": "completed",
        **extra,
    }


def scripted(*events: dict, exit: int = 0) -> dict:
    return {"actions": [{"stdout": lines(*events)}], "exit": exit}


@pytest.fixture
def bench(tmp_path, home):
    bench = Bench(tmp_path, "qoder")
    bench.script(scripted(init(), assistant("working"), result_event()))
    return bench


def test_default_run(bench):
    run = bench.relay()
    assert (run.code, bench.fake.run_call()["argv"]) == (
        0,
        [*HEAD, "--permission-mode", "auto", "-p", BRIEF],
    ), run
    call = bench.fake.run_call()
    assert (call["stdin"], call["cwd"]) == ("", str(bench.work))
    result = run.result
    assert (result["status"], result["exitCode"]) == ("completed", 0)
    assert (result["permissionMode"], result["readOnly"], result["toolSurface"]) == (
        "auto",
        False,
        None,
    )
    assert (result["sessionId"], result["actualModel"], result["actualPermissionMode"]) == (
        "qs-1",
        "auto",
        "auto",
    )
    assert result["usage"] == {"input_tokens": 7, "output_tokens": 2}
    assert (result["resultSubtype"], result["qoderErrors"], result["permissionDenials"]) == (
        "success",
        [],
        [],
    )
    assert result["finalMessage"] == "fake qoder completed"
    assert "readOnlyViolation" not in result
    assert "session id (resume with: --resume qs-1): qs-1" in run.out
    assert "--- qoder final report ---" in run.out


def test_reference_success_argv(bench):
    argv = argv_of(
        bench, "--resume", "qoder-session-0", "--model", "Performance", "--context-window", "32768"
    )
    assert argv == [
        *HEAD, "--permission-mode", "auto", "--resume", "qoder-session-0", "--model",
        "Performance", "--context-window", "32768", "-p", BRIEF,
    ]  # fmt: skip
    result = bench.result
    assert (result["resumed"], result["contextWindow"], result["sessionId"]) == (
        True,
        "32768",
        "qs-1",
    )


@pytest.mark.parametrize(
    ("flags", "middle"),
    [
        (["--resume-last"], ["--permission-mode", "auto", "-c"]),
        (["--permission-mode", "accept_edits"], ["--permission-mode", "accept_edits"]),
        (["--permission-mode", "bypass_permissions"], ["--permission-mode", "bypass_permissions"]),
        (["--permission-mode", "dont_ask"], ["--permission-mode", "dont_ask"]),
        (["--permission-mode", "default"], ["--permission-mode", "default"]),
    ],
)  # fmt: skip
def test_argv(bench, flags, middle):
    assert argv_of(bench, *flags) == [*HEAD, *middle, "-p", BRIEF]


def reads_only(bench) -> None:
    """Script the init a read-only run really gets: the three reader tools."""
    bench.script(scripted(init("default", ["Glob", "Grep", "Read"]), result_event()))


@pytest.mark.parametrize(
    ("flags", "middle"),
    [
        (["--read-only"], READ_ONLY),
        (["--read-only", "--resume-last"], [*READ_ONLY, "-c"]),
    ],
)
def test_read_only_argv(bench, flags, middle):
    reads_only(bench)
    assert argv_of(bench, *flags) == [*HEAD, *middle, "-p", BRIEF]


@pytest.mark.parametrize(
    "flags",
    [["--permission-mode", "plan"], ["--read-only", "--permission-mode", "plan"]],
)
def test_plan_mode_is_refused_with_the_honest_route(bench, flags):
    """qodercli 1.1.52 headless runs `plan` as `default` (its init event says so)."""
    run = bench.relay(*flags)
    assert run.code == 2, run
    assert run.err == (
        "relay: --permission-mode plan is not honoured by qodercli headless (it starts in "
        "default mode with Edit and Bash offered); use --read-only, the relay's read-only "
        "route\n"
    )
    assert bench.fake.calls() == []


def test_add_dirs_resolve_against_cd(bench, tmp_path):
    argv = argv_of(bench, "--add-dir", "../shared", "--model", "m")
    assert argv == [
        *HEAD, "--permission-mode", "auto", "--model", "m", "--add-dir", str(tmp_path / "shared"),
        "-p", BRIEF,
    ]  # fmt: skip


def test_read_only_run(bench):
    bench.script(
        scripted(init("default", ["Glob", "Grep", "Read"]), result_event("Found the bug."))
    )
    run = bench.relay("--read-only")
    assert run.code == 0, run
    result = run.result
    assert (result["permissionMode"], result["readOnly"], result["toolSurface"]) == (
        "plan",
        True,
        ["Read", "Grep", "Glob"],
    )
    assert result["actualPermissionMode"] == "default"
    assert result["readOnlyViolation"] is False
    assert "mode: read-only (Read, Grep and Glob only; no MCP servers)" in run.out


def test_plan_as_qodercli_1_1_52_handles_it_is_never_called_read_only(bench):
    # Given `--permission-mode plan`, qodercli 1.1.52 starts in default mode with every
    # tool. Should a read-only run ever get that init event, it is reported as failed.
    bench.script(scripted(init("default"), result_event("edited nothing, honest")))
    run = bench.relay("--read-only")
    assert run.code == 1, run
    result = run.result
    assert result["status"] == "failed"
    assert result["error"] == (
        "qodercli offered tools beyond Read, Grep and Glob to a read-only run "
        "(Agent, Bash, Edit, NotebookEdit, Write); this was not a read-only run"
    )


def test_read_only_run_with_an_mcp_tool_fails(bench):
    tools = ["Glob", "Grep", "Read", "mcp__w__write_file"]
    bench.script(scripted(init("default", tools), result_event()))
    run = bench.relay("--read-only")
    assert run.code == 1
    assert "(mcp__w__write_file)" in run.result["error"]


def test_read_only_run_without_a_tool_list_is_not_confirmed(bench):
    bench.script(scripted(result_event("looked around")))
    run = bench.relay("--read-only")
    assert run.code == 1
    assert run.result["error"] == (
        "qodercli never reported its tool list, so this read-only run could not be "
        "confirmed as one; inspect the working tree"
    )
    assert run.result["readOnlyViolation"] is False


def test_a_read_only_run_that_writes_trips_the_wire(bench):
    script = scripted(init("default", ["Glob", "Grep", "Read"]), result_event())
    script["actions"].append({"write": ["sneaky.txt", "x"]})
    bench.script(script)
    assert (
        bench.relay("--read-only", env=bench.fake.env(**DETECT_ONLY)).result["readOnlyViolation"]
        is True
    )


def test_read_only_lane_takes_the_read_only_route(bench, global_config):
    write_json(global_config, fleet_doc({"review": {"implementer": "qoder", "readOnly": True}}))
    reads_only(bench)
    assert argv_of(bench, "--lane", "review") == [*HEAD, *READ_ONLY, "-p", BRIEF]
    result = bench.result
    assert (result["lane"], result["permissionMode"], result["readOnly"]) == (
        "review",
        "plan",
        True,
    )


def test_a_read_only_lane_refuses_a_write_permission_mode(bench, global_config):
    write_json(global_config, fleet_doc({"review": {"implementer": "qoder", "readOnly": True}}))
    run = bench.relay("--lane", "review", "--permission-mode", "auto")
    assert run.code == 2
    assert "lane review is read-only, and --permission-mode would let" in run.err


def test_read_only_flag_beats_a_lane_permission_mode(bench, global_config):
    lane = {"implementer": "qoder", "permissionMode": "bypass_permissions"}
    write_json(global_config, fleet_doc({"fast": lane}))
    reads_only(bench)
    assert argv_of(bench, "--lane", "fast", "--read-only") == [*HEAD, *READ_ONLY, "-p", BRIEF]


def test_lane_dials_apply_and_flags_win(bench, global_config):
    lane = {
        "implementer": "qoder",
        "model": "Performance",
        "permissionMode": "accept_edits",
        "timeout": "5m",
    }
    write_json(global_config, fleet_doc({"feature": lane}))
    assert argv_of(bench, "--lane", "feature") == [
        *HEAD, "--permission-mode", "accept_edits", "--model", "Performance", "-p", BRIEF,
    ]  # fmt: skip
    argv = argv_of(bench, "--lane", "feature", "--model", "Ultimate")
    assert argv[argv.index("--model") + 1] == "Ultimate"


def test_bypass_is_opt_in_and_flagged(bench):
    run = bench.relay("--permission-mode", "bypass_permissions")
    assert run.code == 0, run
    assert "warning: bypass_permissions was explicitly chosen" in run.out


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ["--resume-last", "--resume", "s1"],
            "--resume-last and --resume are mutually exclusive; pass only one",
        ),
        (["--resume", " "], "--resume must not be empty"),
        (
            ["--resume", "--model"],
            "--resume contains unsupported characters (allowed: letters, digits, . _ : -)",
        ),
        (["--model", ""], "--model must not be empty"),
        (["--context-window", "0"], "--context-window must be a positive integer"),
        (["--context-window", "01"], "--context-window must be a positive integer"),
        (["--context-window", "1.5"], "--context-window must be a positive integer"),
        (["--permission-mode", "yolo"], "unsupported --permission-mode: yolo"),
        (
            ["--read-only", "--permission-mode", "auto"],
            "--read-only and --permission-mode auto are mutually exclusive; pass only one",
        ),
        (["--session", "x"], "unknown option: --session"),
    ],
)
def test_usage_errors(bench, flags, message):
    run = bench.relay(*flags)
    assert (run.code, run.err) == (2, f"relay: {message}\n")
    assert not bench.out.exists()


@pytest.mark.parametrize("brief", ["--help", "-m foo bar", "---\nfix the bug", "--version"])
def test_brief_that_qodercli_would_parse_as_options_is_refused(bench, brief):
    bench.brief.write_text(brief)
    run = bench.relay()
    assert run.code == 2
    assert run.err == (
        'relay: brief starts with "-", which qodercli would take for one of its own options '
        "(the brief is a command-line argument); begin it with a word\n"
    )
    assert not bench.out.exists()


def test_markdown_list_brief_is_fine(bench):
    bench.brief.write_text("- fix the parser\n- add a test\n")
    assert argv_of(bench)[-1] == "- fix the parser\n- add a test\n"


def test_oversized_and_nul_briefs_are_refused(bench):
    bench.brief.write_text("x" * (130 * 1024))
    run = bench.relay()
    assert (run.code, run.err) == (
        2,
        "relay: brief is 130KB; keep large context in workspace files instead of argv\n",
    )
    bench.brief.write_text("a\0b")
    run = bench.relay()
    assert (run.code, run.err) == (
        2,
        "relay: brief contains a NUL byte, which cannot be passed in qodercli's argv\n",
    )
    assert not bench.out.exists()


def test_not_logged_in_is_failed(bench):
    # What qodercli 1.1.52 really prints without a login (exit 1).
    bench.script(
        scripted(
            init(),
            assistant("Not logged in · Please run /login"),
            result_event("Not logged in · Please run /login", is_error=True),
            exit=1,
        )
    )
    run = bench.relay()
    assert run.code == 1
    result = run.result
    assert (result["status"], result["finalMessage"]) == (
        "failed",
        "Not logged in · Please run /login",
    )
    assert result["error"] == "qodercli reported an error result; see finalMessage"


def test_error_result_with_exit_zero_fails(bench):
    bench.script(scripted(init(), result_event("nope", status="error", errors=["E1"])))
    run = bench.relay()
    assert run.code == 1
    assert (run.result["status"], run.result["qoderErrors"]) == ("failed", ["E1"])


def test_exit_zero_without_a_result_event_fails(bench):
    bench.script(scripted(init(), assistant("half done")))
    run = bench.relay()
    assert run.code == 1
    result = run.result
    assert result["error"] == (
        "qodercli exited without a result event; inspect events.jsonl and stderr.txt"
    )
    assert result["finalMessage"] == "half done"


def test_final_message_fallbacks(bench):
    deltas = [{"type": "content_block_delta", "delta": {"text": t}} for t in ("Hel", "lo")]
    bench.script(scripted(*deltas, {"type": "final", "result": None}))
    assert bench.relay().result["finalMessage"] == "Hello"
    bench.script(
        scripted(
            {"type": "final", "message": {"content": [{"type": "text", "text": "from message"}]}}
        )
    )
    assert bench.relay().result["finalMessage"] == "from message"


def test_last_session_id_wins(bench):
    bench.script(scripted(init(session="a"), {"type": "x", "session": {"id": "b"}}, result_event()))
    assert bench.relay().result["sessionId"] == "qs-1"
    bench.script(scripted(init(session="a"), {"type": "result", "sessionId": "c", "result": "ok"}))
    assert bench.relay().result["sessionId"] == "c"


def test_result_field_order(bench):
    bench.relay()
    assert list(bench.result) == [
        "schema", "lane", "laneSource", "tool", "workdir", "model", "contextWindow",
        "permissionMode", "readOnly", "toolSurface", "resumed", "qoderVersion", "startedAt",
        "finishedAt", "briefPath", "finalPath", "eventsPath", "stderrPath", "status",
        "exitCode", "signal", "sessionId", "actualModel", "actualPermissionMode", "usage",
        "resultSubtype", "qoderErrors", "permissionDenials", "finalMessage", "tokenUsage", "touchedFiles", "changes", "overlap", "relayRunId", "implementerArgv",
    ]  # fmt: skip
