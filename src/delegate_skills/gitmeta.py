"""What git says about a directory, asked so that the repository cannot answer with a command.

Every git we start runs in its own process group, with the configuration
that would run a program of the repository's choosing switched off: no
fsmonitor, no hooks, no pager, no automatic gc, no replace refs, no optional
locks (so `git status` never rewrites the user's index). Variables that would
point git at another repository, index or object store are dropped from its
environment. A directory git cannot speak for (not a repository, git missing,
a repository git refuses to open, git hanging) gives None, never an exception.

`BoundGit` goes further for the commands the relay runs after an
implementer had the repository to itself: it names the git dir and work tree
that were resolved before the run (a swapped `.git` file is not followed),
and empties every clean/smudge/process filter and merge driver the
configuration defines, so nothing the run wrote into a config is executed.
"""

from __future__ import annotations

import os
import signal
import subprocess

GIT_TIMEOUT_S = 10

#: `-c` settings on every git we run: nothing the repository configures is executed.
SAFE_CONFIG = (
    "core.fsmonitor=false",
    "core.hooksPath=/dev/null",
    "core.pager=cat",
    "gc.auto=0",
    "maintenance.auto=false",
)
#: Variables that would send git to another repository, index or object store,
#: or have it run a program: never passed to the git we start.
REDIRECTING = (
    "GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_COMMON_DIR", "GIT_NAMESPACE",
    "GIT_EXTERNAL_DIFF", "GIT_PAGER", "GIT_EDITOR", "GIT_SEQUENCE_EDITOR",
    "GIT_REPLACE_REF_BASE", "GIT_QUARANTINE_PATH", "GIT_PREFIX",
)  # fmt: skip
QUIET = {"GIT_OPTIONAL_LOCKS": "0", "GIT_TERMINAL_PROMPT": "0", "GIT_NO_REPLACE_OBJECTS": "1"}


def git_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a git we start: ours, less REDIRECTING, plus QUIET and `extra`."""
    env = {k: v for k, v in os.environ.items() if k not in REDIRECTING}
    env.update(QUIET)
    if extra:
        env.update(extra)
    return env


def git_argv(cwd: str, args: tuple[str, ...] | list[str]) -> list[str]:
    argv = ["git"]
    for setting in SAFE_CONFIG:
        argv += ["-c", setting]
    return [*argv, "-C", cwd, *args]


#: HEAD's tree when HEAD has no commit yet (RepoPaths.head_tree).
UNBORN = "unborn"


class RepoPaths:
    __slots__ = ("common_dir", "git_dir", "head_tree", "toplevel")

    def __init__(
        self,
        toplevel: str | None,
        git_dir: str | None,
        common_dir: str | None = None,
        head_tree: str | None = None,
    ) -> None:
        self.toplevel = toplevel
        self.git_dir = git_dir
        self.common_dir = common_dir or git_dir
        #: HEAD's tree when the paths were asked (UNBORN before a first commit; None: unknown).
        self.head_tree = head_tree


def run_git(cwd: str, *args: str, timeout: float = GIT_TIMEOUT_S) -> bytes | None:
    """stdout of `git -C cwd args…`, or None when git fails, is missing or hangs.

    git runs in its own process group, so a hang is ended with everything it
    started.
    """
    return git_answer(start_git(cwd, *args), timeout)


def git_answer(proc: subprocess.Popen | None, timeout: float = GIT_TIMEOUT_S) -> bytes | None:
    """stdout of a git `start_git` started, once it exits; None when it failed or hung."""
    if proc is None:
        return None
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_git(proc)
        proc.communicate()
        return None
    return out if proc.returncode == 0 else None


def start_git(cwd: str, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen | None:
    """`git -C cwd args…` in its own process group, stdout piped; None if it cannot start."""
    try:
        return subprocess.Popen(
            git_argv(cwd, args),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env or git_env(),
            start_new_session=True,
        )
    except OSError:
        return None


def kill_git(proc: subprocess.Popen) -> None:
    """SIGKILL a git started by `start_git`, with everything it started."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass


def _one_answer(out: bytes) -> str | None:
    """One path git printed, less the newline git adds (a path may hold newlines itself)."""
    text = os.fsdecode(out[:-1] if out.endswith(b"\n") else out)
    return text or None


