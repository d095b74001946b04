"""Every rejection the fleet validator makes, worded as the Node bundle words it.

Each message below is the one `config.mjs validate` prints for the same
document; the validator must reproduce it exactly, since agents match on it.
"""

from __future__ import annotations

import pytest
from conftest import fleet_doc, script, write_json

from delegate_skills import validation

#: Node's seventeen, then the six this port adds (Node's message lists only its own).
ALL = (
    "claude, cline, codex, commandcode, opencode, agy, grok, kimi, qoder, vibe, cursor, pi, "
    "omp, aider, copilot, warp, zcode, gemini, qwen, auggie, kilo, hermes, dsh"
)

REJECTIONS = [
    ("not-object", [], "expected a JSON object"),
    (
        "missing-version",
        {"lanes": {}},
        "unsupported version undefined (expected delegate-fleet.v1)",
    ),
    (
        "bad-version",
        {"version": "delegate-fleet.v2", "lanes": {}},
        'unsupported version "delegate-fleet.v2" (expected delegate-fleet.v1)',
    ),
    (
        "null-version",
        {"version": None, "lanes": {}},
        "unsupported version null (expected delegate-fleet.v1)",
    ),
    ("lanes-array", {"version": "delegate-fleet.v1", "lanes": []}, "lanes must be an object"),
    ("lanes-missing", {"version": "delegate-fleet.v1"}, "lanes must be an object"),
    (
        "lane-name",
        {"version": "delegate-fleet.v1", "lanes": {"bad name": {"implementer": "codex"}}},
        'invalid lane name "bad name"',
    ),
    (
        "lane-name-dash",
        {"version": "delegate-fleet.v1", "lanes": {"-x": {"implementer": "codex"}}},
        'invalid lane name "-x"',
    ),
    (
        "lane-not-object",
        {"version": "delegate-fleet.v1", "lanes": {"feature": "codex"}},
        "lane feature must be an object",
    ),
    (
        "no-implementer",
        {"version": "delegate-fleet.v1", "lanes": {"feature": {"model": "x"}}},
        "lane feature needs implementer (one of: {ALL})",
    ),
    (
        "unknown-implementer",
        {"version": "delegate-fleet.v1", "lanes": {"feature": {"implementer": "jules"}}},
        "lane feature needs implementer (one of: {ALL})",
    ),
    (
        "proto-implementer",
        {"version": "delegate-fleet.v1", "lanes": {"feature": {"implementer": "toString"}}},
        "lane feature needs implementer (one of: {ALL})",
    ),
    (
        "unknown-field",
        {
            "version": "delegate-fleet.v1",
            "lanes": {"feature": {"implementer": "codex", "color": "blue"}},
        },
        'lane feature has unknown field "color"',
    ),
    (
        "unsupported-dial",
        {
            "version": "delegate-fleet.v1",
            "lanes": {
                "feature": {"implementer": "opencode", "model": "opencode/grok", "effort": "high"}
            },
        },
        "lane feature: opencode does not support effort (supports: model, variant, timeout, readOnly)",
    ),
    (
        "cursor-sandbox",
        {
            "version": "delegate-fleet.v1",
            "lanes": {"feature": {"implementer": "cursor", "sandbox": "workspace-write"}},
        },
        "lane feature: cursor does not support sandbox (supports: model, force, timeout, readOnly)",
    ),
    (
        "readonly-string",
        {
            "version": "delegate-fleet.v1",
            "lanes": {"feature": {"implementer": "codex", "readOnly": "yes"}},
        },
        "lane feature.readOnly must be a boolean",
    ),
    (
        "force-number",
        {
            "version": "delegate-fleet.v1",
            "lanes": {"feature": {"implementer": "cursor", "force": 1}},
        },
        "lane feature.force must be a boolean",
    ),
    (
        "empty-model",
        {
            "version": "delegate-fleet.v1",
            "lanes": {"feature": {"implementer": "codex", "model": ""}},
        },
        "lane feature.model must be a non-empty string",
    ),
    (
        "model-number",
        {"version": "delegate-fleet.v1", "lanes": {"feature": {"implementer": "kimi", "model": 5}}},
        "lane feature.model must be a non-empty string",
    ),
    (
        "timeout-bad",
        {
            "version": "delegate-fleet.v1",
            "lanes": {"slow": {"implementer": "kimi", "timeout": "30"}},
        },
        "lane slow.timeout must be a positive h/m/s duration no longer than about 24 days (e.g. 30m)",
    ),
    (
        "timeout-zero",
        {
            "version": "delegate-fleet.v1",
            "lanes": {"slow": {"implementer": "kimi", "timeout": "0s"}},
        },
        "lane slow.timeout must be a positive h/m/s duration no longer than about 24 days (e.g. 30m)",
    ),
    (
        "timeout-ceiling",
        {
            "version": "delegate-fleet.v1",
            "lanes": {"slow": {"implementer": "kimi", "timeout": "999999999h"}},
        },
        "lane slow.timeout must be a positive h/m/s duration no longer than about 24 days (e.g. 30m)",
    ),
    (
        "timeout-just-over",
        {
            "version": "delegate-fleet.v1",
            "lanes": {"slow": {"implementer": "kimi", "timeout": "596h31m24s"}},
        },
        "lane slow.timeout must be a positive h/m/s duration no longer than about 24 days (e.g. 30m)",
    ),
    (
        "timeout-newline",
        {
            "version": "delegate-fleet.v1",
            "lanes": {"slow": {"implementer": "kimi", "timeout": "30m\n"}},
        },
        "lane slow.timeout must be a positive h/m/s duration no longer than about 24 days (e.g. 30m)",
    ),
    (
        "claude-effort",
        {
            "version": "delegate-fleet.v1",
            "lanes": {"feature": {"implementer": "claude", "effort": "banana"}},
        },
        "lane feature.effort must be one of: low, medium, high, xhigh, max, ultracode",
    ),
    (
        "agy-effort",
        {
            "version": "delegate-fleet.v1",
            "lanes": {"review": {"implementer": "agy", "effort": "ultra"}},
        },
        "lane review.effort must be one of: low, medium, high",
    ),
    (
        "copilot-effort",
        {
            "version": "delegate-fleet.v1",
            "lanes": {"feature": {"implementer": "copilot", "effort": "foo"}},
        },
        "lane feature.effort must be one of: low, medium, high, xhigh, max",
    ),
    (
        "omp-effort",
        {
            "version": "delegate-fleet.v1",
            "lanes": {"feature": {"implementer": "omp", "effort": "inherit"}},
        },
        "lane feature.effort must be one of: off, auto, minimal, low, medium, high, xhigh, max",
    ),
    (
        "codex-effort",
        {
            "version": "delegate-fleet.v1",
            "lanes": {"feature": {"implementer": "codex", "effort": "very fast"}},
        },
        "lane feature.effort must be a bare token",
    ),
    (
        "grok-effort",
        {
            "version": "delegate-fleet.v1",
            "lanes": {"feature": {"implementer": "grok", "effort": "9x"}},
        },
        "lane feature.effort must be a bare token",
    ),
    (
        "commandcode-effort",
        {
            "version": "delegate-fleet.v1",
            "lanes": {"feature": {"implementer": "commandcode", "effort": "very fast"}},
        },
        "lane feature.effort must be a bare token",
    ),
    (
        "codex-sandbox",
        {
            "version": "delegate-fleet.v1",
            "lanes": {"feature": {"implementer": "codex", "sandbox": "workspace"}},
        },
        "lane feature.sandbox must be one of: read-only, workspace-write, danger-full-access",
    ),
    (
        "grok-sandbox",
        {
            "version": "delegate-fleet.v1",
            "lanes": {"feature": {"implementer": "grok", "sandbox": "workspace-write"}},
        },
        "lane feature.sandbox must be one of: workspace, read-only, off",
    ),
    (
        "qoder-permission",
        {
            "version": "delegate-fleet.v1",
            "lanes": {"feature": {"implementer": "qoder", "permissionMode": "yolo"}},
        },
        "lane feature.permissionMode must be one of: default, accept_edits, auto, bypass_permissions, dont_ask, plan",
    ),
    (
        "zcode-mode-build",
        {
            "version": "delegate-fleet.v1",
            "lanes": {"feature": {"implementer": "zcode", "permissionMode": "build"}},
        },
        "lane feature.permissionMode must be one of: plan, yolo",
    ),
    (
        "zcode-mode-edit",
        {
            "version": "delegate-fleet.v1",
            "lanes": {"feature": {"implementer": "zcode", "permissionMode": "edit"}},
        },
        "lane feature.permissionMode must be one of: plan, yolo",
    ),
    (
        "claude-model",
        {
            "version": "delegate-fleet.v1",
            "lanes": {"feature": {"implementer": "claude", "model": "bad model"}},
        },
        "lane feature.model has unsupported characters for claude (allowed: letters, digits, . _ : @ / [ ] -)",
    ),
    (
        "cursor-model",
        {
            "version": "delegate-fleet.v1",
            "lanes": {"feature": {"implementer": "cursor", "model": "gpt;rm"}},
        },
        "lane feature.model has unsupported characters for cursor (allowed: letters, digits, . _ : @ / [ ] , = -)",
    ),
    (
        "codex-model",
        {
            "version": "delegate-fleet.v1",
            "lanes": {"feature": {"implementer": "codex", "model": "x & whoami"}},
        },
        "lane feature.model has unsupported characters for codex (allowed: letters, digits, . _ : / -)",
    ),
    (
        "commandcode-model",
        {
            "version": "delegate-fleet.v1",
            "lanes": {"feature": {"implementer": "commandcode", "model": "a b;c"}},
        },
        "lane feature.model has unsupported characters for commandcode (allowed: letters, digits, . _ : / -)",
    ),
    (
        "grok-model",
        {
            "version": "delegate-fleet.v1",
            "lanes": {"feature": {"implementer": "grok", "model": "grok 4"}},
        },
        "lane feature.model has unsupported characters for grok (allowed: letters, digits, . _ : / -)",
    ),
    (
        "pi-provider",
        {
            "version": "delegate-fleet.v1",
            "lanes": {"feature": {"implementer": "pi", "provider": "open ai"}},
        },
        "lane feature.provider has unsupported characters for pi (allowed: letters, digits, . _ : / -)",
    ),
    (
        "omp-provider",
        {
            "version": "delegate-fleet.v1",
            "lanes": {"feature": {"implementer": "omp", "provider": "-x"}},
        },
        "lane feature.provider has unsupported characters for omp (allowed: letters, digits, . _ : / -)",
    ),
    (
        "cline-provider",
        {
            "version": "delegate-fleet.v1",
            "lanes": {"feature": {"implementer": "cline", "provider": "a|b"}},
        },
        "lane feature.provider has unsupported characters for cline (allowed: letters, digits, . _ : / -)",
    ),
    (
        "copilot-model",
        {
            "version": "delegate-fleet.v1",
            "lanes": {"feature": {"implementer": "copilot", "model": "gpt@5"}},
        },
        "lane feature.model has unsupported characters for copilot (allowed: letters, digits, . _ : / -)",
    ),
    (
        "qoder-model-blank",
        {
            "version": "delegate-fleet.v1",
            "lanes": {"feature": {"implementer": "qoder", "model": "   "}},
        },
        "lane feature.model must not be empty",
    ),
    (
        "opencode-variant",
        {
            "version": "delegate-fleet.v1",
            "lanes": {
                "feature": {
                    "implementer": "opencode",
                    "model": "opencode/grok",
                    "variant": "high & whoami",
                }
            },
        },
        "lane feature.variant has unsupported characters (allowed: letters, digits, . _ : / -)",
    ),
    (
        "opencode-bare",
        {"version": "delegate-fleet.v1", "lanes": {"feature": {"implementer": "opencode"}}},
        "lane feature: opencode requires model (provider/model)",
    ),
    (
        "opencode-bare-model",
        {
            "version": "delegate-fleet.v1",
            "lanes": {"feature": {"implementer": "opencode", "model": "grok"}},
        },
        "lane feature.model must be provider/model (e.g. opencode/grok)",
    ),
    (
        "opencode-slash-end",
        {
            "version": "delegate-fleet.v1",
            "lanes": {"feature": {"implementer": "opencode", "model": "opencode/"}},
        },
        "lane feature.model must be provider/model (e.g. opencode/grok)",
    ),
    (
        "opencode-slash-start",
        {
            "version": "delegate-fleet.v1",
            "lanes": {"feature": {"implementer": "opencode", "model": "/grok"}},
        },
        "lane feature.model has unsupported characters for opencode (allowed: letters, digits, . _ : / -)",
    ),
    (
        "opencode-slashes",
        {
            "version": "delegate-fleet.v1",
            "lanes": {"feature": {"implementer": "opencode", "model": "opencode//"}},
        },
        "lane feature.model must be provider/model (e.g. opencode/grok)",
    ),
    (
        "codex-contradiction",
        {
            "version": "delegate-fleet.v1",
            "lanes": {
                "feature": {
                    "implementer": "codex",
                    "readOnly": True,
                    "sandbox": "danger-full-access",
                }
            },
        },
        'lane feature: readOnly contradicts sandbox "danger-full-access"',
    ),
    (
        "grok-contradiction",
        {
            "version": "delegate-fleet.v1",
            "lanes": {"feature": {"implementer": "grok", "readOnly": True, "sandbox": "off"}},
        },
        'lane feature: readOnly contradicts sandbox "off"',
    ),
    (
        "qoder-contradiction",
        {
            "version": "delegate-fleet.v1",
            "lanes": {
                "feature": {"implementer": "qoder", "readOnly": True, "permissionMode": "auto"}
            },
        },
        'lane feature: readOnly contradicts permissionMode "auto"',
    ),
    (
        "cursor-contradiction",
        {
            "version": "delegate-fleet.v1",
            "lanes": {"feature": {"implementer": "cursor", "readOnly": True, "force": True}},
        },
        "lane feature: readOnly contradicts force true",
    ),
]


