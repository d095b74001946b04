"""opencode: agents, --auto, the model rule, text parts, cost, the plan run's lockdown."""

from __future__ import annotations

import json

import pytest
from conftest import fleet_doc, write_json
from relaykit import Bench


@pytest.fixture
def bench(tmp_path, home):
    bench = Bench(tmp_path, "opencode")
    bench.script({}, env_keys=["PWD", "OPENCODE_PERMISSION"])
    return bench


def argv_of(bench, *flags) -> list[str]:
    run = bench.relay(*flags)
    assert run.code == 0, run
    return bench.fake.calls("run")[-1]["argv"]


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
    assert "OPENCODE_PERMISSION" not in call["env"]


def test_plan_run_denies_edits_and_the_shell(bench):
    argv_of(bench, "--read-only")
    permission = json.loads(bench.fake.run_call()["env"]["OPENCODE_PERMISSION"])
    assert permission["edit"] == "deny"
    assert permission["bash"] == "deny"
    result = bench.result
    assert (result["agent"], result["auto"], result["readOnlyViolation"]) == ("plan", True, False)


def test_a_write_that_still_lands_trips_the_wire(bench):
    bench.script({"actions": [{"write": ["hello2.txt", "x\n"]}]})
    run = bench.relay("--read-only")
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