def repo_paths(cwd: str) -> RepoPaths:
    """The work tree root, absolute git dir and common git dir of `cwd` (None outside one).

    The git dir is the one `git rev-parse --absolute-git-dir` names: a linked
    worktree and a submodule each have their own; the common dir holds what
    they share (objects, refs). One git answers the three questions; a path
    that holds a newline makes the answer ambiguous, and each is asked alone.
    """
    questions = ("--show-toplevel", "--absolute-git-dir", "--git-common-dir")
    # HEAD's tree in the same process: its answer is a fourth line, or none (exit 1, nothing
    # said) before a first commit.
    asked = run_argv(
        git_argv(cwd, ["rev-parse", *questions, "--verify", "-q", "HEAD^{tree}"]), env=git_env()
    )
    if asked.code not in (0, 1) or (asked.code == 1 and asked.err.strip()):
        return RepoPaths(None, None)
    lines = os.fsdecode(asked.out).split("\n")
    if lines[-1] == "":
        lines.pop()
    head = lines.pop() if asked.code == 0 and len(lines) == len(questions) + 1 else None
    if asked.code == 1 and len(lines) == len(questions):
        head = UNBORN
    if len(lines) != len(questions):
        head = None
        answers = [run_git(cwd, "rev-parse", q) for q in questions]
        if any(answer is None for answer in answers):
            return RepoPaths(None, None)
        lines = [_one_answer(answer) or "" for answer in answers]
    if not all(lines):
        return RepoPaths(None, None)
    top, git_dir, common = lines
    # --git-common-dir is relative to cwd unless it is elsewhere (git 2.31's
    # --path-format=absolute would say it whole, and older gits lack it).
    common = os.path.join(os.path.abspath(cwd), common)
    return RepoPaths(
        os.path.normpath(top), os.path.normpath(git_dir), os.path.normpath(common), head
    )


class GitOutcome:
    """What one git command did: its exit code (None: it did not run or hung), stdout, stderr."""

    __slots__ = ("code", "err", "out")

    def __init__(self, code: int | None, out: bytes, err: bytes) -> None:
        self.code = code
        self.out = out
        self.err = err

    @property
    def ok(self) -> bool:
        return self.code == 0

    def reason(self) -> str:
        """git's last stderr line, or why git gave none."""
        lines = [line for line in self.err.decode("utf-8", "replace").splitlines() if line.strip()]
        if lines:
            return lines[-1].strip()
        return "git did not answer in time" if self.code is None else f"git exited {self.code}"


class Pending:
    """A git command started and not yet waited for; `result()` waits (once)."""

    def __init__(self, proc, input: bytes | None, timeout: float, failed=None) -> None:
        self._proc = proc
        self._input = input
        self._timeout = timeout
        self._outcome: GitOutcome | None = failed

    def result(self) -> GitOutcome:
        if self._outcome is None:
            proc = self._proc
            try:
                out, err = proc.communicate(self._input, timeout=self._timeout)
                self._outcome = GitOutcome(proc.returncode, out, err)
            except subprocess.TimeoutExpired:
                kill_git(proc)
                proc.communicate()
                self._outcome = GitOutcome(None, b"", b"")
        return self._outcome


def start_argv(
    argv: list[str],
    *,
    cwd: str | None = None,
    env: dict[str, str] | None = None,
    input: bytes | None = None,
    timeout: float = GIT_TIMEOUT_S,
) -> Pending:
    """Start a git command line (in its own process group); wait with `.result()`."""
    try:
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env or git_env(),
            start_new_session=True,
        )
    except OSError as problem:
        return Pending(None, None, 0, GitOutcome(None, b"", f"cannot run git: {problem}".encode()))
    return Pending(proc, input, timeout)


def run_argv(
    argv: list[str],
    *,
    cwd: str | None = None,
    env: dict[str, str] | None = None,
    input: bytes | None = None,
    timeout: float = GIT_TIMEOUT_S,
) -> GitOutcome:
    """Run a git command line (in its own process group) and keep both streams."""
    return start_argv(argv, cwd=cwd, env=env, input=input, timeout=timeout).result()


def git_outcome(
    cwd: str,
    *args: str,
    env: dict[str, str] | None = None,
    input: bytes | None = None,
    timeout: float = GIT_TIMEOUT_S,
) -> GitOutcome:
    """Run `git -C cwd args…` and keep both streams. `env` adds to git_env()."""
    return run_argv(git_argv(cwd, args), env=git_env(env), input=input, timeout=timeout)


#: Configuration keys whose value is a program git runs on file contents, and the include
#: keys that bring more configuration files in.
_DRIVER_KEYS = (
    r"^(filter\..+\.(clean|smudge|process)|merge\..+\.driver|include\.path|includeif\..+\.path)$"
)


def _is_driver(key: str) -> bool:
    """A filter's or merge driver's program (config keys come lower-cased but the middle)."""
    if key.startswith("filter."):
        return key.count(".") >= 2 and key.endswith((".clean", ".smudge", ".process"))
    return key.startswith("merge.") and key.count(".") >= 2 and key.endswith(".driver")


