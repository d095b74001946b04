"""qwen: the brief on stdin, --approval-mode, the plan route, stream-json messages, denials."""

from __future__ import annotations

import json

import pytest
from conftest import fleet_doc, write_json
from relaykit import DETECT_ONLY, Bench, argv_of

BRIEF = "smoke brief: run until killed.\n"
HEAD = ["--output-format", "stream-json", "--approval-mode"]
SESSION = "17280d85-0bb7-4226-952d-62e27e516f1f"

# What qwen 0.24.4 printed for `qwen --auth-type openai -m mock-model -p "say hi"
# -o stream-json` against a mock model (exit 0). The init line is cut short after
# its tool list (the recorded one runs on for several kilobytes).
INIT = (
    '{"type":"system","subtype":"init","uuid":"17280d85-0bb7-4226-952d-62e27e516f1f",'
    '"session_id":"17280d85-0bb7-4226-952d-62e27e516f1f","cwd":"/work/scratch/repo",'
    '"tools":["read_mcp_resource","skill","grep_search","glob","read_file","web_fetch",'
    '"tool_search","tool_call"],"mcp_servers":[],"model":"mock-model",'
    '"permission_mode":"auto","slash_commands":["auth","bug","clear"],'
    '"qwen_code_version":"0.24.4","agents":[]}\n'
)
GOAL = (
    '{"type":"stream_event","uuid":"516d40bd-d4c6-4169-9ca0-deb41a2afe6c",'
    '"session_id":"17280d85-0bb7-4226-952d-62e27e516f1f","parent_tool_use_id":null,'
    '"event":{"type":"goal_state","goal_state":{"v":2,"goal":null,"activity":"idle"}}}\n'
)
HELLO = (
    '{"type":"assistant","uuid":"a03e99d6-1a73-4f78-9b84-7457e75d3ab4",'
    '"session_id":"17280d85-0bb7-4226-952d-62e27e516f1f","parent_tool_use_id":null,'
    '"message":{"id":"a03e99d6-1a73-4f78-9b84-7457e75d3ab4","type":"message",'
    '"role":"assistant","model":"mock-model","content":[{"type":"text",'
    '"text":"Hello from mock"}],"stop_reason":null,"usage":{"input_tokens":11,'
    '"output_tokens":3,"cache_read_input_tokens":0,"total_tokens":14}}}\n'
)
RESULT = (
    '{"type":"result","subtype":"success","uuid":"ea06f75d-42fa-49e4-bfe4-b125309f467f",'
    '"session_id":"17280d85-0bb7-4226-952d-62e27e516f1f","is_error":false,'
    '"duration_ms":782,"duration_api_ms":453,"num_turns":1,"result":"Hello from mock",'
    '"usage":{"input_tokens":22,"output_tokens":6,"cache_read_input_tokens":0,'
    '"total_tokens":28},"permission_denials":[]}\n'
)
USAGE = {"input_tokens": 22, "output_tokens": 6, "cache_read_input_tokens": 0, "total_tokens": 28}

# What qwen 0.24.4 printed with no auth at all (exit 1): one error result.
NO_AUTH = (
    '{"type":"result","subtype":"error_during_execution",'
    '"uuid":"04c7e7a4-2bed-4343-9f76-df5d9c08fc01",'
    '"session_id":"5a743d10-36e2-45f4-b460-06209036b17a","is_error":true,"duration_ms":0,'
    '"duration_api_ms":0,"num_turns":0,"usage":{"input_tokens":0,"output_tokens":0},'
    '"permission_denials":[],"error":{"message":"No auth type is selected. Please configure '
    "an auth type (e.g. via settings or `--auth-type`) before running in non-interactive "
    'mode."}}\n'
)


def message(kind: str, content: list, session: str = SESSION) -> str:
    body = {"role": kind, "content": content}
    return json.dumps({"type": kind, "session_id": session, "message": body}) + "\n"


