"""`runs pr`: a finished --worktree or --host run's recorded change, as a pull request.

What is committed is exactly what `runs diff` shows: the patch from the run's
change record (its `before` and `after` trees in the store), applied to the
commit the run started from, never the worktree as it is now. The commit is
made through a temporary index (`read-tree` of the base commit, `apply
--cached` of the patch, `write-tree`, `commit-tree`) and the run's branch
`delegate/<run id>` is moved to it with `update-ref`, guarded by the value it
had: the source's work tree and index are never read or written. The run's
own worktree, where that branch is checked out, gets its index reset to the
new commit (its files are left as they are), so `git status` there shows
only what changed since the run. The branch is refused while any other work
tree has it checked out.

The branch is then pushed with the user's own git and credentials (never
forced; no prompt can appear: git runs with terminal prompts off and without
a controlling terminal), and `gh pr create` opens the pull request. Without
`gh`, the compare page of a GitHub remote is printed instead. The outcome
(`pr`: branch, commit, remote, base, url) is kept in the run's record; a
second `runs pr` of the same run reuses the same commit, so the push is a
no-op and the recorded URL is printed again.

Everything is read from the run's record in the store: its brief's kept copy
gives the commit's subject, its final report's kept copy the body.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import tempfile

from ..errors import UserError
from ..gitmeta import BoundGit, git_outcome
from ..relay.worktree import BRANCH_PREFIX
from ..runstore import liveness, lookup
from ..runstore.record import BRIEF_COPY, FINAL_COPY
from ..snapshots.snapshot import private_objects
from . import gitland
from .apply import RunTree, source_paths
from .diff import RunChange, diff_args, run_change
from .logs import printable
from .view import Run, show

#: What `runs pr` exits with when git push or gh fails (a refusal before anything is
#: written is the usage exit, 2).
FAILED = 1
ZERO_OID = "0" * 40
SUBJECT_LIMIT = 100
#: The implementer's final report in the commit message is cut here (bytes).
REPORT_LIMIT = 2048
FILES_SHOWN = 50
#: A brief or a final report is read up to this size.
READ_LIMIT = 64 * 1024
NETWORK_TIMEOUT = 600.0
_URL = re.compile(r"https?://\S+")
#: https://HOST/OWNER/REPO(.git), ssh://[user@]HOST[:port]/OWNER/REPO(.git), user@HOST:OWNER/REPO.
_REMOTE_URL = re.compile(
    r"^(?:(?:https?|ssh|git)://(?:[^@/]+@)?(?P<host>[^/:]+)(?::\d+)?/"
    r"|[^@/:\s]+@(?P<scp_host>[^/:]+):/?)"
    r"(?P<owner>[A-Za-z0-9_.-]+)/(?P<repo>[A-Za-z0-9_.-]+?)(?:\.git)?/?$"
)


def open_pr(
    ref: str,
    remote: str | None = None,
    base: str | None = None,
    draft: bool = False,
    title: str | None = None,
) -> dict:
    """Commit the run's change on its branch, push it, open the pull request. Raises UserError."""
    run = show(ref)
    tree = _run_tree(ref, run)
    change = run_change(run)
    if change.before == change.after:
        raise UserError(f"{run.id}: the run changed nothing; there is no pull request to open")
    paths = source_paths(tree)
    top = paths.toplevel
    branch = BRANCH_PREFIX + run.id
    remote = _remote(top, remote)
    if title is not None:
        title = _title(title)
    base = _base_branch(top, remote, base)
    subject, message = _message(run)
    trees = _trees_git(change, paths)
    patch = _patch(trees, change)
    previous = run.record.reloaded().section("pr") or {}
    with gitland.landing_lock(paths.common_dir):
        commit = _commit(tree, paths, branch, patch, message, previous.get("commit"))
    pushed = _push(top, remote, commit, branch)
    gh = _which("gh")
    report = {
        "id": run.id, "branch": branch, "commit": commit, "remote": remote, "base": base,
        "pushed": pushed, "url": None, "compareUrl": None, "existing": False,
        "gh": gh is not None,
    }  # fmt: skip
    same = previous.get("commit") == commit and previous.get("remote") == remote
    if same and isinstance(previous.get("url"), str) and previous.get("base") == base:
        report.update(url=previous["url"], existing=True)
        _record(run, report)
        return report
    if gh is None:
        report.update(compareUrl=_compare_url(top, remote, base, branch))
        _record(run, report)
        return report
    argv = [gh, "pr", "create", "--head", branch, "--base", base, "--title", title or subject,
            "--body", _body(run, change, trees)]  # fmt: skip
    if draft:
        argv.append("--draft")
    url, existing, problem = _gh(top, argv)
    report.update(url=url, existing=existing)
    _record(run, report)
    if problem is not None:
        raise UserError(
            f"pushed {branch} to {remote}, but gh pr create failed: {problem}", exit_code=FAILED
        )
    return report


