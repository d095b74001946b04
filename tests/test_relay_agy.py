"""agy: argv, permissions, print timeout and watchdog, text report, log ids, silent runs."""

from __future__ import annotations

import os
import signal

import pytest
from conftest import commit_all, fleet_doc, git, make_repo, write_json
from relaykit import BRIEF, DETECT_ONLY, Bench, adapter, argv_of, finish, read_pid

from delegate_skills.relay.engine import Relay

DENIED = (
    'jetski: no output produced — a tool required the "write_file" permission that headless '
    "mode cannot prompt for, so it was auto-denied\n"
)
LOG = (
    'I1129 project: created project "work" (id=0f9e8d7c-1234-4abc-9def-00aa11bb22cc)\n'
    "I1129 Print mode: conversation=5b6a7c8d-aaaa-4bbb-8ccc-112233445566\n"
)


@pytest.fixture
def bench(tmp_path, home):
    bench = Bench(tmp_path, "agy")
    bench.script({"actions": [{"stdout": "fake agy analysis completed\n"}]})
    return bench


def tail(bench, print_timeout: str = "30m") -> list[str]:
    return [
        "--print-timeout", print_timeout, "--log-file", str(bench.out / "agy.log"),
        f"--print={BRIEF}",
    ]  # fmt: skip


def fresh(bench) -> list[str]:
    return ["--new-project", "--add-dir", str(bench.work)]


def test_default_argv_env_and_report(bench):
    run = bench.relay()
    assert run.code == 0, run
    call = bench.fake.run_call()
    assert call["argv"] == [*fresh(bench), *tail(bench)]
    assert (call["stdin"], call["cwd"]) == ("", str(bench.work))
    assert [c["argv"] for c in bench.fake.calls("version")] == [["changelog"]]
    result = run.result
    assert (result["status"], result["exitCode"]) == ("completed", 0)
    assert result["finalMessage"] == "fake agy analysis completed"
    assert (bench.out / "final.txt").read_text() == "fake agy analysis completed"
    assert (bench.out / "stdout.txt").read_text() == "fake agy analysis completed\n"
    assert "stderrTail" not in result


def test_pwd_is_the_work_dir(bench):
    bench.script({"actions": [{"stdout": "ok\n"}]}, env_keys=["PWD"])
    bench.relay()
    assert bench.fake.run_call()["env"]["PWD"] == str(bench.work)


@pytest.mark.parametrize(
    ("flags", "middle"),
    [
        (["--model", "gemini-3-pro"], ["--model", "gemini-3-pro"]),
        (["--effort", "high"], ["--effort", "high"]),
        (["--read-only"], ["--mode", "plan"]),
        (["--sandbox"], ["--sandbox"]),
        (["--dangerously-skip-permissions"], ["--dangerously-skip-permissions"]),
        (
            ["--read-only", "--effort", "low", "--model", "m", "--sandbox"],
            ["--model", "m", "--effort", "low", "--mode", "plan", "--sandbox"],
        ),
    ],
)  # fmt: skip
def test_each_flag(bench, flags, middle):
    assert argv_of(bench, *flags) == [*fresh(bench), *middle, *tail(bench)]


def test_add_dirs_resolve_against_cd(bench, tmp_path):
    argv = argv_of(
        bench, "--add-dir", "docs", "--add-dir", str(tmp_path / "shared"), "--add-dir", ".."
    )
    assert argv == [
        "--new-project", "--add-dir", str(bench.work), "--add-dir", str(bench.work / "docs"),
        "--add-dir", str(tmp_path / "shared"), "--add-dir", str(tmp_path), *tail(bench),
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("flags", "head", "resumed"),
    [
        (["--project", "p-1"], ["--project", "p-1", "--add-dir", "WORK"], False),
        (["--new-project"], ["--new-project", "--add-dir", "WORK"], False),
        (["--resume-last", "--add-dir", "dropped"], ["--continue"], True),
        (["--conversation", "c-1"], ["--conversation", "c-1"], True),
    ],
)
def test_project_and_resume_forms(bench, flags, head, resumed):
    expected = [str(bench.work) if token == "WORK" else token for token in head]
    assert argv_of(bench, *flags) == [*expected, *tail(bench)]
    result = bench.result
    assert result["resumed"] is resumed
    assert result["project"] == ("p-1" if "--project" in flags else None)


