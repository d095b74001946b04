#!/usr/bin/env python3
"""What eight parallel worktree runs cost: `delegate fanout` wall time and relay memory.

`python -m delegate_skills fanout --implementer codex` ×8 with `--jobs 8`, on a
temp git repository of one commit, against a fake `codex` (tests/fakecli) that
prints its thread id, sleeps 2 s and exits 0. Every run gets its own worktree,
so the wall time over 2 s is what making eight worktrees, eight relays and
eight diffstats adds. While it runs, every relay process fanout started
(`-m delegate_skills.relay`, a child of fanout; not the fake, not fanout) is
sampled every 20 ms and their VmRSS summed; the peak sum is set against a Node
relay's resident size, a reference figure measured elsewhere (there is no Node
relay to launch here). Run with the interpreter that has delegate_skills
importable (the dev venv); it launches `sys.executable` by path. HOME, XDG
dirs and TMPDIR are temp dirs, removed afterwards with every worktree in them.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from _common import start

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAKE_DIR = os.path.join(ROOT, "tests", "fakecli")
RUNS = 8
SLEEP_S = 2.0
SAMPLE_S = 0.02
#: A Node relay's resident size while its implementer runs (reference figure).
NODE_RELAY_MB = 44.0


def install_fake(bindir: str, scenario: dict) -> None:
    """A `codex` on PATH that runs tests/fakecli/fake_cli.py on `scenario`."""
    path = os.path.join(bindir, "scenario.json")
    with open(path, "w") as handle:
        json.dump(scenario, handle)
    shim = os.path.join(bindir, "codex")
    with open(shim, "w") as handle:
        handle.write(
            f"#!{sys.executable} -S\n"
            "import sys\n"
            f"sys.argv[1:1] = [{path!r}]\n"
            f"sys.path.insert(0, {FAKE_DIR!r})\n"
            "import fake_cli\n"
            "fake_cli.main()\n"
        )
    os.chmod(shim, 0o755)


def make_repo(path: str, env: dict) -> None:
    def git(*args: str) -> None:
        subprocess.run(["git", "-C", path, *args], check=True, capture_output=True, env=env)

    os.makedirs(path)
    git("init", "-q", "-b", "main")
    with open(os.path.join(path, "README.md"), "w") as handle:
        handle.write("benchmark repository\n")
    git("add", "-A")
    git("-c", "commit.gpgsign=false", "commit", "-q", "-m", "one commit")


def relays_of(parent: int) -> dict[int, int]:
    """{pid: VmRSS in kB} of every `-m delegate_skills.relay` process whose parent is `parent`."""
    found = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as handle:
                argv = handle.read().split(b"\0")
            if b"delegate_skills.skillscripts.relay" not in argv:
                continue
            with open(f"/proc/{name}/status") as handle:
                fields = dict(line.split(":", 1) for line in handle if ":" in line)
        except OSError:
            continue  # gone meanwhile
        if int(fields["PPid"]) != parent or "VmRSS" not in fields:
            continue
        found[int(name)] = int(fields["VmRSS"].split()[0])
    return found


def stop(proc: subprocess.Popen, seen: set[int]) -> None:
    """End fanout (it passes SIGTERM to its relays) and any relay of it still here."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    for pid in seen:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                if b"delegate_skills" not in handle.read().split(b"\0"):
                    continue  # that pid is someone else's now
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def main() -> int:
    start(sys.executable)
    if not os.path.isdir("/proc"):
        raise SystemExit("this benchmark reads /proc (Linux only)")
    scratch = tempfile.mkdtemp(prefix="delegate-bench-fanout-")
    try:
        return measure(scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def measure(scratch: str) -> int:
    dirs = {name: os.path.join(scratch, name) for name in ("home", "state", "config", "tmp", "bin")}
    for path in dirs.values():
        os.makedirs(path)
    env = dict(os.environ)
    env.update(
        HOME=dirs["home"],
        XDG_STATE_HOME=dirs["state"],
        XDG_CONFIG_HOME=dirs["config"],
        TMPDIR=dirs["tmp"],
        PATH=dirs["bin"] + os.pathsep + env.get("PATH", ""),
        PYTHONPATH=os.pathsep.join(
            p for p in (os.path.join(ROOT, "src"), env.get("PYTHONPATH")) if p
        ),
        GIT_CONFIG_NOSYSTEM="1",
        GIT_AUTHOR_NAME="bench",
        GIT_AUTHOR_EMAIL="bench@example.invalid",
        GIT_COMMITTER_NAME="bench",
        GIT_COMMITTER_EMAIL="bench@example.invalid",
    )
    install_fake(
        dirs["bin"],
        {
            "run": {
                "actions": [
                    {"stdout": '{"type":"thread.started","thread_id":"t-bench"}\n'},
                    {"sleep": SLEEP_S},
                ],
                "exit": 0,
            }
        },
    )
    repo = os.path.join(scratch, "repo")
    make_repo(repo, env)
    brief = os.path.join(scratch, "brief.txt")
    with open(brief, "w") as handle:
        handle.write("benchmark brief: sleep and exit\n")
    argv = [sys.executable, "-m", "delegate_skills", "fanout", "--brief", brief, "--cd", repo]
    argv += ["--implementer", "codex"] * RUNS + ["--jobs", str(RUNS), "--json"]

    peak_kb, peak_at, peak_count = 0, 0, 0
    seen: set[int] = set()
    out_path, err_path = os.path.join(scratch, "stdout"), os.path.join(scratch, "stderr")
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env)
        try:
            while proc.poll() is None:
                sample = relays_of(proc.pid)
                seen.update(sample)
                total = sum(sample.values())
                if total > peak_kb:
                    peak_kb, peak_at = total, len(sample)
                peak_count = max(peak_count, len(sample))
                time.sleep(SAMPLE_S)
            wall = time.perf_counter() - start
        finally:
            stop(proc, seen)
    with open(out_path) as handle:
        printed = handle.read()
    try:
        runs = json.loads(printed)["runs"]
    except (ValueError, KeyError):
        runs = []
    statuses = [row.get("status") for row in runs]
    if proc.returncode != 0 or statuses != ["completed"] * RUNS:
        with open(err_path) as handle:
            sys.stderr.write(handle.read())
        sys.stderr.write(printed)
        print(f"fanout exited {proc.returncode}; statuses {statuses}", file=sys.stderr)
        return 1

    peak_mb = peak_kb / 1024
    per_relay = peak_mb / peak_at if peak_at else float("nan")
    print(f"python: {sys.executable} ({sys.version.split()[0]})")
    print(f"fanout of {RUNS} worktree runs, --jobs {RUNS}, fake codex sleeping {SLEEP_S:.0f} s")
    print(f"all {RUNS} runs completed; run durations "
          f"{min(r['durationSeconds'] for r in runs):.2f}-"
          f"{max(r['durationSeconds'] for r in runs):.2f} s")  # fmt: skip
    print(f"wall time                  {wall:6.2f} s")
    print(f"wall / {SLEEP_S:.0f} s sleep           {wall / SLEEP_S:6.2f}x")
    print(f"peak summed relay RSS      {peak_mb:6.1f} MB ({peak_at} relays in that sample)")
    print(f"most relays seen at once   {peak_count:6d}")
    print(f"RSS per relay              {per_relay:6.1f} MB")
    print(f"Node relay                 {NODE_RELAY_MB:6.1f} MB each (reference figure)")
    print(f"ratio                      {per_relay / NODE_RELAY_MB:6.2f}x a Node relay's RSS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
