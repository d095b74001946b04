"""aider: the fixed pins, argv, the read-only dry run that leaves the repo alone, failures."""

from __future__ import annotations

import json

import pytest
from conftest import commit_all, fleet_doc, git, write_json
from relaykit import DETECT_ONLY, Bench, adapter, argv_of

#: Always sent, in this order; the commit switches above all must never go.
PINS = [
    "--yes-always",
    "--no-suggest-shell-commands",
    "--no-auto-commits",
    "--no-dirty-commits",
    "--no-gitignore",
    "--no-analytics",
    "--no-check-update",
    "--no-detect-urls",
    "--no-pretty",
    "--no-stream",
]
#: What would undo a pin if it ever reached aider's command line.
UNPINNED = ("--auto-commits", "--dirty-commits", "--suggest-shell-commands", "--detect-urls")


@pytest.fixture
def bench(tmp_path, home):
    bench = Bench(tmp_path, "aider")
    bench.script({"actions": [{"stdout": "Applied the edit.\n"}]})
    return bench


def message_file(bench) -> list[str]:
    return ["--message-file", str(bench.out / "brief.txt")]


def assert_pinned(argv: list[str]) -> None:
    assert argv[: len(PINS)] == PINS
    assert not any(token in UNPINNED for token in argv), argv


def test_default_argv(bench):
    assert argv_of(bench) == [*PINS, *message_file(bench)]
    call = bench.fake.run_call()
    assert (call["stdin"], call["cwd"]) == ("", str(bench.work))
    assert [c["argv"] for c in bench.fake.calls("version")] == [["--version"]]
    assert (bench.out / "brief.txt").read_text() == "smoke brief: run until killed.\n"


@pytest.mark.parametrize(
    ("flags", "extra"),
    [
        (["--model", "openai/fake-model"], ["--model", "openai/fake-model"]),
        (
            ["--api-base", "http://127.0.0.1:9/v1"],
            ["--openai-api-base", "http://127.0.0.1:9/v1"],
        ),
        (["--edit-format", "whole"], ["--edit-format", "whole"]),
        (["--architect"], ["--architect"]),
        (["--subtree-only"], ["--subtree-only"]),
        (["--resume-last"], ["--restore-chat-history"]),
        (["--history-file", "/abs/hist.md"], ["--chat-history-file", "/abs/hist.md"]),
    ],
)
def test_argv_per_flag(bench, flags, extra):
    assert argv_of(bench, *flags) == [*PINS, *extra, *message_file(bench)]


def test_paths_resolve_against_cd_reads_first(bench):
    argv = argv_of(
        bench, "--file", "a.py", "--read", "docs/b.md", "--file", "/abs/c.py",
        "--history-file", "notes/h.md",
    )  # fmt: skip
    work = str(bench.work)
    assert argv == [
        *PINS, "--chat-history-file", f"{work}/notes/h.md", "--read", f"{work}/docs/b.md",
        "--file", f"{work}/a.py", "--file", "/abs/c.py", *message_file(bench),
    ]  # fmt: skip


def test_read_only_keeps_history_in_the_run_dir_and_the_repo_map_off(bench):
    out = bench.out
    argv = argv_of(bench, "--read-only")
    assert argv == [
        *PINS, "--dry-run",
        "--chat-history-file", str(out / "aider.chat.history.md"),
        "--input-history-file", str(out / "aider.input.history"),
        "--llm-history-file", str(out / "aider.llm.history"),
        "--map-tokens", "0",
        *message_file(bench),
    ]  # fmt: skip
    assert bench.result["readOnly"] is True


def test_read_only_outside_git_keeps_aider_from_running_git_init(tmp_path, home):
    bench = Bench(tmp_path, "aider", repo=False)
    bench.script({})
    argv = argv_of(bench, "--read-only")
    assert argv[-5:] == ["--map-tokens", "0", "--no-git", *message_file(bench)]
    assert "--no-git" not in argv_of(bench)


IDENTITY_KEYS = [
    "GIT_CONFIG_COUNT",
    *(f"GIT_CONFIG_{kind}_{n}" for n in range(3) for kind in ("KEY", "VALUE")),
]


