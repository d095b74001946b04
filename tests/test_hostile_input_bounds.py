"""Whatever a hostile side feeds us is bounded: a one-line error or a loop that ends, never a
traceback, a hang or unbounded memory, disk or CPU.

The hostile sides: a `--host` machine's stream of run files, a reviewer's answer, the events
an implementer writes, a run directory holding a FIFO, a `--check` command that outlasts
`--timeout`, an `--attempts` count, and a second ssh alias for a host already connected.

The remote stream is fed by an `ssh` of the test's own on PATH: commands for the core's
agent there (`start`, `follow`, `signal`, `clean`) get scripted answers, every other command
(the first probe, unpacking the core, git's pack transfer) runs on this machine under a HOME of
the test's own, as a real remote would run it.
"""

from __future__ import annotations

import base64
import json
import os
import resource
import signal
import subprocess
import time
from pathlib import Path

import pytest
import sshkit
from conftest import PYTHON, commit_all, delegate, git, make_repo
from fakes import Fake, relay_argv, wait_for
from relaykit import Bench

from delegate_skills.runs.review import parse_verdict

ESC, BEL = "\x1b", "\x07"

# ---------------------------------------------------------------- a scripted remote

#: The `ssh` on PATH: scripted answers for the agent's commands, the rest run here.
FAKE_SSH = r"""
import json, os, shlex, subprocess, sys

SCENARIO, STATE, HOME = sys.argv[1], sys.argv[2], sys.argv[3]
args = sys.argv[4:]
WITH_VALUE = {"-o", "-p", "-O", "-F", "-i", "-l", "-J", "-S", "-E", "-c", "-m"}
words, control, i = [], None, 0
while i < len(args):
    arg = args[i]
    if arg == "--":
        words = args[i + 1:]
        break
    if arg in WITH_VALUE:
        if arg == "-O":
            control = args[i + 1]
        i += 2
        continue
    if arg.startswith("-"):
        i += 1
        continue
    words = args[i:]
    break
if control is not None or len(words) < 2:  # -O check, or a master (-f -N): up
    sys.exit(0)
command = " ".join(words[1:])
parts = shlex.split(command)
verb = parts[6] if len(parts) > 7 and parts[1:4] == ["-I", "-S", "-c"] else None


def log(entry):
    with open(STATE + ".log", "a") as handle:
        handle.write(json.dumps(entry) + "\n")


with open(SCENARIO) as handle:
    scenario = json.load(handle)
if verb == "start":
    spec = json.loads(sys.stdin.buffer.read())
    answer = scenario.get("start")
    if answer is not None:  # how the start there fails
        sys.stdout.write(answer.get("stdout", ""))
        sys.stderr.write(answer.get("stderr", ""))
        sys.exit(answer["exit"])
    with open(STATE, "w") as handle:
        json.dump({"id": spec["id"], "base": spec["base"], "mirror": spec["mirror"]}, handle)
    subprocess.run(["git", "--git-dir", spec["mirror"], "update-ref",
                    "refs/heads/delegate/" + spec["id"], spec["base"]], check=True)
    print(json.dumps({"pid": 1}))
    sys.exit(0)
if verb in ("signal", "clean"):
    log({"verb": verb, "args": parts[7:]})
    sys.exit(0)
if verb == "follow":
    with open(STATE) as handle:
        state = json.load(handle)
    log({"verb": verb, "args": parts[7:]})
    with open(STATE + ".log") as handle:
        follows = sum(json.loads(entry)["verb"] == "follow" for entry in handle)
    if follows <= scenario.get("drops", 0):  # the connection breaks under this follow
        sys.stderr.write("Connection to 127.0.0.1 closed by remote host.\n")
        sys.exit(255)
    out = sys.stdout.buffer
    if scenario.get("endless"):
        block = b"x" * (1 << 20)
        for n in range(1 << 30):
            out.write(block)
            out.flush()
            if n == 8:
                open(STATE + ".streaming", "w").close()
    for line in scenario["lines"]:
        out.write(line.replace("@HEAD@", state["base"]).encode() + b"\n")
        out.flush()
    sys.exit(0)
os.environ["HOME"] = HOME
os.chdir(HOME)
os.execv("/bin/sh", ["sh", "-c", command])
"""

