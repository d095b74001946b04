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


def test_the_bwrap_command_line_is_written_out():
    argv = sandbox.bwrap_argv(
        ["/repo", "/repo/.git", "/state"], ["/repo/out", "/tmp", "/state/runs/x"], "/usr/bin/bwrap"
    )
    assert argv == [
        "/usr/bin/bwrap", "--dev-bind", "/", "/", "--proc", "/proc",
        "--ro-bind", "/repo", "/repo",
        "--ro-bind", "/repo/.git", "/repo/.git",
        "--ro-bind", "/state", "/state",
        "--bind", "/repo/out", "/repo/out",
        "--bind", "/state/runs/x", "/state/runs/x",
        "--unshare-pid", "--die-with-parent", "--cap-drop", "ALL",
    ]  # fmt: skip


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
    planned = sandbox.plan(
        read_only=[str(work)], writable=[], cwd=str(work), env={"PATH": str(bin_dir)}
    )
    assert planned.prefix is None
    assert planned.enforced is None
    assert planned.reason == (
        "bwrap cannot start here: No permissions to create new namespace, likely because the "
        "kernel does not allow non-privileged user namespaces."
    )
    assert planned.wrap(["codex", "exec"]) == ["codex", "exec"]
