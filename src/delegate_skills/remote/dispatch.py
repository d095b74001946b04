"""A relay's `--host` run from start to result, and `runs wait` taking one up again."""

from __future__ import annotations

import os
import sys

from ..errors import UserError
from ..gitmeta import BoundGit, repo_paths
from . import client, hosts, ssh


def dispatch(relay, brief: str, argv: list[str]) -> int:
    """Run `relay`'s configured run on its --host; the relay's exit code."""
    opts, adapter = relay.opts, relay.adapter
    paths = repo_paths(opts["cd"])
    if paths.toplevel is None or paths.git_dir is None:
        client._say(f"--host needs --cd inside a git work tree; {opts['cd']} is not in one")
        return 2
    top = paths.toplevel
    table = {flag.name: flag for flag in adapter.flag_table()}
    try:
        host = hosts.load(opts["host"])
        base = client.base_commit(top, paths.git_dir, opts["includeUncommitted"])
        machine = client.Machine(host, client.source_key(paths.common_dir, top))
    except UserError as problem:
        client._say(str(problem))
        return 2
    from ..relay import prepare, storing
    from ..relay.rundir import RunDir, default_out_dir, iso_now
    from ..runstore import record

    try:  # the run's id in the store names its branch there and here
        run_id = record.create_dir()[0]
    except OSError as problem:
        client._say(f"cannot reserve a run id in the run store: {problem}")
        return 2
    try:
        client._git(top, "push", "--quiet", "--no-verify", machine.url(),
                    f"{base}:refs/delegate/base/{run_id}", host=host.name)  # fmt: skip
    except UserError as problem:
        record.release(run_id)
        client._say(f"--host {host.name}: {problem}")
        return 2
    relay.reserved_id = run_id
    started = iso_now()
    out_dir = opts["outDir"] or default_out_dir(opts["cd"], started)
    relay.run = RunDir(out_dir, started, brief)
    storing.make_record(relay, out_dir, started, made_dir=not os.path.isdir(out_dir), here=False)
    fresh = prepare.fresh_artifacts(relay, brief)
    try:
        relay.run.prepare(fresh)
        info = os.stat(out_dir)
    except OSError as problem:
        client._say(f"cannot prepare run artifacts: {problem}")
        return prepare.not_started(relay)
    relay.run.close()
    inside = os.path.relpath(os.path.realpath(opts["cd"]), os.path.realpath(top))
    files, included = _included(top, host.name, opts["includeUncommitted"])
    remote = {"host": host.name, "id": run_id, "base": base, "source": top,
              "sourceUncommitted": bool(opts["includeUncommitted"]), **included}  # fmt: skip
    storing.update_record(relay, remote=remote, outDirId=[info.st_dev, info.st_ino],
                          artifacts=sorted(fresh))  # fmt: skip
    lane = None
    if opts["lane"]:
        lane = {"source": opts["laneSource"], "dials": relay.lane_dials}
    spec = {"id": run_id, "key": adapter.key, "mirror": machine.mirror, "base": base,
            "brief": brief, "cdInside": inside, "lane": lane, "files": files,
            "argv": [*client.remote_argv(argv, table), "--worktree",
                     *(["--lane", opts["lane"]] if opts["lane"] else [])]}  # fmt: skip
    rid = f" · run id {relay.record.id}" if relay.record else ""
    client._say(f"{adapter.label} run started on {host.name} · {out_dir} · relay pid "
                f"{os.getpid()}{rid}")  # fmt: skip
    remote_run = client.RemoteRun(machine, run_id, out_dir, relay.signals)
    started = False
    try:
        remote_run.start(spec)
        started = True
        done = remote_run.follow()
    except client.Stopped as problem:
        client._say(str(problem))
        if started:
            remote_run.stop_there()
        result, code = finish(relay.record, remote_run, None, problem=str(problem))
        _print_summary(adapter, result, relay.run.result_path)
        return code
    except UserError as problem:
        client._say(str(problem))
        return 255
    except client.Disconnected:
        name = relay.record.id if relay.record else out_dir
        client._say(f"lost the connection to {host.name}; the run goes on there: "
                    f"`delegate runs wait {name}` takes it up again")  # fmt: skip
        return 255
    result, code = finish(relay.record, remote_run, done)
    _print_summary(adapter, result, relay.run.result_path)
    return code


def _included(top: str, host: str, carry: bool) -> tuple[list[dict], dict]:
    """The ignored files `.worktreeinclude` names, as the run spec carries them (only with
    --include-uncommitted), and the fields naming them in the run's worktree record."""
    from .. import worktreeinclude as include

    if not carry:
        names = include.matched(top)[0]
        if names:
            client._say(f"{include.FILE} names {len(names)} ignored file(s) "
                        f"({include.names_shown(names)}); they are not copied to {host}: "
                        "--include-uncommitted carries them")  # fmt: skip
        return [], {"worktreeIncluded": []}
    files, problems = include.pack(top)
    paths = [item["path"] for item in files]
    for line in include.said(paths, problems, where=f"to {host}"):
        client._say(line)
    fields: dict = {"worktreeIncluded": paths}
    if problems:
        fields["worktreeIncludeSkipped"] = problems
    return files, fields