#: A result.json as a relay there writes it, cut to the fields a reader needs.
THEIR_RESULT = {
    "schema": "delegate-relay.result.v1", "tool": "codex", "status": "completed",
    "exitCode": 0, "signal": None, "startedAt": "2026-01-01T00:00:00.000Z",
    "finishedAt": "2026-01-01T00:00:01.000Z", "finalMessage": "done",
}  # fmt: skip


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def done_line(**fields) -> str:
    document = {"exitCode": 0, "head": None, "result": THEIR_RESULT, "outDir": "/r/out"}
    return json.dumps({"done": {**document, **fields}})


class Remote:
    """A source repository, and a host `devbox` whose stream the test scripts."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        self.repo = make_repo(tmp_path / "work")
        (self.repo / "a.txt").write_text("first\n")
        commit_all(self.repo, "start")
        self.brief = tmp_path / "brief.txt"
        self.brief.write_text("Do the thing.\n")
        self.out = tmp_path / "out"
        self.scenario = tmp_path / "remote-scenario.json"
        self.state = tmp_path / "remote-state.json"
        remote_home = tmp_path / "remote-home"
        remote_home.mkdir()
        bin_dir = tmp_path / "ssh-bin"
        bin_dir.mkdir()
        (bin_dir / "fake_ssh.py").write_text(FAKE_SSH)
        ssh = bin_dir / "ssh"
        ssh.write_text(
            f"#!/bin/sh\nexec {PYTHON} -S {bin_dir / 'fake_ssh.py'} {self.scenario} "
            f'{self.state} {remote_home} "$@"\n'
        )
        ssh.chmod(0o755)
        config = tmp_path / "config"
        (config / "delegate-skills").mkdir(parents=True)
        (config / "delegate-skills" / "hosts.json").write_text(
            json.dumps({"hosts": {"devbox": {"python": PYTHON}}})
        )
        self.env = {
            **os.environ,
            "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
            "XDG_STATE_HOME": str(tmp_path / "state"),
            "XDG_CONFIG_HOME": str(config),
            "TMPDIR": str(tmp_path),
        }

    def script(self, lines: list[str], endless: bool = False, **more) -> None:
        """What `follow` streams; `more`: "start" ({exit, stdout, stderr}: the start there
        fails so), "drops" (that many follows lose their connection first)."""
        self.scenario.write_text(json.dumps({"lines": lines, "endless": endless, **more}))

    def calls(self) -> list[dict]:
        """The agent's commands there that the test does not answer with a stream."""
        log = Path(str(self.state) + ".log")
        if not log.exists():
            return []
        return [json.loads(line) for line in log.read_text().splitlines()]

    def argv(self) -> list[str]:
        return relay_argv("codex", "--brief", str(self.brief), "--cd", str(self.repo),
                          "--out-dir", str(self.out), "--host", "devbox")  # fmt: skip

    def relay(self, timeout: float = 60) -> subprocess.CompletedProcess:
        return subprocess.run(self.argv(), capture_output=True, text=True, env=self.env,
                              stdin=subprocess.DEVNULL, timeout=timeout)  # fmt: skip

    def result(self) -> dict:
        return json.loads((self.out / "result.json").read_text())


@pytest.fixture
def remote(tmp_path, home) -> Remote:
    return Remote(tmp_path)


def relay_lines(stderr: str) -> list[str]:
    """The relay's stderr without the line that says the run started."""
    return [line for line in stderr.splitlines() if " run started on devbox " not in line]


