"""gemini: the brief on stdin, --approval-mode, the plan route, stream-json events, exit hints."""

from __future__ import annotations

import pytest
from conftest import fleet_doc, write_json
from relaykit import DETECT_ONLY, Bench, argv_of

BRIEF = "smoke brief: run until killed.\n"
HEAD = ["--output-format", "stream-json", "--approval-mode"]
SESSION = "ef3f4d1a-d7cc-4b5d-afe7-d953382ee6b5"

# What gemini 0.61.0 printed for `gemini --skip-trust -m gemini-2.5-flash -p "say hi"
# -o stream-json` against a mock model (exit 0), line for line.
INIT = (
    '{"type":"init","timestamp":"2026-12-02T02:25:16.438Z",'
    '"session_id":"ef3f4d1a-d7cc-4b5d-afe7-d953382ee6b5","model":"gemini-2.5-flash"}\n'
)
USER = (
    '{"type":"message","timestamp":"2026-12-02T02:25:16.441Z","role":"user","content":"say hi"}\n'
)
HELLO = (
    '{"type":"message","timestamp":"2026-12-02T02:25:16.496Z","role":"assistant",'
    '"content":"Hello from mock","delta":true}\n'
)
RESULT = (
    '{"type":"result","timestamp":"2026-12-02T02:25:16.589Z","status":"success",'
    '"stats":{"total_tokens":14,"input_tokens":11,"output_tokens":3,"cached":0,"input":11,'
    '"duration_ms":151,"tool_calls":0,"models":{"mock-model":{"total_tokens":14,'
    '"input_tokens":11,"output_tokens":3,"cached":0,"input":11}}}}\n'
)
STATS = {
    "total_tokens": 14,
    "input_tokens": 11,
    "output_tokens": 3,
    "cached": 0,
    "input": 11,
    "duration_ms": 151,
    "tool_calls": 0,
    "models": {
        "mock-model": {
            "total_tokens": 14,
            "input_tokens": 11,
            "output_tokens": 3,
            "cached": 0,
            "input": 11,
        }
    },
}

# The observed yolo tool round trip (`MAKEFILE please`), with two assistant
# deltas of the model's first turn added in the same shape.
TOOL_INIT = (
    '{"type":"init","timestamp":"2026-12-02T02:25:34.180Z",'
    '"session_id":"ecc9d027-ee0b-4f13-aacf-f07509aba398","model":"gemini-2.5-flash"}\n'
)
TOOL_USER = (
    '{"type":"message","timestamp":"2026-12-02T02:25:34.182Z","role":"user",'
    '"content":"MAKEFILE please"}\n'
)
FIRST_TURN = (
    '{"type":"message","timestamp":"2026-12-02T02:25:34.300Z","role":"assistant",'
    '"content":"Writing ","delta":true}\n'
    '{"type":"message","timestamp":"2026-12-02T02:25:34.301Z","role":"assistant",'
    '"content":"hello.txt.","delta":true}\n'
)
TOOL_USE = (
    '{"type":"tool_use","timestamp":"2026-12-02T02:25:34.423Z","tool_name":"write_file",'
    '"tool_id":"write_file__write_file_1796178334281_0","parameters":'
    '{"file_path":"/work/scratch/repo/hello.txt","content":"hi\\n"}}\n'
)
TOOL_RESULT = (
    '{"type":"tool_result","timestamp":"2026-12-02T02:25:34.596Z",'
    '"tool_id":"write_file__write_file_1796178334281_0","status":"success"}\n'
)
DONE = (
    '{"type":"message","timestamp":"2026-12-02T02:25:34.624Z","role":"assistant",'
    '"content":"DONE after tool","delta":true}\n'
)
TOOL_RUN_RESULT = (
    '{"type":"result","timestamp":"2026-12-02T02:25:34.629Z","status":"success",'
    '"stats":{"total_tokens":28,"input_tokens":22,"output_tokens":6,"cached":0,"input":22,'
    '"duration_ms":450,"tool_calls":1,"models":{"mock-model":{"total_tokens":28,'
    '"input_tokens":22,"output_tokens":6,"cached":0,"input":22}}}}\n'
)

# gemini's result event after an API error (HTTP 400 from the model server: exit 144).
API_ERROR = (
    '{"type":"result","timestamp":"2026-12-02T02:26:02.111Z","status":"error",'
    '"error":{"type":"unknown","message":"[API Error: {\\"error\\":{\\"code\\":400,'
    '\\"message\\":\\"mock bad request\\",\\"status\\":\\"INVALID_ARGUMENT\\"}}]"},'
    '"stats":{"total_tokens":0,"input_tokens":0,"output_tokens":0,"cached":0,"input":0,'
    '"duration_ms":12,"tool_calls":0,"models":{}}}\n'
)


