"""What one command did (or would do) in one scope, and why a folder was left alone."""

from __future__ import annotations

from .planning import Placement
from .scopes import Scope


class Report:
    """What one command did (or would do) in one scope."""

    def __init__(self, scope: Scope, dry_run: bool = False) -> None:
        self.scope = scope
        self.dry_run = dry_run
        self.changes: list[dict] = []
        self.refused: list[dict] = []
        self.lockfile_written = False

    def change(self, placement: Placement, action: str, link: bool) -> None:
        self.changes.append(
            {
                "skill": placement.skill,
                "dir": self.scope.show(placement.directory),
                "agents": placement.readers,
                "action": action,
                "was": placement.status,
                "mode": "link" if link else "copy",
            }
        )

    def revision(self, skill: str, old: str | None, new: str) -> None:
        if old != new:
            self.changes.append({"skill": skill, "action": "recorded", "from": old, "to": new})

    def refuse(self, skill: str, placement: Placement | None, reason: str, fix: str) -> None:
        self.refused.append(
            {
                "skill": skill,
                "dir": self.scope.show(placement.directory) if placement else None,
                "status": placement.status if placement else "unknown",
                "reason": reason,
                "fix": fix,
            }
        )

    def document(self) -> dict:
        return {
            **self.scope.head(),
            "dryRun": self.dry_run,
            "changes": self.changes,
            "refused": self.refused,
            "lockfileWritten": self.lockfile_written,
        }


def refusal(placement: Placement, fix: str) -> tuple[str, str]:
    """Why a placement was left alone, and the fix: `fix` is the command that forces it."""
    if placement.status == "foreign":
        return (
            "a folder delegate-skills did not install is in the way",
            f"move it away, or {fix} to replace it",
        )
    if placement.wanted:
        return ("the copy was changed by hand", f"keep it, or {fix} to restore it")
    return ("the copy was changed by hand", f"keep it, or {fix} to remove it")


def sync_fix(scope: Scope, skill: str) -> str:
    return scope.command("sync", skill, "--force")
