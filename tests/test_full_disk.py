"""A run directory on a disk that fills up: the relay keeps supervising and still writes a result."""

from __future__ import annotations

import json
import subprocess
import uuid

import pytest
from fakes import alive
from relaykit import Bench

LINE = json.dumps({"type": "item", "text": "x" * 4000}) + "\n"


@pytest.fixture
def small_disk(tmp_path):
    """A 4 MiB tmpfs (root only: skipped where mounting is not allowed)."""
    mount = tmp_path / f"disk-{uuid.uuid4().hex[:6]}"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


@pytest.mark.parametrize("key,stream", [("codex", "stdout"), ("claude", "stderr")])
def test_a_full_run_dir_finishes_failed_with_a_result(tmp_path, small_disk, key, stream):
    bench = Bench(tmp_path, key)
    bench.out = small_disk / "run"
    lines = 8 * 1024 * 1024 // len(LINE)  # 8 MiB: twice the disk
    spam = (
        {"spam": {"lines": lines, "line": LINE}}
        if stream == "stdout"
        else {"stderr": LINE * (lines // 8)}
    )
    actions = [spam] * (1 if stream == "stdout" else 8)
    last = '{"type":"thread.started","thread_id":"t-after-the-disk-filled"}\n'
    bench.script(
        {
            "actions": [
                {"pid_file": str(bench.pid_file("child.pid"))},
                *actions,
                {"stdout": last},
            ]
        }
    )
    run = bench.relay()
    assert run.code == 1, run
    assert "Traceback" not in run.err
    result = json.loads((bench.out / "result.json").read_text())
    name = "events.jsonl" if stream == "stdout" else "stderr.txt"
    assert result["status"] == "failed"
    display = {"codex": "Codex", "claude": "Claude Code"}[key]
    assert result["error"] == (
        f"cannot record {name} in {bench.out}: No space left on device; "
        f"{display} ran on unrecorded from there"
    )
    if key == "codex":
        # It kept supervising: the implementer ran to its end and its last event was read.
        assert result["threadId"] == "t-after-the-disk-filled"
    assert not alive(int(bench.pid_file("child.pid").read_text()))
    assert not (bench.out / ".result-space").exists()
    assert "relay: failed (exit 1)" in run.out


def test_the_reserve_is_gone_after_a_normal_run(tmp_path):
    bench = Bench(tmp_path, "codex")
    bench.script({})
    run = bench.relay()
    assert run.code == 0, run
    assert sorted(p.name for p in bench.out.iterdir() if p.name.startswith(".")) == []
