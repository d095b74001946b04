"""`relay.py` and `delegate relay KEY`: load the implementer's adapter and run it."""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys

from .. import registry


def _checkout_relays() -> None:
    """In a source checkout, make relays/ importable as delegate_skills.relays.

    An installed package maps relays/ there already; a checkout run straight
    from src/ has it beside src/ instead.
    """
    if importlib.util.find_spec("delegate_skills.relays") is not None:
        return
    package_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    relays_dir = os.path.join(os.path.dirname(os.path.dirname(package_dir)), "relays")
    init = os.path.join(relays_dir, "__init__.py")
    if not os.path.isfile(init):
        return
    spec = importlib.util.spec_from_file_location(
        "delegate_skills.relays", init, submodule_search_locations=[relays_dir]
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules["delegate_skills.relays"] = module
    spec.loader.exec_module(module)


def load_adapter(key: str):
    """The adapter instance for implementer `key`, or None when there is none."""
    if registry.get(key) is None:
        return None
    _checkout_relays()
    try:
        module = importlib.import_module(f"delegate_skills.relays.{key}")
    except ModuleNotFoundError as problem:
        if problem.name == f"delegate_skills.relays.{key}":
            return None
        raise
    return module.ADAPTER


def main(key: str, argv: list[str]) -> int:
    adapter = load_adapter(key)
    if adapter is None:
        sys.stderr.write(f"relay: no relay for implementer {key!r}\n")
        return 2
    from .engine import Relay

    return Relay(adapter).main(argv)
