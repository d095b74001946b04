"""opencode: agents, --auto, the model rule, text parts, cost, the plan run's lockdown."""

from __future__ import annotations

import json

import pytest
from conftest import fleet_doc, write_json
from relaykit import DETECT_ONLY, Bench, argv_of


@pytest.fixture
def bench(tmp_path, home):
    bench = Bench(tmp_path, "opencode")
    bench.script(
        {},
        env_keys=[
            "PWD",
            "OPENCODE_PERMISSION",
            "OPENCODE_CONFIG_CONTENT",
            "OPENCODE_DISABLE_PROJECT_CONFIG",
        ],
    )
    return bench


HEAD = ["run", "--format", "json"]


@pytest.mark.parametrize(
    ("flags", "tail"),
    [
        ([], ["--agent", "build", "--model", "fake/model", "--auto"]),
        (["--read-only"], ["--agent", "plan", "--model", "fake/model"]),
        (["--no-auto"], ["--agent", "build", "--model", "fake/model"]),
        (
            ["--variant", "high"],
            ["--agent", "build", "--model", "fake/model", "--variant", "high", "--auto"],
        ),
        (["--agent", "custom"], ["--agent", "custom", "--model", "fake/model", "--auto"]),
        (["--pure"], ["--pure", "--agent", "build", "--model", "fake/model", "--auto"]),
        (["--resume-last"], ["--continue", "--agent", "build", "--model", "fake/model", "--auto"]),
        (
            ["--session", "ses_1"],
            ["--session", "ses_1", "--agent", "build", "--model", "fake/model", "--auto"],
        ),
        (
            ["--read-only", "--agent", "build"],
            ["--agent", "build", "--model", "fake/model", "--auto"],
        ),
    ],
)
def test_argv(bench, flags, tail):
    assert argv_of(bench, *flags) == [*HEAD, *tail]


def test_brief_on_stdin_and_pwd_pinned(bench):
    argv_of(bench)
    call = bench.fake.run_call()
    assert call["stdin"] == "smoke brief: run until killed.\n"
    assert call["env"]["PWD"] == str(bench.work)


def test_plan_run_denies_every_tool_but_the_read_tools(bench):
    (bench.work / "AGENTS.md").write_text("house rules\n")
    argv_of(bench, "--read-only")
    env = bench.fake.run_call()["env"]
    config = json.loads(env["OPENCODE_CONFIG_CONTENT"])
    assert config["agent"]["plan"] == {
        "disable": False,
        "mode": "primary",
        "permission": {
            "*": "deny",
            "bash": "deny",
            "edit": "deny",
            "task": "deny",
            "external_directory": "deny",
        },
    }
    last_word = config["mode"]["plan"]["permission"]
    assert list(last_word)[:2] == ["?*", "rea?"]
    assert (
        last_word["?*"] == "deny" and last_word["gre?"] == "allow" and last_word["glo?"] == "allow"
    )
    assert config["lsp"] is False
    assert config["instructions"] == [str(bench.work / "AGENTS.md")]
    top = json.loads(env["OPENCODE_PERMISSION"])
    assert (top["bash"], top["edit"], top["grep"], top["?*"]) == ("deny", "deny", "allow", "deny")
    assert env["OPENCODE_DISABLE_PROJECT_CONFIG"] == "1"
    result = bench.result
    assert (result["agent"], result["auto"], result["readOnlyViolation"]) == ("plan", True, False)


def test_plan_run_keeps_the_users_inline_config_underneath(bench):
    inline = json.dumps(
        {
            "model": "x/y",
            "mode": {"plan": {"permission": {"bash": "allow"}}},
            "instructions": ["/a.md"],
        }
    )
    bench.relay("--read-only", env=bench.fake.env(OPENCODE_CONFIG_CONTENT=inline))
    config = json.loads(bench.fake.run_call()["env"]["OPENCODE_CONFIG_CONTENT"])
    assert config["model"] == "x/y"
    assert list(config["mode"]["plan"]["permission"]) == [
        "bash",
        "?*",
        "rea?",
        "gre?",
        "glo?",
        "lis?",
        "todowrit?",
        "invali?",
    ]
    assert config["instructions"] == ["/a.md"]


