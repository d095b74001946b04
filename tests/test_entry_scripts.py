"""Skill scripts find the core: from a checkout, installed, or via `delegate`; else say how."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest
from conftest import ROOT

SKILL = ROOT / "skills" / "codex-delegate"


def run(argv: list[str], env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60, check=False)


def test_from_the_checkout_without_site_packages():
    done = run([sys.executable, "-I", "-S", str(SKILL / "scripts" / "relay.py"), "--help"])
    assert done.returncode == 0, done.stderr
    assert "codex-delegate" in done.stdout


def test_copied_alone_with_the_package_installed(tmp_path):
    copy = tmp_path / "agent-skills" / "codex-delegate"
    shutil.copytree(SKILL, copy)
    done = run([sys.executable, str(copy / "scripts" / "relay.py"), "--help"])
    assert done.returncode == 0, done.stderr
    assert "codex-delegate" in done.stdout


def test_symlinked_skill_folder(tmp_path):
    link = tmp_path / "codex-delegate"
    link.symlink_to(SKILL)
    done = run([sys.executable, "-I", "-S", str(link / "scripts" / "relay.py"), "--help"])
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("script", ["relay.py", "lane.py", "config.py"])
def test_without_the_core_it_says_how_to_install(tmp_path, script):
    copy = tmp_path / "codex-delegate"
    shutil.copytree(SKILL, copy)
    env = {"PATH": "/usr/bin:/bin"}
    done = run([sys.executable, "-I", "-S", str(copy / "scripts" / script), "--help"], env=env)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1
    assert "python3 -m pip install delegate-skills" in done.stderr


def test_falls_back_to_delegate_on_path(tmp_path):
    copy = tmp_path / "codex-delegate"
    shutil.copytree(SKILL, copy)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    delegate = bindir / "delegate"
    delegate.write_text(
        f"#!{sys.executable}\nfrom delegate_skills.commands.cli import main\nraise SystemExit(main())\n"
    )
    delegate.chmod(0o755)
    env = {"PATH": f"{bindir}:/usr/bin:/bin"}
    done = run([sys.executable, "-I", "-S", str(copy / "scripts" / "relay.py"), "--help"], env=env)
    assert done.returncode == 0, done.stderr
    assert "codex-delegate" in done.stdout


def test_renamed_folder_uses_the_skill_name(tmp_path):
    copy = tmp_path / "my-codex"
    shutil.copytree(SKILL, copy)
    (copy / "SKILL.md").write_text("---\nname: codex-delegate\n---\n")
    done = run([sys.executable, str(copy / "scripts" / "relay.py"), "--help"])
    assert done.returncode == 0, done.stderr
    assert "codex-delegate" in done.stdout
