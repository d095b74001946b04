"""copilot: argv, the @file prompt, plan mode, tool denials, resume, the version probe."""

from __future__ import annotations

import json

import pytest
from conftest import fleet_doc, write_json
from relaykit import Bench, argv_of

HEAD = ["--output-format", "json", "--no-color", "--stream", "off"]
DIRECTIVE = (
    "Execute the instructions in the referenced file, then report what you did. "
    "Do not just summarize the file: "
)


def lines(*events: dict) -> str:
    return "".join(json.dumps(event) + "\n" for event in events)


def message(content: str) -> dict:
    return {"type": "assistant.message", "data": {"messageId": "m", "content": content}}


def result_event(session: str = "copilot-session-1") -> dict:
    return {"type": "result", "sessionId": session, "exitCode": 0, "usage": {"premiumRequests": 0}}


SUCCESS = lines(
    {"type": "session.tools_updated", "data": {}, "ephemeral": True},
    {"type": "user.message", "data": {"content": "@/tmp/out/brief.txt"}},
    message(""),
    message("working"),
    {"type": "assistant.message", "data": {"content": "ephemeral words"}, "ephemeral": True},
    message("fake copilot completed"),
    {"type": "assistant.idle", "data": {}, "ephemeral": True},
    result_event(),
)


def denial(text: str) -> dict:
    return {
        "type": "tool.execution_complete",
        "data": {
            "toolCallId": "c1",
            "success": False,
            "error": {"message": text, "code": "denied"},
        },
    }


