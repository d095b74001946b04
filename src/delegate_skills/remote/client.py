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
import binascii
import hashlib
import json
import os
import re
import selectors
import subprocess
import sys
import time
from typing import NoReturn

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
#: How much of the stream is read at once.
READ_SIZE = 1 << 20
#: How deep a message from there may nest (a result is a few levels deep).
DEPTH_LIMIT = 64
#: The longest base64 text of one file chunk.
DATA_LIMIT = 4 * ((agent.CHUNK + 2) // 3)
#: A commit id as git prints it (SHA-1 or SHA-256).
COMMIT_ID = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")
#: Flags that only mean something here; the relay there gets its own.
LOCAL_ONLY = ("--host", "--include-uncommitted", "--cd", "--out-dir", "--brief", "--lane",
              "--worktree")  # fmt: skip


class Disconnected(Exception):
    """The connection could not be kept; the run goes on over there."""


class Stopped(UserError):
    """The run cannot be followed any further from here: a message from there that breaks
    the protocol, a start that failed there, or a file that cannot be written here. One line
    naming the host."""


def checked_json(data: bytes, limit: int = agent.LINE_LIMIT):
    """The JSON value of `data`. Raises ValueError (a line longer than `limit`, not JSON,
    or nested deeper than DEPTH_LIMIT)."""
    if len(data) > limit:
        raise ValueError(f"a line longer than {limit // (1 << 20)} MiB")
    try:
        value = json.loads(data)
    except RecursionError:
        raise ValueError(f"a message nested deeper than {DEPTH_LIMIT} levels") from None
    except ValueError:
        raise ValueError("a line that is not JSON") from None
    pending = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, (dict, list)):
            if depth > DEPTH_LIMIT:
                raise ValueError(f"a message nested deeper than {DEPTH_LIMIT} levels")
            inner = item.values() if isinstance(item, dict) else item
            pending.extend((child, depth + 1) for child in inner)
    return value


def checked_done(document) -> dict:
    """The done document of a run there, every field a reader here uses checked.

    Raises ValueError naming what is wrong.
    """
    if not isinstance(document, dict):
        raise ValueError("its end is not a JSON object")
    code = document.get("exitCode")
    if not isinstance(code, int) or isinstance(code, bool):
        raise ValueError("its end has no whole-number exitCode")
    if not isinstance(document.get("result"), (dict, type(None))):
        raise ValueError("its result is not a JSON object")
    head = document.get("head")
    if head is not None and not (isinstance(head, str) and COMMIT_ID.fullmatch(head)):
        raise ValueError("its head is not a commit id")
    out_dir = document.get("outDir")
    if out_dir is not None and not (isinstance(out_dir, str) and os.path.isabs(out_dir)):
        raise ValueError("its outDir is not an absolute path")
    return document


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
        found = _last_json(done.stdout)
        version = found.get("python") if isinstance(found, dict) else None
        if not (isinstance(version, list) and version
                and all(isinstance(part, int) for part in version)):  # fmt: skip
            problem = ssh.last_line(done.stderr) or f"exit {done.returncode}"
            raise UserError(f"--host {name}: {python} there did not answer ({problem})")
        version = tuple(version)
        if version[:2] < NEEDS:
            shown = ".".join(str(part) for part in version)
            raise UserError(
                f"--host {name}: {python} there is {shown}; the relay needs 3.10 or newer "
                f'(set "python" for {name} in {hosts.hosts_path()})'
            )
        if not found.get("git"):
            raise UserError(f"--host {name}: git is not installed there (or not on ssh's PATH)")
        root, mirror = found.get("root"), found.get("mirror")
        if source_key:
            mirror_ok = isinstance(mirror, str) and os.path.isabs(mirror)
        else:
            mirror_ok = mirror is None
        if not (isinstance(root, str) and os.path.isabs(root)) or not mirror_ok:
            raise UserError(f"--host {name}: {python} there did not answer (no work root)")
        return found

    def _ship(self, data: bytes) -> None:
        name = self.host.name
        done = ssh.run(name, [self.host.python, "-c", UNPACK, self.host.root, self.hash],
                       input=data)  # fmt: skip
        if done.returncode != 0:
            problem = ssh.last_line(done.stderr) or f"exit {done.returncode}"
            raise UserError(f"--host {name}: cannot unpack the relay there: {problem}")

    def agent_argv(self, *args: str) -> list[str]:
        return [self.host.python, "-I", "-S", "-c", BOOT, self.bundle, args[0], self.root,
                *args[1:]]  # fmt: skip

    def agent(self, *args: str, input: bytes | None = None, timeout: float = 600):
        return ssh.run(self.host.name, self.agent_argv(*args), input=input, timeout=timeout)

    def url(self) -> str:
        return f"ssh://{self.host.name}{self.mirror}"


def _last_json(stdout: bytes):
    """The JSON value on the last line of `stdout`; None when it is not JSON."""
    lines = stdout.strip().splitlines()
    try:
        return checked_json(lines[-1]) if lines else None
    except ValueError:
        return None


def discover_there(name: str, usage: bool) -> dict:
    """The discover document as the machine `name` answers it, with `host`. Raises UserError."""
    machine = Machine(hosts.load(name))
    done = machine.agent("discover", *(["--usage"] if usage else []), timeout=300)
    try:
        document = checked_json(done.stdout)
    except ValueError:
        document = None
    if not isinstance(document, dict):
        raise UserError(f"--host {name}: discover did not answer there "
                        f"({ssh.last_line(done.stderr) or done.returncode})")  # fmt: skip
    return {"host": name, "python": ".".join(str(p) for p in machine.found["python"]),
            "git": machine.found["git"], "root": machine.root, **document}  # fmt: skip


