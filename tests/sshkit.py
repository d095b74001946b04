"""A real OpenSSH server on 127.0.0.1, so tests can run code that calls `ssh` from PATH.

Each host is one `/usr/sbin/sshd -D -e` on a free port of 127.0.0.1 that lets
one throwaway key in as the current user. The "remote machine" is this
machine: only HOME differs, a directory of the test's own, set through the
authorized_keys line (with the suite's process tag, so whatever a remote
command leaves running, even daemonised, is swept after the test). A session
starts in that HOME, as a login on a real host does.

Code under test finds the wrapper `ssh` in `world.bin_dir` first on PATH; it
runs the real ssh with `-F world.ssh_config`, which names every host by alias.

    import sshkit

    ssh_world = pytest.fixture(sshkit.ssh_world)

    def test_remote_home(ssh_world):
        host = ssh_world.add_host("remote-a")
        done = ssh_world.ssh("remote-a", "echo $HOME")
        assert done.stdout == f"{host.home}\\n"
        run_code_under_test(env=ssh_world.env())   # PATH: the wrapper first

(`pytest_plugins = ["sshkit"]` would register no fixture: `ssh_world` is a
plain generator, made a fixture by the module that uses it, as above.) Outside
a fixture: `with open_world(tmp_path) as world:`, or `with SshWorld(path)`,
which raises SshUnavailable where open_world skips.
"""

from __future__ import annotations

import contextlib
import functools
import os
import pwd
import re
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest
from conftest import PROCESS_TAG

SSHD = "/usr/sbin/sshd"
#: What sshd -e writes once its socket listens.
READY = b"Server listening on"
START_TIMEOUT = 10.0
STOP_TIMEOUT = 5.0
#: How often a port picked free may be taken by someone else before sshd binds it.
PORT_TRIES = 5
BIND_FAILED = (b"Address already in use", b"Cannot bind any address")
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
ALIAS = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\Z")

#: The command sshd runs for every session: start in HOME (the remote home,
#: from authorized_keys) as a real login does, then what the client asked for.
ENTER_HOME = (
    'cd "$HOME" 2>/dev/null || cd /; '
    'if [ -n "${SSH_ORIGINAL_COMMAND+set}" ]; '
    'then exec "$SHELL" -c "$SSH_ORIGINAL_COMMAND"; else exec "$SHELL" -l; fi'
)


class SshUnavailable(Exception):
    """This machine cannot run the kit: a program is missing, or sshd would not let us in."""


# --- the machine ---------------------------------------------------------------


def _real_ssh() -> str:
    found = shutil.which("ssh")
    if found is None:
        raise SshUnavailable("no ssh on PATH (Debian: openssh-client)")
    return os.path.realpath(found)


def _check_programs() -> None:
    if not os.access(SSHD, os.X_OK):
        raise SshUnavailable(f"no {SSHD} (Debian: openssh-server)")
    if shutil.which("ssh-keygen") is None:
        raise SshUnavailable("no ssh-keygen on PATH (Debian: openssh-client)")


