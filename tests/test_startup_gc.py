"""The cyclic collector is off while a skill script starts and on for whatever runs long.

The skill entry turns it off before it loads the core; lane and config answer and end
with it off; the relay turns it on once its implementer runs; runs and discover turn it
on at once (a wait may last hours), each freezing what start-up made first. Seen from
outside: each script runs under a driver whose exit hook writes `gc.isenabled()` (and
whether anything is frozen) to a file.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from fakes import relay_script
from relaykit import Bench

DRIVER = (
    "import atexit, gc, runpy, sys\n"
    "seen = sys.argv[1]\n"
    "def said():\n"
    "    with open(seen, 'w') as handle:\n"
    "        handle.write(str(gc.isenabled()) + (' frozen' if gc.get_freeze_count() else ''))\n"
    "atexit.register(said)\n"
    "script = sys.argv[2]\n"
    "sys.argv = sys.argv[2:]\n"
    "runpy.run_path(script, run_name='__main__')\n"
)


def collector_at_exit(tmp_path: Path, script: Path, *args: str, env: dict) -> tuple[str, int]:
    seen = tmp_path / "gc.txt"
    done = subprocess.run(
        [sys.executable, "-S", "-c", DRIVER, str(seen), str(script), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    return seen.read_text(), done.returncode


def test_a_relay_turns_the_collector_on_once_its_implementer_runs(tmp_path):
    bench = Bench(tmp_path, "codex")
    bench.script()
    seen, code = collector_at_exit(
        tmp_path, relay_script("codex"), *bench.args(), env=bench.fake.env()
    )
    assert code == 0
    # What start-up made is frozen first: the first collection does not walk it all.
    assert seen == "True frozen"
    assert bench.result["status"] == "completed"


def test_a_relay_that_launches_nothing_keeps_it_off(tmp_path):
    bench = Bench(tmp_path, "codex")
    seen, code = collector_at_exit(tmp_path, relay_script("codex"), "--help", env=bench.fake.env())
    assert code == 0
    assert seen == "False"


def test_lane_keeps_it_off_and_runs_turns_it_on(tmp_path):
    bench = Bench(tmp_path, "codex")
    scripts = relay_script("codex").parent
    seen, code = collector_at_exit(tmp_path, scripts / "lane.py", "--help", env=bench.fake.env())
    assert (seen, code) == ("False", 0)
    seen, code = collector_at_exit(tmp_path, scripts / "runs.py", "--help", env=bench.fake.env())
    assert (seen, code) == ("True frozen", 0)
