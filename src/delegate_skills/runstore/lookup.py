"""Finding a run's record: by id, a unique prefix of one, its directory, or --last.

Every command that acts on a run finds it here, in the store; a directory
that no record names (whatever run.json or result.json it holds) is foreign
and nothing acts on it. Every state dir this user's runs were recorded in is
searched (paths.known_state_dirs); a run found in another one makes the command
work in that one (paths.use_state_dir), where the run's record, change record
and worktree are.
"""

from __future__ import annotations

import os

from ..errors import UserError
from . import liveness, paths
from .outdirs import by_out_dir
from .record import Record, all_records, by_prefix

#: Names the run started last on this machine wherever a run is asked for.
LAST = "--last"
RUN_FILE = "run.json"
RESULT_FILE = "result.json"
LANDED = ("applied", "discarded", "undone")


def _everywhere(question) -> list[tuple[str, Record]]:
    """(state dir, record) for each record `question()` answers, in every known state dir."""
    found = []
    for state in paths.known_state_dirs():
        with paths.reading(state):
            found += [(state, record) for record in question()]
    return found


def _taken(state: str, record: Record) -> Record:
    """`record`, found in `state`: from now on this command works in that state dir."""
    if os.path.realpath(state) != os.path.realpath(paths.state_dir()):
        paths.use_state_dir(state)
    return record


def _newest(found: list[tuple[str, Record]]) -> Record | None:
    """The record of the run started last among `found`, taken (see `_taken`); None for none."""
    if not found:
        return None
    state, record = max(found, key=lambda entry: (entry[1].text("startedAt") or "", entry[1].id))
    return _taken(state, record)


def last() -> Record:
    """The record of the run started last on this machine. Raises UserError."""
    newest = _newest(_everywhere(all_records))
    if newest is None:
        raise UserError("--last: no relay run has been recorded on this machine yet")
    return newest


def looks_like_id(ref: str) -> bool:
    return bool(ref) and ref.isalnum() and ref.islower() and os.sep not in ref


def find(ref: str) -> Record | None:
    """The record `ref` names, or None. Raises UserError for an ambiguous id prefix."""
    if ref == LAST:
        return last()
    if looks_like_id(ref) and not os.path.isdir(ref):
        matches = _everywhere(lambda: by_prefix(ref))
        if len(matches) > 1:
            shown = ", ".join(m.id for _, m in matches[:5])
            raise UserError(f"run id {ref} is ambiguous ({shown}…); give more of it")
        if matches:
            return _taken(*matches[0])
    if not os.path.isdir(ref):
        return None
    return _newest(_everywhere(lambda: [r for r in (by_out_dir(ref),) if r is not None]))


def is_run_dir(path: str) -> bool:
    """Whether `path` holds a relay's run.json or result.json (ours or not)."""
    return any(os.path.isfile(os.path.join(path, name)) for name in (RUN_FILE, RESULT_FILE))


def resolve(ref: str) -> Record:
    """The record `ref` names. Raises UserError (one line) when the store has none."""
    found = find(ref)
    if found is not None:
        return found
    if os.path.isdir(ref):
        if is_run_dir(ref):
            raise UserError(
                f"{ref}: no relay of this machine recorded a run there (a foreign run "
                "directory); nothing acts on it"
            )
        raise UserError(f"{ref}: no relay run here (no run record names this directory)")
    from ..errors import did_you_mean

    known = [r.id for _, r in _everywhere(all_records)] if looks_like_id(ref) else []
    hint = did_you_mean(ref, known) if known else ""
    raise UserError(f"{ref}: no such run (neither a run id nor a run directory){hint}")


def landing(record: Record) -> str | None:
    """applied | discarded | undone as last recorded; "pending" for a worktree run
    nothing has landed or dropped yet; None for an in-place run."""
    landed = record.section("landing") or {}
    if landed.get("state") in LANDED:
        return landed["state"]
    return "pending" if record.section("worktree") is not None else None


def worktree(record: Record) -> dict | None:
    """The run's worktree (path, branch, base, source, …), or None for an in-place run."""
    tree = record.section("worktree")
    fields = ("path", "branch", "base", "source")
    if tree is None or not all(isinstance(tree.get(f), str) for f in fields):
        return None
    return tree


def held_reason(out_dir: str) -> str | None:
    """Why a new run may not use `out_dir` (one line), or None.

    A run there that is still going, or a --worktree run whose change is
    neither landed nor dropped while its worktree or branch still holds it,
    would lose its record (and with it the way to land the work) to the new run.
    """
    from ..gitmeta import git_outcome

    found = by_out_dir(out_dir)
    if found is None:
        return None
    status = liveness.status(found)
    if status in liveness.IN_FLIGHT:
        return (
            f"--out-dir {out_dir} holds run {found.id}, which is still {status}; "
            f"wait for it (runs wait {found.id}) or choose a new --out-dir"
        )
    tree = worktree(found)
    if landing(found) not in ("pending", "undone") or tree is None or tree.get("removed"):
        return None
    held = os.path.isdir(tree["path"])
    if not held:
        ref = f"refs/heads/{tree['branch']}"
        held = git_outcome(tree["source"], "rev-parse", "--verify", "--quiet", ref).ok
    if not held:
        return None
    return (
        f"--out-dir {out_dir} holds run {found.id}, a --worktree run whose change is not "
        f"landed; land it (runs apply {found.id}) or drop it (runs discard {found.id}), or "
        "choose a new --out-dir"
    )


def sharing_worktree(record: Record) -> list[Record]:
    """Other runs whose worktree is this run's (its continuations, or the run it continued)."""
    tree = worktree(record)
    if tree is None:
        return []
    path = os.path.realpath(tree["path"])
    found = []
    for other in all_records():
        theirs = worktree(other)
        if (
            other.id != record.id
            and theirs is not None
            and os.path.realpath(theirs["path"]) == path
        ):
            found.append(other)
    return found
