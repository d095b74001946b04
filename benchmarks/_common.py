"""Helpers shared by the benchmark scripts.

- `start()`: what every script prints first (the machine: interpreters, cores, load average;
  that NODE_EXTRA_CA_CERTS is unset for both sides) and, at exit, the load average again.
- `paired()`: sides timed in alternating rounds (A B A B …), median wall and CPU per side.
  CPU is user + system time of the child and of every descendant it waited for
  (`resource.getrusage(RUSAGE_CHILDREN)` before and after each run).
- `base_env()` / `installed_like_env()`: the environment both sides run in.
- `node_script()`: the Node bundle's script, from DELEGATE_BENCH_NODE_BUNDLE.
- `options()`: `--quick` (few repetitions, for trying a script on a busy machine; also
  DELEGATE_BENCH_QUICK=1) and `--runs N` (also DELEGATE_BENCH_RUNS).
- `measure_here()`: the same two figures for work done in this process.
- `audited()` / `install_git_wrapper()`: the child processes a run starts (an audit hook in
  a Python side; a `git` first on PATH for any side), read back with `read_child_log()`.

Only public tools are used: the Python standard library, git and node.
"""

from __future__ import annotations

import argparse
import atexit
import compileall
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import venv
from collections.abc import Callable
from dataclasses import dataclass, field

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: Variables that change what either side does and are dropped for both:
#: NODE_EXTRA_CA_CERTS makes every Node start read and parse extra certificates;
#: the others would switch confinement on or off behind the benchmark's back.
DROPPED = ("NODE_EXTRA_CA_CERTS", "DELEGATE_CONFINE", "DELEGATE_RELAY_ENFORCE")

_WAS = {name: os.environ.get(name) for name in DROPPED}


def _bare_python() -> str:
    """A fresh venv's own interpreter (by path), with nothing installed in it.

    The dispatch paths need only the standard library, and the skill scripts
    find the core in this checkout, so this interpreter runs them as they run
    after `pip install .`. The development venv would not do: its editable
    install puts an import hook in site-packages that every start of that
    interpreter pays for (about 25 ms here), which a normal install does not.
    """
    home = tempfile.mkdtemp(prefix="delegate-bench-venv-")
    atexit.register(shutil.rmtree, home, True)
    venv.EnvBuilder(with_pip=False).create(home)
    return os.path.join(home, "bin", "python")


PYTHON = os.environ.get("DELEGATE_BENCH_PYTHON") or _bare_python()

#: A checkout of the Node bundle to compare against (its skills/ folder is used
#: as is); unset, the Node comparison is left out.
NODE_BUNDLE = os.environ.get("DELEGATE_BENCH_NODE_BUNDLE")


# --- options ------------------------------------------------------------------------------------


def options(doc: str | None, full: int, quick: int) -> tuple[argparse.ArgumentParser, int]:
    """A parser with --quick and --runs, and the number of runs it will give.

    Call `parser.parse_args()` after adding a script's own options; the runs
    returned are read from the command line already (they do not depend on the rest).
    """
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--quick",
        action="store_true",
        default=os.environ.get("DELEGATE_BENCH_QUICK") == "1",
        help=f"few repetitions ({quick} instead of {full}); also DELEGATE_BENCH_QUICK=1",
    )
    common.add_argument(
        "--runs",
        type=int,
        default=int(os.environ.get("DELEGATE_BENCH_RUNS", "0")) or None,
        help="repetitions per side (also DELEGATE_BENCH_RUNS)",
    )
    known, _ = common.parse_known_args()
    parser = argparse.ArgumentParser(
        description=(doc or "").split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[common],
    )
    return parser, known.runs or (quick if known.quick else full)


# --- the machine --------------------------------------------------------------------------------


def _version_of(argv: list[str]) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=10, check=False)
    except OSError as problem:
        return f"? ({problem.strerror})"
    return (done.stdout or done.stderr).strip().splitlines()[0] if done.returncode == 0 else "?"


def load_line() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} / {five:.2f} / {fifteen:.2f} (1 / 5 / 15 min)"