def source_key(common_dir: str, toplevel: str) -> str:
    """The mirror's name there: the repository's folder name and a hash of where it is here."""
    digest = hashlib.sha256(os.path.realpath(common_dir).encode()).hexdigest()[:16]
    name = re.sub(r"[^A-Za-z0-9._-]", "_", os.path.basename(toplevel) or "repo")
    return f"{name}-{digest}"


def _git(cwd: str, *args: str, env: dict | None = None, timeout: float = 600,
         host: str | None = None) -> str:  # fmt: skip
    """git's output in `cwd`; with `host`, git reaches it over our ssh. Raises UserError."""
    reach = {"GIT_SSH_COMMAND": ssh.git_ssh_command(host)} if host is not None else {}
    done = git_outcome(cwd, *args, env={**reach, **(env or {})}, timeout=timeout)
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
        """Start the run there; where it runs. Raises Stopped (it did not start) or SshError."""
        name = self.machine.host.name
        done = self.machine.agent("start", input=json.dumps(spec).encode())
        if done.returncode != 0:
            raise Stopped(f"--host {name}: the run could not start there: "
                          f"{ssh.last_line(done.stderr) or f'exit {done.returncode}'}")  # fmt: skip
        started = _last_json(done.stdout)
        if not isinstance(started, dict):
            raise Stopped(f"--host {name}: the run could not start there: no answer from it")
        return started

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
        """One `follow` there: its last message (done or lost), None when the stream broke.

        Raises Stopped on a message that breaks the protocol.
        """
        offsets = base64.b64encode(json.dumps(self.offsets).encode()).decode()
        argv = ssh.argv_for(self.machine.host.name,
                            self.machine.agent_argv("follow", self.id, offsets))  # fmt: skip
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
        selector = selectors.DefaultSelector()
        selector.register(proc.stdout, selectors.EVENT_READ)
        if self.signals is not None:
            selector.register(self.signals.wakeup_fd, selectors.EVENT_READ)
        buffer = bytearray()
        try:
            while True:
                self._forward_signals()
                for key, _ in selector.select(timeout=0.5):
                    if key.fileobj is not proc.stdout:
                        self.signals.drain()
                        continue
                    chunk = os.read(proc.stdout.fileno(), READ_SIZE)
                    if not chunk:
                        return None
                    searched = len(buffer)  # what is before has no newline
                    buffer += chunk
                    start = 0
                    while (end := buffer.find(b"\n", max(start, searched))) >= 0:
                        message = self._message(bytes(buffer[start:end]))
                        start = end + 1
                        if "done" in message or "lost" in message:
                            return message
                        if "f" in message:
                            self._mirror(message, echo)
                    del buffer[:start]
                    if len(buffer) > agent.LINE_LIMIT:
                        self._stop(f"a line longer than {agent.LINE_LIMIT // (1 << 20)} MiB")
        finally:
            selector.close()
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            proc.stdout.close()

    def _stop(self, problem: str) -> NoReturn:
        raise Stopped(f"--host {self.machine.host.name}: stopped following the run there: "
                      f"{problem}")  # fmt: skip

    def _message(self, line: bytes) -> dict:
        """One line of the stream as a checked message (a heartbeat is {})."""
        if not line.strip():
            return {}
        try:
            message = checked_json(line)
        except ValueError as problem:
            self._stop(str(problem))
        if not isinstance(message, dict):
            self._stop("a message that is not a JSON object")
        if "done" in message:
            try:
                checked_done(message["done"])
            except ValueError as problem:
                self._stop(str(problem))
        return message

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
        """Write one chunk of a run file there into the same file here. Raises Stopped."""
        name, at, text = message.get("f"), message.get("o"), message.get("d")
        if not isinstance(name, str) or not plain_name(name):
            self._stop(f"file name {name!r} is not a plain name")
        have = max(self.offsets.get(name, 0), 0)
        if not isinstance(at, int) or isinstance(at, bool) or not 0 <= at <= have:
            self._stop(f"offset {at!r} of {name} is not from 0 to the {have} bytes here")
        if not isinstance(text, str) or len(text) > DATA_LIMIT:
            self._stop(f"the data of {name} is not base64 of at most {agent.CHUNK} bytes")
        try:
            data = base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            self._stop(f"the data of {name} is not base64")
        if len(data) > agent.CHUNK:
            self._stop(f"the data of {name} is not base64 of at most {agent.CHUNK} bytes")
        self.offsets[name] = at + len(data)
        if name == "@stderr":
            if echo:
                sys.stderr.buffer.write(data)
                sys.stderr.flush()
            return
        if name in agent.NOT_MIRRORED:
            return
        path = os.path.join(self.out_dir, name)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600)
            try:
                if at == 0:
                    os.ftruncate(fd, 0)
                view = memoryview(data)
                while view:
                    view = view[os.pwrite(fd, view, at + len(data) - len(view)) :]
            finally:
                os.close(fd)
        except OSError as problem:
            self._stop(f"cannot write {path}: {problem.strerror or problem}")

    def stop_there(self) -> None:
        """Ask the run there to stop (it is no longer followed from here); best effort."""
        try:
            self.machine.agent("signal", self.id, "SIGTERM", timeout=60)
        except (UserError, subprocess.TimeoutExpired, OSError):
            pass


def plain_name(name: str) -> bool:
    """A file of the run dir: one path component, or the relay's stderr stream."""
    if name == "@stderr":
        return True
    return bool(name) and name not in (".", "..") and "/" not in name and "\0" not in name
