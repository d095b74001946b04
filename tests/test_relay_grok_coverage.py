"""A read-only grok run whose verdict cannot be proven says its coverage is incomplete.

The Node bundle's check "grok spawn error": the version preflight passes, then
the binary is gone when the run launches, in a folder outside git. The result
is `failed` (exit 1) with `readOnlyViolation: null`, and the one summary
printed warns that coverage is incomplete.
"""

from __future__ import annotations

import json
import subprocess

from fakes import relay_argv

VANISHING_GROK = """#!/bin/sh
for a in "$@"; do
  case "$a" in --version|version|-v) mv "$0" "$0.removed"; echo "fake-cli 0.0.0"; exit 0;; esac
done
exit 0
"""


def test_a_grok_that_vanishes_after_its_preflight_leaves_an_unproven_verdict(tmp_path):
    bindir, work, out = tmp_path / "bin", tmp_path / "work", tmp_path / "out"
    bindir.mkdir()
    work.mkdir()
    (bindir / "grok").write_text(VANISHING_GROK)
    (bindir / "grok").chmod(0o755)
    brief = tmp_path / "brief.txt"
    brief.write_text("Look around.\n")
    # Unconfined (detection only): confined, the binary could not move itself away.
    env = {"PATH": f"{bindir}:/usr/bin:/bin", "HOME": str(tmp_path),
           "XDG_STATE_HOME": str(tmp_path / "state"), "DELEGATE_RELAY_ENFORCE": "0"}  # fmt: skip
    done = subprocess.run(
        relay_argv("grok", "--brief", str(brief), "--cd", str(work), "--out-dir", str(out),
                   "--read-only"),
        capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL, timeout=60,
    )  # fmt: skip
    assert (bindir / "grok.removed").exists()
    assert done.returncode == 1, done.stderr
    result = json.loads((out / "result.json").read_text())
    assert (result["status"], result["readOnlyViolation"]) == ("failed", None)
    assert "its coverage is incomplete" in done.stdout
    assert done.stdout.count("relay: failed") == 1
