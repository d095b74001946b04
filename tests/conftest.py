"""Shared fixtures: an isolated home, git repositories, and the scripts to run."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import settings

# Shared, noisy machines: hypothesis checks behaviour here, never speed.
settings.register_profile("delegate", deadline=None)
settings.load_profile("delegate")


@pytest.fixture(scope="session", autouse=True)
def _private_state_home(tmp_path_factory):
    """Relays remember runs under $XDG_STATE_HOME: keep that out of the real home."""
    state = tmp_path_factory.mktemp("state-home")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_STATE_HOME", str(state))
        yield state


_roots_indexes = itertools.count()


@pytest.fixture(autouse=True)
def _private_roots_index(_private_state_home, monkeypatch):
    """Each state dir that holds runs is listed in the roots index, under the real home
    unless DELEGATE_STATE_ROOTS names another file: each test gets a file of its own, so
    no test finds another's runs through it and none lands in the user's."""
    index = _private_state_home / f"roots-{next(_roots_indexes)}.json"
    monkeypatch.setenv("DELEGATE_STATE_ROOTS", str(index))


@pytest.fixture(scope="session", autouse=True)
def _private_temp_dir(tmp_path_factory):
    """Relays put run directories under $TMPDIR/delegate-relay: keep them out of the real one.

    This process looked its temp dir up before (pytest did, for tmp_path) and
    keeps the answer; it looks again, so code run in here uses the new one too.
    """
    temp = tmp_path_factory.mktemp("tmpdir")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TMPDIR", str(temp))
        patch.setattr(tempfile, "tempdir", None)
        yield temp


def _user_run_roots() -> list[str]:
    """Where runs land outside the suite: the run store and its worktrees under the user's
    XDG_STATE_HOME and under HOME's default (~/.local/state), and the shared run root under
    the user's temp dir and under /tmp. Read before a fixture points any of them elsewhere."""
    states = [os.path.join(os.path.expanduser("~"), ".local", "state")]
    configured = os.environ.get("XDG_STATE_HOME")
    if configured and os.path.isabs(configured):
        states.insert(0, configured)
    roots = [os.path.join(s, "delegate-skills", d) for s in states for d in ("runs", "worktrees")]
    roots += [os.path.join(t, "delegate-relay") for t in (tempfile.gettempdir(), "/tmp")]
    return list(dict.fromkeys(os.path.abspath(root) for root in roots))


def _user_roots_indexes() -> list[str]:
    """The user's roots index (the list of their state dirs): HOME's default, and the file
    DELEGATE_STATE_ROOTS names."""
    found = [os.path.join(os.path.expanduser("~"), ".local", "state", "delegate-skills",
                          "roots.json")]  # fmt: skip
    named = os.environ.get("DELEGATE_STATE_ROOTS")
    if named and os.path.isabs(named):
        found.append(named)
    return list(dict.fromkeys(found))


def _head(path: str) -> bytes | None:
    try:
        with open(path, "rb") as handle:
            return handle.read(1024 * 1024)
    except OSError:
        return None


#: Each of the user's run roots and what it held when the session started.
_USER_ROOTS_BEFORE: dict[str, set[str]] = {}
#: The user's roots indexes as the session found them.
_USER_INDEXES_BEFORE: dict[str, bytes | None] = {}
_LEFT_IN_USER_ROOTS: list[str] = []


def _listing(root: str) -> set[str]:
    try:
        return set(os.listdir(root))
    except OSError:
        return set()


def _names(entry: str, needle: bytes) -> bool:
    """Whether a run directory, record or worktree names `needle` (this session's temp dir)
    in one of its top-level files (run.json, record.json, a worktree's .git, ...)."""
    try:
        names = sorted(os.listdir(entry))[:64] if os.path.isdir(entry) else [""]
    except OSError:
        return False
    for name in names:
        path = os.path.join(entry, name) if name else entry
        try:
            if os.path.isfile(path) and not os.path.islink(path):
                with open(path, "rb") as handle:
                    if needle in handle.read(256 * 1024):
                        return True
        except OSError:
            continue
    return False


#: The fixture that fetches the Skills CLI and a Node from npm (tests/skillscli.py).
DOWNLOADING_FIXTURE = "skills_command"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    """A test that needs the downloaded Skills CLI is `skillscli`, so that
    `-m 'not realcli and not skillscli'` leaves out the download (the README says so
    beside the test command)."""
    for item in items:
        if DOWNLOADING_FIXTURE in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.skillscli)


