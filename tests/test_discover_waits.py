"""Discovery waits for its probes; it never spins on ones that have already answered."""

from __future__ import annotations

import os
import sys

from discoverkit import ANSWERS, install

from delegate_skills.discover import report


def test_a_slow_probe_is_waited_for_not_polled(tmp_path, monkeypatch):
    bindir = install(tmp_path / "bin", {key: ANSWERS[key] for key in ("codex", "claude")})
    slow = bindir / "claude"
    # claude's login probe answers after a second; its version probe at once.
    slow.write_text(
        "#!/bin/sh\n"
        'case "$*" in\n'
        '  "--version") echo "2.1.0 (Claude Code)"; exit 0;;\n'
        '  "auth status") sleep 1; echo \'{"loggedIn": true}\'; exit 0;;\n'
        "esac\nexit 3\n"
    )
    calls = []
    real_wait = report.wait

    def counted(futures, **kw):
        calls.append(len(futures))
        return real_wait(futures, **kw)

    monkeypatch.setattr(report, "wait", counted)
    env = {**os.environ, "PATH": f"{bindir}:/usr/bin:/bin", "HOME": str(tmp_path)}
    found = report.discover(env=env, platform=sys.platform, only={"codex", "claude"})
    assert sorted(entry["key"] for entry in found["discovered"]) == ["claude", "codex"]
    # Four probes (a version and a login probe each): at most one wait per probe that ends.
    assert 1 <= len(calls) <= 4, len(calls)
