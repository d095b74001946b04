"""The ssh test kit: real sshd hosts on 127.0.0.1, reached by the `ssh` found on PATH."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
from pathlib import Path

import pytest
import sshkit
from conftest import PROCESS_TAG
from fakes import wait_for
from sshkit import gone, open_world

ssh_world = pytest.fixture(sshkit.ssh_world)


def lines(done: subprocess.CompletedProcess) -> list[str]:
    assert done.returncode == 0, done
    return done.stdout.splitlines()


def read_pid(path: Path) -> int | None:
    """The pid a remote command wrote to `path`, once written whole."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    return int(text) if text.endswith("\n") else None


def test_ssh_from_path_runs_in_the_remote_home(ssh_world):
    host = ssh_world.add_host("remote-a")
    done = subprocess.run(
        ["ssh", "remote-a", 'echo "$HOME"; pwd'],
        capture_output=True,
        text=True,
        env=ssh_world.env(),
        stdin=subprocess.DEVNULL,
        timeout=60,
    )
    assert lines(done) == [str(host.home), str(host.home)]
    assert host.home != Path(os.path.expanduser("~"))


def test_two_hosts_answer_on_their_own_ports_with_their_own_home(ssh_world):
    a = ssh_world.add_host("remote-a")
    b = ssh_world.add_host("remote-b")
    assert a.port != b.port
    assert lines(ssh_world.ssh("remote-a", "echo $HOME")) == [str(a.home)]
    assert lines(ssh_world.ssh("remote-b", "echo $HOME")) == [str(b.home)]


def test_set_env_changes_what_the_next_session_sees(ssh_world):
    host = ssh_world.add_host("remote-a", env={"GREETING": "hello"})
    bin_dir = host.home / "bin"
    ssh_world.set_env(host, PATH=f"{bin_dir}:/usr/bin:/bin")
    assert lines(ssh_world.ssh("remote-a", 'echo "$GREETING $PATH"')) == [
        f"hello {bin_dir}:/usr/bin:/bin"
    ]
    ssh_world.set_env("remote-a", GREETING=None)
    assert lines(ssh_world.ssh("remote-a", 'echo "[${GREETING-unset}]"')) == ["[unset]"]


def test_an_unknown_host_key_fails_verification(ssh_world):
    host = ssh_world.add_host("remote-a", known=False)
    strict = ["-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes"]
    done = ssh_world.ssh(*strict, "remote-a", "true")
    assert done.returncode == 255
    assert "Host key verification failed" in done.stderr
    ssh_world.set_known(host, True)
    assert lines(ssh_world.ssh(*strict, "remote-a", "echo known")) == ["known"]


def test_a_daemonised_remote_process_carries_the_process_tag(ssh_world):
    host = ssh_world.add_host("remote-a")
    pid_file = host.home / "sleeper.pid"
    started = ssh_world.ssh(
        "remote-a",
        "setsid sh -c 'echo $$ > sleeper.pid; exec sleep 300' </dev/null >/dev/null 2>&1 &",
    )
    assert started.returncode == 0, started
    wait_for(lambda: read_pid(pid_file) is not None, timeout=10)
    pid = read_pid(pid_file)
    assert pid is not None
    try:
        wait_for(lambda: Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"sleep\0"))
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        assert f"{PROCESS_TAG}={os.environ[PROCESS_TAG]}".encode() in environ
        assert f"HOME={host.home}".encode() in environ
        assert os.getsid(pid) == pid  # its own session: no parent of ours to find it by
    finally:
        os.kill(pid, signal.SIGKILL)
        wait_for(lambda: gone(pid), timeout=10)


def test_control_master_shares_one_connection(ssh_world):
    ssh_world.add_host("remote-a")
    control = [
        *("-o", "ControlMaster=auto"),
        *("-o", f"ControlPath={ssh_world.control_dir}/%C"),
        *("-o", "ControlPersist=60"),
    ]
    first = lines(ssh_world.ssh(*control, "remote-a", "echo $SSH_CONNECTION"))
    check = ssh_world.ssh(*control, "-O", "check", "remote-a")
    found = re.search(r"pid=(\d+)", check.stderr)
    assert check.returncode == 0 and found, check
    master = int(found[1])
    try:
        second = lines(ssh_world.ssh(*control, "remote-a", "echo $SSH_CONNECTION"))
        alone = lines(ssh_world.ssh("remote-a", "echo $SSH_CONNECTION"))
        # One TCP connection carries both sessions: the same client port.
        assert second == first
        assert alone != first
    finally:
        ssh_world.ssh(*control, "-O", "exit", "remote-a")
        wait_for(lambda: gone(master), timeout=10)


def test_leaving_the_world_stops_sshd_and_drops_its_connections(tmp_path):
    with open_world(tmp_path / "ssh") as world:
        host = world.add_host("remote-a")
        client = subprocess.Popen(
            [str(world.bin_dir / "ssh"), "remote-a", "touch ready; exec cat"],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            wait_for((host.home / "ready").exists, timeout=10)
            assert host.running
        except BaseException:
            client.kill()
            client.wait()
            raise
    assert not host.running
    assert client.wait(timeout=10) == 255
    assert client.stdin is not None
    client.stdin.close()


def test_a_port_taken_before_sshd_binds_it_is_chosen_again(ssh_world, monkeypatch):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        offers = iter([busy])
        free_port = sshkit._free_port
        monkeypatch.setattr(sshkit, "_free_port", lambda: next(offers, None) or free_port())
        host = ssh_world.add_host("remote-a")
    assert host.port != busy
    assert "Address already in use" in host.log_text()
    assert lines(ssh_world.ssh("remote-a", "echo up")) == ["up"]


def test_a_machine_without_sshd_skips(tmp_path, monkeypatch):
    monkeypatch.setattr(sshkit, "SSHD", str(tmp_path / "no-sshd"))
    with pytest.raises(pytest.skip.Exception, match="no-sshd"), open_world(tmp_path / "ssh"):
        pass
