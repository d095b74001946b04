"""The files a relay writes in a run directory, by name: what the store records as the run's.

Only these are ever removed again (`runs prune`); anything else in the
directory is someone else's. A launcher of ours (fanout, the MCP server,
`delegate review`) that put a file there before the relay started names it
in the relay's environment, and says when it made the directory itself.
"""

from __future__ import annotations

import os

from .rundir import FINAL, RESERVE, RESULT

STDERR_NAME = "stderr.txt"
#: Files a launcher of ours wrote into the run directory before the relay started.
LAUNCHER_FILES_ENV = "DELEGATE_RELAY_LAUNCHER_FILES"
#: Set by a launcher of ours that made the run directory itself.
LAUNCHER_MADE_DIR_ENV = "DELEGATE_RELAY_LAUNCHER_MADE_DIR"


def launcher_files() -> list[str]:
    """The names a launcher of ours says it wrote in the run directory (plain names only)."""
    raw = os.environ.get(LAUNCHER_FILES_ENV, "")
    return [n for n in raw.split(",") if n and os.sep not in n and n not in (".", "..")]


def artifact_names(relay) -> list[str]:
    """Every file the relay may write in the run directory (left out of the change record)."""
    from ..snapshots.changes import PATCH_NAME
    from .hooks import CHECK_LOG, SETUP_LOG
    from .marker import RUN_FILE

    adapter = relay.adapter
    names = {RUN_FILE, adapter.brief_name, RESULT, FINAL, RESERVE, PATCH_NAME, SETUP_LOG,
             CHECK_LOG, *launcher_files()}  # fmt: skip
    names.update(name for name in (adapter.events_name, STDERR_NAME) if name)
    names.update(relay.fresh_names)
    names.update(entry[1] for entry in adapter.path_fields if not isinstance(entry, str))
    return sorted(names)


def written_artifacts(relay) -> list[str]:
    """The names of the files this relay wrote in the run directory, and its launcher's."""
    names = {*relay.fresh_names, *relay.wrote, *launcher_files()}
    if relay.adapter.child_writes_final and os.path.isfile(relay.run.file(FINAL)):
        names.add(FINAL)
    return sorted(names)
