"""Would each lane dispatch? And if not, the one thing to fix.

Checked in order, stopping at the first problem per lane: the lane exists;
a project lane's config is approved; its implementer is installed; it is
logged in (only where the CLI can tell us).
"""

from __future__ import annotations

from .. import registry
from ..discover import discover
from ..fleet import Effective


def _install_hint(key: str) -> str:
    from ..relay.main import load_adapter

    adapter = load_adapter(key)
    hint = getattr(adapter, "install_hint", "") if adapter else ""
    binary = registry.BY_KEY[key].binary
    return f"install `{binary}` and put it on PATH" + (f" ({hint})" if hint else "")


def _check(name: str, lane: dict | None, effective: Effective, cwd: str, found: dict) -> dict:
    row = {
        "lane": name,
        "implementer": None,
        "source": None,
        "ok": False,
        "problem": None,
        "fix": None,
    }
    if lane is None:
        row["problem"] = "lane-missing"
        row["fix"] = f"add it: delegate lane set {name} --implementer <key> --scope global|project"
        return row
    key = lane["implementer"]
    row["implementer"], row["source"] = key, lane["source"]
    if lane["source"] == "project" and not effective.project_trusted:
        row["problem"] = "not-approved"
        row["fix"] = (
            f"review {effective.project_path}, then approve it: delegate config approve --cwd {cwd}"
        )
        return row
    entry = found.get(key)
    if entry is None:
        row["problem"] = "not-installed"
        row["fix"] = _install_hint(key)
        return row
    if entry["authenticated"] is False:
        row["problem"] = "not-logged-in"
        login = registry.BY_KEY[key].login or f"log in to {registry.BY_KEY[key].display}"
        row["fix"] = f"sign in: {login}"
        return row
    row["ok"] = True
    return row


def doctor(cwd: str, lane: str | None = None) -> dict:
    """One row per effective lane (or just `lane`), and whether all would dispatch."""
    effective = Effective(cwd)
    lanes = effective.lanes()
    names = [lane] if lane is not None else list(lanes)
    keys = {lanes[n]["implementer"] for n in names if n in lanes}
    report = discover(only=keys) if keys else {"discovered": []}
    found = {entry["key"]: entry for entry in report["discovered"]}
    rows = [_check(name, lanes.get(name), effective, cwd, found) for name in names]
    return {"ok": all(row["ok"] for row in rows), "lanes": rows}
