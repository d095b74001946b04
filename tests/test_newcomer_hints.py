"""What a newcomer at a terminal reads: hints that paste, names that match the docs, and the
small answers (Ctrl-C, unknown ids, missing keys, help, a codex run outside git).

Every command a hint prints is run here as printed, through `sh -c`, on a PATH where
`python3` and `delegate` are this interpreter: a hint that does not paste fails its test.
"""

from __future__ import annotations

import contextlib
import json
import os
import pty
import select
import shutil
import signal
import subprocess
from pathlib import Path

import pytest
from conftest import PYTHON, ROOT, SETUP_SCRIPTS, delegate, fleet_doc, git, write_json
from fakes import relay_argv, wait_for
from relaykit import Bench, read_pid
from test_worktree import BRIEF_EDIT, Source

RUNS_PY = ROOT / "skills" / "codex-delegate" / "scripts" / "runs.py"
CONFIG_PY = SETUP_SCRIPTS / "config.py"
#: Every implementer key, in the registry's order.
KEYS = (
    "claude, cline, codex, commandcode, opencode, agy, grok, kimi, qoder, vibe, cursor, pi, "
    "omp, aider, copilot, warp, zcode, gemini, qwen, auggie, kilo, hermes, dsh"
)


@pytest.fixture
def source(tmp_path, home) -> Source:
    return Source(tmp_path)


