"""kilo: agents, --auto, an optional model, the plan run's lockdown, events, usage, discover."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest
from conftest import PYTHON, fleet_doc, git, run, write_json
from discoverkit import install
from fakes import ROOT, relay_argv
from relaykit import DETECT_ONLY, Bench, argv_of

HEAD = ["run", "--format", "json"]
SESSION = "ses_db1d00d2cffeq0wmabZKcf4WH5"

# What kilo 7.7.7 printed for `kilo run --format json -m mock/mock-model --auto
# 'Run the probe. [nest-probe]'` against a scripted model (one bash call, then a
# final text; exit 0), line for line.
STEP_START = '{"type":"step_start","timestamp":1796608099904,"sessionID":"ses_db1d00d2cffeq0wmabZKcf4WH5","part":{"id":"prt_24e300625001t5Atp319vQxoBm","sessionID":"ses_db1d00d2cffeq0wmabZKcf4WH5","messageID":"msg_24e300480001NAJPVqOY24XEup","type":"step-start","snapshot":"444a8fa98e219b9ee8585973bba9425676aba452"}}\n'
TOOL_USE = '{"type":"tool_use","timestamp":1796608100116,"sessionID":"ses_db1d00d2cffeq0wmabZKcf4WH5","part":{"id":"prt_24e3006280015z0EhP96bRjVjY","sessionID":"ses_db1d00d2cffeq0wmabZKcf4WH5","messageID":"msg_24e300480001NAJPVqOY24XEup","type":"tool","callID":"call_1","tool":"bash","state":{"status":"completed","input":{"command":"touch hello.txt && echo WT-WRITE-OK; (touch ../out/outside-probe && echo OUTSIDE-WRITE-OK) 2>&1 | tail -1; grep -E \'^(Seccomp|NoNewPrivs|CapEff):\' /proc/self/status | tr \'\\\\n\' \' \'; echo; echo NS $(readlink /proc/self/ns/user) $(readlink /proc/self/ns/net); echo PID1 $(tr \'\\\\0\' \' \' < /proc/1/cmdline | cut -c1-200); id -u","description":"probe"},"output":"WT-WRITE-OK\\nOUTSIDE-WRITE-OK\\nCapEff:\\t000001fffeffffff NoNewPrivs:\\t0 Seccomp:\\t0 \\nNS user:[4026531837] net:[4026531833]\\nPID1 /process_api --firecracker-init --addr 0.0.0.0:2024 --max-ws-buffer-size 32768 --block-local-connections --log-vsock-port 5002 --control-vsock-port 5001 --listen-vsock-port 2024 --tcp-readiness-only -\\n0\\n","title":"probe","metadata":{"output":"WT-WRITE-OK\\nOUTSIDE-WRITE-OK\\nCapEff:\\t000001fffeffffff NoNewPrivs:\\t0 Seccomp:\\t0 \\nNS user:[4026531837] net:[4026531833]\\nPID1 /process_api --firecracker-init --addr 0.0.0.0:2024 --max-ws-buffer-size 32768 --block-local-connections --log-vsock-port 5002 --control-vsock-port 5001 --listen-vsock-port 2024 --tcp-readiness-only -\\n0\\n","exit":0,"description":"probe","truncated":false,"approval":{"source":"global","rule":{"permission":"bash","pattern":"*","action":"allow"},"outsideWorkspace":true}},"time":{"start":1796608099895,"end":1796608100110}}}}\n'
STEP_FINISH_TOOLS = '{"type":"step_finish","timestamp":1796608100189,"sessionID":"ses_db1d00d2cffeq0wmabZKcf4WH5","part":{"id":"prt_24e300757001Vk5GvLf23sya3D","sessionID":"ses_db1d00d2cffeq0wmabZKcf4WH5","messageID":"msg_24e300480001NAJPVqOY24XEup","type":"step-finish","reason":"tool-calls","snapshot":"570a0917842ae633c455a5874e4699fc6980b3a9","metrics":{"generation":9.868421052631579,"source":"computed"},"time":{"start":1796608099877,"end":1796608100181,"elapsed":304},"cost":0,"tokens":{"total":14,"input":11,"output":3,"reasoning":0,"cache":{"read":0,"write":0}}}}\n'
STEP_START_2 = '{"type":"step_start","timestamp":1796608100501,"sessionID":"ses_db1d00d2cffeq0wmabZKcf4WH5","part":{"id":"prt_24e30088a001Iht8VbUJOi8y8Z","sessionID":"ses_db1d00d2cffeq0wmabZKcf4WH5","messageID":"msg_24e3007b7001fMaZ4h7IZb8y9w","type":"step-start","snapshot":"570a0917842ae633c455a5874e4699fc6980b3a9"}}\n'
TEXT = '{"type":"text","timestamp":1796608100501,"sessionID":"ses_db1d00d2cffeq0wmabZKcf4WH5","part":{"id":"prt_24e30088e001l5egTpJk3MY1j5","sessionID":"ses_db1d00d2cffeq0wmabZKcf4WH5","messageID":"msg_24e3007b7001fMaZ4h7IZb8y9w","type":"text","text":"Done: probe ran.","time":{"start":1796608100494,"end":1796608100497}}}\n'
STEP_FINISH_STOP = '{"type":"step_finish","timestamp":1796608100594,"sessionID":"ses_db1d00d2cffeq0wmabZKcf4WH5","part":{"id":"prt_24e3008e9001ZKk4JAERH17Nzg","sessionID":"ses_db1d00d2cffeq0wmabZKcf4WH5","messageID":"msg_24e3007b7001fMaZ4h7IZb8y9w","type":"step-finish","reason":"stop","snapshot":"570a0917842ae633c455a5874e4699fc6980b3a9","metrics":{"generation":31.914893617021278,"source":"computed"},"time":{"start":1796608100490,"end":1796608100584,"elapsed":94},"cost":0,"tokens":{"total":14,"input":11,"output":3,"reasoning":0,"cache":{"read":0,"write":0}}}}\n'

# kilo's last event when a permission it would ask for is rejected headless (exit 1),
# and when its server fails (exit 1, the cause only in kilo's log).
REJECTED = (
    '{"type":"error","timestamp":1796608200000,"sessionID":"ses_db1d00d2cffeq0wmabZKcf4WH5",'
    '"error":"run ended with an auto-rejected permission; pass --auto for autonomous use"}\n'
)
SERVER_ERROR = (
    '{"type":"error","timestamp":1796613596500,"sessionID":"ses_db17c2b87ffeoJq6JHam03KIaa",'
    '"error":{"name":"UnknownError","data":{"message":"Unexpected server error. Check server '
    'logs for details.","ref":"err_afe8e1e6"}}}\n'
)
PLAN_ENV = ["PWD", "KILO_CONFIG_CONTENT", "KILO_PERMISSION", "KILO_DISABLE_PROJECT_CONFIG",
            "OPENCODE_CONFIG_CONTENT", "OPENCODE_PERMISSION", "OPENCODE_DISABLE_PROJECT_CONFIG"]  # fmt: skip


def scripted(*chunks: str, exit: int = 0) -> dict:
    return {"actions": [{"stdout": "".join(chunks)}], "exit": exit}


@pytest.fixture
def bench(tmp_path, home):
    bench = Bench(tmp_path, "kilo")
    bench.script({}, env_keys=PLAN_ENV)
    return bench


# ---------------------------------------------------------------- argv per mode


@pytest.mark.parametrize(
    ("flags", "tail"),
    [
        ([], ["--agent", "code", "--auto"]),
        (
            ["--model", "mock/mock-model"],
            ["--agent", "code", "--model", "mock/mock-model", "--auto"],
        ),
        (
            ["--model", "kilo/~anthropic/claude-sonnet-latest"],
            ["--agent", "code", "--model", "kilo/~anthropic/claude-sonnet-latest", "--auto"],
        ),
        (["--read-only"], ["--agent", "plan"]),
        (["--read-only", "--auto"], ["--agent", "plan"]),
        (["--no-auto"], ["--agent", "code"]),
        (["--variant", "high"], ["--agent", "code", "--variant", "high", "--auto"]),
        (["--agent", "debug"], ["--agent", "debug", "--auto"]),
        (["--pure"], ["--pure", "--agent", "code", "--auto"]),
        (["--resume-last"], ["--continue", "--agent", "code", "--auto"]),
        (["--session", SESSION], ["--session", SESSION, "--agent", "code", "--auto"]),
        (
            ["--read-only", "--session", SESSION, "--model", "mock/mock-model"],
            ["--session", SESSION, "--agent", "plan", "--model", "mock/mock-model"],
        ),
        (["--read-only", "--agent", "code"], ["--agent", "code", "--auto"]),
    ],
)
def test_argv(bench, flags, tail):
    assert argv_of(bench, *flags, env=bench.fake.env(**DETECT_ONLY)) == [*HEAD, *tail]


def test_brief_on_stdin_pwd_pinned_and_no_model_needed(bench):
    done = bench.relay()
    assert done.code == 0, done
    call = bench.fake.run_call()
    assert call["stdin"] == "smoke brief: run until killed.\n"
    assert call["env"]["PWD"] == str(bench.work)
    assert "--model" not in call["argv"]
    result = done.result
    assert (result["tool"], result["agent"], result["model"], result["auto"]) == (
        "kilo", "code", None, True,
    )  # fmt: skip
    assert result["kiloVersion"] == "fake-cli 0.0.0"


def test_write_runs_get_no_override(bench):
    argv_of(bench)
    env = bench.fake.run_call()["env"]
    assert set(env) == {"PWD"}


# ---------------------------------------------------------------- the plan run


def test_plan_run_denies_every_tool_but_the_read_tools_through_kilos_variables(bench):
    (bench.work / "AGENTS.md").write_text("house rules\n")
    done = bench.relay("--read-only", env=bench.fake.env(**DETECT_ONLY))
    assert done.code == 0, done
    env = bench.fake.run_call()["env"]
    config = json.loads(env["KILO_CONFIG_CONTENT"])
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
    assert list(config["mode"]["plan"]["permission"]) == [
        "?*", "rea?", "gre?", "glo?", "lis?", "todowrit?", "invali?",
    ]  # fmt: skip
    assert config["mode"]["plan"]["permission"]["?*"] == "deny"
    assert (config["snapshot"], config["lsp"]) == (False, False)
    assert config["instructions"] == [str(bench.work / "AGENTS.md")]
    top = json.loads(env["KILO_PERMISSION"])
    assert (top["bash"], top["edit"], top["read"]["*"], top["?*"]) == (
        "deny", "deny", "allow", "deny",
    )  # fmt: skip
    assert env["KILO_DISABLE_PROJECT_CONFIG"] == "1"
    assert not {"OPENCODE_CONFIG_CONTENT", "OPENCODE_PERMISSION"} & set(env)
    result = done.result
    assert (result["agent"], result["readOnlyViolation"]) == ("plan", False)


def test_plan_run_keeps_the_users_inline_config_underneath(bench):
    inline = json.dumps({"model": "x/y", "mode": {"plan": {"permission": {"bash": "allow"}}}})
    bench.relay("--read-only", env=bench.fake.env(KILO_CONFIG_CONTENT=inline, **DETECT_ONLY))
    config = json.loads(bench.fake.run_call()["env"]["KILO_CONFIG_CONTENT"])
    assert config["model"] == "x/y"
    assert list(config["mode"]["plan"]["permission"])[:2] == ["bash", "?*"]
    assert config["snapshot"] is False


def test_plan_run_makes_the_plans_folder_at_the_top_of_the_work_tree(bench):
    sub = bench.work / "pkg"
    sub.mkdir()
    done = bench.relay("--read-only", "--cd", str(sub), env=bench.fake.env(**DETECT_ONLY))
    assert done.code == 0, done
    plans = bench.work / ".kilo" / "plans"
    assert plans.is_dir() and os.listdir(plans) == []
    assert git(bench.work, "status", "--porcelain", "--untracked-files=all") == ""
    assert done.result["touchedFiles"] == []


def test_no_plans_folder_is_made_through_a_link(bench, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (bench.work / ".kilo").symlink_to(outside)
    bench.relay("--read-only", env=bench.fake.env(**DETECT_ONLY))
    assert os.listdir(outside) == []


def test_write_runs_make_no_plans_folder(bench):
    argv_of(bench)
    assert not (bench.work / ".kilo").exists()


def test_a_write_that_still_lands_trips_the_wire(bench):
    bench.script({"actions": [{"write": ["hello2.txt", "x\n"]}]})
    done = bench.relay("--read-only", env=bench.fake.env(**DETECT_ONLY))
    assert done.result["readOnlyViolation"] is True
    assert done.result["readOnlyChanges"] == ["hello2.txt"]


def _bwrap_problem() -> str | None:
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return "bwrap is not installed here"
    done = subprocess.run(
        [bwrap, "--ro-bind", "/", "/", "--proc", "/proc", "--unshare-pid", "--", "true"],
        capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    return None if done.returncode == 0 else f"bwrap cannot start here: {done.stderr[:200]}"


@pytest.mark.skipif(_bwrap_problem() is not None, reason=str(_bwrap_problem()))
def test_a_confined_plan_run_may_write_its_plans_folder_and_nothing_else(bench):
    plan = bench.work / ".kilo" / "plans" / "plan.md"
    bench.script(
        {
            "actions": [
                {"write": [str(plan), "plan\n"]},
                {"git": ["-c", f"alias.w=!echo x > {bench.work}/hello.txt || true", "w"]},
            ]
        },
        env_keys=PLAN_ENV,
    )
    done = bench.relay("--read-only")
    assert done.code == 0, done
    result = done.result
    assert (result["readOnlyEnforced"], result["status"]) == ("bwrap", "completed")
    assert plan.read_text() == "plan\n"
    assert not (bench.work / "hello.txt").exists()
    # What kilo's own folder holds is a change all the same: the verdict says so.
    assert (result["readOnlyViolation"], result["readOnlyChanges"]) == (
        True, [".kilo/plans/plan.md"],
    )  # fmt: skip


# ---------------------------------------------------------------- events


def test_session_final_cost_and_summed_tokens_from_kilos_own_events(bench):
    bench.script(
        scripted(STEP_START, TOOL_USE, STEP_FINISH_TOOLS, STEP_START_2, TEXT, STEP_FINISH_STOP)
    )
    done = bench.relay()
    result = done.result
    assert (result["status"], result["sessionId"], result["finalMessage"]) == (
        "completed", SESSION, "Done: probe ran.",
    )  # fmt: skip
    assert result["usage"] == {
        "input": 22, "output": 6, "reasoning": 0, "total": 28, "cache": {"read": 0, "write": 0},
    }  # fmt: skip
    assert result["cost"] == 0
    assert list(result)[-1] == "cost"
    assert (bench.out / "final.txt").read_text() == "Done: probe ran."
    assert f"session id (resume with: --session {SESSION}): {SESSION}" in done.out


def test_a_run_without_steps_has_no_usage(bench):
    bench.script(scripted(STEP_START, TEXT))
    result = bench.relay().result
    assert (result["usage"], result["cost"], result["finalMessage"]) == (
        None, None, "Done: probe ran.",
    )  # fmt: skip


@pytest.mark.parametrize(
    ("line", "error"),
    [
        (
            REJECTED,
            "kilo reported an error: run ended with an auto-rejected permission; "
            "pass --auto for autonomous use",
        ),
        (
            SERVER_ERROR,
            "kilo reported an error: Unexpected server error. Check server logs for details.",
        ),
    ],
)
def test_a_failed_exit_says_why_from_its_error_event(bench, line, error):
    bench.script(scripted(STEP_START, line, exit=1))
    done = bench.relay()
    assert done.code == 1, done
    assert (done.result["status"], done.result["error"]) == ("failed", error)


def test_an_error_event_in_a_run_that_exits_0_leaves_it_completed(bench):
    bench.script(scripted(STEP_START, REJECTED, TEXT))
    result = bench.relay().result
    assert (result["status"], result["exitCode"], "error" in result) == ("completed", 0, False)


# ---------------------------------------------------------------- resume


def test_resume_by_id_and_the_latest(bench):
    bench.script(scripted(STEP_START, TEXT))
    done = bench.relay("--session", SESSION)
    result = done.result
    assert (result["resumed"], result["resumeLast"]) == (True, False)
    assert (result["sessionRequested"], result["sessionChanged"]) == (SESSION, False)
    done = bench.relay("--resume-last")
    assert bench.fake.calls("run")[-1]["argv"] == [*HEAD, "--continue", "--agent", "code", "--auto"]
    result = done.result
    assert (result["resumed"], result["resumeLast"], result["sessionRequested"]) == (
        True, True, "last",
    )  # fmt: skip


def test_continue_a_run_resumes_its_session(bench):
    bench.script(scripted(STEP_START, TEXT))
    first = bench.relay()
    assert first.code == 0, first
    run_id = first.result["relayRunId"]
    argv = relay_argv(
        "kilo", "--brief", str(bench.brief), "--continue", run_id, "--out-dir", str(bench.tmp / "2")
    )
    done = run(argv, env=bench.fake.env())
    assert done.code == 0, done
    assert bench.fake.calls("run")[-1]["argv"] == [
        *HEAD, "--session", SESSION, "--agent", "code", "--auto",
    ]  # fmt: skip


# ---------------------------------------------------------------- options and lanes


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ["--model", "kilo/a b"],
            "--model contains unsupported characters (allowed: letters, digits, . _ : / ~ -)",
        ),
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
    done = bench.relay(*flags)
    assert (done.code, done.err) == (2, f"relay: {message}\n")
    assert not bench.out.exists()


def test_lanes_model_variant_and_read_only(bench, global_config):
    write_json(
        global_config,
        fleet_doc(
            {
                "feature": {"implementer": "kilo", "model": "openrouter/x-1", "variant": "high"},
                "review": {"implementer": "kilo", "readOnly": True},
            }
        ),
    )
    done = bench.relay("--lane", "feature")
    assert bench.fake.calls("run")[-1]["argv"] == [
        *HEAD, "--agent", "code", "--model", "openrouter/x-1", "--variant", "high", "--auto",
    ]  # fmt: skip
    assert (done.result["lane"], done.result["laneSource"]) == ("feature", "global")
    done = bench.relay("--lane", "review", env=bench.fake.env(**DETECT_ONLY))
    assert bench.fake.calls("run")[-1]["argv"] == [*HEAD, "--agent", "plan"]
    assert done.result["readOnlyViolation"] is False
    refused = bench.relay("--lane", "review", "--agent", "code")
    assert refused.code == 2
    assert refused.err == (
        "relay: lane review is read-only, and --agent would let Kilo Code write; a read-only "
        "lane is a policy: drop the flag, or dispatch through a lane that may write\n"
    )


def test_missing_binary(tmp_path, home):
    bench = Bench(tmp_path, "kilo")
    (bench.fake.bin / "kilo").unlink()
    done = bench.relay()
    assert done.code == 127
    assert (done.result["status"], done.result["exitCode"]) == ("kilo_unavailable", 127)
    assert (
        "`kilo` not found on PATH. Get it with `npm i -g @kilocode/cli`, then sign in: "
        "`kilo auth login`" in done.err
    )


# ---------------------------------------------------------------- discover


def test_discover_reads_the_version_the_login_rows_and_the_models(tmp_path, home):
    bindir = install(
        tmp_path / "bin",
        {
            "kilo": {
                "--version": ("7.7.7\n", "", 0),
                "auth list": (
                    "┌  Credentials ~/.local/share/kilo/auth.json\n│\n●  OpenRouter api\n│\n"
                    "└  1 credentials\n",
                    "",
                    0,
                ),
                "models": ("kilo/~anthropic/claude-sonnet-latest\nmock/mock-model\n", "", 0),
            }
        },
    )
    found = _discover(bindir, home)
    assert (found["key"], found["version"], found["authenticated"]) == ("kilo", "7.7.7", True)
    assert found["models"]["values"] == ["kilo/~anthropic/claude-sonnet-latest", "mock/mock-model"]


def test_discover_says_logged_out_without_a_login_row(tmp_path, home):
    bindir = install(
        tmp_path / "bin",
        {
            "kilo": {
                "--version": ("7.7.7\n", "", 0),
                "auth list": ("┌  Credentials\n│\n└  0 credentials\n", "", 0),
            }
        },
    )
    assert _discover(bindir, home)["authenticated"] is False


def _discover(bindir, home) -> dict:
    """This implementer's entry in the report of its skill's discover.py."""
    script = ROOT / "skills" / "kilo-delegate" / "scripts" / "discover.py"
    env = {"PATH": f"{bindir}:/usr/bin:/bin", "HOME": str(home)}
    done = run([PYTHON, str(script)], env=env)
    assert done.code == 0, done
    return next(e for e in done.json()["discovered"] if e["key"] == "kilo")