def machine_line(python: str | None = None) -> str:
    """The interpreters timed, the cores this process may use and the load right now."""
    python = python or PYTHON
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        usable = "?"
    py_version = _version_of([python, "-c", "import sys; print(sys.version.split()[0])"])
    parts = [f"python {python} ({py_version})"]
    if os.path.realpath(sys.executable) != os.path.realpath(python):
        parts.append(f"runner {sys.executable} ({sys.version.split()[0]})")
    if NODE_BUNDLE:
        node = shutil.which("node")
        parts.append(f"node {node} ({_version_of([node, '--version']) if node else 'missing'})")
    parts.append(f"cores {os.cpu_count()} (usable {usable})")
    parts.append(load_line())
    return "machine: " + "; ".join(parts)


def start(python: str | None = None) -> None:
    """Print the machine (`python`: the interpreter timed, default PYTHON) and the environment
    rule, drop DROPPED from this process's environment (so every child starts without them),
    and print the load again when the script ends."""
    print(machine_line(python))
    for name in DROPPED:
        os.environ.pop(name, None)
    was = "set before" if _WAS["NODE_EXTRA_CA_CERTS"] else "was not set"
    print(f"env: NODE_EXTRA_CA_CERTS unset for both sides ({was}); also unset: DELEGATE_CONFINE, "
          "DELEGATE_RELAY_ENFORCE (each run sets what it measures)", flush=True)  # fmt: skip
    began = time.monotonic()
    atexit.register(
        lambda: print(f"end: {load_line()}; {time.monotonic() - began:.0f} s", flush=True)
    )


# --- environments -------------------------------------------------------------------------------


def base_env(base: dict | None = None) -> dict:
    """`base` (default: this process's environment) without the variables in DROPPED."""
    env = dict(os.environ if base is None else base)
    for name in DROPPED:
        env.pop(name, None)
    return env


def installed_like_env(base: dict | None = None) -> dict:
    """An environment in which the core runs as an installed package does.

    `pip install` compiles bytecode at install time; a checkout or an editable
    install only has it once something wrote it. This compiles it now and
    drops PYTHONDONTWRITEBYTECODE, so start-up is measured as users see it.
    Also drops what DROPPED names.
    """
    for folder in ("src", "relays", "skills"):
        compileall.compile_dir(os.path.join(ROOT, folder), quiet=1)
    env = base_env(base)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def private_homes(env: dict, scratch: str) -> dict:
    """`env` with HOME and the XDG dirs in `scratch`: no user setting reaches either side."""
    homes = {
        "HOME": "home",
        "XDG_CONFIG_HOME": "config",
        "XDG_STATE_HOME": "state",
        "XDG_CACHE_HOME": "cache",
    }
    for name, folder in homes.items():
        env[name] = os.path.join(scratch, folder)
        os.makedirs(env[name], exist_ok=True)
    # The roots index and the state dir then live under the private HOME too.
    env.pop("DELEGATE_STATE_ROOTS", None)
    env.pop("DELEGATE_STATE_DIR", None)
    return env


def node_script(*parts: str) -> list[str] | None:
    """[node, <bundle>/skills/…] when a Node bundle checkout is given, else None."""
    if not NODE_BUNDLE:
        return None
    node = shutil.which("node")
    path = os.path.join(NODE_BUNDLE, "skills", *parts)
    if node is None or not os.path.isfile(path):
        raise SystemExit(f"DELEGATE_BENCH_NODE_BUNDLE: need node on PATH and {path}")
    return [node, path]


# --- timing -------------------------------------------------------------------------------------


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _self_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def run_once(
    argv: list[str], env: dict | None = None, cwd: str | None = None, ok=(0,)
) -> tuple[float, float]:
    """(wall, CPU) seconds of running `argv` to completion; exits when its code is not in `ok`."""
    cpu = _children_cpu()
    began = time.perf_counter()
    done = subprocess.run(
        argv,
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        check=False,
    )
    wall = time.perf_counter() - began
    cpu = _children_cpu() - cpu
    if done.returncode not in ok:
        raise SystemExit(
            f"benchmark command failed ({done.returncode}): {argv}\n{done.stderr.decode()}"
        )
    return wall, cpu


