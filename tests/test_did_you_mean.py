"""A mistyped lane, implementer or run id is answered with the closest name."""

from __future__ import annotations

import subprocess

from conftest import PYTHON, delegate, fleet_doc, write_json
from relaykit import Bench


def test_a_mistyped_lane(tmp_path, home, global_config):
    write_json(global_config, fleet_doc({"review": {"implementer": "codex", "readOnly": True}}))
    bench = Bench(tmp_path, "codex")
    run = bench.relay("--lane", "reveiw")
    assert run.code == 2
    assert run.err == "relay: fleet lane not found: reveiw; did you mean review?\n"
    far = bench.relay("--lane", "xyz")
    assert far.err == "relay: fleet lane not found: xyz\n"  # nothing close: the Node wording


def test_a_mistyped_implementer(home):
    done = delegate("relay", "codx", "--help")
    assert done.code == 2
    assert done.err.startswith("delegate: unknown implementer 'codx'; did you mean codex? (one of:")
    found = delegate("discover", "claud")
    assert found.code == 2
    assert "'claud' is not an implementer; did you mean claude?" in found.err


def test_a_mistyped_run_id(tmp_path, home):
    bench = Bench(tmp_path, "codex")
    bench.script({})
    env = bench.fake.env(XDG_STATE_HOME=str(tmp_path / "state"))
    from fakes import relay

    done = relay("codex", *bench.args(), env=env, out_dir=bench.out)
    run_id = done.result["relayRunId"]
    typo = run_id[:-1] + ("x" if run_id[-1] != "x" else "y")
    shown = subprocess.run(
        [PYTHON, "-m", "delegate_skills.commands.cli", "runs", "show", typo],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert shown.returncode == 2
    assert shown.stderr.endswith(f"; did you mean {run_id}?\n")
    exact = subprocess.run(
        [PYTHON, "-m", "delegate_skills.commands.cli", "runs", "show", run_id[:5], "--json"],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert exact.returncode == 0, exact.stderr
