"""The first minutes with `delegate`, as a new user or an agent meets them."""

from __future__ import annotations

import json
import subprocess

import pytest
from clickversions import OLDEST_CLICK, env_with_click, oldest_click_dir
from conftest import PYTHON


@pytest.fixture(scope="module", params=["oldest", "newest"])
def click_env(request) -> tuple[str, dict]:
    """(click version, environment) for the oldest allowed click and the venv's newest."""
    directory = oldest_click_dir() if request.param == "oldest" else None
    env = env_with_click(directory)
    version = subprocess.run(
        [PYTHON, "-c", "import importlib.metadata as m, click, os; "
         "print(m.version('click') if 'site-packages' in click.__file__ else "
         "os.path.basename(os.path.dirname(os.path.dirname(click.__file__))))"],
        env=env, capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    return version, env


def run(env: dict, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [PYTHON, *argv], env=env, capture_output=True, text=True, timeout=60,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip


def test_the_oldest_click_is_really_the_oldest(click_env):
    version, _env = click_env
    if version.startswith("click-"):
        assert version == f"click-{OLDEST_CLICK}"


@pytest.mark.parametrize(
    "argv",
    [
        ["-m", "delegate_skills"],
        ["-m", "delegate_skills", "config"],
        ["-m", "delegate_skills", "lane"],
        ["-m", "delegate_skills", "runs"],
        ["-m", "delegate_skills", "skills"],
    ],
    ids=["delegate", "config", "lane", "runs", "skills"],
)
def test_a_bare_group_prints_its_help(click_env, argv):
    _version, env = click_env
    done = run(env, *argv)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) >= 8, done.stdout
    assert lines[0].startswith("Usage: ")
    assert "Commands:" in lines
    assert done.stderr == ""


def test_a_usage_error_is_clicks_own_and_exits_2(click_env):
    _version, env = click_env
    done = run(env, "-m", "delegate_skills", "lane", "resolve", "--lane", "x")
    assert done.returncode == 2
    assert "Usage: delegate lane resolve [OPTIONS]" in done.stderr
    assert done.stderr.rstrip().splitlines()[-1].startswith("Error: Missing option '--implementer'")
    assert "Traceback" not in done.stderr


def test_an_error_we_explain_is_one_line(click_env, tmp_path):
    _version, env = click_env
    missing = tmp_path / "nope.json"
    done = run(env, "-m", "delegate_skills", "config", "validate", str(missing))
    assert done.returncode != 0
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("delegate: ") and str(missing) in done.stderr


def terminal_output(argv: list[str], env: dict, stream: str) -> tuple[int, bytes]:
    """Run `argv` with `stream` ("stdout" or "stderr") on a pty: (exit code, what it wrote)."""
    import os
    import pty

    primary, secondary = pty.openpty()
    streams = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, stream: secondary}
    try:
        proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, **streams)
        os.close(secondary)
        seen = b""
        while True:
            try:
                chunk = os.read(primary, 65536)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
        code = proc.wait(timeout=60)
    finally:
        os.close(primary)
    return code, seen


# ---------------------------------------------------------------- runs wait, start line


def test_runs_wait_on_a_directory_with_no_run_fails_at_once(tmp_path):
    empty = tmp_path / "no-run-here"
    empty.mkdir()
    for target in (empty, tmp_path / "never-made"):
        done = subprocess.run(
            [PYTHON, "-m", "delegate_skills", "runs", "wait", str(target)],
            capture_output=True, text=True, timeout=10,
        )  # fmt: skip
        assert done.returncode == 2, done
        assert done.stderr == (
            f"delegate: {target}: no relay run there, and no running relay names it "
            "(a relay that stopped on a usage error printed why)\n"
        )