def command(argv: list[str], env: dict | None = None, cwd: str | None = None):
    """A side for `paired`: runs `argv` once per call and returns (wall, CPU)."""
    return lambda: run_once(argv, env, cwd)


def measure_here(work: Callable[[], object]) -> tuple[float, float]:
    """(wall, CPU) of `work()` here: this process's CPU and that of the children it waited for."""
    cpu = _self_cpu() + _children_cpu()
    began = time.perf_counter()
    work()
    wall = time.perf_counter() - began
    return wall, _self_cpu() + _children_cpu() - cpu


@dataclass
class Timing:
    walls: list[float] = field(default_factory=list)
    cpus: list[float] = field(default_factory=list)

    @property
    def wall(self) -> float:
        return statistics.median(self.walls)

    @property
    def cpu(self) -> float:
        return statistics.median(self.cpus)


def paired(sides: dict[str, Callable[[], tuple[float, float]]], runs: int, warmup: int = 1):
    """{name: Timing} of every side, run in rounds A B C A B C … (`warmup` rounds untimed).

    Alternating keeps a change in the machine's load from favouring any side.
    """
    for _ in range(warmup):
        for side in sides.values():
            side()
    timings = {name: Timing() for name in sides}
    for _ in range(runs):
        for name, side in sides.items():
            wall, cpu = side()
            timings[name].walls.append(wall)
            timings[name].cpus.append(cpu)
    return timings


# --- printing -----------------------------------------------------------------------------------


def ms(seconds: float) -> str:
    return f"{seconds * 1000:7.1f} ms"


def verdict(ratio: float, goal: float | None) -> str:
    if goal is None:
        return ""
    return f"goal <= {goal:.2f}x {'met' if ratio <= goal else 'MISSED'}"


def header(ours: str = "ours", theirs: str = "node") -> str:
    """The column titles above `ratio_rows`."""
    return f"{'':<34} {ours:>10} {theirs:>10} {ours + '/' + theirs:>9}"


def ratio_rows(
    label: str, ours: Timing, theirs: Timing, goal: float | None, cpu_goal: float | None = None
) -> list[str]:
    """Two lines (wall, CPU) of a side-by-side comparison, each with its ratio and goal."""
    rows = []
    for what, a, b, target in (
        ("wall", ours.wall, theirs.wall, goal),
        ("CPU", ours.cpu, theirs.cpu, goal if cpu_goal is None else cpu_goal),
    ):
        ratio = a / b if b else float("inf")
        name = f"{label} {what}"
        rows.append(f"{name:<34} {ms(a)} {ms(b)} {ratio:8.2f}x  {verdict(ratio, target)}")
    return rows


def single_rows(label: str, timing: Timing) -> list[str]:
    return [f"{label:<34} wall {ms(timing.wall)}   CPU {ms(timing.cpu)}"]


# --- what a Python side starts ------------------------------------------------------------------

