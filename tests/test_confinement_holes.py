"""What an enforced read-only run, an MCP client and a batch file must not be able to do.

A read-only run under bubblewrap writes nothing but its run directory: not the
repository through a run directory it swapped for a link, not the global
fleet config, and not a work tree or git dir passed as its own --out-dir.
Shell text (--check, --setup) comes only from the user: never over MCP, and
a batch file is checked whole before its first run starts.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import commit_all, fleet_doc, git, make_repo, write_json
from fakes import relay_argv
from relaykit import DETECT_ONLY, Bench
from test_worktree import Source

#: A relay whose CLI starts no sandbox of its own: bubblewrap applies to it as root too.
UNSANDBOXED = "pi"


def _bwrap_problem() -> str | None:
    """Why bubblewrap cannot start a sandbox here, or None when it can."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return "bwrap is not installed here"
    try:
        done = subprocess.run(
            [bwrap, "--dev-bind", "/", "/", "--proc", "/proc", "--unshare-pid",
             "--die-with-parent", "--cap-drop", "ALL", "--", "true"],
            capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as problem:
        return f"bwrap cannot start a sandbox here: {problem}"
    if done.returncode != 0:
        return f"bwrap cannot start a sandbox here: {done.stderr.strip()[:200]}"
    return None


_NO_BWRAP = _bwrap_problem()
needs_bwrap = pytest.mark.skipif(_NO_BWRAP is not None, reason=_NO_BWRAP or "")


def prepared(tmp_path: Path) -> Bench:
    """A fake pi and a repository with one committed file."""
    bench = Bench(tmp_path, UNSANDBOXED, repo=False)
    bench.work = make_repo(tmp_path / "work")
    (bench.work / "tracked.txt").write_text("original\n")
    commit_all(bench.work)
    return bench


def shell(command: str) -> dict:
    """A fake's action that runs `command` in a shell (a git alias), as an agent's tool would."""
    return {"git": ["-c", f"alias.run-shell=!{command}", "run-shell"]}


def listing(folder: Path) -> list[str]:
    return sorted(str(path.relative_to(folder)) for path in folder.rglob("*"))


# ---------------------------------------------------------------- the read-only sandbox


@pytest.mark.parametrize("confined", [True, False])
def test_a_run_dir_swapped_for_a_link_to_the_repository_gets_no_file_written_there(
    tmp_path, confined
):
    """Confined, the run cannot move its run directory (a mount point in a read-only
    parent); unconfined it can, and the relay's files still go to the directory it was
    given, wherever that went: never through the link into the repository."""
    if confined and _NO_BWRAP is not None:
        pytest.skip(_NO_BWRAP)
    bench = prepared(tmp_path)
    aside = tmp_path / "moved-aside"
    bench.script({"actions": [shell(f'mv "{bench.out}" "{aside}" && '
                                    f'ln -s "{bench.work}" "{bench.out}"')]})  # fmt: skip
    before = git(bench.work, "status", "--porcelain")
    env = bench.fake.env() if confined else bench.fake.env(**DETECT_ONLY)
    run = bench.relay("--read-only", env=env)
    assert not (bench.work / "result.json").exists(), run
    assert not (bench.work / "changes.patch").exists(), run
    assert git(bench.work, "status", "--porcelain") == before
    if confined:
        assert not aside.exists() and not bench.out.is_symlink()
        assert bench.result["readOnlyEnforced"] == "bwrap"
        assert bench.result["readOnlyViolation"] is False
        return
    assert bench.out.is_symlink()
    result = json.loads((aside / "result.json").read_text())
    assert (result["status"], result["exitCode"], result["readOnlyViolation"]) == (
        "failed", 1, None
    )  # fmt: skip
    assert result["error"].endswith(
        f"the run directory {bench.out} was moved or replaced during the run; the relay's "
        "files are in the directory it was given, wherever that is now"
    )
    assert run.code == 1


@needs_bwrap
@pytest.mark.parametrize("how", ["lane set", "direct write"])
def test_a_read_only_run_cannot_rewrite_the_global_fleet_config(tmp_path, home, how):
    bench = prepared(tmp_path)
    config = tmp_path / "xdg-config" / "delegate-skills" / "config.json"
    write_json(config, fleet_doc({"review": {"implementer": UNSANDBOXED, "readOnly": True}}))
    original = config.read_bytes()
    widened = json.dumps(fleet_doc({"review": {"implementer": "codex"}}), indent=2) + "\n"
    action = {
        "lane set": shell(
            f'"{sys.executable}" -m delegate_skills lane set review --implementer codex '
            "--scope global"
        ),
        "direct write": {"write": [str(config), widened]},
    }[how]
    bench.script({"actions": [action]})
    env = bench.fake.env(XDG_CONFIG_HOME=str(tmp_path / "xdg-config"))
    run = bench.relay("--lane", "review", env=env)
    assert run.result["readOnly"] is True, run
    assert config.read_bytes() == original


@pytest.mark.parametrize(
    ("read_only", "out_dir", "planted"),
    [
        (True, ".", "tracked.txt"),
        (True, ".git/hooks", ".git/hooks/pre-commit"),
        (False, ".git/hooks", None),
        (False, ".git/relay-out", None),
    ],
)
def test_an_out_dir_in_the_work_tree_or_git_dir_is_refused_before_the_launch(
    tmp_path, home, read_only, out_dir, planted
):
    bench = prepared(tmp_path)
    if planted:  # what a read-only run would write through that out-dir
        bench.script({"actions": [{"write": [planted, "#!/bin/sh\necho planted\n"]},
                                  {"chmod": [planted, "755"]}]})  # fmt: skip
    else:
        bench.script({})
    status = git(bench.work, "status", "--porcelain")
    hooks = listing(bench.work / ".git" / "hooks")
    flags = ["--read-only"] if read_only else []
    done = subprocess.run(
        relay_argv(UNSANDBOXED, "--brief", str(bench.brief), "--cd", str(bench.work),
                   "--out-dir", out_dir, *flags),
        cwd=bench.work, env=bench.fake.env(), capture_output=True, text=True,
        stdin=subprocess.DEVNULL, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2, done
    assert done.stderr.startswith("relay: ") and done.stderr.count("\n") == 1, done.stderr
    assert "--out-dir" in done.stderr
    assert bench.fake.calls() == []
    assert git(bench.work, "status", "--porcelain") == status
    assert listing(bench.work / ".git" / "hooks") == hooks
    assert not (bench.work / ".git" / "relay-out").exists()


# ---------------------------------------------------------------- shell text over MCP


@pytest.mark.parametrize("flag", ["--check", "--setup"])
def test_mcp_dispatch_refuses_flags_that_run_shell_text(tmp_path, home, flag):
    pytest.importorskip("mcp")
    from test_mcp import text, with_server

    bench = Bench(tmp_path / "bench", "codex")
    (bench.work / "a.txt").write_text("a\n")
    commit_all(bench.work)
    bench.script({})
    marker = tmp_path / "shell-ran"
    (tmp_path / "tmp").mkdir()
    env = bench.fake.env(TMPDIR=str(tmp_path / "tmp"))

    async def body(session):
        result = await session.call_tool(
            "dispatch",
            {"implementer": "codex", "brief": "do it\n", "cd": str(bench.work),
             "worktree": flag == "--setup", "args": [flag, f"touch {marker}"]},
        )  # fmt: skip
        if not result.is_error:  # let the run end before looking at what ran
            out_dir = json.loads(text(result))["outDir"]
            await session.call_tool("runs_wait", {"outDir": out_dir, "timeout": "1m"})
        return result

    result = with_server(env, body)
    assert result.is_error, text(result)
    assert flag in text(result)
    assert not marker.exists()
    assert bench.fake.calls() == []


# ---------------------------------------------------------------- a batch file, checked whole


@pytest.mark.parametrize(
    ("bad", "named"),
    [
        ({"host": "a b"}, "host"),
        ({"args": ["--include-uncommitted"]}, "--include-uncommitted"),
        ({"args": ["--continue", "some-run"]}, "--continue"),
        ({"args": ["--dry-run"]}, "--dry-run"),
    ],
)
def test_a_batch_with_a_bad_later_task_starts_no_run(tmp_path, home, bad, named):
    source = Source(tmp_path)
    (tmp_path / "plan").mkdir()
    (tmp_path / "plan" / "a.md").write_text("a\n")
    (tmp_path / "plan" / "b.md").write_text("b\n")
    source.bench.script({"actions": [{"write": ["made.txt", "x\n"]}]})
    plan = write_json(
        tmp_path / "plan" / "batch.json",
        {"tasks": [{"brief": "a.md", "implementer": "codex"},
                   {"brief": "b.md", "implementer": "codex", **bad}]},
    )  # fmt: skip
    done = source.delegate("batch", str(plan), "--cd", str(source.repo), "--json")
    assert done.code == 2, done
    assert done.err.count("\n") == 1, done.err
    assert "task 2" in done.err and named in done.err, done.err
    assert source.bench.fake.calls() == []
    runs_root = tmp_path / "delegate-relay"
    assert not runs_root.exists() or listing(runs_root) == []
    assert source.worktrees() == [str(source.repo)]