def _run_tree(ref: str, run: Run) -> RunTree:
    """The worktree record of the finished run. Raises UserError."""
    record = run.record
    if liveness.status(record) == "orphaned":
        liveness.end_orphans(record, 2.0)
    status = liveness.status(record)
    if status in liveness.IN_FLIGHT:
        raise UserError(
            f"{ref}: the run is still {status}; wait for it (runs wait {run.id}) before you "
            "open a pull request for it"
        )
    tree = lookup.worktree(record)
    if tree is None:
        where = record.text("workdir") or "its --cd"
        raise UserError(
            f"{ref}: runs pr needs a --worktree or --host run; {run.id} worked in place in "
            f"{where}, and its record names no branch or commit it started from"
        )
    if not tree["branch"].startswith(BRANCH_PREFIX):
        raise UserError(f"{ref}: the run's record names branch {tree['branch']}, not a run's")
    return RunTree(run, tree)


def _names(top: str) -> list[str]:
    """The source's remotes (a name git would take for an option is never one)."""
    listed = git_outcome(top, "remote")
    names = listed.out.decode("utf-8", "replace").split() if listed.ok else []
    return [name for name in names if not name.startswith("-")]


def _remote(top: str, given: str | None) -> str:
    """--remote, else the upstream remote of the source's current branch, else origin."""
    names = _names(top)
    if given is not None:
        if given not in names:
            known = ", ".join(names) or "none"
            raise UserError(f"--remote {given}: {top} has no such remote (it has: {known})")
        return given
    current = git_outcome(top, "symbolic-ref", "--quiet", "--short", "HEAD")
    if current.ok and current.out.strip():
        name = current.out.decode("utf-8", "replace").strip()
        upstream = git_outcome(top, "config", "--get", f"branch.{name}.remote")
        found = upstream.out.decode("utf-8", "replace").strip() if upstream.ok else ""
        if found in names:
            return found
    if "origin" in names:
        return "origin"
    raise UserError(
        f"{top}: its current branch has no upstream remote and there is no remote named "
        "origin; name the remote to push to with --remote NAME"
    )


def _base_branch(top: str, remote: str, given: str | None) -> str:
    """--base, else the remote's default branch. Raises UserError."""
    if given is not None:
        checked = git_outcome(top, "check-ref-format", f"refs/heads/{given}")
        if given.startswith("-") or not checked.ok:
            raise UserError(f"--base {given}: not a branch name")
        return given
    prefix = f"refs/remotes/{remote}/"
    known = git_outcome(top, "symbolic-ref", "--quiet", f"{prefix}HEAD")
    name = known.out.decode("utf-8", "replace").strip() if known.ok else ""
    if name.startswith(prefix) and name != prefix:
        return name[len(prefix) :]
    asked = git_outcome(top, "ls-remote", "--symref", remote, "HEAD", timeout=NETWORK_TIMEOUT)
    for line in asked.out.decode("utf-8", "replace").splitlines() if asked.ok else []:
        head, _, what = line.partition("\t")
        if what == "HEAD" and head.startswith("ref: refs/heads/"):
            return head[len("ref: refs/heads/") :]
    raise UserError(
        f"cannot tell which branch of {remote} the pull request goes into (git ls-remote "
        f"--symref {remote} HEAD names none); name it with --base BRANCH"
    )


def _title(given: str) -> str:
    text = " ".join(printable(given).split())
    if not text:
        raise UserError("--title: give the pull request a title (one line of text)")
    return text


