"""What each run itself changed: `changes` in result.json, `runs diff` and `runs undo`.

The expected files, statuses, line counts and patches are written out here.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import PYTHON, commit_all, git
from relaykit import Bench

ROOT = Path(__file__).resolve().parent.parent


class Repo:
    """A committed repository, a fake codex and its own state dir; in-place runs, one by one."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        self.bench = Bench(tmp_path, "codex")
        self.work = self.bench.work
        (self.work / "app.py").write_text("def answer():\n    return 41\n")
        (self.work / "notes.txt").write_text("keep\n")
        commit_all(self.work, "start")
        self.env = self.bench.fake.env(XDG_STATE_HOME=str(tmp_path / "state"))
        self.count = 0

    def run(self, actions: list, *flags: str) -> tuple[Path, dict]:
        from fakes import relay

        self.count += 1
        out = self.tmp / f"run{self.count}"
        self.bench.script({"actions": actions})
        args = ["--brief", str(self.bench.brief), "--cd", str(self.work), "--out-dir", str(out)]
        done = relay("codex", *args, *flags, env=self.env, out_dir=out)
        assert done.code == 0, done
        self.last = done
        return out, json.loads((out / "result.json").read_text())

    def delegate(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [PYTHON, "-m", "delegate_skills.commands.cli", *args],
            capture_output=True, text=True, env=self.env, timeout=120,
        )  # fmt: skip


@pytest.fixture
def repo(tmp_path, home) -> Repo:
    return Repo(tmp_path)


FIX = "def answer():\n    return 42\n"


def test_a_run_in_a_dirty_tree_records_only_its_own_change(repo):
    (repo.work / "notes.txt").write_text("keep\nmy own edit, before the run\n")
    (repo.work / "scratch.txt").write_text("mine\n")
    out, result = repo.run([{"write": ["app.py", FIX]}])
    changes = result["changes"]
    assert changes["files"] == [
        {"path": "app.py", "status": "modified", "linesAdded": 1, "linesRemoved": 1,
         "binary": False},
    ]  # fmt: skip
    assert (changes["filesChanged"], changes["linesAdded"], changes["linesRemoved"]) == (1, 1, 1)
    assert changes["patch"] == str(out / "changes.patch")
    patch = (out / "changes.patch").read_text()
    assert "-    return 41\n+    return 42\n" in patch and "notes.txt" not in patch
    assert result["touchedFiles"] == [" M app.py", " M notes.txt", "?? scratch.txt"]


def test_a_follow_up_that_reverts_shows_the_revert(repo):
    repo.run([{"write": ["app.py", FIX]}])
    out, result = repo.run([{"write": ["app.py", "def answer():\n    return 41\n"]}])
    assert [
        (f["path"], f["linesAdded"], f["linesRemoved"]) for f in result["changes"]["files"]
    ] == [("app.py", 1, 1)]
    assert "-    return 42\n+    return 41\n" in (out / "changes.patch").read_text()


def test_new_deleted_renamed_binary_and_mode_only_files(repo):
    (repo.work / "old-name.txt").write_text("".join(f"line {n}\n" for n in range(20)))
    (repo.work / "tool.sh").write_text("echo hi\n")
    commit_all(repo.work, "more")
    out, result = repo.run(
        [
            {"write": ["brand-new.txt", "one\ntwo\n"]},
            {"unlink": "notes.txt"},
            {"git": ["mv", "old-name.txt", "new-name.txt"]},
            {"stdout_hex": ""},
            {"write": ["image.bin", "\x00\x01\x02"]},
            {"chmod": ["tool.sh", "755"]},
        ]
    )
    files = {f["path"]: f for f in result["changes"]["files"]}
    assert files["brand-new.txt"] == {"path": "brand-new.txt", "status": "added",
                                      "linesAdded": 2, "linesRemoved": 0, "binary": False}  # fmt: skip
    assert files["notes.txt"] == {"path": "notes.txt", "status": "deleted",
                                  "linesAdded": 0, "linesRemoved": 1, "binary": False}  # fmt: skip
    assert files["new-name.txt"] == {"path": "new-name.txt", "status": "renamed",
                                     "linesAdded": 0, "linesRemoved": 0, "binary": False,
                                     "oldPath": "old-name.txt"}  # fmt: skip
    assert files["image.bin"] == {"path": "image.bin", "status": "added",
                                  "linesAdded": None, "linesRemoved": None, "binary": True}  # fmt: skip
    assert files["tool.sh"] == {"path": "tool.sh", "status": "modified", "linesAdded": 0,
                                "linesRemoved": 0, "binary": False, "oldMode": "100644",
                                "newMode": "100755"}  # fmt: skip
    assert len(files) == 5
    # The patch is binary-safe: git applies it to the starting tree.
    check = repo.tmp / "check"
    subprocess.run(["git", "clone", "-q", str(repo.work), str(check)], check=True)
    applied = subprocess.run(
        ["git", "-C", str(check), "apply", "--index", str(out / "changes.patch")],
        capture_output=True, text=True,
    )  # fmt: skip
    assert applied.returncode == 0, applied.stderr
    assert (check / "image.bin").read_bytes() == b"\x00\x01\x02"


