"""Would each lane dispatch? And if not, the one thing to fix.

Checked in order, stopping at the first problem per lane: the lane exists;
a project lane's config is approved; its implementer is installed; the tools
its sandbox needs are there (Claude Code's write runs: bubblewrap and socat);
it is logged in. Where the CLI gives no way to tell whether it is logged in, the
lane is not `ok` but `login-unverified`: each row lists what was `checked`
and what was `notChecked`.
"""

from __future__ import annotations

from .. import registry
from ..discover.report import discover
from ..fleet import Effective

#: What doctor checks per lane, in order.
CHECKS = ("lane", "approval", "installed", "tools", "login")


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
        "checked": [],
        "notChecked": list(CHECKS),
    }
    done = row["checked"]

    def passed(check: str) -> None:
        done.append(check)
        row["notChecked"].remove(check)

    if lane is None:
        row["problem"] = "lane-missing"
        row["fix"] = f"add it: delegate lane set {name} --implementer <key> --scope global|project"
        return row
    passed("lane")
    key = lane["implementer"]
    row["implementer"], row["source"] = key, lane["source"]
    if lane["source"] == "project" and not effective.project_trusted:
        row["problem"] = "not-approved"
        row["fix"] = (
            f"review {effective.project_path}, then approve it: delegate config approve --cwd {cwd}"
        )
        return row
    passed("approval")
    entry = found.get(key)
    if entry is None:
        row["problem"] = "not-installed"
        row["fix"] = _install_hint(key)
        return row
    passed("installed")
    missing = missing_tools(key, lane)
    if missing:
        row["problem"] = "tools-missing"
        packages = " ".join(dict.fromkeys(pkg for _, pkg in missing))
        row["fix"] = (
            f"{registry.BY_KEY[key].display}'s shell sandbox needs "
            f"{' and '.join(tool for tool, _ in missing)}: sudo apt-get install {packages}"
        )
        return row
    passed("tools")
    login = registry.BY_KEY[key].login or f"log in to {registry.BY_KEY[key].display}"
    if entry["authenticated"] is False:
        row["problem"] = "not-logged-in"
        row["fix"] = f"sign in: {login}"
        return row
    if entry["authenticated"] is None:
        row["problem"] = "login-unverified"
        row["fix"] = (
            f"{registry.BY_KEY[key].display} gives no way to check its login from outside; "
            f"if a run fails with 'not logged in', sign in: {login}"
        )
        return row
    passed("login")
    row["ok"] = True
    return row


def missing_tools(key: str, lane: dict | None = None) -> list[tuple[str, str]]:
    """Sandbox tools an implementer's write runs need and PATH lacks (Linux only)."""
    import shutil
    import sys

    if not sys.platform.startswith("linux") or (lane or {}).get("readOnly") is True:
        return []
    return [(t, p) for t, p in registry.SANDBOX_TOOLS.get(key, ()) if shutil.which(t) is None]


def doctor(cwd: str, lane: str | None = None, there: dict | None = None) -> dict:
    """One row per effective lane (or just `lane`), and whether all would dispatch.

    `there` is another machine's discover document (--host): lanes are judged
    by what is installed there.
    """
    effective = Effective(cwd)
    lanes = effective.lanes()
    names = [lane] if lane is not None else list(lanes)
    keys = {lanes[n]["implementer"] for n in names if n in lanes}
    report = there or (discover(only=keys) if keys else {"discovered": []})
    found = {entry["key"]: entry for entry in report["discovered"]}
    rows = [_check(name, lanes.get(name), effective, cwd, found) for name in names]
    return {"ok": all(row["ok"] for row in rows), "lanes": rows}