def _message(run: Run) -> tuple[str, str]:
    """(subject, commit message): the brief's first line; the final report, bounded; the run."""
    brief = run.record.read_kept(BRIEF_COPY, READ_LIMIT) or ""
    first = next((line for line in brief.splitlines() if line.strip()), "")
    subject = " ".join(printable(first).split()) or f"delegate run {run.id}"
    if len(subject) > SUBJECT_LIMIT:
        subject = subject[: SUBJECT_LIMIT - 1] + "…"
    report = _bounded(run.record.read_kept(FINAL_COPY, READ_LIMIT) or "")
    parts = [subject, report, f"delegate run {run.id}"]
    return subject, "\n\n".join(part for part in parts if part) + "\n"


def _bounded(text: str) -> str:
    """The final report, each line without terminal control, cut at REPORT_LIMIT bytes."""
    lines = [printable(line.replace("\t", "    ")).rstrip() for line in text.strip().splitlines()]
    text = "\n".join(lines).strip()
    data = text.encode("utf-8")
    if len(data) <= REPORT_LIMIT:
        return text
    cut = data[:REPORT_LIMIT].decode("utf-8", "ignore").rstrip()
    return cut + "\n[… the report goes on: delegate runs show]"


def _trees_git(change: RunChange, paths) -> BoundGit:
    """git that reads the change record's trees from the source, where the run's worktree
    may be gone (discarded) by now."""
    return BoundGit(
        paths.toplevel,
        paths.git_dir,
        env={
            "GIT_OBJECT_DIRECTORY": private_objects(change.common_dir),
            "GIT_ALTERNATE_OBJECT_DIRECTORIES": os.path.join(change.common_dir, "objects"),
        },
    )


def _patch(git: BoundGit, change: RunChange) -> bytes:
    """The run's change as `runs diff` prints it. Raises UserError."""
    done = git.run(*diff_args("patch", False), change.before, change.after, timeout=600)
    if not done.ok:
        raise UserError(f"cannot read the change record of {change.name}: {done.reason()}")
    return done.out


def _commit(tree: RunTree, paths, branch: str, patch: bytes, message: str, recorded: object) -> str:
    """The commit of the run's change on its base, with `branch` moved to it."""
    git = BoundGit(paths.toplevel, paths.git_dir)
    ours = _holders(git, branch, tree, paths.common_dir)
    with tempfile.TemporaryDirectory(prefix="delegate-pr-") as scratch:
        env = {"GIT_INDEX_FILE": os.path.join(scratch, "index")}
        read = git.run("read-tree", tree.base, env=env, timeout=gitland.TIMEOUT)
        if not read.ok:
            raise UserError(f"cannot read the commit {tree.name} started from: {read.reason()}")
        applied = git.run("apply", "--cached", "--binary", "--whitespace=nowarn", env=env,
                          input=patch, timeout=gitland.TIMEOUT)  # fmt: skip
        if not applied.ok:
            raise UserError(
                f"cannot commit {tree.name}: its change does not apply to the commit it "
                f"started from ({tree.base[:12]}): {applied.reason()}; nothing was changed"
            )
        made = gitland.write_tree(git, env)
    ref = f"refs/heads/{branch}"
    now = git.run("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", plain=True)
    old = now.out.decode("ascii", "replace").strip() if now.ok else None
    for known in (old, recorded):
        if isinstance(known, str) and _is_ours(git, known, made, tree.base, message):
            commit = known
            break
    else:
        commit = _new_commit(git, made, tree.base, message)
    if commit != old:
        moved = git.run("update-ref", "-m", f"delegate runs pr {tree.name}", ref, commit,
                        old or ZERO_OID, plain=True)  # fmt: skip
        if not moved.ok:
            raise UserError(f"cannot move branch {branch}: {moved.reason()}; try again")
        if ours is not None:
            synced = ours.run("read-tree", commit, plain=True, timeout=gitland.TIMEOUT)
            if not synced.ok:
                raise UserError(
                    f"{branch} now holds the run's change, but the index of its worktree "
                    f"{tree.path} could not follow it: {synced.reason()}"
                )
    return commit


