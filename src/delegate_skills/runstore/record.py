"""The private record of a run: what the relay knows and the implementer cannot rewrite.

The run directory (`--out-dir`) is written by the implementer as much as by
the relay: some CLIs put their own files there, and any of them could rewrite
`run.json`. What decides which processes `runs wait/cancel/discard` signal,
which worktree and branch they remove, and what a run changed is therefore
kept apart, under the state dir: `<state>/runs/<id>/record.json`, beside the
private index the change record is made with. A read-only run's implementer
has the state dir bound read-only (sandbox.py).

A record names the relay and the implementer's process group each with its
kernel start time, so a pid the kernel has since given to another process is
never signalled; the run's cgroup, if it has one; a token the implementer's
environment carries; the worktree and branch of a --worktree run with the
`.git` file that pointed at its git dir; and the trees of the change record.
"""

from __future__ import annotations

import os

from ..reading import CONFIG_LIMIT, read_json_object

RECORD_SCHEMA = "delegate-run-record.v1"
RECORDS_DIR = "runs"
RECORD_FILE = "record.json"
#: The implementer's environment names its run; `runs` finds strays by it.
TOKEN_ENV = "DELEGATE_RUN_TOKEN"
_ID_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"  # no i, l, o, u: ids are read aloud and typed
ID_LENGTH = 8


def state_dir() -> str:
    """`$XDG_STATE_HOME/delegate-skills` (else ~/.local/state/delegate-skills)."""
    base = os.environ.get("XDG_STATE_HOME")
    if not base or not os.path.isabs(base):
        base = os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(base, "delegate-skills")


def records_root() -> str:
    return os.path.join(state_dir(), RECORDS_DIR)


def valid_id(text: object) -> bool:
    return isinstance(text, str) and len(text) == ID_LENGTH and all(c in _ID_ALPHABET for c in text)


def _random_id() -> str:
    raw = int.from_bytes(os.urandom(5), "big")  # 40 bits: 8 characters of 5 bits
    return "".join(_ID_ALPHABET[(raw >> (5 * i)) & 31] for i in range(ID_LENGTH))


def record_dir(run_id: str) -> str:
    return os.path.join(records_root(), run_id)


def remove(run_id: str) -> None:
    """Delete a run's private record (its directory and what is in it), if it is there."""
    import shutil

    if valid_id(run_id):
        shutil.rmtree(record_dir(run_id), ignore_errors=True)


def create_dir() -> tuple[str, str]:
    """A new run id and its private directory (0700, made here and nowhere else).

    Raises OSError when the state dir cannot be written.
    """
    root = records_root()
    os.makedirs(root, mode=0o700, exist_ok=True)
    for _ in range(100):
        run_id = _random_id()
        path = record_dir(run_id)
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            continue
        return run_id, path
    raise OSError(f"no free run id under {root}")


def _real(path: str) -> str:
    return os.path.realpath(path)


class Record:
    """One run's private record, as loaded; `save` writes it back whole."""

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


def new(out_dir: str, **fields) -> Record:
    """Make and write the record of a run starting now. Raises OSError."""
    run_id, _ = create_dir()
    token = os.urandom(16).hex()
    record = Record(
        run_id,
        {"schema": RECORD_SCHEMA, "id": run_id, "outDir": _real(out_dir), "token": token, **fields},
    )
    record.save()
    return record


def load(run_id: str) -> Record | None:
    """The record of `run_id`, or None when there is none (or it is not one of ours)."""
    if not valid_id(run_id):
        return None
    data = read_json_object(os.path.join(record_dir(run_id), RECORD_FILE), CONFIG_LIMIT)
    if not data or data.get("schema") != RECORD_SCHEMA or data.get("id") != run_id:
        return None
    return Record(run_id, data)


def for_out_dir(out_dir: str, hinted_id: object = None) -> Record | None:
    """The record whose run wrote to `out_dir`.

    `hinted_id` (the id run.json names) is tried first; it only counts when
    that record names this very directory, so a rewritten run.json cannot
    point at another run. Otherwise every record is looked at.
    """
    wanted = _real(out_dir)
    if valid_id(hinted_id):
        record = load(hinted_id)
        if record is not None and record.get("outDir") == wanted:
            return record
    newest = None
    for record in all_records():
        if record.get("outDir") == wanted and (
            newest is None or str(record.get("startedAt")) > str(newest.get("startedAt"))
        ):
            newest = record
    return newest


def all_records() -> list[Record]:
    try:
        names = os.listdir(records_root())
    except OSError:
        return []
    found = []
    for name in sorted(names):
        record = load(name)
        if record is not None:
            found.append(record)
    return found


def by_prefix(prefix: str) -> list[Record]:
    """Records whose id starts with `prefix`."""
    try:
        names = os.listdir(records_root())
    except OSError:
        return []
    found = []
    for name in sorted(names):
        if name.startswith(prefix):
            record = load(name)
            if record is not None:
                found.append(record)
    return found
