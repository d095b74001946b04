"""`runs undo` refusals and its queue, beyond what test_change_record covers.

undo must refuse (and change nothing) when a touched file changed since the
run even behind assume-unchanged, and when an ignored file stands where the
undo would write; and it waits in the landing queue behind apply and undo.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from conftest import PYTHON, commit_all, git
from fakes import relay, wait_for
from relaykit import Bench

ORIGINAL = "def answer():\n    return 41\n"
FIX = "def answer():\n    return 42\n"


class Repo:
    """A committed repository, a fake codex and its own state dir; in-place runs."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        self.bench = Bench(tmp_path, "codex")
        self.work = self.bench.work
        (self.work / "app.py").write_text(ORIGINAL)
        commit_all(self.work, "start")
        self.env = self.bench.fake.env(XDG_STATE_HOME=str(tmp_path / "state"))
        self.count = 0

    def run(self, actions: list) -> Path:
        self.count += 1
        out = self.tmp / f"run{self.count}"
        self.bench.script({"actions": actions})
        args = ["--brief", str(self.bench.brief), "--cd", str(self.work), "--out-dir", str(out)]
        done = relay("codex", *args, env=self.env, out_dir=out)
        assert done.code == 0, done
        return out

    def argv(self, *args: str) -> list[str]:
        return [PYTHON, "-m", "delegate_skills.commands.cli", *args]

    def delegate(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            self.argv(*args), capture_output=True, text=True, env=self.env, timeout=120
        )


@pytest.fixture
def repo(tmp_path, home) -> Repo:
    return Repo(tmp_path)


def test_undo_refuses_an_edit_since_the_run_hidden_behind_assume_unchanged(repo):
    out = repo.run([{"write": ["app.py", FIX]}])
    git(repo.work, "add", "app.py")  # the index holds the run's version now
    git(repo.work, "update-index", "--assume-unchanged", "app.py")
    (repo.work / "app.py").write_text("my own edit, after the run\n")
    done = repo.delegate("runs", "undo", str(out))
    assert done.returncode == 2, done
    assert done.stderr == (
        f"delegate: cannot undo {run_id(out)}: app.py changed since the run (1 path(s)); nothing was "
        "changed. Take the run back by hand (runs diff shows its patch)\n"
    )
    assert (repo.work / "app.py").read_text() == "my own edit, after the run\n"


def test_undo_never_replaces_an_ignored_file_where_it_would_write(repo):
    (repo.work / ".gitignore").write_text("data\n")
    (repo.work / "data").mkdir()
    (repo.work / "data" / "keep.txt").write_text("tracked despite the ignore\n")
    git(repo.work, "add", ".gitignore")
    git(repo.work, "add", "-f", "data/keep.txt")
    git(repo.work, "commit", "-q", "-m", "forced in")
    out = repo.run([{"unlink": "data/keep.txt"}, {"rmdir": "data"}])
    (repo.work / "data").write_text("precious, ignored\n")
    done = repo.delegate("runs", "undo", str(out))
    assert done.returncode == 2, done
    assert done.stderr == (
        f"delegate: cannot undo {run_id(out)}: {repo.work} has files git ignores or does not track "
        "where the run writes: data; move them aside and apply again (nothing was changed)\n"
    )
    assert (repo.work / "data").read_text() == "precious, ignored\n"


def _holds_open(pid: int, path: Path) -> bool:
    """Whether process `pid` has `path` open."""
    fds = f"/proc/{pid}/fd"
    try:
        names = os.listdir(fds)
    except OSError:
        return False
    for name in names:
        try:
            if os.readlink(os.path.join(fds, name)) == str(path):
                return True
        except OSError:
            continue
    return False


def test_undo_waits_in_the_landing_queue(repo):
    from delegate_skills.runs.gitland import landing_lock

    out = repo.run([{"write": ["app.py", FIX]}])
    lock = repo.work / ".git" / "delegate-skills" / "landing.lock"
    proc = None
    try:
        with landing_lock(str(repo.work / ".git")):
            proc = subprocess.Popen(
                repo.argv("runs", "undo", str(out), "--json"),
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=repo.env,
            )  # fmt: skip
            wait_for(lambda: proc.poll() is not None or _holds_open(proc.pid, lock))
            assert proc.poll() is None, proc.communicate()
            assert (repo.work / "app.py").read_text() == FIX  # nothing done while queued
        stdout, stderr = proc.communicate(timeout=120)
        assert proc.returncode == 0, stderr
        assert json.loads(stdout)["restored"] == ["app.py"]
        assert (repo.work / "app.py").read_text() == ORIGINAL
    finally:
        if proc is not None:
            proc.kill()
            proc.communicate()


def run_id(out) -> str:
    """The id the run store gave the run in `out` (its result.json says it)."""
    return json.loads((Path(out) / "result.json").read_text())["relayRunId"]
