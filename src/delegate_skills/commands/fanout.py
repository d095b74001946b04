"""`delegate fanout`: one brief, several lanes or implementers, each run in its own worktree.

The runs are started and reported by runs/attempts.py (which a skill folder's
`runs.py fanout` runs too); this module adds the table a person reads.
Nothing here commits or applies: the orchestrator compares the runs, then
lands one with `delegate runs apply`.
"""

from __future__ import annotations

from ..runs.attempts import (
    RELAY_LOG,
    Fanout,
    Target,
    exit_code,
    launcher_env,
    plan,
    tokens_of,
)

#: The table, and the runner's names that fanout, batch, watch and the MCP server use.
__all__ = ["RELAY_LOG", "Fanout", "Target", "exit_code", "launcher_env", "plan", "table",
           "tokens_of"]  # fmt: skip


def _check_cell(row: dict) -> str:
    """The table's check column: pass, FAIL, or "-" without a --check."""
    check = row.get("check")
    if not isinstance(check, dict):
        return "-"
    return "pass" if check.get("exitCode") == 0 else "FAIL"


def _read_only_cell(row: dict) -> str:
    """The table's read-only column: "-" for a write run, else the run's verdict."""
    if "readOnlyViolation" not in row:
        return "-"
    return {True: "WROTE", False: "kept"}.get(row["readOnlyViolation"], "unproven")


def table(rows: list[dict]) -> str:
    """The comparison table a person reads at a terminal."""
    tasks = any("task" in row for row in rows)
    reviewed = any("review" in row for row in rows)
    header = ("lane", "implementer", "status", "read-only", "check", "time", "files", "+lines",
              "-lines", "tokens")  # fmt: skip
    header = ("task", *header) if tasks else header
    header = (*header, "review") if reviewed else header
    body = []
    for row in rows:
        stat = row.get("diffstat") or {}
        body.append(
            (
                *([row.get("task") or "-"] if tasks else []),
                row["lane"] or "-",
                row["implementer"],
                row["status"] or "?",
                _read_only_cell(row),
                _check_cell(row),
                f"{row['durationSeconds']:.0f}s",
                _shown(stat.get("filesChanged")),
                _shown(stat.get("linesAdded")),
                _shown(stat.get("linesRemoved")),
                _shown(row.get("tokens")),
                *([row.get("review") or "-"] if reviewed else []),
            )
        )
    widths = [max(len(str(r[i])) for r in (header, *body)) for i in range(len(header))]
    lines = [
        "  ".join(f"{cell:<{w}}" for cell, w in zip(r, widths, strict=True)).rstrip()
        for r in (header, *body)
    ]
    lines.append("")
    for row in rows:
        where = row["outDir"] or "(not started)"
        lines.append(f"{row.get('task') or row['lane'] or row['implementer']}: {where}")
        if row.get("error"):
            lines.append(f"  {row['error']}")
        if row.get("readOnlyViolation") is True:
            lines.append("  a read-only run that changed files: see readOnlyChanges in its result")
    lines.append("")
    if tasks:
        lines.append("review each run (delegate runs diff <out-dir>), land those you keep")
        lines.append("(delegate runs apply <out-dir>), drop the rest (delegate runs discard")
        lines.append("<out-dir>). Nothing was committed.")
        return "\n".join(lines)
    lines.append("compare the diffs, then land one: delegate runs apply <out-dir>;")
    lines.append("drop the others: delegate runs discard <out-dir>. Nothing was committed.")
    return "\n".join(lines)


def _shown(value) -> str:
    return "-" if value is None else str(value)
