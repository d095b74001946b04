"""Bounds pinned one by one: which block of a reviewer's answer gives the verdict, what
`runs logs` shows of events an implementer wrote (and of an events file that is not one),
and how many runs `fanout` starts at most.
"""

from __future__ import annotations

import json
import os

import pytest
from conftest import PYTHON, commit_all, delegate, run
from relaykit import Bench

from delegate_skills.runs.review import parse_verdict

ESC, BEL = "\x1b", "\x07"

# ---------------------------------------------------------------- the verdict block

APPROVE = '{"verdict": "approve", "findings": []}'
CHANGES = '{"verdict": "request-changes", "findings": []}'


def verdict(text: str):
    return parse_verdict(text)["verdict"]


def test_the_last_block_that_parses_gives_the_verdict():
    assert verdict(f"```json\n{APPROVE}\n```\nthen:\n```json\n{CHANGES}\n```") == "request-changes"
    assert verdict(f"```json\n{CHANGES}\n```\nthen:\n```json\n{APPROVE}\n```") == "approve"
    assert verdict(f"```json\n{APPROVE}\n```\nthen:\n```json\nnot json\n```") == "approve"


def test_a_block_ends_at_the_first_closing_fence_and_the_next_starts_after_it():
    # The second opening fence closes the first block; what follows it is no block.
    assert verdict(f"```json\n{APPROVE}\n```json\n{CHANGES}\n```") == "approve"
    # After an empty line, the first block runs on past the next opening fence to the last
    # closing one: nothing in it parses.
    assert verdict(f"```json\n\n```json\n{APPROVE}\n```") is None


def test_whitespace_around_the_fences_and_a_newline_before_each():
    assert verdict(f"```json  \n  {APPROVE}  \n   ```") == "approve"
    assert verdict(f"```json\r\n{APPROVE}\r\n```") == "approve"
    assert verdict(f"```json {APPROVE}\n```") is None  # no newline after the opening fence
    assert verdict(f"```json\n{APPROVE} ```") is None  # no newline before the closing fence


def test_an_answer_nested_too_deep_or_with_odd_findings_gives_what_parses():
    assert verdict("```json\n" + "[" * 100_000 + "]" * 100_000 + "\n```") is None
    odd = parse_verdict('```json\n{"verdict": "approve", "findings": 5}\n```')
    assert (odd["verdict"], odd["findings"]) == ("approve", [])
    listed = parse_verdict(
        '```json\n{"verdict": "request-changes", "findings": ['
        '{"file": "a.py", "line": 3, "severity": "high", "text": "off by one"},'
        '{"file": 7, "line": true, "severity": "grave", "text": "vague"}, "no", {"file": "b"}'
        "]}\n```"
    )
    assert listed["findings"] == [
        {"file": "a.py", "line": 3, "severity": "high", "text": "off by one"},
        {"file": None, "line": None, "severity": None, "text": "vague"},
    ]


# ---------------------------------------------------------------- runs logs


def _finished_run(tmp_path, events: str) -> Bench:
    bench = Bench(tmp_path, "codex")
    bench.script({"actions": [{"stdout": events}]})
    assert bench.relay().code == 0
    return bench


def _logs(bench: Bench):
    return run([PYTHON, "-m", "delegate_skills", "runs", "logs", str(bench.out)],
               env=bench.fake.env(), timeout=60)  # fmt: skip


def test_runs_logs_drops_c1_controls_and_lone_escapes(tmp_path, home):
    events = (
        json.dumps({"type": "note", "text": "a\x9b2Jb\x85c\x7fd\x1b7e\x1bPq\x1b\\f\x1b_x\x07g"})
        + "\n"
    )
    bench = _finished_run(tmp_path, events)
    done = _logs(bench)
    assert (done.code, done.out) == (0, "note: a2Jbcdefg\n")


def test_runs_logs_shows_a_deeply_nested_event_as_text(tmp_path, home):
    bench = _finished_run(tmp_path, "[" * 50_000 + "]" * 50_000 + "\nplain\n")
    done = _logs(bench)
    assert done.code == 0, done.err
    assert done.out.splitlines() == ["[" * 199 + "…", "plain"]


def test_runs_logs_shows_huge_lines_and_the_unfinished_last_one(tmp_path, home):
    big = json.dumps({"type": "big", "text": "w" * (3 * 1024 * 1024)})
    huge = json.dumps({"type": "huge", "text": "h" * (17 * 1024 * 1024)})  # past 16 MiB
    bench = _finished_run(tmp_path, f"{big}\n{huge}\nnext\nunfinished")
    done = _logs(bench)
    assert done.code == 0, done.err
    assert done.out.splitlines() == [
        "big: " + "w" * 194 + "…",
        '{"type": "huge", "text": "' + "h" * 173 + "…",  # cut before it parses: shown as text
        "next",
        "unfinished",
    ]


def test_runs_logs_refuses_an_events_file_that_is_not_a_regular_file(tmp_path, home):
    bench = _finished_run(tmp_path, '{"type":"a"}\n')
    events = bench.out / "events.jsonl"
    events.unlink()
    os.mkfifo(events)
    done = _logs(bench)
    assert (done.code, done.out) == (2, "")
    assert done.err == (
        f"delegate: refusing to read {events}: not a regular file; the run's event log is one\n"
    )


def test_runs_logs_does_not_read_through_a_symlink(tmp_path, home):
    bench = _finished_run(tmp_path, '{"type":"a"}\n')
    secret = tmp_path / "secret.txt"
    secret.write_text("the user's secret\n")
    events = bench.out / "events.jsonl"
    events.unlink()
    events.symlink_to(secret)
    done = _logs(bench)
    assert (done.code, done.out) == (2, "")
    assert done.err == (
        f"delegate: refusing to read {events}: it is a symlink, not the run's event log\n"
    )


# ---------------------------------------------------------------- fanout's run count


@pytest.fixture
def source(tmp_path, home) -> Bench:
    bench = Bench(tmp_path, "codex")
    (bench.work / "a.txt").write_text("a\n")
    commit_all(bench.work)
    bench.script({})
    return bench


def _fanout(bench: Bench, *args: str):
    return delegate("fanout", "--brief", str(bench.brief), "--cd", str(bench.work), *args,
                    "--json", env=bench.fake.env(), timeout=60)  # fmt: skip


def test_fanout_counts_every_lane_host_and_attempt_against_its_cap(source):
    done = _fanout(source, "--implementer", "codex", "--implementer", "pi", "--host", "a",
                   "--host", "b", "--attempts", "65")  # fmt: skip
    assert done.code == 2
    assert done.err.splitlines()[-1] == (
        "Error: Invalid value for --attempts: 2 lane(s) or implementer(s) × 2 host(s) × "
        "65 attempt(s) is 260 runs; fanout starts at most 256"
    )
    assert source.fake.calls() == []


def test_fanout_takes_up_to_256_runs(source):
    # 2 × 128 = 256 passes the count; the unknown implementer is what stops it then.
    done = _fanout(source, "--implementer", "codex", "--implementer", "nosuch", "--attempts",
                   "128")  # fmt: skip
    assert done.code == 2
    assert done.err.startswith("delegate: --implementer nosuch: unknown implementer")
