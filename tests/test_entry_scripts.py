"""Skill scripts run the core bundled beside them, wherever the folder sits and however it is named."""

from __future__ import annotations

import shutil
import subprocess
import sys

from conftest import ROOT

SKILL = ROOT / "skills" / "codex-delegate"


def run(argv: list[str], env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60, check=False)


def test_from_the_checkout_without_site_packages():
    done = run([sys.executable, "-I", "-S", str(SKILL / "scripts" / "relay.py"), "--help"])
    assert done.returncode == 0, done.stderr
    assert "codex-delegate" in done.stdout


def test_bundled_core_wins_over_an_installed_one(tmp_path):
    """With the package installed for this interpreter, a copy still runs its own core."""
    copy = tmp_path / "agent-skills" / "codex-delegate"
    shutil.copytree(SKILL, copy)
    probe = (
        "import runpy, sys; sys.argv = [sys.argv[1], '--help']\n"
        "try:\n    runpy.run_path(sys.argv[0], run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        "import delegate_skills; print(delegate_skills.__file__, file=sys.stderr)\n"
    )
    done = run([sys.executable, "-c", probe, str(copy / "scripts" / "relay.py")])
    assert "codex-delegate" in done.stdout
    assert done.stderr.strip() == str(copy / "scripts" / "delegate_skills" / "__init__.py")


def test_symlinked_skill_folder(tmp_path):
    link = tmp_path / "codex-delegate"
    link.symlink_to(SKILL)
    done = run([sys.executable, "-I", "-S", str(link / "scripts" / "relay.py"), "--help"])
    assert done.returncode == 0, done.stderr


def test_renamed_folder_uses_the_skill_name(tmp_path):
    copy = tmp_path / "my-codex"
    shutil.copytree(SKILL, copy)
    (copy / "SKILL.md").write_text("---\nname: codex-delegate\n---\n")
    done = run([sys.executable, str(copy / "scripts" / "relay.py"), "--help"])
    assert done.returncode == 0, done.stderr
    assert "codex-delegate" in done.stdout
