"""Linux mechanisms the relay tests cannot see on their own (linux.py).

Where a writable cgroup v2 exists, the cgroup alone finds and kills every
process of a run; that hides whether the relay really is the subreaper of
what its implementer leaves behind, and whether it can tell when it has no
child left. And only `delegate-run-*` cgroups may ever be killed or removed.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import PYTHON

from delegate_skills.isolation import linux

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc and prctl")

#: Becomes the subreaper, lets a child leave a daemon (a session of its own) behind,
#: and prints: the daemon's parent is us, whether we are childless, and again once it is gone.
SUBREAPER = """
import os, subprocess, sys
from delegate_skills.isolation import linux

print(linux.become_subreaper())
code = ("import subprocess, sys; p = subprocess.Popen([sys.executable, '-S', '-c', "
        "'import time; time.sleep(600)'], start_new_session=True, stdin=subprocess.DEVNULL, "
        "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); print(p.pid)")
daemon = int(subprocess.run([sys.executable, "-S", "-c", code], capture_output=True,
                            text=True, check=True).stdout)
try:
    with open(f"/proc/{daemon}/stat") as handle:
        parent = int(handle.read().rsplit(")", 1)[1].split()[1])
    print(parent == os.getpid(), linux.childless())
finally:
    os.kill(daemon, 9)
    os.waitpid(daemon, 0)
print(linux.childless())
"""


@linux_only
def test_the_relay_inherits_a_daemon_its_child_left_behind():
    done = subprocess.run([PYTHON, "-c", SUBREAPER], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "True\nTrue False\nTrue\n"


def test_only_a_delegate_run_cgroup_counts_as_one(tmp_path):
    ours = tmp_path / "delegate-run-abcd2345"
    other = tmp_path / "user.slice"
    for folder in (ours, other):
        folder.mkdir()
        (folder / "cgroup.kill").write_text("")
    assert linux.is_run_cgroup(str(ours)) is True
    assert linux.is_run_cgroup(str(other)) is False
    assert linux.is_run_cgroup(f"{other}/../{ours.name}") is False
    assert linux.is_run_cgroup(str(tmp_path / "delegate-run-missing")) is False