def scripted(*chunks: str, exit: int = 0, stderr: str = "") -> dict:
    actions = [{"stderr": stderr}] if stderr else []
    return {"actions": [*actions, {"stdout": "".join(chunks)}], "exit": exit}


@pytest.fixture
def bench(tmp_path, home):
    bench = Bench(tmp_path, "gemini")
    bench.script(scripted(INIT, USER, HELLO, RESULT))
    return bench


# ---------------------------------------------------------------- argv and the brief


def test_a_plain_write_run(bench):
    run = bench.relay()
    assert run.code == 0, run
    call = bench.fake.run_call()
    assert call["argv"] == ["--output-format", "stream-json", "--approval-mode", "auto_edit"]
    assert (call["stdin"], call["cwd"]) == (BRIEF, str(bench.work))
    result = run.result
    assert (result["status"], result["exitCode"], result["signal"]) == ("completed", 0, None)
    assert (result["approvalMode"], result["readOnly"], result["resumed"]) == (
        "auto_edit",
        False,
        False,
    )
    assert (result["skipTrust"], result["sandbox"], result["model"]) == (False, False, None)
    assert (result["sessionId"], result["actualModel"]) == (SESSION, "gemini-2.5-flash")
    assert result["finalMessage"] == "Hello from mock"
    assert (bench.out / "final.txt").read_text() == "Hello from mock"
    assert result["usage"] == STATS
    assert result["tool"] == "gemini"
    assert result["geminiVersion"] == "fake-cli 0.0.0"
    assert "readOnlyViolation" not in result
    assert "error" not in result
    assert "approval mode: auto_edit" in run.out
    assert f"session id (resume with: --session {SESSION}): {SESSION}" in run.out


@pytest.mark.parametrize(
    ("flags", "tail"),
    [
        (["--read-only"], ["plan"]),
        (["--approval-mode", "plan"], ["plan"]),
        (["--read-only", "--approval-mode", "plan"], ["plan"]),
        (["--approval-mode", "yolo"], ["yolo"]),
        (["--approval-mode", "default"], ["default"]),
        (["--approval-mode", "auto_edit"], ["auto_edit"]),
        (["--model", "gemini-2.5-flash"], ["auto_edit", "--model", "gemini-2.5-flash"]),
        (["--session", SESSION], ["auto_edit", "--resume", SESSION]),
        (["--session", "5"], ["auto_edit", "--resume", "5"]),
        (["--resume-last"], ["auto_edit", "--resume", "latest"]),
        (["--skip-trust"], ["auto_edit", "--skip-trust"]),
        (["--sandbox"], ["auto_edit", "--sandbox"]),
        (["--timeout", "5m"], ["auto_edit"]),
        (
            ["--read-only", "--resume-last", "--model", "gemini-2.5-pro"],
            ["plan", "--model", "gemini-2.5-pro", "--resume", "latest"],
        ),
    ],
)
def test_argv(bench, flags, tail):
    assert argv_of(bench, *flags) == [*HEAD, *tail]


def test_every_flag_at_once(bench, tmp_path):
    argv = argv_of(
        bench, "--sandbox", "--skip-trust", "--add-dir", "../docs", "--session", "s1",
        "--model", "m1", "--approval-mode", "yolo",
    )  # fmt: skip
    assert argv == [
        *HEAD, "yolo", "--model", "m1", "--resume", "s1",
        "--include-directories", str(tmp_path / "docs"), "--skip-trust", "--sandbox",
    ]  # fmt: skip
    result = bench.result
    assert (result["skipTrust"], result["sandbox"], result["resumed"]) == (True, True, True)
    assert (result["approvalMode"], result["model"]) == ("yolo", "m1")


def test_add_dirs_become_include_directories_resolved_against_cd(bench, tmp_path):
    argv = argv_of(bench, "--add-dir", "../docs", "--add-dir", "/abs/dir", "--add-dir", "sub")
    assert argv == [
        *HEAD, "auto_edit",
        "--include-directories", str(tmp_path / "docs"),
        "--include-directories", "/abs/dir",
        "--include-directories", str(bench.work / "sub"),
    ]  # fmt: skip


def test_the_brief_is_piped_whole_and_never_put_in_argv(bench):
    bench.brief.write_text("--help me\nfix the parser, then -p it\n")
    argv = argv_of(bench)
    assert argv == [*HEAD, "auto_edit"]
    assert bench.fake.run_call()["stdin"] == "--help me\nfix the parser, then -p it\n"


def test_a_resumed_run_says_so(bench):
    run = bench.relay("--session", SESSION)
    assert run.code == 0, run
    assert run.result["resumed"] is True
    assert "mode: resumed an existing session" in run.out


