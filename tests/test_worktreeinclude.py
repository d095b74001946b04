""".worktreeinclude: the ignored files every new worktree gets from the source checkout.

Worktree runs (`--worktree`, fanout) go through the relay with the fake codex
(test_worktree.Source); `--host` runs go over the local sshd of sshkit.py.
Expected paths, bytes, modes, reasons and printed lines are written out here.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest
import sshkit
from conftest import commit_all, delegate, git, make_repo
from fakes import Fake, relay_argv
from test_worktree import BRIEF_EDIT, Source

from delegate_skills import worktreeinclude

ssh_world = pytest.fixture(sshkit.ssh_world)

ENV_BYTES = b"TOKEN=local-secret\n\x00\xff binary tail\n"
LOCAL_JSON = b'{"db": "postgres://localhost/dev"}\n'
SKIP_OUTSIDE = "a symlink to a place outside the repository"


@pytest.fixture
def source(tmp_path, home) -> Source:
    return Source(tmp_path)


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def _files_under(root: Path) -> list[str]:
    """Every file and symlink under `root` (outside .git), relative, sorted."""
    found = []
    for top, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".git" and not os.path.islink(os.path.join(top, d))]
        links = [d for d in os.listdir(top) if os.path.islink(os.path.join(top, d))]
        for name in {*names, *links}:
            if name == ".git" and top == str(root):
                continue
            found.append(os.path.relpath(os.path.join(top, name), root))
    return sorted(found)


def _ignore_and_list(repo: Path, ignore: str, include: str) -> None:
    (repo / ".gitignore").write_text(ignore)
    (repo / ".worktreeinclude").write_text(include)
    commit_all(repo, "ignore rules and the include list")


def _worktree_run(source: Source, scenario: dict | None = None):
    source.bench.script(scenario or {})
    run = source.relay("--worktree")
    assert run.code == 0, run
    return run, Path(run.result["worktree"]["path"])


# ---------------------------------------------------------------- --worktree


def test_listed_ignored_files_are_copied_with_their_bytes_and_modes(source):
    repo = source.repo
    _ignore_and_list(
        repo,
        ".env\nconfig/local.json\nbuild/\nnotes.txt\n",
        "# local files every worktree needs\n.env\nconfig/local.json\na.txt\n",
    )
    (repo / ".env").write_bytes(ENV_BYTES)
    (repo / ".env").chmod(0o600)
    (repo / "config").mkdir()
    (repo / "config" / "local.json").write_bytes(LOCAL_JSON)
    (repo / "config" / "local.json").chmod(0o750)
    (repo / "build").mkdir()
    (repo / "build" / "out.bin").write_bytes(b"built\n")  # ignored, not listed
    (repo / "notes.txt").write_text("mine\n")  # ignored, not listed
    (repo / "a.txt").write_text("first\nlocal edit\n")  # tracked and listed

    run, path = _worktree_run(source, BRIEF_EDIT)

    tree = run.result["worktree"]
    assert sorted(tree) == [
        "base", "branch", "path", "source", "sourceUncommitted", "worktreeIncluded",
    ]  # fmt: skip
    assert tree["worktreeIncluded"] == [".env", "config/local.json"]
    assert (path / ".env").read_bytes() == ENV_BYTES
    assert _mode(path / ".env") == 0o600
    assert (path / "config" / "local.json").read_bytes() == LOCAL_JSON
    assert _mode(path / "config" / "local.json") == 0o750
    assert not (path / "build").exists()
    assert not (path / "notes.txt").exists()
    # The tracked file is the committed one plus the run's line, not the source's local edit.
    assert (path / "a.txt").read_text() == "first\nrun\n"
    assert (
        "relay: .worktreeinclude: copied 2 ignored file(s) into the worktree: "
        ".env, config/local.json\n"
    ) in run.err
    # The copies are not the run's change.
    assert [(f["path"], f["status"]) for f in run.result["changes"]["files"]] == [
        ("a.txt", "modified"), ("made.txt", "added"),
    ]  # fmt: skip
    assert [f["path"] for f in run.result["diffstat"]["files"]] == ["a.txt", "made.txt"]
    assert "included: 2 ignored file(s) from .worktreeinclude" in run.out.splitlines()


def test_a_continuation_reports_the_files_its_worktree_was_given(source):
    from fakes import relay

    _ignore_and_list(source.repo, ".env\n", ".env\n")
    (source.repo / ".env").write_bytes(ENV_BYTES)
    first, _ = _worktree_run(source, {"actions": [
        {"stdout": '{"type":"thread.started","thread_id":"t-1"}\n'},
        {"write": ["one.txt", "1\n"]},
    ]})  # fmt: skip
    source.bench.script({"actions": [{"write": ["two.txt", "2\n"]}]})
    out2 = source.bench.tmp / "out-continued"
    args = ["--brief", str(source.bench.brief), "--out-dir", str(out2)]
    second = relay("codex", *args, "--continue", first.result["relayRunId"], env=source.env,
                   out_dir=out2)  # fmt: skip
    assert second.code == 0, second
    assert second.result["worktree"]["worktreeIncluded"] == [".env"]
    assert second.result["worktree"] == first.result["worktree"]


def test_an_untouched_env_is_no_change_and_an_edited_one_is_never_landed(source):
    repo = source.repo
    _ignore_and_list(repo, ".env\n", ".env\n")
    (repo / ".env").write_bytes(ENV_BYTES)

    run, _ = _worktree_run(source, {"actions": [{"write": ["made.txt", "x\n"]}]})
    assert run.result["worktree"]["worktreeIncluded"] == [".env"]
    assert [f["path"] for f in run.result["changes"]["files"]] == ["made.txt"]

    out = source.bench.tmp / "second"
    source.bench.script({"actions": [{"write": [".env", "TOKEN=written by the run\n"]},
                                     {"write": ["made.txt", "y\n"]}]})  # fmt: skip
    second = source.relay("--worktree", out=out)
    assert second.code == 0, second
    path = Path(second.result["worktree"]["path"])
    assert (path / ".env").read_text() == "TOKEN=written by the run\n"
    assert [f["path"] for f in second.result["changes"]["files"]] == ["made.txt"]
    applied = source.delegate("runs", "apply", str(out), "--json")
    assert applied.code == 0, applied.err
    assert json.loads(applied.out)["applied"] == ["made.txt"]
    assert (repo / ".env").read_bytes() == ENV_BYTES
    assert (repo / "made.txt").read_text() == "y\n"


def test_a_listed_symlink_out_of_the_repository_is_skipped_with_its_reason(source, tmp_path):
    repo = source.repo
    outside = tmp_path / "outside.env"
    outside.write_text("TOKEN=outside\n")
    _ignore_and_list(repo, ".env\n", ".env\n")
    (repo / ".env").symlink_to(outside)

    run, path = _worktree_run(source)

    tree = run.result["worktree"]
    assert tree["worktreeIncluded"] == []
    assert tree["worktreeIncludeSkipped"] == [{"path": ".env", "reason": SKIP_OUTSIDE}]
    assert not os.path.lexists(path / ".env")
    assert f"relay: .worktreeinclude: 1 left out; .env: {SKIP_OUTSIDE}\n" in run.err


def test_a_listed_symlink_inside_the_repository_is_copied_as_a_link(source):
    repo = source.repo
    _ignore_and_list(repo, "secrets/\n*.env\n", "secrets/\n*.env\n")
    (repo / "secrets").mkdir()
    (repo / "secrets" / "real.env").write_bytes(ENV_BYTES)
    (repo / "app.env").symlink_to("secrets/real.env")  # relative
    (repo / "abs.env").symlink_to(repo / "secrets" / "real.env")  # absolute, into the source

    run, path = _worktree_run(source)

    assert run.result["worktree"]["worktreeIncluded"] == [
        "abs.env", "app.env", "secrets/real.env",
    ]  # fmt: skip
    assert "worktreeIncludeSkipped" not in run.result["worktree"]
    assert os.readlink(path / "app.env") == "secrets/real.env"
    # Pointed at the same place relative to itself: the worktree's copy, not the source's.
    assert os.readlink(path / "abs.env") == "secrets/real.env"
    assert (path / "abs.env").read_bytes() == ENV_BYTES
    assert os.path.realpath(path / "abs.env") == os.path.realpath(path / "secrets" / "real.env")


def test_patterns_that_reach_outside_the_repository_copy_nothing(source, tmp_path):
    repo = source.repo
    outside = tmp_path / "outside.env"
    outside.write_text("TOKEN=outside\n")
    _ignore_and_list(
        repo,
        "*.env\n",
        f"../outside.env\n{outside}\n/{outside}\n**/../outside.env\n../*\n",
    )
    (repo / "outside.env").write_text("TOKEN=in the source, not listed\n")

    run, path = _worktree_run(source)

    tree = run.result["worktree"]
    assert tree["worktreeIncluded"] == []
    assert "worktreeIncludeSkipped" not in tree
    assert ".worktreeinclude" not in run.err
    assert _files_under(path) == [".gitignore", ".worktreeinclude", "a.txt"]
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("outside.env")) == [
        "outside.env", "work/outside.env",
    ]  # fmt: skip


def test_a_folder_that_is_a_symlink_in_the_worktree_is_never_written_through(source, tmp_path):
    repo = source.repo
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (repo / "config").symlink_to(elsewhere)  # committed as a symlink
    _ignore_and_list(repo, "config/local.json\n", "config/local.json\n")
    (repo / "config").unlink()  # in the source it is a folder now (uncommitted)
    (repo / "config").mkdir()
    (repo / "config" / "local.json").write_bytes(LOCAL_JSON)

    run, path = _worktree_run(source)

    assert os.path.islink(path / "config")
    assert list(elsewhere.iterdir()) == []
    tree = run.result["worktree"]
    assert tree["worktreeIncluded"] == []
    assert tree["worktreeIncludeSkipped"] == [
        {"path": "config/local.json", "reason": "a folder on its path is a symlink in the worktree"}
    ]


def test_a_file_ignored_only_by_an_uncommitted_rule_is_left_out(source):
    repo = source.repo
    (repo / ".worktreeinclude").write_text(".env\n")
    commit_all(repo, "include list")
    (repo / ".gitignore").write_text(".env\n")  # not committed: the worktree lacks the rule
    (repo / ".env").write_bytes(ENV_BYTES)

    run, path = _worktree_run(source, {"actions": [{"write": ["made.txt", "x\n"]}]})

    assert not (path / ".env").exists()
    tree = run.result["worktree"]
    assert tree["worktreeIncluded"] == []
    assert tree["worktreeIncludeSkipped"] == [
        {
            "path": ".env",
            "reason": "git does not ignore it in the worktree (tracked there, or ignored by a "
            "rule that is not committed), so it would count as the run's change",
        }
    ]
    assert [f["path"] for f in run.result["changes"]["files"]] == ["made.txt"]


def test_no_worktreeinclude_copies_nothing_and_says_nothing(source):
    repo = source.repo
    (repo / ".gitignore").write_text(".env\n")
    commit_all(repo, "ignore")
    (repo / ".env").write_bytes(ENV_BYTES)

    run, path = _worktree_run(source)

    tree = run.result["worktree"]
    assert tree == {
        "path": str(path), "branch": tree["branch"], "base": git(repo, "rev-parse", "HEAD"),
        "source": str(repo), "sourceUncommitted": 0, "worktreeIncluded": [],
    }  # fmt: skip
    assert not (path / ".env").exists()
    assert ".worktreeinclude" not in run.err


def test_the_copy_stops_at_a_thousand_files_and_says_so(source):
    repo = source.repo
    _ignore_and_list(repo, "gen/\n", "gen/\n")
    (repo / "gen").mkdir()
    for n in range(1002):
        (repo / "gen" / f"f{n:04d}").write_text(f"{n}\n")

    run, path = _worktree_run(source)

    tree = run.result["worktree"]
    assert tree["worktreeIncluded"] == [f"gen/f{n:04d}" for n in range(1000)]
    assert tree["worktreeIncludeSkipped"] == [
        {
            "path": "gen/f1000",
            "reason": "the copy stops at 1000 files and 64 MiB; "
            "2 listed file(s) from this one on are not copied",
        }
    ]
    assert sorted(p.name for p in (path / "gen").iterdir()) == [f"f{n:04d}" for n in range(1000)]


def test_a_symlink_out_of_the_source_is_never_read_as_an_entry(tmp_path):
    """The source side on its own (the other machine's side checks again when writing)."""
    top = tmp_path / "src"
    top.mkdir()
    (tmp_path / "secret.env").write_text("outside\n")
    (top / "inside.env").write_text("inside\n")
    (top / "out.env").symlink_to(tmp_path / "secret.env")
    (top / "in.env").symlink_to(top / "inside.env")
    entries, problems = worktreeinclude.read_entries(str(top), ["out.env", "in.env"])
    assert [(e.path, e.link) for e in entries] == [("in.env", "inside.env")]
    assert problems == [{"path": "out.env", "reason": SKIP_OUTSIDE}]


def test_paths_that_leave_the_worktree_are_refused(tmp_path):
    worktree = tmp_path / "worktree"
    worktree.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (worktree / "config").symlink_to(elsewhere)
    entries = [
        worktreeinclude.Entry("../escape.env", mode=0o600, data=b"x"),
        worktreeinclude.Entry(str(tmp_path / "abs.env"), mode=0o600, data=b"x"),
        worktreeinclude.Entry(".git/hooks/pre-commit", mode=0o755, data=b"x"),
        worktreeinclude.Entry("config/local.json", mode=0o600, data=b"x"),
        worktreeinclude.Entry("up.env", link="../../outside.env"),
        worktreeinclude.Entry("ok/.env", mode=0o640, data=b"fine\n"),
    ]
    written, problems = worktreeinclude.write_entries(str(worktree), entries)
    assert written == ["ok/.env"]
    assert problems == [
        {"path": "../escape.env", "reason": "refused: a path with an empty, . or .. part"},
        {"path": str(tmp_path / "abs.env"), "reason": "refused: an absolute path"},
        {"path": ".git/hooks/pre-commit", "reason": "refused: a path inside .git"},
        {"path": "config/local.json",
         "reason": "a folder on its path is a symlink in the worktree"},
        {"path": "up.env", "reason": SKIP_OUTSIDE},
    ]  # fmt: skip
    assert _files_under(tmp_path) == ["worktree/config", "worktree/ok/.env"]
    assert _mode(worktree / "ok" / ".env") == 0o640


# ---------------------------------------------------------------- fanout


def test_each_fanout_attempt_gets_the_files(source):
    repo = source.repo
    _ignore_and_list(repo, ".env\n", ".env\n")
    (repo / ".env").write_bytes(ENV_BYTES)
    source.bench.script({"actions": [{"write": ["made.txt", "x\n"]}]})
    done = source.delegate("fanout", "--brief", str(source.bench.brief), "--cd", str(repo),
                           "--implementer", "codex", "--implementer", "codex", "--json")  # fmt: skip
    assert done.code == 0, done.err
    runs = done.json()["runs"]
    assert [run["status"] for run in runs] == ["completed", "completed"]
    paths = {run["worktree"]["path"] for run in runs}
    assert len(paths) == 2
    for run in runs:
        assert run["worktree"]["worktreeIncluded"] == [".env"]
        assert (Path(run["worktree"]["path"]) / ".env").read_bytes() == ENV_BYTES
        assert [f["path"] for f in run["diffstat"]["files"]] == ["made.txt"]


# ---------------------------------------------------------------- --host


class Remote:
    """A source repository here whose .env git ignores, and a host with a fake codex."""

    def __init__(self, tmp_path: Path, world: sshkit.SshWorld) -> None:
        self.tmp = tmp_path
        self.repo = make_repo(tmp_path / "work")
        (self.repo / "a.txt").write_text("first\n")
        (self.repo / ".worktreeinclude").write_text(".env\n")
        commit_all(self.repo, "start")
        # Ignored here only (not committed): the machine there does not ignore it.
        (self.repo / ".git" / "info" / "exclude").write_text(".env\n")
        (self.repo / ".env").write_bytes(ENV_BYTES)
        self.fake = Fake(tmp_path / "fake")
        self.fake.install("codex")
        self.brief = tmp_path / "brief.txt"
        self.brief.write_text("Do the thing.\n")
        self.env = world.env(XDG_STATE_HOME=str(tmp_path / "state"),
                             XDG_CONFIG_HOME=str(tmp_path / "config"),
                             TMPDIR=str(tmp_path))  # fmt: skip
        self.host = world.add_host("devbox", env={"PATH": f"{self.fake.bin}:/usr/bin:/bin"})

    def relay(self, *extra: str) -> subprocess.CompletedProcess:
        argv = relay_argv("codex", "--brief", str(self.brief), "--cd", str(self.repo),
                          "--out-dir", str(self.tmp / "out"), "--host", "devbox", *extra)  # fmt: skip
        return subprocess.run(argv, capture_output=True, text=True, env=self.env,
                              stdin=subprocess.DEVNULL, timeout=120)  # fmt: skip

    def result(self) -> dict:
        return json.loads((self.tmp / "out" / "result.json").read_text())

    def mirror(self) -> Path:
        (found,) = (self.host.home / ".cache/delegate-skills/remote/repos").iterdir()
        return found


#: The fake implementer writes what it finds at .env into seen.txt.
SEE_ENV = {"git": ["-c", "alias.seen=!if [ -e .env ]; then cat .env; else echo none; fi > seen.txt",
                   "seen"]}  # fmt: skip


def _paths_in_history(repo: Path) -> set[str]:
    """Every path any commit of any ref in `repo` holds."""
    names = set()
    for commit in git(repo, "rev-list", "--all").split():
        names.update(git(repo, "ls-tree", "-r", "--name-only", commit).splitlines())
    return names


@pytest.fixture
def remote(tmp_path, home, ssh_world) -> Remote:
    return Remote(tmp_path, ssh_world)


def test_host_without_include_uncommitted_names_the_files_and_copies_none(remote):
    remote.fake.script({"run": {"actions": [SEE_ENV]}})
    done = remote.relay()
    assert done.returncode == 0, done.stderr
    assert (
        "relay: .worktreeinclude names 1 ignored file(s) (.env); they are not copied to devbox: "
        "--include-uncommitted carries them\n"
    ) in done.stderr
    result = remote.result()
    assert result["worktree"]["worktreeIncluded"] == []
    worktree = Path(result["worktree"]["path"])
    assert (worktree / "seen.txt").read_text() == "none\n"
    assert ".env" not in _paths_in_history(remote.repo)


def test_host_with_include_uncommitted_carries_the_files_and_never_commits_them(remote):
    # It edits .env too: the edit stays there, in no commit.
    remote.fake.script({"run": {"actions": [SEE_ENV, {"append": [".env", "EDITED=1\n"]}]}})
    done = remote.relay("--include-uncommitted")
    assert done.returncode == 0, done.stderr
    assert "relay: .worktreeinclude: copied 1 ignored file(s) to devbox: .env\n" in done.stderr
    result = remote.result()
    assert result["worktree"]["worktreeIncluded"] == [".env"]
    worktree = Path(result["worktree"]["path"])
    assert (worktree / "seen.txt").read_bytes() == ENV_BYTES
    assert [(f["path"], f["status"]) for f in result["changes"]["files"]] == [
        ("seen.txt", "added")]  # fmt: skip
    # Neither the fetched branch nor anything pushed there holds .env.
    branch = result["worktree"]["branch"]
    assert git(remote.repo, "ls-tree", "-r", "--name-only", branch).splitlines() == [
        ".worktreeinclude", "a.txt", "seen.txt",
    ]  # fmt: skip
    assert ".env" not in _paths_in_history(remote.repo)
    assert ".env" not in _paths_in_history(remote.mirror())
    assert not (worktree / ".env").exists()
    assert (remote.repo / ".env").read_bytes() == ENV_BYTES
    applied = delegate("runs", "apply", str(remote.tmp / "out"), "--json", env=remote.env)
    assert applied.code == 0, applied.err
    assert json.loads(applied.out)["applied"] == ["seen.txt"]
    assert (remote.repo / ".env").read_bytes() == ENV_BYTES