def test_a_well_formed_stream_gives_the_result_there(remote):
    """The scripted remote itself works: a plain stream ends in that run's result."""
    events = '{"type":"thread.started","thread_id":"t-1"}\n'
    remote.script([
        json.dumps({"f": "events.jsonl", "o": 0, "d": _b64(events)}),
        done_line(),
    ])  # fmt: skip
    done = remote.relay()
    assert done.returncode == 0, done.stderr
    assert relay_lines(done.stderr) == []
    result = remote.result()
    assert (result["status"], result["host"], result["finalMessage"]) == (
        "completed", "devbox", "done")  # fmt: skip
    assert (remote.out / "events.jsonl").read_text() == events


# ---------------------------------------------------------------- the remote stream


def test_an_endless_line_from_the_remote_ends_on_sigterm(remote):
    remote.script([], endless=True)
    relay = subprocess.Popen(remote.argv(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=remote.env)  # fmt: skip
    try:
        streaming = Path(str(remote.state) + ".streaming")  # 8 MiB of one line are out
        wait_for(lambda: streaming.exists() or relay.poll() is not None, timeout=60)
        if relay.poll() is None:
            relay.send_signal(signal.SIGTERM)
        try:
            _out, err = relay.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            err = None
        assert err is not None, "the relay still runs 10 s after SIGTERM, reading one endless line"
    finally:
        if relay.poll() is None:
            relay.kill()
            relay.wait()
    assert "Traceback" not in err.decode(errors="replace"), err


#: The six malformed messages, each named.
MALFORMED = {
    "empty-file-name": json.dumps({"f": "", "o": 0, "d": _b64("x")}),
    "negative-offset": json.dumps({"f": "events.jsonl", "o": -5, "d": _b64("x")}),
    "not-json": "{this is not json",
    "result-not-an-object": done_line(result=["not", "an", "object"]),
    "no-exit-code": json.dumps({"done": {"head": None, "outDir": "/r/out", "result": {
        k: v for k, v in THEIR_RESULT.items() if k != "exitCode"}}}),
    "nested-100000-deep": "[" * 100_000 + "]" * 100_000,
}  # fmt: skip


@pytest.mark.parametrize("name", list(MALFORMED))
def test_a_malformed_remote_message_is_one_line_never_a_traceback(remote, name):
    remote.script([MALFORMED[name], done_line()])
    done = remote.relay()
    assert "Traceback" not in done.stderr, done.stderr
    said = relay_lines(done.stderr)
    assert len(said) == 1 and said[0].startswith("relay: "), done.stderr


def test_a_huge_remote_offset_makes_no_huge_file(remote):
    remote.script([json.dumps({"f": "events.jsonl", "o": 10**12, "d": _b64("x")}), done_line()])
    done = remote.relay()
    assert "Traceback" not in done.stderr, done.stderr
    for path in remote.out.iterdir():
        info = path.lstat()
        assert info.st_size < 1 << 20, (path.name, info.st_size)
        assert info.st_blocks * 512 < 1 << 20, (path.name, info.st_blocks)


def test_a_remote_workdir_outside_its_worktree_does_not_move_the_local_workdir(remote):
    theirs = {**THEIR_RESULT, "workdir": "/x/../../../tmp", "worktree": {"path": "/x"}}
    remote.script([done_line(head="@HEAD@", result=theirs)])
    done = remote.relay()
    assert "Traceback" not in done.stderr, done.stderr
    result = remote.result()
    tree = result["worktree"]["path"]
    assert tree.startswith(str(remote.tmp / "state" / "delegate-skills" / "worktrees") + "/")
    assert os.path.commonpath([result["workdir"], tree]) == tree, result["workdir"]


# ---------------------------------------------------------------- a reviewer's answer


def test_verdict_parsing_of_many_unclosed_json_fences_is_linear():
    answer_size = 20_000
    code = (
        "import importlib, json, sys\n"
        f"parse = importlib.import_module({parse_verdict.__module__!r}).parse_verdict\n"
        f"review = parse('```json\\n{{' * {answer_size})\n"
        "print(json.dumps([review['verdict'], review['findings']]))\n"
    )
    try:
        done = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, timeout=20)
    except subprocess.TimeoutExpired:
        done = None
    assert done is not None, "parsing a 180 KB answer of unclosed ```json fences took over 20 s"
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [None, []]


