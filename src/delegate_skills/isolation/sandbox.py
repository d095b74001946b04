"""Confined runs: the implementer under bubblewrap, writing only what it is given.

On Linux, when `bwrap` is on PATH and works here, a confined implementer (its
version preflight too) sees the whole file system read-only, except:

- an allowlist bound writable: its work tree and the git dirs a commit there
  needs (a write run), its run directory, the CLI's own state and config
  (each adapter names them), paths the user adds (DELEGATE_CONFINE_WRITABLE),
  and a private, empty `/tmp` of its own;
- inside those, what must stay read-only even so: the repository's hooks,
  config and approval store;
- hidden behind an empty tmpfs: our private state dir (the run store, other
  runs' worktrees, our object store); a worktree run's own worktree is bound
  back into it.

It has its own PID namespace and no capabilities, dies with the relay, and
keeps the network (the CLI talks to its model). As root it runs as uid
NESTED_UID in a user namespace of its own (mapped to root outside, so the
files it writes are root's as before): a CLI that starts a bubblewrap sandbox
of its own (codex, claude, grok) can then make its namespaces inside ours.

A read-only run is the same sandbox with the work tree left out of the
allowlist. Where bwrap is missing or cannot start here the run is not
confined, and the reason is said (`confined: null`, `confinedUnavailable`;
for a read-only run `readOnlyEnforced: null`, `readOnlyUnenforced`).
"""

from __future__ import annotations

import os
import subprocess

from ..pathsearch import which
from . import linux

#: Set to "0" to run without the sandbox (a read-only verdict still detects).
ENFORCE_ENV = "DELEGATE_RELAY_ENFORCE"
#: More paths (os.pathsep-separated) a confined implementer may write: a cache
#: or toolchain directory it needs. The user's own setting.
EXTRA_WRITABLE_ENV = "DELEGATE_CONFINE_WRITABLE"
PROBE_TIMEOUT_S = 10.0
#: bwrap's own message when it cannot start (its lines all start so).
BWRAP_PREFIX = "bwrap: "
#: The uid (and gid) a confined run of root's runs as, in a user namespace of its own.
NESTED_UID = 1000


class Sandbox:
    """How a run is confined: an argv prefix, or the reason there is none."""

    def __init__(self, prefix: list[str] | None, reason: str | None, tmp: str | None = None):
        self.prefix = prefix
        self.reason = reason
        #: The private directory mounted as the implementer's /tmp (ours to remove).
        self.tmp = tmp
        #: What the implementer may write (real paths), when it is confined.
        self.writable: list[str] = []
        #: (cwd, env) while bwrap has not yet been seen to start with this prefix: the first
        #: command it wraps shows it, or `confirm` probes it (plan(deferred=True)).
        self.unproven: tuple[str, dict[str, str]] | None = None

    def confirm(self) -> bool:
        """Whether bwrap starts here with this prefix, probed at most once; when it does not,
        the sandbox becomes none, with bwrap's reason."""
        if self.unproven is None:
            return self.prefix is not None
        cwd, env = self.unproven
        self.unproven = None
        problem = _probe(self.prefix, cwd, env)
        if problem:
            self.prefix, self.writable = None, []
            self.reason = f"bwrap cannot start here: {problem}"
            self.release()
            return False
        return True

    def lets_write_inside(self, roots: list[str | None]) -> bool:
        """Whether any writable path lies in (or around) one of `roots`."""
        real = [os.path.realpath(r) for r in roots if r]
        return any(_inside(w, r) or _inside(r, w) for w in self.writable for r in real)

    @property
    def enforced(self) -> str | None:
        return "bwrap" if self.prefix else None

    def wrap(self, argv: list[str]) -> list[str]:
        return [*self.prefix, "--", *argv] if self.prefix else argv

    def child_env(self, env: dict[str, str]) -> dict[str, str]:
        """The implementer's environment: its temp dir is the private /tmp."""
        if not self.prefix:
            return env
        return {**env, "TMPDIR": "/tmp", "TMP": "/tmp", "TEMP": "/tmp"}

    def release(self) -> None:
        """Remove the private /tmp (never following a link the implementer left there)."""
        if self.tmp is not None:
            _remove_tree(self.tmp)
            self.tmp = None


class Allowlist:
    """What a confined implementer may write, what stays read-only inside it, what is hidden."""

    def __init__(self) -> None:
        self.writable: list[str] = []
        self.read_only: list[str] = []
        self.hidden: list[str] = []
        #: Paths under /tmp the implementer must still see (its binary), read-only.
        self.visible: list[str] = []

    def extra_from(self, env: dict[str, str]) -> None:
        """The user's own additions (DELEGATE_CONFINE_WRITABLE), absolute paths only."""
        for path in os.environ.get(EXTRA_WRITABLE_ENV, "").split(os.pathsep):
            if path and os.path.isabs(path):
                self.writable.append(path)