def finish(record, remote_run: client.RemoteRun, done: dict | None,
           problem: str | None = None) -> tuple[dict, int]:  # fmt: skip
    """Bring the run's change back, write result.json here; (result, exit code).

    `done` is the run's end as told from there (checked), None when its relay vanished
    there or, with `problem`, when it could not be followed to its end.
    """
    from ..relay.rundir import RunDir

    remote = record.get("remote")
    machine = remote_run.machine
    out_dir = remote_run.out_dir
    run_dir = RunDir(out_dir, record.get("startedAt") or "")
    theirs = (done or {}).get("result") or None
    code = (done or {}).get("exitCode")
    code = code if isinstance(code, int) else 1
    extra: dict = {}
    head = (done or {}).get("head")
    if isinstance(head, str):
        try:
            extra = _land_branch(record, remote, machine, head, run_dir)
        except UserError as problem:
            extra = {"changes": None, "changesUnavailable": str(problem)}
    result = _local_result(theirs, record, remote, out_dir, extra, code, done, problem)
    try:
        run_dir.write_result(result)
    except OSError as problem:
        client._say(f"cannot write {run_dir.result_path}: {problem.strerror or problem}")
    _record_end(record, result, remote_run)
    if "worktree" in extra:
        try:
            machine.agent("clean", remote["id"], machine.mirror, timeout=120)
        except (UserError, OSError):
            pass
    return result, code


def _record_end(record, result: dict, remote_run: client.RemoteRun) -> None:
    """How the run ended, in its record in the store (what later commands act on)."""
    from ..relay.main import load_adapter
    from ..runstore.record import FINAL_COPY

    mirrored = [n for n in remote_run.offsets if not n.startswith("@") and os.sep not in n]
    kept = [n for n in (record.get("artifacts") or []) if isinstance(n, str)]
    fields = {
        "ended": {"status": str(result.get("status")), "exitCode": result.get("exitCode"),
                  "signal": result.get("signal"), "finishedAt": result.get("finishedAt"),
                  "settled": True},
        "artifacts": sorted({*kept, *mirrored, "result.json"}),
    }  # fmt: skip
    if isinstance(result.get("changes"), dict) and result["changes"].get("patch"):
        fields["artifacts"] = sorted({*fields["artifacts"], "changes.patch"})
    adapter = load_adapter(record.text("implementer") or "")
    field = adapter.session_field if adapter is not None else None
    session = result.get(field) if field else None
    if isinstance(session, str) and session:
        fields["session"] = {"field": field, "id": session}
    usage = result.get("tokenUsage")  # as the relay there reported it
    fields["tokenUsage"] = usage if isinstance(usage, dict) else None
    changes = result.get("changes")
    entry = record.reloaded().section("changes")
    if isinstance(changes, dict) and entry is not None:
        fields["changes"] = {
            **entry,
            **{k: changes.get(k) for k in ("filesChanged", "linesAdded", "linesRemoved")},
        }
    final = result.get("finalMessage")
    try:
        if isinstance(final, str) and final:
            record.keep(FINAL_COPY, final)
        record.update(**fields)
    except (OSError, UserError):
        pass


def _land_branch(record, remote: dict, machine, head: str, run_dir) -> dict:
    """Fetch the run's branch, check it out in a local worktree; the result fields it gives."""
    from ..relay.worktree import BRANCH_PREFIX, add, diffstat_between, read_gitfile, worktrees_root
    from ..snapshots.changes import describe

    top, run_id, base = remote["source"], remote["id"], remote["base"]
    branch = BRANCH_PREFIX + run_id
    client._git(top, "fetch", "--quiet", "--no-tags", "--no-write-fetch-head", machine.url(),
                f"+refs/heads/{branch}:refs/heads/{branch}", host=machine.host.name)  # fmt: skip
    root = worktrees_root()
    os.makedirs(root, mode=0o700, exist_ok=True)
    path = os.path.join(root, f"{os.path.basename(top) or 'repo'}-{run_id}")
    if not os.path.isdir(path):
        added = add(top, repo_paths(top).common_dir or top, path, branch)
        if not added.ok:
            raise UserError(f"git worktree add failed in {top}: {added.reason()}")
    wt_paths = repo_paths(path)
    tree = {"path": path, "branch": branch, "base": base, "source": top,
            "sourceUncommitted": 1 if remote.get("sourceUncommitted") else 0,
            "worktreeIncluded": list(remote.get("worktreeIncluded") or [])}  # fmt: skip
    if remote.get("worktreeIncludeSkipped"):
        tree["worktreeIncludeSkipped"] = list(remote["worktreeIncludeSkipped"])
    private_tree = {**tree, "gitDir": wt_paths.git_dir, "gitfile": read_gitfile(path)}
    git = BoundGit(path, wt_paths.git_dir)
    before = client._git(top, "rev-parse", f"{base}^{{tree}}")
    after = client._git(top, "rev-parse", f"{head}^{{tree}}")
    changes, problem = describe(git, before, after, run_dir)
    entry = {"before": before, "after": after, "workTree": path, "gitDir": wt_paths.git_dir,
             "commonDir": wt_paths.common_dir}  # fmt: skip
    record.update(worktree=private_tree, changes=entry, workdir=path)
    fields = {"worktree": tree, "diffstat": diffstat_between(path, base, after),
              "changes": changes}  # fmt: skip
    if problem:
        fields["changesUnavailable"] = problem
    return fields


