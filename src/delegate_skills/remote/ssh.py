"""The system `ssh`, used as the user uses it, and nothing of our own.

Every connection goes through the `ssh` on PATH, so the user's config, agent,
jump hosts and known hosts apply. We add only:

- `BatchMode=yes`: never a password or passphrase prompt in the middle of a run;
- `StrictHostKeyChecking=yes`: a host key ssh does not know is refused, never
  accepted for the user;
- connection sharing through a socket dir of our own (0700:
  `$XDG_RUNTIME_DIR/delegate-ssh`, else `/tmp/delegate-ssh-<uid>`; a symlink
  or someone else's folder there is refused), with one master per host
  started up front (`-f -N`), so a dozen commands of one run cost one login,
  and no command's pipes are held open by a backgrounded master. A socket is
  keyed by the host name as given as well as by where it leads, so two
  aliases of one machine never share a connection: each gets its own
  host-key check.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shlex
import stat
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


#: The longest $XDG_RUNTIME_DIR the sockets go under (a socket path has ~100 bytes).
RUNTIME_DIR_MAX = 24
#: Terminal control: escape sequences, C0 (but tab), DEL and C1.
_CONTROL = re.compile(
    r"\x1b(?:\[[0-?]*[ -/]*[@-~]?|[\]PX^_][^\x07\x1b]*(?:\x07|\x1b\\)?|[ -/]*[0-~]?)"
    r"|[\x00-\x08\x0a-\x1f\x7f-\x9f]"
)


def control_dir() -> str:
    """A private dir for connection-sharing sockets, short enough for a socket path:
    `$XDG_RUNTIME_DIR/delegate-ssh` when that is a short folder of ours, else
    `/tmp/delegate-ssh-<uid>`. Raises SshError when it is a symlink or not ours."""
    runtime = os.environ.get("XDG_RUNTIME_DIR") or ""
    if os.path.isabs(runtime) and len(runtime) <= RUNTIME_DIR_MAX and _ours(runtime):
        path = os.path.join(runtime, "delegate-ssh")
    else:
        base = "/tmp" if os.path.isdir("/tmp") else tempfile.gettempdir()
        path = os.path.join(base, f"delegate-ssh-{os.getuid()}")
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError as problem:
        why = problem.strerror or problem
        raise SshError(f"cannot make {path} for ssh sockets: {why}") from None
    if not _ours(path):
        raise SshError(f"{path} is not a folder of yours; remove it so ssh sockets can go there")
    if os.lstat(path).st_mode & 0o077:
        os.chmod(path, 0o700)
    return path


def _ours(path: str) -> bool:
    """`path` is a real folder (no symlink) owned by this user."""
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid()


def control_path(host: str) -> str:
    """The socket of `host`'s shared connection: keyed by the name as given (an alias of
    its own per host-key check) and by ssh's hash of where it leads (%C)."""
    alias = hashlib.sha256(host.encode("utf-8", "surrogateescape")).hexdigest()[:12]
    return f"{control_dir()}/{alias}-%C"


def base_argv(host: str, *, master: bool = False) -> list[str]:
    """`ssh` and our options for `host` (for `GIT_SSH_COMMAND` too)."""
    argv = ["ssh"]
    for option in OPTIONS:
        argv += ["-o", option]
    argv += ["-o", f"ControlPath={control_path(host)}"]
    if master:
        argv += ["-o", "ControlMaster=yes", "-o", f"ControlPersist={PERSIST_S}"]
    else:
        argv += ["-o", "ControlMaster=no"]
    return argv


def git_ssh_command(host: str) -> str:
    """The value of GIT_SSH_COMMAND that makes git reach `host` as we do."""
    return shlex.join(base_argv(host))


def argv_for(host: str, command: list[str]) -> list[str]:
    """The ssh command line that runs `command` (words, quoted here) on `host`."""
    return [*base_argv(host), "--", host, shlex.join(command)]


def connect(host: str) -> None:
    """Make sure a shared connection to `host` is up. Raises SshError (one line)."""
    where = control_dir()
    with open(os.path.join(where, ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        check = subprocess.run(
            [*base_argv(host), "-O", "check", "--", host],
            stdin=subprocess.DEVNULL, capture_output=True, check=False,
        )  # fmt: skip
        if check.returncode == 0:
            return
        with tempfile.TemporaryFile() as errors:
            try:
                started = subprocess.run(
                    [*base_argv(host, master=True), "-f", "-N", "--", host],
                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=errors,
                    check=False, timeout=CONNECT_TIMEOUT_S * 4,
                )  # fmt: skip
            except subprocess.TimeoutExpired:
                raise SshError(_no_answer(host, CONNECT_TIMEOUT_S * 4)) from None
            if started.returncode != 0:
                errors.seek(0)
                raise SshError(explain(host, errors.read(64 * 1024)))


def run(host: str, command: list[str], *, input: bytes | None = None,
        timeout: float | None = 120) -> subprocess.CompletedProcess:  # fmt: skip
    """Run `command` on `host`; both streams kept. Raises SshError when ssh itself failed
    (exit 255, the connection up or not) or gave no answer within `timeout` seconds."""
    try:
        done = subprocess.run(
            argv_for(host, command),
            input=input, stdin=None if input is not None else subprocess.DEVNULL,
            capture_output=True, check=False, timeout=timeout,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        raise SshError(_no_answer(host, timeout)) from None
    if done.returncode == 255:
        raise SshError(explain(host, done.stderr))
    return done


def _no_answer(host: str, seconds: float | None) -> str:
    return f"--host {host}: no answer within {seconds:g} s; check that `ssh {host} true` works"


def printable(text: str) -> str:
    """`text` without terminal control (escape sequences, control characters)."""
    return _CONTROL.sub("", text)


def last_line(text: bytes) -> str:
    """The last non-blank line of what the other side printed, safe to print here."""
    lines = [line.strip() for line in text.decode("utf-8", "replace").splitlines() if line.strip()]
    return printable(lines[-1]).strip() if lines else ""


def explain(host: str, stderr: bytes) -> str:
    """One line for a failed connection: what happened at `host`, and what to do."""
    text = stderr.decode("utf-8", "replace")
    line = last_line(stderr) or "ssh exited 255"
    if "REMOTE HOST IDENTIFICATION HAS CHANGED" in text:  # it also fails verification
        return f"--host {host}: the host's key has CHANGED; check it before you connect again"
    if (
        "Host key verification failed" in text
        or "No ED25519 host key is known" in text
        or ("host key" in text.lower() and "known" in text.lower())
    ):
        return (
            f"--host {host}: ssh does not know this host's key (never accepted for you); "
            f"run `ssh {host}` once yourself and check the fingerprint"
        )
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
