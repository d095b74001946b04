"""state.json: sparse disables, unknown fields kept byte for byte, versions, migrations, corruption."""

from __future__ import annotations

import copy
import json

import pytest
from skillskit import Machine, one_error_line

from delegate_skills import jsjson
from delegate_skills.installer import files, state

ORIGINAL = {
    "version": 1,
    "writtenBy": files.WRITTEN_BY,
    "skills": {
        "claude-delegate": {
            "agents": {"cursor": "maybe", "pi": "off"},
            "note": {"by": "a newer version", "values": [1, 2.5, True, None, "ü"]},
        },
        "codex-delegate": {"pinned": True},
    },
    "alpha-extra": 3,
    "zeta": {"nested": {"deep": ["x", {"y": "z"}]}},
}


@pytest.fixture
def machine(tmp_path) -> Machine:
    return Machine(tmp_path / "m")


def write_state(machine: Machine, document=None, raw: bytes | None = None) -> bytes:
    machine.state.parent.mkdir(parents=True, exist_ok=True)
    data = raw if raw is not None else jsjson.document_bytes(document)
    machine.state.write_bytes(data)
    return data


def test_fixture_is_in_canonical_form():
    # Two-space JSON and a newline, our fields first, unknown ones after in sorted order.
    assert (
        jsjson.document_bytes(ORIGINAL)
        == (json.dumps(ORIGINAL, indent=2, ensure_ascii=False) + "\n").encode()
    )


def test_unknown_fields_at_every_level_round_trip_through_disable_and_enable(machine):
    original = write_state(machine, ORIGINAL)

    machine.ok("disable", "codex-delegate", "--agent", "cursor")
    middle = json.loads(machine.state.read_text())
    expected = copy.deepcopy(ORIGINAL)
    expected["skills"]["codex-delegate"] = {"agents": {"cursor": "off"}, "pinned": True}
    assert middle == expected
    assert list(middle) == ["version", "writtenBy", "skills", "alpha-extra", "zeta"]
    assert list(middle["skills"]["codex-delegate"]) == ["agents", "pinned"]

    machine.ok("enable", "codex-delegate", "--agent", "cursor")
    assert machine.state.read_bytes() == original

    machine.ok("disable", "claude-delegate", "--agent", "codex")
    assert json.loads(machine.state.read_text())["skills"]["claude-delegate"]["agents"] == {
        "codex": "off",
        "cursor": "maybe",
        "pi": "off",
    }
    machine.ok("enable", "claude-delegate", "--agent", "codex")
    assert machine.state.read_bytes() == original


def test_enable_removes_only_the_exact_off_it_wrote(machine):
    original = write_state(machine, ORIGINAL)
    result = machine.ok("enable", "claude-delegate", "--agent", "cursor")
    assert result.json()["changed"] == []
    assert machine.state.read_bytes() == original


def test_the_last_disable_removes_the_entry(machine):
    machine.ok("disable", "pi-delegate", "--agent", "pi", "--agent", "codex")
    assert json.loads(machine.state.read_text())["skills"] == {
        "pi-delegate": {"agents": {"codex": "off", "pi": "off"}}
    }
    machine.ok("enable", "pi-delegate", "--agent", "pi")
    machine.ok("enable", "pi-delegate", "--agent", "codex")
    assert json.loads(machine.state.read_text()) == {
        "version": 1,
        "writtenBy": files.WRITTEN_BY,
        "skills": {},
    }


def test_a_missing_file_is_an_empty_state(machine):
    listing = machine.ok("list").json()
    assert listing["disabled"] == {}
    assert not machine.state.exists()


READERS = [("list",), ("doctor",), ("sync", "--dry-run")]
WRITERS = [("disable", "codex-delegate", "--agent", "cursor"), ("sync",)]


@pytest.mark.parametrize("command", READERS + WRITERS)
def test_a_newer_version_is_a_hard_stop(machine, command):
    data = write_state(machine, {"version": 2, "skills": {}})
    line = one_error_line(machine.skills(*command))
    assert str(machine.state) in line
    assert "version 2" in line and "version 1" in line
    assert "upgrade delegate-skills" in line
    assert machine.state.read_bytes() == data


@pytest.mark.parametrize("command", READERS + WRITERS)
def test_no_version_is_a_hard_stop(machine, command):
    data = write_state(machine, {"skills": {"codex-delegate": {"agents": {"pi": "off"}}}})
    line = one_error_line(machine.skills(*command))
    assert line == (
        f'delegate: {machine.state} has no "version" field; '
        "this delegate-skills reads state version 1"
    )
    assert machine.state.read_bytes() == data


@pytest.mark.parametrize("raw", [b"{not json", b"[1, 2]", b"\xff\xfe", b""])
def test_a_corrupt_file_is_reported_not_moved_by_readers(machine, raw):
    write_state(machine, raw=raw)
    for command in READERS:
        line = one_error_line(machine.skills(*command))
        assert str(machine.state) in line
        assert machine.state.read_bytes() == raw
        assert sorted(p.name for p in machine.state_home.iterdir()) == ["state.json"]


