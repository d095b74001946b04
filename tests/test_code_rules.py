"""Rules the code itself keeps: public standard-library API, and a stdlib-only skill core."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from conftest import ROOT

SOURCES = sorted([*(ROOT / "src").rglob("*.py"), *(ROOT / "relays").rglob("*.py")])
#: What the `delegate` command may use that a skill folder's core must not.
THIRD_PARTY = {"click", "jsonschema", "filelock", "git", "mcp"}


def imported_modules(path: Path) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
    return found


def test_no_private_module_is_imported():
    private = [
        f"{path.relative_to(ROOT)}:{line}: {name}"
        for path in SOURCES
        for line, name in imported_modules(path)
        if name.split(".")[0].startswith("_") and name != "__future__"
    ]
    assert private == []
    assert len(SOURCES) > 50


def test_the_bundled_core_uses_the_standard_library_only():
    """Every module a skill folder carries imports only stdlib and delegate_skills."""
    bundled = sorted((ROOT / "skills").glob("*/scripts/delegate_skills/**/*.py"))
    assert len(bundled) > 18 * 10
    outside = set()
    for path in bundled:
        for line, name in imported_modules(path):
            top = name.split(".")[0]
            if top != "delegate_skills" and top not in sys.stdlib_module_names:
                outside.add(f"{path.relative_to(ROOT)}:{line}: {name}")
    # filelock is tried first and stands aside when missing (store._make_lock).
    assert {entry.rsplit(": ", 1)[1] for entry in outside} <= {"filelock"}


def test_the_cli_packages_are_not_bundled():
    bundled = {path.name for path in (ROOT / "skills").glob("*/scripts/delegate_skills/*")}
    assert {"relay", "skillscripts", "registry.py"} <= bundled
    assert not bundled & {"commands", "installer", "schema"}