def test_print_timeout_is_passed_verbatim(bench):
    assert argv_of(bench, "--print-timeout", "1h30m") == [*fresh(bench), *tail(bench, "1h30m")]


def configured(bench, *flags) -> dict:
    relay = Relay(adapter("agy"))
    relay.configure(["--brief", str(bench.brief), "--cd", str(bench.work), *flags])
    return relay.opts


@pytest.mark.parametrize(
    ("flags", "watchdog", "named"),
    [
        ([], 31 * 60_000, "31m (--print-timeout 30m plus 60s grace)"),
        (["--print-timeout", "1s"], 61_000, "1m1s (--print-timeout 1s plus 60s grace)"),
        (["--print-timeout", "1h"], 3_660_000, "1h1m (--print-timeout 1h plus 60s grace)"),
        (["--print-timeout", "1s", "--timeout", "4s"], 4_000, "4s"),
        (["--timeout", "2h"], 7_200_000, "2h"),
    ],
)
def test_watchdog_defaults_to_print_timeout_plus_60s(bench, flags, watchdog, named):
    opts = configured(bench, *flags)
    assert adapter("agy").watchdog_ms(opts) == watchdog
    # The engine's watchdog message names opts["timeout"].
    assert opts["timeout"] == named


def test_lane_timeout_wins_over_the_print_timeout_default(bench, global_config):
    write_json(global_config, fleet_doc({"x": {"implementer": "agy", "timeout": "5m"}}))
    opts = configured(bench, "--lane", "x")
    assert adapter("agy").watchdog_ms(opts) == 300_000


@pytest.mark.parametrize(
    ("lane_flags", "middle", "read_only", "dangerous"),
    [
        ([], ["--effort", "high", "--mode", "plan"], True, False),
        (["--effort", "low"], ["--effort", "low", "--mode", "plan"], True, False),
    ],
)  # fmt: skip
def test_review_lane(bench, global_config, lane_flags, middle, read_only, dangerous):
    lane = {"implementer": "agy", "effort": "high", "readOnly": True}
    write_json(global_config, fleet_doc({"review": lane}))
    assert argv_of(bench, "--lane", "review", *lane_flags) == [*fresh(bench), *middle, *tail(bench)]
    result = bench.result
    assert (result["readOnly"], result["dangerouslySkipPermissions"]) == (read_only, dangerous)


def test_a_read_only_lane_refuses_the_flag_that_would_widen_it(bench, global_config):
    """The Node relay lets --dangerously-skip-permissions win over a read-only lane; ours refuses."""
    lane = {"implementer": "agy", "effort": "high", "readOnly": True}
    write_json(global_config, fleet_doc({"review": lane}))
    run = bench.relay("--lane", "review", "--dangerously-skip-permissions")
    assert run.code == 2
    assert run.err == (
        "relay: lane review is read-only, and --dangerously-skip-permissions would let "
        "Antigravity write; a read-only lane is a policy: drop the flag, or dispatch through "
        "a lane that may write\n"
    )
    assert not bench.out.exists()
    assert bench.fake.calls() == []


def test_lane_effort_outside_the_list_is_refused(bench, global_config):
    write_json(global_config, fleet_doc({"x": {"implementer": "agy", "effort": "ultra"}}))
    run = bench.relay("--lane", "x")
    assert run.code == 2
    assert "low, medium, high" in run.err
    assert not bench.out.exists()