def shims(folder: Path) -> Path:
    """`python3` and `delegate` as a user's shell finds them: this interpreter and the package."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, command in (("python3", f'exec {PYTHON} "$@"'),
                          ("delegate", f'exec {PYTHON} -m delegate_skills "$@"')):  # fmt: skip
        (folder / name).write_text(f"#!/bin/sh\n{command}\n")
        (folder / name).chmod(0o755)
    return folder


def line_after(text: str, label: str) -> str:
    """The one line of `text` that starts with `label`, without it."""
    found = [line[len(label) :] for line in text.splitlines() if line.startswith(label)]
    assert len(found) == 1, text
    return found[0]


def paste(command: str, env: dict, tmp_path: Path) -> subprocess.CompletedProcess:
    """Run `command` as a POSIX shell runs a pasted line."""
    path = f"{shims(tmp_path / 'shims')}{os.pathsep}{env['PATH']}"
    return subprocess.run(["sh", "-c", command], capture_output=True, text=True,
                          env={**env, "PATH": path}, timeout=120, check=False)  # fmt: skip


def rendered(raw: bytes) -> list[str]:
    """The lines a terminal shows for `raw`: a carriage return goes back to the line's
    start, ESC [ K clears to its end."""
    lines, line, col, i = [], [], 0, 0
    text = raw.decode("utf-8", "replace")
    while i < len(text):
        if text.startswith("\x1b[K", i):
            del line[col:]
            i += 3
            continue
        char = text[i]
        if char == "\r":
            col = 0
        elif char == "\n":
            lines.append("".join(line))
            line, col = [], 0
        else:
            line[col : col + 1] = [char]
            col += 1
        i += 1
    if line:
        lines.append("".join(line))
    return lines


def on_terminal(argv: list[str], env: dict, timeout: float = 120) -> tuple[int, list[str]]:
    """Run `argv` with stdout and stderr on one pseudo-terminal; (exit code, what it shows)."""
    leader, follower = pty.openpty()
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=follower,
                                stderr=follower, env=env)  # fmt: skip
    finally:
        os.close(follower)
    shown = b""
    try:
        while True:
            ready, _, _ = select.select([leader], [], [], timeout)
            if not ready:
                raise AssertionError(f"no end of output in {timeout} s: {shown!r}")
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # EIO: every writer of the terminal has closed it
                break
            if not chunk:
                break
            shown += chunk
        code = proc.wait(timeout=timeout)
    finally:
        os.close(leader)
        proc.kill()
        proc.wait()
    return code, rendered(shown)


# ---------------------------------------------------------------- hints that paste


def test_a_skill_folder_relay_prints_land_and_drop_commands_that_paste(source, tmp_path):
    source.bench.script(BRIEF_EDIT)
    done = source.relay("--worktree")
    assert done.code == 0, done
    run_id = done.result["relayRunId"]
    runs_py = f'python3 "{RUNS_PY}"'
    assert line_after(done.out, "land with: ") == f"{runs_py} apply {run_id}"
    assert line_after(done.out, "drop with: ") == f"{runs_py} discard {run_id}"
    landed = paste(line_after(done.out, "land with: "), source.env, tmp_path)
    assert landed.returncode == 0, landed
    assert json.loads(landed.stdout)["applied"] == ["a.txt", "made.txt"]
    assert (source.repo / "made.txt").read_text() == "one\ntwo\n"


def test_the_delegate_relay_prints_delegate_runs_commands_that_paste(source, tmp_path):
    source.bench.script(BRIEF_EDIT)
    done = source.delegate("relay", "codex", "--brief", str(source.bench.brief), "--cd",
                           str(source.repo), "--out-dir", str(source.bench.out), "--worktree")  # fmt: skip
    assert done.code == 0, done
    run_id = json.loads((source.bench.out / "result.json").read_text())["relayRunId"]
    assert line_after(done.out, "land with: ") == f"delegate runs apply {run_id}"
    assert line_after(done.out, "drop with: ") == f"delegate runs discard {run_id}"
    dropped = paste(line_after(done.out, "drop with: "), source.env, tmp_path)
    assert dropped.returncode == 0, dropped
    assert json.loads(dropped.stdout)["deletedBranch"] == f"delegate/{run_id}"
    assert source.branches() == ["main"]


def test_a_skill_folder_under_an_awkward_path_still_pastes(source, tmp_path):
    folder = tmp_path / "it's $HOME `x` skills" / "codex-delegate"
    shutil.copytree(ROOT / "skills" / "codex-delegate", folder)
    source.bench.script(BRIEF_EDIT)
    args = ["--brief", str(source.bench.brief), "--cd", str(source.repo),
            "--out-dir", str(source.bench.out), "--worktree"]  # fmt: skip
    done = subprocess.run([PYTHON, "-S", str(folder / "scripts" / "relay.py"), *args],
                          capture_output=True, text=True, env=source.env, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    land = line_after(done.stdout, "land with: ")
    quoted = "'" + str(folder / "scripts" / "runs.py").replace("'", "'\\''") + "'"
    assert land.startswith(f"python3 {quoted} apply ")
    landed = paste(land, source.env, tmp_path)
    assert landed.returncode == 0, landed
    assert json.loads(landed.stdout)["applied"] == ["a.txt", "made.txt"]


def test_an_apply_that_added_files_points_at_git_status(source):
    source.bench.script(BRIEF_EDIT)
    done = source.relay("--worktree")
    assert done.code == 0, done
    run_id = done.result["relayRunId"]
    code, shown = on_terminal([PYTHON, "-m", "delegate_skills", "runs", "apply", run_id],
                              source.env)  # fmt: skip
    assert code == 0, shown
    assert shown == [
        f"applied 2 file(s) from delegate/{run_id} into {source.repo}, not committed:",
        "  added    made.txt",
        "  modified a.txt",
        "review it: git status lists the new files (git diff leaves them out), git diff the "
        "edits; re-run the project's gates, then commit it yourself",
    ]


def _project_lane(repo: Path) -> Path:
    return write_json(repo / ".delegate" / "config.json",
                      fleet_doc({"feature": {"implementer": "codex"}}))  # fmt: skip


def test_an_edited_project_config_names_the_file_the_change_and_the_command(source, tmp_path):
    config = _project_lane(source.repo)
    approved = subprocess.run([PYTHON, str(CONFIG_PY), "approve", "--cwd", str(source.repo)],
                              capture_output=True, text=True, env=source.env)  # fmt: skip
    assert approved.returncode == 0, approved.stderr
    write_json(config, fleet_doc({"feature": {"implementer": "codex", "model": "gpt-5"}}))
    source.bench.script({})
    refused = source.relay("--lane", "feature")
    assert refused.code == 2, refused
    assert refused.err == (
        f"relay: project fleet config is not trusted: {config} changed since it was approved; "
        f'review it, then approve it: delegate config approve --cwd "{source.repo}", or from '
        f'the skill folders: python3 "{CONFIG_PY}" approve --cwd "{source.repo}"\n'
    )
    command = refused.err.rstrip("\n").split("or from the skill folders: ")[1]
    assert paste(command, source.env, tmp_path).returncode == 0
    again = source.relay("--lane", "feature")
    assert again.code == 0, again
    assert again.result["model"] == "gpt-5"


def test_a_never_approved_project_config_says_so(source):
    config = _project_lane(source.repo)
    done = source.delegate("lane", "resolve", "--lane", "feature", "--implementer", "codex",
                           "--cwd", str(source.repo))  # fmt: skip
    assert done.code == 2, done
    assert done.err == (
        f"delegate: project fleet config is not trusted: {config} has not been approved yet; "
        f'review it, then approve it: delegate config approve --cwd "{source.repo}"\n'
    )


# ---------------------------------------------------------------- names that match the docs


def test_a_worktree_branch_is_delegate_slash_the_run_id(source):
    source.bench.script(BRIEF_EDIT)
    done = source.relay("--worktree")
    assert done.code == 0, done
    run_id = done.result["relayRunId"]
    assert len(run_id) == 8
    tree = done.result["worktree"]
    assert tree["branch"] == f"delegate/{run_id}"
    assert Path(tree["path"]).name == f"work-{run_id}"
    assert source.branches() == sorted(["main", f"delegate/{run_id}"])
    assert f"worktree: {tree['path']} (branch delegate/{run_id})" in done.out.splitlines()


def test_a_worktree_that_cannot_be_made_leaves_no_branch_and_no_run_id(tmp_path, home):
    # The worktree's folder is `<repo name>-<run id>`: 250 + 9 characters is past NAME_MAX.
    # `git worktree add -b` has made the branch by then; the relay deletes it, and gives
    # back the run id it had taken for it.
    source = Source(tmp_path / "long")
    long_repo = tmp_path / ("r" * 250)
    shutil.move(str(source.repo), long_repo)
    source.bench.script({})
    from fakes import relay

    out = source.bench.out
    args = ["--brief", str(source.bench.brief), "--cd", str(long_repo), "--out-dir", str(out)]
    run = relay("codex", *args, "--worktree", env=source.env, out_dir=out)
    assert run.code == 2, run
    assert run.err.startswith(f"relay: git worktree add failed in {long_repo}: "), run.err
    assert git(long_repo, "branch", "--format=%(refname:short)").split() == ["main"]
    assert list((source.state / "delegate-skills" / "runs").iterdir()) == []
    assert source.bench.fake.calls("run") == []


def test_a_run_on_a_branch_named_the_old_way_still_lands_and_drops(source):
    source.bench.script(BRIEF_EDIT)
    done = source.relay("--worktree")
    assert done.code == 0, done
    run_id, tree = done.result["relayRunId"], done.result["worktree"]
    old = "delegate/20261206-231504-4ff083"
    git(source.repo, "branch", "-m", tree["branch"], old)
    record_file = source.state / "delegate-skills" / "runs" / run_id / "record.json"
    record = json.loads(record_file.read_text())
    record["worktree"]["branch"] = old
    record_file.write_text(json.dumps(record, indent=2) + "\n")
    applied = source.delegate("runs", "apply", run_id, "--json")
    assert applied.code == 0, applied
    assert json.loads(applied.out)["branch"] == old
    dropped = source.delegate("runs", "discard", run_id, "--json")
    assert dropped.code == 0, dropped
    assert json.loads(dropped.out)["deletedBranch"] == old
    assert source.branches() == ["main"]


def test_mcp_dispatch_returns_the_run_id_and_run_tools_take_run(tmp_path, home):
    pytest.importorskip("mcp")
    import anyio
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    bench = Bench(tmp_path / "bench", "codex")
    bench.script({"actions": [{"write": ["made.txt", "new\n"]}]})
    (tmp_path / "tmp").mkdir()
    env = bench.fake.env(TMPDIR=str(tmp_path / "tmp"), XDG_STATE_HOME=str(tmp_path / "state"))
    run_tools = ("runs_show", "runs_diff", "runs_wait", "runs_cancel", "review")

    async def body(session):
        tools = {tool.name: tool.input_schema for tool in (await session.list_tools()).tools}
        started = await session.call_tool(
            "dispatch", {"implementer": "codex", "cd": str(bench.work), "brief": "make it"}
        )
        started = json.loads(started.content[0].text)
        waited = await session.call_tool("runs_wait", {"run": started["runId"]})
        shown = await session.call_tool("runs_show", {"outDir": started["outDir"]})
        waited, shown = (json.loads(answer.content[0].text) for answer in (waited, shown))
        return tools, started, waited, shown

    async def main():
        params = StdioServerParameters(command=PYTHON, args=["-m", "delegate_skills", "mcp"],
                                       env=env)  # fmt: skip
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            return await body(session)

    tools, started, waited, shown = anyio.run(main)
    for name in run_tools:
        assert "run" in tools[name]["properties"], name
        assert "outDir" not in tools[name]["properties"], name
        assert "run" in tools[name]["required"], name
    run_id = started["runId"]
    assert len(run_id) == 8 and run_id == waited["id"] == shown["id"]
    assert waited["status"] == "completed"
    assert shown["outDir"] == started["outDir"]


# ---------------------------------------------------------------- small things


def _sleeping(pid: int) -> bool:
    """Whether `pid` is in a timed sleep (the poll loop of `runs wait`)."""
    try:
        return "nanosleep" in Path(f"/proc/{pid}/wchan").read_text()
    except OSError:
        return False


def _interruptible(argv: list[str], env: dict, **kw) -> subprocess.Popen:
    # Ctrl-C is the default SIGINT handler's job, even under a parent that ignores it.
    return subprocess.Popen(argv, env=env, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
                            **kw)  # fmt: skip


@pytest.mark.parametrize("command", ["wait", "logs"])
def test_ctrl_c_while_following_a_run_exits_130_and_the_run_goes_on(tmp_path, home, command):
    bench = Bench(tmp_path, "codex")
    go = tmp_path / "go"
    bench.script({"actions": [{"stdout": '{"type":"turn.started","text":"first"}\n'},
                              {"pid_file": str(tmp_path / "child.pid")},
                              {"wait_for_file": str(go)}]})  # fmt: skip
    relay = subprocess.Popen(relay_argv("codex", *bench.args()), stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             env=bench.fake.env())  # fmt: skip
    follower = None
    child = None
    try:
        child = read_pid(tmp_path / "child.pid")
        extra = ["-f"] if command == "logs" else []
        follower = _interruptible(
            [PYTHON, "-m", "delegate_skills", "runs", command, *extra, str(bench.out)],
            bench.fake.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        if command == "logs":
            assert follower.stdout.readline() == "turn.started: first\n"
        else:
            wait_for(lambda: _sleeping(follower.pid))
        follower.send_signal(signal.SIGINT)
        _out, err = follower.communicate(timeout=30)
        assert follower.returncode == 130
        assert err == "delegate: interrupted; the run goes on (it was not stopped)\n"
        assert relay.poll() is None
        go.write_text("")
        assert relay.wait(timeout=60) == 0
    finally:
        for proc in (follower, relay):
            if proc is not None:
                proc.kill()
                proc.wait()
        if child is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGKILL)


@pytest.mark.parametrize("command", ["wait", "logs"])
def test_the_help_of_wait_and_logs_names_exit_130(command):
    done = delegate("runs", command, "--help")
    assert done.code == 0, done
    assert "130 when interrupted (Ctrl-C); the run goes on" in " ".join(done.out.split())


def test_a_refused_review_leaves_no_review_dir(source, tmp_path):
    source.bench.script(BRIEF_EDIT)
    assert source.relay("--worktree").code == 0
    # A lane nobody approved: the reviewer's relay refuses it.
    write_json(source.repo / ".delegate" / "config.json",
               fleet_doc({"critic": {"implementer": "claude"}}))  # fmt: skip
    own = source.delegate("review", "--last", "--implementer", "codex")
    assert own.code == 2, own
    unapproved = source.delegate("review", "--last", "--lane", "critic")
    assert unapproved.code == 2, unapproved
    assert unapproved.err.endswith(
        "delegate: the review relay (claude) ended without a result (exit 2)\n"
    )
    root = tmp_path / "delegate-relay"
    assert root.is_dir()
    assert sorted(p.name for p in root.iterdir() if p.name.startswith("review-")) == []


def test_discover_on_a_terminal_names_each_cli_once(tmp_path):
    from discoverkit import ANSWERS, install

    bindir = install(tmp_path / "bin", {key: ANSWERS[key] for key in ("claude", "codex")})
    home = tmp_path / "home"
    home.mkdir()
    env = {"PATH": f"{bindir}:/usr/bin:/bin", "HOME": str(home), "TERM": "xterm",
           "XDG_CACHE_HOME": str(tmp_path / "cache")}  # fmt: skip
    code, shown = on_terminal([PYTHON, "-m", "delegate_skills", "discover", "claude", "codex"],
                              env)  # fmt: skip
    assert code == 0, shown
    named = [line.split()[0] for line in shown if line.split()[:1] in (["claude"], ["codex"])]
    assert named == ["claude", "codex"], shown


def test_delegate_relay_without_a_key_lists_the_keys():
    done = delegate("relay")
    assert done.code == 2, done
    assert f"KEY is one of: {KEYS}" in " ".join(done.err.split())


def test_relay_help_names_the_command_it_was_run_as(tmp_path):
    done = delegate("relay", "codex", "--help")
    assert done.code == 0, done
    assert "Usage:\n  delegate relay codex --brief <file> [options]\n" in done.out
    assert "  cat brief.txt | delegate relay codex [options]\n" in done.out
    assert "relay.py" not in done.out
    script = subprocess.run(relay_argv("codex", "--help"), capture_output=True, text=True,
                            timeout=60)  # fmt: skip
    assert script.returncode == 0, script.stderr
    assert "Usage:\n  python3 relay.py --brief <file> [options]\n" in script.stdout


def test_codex_outside_git_warns_once_unless_told_to_skip_the_check(tmp_path, home):
    bench = Bench(tmp_path, "codex", repo=False)
    bench.script({})
    warning = (
        f"relay: --cd {bench.work} is not in a git repository, and Codex refuses to start "
        "there without --skip-git-repo-check: add that flag to run it anyway"
    )
    plain = bench.relay()
    assert plain.err.splitlines().count(warning) == 1, plain
    assert sum("--skip-git-repo-check" in line for line in plain.err.splitlines()) == 1
    skipped = bench.relay("--skip-git-repo-check")
    assert skipped.code == 0, skipped
    assert "--skip-git-repo-check" not in skipped.err
    assert "--skip-git-repo-check" in bench.fake.calls("run")[-1]["argv"]


def test_runs_show_of_an_unknown_id_says_so_and_what_to_do(tmp_path, home):
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}
    done = delegate("runs", "show", "zzzz9999", env=env)
    assert (done.code, done.out) == (2, "")
    assert done.err == (
        "delegate: zzzz9999: no run with this id on this machine; "
        "`delegate runs list` lists the runs there are\n"
    )
    script = subprocess.run([PYTHON, str(RUNS_PY), "show", "zzzz9999"], capture_output=True,
                            text=True, env=env, timeout=60)  # fmt: skip
    assert script.returncode == 2
    assert script.stderr == (
        "runs.py: zzzz9999: no run with this id on this machine; "
        f'`python3 "{RUNS_PY}" list` lists the runs there are\n'
    )
    nowhere = delegate("runs", "show", str(tmp_path / "nowhere"), env=env)
    assert nowhere.err == (
        f"delegate: {tmp_path / 'nowhere'}: no such run (no directory there, and no run with "
        "this id on this machine); `delegate runs list` lists the runs there are\n"
    )
