"""Generated files are committed as the generator makes them."""

from __future__ import annotations

import subprocess

from conftest import PYTHON, ROOT


def test_generated_files_are_up_to_date():
    done = subprocess.run(
        [PYTHON, str(ROOT / "scripts" / "build_dist.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def test_schema_accepts_what_the_rules_accept():
    from delegate_skills import fleet
    from delegate_skills.schema import fleet_validator

    document = {
        "version": "delegate-fleet.v1",
        "extra": True,
        "lanes": {
            "a": {"implementer": "opencode", "model": "x/y", "variant": "high", "readOnly": True},
            "b": {"implementer": "qoder", "permissionMode": "plan", "model": "any text"},
        },
    }
    assert list(fleet_validator().iter_errors(document)) == []
    fleet.check_against_schema(document, "F")


def test_schema_rejects_a_dial_the_implementer_lacks():
    from delegate_skills.schema import fleet_validator

    document = {
        "version": "delegate-fleet.v1",
        "lanes": {"a": {"implementer": "kimi", "effort": "x"}},
    }
    assert list(fleet_validator().iter_errors(document)) != []
