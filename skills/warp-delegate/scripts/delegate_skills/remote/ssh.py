"""The system `ssh`, used as the user uses it, and nothing of our own.

Every connection goes through the `ssh` on PATH, so the user's config, agent,
jump hosts and known hosts apply. We add only:

- `BatchMode=yes`: never a password or passphrase prompt in the middle of a run;
- `StrictHostKeyChecking=yes`: a host key ssh does not know is refused, never
  accepted for the user;
- connection sharing through a socket dir of our own (0700), with one master
  per host started up front (`-f -N`), so a dozen commands of one run cost one
  login, and no command's pipes are held open by a backgrounded master.
"""

from __future__ import annotations

import fcntl
import os
import shlex
import subprocess
import tempfile

from ..errors import UserError

#: How long a shared connection outlives its last use.
PERSIST_S = 60
CONNECT_TIMEOUT_S = 15
OPTIONS = (
    "BatchMode=yes",
    "StrictHostKeyChecking=yes",
    f"ConnectTimeout={CONNECT_TIMEOUT_S}",
    "ServerAliveInterval=10",
    "ServerAliveCountMax=3",
)


class SshError(UserError):
    """A connection that failed; the message is one line naming the host and what to do."""


def control_dir() -> str:
    """A private dir for connection-sharing sockets, short enough for a socket path."""
    base = "/tmp" if os.path.isdir("/tmp") else tempfile.gettempdir()
    path = os.path.join(base, f"delegate-ssh-{os.getuid()}")
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    info = os.lstat(path)
    if not os.path.isdir(path) or os.path.islink(path) or info.st_uid != os.getuid():
        raise SshError(f"{path} is not a folder of yours; remove it so ssh sockets can go there")
    if info.st_mode & 0o077:
        os.chmod(path, 0o700)
    return path


def base_argv(*, master: bool = False) -> list[str]:
    """`ssh` and our options (for `GIT_SSH_COMMAND` too)."""
    argv = ["ssh"]
    for option in OPTIONS:
        argv += ["-o", option]
    argv += ["-o", f"ControlPath={control_dir()}/%C"]
    if master:
        argv += ["-o", "ControlMaster=yes", "-o", f"ControlPersist={PERSIST_S}"]
    else:
        argv += ["-o", "ControlMaster=no"]
    return argv


def git_ssh_command() -> str:
    """The value of GIT_SSH_COMMAND that makes git connect as we do."""
    return shlex.join(base_argv())


def argv_for(host: str, command: list[str]) -> list[str]:
    """The ssh command line that runs `command` (words, quoted here) on `host`."""
    return [*base_argv(), "--", host, shlex.join(command)]


def connect(host: str) -> None:
    """Make sure a shared connection to `host` is up. Raises SshError (one line)."""
    where = control_dir()
    with open(os.path.join(where, ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        check = subprocess.run(
            [*base_argv(), "-O", "check", "--", host],
            stdin=subprocess.DEVNULL, capture_output=True, check=False,
        )  # fmt: skip
        if check.returncode == 0:
            return
        with tempfile.TemporaryFile() as errors:
            started = subprocess.run(
                [*base_argv(master=True), "-f", "-N", "--", host],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=errors, check=False,
                timeout=CONNECT_TIMEOUT_S * 4,
            )  # fmt: skip
            if started.returncode != 0:
                errors.seek(0)
                raise SshError(explain(host, errors.read(64 * 1024)))


def run(host: str, command: list[str], *, input: bytes | None = None,
        timeout: float | None = 120) -> subprocess.CompletedProcess:  # fmt: skip
    """Run `command` on `host`; both streams kept. Raises SshError when ssh itself failed."""
    done = subprocess.run(
        argv_for(host, command),
        input=input, stdin=None if input is not None else subprocess.DEVNULL,
        capture_output=True, check=False, timeout=timeout,
    )  # fmt: skip
    if done.returncode == 255:
        raise SshError(explain(host, done.stderr))
    return done


def last_line(text: bytes) -> str:
    lines = [line.strip() for line in text.decode("utf-8", "replace").splitlines() if line.strip()]
    return lines[-1] if lines else ""


def explain(host: str, stderr: bytes) -> str:
    """One line for a failed connection: what happened at `host`, and what to do."""
    text = stderr.decode("utf-8", "replace")
    line = last_line(stderr) or "ssh exited 255"
    if (
        "Host key verification failed" in text
        or "No ED25519 host key is known" in text
        or ("host key" in text.lower() and "known" in text.lower())
    ):
        return (
            f"--host {host}: ssh does not know this host's key (never accepted for you); "
            f"run `ssh {host}` once yourself and check the fingerprint"
        )
    if "REMOTE HOST IDENTIFICATION HAS CHANGED" in text:
        return f"--host {host}: the host's key has CHANGED; check it before you connect again"
    for marker in ("Could not resolve hostname", "Connection refused", "timed out",
                   "No route to host", "Network is unreachable", "Connection closed"):  # fmt: skip
        if marker in text:
            return (
                f"--host {host}: unreachable ({line}); check the name and that `ssh {host}` works"
            )
    if "Permission denied" in text:
        return (
            f"--host {host}: login refused ({line}); `ssh {host} true` must work without "
            "a prompt (a key in your agent or config)"
        )
    return f"--host {host}: ssh failed: {line}"
