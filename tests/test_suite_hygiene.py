"""The suite on a user's machine: nothing lands in the user's run roots, no download
unless asked for, workers counted from the cores.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from conftest import ROOT

TESTS = ROOT / "tests"

LEAKY_TEST = '''
import os, subprocess, sys

RELAY = os.path.join(os.environ["SKILLS"], "codex-delegate", "scripts", "relay.py")


def relay(tmp_path, env):
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    done = subprocess.run([sys.executable, "-S", RELAY, "--cd", str(work)], input="a brief",
                          env=env, capture_output=True, text=True)
    assert done.returncode == 127, done.stderr


def test_runs_in_the_users_roots(tmp_path):
    """What a test does that runs a relay with an environment of its own making."""
    mine = ("XDG_STATE_HOME", "TMPDIR", "DELEGATE_STATE_ROOTS")
    env = {k: v for k, v in os.environ.items() if k not in mine}
    user = {"HOME": os.environ["USER_HOME"], "TMPDIR": os.environ["USER_TMP"]}
    relay(tmp_path, {**env, **user})
    # A state dir of the test's own, but the user's roots index.
    relay(tmp_path, {**env, "HOME": os.environ["USER_HOME"], "TMPDIR": os.environ["TMPDIR"],
                     "XDG_STATE_HOME": str(tmp_path / "state")})
'''

QUIET_TEST = """
def test_nothing(tmp_path):
    (tmp_path / "file").write_text("mine")
"""


def _inner_session(tmp_path: Path, test: str) -> subprocess.CompletedProcess:
    """A pytest session of its own, with this suite's conftest, run for a user whose home
    and temp dir are folders of this test's (and who set no XDG_STATE_HOME)."""
    user_home, user_tmp = tmp_path / "user-home", tmp_path / "user-tmp"
    user_home.mkdir()
    user_tmp.mkdir()
    (tmp_path / "inner").mkdir()
    (tmp_path / "inner" / "test_inner.py").write_text(test)
    ini = tmp_path / "inner" / "pytest.ini"
    ini.write_text("[pytest]\n")
    user = ("XDG_STATE_HOME", "PYTHONPATH", "DELEGATE_STATE_ROOTS")
    env = {k: v for k, v in os.environ.items() if k not in user}
    env.update(
        HOME=str(user_home),
        TMPDIR=str(user_tmp),
        USER_HOME=str(user_home),
        USER_TMP=str(user_tmp),
        SKILLS=str(ROOT / "skills"),
        PYTHONPATH=str(TESTS),
        PATH=os.environ["PATH"],
    )
    env.pop("PYTEST_XDIST_WORKER", None)
    env.pop("PYTEST_XDIST_TESTRUNUID", None)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "conftest", "-c", str(ini), "-p", "no:xdist",
         "-p", "no:cacheprovider", "--basetemp", str(tmp_path / "base"), "-q",
         str(tmp_path / "inner")],
        capture_output=True, text=True, env=env, cwd=tmp_path / "inner", timeout=300,
    )  # fmt: skip


def test_a_run_left_in_the_users_roots_fails_the_session(tmp_path):
    done = _inner_session(tmp_path, LEAKY_TEST)
    state = tmp_path / "user-home" / ".local" / "state" / "delegate-skills"
    run_root = tmp_path / "user-tmp" / "delegate-relay"
    records, run_dirs = os.listdir(state / "runs"), os.listdir(run_root)
    assert (len(records), len(run_dirs)) == (1, 1)  # the run's record and its directory
    left = [state / "runs" / records[0], run_root / run_dirs[0]]
    if (state / "roots.json").exists():  # the index of the user's state dirs, if kept
        left.append(state / "roots.json")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 passed" in done.stdout
    lines = [line for line in done.stdout.splitlines() if "left runs in" in line]
    assert lines == [
        "tests left runs in the user's own state and run roots (a test's subprocess lost the "
        "session's XDG_STATE_HOME, DELEGATE_STATE_ROOTS or TMPDIR): "
        + ", ".join(str(path) for path in left)
    ], done.stdout


def test_a_session_that_leaves_nothing_there_passes(tmp_path):
    done = _inner_session(tmp_path, QUIET_TEST)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "left runs in" not in done.stdout
    assert not (tmp_path / "user-tmp" / "delegate-relay").exists()


def test_this_process_finds_the_sessions_temp_dir():
    """Code run inside the test process (the run root, review dirs) uses the session's
    TMPDIR, not the temp dir pytest looked up before the session set it."""
    assert tempfile.gettempdir() == os.environ["TMPDIR"]
    assert Path(tempfile.gettempdir()) != Path("/tmp")


def test_each_test_lists_its_state_dirs_in_a_roots_index_of_its_own():
    """Relays list the state dirs that hold runs in a roots index, under the real home
    unless DELEGATE_STATE_ROOTS names another file."""
    index = Path(os.environ["DELEGATE_STATE_ROOTS"])
    assert index.parent == Path(os.environ["XDG_STATE_HOME"])
    assert index.name.startswith("roots-") and not index.exists()


def _collected(*args: str) -> str:
    """The last line of `pytest --collect-only -q` over the Skills CLI tests, with the
    project's own options."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-n", "0", *args,
         str(TESTS / "test_skills_cli_node.py")],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
    )  # fmt: skip
    return done.stdout.strip().splitlines()[-1]


def test_the_tests_that_download_node_packages_can_be_left_out():
    """The Skills CLI tests fetch the CLI and a Node from npm (about 244 MB) on first use: the
    README says so beside the test command, and one marker leaves them all out."""
    by_default = re.fullmatch(r"(\d+) tests collected in [\d.]+s", _collected())
    assert by_default is not None, _collected()
    left_out = _collected("-m", "not realcli and not skillscli")
    dropped = re.fullmatch(r"no tests collected \((\d+) deselected\) in [\d.]+s", left_out)
    assert dropped is not None, left_out
    assert int(dropped.group(1)) == int(by_default.group(1)) > 0


def test_the_markers_say_how_to_ask(pytestconfig):
    markers = pytestconfig.getini("markers")
    assert [m for m in markers if m.startswith("skillscli:")] == [
        "skillscli: runs the real Skills CLI, downloading it and a Node 22 from npm on first "
        "use (about 244 MB, cached under ~/.cache/delegate-skills-tests; leave out with "
        "-m 'not realcli and not skillscli')"
    ]


def test_the_suite_starts_a_worker_per_core_and_one_more(pytestconfig):
    """Not a fixed count: on two cores three workers (most tests wait on the processes
    they start), on a machine with more cores more."""
    import conftest

    addopts = pytestconfig.getini("addopts")
    assert addopts[addopts.index("-n") + 1] == "auto"
    assert conftest.pytest_xdist_auto_num_workers(pytestconfig) == len(os.sched_getaffinity(0)) + 1
