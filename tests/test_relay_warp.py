"""warp: the brief as one argv value (never a shell), ndjson events, refused dials."""

from __future__ import annotations

import json

import pytest
from conftest import fleet_doc, write_json
from relaykit import BRIEF, Bench, adapter, argv_of

from delegate_skills.relay.engine import Relay
from delegate_skills.relay.options import Usage

HEAD = ["agent", "run", "--output-format", "ndjson", "--cwd"]
RUN_STARTED = {
    "type": "system",
    "event_type": "run_started",
    "run_id": "r-1",
    "run_url": "https://oz.warp.dev/runs/r-1",
}
CONVERSATION = {"type": "system", "event_type": "conversation_started", "conversation_id": "conv-1"}


def events(*items) -> dict:
    return {"stdout": "".join(json.dumps(i) + "\n" for i in items)}


@pytest.fixture
def bench(tmp_path, home):
    bench = Bench(tmp_path, "warp")
    bench.script({}, env_keys=["WARP_API_KEY"])
    return bench


def test_default_argv_brief_is_the_prompt_value(bench):
    argv = argv_of(bench)
    assert argv == [*HEAD, str(bench.work), "--prompt", BRIEF]
    call = bench.fake.run_call()
    assert call["stdin"] == ""
    assert call["cwd"] == str(bench.work)
    assert (bench.out / "brief.txt").read_text() == BRIEF


def test_shell_metacharacters_reach_oz_byte_for_byte(bench):
    brief = (
        "Fix $(touch pwned-subst) and `touch pwned-tick` now;\n"
        'quotes: \'single\' "double" \\"escaped\\" $HOME ${PATH} * ? ~\n'
        "| & && || > out.txt < in.txt ; exit 1\n"
        "\ttabbed line, trailing spaces   \n"
        "--version\n"
    )
    bench.brief.write_text(brief)
    argv = argv_of(bench)
    assert argv[-2:] == ["--prompt", brief]
    assert bench.fake.calls("run")[-1]["argv"][-1].encode() == brief.encode()
    assert not list(bench.work.glob("pwned*"))
    assert not list(bench.tmp.glob("pwned*"))
    assert not (bench.work / "out.txt").exists()
    assert bench.result["touchedFiles"] == []


def test_a_brief_with_a_nul_character_is_a_usage_error(bench):
    bench.brief.write_bytes(b"before\0after\n")
    run = bench.relay()
    assert (run.code, run.err) == (
        2,
        "relay: brief contains a NUL byte, which cannot be passed in the --prompt argument\n",
    )
    assert not bench.out.exists()


def test_a_brief_argv_cannot_carry_is_a_usage_error(bench):
    bench.brief.write_text("x" * (121 * 1024))
    run = bench.relay()
    assert (run.code, run.err) == (
        2,
        "relay: brief is 121 KiB; oz takes it as one --prompt argument, which the OS caps near "
        "128 KiB. Put large context in the workspace and point a shorter brief at it.\n",
    )
    assert not bench.out.exists()
    bench.brief.write_text("y" * (119 * 1024))
    assert argv_of(bench)[-1] == "y" * (119 * 1024)


@pytest.mark.parametrize(
    ("flags", "middle"),
    [
        (["--model", "gpt-5"], ["--model", "gpt-5"]),
        (["--profile", "p1"], ["--profile", "p1"]),
        (["--name", "my run"], ["--name", "my run"]),
        (["--conversation", "conv-0"], ["--conversation", "conv-0"]),
        (["--skill", "org/repo:name"], ["--skill", "org/repo:name"]),
        (["--mcp", '{"a": 1}', "--mcp", "/x.json"], ["--mcp", '{"a": 1}', "--mcp", "/x.json"]),
        (["--no-snapshot"], ["--no-snapshot"]),
    ],
)
def test_each_flag(bench, flags, middle):
    assert argv_of(bench, *flags) == [*HEAD, str(bench.work), *middle, "--prompt", BRIEF]


def test_all_flags_in_order(bench):
    argv = argv_of(
        bench,
        "--no-snapshot", "--mcp", "/x.json", "--skill", "repo:name", "--conversation", "conv-0",
        "--name", "my run", "--profile", "p1", "--model", "gpt-5", "--mcp", '{"a":1}',
    )  # fmt: skip
    assert argv == [
        *HEAD, str(bench.work), "--model", "gpt-5", "--profile", "p1", "--name", "my run",
        "--conversation", "conv-0", "--skill", "repo:name", "--mcp", "/x.json",
        "--mcp", '{"a":1}', "--no-snapshot", "--prompt", BRIEF,
    ]  # fmt: skip
    result = bench.result
    assert (result["model"], result["profile"], result["snapshotDisabled"], result["resumed"]) == (
        "gpt-5",
        "p1",
        True,
        True,
    )


