"""The other machine's side of a remote run (standard library only).

It runs from the shipped core (`<root>/bundles/<hash>/`), started over ssh by
client.py as `python3 -I -S -c BOOT <bundle> <command> <root> …`:

- `start` (a JSON spec on stdin): a worktree of the bare mirror at the pushed
  base, on branch `delegate/<id>`; the relay, detached in a session of its
  own so it outlives the connection; prints where it runs;
- `follow <id> <offsets>`: streams the run's files as they grow, as JSON
  lines, until the relay has finished and its change is committed;
- `signal <id> <NAME>`: passes a signal to the relay (checked by start time);
- `clean <id>`: removes the run's worktree once its branch is fetched;
- `discover [--usage]`: the discover script, as it answers there.

Layout under the root: `repos/<key>.git` (bare mirrors), `worktrees/<id>`,
`runs/<id>/` (the relay's --out-dir), `runs/<id>.json` (pid, paths),
`runs/<id>.stderr`, `runs/<id>.done.json` (exit code, committed head, the
result).
"""

from __future__ import annotations

import base64
import json
import os
import signal
import stat
import sys
import time

#: Files of a run dir that are not mirrored: the local side writes its own.
NOT_MIRRORED = ("run.json", "result.json", ".result-space")
#: The most of one file a message carries.
CHUNK = 256 * 1024
#: The longest line `follow` writes; the local side refuses longer ones.
LINE_LIMIT = 32 * 1024 * 1024
#: The most of the run's result.json and of the files beside the run dir read here.
RESULT_LIMIT = 16 * 1024 * 1024
#: The done file: the result and a few fields around it.
DONE_LIMIT = RESULT_LIMIT + 64 * 1024
POLL_S = 0.1
BRANCH_PREFIX = "delegate/"
IDENTITY = {
    "GIT_AUTHOR_NAME": "delegate-skills",
    "GIT_AUTHOR_EMAIL": "delegate-skills@localhost",
    "GIT_COMMITTER_NAME": "delegate-skills",
    "GIT_COMMITTER_EMAIL": "delegate-skills@localhost",
}


def _write_json(path: str, document: dict) -> None:
    from ..jsjson import document_bytes
    from ..store import atomic_write

    atomic_write(path, document_bytes(document), durable=False)


def _open_regular(path: str) -> int | None:
    """A read handle on the regular file at `path` (never through a symlink, never blocking
    on a FIFO); None for anything else."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        return None
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            return fd
    except OSError:
        pass
    os.close(fd)
    return None


def _read_json(path: str, limit: int = RESULT_LIMIT) -> dict | None:
    """The JSON object in the regular file at `path`; None when missing, larger than
    `limit`, not JSON or not an object."""
    fd = _open_regular(path)
    if fd is None:
        return None
    try:
        data = os.read(fd, limit + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    if len(data) > limit:
        return None
    try:
        found = json.loads(data)
    except (ValueError, RecursionError):
        return None
    return found if isinstance(found, dict) else None


def _paths(root: str, run_id: str) -> dict[str, str]:
    runs = os.path.join(root, "runs")
    return {
        "outDir": os.path.join(runs, run_id),
        "info": os.path.join(runs, f"{run_id}.json"),
        "stderr": os.path.join(runs, f"{run_id}.stderr"),
        "done": os.path.join(runs, f"{run_id}.done.json"),
        "brief": os.path.join(runs, f"{run_id}.brief"),
        "worktree": os.path.join(root, "worktrees", run_id),
    }


# ---------------------------------------------------------------- start


def start(root: str) -> int:
    """Make the run's worktree and start its relay, detached; print where it runs."""
    spec = json.loads(sys.stdin.buffer.read())
    run_id, mirror = spec["id"], spec["mirror"]
    paths = _paths(root, run_id)
    os.makedirs(os.path.dirname(paths["outDir"]), mode=0o700, exist_ok=True)
    os.makedirs(os.path.dirname(paths["worktree"]), mode=0o700, exist_ok=True)

    from ..errors import UserError
    from ..relay.worktree import add

    branch = BRANCH_PREFIX + run_id
    try:
        added = add(mirror, mirror, paths["worktree"], spec["base"], branch=branch)
    except UserError as problem:
        sys.stderr.write(f"git worktree add failed there: {problem}\n")
        return 3
    if not added.ok:
        sys.stderr.write(f"git worktree add failed there: {added.reason()}\n")
        return 3
    _carry(spec, paths)
    with open(paths["brief"], "wb") as handle:
        handle.write(spec["brief"].encode("utf-8", "replace"))
    cd = os.path.normpath(os.path.join(paths["worktree"], spec.get("cdInside") or "."))
    os.makedirs(cd, exist_ok=True)
    argv = [*spec["argv"], "--cd", cd, "--out-dir", paths["outDir"], "--brief", paths["brief"]]
    pid = _detach(spec, argv, paths, branch, mirror)
    from ..isolation.linux import process_start

    info = {"pid": pid, "pidStart": _start_of(pid, process_start), **paths, "branch": branch}
    _write_json(paths["info"], info)
    sys.stdout.write(json.dumps(info) + "\n")
    return 0