def _password_field(user: str) -> str:
    """The user's /etc/shadow password field ("" when unreadable)."""
    try:
        with open("/etc/shadow", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                fields = line.split(":")
                if fields[0] == user and len(fields) > 1:
                    return fields[1]
    except OSError:
        pass
    return ""


def _login_account() -> pwd.struct_passwd:
    """The account sshd logs us in as, once we know it will. Raises SshUnavailable."""
    try:
        account = pwd.getpwuid(os.getuid())
    except KeyError:
        raise SshUnavailable(f"uid {os.getuid()} has no passwd entry to log in as") from None
    shell = account.pw_shell or "/bin/sh"
    if os.path.basename(shell) in ("nologin", "false") or not os.access(shell, os.X_OK):
        raise SshUnavailable(f"{account.pw_name}'s login shell {shell} runs no commands")
    if os.geteuid() == 0 and _password_field(account.pw_name).startswith("!"):
        # Without PAM, sshd refuses an account whose shadow password starts with "!".
        raise SshUnavailable(f"{account.pw_name}'s password is locked; sshd (UsePAM no) refuses it")
    return account


@functools.lru_cache(maxsize=1)
def _sshd_version() -> tuple[int, int]:
    done = subprocess.run([SSHD, "-V"], capture_output=True, text=True, timeout=30, check=False)
    found = re.search(r"OpenSSH_(\d+)\.(\d+)", done.stdout + done.stderr)
    return (int(found[1]), int(found[2])) if found else (0, 0)


def _privsep_dir() -> None:
    """sshd started by root wants its privilege separation directory."""
    path = Path("/run/sshd")
    if os.geteuid() == 0 and not path.is_dir():
        path.mkdir(mode=0o755, parents=True, exist_ok=True)
        path.chmod(0o755)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _keygen(path: Path, comment: str) -> str:
    """A fresh ed25519 key at `path`; its public half as `type base64`."""
    subprocess.run(
        ["ssh-keygen", "-q", "-N", "", "-t", "ed25519", "-C", comment, "-f", str(path)],
        check=True,
        capture_output=True,
        stdin=subprocess.DEVNULL,
        timeout=30,
    )
    kind, blob = path.with_name(path.name + ".pub").read_text().split()[:2]
    return f"{kind} {blob}"


def _quoted(path: Path) -> str:
    """`path` as one argument of an ssh or sshd config line."""
    text = str(path)
    if any(c in text for c in '"%\n') or not path.is_absolute():
        raise ValueError(f"{text!r}: the ssh kit needs an absolute path without quote or %")
    return f'"{text}"'


def _write(path: Path, text: str, mode: int = 0o644) -> None:
    """Replace `path` in one step: sshd and ssh reread these files on each connection."""
    part = path.with_name(path.name + ".part")
    part.write_text(text)
    part.chmod(mode)
    os.replace(part, path)


def _state(pid: int) -> str | None:
    """A process's state letter, None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0].decode()
    except (OSError, IndexError):
        return None


def _children(parent: int) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == parent:
            found.append(int(name))
    return found


def _signal(pid: int, number: int) -> None:
    try:
        os.kill(pid, number)
    except OSError:
        pass


def gone(pid: int) -> bool:
    """True once `pid` has exited (a zombie counts: it runs nothing)."""
    return _state(pid) in (None, "Z")


def _await(condition, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


# --- one sshd ------------------------------------------------------------------


class _Drain(threading.Thread):
    """Copies sshd's stderr into its log, line by line, and says when sshd listens."""

    def __init__(self, stream: IO[bytes], log: Path) -> None:
        super().__init__(name=f"sshd-log-{log.parent.name}", daemon=True)
        self.stream = stream
        self.log = log
        self.settled = threading.Event()  # listening, or stderr closed
        self.listening = False

    def run(self) -> None:
        with self.stream, self.log.open("ab") as out:
            for line in self.stream:
                out.write(line)
                out.flush()
                if not self.listening and READY in line:
                    self.listening = True
                    self.settled.set()
        self.settled.set()


class SshHost:
    """One running sshd: `ssh <alias>` reaches it, as the current user, in `home`."""

    def __init__(
        self,
        alias: str,
        root: Path,
        port: int,
        host_key: str,
        process: subprocess.Popen,
        drain: _Drain,
    ) -> None:
        self.alias = alias
        #: The host's own directory: sshd_config, host key, authorized_keys, sshd.log.
        self.root = root
        self.home = root / "home"
        self.port = port
        #: The known_hosts line that vouches for this host.
        self.host_key_line = f"[127.0.0.1]:{port} {host_key}"
        self.authorized_keys = root / "authorized_keys"
        self.log = root / "sshd.log"
        #: Extra environment of remote sessions (HOME and the process tag come on top).
        self.env: dict[str, str] = {}
        self.known = True
        self.process = process
        self._drain = drain

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def running(self) -> bool:
        return self.process.poll() is None

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def stop(self) -> None:
        """Stop sshd and drop the connections it holds, as a host going down would.

        Processes a session started are left to themselves (and to the
        suite's sweeper, by their tag), as on a real host.
        """
        if self.running:
            connections = _children(self.pid)
            for pid in connections:
                _signal(pid, signal.SIGTERM)
            self.process.terminate()
            try:
                self.process.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            if not _await(lambda: all(gone(pid) for pid in connections), STOP_TIMEOUT):
                for pid in connections:
                    _signal(pid, signal.SIGKILL)
        self._drain.join(STOP_TIMEOUT)

    def __repr__(self) -> str:
        return f"SshHost({self.alias!r}, port={self.port}, home={str(self.home)!r})"


def _sshd_config(root: Path, port: int) -> str:
    lines = [
        f"# Written by tests/sshkit.py: the test host {root.name}.",
        "ListenAddress 127.0.0.1",
        f"Port {port}",
        f"HostKey {_quoted(root / 'host_key')}",
        f"AuthorizedKeysFile {_quoted(root / 'authorized_keys')}",
        "PidFile none",
        "PubkeyAuthentication yes",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "PermitRootLogin yes",
        "StrictModes no",
        "UsePAM no",
        # environment= options of authorized_keys; no AcceptEnv: the client sends nothing.
        "PermitUserEnvironment yes",
        "PermitUserRC no",
        "PrintMotd no",
        "PrintLastLog no",
        "X11Forwarding no",
        "UseDNS no",
        "MaxStartups 100",
        "MaxSessions 100",
        "LogLevel VERBOSE",
        f"ForceCommand {ENTER_HOME}",
    ]
    if _sshd_version() >= (9, 8):
        # Failed logins a test provokes must not shut 127.0.0.1 out of the next test.
        lines.append("PerSourcePenalties no")
    return "\n".join(lines) + "\n"


def _start_sshd(config: Path, log: Path) -> tuple[subprocess.Popen, _Drain] | None:
    """sshd, listening; None when it exited before (see its log). Raises RuntimeError."""
    process = subprocess.Popen(
        [SSHD, "-D", "-e", "-f", str(config)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    assert process.stderr is not None
    drain = _Drain(process.stderr, log)
    drain.start()
    drain.settled.wait(START_TIMEOUT)
    if drain.listening:
        return process, drain
    if process.poll() is None:
        process.kill()
    process.wait()
    drain.join(STOP_TIMEOUT)
    if drain.settled.is_set():
        return None
    raise RuntimeError(f"sshd did not listen within {START_TIMEOUT}s; see {log}")


# --- the world -----------------------------------------------------------------


class SshWorld:
    """Throwaway ssh hosts on 127.0.0.1 and the ssh config that reaches them.

    Use as a context manager: leaving it stops every sshd it started.
    """

    def __init__(self, base: Path) -> None:
        self.base = Path(base).resolve()
        self.bin_dir = self.base / "bin"
        self.ssh_config = self.base / "ssh_config"
        self.known_hosts = self.base / "known_hosts"
        self.user_key = self.base / "user_key"
        self.hosts: dict[str, SshHost] = {}
        self.user = ""
        self._public_key = ""
        self._control_dir: Path | None = None

    # setup and teardown

    def __enter__(self) -> SshWorld:
        try:
            self.open()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def open(self) -> None:
        """Key, wrapper and (empty) config. Raises SshUnavailable."""
        _check_programs()
        ssh = _real_ssh()
        self.user = _login_account().pw_name
        _privsep_dir()
        self.bin_dir.mkdir(parents=True, exist_ok=True)
        self._public_key = _keygen(self.user_key, "delegate-tests")
        wrapper = self.bin_dir / "ssh"
        _write(
            wrapper,
            "#!/bin/sh\n# Written by tests/sshkit.py: the real ssh with this test's config.\n"
            f"exec {shlex.quote(ssh)} -F {shlex.quote(str(self.ssh_config))} " + '"$@"\n',
            0o755,
        )
        self._write_ssh_config()
        self._write_known_hosts()

    def close(self) -> None:
        """Stop every sshd; remove the control directory. Safe to call twice."""
        for host in self.hosts.values():
            host.stop()
        if self._control_dir is not None:
            shutil.rmtree(self._control_dir, ignore_errors=True)
            self._control_dir = None

    # hosts

    def add_host(
        self, alias: str, env: dict[str, str] | None = None, *, known: bool = True
    ) -> SshHost:
        """Start an sshd reached as `ssh <alias>`; `env` joins its sessions' environment.

        `known=False` leaves its key out of known_hosts (see `set_known`).
        """
        if not ALIAS.match(alias) or alias in self.hosts:
            raise ValueError(f"{alias!r}: need a new alias of letters, digits, . _ -")
        root = self.base / "hosts" / alias
        (root / "home").mkdir(parents=True)
        host_key = _keygen(root / "host_key", alias)
        host = self._start(alias, root, host_key)
        self.hosts[alias] = host
        host.env = _checked_env(env or {})
        host.known = known
        self._write_authorized_keys(host)
        self._write_ssh_config()
        self._write_known_hosts()
        return host

    def _start(self, alias: str, root: Path, host_key: str) -> SshHost:
        config = root / "sshd_config"
        log = root / "sshd.log"
        for _ in range(PORT_TRIES):
            port = _free_port()
            _write(config, _sshd_config(root, port))
            started = _start_sshd(config, log)
            if started is not None:
                return SshHost(alias, root, port, host_key, *started)
            if not any(sign in log.read_bytes() for sign in BIND_FAILED):
                break
        tail = log.read_text(errors="replace")[-2000:]
        raise RuntimeError(f"sshd for {alias} did not start; {log} ends:\n{tail}")

    def host(self, host: SshHost | str) -> SshHost:
        return self.hosts[host] if isinstance(host, str) else host

    def set_env(self, host: SshHost | str, **env: str | None) -> None:
        """Change what remote sessions of `host` see: a value sets, None removes.

        Rewrites its authorized_keys (sshd reads it on each connection), taking
        the process tag from os.environ as it is now.
        """
        host = self.host(host)
        for name, value in _checked_env(env).items():
            if value is None:
                host.env.pop(name, None)
            else:
                host.env[name] = value
        self._write_authorized_keys(host)

    def refresh(self) -> None:
        """Rewrite every host's authorized_keys with the process tag of now."""
        for host in self.hosts.values():
            self._write_authorized_keys(host)

    def set_known(self, host: SshHost | str, known: bool) -> None:
        """Put `host`'s key in known_hosts, or leave it out: ssh then finds it unknown."""
        self.host(host).known = known
        self._write_known_hosts()

    # using them

    def env(self, **extra: str) -> dict[str, str]:
        """os.environ with the ssh wrapper first on PATH, and `extra`."""
        path = os.environ.get("PATH", "")
        return {**os.environ, "PATH": f"{self.bin_dir}{os.pathsep}{path}", **extra}

    def ssh(
        self, *args: str, input: str | None = None, timeout: float = 60, env=None
    ) -> subprocess.CompletedProcess[str]:
        """`ssh *args` through the wrapper, output captured as text."""
        feed = {"input": input} if input is not None else {"stdin": subprocess.DEVNULL}
        return subprocess.run(
            [str(self.bin_dir / "ssh"), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env if env is not None else self.env(),
            check=False,
            **feed,
        )

    @property
    def control_dir(self) -> Path:
        """A short directory for ControlPath sockets (a socket path has ~100 bytes)."""
        if self._control_dir is None:
            base = "/tmp" if os.access("/tmp", os.W_OK) else None
            self._control_dir = Path(tempfile.mkdtemp(prefix="sshkit-", dir=base))
        return self._control_dir

    # the files

    def _session_env(self, host: SshHost) -> dict[str, str]:
        env = {"HOME": str(host.home)}
        tag = os.environ.get(PROCESS_TAG)
        if tag is not None:
            env[PROCESS_TAG] = tag
        return {**env, **host.env}

    def _write_authorized_keys(self, host: SshHost) -> None:
        options = ",".join(
            f'environment="{name}={value}"' for name, value in self._session_env(host).items()
        )
        _write(host.authorized_keys, f"{options} {self._public_key} delegate-tests\n", 0o600)

    def _write_known_hosts(self) -> None:
        lines = [host.host_key_line + "\n" for host in self.hosts.values() if host.known]
        _write(self.known_hosts, "".join(lines))

    def _write_ssh_config(self) -> None:
        blocks = ["# Written by tests/sshkit.py: one block per test host, then the common part.\n"]
        for host in self.hosts.values():
            blocks.append(
                f"Host {host.alias}\n  HostName 127.0.0.1\n  Port {host.port}\n  User {self.user}\n"
            )
        blocks.append(
            "Host *\n"
            f"  IdentityFile {_quoted(self.user_key)}\n"
            "  IdentitiesOnly yes\n"
            "  IdentityAgent none\n"
            f"  UserKnownHostsFile {_quoted(self.known_hosts)}\n"
            "  GlobalKnownHostsFile /dev/null\n"
            "  StrictHostKeyChecking yes\n"
            "  UpdateHostKeys no\n"
            "  CheckHostIP no\n"
            # Never a prompt on the terminal pytest may have.
            "  BatchMode yes\n"
            "  PasswordAuthentication no\n"
            "  KbdInteractiveAuthentication no\n"
            "  ConnectTimeout 10\n"
            "  LogLevel ERROR\n"
        )
        _write(self.ssh_config, "\n".join(blocks), 0o600)


def _checked_env(env: dict) -> dict:
    """`env` when every entry fits in an authorized_keys environment="..." option."""
    for name, value in env.items():
        if not ENV_NAME.match(name):
            raise ValueError(f"{name!r} is not an environment variable name")
        if value is not None and any(c in value for c in '"\\\n\0'):
            raise ValueError(f"{name}={value!r}: no quote, backslash or newline in the value")
    return env


# --- pytest --------------------------------------------------------------------


@contextlib.contextmanager
def open_world(base: Path) -> Iterator[SshWorld]:
    """An SshWorld under `base`; the test skips when this machine cannot run one."""
    world = SshWorld(base)
    try:
        world.__enter__()
    except SshUnavailable as reason:
        pytest.skip(f"no ssh test server here: {reason}")
    try:
        yield world
    finally:
        world.close()


def ssh_world(tmp_path: Path) -> Iterator[SshWorld]:
    """A fresh SshWorld for one test: `ssh_world = pytest.fixture(sshkit.ssh_world)`."""
    with open_world(tmp_path / "ssh") as world:
        yield world