def _holders(git: BoundGit, branch: str, tree: RunTree, common_dir: str) -> BoundGit | None:
    """git for the run's own worktree when it has `branch` checked out (None when no work
    tree does). Raises UserError when another work tree has it, or another run works there."""
    listed = git.run("worktree", "list", "--porcelain", "-z", plain=True)
    if not listed.ok:
        raise UserError(f"git cannot list the source's worktrees: {listed.reason()}")
    ours = None
    path = None
    for field in listed.out.split(b"\0"):
        if field.startswith(b"worktree "):
            path = os.fsdecode(field[len(b"worktree ") :])
        elif field == f"branch refs/heads/{branch}".encode() and path is not None:
            if os.path.realpath(path) != os.path.realpath(tree.path):
                raise UserError(
                    f"{branch} is checked out in {path}; runs pr moves that branch to the "
                    "run's commit, so switch that work tree to another branch first"
                )
            ours = _worktree_git(tree, common_dir)
    if ours is not None:
        busy = [
            other.id
            for other in lookup.sharing_worktree(tree.record)
            if liveness.status(other) in liveness.IN_FLIGHT
        ]
        if busy:
            raise UserError(
                f"run {', '.join(busy)} is working in {tree.path}, where {branch} is checked "
                "out; wait for it, then open the pull request"
            )
    return ours


def _worktree_git(tree: RunTree, common_dir: str) -> BoundGit:
    """git for the run's worktree through the git dir its record names. Raises UserError."""
    admin = os.path.realpath(os.path.join(common_dir, "worktrees"))
    git_dir = tree.git_dir
    if git_dir is None or not os.path.realpath(git_dir).startswith(admin + os.sep):
        raise UserError(
            f"cannot open a pull request for {tree.name}: its worktree {tree.path} has the "
            "branch checked out and its record names no git dir of the source for it"
        )
    return BoundGit(tree.path, git_dir)


def _is_ours(git: BoundGit, commit: str, tree: str, base: str, message: str) -> bool:
    """Whether `commit` is the commit of `tree` on `base` with `message` (made earlier)."""
    shown = git.run("cat-file", "commit", commit, plain=True)
    if not shown.ok:
        return False
    head, _, body = shown.out.partition(b"\n\n")
    fields = [line.split(b" ", 1) for line in head.split(b"\n")]
    parents = [value for key, value in fields if key == b"parent"]
    trees = [value for key, value in fields if key == b"tree"]
    wanted = (trees, parents, body)
    return wanted == ([tree.encode()], [base.encode()], message.encode("utf-8"))


def _new_commit(git: BoundGit, tree: str, base: str, message: str) -> str:
    made = git.run("commit-tree", "--no-gpg-sign", tree, "-p", base,
                   input=message.encode("utf-8"), plain=True)  # fmt: skip
    if not made.ok:
        raise UserError(f"git commit-tree failed: {made.reason()}; nothing was changed")
    return made.out.decode("ascii", "replace").strip()


def _push(top: str, remote: str, commit: str, branch: str) -> str:
    """Push `commit` as `branch`; "new", "updated" or "up to date". Raises UserError (exit 1)."""
    done = git_outcome(top, "push", "--porcelain", remote, f"{commit}:refs/heads/{branch}",
                       timeout=NETWORK_TIMEOUT)  # fmt: skip
    for line in done.out.decode("utf-8", "replace").splitlines():
        flag, _, rest = line.partition("\t")
        if not rest.split("\t", 1)[0].endswith(f":refs/heads/{branch}"):
            continue
        summary = printable(rest.partition("\t")[2]).strip()
        if flag == "!":
            raise UserError(
                f"git push to {remote} was rejected: {branch} {summary}; the branch there "
                "holds other commits, and runs pr never forces a push",
                exit_code=FAILED,
            )
        if done.ok:
            return {"=": "up to date", "*": "new"}.get(flag, "updated")
    if not done.ok:
        raise UserError(f"git push to {remote} failed: {done.reason()}", exit_code=FAILED)
    return "updated"


def _which(program: str) -> str | None:
    from ..pathsearch import which

    return which(program, dict(os.environ))