def test_runs_wait_started_with_the_relay_waits_for_it(tmp_path):
    from relaykit import Bench, finish

    bench = Bench(tmp_path, "codex")
    bench.script({"actions": [{"sleep": 1.5}]})
    relay = bench.start()
    try:
        waited = subprocess.run(
            [PYTHON, "-m", "delegate_skills", "runs", "wait", str(bench.out), "--json"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert waited.returncode == 0, waited
        assert finish(relay)[0] == 0
    finally:
        relay.kill()


def _first_stderr_line(proc: subprocess.Popen, seconds: float) -> str:
    import select

    ready, _, _ = select.select([proc.stderr], [], [], seconds)
    assert ready, "the relay said nothing on stderr"
    return proc.stderr.readline().decode()


def test_a_relay_names_its_run_directory_as_it_starts(tmp_path):
    from relaykit import Bench

    bench = Bench(tmp_path, "codex")
    bench.script({"actions": [{"sleep": 6}]})
    relay = bench.start()
    try:
        line = _first_stderr_line(relay, 30)
        head = f"relay: codex run started · {bench.out} · relay pid {relay.pid} · run id "
        assert line.startswith(head), line
        run_id = line[len(head) :].rstrip("\n")
        assert len(run_id) == 8 and run_id.isalnum() and run_id.islower(), run_id
        assert bench.out.is_dir()
        assert json.loads((bench.out / "run.json").read_text())["id"] == run_id
    finally:
        relay.kill()
        relay.communicate()


def test_elapsed_time_on_a_terminal_and_never_on_a_pipe(tmp_path):

    from fakes import relay_argv
    from relaykit import Bench

    bench = Bench(tmp_path, "codex")
    bench.script({"actions": [{"sleep": 1.3}]})
    code, seen = terminal_output(relay_argv("codex", *bench.args()), bench.fake.env(), "stderr")
    assert code == 0
    assert b"\r\x1b[Krelay: codex working \xc2\xb7 0:01" in seen, seen
    piped = bench.relay()
    assert "working" not in piped.err


def test_runs_list_finds_a_run_with_its_own_out_dir_anywhere(tmp_path):
    import json
    import os
    import shutil

    from relaykit import Bench

    bench = Bench(tmp_path, "codex")
    bench.out = tmp_path / "somewhere" / "else" / "run-1"
    bench.script({})
    env = bench.fake.env(XDG_STATE_HOME=str(tmp_path / "state"))
    assert bench.relay(env=env).code == 0
    gone = tmp_path / "gone-run"
    bench.out = gone
    assert bench.relay(env=env).code == 0
    shutil.rmtree(gone)
    listed = subprocess.run(
        [PYTHON, "-m", "delegate_skills", "runs", "list", "--json"],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    dirs = [run["outDir"] for run in json.loads(listed.stdout)["runs"]]
    assert str(tmp_path / "somewhere" / "else" / "run-1") in dirs
    # The run store still knows the run whose directory was removed (its worktree, its
    # change record): it stays listed until it is pruned.
    assert str(gone) in dirs
    records = tmp_path / "state" / "delegate-skills" / "runs"
    assert len(os.listdir(records)) == 2
    # Each record is written through the queue; its lock is beside it, in the store.
    assert all(os.path.exists(records / name / "record.json.lock") for name in os.listdir(records))


# ---------------------------------------------------------------- errors a user can cause


def one_line_error(done: subprocess.CompletedProcess, *words: str) -> None:
    assert done.returncode == 2, done
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("delegate: ")
    assert "Traceback" not in done.stderr
    for word in words:
        assert word in done.stderr, done.stderr


def delegate_cmd(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [PYTHON, "-m", "delegate_skills", *args], capture_output=True, text=True, env=env,
        timeout=60, stdin=subprocess.DEVNULL,
    )  # fmt: skip


@pytest.mark.parametrize(
    "args",
    [
        ["lane", "set", "a", "--implementer", "codex", "--scope", "project"],
        ["config", "load"],
        ["lane", "list", "--json"],
        ["config", "approve"],
    ],
    ids=["lane set", "config load", "lane list", "config approve"],
)
def test_a_delegate_file_instead_of_a_folder_is_one_line(repo, args):
    (repo / ".delegate").write_text("not a folder\n")
    done = delegate_cmd(*args, "--cwd", str(repo))
    one_line_error(done, str(repo / ".delegate"), "is a file, not a directory")


def test_a_global_config_folder_that_is_a_file_is_one_line(tmp_path, repo):
    import os

    config_home = tmp_path / "xdg"
    config_home.mkdir()
    (config_home / "delegate-skills").write_text("a file\n")
    env = {**os.environ, "XDG_CONFIG_HOME": str(config_home)}
    for args in (
        ["lane", "set", "a", "--implementer", "codex", "--scope", "global"],
        ["lane", "list", "--json", "--cwd", str(repo)],
    ):
        done = delegate_cmd(*args, env=env)
        one_line_error(done, str(config_home / "delegate-skills"), "is a file, not a directory")


def test_approve_without_a_project_config_is_one_line(repo):
    done = delegate_cmd("config", "approve", "--cwd", str(repo))
    one_line_error(done, str(repo / ".delegate" / "config.json"), "no project config to approve")


def test_config_script_validates_without_jsonschema(tmp_path):
    from conftest import SETUP_SCRIPTS

    doc = tmp_path / "lanes.json"
    doc.write_text('{"version": "delegate-fleet.v1", "lanes": {"a": {"implementer": "codex"}}}')
    done = subprocess.run(
        [PYTHON, "-I", "-S", str(SETUP_SCRIPTS / "config.py"), "validate", str(doc)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done
    assert "Traceback" not in done.stderr
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    done = subprocess.run(
        [PYTHON, "-I", "-S", str(SETUP_SCRIPTS / "config.py"), "validate", str(bad)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode != 0
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr


# ---------------------------------------------------------------- --cwd and XDG


@pytest.mark.parametrize(
    "args",
    [
        ["config", "load"],
        ["config", "path"],
        ["config", "approve"],
        ["lane", "list"],
        ["lane", "resolve", "--lane", "a", "--implementer", "codex"],
        ["lane", "set", "a", "--implementer", "codex", "--scope", "global"],
        ["lane", "unset", "a", "--scope", "global"],
        ["doctor"],
    ],
    ids=lambda a: " ".join(a[:2]),
)
def test_a_cwd_that_does_not_exist_is_refused(tmp_path, home, args):
    missing = tmp_path / "typo"
    done = delegate_cmd(*args, "--cwd", str(missing))
    assert done.returncode == 2, done
    assert str(missing) in done.stderr and "does not exist" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_relative_xdg_config_home_is_ignored(tmp_path, home):
    import json
    import os

    (tmp_path / "rel" / "delegate-skills").mkdir(parents=True)
    env = {**os.environ, "XDG_CONFIG_HOME": "rel"}
    done = subprocess.run(
        [PYTHON, "-m", "delegate_skills", "config", "load"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done
    assert json.loads(done.stdout)["globalPath"] == str(
        home / ".config" / "delegate-skills" / "config.json"
    )


# ---------------------------------------------------------------- one output rule


def _under_a_terminal(argv: list[str], env: dict) -> str:
    """What a command prints to a terminal (stdout is a pty)."""
    return terminal_output(argv, env, "stdout")[1].decode()


@pytest.fixture
def project(tmp_path, home, repo):
    import json
    import os

    from relaykit import Bench

    lanes = tmp_path / "lanes.json"
    lanes.write_text(
        json.dumps({"version": "delegate-fleet.v1", "lanes": {"a": {"implementer": "codex"}}})
    )
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}
    assert (
        delegate_cmd(
            "config", "write", "--scope", "project", "--cwd", str(repo), str(lanes)
        ).returncode
        == 0
    )
    bench = Bench(tmp_path / "bench", "codex")
    bench.script({})
    assert bench.relay(env={**bench.fake.env(), "XDG_STATE_HOME": env["XDG_STATE_HOME"]}).code == 0
    return {"repo": str(repo), "lanes": str(lanes), "run": str(bench.out), "env": env}


#: Every `delegate` command that prints a document, with arguments that make it succeed.
COMMANDS = [
    ["config", "load", "--cwd", "{repo}"],
    ["config", "validate", "{lanes}"],
    ["config", "write", "--scope", "global", "{lanes}"],
    ["config", "approve", "--cwd", "{repo}"],
    ["config", "path", "--cwd", "{repo}"],
    ["lane", "resolve", "--lane", "a", "--implementer", "codex", "--cwd", "{repo}"],
    ["lane", "list", "--cwd", "{repo}"],
    ["lane", "set", "b", "--implementer", "kimi", "--scope", "global"],
    ["lane", "unset", "b", "--scope", "global"],
    ["discover"],
    ["doctor", "--lane", "nope", "--cwd", "{repo}"],
    ["runs", "list"],
    ["runs", "show", "{run}"],
    ["runs", "wait", "{run}"],
    ["mcp", "config", "--client", "claude"],
]


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: " ".join(a[:2]))
def test_json_with_the_flag_or_on_a_pipe_and_text_on_a_terminal(project, args):
    import json

    argv = [PYTHON, "-m", "delegate_skills", *(a.format(**project) for a in args)]

    def call(*extra: str) -> subprocess.CompletedProcess:
        if args[:2] == ["lane", "unset"]:  # the lane must be back before each call
            lane_set = ("lane", "set", "b", "--implementer", "kimi", "--scope", "global")
            assert delegate_cmd(*lane_set).returncode == 0
        return subprocess.run(
            [*argv, *extra], capture_output=True, text=True, env=project["env"], timeout=60
        )

    flagged = call("--json")
    assert isinstance(json.loads(flagged.stdout), dict), flagged
    piped = call()
    assert isinstance(json.loads(piped.stdout), dict), piped
    if args[0] != "mcp":  # the snippet is what a terminal shows too
        call("--help")  # puts the lane back for unset
        shown = _under_a_terminal(argv, project["env"])
        assert shown.strip() and not shown.lstrip().startswith("{"), shown


def test_mcp_config_prints_only_the_snippet_on_stdout():
    import json

    done = delegate_cmd("mcp", "config", "--client", "claude")
    assert done.returncode == 0
    server = json.loads(done.stdout)["mcpServers"]["delegate"]
    # Run as `python -m delegate_skills`: the snippet starts this same interpreter that way.
    assert (server["command"], server["args"]) == (PYTHON, ["-m", "delegate_skills", "mcp"])
    assert done.stderr.startswith("Add to .mcp.json")


# ---------------------------------------------------------------- help that explains


#: Which implementers take each dial (the Node bundle's lane rules, and this port's
#: gemini, qwen, kilo, hermes and dsh), written out here.
DIAL_TAKERS = {
    "--variant": ["opencode", "kilo"],
    "--sandbox": ["codex", "grok"],
    "--permission-mode": ["qoder", "zcode", "gemini", "qwen", "dsh"],
    "--force / --no-force": ["cursor"],
    "--provider": ["cline", "pi", "omp", "hermes", "dsh"],
}


def test_lane_set_help_says_what_each_dial_means_and_who_takes_it():
    import re

    done = delegate_cmd("lane", "set", "--help")
    text = " ".join(done.stdout.split())
    for option, takers in DIAL_TAKERS.items():
        match = re.search(re.escape(option) + r"(?: \w+)? (.*?)\. Taken by: ([a-z, ]+)\.", text)
        assert match, option
        assert match.group(2).split(", ") == takers, option
    assert "The relay's watchdog, an h/m/s duration such as 30m" in text
