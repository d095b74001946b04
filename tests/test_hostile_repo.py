"""A repository or run directory that holds something hostile: every read is bounded.

Each command runs with its address space capped at 1 GiB: a reader that
follows `/dev/zero` without a limit dies of it (or fills memory) instead of
answering. Every refusal is one line on stderr and a non-zero exit.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import PYTHON, SETUP_SCRIPTS, fleet_doc, git, write_json
from fakes import Fake, relay_argv

ONE_GIB = 1 << 30
#: A hostile process gets this long; a bounded read answers in well under a second.
HANG_S = 30


def capped():
    resource.setrlimit(resource.RLIMIT_AS, (ONE_GIB, ONE_GIB))


def run_capped(argv: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(
        argv,
        capture_output=True,
        text=True,
        timeout=HANG_S,
        preexec_fn=capped,
        stdin=kw.pop("stdin", subprocess.DEVNULL),
        **kw,
    )


def one_line(done: subprocess.CompletedProcess, *words: str) -> None:
    assert done.returncode != 0, done
    assert done.stderr.count("\n") == 1, done.stderr
    assert "Traceback" not in done.stderr
    for word in words:
        assert word in done.stderr, done.stderr


@pytest.fixture
def zero_config(repo) -> Path:
    """A committed .delegate/config.json that is a symlink to /dev/zero."""
    (repo / ".delegate").mkdir()
    (repo / ".delegate" / "config.json").symlink_to("/dev/zero")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "lanes")
    return repo


DELEGATE_READERS = [
    ["config", "load"],
    ["lane", "list", "--json"],
    ["doctor", "--json"],
    ["lane", "resolve", "--lane", "x", "--implementer", "codex"],
]


@pytest.mark.parametrize("args", DELEGATE_READERS, ids=lambda a: " ".join(a[:2]))
def test_delegate_commands_refuse_a_dev_zero_project_config(zero_config, args):
    done = run_capped([PYTHON, "-m", "delegate_skills", *args, "--cwd", str(zero_config)])
    one_line(done, "refusing to read", "config.json")


@pytest.mark.parametrize(
    "args",
    [["load"], ["resolve", "--lane", "x", "--implementer", "codex"]],
    ids=["config.py load", "lane.py resolve"],
)
def test_skill_scripts_refuse_a_dev_zero_project_config(zero_config, args):
    script = "config.py" if args[0] == "load" else "lane.py"
    done = run_capped([PYTHON, str(SETUP_SCRIPTS / script), *args, "--cwd", str(zero_config)])
    one_line(done, "refusing to read", "config.json")
    assert done.returncode == 2


def test_relay_lane_refuses_a_dev_zero_project_config(zero_config, tmp_path):
    fake = Fake(tmp_path / "fake")
    fake.install("codex")
    brief = tmp_path / "brief.txt"
    brief.write_text("x\n")
    argv = relay_argv("codex", "--lane", "x", "--brief", str(brief), "--cd", str(zero_config))
    done = run_capped([*argv, "--out-dir", str(tmp_path / "out")], env=fake.env())
    one_line(done, "refusing to read", "config.json")
    assert done.returncode == 2
    assert fake.calls() == []


def test_a_fifo_project_config_does_not_hang(repo):
    (repo / ".delegate").mkdir()
    os.mkfifo(repo / ".delegate" / "config.json")
    done = run_capped([PYTHON, str(SETUP_SCRIPTS / "config.py"), "load", "--cwd", str(repo)])
    one_line(done, "not a regular file")


def test_a_project_config_that_leaves_the_repository_is_refused(repo, tmp_path):
    outside = write_json(tmp_path / "elsewhere.json", fleet_doc({"a": {"implementer": "kimi"}}))
    (repo / ".delegate").mkdir()
    (repo / ".delegate" / "config.json").symlink_to(outside)
    done = run_capped([PYTHON, str(SETUP_SCRIPTS / "config.py"), "load", "--cwd", str(repo)])
    one_line(done, "resolves outside", str(repo))


def test_a_symlinked_delegate_folder_is_refused(repo, tmp_path):
    outside = tmp_path / "elsewhere"
    write_json(outside / "config.json", fleet_doc({"a": {"implementer": "kimi"}}))
    (repo / ".delegate").symlink_to(outside, target_is_directory=True)
    done = run_capped([PYTHON, str(SETUP_SCRIPTS / "config.py"), "load", "--cwd", str(repo)])
    one_line(done, "resolves outside")


def test_a_symlink_inside_the_repository_is_followed(repo):
    write_json(repo / "lanes" / "team.json", fleet_doc({"a": {"implementer": "kimi"}}))
    (repo / ".delegate").mkdir()
    (repo / ".delegate" / "config.json").symlink_to("../lanes/team.json")
    done = run_capped([PYTHON, str(SETUP_SCRIPTS / "config.py"), "load", "--cwd", str(repo)])
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["projectPresent"] is True


def test_a_config_larger_than_a_mebibyte_is_refused(repo):
    doc = fleet_doc({"a": {"implementer": "kimi"}})
    doc["padding"] = "x" * (1 << 20)
    write_json(repo / ".delegate" / "config.json", doc)
    done = run_capped([PYTHON, str(SETUP_SCRIPTS / "config.py"), "load", "--cwd", str(repo)])
    one_line(done, "larger than 1 MiB")


def test_a_dev_zero_global_config_is_refused(repo, global_config):
    global_config.parent.mkdir(parents=True)
    global_config.symlink_to("/dev/zero")
    done = run_capped([PYTHON, str(SETUP_SCRIPTS / "config.py"), "load", "--cwd", str(repo)])
    one_line(done, str(global_config), "not a regular file")


def test_validate_refuses_dev_zero():
    done = run_capped([PYTHON, str(SETUP_SCRIPTS / "config.py"), "validate", "/dev/zero"])
    one_line(done, "/dev/zero", "not a regular file")


# ------------------------------------------------------------------ briefs


@pytest.fixture
def codex(tmp_path, repo):
    fake = Fake(tmp_path / "fake")
    fake.install("codex")
    return fake


def relay_run(repo: Path, tmp_path: Path, fake: Fake, *args: str, **kw):
    argv = relay_argv("codex", "--cd", str(repo), "--out-dir", str(tmp_path / "out"), *args)
    return run_capped(argv, env=fake.env(), **kw)


def test_a_dev_zero_brief_is_refused(repo, tmp_path, codex):
    done = relay_run(repo, tmp_path, codex, "--brief", "/dev/zero")
    one_line(done, "/dev/zero", "not a regular file")
    assert done.returncode == 2 and codex.calls() == []


def test_a_fifo_brief_does_not_hang(repo, tmp_path, codex):
    fifo = tmp_path / "brief.fifo"
    os.mkfifo(fifo)
    done = relay_run(repo, tmp_path, codex, "--brief", str(fifo))
    one_line(done, str(fifo), "not a regular file")
    assert done.returncode == 2


def test_a_brief_streamed_without_end_on_stdin_is_cut_off(repo, tmp_path, codex):
    with open("/dev/zero", "rb") as zero:
        done = relay_run(repo, tmp_path, codex, stdin=zero)
    one_line(done, "the brief on stdin", "larger than 64 MiB")
    assert done.returncode == 2 and codex.calls() == []


# ------------------------------------------------------------------ run directories


def test_a_dev_zero_run_json_is_not_a_run(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "run.json").symlink_to("/dev/zero")
    (run_dir / "result.json").symlink_to("/dev/zero")
    done = run_capped([PYTHON, "-m", "delegate_skills", "runs", "show", str(run_dir)])
    one_line(done, "no relay run here")
    listed = run_capped(
        [PYTHON, "-m", "delegate_skills", "runs", "list", "--root", str(tmp_path), "--json"]
    )
    assert listed.returncode == 0, listed.stderr
    assert str(run_dir) not in listed.stdout


# ------------------------------------------------------------------ the skills installer


def skills(project: Path, home: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "HOME": str(home), "DELEGATE_SKILLS_HOME": str(home / "state")}
    return run_capped(
        [sys.executable, "-m", "delegate_skills", "skills", *args, "--cwd", str(project)], env=env
    )


def test_a_dev_zero_lockfile_is_refused(repo, home):
    (repo / ".agents").mkdir()
    (repo / ".agents" / "delegate-skills.lock.json").symlink_to("/dev/zero")
    done = skills(repo, home, "install", "codex-delegate")
    one_line(done, "delegate-skills.lock.json", "symlink")


def test_install_never_writes_through_a_committed_symlinked_folder(repo, home, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (repo / ".claude").symlink_to(outside, target_is_directory=True)
    done = skills(repo, home, "install", "codex-delegate", "--agent", "claude-code")
    one_line(done, ".claude", "symlink")
    assert list(outside.iterdir()) == []


def test_sync_never_writes_through_a_committed_symlinked_lockfile_folder(repo, home, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (repo / ".agents").symlink_to(outside, target_is_directory=True)
    done = skills(repo, home, "install", "codex-delegate")
    one_line(done, ".agents", "symlink")
    assert list(outside.iterdir()) == []


def test_a_lockfile_symlinked_out_of_the_project_is_not_read_or_written(repo, home, tmp_path):
    outside = tmp_path / "outside.json"
    outside.write_text('{"version": 1, "skills": {}}\n')
    (repo / ".agents").mkdir()
    (repo / ".agents" / "delegate-skills.lock.json").symlink_to(outside)
    done = skills(repo, home, "install", "codex-delegate")
    one_line(done, "refusing to write", "symlink")
    assert outside.read_text() == '{"version": 1, "skills": {}}\n'


# ------------------------------------------------------------------ approval folder


def test_a_symlinked_approval_folder_trusts_nothing_and_takes_no_write(repo, tmp_path):
    lanes = write_json(tmp_path / "lanes.json", fleet_doc({"a": {"implementer": "kimi"}}))
    write = [PYTHON, str(SETUP_SCRIPTS / "config.py"), "write", "--scope", "project"]
    wrote = run_capped([*write, "--cwd", str(repo), str(lanes)])
    assert wrote.returncode == 0, wrote.stderr
    approvals = repo / ".git" / "delegate-skills"
    moved = tmp_path / "moved"
    approvals.rename(moved)
    approvals.symlink_to(moved, target_is_directory=True)
    loaded = run_capped([PYTHON, str(SETUP_SCRIPTS / "config.py"), "load", "--cwd", str(repo)])
    assert json.loads(loaded.stdout)["projectTrusted"] is False
    again = run_capped([*write, "--cwd", str(repo), str(lanes)])
    one_line(again, "symlink")