def test_lane_sets_model_and_timeout_and_flags_win(bench, global_config):
    write_json(
        global_config,
        fleet_doc({"fast": {"implementer": "warp", "model": "m1", "timeout": "5m"}}),
    )
    argv = argv_of(bench, "--lane", "fast")
    assert argv == [*HEAD, str(bench.work), "--model", "m1", "--prompt", BRIEF]
    assert (bench.result["lane"], bench.result["laneSource"], bench.result["model"]) == (
        "fast",
        "global",
        "m1",
    )
    argv = argv_of(bench, "--lane", "fast", "--model", "flag-model")
    assert argv[argv.index("--model") + 1] == "flag-model"


def test_a_bad_lane_model_is_refused_like_a_flag(bench, monkeypatch):
    def resolved(cwd, lane, key):
        return {"source": "global", "dials": {"model": "a b"}}

    monkeypatch.setattr("delegate_skills.lanes.resolve", resolved)
    with pytest.raises(Usage, match=r"^--model value contains unsupported characters"):
        Relay(adapter("warp")).configure(["--brief", str(bench.brief), "--lane", "x"])


@pytest.mark.parametrize(
    "dial", ["readOnly", "sandbox", "permissionMode", "force", "effort", "variant", "provider"]
)
def test_lane_dials_oz_cannot_honour_are_refused(bench, monkeypatch, dial):
    def resolved(cwd, lane, key):
        return {"source": "global", "dials": {"model": "m1", dial: True}}

    monkeypatch.setattr("delegate_skills.lanes.resolve", resolved)
    relay = Relay(adapter("warp"))
    with pytest.raises(Usage) as refused:
        relay.configure(["--brief", str(bench.brief), "--cd", str(bench.work), "--lane", "ro"])
    assert str(refused.value) == (
        f'lane "ro" sets the {dial} dial, which the Warp Agent CLI has no flag for; '
        "remove it from the lane or use a different implementer"
    )


def test_a_read_only_lane_never_dispatches(bench, global_config):
    write_json(global_config, fleet_doc({"ro": {"implementer": "warp", "readOnly": True}}))
    run = bench.relay("--lane", "ro")
    assert run.code == 2
    assert "warp does not support readOnly" in run.err
    assert not bench.out.exists()
    assert bench.fake.calls() == []


ALLOWED = "(allowed: letters, digits, . _ : / -)"


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--model", "a b"], f"--model value contains unsupported characters {ALLOWED}"),
        (["--model", ""], f"--model value contains unsupported characters {ALLOWED}"),
        (["--profile", "p;rm"], f"--profile value contains unsupported characters {ALLOWED}"),
        (["--conversation", "-x"], f"--conversation value contains unsupported characters {ALLOWED}"),
        (["--skill", ""], '--skill value must be non-empty and must not start with "-"'),
        (["--skill", "-x"], '--skill value must be non-empty and must not start with "-"'),
        (["--mcp", "a.json", "--mcp", "--x"], '--mcp value must be non-empty and must not start with "-"'),
        (["--name", ""], '--name value must be non-empty and must not start with "-"'),
        (["--timeout", "0s"], '--timeout "0s" is not a duration; use h/m/s strings like 30m, 90s, or 1h30m'),
        (["--timeout", "10000h"], '--timeout "10000h" is not a duration; use h/m/s strings like 30m, 90s, or 1h30m'),
        (["--read-only"], "unknown option: --read-only"),
        (["--session", "s"], "unknown option: --session"),
        (["--sandbox", "x"], "unknown option: --sandbox"),
        (["--mcp"], "--mcp requires a value"),
    ],
)  # fmt: skip
def test_usage_errors(bench, flags, message):
    run = bench.relay(*flags)
    assert (run.code, run.err) == (2, f"relay: {message}\n")
    assert not bench.out.exists()