def _carry(spec: dict, paths: dict) -> None:
    """Write the ignored files the spec carries into the worktree; what is left out is told
    on the relay's stderr. The spec keeps their paths only (`carried`), never in a commit."""
    from ..worktreeinclude import FILE, unpack, write_entries

    items = spec.pop("files", None)
    if not items:
        return
    entries, problems = unpack(items)
    written, unwritten = write_entries(paths["worktree"], entries)
    spec["carried"] = [entry.path for entry in entries]
    spec["included"], spec["includeSkipped"] = written, [*problems, *unwritten]
    lines = "".join(f"relay: {FILE}: {p['path']!r} not written there: {p['reason']}\n"
                    for p in spec["includeSkipped"])  # fmt: skip
    if lines:
        fd = os.open(paths["stderr"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            os.write(fd, lines.encode("utf-8", "replace"))
        finally:
            os.close(fd)


def _start_of(pid: int, process_start) -> str | None:
    for _ in range(200):  # the grandchild exists once the pid is known; its stat may lag
        found = process_start(pid)
        if found is not None:
            return found
        time.sleep(0.005)
    return None


def _detach(spec: dict, argv: list[str], paths: dict, branch: str, mirror: str) -> int:
    """Fork the relay into a session of its own; its pid (written by it to a pipe)."""
    reader, writer = os.pipe()
    first = os.fork()
    if first == 0:
        os.close(reader)
        os.setsid()
        second = os.fork()
        if second != 0:
            os.write(writer, str(second).encode())
            os._exit(0)
        os.close(writer)
        code = 1
        try:
            _redirect(paths["stderr"])
            code = _relay(spec, argv, paths, branch, mirror)
        finally:
            os._exit(code)
    os.close(writer)
    data = b""
    while True:
        chunk = os.read(reader, 64)
        if not chunk:
            break
        data += chunk
    os.close(reader)
    os.waitpid(first, 0)
    return int(data)


def _redirect(stderr_path: str) -> None:
    null = os.open(os.devnull, os.O_RDWR)
    err = os.open(stderr_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.dup2(err, 2)
    os.close(null)
    os.close(err)
    sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", closefd=False, buffering=1)  # noqa: SIM115


def _relay(spec: dict, argv: list[str], paths: dict, branch: str, mirror: str) -> int:
    """Run the relay here, in this process; then commit what the worktree holds."""
    from ..relay.engine import Relay
    from ..relay.main import load_adapter
    from ..relay.worktree import Worktree

    adapter = load_adapter(spec["key"])
    if adapter is None:
        sys.stderr.write(f"relay: no relay for implementer {spec['key']!r} there\n")
        code = 2
    else:
        relay = Relay(adapter)
        tree = Worktree(
            paths["worktree"], branch, spec["base"], mirror, argv[argv.index("--cd") + 1], 0
        )
        tree.common_dir = mirror
        tree.included = spec.get("included", [])
        tree.include_skipped = spec.get("includeSkipped", [])
        relay.prepared_worktree = tree
        relay.lane_override = spec.get("lane")
        try:
            code = relay.main(argv)
        except BaseException as problem:  # the done file must still be written
            sys.stderr.write(f"relay: {type(problem).__name__}: {problem}\n")
            code = 1
    head = _commit(paths["worktree"], run_id=os.path.basename(paths["outDir"]),
                   leave_out=spec.get("carried") or [])  # fmt: skip
    result = _read_json(os.path.join(paths["outDir"], "result.json"))
    _write_json(paths["done"], {"exitCode": code, "head": head, "result": result,
                                "outDir": paths["outDir"]})  # fmt: skip
    return code


def _commit(worktree: str, run_id: str, leave_out: list[str]) -> str | None:
    """Commit the worktree's files (as the run left them) onto its branch; the new head.

    The files carried in from the source's ignored ones (`leave_out`) are never committed.
    """
    import tempfile

    from ..gitmeta import git_outcome
    from ..relay.worktree import WorktreeError, snapshot_tree

    if not os.path.isdir(worktree):
        return None
    head = git_outcome(worktree, "rev-parse", "--verify", "HEAD^{commit}")
    if not head.ok:
        return None
    parent = head.out.decode().strip()
    try:
        with tempfile.TemporaryDirectory(prefix="delegate-remote-") as scratch:
            tree = snapshot_tree(worktree, scratch, leave_out)
    except (WorktreeError, OSError):
        return parent
    same = git_outcome(worktree, "rev-parse", f"{parent}^{{tree}}")
    if same.ok and same.out.decode().strip() == tree:
        return parent
    made = git_outcome(worktree, "commit-tree", tree, "-p", parent, "-m",
                       f"delegate run {run_id}", env=IDENTITY)  # fmt: skip
    if not made.ok:
        return parent
    commit = made.out.decode().strip()
    moved = git_outcome(worktree, "update-ref", "HEAD", commit, parent)
    return commit if moved.ok else parent


# ---------------------------------------------------------------- follow


def follow(root: str, run_id: str, offsets_text: str) -> int:
    """Stream the run's files as JSON lines until it is done (or its relay is gone)."""
    paths = _paths(root, run_id)
    offsets: dict[str, int] = json.loads(base64.b64decode(offsets_text) or b"{}")
    info = _read_json(paths["info"]) or {}
    out = sys.stdout
    quiet = 0
    while True:
        done = os.path.exists(paths["done"])
        sent = _send_changes(paths, offsets, out)
        if done and not sent:
            out.write(_done_line(_read_json(paths["done"], DONE_LIMIT)))
            out.flush()
            return 0
        if not done and not sent and not _alive(info) and not os.path.exists(paths["done"]):
            out.write(json.dumps({"lost": True}) + "\n")
            out.flush()
            return 0
        if not sent:
            quiet += 1
            if quiet % 10 == 0:  # a heartbeat: a broken connection shows within a second
                out.write("{}\n")
                out.flush()
            time.sleep(POLL_S)


def _done_line(document: dict | None) -> str:
    """The last line of `follow`: the done document, its result left out when the line
    would be longer than the local side takes."""
    line = json.dumps({"done": document}) + "\n"
    if len(line) > LINE_LIMIT and document is not None:
        line = json.dumps({"done": {**document, "result": None}}) + "\n"
    return line


def _files(paths: dict) -> dict[str, str]:
    """Mirrored name → path: the run dir's files and the relay's stderr."""
    found = {"@stderr": paths["stderr"]}
    try:
        entries = list(os.scandir(paths["outDir"]))
    except OSError:
        entries = []
    for entry in entries:
        if entry.name.startswith("@") or entry.name in NOT_MIRRORED:
            continue  # "@" names the streams that are not files of the run dir
        if entry.is_file(follow_symlinks=False):
            found[entry.name] = entry.path
    return found


def _send_changes(paths: dict, offsets: dict[str, int], out) -> bool:
    sent = False
    for name, path in sorted(_files(paths).items()):
        at = offsets.get(name, 0)
        if at < 0:  # not wanted (output already shown)
            continue
        fd = _open_regular(path)  # a file swapped for a symlink since the listing stays here
        if fd is None:
            continue
        try:
            size = os.fstat(fd).st_size
            reset = size < at
            if reset:
                at = 0
            if size == at and not reset:
                continue
            data = os.pread(fd, CHUNK, at)
        except OSError:
            continue
        finally:
            os.close(fd)
        offsets[name] = at + len(data)
        line = {"f": name, "o": at, "d": base64.b64encode(data).decode()}
        out.write(json.dumps(line) + "\n")
        sent = True
    if sent:
        out.flush()
    return sent


def _alive(info: dict) -> bool:
    from ..runstore.liveness import pid_alive

    return pid_alive(info.get("pid"), info.get("pidStart"))


# ---------------------------------------------------------------- signal, clean


def send_signal(root: str, run_id: str, name: str) -> int:
    info = _read_json(_paths(root, run_id)["info"]) or {}
    number = getattr(signal, name, None) if name in ("SIGINT", "SIGTERM", "SIGHUP") else None
    if number is None or not _alive(info):
        return 0
    try:
        os.kill(int(info["pid"]), number)
    except OSError:
        pass
    return 0


def clean(root: str, run_id: str, mirror: str) -> int:
    """Remove the run's worktree and branch there; its change is a local branch now."""
    from ..relay.worktree import remove

    paths = _paths(root, run_id)
    remove(mirror, mirror, paths["worktree"], BRANCH_PREFIX + run_id)
    return 0


def main(argv: list[str]) -> int:
    command, root, rest = argv[0], os.path.expanduser(argv[1]), argv[2:]
    if command == "start":
        return start(root)
    if command == "follow":
        return follow(root, rest[0], rest[1])
    if command == "signal":
        return send_signal(root, rest[0], rest[1])
    if command == "clean":
        return clean(root, rest[0], rest[1])
    if command == "discover":
        from .. import jsjson
        from ..discover.report import discover

        sys.stdout.write(jsjson.stringify(discover(with_usage="--usage" in rest), 2) + "\n")
        return 0
    sys.stderr.write(f"agent: unknown command {command}\n")
    return 2
