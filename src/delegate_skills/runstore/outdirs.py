"""Which run wrote to which out-dir, without reading every record.

Each dispatch asks whether its --out-dir holds a run still going or a change
not landed, and `runs` commands take an out-dir where they take a run id. The
answer is in the records, one file per run; reading them all makes every
dispatch slower as the store fills. `runs/outdirs.json` maps the id of each
record read once to the out-dir it names and when its run started (neither
ever changes).

The records stay the truth; the index only says which of them to read:

- a lookup lists the record directories (one directory read) and reads the
  records the index does not hold yet (runs made since, or by an older
  version), then adds them to it under the write queue;
- ids the index holds that are no longer in the store are not used, and are
  dropped the next time it is written;
- the records it names for the out-dir are read newest first, and the first
  that names that out-dir and that start itself is the answer; when none
  does, every one it names is read.

An index that cannot be read is rebuilt; one that cannot be written only
costs the next lookup the same reads again.
"""

from __future__ import annotations

import os

from ..reading import read_json_object
from . import record
from .paths import records_root

INDEX_FILE = "outdirs.json"
INDEX_SCHEMA = "delegate-outdir-index.v1"
#: An entry is an id and a path: a few hundred bytes at most.
_INDEX_LIMIT = 64 * 1024 * 1024


def index_path() -> str:
    return os.path.join(records_root(), INDEX_FILE)


def _read(path: str) -> dict[str, tuple[str, str]]:
    """{run id: (out-dir, startedAt)} as the index holds them ({} when it cannot be read)."""
    data = read_json_object(path, _INDEX_LIMIT)
    if not data or data.get("schema") != INDEX_SCHEMA or not isinstance(data.get("runs"), dict):
        return {}
    return {
        key: (value[0], value[1])
        for key, value in data["runs"].items()
        if isinstance(value, list) and len(value) == 2 and all(isinstance(v, str) for v in value)
    }


def _write(path: str, found: dict[str, tuple[str, str]], present: set[str]) -> None:
    """Add `found` to the index, keeping only ids in `present`; nothing when it cannot."""
    from .. import store
    from ..errors import UserError
    from ..jsjson import document_bytes

    try:
        with store.queue((path,), store.lock_path_for(path), by_hand=True):
            runs = {key: value for key, value in _read(path).items() if key in present}
            runs.update(found)
            entries = {key: list(value) for key, value in sorted(runs.items())}
            data = {"schema": INDEX_SCHEMA, "runs": entries}
            store.atomic_write(path, document_bytes(data), durable=False, new_mode=0o600)
    except (OSError, UserError):
        pass


def entry(kept: record.Record) -> tuple[str, str] | None:
    """What the index keeps of a record: (out-dir, startedAt), or None for neither."""
    out_dir, started = kept.get("outDir"), kept.get("startedAt")
    if not isinstance(out_dir, str):
        return None
    return out_dir, started if isinstance(started, str) else ""


def runs_of(out_dir: str) -> list[tuple[str, str]]:
    """(run id, startedAt) of each run whose record may name `out_dir` (a real path), the
    latest start first.

    The caller reads the records and checks them: the index is a cache.
    """
    ids = record.stored_ids()
    path = index_path()
    known = _read(path)
    found = {}
    for run_id in ids:
        if run_id in known:
            continue
        found_record = record.load(run_id)
        kept = entry(found_record) if found_record is not None else None
        if kept is not None:
            found[run_id] = kept
    if found:
        _write(path, found, set(ids))
        known.update(found)
    named = [(run_id, known[run_id][1]) for run_id in ids if known.get(run_id, ("",))[0] == out_dir]
    return sorted(named, key=lambda pair: pair[1], reverse=True)


def by_out_dir(out_dir: str) -> record.Record | None:
    """The newest record of a run that wrote to `out_dir` (by its real path), or None.

    Reads the records the index names, the latest start first: the first that agrees with
    the index is the answer; else all it names are read and compared.
    """
    wanted = os.path.realpath(out_dir)
    named = runs_of(wanted)
    first = record.load(named[0][0]) if named else None
    if (
        first is not None
        and first.get("outDir") == wanted
        and str(first.get("startedAt", "")) == named[0][1]
    ):
        return first
    newest = None
    for run_id, _started in named:
        found = record.load(run_id)
        if (
            found is not None
            and found.get("outDir") == wanted
            and (newest is None or str(found.get("startedAt")) > str(newest.get("startedAt")))
        ):
            newest = found
    return newest
