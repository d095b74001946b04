"""A confined run starts bubblewrap twice, not three times: its version probe, wrapped, shows
that bwrap starts here; only when that probe fails is bwrap probed on its own, to tell a CLI
that failed inside the sandbox from a sandbox that cannot start (the run then goes on
unconfined, saying why, and a read-only run's tripwire takes the baseline detection needs).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from conftest import commit_all
from relaykit import Bench

REAL_BWRAP = shutil.which("bwrap")
NO_NAMESPACES = (
    "No permissions to create new namespace, likely because the kernel does not allow "
    "non-privileged user namespaces."
)


def bwrap_stand_in(folder: Path, log: Path, *, works: bool) -> None:
    """`bwrap` first on PATH: it logs the command it wraps (what follows `--`), then runs the
    real bwrap, or fails as bwrap does where user namespaces are not allowed."""
    folder.mkdir()
    tail = f'exec {REAL_BWRAP} "$@"\n' if works else f'echo "bwrap: {NO_NAMESPACES}" >&2\nexit 1\n'
    script = folder / "bwrap"
    script.write_text(
        "#!/bin/sh\n"
        'wrapped=""; seen=""\n'
        'for arg in "$@"; do\n'
        '  if [ -n "$seen" ]; then wrapped="$wrapped ${arg##*/}"; fi\n'
        '  [ "$arg" = "--" ] && seen=1\n'
        "done\n"
        f'echo "$wrapped" >> "{log}"\n' + tail
    )
    script.chmod(0o755)


@pytest.fixture
def bench(tmp_path, home) -> Bench:
    made = Bench(tmp_path, "codex")
    (made.work / "a.txt").write_text("first\n")
    commit_all(made.work, "start")
    return made


def _env(bench: Bench, folder: Path) -> dict[str, str]:
    env = bench.fake.env()
    env["PATH"] = f"{folder}{os.pathsep}{env['PATH']}"
    env.pop("DELEGATE_RELAY_ENFORCE", None)
    return env


def _wrapped(log: Path) -> list[str]:
    return [line.strip() for line in log.read_text().splitlines()] if log.exists() else []


@pytest.mark.skipif(REAL_BWRAP is None, reason="bwrap is not installed here")
@pytest.mark.parametrize("flag", ["--read-only", "--confine"])
def test_a_confined_run_starts_bwrap_for_its_version_probe_and_its_run_only(bench, tmp_path, flag):
    log = tmp_path / "bwrap.log"
    bwrap_stand_in(tmp_path / "bin", log, works=True)
    bench.script({})
    run = bench.relay(flag, env=_env(bench, tmp_path / "bin"))
    assert run.code == 0, run
    assert run.result["confined"] == "bwrap"
    # The version probe (codex --version) and the run (codex exec …): no `true` on its own.
    wrapped = _wrapped(log)
    assert [w.split()[:2] for w in wrapped] == [["codex", "--version"], ["codex", "exec"]]


@pytest.mark.skipif(REAL_BWRAP is None, reason="bwrap is not installed here")
def test_a_version_probe_that_fails_inside_the_sandbox_is_the_clis_failure(bench, tmp_path):
    log = tmp_path / "bwrap.log"
    bwrap_stand_in(tmp_path / "bin", log, works=True)
    bench.fake.script({"version": {"exit": 3, "stderr": "codex: broken install\n"}})
    run = bench.relay("--read-only", env=_env(bench, tmp_path / "bin"))
    assert run.code == 3, run
    assert run.result["error"] == (
        "codex --version preflight failed with exit 3; Codex was not dispatched"
    )
    # bwrap was then probed on its own (`true`), and it started: nothing ran unconfined.
    assert _wrapped(log) == ["codex --version", "true"]
    assert [c["kind"] for c in bench.fake.calls()] == ["version"]


def test_where_bwrap_cannot_start_the_read_only_run_goes_on_detected(bench, tmp_path):
    log = tmp_path / "bwrap.log"
    bwrap_stand_in(tmp_path / "bin", log, works=False)
    # A tag: no file changes, only the repository's refs (what the fuller baseline covers).
    bench.script({"actions": [{"git": ["tag", "sneaky"]}]}, env_keys=["TMPDIR"])
    env = _env(bench, tmp_path / "bin")
    run = bench.relay("--read-only", env=env)
    assert _wrapped(log) == ["codex --version", "true"]  # then no bwrap again
    assert [c["kind"] for c in bench.fake.calls()] == ["version", "run"]
    result = run.result
    assert (result["readOnlyEnforced"], result["readOnlyUnenforced"]) == (
        None, f"bwrap cannot start here: {NO_NAMESPACES}"
    )  # fmt: skip
    assert (result["confined"], result["confinedUnavailable"]) == (
        None, f"bwrap cannot start here: {NO_NAMESPACES}"
    )  # fmt: skip
    # Detection saw the new ref: the verdict is not left to a sandbox that never was.
    assert result["readOnlyViolation"] is True
    # An unconfined run keeps its own temp dir (a confined one's is the private /tmp).
    assert bench.fake.run_call()["env"]["TMPDIR"] == env["TMPDIR"] != "/tmp"
