"""claude: argv, the settings profile, the environment, stream-json results."""

from __future__ import annotations

import json

import pytest
from conftest import fleet_doc, write_json
from relaykit import Bench

SESSION = "11111111-1111-4111-8111-111111111111"
INIT = {"type": "system", "subtype": "init", "session_id": SESSION, "permissionMode": "acceptEdits"}
RESULT = {
    "type": "result",
    "subtype": "success",
    "is_error": False,
    "session_id": SESSION,
    "result": "fake claude completed",
    "num_turns": 3,
    "total_cost_usd": 0.0123,
    "usage": {"input_tokens": 10, "output_tokens": 5},
}
COMMON = [
    "-p", "--output-format", "stream-json", "--verbose",
]  # fmt: skip


def events(*items) -> dict:
    return {"stdout": "".join(json.dumps(i) + "\n" for i in items)}


@pytest.fixture
def bench(tmp_path, home):
    spaced = tmp_path / "with space"
    spaced.mkdir()
    bench = Bench(spaced, "claude")
    bench.script(
        {"actions": [events(INIT, RESULT)]}, env_keys=["CLAUDECODE", "CLAUDE_CODE_CHILD_SESSION"]
    )
    return bench


def argv_tail(bench, *flags) -> list[str]:
    run = bench.relay(*flags)
    assert run.code == 0, run
    argv = bench.fake.calls("run")[-1]["argv"]
    settings = argv.index("--settings")
    assert argv[settings + 1] == str(bench.out / "profile.json")
    return argv[settings + 2 :]


def test_success(bench):
    run = bench.relay(env=bench.fake.env(CLAUDECODE="1", CLAUDE_CODE_CHILD_SESSION="1"))
    assert run.code == 0, run
    result = run.result
    assert result["status"] == "completed"
    assert result["sessionId"] == SESSION
    assert result["finalMessage"] == "fake claude completed"
    assert (result["resultSubtype"], result["numTurns"], result["totalCostUsd"]) == (
        "success",
        3,
        0.0123,
    )
    assert result["usage"] == {"input_tokens": 10, "output_tokens": 5}
    assert (bench.out / "final.txt").read_text() == "fake claude completed"
    call = bench.fake.run_call()
    assert call["stdin"] == "smoke brief: run until killed.\n"
    assert call["env"] == {"CLAUDE_CODE_CHILD_SESSION": "1"}


def test_default_argv_and_profile(bench):
    run = bench.relay()
    assert run.code == 0, run
    argv = bench.fake.run_call()["argv"]
    assert argv == [
        *COMMON, "--tools", "Read,Glob,Grep,Edit,Write,Bash", "--strict-mcp-config",
        "--disallowedTools", "mcp__*", "--disable-slash-commands",
        "--settings", str(bench.out / "profile.json"), "--permission-mode", "acceptEdits",
    ]  # fmt: skip
    profile = json.loads((bench.out / "profile.json").read_text())
    assert profile["disableClaudeAiConnectors"] is True
    assert profile["permissions"]["deny"] == [
        "Bash(git commit *)", "Bash(git * commit *)", "Bash(git * commit)", "Bash(git push *)",
        "Bash(git * push *)", "Bash(git * push)", "Bash(claude *)", "Bash(*claude-delegate*)",
    ]  # fmt: skip
    assert profile["sandbox"]["enabled"] is True
    assert profile["sandbox"]["failIfUnavailable"] is True
    assert profile["sandbox"]["autoAllowBashIfSandboxed"] is True
    assert profile["sandbox"]["allowUnsandboxedCommands"] is False
    assert run.result["settingsPath"] == str(bench.out / "profile.json")
    assert "--bg" not in argv and "--bare" not in argv


def test_read_only(bench):
    bench.script({"actions": [events({**INIT, "permissionMode": "plan"}, RESULT)]})
    run = bench.relay("--read-only")
    argv = bench.fake.run_call()["argv"]
    assert argv[argv.index("--tools") + 1] == "Read,Glob,Grep"
    assert argv[-2:] == ["--permission-mode", "plan"]
    result = run.result
    assert (result["toolSurface"], result["permissionMode"]) == (["Read", "Glob", "Grep"], "plan")
    assert result["shellSandbox"] == "not-applicable"
    assert result["readOnlyViolation"] is False
    profile = json.loads((bench.out / "profile.json").read_text())
    assert profile == {"disableClaudeAiConnectors": True, "permissions": {"deny": []}}


