"""A child that prints 200 MB of events: bounded memory, every line kept."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from fakes import relay_argv
from relaykit import Bench

RSS = Path(__file__).parent / "helpers" / "rss.py"
LINE = json.dumps({"type": "item", "text": "é" + "x" * 1000}, ensure_ascii=False) + "\n"
FIRST = '{"type":"thread.started","thread_id":"t-é"}\n'
LAST = '{"type":"thread.started","thread_id":"t-last"}\n'
TOTAL_BYTES = 200 * 1024 * 1024


def test_200mb_of_events_in_bounded_memory(tmp_path):
    bench = Bench(tmp_path, "codex")
    lines = TOTAL_BYTES // len(LINE.encode()) + 1
    bench.script(
        {
            "actions": [
                {"stdout_bytewise": FIRST, "delay": 0},
                {"spam": {"lines": lines, "line": LINE}},
                {"stdout": LAST},
            ]
        }
    )
    done = subprocess.run(
        [sys.executable, str(RSS), *relay_argv("codex", *bench.args())],
        env=bench.fake.env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    code, peak_kib = (int(x) for x in done.stdout.split())
    assert code == 0
    print(f"peak RSS {peak_kib} KiB")
    assert peak_kib < 80 * 1024, f"peak RSS {peak_kib} KiB"
    events = bench.out / "events.jsonl"
    assert events.stat().st_size == len(FIRST.encode()) + lines * len(LINE.encode()) + len(LAST)
    with events.open("rb") as handle:
        first = handle.readline().decode()
        count = 1 + sum(1 for _ in handle)
    assert first == FIRST
    assert count == lines + 2
    assert bench.result["threadId"] == "t-last"