PRINT_TIMEOUT = (
    '--print-timeout "{}" must be an h/m/s duration from 1s through 596h30m23s so its 60s '
    "grace fits the relay watchdog limit"
)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--effort", "max"], 'invalid --effort "max" (expected: low, medium, high)'),
        (
            ["--read-only", "--dangerously-skip-permissions"],
            "--read-only and --dangerously-skip-permissions are mutually exclusive; pass only one",
        ),
        (
            ["--resume-last", "--conversation", "c"],
            "--resume-last and --conversation are mutually exclusive; pass only one",
        ),
        (
            ["--timeout", "1.5s"],
            '--timeout "1.5s" must be an h/m/s duration from 1s through 596h31m23s',
        ),
        (
            ["--project", "p", "--resume-last"],
            "--project cannot be combined with --resume-last or --conversation",
        ),
        (["--project", "p", "--new-project"], "--project and --new-project are mutually exclusive"),
        (
            ["--new-project", "--conversation", "c"],
            "--new-project cannot be combined with --resume-last or --conversation",
        ),
        *(
            (["--print-timeout", value], PRINT_TIMEOUT.format(value))
            for value in (
                "NONSENSE",
                "0s",
                "",
                "10",
                "10s-junk",
                "1.5s",
                "1h30",
                "596h30m24s",
                "600h",
            )
        ),
    ],
)
def test_usage_errors(bench, flags, message):
    run = bench.relay(*flags)
    assert (run.code, run.err) == (2, f"relay: {message}\n")
    assert not bench.out.exists()


def test_longest_print_timeout_is_accepted(bench):
    assert argv_of(bench, "--print-timeout", "596h30m23s")[-4] == "596h30m23s"


def test_brief_limits(bench):
    bench.brief.write_text("x" * (120 * 1024 + 600))
    run = bench.relay()
    assert (run.code, run.err) == (
        2,
        "relay: brief is 121KB; agy passes the prompt as a CLI argument, which the OS caps "
        "(~128KB on Linux). Trim it, or have agy read large context from the workspace "
        "instead of inlining it.\n",
    )
    bench.brief.write_text("a\0b")
    run = bench.relay()
    assert (run.code, run.err) == (
        2,
        "relay: brief contains a NUL byte, which cannot be passed in --print\n",
    )
    assert not bench.out.exists()


def test_a_brief_that_looks_like_a_flag_stays_one_token(bench):
    bench.brief.write_text("--help")
    assert argv_of(bench)[-1] == "--print=--help"


def test_permission_denial_is_a_failure(bench):
    bench.script({"actions": [{"stderr": DENIED}]})
    run = bench.relay()
    assert run.code == 1, run
    result = run.result
    assert (result["status"], result["exitCode"]) == ("failed", 1)
    assert result["error"] == (
        "Antigravity auto-denied the write_file permission because headless --print cannot "
        "prompt; ask the human whether to re-dispatch with --dangerously-skip-permissions "
        "and treat that run as full access"
    )
    assert any("auto-denied" in line for line in result["stderrTail"])


SILENT = "agy ended without a final message or observable working-tree changes; the relay cannot confirm this dispatch completed"


def test_a_silent_run_that_changed_nothing_is_failed(bench):
    bench.script({})
    run = bench.relay()
    assert run.code == 1, run
    assert (run.result["status"], run.result["error"]) == ("failed", SILENT)
    run = bench.relay("--read-only")
    assert (run.result["status"], run.result["readOnly"]) == ("failed", True)
    assert run.result["readOnlyViolation"] is False


def test_a_silent_run_that_edited_the_tree_is_completed(bench):
    bench.script({"actions": [{"append": ["dispatch-edit.txt", "dispatch edit\n"]}]})
    run = bench.relay()
    assert run.code == 0, run
    result = run.result
    assert (result["status"], result["finalMessage"], result["finalPath"]) == (
        "completed",
        "",
        None,
    )


def test_pre_existing_dirt_is_not_evidence(bench):
    (bench.work / "pre-existing.txt").write_text("dirty before\n")
    bench.script({})
    run = bench.relay()
    assert (run.code, run.result["status"]) == (1, "failed")
    assert "?? pre-existing.txt" in run.result["touchedFiles"]
    bench.script({"actions": [{"append": ["pre-existing.txt", "edited by agy\n"]}]})
    run = bench.relay()
    assert (run.code, run.result["status"], run.result["finalMessage"]) == (0, "completed", "")