def result_line(**fields) -> str:
    base = {
        "type": "result",
        "subtype": "success",
        "session_id": SESSION,
        "is_error": False,
        "num_turns": 1,
        "result": "Hello from mock",
        "usage": USAGE,
        "permission_denials": [],
    }
    return json.dumps({**base, **fields}) + "\n"


def scripted(*chunks: str, exit: int = 0, stderr: str = "") -> dict:
    actions = [{"stderr": stderr}] if stderr else []
    return {"actions": [*actions, {"stdout": "".join(chunks)}], "exit": exit}


@pytest.fixture
def bench(tmp_path, home):
    bench = Bench(tmp_path, "qwen")
    bench.script(scripted(INIT, GOAL, HELLO, RESULT))
    return bench


# ---------------------------------------------------------------- argv and the brief


def test_a_plain_write_run(bench):
    run = bench.relay()
    assert run.code == 0, run
    call = bench.fake.run_call()
    assert call["argv"] == ["--output-format", "stream-json", "--approval-mode", "auto-edit"]
    assert (call["stdin"], call["cwd"]) == (BRIEF, str(bench.work))
    result = run.result
    assert (result["status"], result["exitCode"], result["signal"]) == ("completed", 0, None)
    assert (result["approvalMode"], result["readOnly"], result["resumed"]) == (
        "auto-edit",
        False,
        False,
    )
    assert (result["sessionId"], result["actualModel"]) == (SESSION, "mock-model")
    assert result["finalMessage"] == "Hello from mock"
    assert (bench.out / "final.txt").read_text() == "Hello from mock"
    assert result["usage"] == USAGE
    assert result["permissionDenials"] == []
    assert (result["tool"], result["qwenVersion"]) == ("qwen", "fake-cli 0.0.0")
    assert "readOnlyViolation" not in result
    assert "error" not in result
    assert "approval mode: auto-edit" in run.out
    assert f"session id (resume with: --session {SESSION}): {SESSION}" in run.out
    assert "denied tools" not in run.out


@pytest.mark.parametrize(
    ("flags", "tail"),
    [
        (["--read-only"], ["plan"]),
        (["--approval-mode", "plan"], ["plan"]),
        (["--read-only", "--approval-mode", "plan"], ["plan"]),
        (["--approval-mode", "yolo"], ["yolo"]),
        (["--approval-mode", "auto"], ["auto"]),
        (["--approval-mode", "default"], ["default"]),
        (["--approval-mode", "auto-edit"], ["auto-edit"]),
        (["--model", "qwen3-coder-plus"], ["auto-edit", "--model", "qwen3-coder-plus"]),
        (["--session", SESSION], ["auto-edit", "--resume", SESSION]),
        (["--resume-last"], ["auto-edit", "--continue"]),
        (
            ["--openai-base-url", "http://127.0.0.1:18766/v1"],
            ["auto-edit", "--openai-base-url", "http://127.0.0.1:18766/v1"],
        ),
        (["--timeout", "5m"], ["auto-edit"]),
        (
            ["--read-only", "--resume-last", "--model", "mock-model"],
            ["plan", "--model", "mock-model", "--continue"],
        ),
    ],
)
def test_argv(bench, flags, tail):
    assert argv_of(bench, *flags) == [*HEAD, *tail]


def test_every_flag_at_once(bench, tmp_path):
    argv = argv_of(
        bench, "--openai-base-url", "https://api.example.com/v1?x=1",
        "--add-dir", "../docs", "--session", SESSION, "--model", "m1", "--approval-mode", "yolo",
    )  # fmt: skip
    assert argv == [
        *HEAD, "yolo", "--model", "m1", "--resume", SESSION, "--add-dir", str(tmp_path / "docs"),
        "--openai-base-url", "https://api.example.com/v1?x=1",
    ]  # fmt: skip
    result = bench.result
    assert (result["approvalMode"], result["model"], result["resumed"]) == ("yolo", "m1", True)