def test_read_only_lends_git_an_identity_it_lacks(bench):
    """Else aider writes a placeholder user into .git/config, even on a dry run."""
    git(bench.work, "config", "--unset", "user.name")
    git(bench.work, "config", "--unset", "user.email")
    config = (bench.work / ".git" / "config").read_text()
    bench.script({}, env_keys=IDENTITY_KEYS)
    env = bench.fake.env(GIT_CONFIG_COUNT="1", GIT_CONFIG_KEY_0="core.x", GIT_CONFIG_VALUE_0="y")
    argv_of(bench, "--read-only", env=env)
    assert bench.fake.run_call()["env"] == {
        "GIT_CONFIG_COUNT": "3",
        "GIT_CONFIG_KEY_0": "core.x",
        "GIT_CONFIG_VALUE_0": "y",
        "GIT_CONFIG_KEY_1": "user.name",
        "GIT_CONFIG_VALUE_1": "aider read-only run",
        "GIT_CONFIG_KEY_2": "user.email",
        "GIT_CONFIG_VALUE_2": "aider-read-only@localhost.invalid",
    }
    assert (bench.work / ".git" / "config").read_text() == config


def test_identity_is_left_alone_when_git_has_one_or_the_run_writes(bench):
    bench.script({}, env_keys=IDENTITY_KEYS)
    argv_of(bench, "--read-only")
    assert bench.fake.calls("run")[-1]["env"] == {}
    git(bench.work, "config", "--unset", "user.name")
    argv_of(bench)
    assert bench.fake.calls("run")[-1]["env"] == {}


def test_read_only_run_leaves_the_repository_untouched(bench):
    """What aider --dry-run writes lands in the run dir."""
    (bench.work / "tracked.txt").write_text("original\n")
    commit_all(bench.work)
    git(bench.work, "config", "status.showUntrackedFiles", "all")
    bench.out = bench.work.parent / "delegate-runs" / "review"
    writes = [
        {"append": [str(bench.out / name), "aider wrote this\n"]}
        for name in ("aider.chat.history.md", "aider.input.history", "aider.llm.history")
    ]
    bench.script({"actions": [*writes, {"stdout": "Reviewed.\n"}]})
    run = bench.relay("--read-only")
    assert run.code == 0, run
    result = run.result
    assert result["readOnlyViolation"] is False
    assert (bench.out / "aider.chat.history.md").read_text() == "aider wrote this\n"
    assert "mode: dry run (aider --dry-run) - no files should be modified" in run.out


def test_read_only_dry_run_that_writes_into_the_repo_is_caught(bench):
    (bench.work / "tracked.txt").write_text("original\n")
    commit_all(bench.work)
    bench.script({"actions": [{"write": [".aider.chat.history.md", "# aider chat\n"]}]})
    run = bench.relay("--read-only", env=bench.fake.env(**DETECT_ONLY))
    assert run.result["readOnlyViolation"] is True


def test_read_only_resume_restores_a_copy_of_the_repo_history(bench):
    history = "# aider chat started\n\n#### earlier question\n\nearlier answer\n"
    (bench.work / ".aider.chat.history.md").write_text(history)
    commit_all(bench.work)
    bench.script({"actions": [{"append": [str(bench.out / "aider.chat.history.md"), "more\n"]}]})
    run = bench.relay("--read-only", "--resume-last")
    assert run.code == 0, run
    argv = bench.fake.run_call()["argv"]
    assert "--restore-chat-history" in argv
    assert argv[argv.index("--chat-history-file") + 1] == str(bench.out / "aider.chat.history.md")
    assert (bench.out / "aider.chat.history.md").read_text() == history + "more\n"
    assert (bench.work / ".aider.chat.history.md").read_text() == history
    assert run.result["readOnlyViolation"] is False
    assert run.result["resumed"] is True


def test_read_only_resume_finds_the_history_at_the_work_tree_root(bench):
    history = "# aider chat started\n"
    (bench.work / ".aider.chat.history.md").write_text(history)
    (bench.work / "pkg").mkdir()
    bench.work = bench.work / "pkg"
    argv_of(bench, "--read-only", "--resume-last")
    assert (bench.out / "aider.chat.history.md").read_text() == history