#: `python -c LAUNCHER <log> <mark> <script> <args…>` runs <script> as `python <script> <args…>`
#: would, with an audit hook that appends one record per child process it starts to <log>:
#: cwd, GIT_INDEX_FILE and argv, separated by \x1e, ended by \x1d and a newline (an argument
#: may hold a newline). With <mark> "1", the first child also
#: writes "delegate-bench: first child" to stderr (to split `-X importtime` output). It
#: imports nothing (os and io are loaded at every start), so importtime sees the script's own.
LAUNCHER = r"""
import os, sys
_log, _mark, _path = sys.argv[1], sys.argv[2] == "1", sys.argv[3]
sys.argv = sys.argv[3:]
_first = [True]
def _hook(event, args):
    if event == "subprocess.Popen":
        argv, cwd, env = args[1], args[2], args[3]
    elif event == "os.posix_spawn" or event == "os.exec":
        argv, cwd, env = args[1], None, args[2]
    elif event == "os.fork":
        argv, cwd, env = ["(fork)"], None, None
    else:
        return
    if isinstance(argv, (str, bytes)):
        argv = [argv]
    env = os.environ if env is None else env
    fields = [os.fsdecode(cwd) if cwd else os.getcwd(), env.get("GIT_INDEX_FILE") or ""]
    fields += [os.fsdecode(arg) for arg in argv]
    with open(_log, "a") as handle:
        handle.write("\x1e".join(fields) + "\x1d\n")
    if _mark and _first[0]:
        sys.stderr.write("delegate-bench: first child\n")
        sys.stderr.flush()
    _first[0] = False
sys.addaudithook(_hook)
with open(_path, "rb") as _handle:
    _code = compile(_handle.read(), _path, "exec")
exec(_code, {"__name__": "__main__", "__file__": _path, "__builtins__": __builtins__})
"""


def audited(python: str, script: str, args: list[str], log: str, mark: bool = False) -> list[str]:
    """argv running `python script args…` under LAUNCHER (children logged to `log`)."""
    return [python, "-c", LAUNCHER, log, "1" if mark else "0", script, *args]


def read_child_log(log: str) -> list[tuple[str, str, tuple[str, ...]]]:
    """[(cwd, GIT_INDEX_FILE, argv)] of a LAUNCHER or GIT_WRAPPER log ([] when there is none)."""
    try:
        with open(log, encoding="utf-8", errors="replace") as handle:
            lines = handle.read().split("\x1d\n")[:-1]
    except FileNotFoundError:
        return []
    entries = []
    for line in lines:
        cwd, index, *argv = line.split("\x1e")
        entries.append((cwd, index, tuple(argv)))
    return entries


#: A `git` to put first on PATH: appends cwd, GIT_INDEX_FILE and argv (as LAUNCHER does) to
#: $DELEGATE_BENCH_GIT_LOG in one write, then execs the real git.
GIT_WRAPPER = """#!/bin/sh
line=$(printf '%s\\036%s' "$PWD" "$GIT_INDEX_FILE"; printf '\\036%s' git "$@")
printf '%s\\035\\n' "$line" >> "$DELEGATE_BENCH_GIT_LOG"
exec {git} "$@"
"""


def install_git_wrapper(bindir: str) -> str:
    """Write GIT_WRAPPER as `bindir`/git (execing the git on PATH now); returns its path."""
    real = shutil.which("git")
    if real is None:
        raise SystemExit("git is not on PATH")
    path = os.path.join(bindir, "git")
    with open(path, "w") as handle:
        handle.write(GIT_WRAPPER.format(git=real))
    os.chmod(path, 0o755)
    return path


def repeated(entries) -> list[tuple[int, tuple]]:
    """[(times, entry)] of the entries that occur more than once, most repeated first."""
    counts: dict = {}
    for entry in entries:
        counts[entry] = counts.get(entry, 0) + 1
    return sorted(((n, e) for e, n in counts.items() if n > 1), key=lambda item: -item[0])


def git_words(argv: tuple[str, ...]) -> str:
    """A git command line from its subcommand on (git's own options before it left out)."""
    words = list(argv[1:])
    while words and words[0].startswith("-"):
        takes_value = words[0] in ("-c", "-C")
        words = words[2:] if takes_value else words[1:]
    return " ".join(words)


def shown_command(entry: tuple[str, str, tuple[str, ...]], scratch: str = "", full=True) -> str:
    """One logged child as a line, with `scratch` shown as $T (a git one from its subcommand on,
    unless `full`)."""
    cwd, index, argv = entry
    if not full and argv and os.path.basename(argv[0]) == "git":
        text = "git … " + git_words(argv)
    else:
        text = " ".join(argv)
    text = text.replace("\n", "\\n")
    where = f" (in {cwd}" + (f", GIT_INDEX_FILE={index})" if index else ")")
    line = text + where
    return line.replace(scratch, "$T") if scratch else line
