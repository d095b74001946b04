"""`runs cancel`: a running run ends as Ctrl-C would end it, with nothing of it left alive."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess

import pytest
from conftest import PYTHON, ROOT, run
from fakes import alive, relay_argv, wait_for
from relaykit import Bench, read_pid

from delegate_skills.commands.runs_cli import cancel_text

#: Every test here runs with the Linux mechanisms and without them (conftest).
pytestmark = pytest.mark.usefixtures("mechanisms")

RUNS_PY = str(ROOT / "skills" / "codex-delegate" / "scripts" / "runs.py")


def _start(tmp_path) -> tuple[Bench, subprocess.Popen, int, int]:
    """A codex run that leaves a grandchild and waits forever: (bench, relay, child, grandchild)."""
    bench = Bench(tmp_path, "codex")
    bench.script(
        {
            "actions": [
                {"grandchild": {"pid_file": str(tmp_path / "grand.pid")}},
                {"pid_file": str(tmp_path / "child.pid")},
                {"wait": "forever"},
            ],
        }
    )
    relay = subprocess.Popen(
        relay_argv("codex", *bench.args()),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=bench.fake.env(),
    )
    return bench, relay, read_pid(tmp_path / "child.pid"), read_pid(tmp_path / "grand.pid")


def _cleanup(relay: subprocess.Popen, *pids: int) -> None:
    relay.kill()
    relay.wait()
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _cancel(argv: list[str], env: dict) -> tuple[int, dict, str]:
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
    return done.returncode, json.loads(done.stdout) if done.stdout.strip() else {}, done.stderr


def test_cancel_aborts_the_run_and_leaves_nothing_alive(tmp_path):
    bench, relay, child, grand = _start(tmp_path)
    try:
        run_id = json.loads((bench.out / "run.json").read_text())["id"]
        code, report, err = _cancel(
            [PYTHON, "-m", "delegate_skills", "runs", "cancel", run_id, "--json"],
            bench.fake.env(),
        )
        assert code == 0, err
        assert (report["id"], report["cancelled"], report["status"], report["leftRunning"]) == (
            run_id, True, "aborted", []
        )  # fmt: skip
        assert relay.wait(timeout=30) == 130
        result = bench.result
        assert (result["status"], result["signal"], result["exitCode"]) == (
            "aborted", "SIGINT", 130
        )  # fmt: skip
        wait_for(lambda: not alive(child) and not alive(grand), timeout=10)
    finally:
        _cleanup(relay, child, grand)


def test_runs_py_cancel_then_cancel_again(tmp_path):
    bench, relay, child, grand = _start(tmp_path)
    try:
        code, report, err = _cancel([PYTHON, RUNS_PY, "cancel", str(bench.out)], bench.fake.env())
        assert code == 0, err
        assert (report["cancelled"], report["status"]) == (True, "aborted")
        assert not alive(grand)
        again = run([PYTHON, RUNS_PY, "cancel", "--last"], env=bench.fake.env())
        assert again.code == 0, again
        assert (json.loads(again.out)["cancelled"], json.loads(again.out)["status"]) == (
            False, "aborted"
        )  # fmt: skip
        run_id = json.loads((bench.out / "run.json").read_text())["id"]
        assert cancel_text(json.loads(again.out)) == f"run {run_id} had already ended: aborted"
    finally:
        _cleanup(relay, child, grand)