def test_build_runs_get_no_override(bench):
    argv_of(bench)
    env = bench.fake.run_call()["env"]
    assert "OPENCODE_CONFIG_CONTENT" not in env and "OPENCODE_DISABLE_PROJECT_CONFIG" not in env


def test_a_write_that_still_lands_trips_the_wire(bench):
    bench.script({"actions": [{"write": ["hello2.txt", "x\n"]}]})
    run = bench.relay("--read-only", env=bench.fake.env(**DETECT_ONLY))
    assert run.result["readOnlyViolation"] is True


def test_resume_without_a_model(bench):
    done = bench.relay("--resume-last", plain=True)
    assert done.code == 0, done
    assert bench.fake.run_call()["argv"] == [*HEAD, "--continue", "--agent", "build", "--auto"]
    assert done.result["resumed"] is True


def test_fresh_run_needs_a_model(bench):
    done = bench.relay(plain=True)
    assert done.code == 2
    assert done.err.startswith("relay: no model given: pass --model provider/model")
    assert not bench.out.exists()


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ["--variant", "high & whoami"],
            "--variant contains unsupported characters (allowed: letters, digits, . _ : / -)",
        ),
        (
            ["--session", "s", "--resume-last"],
            "--session and --resume-last are mutually exclusive; pass only one",
        ),
    ],
)
def test_usage_errors(bench, flags, message):
    run = bench.relay(*flags)
    assert (run.code, run.err) == (2, f"relay: {message}\n")


def test_text_parts_session_and_cost(bench):
    stream = [
        {"type": "step_start", "sessionID": "ses_A"},
        {"type": "text", "sessionID": "ses_A", "part": {"id": "p1", "type": "text", "text": "Hel"}},
        {
            "type": "text",
            "sessionID": "ses_A",
            "part": {"id": "p2", "type": "text", "text": " world"},
        },
        {
            "type": "text",
            "sessionID": "ses_A",
            "part": {"id": "p1", "type": "text", "text": "Hello"},
        },
        {"type": "step_finish", "part": {"cost": 0.1}},
        {"type": "step_finish", "part": {"cost": 0.2}},
        {"type": "error", "error": {"message": "ignored"}},
    ]
    bench.script(
        {"actions": [{"stdout": "junk prefix " + "".join(json.dumps(e) for e in stream) + "\n"}]}
    )
    run = bench.relay()
    result = run.result
    assert (result["status"], result["sessionId"], result["finalMessage"]) == (
        "completed",
        "ses_A",
        "Hello world",
    )
    assert result["cost"] == 0.3
    assert (bench.out / "final.txt").read_text() == "Hello world"
    assert list(result)[-1] == "cost"


def test_lane_model_variant_and_provenance(bench, global_config):
    write_json(
        global_config,
        fleet_doc(
            {
                "feature": {"implementer": "opencode", "model": "opencode/grok", "variant": "high"},
                "review": {"implementer": "opencode", "model": "opencode/grok", "readOnly": True},
            }
        ),
    )
    done = bench.relay("--lane", "feature", plain=True)
    assert bench.fake.calls("run")[-1]["argv"] == [
        *HEAD, "--agent", "build", "--model", "opencode/grok", "--variant", "high", "--auto",
    ]  # fmt: skip
    assert (done.result["lane"], done.result["laneSource"], done.result["variant"]) == (
        "feature",
        "global",
        "high",
    )
    bench.relay("--lane", "review", "--session", "ses_review", plain=True)
    assert bench.fake.calls("run")[-1]["argv"] == [
        *HEAD, "--session", "ses_review", "--agent", "plan", "--model", "opencode/grok",
    ]  # fmt: skip
    bench.relay("--lane", "feature", "--model", "openai/gpt-test", "--variant", "low", plain=True)
    argv = bench.fake.calls("run")[-1]["argv"]
    assert argv[argv.index("--model") + 1] == "openai/gpt-test"
    assert argv[argv.index("--variant") + 1] == "low"