def dirty_submodule(bench, tmp_path) -> None:
    """A committed submodule `nested` whose tracked f.txt is already modified."""
    inner = make_repo(tmp_path / "inner")
    (inner / "f.txt").write_text("x\n")
    commit_all(inner)
    git(
        bench.work,
        "-c",
        "protocol.file.allow=always",
        "submodule",
        "add",
        "-q",
        str(inner),
        "nested",
    )
    commit_all(bench.work)
    (bench.work / "nested" / "f.txt").write_text("dirty inside\n")


def test_an_unchanged_dirty_submodule_is_not_evidence(bench, tmp_path):
    dirty_submodule(bench, tmp_path)
    bench.script({})
    run = bench.relay()
    assert (run.code, run.result["status"]) == (1, "failed")
    assert any(line.endswith("nested") for line in run.result["touchedFiles"])


def test_editing_an_already_dirty_submodule_is_evidence(bench, tmp_path):
    # git lists the submodule as " M nested" before and after: only its inside moved.
    dirty_submodule(bench, tmp_path)
    bench.script({"actions": [{"append": ["nested/f.txt", "dispatch edit\n"]}]})
    run = bench.relay()
    assert (run.code, run.result["status"], run.result["exitCode"]) == (0, "completed", 0), run
    assert run.result["finalMessage"] == ""
    assert run.result["touchedFiles"] == [" M nested"]
    assert (bench.work / "nested" / "f.txt").read_text() == "dirty inside\ndispatch edit\n"


def test_a_commit_inside_a_dirty_submodule_is_evidence(bench, tmp_path):
    dirty_submodule(bench, tmp_path)
    (bench.work / "nested" / "g.txt").write_text("other\n")
    git(bench.work / "nested", "add", "g.txt")
    bench.script({"actions": [{"git": ["-C", "nested", "commit", "-q", "-m", "by agy"]}]})
    run = bench.relay()
    assert (run.code, run.result["status"]) == (0, "completed"), run


def test_a_dirty_plain_directory_is_not_taken_for_a_nested_repository(bench):
    (bench.work / "sub").mkdir()
    (bench.work / "sub" / "a.txt").write_text("a\n")
    commit_all(bench.work)
    (bench.work / "sub" / "a.txt").unlink()
    (bench.work / "sub" / "a.txt").mkdir()  # a tracked file turned into a directory
    (bench.work / "sub" / "a.txt" / "b.txt").write_text("b\n")
    bench.script({})
    run = bench.relay()
    assert (run.code, run.result["status"]) == (1, "failed")


def test_ids_from_the_log_and_artifacts_in_the_repo(bench):
    bench.out = bench.work
    log = str(bench.work / "agy.log")
    bench.script({"actions": [{"write": [log, LOG]}, {"stdout": "fake agy analysis completed\n"}]})
    (bench.work / "tracked.txt").write_text("x\n")
    commit_all(bench.work)
    # A write run: a read-only one may not keep its run directory in its work tree.
    run = bench.relay("--effort", "high")
    assert run.code == 0, run
    result = run.result
    assert result["projectId"] == "0f9e8d7c-1234-4abc-9def-00aa11bb22cc"
    assert result["conversationId"] == "5b6a7c8d-aaaa-4bbb-8ccc-112233445566"
    assert result["logPath"] == log
    assert (result["effort"], result["readOnly"]) == ("high", False)
    assert result["changes"]["files"] == []  # the relay's own files are not the run's change
    assert "project id: 0f9e8d7c-1234-4abc-9def-00aa11bb22cc" in run.out
    assert (
        "conversation id (resume with: --conversation 5b6a7c8d-aaaa-4bbb-8ccc-112233445566): "
        "5b6a7c8d-aaaa-4bbb-8ccc-112233445566"
    ) in run.out