# ---------------------------------------------------------------- events and run dirs


def test_runs_logs_prints_no_terminal_control_characters(tmp_path, home):
    bench = Bench(tmp_path, "codex")
    events = (
        json.dumps({"type": "item.completed", "text": "hidden\x1b[1A\x1b[2Kshown"}) + "\n"
        + json.dumps({"type": "item.completed", "text": "\x1b]52;c;cm0gLXJmIH4=\x07copied"})
        + "\n" + "raw \x1b[1A\x1b[2K line \x1b]52;c;cm0gLXJmIH4=\x07 end\n"
    )  # fmt: skip
    bench.script({"actions": [{"stdout": events}]})
    assert bench.relay().code == 0
    done = subprocess.run([PYTHON, "-m", "delegate_skills", "runs", "logs", str(bench.out)],
                          capture_output=True, env=bench.fake.env(), timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    shown = done.stdout.decode()
    assert len(shown.splitlines()) == 3, shown
    assert ESC not in shown and BEL not in shown, shown


def _fifo_run(tmp_path: Path, name: str) -> Bench:
    """A finished codex run whose file `name` is now a FIFO nobody writes to."""
    bench = Bench(tmp_path, "codex")
    (bench.work / "a.txt").write_text("a\n")
    commit_all(bench.work)
    bench.script({"actions": [{"stdout": '{"type":"thread.started","thread_id":"t-1"}\n'},
                              {"write": ["made.txt", "x\n"]}]})  # fmt: skip
    assert bench.relay().code == 0
    (bench.out / name).unlink()
    os.mkfifo(bench.out / name)
    return bench


def _finishes(argv: list[str], env: dict) -> subprocess.CompletedProcess:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=20,
                              stdin=subprocess.DEVNULL)  # fmt: skip
    except subprocess.TimeoutExpired:
        done = None
    assert done is not None, f"{' '.join(argv[3:5])} still runs after 20 s on a FIFO"
    assert "Traceback" not in done.stderr, done.stderr
    return done


def test_runs_logs_on_a_fifo_in_the_run_dir_finishes(tmp_path, home):
    bench = _fifo_run(tmp_path, "events.jsonl")
    done = _finishes([PYTHON, "-m", "delegate_skills", "runs", "logs", str(bench.out)],
                     bench.fake.env())  # fmt: skip
    assert len(done.stderr.splitlines()) <= 1, done.stderr
    if done.returncode != 0:
        assert done.stderr.startswith("delegate: ") and "events.jsonl" in done.stderr, done


@pytest.mark.parametrize("name", ["events.jsonl", "brief.txt"])
def test_review_of_a_run_with_a_fifo_in_its_run_dir_finishes(tmp_path, home, name):
    bench = _fifo_run(tmp_path, name)
    reviewer = Fake(tmp_path / "fake-pi")
    reviewer.install("pi")
    reviewer.script({"run": {}})
    env = {**bench.fake.env(), "PATH": f"{reviewer.bin}{os.pathsep}{bench.fake.env()['PATH']}"}
    done = _finishes([PYTHON, "-m", "delegate_skills", "review", str(bench.out), "--implementer",
                      "pi", "--out-dir", str(tmp_path / "review"), "--json"], env)  # fmt: skip
    if done.returncode == 0:
        assert json.loads(done.stdout)["review"]["verdict"] is None
    else:  # the relay's own lines may come first; ours is one line
        ours = [line for line in done.stderr.splitlines() if line.startswith("delegate: ")]
        assert len(ours) == 1 and name in ours[0], done.stderr