def _local_result(theirs, record, remote, out_dir, extra, code, done, problem=None) -> dict:
    """The result there, with paths of here, this run's id, the host and the local worktree."""
    from ..relay.rundir import iso_now

    if theirs is None:
        if problem is not None:
            error = problem
        elif done is None:
            error = f"its relay vanished there (host {remote['host']})"
        else:
            error = f"its relay wrote no result there (host {remote['host']})"
        theirs = {"schema": "delegate-relay.result.v1", "status": "failed", "exitCode": code,
                  "signal": None, "startedAt": record.get("startedAt"), "finishedAt": iso_now(),
                  "error": error}  # fmt: skip
    remote_out = (done or {}).get("outDir")
    worktree = extra.get("worktree")
    their_tree = _their_tree(theirs)
    result = _rewrite(theirs, remote_out, out_dir)
    result = _rewrite(result, their_tree, worktree["path"] if worktree else None)
    result.update(extra)
    if worktree is not None:
        inside = _inside(theirs.get("workdir"), their_tree)
        result["workdir"] = os.path.normpath(os.path.join(worktree["path"], inside))
    result["relayRunId"] = record.id
    result["host"] = remote["host"]
    return result


def _their_tree(theirs: dict) -> str | None:
    """The run's worktree there, as its result names it (None when it names none)."""
    tree = theirs.get("worktree")
    path = tree.get("path") if isinstance(tree, dict) else None
    return path if isinstance(path, str) and os.path.isabs(path) else None


def _inside(workdir, tree: str | None) -> str:
    """Where `workdir` is inside `tree`, as a relative path; "." when it is not inside."""
    if not isinstance(workdir, str) or tree is None or not os.path.isabs(workdir):
        return "."
    workdir, tree = os.path.normpath(workdir), os.path.normpath(tree)
    if workdir != tree and not workdir.startswith(tree.rstrip("/") + "/"):
        return "."
    return os.path.relpath(workdir, tree)


def _rewrite(value, old: str | None, new: str | None):
    """`value` with every string that starts with folder `old` moved under `new`."""
    if not old or not new or old == "/":
        return value
    if isinstance(value, dict):
        return {key: _rewrite(item, old, new) for key, item in value.items()}
    if isinstance(value, list):
        return [_rewrite(item, old, new) for item in value]
    if isinstance(value, str) and (value == old or value.startswith(old + "/")):
        return new + value[len(old) :]
    return value


def _print_summary(adapter, result: dict, result_path: str) -> None:
    from ..relay.report import summary

    try:
        sys.stdout.write(summary(adapter, result, [f"host: {result.get('host')}"], result_path))
        sys.stdout.flush()
    except OSError:
        pass


def _machine_of(remote: dict) -> client.Machine:
    paths = repo_paths(remote["source"])
    return client.Machine(
        hosts.load(remote["host"]), client.source_key(paths.common_dir, remote["source"])
    )


def signal_there(run, name: str) -> None:
    """Pass signal `name` to a --host run's relay over there. Raises UserError."""
    remote = run.record.section("remote")
    _machine_of(remote).agent("signal", remote["id"], name, timeout=60)


def reattach(run) -> None:
    """Follow a --host run whose relay is gone to its end, as its relay would have."""
    from ..runstore import liveness
    from ..runstore import record as records

    private = run.record
    remote = private.section("remote") if private is not None else None
    if remote is None:
        return
    lock_path = os.path.join(private.dir, "attach.lock")
    import fcntl

    with open(lock_path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        fresh = records.load(private.id)
        if fresh is None or liveness.ended(fresh) is not None:
            return
        remote_run = client.RemoteRun(_machine_of(remote), remote["id"], run.out_dir)
        for name in os.listdir(run.out_dir):
            path = os.path.join(run.out_dir, name)
            if os.path.isfile(path) and not os.path.islink(path):
                remote_run.offsets[name] = os.path.getsize(path)
        remote_run.offsets["@stderr"] = -1  # what it printed was printed
        try:
            done = remote_run.follow(echo=False)
        except client.Stopped as problem:
            remote_run.stop_there()
            finish(fresh, remote_run, None, problem=str(problem))
            return
        finish(fresh, remote_run, done)


__all__ = ["dispatch", "finish", "reattach", "ssh"]