def test_read_only_with_an_explicit_history_file(bench, tmp_path):
    mine = tmp_path / "mine.md"
    argv = argv_of(bench, "--read-only", "--history-file", str(mine))
    assert argv[argv.index("--chat-history-file") + 1] == str(mine)
    assert argv.count("--chat-history-file") == 1
    assert not (bench.out / "aider.chat.history.md").exists()


def test_write_run_keeps_aiders_own_history_defaults(bench):
    argv = argv_of(bench, "--resume-last")
    for flag in ("--chat-history-file", "--input-history-file", "--llm-history-file"):
        assert flag not in argv
    assert "--map-tokens" not in argv


def _sample_value(flag) -> list[str]:
    if not flag.value:
        return [flag.name]
    if flag.dest in ("files", "reads", "historyFile"):
        return [flag.name, "./--auto-commits"]
    samples = {"timeout": "5m", "outDir": "/unused", "lane": "x", "setup": "true", "check": "true"}
    return [flag.name, samples.get(flag.dest, "x1")]


AIDER_FLAGS = [
    f
    for f in adapter("aider").flag_table()
    # --host runs the relay there, which checks its own pins (test_remote.py covers the route).
    if f.name
    not in (
        "--brief",
        "--cd",
        "--out-dir",
        "--lane",
        "--continue",
        "--dry-run",
        "--host",
        "--include-uncommitted",
    )
]


@pytest.mark.parametrize("flag", AIDER_FLAGS, ids=lambda f: f.name)
def test_no_flag_removes_the_commit_pins(bench, flag):
    extra = ["--worktree"] if flag.name == "--setup" else []  # setup runs in a worktree
    if flag.name == "--worktree" or extra:
        commit_all(bench.work, "a commit to start the worktree from")
    argv = argv_of(bench, *_sample_value(flag), *extra)
    assert_pinned(argv)


def test_a_dry_run_shows_the_pins(bench):
    run = bench.relay("--dry-run")
    assert run.code == 0, run
    assert_pinned(json.loads(run.out)["implementerArgv"][1:])
    assert bench.fake.calls() == []


def test_all_flags_at_once_keep_the_pins(bench):
    flags = [
        "--model", "m", "--api-base", "http://h/v1", "--architect", "--file", "f",
        "--read", "r", "--subtree-only", "--read-only", "--resume-last", "--history-file", "h",
    ]  # fmt: skip
    assert_pinned(argv_of(bench, *flags))


def test_no_lane_removes_the_commit_pins(bench, global_config):
    lane = {"implementer": "aider", "model": "lane/model", "timeout": "5m", "readOnly": True}
    write_json(global_config, fleet_doc({"any": lane}))
    argv = argv_of(bench, "--lane", "any")
    assert_pinned(argv)
    assert argv[argv.index("--model") + 1] == "lane/model"
    assert "--dry-run" in argv
    argv = argv_of(bench, "--lane", "any", "--model", "flag/model")
    assert argv[argv.index("--model") + 1] == "flag/model"


def test_aider_environment_asking_for_commits_still_gets_the_pins(bench):
    """AIDER_* variables reach aider untouched, and the argv still carries the pins.

    aider ranks command-line flags above AIDER_* variables, so the pins win
    there; what the relay must do is pass them whatever the environment says.
    """
    bench.script({}, env_keys=["AIDER_AUTO_COMMITS", "AIDER_DIRTY_COMMITS"])
    env = bench.fake.env(AIDER_AUTO_COMMITS="true", AIDER_DIRTY_COMMITS="true")
    assert_pinned(argv_of(bench, env=env))
    seen = bench.fake.run_call()["env"]
    assert seen == {"AIDER_AUTO_COMMITS": "true", "AIDER_DIRTY_COMMITS": "true"}


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ["--architect", "--edit-format", "diff"],
            "--architect and --edit-format are mutually exclusive; pass only one",
        ),
        (
            ["--model", "--auto-commits"],
            '--model value "--auto-commits" starts with "-"; aider would read it as an option',
        ),
        (
            ["--api-base", "--dirty-commits"],
            '--api-base value "--dirty-commits" starts with "-"; aider would read it as an option',
        ),
        (
            ["--edit-format", "-x"],
            '--edit-format value "-x" starts with "-"; aider would read it as an option',
        ),
        (
            ["--timeout", "1h30"],
            '--timeout "1h30" is invalid or too long; use a positive h/m/s duration no longer '
            "than about 24 days",
        ),
    ],
)
def test_usage_errors(bench, flags, message):
    run = bench.relay(*flags)
    assert (run.code, run.err) == (2, f"relay: {message}\n")
    assert not bench.out.exists()


