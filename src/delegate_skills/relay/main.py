"""Loading an implementer's adapter (relays/<key>.py) by its key."""

from __future__ import annotations

import importlib
import os
import sys

from .. import registry


def _checkout_relays() -> None:
    """In a source checkout, make relays/ importable as delegate_skills.relays.

    An installed package maps relays/ there already; a checkout run straight
    from src/ has it beside src/ instead.
    """
    package_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    relays_dir = os.path.join(os.path.dirname(os.path.dirname(package_dir)), "relays")
    if not os.path.isfile(os.path.join(relays_dir, "__init__.py")):
        return
    # An empty package whose __path__ is relays/: its modules import as usual.
    package = type(sys)("delegate_skills.relays")
    package.__path__ = [relays_dir]
    sys.modules["delegate_skills.relays"] = package


#: The module a relay runs as without the click CLI (`python -m …`): it chooses here or --host.
ENTRY_MODULE = "delegate_skills.skillscripts.relay"


def relay_command() -> list[str]:
    """How this interpreter runs a relay without the click CLI (fanout, review): + KEY."""
    return [sys.executable, "-m", ENTRY_MODULE]


def load_adapter(key: str):
    """The adapter instance for implementer `key`, or None when there is none."""
    if registry.get(key) is None:
        return None
    name = f"delegate_skills.relays.{key}"
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as problem:
        if problem.name == "delegate_skills.relays":
            _checkout_relays()
            return load_adapter(key) if "delegate_skills.relays" in sys.modules else None
        if problem.name == name:
            return None
        raise
    return module.ADAPTER
