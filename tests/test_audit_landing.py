"""`runs apply` and `runs discard` refusals that the other landing tests leave unexercised.

Each case is a refusal of landing.py that a careless edit could drop without
any other test noticing: a run still running, a record naming a branch that
is not a run's, a `.git` file that leaves the repository when no record
remembers it, and a local edit hidden behind assume-unchanged.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
from pathlib import Path

import pytest
from conftest import PYTHON, commit_all, git
from fakes import relay, relay_argv
from relaykit import Bench, read_pid


class Source:
    """A committed source repository, a fake codex and a private state dir; --worktree runs."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        self.bench = Bench(tmp_path, "codex")
        self.repo = self.bench.work
        (self.repo / "a.txt").write_text("first\n")
        commit_all(self.repo, "start")
        self.state = tmp_path / "state"
        self.env = self.bench.fake.env(XDG_STATE_HOME=str(self.state), TMPDIR=str(tmp_path))
        self.out = tmp_path / "out"

    def args(self) -> list[str]:
        brief = str(self.bench.brief)
        return ["--brief", brief, "--cd", str(self.repo), "--out-dir", str(self.out), "--worktree"]

    def run(self, actions: list) -> dict:
        self.bench.script({"actions": actions})
        done = relay("codex", *self.args(), env=self.env, out_dir=self.out)
        assert done.code == 0, done
        return json.loads((self.out / "result.json").read_text())

    def delegate(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [PYTHON, "-m", "delegate_skills.commands.cli", *args],
            capture_output=True, text=True, env=self.env, timeout=120,
        )  # fmt: skip

    def record_dir(self) -> Path:
        run_id = json.loads((self.out / "run.json").read_text())["id"]
        return self.state / "delegate-skills" / "runs" / run_id


@pytest.fixture
def source(tmp_path, home) -> Source:
    return Source(tmp_path)


def test_apply_and_discard_refuse_a_run_that_is_still_running(source):
    source.bench.script(
        {
            "actions": [
                {"write": ["made.txt", "half done\n"]},
                {"pid_file": str(source.tmp / "child.pid")},
                {"wait": "forever"},
            ],
            "on_term": {"exit": 0},
        }
    )
    proc = subprocess.Popen(
        relay_argv("codex", *source.args()),
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=source.env,
    )  # fmt: skip
    try:
        read_pid(source.tmp / "child.pid")
        run_id = json.loads((source.out / "run.json").read_text())["id"]
        for verb in ("apply", "discard"):
            done = source.delegate("runs", verb, str(source.out))
            assert done.returncode == 2, done
            assert done.stderr == (
                f"delegate: {source.out}: the run is still running; wait for it "
                f"(runs wait {run_id}) before you {verb} it\n"
            )
        assert not (source.repo / "made.txt").exists()
        assert git(source.repo, "status", "--porcelain") == ""
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.communicate(timeout=60)
        finally:
            proc.kill()
            proc.communicate()


def test_discard_refuses_a_record_that_names_a_branch_that_is_not_a_runs(source):
    git(source.repo, "branch", "feature")
    result = source.run([{"write": ["made.txt", "x\n"]}])
    record = source.record_dir() / "record.json"
    data = json.loads(record.read_text())
    data["worktree"]["branch"] = "feature"
    record.write_text(json.dumps(data))
    done = source.delegate("runs", "discard", str(source.out), "--force")
    assert done.returncode == 2, done
    assert done.stderr == (
        f"delegate: {source.out}: the run's record names branch feature, not a run's\n"
    )
    assert git(source.repo, "branch", "--list", "feature").strip() == "feature"
    assert Path(result["worktree"]["path"]).is_dir()


def test_without_a_record_nothing_acts_on_the_run(source, tmp_path):
    """A run directory the store has no record of is foreign: neither applied nor discarded."""
    result = source.run([{"write": ["made.txt", "x\n"]}])
    shutil.rmtree(source.record_dir())
    worktree = Path(result["worktree"]["path"])
    for verb in ("apply", "discard"):
        done = source.delegate("runs", verb, str(source.out))
        assert done.returncode == 2, done
        assert done.stderr == (
            f"delegate: {source.out}: no relay of this machine recorded a run there (a foreign "
            "run directory); nothing acts on it\n"
        )
    assert not (source.repo / "made.txt").exists()
    assert worktree.is_dir()


def test_apply_never_overwrites_a_local_edit_hidden_behind_assume_unchanged(source):
    result = source.run([{"append": ["a.txt", "run\n"]}])
    assert result["status"] == "completed"
    git(source.repo, "update-index", "--assume-unchanged", "a.txt")
    (source.repo / "a.txt").write_text("my own edit\n")
    done = source.delegate("runs", "apply", str(source.out))
    assert done.returncode == 2, done
    assert "conflict with the run's in a.txt; nothing was changed" in done.stderr
    assert (source.repo / "a.txt").read_text() == "my own edit\n"


def test_an_edit_made_while_apply_runs_is_never_overwritten(source, tmp_path):
    """The source changes between apply's reading and its writing: git refuses, nothing is put back.

    A git shim edits a.txt just before the first `read-tree -m -u` (the dry run):
    the refusal must leave the user's edit alone, not "restore" a.txt over it.
    """
    source.run([{"append": ["a.txt", "run\n"]}])
    shim = tmp_path / "shim"
    shim.mkdir()
    real = shutil.which("git")
    once = tmp_path / "edited"
    (shim / "git").write_text(
        "#!/bin/sh\n"
        'case " $* " in *" read-tree -m -u "*)\n'
        f'  if [ ! -e "{once}" ]; then : > "{once}"; '
        f'echo "edited meanwhile" > "{source.repo / "a.txt"}"; fi;;\n'
        "esac\n"
        f'exec {real} "$@"\n'
    )
    (shim / "git").chmod(0o755)
    env = {**source.env, "PATH": f"{shim}:{source.env['PATH']}"}
    done = subprocess.run(
        [PYTHON, "-m", "delegate_skills.commands.cli", "runs", "apply", str(source.out)],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert once.exists()
    assert (source.repo / "a.txt").read_text() == "edited meanwhile\n"
    assert done.returncode == 2, done
    assert done.stderr.endswith("; nothing was changed\n"), done.stderr