def test_report_that_mentions_an_api_key_still_completes(bench):
    prose = (
        "Applied the edit and updated docs to explain OPENAI_API_KEY setup.\n"
        "If OPENAI_API_KEY is not set, the tool exits.\n"
        "Unable to connect without following the documented placeholder key steps.\n"
    )
    bench.script({"actions": [{"stdout": prose}]})
    run = bench.relay("--model", "openai/fake-model", "--api-base", "http://127.0.0.1:9/v1")
    assert run.code == 0, run
    result = run.result
    assert (result["status"], result["exitCode"]) == ("completed", 0)
    assert "error" not in result
    assert result["finalMessage"] == prose.strip()
    assert (bench.out / "final.txt").read_text() == prose.strip()
    assert (result["model"], result["readOnly"], result["resumed"]) == (
        "openai/fake-model",
        False,
        False,
    )


REAL_AUTH_FAILURE = (
    "Aider v0.86.2\n"
    "Model: openai/fake-model with whole edit format\n"
    "litellm.AuthenticationError: AuthenticationError: OpenAIException - The api_key \n"
    "client option must be set either by passing api_key to the client or by setting \n"
    "the OPENAI_API_KEY environment variable\n"
    "The API provider is not able to authenticate you. Check your API key.\n"
)


def test_auth_error_on_an_exit_zero_run_fails(bench):
    bench.script({"actions": [{"stdout": REAL_AUTH_FAILURE}]})
    run = bench.relay()
    assert run.code == 1, run
    result = run.result
    assert (result["status"], result["exitCode"]) == ("failed", 1)
    assert result["error"] == (
        "aider reported a model or endpoint failure and exited 0: litellm.AuthenticationError"
    )


@pytest.mark.parametrize(
    ("stdout", "stderr", "found"),
    [
        ("", "Error connecting to http://127.0.0.1:9/v1\n", "Error connecting to"),
        ("  Warning: OPENAI_API_KEY is not set\n", "", "Warning: OPENAI_API_KEY is not set"),
        ("Error: API key invalid\n", "", "Error: API key invalid"),
        ("Unable to reach the endpoint\n", "", "Unable to reach the endpoint"),
        (
            "Error connecting to host\n",
            "x litellm.RateLimitError: slow down\n",
            "x litellm.RateLimitError",
        ),
        ("noise\r litellm.Timeout: took too long", "", "litellm.Timeout"),
    ],
)
def test_failure_lines(bench, stdout, stderr, found):
    actions = [{"stdout": stdout}] if stdout else []
    actions += [{"stderr": stderr}] if stderr else []
    bench.script({"actions": actions})
    result = bench.relay().result
    assert result["status"] == "failed"
    assert result["error"] == f"aider reported a model or endpoint failure and exited 0: {found}"


def test_failure_line_split_across_reads(bench):
    bench.script(
        {"actions": [{"stdout_bytewise": "ok\nlitellm.NotFoundError: no model\n", "delay": 0}]}
    )
    assert bench.relay().result["error"].endswith("litellm.NotFoundError")


