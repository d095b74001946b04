"""`delegate skills install/uninstall/sync/list/doctor/prune`, run as a user runs them."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from skillskit import BUNDLE, Machine, bundled_revision, one_error_line

from delegate_skills import jsjson
from delegate_skills.installer import bundle

CODEX = "codex-delegate"


@pytest.fixture
def machine(tmp_path) -> Machine:
    return Machine(tmp_path / "m")


def revision_at(path: Path) -> str | None:
    return bundle.revision_or_none(str(path))


def test_install_disable_uninstall_reinstall_round_trip(machine):
    project = machine.project
    claude = project / ".claude" / "skills" / CODEX
    shared = project / ".agents" / "skills" / CODEX

    machine.ok("install", CODEX, "--agent", "claude-code", "--agent", "codex")
    assert revision_at(claude) == revision_at(shared) == bundled_revision(CODEX)
    assert machine.lock.read_bytes() == jsjson.document_bytes(
        {
            "version": 1,
            "skills": {
                CODEX: {"revision": bundled_revision(CODEX), "targets": ["claude-code", "codex"]}
            },
        }
    )

    machine.ok("disable", CODEX, "--agent", "claude-code")
    assert not claude.exists() and shared.is_dir()
    assert json.loads(machine.state.read_text())["skills"] == {
        CODEX: {"agents": {"claude-code": "off"}}
    }
    rows = machine.ok("list").json()["scopes"][0]["skills"][0]["targets"]
    assert [(r["agent"], r["enabled"], r["disk"]) for r in rows] == [
        ("codex", True, "current"),
        ("claude-code", False, "absent"),
    ]
    assert machine.skills("doctor").code == 0

    machine.ok("uninstall", CODEX)
    assert not claude.exists() and not shared.exists()
    assert machine.lock_doc() == {"version": 1, "skills": {}}
    # The switch outlives the uninstall...
    assert CODEX in json.loads(machine.state.read_text())["skills"]

    # ...so a reinstall comes back disabled for claude-code.
    machine.ok("install", CODEX, "--agent", "claude-code", "--agent", "codex")
    assert not claude.exists() and shared.is_dir()
    assert machine.lock_doc()["skills"][CODEX]["targets"] == ["claude-code", "codex"]

    machine.ok("enable", CODEX, "--agent", "claude-code")
    assert revision_at(claude) == bundled_revision(CODEX)

    machine.ok("disable", CODEX, "--agent", "claude-code")
    assert machine.ok("prune").json()["dropped"] == []
    machine.ok("uninstall", CODEX)
    pruned = machine.ok("prune").json()
    assert pruned["dropped"] == [CODEX]
    assert json.loads(machine.state.read_text())["skills"] == {}


def test_a_shared_directory_holds_the_skill_while_any_of_its_agents_is_on(machine):
    shared = machine.project / ".agents" / "skills" / CODEX
    machine.ok("install", CODEX, "--agent", "codex", "--agent", "cursor", "--agent", "pi")
    changes = machine.ok("install", CODEX, "--agent", "codex").json()["changes"]
    assert changes == []  # written once for all three, nothing left to do
    machine.ok("disable", CODEX, "--agent", "codex", "--agent", "pi")
    assert shared.is_dir()
    machine.ok("disable", CODEX, "--agent", "cursor")
    assert not shared.exists()
    machine.ok("enable", CODEX, "--agent", "pi")
    assert revision_at(shared) == bundled_revision(CODEX)


def test_a_hand_edited_copy_is_reported_and_kept_unless_forced(machine):
    machine.ok("install", CODEX, "--agent", "claude-code")
    skill_md = machine.project / ".claude" / "skills" / CODEX / "SKILL.md"
    skill_md.write_text(skill_md.read_text() + "\nMy own rule.\n")
    edited = skill_md.read_bytes()

    doctor = machine.skills("doctor")
    assert doctor.code == 1, doctor
    assert [(p["skill"], p["dir"], p["problem"]) for p in doctor.json()["problems"]] == [
        (CODEX, ".claude/skills", "modified copy")
    ]
    assert "--force" in doctor.json()["problems"][0]["fix"]
    rows = machine.ok("list").json()["scopes"][0]["skills"][0]["targets"]
    assert rows[0]["disk"] == "modified"

    kept = machine.skills("sync")
    assert kept.code == 1, kept
    assert kept.json()["scopes"][0]["refused"][0]["status"] == "modified"
    assert skill_md.read_bytes() == edited
    again = machine.skills("install", CODEX, "--agent", "claude-code")
    one_error_line(again)
    assert skill_md.read_bytes() == edited

    forced = machine.ok("sync", "--force").json()["scopes"][0]["changes"]
    assert [(c["action"], c["was"]) for c in forced] == [("replaced", "modified")]
    assert revision_at(skill_md.parent) == bundled_revision(CODEX)
    assert machine.skills("doctor").code == 0


def test_a_folder_we_did_not_install_is_left_alone_without_force(machine):
    theirs = machine.project / ".agents" / "skills" / CODEX
    theirs.mkdir(parents=True)
    (theirs / "SKILL.md").write_text("their own skill\n")

    line = one_error_line(machine.skills("install", CODEX))
    assert ".agents/skills/codex-delegate" in line and "--force" in line
    assert (theirs / "SKILL.md").read_text() == "their own skill\n"
    assert not machine.lock.exists()

    machine.ok("install", CODEX, "--force")
    assert revision_at(theirs) == bundled_revision(CODEX)
    assert machine.lock_doc()["skills"][CODEX]["targets"] == ["universal"]


def test_uninstall_keeps_a_changed_copy_without_force(machine):
    machine.ok("install", CODEX)
    copy = machine.project / ".agents" / "skills" / CODEX
    (copy / "notes.md").write_text("mine\n")
    one_error_line(machine.skills("uninstall", CODEX))
    assert (copy / "notes.md").exists()
    assert machine.lock_doc()["skills"][CODEX]["targets"] == ["universal"]
    machine.ok("uninstall", CODEX, "--force")
    assert not copy.exists()
    assert machine.lock_doc()["skills"] == {}


def test_the_lockfile_is_the_same_on_two_machines_and_a_no_op_sync_keeps_it(tmp_path):
    one = Machine(tmp_path / "one", umask=0o022)
    two = Machine(tmp_path / "two", umask=0o077)
    agents = ["--agent", "claude-code", "--agent", "codex", "--agent", "opencode"]
    for machine in (one, two):
        machine.ok("install", *agents)
        machine.ok("install", "kimi-delegate", "--agent", "cursor")
    data = one.lock.read_bytes()
    assert data == two.lock.read_bytes()
    assert data.endswith(b"}\n") and b"\n  " in data
    document = json.loads(data)
    assert list(document) == ["version", "skills"]
    assert list(document["skills"]) == sorted(bundle.skill_names())
    for name, entry in document["skills"].items():
        assert entry["revision"] == bundled_revision(name)
        assert entry["targets"] == sorted(entry["targets"])
        assert set(entry) == {"revision", "targets"}
    assert document["skills"]["kimi-delegate"]["targets"] == [
        "claude-code",
        "codex",
        "cursor",
        "opencode",
    ]
    # Copies made under umask 077 still carry the bundled revision.
    two_copy = two.project / ".claude" / "skills" / "kimi-delegate"
    assert revision_at(two_copy) == bundled_revision("kimi-delegate")

    stamp = os.stat(one.lock).st_mtime_ns
    synced = one.ok("sync").json()["scopes"]
    assert synced[0]["changes"] == [] and not synced[0]["lockfileWritten"]
    assert one.lock.read_bytes() == data
    assert os.stat(one.lock).st_mtime_ns == stamp


def test_a_clone_with_only_the_lockfile_is_restored_by_sync(tmp_path):
    origin = Machine(tmp_path / "origin")
    origin.ok("install", CODEX, "kimi-delegate", "--agent", "claude-code", "--agent", "codex")
    clone = Machine(tmp_path / "clone")
    clone.lock.parent.mkdir(parents=True)
    clone.lock.write_bytes(origin.lock.read_bytes())

    assert clone.skills("doctor").code == 1
    synced = clone.ok("sync").json()["scopes"][0]
    assert sorted((c["skill"], c["dir"], c["action"]) for c in synced["changes"]) == [
        (CODEX, ".agents/skills", "installed"),
        (CODEX, ".claude/skills", "installed"),
        ("kimi-delegate", ".agents/skills", "installed"),
        ("kimi-delegate", ".claude/skills", "installed"),
    ]
    for skill in (CODEX, "kimi-delegate"):
        for directory in (".agents/skills", ".claude/skills"):
            assert revision_at(clone.project / directory / skill) == bundled_revision(skill)
    assert clone.lock.read_bytes() == origin.lock.read_bytes()
    assert clone.skills("doctor").code == 0


def test_commands_find_the_project_from_a_subdirectory(machine):
    deeper = machine.project / "src" / "pkg"
    deeper.mkdir(parents=True)
    machine.ok("install", CODEX, cwd=deeper)  # no lockfile yet: the git top level
    assert machine.lock_doc()["skills"][CODEX]["targets"] == ["universal"]
    assert (machine.project / ".agents" / "skills" / CODEX).is_dir()
    listing = machine.ok("list", cwd=deeper).json()
    assert listing["scopes"][0]["root"] == str(machine.project)
    machine.ok("uninstall", CODEX, cwd=deeper)
    assert machine.lock_doc()["skills"] == {}


def test_unknown_lockfile_entries_are_kept_with_a_warning(machine):
    revision = "sha256:" + "ab" * 32
    future = {"revision": revision, "targets": ["codex"], "channel": "beta"}
    odd = {"revision": revision, "targets": ["codex"], "mode": "hardlink"}
    machine.lock.parent.mkdir(parents=True)
    machine.lock.write_bytes(
        jsjson.document_bytes(
            {
                "version": 1,
                "skills": {
                    CODEX: {
                        "revision": revision,
                        "targets": ["vim", "codex"],
                        "pinned": {"by": "someone"},
                    },
                    "future-delegate": future,
                    "kimi-delegate": odd,
                },
                "generator": "a newer delegate-skills",
            }
        )
    )
    synced = machine.ok("sync")
    for needle in (
        "unknown field(s) generator",
        "skill 'future-delegate': skill not in this bundle",
        "skill 'kimi-delegate': entry in a form this version does not know",
        f"skill '{CODEX}': unknown agent(s) vim",
        f"skill '{CODEX}': unknown field(s) pinned",
    ):
        assert needle in synced.err, synced
    assert all(line.startswith("delegate: warning: ") for line in synced.err.splitlines())
    document = machine.lock_doc()
    assert document["skills"]["future-delegate"] == future
    assert document["skills"]["kimi-delegate"] == odd
    assert document["generator"] == "a newer delegate-skills"
    assert document["skills"][CODEX] == {
        "revision": bundled_revision(CODEX),
        "targets": ["codex", "vim"],
        "pinned": {"by": "someone"},
    }
    assert revision_at(machine.project / ".agents" / "skills" / CODEX) == bundled_revision(CODEX)
    assert not (machine.project / ".agents" / "skills" / "future-delegate").exists()

    machine.ok("install", "pi-delegate")
    after = machine.lock_doc()
    assert after["skills"]["future-delegate"] == future
    assert after["skills"]["kimi-delegate"] == odd
    assert set(after["skills"]) == {CODEX, "future-delegate", "kimi-delegate", "pi-delegate"}

    doctor = machine.skills("doctor")
    assert doctor.code == 1
    problems = {(p["skill"], p["problem"]) for p in doctor.json()["problems"]}
    assert problems == {
        ("future-delegate", "unknown entry: skill not in this bundle"),
        ("kimi-delegate", "unknown entry: entry in a form this version does not know"),
        (CODEX, "unknown entry: unknown agent(s) vim"),
    }


def test_another_tools_lockfile_is_never_written(machine):
    theirs_project = machine.project / "skills-lock.json"
    theirs_global = machine.home / ".agents" / ".skill-lock.json"
    for path in (theirs_project, theirs_global):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b'{"version": 3, "skills": {}}\n')
    every_agent = [
        a for name in ("claude-code", "codex", "cursor", "pi") for a in ("--agent", name)
    ]
    for scope in ("project", "global"):
        machine.ok("install", CODEX, "--scope", scope, *every_agent)
        machine.ok("disable", CODEX, "--agent", "codex")
        machine.ok("sync", "--force")
        machine.ok("uninstall", CODEX, "--scope", scope)
    for path in (theirs_project, theirs_global):
        assert path.read_bytes() == b'{"version": 3, "skills": {}}\n'
    names = {p.name for p in machine.home.parent.rglob("*")}
    assert "skills-lock.json" in names and ".skill-lock.json" in names
    written = [p for p in machine.home.parent.rglob("*skill*lock*") if p.is_file()]
    assert sorted(str(p.relative_to(machine.home.parent)) for p in written) == [
        "home/.agents/.skill-lock.json",
        "home/.config/delegate-skills/skills.lock.json",
        "home/.config/delegate-skills/skills.lock.json.lock",
        "project/.agents/delegate-skills.lock.json",
        "project/.git/delegate-skills/.agents/delegate-skills.lock.json.lock",
        "project/skills-lock.json",
    ]


def test_global_installs_use_the_agents_home_directories(machine):
    claude_home = machine.home / "claude-config"
    machine.env["CLAUDE_CONFIG_DIR"] = str(claude_home)
    machine.env["XDG_CONFIG_HOME"] = str(machine.home / "xdg")
    agents = ["claude-code", "codex", "cursor", "opencode", "universal", "github-copilot"]
    machine.ok("install", CODEX, "--scope", "global", *[x for a in agents for x in ("--agent", a)])
    expected = [
        claude_home / "skills",
        machine.home / ".agents" / "skills",
        machine.home / ".cursor" / "skills",
        machine.home / "xdg" / "opencode" / "skills",
        machine.home / "xdg" / "agents" / "skills",
        machine.home / ".copilot" / "skills",
    ]
    for directory in expected:
        assert revision_at(directory / CODEX) == bundled_revision(CODEX), directory
    lock = json.loads((machine.state_home / "skills.lock.json").read_text())
    assert lock["skills"][CODEX]["targets"] == sorted(agents)
    assert not machine.lock.exists()
    listing = machine.ok("list").json()
    assert [s["scope"] for s in listing["scopes"]] == ["global"]


def test_link_mode_and_switching_back_to_copies(machine):
    machine.ok("install", CODEX, "--link", "--agent", "claude-code")
    link = machine.project / ".claude" / "skills" / CODEX
    assert link.is_symlink()
    assert link.resolve() == (BUNDLE / CODEX).resolve()
    assert machine.lock_doc()["skills"][CODEX] == {
        "revision": bundled_revision(CODEX),
        "targets": ["claude-code"],
        "mode": "link",
    }
    assert machine.skills("doctor").code == 0
    changes = machine.ok("install", CODEX, "--agent", "claude-code").json()["changes"]
    assert [(c["action"], c["mode"]) for c in changes] == [("switched", "copy")]
    assert not link.is_symlink() and revision_at(link) == bundled_revision(CODEX)
    assert "mode" not in machine.lock_doc()["skills"][CODEX]


def test_sync_dry_run_changes_nothing(machine):
    machine.ok("install", CODEX, "--agent", "claude-code")
    copy = machine.project / ".claude" / "skills" / CODEX
    shutil.rmtree(copy)
    before = machine.lock.read_bytes()
    dry = machine.ok("sync", "--dry-run").json()["scopes"][0]
    assert dry["dryRun"] and [c["action"] for c in dry["changes"]] == ["installed"]
    assert not copy.exists() and machine.lock.read_bytes() == before
    assert not machine.state.exists()


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("install", "--agent", "vim"), "unknown agent 'vim'"),
        (("install", "nope-delegate"), "unknown skill 'nope-delegate'"),
        (("disable", "nope-delegate", "--agent", "codex"), "unknown skill 'nope-delegate'"),
        (("uninstall", CODEX), "nothing to uninstall"),
    ],
)
def test_user_errors_are_one_line(machine, args, needle):
    assert needle in one_error_line(machine.skills(*args))


def test_a_bad_lockfile_is_one_line_and_left_as_is(machine):
    machine.lock.parent.mkdir(parents=True)
    for raw, needle in (
        (b'{"version": 2, "skills": {}}\n', "is lockfile version 2"),
        (b'{"skills": {}}\n', 'no "version"'),
        (b"{oops", "not valid JSON"),
    ):
        machine.lock.write_bytes(raw)
        for command in (("list",), ("sync",), ("install", CODEX), ("doctor",)):
            line = one_error_line(machine.skills(*command))
            assert str(machine.lock) in line and needle in line
            assert machine.lock.read_bytes() == raw
