"""What a confined run may write: the allowlist the relay gives isolation/sandbox.py.

A write run gets its work tree and the git dirs a commit there needs; a
read-only run gets neither. Both get the run directory, the CLI's own state
and config (the adapter names them), the user's additions and a private
/tmp; both keep the repository's hooks, config and approval store
read-only, and never see our state dir (the run store, other runs'
worktrees) but for their own worktree.

A run is confined when it is read-only, or asked to be: `--confine`, the
environment (DELEGATE_CONFINE=1), or the user's settings file
(`confine: true`). fanout and batch ask for it unless told not to.
"""

from __future__ import annotations

import os

from ..pathsearch import which

#: "1" asks every write run to be confined; "0" asks none to be (a flag still can).
CONFINE_ENV = "DELEGATE_CONFINE"
#: Why a write run is not confined when nothing asked for it.
NOT_ASKED = "not asked for (--confine, DELEGATE_CONFINE=1 or confine in the settings file)"


def wanted(relay, opts: dict) -> bool:
    """Whether this run is to be confined (a read-only run always is).

    Raises UserError for a settings file that cannot be read.
    """
    adapter = relay.adapter
    if adapter.read_only(opts) or opts.get("confine") is True:
        return True
    if opts.get("confine") is False:
        return False
    setting = os.environ.get(CONFINE_ENV)
    if setting in ("0", "1"):
        return setting == "1"
    from ..usersettings import load_settings

    return load_settings().get("confine") is True


def allowlist(relay, env: dict[str, str], launcher: list[str] | None):
    """The sandbox's allowlist for this run."""
    from ..isolation.sandbox import Allowlist

    adapter, opts, paths = relay.adapter, relay.opts, relay.paths
    allow = Allowlist()
    allow.writable += [relay.run.path, *adapter.cli_state(opts, env)]
    allow.read_only += adapter.cli_config(opts, env)
    allow.writable += adapter.sandbox_writable(opts)
    allow.extra_from(env)
    allow.hidden += _state_dirs()
    # Read-only, and seen: its folder and the home (under /tmp they would be hidden).
    allow.visible += [opts["cd"], env.get("HOME") or os.path.expanduser("~")]
    if launcher:
        binary = which(launcher[0], env)
        if binary is not None:
            allow.visible += [os.path.dirname(binary), os.path.dirname(os.path.realpath(binary))]
    if paths is None or paths.toplevel is None:
        if not adapter.read_only(opts):
            allow.writable.append(opts["cd"])
        return allow
    allow.visible += [paths.toplevel, paths.git_dir, paths.common_dir]
    if paths.common_dir is not None:
        allow.writable += [os.path.join(paths.common_dir, name) for name in adapter.git_dir_state]
    if not adapter.read_only(opts):
        allow.writable += _repository(relay)
    allow.read_only += _protected(paths)
    return allow


def _state_dirs() -> list[str]:
    """Every state dir of this user's we know of (the one in use, this environment's own,
    those the roots index lists): each holds run records and other runs' worktrees."""
    from ..errors import UserError
    from ..runstore.paths import known_state_dirs, own_state_dir, state_dir

    try:
        known = known_state_dirs()
    except UserError:  # an index of another version: still hide the ones named here
        known = []
    return list(dict.fromkeys([state_dir(), own_state_dir(), *known]))


def _repository(relay) -> list[str]:
    """The work tree and the git dirs a commit in it writes."""
    paths = relay.paths
    if relay.worktree is not None:
        common = paths.common_dir
        branch_refs = os.path.join(common, "refs", "heads", "delegate")
        branch_logs = os.path.join(common, "logs", "refs", "heads", "delegate")
        for folder in (branch_refs, branch_logs):
            os.makedirs(folder, exist_ok=True)
        return [paths.toplevel, paths.git_dir, os.path.join(common, "objects"),
                branch_refs, branch_logs]  # fmt: skip
    found = [paths.toplevel, paths.git_dir]
    if paths.common_dir != paths.git_dir:
        found += [os.path.join(paths.common_dir, name) for name in ("objects", "refs", "logs")]
    return found


def _protected(paths) -> list[str]:
    """What stays read-only inside a writable repository: hooks, config, the approval store."""
    common, own = paths.common_dir, paths.git_dir
    hooks = os.path.join(common, "hooks")
    try:
        os.makedirs(hooks, exist_ok=True)  # an empty folder, so no hook can be put there
    except OSError:
        pass
    found = [hooks, *(os.path.join(common, name) for name in ("config", "info", "delegate-skills"))]
    found += [os.path.join(own, name) for name in ("config.worktree", "delegate-skills")]
    return found


def arm(relay, env: dict[str, str], launcher: list[str] | None) -> None:
    """Plan the sandbox of a confined run (relay.sandbox), or say why there is none."""
    from ..isolation import sandbox

    adapter, opts = relay.adapter, relay.opts
    relay.sandbox = sandbox.plan(
        allowlist(relay, env, launcher),
        cwd=opts["cd"],
        env=env,
        refused=adapter.sandbox_refusal(opts, env),
        tmp=_private_tmp(relay),
        deferred=True,  # the version probe, wrapped, shows that bwrap starts (launch.py)
    )


def _private_tmp(relay) -> str | None:
    """An empty folder of the run's own in the store, to be its /tmp (None: make one)."""
    if relay.record is None:
        return None
    path = os.path.join(relay.record.dir, "tmp")
    try:
        os.mkdir(path, 0o700)
    except OSError:
        return None
    return path
