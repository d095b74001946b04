"""`delegate runs pr`: a finished run's recorded change as a pull request."""

from __future__ import annotations

import click

from .output import JSON_OPTION, emit, run_ref


def pr_text(report: dict) -> str:
    branch, remote = report["branch"], report["remote"]
    pushed = {"up to date": "already on", "new": "pushed to", "updated": "pushed to"}
    lines = [f"{branch} ({report['commit'][:12]}) {pushed.get(report['pushed'], 'pushed to')} "
             f"{remote}"]  # fmt: skip
    if report["url"]:
        if report["existing"]:
            lines.append("the pull request was opened before:")
        lines.append(report["url"])
    elif report["compareUrl"]:
        lines.append(f"gh is not on PATH; open the pull request into {report['base']} here:")
        lines.append(report["compareUrl"])
    elif not report["gh"]:
        lines.append(
            f"gh is not on PATH; open a pull request of {branch} into {report['base']} on "
            f"{remote} yourself"
        )
    return "\n".join(lines)


@click.command("pr")
@run_ref("run")
@click.option(
    "--remote",
    metavar="NAME",
    help="Push here (default: the current branch's upstream remote, else origin).",
)
@click.option(
    "--base",
    metavar="BRANCH",
    help="The branch the pull request goes into (default: the remote's default branch).",
)
@click.option("--draft", is_flag=True, help="Open it as a draft.")
@click.option("--title", metavar="TEXT", help="Its title (default: the brief's first line).")
@JSON_OPTION
def runs_pr(
    run: str, remote: str | None, base: str | None, draft: bool, title: str | None, as_json: bool
) -> None:
    """Open a pull request for a finished --worktree or --host run's change.

    The change committed is the run's recorded one (what `runs diff RUN`
    shows), on top of the commit the run started from, on branch
    delegate/<run id>; the brief's first line is its subject, the
    implementer's final report its body. The branch is pushed with your own
    git (never forced) and `gh pr create` opens the pull request; without
    gh, the compare page of a GitHub remote is printed. Your work tree and
    index are not touched; the run's worktree keeps its files, its index
    follows the branch. Run again, it pushes the same commit and prints the
    same URL.

    Exit codes: 0 opened (or opened before); 2 nothing to open or nothing
    done (a run still going, an in-place run, no change, no remote, the
    branch checked out in another work tree); 1 git push was rejected or
    failed, or gh pr create failed after the push.
    """
    from ..runs import pr

    emit(pr.open_pr(run, remote=remote, base=base, draft=draft, title=title), as_json, pr_text)
