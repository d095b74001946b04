"""`delegate mcp` driven by the official SDK's own stdio client."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path

import anyio
import pytest
from conftest import PYTHON, commit_all, fleet_doc, git, write_json
from relaykit import SWITCHES, VALUE_FLAGS, Bench

from delegate_skills.commands.mcp_server import relay_args

pytest.importorskip("mcp")

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

TOOLS = {
    "discover", "config_load", "config_validate", "lane_list", "lane_resolve", "doctor",
    "dispatch", "fanout", "runs_list", "runs_show", "runs_diff", "runs_wait", "runs_cancel",
    "runs_usage", "review",
}  # fmt: skip


def cli(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(
        [PYTHON, "-m", "delegate_skills", *args], capture_output=True, text=True, env=env
    )


def with_server(env: dict, body):
    """Run `body(session)` against a fresh `delegate mcp` server; return what it returns."""

    async def main():
        params = StdioServerParameters(
            command=PYTHON, args=["-m", "delegate_skills", "mcp"], env=env
        )
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            return await body(session)

    return anyio.run(main)


def text(result) -> str:
    return "".join(part.text for part in result.content)


@pytest.fixture
def world(tmp_path, home, global_config, repo):
    write_json(
        global_config,
        fleet_doc({"tests": {"implementer": "codex"}, "chat": {"implementer": "kimi"}}),
    )
    source = write_json(
        tmp_path / "lanes.json", fleet_doc({"review": {"implementer": "codex", "readOnly": True}})
    )
    assert (
        cli(
            "config",
            "write",
            "--scope",
            "project",
            "--cwd",
            str(repo),
            str(source),
            env=dict(os.environ),
        ).returncode
        == 0
    )
    bench = Bench(tmp_path / "bench", "codex")
    env = bench.fake.env(TMPDIR=str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    return {"env": env, "repo": repo, "bench": bench, "source": source, "global": global_config}


def fingerprint(world) -> dict[str, str]:
    paths = [world["global"], world["repo"] / ".delegate" / "config.json",
             world["repo"] / ".git" / "delegate-skills" / "project-config.sha256"]  # fmt: skip
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in paths}


def test_tools_and_their_schemas(world):
    async def body(session):
        return (await session.list_tools()).tools

    tools = with_server(world["env"], body)
    assert {tool.name for tool in tools} == TOOLS
    schemas = {tool.name: tool.input_schema for tool in tools}
    assert schemas["lane_resolve"]["required"] == ["lane", "implementer"]
    # The relay's own flag name, and the name dispatch and runs_list return.
    assert schemas["dispatch"]["required"] == ["implementer", "cd"]
    assert schemas["runs_wait"]["required"] == ["run"]
    assert schemas["runs_show"]["required"] == ["run"]


def test_each_tool_returns_what_its_command_prints(world):
    env, repo = world["env"], str(world["repo"])
    bench = world["bench"]
    bench.script({"actions": [{"stdout": '{"type":"thread.started","thread_id":"t-1"}\n'}]})
    assert bench.relay(env=env).code == 0
    cases = [
        ("discover", {}, ["discover", "--json"]),
        ("config_load", {"cwd": repo}, ["config", "load", "--cwd", repo]),
        ("config_validate", {"file": str(world["source"])}, ["config", "validate", str(world["source"])]),
        ("lane_list", {"cwd": repo}, ["lane", "list", "--json", "--cwd", repo]),
        ("lane_resolve", {"lane": "review", "implementer": "codex", "cwd": repo},
         ["lane", "resolve", "--lane", "review", "--implementer", "codex", "--cwd", repo]),
        ("doctor", {"cwd": repo}, ["doctor", "--json", "--cwd", repo]),
        ("runs_list", {"roots": [str(bench.out)]}, ["runs", "list", "--json", "--root", str(bench.out)]),
        ("runs_show", {"outDir": str(bench.out)}, ["runs", "show", str(bench.out), "--json"]),
        ("runs_wait", {"outDir": str(bench.out)}, ["runs", "wait", str(bench.out), "--json"]),
    ]  # fmt: skip

    async def body(session):
        return [(name, await session.call_tool(name, arguments)) for name, arguments, _ in cases]

    answers = with_server(env, body)
    for (name, result), (_, _, argv) in zip(answers, cases, strict=True):
        expected = cli(*argv, env=env).stdout
        assert not result.is_error, (name, text(result))
        if name == "discover":  # the second of the two answers from the cache
            got, want = json.loads(text(result)), json.loads(expected)
            for doc in (got, want):
                for extra in ("probed", "cached", "probeSeconds", "missingTools"):
                    doc.pop(extra)
            assert got == want, name
        elif name in ("runs_list", "runs_show", "runs_wait"):
            got, want = json.loads(text(result)), json.loads(expected)
            for doc in (got, want):
                for row in doc.get("runs", [doc]):
                    row.pop("elapsedSeconds", None)
            assert got == want, name
        else:
            assert text(result).strip() == expected.strip(), name


def test_a_bad_argument_is_a_tool_error_and_the_server_lives_on(world):
    async def body(session):
        bad = await session.call_tool("lane_resolve", {"lane": "nope", "implementer": "codex"})
        wrong = await session.call_tool("config_validate", {"file": "/nonexistent.json"})
        good = await session.call_tool("config_load", {})
        return bad, wrong, good

    bad, wrong, good = with_server(world["env"], body)
    assert bad.is_error and "fleet lane not found: nope" in text(bad)
    assert wrong.is_error and "cannot read" in text(wrong)
    assert not good.is_error and json.loads(text(good))["version"] == "delegate-fleet.v1"


def test_dispatch_then_wait(world):
    bench, env = world["bench"], world["env"]
    bench.script(
        {
            "actions": [
                {"pid_file": str(bench.tmp / "child.pid")},
                {"stdout": '{"type":"thread.started","thread_id":"t-mcp"}\n'},
                {"sleep": 1.5},
                {"write": ["done.txt", "x"]},
            ]
        }
    )

    async def body(session):
        started = json.loads(text(await session.call_tool(
            "dispatch", {"implementer": "codex", "brief": "do it\n", "cd": str(bench.work), "args": ["--timeout", "1m"]}
        )))  # fmt: skip
        out_dir = started["outDir"]
        while not (bench.tmp / "child.pid").exists():
            await anyio.sleep(0.02)
        listing = json.loads(text(await session.call_tool("runs_list", {})))
        waited = json.loads(text(await session.call_tool("runs_wait", {"outDir": out_dir})))
        return out_dir, listing, waited

    out_dir, listing, waited = with_server(env, body)
    (row,) = [r for r in listing["runs"] if r["outDir"] == out_dir]
    assert (row["status"], row["implementer"]) == ("running", "codex")
    assert waited["status"] == "completed"
    assert waited["result"]["threadId"] == "t-mcp"
    assert waited["result"]["touchedFiles"] == ["?? done.txt"]
    assert Path(out_dir, "brief.txt").read_text() == "do it\n"


def test_fanout_is_a_tool_and_landing_a_run_is_not(world):
    async def body(session):
        return (await session.list_tools()).tools

    tools = with_server(world["env"], body)
    # Written out: `delegate runs apply|discard` stay at the command line.
    assert sorted(tool.name for tool in tools) == [
        "config_load", "config_validate", "discover", "dispatch", "doctor", "fanout",
        "lane_list", "lane_resolve", "review", "runs_cancel", "runs_diff", "runs_list",
        "runs_show", "runs_usage", "runs_wait",
    ]  # fmt: skip
    schemas = {tool.name: tool.input_schema for tool in tools}
    assert schemas["fanout"]["required"] == ["cd"]  # and brief or briefFile
    assert set(schemas["fanout"]["properties"]) == {
        "brief", "briefFile", "cd", "lanes", "implementers", "jobs", "timeout",
    }  # fmt: skip
    assert schemas["dispatch"]["properties"]["worktree"]["default"] is False


def test_dispatch_in_a_worktree_leaves_the_source_alone(world):
    bench, env = world["bench"], world["env"]
    (bench.work / "seed.txt").write_text("seed\n")
    commit_all(bench.work)
    bench.script(
        {
            "actions": [
                {"stdout": '{"type":"thread.started","thread_id":"t-wt"}\n'},
                {"write": ["done.txt", "x\n"]},
            ]
        }
    )

    async def body(session):
        started = json.loads(text(await session.call_tool(
            "dispatch",
            {"implementer": "codex", "brief": "do it\n", "cd": str(bench.work),
             "worktree": True, "args": ["--worktree", "--timeout", "1m"]},
        )))  # fmt: skip
        return json.loads(text(await session.call_tool("runs_wait", {"outDir": started["outDir"]})))

    waited = with_server(env, body)
    assert waited["status"] == "completed", waited
    result = waited["result"]
    tree = result["worktree"]
    assert tree["branch"].startswith("delegate/")
    assert tree["source"] == str(bench.work)
    assert Path(tree["path"]) != bench.work and Path(tree["path"], "done.txt").read_text() == "x\n"
    assert result["diffstat"]["files"] and result["diffstat"]["filesChanged"] == 1
    assert git(bench.work, "status", "--porcelain") == ""
    assert not (bench.work / "done.txt").exists()
    (call,) = bench.fake.calls("run")
    assert call["cwd"] == tree["path"]
    # `--worktree` in args as well reaches the relay once.
    assert relay_args(["--worktree", "--timeout", "1m"], True) == ["--worktree", "--timeout", "1m"]
    assert relay_args(["--read-only"], True) == ["--read-only", "--worktree"]
    assert relay_args(None, False) == []


def test_fanout_runs_every_target_in_its_own_worktree(world, tmp_path):
    bench, env = world["bench"], world["env"]
    commit_all(bench.work)
    bench.script(
        {
            "actions": [
                {"stdout": '{"type":"thread.started","thread_id":"t-fan"}\n'},
                {"write": ["out.txt", "y\n"]},
            ]
        }
    )

    async def body(session):
        return await session.call_tool(
            "fanout",
            {"brief": "fan it\n", "cd": str(bench.work), "implementers": ["codex", "codex"],
             "jobs": 2, "timeout": "1m"},
        )  # fmt: skip

    result = with_server(env, body)
    assert not result.is_error, text(result)
    runs = json.loads(text(result))["runs"]
    assert len(runs) == 2
    assert [run["status"] for run in runs] == ["completed", "completed"], runs
    assert [run["implementer"] for run in runs] == ["codex", "codex"]
    branches = {run["worktree"]["branch"] for run in runs}
    assert len(branches) == 2 and all(b.startswith("delegate/") for b in branches)
    assert all(run["diffstat"]["filesChanged"] == 1 for run in runs)
    assert [call["stdin"] for call in bench.fake.calls("run")] == ["fan it\n", "fan it\n"]
    assert git(bench.work, "status", "--porcelain") == ""
    # The brief file the tool wrote for the command is gone again.
    root = tmp_path / "tmp" / "delegate-relay"
    assert not list(root.glob(".fanout-brief-*"))


def test_fanout_usage_error_is_a_tool_error(world):
    async def body(session):
        return await session.call_tool(
            "fanout", {"brief": "x", "cd": str(world["bench"].work), "implementers": ["nope"]}
        )

    result = with_server(world["env"], body)
    assert result.is_error and "--implementer nope: unknown implementer" in text(result)


def test_dispatch_refuses_flags_it_sets_itself(world):
    async def body(session):
        return await session.call_tool(
            "dispatch",
            {
                "implementer": "codex",
                "brief": "x",
                "cd": str(world["repo"]),
                "args": ["--out-dir", "/tmp/x"],
            },
        )

    result = with_server(world["env"], body)
    assert result.is_error and "--out-dir is set by the dispatch tool" in text(result)


def test_dispatch_reports_a_relay_usage_error_at_once(world, tmp_path):
    async def body(session):
        return await session.call_tool(
            "dispatch",
            {
                "implementer": "codex",
                "brief": "x",
                "cd": str(world["repo"]),
                "args": ["--timeout", "soon"],
            },
        )

    result = with_server(world["env"], body)
    assert result.is_error
    assert text(result) == (
        'Error executing tool dispatch: relay: --timeout "soon" is invalid or too long; '
        "use a positive h/m/s duration no longer than about 24 days"
    )
    # The run directory it made for the relay is gone again.
    root = tmp_path / "tmp" / "delegate-relay"
    assert not root.exists() or list(root.iterdir()) == []


def test_no_tool_changes_config_approval_or_lanes(world, tmp_path):
    before = fingerprint(world)
    candidate = write_json(tmp_path / "other.json", fleet_doc({"evil": {"implementer": "codex"}}))
    calls = [
        ("discover", {"usage": True}),
        ("config_load", {"cwd": str(world["repo"])}),
        ("config_validate", {"file": str(candidate)}),
        ("lane_list", {"cwd": str(world["repo"])}),
        ("lane_resolve", {"lane": "review", "implementer": "codex", "cwd": str(world["repo"])}),
        ("doctor", {"cwd": str(world["repo"])}),
        ("runs_list", {}),
        ("runs_show", {"outDir": str(tmp_path)}),
        ("runs_wait", {"outDir": str(tmp_path), "timeout": "1s"}),
    ]

    async def body(session):
        names = {tool.name for tool in (await session.list_tools()).tools}
        for name, arguments in calls:
            await session.call_tool(name, arguments)
        return names

    names = with_server(world["env"], body)
    assert names == TOOLS
    assert not any(
        word in name
        for name in names
        for word in ("write", "set", "unset", "approve", "remove", "delete")
    )
    assert fingerprint(world) == before
    assert json.loads(world["global"].read_text())["lanes"].keys() == {"tests", "chat"}


def test_config_snippets():
    for client, needle in (
        ("claude", '"mcpServers"'),
        ("cursor", '"mcpServers"'),
        ("codex", "[mcp_servers.delegate]"),
        ("opencode", '"type": "local"'),
    ):
        done = cli("mcp", "config", "--client", client, env=dict(os.environ))
        assert done.returncode == 0
        assert needle in done.stdout
        # `python -m delegate_skills` ran it: the snippet starts this interpreter so.
        assert json.dumps(PYTHON) in done.stdout
        assert (
            '"-m", "delegate_skills", "mcp"'
            in done.stdout.replace("\n    ", " ").replace("[\n      ", "[")
            or '"-m",' in done.stdout
        )


def test_config_names_the_delegate_that_ran(tmp_path):
    """The console script that runs, by its absolute path, never the first `delegate` on PATH."""
    decoy = tmp_path / "decoy"
    decoy.mkdir()
    (decoy / "delegate").write_text("#!/bin/sh\nexit 9\n")
    (decoy / "delegate").chmod(0o755)
    script = Path(PYTHON).parent / "delegate"
    if not script.exists():
        pytest.skip("this interpreter has no `delegate` console script beside it")
    done = subprocess.run(
        [str(script), "mcp", "config", "--client", "codex"],
        capture_output=True, text=True, env={**os.environ, "PATH": f"{decoy}:{os.environ['PATH']}"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == f'[mcp_servers.delegate]\ncommand = "{script}"\nargs = ["mcp"]\n'


def test_config_without_the_mcp_package_says_how_to_install_it(tmp_path):
    finder = (
        "import sys\n"
        "sys.modules['mcp'] = None  # as if the package were not installed\n"
        "from delegate_skills.commands.cli import main\n"
        "sys.exit(main(['mcp', 'config', '--client', 'claude']))\n"
    )
    done = subprocess.run([PYTHON, "-c", finder], capture_output=True, text=True)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.startswith("delegate: the MCP server needs the `mcp` package")
    assert "pip install 'mcp>=2,<3'" in done.stderr


def test_dispatch_takes_a_brief_file_and_refuses_a_path_given_as_the_brief(world):
    bench, env = world["bench"], world["env"]
    bench.script({"actions": [{"write": ["done.txt", "x"]}]})
    (bench.work / "task.md").write_text("the task, from a file\n")
    commit_all(bench.work)

    async def body(session):
        base = {"implementer": "codex", "cd": str(bench.work)}
        as_path = await session.call_tool("dispatch", {**base, "brief": "task.md"})
        both = await session.call_tool("dispatch", {**base, "brief": "x", "briefFile": "task.md"})
        neither = await session.call_tool("dispatch", base)
        missing = await session.call_tool("dispatch", {**base, "briefFile": "nope.md"})
        started = await session.call_tool("dispatch", {**base, "briefFile": "task.md"})
        out_dir = json.loads(text(started))["outDir"]
        waited = json.loads(text(await session.call_tool("runs_wait", {"outDir": out_dir})))
        return as_path, both, neither, missing, out_dir, waited

    as_path, both, neither, missing, out_dir, waited = with_server(env, body)
    failed = "Error executing tool dispatch: "
    assert as_path.is_error and text(as_path) == failed + (
        "brief is the brief's text, and 'task.md' is only the path of a file; "
        "pass the path as briefFile instead"
    )
    one_of = failed + "give the brief as brief (its text) or briefFile (a path), one of them"
    assert (both.is_error, text(both)) == (True, one_of)
    assert (neither.is_error, text(neither)) == (True, one_of)
    assert missing.is_error
    assert text(missing) == f"{failed}briefFile not found: {bench.work / 'nope.md'}"
    assert waited["status"] == "completed"
    assert Path(out_dir, "brief.txt").read_text() == "the task, from a file\n"


def test_every_tool_parameter_is_described(world):
    async def body(session):
        return (await session.list_tools()).tools

    tools = with_server(world["env"], body)
    undescribed = [
        f"{tool.name}.{name}"
        for tool in tools
        for name, schema in tool.input_schema.get("properties", {}).items()
        if not schema.get("description")
    ]
    assert undescribed == []
    assert len(tools) == 15


#: The relay flags dispatch refuses in args: --setup and --check run their value as a
#: shell command, --no-confine lets the implementer write outside its work tree.
REFUSED_OVER_MCP = {"--setup", "--check", "--no-confine"}
#: The relay flags the dispatch tool sets itself.
SET_BY_DISPATCH = {"--brief", "--cd", "--out-dir"}
#: Every other flag of every relay, each passed to the relay as given: none of them runs
#: shell text in the relay, approves a config or changes a lane.
PASSED_OVER_MCP = {
    "--add-dir", "--agent", "--allow-all-tools", "--api-base", "--approval-mode", "--approve",
    "--architect", "--auto", "--auto-approve", "--clean-env", "--confine", "--context-window",
    "--continue",
    "--continue-last", "--conversation", "--dangerously-skip-permissions", "--disabled-tools",
    "--disallowed-tools", "--dry-run", "--edit-format", "--effort", "--enabled-tools",
    "--file", "--force", "--full-access", "--history-file", "--host", "--include-uncommitted",
    "--keep-env", "--lane", "--max-budget-usd", "--max-price", "--max-tokens", "--max-turns",
    "--mcp", "--mode", "--model", "--name", "--new-project", "--no-auto", "--no-force",
    "--no-snapshot", "--openai-base-url", "--patch", "--permission", "--permission-mode", "--plan",
    "--plan-only", "--print-timeout", "--profile", "--project", "--provider", "--pure",
    "--read", "--read-only", "--resume", "--resume-last", "--sandbox", "--session",
    "--skill", "--skip-git-repo-check", "--skip-preflight", "--skip-trust", "--subtree-only",
    "--thinking", "--timeout", "--tools-all", "--variant", "--worktree", "--zcode-path",
}  # fmt: skip


def test_every_relay_flag_is_refused_set_or_passed_by_dispatch():
    """A relay that gains a flag fails this until someone decides whether MCP may pass it."""
    every = {
        flag for table in (VALUE_FLAGS, SWITCHES) for flags in table.values() for flag in flags
    }
    assert every - REFUSED_OVER_MCP - SET_BY_DISPATCH - PASSED_OVER_MCP == set()
    assert {"--setup", "--check"} | SET_BY_DISPATCH <= every


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["--check", "touch {marker}"], "--check"),
        (["--timeout", "1m", "--check", "touch {marker}"], "--check"),
        (["--worktree", "--setup", "touch {marker}"], "--setup"),
        (["--setup=touch {marker}", "--worktree"], "--setup"),
        (["--model", "m", "--check=touch {marker}"], "--check"),
        (["--no-confine"], "--no-confine"),
    ],
)
def test_dispatch_refuses_a_shell_flag_anywhere_in_args(world, tmp_path, args, flag):
    bench = world["bench"]
    commit_all(bench.work)
    bench.script({})
    marker = tmp_path / "shell-ran"

    async def body(session):
        return await session.call_tool(
            "dispatch",
            {"implementer": "codex", "brief": "do it\n", "cd": str(bench.work),
             "args": [arg.format(marker=marker) for arg in args]},
        )  # fmt: skip

    result = with_server(world["env"], body)
    assert result.is_error
    does, written = {
        "--check": ("runs its value as a shell command", "--check CMD"),
        "--setup": ("runs its value as a shell command", "--setup CMD"),
        "--no-confine": ("lets the implementer write outside its work tree, the fleet config "
                         "and its approval included", "--no-confine"),
    }[flag]  # fmt: skip
    assert text(result) == (
        f"Error executing tool dispatch: {flag} {does}: only the user gives it, at the command "
        f"line (delegate relay KEY {written}); no MCP tool takes it, so leave it out of args"
    )
    assert not marker.exists()
    assert bench.fake.calls() == []
    root = tmp_path / "tmp" / "delegate-relay"
    assert not root.exists() or list(root.iterdir()) == []


def test_the_server_says_shell_commands_are_the_users(world):
    async def body(session):
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
        return session.instructions, tools["dispatch"]

    instructions, dispatch = with_server(world["env"], body)
    assert (
        "Shell commands and turning confinement off are the user's too: dispatch refuses "
        "--setup and --check (their value runs as a shell command) and --no-confine in args; "
        "ask the user to give them at the command line." in instructions
    )
    assert (
        "`args` may not hold --setup or --check (the relay runs their value as a shell "
        "command) or --no-confine: those are the user's to give, at the command line; such "
        "a call is refused and starts nothing." in " ".join(dispatch.description.split())
    )
    assert dispatch.input_schema["properties"]["args"]["description"] == (
        'Further relay flags, e.g. ["--read-only"], ["--timeout", "45m"]. '
        "Not --setup, --check or --no-confine: those are the user's to give."
    )