def _real_existing(paths) -> list[str]:
    seen: list[str] = []
    for path in paths:
        if not path:
            continue
        real = os.path.realpath(path)
        if os.path.lexists(real) and real not in seen:
            seen.append(real)
    return seen


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def bwrap_argv(allow: Allowlist, tmp: str, bwrap: str, as_root: bool) -> list[str]:
    """The bwrap command line up to (not including) `--`.

    Mounts go from the shallowest path to the deepest, so a path bound inside
    another (a read-only hooks folder in a writable repository, a worktree in
    the hidden state dir) lands on top of it.
    """
    real_tmp = os.path.realpath(tmp)
    # The private /tmp is also bound at its own path: a CLI that reads where its /tmp
    # comes from (codex, in /proc/self/mountinfo) finds it there, inside the hidden state dir.
    mounts: list[tuple[str, int, list[str]]] = [
        ("/tmp", 0, ["--bind", tmp, "/tmp"]),
        (real_tmp, 2, ["--bind", real_tmp, real_tmp]),
    ]
    for path in _real_existing(allow.hidden):
        mounts.append((path, 1, ["--tmpfs", path]))
    writable = _real_existing(allow.writable)
    for path in writable:
        mounts.append((path, 2, ["--bind", path, path]))
    for path in _real_existing(allow.visible):
        if _inside(path, "/tmp") and not any(_inside(path, w) for w in writable):
            mounts.append((path, 3, ["--ro-bind", path, path]))
    for path in _real_existing(allow.read_only):
        if any(_inside(path, w) for w in writable):
            mounts.append((path, 4, ["--ro-bind", path, path]))
    mounts.sort(key=lambda m: (m[0].rstrip(os.sep).count(os.sep), m[1]))
    argv = [bwrap, "--ro-bind", "/", "/", "--dev-bind", "/dev", "/dev", "--proc", "/proc"]
    for _path, _order, args in mounts:
        argv += args
    if as_root:
        uid = str(NESTED_UID)
        argv += ["--unshare-user", "--uid", uid, "--gid", uid]
    argv += ["--unshare-pid", "--die-with-parent", "--cap-drop", "ALL"]
    return argv


def plan(
    allow: Allowlist,
    *,
    cwd: str,
    env: dict[str, str],
    refused: str | None = None,
    tmp: str | None = None,
    owned: bool = True,
    deferred: bool = False,
) -> Sandbox:
    """A sandbox for a confined run, or why there is none.

    `deferred`: bwrap is not probed here; the caller's first wrapped command shows whether
    it starts, and `Sandbox.confirm` says so when that command failed (a relay's version
    probe: one bwrap start less per run).

    `refused` is the adapter's reason to run without one (its CLI cannot
    work inside it). `tmp` is the empty folder to mount as /tmp (by default a
    new one under the temp dir); the Sandbox removes it on `release` when it
    is `owned` (a dry run passes one that is not).
    """
    if os.environ.get(ENFORCE_ENV) == "0":
        return Sandbox(None, f"{ENFORCE_ENV}=0 turned enforcement off")
    if not linux.enabled():
        return Sandbox(None, "bubblewrap enforcement needs Linux")
    if refused:
        return Sandbox(None, refused)
    bwrap = which("bwrap", env)
    if bwrap is None:
        return Sandbox(
            None, "bwrap is not on PATH (install Debian's or Ubuntu's bubblewrap package)"
        )
    made = tmp is None
    if made:
        import tempfile

        try:
            tmp = tempfile.mkdtemp(prefix="delegate-confined-")
        except OSError as problem:
            return Sandbox(None, f"cannot make the run's private /tmp: {problem}")
    prefix = bwrap_argv(allow, tmp, bwrap, os.geteuid() == 0)
    problem = None if deferred else _probe(prefix, cwd, env)
    if problem:
        if made or owned:
            _remove_tree(tmp)
        return Sandbox(None, f"bwrap cannot start here: {problem}")
    confined = Sandbox(prefix, None, tmp if (made or owned) else None)
    confined.writable = _real_existing(allow.writable)
    if deferred:
        confined.unproven = (cwd, env)
    return confined


def _probe(prefix: list[str], cwd: str, env: dict[str, str]) -> str | None:
    """None when bwrap runs `true` with these options; else its first line."""
    true = which("true", env) or "/bin/true"
    try:
        done = subprocess.run(
            [*prefix, "--", true],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            timeout=PROBE_TIMEOUT_S,
            start_new_session=True,
        )
    except (OSError, subprocess.TimeoutExpired) as problem:
        return str(problem)
    if done.returncode == 0:
        return None
    lines = done.stderr.decode("utf-8", "replace").strip().splitlines()
    return lines[0].removeprefix(BWRAP_PREFIX) if lines else f"exit {done.returncode}"


def _remove_tree(path: str) -> None:
    import shutil  # only here: it brings the compression modules along

    shutil.rmtree(path, ignore_errors=True)