def test_a_corrupt_file_is_moved_aside_by_a_writer(machine):
    write_state(machine, raw=b"{not json")
    result = machine.ok("disable", "codex-delegate", "--agent", "cursor")
    aside = [p for p in machine.state_home.iterdir() if p.name.startswith("state.json.corrupt-")]
    assert len(aside) == 1
    assert aside[0].read_bytes() == b"{not json"
    assert aside[0].name[len("state.json.corrupt-") :].endswith("Z")
    assert f"moved it to {aside[0]}" in result.err
    assert json.loads(machine.state.read_text())["skills"] == {
        "codex-delegate": {"agents": {"cursor": "off"}}
    }


DRAFT = {
    "version": 0,
    "disabled": {"codex-delegate": ["cursor", "pi"], "kimi-delegate": ["codex"]},
    "skills": {"codex-delegate": {"note": "kept"}},
    "extra": [1, 2],
}
MIGRATED = {
    "version": 1,
    "skills": {
        "codex-delegate": {"note": "kept", "agents": {"cursor": "off", "pi": "off"}},
        "kimi-delegate": {"agents": {"codex": "off"}},
    },
    "extra": [1, 2],
}


def test_a_migration_step_is_pure_and_idempotent():
    draft = copy.deepcopy(DRAFT)
    once = state.migrate_0_to_1(draft)
    assert draft == DRAFT
    assert once == MIGRATED
    assert state.migrate_0_to_1(once) == once
    assert state.migrate_0_to_1(state.migrate_0_to_1(draft)) == once


def test_the_ladder_covers_every_version_up_to_the_current_one():
    assert state.VERSION == 1
    assert len(state.MIGRATIONS) == state.VERSION - state.OLDEST
    migrated, changed = state.migrate("state.json", copy.deepcopy(DRAFT))
    assert changed and migrated == MIGRATED
    current, changed = state.migrate("state.json", copy.deepcopy(MIGRATED))
    assert not changed and current == MIGRATED


def test_readers_migrate_in_memory_and_writers_save_the_migration(machine):
    data = write_state(machine, DRAFT)
    assert machine.ok("list").json()["disabled"] == {
        "codex-delegate": ["cursor", "pi"],
        "kimi-delegate": ["codex"],
    }
    assert machine.state.read_bytes() == data
    machine.ok("sync")
    document = json.loads(machine.state.read_text())
    assert document == {**MIGRATED, "writtenBy": files.WRITTEN_BY}
    assert list(document) == ["version", "writtenBy", "skills", "extra"]
    assert list(document["skills"]["codex-delegate"]) == ["agents", "note"]


def test_a_draft_that_cannot_be_migrated_is_one_line(machine):
    data = write_state(machine, {"version": 0, "disabled": {"codex-delegate": "cursor"}})
    line = one_error_line(machine.skills("disable", "kimi-delegate", "--agent", "pi"))
    assert line.startswith(f"delegate: {machine.state}: cannot migrate it:")
    assert machine.state.read_bytes() == data


def test_the_state_home_defaults_to_the_global_config_directory(tmp_path, monkeypatch):
    monkeypatch.delenv("DELEGATE_SKILLS_HOME", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert state.state_path() == str(tmp_path / "xdg" / "delegate-skills" / "state.json")
    monkeypatch.setenv("DELEGATE_SKILLS_HOME", str(tmp_path / "elsewhere"))
    assert state.state_path() == str(tmp_path / "elsewhere" / "state.json")


def test_a_write_puts_every_field_in_its_place(machine):
    """Ours first (version, writtenBy, skills; agents first in an entry), the rest sorted after.

    Skill names and agents are sorted; an unknown field's own value is kept as read.
    """
    from importlib.metadata import version

    write_state(
        machine,
        raw=(
            b'{"zeta": 1, "skills": {"pi-delegate": {"note": "n", "agents": {"pi": "off", '
            b'"codex": "maybe"}}, "codex-delegate": {"zz": true, "agents": {"pi": "off"}, '
            b'"aa": [1]}}, "alpha": {"b": 1, "a": 2}, "writtenBy": "someone else", "version": 1}'
        ),
    )
    machine.ok("disable", "claude-delegate", "--agent", "pi", "--agent", "codex")
    assert machine.state.read_text() == (
        "{\n"
        '  "version": 1,\n'
        f'  "writtenBy": "delegate-skills {version("delegate-skills")}",\n'
        '  "skills": {\n'
        '    "claude-delegate": {\n'
        '      "agents": {\n        "codex": "off",\n        "pi": "off"\n      }\n    },\n'
        '    "codex-delegate": {\n'
        '      "agents": {\n        "pi": "off"\n      },\n'
        '      "aa": [\n        1\n      ],\n'
        '      "zz": true\n    },\n'
        '    "pi-delegate": {\n'
        '      "agents": {\n        "codex": "maybe",\n        "pi": "off"\n      },\n'
        '      "note": "n"\n    }\n  },\n'
        '  "alpha": {\n    "b": 1,\n    "a": 2\n  },\n'
        '  "zeta": 1\n'
        "}\n"
    )
