"""codex: argv, sandbox on resume, clean environment, thread id, final report."""

from __future__ import annotations

import json

import pytest
from conftest import fleet_doc, write_json
from relaykit import Bench, argv_of


@pytest.fixture
def bench(tmp_path, home):
    bench = Bench(tmp_path, "codex")
    bench.script({}, env_keys=["HOME", "PATH", "SMOKE_PROVIDER_TOKEN", "SMOKE_SECRET_TOKEN"])
    return bench


def final(bench) -> str:
    return str(bench.out / "final.txt")


def test_default_argv_and_stdin(bench):
    argv = argv_of(bench)
    assert argv == ["exec", "--json", "-o", final(bench), "-s", "workspace-write", "-"]
    assert bench.fake.run_call()["stdin"] == "smoke brief: run until killed.\n"
    assert bench.fake.run_call()["cwd"] == str(bench.work)


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (["--read-only"], ["-s", "read-only"]),
        (["--sandbox", "danger-full-access"], ["-s", "danger-full-access"]),
        (["--model", "gpt-5"], ["-s", "workspace-write", "-m", "gpt-5"]),
        (["--effort", "low"], ["-s", "workspace-write", "-c", "model_reasoning_effort=low"]),
        (["--skip-git-repo-check"], ["-s", "workspace-write", "--skip-git-repo-check"]),
    ],
)
def test_each_flag(bench, flags, expected):
    assert argv_of(bench, *flags) == ["exec", "--json", "-o", final(bench), *expected, "-"]


def test_all_flags_together(bench):
    argv = argv_of(
        bench, "--model", "gpt-5", "--effort", "high", "--read-only", "--skip-git-repo-check"
    )
    assert argv == [
        "exec", "--json", "-o", final(bench), "-s", "read-only", "-m", "gpt-5",
        "-c", "model_reasoning_effort=high", "--skip-git-repo-check", "-",
    ]  # fmt: skip


def test_resume_by_session_leaves_the_sandbox_alone(bench):
    argv = argv_of(bench, "--session", "thread-abc")
    assert argv == ["exec", "resume", "thread-abc", "--json", "-o", final(bench), "-"]
    assert bench.result["session"] == "thread-abc"
    assert bench.result["sandbox"] == "(Codex config on resume)"


def test_resume_last_with_an_explicit_sandbox(bench):
    argv = argv_of(bench, "--resume-last", "--sandbox", "danger-full-access", "--model", "m")
    assert argv == [
        "exec", "-s", "danger-full-access", "resume", "--last", "--json", "-o", final(bench), "-m", "m", "-",
    ]  # fmt: skip
    assert bench.result["resumeLast"] is True


def test_read_only_lane_applies_before_resume(bench, global_config):
    write_json(global_config, fleet_doc({"review": {"implementer": "codex", "readOnly": True}}))
    argv = argv_of(bench, "--lane", "review", "--session", "thread-review")
    assert argv[:5] == ["exec", "-s", "read-only", "resume", "thread-review"]
    result = bench.result
    assert (result["lane"], result["laneSource"], result["sandbox"]) == (
        "review",
        "global",
        "read-only",
    )


def test_flags_win_over_lane_dials(bench, global_config):
    write_json(
        global_config,
        fleet_doc(
            {
                "tests": {
                    "implementer": "codex",
                    "model": "lane-model",
                    "effort": "low",
                    "timeout": "5m",
                }
            }
        ),
    )
    argv = argv_of(bench, "--lane", "tests", "--model", "flag-model")
    assert argv[argv.index("-m") + 1] == "flag-model"
    assert "model_reasoning_effort=low" in argv


def test_lane_for_another_implementer_names_the_skill(bench, global_config):
    write_json(global_config, fleet_doc({"feature": {"implementer": "opencode", "model": "a/b"}}))
    run = bench.relay("--lane", "feature")
    assert run.code == 2
    assert run.err == (
        'relay: fleet lane "feature" → opencode (use opencode-delegate); this relay is codex\n'
    )
    assert not bench.out.exists()


def test_untrusted_project_lane_is_refused(bench):
    write_json(bench.work / ".delegate" / "config.json", fleet_doc({"x": {"implementer": "codex"}}))
    run = bench.relay("--lane", "x")
    assert run.code == 2
    assert "project fleet config is not trusted" in run.err
    assert not bench.out.exists()


