"""One run's record in the run store: what the relay knows and the implementer cannot rewrite.

The run directory (`--out-dir`) is written by the implementer as much as by
the relay, so nothing a later command acts on is read from it. Each run has a
private directory under the state dir, `<state>/runs/<id>/` (0700), holding
`record.json` and what else only we write for that run: the private index of
its change record, a copy of its final answer. A confined or read-only run's
implementer cannot reach the state dir.

`record.json` holds, as the run goes: where it runs (`workdir`, `repository`,
`outDir` and whether the relay made it), who runs it (`implementer`, `lane`,
`readOnly`), the relay's and the implementer's processes with their kernel
start times, its cgroup, the token its environment carries, the worktree of a
--worktree run, the remote ids of a --host run, the change record's trees, the
files the relay wrote into the out-dir (`artifacts`), how it ended (`ended`:
status, exit code, time), its session id, its --setup and --check outcomes,
the token usage its implementer reported (`tokenUsage`, null for none),
the paths it changed that held the user's uncommitted changes (`overlap`: from
the relay for an in-place run, from `runs apply` for a worktree run), and later
what `runs` did with it (`landing`: for an apply, the trees before and after
it, what was left out, its overlap) and, for a review run, the verdict
(`review`). Every change goes through the write queue (store.queue).
"""

from __future__ import annotations

import os

from ..reading import CONFIG_LIMIT, read_json_object
from .paths import records_root

RECORD_SCHEMA = "delegate-run-record.v1"
RECORD_FILE = "record.json"
FINAL_COPY = "final.txt"
BRIEF_COPY = "brief.txt"
#: A copy of the work tree's own index before the run (what `runs undo` puts back).
INDEX_BEFORE = "index.before"
#: The implementer's environment names its run; `runs` finds strays by it.
TOKEN_ENV = "DELEGATE_RUN_TOKEN"
_ID_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"  # no i, l, o, u: ids are read aloud and typed
ID_LENGTH = 8
#: A record holds paths, ids and small outcomes; a larger file is not one of ours.
RECORD_LIMIT = 4 * CONFIG_LIMIT


def valid_id(text: object) -> bool:
    return isinstance(text, str) and len(text) == ID_LENGTH and all(c in _ID_ALPHABET for c in text)


def new_id() -> str:
    """A random run id (create_dir takes a wanted one while it is free)."""
    raw = int.from_bytes(os.urandom(5), "big")  # 40 bits: 8 characters of 5 bits
    return "".join(_ID_ALPHABET[(raw >> (5 * i)) & 31] for i in range(ID_LENGTH))


def record_dir(run_id: str) -> str:
    return os.path.join(records_root(), run_id)


def remove(run_id: str) -> None:
    """Delete a run's record (its directory and what is in it), if it is there."""
    import shutil

    if valid_id(run_id):
        shutil.rmtree(record_dir(run_id), ignore_errors=True)


def create_dir(wanted: str | None = None) -> tuple[str, str]:
    """A new run id (`wanted`, when it is free) and its private directory (0700, made here
    and nowhere else).

    Raises OSError when the state dir cannot be written.
    """
    root = records_root()
    os.makedirs(root, mode=0o700, exist_ok=True)
    for attempt in range(100):
        run_id = wanted if attempt == 0 and valid_id(wanted) else new_id()
        path = record_dir(run_id)
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            continue
        return run_id, path
    raise OSError(f"no free run id under {root}")


def release(run_id: str) -> None:
    """Give back a run id create_dir gave out, while nothing was written under it."""
    if valid_id(run_id):
        try:
            os.rmdir(record_dir(run_id))  # only an empty one: a written record stays
        except OSError:
            pass


class Record:
    """One run's record, as loaded; `update` changes it under the write queue."""

    def __init__(self, run_id: str, data: dict) -> None:
        self.id = run_id
        self.data = data

    @property
    def path(self) -> str:
        return os.path.join(record_dir(self.id), RECORD_FILE)

    @property
    def dir(self) -> str:
        return record_dir(self.id)

    def get(self, key: str, default=None):
        return self.data.get(key, default)

    def text(self, key: str) -> str | None:
        value = self.data.get(key)
        return value if isinstance(value, str) else None

    def section(self, key: str) -> dict | None:
        value = self.data.get(key)
        return value if isinstance(value, dict) else None

    def reloaded(self) -> Record:
        """The record as it is on disk now (this one, when it cannot be read)."""
        return load(self.id) or self

    def save(self) -> None:
        """Replace record.json atomically. Raises OSError."""
        from ..jsjson import document_bytes
        from ..store import atomic_write

        atomic_write(self.path, document_bytes(self.data), durable=False, new_mode=0o600)

    def update(self, **fields) -> None:
        """Reload, change `fields`, write back, under the record's lock (other writers wait)."""
        from .. import store

        with store.queue((self.path,), store.lock_path_for(self.path), by_hand=True):
            fresh = load(self.id)
            if fresh is not None:
                self.data = fresh.data
            self.data.update(fields)
            self.save()

    def keep(self, name: str, text: str) -> None:
        """A private copy of something the run produced (its brief, its final answer)."""
        from ..store import atomic_write

        atomic_write(
            os.path.join(self.dir, name),
            text.encode("utf-8", errors="replace"),
            durable=False,
            new_mode=0o600,
        )

    def read_kept(self, name: str, limit: int) -> str | None:
        """A private copy kept with `keep`, up to `limit` bytes; None when there is none."""
        try:
            with open(os.path.join(self.dir, name), "rb") as handle:
                return handle.read(limit).decode("utf-8", errors="replace")
        except OSError:
            return None


def new(out_dir: str, reserved: str | None = None, wanted: str | None = None, **fields) -> Record:
    """Make and write the record of a run starting now. Raises OSError.

    `reserved` is a run id create_dir gave out earlier (the branch of a --worktree or
    --host run is named for it before its record is written); otherwise a new one is made,
    `wanted` (from new_id) if it is still free.
    """
    run_id = reserved if valid_id(reserved) else create_dir(wanted)[0]
    token = os.urandom(16).hex()
    record = Record(
        run_id,
        {
            "schema": RECORD_SCHEMA,
            "id": run_id,
            "outDir": os.path.realpath(out_dir),
            "token": token,
            **fields,
        },
    )
    record.save()
    return record


def load(run_id: str) -> Record | None:
    """The record of `run_id`, or None when there is none (or it is not one of ours)."""
    if not valid_id(run_id):
        return None
    data = read_json_object(os.path.join(record_dir(run_id), RECORD_FILE), RECORD_LIMIT)
    if not data or data.get("schema") != RECORD_SCHEMA or data.get("id") != run_id:
        return None
    return Record(run_id, data)


def stored_ids(prefix: str = "") -> list[str]:
    """The ids of the record directories in the store (starting with `prefix`), in order."""
    try:
        names = os.listdir(records_root())
    except OSError:
        return []
    return sorted(name for name in names if name.startswith(prefix) and valid_id(name))


def all_records() -> list[Record]:
    """Every record in the store (ids in order)."""
    return [found for name in stored_ids() if (found := load(name)) is not None]


def by_prefix(prefix: str) -> list[Record]:
    """Records whose id starts with `prefix`."""
    return [found for name in stored_ids(prefix) if (found := load(name)) is not None]
