#!/usr/bin/env python3
"""Generate every file whose facts repeat across the bundle, from one source each.

    python3 scripts/build_dist.py          write the generated files
    python3 scripts/build_dist.py --check  exit 1 if any differs from what is on disk

Sources: the core's registry (src/delegate_skills/registry.py) and the
templates under scripts/templates/.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "src"))

from delegate_skills import registry  # noqa: E402

TEMPLATES = os.path.join(ROOT, "scripts", "templates")
SETUP_SCRIPTS = ("config.py", "lane.py", "discover.py")
IMPLEMENTER_SCRIPTS = ("relay.py", "lane.py", "config.py", "discover.py")


def read_template(name: str) -> str:
    with open(os.path.join(TEMPLATES, name), encoding="utf-8") as handle:
        return handle.read()


def js_pattern(pattern) -> str:
    """A Python pattern matched with fullmatch, as an anchored ECMA-262 pattern."""
    return f"^{pattern.pattern}$"


def fleet_schema() -> dict:
    text = {"type": "string", "minLength": 1}
    properties: dict = {"implementer": {"enum": list(registry.KEYS)}}
    for dial in registry.ALL_DIALS:
        properties[dial] = {"type": "boolean"} if dial in registry.BOOLEAN_DIALS else dict(text)
    properties["timeout"] = {**text, "pattern": js_pattern(registry.TIMEOUT)}
    per_implementer = [_implementer_rules(impl) for impl in registry.IMPLEMENTERS]
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "urn:delegate-skills:schema:delegate-fleet.v1",
        "title": "delegate-fleet.v1",
        "description": (
            "Fleet lanes: which implementer handles which kind of work, with its dials. "
            "Generated from the registry by scripts/build_dist.py. Rules a schema cannot "
            "state (timeout ceiling, readOnly contradictions, opencode's provider/model) "
            "are enforced by the validator."
        ),
        "type": "object",
        "required": ["version", "lanes"],
        "properties": {
            "version": {"const": registry.CONFIG_VERSION},
            "lanes": {
                "type": "object",
                "propertyNames": {"pattern": js_pattern(registry.LANE_NAME)},
                "additionalProperties": {"$ref": "#/$defs/lane"},
            },
        },
        "$defs": {
            "lane": {
                "type": "object",
                "required": ["implementer"],
                "properties": properties,
                "additionalProperties": False,
                "allOf": per_implementer,
            }
        },
    }


def _implementer_rules(impl: registry.Implementer) -> dict:
    values: dict = {}
    for dial, table in (
        ("effort", registry.EFFORT_CHOICES),
        ("sandbox", registry.SANDBOX_CHOICES),
        ("permissionMode", registry.PERMISSION_CHOICES),
    ):
        if dial in impl.supports and impl.key in table:
            values[dial] = {"enum": list(table[impl.key])}
    if "effort" in impl.supports and impl.key in registry.BARE_EFFORT_IMPLEMENTERS:
        values["effort"] = {"pattern": "^[A-Za-z][A-Za-z0-9-]*$"}
    token = registry.model_token(impl.key)
    for dial in ("model", "provider"):
        if dial in impl.supports and token is not None:
            values[dial] = {"pattern": js_pattern(token.pattern)}
    if "variant" in impl.supports:
        values["variant"] = {"pattern": js_pattern(registry.SHELL_SAFE.pattern)}
    then: dict = {"propertyNames": {"enum": ["implementer", *impl.supports]}}
    if values:
        then["properties"] = values
    if impl.key == "opencode":
        then["required"] = ["model"]
    return {"if": {"properties": {"implementer": {"const": impl.key}}}, "then": then}


def implementer_skills() -> list[str]:
    """Implementer skills whose relay adapter exists."""
    return [
        impl.skill
        for impl in registry.IMPLEMENTERS
        if os.path.isfile(os.path.join(ROOT, "relays", f"{impl.key}.py"))
    ]


def outputs() -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    schema = json.dumps(fleet_schema(), indent=2, ensure_ascii=False) + "\n"
    files["src/delegate_skills/schema/delegate-fleet.v1.json"] = schema.encode()
    entry = read_template("entry.py").encode()
    for script in SETUP_SCRIPTS:
        files[f"skills/delegate-setup/scripts/{script}"] = entry
    for skill in implementer_skills():
        for script in IMPLEMENTER_SCRIPTS:
            files[f"skills/{skill}/scripts/{script}"] = entry
    return files


def _on_disk(path: str) -> bytes | None:
    try:
        with open(os.path.join(ROOT, path), "rb") as handle:
            return handle.read()
    except OSError:
        return None


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail when a file would change")
    args = parser.parse_args(argv)
    files = outputs()
    drifted = [path for path, data in files.items() if _on_disk(path) != data]
    if args.check:
        for path in drifted:
            print(f"out of date: {path}", file=sys.stderr)
        if drifted:
            print("run: python3 scripts/build_dist.py", file=sys.stderr)
            return 1
        return 0
    for path in drifted:
        full = os.path.join(ROOT, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "wb") as handle:
            handle.write(files[path])
        if path.endswith(".py") and path.startswith("skills/"):
            os.chmod(full, 0o755)
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
