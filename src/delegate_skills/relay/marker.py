"""`run.json`: who runs a run, for people and tools to read (never acted on)."""

from __future__ import annotations

import os

from ..isolation.linux import process_start

RUN_FILE = "run.json"
RUN_SCHEMA = "delegate-run.v1"


def run_marker(
    implementer: str,
    lane: str | None,
    workdir: str,
    out_dir: str,
    started_at: str,
    group: int | None = None,
    run_id: str | None = None,
    argv: list[str] | None = None,
) -> bytes:
    """The bytes of run.json for the relay process calling this.

    `group` is the implementer's process group, once it is launched. What
    `runs` signals or removes comes from the run's record in the store,
    which `id` names.
    """
    pid = os.getpid()
    marker = {
        "schema": RUN_SCHEMA,
        "id": run_id,
        "implementer": implementer,
        "lane": lane,
        "workdir": workdir,
        "outDir": out_dir,
        "pid": pid,
        "pidStart": process_start(pid),
        "startedAt": started_at,
    }
    if group is not None:
        marker["group"] = group
        marker["groupStart"] = process_start(group)
    if argv is not None:
        marker["implementerArgv"] = argv
    from ..jsjson import document_bytes

    return document_bytes(marker)
