"""`runs apply` never loses a file: hostile runs against a source with work of its own.

Each run is a --worktree run of a fake codex that does one thing a careless or
hostile implementer might; what the source must hold afterwards is written
out here, byte for byte.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import uuid
from pathlib import Path

import pytest
from conftest import PYTHON, commit_all, git, make_repo
from relaykit import Bench

ROOT = Path(__file__).resolve().parent.parent


class Source:
    """A committed source repository, a fake codex, a private state dir; runs in worktrees."""

    def __init__(self, tmp_path: Path, repo: Path | None = None) -> None:
        self.tmp = tmp_path
        self.bench = Bench(tmp_path, "codex", repo=repo is None)
        if repo is not None:
            self.bench.work = make_repo(repo)
        self.repo = self.bench.work
        (self.repo / "a.txt").write_text("first\n")
        commit_all(self.repo, "start")
        self.env = self.bench.fake.env(XDG_STATE_HOME=str(tmp_path / "state"), TMPDIR=str(tmp_path))
        self.runs = 0

    def run(self, actions: list, expect: int = 0) -> Path:
        """A --worktree run of `actions`; its out dir."""
        from fakes import relay

        self.runs += 1
        out = self.tmp / f"out{self.runs}"
        self.bench.script({"actions": actions})
        args = ["--brief", str(self.bench.brief), "--cd", str(self.repo), "--out-dir", str(out)]
        done = relay("codex", *args, "--worktree", env=self.env, out_dir=out)
        assert done.code == expect, done
        return out

    def delegate(self, *args: str, **kw):
        done = subprocess.run(
            [PYTHON, "-m", "delegate_skills.commands.cli", *args],
            capture_output=True, text=True, env={**self.env, **kw.pop("env", {})}, timeout=120,
        )  # fmt: skip
        return done

    def apply(self, out: Path):
        return self.delegate("runs", "apply", str(out), "--json")

    def status(self) -> str:
        return subprocess.run(
            ["git", "-C", str(self.repo), "status", "--porcelain", "--ignored"],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip


def tree_bytes(root: Path) -> dict[str, str]:
    """Every file under `root` (the .git dir aside) with a digest of its bytes."""
    found = {}
    for here, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".git"]
        for name in files:
            path = Path(here, name)
            found[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


@pytest.fixture
def source(tmp_path, home) -> Source:
    return Source(tmp_path)


def test_a_run_that_removes_a_submodule_is_refused_and_the_checkout_kept(source, tmp_path):
    inner = make_repo(tmp_path / "inner")
    (inner / "f.txt").write_text("inside\n")
    commit_all(inner, "inner")
    git(
        source.repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(inner), "sub"
    )
    commit_all(source.repo, "with a submodule")
    (source.repo / "sub" / "f.txt").write_text("uncommitted work in the submodule\n")
    (source.repo / "sub" / "notes.txt").write_text("untracked work in the submodule\n")
    before = tree_bytes(source.repo / "sub")
    out = source.run([{"git": ["rm", "-q", "sub"]}])
    done = source.apply(out)
    assert done.returncode == 2, done
    assert done.stderr.count("\n") == 1
    assert "the run changes the submodule sub" in done.stderr
    assert tree_bytes(source.repo / "sub") == before
    # Untracked only in the worktree's index, its folder left as it was: the run's files did
    # not change, so its change record shows nothing, and nothing lands.
    out = source.run([{"git": ["rm", "-q", "--cached", "sub"]}])
    done = source.apply(out)
    assert done.returncode == 0, done
    assert json.loads(done.stdout)["applied"] == []
    assert tree_bytes(source.repo / "sub") == before


def test_a_new_folder_where_the_source_has_an_ignored_file_is_refused(source):
    (source.repo / ".gitignore").write_text(".env\n")
    commit_all(source.repo, "ignore .env")
    (source.repo / ".env").write_text("TOKEN=mine\n")
    out = source.run([{"mkdir": ".env"}, {"write": [".env/config", "y"]},
                      {"git": ["add", "-f", ".env/config"]}])  # fmt: skip
    done = source.apply(out)
    assert done.returncode == 2, done
    assert "has files git ignores or does not track where the run writes: .env" in done.stderr
    assert (source.repo / ".env").read_text() == "TOKEN=mine\n"


def test_an_ignored_folder_in_the_way_of_a_new_file_is_refused(source):
    (source.repo / ".gitignore").write_text("build/\n")
    commit_all(source.repo, "ignore build")
    (source.repo / "build").mkdir()
    (source.repo / "build" / "cache.bin").write_text("expensive\n")
    out = source.run([{"write": ["build", "a file now\n"]}, {"git": ["add", "-f", "build"]}])
    done = source.apply(out)
    assert done.returncode == 2, done
    assert "does not track where the run writes: build/cache.bin" in done.stderr
    assert (source.repo / "build" / "cache.bin").read_text() == "expensive\n"


def test_a_file_that_becomes_a_folder_lands_whole(source):
    out = source.run([{"unlink": "a.txt"}, {"mkdir": "a.txt"}, {"write": ["a.txt/b", "inside\n"]}])
    done = source.apply(out)
    assert done.returncode == 0, done
    assert json.loads(done.stdout)["applied"] == ["a.txt", "a.txt/b"]
    assert (source.repo / "a.txt" / "b").read_text() == "inside\n"
    assert source.status().startswith(" D a.txt\n")  # uncommitted, for the orchestrator


def test_a_folder_that_becomes_a_file_lands_whole(source):
    (source.repo / "d").mkdir()
    (source.repo / "d" / "x").write_text("x\n")
    commit_all(source.repo, "a folder")
    out = source.run([{"unlink": "d/x"}, {"rmdir": "d"}, {"write": ["d", "a file now\n"]}])
    done = source.apply(out)
    assert done.returncode == 0, done
    assert (source.repo / "d").read_text() == "a file now\n"


def test_deleting_a_folders_last_file_removes_the_folder(source):
    (source.repo / "pkg" / "deep").mkdir(parents=True)
    (source.repo / "pkg" / "deep" / "only.txt").write_text("x\n")
    commit_all(source.repo, "pkg")
    out = source.run([{"unlink": "pkg/deep/only.txt"}])
    assert source.apply(out).returncode == 0
    assert not (source.repo / "pkg").exists()


def test_two_applies_at_once_both_land(source):
    """Each apply runs alone under the source's landing lock: neither change is lost."""
    (source.repo / "a.txt").write_text("1\n2\n3\n4\n5\n")
    commit_all(source.repo, "five lines")
    one = source.run([{"write": ["a.txt", "one\n2\n3\n4\n5\n"]}])
    two = source.run([{"write": ["a.txt", "1\n2\n3\n4\nfive\n"]}])
    for _attempt in range(6):
        git(source.repo, "checkout", "--", ".")
        procs = [
            subprocess.Popen(
                [PYTHON, "-m", "delegate_skills.commands.cli", "runs", "apply", str(out)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=source.env,
            )
            for out in (one, two)
        ]
        try:
            codes = [proc.wait(timeout=120) for proc in procs]
        finally:
            for proc in procs:
                proc.kill()
                proc.communicate()
        assert codes == [0, 0]
        assert (source.repo / "a.txt").read_text() == "one\n2\n3\n4\nfive\n"


def test_apply_does_not_store_the_sources_untracked_files(source):
    big = os.urandom(4 << 20)
    (source.repo / "dataset.bin").write_bytes(big)  # untracked, not ignored
    out = source.run([{"append": ["a.txt", "run\n"]}])

    def objects() -> int:
        total = 0
        for here, _dirs, files in os.walk(source.repo / ".git" / "objects"):
            total += sum(os.path.getsize(os.path.join(here, name)) for name in files)
        return total

    before = objects()
    done = source.apply(out)
    assert done.returncode == 0, done
    assert objects() - before < 64 * 1024
    assert (source.repo / "dataset.bin").read_bytes() == big


def test_a_replaced_gitfile_makes_discard_refuse_and_apply_land_the_record(source, tmp_path):
    """apply lands the recorded change without reading the worktree; discard will not remove
    a worktree whose .git file names another repository."""
    evil = make_repo(tmp_path / "evil")
    marker = tmp_path / "fsmonitor-ran"
    git(evil, "config", "core.fsmonitor", f"touch {marker}; false")
    out = source.run([{"write": ["made.txt", "x\n"]}])
    worktree = Path(json.loads((out / "result.json").read_text())["worktree"]["path"])
    (worktree / ".git").write_text(f"gitdir: {evil / '.git'}\n")
    done = source.delegate("runs", "discard", str(out))
    assert done.returncode == 2, done
    assert "was replaced during the run" in done.stderr
    applied = source.delegate("runs", "apply", str(out), "--json")
    assert applied.returncode == 0, applied
    assert json.loads(applied.stdout)["applied"] == ["made.txt"]
    assert (source.repo / "made.txt").read_text() == "x\n"
    assert not marker.exists()
    assert worktree.is_dir()


def test_a_signal_during_apply_waits_until_the_tree_is_whole(source, tmp_path):
    """SIGTERM arrives while git writes the files: the apply ends whole, then the signal acts."""
    out = source.run([{"append": ["a.txt", "run\n"]}, {"write": ["made.txt", "new\n"]}])
    shim = tmp_path / "shim"
    shim.mkdir()
    real = subprocess.run(["which", "git"], capture_output=True, text=True).stdout.strip()
    (shim / "git").write_text(
        "#!/bin/sh\n"
        'case " $* " in *" read-tree -m -u "*) case " $* " in *" -n "*) ;; '
        "*) kill -TERM $PPID;; esac;; esac\n"
        f'exec {real} "$@"\n'
    )
    (shim / "git").chmod(0o755)
    path = f"{shim}{os.pathsep}{source.env['PATH']}"
    done = source.delegate("runs", "apply", str(out), env={"PATH": path})
    assert done.returncode == -15, done
    assert (source.repo / "a.txt").read_text() == "first\nrun\n"
    assert (source.repo / "made.txt").read_text() == "new\n"


@pytest.fixture
def small_disk(tmp_path):
    """A 6 MiB tmpfs (root only: skipped where mounting is not allowed)."""
    mount = tmp_path / f"disk-{uuid.uuid4().hex[:6]}"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=6m", "tmpfs", str(mount)],
        capture_output=True, text=True,
    )  # fmt: skip
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def test_a_full_disk_leaves_no_torn_file(tmp_path, home, small_disk):
    """The worktree's objects fit; writing the result into the full source does not."""
    source = Source(tmp_path, repo=small_disk / "repo")
    (source.repo / "b.txt").write_text("b\n" * 1000)
    commit_all(source.repo, "b")
    payload = "z" * (3 << 20)
    out = source.run(
        [{"append": ["a.txt", "run\n"]}, {"write": ["b.txt", payload]},
         {"write": ["c.txt", payload]}]
    )  # fmt: skip
    filler = small_disk / "filler"
    with open(filler, "wb") as handle:  # leave less room than the run's files need
        free = os.statvfs(small_disk).f_bavail * os.statvfs(small_disk).f_frsize
        handle.write(b"\0" * max(0, free - (1 << 20)))
    before = tree_bytes(source.repo)
    done = source.apply(out)
    assert done.returncode == 2, done
    assert "put back as it was" in done.stderr or "nothing was changed" in done.stderr
    assert tree_bytes(source.repo) == before
