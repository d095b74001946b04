"""`--host` behaviours pinned one by one: what the user's hosts.json and ssh config may say,
the control-socket folder, the core shipped by content, the stream of run files coming
back, and how a run there that cannot be followed ends here.

Two stand-ins for the other machine: a real OpenSSH server on 127.0.0.1 (sshkit.py, through
test_remote.py's `Remote`), and an `ssh` of the test's own whose answers to the core's agent
are scripted (test_hostile_input_bounds.py's `Remote`, here `Scripted`), for what no honest
machine sends.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

import pytest
import sshkit
from conftest import PYTHON, ROOT, commit_all, delegate
from fakes import relay_argv, wait_for
from test_hostile_input_bounds import THEIR_RESULT, done_line, relay_lines
from test_hostile_input_bounds import Remote as Scripted
from test_remote import EDIT, kill_the_relay_here, one_line
from test_remote import Remote as Real

ssh_world = pytest.fixture(sshkit.ssh_world)

#: Where runs live on a test host unless hosts.json says otherwise.
DEFAULT_ROOT = ".cache/delegate-skills/remote"


@pytest.fixture
def scripted(tmp_path, home) -> Scripted:
    return Scripted(tmp_path)


@pytest.fixture
def real(tmp_path, home, ssh_world) -> Real:
    return Real(tmp_path, ssh_world)


@pytest.fixture
def runtime_dir():
    """A short $XDG_RUNTIME_DIR: the ssh control sockets go there (a socket path is short,
    which a pytest tmp_path is not)."""
    path = Path(tempfile.mkdtemp(prefix="dlg-", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def chunk(name, offset, data: bytes = b"x") -> str:
    return json.dumps({"f": name, "o": offset, "d": _b64(data)})


def bundles(host: sshkit.SshHost, root: str = DEFAULT_ROOT) -> list[str]:
    folder = host.home / root / "bundles"
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


# ---------------------------------------------------------------- host names and hosts.json


def test_a_host_name_starting_with_a_dash_is_refused_before_ssh_sees_it(scripted, tmp_path):
    marker = tmp_path / "proxy-ran"
    name = f"-oProxyCommand=touch${{IFS}}{marker}"  # no blank in it: only its dash is wrong
    scripted.script([])
    done = delegate("discover", f"--host={name}", "--json", env=scripted.env, timeout=120)
    assert done.code == 2, done
    assert done.err.strip() == (
        f"delegate: --host {name!r} is not a host ssh can reach; give an alias from your ssh "
        "config or user@host"
    )
    assert not marker.exists()


HOSTS_FILE_PROBLEMS = {
    "no-hosts-object": ({"devbox": {"python": "python3"}},
                        'expected {"hosts": {"<name>": {...}}}; fix or remove it'),
    "hosts-a-list": ({"hosts": ["devbox"]}, 'expected {"hosts": {"<name>": {...}}}; fix or remove it'),
    "not-an-object": (["hosts"], 'expected {"hosts": {"<name>": {...}}}; fix or remove it'),
    "entry-a-string": ({"hosts": {"devbox": "python3"}},
                       "hosts.devbox must be an object with root and python"),
    "empty-root": ({"hosts": {"devbox": {"root": ""}}},
                   "hosts.devbox.root must be a non-empty string"),
    "blank-python": ({"hosts": {"devbox": {"python": "  "}}},
                     "hosts.devbox.python must be a non-empty string"),
    "python-a-number": ({"hosts": {"devbox": {"python": 3}}},
                        "hosts.devbox.python must be a non-empty string"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(HOSTS_FILE_PROBLEMS))
def test_a_hosts_file_that_says_nothing_usable_is_one_line(scripted, tmp_path, case):
    document, problem = HOSTS_FILE_PROBLEMS[case]
    hosts = tmp_path / "config" / "delegate-skills" / "hosts.json"
    hosts.write_text(json.dumps(document))
    scripted.script([done_line()])
    done = scripted.relay()
    assert done.returncode == 2, done.stderr
    assert one_line(done) == f"relay: {hosts}: {problem}"
    assert not scripted.out.exists()
    assert scripted.calls() == []


def test_a_hosts_file_that_is_not_json_is_one_line(scripted, tmp_path):
    hosts = tmp_path / "config" / "delegate-skills" / "hosts.json"
    hosts.write_text('{"hosts": ')
    scripted.script([done_line()])
    done = scripted.relay()
    assert done.returncode == 2, done.stderr
    assert one_line(done).startswith(f"relay: {hosts}: not valid JSON (")
    assert one_line(done).endswith("); fix or remove it")


def test_the_root_hosts_json_names_is_where_runs_live_there(real):
    host = real.host("devbox")
    real.hosts_json({"hosts": {"devbox": {"root": "~/elsewhere/runs"}}})
    real.fake.script({"run": EDIT})
    done = real.relay("--host", "devbox")
    assert done.returncode == 0, done.stderr
    assert len(bundles(host, "elsewhere/runs")) == 1
    assert not (host.home / ".cache").exists()
    assert real.fake.run_call()["cwd"].startswith(str(host.home / "elsewhere/runs/worktrees") + "/")


# ---------------------------------------------------------------- ssh


def test_strict_host_key_checking_wins_over_the_users_accept_new(real, tmp_path):
    host = real.host("devbox")
    real.world.set_known(host, False)
    config = real.world.ssh_config
    config.write_text("Host devbox\n  StrictHostKeyChecking accept-new\n\n" + config.read_text())
    # Alone, the user's config takes a new key (here into a scratch file).
    scratch = tmp_path / "scratch_known_hosts"
    alone = real.world.ssh("-o", f"UserKnownHostsFile={scratch}", "devbox", "true", env=real.env)
    assert alone.returncode == 0, alone.stderr
    assert f"[127.0.0.1]:{host.port} " in scratch.read_text()
    done = real.relay("--host", "devbox")
    assert done.returncode == 2
    assert one_line(done) == (
        "relay: --host devbox: ssh does not know this host's key (never accepted for you); "
        "run `ssh devbox` once yourself and check the fingerprint"
    )
    assert f":{host.port}" not in real.world.known_hosts.read_text()
    assert real.fake.calls() == []


def test_a_changed_host_key_is_named_as_changed(real, tmp_path):
    host = real.host("devbox")
    other = tmp_path / "other_key"
    subprocess.run(["ssh-keygen", "-q", "-N", "", "-t", "ed25519", "-f", str(other)],
                   check=True, capture_output=True, timeout=30)  # fmt: skip
    kind, blob = other.with_name("other_key.pub").read_text().split()[:2]
    real.world.known_hosts.write_text(f"[127.0.0.1]:{host.port} {kind} {blob}\n")
    done = real.relay("--host", "devbox")
    assert done.returncode == 2
    assert one_line(done) == (
        "relay: --host devbox: the host's key has CHANGED; check it before you connect again"
    )
    assert real.fake.calls() == []


def test_a_failed_host_key_verification_alone_is_named_as_unknown(scripted):
    scripted.script(
        [done_line()], start={"exit": 255, "stderr": "Host key verification failed.\r\n"}
    )
    done = scripted.relay()
    assert done.returncode == 255
    assert relay_lines(done.stderr) == [
        "relay: --host devbox: ssh does not know this host's key (never accepted for you); "
        "run `ssh devbox` once yourself and check the fingerprint"
    ]


def test_ssh_exiting_255_on_the_start_is_the_connection_in_one_line(scripted):
    scripted.script([done_line()], start={
        "exit": 255, "stderr": "Connection closed by 127.0.0.1 port 22\r\n"})  # fmt: skip
    done = scripted.relay()
    assert done.returncode == 255
    assert relay_lines(done.stderr) == [
        "relay: --host devbox: unreachable (Connection closed by 127.0.0.1 port 22); "
        "check the name and that `ssh devbox` works"
    ]
    assert not (scripted.out / "result.json").exists()  # it may run there: `runs wait` can tell


def test_a_follow_whose_connection_drops_is_taken_up_again(scripted):
    events = '{"type":"thread.started","thread_id":"t-1"}\n'
    scripted.script([chunk("events.jsonl", 0, events.encode()), done_line()], drops=1)
    done = scripted.relay()
    assert done.returncode == 0, done.stderr
    assert relay_lines(done.stderr) == []
    assert scripted.result()["status"] == "completed"
    assert (scripted.out / "events.jsonl").read_text() == events
    assert [call["verb"] for call in scripted.calls()] == ["follow", "follow"]


# ---------------------------------------------------------------- the control-socket folder


def test_a_control_socket_folder_that_is_a_symlink_is_refused(scripted, tmp_path, runtime_dir):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    (runtime_dir / "delegate-ssh").symlink_to(elsewhere)
    scripted.env["XDG_RUNTIME_DIR"] = str(runtime_dir)
    scripted.script([done_line()])
    done = scripted.relay()
    assert done.returncode == 2
    assert one_line(done) == (
        f"relay: {runtime_dir}/delegate-ssh is not a folder of yours; remove it so ssh sockets "
        "can go there"
    )
    assert list(elsewhere.iterdir()) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a folder to another user needs root")
def test_a_control_socket_folder_of_someone_else_is_refused(scripted, runtime_dir):
    theirs = runtime_dir / "delegate-ssh"
    theirs.mkdir(mode=0o700)
    os.chown(theirs, 4242, 4242)
    scripted.env["XDG_RUNTIME_DIR"] = str(runtime_dir)
    scripted.script([done_line()])
    done = scripted.relay()
    assert done.returncode == 2
    assert one_line(done) == (
        f"relay: {theirs} is not a folder of yours; remove it so ssh sockets can go there"
    )


def test_a_control_socket_folder_open_to_others_is_closed_again(scripted, runtime_dir):
    ours = runtime_dir / "delegate-ssh"
    ours.mkdir()
    ours.chmod(0o755)
    scripted.env["XDG_RUNTIME_DIR"] = str(runtime_dir)
    scripted.script([done_line()])
    done = scripted.relay()
    assert done.returncode == 0, done.stderr
    assert ours.stat().st_mode & 0o777 == 0o700


# ---------------------------------------------------------------- the core shipped


def test_a_core_with_the_same_names_and_sizes_but_new_content_is_shipped_again(real, tmp_path):
    host = real.host("devbox")
    real.fake.script({"run": EDIT})
    skill = tmp_path / "skills" / "codex-delegate"
    shutil.copytree(ROOT / "skills" / "codex-delegate", skill)

    def relay_from_the_copy(out: str) -> subprocess.CompletedProcess:
        argv = [PYTHON, "-S", str(skill / "scripts" / "relay.py"), "--brief", str(real.brief),
                "--cd", str(real.repo), "--out-dir", str(tmp_path / out), "--host", "devbox"]  # fmt: skip
        return subprocess.run(argv, capture_output=True, text=True, env=real.env,
                              stdin=subprocess.DEVNULL, timeout=120)  # fmt: skip

    assert relay_from_the_copy("one").returncode == 0
    first = bundles(host)
    assert len(first) == 1
    module = skill / "scripts" / "delegate_skills" / "remote" / "__init__.py"
    text = module.read_text()
    changed = text.replace("Runs on other machines", "Runs on OTHER machines", 1)
    assert changed != text and len(changed.encode()) == len(text.encode())
    module.write_text(changed)
    assert relay_from_the_copy("two").returncode == 0
    second = [name for name in bundles(host) if name not in first]
    assert len(second) == 1
    shipped = host.home / DEFAULT_ROOT / "bundles" / second[0] / "delegate_skills" / "remote"
    assert (shipped / "__init__.py").read_text() == changed


# ---------------------------------------------------------------- the run files coming back


def test_a_run_file_grown_by_more_than_a_chunk_just_before_the_end_comes_back_whole(real):
    host = real.host("devbox")
    go = real.tmp / "go"
    line = json.dumps({"type": "item.completed", "text": "y" * 1000}) + "\n"
    real.fake.script({"run": {"actions": [{"wait_for_file": str(go)},
                                          {"spam": {"line": line, "lines": 700}}]}})  # fmt: skip
    out = kill_the_relay_here(real)
    go.write_text("")
    runs_there = host.home / DEFAULT_ROOT / "runs"
    wait_for(lambda: any(runs_there.glob("*.done.json")), 60)
    waited = delegate("runs", "wait", str(out), "--json", env=real.env, timeout=120)
    assert waited.code == 0, waited.err
    assert real.result()["status"] == "completed"
    assert (out / "events.jsonl").read_bytes() == (line * 700).encode()  # 700 KB: three chunks


def test_a_symlink_in_the_run_dir_there_is_not_streamed_back(real):
    host = real.host("devbox")
    (host.home / "secret.txt").write_text("the host's secret\n")
    link = 'ln -s "$HOME/secret.txt" "../../runs/$(basename "$PWD")/leak.txt"'
    real.fake.script({"run": {"actions": [
        {"git": ["-c", f"alias.make-link=!{link}", "make-link"]},
        {"write": ["made.txt", "x\n"]},
    ]}})  # fmt: skip
    done = real.relay("--host", "devbox")
    assert done.returncode == 0, done.stderr
    result = real.result()
    run_id = result["worktree"]["branch"].removeprefix("delegate/")
    assert (host.home / DEFAULT_ROOT / "runs" / run_id / "leak.txt").is_symlink()
    assert not (real.tmp / "out" / "leak.txt").exists()
    assert "the host's secret" not in done.stdout + done.stderr
    assert [f["path"] for f in result["changes"]["files"]] == ["made.txt"]


def test_flags_with_a_value_reach_the_relay_there_with_their_value(real):
    real.host("devbox")
    real.fake.script({"run": EDIT})
    done = real.relay("--host", "devbox", "--model", "gpt-pinned", "--effort", "high")
    assert done.returncode == 0, done.stderr
    argv = real.fake.run_call()["argv"]
    assert argv[argv.index("-m") + 1] == "gpt-pinned"
    assert "model_reasoning_effort=high" in argv


def test_a_run_from_a_subfolder_works_there_in_that_subfolder(real):
    real.host("devbox")
    (real.repo / "sub").mkdir()
    (real.repo / "sub" / "b.txt").write_text("b\n")
    commit_all(real.repo, "sub")
    real.fake.script({"run": {"actions": [{"write": ["here.txt", "x\n"]}]}})
    argv = relay_argv("codex", "--brief", str(real.brief), "--cd", str(real.repo / "sub"),
                      "--out-dir", str(real.tmp / "out"), "--host", "devbox")  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, env=real.env,
                          stdin=subprocess.DEVNULL, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = real.result()
    tree = result["worktree"]["path"]
    assert result["workdir"] == f"{tree}/sub"
    assert real.fake.run_call()["cwd"].endswith("/sub")
    assert [f["path"] for f in result["changes"]["files"]] == ["sub/here.txt"]


# ---------------------------------------------------------------- what comes back, checked


def test_a_host_run_whose_relay_is_killed_there_exits_1_here(real):
    host = real.host("devbox")
    implementer_pid = real.tmp / "implementer.pid"
    real.fake.script({"run": {"actions": [{"pid_file": str(implementer_pid)}, {"wait": True}]}})
    argv = relay_argv("codex", "--brief", str(real.brief), "--cd", str(real.repo),
                      "--out-dir", str(real.tmp / "out"), "--host", "devbox")  # fmt: skip
    relay = subprocess.Popen(argv, env=real.env, stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    killed = []
    try:
        wait_for(lambda: implementer_pid.exists() and implementer_pid.read_text(), 60)
        (info,) = (host.home / DEFAULT_ROOT / "runs").glob("*.json")
        for pid in (json.loads(info.read_text())["pid"], int(implementer_pid.read_text())):
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
        _out, err = relay.communicate(timeout=60)
    finally:
        if relay.poll() is None:
            relay.kill()
            relay.communicate()
    assert len(killed) == 2
    assert relay.returncode == 1, err
    assert "Traceback" not in err
    result = real.result()
    assert (result["status"], result["exitCode"], result["error"]) == (
        "failed", 1, "its relay vanished there (host devbox)")  # fmt: skip


def test_a_path_sharing_only_a_prefix_with_the_run_dir_there_is_not_rewritten(scripted):
    theirs = {**THEIR_RESULT, "artifact": "/r/out/events.jsonl", "sibling": "/r/outside/x.txt",
              "itself": "/r/out", "nested": ["/r/out/final.txt", "/r/out2"]}  # fmt: skip
    scripted.script([done_line(result=theirs)])
    done = scripted.relay()
    assert done.returncode == 0, done.stderr
    result = scripted.result()
    out = str(scripted.out)
    assert (result["artifact"], result["sibling"], result["itself"], result["nested"]) == (
        f"{out}/events.jsonl", "/r/outside/x.txt", out, [f"{out}/final.txt", "/r/out2"])  # fmt: skip


def test_a_workdir_inside_the_worktree_there_is_the_same_folder_here(scripted):
    theirs = {**THEIR_RESULT, "workdir": "/x/sub/../sub", "worktree": {"path": "/x"},
              "mentions": ["/x/sub/a.txt", "/xy/a.txt"]}  # fmt: skip
    scripted.script([done_line(head="@HEAD@", result=theirs)])
    done = scripted.relay()
    assert done.returncode == 0, done.stderr
    result = scripted.result()
    tree = result["worktree"]["path"]
    assert result["workdir"] == f"{tree}/sub"
    assert result["mentions"] == [f"{tree}/sub/a.txt", "/xy/a.txt"]


def test_a_host_run_whose_relay_vanished_there_exits_1(scripted):
    scripted.script([json.dumps({"lost": True})])
    done = scripted.relay()
    assert done.returncode == 1
    assert relay_lines(done.stderr) == []
    result = scripted.result()
    assert (result["status"], result["exitCode"], result["error"], result["host"]) == (
        "failed", 1, "its relay vanished there (host devbox)", "devbox")  # fmt: skip


def test_a_host_run_whose_relay_wrote_no_result_there_keeps_its_exit_code(scripted):
    scripted.script([done_line(result=None, exitCode=3)])
    done = scripted.relay()
    assert done.returncode == 3
    result = scripted.result()
    assert (result["status"], result["exitCode"], result["error"]) == (
        "failed", 3, "its relay wrote no result there (host devbox)")  # fmt: skip


def _deep(levels: int):
    value: object = "bottom"
    for _ in range(levels):
        value = [value]
    return value


#: Messages no honest machine sends, and how each is named.
BROKEN = {
    "name-with-a-slash": (chunk("sub/x.txt", 0), "file name 'sub/x.txt' is not a plain name"),
    "name-dot-dot": (chunk("..", 0), "file name '..' is not a plain name"),
    "name-leaving-the-run-dir": (chunk("../escape.txt", 0),
                                 "file name '../escape.txt' is not a plain name"),
    "name-with-a-nul": (chunk("a\0b", 0), "file name 'a\\x00b' is not a plain name"),
    "name-a-number": (json.dumps({"f": 7, "o": 0, "d": ""}), "file name 7 is not a plain name"),
    "offset-a-string": (chunk("events.jsonl", "0"),
                        "offset '0' of events.jsonl is not from 0 to the 0 bytes here"),
    "offset-false": (chunk("events.jsonl", False),
                     "offset False of events.jsonl is not from 0 to the 0 bytes here"),
    "offset-past-what-is-here": (chunk("events.jsonl", 5),
                                 "offset 5 of events.jsonl is not from 0 to the 0 bytes here"),
    "data-over-a-chunk": (chunk("events.jsonl", 0, b"z" * (256 * 1024 + 1)),
                          "the data of events.jsonl is not base64 of at most 262144 bytes"),
    "data-not-base64": (json.dumps({"f": "events.jsonl", "o": 0, "d": "no base64!"}),
                        "the data of events.jsonl is not base64"),
    "a-list": ("[1, 2]", "a message that is not a JSON object"),
    "done-a-list": (json.dumps({"done": [1]}), "its end is not a JSON object"),
    "exit-code-a-bool": (done_line(exitCode=True), "its end has no whole-number exitCode"),
    "head-an-option": (done_line(head="--output=/tmp/x"), "its head is not a commit id"),
    "out-dir-relative": (done_line(outDir="r/out"), "its outDir is not an absolute path"),
    "result-100-deep": (done_line(result={**THEIR_RESULT, "deep": _deep(100)}),
                        "a message nested deeper than 64 levels"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(BROKEN))
def test_a_message_breaking_the_stream_ends_the_run_here_in_one_line(scripted, tmp_path, case):
    message, problem = BROKEN[case]
    scripted.script([message, done_line()])
    done = scripted.relay()
    said = f"--host devbox: stopped following the run there: {problem}"
    assert relay_lines(done.stderr) == [f"relay: {said}"]
    assert done.returncode == 1
    result = scripted.result()
    assert (result["status"], result["exitCode"], result["error"], result["host"]) == (
        "failed", 1, said, "devbox")  # fmt: skip
    assert not (tmp_path / "escape.txt").exists()
    assert sorted(p.name for p in scripted.out.iterdir()) == [
        "brief.txt", "events.jsonl", "result.json", "run.json"]  # fmt: skip
    assert [call["args"][-1] for call in scripted.calls() if call["verb"] == "signal"] == [
        "SIGTERM"]  # fmt: skip


def test_an_endless_line_ends_the_run_here_in_one_line(scripted):
    scripted.script([], endless=True)
    done = scripted.relay(timeout=120)
    said = "--host devbox: stopped following the run there: a line longer than 32 MiB"
    assert relay_lines(done.stderr) == [f"relay: {said}"]
    assert done.returncode == 1
    assert (scripted.result()["status"], scripted.result()["error"]) == ("failed", said)


# ---------------------------------------------------------------- the start there


def test_a_failed_start_there_is_one_line_and_a_failed_result(scripted):
    scripted.script([done_line()], start={
        "exit": 3, "stderr": "git worktree add failed there: fatal: invalid reference\n"})  # fmt: skip
    done = scripted.relay()
    said = ("--host devbox: the run could not start there: git worktree add failed there: "
            "fatal: invalid reference")  # fmt: skip
    assert relay_lines(done.stderr) == [f"relay: {said}"]
    assert done.returncode == 1
    result = scripted.result()
    assert (result["status"], result["error"], result["host"]) == ("failed", said, "devbox")
    assert [call["verb"] for call in scripted.calls()] == []  # nothing followed, nothing stopped


def test_a_start_that_answers_no_json_is_one_line(scripted):
    scripted.script([done_line()], start={"exit": 0, "stdout": "Welcome to devbox!\n"})
    done = scripted.relay()
    assert relay_lines(done.stderr) == [
        "relay: --host devbox: the run could not start there: no answer from it"]  # fmt: skip
    assert done.returncode == 1


def test_what_the_machine_prints_reaches_the_terminal_without_control(scripted):
    scripted.script([done_line()], start={
        "exit": 3, "stderr": "\x1b]52;c;cm0gLXJmIH4=\x07oops\x1b[2K\x9b1A there\n"})  # fmt: skip
    done = scripted.relay()
    assert relay_lines(done.stderr) == [
        "relay: --host devbox: the run could not start there: oops1A there"]  # fmt: skip