@pytest.mark.parametrize(
    ("flags", "tail"),
    [
        (["--dangerously-skip-permissions"], ["--dangerously-skip-permissions"]),
        (
            [
                "--resume-last",
                "--model",
                "opus",
                "--effort",
                "max",
                "--max-turns",
                "40",
                "--max-budget-usd",
                "2.5",
            ],
            [
                "--permission-mode",
                "acceptEdits",
                "--continue",
                "--model",
                "opus",
                "--effort",
                "max",
                "--max-turns",
                "40",
                "--max-budget-usd",
                "2.5",
            ],
        ),
        (["--session", "s1", "--read-only"], ["--permission-mode", "plan", "--resume", "s1"]),
    ],
)
def test_flags(bench, flags, tail):
    assert argv_tail(bench, *flags) == tail


def test_numbers_in_the_result(bench):
    bench.relay("--max-turns", "40", "--max-budget-usd", "10")
    assert (bench.result["maxTurns"], bench.result["maxBudgetUsd"]) == (40, 10)
    assert '"maxBudgetUsd": 10,' in (bench.out / "result.json").read_text()


def test_exit_zero_without_a_result_event_fails(bench):
    bench.script({"actions": [events(INIT)]})
    run = bench.relay()
    assert run.code == 1
    assert run.result["status"] == "failed"
    assert run.result["error"] == (
        "claude exited without a terminal result event; inspect events.jsonl and stderr.txt"
    )


def test_error_result_fails(bench):
    bench.script({"actions": [events(INIT, {**RESULT, "subtype": "error_max_turns"})]})
    run = bench.relay()
    assert (run.code, run.result["error"]) == (
        1,
        "claude returned an error result (error_max_turns)",
    )


def test_result_split_byte_by_byte_arrives_whole(bench):
    chunked = json.dumps({**RESULT, "result": "café — done ✅"}, ensure_ascii=False) + "\n"
    bench.script({"actions": [{"stdout_bytewise": chunked, "delay": 0.0005}]})
    run = bench.relay()
    assert run.result["finalMessage"] == "café — done ✅"


def test_a_read_only_lane_refuses_dangerously_skip_permissions(bench, global_config):
    """The Node relay lets the flag win over the lane; ours refuses (a deliberate difference)."""
    write_json(global_config, fleet_doc({"review": {"implementer": "claude", "readOnly": True}}))
    run = bench.relay("--lane", "review", "--dangerously-skip-permissions")
    assert run.code == 2
    assert (
        "lane review is read-only, and --dangerously-skip-permissions would let Claude Code write"
        in run.err
    )
    assert bench.fake.calls() == []


def test_lane_dials_apply(bench, global_config):
    write_json(
        global_config,
        fleet_doc({"deep": {"implementer": "claude", "effort": "max", "model": "opus"}}),
    )
    assert argv_tail(bench, "--lane", "deep") == [
        "--permission-mode", "acceptEdits", "--model", "opus", "--effort", "max",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ["--resume-last", "--session", "s"],
            "--resume-last and --session are mutually exclusive; pass only one",
        ),
        (
            ["--read-only", "--dangerously-skip-permissions"],
            "--read-only and --dangerously-skip-permissions are mutually exclusive",
        ),
        (
            ["--model", "bad model"],
            "--model contains unsupported characters (allowed: letters, digits, . _ : @ / [ ] -)",
        ),
        (
            ["--session", ""],
            "--session contains unsupported characters (allowed: letters, digits, . _ : -)",
        ),
        (
            ["--effort", "banana"],
            'invalid --effort "banana" (expected: low, medium, high, xhigh, max, ultracode)',
        ),
        (["--max-turns", "0"], "--max-turns must be a positive safe integer"),
        (["--max-budget-usd", ".5"], "--max-budget-usd must be a positive decimal number"),
        (["--max-budget-usd", "0"], "--max-budget-usd must be a positive decimal number"),
    ],
)
def test_usage_errors(bench, flags, message):
    run = bench.relay(*flags)
    assert (run.code, run.err) == (2, f"relay: {message}\n")
    assert not bench.out.exists()


