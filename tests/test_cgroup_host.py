"""The run's cgroup: who is born in it, who leaves it, and that none is left behind.

The relay moves itself into its run's cgroup while it snapshots the work tree,
so the version probe and the implementer are born there; it moves back out
while the implementer runs, and removes the cgroup when the run ends, however
it ends. The tests of real runs need a cgroup v2 this user may write (CI runs as
root); elsewhere they are skipped, as a run there has no cgroup either. The
moves themselves are tested anywhere, with the kernel's part stood in for.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading

import pytest
from conftest import PYTHON, commit_all
from fakes import alive, wait_for
from relaykit import Bench, adapter, read_pid

from delegate_skills.isolation import linux
from delegate_skills.runstore import lookup


def _writable_cgroup() -> bool:
    path = linux.cgroup_create(f"probe{os.getpid()}")
    if path is None:
        return False
    linux.cgroup_remove(path)
    return True


needs_cgroup = pytest.mark.skipif(
    not sys.platform.startswith("linux") or not _writable_cgroup(),
    reason="no cgroup v2 this user may write: a run here has no cgroup",
)


def _cgroup_dir(relative: str) -> str:
    """The directory of a cgroup /proc/<pid>/cgroup names."""
    return os.path.join(linux.cgroup2_mount(), relative.lstrip("/"))


def _recorded_cgroup(bench: Bench) -> str:
    found = lookup.find(str(bench.out))
    assert found is not None, "the run has no record"
    cgroup = found.get("cgroup")
    assert isinstance(cgroup, str) and os.path.basename(cgroup).startswith("delegate-run-")
    return cgroup


@needs_cgroup
def test_the_probe_and_the_implementer_are_born_in_the_runs_cgroup_and_it_goes_with_the_run(
    tmp_path,
):
    bench = Bench(tmp_path, "codex")
    bench.script({"actions": [{"stdout": "{}\n"}]})
    run = bench.relay()
    assert run.code == 0, run
    cgroup = _recorded_cgroup(bench)
    assert os.path.basename(cgroup) == "delegate-run-" + lookup.find(str(bench.out)).id
    version, = bench.fake.calls("version")  # fmt: skip
    assert _cgroup_dir(version["cgroup"]) == cgroup
    # Born there: the relay was inside when it started the probe (no child pays for a move).
    assert _cgroup_dir(version["parent_cgroup"]) == cgroup
    assert _cgroup_dir(bench.fake.run_call()["cgroup"]) == cgroup
    assert not os.path.exists(cgroup)  # the relay left it, then removed it


@needs_cgroup
def test_a_run_whose_version_probe_fails_leaves_no_cgroup(tmp_path):
    bench = Bench(tmp_path, "codex")
    bench.fake.script({"version": {"exit": 3}, "run": {}})
    run = bench.relay()
    assert run.code == 3, run
    assert bench.result["status"] == "failed"
    version, = bench.fake.calls("version")  # fmt: skip
    cgroup = _recorded_cgroup(bench)
    assert _cgroup_dir(version["cgroup"]) == cgroup
    assert not os.path.exists(cgroup)


@needs_cgroup
def test_a_run_whose_cli_is_missing_leaves_no_cgroup(tmp_path):
    bench = Bench(tmp_path, "codex")
    (bench.fake.bin / "codex").unlink()
    run = bench.relay()
    assert run.code == 127, run
    assert not os.path.exists(_recorded_cgroup(bench))


@needs_cgroup
def test_a_relay_an_implementer_moves_back_into_the_cgroup_does_not_kill_itself(tmp_path):
    bench = Bench(tmp_path, "codex")
    daemon = {"setsid": True, "ignore_term": True, "pid_file": str(tmp_path / "daemon.pid")}
    bench.script({"actions": [{"move_parent_in": linux.cgroup2_mount()}, {"grandchild": daemon}]})
    run = bench.relay(env=bench.fake.env(DELEGATE_RELAY_ABORT_GRACE="0.2"))
    pid = read_pid(tmp_path / "daemon.pid")
    try:
        assert run.code == 0, run
        assert bench.result["status"] == "completed"
        assert "ended 1 process(es) Codex left running" in run.err
        assert not alive(pid)
        assert not os.path.exists(_recorded_cgroup(bench))
    finally:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


@needs_cgroup
def test_a_run_whose_setup_fails_leaves_no_cgroup(tmp_path):
    bench = Bench(tmp_path, "codex")
    (bench.work / "a.txt").write_text("a\n")
    commit_all(bench.work)
    run = bench.relay("--worktree", "--setup", "exit 7")
    assert run.code == 1, run
    assert bench.fake.calls() == []  # it stopped before the version probe
    assert not os.path.exists(_recorded_cgroup(bench))


@needs_cgroup
def test_a_run_the_store_cannot_record_gets_no_cgroup_no_record_names(tmp_path):
    bench = Bench(tmp_path, "codex")
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    run = bench.relay(env=bench.fake.env(DELEGATE_STATE_DIR=str(blocked / "state")))
    assert run.code == 0, run
    assert "cannot write the run's private record" in run.err
    assert "delegate-run-" not in bench.fake.run_call()["cgroup"]


#: Moves itself into a new cgroup, asks linux.cgroup_kill to empty it, and says whether it did.
INSIDE = """
import os, sys
from delegate_skills.isolation import linux
path = linux.cgroup_create(sys.argv[1])
home = linux.own_cgroup_path()
assert linux.move_self(path) and linux.in_cgroup(path)
try:
    print(linux.cgroup_kill(path), flush=True)