def test_event_stream_run_ids_and_the_narration(bench):
    bench.script(
        {
            "actions": [
                events(
                    RUN_STARTED,
                    CONVERSATION,
                    {"type": "agent_reasoning", "text": "secret thoughts"},
                    {"type": "agent", "text": "Now let me run the gates."},
                    {"type": "tool_call", "name": "shell"},
                    {"type": "agent", "text": "   "},
                    {"type": "agent", "content": [{"type": "text", "text": "part"}, {"type": "x"}]},
                    {"type": "agent", "message": {"content": "from a message"}},
                    {"type": "agent", "agent_output": "FILES: a.txt"},
                ),
                {"stderr": "progress\n"},
            ]
        }
    )
    run = bench.relay()
    result = run.result
    assert (result["status"], result["runId"], result["runUrl"], result["conversationId"]) == (
        "completed",
        "r-1",
        "https://oz.warp.dev/runs/r-1",
        "conv-1",
    )
    narration = "Now let me run the gates.\n\npart\n\nfrom a message\n\nFILES: a.txt"
    assert result["finalMessage"] == narration
    assert (bench.out / "final.txt").read_text() == narration
    assert (bench.out / "stderr.txt").read_text() == "progress\n"
    assert "secret thoughts" not in run.out
    for line in (
        "mode: full local tool access — the Warp Agent CLI has no sandbox, permission mode, "
        "or read-only run",
        "conversation id (continue with: --conversation conv-1): conv-1",
        "run id: r-1",
        "run url: https://oz.warp.dev/runs/r-1",
        "--- oz final report ---",
    ):
        assert line in run.out.splitlines(), run.out
    assert "readOnlyViolation" not in result


def test_continue_a_conversation(bench):
    bench.script({"actions": [events({**CONVERSATION, "conversation_id": "conv-0"})]})
    argv = argv_of(bench, "--conversation", "conv-0", "--no-snapshot")
    assert argv[-5:] == ["--conversation", "conv-0", "--no-snapshot", "--prompt", BRIEF]
    run_out = bench.relay("--conversation", "conv-0").out
    assert "mode: continued an existing conversation" in run_out
    assert bench.result["resumed"] is True
    assert bench.result["conversationId"] == "conv-0"


@pytest.mark.parametrize(
    ("event", "error"),
    [
        ({"type": "system", "event_type": "run_failed"}, "oz reported run_failed"),
        ({"type": "error", "message": "quota exhausted"}, "quota exhausted"),
        ({"type": "error", "error": "bad request"}, "bad request"),
        ({"type": "error"}, "oz reported error"),
    ],
)
def test_a_stream_error_fails_an_exit_0_run(bench, event, error):
    bench.script({"actions": [events(RUN_STARTED, event)]})
    run = bench.relay()
    assert run.code == 1, run
    result = run.result
    assert (result["status"], result["exitCode"], result["error"]) == ("failed", 1, error)
    assert result["stderrTail"] == []
    assert run.out.count("relay: failed") == 1


def test_quota_failure_keeps_the_exit_code(bench):
    quota = (
        "In order to use Warp's AI features, subscribe to a Warp plan, or bring your own inference."
    )
    bench.script({"actions": [{"stderr": quota + "\n"}], "exit": 1})
    run = bench.relay()
    assert run.code == 1
    assert (run.result["status"], run.result["stderrTail"]) == ("failed", [quota])


def test_no_report_and_default_watchdog(bench):
    run = bench.relay()
    assert run.result["finalMessage"] == ""
    assert run.result["finalPath"] is None
    assert "(no final message captured" in run.out
    assert "Watchdog default: 30m." in bench.relay("--help").out


def test_auth_environment_passes_through(bench):
    bench.relay(env=bench.fake.env(WARP_API_KEY="wk-1"))
    assert {c["kind"]: c["env"] for c in bench.fake.calls()} == {
        "version": {"WARP_API_KEY": "wk-1"},
        "run": {"WARP_API_KEY": "wk-1"},
    }


def test_result_field_order(bench):
    bench.script({"actions": [events(RUN_STARTED, CONVERSATION, {"type": "agent", "text": "ok"})]})
    bench.relay()
    assert list(bench.result) == [
        "schema", "lane", "laneSource", "tool", "workdir", "model", "profile",
        "snapshotDisabled", "resumed", "ozVersion", "startedAt", "finishedAt", "briefPath",
        "finalPath", "eventsPath", "stderrPath", "status", "exitCode", "signal", "runId",
        "runUrl", "conversationId", "finalMessage", "touchedFiles", "changes", "overlap", "relayRunId", "implementerArgv",
    ]  # fmt: skip
    assert (bench.result["tool"], bench.result["ozVersion"]) == ("oz", "fake-cli 0.0.0")


def test_failed_result_field_order(bench):
    bench.script({"exit": 3})
    bench.relay()
    assert tail_from(bench.result, "conversationId") == [
        "conversationId",
        "finalMessage",
        "touchedFiles",
        "changes",
        "overlap",
        "relayRunId",
        "implementerArgv",
        "stderrTail",
    ]


def tail_from(result: dict, first: str) -> list:
    """The result's field names from `first` on (what these tests pin)."""
    keys = list(result)
    return keys[keys.index(first) :]
