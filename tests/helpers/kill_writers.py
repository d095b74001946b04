"""SIGKILL project lane writers at random moments; after each kill, ask whether the project is trusted.

    python kill_writers.py REPO ROUNDS SEED

Each round forks a child that sets project lanes in a loop and says on a pipe
when its first write begins (this process wrote once already, so nothing is
left to import); the parent then sleeps a random 0-25 ms (a few
writes), kills the child with SIGKILL and reaps it, then reads the project as
a relay would: one JSON line per round on stdout.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sys
import time

from delegate_skills import approval, fleet


def hammer(repo: str, round_: int, ready: int) -> None:
    i = 0
    os.write(ready, b"1")
    os.close(ready)
    while True:
        lane = {"implementer": "kimi", "timeout": f"{i % 90 + 1}m"}
        fleet.edit_lane("project", repo, f"r{round_}l{i % 7}", lane)
        i += 1


def main() -> int:
    repo, rounds, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    rng = random.Random(seed)
    # One write here first, so every lazy import is done before the forks.
    fleet.edit_lane("project", repo, "warm", {"implementer": "kimi"})
    for round_ in range(rounds):
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read_end)
            try:
                hammer(repo, round_, write_end)
            finally:
                os._exit(1)
        os.close(write_end)
        os.read(read_end, 1)
        os.close(read_end)
        time.sleep(rng.uniform(0, 0.025))
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        effective = fleet.Effective(repo)
        git_dir = effective.git_dir
        report = {
            "round": round_,
            "trusted": effective.project_trusted,
            "pending": os.path.exists(approval.pending_path(git_dir)),
        }
        sys.stdout.write(json.dumps(report) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
