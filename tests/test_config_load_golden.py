"""`delegate config load` and `config.py load` print what Node's `config.mjs load` prints.

The expected bytes were recorded by running the Node original's
`node config.mjs load --cwd <dir>` on the same files, with the scratch
directory written as {T}. They pin the key order (project lanes replace
global ones in place, new ones follow; a lane's own key order, then
`source`), and the three booleans when there is nothing to find.
"""

from __future__ import annotations

import hashlib

import pytest
from conftest import delegate, script

GLOBAL = (
    '{\n  "version": "delegate-fleet.v1",\n  "lanes": {\n    "feature": {\n'
    '      "implementer": "opencode",\n      "model": "opencode/grok",\n'
    '      "variant": "high"\n    },\n    "tests": {\n      "implementer": "grok",\n'
    '      "effort": "medium"\n    }\n  }\n}\n'
)
PROJECT = (
    '{\n  "version": "delegate-fleet.v1",\n  "lanes": {\n    "review": {\n'
    '      "readOnly": true,\n      "implementer": "claude"\n    },\n    "feature": {\n'
    '      "timeout": "30m",\n      "implementer": "codex"\n    }\n  }\n}\n'
)

NOTHING_IN_A_REPO = (
    '{\n  "version": "delegate-fleet.v1",\n'
    '  "globalPath": "{T}/home/.config/delegate-skills/config.json",\n'
    '  "projectPath": "{T}/repo/.delegate/config.json",\n  "globalPresent": false,\n'
    '  "projectPresent": false,\n  "projectTrusted": false,\n  "lanes": {}\n}\n'
)
NOTHING_OUTSIDE_GIT = (
    '{\n  "version": "delegate-fleet.v1",\n'
    '  "globalPath": "{T}/home/.config/delegate-skills/config.json",\n'
    '  "projectPath": null,\n  "globalPresent": false,\n  "projectPresent": false,\n'
    '  "projectTrusted": false,\n  "lanes": {}\n}\n'
)
GLOBAL_OUTSIDE_GIT = (
    '{\n  "version": "delegate-fleet.v1",\n'
    '  "globalPath": "{T}/home/.config/delegate-skills/config.json",\n'
    '  "projectPath": null,\n  "globalPresent": true,\n  "projectPresent": false,\n'
    '  "projectTrusted": false,\n  "lanes": {\n    "feature": {\n'
    '      "implementer": "opencode",\n      "model": "opencode/grok",\n'
    '      "variant": "high",\n      "source": "global"\n    },\n    "tests": {\n'
    '      "implementer": "grok",\n      "effort": "medium",\n      "source": "global"\n'
    "    }\n  }\n}\n"
)
BOTH = (
    '{\n  "version": "delegate-fleet.v1",\n'
    '  "globalPath": "{T}/home/.config/delegate-skills/config.json",\n'
    '  "projectPath": "{T}/repo/.delegate/config.json",\n  "globalPresent": true,\n'
    '  "projectPresent": true,\n  "projectTrusted": {TRUSTED},\n  "lanes": {\n'
    '    "feature": {\n      "timeout": "30m",\n      "implementer": "codex",\n'
    '      "source": "project"\n    },\n    "tests": {\n      "implementer": "grok",\n'
    '      "effort": "medium",\n      "source": "global"\n    },\n    "review": {\n'
    '      "readOnly": true,\n      "implementer": "claude",\n      "source": "project"\n'
    "    }\n  }\n}\n"
)

LOADERS = {
    "delegate": lambda cwd: delegate("config", "load", "--cwd", str(cwd), "--json"),
    "config.py": lambda cwd: script("config.py", "load", "--cwd", str(cwd)),
}


def loaded(loader: str, cwd) -> str:
    result = LOADERS[loader](cwd)
    assert (result.code, result.err) == (0, ""), result
    return result.out


def expected(template: str, tmp_path, trusted: bool | None = None) -> str:
    text = template.replace("{T}", str(tmp_path))
    return text if trusted is None else text.replace("{TRUSTED}", str(trusted).lower())


@pytest.fixture
def both(tmp_path, repo, global_config) -> str:
    """Global and project files written as above; the project's digest."""
    global_config.parent.mkdir(parents=True)
    global_config.write_bytes(GLOBAL.encode())
    (repo / ".delegate").mkdir()
    (repo / ".delegate" / "config.json").write_bytes(PROJECT.encode())
    return hashlib.sha256(PROJECT.encode()).hexdigest()


def approve(repo, text: str) -> None:
    folder = repo / ".git" / "delegate-skills"
    folder.mkdir(exist_ok=True)
    (folder / "project-config.sha256").write_bytes(text.encode())


@pytest.mark.parametrize("loader", sorted(LOADERS))
def test_nothing_configured_in_a_repository(tmp_path, repo, loader):
    assert loaded(loader, repo) == expected(NOTHING_IN_A_REPO, tmp_path)


@pytest.mark.parametrize("loader", sorted(LOADERS))
def test_nothing_configured_outside_git(tmp_path, home, loader):
    (tmp_path / "plain").mkdir()
    assert loaded(loader, tmp_path / "plain") == expected(NOTHING_OUTSIDE_GIT, tmp_path)


@pytest.mark.parametrize("loader", sorted(LOADERS))
def test_global_lanes_outside_git(tmp_path, both, loader):
    (tmp_path / "plain").mkdir()
    assert loaded(loader, tmp_path / "plain") == expected(GLOBAL_OUTSIDE_GIT, tmp_path)


@pytest.mark.parametrize("loader", sorted(LOADERS))
def test_an_unapproved_project_overlays_in_place(tmp_path, repo, both, loader):
    assert loaded(loader, repo) == expected(BOTH, tmp_path, trusted=False)


@pytest.mark.parametrize("loader", sorted(LOADERS))
def test_an_approved_project_overlays_in_place(tmp_path, repo, both, loader):
    approve(repo, f"{both}\n")
    assert loaded(loader, repo) == expected(BOTH, tmp_path, trusted=True)


#: What the approval file holds, and whether Node's `readFileSync(...).trim() === digest`
#: trusts it (recorded from config.mjs load).
APPROVALS = {
    "newline": ("{D}\n", True),
    "bare": ("{D}", True),
    "spaces": ("  {D} \n\n", True),
    "bom": ("\ufeff{D}\n", True),
    "tab-cr": ("{D}\t\r\n", True),
    "extra-line": ("{D}\nextra\n", False),
    "extra-word": ("{D} extra\n", False),
    "twice": ("{D}{D}\n", False),
    "upper": ("{UPPER}\n", False),
    "empty": ("", False),
}


@pytest.mark.parametrize(("text", "trusted"), list(APPROVALS.values()), ids=list(APPROVALS))
def test_the_approval_file_is_compared_as_node_compares_it(tmp_path, repo, both, text, trusted):
    approve(repo, text.replace("{D}", both).replace("{UPPER}", both.upper()))
    assert loaded("config.py", repo) == expected(BOTH, tmp_path, trusted=trusted)
