"""Small helpers shared by the benchmark scripts (wall-clock medians, temp homes)."""

from __future__ import annotations

import compileall
import os
import statistics
import subprocess
import tempfile
import time
import venv

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _bare_python() -> str:
    """A fresh venv's own interpreter (by path), with nothing installed in it.

    The dispatch paths need only the standard library, and the skill scripts
    find the core in this checkout, so this interpreter runs them as they run
    after `pip install .`. The development venv would not do: its editable
    install puts an import hook in site-packages that every start of that
    interpreter pays for (about 25 ms here), which a normal install does not.
    """
    home = tempfile.mkdtemp(prefix="delegate-bench-venv-")
    venv.EnvBuilder(with_pip=False).create(home)
    return os.path.join(home, "bin", "python")


PYTHON = os.environ.get("DELEGATE_BENCH_PYTHON") or _bare_python()


def median_wall(argv: list[str], runs: int = 20, env: dict | None = None, warmup: int = 2) -> float:
    """Median wall time in seconds of running `argv` to completion `runs` times."""
    for _ in range(warmup):
        subprocess.run(
            argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False
        )
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        done = subprocess.run(
            argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False
        )
        samples.append(time.perf_counter() - start)
        if done.returncode != 0:
            raise SystemExit(
                f"benchmark command failed ({done.returncode}): {argv}\n{done.stderr.decode()}"
            )
    return statistics.median(samples)


def _timed(argv: list[str], env: dict | None) -> float:
    start = time.perf_counter()
    done = subprocess.run(
        argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False
    )
    took = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(
            f"benchmark command failed ({done.returncode}): {argv}\n{done.stderr.decode()}"
        )
    return took


def paired_medians(
    first: list[str], second: list[str], runs: int = 20, env: dict | None = None
) -> tuple[float, float]:
    """Median wall times of two commands timed in alternating pairs (first, second, first, …).

    Alternating keeps a change in the machine's load from favouring either side.
    """
    for _ in range(2):
        _timed(first, env)
        _timed(second, env)
    a, b = [], []
    for _ in range(runs):
        a.append(_timed(first, env))
        b.append(_timed(second, env))
    return statistics.median(a), statistics.median(b)


def installed_like_env(base: dict | None = None) -> dict:
    """An environment in which the core runs as an installed package does.

    `pip install` compiles bytecode at install time; a checkout or an editable
    install only has it once something wrote it. This compiles it now and
    drops PYTHONDONTWRITEBYTECODE, so start-up is measured as users see it.
    """
    for folder in ("src", "relays", "skills"):
        compileall.compile_dir(os.path.join(ROOT, folder), quiet=1)
    env = dict(os.environ if base is None else base)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


#: A checkout of the Node bundle to compare against (its skills/ folder is used
#: as is); unset, the Node comparison is left out.
NODE_BUNDLE = os.environ.get("DELEGATE_BENCH_NODE_BUNDLE")


def node_script(*parts: str) -> list[str] | None:
    """[node, <bundle>/skills/…] when a Node bundle checkout is given, else None."""
    if not NODE_BUNDLE:
        return None
    import shutil

    node = shutil.which("node")
    path = os.path.join(NODE_BUNDLE, "skills", *parts)
    if node is None or not os.path.isfile(path):
        raise SystemExit(f"DELEGATE_BENCH_NODE_BUNDLE: need node on PATH and {path}")
    return [node, path]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:7.1f} ms"