# ---------------------------------------------------------------- --check and --timeout


def test_check_is_stopped_by_the_runs_timeout(tmp_path, home):
    bench = Bench(tmp_path, "codex")
    (bench.work / "a.txt").write_text("a\n")
    commit_all(bench.work)
    bench.script({"actions": [{"write": ["made.txt", "x\n"]}]})
    started = time.monotonic()
    try:
        done = bench.relay("--timeout", "2s", "--check", "sleep 30", timeout=20)
    except subprocess.TimeoutExpired:
        done = None
    assert done is not None, "a 2 s run whose --check sleeps 30 s still runs after 20 s"
    assert time.monotonic() - started < 20
    check = done.result["check"]
    assert check["command"] == "sleep 30"
    assert check["exitCode"] is None, check  # stopped, not finished
    assert check["seconds"] < 15, check


# ---------------------------------------------------------------- fanout --attempts


def _memory_cap() -> None:
    cap = 1 << 30
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))


def test_fanout_refuses_an_absurd_attempts_count_before_building_anything(tmp_path, home):
    bench = Bench(tmp_path, "codex")
    (bench.work / "a.txt").write_text("a\n")
    commit_all(bench.work)
    bench.script({})
    try:
        done = subprocess.run(
            [PYTHON, "-m", "delegate_skills", "fanout", "--brief", str(bench.brief), "--cd",
             str(bench.work), "--implementer", "codex", "--attempts", "100000000", "--json"],
            capture_output=True, text=True, env=bench.fake.env(TMPDIR=str(tmp_path)),
            timeout=20, stdin=subprocess.DEVNULL, preexec_fn=_memory_cap,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        done = None
    assert done is not None, "fanout --attempts 100000000 still runs after 20 s"
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    naming = [line for line in done.stderr.splitlines() if "--attempts" in line]
    assert len(naming) == 1, done.stderr
    assert bench.fake.calls() == []
    assert git(bench.work, "worktree", "list", "--porcelain").count("worktree ") == 1


# ---------------------------------------------------------------- ssh connection sharing

ssh_world = pytest.fixture(sshkit.ssh_world)


def test_a_second_alias_of_a_connected_host_gets_its_own_host_key_check(tmp_path, home, ssh_world):
    """A full sshd: `box-b` names the same HostName, port and user as `box-a`, but ssh knows no
    key for it (HostKeyAlias). With a master open for box-a, box-b must still be refused."""
    host = ssh_world.add_host("box-a", env={"PATH": "/usr/bin:/bin"})
    config = ssh_world.ssh_config.read_text()
    second = (
        f"Host box-b\n  HostName 127.0.0.1\n  Port {host.port}\n  User {ssh_world.user}\n"
        "  HostKeyAlias box-b-unknown\n\n"
    )
    ssh_world.ssh_config.write_text(second + config)
    hosts = tmp_path / "config" / "delegate-skills"
    hosts.mkdir(parents=True)
    (hosts / "hosts.json").write_text(json.dumps(
        {"hosts": {"box-a": {"python": PYTHON}, "box-b": {"python": PYTHON}}}))  # fmt: skip
    env = ssh_world.env(XDG_CONFIG_HOME=str(tmp_path / "config"),
                        XDG_STATE_HOME=str(tmp_path / "state"))  # fmt: skip
    alone = ssh_world.ssh("box-b", "true", env=env)
    assert alone.returncode == 255 and "Host key verification failed" in alone.stderr, alone
    first = delegate("discover", "--host", "box-a", "--json", env=env, timeout=120)
    assert first.code == 0, first.err
    second_run = delegate("discover", "--host", "box-b", "--json", env=env, timeout=120)
    assert second_run.code == 2, f"box-b answered through box-a's connection: {second_run.err}"
    assert second_run.err.strip() == (
        "delegate: --host box-b: ssh does not know this host's key (never accepted for you); "
        "run `ssh box-b` once yourself and check the fingerprint"
    )