def test_nonzero_exit_is_kept(bench):
    bench.script({"actions": [{"stderr": "fake aider nonzero exit\n"}], "exit": 7})
    run = bench.relay()
    assert run.code == 7
    assert (run.result["status"], run.result["exitCode"]) == ("failed", 7)
    assert run.result["stderrTail"] == ["fake aider nonzero exit"]
    assert run.result["error"] == (
        "aider exited 7 without reporting a model or endpoint failure; see stderrTail and final.txt"
    )
    assert list(run.result)[-2:] == ["stderrTail", "error"]


def test_a_failure_line_and_a_nonzero_exit_name_both(bench):
    bench.script(
        {"actions": [{"stderr": "Error connecting to http://127.0.0.1:9/v1\n"}], "exit": 3}
    )
    run = bench.relay()
    assert (run.code, run.result["status"]) == (3, "failed")
    assert run.result["error"] == (
        "aider reported a model or endpoint failure and exited 3: Error connecting to"
    )


def test_death_by_a_signal_is_named(bench):
    bench.script({"die_by": "SIGSEGV"})
    run = bench.relay()
    assert (run.code, run.result["status"], run.result["signal"]) == (139, "failed", "SIGSEGV")
    assert run.result["error"] == (
        "aider was killed by SIGSEGV — inspect the working tree before re-dispatching"
    )


def test_missing_binary_writes_the_result_with_an_error(bench):
    (bench.fake.bin / "aider").unlink()
    run = bench.relay(env=bench.fake.env(PATH=str(bench.fake.bin)))
    assert run.code == 127, run
    result = run.result
    assert (result["status"], result["exitCode"], result["signal"]) == (
        "aider_unavailable",
        127,
        None,
    )
    assert result["error"] == "`aider` was not found on PATH; nothing was dispatched"
    tail = ["finalMessage", "touchedFiles", "changes", "changesUnavailable", "overlap", "relayRunId",
            "implementerArgv", "error"]  # fmt: skip
    assert list(result)[-len(tail) :] == tail
    assert result["implementerArgv"] is None
    assert (result["changes"], result["changesUnavailable"]) == (None, "Aider was not started")
    assert bench.fake.calls() == []


def test_an_empty_path_finds_no_aider(bench):
    run = bench.relay(env=bench.fake.env(PATH=""))
    assert (run.code, run.result["status"]) == (127, "aider_unavailable")
    assert run.result["error"] == "`aider` was not found on PATH; nothing was dispatched"
    assert run.result["touchedFiles"] is None  # no git on an empty PATH either


def test_large_output_keeps_its_tail_in_memory_and_all_of_it_on_disk(bench):
    line = "x" * 99 + "\n"
    bench.script(
        {"actions": [{"spam": {"line": line, "lines": 40_000}}, {"stdout": "Tokens: 1 sent.\n"}]}
    )
    run = bench.relay()
    assert run.code == 0, run
    report = run.result["finalMessage"]
    assert report.startswith("[the first ")
    assert report.endswith("Tokens: 1 sent.")
    assert len(report) < 1_200_000
    assert (bench.out / "stdout.txt").stat().st_size == 40_000 * 100 + len("Tokens: 1 sent.\n")


def test_summary_and_header(bench):
    bench.script(version={"stdout": "aider 0.86.2\n"}, run={"actions": [{"stdout": "Done.\n"}]})
    run = bench.relay("--read-only", "--resume-last")
    assert run.result["aiderVersion"] == "aider 0.86.2"
    assert "mode: dry run (aider --dry-run) - no files should be modified" in run.out
    assert "mode: restored aider's chat history" in run.out
    assert "--- aider final report ---\nDone.\n--- end report ---" in run.out


def test_architect_is_recorded_as_the_edit_format(bench):
    bench.relay("--architect")
    assert bench.result["editFormat"] == "architect"


def test_result_field_order(bench):
    bench.relay()
    assert list(bench.result) == [
        "schema", "lane", "laneSource", "tool", "workdir", "model", "editFormat", "readOnly",
        "resumed", "aiderVersion", "startedAt", "finishedAt", "briefPath", "finalPath",
        "stderrPath", "status", "exitCode", "signal", "finalMessage", "touchedFiles", "changes", "overlap", "relayRunId", "implementerArgv",
    ]  # fmt: skip
    assert bench.result["tool"] == "aider"
