"""The write queue under load and under SIGKILL: nothing lost, nothing half-written."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import PYTHON, delegate

from delegate_skills import validation

HAMMER = Path(__file__).parent / "helpers" / "hammer.py"


def wait_for(condition, timeout: float = 30.0, interval: float = 0.005) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(interval)


def approval_matches(repo: Path) -> bool:
    config = (repo / ".delegate" / "config.json").read_bytes()
    recorded = (repo / ".git" / "delegate-skills" / "project-config.sha256").read_text()
    return recorded == hashlib.sha256(config).hexdigest() + "\n"


def test_32_concurrent_lane_sets_all_land(repo):
    procs = [
        subprocess.Popen(
            [
                PYTHON,
                "-m",
                "delegate_skills",
                "lane",
                "set",
                f"lane{i}",
                "--implementer",
                "kimi",
                "--timeout",
                f"{i + 1}m",
                "--scope",
                "project",
                "--cwd",
                str(repo),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for i in range(32)
    ]
    outcomes = [(p.wait(timeout=180), p.stderr.read()) for p in procs]
    for p in procs:
        p.stdout.close()
        p.stderr.close()
    assert [code for code, _ in outcomes] == [0] * 32, outcomes
    config = repo / ".delegate" / "config.json"
    document = validation.parse_document(config.read_text(), str(config))
    assert sorted(document["lanes"]) == sorted(f"lane{i}" for i in range(32))
    assert document["lanes"]["lane7"] == {"implementer": "kimi", "timeout": "8m"}
    assert approval_matches(repo)
    resolved = delegate(
        "lane", "resolve", "--lane", "lane31", "--implementer", "kimi", "--cwd", str(repo)
    )
    assert resolved.code == 0, resolved


KILLER = Path(__file__).parent / "helpers" / "kill_writers.py"


def test_200_sigkilled_lane_sets_leave_the_project_trusted_every_time(repo):
    """A writer killed anywhere between config and approval never leaves the project untrusted."""
    first = delegate("lane", "set", "base", "--implementer", "kimi", "--scope", "project",
                     "--cwd", str(repo))  # fmt: skip
    assert first.code == 0, first
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [PYTHON, str(KILLER), str(repo), "200", "20261201"],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr
    rounds = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(rounds) == 200
    assert [r["round"] for r in rounds if not r["trusted"]] == []
    # The kills did land mid-write: some left the pending record behind.
    assert any(r["pending"] for r in rounds)
    # The next writer finishes what a killed one left, and Node's check agrees again.
    config = repo / ".delegate" / "config.json"
    follow = delegate("lane", "set", "after", "--implementer", "vibe", "--scope", "project",
                      "--cwd", str(repo))  # fmt: skip
    assert follow.code == 0, follow
    assert approval_matches(repo)
    assert not (repo / ".git" / "delegate-skills" / "project-config.pending").exists()
    validation.parse_document(config.read_text(), str(config))
    leftovers = [p.name for p in config.parent.iterdir() if p.name != "config.json"]
    assert leftovers == []


def test_a_failed_approval_write_is_one_line_and_leaves_the_config(repo, tmp_path):
    lanes = tmp_path / "lanes.json"
    lanes.write_text(
        json.dumps({"version": "delegate-fleet.v1", "lanes": {"a": {"implementer": "kimi"}}})
    )
    assert (
        delegate("config", "write", "--scope", "project", "--cwd", str(repo), str(lanes)).code == 0
    )
    config = repo / ".delegate" / "config.json"
    before = config.read_bytes()
    approvals = repo / ".git" / "delegate-skills"
    # The approval cannot be replaced: a directory stands where its file goes.
    (approvals / "project-config.sha256").unlink()
    (approvals / "project-config.sha256").mkdir()
    lanes.write_text(
        json.dumps({"version": "delegate-fleet.v1", "lanes": {"b": {"implementer": "kimi"}}})
    )
    done = delegate("config", "write", "--scope", "project", "--cwd", str(repo), str(lanes))
    assert done.code == 2
    assert done.err.count("\n") == 1 and "Traceback" not in done.err
    assert "project-config.sha256" in done.err
    assert config.read_bytes() == before


#: Run by a bare Python (-I -S: no filelock) from a skill folder's bundled core:
#: take the write queue's lock on argv[1] with timeout argv[2], say whether it
#: was had, hold it until stdin closes.
BARE_LOCKER = """
import sys
sys.path.insert(0, sys.argv[3])
from delegate_skills import store
lock, timed_out = store._make_lock(sys.argv[1], float(sys.argv[2]), False)
print(type(lock).__name__, flush=True)
try:
    lock.acquire()
except timed_out:
    print("busy", flush=True)
    raise SystemExit(0)
print("held", flush=True)
sys.stdin.read()
lock.release()
"""


def _bare_locker(lock: Path, timeout: float) -> subprocess.Popen:
    from conftest import SETUP_SCRIPTS

    return subprocess.Popen(
        [
            sys.executable,
            "-I",
            "-S",
            "-c",
            BARE_LOCKER,
            str(lock),
            str(timeout),
            str(SETUP_SCRIPTS),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def test_a_bare_python_lock_holds_off_filelock(tmp_path):
    """Without filelock, a skill folder's writer takes the same lock filelock takes."""
    from filelock import FileLock, Timeout

    path = tmp_path / "config.json.lock"
    proc = _bare_locker(path, 5)
    try:
        assert proc.stdout.readline().strip() == "_FlockLock"
        assert proc.stdout.readline().strip() == "held"
        with pytest.raises(Timeout):
            FileLock(str(path), timeout=0).acquire()
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)
    assert proc.returncode == 0
    with FileLock(str(path), timeout=0):
        pass


def test_filelock_holds_off_a_bare_python_writer(tmp_path):
    from filelock import FileLock

    path = tmp_path / "config.json.lock"
    with FileLock(str(path), timeout=0):
        proc = _bare_locker(path, 0)
        try:
            out, _err = proc.communicate(timeout=60)
        finally:
            proc.kill()
        assert out.split() == ["_FlockLock", "busy"]
    proc = _bare_locker(path, 0)
    try:
        assert proc.stdout.readline().strip() == "_FlockLock"
        assert proc.stdout.readline().strip() == "held"
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)