@pytest.hookimpl(optionalhook=True)  # a hook of xdist's: a run without xdist has none
def pytest_xdist_auto_num_workers(config):
    """`-n auto`: one worker per core the suite may use, and one more, since most tests spend
    their time waiting on the relays and git processes they start (the cores stay busy
    with those); PYTEST_XDIST_AUTO_NUM_WORKERS, which xdist reads first, sets another count."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return cores + 1


def _is_xdist_worker(config) -> bool:
    return hasattr(config, "workerinput")


def pytest_sessionstart(session):
    if not _is_xdist_worker(session.config):
        _USER_ROOTS_BEFORE.update({root: _listing(root) for root in _user_run_roots()})
        _USER_INDEXES_BEFORE.update({path: _head(path) for path in _user_roots_indexes()})


def pytest_sessionfinish(session, exitstatus):
    """Fail the session when a test left a run in the user's own run roots.

    Only what names this session's temp dir counts: a run the user starts
    while the suite runs is theirs.
    """
    factory = getattr(session.config, "_tmp_path_factory", None)
    if _is_xdist_worker(session.config) or not _USER_ROOTS_BEFORE or factory is None:
        return
    needle = str(factory.getbasetemp()).encode()
    for root, before in _USER_ROOTS_BEFORE.items():
        for name in sorted(_listing(root) - before):
            if _names(os.path.join(root, name), needle):
                _LEFT_IN_USER_ROOTS.append(os.path.join(root, name))
    for path, before in _USER_INDEXES_BEFORE.items():
        now = _head(path)
        if now != before and now is not None and needle in now:
            _LEFT_IN_USER_ROOTS.append(path)
    if _LEFT_IN_USER_ROOTS and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter):
    if _LEFT_IN_USER_ROOTS:
        terminalreporter.write_line(
            "tests left runs in the user's own state and run roots (a test's subprocess lost "
            "the session's XDG_STATE_HOME, DELEGATE_STATE_ROOTS or TMPDIR): "
            f"{', '.join(_LEFT_IN_USER_ROOTS)}",
            red=True,
        )


@pytest.fixture(scope="session", autouse=True)
def _shared_bytecode(tmp_path_factory):
    """The Python processes tests start keep their bytecode in one place per run.

    A machine with PYTHONDONTWRITEBYTECODE set would otherwise compile the whole
    bundled core at every relay start (thousands of times per run, most of the
    suite's CPU); the cache lives beside the run's temporary files, so the
    checkout gets no __pycache__ from the children. Tests that run a skill with
    -I ignore both variables, as a user's bare python3 would.
    """
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # shared by every worker of this run
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
        patch.setenv("PYTHONPYCACHEPREFIX", str(base / "pycache"))
        yield


#: PATH as the suite found it; the realcli tests (opt-in) reach the real CLIs through it.
ORIGINAL_PATH = os.environ.get("PATH", "")


def _implementer_binaries() -> set[str]:
    from delegate_skills import registry

    return {impl.binary for impl in registry.IMPLEMENTERS}


@pytest.fixture(scope="session", autouse=True)
def _path_without_real_implementers(tmp_path_factory, request):
    """No test reaches a real implementer CLI, whatever the machine has on PATH.

    Each PATH directory that holds an implementer binary (codex, claude, …) is
    replaced by a directory of links to everything else in it; the fakes a
    test installs come first on its own PATH. Tests marked `realcli` are the
    only ones that mean the real CLIs; when they are selected, PATH is kept.
    """
    if request.config.getoption("-m", default="") == "realcli":
        yield
        return
    binaries = _implementer_binaries()
    shadows = tmp_path_factory.mktemp("path-without-implementers")
    parts = []
    for n, folder in enumerate(ORIGINAL_PATH.split(os.pathsep)):
        try:
            names = os.listdir(folder) if folder else []
        except OSError:
            continue
        if not binaries.intersection(names):
            parts.append(folder)
            continue
        shadow = shadows / str(n)
        shadow.mkdir()
        for name in names:
            if name not in binaries:
                os.symlink(os.path.join(folder, name), shadow / name)
        parts.append(str(shadow))
    os.environ["PATH"] = os.pathsep.join(parts)
    yield
    os.environ["PATH"] = ORIGINAL_PATH


#: Every process a test starts inherits this variable, set to a value of that test's own.
PROCESS_TAG = "DELEGATE_TESTS_PROCESS_TAG"
_tests_run = itertools.count()


def _pids() -> set[int]:
    return {int(name) for name in os.listdir("/proc") if name.isdigit()}


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, parent pid) of a process, None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
        return fields[0].decode(), int(fields[1])
    except (OSError, IndexError, ValueError):
        return None


def _carries(pid: int, entry: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            return entry in handle.read().split(b"\0")
    except OSError:
        return False


@contextlib.contextmanager
def sweeping():
    """On leaving, SIGKILL every process started inside that is still running.

    A process is ours when its pid is new (not there on entering; a pid comes
    round again only after the kernel's whole pid range) and it either
    descends from this process through new processes, or carries our own
    PROCESS_TAG. The tag finds the grandchildren a dead parent left to init,
    such as a watchdog test's SIGTERM-ignoring grandchild; zombies are already
    dead and left be. Only new pids are read, so a test that starts nothing
    pays two directory listings.
    """
    if not os.path.isdir("/proc"):
        yield
        return
    me = os.getpid()
    tag = f"{me}-{next(_tests_run)}"
    previous = os.environ.get(PROCESS_TAG)
    os.environ[PROCESS_TAG] = tag
    before = _pids()
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(PROCESS_TAG, None)
        else:
            os.environ[PROCESS_TAG] = previous
        entry = f"{PROCESS_TAG}={tag}".encode()
        new = {pid: _stat(pid) for pid in _pids() - before - {me}}
        new = {pid: found for pid, found in new.items() if found is not None}

        def descends(pid: int) -> bool:
            for _ in range(64):
                parent = new[pid][1]
                if parent == me:
                    return True
                if parent not in new:
                    return False
                pid = parent
            return False

        for pid, (state, _parent) in new.items():
            if state != "Z" and (descends(pid) or _carries(pid, entry)):
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass


def tagged() -> list[int]:
    """Live processes started by this test (conftest tags each test's processes)."""
    entry = f"{PROCESS_TAG}={os.environ[PROCESS_TAG]}".encode()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as handle:
                carries = entry in handle.read().split(b"\0")
            with open(f"/proc/{name}/stat", "rb") as handle:
                state = handle.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if carries and state != b"Z":
            found.append(int(name))
    return found


@pytest.fixture(autouse=True)
def _no_process_outlives_its_test():
    """Whether the test passed or failed, nothing it started outlives it."""
    with sweeping():
        yield


ROOT = Path(__file__).resolve().parent.parent
SETUP_SCRIPTS = ROOT / "skills" / "delegate-setup" / "scripts"
PYTHON = sys.executable


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(cwd), *args],
        check=True,
        capture_output=True,
        text=True,
    )
    return done.stdout.strip()


def make_repo(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.email", "test@example.invalid")
    git(path, "config", "user.name", "test")
    git(path, "config", "commit.gpgsign", "false")
    return path


def commit_all(repo: Path, message: str = "snapshot") -> None:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--allow-empty", "-m", message)


def fleet_doc(lanes: dict) -> dict:
    return {"version": "delegate-fleet.v1", "lanes": lanes}


def node_bytes(document: dict) -> bytes:
    """What `JSON.stringify(doc, null, 2) + "\\n"` writes, for plain ASCII documents."""
    return (json.dumps(document, indent=2) + "\n").encode()


class Result:
    def __init__(self, done: subprocess.CompletedProcess) -> None:
        self.code = done.returncode
        self.out = done.stdout
        self.err = done.stderr

    def json(self):
        return json.loads(self.out)

    def __repr__(self) -> str:
        return f"Result(code={self.code}, out={self.out!r}, err={self.err!r})"


def run(argv: list[str], env: dict | None = None, cwd: Path | None = None, **kw) -> Result:
    done = subprocess.run(
        argv, capture_output=True, text=True, env=env, cwd=cwd, timeout=kw.pop("timeout", 120), **kw
    )
    return Result(done)


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    """A fresh HOME with no XDG override, for this process and its children."""
    home_dir = tmp_path / "home"
    home_dir.mkdir()
    monkeypatch.setenv("HOME", str(home_dir))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_AUTHOR_NAME", "test")
    monkeypatch.setenv("GIT_AUTHOR_EMAIL", "test@example.invalid")
    monkeypatch.setenv("GIT_COMMITTER_NAME", "test")
    monkeypatch.setenv("GIT_COMMITTER_EMAIL", "test@example.invalid")
    return home_dir


@pytest.fixture
def repo(tmp_path, home) -> Path:
    return make_repo(tmp_path / "repo")


@pytest.fixture
def global_config(home) -> Path:
    return home / ".config" / "delegate-skills" / "config.json"


def script(name: str, *args: str, **kw) -> Result:
    """Run a delegate-setup script as an agent would: python3 <skill>/scripts/<name>."""
    return run([PYTHON, str(SETUP_SCRIPTS / name), *args], **kw)


def delegate(*args: str, **kw) -> Result:
    return run([PYTHON, "-m", "delegate_skills.commands.cli", *args], **kw)


def write_json(path: Path, document, raw: bytes | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(raw if raw is not None else node_bytes(document))
    return path


@pytest.fixture(params=["linux", "posix"])
def mechanisms(request, monkeypatch):
    """Each test that uses this runs twice: with the relay's Linux mechanisms
    (/proc, prctl, pidfd, cgroups, bubblewrap), and with all of them switched
    off as on macOS (DELEGATE_RELAY_POSIX_ONLY=1, for this test and every
    process it starts), so the POSIX fallbacks are exercised here too. The
    process and read-only test modules use it for every test."""
    if request.param == "posix":
        monkeypatch.setenv("DELEGATE_RELAY_POSIX_ONLY", "1")
    else:
        monkeypatch.delenv("DELEGATE_RELAY_POSIX_ONLY", raising=False)
    return request.param
