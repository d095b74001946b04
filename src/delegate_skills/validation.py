"""The delegate-fleet.v1 rules, checked in the order the Node bundle checks them.

The document's shape is also written down as JSON Schema in
`schema/delegate-fleet.v1.json`; the checks here cover that shape and the rules
a schema cannot say (a dial the implementer lacks, per-implementer values,
contradictions, timeout bounds). The first broken rule is reported, worded as
the Node bundle words it, so both implementations accept and reject the same
documents with the same message.
"""

from __future__ import annotations

from . import durations, jsjson, registry
from .errors import UserError


class InvalidDocument(UserError):
    """A fleet document broke a rule; the message names the file, lane and field."""


def parse_document(text: str, label: str) -> dict:
    """Parse and check a fleet document. Raises InvalidDocument."""
    try:
        document = jsjson.loads(text)
    except ValueError as error:
        raise InvalidDocument(f"{label}: invalid JSON ({error})") from None
    problem = check_document(document, label)
    if problem:
        raise InvalidDocument(problem)
    return document


def check_document(document, label: str) -> str | None:
    if not isinstance(document, dict):
        return f"{label}: expected a JSON object"
    version = document.get("version", jsjson.MISSING)
    if version != registry.CONFIG_VERSION:
        return (
            f"{label}: unsupported version {jsjson.stringify(version)} "
            f"(expected {registry.CONFIG_VERSION})"
        )
    lanes = document.get("lanes")
    if not isinstance(lanes, dict):
        return f"{label}: lanes must be an object"
    for name, lane in jsjson.js_ordered(lanes.items()).items():
        problem = check_lane(name, lane, label)
        if problem:
            return problem
    return None


def check_lane(name: str, lane, label: str) -> str | None:
    if not registry.LANE_NAME.accepts(name):
        return f"{label}: invalid lane name {jsjson.stringify(name)}"
    if not isinstance(lane, dict):
        return f"{label}: lane {name} must be an object"
    impl = registry.get(lane["implementer"]) if isinstance(lane.get("implementer"), str) else None
    if impl is None:
        return f"{label}: lane {name} needs implementer (one of: {', '.join(registry.KEYS)})"
    for field, value in jsjson.js_ordered(lane.items()).items():
        if field == "implementer":
            continue
        problem = _check_field(impl, name, field, value, label)
        if problem:
            return problem
    if impl.key == "opencode":
        problem = _check_opencode_model(name, lane.get("model"), label)
        if problem:
            return problem
    return _check_contradictions(impl.key, name, lane, label)


def _check_field(
    impl: registry.Implementer, name: str, field: str, value, label: str
) -> str | None:
    if field not in registry.ALL_DIALS:
        return f"{label}: lane {name} has unknown field {jsjson.stringify(field)}"
    if field not in impl.supports:
        supported = ", ".join(impl.supports) or "none"
        return f"{label}: lane {name}: {impl.key} does not support {field} (supports: {supported})"
    if field in registry.BOOLEAN_DIALS:
        if not isinstance(value, bool):
            return f"{label}: lane {name}.{field} must be a boolean"
        return None
    if not isinstance(value, str) or not value:
        return f"{label}: lane {name}.{field} must be a non-empty string"
    return check_dial_value(impl.key, field, value, f"{label}: lane {name}")


def check_dial_value(key: str, field: str, value: str, where: str) -> str | None:
    """The value rule for one string dial; `where` prefixes the message."""
    if field == "timeout":
        if durations.parse_timeout_ms(value) is None:
            return (
                f"{where}.timeout must be a positive h/m/s duration "
                "no longer than about 24 days (e.g. 30m)"
            )
        return None
    if field == "effort":
        return _check_effort(key, value, where)
    if field == "sandbox":
        return _check_choice(registry.SANDBOX_CHOICES.get(key), value, f"{where}.sandbox")
    if field == "permissionMode":
        return _check_choice(registry.PERMISSION_CHOICES.get(key), value, f"{where}.permissionMode")
    if field == "variant":
        if not registry.SHELL_SAFE.accepts(value):
            return (
                f"{where}.variant has unsupported characters "
                f"(allowed: {registry.SHELL_SAFE.allowed})"
            )
        return None
    if field in ("model", "provider"):
        return _check_model_or_provider(key, field, value, where)
    return None


def _check_choice(choices: tuple[str, ...] | None, value: str, where: str) -> str | None:
    if choices is not None and value not in choices:
        return f"{where} must be one of: {', '.join(choices)}"
    return None


def _check_effort(key: str, value: str, where: str) -> str | None:
    problem = _check_choice(registry.EFFORT_CHOICES.get(key), value, f"{where}.effort")
    if problem:
        return problem
    if key in registry.BARE_EFFORT_IMPLEMENTERS and not registry.BARE_TOKEN.accepts(value):
        return f"{where}.effort must be a bare token"
    return None


def _check_model_or_provider(key: str, field: str, value: str, where: str) -> str | None:
    if key == "qoder" and not jsjson.js_trim(value):
        return f"{where}.{field} must not be empty"
    token = registry.model_token(key)
    if token is not None and not token.accepts(value):
        return f"{where}.{field} has unsupported characters for {key} (allowed: {token.allowed})"
    return None


def _check_opencode_model(name: str, model, label: str) -> str | None:
    if not isinstance(model, str) or not model:
        return f"{label}: lane {name}: opencode requires model (provider/model)"
    separator = model.find("/")
    if separator <= 0 or not model[separator + 1 :].strip("/"):
        return f"{label}: lane {name}.model must be provider/model (e.g. opencode/grok)"
    return None


def _check_contradictions(key: str, name: str, lane: dict, label: str) -> str | None:
    if lane.get("readOnly") is not True:
        return None
    where = f"{label}: lane {name}: readOnly contradicts"
    sandbox = lane.get("sandbox")
    if key in ("codex", "grok") and isinstance(sandbox, str) and sandbox != "read-only":
        return f"{where} sandbox {jsjson.stringify(sandbox)}"
    mode = lane.get("permissionMode")
    if key in ("qoder", "gemini", "qwen") and isinstance(mode, str) and mode != "plan":
        return f"{where} permissionMode {jsjson.stringify(mode)}"
    if key == "cursor" and lane.get("force") is True:
        return f"{where} force true"
    return None
