#!/usr/bin/env python3
"""A `--host` dispatch against a local `--worktree` one, and the bytes a remote run sends.

A real OpenSSH server on 127.0.0.1 (tests/sshkit.py: a throwaway host key,
user key and ssh_config; the "other machine" is another HOME here) and the
fake codex that exits at once, on a small repository. Prints the median wall
time of 5 dispatches each way, then the bytes ssh carried for a first run to
a fresh remote root (the core shipped, the repository's history pushed) and
for a second run (only what is new). Bytes are counted by a ProxyCommand
between ssh and sshd, so they include ssh's own handshake.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "src"))

import sshkit  # noqa: E402
from _common import start  # noqa: E402

COUNTER = r"""
import os, selectors, socket, sys
sock = socket.create_connection((sys.argv[1], int(sys.argv[2])))
sent = received = 0
sel = selectors.DefaultSelector()
sel.register(0, selectors.EVENT_READ)
sel.register(sock, selectors.EVENT_READ)
log = os.path.join(sys.argv[3], str(os.getpid()))
while True:
    for key, _ in sel.select():
        if key.fileobj == 0:
            data = os.read(0, 65536)
            if not data:
                sel.unregister(0); sock.shutdown(socket.SHUT_WR)
                continue
            sent += len(data); sock.sendall(data)
        else:
            data = sock.recv(65536)
            if not data:
                sys.exit(0)
            received += len(data); os.write(1, data)
        with open(log + ".tmp", "w") as out:  # ssh ends its proxy with a signal: keep it current
            out.write(f"{sent} {received}")
        os.replace(log + ".tmp", log)
"""
FAKE = """#!{python} -S
import sys
sys.exit(0) if "--version" not in sys.argv else print("codex-cli 0.0.0")
"""


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(cwd), *args], check=True, capture_output=True)


def make_repo(path: Path) -> None:
    path.mkdir()
    git(path, "init", "-q")
    for n in range(50):
        (path / f"f{n}.txt").write_text(f"file {n}\n" * 20)
    git(path, "add", "-A")
    git(path, "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "start")


def dispatch(env: dict, repo: Path, out: Path, *extra: str) -> float:
    brief = out.parent / "brief.txt"
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-S", str(ROOT / "skills/codex-delegate/scripts/relay.py"), "--brief",
         str(brief), "--cd", str(repo), "--out-dir", str(out), *extra],
        env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    took = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"dispatch failed: {done.stderr}")
    return took


def main() -> int:
    start(sys.executable)
    base = Path(tempfile.mkdtemp(prefix="delegate-bench-remote-"))
    try:
        with sshkit.SshWorld(base / "ssh") as world:
            return run(world, base)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def run(world: sshkit.SshWorld, base: Path) -> int:
    fakebin = base / "fakebin"
    fakebin.mkdir()
    (fakebin / "codex").write_text(FAKE.format(python=sys.executable))
    (fakebin / "codex").chmod(0o755)
    host = world.add_host("bench", env={"PATH": f"{fakebin}:/usr/bin:/bin"})
    counter, log = base / "counter.py", base / "bytes"
    log.mkdir()
    counter.write_text(COUNTER)
    config = world.ssh_config.read_text().replace(
        f"Port {host.port}\n",
        f"Port {host.port}\n  ProxyCommand {sys.executable} {counter} 127.0.0.1 %p {log}\n",
    )
    counted = base / "ssh_config_counted"
    counted.write_text(config)
    wrapper = world.bin_dir / "ssh"
    wrapper.write_text(wrapper.read_text().replace(str(world.ssh_config), str(counted)))
    repo = base / "repo"
    make_repo(repo)
    (base / "brief.txt").write_text("Nothing to do.\n")
    env = world.env(XDG_STATE_HOME=str(base / "state"), PATH=f"{world.bin_dir}:{fakebin}:"
                    + os.environ.get("PATH", ""))  # fmt: skip

    def stop_master() -> None:
        subprocess.run([*ssh_base(), "-O", "exit", "bench"], env=env, capture_output=True)

    def ssh_base() -> list[str]:
        from delegate_skills.remote import ssh

        return ssh.base_argv()

    sizes = []
    for n in range(2):  # first run: a fresh root; second: the core and history are there
        for old in log.iterdir():
            old.unlink()
        dispatch(env, repo, base / f"sized{n}", "--host", "bench")
        stop_master()
        counts = [tuple(map(int, f.read_text().split())) for f in log.iterdir()
                  if not f.name.endswith(".tmp")]  # fmt: skip
        sizes.append((sum(c[0] for c in counts), sum(c[1] for c in counts)))
        (repo / f"new{n}.txt").write_text("one more file\n")
        git(repo, "add", "-A")
        git(repo, "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", f"c{n}")
    local = [dispatch(env, repo, base / f"local{n}", "--worktree") for n in range(5)]
    remote = [dispatch(env, repo, base / f"remote{n}", "--host", "bench") for n in range(5)]
    stop_master()
    local_s, remote_s = statistics.median(local), statistics.median(remote)
    print(f"python: {sys.executable} ({sys.version.split()[0]}); repository of 50 files")
    print(f"local --worktree dispatch, median of 5:   {local_s * 1000:7.1f} ms")
    print(f"--host dispatch (ssh to 127.0.0.1), median of 5: {remote_s * 1000:7.1f} ms")
    print(f"ratio   {remote_s / local_s:.2f}x the local worktree run")
    for label, (sent, received) in zip(("first", "second"), sizes, strict=True):
        print(f"{label} run to the host: sent {sent:>9,} bytes, received {received:>9,} bytes")
    print(json.dumps({"localMs": round(local_s * 1000, 1), "remoteMs": round(remote_s * 1000, 1),
                      "bytes": sizes}))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
