"""A bundle that changes under installed copies: stale revisions, updates, crashes mid-copy."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
from pathlib import Path

import pytest
from conftest import make_repo
from skillskit import BUNDLE

from delegate_skills import installer
from delegate_skills.commands import skills as skills_cli
from delegate_skills.installer import bundle

CODEX = "codex-delegate"


class InProcess:
    """`delegate skills` run in this process against a bundle the test can change."""

    def __init__(self, tmp_path: Path, monkeypatch, capsys) -> None:
        self.capsys = capsys
        self.bundle = tmp_path / "bundle"
        for skill in (CODEX, "delegate-setup"):
            shutil.copytree(BUNDLE / skill, self.bundle / skill)
        home = tmp_path / "home"
        home.mkdir()
        monkeypatch.setenv("HOME", str(home))
        monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
        monkeypatch.setenv("DELEGATE_SKILLS_HOME", str(home / "state"))
        for name in ("XDG_CONFIG_HOME", "XDG_STATE_HOME", "CLAUDE_CONFIG_DIR"):
            monkeypatch.delenv(name, raising=False)
        self.project = make_repo(tmp_path / "project")
        monkeypatch.setattr(bundle, "bundle_dir", lambda: self.bundle)
        monkeypatch.setattr(installer, "_warned", set())

    def __call__(self, *args: str) -> tuple[int, dict | None, str]:
        self.capsys.readouterr()
        try:
            code = skills_cli.main([*args, "--cwd", str(self.project)])
        except SystemExit as done:
            code = done.code
        out, err = self.capsys.readouterr()
        return code, (json.loads(out) if out.strip() else None), err

    def revision(self, *parts: str) -> str | None:
        return bundle.revision_or_none(str(self.project.joinpath(*parts)))

    def bundled(self) -> str:
        return bundle.revision(self.bundle / CODEX)

    def lock(self) -> dict:
        return json.loads((self.project / ".agents" / "delegate-skills.lock.json").read_text())


@pytest.fixture
def run(tmp_path, monkeypatch, capsys) -> InProcess:
    return InProcess(tmp_path, monkeypatch, capsys)


def test_a_new_bundle_makes_copies_stale_and_sync_updates_them(run):
    assert run("install", CODEX, "--agent", "claude-code", "--agent", "codex")[0] == 0
    old = run.bundled()
    edited = run.project / ".claude" / "skills" / CODEX / "SKILL.md"
    edited.write_text("my version\n")

    (run.bundle / CODEX / "references" / "new.md").write_text("new in this release\n")
    new = run.bundled()
    assert new != old

    code, report, _ = run("doctor")
    assert code == 1
    assert [(p["dir"], p["problem"]) for p in report["problems"]] == [
        (None, f"stale revision {old} (bundled: {new})"),
        (".agents/skills", "copy of an older revision"),
        (".claude/skills", "modified copy"),
    ]

    code, report, _ = run("sync")
    assert code == 1  # the edited copy was left alone
    scope = report["scopes"][0]
    assert [(c["dir"], c["action"]) for c in scope["changes"] if "dir" in c] == [
        (".agents/skills", "updated")
    ]
    assert [r["dir"] for r in scope["refused"]] == [".claude/skills"]
    assert run.revision(".agents", "skills", CODEX) == new
    assert edited.read_text() == "my version\n"
    assert run.lock()["skills"][CODEX]["revision"] == new


def test_an_executable_bit_in_the_bundle_is_an_update(run):
    run("install", CODEX)
    script = run.bundle / CODEX / "references" / "review-and-land.md"
    os.chmod(script, 0o755)
    code, report, _ = run("sync")
    assert code == 0
    assert [c["action"] for c in report["scopes"][0]["changes"]] == ["updated", "recorded"]
    copied = run.project / ".agents" / "skills" / CODEX / "references" / "review-and-land.md"
    assert os.stat(copied).st_mode & 0o111


def test_a_crash_mid_copy_leaves_the_old_copy_whole(run, monkeypatch):
    run("install", CODEX)
    old = run.bundled()
    lock_before = (run.project / ".agents" / "delegate-skills.lock.json").read_bytes()
    (run.bundle / CODEX / "SKILL.md").write_text("a newer skill\n")

    def half_copy(source: str, destination: str) -> None:
        os.makedirs(os.path.join(destination, "references"))
        shutil.copy(os.path.join(source, "SKILL.md"), destination)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(bundle, "copy_skill", half_copy)
    code, _, err = run("sync")
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("delegate: cannot write ")
    assert "No space left on device" in err
    skills_dir = run.project / ".agents" / "skills"
    assert sorted(p.name for p in skills_dir.iterdir()) == [CODEX]
    assert run.revision(".agents", "skills", CODEX) == old
    assert (run.project / ".agents" / "delegate-skills.lock.json").read_bytes() == lock_before


def test_what_a_dead_writer_left_behind_is_swept(run):
    run("install", CODEX)
    skills_dir = run.project / ".agents" / "skills"
    for leftover in (f".{CODEX}.tmp-1-dead", f".{CODEX}.old-1-dead"):
        (skills_dir / leftover / "references").mkdir(parents=True)
    (skills_dir / CODEX / "SKILL.md").unlink()  # this one was changed: left alone
    code, _, _ = run("sync")
    assert code == 1
    assert sorted(p.name for p in skills_dir.iterdir()) == [CODEX]


def test_text_reports_for_a_person(run, monkeypatch):
    run("install", CODEX, "--agent", "claude-code")
    monkeypatch.setattr(skills_cli, "_wants_json", lambda as_json: False)
    run.capsys.readouterr()
    with contextlib.suppress(SystemExit):
        skills_cli.main(["list", "--cwd", str(run.project)])
    text = run.capsys.readouterr().out
    assert f"project {run.project}" in text
    assert f"  {CODEX}  copy sha256:" in text
    assert "    claude-code      on   current   .claude/skills" in text
    (run.project / ".claude" / "skills" / CODEX / "SKILL.md").write_text("x\n")
    try:
        skills_cli.main(["doctor", "--cwd", str(run.project)])
    except SystemExit as done:
        assert done.code == 1
    text = run.capsys.readouterr().out
    assert text.startswith(f"[{run.project}] {CODEX} .claude/skills: modified copy; fix: keep it")
