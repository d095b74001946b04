"""relay/records.py: what the engine reads of a CLI's own session records, within bounds.

A record the implementer could have planted as a link (to a secret elsewhere) or a FIFO (to
hang the relay) is never read; a decompressor's output is cut at its byte limit and its time
limit, and the program is ended.
"""

from __future__ import annotations

import os
import sys
import time

from delegate_skills.relay import records


def test_only_a_regular_file_written_since_the_cutoff_counts(tmp_path):
    fresh, old = tmp_path / "fresh.zst", tmp_path / "old.zst"
    fresh.write_bytes(b"x")
    old.write_bytes(b"x")
    os.utime(old, (1_000_000, 1_000_000))
    link, fifo = tmp_path / "link.zst", tmp_path / "fifo.zst"
    link.symlink_to(fresh)
    os.mkfifo(fifo)
    cutoff = time.time() - 60
    found = {p.name: records.written_since(str(p), cutoff) for p in (fresh, old, link, fifo)}
    assert found == {"fresh.zst": True, "old.zst": False, "link.zst": False, "fifo.zst": False}
    assert records.written_since(str(tmp_path / "missing"), cutoff) is False


def test_a_programs_output_is_cut_at_its_byte_limit(tmp_path):
    argv = [sys.executable, "-c", "import sys; sys.stdout.write('x' * 100000)"]
    assert records.command_output(argv, 10, 30) == b"x" * 10


def test_a_program_that_goes_on_is_cut_at_its_time_limit_and_ended(tmp_path):
    pid_file = tmp_path / "pid"
    code = (
        "import os, sys, time\n"
        f"open({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
        "sys.stdout.write('first\\n'); sys.stdout.flush(); time.sleep(60)\n"
    )
    began = time.monotonic()
    assert records.command_output([sys.executable, "-c", code], 1 << 20, 1.0) == b"first\n"
    assert time.monotonic() - began < 30
    pid = int(pid_file.read_text())
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return
    raise AssertionError(f"the program (pid {pid}) still runs")


def test_a_missing_program_gives_nothing():
    assert records.command_output(["/nonexistent/zstd", "-dc"], 10, 1) == b""


def test_json_objects_skips_what_is_not_one():
    data = b'{"a": 1}\n[1, 2]\nnot json\n{"b": 2\n{"c": 3}\n'
    assert list(records.json_objects(data)) == [{"a": 1}, {"c": 3}]


def test_recent_records_are_the_first_few_written_since_the_cutoff(tmp_path):
    cutoff = time.time() - 60
    for outer, inner in [("a", "1"), ("a", "2"), ("b", "1"), ("b", "2"), ("c", "1")]:
        folder = tmp_path / outer / inner
        folder.mkdir(parents=True)
        (folder / "r.zst").write_bytes(b"x")
    os.utime(tmp_path / "a" / "2" / "r.zst", (1_000_000, 1_000_000))  # written before
    (tmp_path / "old" / "1").mkdir(parents=True)
    (tmp_path / "old" / "1" / "r.zst").write_bytes(b"x")
    os.utime(tmp_path / "old", (1_000_000, 1_000_000))  # a folder unchanged since: skipped
    (tmp_path / "z").symlink_to(tmp_path / "c")  # a link is never followed
    found = records.recent_records(str(tmp_path), "r.zst", cutoff, 3)
    assert [os.path.relpath(path, tmp_path) for path in found] == [
        "a/1/r.zst", "b/1/r.zst", "b/2/r.zst",
    ]  # fmt: skip
    assert len(records.recent_records(str(tmp_path), "r.zst", cutoff, 10)) == 4


def test_a_records_first_object_is_its_first_line_only():
    assert records.first_object(b'{"type": "session"}\n{"type": "turn"}\n') == {"type": "session"}
    assert records.first_object(b'not json\n{"type": "turn"}\n') == {}