# ---------------------------------------------------------------- lanes


def test_a_read_only_lane_takes_the_plan_route(bench, global_config):
    write_json(global_config, fleet_doc({"review": {"implementer": "gemini", "readOnly": True}}))
    assert argv_of(bench, "--lane", "review") == [*HEAD, "plan"]
    result = bench.result
    assert (result["lane"], result["approvalMode"], result["readOnly"]) == ("review", "plan", True)
    assert result["readOnlyViolation"] is False


def test_a_lane_permission_mode_applies(bench, global_config):
    lane = {"implementer": "gemini", "permissionMode": "yolo", "model": "gemini-2.5-pro"}
    write_json(global_config, fleet_doc({"fast": lane}))
    assert argv_of(bench, "--lane", "fast") == [*HEAD, "yolo", "--model", "gemini-2.5-pro"]
    assert (bench.result["approvalMode"], bench.result["readOnly"]) == ("yolo", False)


def test_a_lane_plan_mode_is_a_read_only_run(bench, global_config):
    write_json(
        global_config, fleet_doc({"plan": {"implementer": "gemini", "permissionMode": "plan"}})
    )
    assert argv_of(bench, "--lane", "plan") == [*HEAD, "plan"]
    assert bench.result["readOnly"] is True


def test_a_read_only_lane_refuses_a_write_approval_mode(bench, global_config):
    write_json(global_config, fleet_doc({"review": {"implementer": "gemini", "readOnly": True}}))
    run = bench.relay("--lane", "review", "--approval-mode", "yolo")
    assert run.code == 2
    assert "lane review is read-only, and --approval-mode would let Gemini CLI write" in run.err


def test_the_read_only_flag_beats_a_lane_permission_mode(bench, global_config):
    write_json(
        global_config, fleet_doc({"fast": {"implementer": "gemini", "permissionMode": "yolo"}})
    )
    assert argv_of(bench, "--lane", "fast", "--read-only") == [*HEAD, "plan"]
    assert bench.result["readOnly"] is True


def test_a_model_flag_beats_the_lane_model(bench, global_config):
    lane = {"implementer": "gemini", "model": "lane-model", "permissionMode": "default"}
    write_json(global_config, fleet_doc({"feature": lane}))
    argv = argv_of(bench, "--lane", "feature", "--model", "flag-model")
    assert argv == [*HEAD, "default", "--model", "flag-model"]


# ---------------------------------------------------------------- refusals


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ["--approval-mode", "auto-edit"],
            'invalid --approval-mode "auto-edit" (expected: default, auto_edit, yolo, plan)',
        ),
        (
            ["--approval-mode", "auto"],
            'invalid --approval-mode "auto" (expected: default, auto_edit, yolo, plan)',
        ),
        (
            ["--read-only", "--approval-mode", "yolo"],
            "--read-only and --approval-mode yolo are mutually exclusive; pass only one",
        ),
        (
            ["--approval-mode", "auto_edit", "--read-only"],
            "--read-only and --approval-mode auto_edit are mutually exclusive; pass only one",
        ),
        (
            ["--resume-last", "--session", "s1"],
            "--resume-last and --session are mutually exclusive; pass only one",
        ),
        (
            ["--model", "gemini 2.5"],
            "--model contains unsupported characters (allowed: letters, digits, . _ : / -)",
        ),
        (
            ["--session", "a b"],
            "--session contains unsupported characters (allowed: letters, digits, . _ : -)",
        ),
        (["--approval-mode"], "--approval-mode requires a value"),
        (["--max-turns", "3"], "unknown option: --max-turns"),
        (["--openai-base-url", "http://x"], "unknown option: --openai-base-url"),
    ],
)
def test_usage_errors(bench, flags, message):
    run = bench.relay(*flags)
    assert (run.code, run.err, run.out) == (2, f"relay: {message}\n", "")
    assert not bench.out.exists()
    assert bench.fake.calls() == []


def test_a_contradictory_read_only_lane_is_refused(bench, global_config):
    lane = {"implementer": "gemini", "readOnly": True, "permissionMode": "yolo"}
    write_json(global_config, fleet_doc({"review": lane}))
    run = bench.relay("--lane", "review")
    assert run.code == 2, run
    assert 'readOnly contradicts permissionMode "yolo"' in run.err
    assert not bench.out.exists()


# ---------------------------------------------------------------- reading the events