def _config_files(git_dir: str, env: dict[str, str]) -> list[str]:
    """Every configuration file git reads for `git_dir`, whether it exists or not."""
    home = env.get("HOME") or os.path.expanduser("~")
    xdg = env.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    found = [
        env.get("GIT_CONFIG_SYSTEM") or "/etc/gitconfig",
        env.get("GIT_CONFIG_GLOBAL") or os.path.join(home, ".gitconfig"),
        os.path.join(xdg, "git", "config"),
        os.path.join(git_dir, "config"),
        os.path.join(git_dir, "config.worktree"),
    ]
    try:
        with open(os.path.join(git_dir, "commondir"), encoding="utf-8") as handle:
            common = os.path.join(git_dir, handle.read().strip())
        found += [os.path.join(common, "config"), os.path.join(common, "config.worktree")]
    except OSError:
        pass
    return found


def _stamp(paths) -> tuple:
    """What tells whether any of `paths` was written, made or removed since."""
    stamps = []
    for path in sorted(set(paths)):
        try:
            info = os.stat(path)
        except OSError:
            stamps.append((path, None))
            continue
        stamps.append((path, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns))
    return tuple(stamps)


#: Where a git installed as /usr/bin/git (or /bin/git) reads its system configuration.
_DISTRO_GITS = ("/usr/bin/git", "/bin/git")
_DISTRO_SYSTEM_CONFIG = "/etc/gitconfig"
#: Environment that adds configuration no file holds.
_CONFIG_ENV = ("GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT")
#: A configuration file larger than this is handed to git rather than read here.
_SCAN_LIMIT = 1 << 20
_HEADERS = (b"[filter", b"[merge", b"[include")


def _system_config(env: dict[str, str]) -> list[str] | None:
    """The system configuration file git reads ([] for none); None when it cannot be known here.

    A git installed by the system's packages reads /etc/gitconfig; any other git
    (a build of one's own, a shim in front of git) may read another file.
    """
    from .pathsearch import which

    if env.get("GIT_CONFIG_NOSYSTEM", "").lower() in ("1", "true", "yes", "on"):
        return []
    if env.get("GIT_CONFIG_SYSTEM"):
        return [env["GIT_CONFIG_SYSTEM"]]
    git = which("git", env)
    if git is None or os.path.realpath(git) not in _DISTRO_GITS:
        return None
    return [_DISTRO_SYSTEM_CONFIG]


def _names_no_driver(git_dir: str, env: dict[str, str]) -> bool:
    """True when no configuration git reads for `git_dir` can name a driver or an include.

    Every file git reads is looked at for a `[filter`, `[merge` or `[include`
    section header (any case, anywhere: a false alarm only costs asking git);
    any doubt (a file that cannot be read or is large, configuration given in
    the environment, a system file in an unknown place) answers False.
    """
    if any(env.get(name) for name in _CONFIG_ENV):
        return False
    system = _system_config(env)
    if system is None:
        return False
    for path in [*system, *_config_files(git_dir, env)[1:]]:
        try:
            with open(path, "rb") as handle:
                text = handle.read(_SCAN_LIMIT + 1)
        except FileNotFoundError:
            continue
        except OSError:
            return False
        if len(text) > _SCAN_LIMIT:
            return False
        squeezed = text.lower().translate(None, b" \t")  # git allows "[ filter …]"
        if any(header in squeezed for header in _HEADERS):
            return False
    return True


class _DriverListing:
    """The drivers a repository's configuration names, and the files that answer came from.

    Kept for the process: asked again only when one of those files changed
    (or an `includeIf` makes the answer depend on more than files).
    """

    seen: dict[str, tuple[tuple, list[str]]] = {}  # noqa: RUF012 (the process's cache)

    @classmethod
    def cached(cls, git_dir: str, env: dict[str, str]) -> list[str] | None:
        found = cls.seen.get(git_dir)
        if found is None or found[0] != _stamp(p for p, *_ in found[0]):
            return None
        return found[1]

    @classmethod
    def parse(cls, git_dir: str, env: dict[str, str], out: bytes) -> list[str]:
        """The drivers in a `config -z --show-origin --get-regexp` answer; kept when it can be."""
        drivers, files, keep = [], _config_files(git_dir, env), True
        fields = out.split(b"\0")
        for i in range(0, len(fields) - 1, 2):
            origin = os.fsdecode(fields[i])
            key, _, value = os.fsdecode(fields[i + 1]).partition("\n")
            if origin.startswith("file:"):
                files.append(origin[len("file:") :])
            if key.startswith("includeif."):
                keep = False  # its condition may change with no file changing
            elif key == "include.path":
                base = os.path.dirname(origin[len("file:") :]) if origin.startswith("file:") else ""
                files.append(os.path.join(base, os.path.expanduser(value)))
            elif _is_driver(key):
                drivers.append(key)
        if keep:
            cls.seen[git_dir] = (_stamp(files), drivers)
        return drivers