def test_oversized_brief(bench):
    bench.brief.write_text("x" * 10_000_001)
    run = bench.relay()
    assert run.code == 2
    assert run.err.startswith("relay: brief is 11MB; Claude Code caps piped stdin at 10MB.")


def test_stderr_is_kept_in_full(bench):
    bench.script({"actions": [{"stderr": "line one\nline two\n"}, events(INIT, RESULT)]})
    run = bench.relay()
    assert (bench.out / "stderr.txt").read_text() == "line one\nline two\n"
    assert run.result["stderrPath"] == str(bench.out / "stderr.txt")
    assert "stderrTail" not in run.result


#: profile.json as the Node claude relay writes it (recorded from relay.mjs on Linux):
#: with the shell sandbox on a write run, without it on a read-only one.
NODE_PROFILE = (
    '{\n  "disableClaudeAiConnectors": true,\n  "permissions": {\n    "deny": [\n'
    '      "Bash(git commit *)",\n      "Bash(git * commit *)",\n      "Bash(git * commit)",\n'
    '      "Bash(git push *)",\n      "Bash(git * push *)",\n      "Bash(git * push)",\n'
    '      "Bash(claude *)",\n      "Bash(*claude-delegate*)"\n    ]\n  },\n'
    '  "sandbox": {\n    "enabled": true,\n    "failIfUnavailable": true,\n'
    '    "autoAllowBashIfSandboxed": true,\n    "allowUnsandboxedCommands": false,\n'
    '    "excludedCommands": [],\n    "filesystem": {\n      "disabled": false\n    }\n  }\n}\n'
)
NODE_READ_ONLY_PROFILE = (
    '{\n  "disableClaudeAiConnectors": true,\n  "permissions": {\n    "deny": []\n  }\n}\n'
)


@pytest.mark.parametrize(
    ("flags", "profile"),
    [
        ([], NODE_PROFILE),
        (["--dangerously-skip-permissions"], NODE_PROFILE),
        (["--read-only"], NODE_READ_ONLY_PROFILE),
    ],
    ids=["write", "dsp", "read-only"],
)
def test_the_profile_is_the_node_relays_byte_for_byte(bench, flags, profile):
    run = bench.relay(*flags)
    assert run.code == 0, run
    assert (bench.out / "profile.json").read_bytes() == profile.encode()


@pytest.mark.parametrize(
    ("event", "error"),
    [
        (
            {"subtype": "success", "is_error": True},
            "claude returned an error result (success)",
        ),
        ({"is_error": True}, "claude returned an error result"),
        ({"subtype": "Error", "is_error": False}, "claude returned an error result (Error)"),
        (
            {"subtype": "error_during_execution"},
            "claude returned an error result (error_during_execution)",
        ),
    ],
    ids=["success-subtype", "no-subtype", "capital-error", "no-is-error"],
)
def test_an_error_result_fails_whatever_its_subtype(bench, event, error):
    """As in the Node relay: `is_error: true`, or a subtype that is `error` or `error_…`."""
    result_event = {k: v for k, v in RESULT.items() if k not in ("subtype", "is_error")}
    bench.script({"actions": [events(INIT, {**result_event, **event})]})
    run = bench.relay()
    assert (run.code, run.result["status"], run.result["error"]) == (1, "failed", error)
    assert run.result["resultSubtype"] == event.get("subtype")


@pytest.mark.parametrize(
    "event",
    [{"subtype": "errorish", "is_error": False}, {"subtype": "success", "is_error": "true"}],
    ids=["errorish", "string-true"],
)
def test_what_is_not_an_error_result_completes(bench, event):
    bench.script({"actions": [events(INIT, {**RESULT, **event})]})
    run = bench.relay()
    assert (run.code, run.result["status"]) == (0, "completed"), run
