"""Steering the next run: implementerArgv, the resume identity, --continue and --dry-run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import commit_all
from fakes import relay
from relaykit import Bench


def started(bench: Bench, session_event: str | None, actions: list | None = None) -> None:
    lines = [{"stdout": session_event}] if session_event else []
    bench.script({"actions": [*lines, *(actions or [])]})


#: (relay, the event that reports a session id, the result field, resume flags, argv part)
RESUMES = {
    "codex": ('{"type":"thread.started","thread_id":"@"}\n', "threadId",
              ["--session", "old-1"], ["exec", "resume", "old-1"]),
    "claude": ('{"type":"system","subtype":"init","session_id":"@"}\n'
               '{"type":"result","subtype":"success","is_error":false,"result":"ok",'
               '"session_id":"@"}\n', "sessionId", ["--session", "old-1"],
               ["--resume", "old-1"]),
    "gemini": ('{"type":"init","session_id":"@"}\n'
               '{"type":"result","status":"success"}\n', "sessionId",
               ["--session", "old-1"], ["--resume", "old-1"]),
}  # fmt: skip


@pytest.mark.parametrize("key", sorted(RESUMES))
def test_a_resumed_run_names_what_it_asked_for_and_what_it_got(tmp_path, key):
    event, field, flags, argv_part = RESUMES[key]
    bench = Bench(tmp_path, key)
    started(bench, event.replace("@", "new-2"), [{"write": ["done.txt", "x"]}])
    run = bench.relay(*flags)
    assert run.code == 0, run
    result = run.result
    assert (result[field], result["sessionRequested"], result["sessionChanged"]) == (
        "new-2",
        "old-1",
        True,
    )
    assert result["repeatedFinal"] is False
    argv = bench.fake.calls("run")[-1]["argv"]
    assert result["implementerArgv"][1:] == argv
    for i in range(len(argv) - len(argv_part) + 1):
        if argv[i : i + len(argv_part)] == argv_part:
            break
    else:
        pytest.fail(f"{argv_part} not in {argv}")
    assert "answered in session new-2, not the old-1 asked for: continue with new-2" in run.out


@pytest.mark.parametrize("key", sorted(RESUMES))
def test_a_resume_that_keeps_its_id_is_not_a_change(tmp_path, key):
    event, field, flags, _ = RESUMES[key]
    bench = Bench(tmp_path, key)
    started(bench, event.replace("@", "old-1"))
    result = bench.relay(*flags).result
    assert (result[field], result["sessionChanged"]) == ("old-1", False)


def test_a_fresh_run_has_no_resume_fields_but_its_argv(tmp_path):
    bench = Bench(tmp_path, "codex")
    bench.script({})
    result = bench.relay().result
    assert "sessionRequested" not in result and "sessionChanged" not in result
    assert result["implementerArgv"] == [
        "codex", "exec", "--json", "-o", str(bench.out / "final.txt"), "-s", "workspace-write", "-"
    ]  # fmt: skip
    marker = json.loads((bench.out / "run.json").read_text())
    assert marker["implementerArgv"] == result["implementerArgv"]
    assert len(result["relayRunId"]) == 8 and result["relayRunId"] == marker["id"]


def test_a_brief_on_the_command_line_is_written_brief(tmp_path):
    bench = Bench(tmp_path, "agy")
    bench.script({"actions": [{"stdout": "done\n"}]})
    result = bench.relay().result
    assert "--print=<brief>" in result["implementerArgv"]
    assert all("smoke brief" not in arg for arg in result["implementerArgv"])


def test_the_same_answer_again_in_a_session_is_flagged(tmp_path):
    bench = Bench(tmp_path, "codex")
    answer = [{"stdout": '{"type":"thread.started","thread_id":"t-1"}\n'},
              {"write": [str(bench.out / "final.txt"), "I fixed it."]}]  # fmt: skip
    bench.script({"actions": [*answer, {"write": ["fix.txt", "1"]}]})
    first = bench.relay()
    assert first.result["finalMessage"] == "I fixed it."
    bench.script({"actions": [*answer, {"write": ["fix.txt", "2"]}]})
    again = bench.relay("--session", "t-1")
    assert again.result["repeatedFinal"] is True
    assert "the implementer may be stuck" in again.out


def test_a_follow_up_that_changes_nothing_is_flagged(tmp_path):
    bench = Bench(tmp_path, "codex")
    bench.script({"actions": [{"stdout": '{"type":"thread.started","thread_id":"t-1"}\n'}]})
    result = bench.relay("--session", "t-1").result
    assert result["changes"]["files"] == []
    assert result["repeatedFinal"] is True


def test_continue_resumes_in_the_same_worktree_and_links_the_runs(tmp_path, home):
    bench = Bench(tmp_path, "codex")
    (bench.work / "a.txt").write_text("a\n")
    commit_all(bench.work)
    env = bench.fake.env(XDG_STATE_HOME=str(tmp_path / "state"))
    started(bench, '{"type":"thread.started","thread_id":"t-1"}\n', [{"write": ["one.txt", "1"]}])
    first = relay("codex", *bench.args("--worktree"), env=env, out_dir=bench.out)
    assert first.code == 0, first
    first_result = first.result
    out2 = tmp_path / "out2"
    started(bench, '{"type":"thread.started","thread_id":"t-1"}\n', [{"write": ["two.txt", "2"]}])
    second = relay(
        "codex", "--brief", str(bench.brief), "--out-dir", str(out2),
        "--continue", first_result["relayRunId"], env=env, out_dir=out2,
    )  # fmt: skip
    assert second.code == 0, second
    result = second.result
    assert result["previousRun"] == first_result["relayRunId"]
    assert result["workdir"] == first_result["workdir"]
    assert result["worktree"] == first_result["worktree"]
    assert result["sessionRequested"] == "t-1" and result["sessionChanged"] is False
    assert [f["path"] for f in result["changes"]["files"]] == ["two.txt"]
    assert result["diffstat"]["filesChanged"] == 2
    call = bench.fake.calls("run")[-1]
    assert call["argv"][:4] == ["exec", "resume", "t-1", "--json"]
    assert call["cwd"] == first_result["workdir"]
    wrong = relay("claude", "--brief", str(bench.brief), "--continue", first_result["relayRunId"],
                  env=env, out_dir=tmp_path / "x")  # fmt: skip
    assert wrong.code == 2
    assert wrong.err == (
        f"relay: --continue {first_result['relayRunId']}: that run was codex (use codex-delegate); "
        "this relay is claude\n"
    )


def test_dry_run_prints_the_launch_and_launches_nothing(tmp_path, global_config):
    from conftest import fleet_doc, write_json

    write_json(global_config, fleet_doc({"review": {"implementer": "codex", "readOnly": True,
                                                    "model": "gpt-5"}}))  # fmt: skip
    bench = Bench(tmp_path, "codex")
    run = bench.relay("--lane", "review", "--dry-run")
    assert run.code == 0, run
    report = json.loads(run.out)
    assert report["dryRun"] is True
    assert (report["lane"], report["laneSource"], report["readOnly"]) == ("review", "global", True)
    assert report["readOnlyRoute"] == "`--read-only`: sandbox `read-only`"
    assert "readOnlyEnforced" in report and "readOnlyUnenforced" in report
    assert bench.fake.calls() == []
    assert not bench.out.exists()
    bench.script({})
    assert bench.relay("--lane", "review").code == 0  # the real thing, for comparison
    assert report["implementerArgv"][1:] == bench.fake.calls("run")[-1]["argv"]
    assert "-m" in report["implementerArgv"] and "gpt-5" in report["implementerArgv"]
    assert not Path(tmp_path / "work" / ".git" / "worktrees").exists()
