"""Every git the relay starts runs nothing the repository chose (gitmeta.py).

Each case configures a repository to run a program (fsmonitor, a hook, a
clean filter) or points git elsewhere through the environment, and checks
that asking git about the repository ran nothing and answered for it; that
`git status` leaves the user's index alone; and that a git that hangs is
ended with everything it started.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from conftest import PYTHON, commit_all, git, make_repo

from delegate_skills import gitmeta
from delegate_skills.snapshots.gitstate import touched_files
from delegate_skills.snapshots.snapshot import Snapshotter


def committed(path: Path) -> Path:
    repo = make_repo(path)
    (repo / "a.txt").write_text("a\n")
    commit_all(repo)
    return repo


def test_the_repositorys_fsmonitor_never_runs(tmp_path):
    repo = committed(tmp_path / "repo")
    marker = tmp_path / "fsmonitor-ran"
    git(repo, "config", "core.fsmonitor", f"touch {marker}; false")
    (repo / "new.txt").write_text("x\n")
    assert touched_files(str(repo)) == ["?? new.txt"]
    git_dir = str(repo / ".git")
    assert gitmeta.BoundGit(str(repo), git_dir).out("status", "--porcelain") == b"?? new.txt\n"
    assert not marker.exists()


def test_the_repositorys_hooks_never_run(tmp_path):
    repo = committed(tmp_path / "repo")
    marker = tmp_path / "hook-ran"
    hook = repo / ".git" / "hooks" / "post-checkout"
    hook.write_text(f"#!/bin/sh\ntouch {marker}\n")
    hook.chmod(0o755)
    done = gitmeta.git_outcome(str(repo), "checkout", "-q", "-b", "elsewhere")
    assert done.ok, done.reason()
    assert git(repo, "branch", "--show-current") == "elsewhere"
    assert not marker.exists()


def filtered(tmp_path: Path, seconds: int) -> tuple[Path, Path]:
    """A repository whose config runs a clean filter on *.txt, every file's mtime moved by
    `seconds` (in the past: no index entry is racily clean; in the future: every one is)."""
    repo = committed(tmp_path / "repo")
    marker = tmp_path / "filter-ran"
    git(repo, "config", "filter.evil.clean", f"touch {marker}; cat")
    (repo / ".gitattributes").write_text("*.txt filter=evil\n")
    (repo / "b.txt").write_text("b\n")
    moved = os.stat(repo / "b.txt").st_mtime_ns + seconds * 10**9
    for name in ("a.txt", "b.txt", ".gitattributes"):
        os.utime(repo / name, ns=(moved, moved))
    return repo, marker


def snapshot(repo: Path, scratch: Path) -> bytes | None:
    """The names in the tree of a first snapshot of `repo`."""
    scratch.mkdir()
    git_dir = str(repo / ".git")
    snapshots = Snapshotter(str(repo), git_dir, git_dir, str(scratch))
    tree = snapshots.take(first=True)
    return snapshots.git().out("ls-tree", "--name-only", tree)


def test_a_clean_filter_the_repository_configures_never_runs(tmp_path):
    repo, marker = filtered(tmp_path, -100)
    assert snapshot(repo, tmp_path / "scratch") == b".gitattributes\na.txt\nb.txt\n"
    assert not marker.exists()


def test_a_clean_filter_never_runs_for_racily_clean_files(tmp_path):
    """Writing the index re-hashes racily clean entries: with the filters emptied too."""
    repo, marker = filtered(tmp_path, 100)
    snapshot(repo, tmp_path / "scratch")
    assert not marker.exists()


def test_git_dir_in_the_environment_never_redirects_git(tmp_path, monkeypatch):
    repo = committed(tmp_path / "repo")
    other = committed(tmp_path / "other")
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))
    monkeypatch.setenv("GIT_WORK_TREE", str(other))
    paths = gitmeta.repo_paths(str(repo))
    assert (paths.toplevel, paths.git_dir) == (str(repo), str(repo / ".git"))


def test_git_status_never_rewrites_the_users_index(tmp_path):
    repo = committed(tmp_path / "repo")
    old = os.stat(repo / "a.txt").st_mtime_ns - 10 * 10**9
    os.utime(repo / "a.txt", ns=(old, old))  # stat-dirty, the same bytes: status would refresh
    index = repo / ".git" / "index"
    before = os.stat(index)
    assert touched_files(str(repo)) == []
    after = os.stat(index)
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


#: A git that hangs with a child of its own holding its stdout.
HANGING_GIT = "#!/bin/sh\nsleep 600\necho never\n"

CALL = """
import time
from delegate_skills.gitmeta import run_git
started = time.monotonic()
answer = run_git(".", "status", timeout=0.5)
print(answer, time.monotonic() - started < 10)
"""


def test_a_hanging_git_is_ended_with_what_it_started(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "git").write_text(HANGING_GIT)
    (bin_dir / "git").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(
        [PYTHON, "-c", CALL], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "None True\n"


def test_a_filter_configured_between_two_snapshots_never_runs(tmp_path):
    """The drivers are listed once per process, and again as soon as a configuration file
    changes: in the repository's config, or in a file it includes that did not exist yet."""
    for how in ("config", "include"):
        repo = committed(tmp_path / how / "repo")
        marker = tmp_path / how / "filter-ran"
        included = tmp_path / how / "extra.cfg"
        git(repo, "config", "include.path", str(included))  # not there yet
        scratch = tmp_path / how / "scratch"
        scratch.mkdir()
        git_dir = str(repo / ".git")
        snapshots = Snapshotter(str(repo), git_dir, git_dir, str(scratch))
        snapshots.take(first=True)
        if how == "config":
            git(repo, "config", "filter.evil.clean", f"touch {marker}; cat")
        else:
            included.write_text(f'[filter "evil"]\n\tclean = touch {marker}; cat\n')
        (repo / ".gitattributes").write_text("*.txt filter=evil\n")
        (repo / "b.txt").write_text("b\n")
        snapshots.take(first=False)
        assert not marker.exists(), how
