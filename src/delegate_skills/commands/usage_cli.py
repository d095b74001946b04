"""`delegate runs usage`: the tokens and cost of the recorded runs, summed by group."""

from __future__ import annotations

import click

from .output import JSON_OPTION, emit


@click.command("usage")
@click.option(
    "--since",
    metavar="DATE|AGE",
    default=None,
    help="Only runs started since this day (YYYY-MM-DD, from its start in UTC) or within this "
    "age (7d, 12h, 90m). Default: every recorded run.",
)
@click.option(
    "--by",
    "by",
    metavar="implementer|lane|repo|day",
    default="implementer",
    show_default=True,
    help="Group the runs by implementer, by fleet lane, by repository (a worktree run's source) "
    "or by the UTC day they started.",
)
@JSON_OPTION
def runs_usage(since: str | None, by: str, as_json: bool) -> None:
    """Tokens and cost of the runs on this machine, summed per group.

    Sums the usage each implementer reported (input, cached input, output,
    reasoning and total tokens, cost in USD) over the runs of every state dir
    of yours, from the run store's records alone: a run directory's
    result.json is never read. A run that reported no usage is counted under
    no-usage (runsWithoutUsage), not as zero tokens. The cost is the sum of the
    costs reported; where only some runs of a group reported one, the table
    says how many (runsWithCost in JSON). Runs still in flight are left out.
    On a terminal, a table; JSON on a pipe or with --json.
    """
    from ..runs import usage
    from ..runs.view import utc_now

    by = usage.check_by(by)
    moment = usage.parse_since(since, utc_now()) if since is not None else None

    def warn(line: str) -> None:
        click.echo(f"delegate: {line}", err=True)

    emit(usage.usage(by, moment, warn), as_json, usage_text)


#: The table's columns after the group's: (header, the field it shows).
COLUMNS = (
    ("runs", "runs"), ("input", "inputTokens"), ("cached", "cachedInputTokens"),
    ("output", "outputTokens"), ("reasoning", "reasoningTokens"), ("total", "totalTokens"),
    ("cost-usd", "costUsd"), ("no-usage", "runsWithoutUsage"),
)  # fmt: skip


def _cost_cell(group: dict) -> str:
    if group["costUsd"] is None:
        return "-"
    shown = f"{group['costUsd']:.4f}"
    if group["runsWithCost"] < group["runsWithUsage"]:
        shown += f" ({group['runsWithCost']} of {group['runsWithUsage']} runs)"
    return shown


def _cells(name: str, group: dict) -> tuple[str, ...]:
    cells = [name]
    for _, field in COLUMNS:
        if field == "costUsd":
            cells.append(_cost_cell(group))
        else:
            cells.append("-" if group[field] is None else str(group[field]))
    return tuple(cells)


def usage_text(report: dict) -> str:
    """`runs usage` for a person: one row per group, then the sum of them all."""
    by = report["by"]
    lines = []
    if not report["groups"]:
        since = f" since {report['since']}" if report["since"] else ""
        lines.append(f"no ended runs{since}")
    else:
        header = (by, *(name for name, _ in COLUMNS))
        body = [_cells("-" if g[by] is None else g[by], g) for g in report["groups"]]
        body.append(_cells("all", report["total"]))
        widths = [max(len(row[i]) for row in (header, *body)) for i in range(len(header))]
        for row in (header, *body):
            first = f"{row[0]:<{widths[0]}}"
            rest = (f"{cell:>{width}}" for cell, width in zip(row[1:], widths[1:], strict=True))
            lines.append("  ".join((first, *rest)).rstrip())
        total = report["total"]
        if total["runsWithoutUsage"]:
            lines.append(f"no-usage: {total['runsWithoutUsage']} run(s) whose implementer "
                         "reported no usage (not counted as zero)")  # fmt: skip
        if total["runsWithCost"] < total["runsWithUsage"]:
            lines.append("cost-usd: the costs reported, summed; (N of M runs): only N of the M "
                         "runs that reported usage reported a cost")  # fmt: skip
    if report["runsInFlight"]:
        lines.append(f"{report['runsInFlight']} run(s) still in flight, not counted")
    return "\n".join(lines)
