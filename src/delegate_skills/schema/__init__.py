"""JSON Schema files for the documents delegate-skills reads and writes.

`delegate-fleet.v1.json` is generated from the registry by
`scripts/build_dist.py`; edit the registry, not the file.
"""

from __future__ import annotations

import json
import os

_HERE = os.path.dirname(os.path.abspath(__file__))
_validators: dict = {}


def schema_path(name: str) -> str:
    return os.path.join(_HERE, f"{name}.json")


def load_schema(name: str) -> dict:
    with open(schema_path(name), encoding="utf-8") as handle:
        return json.load(handle)


def validator(name: str):
    """A jsonschema Draft 2020-12 validator for one of our schema files."""
    if name not in _validators:
        from jsonschema import Draft202012Validator

        schema = load_schema(name)
        Draft202012Validator.check_schema(schema)
        _validators[name] = Draft202012Validator(schema)
    return _validators[name]


def fleet_validator():
    return validator("delegate-fleet.v1")


def check_fleet(document: dict, label: str) -> None:
    """Check `document` against delegate-fleet.v1.json; raises InvalidDocument.

    The rules in validation.py are stricter than the schema, so this only
    fails if the two have drifted apart. It runs where the `delegate` command
    validates or writes a file; a skill folder's scripts apply the rules alone.
    """
    from ..validation import InvalidDocument

    error = next(iter(fleet_validator().iter_errors(document)), None)
    if error is not None:
        where = "/".join(str(part) for part in error.absolute_path) or "(document)"
        raise InvalidDocument(f"{label}: {where}: {error.message}")
