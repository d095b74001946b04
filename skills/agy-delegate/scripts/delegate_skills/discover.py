"""Which implementer CLIs are installed, and what they say about themselves.

For each of the seventeen: where it is (PATH, executable files only; a pinned
COMMANDCODE_BIN; the desktop bundle of a CLI that ships inside an app), its
version, whether it is logged in (where the CLI can tell), which models it
offers, and with `usage` how many sessions it has stored and when it was last
used (directory listings and mtimes only: session files hold conversations
and are never opened). Every probe is bounded at 10 s; probes of different
CLIs, and the independent probes of one CLI, run at the same time.

The report is `delegate-discover.v1`, key for key as the Node bundle prints it.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import re
import signal
import stat
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

from . import registry
from .registry import Implementer

PROBE_TIMEOUT_S = 10.0
MAX_MODELS = 200
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_COLON_VERSION = re.compile(r"([^:\s]+):")


class Launch:
    """How to start one CLI: its path, and the argv prefix that runs it."""

    __slots__ = ("path", "prefix")

    def __init__(self, path: str, prefix: list[str]) -> None:
        self.path = path
        self.prefix = prefix


class Probe:
    """What one bounded run of a CLI printed."""

    __slots__ = ("ok", "stderr", "stdout")

    def __init__(self, ok: bool, stdout: str, stderr: str) -> None:
        self.ok = ok
        self.stdout = stdout
        self.stderr = stderr

    @property
    def output(self) -> str:
        return strip_ansi(self.stdout + self.stderr)


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text)


# ---------------------------------------------------------------- finding a CLI


def which(binary: str, env: dict[str, str]) -> str | None:
    """The first executable regular file named `binary` on PATH."""
    for entry in env.get("PATH", "").split(os.pathsep):
        entry = entry[1:-1] if len(entry) > 1 and entry[0] == entry[-1] == '"' else entry
        if not entry:
            continue
        candidate = os.path.join(os.path.abspath(entry), binary)
        try:
            info = os.stat(candidate)
        except OSError:
            continue
        if stat.S_ISREG(info.st_mode) and os.access(candidate, os.X_OK):
            return candidate
    return None


def _expand(raw: str, env: dict[str, str], home: str) -> str:
    expanded = home + raw[1:] if raw.startswith("~/") else raw
    return re.sub(r"%([A-Za-z_][A-Za-z0-9_]*)%", lambda m: env.get(m.group(1), ""), expanded)


def _commandcode_pin(configured: str, env: dict[str, str], platform: str) -> Launch | None:
    """COMMANDCODE_BIN: a path (or a PATH name) that must name a regular file.

    On Windows it must be absolute, neither a .cmd/.bat shim nor cmd.exe itself,
    so `cmd` is never mistaken for Command Code.
    """
    if platform == "win32" and not os.path.isabs(configured):
        return None
    if "/" in configured or "\\" in configured:
        command = os.path.abspath(configured)
    else:
        command = which(configured, env)
    if not command:
        return None
    if platform == "win32":
        if command.lower().endswith((".cmd", ".bat")):
            return None
        comspec = env.get("ComSpec") or env.get("COMSPEC")
        if comspec and os.path.realpath(command).lower() == os.path.realpath(comspec).lower():
            return None
    return Launch(command, [command]) if os.path.isfile(command) else None


def locate(impl: Implementer, env: dict[str, str], platform: str, home: str) -> Launch | None:
    """Where `impl` is installed, or None when it is missing."""
    if impl.key == "commandcode" and env.get("COMMANDCODE_BIN"):
        return _commandcode_pin(env["COMMANDCODE_BIN"], env, platform)
    if impl.key == "commandcode" and platform == "win32":
        return None
    found = which(impl.binary, env)
    if found:
        return Launch(found, [found])
    if impl.locate is None:
        return None
    for raw in impl.locate.candidates.get(platform, ()):
        bundle = _expand(raw, env, home)
        if os.path.isfile(bundle):
            launcher = which(impl.locate.launcher, env) or impl.locate.launcher
            return Launch(bundle, [launcher, bundle])
    return None


# ---------------------------------------------------------------- running probes


def run_probe(launch: Launch, args: tuple[str, ...], env: dict[str, str]) -> Probe:
    """Run the CLI once, bounded at PROBE_TIMEOUT_S; the whole process tree dies with it."""
    try:
        proc = subprocess.Popen(
            [*launch.prefix, *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            start_new_session=True,
        )
    except OSError:
        return Probe(False, "", "")
    try:
        out, err = proc.communicate(timeout=PROBE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.communicate(timeout=1)
        for stream in (proc.stdout, proc.stderr):
            with contextlib.suppress(OSError):
                stream.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=1)
        return Probe(False, "", "")
    decode = lambda data: data.decode("utf-8", errors="replace")  # noqa: E731
    return Probe(proc.returncode == 0, decode(out), decode(err))


def version_of(impl: Implementer, launch: Launch, env: dict[str, str]) -> str | None:
    for args in filter(None, (impl.version_args, impl.version_fallback_args)):
        probe = run_probe(launch, args, env)
        if not probe.ok:
            continue
        lines = probe.stdout.strip().splitlines()
        first = lines[0].strip() if lines else ""
        if not first:
            continue
        if impl.version_format == "colon-prefix":
            match = _COLON_VERSION.match(first)
            return match.group(1) if match else first
        return first
    return None


def _json_field(text: str, field: str) -> bool | None:
    try:
        value = json.loads(text).get(field)
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, bool) else None


def auth_of(impl: Implementer, probe: Probe | None) -> bool | None:
    """Logged in: True / False, or None when the CLI cannot tell us."""
    spec = impl.auth_probe
    if spec is None or probe is None:
        return None
    if spec.json_field:
        if probe.ok:
            return _json_field(probe.stdout, spec.json_field)
        combined = probe.stdout + probe.stderr
        return _json_field(combined, spec.json_field) if combined.strip() else None
    output = probe.output
    if spec.fail is not None and spec.fail.search(output):
        return False
    if spec.success is not None:
        if spec.success.search(output):
            return True
        return False if probe.ok and spec.miss_means_false else None
    return True if probe.ok else None


def _models(identifiers, status: str = "reported") -> dict:
    unique = list(dict.fromkeys(i for i in identifiers if i))
    return {"status": status, "values": unique[:MAX_MODELS], "truncated": len(unique) > MAX_MODELS}


def _failed_models() -> dict:
    return {"status": "failed", "values": [], "truncated": False}


def parse_model_list(raw: str, format: str | None) -> dict:
    lines = [line.strip() for line in re.split(r"\r?\n", raw) if line.strip()]
    if format == "cursor":
        names = [
            re.split(r"\s+-\s+", line, maxsplit=1)[0]
            for line in lines
            if line != "Available models" and not line.startswith("Tip:")
        ]
    elif format == "grok":
        names = [
            re.sub(r"\s*\(default\)$", "", line[2:]).strip()
            for line in lines
            if line.startswith("* ")
        ]
    elif format == "commandcode":
        names = [first for first in (line.split()[0] for line in lines) if "/" in first]
    elif format == "table":
        names = [
            f"{cols[0]}/{cols[1]}"
            for cols in (line.split() for line in lines[1:])
            if len(cols) >= 2
        ]
    else:
        names = lines
    return _models(names)


def _state_dir(env_dir: str | None, home_subdir: str, env: dict[str, str], home: str) -> str:
    return (env_dir and env.get(env_dir)) or os.path.join(home, home_subdir)


def models_of(impl: Implementer, probe: Probe | None, env: dict[str, str], home: str) -> dict:
    spec = impl.model_probe
    if spec is None:
        return {"status": "unsupported", "values": [], "truncated": False}
    if spec.static:
        return _models(spec.static, "aliases")
    if spec.file:
        path = os.path.join(_state_dir(spec.env_dir, spec.home_subdir, env, home), spec.file)
        try:
            with open(path, encoding="utf-8") as handle:
                cache = json.loads(handle.read())
        except (OSError, ValueError):
            return _failed_models()
        entries = cache.get("models") if isinstance(cache, dict) else None
        if not isinstance(entries, list):
            return _failed_models()
        return _models(
            e.get("slug") if isinstance(e, dict) and isinstance(e.get("slug"), str) else ""
            for e in entries
        )
    if probe is None or not probe.ok:
        return _failed_models()
    return parse_model_list(probe.stdout, spec.format)


# ---------------------------------------------------------------- usage


def _iso_ms(ms: int) -> str:
    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def _entries(directory: str) -> list[os.DirEntry]:
    try:
        with os.scandir(directory) as it:
            return list(it)
    except OSError:
        return []


def _mtime_ms(path: str) -> int:
    return os.stat(path).st_mtime_ns // 1_000_000


def usage_of(impl: Implementer, env: dict[str, str], home: str) -> dict | None:
    """Session count and last use from listings and mtimes; None when unknown."""
    spec = impl.usage_probe
    if spec is None:
        return None
    base = _state_dir(spec.env_dir, spec.home_subdir, env, home)
    if not os.path.isdir(base):
        return None
    containers = [base]
    for segment in spec.path:
        containers = [
            entry.path
            for directory in containers
            for entry in _entries(directory)
            if entry.is_dir(follow_symlinks=False) and segment in ("*", entry.name)
        ]
    sessions, last = 0, 0
    for directory in containers:
        for entry in _entries(directory):
            is_dir = entry.is_dir(follow_symlinks=False)
            if spec.entry != "any" and is_dir != (spec.entry == "dir"):
                continue
            if not spec.match.search(entry.name):
                continue
            sessions += 1
            try:
                last = max(last, _mtime_ms(entry.path))
                if is_dir:
                    # A directory's mtime stays put while a file inside grows.
                    for child in _entries(entry.path):
                        last = max(last, _mtime_ms(child.path))
            except OSError:
                pass
    return {"sessions": sessions, "lastUsed": _iso_ms(last) if last > 0 else None}


# ---------------------------------------------------------------- the report


class _Pending:
    """The probes of one CLI, started; `entry()` waits for them and builds its report."""

    def __init__(
        self,
        impl: Implementer,
        launch: Launch,
        env: dict[str, str],
        home: str,
        with_usage: bool,
        pool,
    ) -> None:
        self.impl, self.launch, self.env, self.home = impl, launch, env, home
        auth_args = impl.auth_probe.args if impl.auth_probe else None
        model_args = impl.model_probe.args if impl.model_probe and impl.model_probe.args else None
        self.version = pool.submit(version_of, impl, launch, env)
        self.auth = pool.submit(run_probe, launch, auth_args, env) if auth_args else None
        if model_args and model_args == auth_args and not impl.auth_probe.json_field:
            # One run answers both (grok's `models` says "not authenticated" when logged out).
            self.models = self.auth
        else:
            self.models = pool.submit(run_probe, launch, model_args, env) if model_args else None
        self.usage = pool.submit(usage_of, impl, env, home) if with_usage else None

    def entry(self) -> dict:
        impl = self.impl
        entry = {
            "key": impl.key,
            "skill": impl.skill,
            "binary": impl.binary,
            "version": self.version.result(),
            "path": self.launch.path,
            "authenticated": auth_of(impl, self.auth.result() if self.auth else None),
            "supports": list(impl.supports),
            "models": models_of(
                impl, self.models.result() if self.models else None, self.env, self.home
            ),
        }
        if self.usage is not None:
            entry["usage"] = self.usage.result()
        return entry


def discover(
    with_usage: bool = False,
    env: dict[str, str] | None = None,
    platform: str | None = None,
    only: set[str] | None = None,
) -> dict:
    """The delegate-discover.v1 report for this machine (`only`: just these keys)."""
    env = dict(os.environ if env is None else env)
    platform = platform or sys.platform
    home = env.get("HOME") or os.path.expanduser("~")
    wanted = [impl for impl in registry.IMPLEMENTERS if only is None or impl.key in only]
    launches = {impl.key: locate(impl, env, platform, home) for impl in wanted}
    found = [impl for impl in wanted if launches[impl.key] is not None]
    # Every probe of every CLI at once: at most four per CLI.
    with ThreadPoolExecutor(max_workers=max(1, 4 * len(found))) as pool:
        pending = [
            _Pending(impl, launches[impl.key], env, home, with_usage, pool) for impl in found
        ]
        discovered = [probes.entry() for probes in pending]
    missing = [
        {"key": impl.key, "binary": impl.binary, "skill": impl.skill}
        for impl in wanted
        if launches[impl.key] is None
    ]
    return {"version": registry.DISCOVER_VERSION, "discovered": discovered, "missing": missing}