def test_clean_env_keeps_only_basics_and_named_variables(bench, home):
    env = bench.fake.env(SMOKE_PROVIDER_TOKEN="required", SMOKE_SECRET_TOKEN="must-not-leak")
    run = bench.relay("--clean-env", "--keep-env", "SMOKE_PROVIDER_TOKEN", env=env)
    assert run.code == 0, run
    for call in bench.fake.calls():
        assert "SMOKE_SECRET_TOKEN" not in call["env"]
        assert call["env"]["SMOKE_PROVIDER_TOKEN"] == "required"
        assert call["env"]["HOME"] == str(home)
        assert "PATH" in call["env"]
    assert {c["kind"] for c in bench.fake.calls()} == {"version", "run"}
    result = bench.result
    assert (result["cleanEnv"], result["keepEnv"]) == (True, ["SMOKE_PROVIDER_TOKEN"])
    assert "required" not in (bench.out / "result.json").read_text()


def test_without_clean_env_everything_is_inherited(bench):
    bench.relay(env=bench.fake.env(SMOKE_SECRET_TOKEN="inherited"))
    assert bench.fake.run_call()["env"]["SMOKE_SECRET_TOKEN"] == "inherited"


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--keep-env", "HOME"], "--keep-env requires --clean-env"),
        (
            ["--clean-env", "--keep-env", "BAD-NAME"],
            'invalid --keep-env "BAD-NAME" (expected an environment variable name)',
        ),
        (
            ["--clean-env", "--keep-env", "SMOKE_MISSING_ENV"],
            '--keep-env "SMOKE_MISSING_ENV" is not set',
        ),
        (
            ["--session", "thread-abc", "--resume-last"],
            "--session and --resume-last are mutually exclusive; pass only one",
        ),
        (["--session", ""], "--session must be a shell-safe thread id (letters, digits, . _ : -)"),
        (
            ["--session", "--resume-last"],
            "--session must be a shell-safe thread id (letters, digits, . _ : -)",
        ),
        (
            ["--session", "thread & whoami"],
            "--session must be a shell-safe thread id (letters, digits, . _ : -)",
        ),
        (["--effort", ""], 'invalid --effort "" (expected a non-empty bare token)'),
        (
            ["--sandbox", "yolo"],
            'invalid --sandbox "yolo" (expected: read-only, workspace-write, danger-full-access)',
        ),
        (
            ["--model", "x & whoami"],
            "--model contains unsupported characters (allowed: letters, digits, . _ : / -)",
        ),
    ],
)
def test_usage_errors(bench, flags, message):
    run = bench.relay(*flags)
    assert (run.code, run.err) == (2, f"relay: {message}\n")
    assert not bench.out.exists()


def test_thread_id_and_final_report(bench):
    events = [
        {"type": "thread.started", "thread_id": "t-1"},
        {"type": "item.completed"},
        {"type": "thread.started", "thread_id": "t-2"},
    ]
    bench.script(
        {
            "actions": [
                {"stdout": "".join(json.dumps(e) + "\n" for e in events)},
                {"write": [str(bench.out / "final.txt"), "  Done: edited two files.\n"]},
            ]
        }
    )
    run = bench.relay()
    result = run.result
    assert (result["status"], result["threadId"]) == ("completed", "t-2")
    assert result["finalMessage"] == "Done: edited two files."
    assert result["finalPath"] == str(bench.out / "final.txt")
    assert "thread id (resume with: --session t-2): t-2" in run.out
    assert (bench.out / "events.jsonl").read_text().count("\n") == 3


def test_help_explains_clean_env_limits(bench):
    out = bench.relay("--help").out
    for phrase in (
        "narrows the environment and nothing else",
        "secrets your user can read stay readable",
        "sign-ins kept in the environment",
    ):
        assert phrase in " ".join(out.split())


def test_result_field_order(bench):
    bench.relay()
    assert list(bench.result) == [
        "schema", "lane", "laneSource", "workdir", "sandbox", "model", "effort", "resumeLast",
        "session", "cleanEnv", "keepEnv", "codexVersion", "startedAt", "finishedAt", "briefPath",
        "eventsPath", "finalPath", "status", "exitCode", "signal", "threadId", "finalMessage",
        "touchedFiles", "changes", "overlap", "relayRunId", "implementerArgv",
    ]  # fmt: skip