def test_add_dirs_resolve_against_cd(bench, tmp_path):
    argv = argv_of(bench, "--add-dir", "../docs", "--add-dir", "/abs/dir", "--add-dir", "sub")
    assert argv == [
        *HEAD, "auto-edit",
        "--add-dir", str(tmp_path / "docs"),
        "--add-dir", "/abs/dir",
        "--add-dir", str(bench.work / "sub"),
    ]  # fmt: skip


def test_the_brief_is_piped_whole_and_never_put_in_argv(bench):
    bench.brief.write_text("--help me\nfix the parser, then -p it\n")
    assert argv_of(bench) == [*HEAD, "auto-edit"]
    assert bench.fake.run_call()["stdin"] == "--help me\nfix the parser, then -p it\n"


def test_a_resumed_run_says_so(bench):
    run = bench.relay("--resume-last")
    assert run.code == 0, run
    assert run.result["resumed"] is True
    assert "mode: resumed an existing session" in run.out


# ---------------------------------------------------------------- lanes


def test_a_read_only_lane_takes_the_plan_route(bench, global_config):
    write_json(global_config, fleet_doc({"review": {"implementer": "qwen", "readOnly": True}}))
    assert argv_of(bench, "--lane", "review") == [*HEAD, "plan"]
    result = bench.result
    assert (result["lane"], result["approvalMode"], result["readOnly"]) == ("review", "plan", True)
    assert result["readOnlyViolation"] is False


def test_a_lane_permission_mode_applies(bench, global_config):
    lane = {"implementer": "qwen", "permissionMode": "yolo", "model": "qwen3-coder-plus"}
    write_json(global_config, fleet_doc({"fast": lane}))
    assert argv_of(bench, "--lane", "fast") == [*HEAD, "yolo", "--model", "qwen3-coder-plus"]
    assert (bench.result["approvalMode"], bench.result["readOnly"]) == ("yolo", False)


def test_a_lane_plan_mode_is_a_read_only_run(bench, global_config):
    write_json(
        global_config, fleet_doc({"plan": {"implementer": "qwen", "permissionMode": "plan"}})
    )
    assert argv_of(bench, "--lane", "plan") == [*HEAD, "plan"]
    assert bench.result["readOnly"] is True


def test_a_read_only_lane_refuses_a_write_approval_mode(bench, global_config):
    write_json(global_config, fleet_doc({"review": {"implementer": "qwen", "readOnly": True}}))
    run = bench.relay("--lane", "review", "--approval-mode", "yolo")
    assert run.code == 2
    assert "lane review is read-only, and --approval-mode would let Qwen Code write" in run.err


def test_the_read_only_flag_beats_a_lane_permission_mode(bench, global_config):
    write_json(
        global_config, fleet_doc({"fast": {"implementer": "qwen", "permissionMode": "yolo"}})
    )
    assert argv_of(bench, "--lane", "fast", "--read-only") == [*HEAD, "plan"]
    assert bench.result["readOnly"] is True


def test_a_model_flag_beats_the_lane_model(bench, global_config):
    lane = {"implementer": "qwen", "model": "lane-model", "permissionMode": "auto"}
    write_json(global_config, fleet_doc({"feature": lane}))
    argv = argv_of(bench, "--lane", "feature", "--model", "flag-model")
    assert argv == [*HEAD, "auto", "--model", "flag-model"]


