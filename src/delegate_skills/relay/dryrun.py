"""`--dry-run`: what a dispatch would launch, and why it would or would not; nothing launched."""

from __future__ import annotations

import os
import sys

from .console import temp_dir, which
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
    if read_only:
        from ..gitmeta import repo_paths
        from ..isolation import sandbox
        from ..runstore.paths import state_dir

        paths = repo_paths(opts["cd"])
        ro = [opts["cd"], state_dir(), paths.toplevel, paths.git_dir, paths.common_dir]
        plan = sandbox.plan(
            read_only=[p for p in ro if p],
            writable=[temp_dir(env), *adapter.sandbox_writable(opts)],
            cwd=opts["cd"],
            env=env,
            refused=adapter.sandbox_refusal(opts, env),
        )
        report["readOnlyRoute"] = adapter.read_only_route or None
        report["readOnlyEnforced"] = plan.enforced
        report["readOnlyUnenforced"] = plan.reason
    if binary is None:
        report["problem"] = f"`{adapter.binary}` not found on PATH. {adapter.install_hint}"
    sys.stdout.write(stringify(report, 2) + "\n")
    sys.stdout.flush()
    return 0