@pytest.fixture
def bench(tmp_path, home, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # the run directory is in the temp dir
    bench = Bench(tmp_path, "copilot")
    bench.script({"actions": [{"stdout": SUCCESS}]})
    return bench


def brief(bench) -> str:
    return f"@{bench.out / 'brief.txt'}"


@pytest.mark.parametrize(
    ("flags", "middle", "resumed"),
    [
        ([], [], False),
        (["--read-only"], ["--mode", "plan"], False),
        (["--allow-all-tools"], ["--allow-all-tools"], False),
        (["--session", "copilot-session-1"], ["--resume=copilot-session-1"], True),
        (["--resume-last"], ["--continue"], True),
        (["--model", "fake-model", "--effort", "high"], ["--model", "fake-model", "--effort", "high"], False),
    ],
)  # fmt: skip
def test_argv_and_result(bench, flags, middle, resumed):
    prompt = (DIRECTIVE if resumed else "") + brief(bench)
    assert argv_of(bench, *flags) == [*HEAD, *middle, "-p", prompt]
    assert bench.fake.run_call()["stdin"] == ""
    result = bench.result
    assert result["status"] == "completed"
    assert result["finalMessage"] == "fake copilot completed"
    assert result["sessionId"] == "copilot-session-1"
    assert result["resumed"] is resumed
    assert result["readOnly"] is ("--read-only" in flags)
    assert result["allowAllTools"] is ("--allow-all-tools" in flags)


def test_brief_file_and_cwd(bench):
    argv_of(bench)
    call = bench.fake.run_call()
    assert call["cwd"] == str(bench.work)
    assert (bench.out / "brief.txt").read_text() == "smoke brief: run until killed.\n"
    assert (bench.out / "final.txt").read_text() == "fake copilot completed"


def test_preflight_is_dash_dash_version(bench):
    """`copilot version` checks for updates online and hangs offline; --version is local."""
    bench.script(
        version={"stdout": "GitHub Copilot CLI 1.0.102.\nRun 'copilot update' to check.\n"},
        run={"actions": [{"stdout": SUCCESS}]},
    )
    run = bench.relay()
    assert [c["argv"] for c in bench.fake.calls("version")] == [["--version"]]
    assert run.result["copilotVersion"] == "1.0.102"
    assert "·  copilot 1.0.102" in run.out


def test_preflight_failure_names_the_probe(bench):
    bench.script(version={"stdout": "", "exit": 4})
    result = bench.relay().result
    assert result["error"] == (
        "copilot --version preflight failed with exit 4; copilot was not dispatched"
    )


@pytest.mark.parametrize(
    ("stdout", "version"),
    [("fake-cli 0.0.0-smoke\n", "0.0.0-smoke"), ("no digits here\n", "no digits here")],
)
def test_version_parsing(bench, stdout, version):
    bench.script(version={"stdout": stdout}, run={"actions": [{"stdout": SUCCESS}]})
    assert bench.relay().result["copilotVersion"] == version


def test_run_dir_outside_cd_and_temp_is_added(bench, tmp_path):
    """Copilot's model reads the brief itself, and only under --cd or the temp dir."""
    other_tmp = tmp_path / "other-tmp"
    other_tmp.mkdir()
    env = bench.fake.env(TMPDIR=str(other_tmp))
    argv = argv_of(bench, env=env)
    assert argv == [*HEAD, "--add-dir", str(bench.out), "-p", brief(bench)]


def test_run_dir_inside_cd_needs_no_grant(bench, tmp_path):
    other_tmp = tmp_path / "other-tmp"
    other_tmp.mkdir()
    bench.out = bench.work / ".runs" / "one"
    argv = argv_of(bench, env=bench.fake.env(TMPDIR=str(other_tmp)))
    assert argv == [*HEAD, "-p", brief(bench)]


def test_denied_tool_call_fails_an_exit_zero_run(bench):
    text = (
        "Permission denied because no interactive user response was available. Retry in an "
        "interactive session so the user can approve it."
    )
    bench.script({"actions": [{"stdout": lines(message("tried"), denial(text), result_event())}]})
    run = bench.relay()
    assert run.code == 1, run
    result = run.result
    assert (result["status"], result["exitCode"]) == ("failed", 1)
    assert result["error"] == (
        "copilot auto-denied a tool call in headless mode: Permission denied because no "
        "interactive user response was available. Retry in an interactive session so the user "
        "can approve it. Pass --allow-all-tools to grant full tool permissions"
    )
    assert result["stderrTail"] == []


def test_plan_mode_denial_does_not_suggest_allow_all_tools(bench):
    text = "`create` was blocked. Plan mode does not permit changes outside the session folder."
    bench.script({"actions": [{"stdout": lines(denial(text), result_event())}]})
    result = bench.relay("--read-only").result
    assert result["status"] == "failed"
    assert result["error"].startswith(
        "copilot auto-denied a tool call in headless mode: `create` was blocked."
    )
    assert "plan mode" in result["error"]
    assert "Pass --allow-all-tools" not in result["error"]


def test_unauthenticated_exit_has_no_error_key(bench):
    bench.script(
        {"actions": [{"stderr": "Error: No authentication information found.\n"}], "exit": 1}
    )
    result = bench.relay().result
    assert (result["status"], result["exitCode"]) == ("failed", 1)
    assert result["stderrTail"] == ["Error: No authentication information found."]
    assert "error" not in result
    assert result["sessionId"] is None


def test_last_line_without_newline_is_read(bench):
    stream = lines(message("first")) + json.dumps(message("the end"))
    bench.script({"actions": [{"stdout": stream}]})
    assert bench.relay().result["finalMessage"] == "the end"


def test_read_only_lane_refuses_allow_all_tools(bench, global_config):
    write_json(global_config, fleet_doc({"review": {"implementer": "copilot", "readOnly": True}}))
    assert argv_of(bench, "--lane", "review") == [*HEAD, "--mode", "plan", "-p", brief(bench)]
    assert (bench.result["readOnly"], bench.result["allowAllTools"]) == (True, False)
    run = bench.relay("--lane", "review", "--allow-all-tools")
    assert run.code == 2
    assert "lane review is read-only, and --allow-all-tools would let" in run.err


def test_lane_model_and_effort_yield_to_flags(bench, global_config):
    lane = {"implementer": "copilot", "model": "lane-model", "effort": "low"}
    write_json(global_config, fleet_doc({"feature": lane}))
    assert argv_of(bench, "--lane", "feature") == [
        *HEAD, "--model", "lane-model", "--effort", "low", "-p", brief(bench),
    ]  # fmt: skip
    argv = argv_of(bench, "--lane", "feature", "--effort", "max")
    assert argv[argv.index("--effort") + 1] == "max"
    assert (bench.result["effort"], bench.result["laneSource"]) == ("max", "global")


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ["--read-only", "--allow-all-tools"],
            "--read-only and --allow-all-tools are mutually exclusive; "
            "plan mode works without tool permissions",
        ),
        (
            ["--resume-last", "--session", "s-1"],
            "--resume-last and --session are mutually exclusive; pass only one",
        ),
        (["--session", "  "], "--session must not be empty"),
        (["--session", ""], "--session must not be empty"),
        (
            ["--session", "a b"],
            "--session value contains unsupported characters (allowed: letters, digits, . _ : / -)",
        ),
        (
            ["--model", "gpt & whoami"],
            "--model value contains unsupported characters (allowed: letters, digits, . _ : / -)",
        ),
        (["--effort", "foo"], 'invalid --effort "foo" (expected: low, medium, high, xhigh, max)'),
        (
            ["--timeout", "10"],
            '--timeout "10" is not a positive schedulable duration; use h/m/s strings like '
            "30m, 90s, or 1h30m (maximum ~24.8 days)",
        ),
    ],
)
def test_usage_errors(bench, flags, message):
    run = bench.relay(*flags)
    assert (run.code, run.err) == (2, f"relay: {message}\n")
    assert not bench.out.exists()


def test_summary_lines(bench):
    out = bench.relay("--read-only", "--session", "copilot-session-1").out
    assert "mode: plan (read-only)" in out
    assert "mode: resumed an existing session" in out
    assert "session id (resume with: --session copilot-session-1): copilot-session-1" in out
    assert "autonomy: --allow-all-tools" in bench.relay("--allow-all-tools").out


def test_result_field_order(bench):
    bench.relay()
    assert list(bench.result) == [
        "schema", "lane", "laneSource", "tool", "workdir", "model", "effort", "readOnly",
        "allowAllTools", "resumed", "sessionId", "copilotVersion", "startedAt", "finishedAt",
        "briefPath", "finalPath", "eventsPath", "stderrPath", "status", "exitCode", "signal",
        "finalMessage", "touchedFiles", "changes", "overlap", "relayRunId", "implementerArgv",
    ]  # fmt: skip
    assert bench.result["tool"] == "copilot"
