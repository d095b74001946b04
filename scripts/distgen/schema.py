"""The delegate-fleet.v1 JSON Schema, derived from the registry."""

from __future__ import annotations

from delegate_skills import durations, registry


def js_pattern(shape) -> str:
    """A registry shape or pattern (matched whole), as an anchored ECMA-262 pattern."""
    return f"^{shape.pattern}$"


def fleet_schema() -> dict:
    text = {"type": "string", "minLength": 1}
    properties: dict = {"implementer": {"enum": list(registry.KEYS)}}
    for dial in registry.ALL_DIALS:
        properties[dial] = {"type": "boolean"} if dial in registry.BOOLEAN_DIALS else dict(text)
    properties["timeout"] = {**text, "pattern": js_pattern(durations.TIMEOUT)}
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
            values[dial] = {"pattern": js_pattern(token)}
    if "variant" in impl.supports:
        values["variant"] = {"pattern": js_pattern(registry.SHELL_SAFE)}
    then: dict = {"propertyNames": {"enum": ["implementer", *impl.supports]}}
    if values:
        then["properties"] = values
    if impl.key == "opencode":
        then["required"] = ["model"]
    return {"if": {"properties": {"implementer": {"const": impl.key}}}, "then": then}
