"""conftest's sweep: what a test leaves running is killed when it ends, and nothing else."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest
from conftest import sweeping
from fakes import alive, wait_for

#: Every test here runs with the Linux mechanisms and without them (conftest).
pytestmark = pytest.mark.usefixtures("mechanisms")

#: Ignores SIGTERM and would run for ten minutes.
DEAF = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"
#: Starts DEAF in a session of its own, prints its pid and leaves it to init.
ABANDON = (
    "import subprocess, sys\n"
    f"proc = subprocess.Popen([sys.executable, '-S', '-c', {DEAF!r}], start_new_session=True,\n"
    "                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
    "print(proc.pid)\n"
)


def test_a_child_and_an_abandoned_grandchild_are_killed():
    with sweeping():
        child = subprocess.Popen([sys.executable, "-S", "-c", DEAF])
        launcher = subprocess.run(
            [sys.executable, "-S", "-c", ABANDON],
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        )
        orphan = int(launcher.stdout)
        assert alive(child.pid) and alive(orphan)
    assert child.wait(timeout=10) == -signal.SIGKILL
    wait_for(lambda: not alive(orphan), timeout=10)


def test_what_was_running_before_is_left_alone():
    earlier = subprocess.Popen([sys.executable, "-S", "-c", DEAF])
    try:
        with sweeping():
            pass
        assert earlier.poll() is None
    finally:
        earlier.kill()
        earlier.wait()
