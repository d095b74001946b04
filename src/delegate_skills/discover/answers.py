"""What a CLI's probes mean: its version, whether it is signed in, its models."""

from __future__ import annotations

import json
import os
import re

from ..registry import Implementer
from .locate import Launch, state_dir
from .probing import Probe, Slots, run_probe

MAX_MODELS = 200
_COLON_VERSION = re.compile(r"([^:\s]+):")


def version_of(
    impl: Implementer, launch: Launch, env: dict[str, str], slots: Slots | None = None
) -> str | None:
    for args in filter(None, (impl.version_args, impl.version_fallback_args)):
        probe = run_probe(launch, args, env, slots)
        if not probe.ok:
            continue
        lines = probe.stdout.strip().splitlines()
        first = lines[0].strip() if lines else ""
        if not first:
            continue
        if impl.version_format == "colon-prefix":
            match = _COLON_VERSION.match(first)
            return match.group(1) if match else first
        return first
    return None


def _json_field(text: str, field: str) -> bool | None:
    try:
        value = json.loads(text).get(field)
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, bool) else None


def auth_of(impl: Implementer, probe: Probe | None) -> bool | None:
    """Logged in: True / False, or None when the CLI cannot tell us."""
    spec = impl.auth_probe
    if spec is None or probe is None:
        return None
    if spec.json_field:
        if probe.ok:
            return _json_field(probe.stdout, spec.json_field)
        combined = probe.stdout + probe.stderr
        return _json_field(combined, spec.json_field) if combined.strip() else None
    output = probe.output
    if spec.fail is not None and spec.fail.search(output):
        return False
    if spec.success is not None:
        if spec.success.search(output):
            return True
        return False if probe.ok and spec.miss_means_false else None
    return True if probe.ok else None


def _models(identifiers, status: str = "reported") -> dict:
    unique = list(dict.fromkeys(i for i in identifiers if i))
    return {"status": status, "values": unique[:MAX_MODELS], "truncated": len(unique) > MAX_MODELS}


def _failed_models() -> dict:
    return {"status": "failed", "values": [], "truncated": False}


def parse_model_list(raw: str, format: str | None) -> dict:
    lines = [line.strip() for line in re.split(r"\r?\n", raw) if line.strip()]
    if format == "cursor":
        names = [
            re.split(r"\s+-\s+", line, maxsplit=1)[0]
            for line in lines
            if line != "Available models" and not line.startswith("Tip:")
        ]
    elif format == "grok":
        names = [
            re.sub(r"\s*\(default\)$", "", line[2:]).strip()
            for line in lines
            if line.startswith("* ")
        ]
    elif format == "commandcode":
        names = [first for first in (line.split()[0] for line in lines) if "/" in first]
    elif format == "table":
        names = [
            f"{cols[0]}/{cols[1]}"
            for cols in (line.split() for line in lines[1:])
            if len(cols) >= 2
        ]
    else:
        names = lines
    return _models(names)


def models_of(impl: Implementer, probe: Probe | None, env: dict[str, str], home: str) -> dict:
    spec = impl.model_probe
    if spec is None:
        return {"status": "unsupported", "values": [], "truncated": False}
    if spec.static:
        return _models(spec.static, "aliases")
    if spec.file:
        path = os.path.join(state_dir(spec.env_dir, spec.home_subdir, env, home), spec.file)
        try:
            with open(path, encoding="utf-8") as handle:
                cache = json.loads(handle.read())
        except (OSError, ValueError):
            return _failed_models()
        entries = cache.get("models") if isinstance(cache, dict) else None
        if not isinstance(entries, list):
            return _failed_models()
        return _models(
            e.get("slug") if isinstance(e, dict) and isinstance(e.get("slug"), str) else ""
            for e in entries
        )
    if probe is None or not probe.ok:
        return _failed_models()
    return parse_model_list(probe.stdout, spec.format)
