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
    from delegate_skills.schema import check_fleet, fleet_validator

    document = {
        "version": "delegate-fleet.v1",
        "extra": True,
        "lanes": {
            "a": {"implementer": "opencode", "model": "x/y", "variant": "high", "readOnly": True},
            "b": {"implementer": "qoder", "permissionMode": "plan", "model": "any text"},
        },
    }
    assert list(fleet_validator().iter_errors(document)) == []
    check_fleet(document, "F")


def test_schema_rejects_a_dial_the_implementer_lacks():
    from delegate_skills.schema import fleet_validator

    document = {
        "version": "delegate-fleet.v1",
        "lanes": {"a": {"implementer": "kimi", "effort": "x"}},
    }
    assert list(fleet_validator().iter_errors(document)) != []


def _build_dist():
    import importlib
    import sys

    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        return importlib.import_module("build_dist")
    finally:
        sys.path.remove(str(ROOT / "scripts"))


def test_two_builds_give_the_same_bytes():
    build_dist = _build_dist()
    first, second = build_dist.outputs(), build_dist.outputs()
    assert first == second
    assert sum(path.startswith("skills/codex-delegate/scripts/delegate_skills/") for path in first)


def test_each_skill_carries_only_the_core_its_scripts_import():
    files = _build_dist().outputs()

    def bundled(skill: str) -> set[str]:
        prefix = f"skills/{skill}/scripts/delegate_skills/"
        return {path[len(prefix) :] for path in files if path.startswith(prefix)}

    setup, codex = bundled("delegate-setup"), bundled("codex-delegate")
    assert {"lanes.py", "fleet.py", "skillscripts/lane.py", "discover.py"} <= setup
    assert not {path for path in setup if path.startswith(("relay/", "relays/"))}
    assert {"relay/engine.py", "relay/child.py", "relays/__init__.py", "relays/codex.py"} <= codex
    assert {path for path in codex if path.startswith("relays/")} == {
        "relays/__init__.py",
        "relays/codex.py",
    }
    for skill in (setup, codex):
        assert not {path for path in skill if path.startswith(("commands/", "installer/"))}
        assert "schema/__init__.py" not in skill


def test_check_names_a_bundled_file_the_core_no_longer_has(tmp_path):
    bundle = tmp_path / "skills" / "x-delegate" / "scripts" / "delegate_skills"
    (bundle / "relay").mkdir(parents=True)
    (bundle / "kept.py").write_text("")
    (bundle / "relay" / "gone.py").write_text("")
    files = {"skills/x-delegate/scripts/delegate_skills/kept.py": b""}
    stale = _build_dist().stale_files(files, str(tmp_path))
    assert stale == ["skills/x-delegate/scripts/delegate_skills/relay/gone.py"]


def test_closure_follows_imports_inside_functions_and_from_package_imports(tmp_path):
    import sys

    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        from distgen import core
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    package = tmp_path / "src" / "delegate_skills"
    (package / "sub").mkdir(parents=True)
    (tmp_path / "relays").mkdir()
    (tmp_path / "relays" / "__init__.py").write_text("")
    (tmp_path / "relays" / "k.py").write_text("from delegate_skills.sub import leaf\n")
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "top.py").write_text("def f():\n    from . import lazy, NAME\n")
    (package / "lazy.py").write_text("from .sub.leaf import thing\n")
    (package / "sub" / "leaf.py").write_text("import os\nfrom .. import unused_name\n")
    (package / "never.py").write_text("")
    found = core.closure(
        core.Tree(str(tmp_path)), ["delegate_skills.top", "delegate_skills.relays.k"]
    )
    assert found == [
        "delegate_skills",
        "delegate_skills.lazy",
        "delegate_skills.relays",
        "delegate_skills.relays.k",
        "delegate_skills.sub",
        "delegate_skills.sub.leaf",
        "delegate_skills.top",
    ]