class BoundGit:
    """git for one work tree and git dir fixed in advance, with every configured program off.

    The configuration's filter and merge drivers are listed once (at the first
    command that could run one, or ahead with `prefetch`) and emptied.
    """

    def __init__(self, work_tree: str, git_dir: str, env: dict[str, str] | None = None) -> None:
        self.work_tree = work_tree
        self.git_dir = git_dir
        self._env = env or {}
        self._drivers: list[str] | None = None
        self._listing: Pending | None = None

    def prefetch(self) -> None:
        """Start listing the configuration's drivers now, beside other work.

        Nothing is started when this process listed them already and no
        configuration file changed since.
        """
        if self._drivers is None and self._listing is None:
            env = self._listing_env()
            known = _DriverListing.cached(self.git_dir, env)
            if known is None and _names_no_driver(self.git_dir, env):
                known = []
            if known is not None:
                self._drivers = _overrides(known)
                return
            self._listing = start_argv(
                ["git", f"--git-dir={self.git_dir}", "config", "-z", "--show-origin",
                 "--get-regexp", _DRIVER_KEYS],
                cwd=self.work_tree,
                env=git_env(self._env),
            )  # fmt: skip

    def _listing_env(self) -> dict[str, str]:
        return {**os.environ, **self._env}

    def argv(self, *args: str, plain: bool = False) -> list[str]:
        """The command line; `plain` for a command that runs no filter (ls-files, config…)."""
        argv = ["git", f"--git-dir={self.git_dir}", f"--work-tree={self.work_tree}"]
        for setting in (*SAFE_CONFIG, *([] if plain else self._driver_overrides())):
            argv += ["-c", setting]
        return [*argv, *args]

    def _driver_overrides(self) -> list[str]:
        """`-c` values that empty every filter and merge driver the configuration names."""
        if self._drivers is None:
            self.prefetch()
        if self._drivers is None:
            listed = self._listing.result()
            keys = []
            if listed.code in (0, 1):  # 1: no key matched, no driver
                keys = _DriverListing.parse(self.git_dir, self._listing_env(), listed.out)
            self._drivers = _overrides(keys)
        return self._drivers

    def start(
        self,
        *args: str,
        env: dict[str, str] | None = None,
        input: bytes | None = None,
        timeout: float = GIT_TIMEOUT_S,
        plain: bool = False,
    ) -> Pending:
        return start_argv(
            self.argv(*args, plain=plain),
            cwd=self.work_tree,
            env=git_env({**self._env, **(env or {})}),
            input=input,
            timeout=timeout,
        )

    def run(self, *args: str, **kw) -> GitOutcome:
        return self.start(*args, **kw).result()

    def out(self, *args: str, **kw) -> bytes | None:
        done = self.run(*args, **kw)
        return done.out if done.ok else None


def _overrides(keys: list[str]) -> list[str]:
    """`-c` values that empty each driver (and make a filter's absence no error)."""
    found = []
    for key in keys:
        found.append(f"{key}=")
        if key.startswith("filter."):
            found.append(key.rsplit(".", 1)[0] + ".required=false")
    return found


def lend_config(env: dict[str, str], cwd: str, pairs: tuple[tuple[str, str], ...]) -> None:
    """Give git each (key, value) of `pairs` through `env` where the repository has none.

    GIT_CONFIG_COUNT/KEY_n/VALUE_n set a value for every git the process with
    `env` starts, and change no file: a CLI that would otherwise write a
    missing setting (a placeholder identity) into .git/config finds it set.
    """
    keys = "|".join(key.replace(".", r"\.") for key, _ in pairs)
    out = run_git(cwd, "config", "--get-regexp", f"^({keys})$")
    have = {line.split(" ", 1)[0] for line in os.fsdecode(out or b"").splitlines()}
    missing = [(key, value) for key, value in pairs if key not in have]
    try:
        count = int(env.get("GIT_CONFIG_COUNT", "0"))
    except ValueError:
        return
    for key, value in missing:
        env[f"GIT_CONFIG_KEY_{count}"] = key
        env[f"GIT_CONFIG_VALUE_{count}"] = value
        count += 1
    if missing:
        env["GIT_CONFIG_COUNT"] = str(count)