def test_a_stale_log_in_a_reused_out_dir_lends_no_ids(bench):
    bench.out.mkdir()
    (bench.out / "run.json").write_text('{"schema": "delegate-run.v1"}\n')  # an earlier run's
    (bench.out / "agy.log").write_text(LOG)
    result = bench.relay().result
    assert (result["projectId"], result["conversationId"]) == (None, None)


def test_read_only_user_write_trips_the_wire(bench):
    (bench.work / "tracked.txt").write_text("x\n")
    commit_all(bench.work)
    bench.script({"actions": [{"write": ["user-change.txt", "x"]}, {"stdout": "done\n"}]})
    run = bench.relay("--read-only", env=bench.fake.env(**DETECT_ONLY))
    assert run.result["readOnlyViolation"] is True
    assert "readOnlyViolation" not in bench.relay().result


@pytest.mark.parametrize(
    ("stdout", "version"),
    [
        ("1.2.3:\n- faster plan mode\n", "1.2.3"),
        ("\n\n0.9.0-beta: notes\n", "0.9.0-beta"),
        ("Antigravity CLI 1.2.3\n", "Antigravity CLI 1.2.3"),
        ("", "unknown"),
    ],
)
def test_version_from_the_changelog(bench, stdout, version):
    bench.script({"actions": [{"stdout": "ok\n"}]}, version={"stdout": stdout})
    run = bench.relay()
    assert run.result["agyVersion"] == version
    assert f"·  agy {version}" in run.out


def test_a_failing_changelog_probe_stops_the_run(bench):
    bench.script({}, version={"stdout": "", "stderr": "boom\n", "exit": 5})
    run = bench.relay()
    assert run.code == 5, run
    result = run.result
    assert result["error"] == (
        "agy changelog version preflight failed with exit 5; Antigravity was not dispatched"
    )
    assert result["stderrTail"] == ["boom"]
    assert bench.fake.calls("run") == []


def test_result_field_order(bench):
    bench.relay()
    assert list(bench.result) == [
        "schema", "lane", "laneSource", "tool", "workdir", "model", "effort", "project",
        "sandbox", "readOnly", "dangerouslySkipPermissions", "resumed", "agyVersion",
        "projectId", "conversationId", "startedAt", "finishedAt", "briefPath", "finalPath",
        "logPath", "stderrPath", "status", "exitCode", "signal", "finalMessage", "touchedFiles", "changes", "overlap", "relayRunId", "implementerArgv",
    ]  # fmt: skip
    assert not os.path.exists(bench.out / "events.jsonl")


def test_abort_of_a_read_only_run_reports_the_late_write(bench):
    (bench.work / "tracked.txt").write_text("x\n")
    commit_all(bench.work)
    late = bench.work / "late-file.txt"
    bench.script(
        {
            "on_term": {"write": [str(late), "flushed during shutdown\n"], "exit": 0},
            "actions": [{"pid_file": str(bench.pid_file("child.pid"))}, {"wait": "forever"}],
        }
    )
    proc = bench.start("--read-only", env=bench.fake.env(**DETECT_ONLY))
    read_pid(bench.pid_file("child.pid"))
    proc.send_signal(signal.SIGTERM)
    code, out, _err = finish(proc)
    assert code == 143
    result = bench.result
    assert (result["status"], result["signal"]) == ("aborted", "SIGTERM")
    assert "?? late-file.txt" in result["touchedFiles"]
    assert result["readOnlyViolation"] is True
    assert out.count("relay: aborted") == 1


def test_the_relay_s_own_files_in_the_repo_are_not_evidence(bench):
    bench.out = bench.work
    bench.script({"actions": [{"write": [str(bench.work / "agy.log"), LOG]}]})
    run = bench.relay()
    assert (run.code, run.result["status"], run.result["error"]) == (1, "failed", SILENT)


def test_help_names_the_watchdog_default_and_the_permission_opt_in(bench):
    out = " ".join(bench.relay("--help").out.split())
    assert "Relay watchdog as h/m/s (default: --print-timeout plus 60s)." in out
    assert "--dangerously-skip-permissions opts out of them" in out
