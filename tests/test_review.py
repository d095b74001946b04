"""`delegate review RUN`: another implementer's read-only verdict on what a run changed."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import delegate
from fakes import Fake
from relaykit import DETECT_ONLY
from test_worktree import BRIEF_EDIT, Source

from delegate_skills.runs.review import parse_verdict

VALID = (
    "Looks mostly right.\n```json\n"
    '{"verdict": "request-changes", "findings": [{"file": "made.txt", "line": 2, '
    '"severity": "high", "text": "two is wrong"}, {"text": "add a test", "severity": "urgent"}]}'
    "\n```\n"
)


def _claude_says(text: str) -> str:
    result = {"type": "result", "subtype": "success", "is_error": False,
              "session_id": "11111111-1111-4111-8111-111111111111", "result": text}  # fmt: skip
    return json.dumps(result) + "\n"


@pytest.fixture
def reviewed(tmp_path, home):
    """A finished codex worktree run, and a fake claude on PATH to review it."""
    source = Source(tmp_path)
    source.bench.script(BRIEF_EDIT)
    done = source.relay("--worktree")
    assert done.code == 0, done
    claude = Fake(tmp_path / "fake-claude")
    claude.install("claude")
    source.env = {**source.env, **DETECT_ONLY,
                  "PATH": f"{claude.bin}{os.pathsep}{source.env['PATH']}"}  # fmt: skip
    return source, claude, done.result


def _review(source: Source, tmp_path: Path, ref: str, name: str = "review"):
    out = tmp_path / name
    done = delegate("review", ref, "--implementer", "claude", "--out-dir", str(out),
                    "--json", env=source.env)  # fmt: skip
    return done, out


def test_a_valid_verdict_block(reviewed, tmp_path):
    source, claude, original = reviewed
    claude.script({"run": {"actions": [{"stdout": _claude_says(VALID)}]}})
    done, out = _review(source, tmp_path, original["relayRunId"])
    assert done.code == 0, done.err
    result = json.loads(done.out)
    assert result["reviewOf"] == original["relayRunId"]
    assert result["review"]["verdict"] == "request-changes"
    assert result["review"]["findings"] == [
        {"file": "made.txt", "line": 2, "severity": "high", "text": "two is wrong"},
        {"file": None, "line": None, "severity": None, "text": "add a test"},
    ]
    assert json.loads((out / "result.json").read_text())["review"] == result["review"]
    brief = (out / "review-brief.md").read_text()
    assert "+one\n+two" in brief and "Do not edit any file." in brief  # the patch and the ask
    assert claude.run_call()["cwd"] == original["worktree"]["path"]  # in the run's worktree
    assert "--permission-mode" in claude.run_call()["argv"]  # claude's read-only route


def test_an_invalid_block_and_no_block_give_no_verdict(reviewed, tmp_path):
    source, claude, original = reviewed
    for n, answer in enumerate(('```json\n{"verdict": "maybe"}\n```', "I think it is fine.")):
        claude.script({"run": {"actions": [{"stdout": _claude_says(answer)}]}})
        done, _out = _review(source, tmp_path, original["relayRunId"], f"review{n}")
        assert done.code == 0, done.err
        review = json.loads(done.out)["review"]
        assert review == {"verdict": None, "findings": [], "raw": answer}


def test_its_own_implementer_is_refused_unless_allowed(reviewed, tmp_path):
    source, _claude, original = reviewed
    done = delegate("review", "--last", "--implementer", "codex", env=source.env)
    assert done.code == 2, done
    assert done.err == (
        f"delegate: {original['relayRunId']} was written by codex; a run is not reviewed by its "
        "own implementer (the cross-review rule): name another, or pass --allow-self\n"
    )
    neither = delegate("review", "--last", env=source.env)
    assert neither.code == 2 and "--lane L or --implementer K" in neither.err


def test_parse_takes_the_last_valid_block():
    text = '```json\n{"verdict": "approve"}\n```\nlater:\n```json\n{"verdict": "approve",' \
           ' "findings": []}\n```'  # fmt: skip
    assert parse_verdict(text)["verdict"] == "approve"
    assert parse_verdict("```json\nnot json\n```")["verdict"] is None


def test_compare_shows_each_runs_change_check_and_review(reviewed, tmp_path):
    from delegate_skills.commands.runs_cli import compare_text

    source, claude, original = reviewed
    claude.script({"run": {"actions": [{"stdout": _claude_says(VALID)}]}})
    assert _review(source, tmp_path, original["relayRunId"])[0].code == 0
    source.bench.script(BRIEF_EDIT)
    second = source.relay("--worktree", "--check", "exit 1", out=tmp_path / "second")
    assert second.code == 0, second
    done = delegate("runs", "compare", original["relayRunId"], str(tmp_path / "second"),
                    "--json", env=source.env)  # fmt: skip
    assert done.code == 0, done.err
    rows = json.loads(done.out)["runs"]
    assert [(r["id"], r["status"], r["changes"], r["check"], r["review"]) for r in rows] == [
        (original["relayRunId"], "completed",
         {"filesChanged": 2, "linesAdded": 3, "linesRemoved": 0}, None, "request-changes"),
        (second.result["relayRunId"], "completed",
         {"filesChanged": 2, "linesAdded": 3, "linesRemoved": 0}, 1, None),
    ]  # fmt: skip
    lines = compare_text({"runs": rows}).splitlines()
    assert lines[0].split() == ["run", "implementer", "status", "files", "+lines", "-lines",
                                "check", "review", "tokens", "time"]  # fmt: skip
    assert lines[1].split()[:8] == [original["relayRunId"], "codex", "completed", "2", "3", "0",
                                    "-", "request-changes"]  # fmt: skip
    assert lines[2].split()[6:8] == ["FAIL", "-"]


def test_compare_shows_the_verdict_of_the_latest_review(reviewed, tmp_path):
    """Reviewed twice: first changes requested, then approved; the later one is the verdict."""
    source, claude, original = reviewed
    claude.script({"run": {"actions": [{"stdout": _claude_says(VALID)}]}})
    assert _review(source, tmp_path, original["relayRunId"], "first")[0].code == 0
    approve = 'Fine now.\n```json\n{"verdict": "approve", "findings": []}\n```\n'
    claude.script({"run": {"actions": [{"stdout": _claude_says(approve)}]}})
    assert _review(source, tmp_path, original["relayRunId"], "second")[0].code == 0
    done = delegate("runs", "compare", original["relayRunId"], "--json", env=source.env)
    assert done.code == 0, done.err
    assert [r["review"] for r in json.loads(done.out)["runs"]] == ["approve"]


def test_fanout_review_by_reviews_every_completed_run(reviewed, tmp_path):
    from conftest import fleet_doc, write_json

    source, claude, _original = reviewed
    doc = write_json(tmp_path / "lanes.json", fleet_doc({"critic": {"implementer": "claude"}}))
    assert delegate("config", "write", "--scope", "project", "--cwd", str(source.repo), str(doc),
                    env=source.env).code == 0  # fmt: skip
    claude.script({"run": {"actions": [{"stdout": _claude_says(VALID)}]}})
    source.bench.script(BRIEF_EDIT)
    done = delegate("fanout", "--brief", str(source.bench.brief), "--cd", str(source.repo),
                    "--implementer", "codex", "--attempts", "2", "--review-by", "critic",
                    "--json", env=source.env)  # fmt: skip
    assert done.code == 0, done.err
    rows = json.loads(done.out)["runs"]
    assert [(r["task"], r["status"], r["review"]) for r in rows] == [
        ("#1", "completed", "request-changes"),
        ("#2", "completed", "request-changes"),
    ]
    for row in rows:
        review = json.loads(Path(row["reviewRun"], "result.json").read_text())
        assert (
            review["reviewOf"]
            == json.loads(Path(row["outDir"], "result.json").read_text())["relayRunId"]
        )


def test_runs_py_reviews_with_the_reviewers_folder_beside_it(reviewed, tmp_path):
    import shutil

    from conftest import PYTHON, ROOT, run

    source, claude, original = reviewed
    skills = tmp_path / "agent-skills"
    shutil.copytree(ROOT / "skills" / "codex-delegate", skills / "codex-delegate")
    runs_py = str(skills / "codex-delegate" / "scripts" / "runs.py")
    ref = original["relayRunId"]
    alone = run([PYTHON, "-I", "-S", runs_py, "review", ref, "--implementer", "claude"],
                env=source.env)  # fmt: skip
    assert alone.code == 2, alone
    assert alone.err == (
        f"runs.py: review by claude needs the claude-delegate skill folder beside this one "
        f"({skills / 'claude-delegate'}); install it, or use delegate review\n"
    )
    shutil.copytree(ROOT / "skills" / "claude-delegate", skills / "claude-delegate")
    claude.script({"run": {"actions": [{"stdout": _claude_says(VALID)}]}})
    done = run([PYTHON, "-I", "-S", runs_py, "review", ref, "--implementer", "claude"],
               env=source.env)  # fmt: skip
    assert done.code == 0, done
    result = json.loads(done.out)
    assert (result["reviewOf"], result["review"]["verdict"]) == (ref, "request-changes")
