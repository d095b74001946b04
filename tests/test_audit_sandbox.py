"""The bubblewrap command line and the probe that decides whether a run is enforced (sandbox.py).

The enforced read-only tests see that writes fail; they cannot see that the
implementer also gets its own PID namespace and no capabilities, or what
happens where bwrap is installed but cannot start.
"""

from __future__ import annotations

import sys

import pytest

from delegate_skills.isolation import sandbox

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="bubblewrap is Linux")


def test_the_bwrap_command_line_is_written_out(tmp_path):
    """Whole file system read-only; /tmp private (and seen at its own path too); the state
    dir hidden; the allowlist bound
    writable, shallow before deep (a path that does not exist is left out), with the
    repository's hooks and config read-only inside."""
    repo, state, out = tmp_path / "repo", tmp_path / "state", tmp_path / "out"
    for folder in (repo / ".git" / "hooks", state / "worktrees" / "w", out, tmp_path / "bin"):
        folder.mkdir(parents=True)
    (repo / ".git" / "config").write_text("")
    allow = sandbox.Allowlist()
    allow.writable += [str(out), str(state / "worktrees" / "w"), str(repo), str(tmp_path / "no")]
    allow.read_only += [str(repo / ".git" / "hooks"), str(repo / ".git" / "config")]
    allow.hidden.append(str(state))
    allow.visible.append(str(tmp_path / "bin"))
    argv = sandbox.bwrap_argv(allow, "/private/tmp", "/usr/bin/bwrap", as_root=True)
    t = str(tmp_path)
    assert argv == [
        "/usr/bin/bwrap", "--ro-bind", "/", "/", "--dev-bind", "/dev", "/dev", "--proc", "/proc",
        "--bind", "/private/tmp", "/tmp",
        "--bind", "/private/tmp", "/private/tmp",
        "--tmpfs", f"{t}/state",
        "--bind", f"{t}/out", f"{t}/out",
        "--bind", f"{t}/repo", f"{t}/repo",
        "--ro-bind", f"{t}/bin", f"{t}/bin",
        "--bind", f"{t}/state/worktrees/w", f"{t}/state/worktrees/w",
        "--ro-bind", f"{t}/repo/.git/hooks", f"{t}/repo/.git/hooks",
        "--ro-bind", f"{t}/repo/.git/config", f"{t}/repo/.git/config",
        "--unshare-user", "--uid", "1000", "--gid", "1000",
        "--unshare-pid", "--die-with-parent", "--cap-drop", "ALL",
    ]  # fmt: skip
    plain = sandbox.bwrap_argv(allow, "/private/tmp", "/usr/bin/bwrap", as_root=False)
    assert "--unshare-user" not in plain and plain[-4:] == argv[-4:]


@linux_only
def test_a_bwrap_that_cannot_start_leaves_the_run_unenforced(tmp_path, monkeypatch):
    monkeypatch.delenv(sandbox.ENFORCE_ENV, raising=False)
    monkeypatch.delenv("DELEGATE_RELAY_POSIX_ONLY", raising=False)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "bwrap"
    fake.write_text(
        "#!/bin/sh\n"
        'echo "bwrap: No permissions to create new namespace, likely because the kernel '
        'does not allow non-privileged user namespaces." >&2\n'
        "exit 1\n"
    )
    fake.chmod(0o755)
    work = tmp_path / "work"
    work.mkdir()
    planned = sandbox.plan(sandbox.Allowlist(), cwd=str(work), env={"PATH": str(bin_dir)})
    assert planned.prefix is None
    assert planned.enforced is None
    assert planned.reason == (
        "bwrap cannot start here: No permissions to create new namespace, likely because the "
        "kernel does not allow non-privileged user namespaces."
    )
    assert planned.wrap(["codex", "exec"]) == ["codex", "exec"]