# ---------------------------------------------------------------- refusals


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ["--approval-mode", "auto_edit"],
            'invalid --approval-mode "auto_edit" (expected: plan, default, auto-edit, auto, yolo)',
        ),
        (
            ["--approval-mode", "YOLO"],
            'invalid --approval-mode "YOLO" (expected: plan, default, auto-edit, auto, yolo)',
        ),
        (
            ["--read-only", "--approval-mode", "yolo"],
            "--read-only and --approval-mode yolo are mutually exclusive; pass only one",
        ),
        (
            ["--approval-mode", "auto", "--read-only"],
            "--read-only and --approval-mode auto are mutually exclusive; pass only one",
        ),
        (
            ["--resume-last", "--session", SESSION],
            "--resume-last and --session are mutually exclusive; pass only one",
        ),
        (
            ["--model", "qwen coder"],
            "--model contains unsupported characters (allowed: letters, digits, . _ : / -)",
        ),
        (
            ["--openai-base-url", "http://host/a b"],
            "--openai-base-url contains unsupported characters "
            "(allowed: letters, digits, . _ : / ? = + ~ @ -)",
        ),
        (
            ["--openai-base-url", "http://host/v1?a=1&b=2"],
            "--openai-base-url contains unsupported characters "
            "(allowed: letters, digits, . _ : / ? = + ~ @ -)",
        ),
        (["--openai-base-url"], "--openai-base-url requires a value"),
        (["--skip-trust"], "unknown option: --skip-trust"),
        (["--sandbox"], "unknown option: --sandbox"),
    ],
)
def test_usage_errors(bench, flags, message):
    run = bench.relay(*flags)
    assert (run.code, run.err, run.out) == (2, f"relay: {message}\n", "")
    assert not bench.out.exists()
    assert bench.fake.calls() == []


# ---------------------------------------------------------------- reading the messages


def test_the_yolo_write_round_trip(bench):
    tool_use = [
        {
            "type": "tool_use",
            "id": "call_mock_1",
            "name": "write_file",
            "input": {"file_path": "/work/scratch/repo/hello.txt", "content": "hi\n"},
        }
    ]
    tool_result = [
        {
            "type": "tool_result",
            "tool_use_id": "call_mock_1",
            "is_error": False,
            "content": "Successfully created and wrote to new file: /work/scratch/repo/hello.txt.",
        }
    ]
    script = scripted(
        INIT.replace('"permission_mode":"auto"', '"permission_mode":"yolo"'),
        GOAL,
        message("assistant", tool_use),
        message("user", tool_result),
        message("assistant", [{"type": "text", "text": "DONE after tool"}]),
        result_line(result="DONE after tool", num_turns=2),
    )
    script["actions"].insert(0, {"write": ["hello.txt", "hi\n"]})
    bench.script(script)
    run = bench.relay("--approval-mode", "yolo")
    assert run.code == 0, run
    result = run.result
    assert (result["status"], result["finalMessage"]) == ("completed", "DONE after tool")
    assert (result["approvalMode"], result["permissionDenials"]) == ("yolo", [])
    assert result["touchedFiles"] == ["?? hello.txt"]
    assert "readOnlyViolation" not in result


def test_the_result_text_is_the_report(bench):
    bench.script(
        scripted(
            INIT,
            message("assistant", [{"type": "text", "text": "Let me look."}]),
            result_line(result="Found it: the parser drops the last line."),
        )
    )
    result = bench.relay().result
    assert result["finalMessage"] == "Found it: the parser drops the last line."


def test_without_a_result_text_the_last_assistant_text_is_the_report(bench):
    bench.script(
        scripted(
            INIT,
            message("assistant", [{"type": "text", "text": "First."}]),
            message("assistant", [{"type": "thinking", "thinking": "hm"}]),
            message(
                "assistant",
                [{"type": "text", "text": "Second, "}, {"type": "text", "text": "last."}],
            ),
            message("assistant", [{"type": "text", "text": "  "}]),
            result_line(result=None),
        )
    )
    assert bench.relay().result["finalMessage"] == "Second, last."