def _gh(top: str, argv: list[str]) -> tuple[str | None, bool, str | None]:
    """Run `gh pr create`: (url, whether the pull request was there already, what failed)."""
    env = {**os.environ, "GH_PROMPT_DISABLED": "1", "GH_NO_UPDATE_NOTIFIER": "1"}
    try:
        proc = subprocess.Popen(argv, cwd=top, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True)  # fmt: skip
    except OSError as problem:
        return None, False, f"cannot run {argv[0]}: {problem.strerror or problem}"
    try:
        out, err = proc.communicate(timeout=NETWORK_TIMEOUT)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        proc.communicate()
        return None, False, f"no answer within {NETWORK_TIMEOUT:g} s"
    said = out.decode("utf-8", "replace")
    told = err.decode("utf-8", "replace")
    if proc.returncode == 0:
        urls = _URL.findall(said)
        if urls:
            return printable(urls[-1]), False, None
        return None, False, "it printed no pull request URL"
    if "already exists" in told and _URL.search(told):
        return printable(_URL.findall(told)[-1]), True, None
    lines = [printable(line).strip() for line in told.splitlines() if line.strip()]
    return None, False, (lines[-1] if lines else f"gh exited {proc.returncode}")


def _compare_url(top: str, remote: str, base: str, branch: str) -> str | None:
    """GitHub's compare page for `branch` into `base`, when the remote is on a GitHub host."""
    from urllib.parse import quote

    for args in (("config", "--get", f"remote.{remote}.url"), ("remote", "get-url", remote)):
        found = git_outcome(top, *args)
        matched = _REMOTE_URL.match(found.out.decode("utf-8", "replace").strip())
        if not found.ok or matched is None:
            continue
        host = matched.group("host") or matched.group("scp_host")
        if "github" not in host.lower():
            continue
        owner, repo = matched.group("owner"), matched.group("repo")
        return (
            f"https://{host}/{owner}/{repo}/compare/{quote(base, safe='/')}..."
            f"{quote(branch, safe='/')}?expand=1"
        )
    return None


def _body(run: Run, change: RunChange, git: BoundGit) -> str:
    """The pull request's text: what the run changed, its check and review, its tokens."""
    from ..snapshots.changes import describe
    from .review import latest_reviews

    described, _problem = describe(git, change.before, change.after)
    files = (described or {}).get("files") or []
    record = run.record
    who = record.text("implementer") or "an implementer"
    lane = record.text("lane")
    added = sum(f["linesAdded"] or 0 for f in files)
    removed = sum(f["linesRemoved"] or 0 for f in files)
    lines = [
        f"The change of delegate run {run.id} ({who}{f', lane {lane}' if lane else ''}): "
        f"{len(files)} file(s), +{added} -{removed}.",
        "",
    ]
    for entry in files[:FILES_SHOWN]:
        counts = "binary" if entry["binary"] else f"+{entry['linesAdded']} -{entry['linesRemoved']}"
        renamed = f" (from {printable(entry['oldPath'])})" if "oldPath" in entry else ""
        lines.append(f"- `{printable(entry['path'])}`{renamed}: {entry['status']}, {counts}")
    if len(files) > FILES_SHOWN:
        lines.append(f"- … and {len(files) - FILES_SHOWN} more")
    lines += ["", _check_line(record.section("check"))]
    verdict = latest_reviews().get(run.id)
    lines.append(f"Review: {verdict}" if verdict else "Review: none recorded")
    usage = record.section("tokenUsage") or {}
    total = usage.get("totalTokens")
    if isinstance(total, int) and not isinstance(total, bool):
        lines.append(f"Tokens: {total}")
    lines += ["", f"delegate run {run.id}"]
    return "\n".join(lines) + "\n"


def _check_line(check: dict | None) -> str:
    if check is None:
        return "Check: none was run"
    command = " ".join(printable(str(check.get("command") or "")).split())
    code = check.get("exitCode")
    if code == 0:
        outcome = "passed"
    elif isinstance(code, int) and not isinstance(code, bool):
        outcome = f"failed (exit {code})"
    else:
        outcome = "did not finish"
    return f"Check: `{command}` {outcome}" if command else f"Check: {outcome}"


def _record(run: Run, report: dict) -> None:
    """The outcome, in the run's record in the store."""
    from ..relay.rundir import iso_now

    entry = {key: report[key] for key in ("branch", "commit", "remote", "base", "url")}
    if report.get("compareUrl"):
        entry["compareUrl"] = report["compareUrl"]
    try:
        run.record.update(pr={**entry, "at": iso_now()})
    except (OSError, UserError):
        pass