finally:
    linux.move_self(home)
    linux.cgroup_remove(path)
"""


@needs_cgroup
def test_cgroup_kill_refuses_to_empty_the_cgroup_its_caller_is_in():
    done = subprocess.run(
        [PYTHON, "-c", INSIDE, f"inside{os.getpid()}"], capture_output=True, text=True, timeout=60
    )
    assert (done.returncode, done.stdout) == (0, "False\n"), done.stderr


def _killed_outright(tmp_path) -> tuple[Bench, str]:
    """A run whose relay got SIGKILL while its implementer ran: (its bench, its cgroup), once
    the implementer has died too (its parent-death signal) and left the cgroup empty."""
    bench = Bench(tmp_path, "codex")
    bench.script({"actions": [{"pid_file": str(tmp_path / "child.pid")}, {"wait": "forever"}]})
    relay = bench.start()
    try:
        child = read_pid(tmp_path / "child.pid")
        cgroup = _recorded_cgroup(bench)
        relay.send_signal(signal.SIGKILL)
        relay.wait()
        wait_for(lambda: not alive(child))
    finally:
        relay.kill()
        relay.communicate()
    assert os.path.isdir(cgroup)  # nothing was left to remove it
    return bench, cgroup


def _delegate(bench: Bench, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [PYTHON, "-m", "delegate_skills.commands.cli", *args, "--json"],
        capture_output=True, text=True, env=bench.fake.env(), cwd=bench.work, timeout=120,
    )  # fmt: skip


@needs_cgroup
def test_waiting_on_a_run_whose_relay_was_killed_outright_removes_its_empty_cgroup(tmp_path):
    bench, cgroup = _killed_outright(tmp_path)
    waited = _delegate(bench, "runs", "wait", str(bench.out))
    assert json.loads(waited.stdout)["status"] == "lost", waited.stderr
    assert not os.path.exists(cgroup)


@needs_cgroup
def test_pruning_a_run_whose_relay_was_killed_outright_removes_its_empty_cgroup(tmp_path):
    bench, cgroup = _killed_outright(tmp_path)
    pruned = _delegate(bench, "runs", "prune", "--older-than", "0")
    assert pruned.returncode == 0, pruned.stderr
    removed = [entry["outDir"] for entry in json.loads(pruned.stdout)["removed"]]
    assert removed == [str(bench.out)]
    assert not os.path.exists(cgroup)


@needs_cgroup
def test_the_empty_cgroup_of_a_live_relay_is_never_removed(tmp_path):
    from delegate_skills.runstore.liveness import drop_cgroup
    from delegate_skills.runstore.record import Record

    path = linux.cgroup_create(f"live{os.getpid()}")
    try:
        me = {"pid": os.getpid(), "start": linux.process_start(os.getpid())}
        drop_cgroup(Record("abcdefgh", {"relay": me, "cgroup": path}))
        assert os.path.isdir(path)  # a relay about to move in, or between its children
        drop_cgroup(Record("abcdefgh", {"relay": {"pid": 999999, "start": "1"}, "cgroup": path}))
        assert not os.path.exists(path)
    finally:
        linux.cgroup_remove(path)


class _Moves:
    """linux.move_self and own_cgroup_path stood in for: where this process is, and each
    move, which blocks until the test lets it end."""

    def __init__(self, monkeypatch, home: str | None = "/cg/home") -> None:
        self.where, self.moves, self.gate = home, [], threading.Event()
        monkeypatch.setattr(linux, "own_cgroup_path", lambda: self.where)
        monkeypatch.setattr(linux, "move_self", self.move)

    def move(self, path: str) -> bool:
        self.gate.wait(60)
        self.moves.append(path)
        self.where = path
        return True


def test_the_relay_moves_in_and_back_out_and_waits_for_a_move_before_a_child(monkeypatch):
    from delegate_skills.isolation.cgrouphost import CgroupHost
    from delegate_skills.relay.engine import Relay

    kernel = _Moves(monkeypatch)
    relay = Relay(adapter("codex"))
    relay.cgroup = "/cg/home/delegate-run-x"
    relay.cgroup_host = CgroupHost(relay.cgroup)
    relay.cgroup_host.enter()
    assert kernel.moves == []  # under way, in the background
    waits = relay.cgroup_host.settle

    def settle() -> None:  # the move ends only once it is waited for
        kernel.gate.set()
        waits()

    relay.cgroup_host.settle = settle
    assert relay.cgroup_for_child() == relay.cgroup
    assert kernel.moves == [relay.cgroup]  # a child starts only once the relay is inside
    relay.cgroup_host.leave()
    relay.cgroup_host.settle()
    assert kernel.moves == [relay.cgroup, "/cg/home"]
    relay.cgroup_host.leave()  # already out: no move
    relay.cgroup_host.settle()
    assert kernel.moves == [relay.cgroup, "/cg/home"]


def test_the_relay_never_moves_where_it_could_not_come_back_from(monkeypatch):
    from delegate_skills.isolation.cgrouphost import CgroupHost

    kernel = _Moves(monkeypatch, home=None)
    kernel.gate.set()
    host = CgroupHost("/cg/delegate-run-x")
    host.enter()
    host.release()
    assert kernel.moves == []