def test_a_run_that_changes_nothing(repo):
    out, result = repo.run([])
    assert result["changes"]["files"] == []
    assert (out / "changes.patch").read_bytes() == b""
    assert "changes: none (this run changed no file)" in repo.last.out


def test_runs_diff_prints_the_runs_own_patch_with_new_files(repo):
    out, _ = repo.run([{"write": ["app.py", FIX]}, {"write": ["new.txt", "fresh\n"]}])
    (repo.work / "app.py").write_text("moved on since\n")  # the record, not the tree
    done = repo.delegate("runs", "diff", str(out))
    assert done.returncode == 0, done.stderr
    assert done.stdout == (out / "changes.patch").read_text()
    assert "+fresh\n" in done.stdout
    by_id = repo.delegate("runs", "diff", result_id(out), "--name-only")
    assert by_id.stdout == "app.py\nnew.txt\n"
    stat = repo.delegate("runs", "diff", str(out), "--stat")
    assert " 2 files changed, 2 insertions(+), 1 deletion(-)\n" in stat.stdout


def result_id(out: Path) -> str:
    return json.loads((out / "run.json").read_text())["id"]


def test_runs_undo_takes_back_exactly_one_run(repo):
    repo.run([{"write": ["app.py", FIX]}])
    (repo.work / "notes.txt").write_text("keep\nmine\n")  # the user's own, after run one
    second, _ = repo.run([{"write": ["extra.py", "x = 1\n"]}, {"unlink": "app.py"}])
    done = repo.delegate("runs", "undo", str(second), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["restored"] == ["app.py", "extra.py"]
    assert (repo.work / "app.py").read_text() == FIX  # run one's fix is back
    assert not (repo.work / "extra.py").exists()
    assert (repo.work / "notes.txt").read_text() == "keep\nmine\n"
    again = repo.delegate("runs", "undo", str(second))
    assert again.returncode == 2
    assert "already undone" in again.stderr


def test_runs_undo_refuses_when_a_touched_file_changed_since(repo):
    out, _ = repo.run([{"write": ["app.py", FIX]}, {"write": ["new.txt", "x\n"]}])
    (repo.work / "new.txt").write_text("edited after the run\n")
    done = repo.delegate("runs", "undo", str(out))
    assert done.returncode == 2
    assert done.stderr == (
        f"delegate: cannot undo {run_id(out)}: new.txt changed since the run (1 path(s)); nothing was "
        "changed. Take the run back by hand (runs diff shows its patch)\n"
    )
    assert (repo.work / "app.py").read_text() == FIX
    assert (repo.work / "new.txt").read_text() == "edited after the run\n"


def test_runs_undo_of_an_applied_worktree_run_takes_the_apply_back(repo):
    out, _ = repo.run([{"write": ["app.py", FIX]}], "--worktree")
    assert repo.delegate("runs", "apply", str(out)).returncode == 0
    assert (repo.work / "app.py").read_text() == FIX
    done = repo.delegate("runs", "undo", str(out), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["undid"] == "apply"
    assert (repo.work / "app.py").read_text() == "def answer():\n    return 41\n"
    assert git(repo.work, "status", "--porcelain") == ""


def test_a_lone_skill_folder_prints_the_diff_under_a_bare_python(repo, tmp_path):
    out, _ = repo.run([{"write": ["new.txt", "fresh\n"]}])
    lone = tmp_path / "lone"
    lone.mkdir()
    shutil.copytree(ROOT / "skills" / "codex-delegate", lone / "codex-delegate")
    done = subprocess.run(
        ["python3", "-I", "-S", str(lone / "codex-delegate" / "scripts" / "runs.py"), "diff",
         str(out)],
        capture_output=True, text=True, env={**repo.env, "PATH": os.environ["PATH"]},
        timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == (out / "changes.patch").read_text()


def run_id(out) -> str:
    """The id the run store gave the run in `out` (its result.json says it)."""
    return json.loads((Path(out) / "result.json").read_text())["relayRunId"]