def test_denied_tools_are_listed(bench):
    denials = [
        {
            "tool_name": "write_file",
            "tool_use_id": "call_mock_1",
            "tool_input": {"file_path": "/work/scratch/repo/hello.txt", "content": "hi\n"},
        },
        {"tool_name": "run_shell_command", "tool_use_id": "call_mock_2", "tool_input": {}},
        {"tool_use_id": "call_mock_3"},
    ]
    bench.script(scripted(INIT, HELLO, result_line(permission_denials=denials)))
    run = bench.relay()
    assert run.code == 0, run
    assert run.result["permissionDenials"] == ["write_file", "run_shell_command"]
    assert "denied tools (qwen would have asked): write_file, run_shell_command" in run.out


def test_an_api_error_fails_with_its_message(bench):
    error = "[API Error: 400 mock bad request]"
    bench.script(
        scripted(
            INIT,
            message("assistant", [{"type": "text", "text": error}]),
            result_line(
                subtype="error_during_execution",
                is_error=True,
                result=None,
                error={"message": error},
            ),
            exit=1,
        )
    )
    run = bench.relay()
    assert run.code == 1, run
    result = run.result
    assert (result["status"], result["exitCode"]) == ("failed", 1)
    assert result["error"] == (
        "qwen ended with an error result (error_during_execution): [API Error: 400 mock bad "
        "request]"
    )
    assert result["finalMessage"] == "[API Error: 400 mock bad request]"


def test_no_auth_is_failed(bench):
    stderr = (
        "Ripgrep not available: spawn /x/vendor/ripgrep/x64-linux/rg EACCES. "
        "Falling back to built-in grep.\n"
    )
    bench.script(scripted(NO_AUTH, exit=1, stderr=stderr))
    run = bench.relay()
    assert run.code == 1, run
    result = run.result
    assert (result["status"], result["exitCode"]) == ("failed", 1)
    assert result["error"] == (
        "qwen ended with an error result (error_during_execution): No auth type is selected. "
        "Please "
        "configure an auth type (e.g. via settings or `--auth-type`) before running in "
        "non-interactive mode."
    )
    assert result["sessionId"] == "5a743d10-36e2-45f4-b460-06209036b17a"
    assert result["usage"] == {"input_tokens": 0, "output_tokens": 0}
    assert result["finalMessage"] == ""


def test_an_error_result_with_exit_zero_still_fails(bench):
    bench.script(scripted(INIT, result_line(is_error=True, subtype="error_max_turns")))
    run = bench.relay()
    assert run.code == 1, run
    assert (run.result["status"], run.result["error"]) == (
        "failed",
        "qwen ended with an error result (error_max_turns)",
    )


def test_exit_zero_without_a_result_message_fails(bench):
    bench.script(scripted(INIT, GOAL, HELLO))
    run = bench.relay()
    assert run.code == 1, run
    result = run.result
    assert (result["status"], result["exitCode"]) == ("failed", 1)
    assert result["error"] == (
        "qwen exited without a result event; inspect events.jsonl and stderr.txt"
    )
    assert (result["finalMessage"], result["usage"]) == ("Hello from mock", None)
    assert result["sessionId"] == SESSION


def test_a_budget_exit_without_a_result_is_failed_with_its_code(bench):
    bench.script(scripted(INIT, HELLO, exit=55))
    run = bench.relay()
    assert run.code == 55, run
    assert (run.result["status"], run.result["exitCode"]) == ("failed", 55)


# ---------------------------------------------------------------- the read-only tripwire


def test_a_read_only_run_that_changes_nothing(bench):
    run = bench.relay("--read-only")
    assert run.code == 0, run
    result = run.result
    assert (result["approvalMode"], result["readOnly"], result["readOnlyViolation"]) == (
        "plan",
        True,
        False,
    )
    assert "approval mode: plan" in run.out


def test_a_read_only_run_that_writes_trips_the_wire(bench):
    script = scripted(INIT, HELLO, RESULT)
    script["actions"].append({"write": ["hello.txt", "hi\n"]})
    bench.script(script)
    result = bench.relay("--read-only", env=bench.fake.env(**DETECT_ONLY)).result
    assert result["readOnlyViolation"] is True
    assert result["touchedFiles"] == ["?? hello.txt"]
