"""The local side of a remote run (`--host NAME`).

1. Connect (ssh.py), and in one command learn the other machine's Python,
   git and work root, make the bare mirror of this repository there, and
   whether the shipped core is there already; send it when it is not.
2. Push the base (HEAD, or with --include-uncommitted a snapshot commit of
   the work tree on top of it) to the mirror: git sends only the objects the
   mirror lacks.
3. Start the relay there (agent.py), detached, and mirror its run dir into
   the local one as it grows; SIGINT/SIGTERM/SIGHUP are passed on. A dropped
   connection is retried; when it cannot be, the run goes on there and
   `runs wait` takes it up again (`reattach`).
4. Fetch the run's branch back as `delegate/<id>`, check it out in a local
   worktree (as a --worktree run has), write result.json with local paths and
   `host`, and remove the worktree there.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import selectors
import subprocess
import sys
import time

from ..errors import UserError
from ..gitmeta import git_outcome
from . import agent, hosts, shipping, ssh

#: How the shipped core is started there: the bundle dir, then agent.py's arguments.
BOOT = (
    "import sys;sys.path.insert(0,sys.argv[1]);"
    "from delegate_skills.remote.agent import main;sys.exit(main(sys.argv[2:]))"
)
#: The first command there: Python's and git's versions, the root, the mirror, the core.
PROBE = r"""
import json, os, shutil, subprocess, sys
out = {"python": list(sys.version_info[:3])}
if sys.version_info >= (3, 10):
    root = os.path.abspath(os.path.expanduser(sys.argv[1]))
    bundle = os.path.join(root, "bundles", sys.argv[2])
    out.update(root=root, git=None, bundle=os.path.isdir(bundle))
    git = shutil.which("git")
    if git:
        version = subprocess.run([git, "--version"], capture_output=True, text=True)
        out["git"] = version.stdout.strip()
        mirror = os.path.join(root, "repos", sys.argv[3] + ".git")
        if sys.argv[3] and not os.path.isdir(mirror):
            os.makedirs(os.path.dirname(mirror), mode=0o700, exist_ok=True)
            subprocess.run([git, "init", "--quiet", "--bare", mirror], check=True)
        out["mirror"] = mirror if sys.argv[3] else None
