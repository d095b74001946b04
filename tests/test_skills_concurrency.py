"""Many `delegate skills disable` processes at once: every switch lands, nothing is half-written."""

from __future__ import annotations

import json
import subprocess

from skillskit import PYTHON, Machine

from delegate_skills.installer import bundle


def test_16_concurrent_disables_on_different_skills_all_land(tmp_path):
    machine = Machine(tmp_path / "m")
    machine.ok("install", "--agent", "universal", "--agent", "claude-code")
    skills = bundle.skill_names()[:16]
    assert len(skills) == 16
    procs = [
        subprocess.Popen(
            [
                PYTHON,
                "-m",
                "delegate_skills.commands.skills",
                "disable",
                skill,
                "--agent",
                "universal",
            ],
            cwd=machine.project,
            env=machine.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for skill in skills
    ]
    outcomes = [(p.wait(timeout=300), *p.communicate()) for p in procs]
    assert [code for code, _, _ in outcomes] == [0] * 16, outcomes

    document = json.loads(machine.state.read_text())
    assert document["skills"] == {skill: {"agents": {"universal": "off"}} for skill in skills}
    shared = machine.project / ".agents" / "skills"
    claude = machine.project / ".claude" / "skills"
    remaining = set(bundle.skill_names()) - set(skills)
    assert {p.name for p in shared.iterdir()} == remaining
    assert {p.name for p in claude.iterdir()} == set(bundle.skill_names())
    doctor = machine.skills("doctor")
    assert doctor.code == 0, doctor
