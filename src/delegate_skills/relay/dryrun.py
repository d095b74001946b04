"""`--dry-run`: what a dispatch would launch, and why it would or would not; nothing launched."""

from __future__ import annotations

import os
import sys

from ..pathsearch import which
from .confine import NOT_ASKED
from .rundir import RunDir, default_root, iso_now
from .supervise import mask_brief


def dry_run(relay, brief: str) -> int:
    from ..jsjson import stringify

    adapter, opts = relay.adapter, relay.opts
    env = adapter.launch_env(opts)
    launcher = adapter.launcher(opts, env)
    out_dir = opts["outDir"] or os.path.join(default_root(), "<new run directory>")
    run = RunDir(out_dir, iso_now(), brief)
    binary = None if launcher is None else which(launcher[0], env)
    argv = None
    if launcher is not None:
        argv = mask_brief([*launcher, *adapter.build_argv(opts, run)], brief)
    read_only = adapter.read_only(opts)
    report = {
        "dryRun": True,
        "implementer": adapter.key,
        "lane": opts["lane"],
        "laneSource": opts["laneSource"],
        "workdir": opts["cd"],
        "worktree": bool(opts["worktree"]) or relay.worktree is not None,
        "outDir": opts["outDir"],
        "binary": binary,
        "implementerArgv": argv,
        "briefVia": adapter.brief_via if adapter.brief_via == "stdin" else "argv",
        "timeout": opts["timeout"],
        "sessionRequested": adapter.session_requested(opts),
        "previousRun": relay.previous_run,
        "readOnly": read_only,
    }
    plan = _would_confine(relay, env) if relay.confined else None
    report["confined"] = plan.enforced if plan is not None else None
    report["confinedUnavailable"] = plan.reason if plan is not None else NOT_ASKED
    if read_only:
        report["readOnlyRoute"] = adapter.read_only_route or None
        report["readOnlyEnforced"] = plan.enforced
        report["readOnlyUnenforced"] = plan.reason
    if binary is None:
        report["problem"] = f"`{adapter.binary}` not found on PATH. {adapter.install_hint}"
    sys.stdout.write(stringify(report, 2) + "\n")
    sys.stdout.flush()
    return 0


def _would_confine(relay, env: dict[str, str]):
    """Whether bubblewrap would confine this run here (a probe; nothing is made or bound)."""
    import tempfile

    from ..isolation import sandbox

    allow = sandbox.Allowlist()
    allow.visible.append(relay.opts["cd"])
    return sandbox.plan(
        allow,
        cwd=relay.opts["cd"],
        env=env,
        refused=relay.adapter.sandbox_refusal(relay.opts, env),
        tmp=tempfile.gettempdir(),
        owned=False,
    )