print(json.dumps(out))
"""
UNPACK = r"""
import io, os, shutil, sys, tarfile, tempfile
final = os.path.join(os.path.abspath(os.path.expanduser(sys.argv[1])), "bundles", sys.argv[2])
os.makedirs(os.path.dirname(final), mode=0o700, exist_ok=True)
tmp = tempfile.mkdtemp(dir=os.path.dirname(final))
with tarfile.open(fileobj=io.BytesIO(sys.stdin.buffer.read()), mode="r:gz") as tar:
    tar.extractall(tmp, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
try:
    os.rename(tmp, final)
except OSError:
    shutil.rmtree(tmp)
"""
RETRIES = 5
NEEDS = (3, 10)
#: Flags that only mean something here; the relay there gets its own.
LOCAL_ONLY = ("--host", "--include-uncommitted", "--cd", "--out-dir", "--brief", "--lane",
              "--worktree")  # fmt: skip


class Disconnected(Exception):
    """The connection could not be kept; the run goes on over there."""


def _say(line: str) -> None:
    sys.stderr.write(f"relay: {line}\n")
    sys.stderr.flush()


# ---------------------------------------------------------------- the machine


class Machine:
    """One host, once reached: where the core and this repository's mirror are there."""

    def __init__(self, host: hosts.Host, source_key: str = "") -> None:
        self.host = host
        ssh.connect(host.name)
        shipped = shipping.files()
        self.hash = shipping.digest(shipped)
        self.found = found = self._probe(source_key)
        self.root: str = found["root"]
        self.mirror: str = found["mirror"]
        self.bundle = f"{self.root}/bundles/{self.hash}"
        if not found["bundle"]:
            self._ship(shipping.archive(shipped))

    def _probe(self, source_key: str) -> dict:
        name, python = self.host.name, self.host.python
        done = ssh.run(name, [python, "-c", PROBE, self.host.root, self.hash, source_key])
        if done.returncode == 127 or (done.returncode != 0 and b"not found" in done.stderr):
            raise UserError(
                f"--host {name}: {python} is not installed there (or not on the PATH ssh "
                f'gives); install Python 3.10+ or set "python" for {name} in {hosts.hosts_path()}'
            )
        try:
            found = json.loads(done.stdout.decode().strip().splitlines()[-1])
        except (ValueError, IndexError):
            problem = ssh.last_line(done.stderr) or f"exit {done.returncode}"
            raise UserError(f"--host {name}: {python} there did not answer ({problem})") from None
        version = tuple(found.get("python") or ())
        if version[:2] < NEEDS:
            shown = ".".join(str(part) for part in version)
            raise UserError(
                f"--host {name}: {python} there is {shown}; the relay needs 3.10 or newer "
                f'(set "python" for {name} in {hosts.hosts_path()})'
            )
        if not found.get("git"):
            raise UserError(f"--host {name}: git is not installed there (or not on ssh's PATH)")
        return found

    def _ship(self, data: bytes) -> None:
        name = self.host.name
        done = ssh.run(name, [self.host.python, "-c", UNPACK, self.host.root, self.hash],
                       input=data)  # fmt: skip
        if done.returncode != 0:
            raise UserError(f"--host {name}: cannot unpack the relay there: "
                            f"{ssh.last_line(done.stderr)}")  # fmt: skip

    def agent_argv(self, *args: str) -> list[str]:
        return [self.host.python, "-I", "-S", "-c", BOOT, self.bundle, args[0], self.root,
                *args[1:]]  # fmt: skip

    def agent(self, *args: str, input: bytes | None = None, timeout: float = 600):
        return ssh.run(self.host.name, self.agent_argv(*args), input=input, timeout=timeout)

    def url(self) -> str:
        return f"ssh://{self.host.name}{self.mirror}"


def discover_there(name: str, usage: bool) -> dict:
    """The discover document as the machine `name` answers it, with `host`. Raises UserError."""
    machine = Machine(hosts.load(name))
    done = machine.agent("discover", *(["--usage"] if usage else []), timeout=300)
    try:
        document = json.loads(done.stdout)
    except ValueError:
        raise UserError(f"--host {name}: discover did not answer there "
                        f"({ssh.last_line(done.stderr) or done.returncode})") from None  # fmt: skip
    return {"host": name, "python": ".".join(str(p) for p in machine.found["python"]),
            "git": machine.found["git"], "root": machine.root, **document}  # fmt: skip


def source_key(common_dir: str, toplevel: str) -> str:
    """The mirror's name there: the repository's folder name and a hash of where it is here."""
    digest = hashlib.sha256(os.path.realpath(common_dir).encode()).hexdigest()[:16]
    name = re.sub(r"[^A-Za-z0-9._-]", "_", os.path.basename(toplevel) or "repo")
    return f"{name}-{digest}"


def _git(cwd: str, *args: str, env: dict | None = None, timeout: float = 600) -> str:
    done = git_outcome(cwd, *args, env={"GIT_SSH_COMMAND": ssh.git_ssh_command(), **(env or {})},
                       timeout=timeout)  # fmt: skip
    if not done.ok:
        raise UserError(f"git {args[0]} failed in {cwd}: {done.reason()}")
    return done.out.decode("utf-8", "replace").strip()


def base_commit(top: str, git_dir: str, include_uncommitted: bool) -> str:
    """HEAD, or a commit of the work tree as it is (tracked and untracked, not ignored) on it."""
    head = git_outcome(top, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
    if not head.ok:
        raise UserError(f"--host sends the current commit, and {top} has none yet; commit first")
    head_sha = head.out.decode().strip()
    if not include_uncommitted:
        return head_sha
    import shutil
    import tempfile

    with tempfile.TemporaryDirectory(prefix="delegate-remote-") as scratch:
        index = os.path.join(scratch, "index")
        try:
            shutil.copy2(os.path.join(git_dir, "index"), index)
        except OSError:
            pass
        env = {"GIT_INDEX_FILE": index}
        _git(top, "add", "-A", env=env)
        tree = _git(top, "write-tree", env=env)
    if tree == _git(top, "rev-parse", f"{head_sha}^{{tree}}"):
        return head_sha
    return _git(top, "commit-tree", tree, "-p", head_sha, "-m", "uncommitted changes",
                env=agent.IDENTITY)  # fmt: skip


def remote_argv(argv: list[str], table: dict) -> list[str]:
    """The flags given here that the relay there takes as they are."""
    kept: list[str] = []
    i = 0
    while i < len(argv):
        flag = table.get(argv[i])
        width = 2 if flag is not None and flag.value else 1
        if argv[i] not in LOCAL_ONLY:
            kept += argv[i : i + width]
        i += width
    return kept


# ---------------------------------------------------------------- a run


class RemoteRun:
    """One run there, mirrored into `out_dir` here."""

    def __init__(self, machine: Machine, run_id: str, out_dir: str, signals=None) -> None:
        self.machine = machine
        self.id = run_id
        self.out_dir = out_dir
        self.signals = signals
        self.offsets: dict[str, int] = {}
        self.forwarded = 0

    def start(self, spec: dict) -> dict:
        done = self.machine.agent("start", input=json.dumps(spec).encode())
        if done.returncode != 0:
            raise UserError(f"--host {self.machine.host.name}: the run could not start there: "
                            f"{ssh.last_line(done.stderr)}")  # fmt: skip
        return json.loads(done.stdout.decode().strip().splitlines()[-1])

    def follow(self, echo: bool = True) -> dict | None:
        """Mirror the run until it is done there; its done document (None if its relay vanished).

        Raises Disconnected when the connection cannot be had again.
        """
        failures = 0
        while True:
            outcome = self._follow_once(echo)
            if outcome is not None:
                return outcome.get("done")
            failures += 1
            if failures > RETRIES:
                raise Disconnected()
            self._pause(min(2.0**failures, 10.0))
            try:
                ssh.connect(self.machine.host.name)
            except UserError:
                continue

    def _pause(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self._forward_signals()
            time.sleep(0.05)

    def _follow_once(self, echo: bool) -> dict | None:
        offsets = base64.b64encode(json.dumps(self.offsets).encode()).decode()
        argv = ssh.argv_for(self.machine.host.name,
                            self.machine.agent_argv("follow", self.id, offsets))  # fmt: skip
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
        selector = selectors.DefaultSelector()
        selector.register(proc.stdout, selectors.EVENT_READ)
        if self.signals is not None:
            selector.register(self.signals.wakeup_fd, selectors.EVENT_READ)
        buffer = b""
        try:
            while True:
                self._forward_signals()
                for key, _ in selector.select(timeout=0.5):
                    if key.fileobj is not proc.stdout:
                        self.signals.drain()
                        continue
                    chunk = os.read(proc.stdout.fileno(), 1 << 20)
                    if not chunk:
                        return None
                    buffer += chunk
                    *lines, buffer = buffer.split(b"\n")
                    for line in lines:
                        message = json.loads(line) if line.strip() else {}
                        if "done" in message or "lost" in message:
                            return message
                        if "f" in message:
                            self._mirror(message, echo)
        finally:
            selector.close()
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            proc.stdout.close()

    def _forward_signals(self) -> None:
        if self.signals is None:
            return
        import signal

        while self.forwarded < len(self.signals.received):
            name = signal.Signals(self.signals.received[self.forwarded]).name
            self.forwarded += 1
            try:
                self.machine.agent("signal", self.id, name, timeout=60)
            except (UserError, subprocess.TimeoutExpired):
                pass

    def _mirror(self, message: dict, echo: bool) -> None:
        name, at = message["f"], int(message["o"])
        data = base64.b64decode(message["d"])
        self.offsets[name] = at + len(data)
        if name == "@stderr":
            if echo:
                sys.stderr.buffer.write(data)
                sys.stderr.flush()
            return
        if "/" in name or name in (".", "..") or name in agent.NOT_MIRRORED:
            return
        path = os.path.join(self.out_dir, name)
        flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW
        fd = os.open(path, flags, 0o600)
        try:
            if at == 0:
                os.ftruncate(fd, 0)
            os.lseek(fd, at, os.SEEK_SET)
            os.write(fd, data)
        finally:
            os.close(fd)