def test_assistant_deltas_join_and_turns_split_by_a_tool_call(bench):
    bench.script(
        scripted(TOOL_INIT, TOOL_USER, FIRST_TURN, TOOL_USE, TOOL_RESULT, DONE, TOOL_RUN_RESULT)
    )
    run = bench.relay("--approval-mode", "yolo")
    assert run.code == 0, run
    result = run.result
    assert result["finalMessage"] == "Writing hello.txt.\n\nDONE after tool"
    assert result["sessionId"] == "ecc9d027-ee0b-4f13-aacf-f07509aba398"
    assert result["usage"]["tool_calls"] == 1
    assert result["usage"]["total_tokens"] == 28


def test_the_observed_tool_round_trip_reports_the_last_turn(bench):
    bench.script(scripted(TOOL_INIT, TOOL_USER, TOOL_USE, TOOL_RESULT, DONE, TOOL_RUN_RESULT))
    assert bench.relay().result["finalMessage"] == "DONE after tool"


def test_user_messages_and_empty_deltas_are_not_the_report(bench):
    empty = HELLO.replace('"Hello from mock"', '""')
    bench.script(scripted(INIT, USER, empty, HELLO, RESULT))
    assert bench.relay().result["finalMessage"] == "Hello from mock"


def test_an_error_result_fails_with_its_message(bench):
    bench.script(scripted(INIT, USER, API_ERROR, exit=144))
    run = bench.relay()
    assert run.code == 144, run
    result = run.result
    assert (result["status"], result["exitCode"]) == ("failed", 144)
    assert result["error"] == (
        'gemini reported an error: [API Error: {"error":{"code":400,"message":"mock bad '
        'request","status":"INVALID_ARGUMENT"}}]'
    )
    assert result["sessionId"] == SESSION


def test_an_error_result_with_exit_zero_still_fails(bench):
    bench.script(scripted(INIT, HELLO, API_ERROR))
    run = bench.relay()
    assert run.code == 1, run
    assert (run.result["status"], run.result["exitCode"]) == ("failed", 1)
    assert run.result["error"].startswith("gemini reported an error: [API Error: ")
    assert run.result["finalMessage"] == "Hello from mock"


def test_an_error_result_without_a_message(bench):
    bench.script(scripted(INIT, '{"type":"result","status":"error"}\n', exit=1))
    run = bench.relay()
    assert (run.code, run.result["error"]) == (1, "gemini reported an error: no message")


def test_an_untrusted_folder_gives_the_trust_hint(bench):
    stderr = (
        "Gemini CLI is not running in a trusted directory. To proceed, either use "
        "`--skip-trust`, set the `GEMINI_CLI_TRUST_WORKSPACE=true` environment variable, or "
        "trust this directory in interactive mode.\n"
    )
    bench.script(scripted(exit=55, stderr=stderr))
    run = bench.relay()
    assert run.code == 55, run
    result = run.result
    assert (result["status"], result["exitCode"]) == ("failed", 55)
    assert result["error"] == (
        f"gemini does not trust {bench.work} (exit 55); trust it once in interactive gemini, "
        "set GEMINI_CLI_TRUST_WORKSPACE=true, or pass --skip-trust"
    )
    assert result["stderrTail"][0].startswith("Gemini CLI is not running in a trusted directory.")


def test_no_sign_in_gives_the_auth_hint(bench):
    stderr = (
        "Please set an Auth method in your /home/u/.gemini/settings.json or specify one of the "
        "following environment variables before running: GEMINI_API_KEY, "
        "GOOGLE_GENAI_USE_VERTEXAI, GOOGLE_GENAI_USE_GCA\n"
    )
    bench.script(scripted(exit=41, stderr=stderr))
    run = bench.relay()
    assert run.code == 41, run
    result = run.result
    assert (result["status"], result["exitCode"]) == ("failed", 41)
    assert result["error"] == (
        "gemini is not signed in (exit 41); run `gemini` once to sign in, or set GEMINI_API_KEY"
    )
    assert (bench.out / "stderr.txt").read_text() == stderr


def test_exit_zero_without_a_result_event_fails(bench):
    bench.script(scripted(INIT, USER, HELLO))
    run = bench.relay()
    assert run.code == 1, run
    result = run.result
    assert (result["status"], result["exitCode"]) == ("failed", 1)
    assert result["error"] == (
        "gemini exited without a result event; inspect events.jsonl and stderr.txt"
    )
    assert (result["finalMessage"], result["usage"]) == ("Hello from mock", None)


def test_events_are_kept_raw(bench):
    bench.relay()
    assert (bench.out / "events.jsonl").read_text() == INIT + USER + HELLO + RESULT


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
    script = scripted(INIT, USER, HELLO, RESULT)
    script["actions"].append({"write": ["hello.txt", "hi\n"]})
    bench.script(script)
    result = bench.relay("--approval-mode", "plan", env=bench.fake.env(**DETECT_ONLY)).result
    assert result["readOnlyViolation"] is True
    assert result["touchedFiles"] == ["?? hello.txt"]
