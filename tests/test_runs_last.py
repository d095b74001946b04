"""`--last` names the run started last on this machine, wherever a run is asked for."""

from __future__ import annotations

import json

import pytest
from conftest import PYTHON, ROOT, run
from test_worktree import Source


@pytest.fixture
def source(tmp_path, home) -> Source:
    return Source(tmp_path)


RUNS_PY = str(ROOT / "skills" / "codex-delegate" / "scripts" / "runs.py")


def test_last_is_the_newest_run_for_delegate_and_runs_py(source, tmp_path):
    source.bench.script({"actions": [{"write": ["one.txt", "1\n"]}]})
    first, second = tmp_path / "first", tmp_path / "second"
    assert source.relay(out=first).code == 0
    source.bench.script({"actions": [{"write": ["two.txt", "2\n"]}]})
    assert source.relay(out=second).code == 0
    shown = source.delegate("runs", "show", "--last", "--json")
    assert shown.code == 0, shown
    assert json.loads(shown.out)["outDir"] == str(second)
    script = run([PYTHON, RUNS_PY, "show", "--last"], env=source.env)
    assert script.code == 0, script
    assert json.loads(script.out)["outDir"] == str(second)
    names = source.delegate("runs", "diff", "--last", "--name-only")
    assert (names.code, names.out) == (0, "two.txt\n")
    script_names = run([PYTHON, RUNS_PY, "diff", "--last", "--name-only"], env=source.env)
    assert (script_names.code, script_names.out) == (0, "two.txt\n")


def test_one_run_must_be_named_exactly_once(source):
    source.bench.script({})
    assert source.relay().code == 0
    for args in (["runs", "show"], ["runs", "show", str(source.bench.out), "--last"]):
        done = source.delegate(*args)
        assert done.code == 2, done
        assert done.err.strip().splitlines()[-1] == (
            "Error: name one run: RUN (a directory or run id) or --last"
        )


def test_last_with_no_run_recorded_says_so(source):
    done = source.delegate("runs", "undo", "--last")
    assert done.code == 2, done
    assert done.err == "delegate: --last: no relay run has been recorded on this machine yet\n"
    script = run([PYTHON, RUNS_PY, "show", "--last"], env=source.env)
    assert script.code == 2, script
    assert script.err == "runs.py: --last: no relay run has been recorded on this machine yet\n"