def _message(template: str) -> str:
    return template.replace("{ALL}", ALL)


@pytest.mark.parametrize(
    ("case", "document", "message"), REJECTIONS, ids=[c[0] for c in REJECTIONS]
)
def test_rejection_message(case, document, message):
    assert validation.check_document(document, "F") == f"F: {_message(message)}"


@pytest.mark.parametrize(
    "case",
    ["missing-version", "lanes-array", "claude-model", "codex-contradiction", "opencode-bare"],
)
def test_validate_script_exits_2_with_one_line(tmp_path, home, case):
    document, message = next((d, m) for c, d, m in REJECTIONS if c == case)
    path = write_json(tmp_path / "lanes.json", document)
    result = script("config.py", "validate", str(path))
    assert result.code == 2
    assert result.out == ""
    assert result.err == f"config.py: {path}: {_message(message)}\n"


ACCEPTED = [
    {"feature": {"implementer": "opencode", "model": "opencode/grok", "variant": "high"}},
    {"tests": {"implementer": "grok", "effort": "medium"}},
    {"review": {"implementer": "codex", "readOnly": True}},
    {"review": {"implementer": "codex", "readOnly": True, "sandbox": "read-only"}},
    {"review": {"implementer": "grok", "readOnly": True, "sandbox": "read-only"}},
    {"review": {"implementer": "qoder", "readOnly": True, "permissionMode": "plan"}},
    {"review": {"implementer": "cursor", "readOnly": True, "force": False}},
    {"slow": {"implementer": "kimi", "timeout": "596h31m23s"}},
    {"slow": {"implementer": "kimi", "timeout": "1h30m"}},
    {"x": {"implementer": "claude", "model": "claude-opus-4[1m]", "effort": "ultracode"}},
    {"x": {"implementer": "cursor", "model": "gpt-5,reasoning=high"}},
    {"x": {"implementer": "qoder", "model": "any model text"}},
    {"x": {"implementer": "zcode", "permissionMode": "yolo"}},
    {"x.y_z-1": {"implementer": "omp", "effort": "off", "provider": "google", "model": "a/b"}},
    {},
]


@pytest.mark.parametrize("lanes", ACCEPTED)
def test_accepted(lanes):
    assert validation.check_document(fleet_doc(lanes), "F") is None


def test_unknown_top_level_fields_are_allowed():
    assert validation.check_document({**fleet_doc({}), "note": [1, {"a": None}]}, "F") is None


def test_first_problem_in_javascript_key_order():
    # JavaScript walks array-index keys first: lane "2" is checked before "b".
    document = fleet_doc(
        {"b": {"implementer": "nope"}, "2": {"implementer": "codex", "color": "red"}}
    )
    assert validation.check_document(document, "F") == 'F: lane 2 has unknown field "color"'


def test_invalid_json_names_the_file():
    with pytest.raises(validation.InvalidDocument) as caught:
        validation.parse_document('{"version": ', "cfg.json")
    assert str(caught.value).startswith("cfg.json: invalid JSON (")


@pytest.mark.parametrize("text", ["NaN", '{"version": Infinity}', "[-Infinity]"])
def test_javascript_only_json_is_refused(text):
    with pytest.raises(validation.InvalidDocument):
        validation.parse_document(text, "F")
