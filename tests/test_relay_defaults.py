"""Every relay's option defaults, written out: the fields a run starts from.

Most adapters take theirs from their flags (options.flag_defaults); the few
that start elsewhere say so. Either way the result must be exactly this table,
which is what each relay started from before the defaults were derived.
"""

from __future__ import annotations

import importlib

import pytest

from delegate_skills.relay.options import flag_defaults, switch_flag, value_flag

EXPECTED = {
    "agy": {
        "effort": None,
        "project": None,
        "newProject": False,
        "resumeLast": False,
        "conversation": None,
        "sandbox": False,
        "readOnly": False,
        "dangerouslySkipPermissions": False,
        "printTimeout": "30m",
        "addDir": [],
    },
    "aider": {
        "apiBase": None,
        "editFormat": None,
        "architect": False,
        "files": [],
        "reads": [],
        "subtreeOnly": False,
        "readOnly": False,
        "resumeLast": False,
        "historyFile": None,
    },
    "auggie": {
        "readOnly": False,
        "resumeLast": False,
        "session": None,
        "maxTurns": None,
        "permissions": [],
    },
    "claude": {
        "effort": None,
        "maxTurns": None,
        "maxBudgetUsd": None,
        "resumeLast": False,
        "session": None,
        "readOnly": False,
        "dangerouslySkipPermissions": False,
    },
    "cline": {"provider": None, "planMode": False, "autoApprove": None},
    "codex": {
        "effort": None,
        "sandbox": "workspace-write",
        "sandboxConfigured": False,
        "resumeLast": False,
        "session": None,
        "cleanEnv": False,
        "keepEnv": [],
        "skipGitRepoCheck": False,
    },
    "commandcode": {
        "effort": None,
        "readOnly": False,
        "toolsAll": False,
        "maxTurns": None,
        "session": None,
        "continueLast": False,
        "cleanEnv": False,
        "keepEnv": [],
    },
    "copilot": {
        "effort": None,
        "readOnly": False,
        "allowAllTools": False,
        "resumeLast": False,
        "session": None,
    },
    "cursor": {
        "readOnly": False,
        "force": None,
        "sandbox": None,
        "session": None,
        "resumeLast": False,
        "addDirs": [],
    },
    "gemini": {
        "permissionMode": None,
        "readOnly": False,
        "resumeLast": False,
        "session": None,
        "addDirs": [],
        "skipTrust": False,
        "sandbox": False,
    },
    "grok": {
        "autonomy": "workspace-write",
        "effort": None,
        "maxTurns": None,
        "resumeLast": False,
        "session": None,
    },
    "kimi": {"session": None, "resumeLast": False, "addDirs": [], "readOnly": False},
    "omp": {
        "provider": None,
        "session": None,
        "resumeLast": False,
        "readOnly": False,
        "approve": False,
        "thinking": None,
    },
    "opencode": {
        "agent": "build",
        "variant": None,
        "auto": True,
        "resumeLast": False,
        "session": None,
        "pure": False,
    },
    "pi": {
        "provider": None,
        "session": None,
        "resumeLast": False,
        "readOnly": False,
        "approve": False,
    },
    "qoder": {
        "contextWindow": None,
        "resume": None,
        "resumeLast": False,
        "addDirs": [],
        "permissionMode": None,
        "readOnly": False,
    },
    "qwen": {
        "permissionMode": None,
        "readOnly": False,
        "resumeLast": False,
        "session": None,
        "addDirs": [],
        "openaiBaseUrl": None,
    },
    "vibe": {
        "maxTurns": None,
        "maxPrice": None,
        "maxTokens": None,
        "session": None,
        "resumeLast": False,
        "planOnly": False,
        "fullAccess": False,
        "enabledTools": [],
        "disabledTools": [],
    },
    "warp": {
        "profile": None,
        "name": None,
        "conversation": None,
        "skill": None,
        "mcp": [],
        "noSnapshot": False,
    },
    "kilo": {
        "agent": "code",
        "variant": None,
        "auto": True,
        "resumeLast": False,
        "session": None,
        "pure": False,
    },
    "hermes": {
        "provider": None,
        "maxTurns": None,
        "readOnly": False,
        "resumeLast": False,
        "session": None,
    },
    "dsh": {
        "provider": None,
        "permissionMode": None,
        "permissionModeSource": None,
        "readOnly": False,
        "readOnlySource": None,
        "patches": [],
    },
    "zcode": {
        "mode": None,
        "readOnly": False,
        "disallowedTools": None,
        "resumeLast": False,
        "session": None,
        "zcodePath": None,
    },
}


@pytest.mark.parametrize("key", sorted(EXPECTED))
def test_each_relay_starts_from_its_written_defaults(key):
    adapter = importlib.import_module(f"delegate_skills.relays.{key}").ADAPTER
    assert adapter.defaults() == EXPECTED[key]


def test_every_relay_is_in_the_table():
    from delegate_skills import registry

    relays = {k for k in registry.KEYS if importlib.util.find_spec(f"delegate_skills.relays.{k}")}
    assert relays == set(EXPECTED)


def test_flag_defaults_reads_value_list_and_switch_flags():
    flags = (
        value_flag("--a", "a", "<x>", ""),
        value_flag("--b", "b", "<x>", "", append=True),
        switch_flag("--c", "c", ""),
        switch_flag("--d", "a", ""),
    )
    assert flag_defaults(flags) == {"a": None, "b": [], "c": False}


def test_defaults_are_fresh_lists_each_time():
    adapter = importlib.import_module("delegate_skills.relays.aider").ADAPTER
    adapter.defaults()["files"].append("x")
    assert adapter.defaults()["files"] == []
