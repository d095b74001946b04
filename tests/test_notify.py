"""`--notify` on `delegate fanout`, `delegate batch` and `delegate runs watch`.

Every test builds its own PATH: recording stand-ins for `notify-send` and
`osascript` first, then the fake implementer, then the machine's PATH with any
real notifier left out. Each stand-in appends its argv and the DELEGATE_RUN_*
part of its environment to a file of its own; the user's own command is such
a stand-in too, named in the settings file the test writes.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from conftest import PYTHON, write_json
from fakes import alive, relay_argv, wait_for
from relaykit import read_pid
from test_worktree import Source

NOTIFIERS = ("notify-send", "osascript")
COMPLETED = "delegate: codex run completed"
APPLESCRIPT = [
    "-e", "on run argv",
    "-e", "display notification (item 2 of argv) with title (item 1 of argv)",
    "-e", "end run",
]  # fmt: skip
STRING_REFUSED = (
    "notify.command must be a list of strings, the program then its arguments (it runs "
    "without a shell; a command line as one string is refused)"
)


@pytest.fixture
def source(tmp_path, home) -> Source:
    return Source(tmp_path)


class Stand:
    """Recording stand-ins in a folder of their own, put first on the PATH a test builds."""

    def __init__(self, tmp_path: Path, source: Source) -> None:
        self.tmp = tmp_path
        self.bin = tmp_path / "notifiers"
        self.bin.mkdir()
        self.logs = tmp_path / "notified"
        self.logs.mkdir()
        self.settings = Path(os.environ["HOME"], ".config", "delegate-skills", "settings.json")
        rest = _without_notifiers(source.env["PATH"], tmp_path / "shadow")
        self.env = {**source.env, "PATH": os.pathsep.join([str(self.bin), rest])}

    def log(self, name: str) -> Path:
        return self.logs / f"{name}.jsonl"

    def program(self, name: str, tail: str = "", folder: Path | None = None) -> Path:
        """A stand-in called `name` that records each call, then runs `tail` (Python)."""
        path = (folder or self.bin) / name
        path.write_text(
            f"#!{PYTHON} -S\n"
            "import json, os, sys\n"
            "entry = {'argv': sys.argv[1:], 'env': {k: v for k, v in os.environ.items()\n"
            "                                       if k.startswith('DELEGATE_RUN_')}}\n"
            f"with open({str(self.log(name))!r}, 'a') as handle:\n"
            "    handle.write(json.dumps(entry) + '\\n')\n"
            f"{tail}"
        )
        path.chmod(0o755)
        return path

    def calls(self, name: str) -> list[dict]:
        path = self.log(name)
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines()]

    def write_settings(self, notify) -> None:
        write_json(self.settings, {"version": 1, "notify": notify})

    def delegate(self, *args: str, **extra: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [PYTHON, "-m", "delegate_skills", *args], capture_output=True, text=True,
            env={**self.env, **extra}, stdin=subprocess.DEVNULL, timeout=120,
        )  # fmt: skip


def _without_notifiers(path: str, shadows: Path) -> str:
    """`path` with each folder that holds a real notifier replaced by links to the rest."""
    shadows.mkdir()
    parts = []
    for n, folder in enumerate(path.split(os.pathsep)):
        try:
            names = os.listdir(folder) if folder else []
        except OSError:
            continue
        if not set(NOTIFIERS).intersection(names):
            parts.append(folder)
            continue
        shadow = shadows / str(n)
        shadow.mkdir()
        for name in names:
            if name not in NOTIFIERS:
                os.symlink(os.path.join(folder, name), shadow / name)
        parts.append(str(shadow))
    return os.pathsep.join(parts)


@pytest.fixture
def stand(tmp_path, source) -> Stand:
    return Stand(tmp_path, source)


def _fanout(source: Source, stand: Stand, *args: str, **extra: str):
    done = stand.delegate("fanout", "--brief", str(source.bench.brief), "--cd", str(source.repo),
                          *args, "--json", **extra)  # fmt: skip
    return done.returncode, json.loads(done.stdout) if done.stdout.strip() else {}, done.stderr


def _run_id(row: dict) -> str:
    return json.loads(Path(row["outDir"], "result.json").read_text())["relayRunId"]


def _summary(prefix: str, status: str, run_id: str) -> str:
    """The summary's pattern: `<prefix> <status> in <n>s · run <id>`."""
    return rf"{re.escape(prefix)} {status} in \d+s · run {re.escape(run_id)}"


# ---------------------------------------------------------------- what is said, and to whom


def test_a_fanout_of_two_attempts_says_once_per_run_on_the_desktop_and_to_the_users_command(
    source, stand
):
    stand.program("notify-send")
    mine = stand.program("my-notifier", folder=stand.tmp)
    stand.write_settings({"command": [str(mine), "--from-settings", "two words"]})
    source.bench.script({})
    code, report, err = _fanout(source, stand, "--implementer", "codex", "--attempts", "2",
                                "--notify")  # fmt: skip
    assert code == 0, err
    rows = report["runs"]
    assert [(r["task"], r["status"]) for r in rows] == [("#1", "completed"), ("#2", "completed")]
    ids = [_run_id(row) for row in rows]

    desktop = sorted(stand.calls("notify-send"), key=lambda c: c["argv"][2])
    assert [c["argv"][:2] for c in desktop] == [["--", COMPLETED], ["--", COMPLETED]]
    for call, task, run_id in zip(desktop, ("#1:", "#2:"), ids, strict=True):
        assert len(call["argv"]) == 3
        assert re.fullmatch(_summary(f"{task} codex", "completed", run_id), call["argv"][2])
        assert call["env"] == {}  # the run's facts go to the user's command only

    own = stand.calls("my-notifier")
    assert [c["argv"] for c in own] == [["--from-settings", "two words"]] * 2
    assert sorted((c["env"] for c in own), key=lambda e: e["DELEGATE_RUN_ID"]) == sorted(
        (
            {
                "DELEGATE_RUN_RESULT": str(Path(row["outDir"], "result.json")),
                "DELEGATE_RUN_STATUS": "completed",
                "DELEGATE_RUN_ID": run_id,
                "DELEGATE_RUN_IMPLEMENTER": "codex",
            }
            for row, run_id in zip(rows, ids, strict=True)
        ),
        key=lambda e: e["DELEGATE_RUN_ID"],
    )
    assert "--notify" not in err


def test_osascript_says_it_where_there_is_no_notify_send(source, stand):
    stand.program("osascript")
    source.bench.script({})
    code, report, err = _fanout(source, stand, "--implementer", "codex", "--notify")
    assert code == 0, err
    (row,) = report["runs"]
    (call,) = stand.calls("osascript")
    assert call["argv"][:7] == [*APPLESCRIPT, COMPLETED]
    assert len(call["argv"]) == 8
    assert re.fullmatch(_summary("codex", "completed", _run_id(row)), call["argv"][7])


def test_without_notify_nothing_is_said_whatever_the_settings_file_names(source, stand):
    stand.program("notify-send")
    mine = stand.program("my-notifier", folder=stand.tmp)
    stand.write_settings({"desktop": True, "command": [str(mine)]})
    source.bench.script({})
    code, report, err = _fanout(source, stand, "--implementer", "codex", "--implementer", "codex")
    assert code == 0, err
    assert [r["status"] for r in report["runs"]] == ["completed", "completed"]
    assert (stand.calls("notify-send"), stand.calls("my-notifier")) == ([], [])


def test_desktop_false_leaves_only_the_users_command(source, stand):
    stand.program("notify-send")
    mine = stand.program("my-notifier", folder=stand.tmp)
    stand.write_settings({"desktop": False, "command": [str(mine)]})
    source.bench.script({"exit": 3})
    code, report, err = _fanout(source, stand, "--implementer", "codex", "--notify")
    assert code == 1, err
    (row,) = report["runs"]
    assert row["status"] == "failed"
    assert stand.calls("notify-send") == []
    (call,) = stand.calls("my-notifier")
    assert (call["argv"], call["env"]["DELEGATE_RUN_STATUS"]) == ([], "failed")


# ---------------------------------------------------------------- the settings file


@pytest.mark.parametrize(
    ("notify", "problem"),
    [
        ({"command": "notify-me --all"}, STRING_REFUSED),
        ({"command": []}, STRING_REFUSED),
        ({"command": ["notify-me", 3]}, STRING_REFUSED),
        ({"desktop": "yes"}, "notify.desktop must be true or false"),
        ({"comand": ["notify-me"]}, "notify.comand is not a setting (one of: command, desktop)"),
        ("notify-me", 'notify must be an object such as {"desktop": true, "command": '
                      '["program", "argument"]}'),
    ],
)  # fmt: skip
def test_a_notify_setting_of_another_shape_is_refused_in_one_line_before_any_run(
    source, stand, notify, problem
):
    stand.program("notify-send")
    stand.write_settings(notify)
    source.bench.script({})
    code, report, err = _fanout(source, stand, "--implementer", "codex", "--notify")
    assert (code, report) == (2, {})
    assert err == f"delegate: {stand.settings}: {problem}\n"
    assert source.bench.fake.calls("run") == []
    assert source.worktrees() == [str(source.repo)]
    assert stand.calls("notify-send") == []


# ---------------------------------------------------------------- notifiers that misbehave


HANG = (
    "import subprocess, time\n"
    "child = subprocess.Popen([sys.executable, '-S', '-c', 'import time; time.sleep(600)'])\n"
    "with open({pids!r}, 'a') as handle:\n"
    "    handle.write(f'{{os.getpid()}} {{child.pid}}\\n')\n"
    "time.sleep(600)\n"
)


def test_a_hanging_notifier_is_cut_off_and_fanout_ends_with_its_own_exit_code(source, stand):
    pids = stand.tmp / "notifier.pids"
    stand.program("notify-send", HANG.format(pids=str(pids)))
    source.bench.script({"exit": 3})
    code, report, err = _fanout(source, stand, "--implementer", "codex", "--notify",
                                DELEGATE_NOTIFY_TIMEOUT="1")  # fmt: skip
    assert code == 1, err
    (row,) = report["runs"]
    assert row["status"] == "failed"
    (call,) = stand.calls("notify-send")
    assert call["argv"][:2] == ["--", "delegate: codex run failed"]
    lines = [line for line in err.splitlines() if "--notify" in line]
    assert lines == ["delegate: --notify: notify-send still ran after 1s; stopped it"]
    # Killed with its whole process group: the notifier and what it started.
    (started,) = pids.read_text().splitlines()
    for pid in map(int, started.split()):
        wait_for(lambda pid=pid: not alive(pid), timeout=10)


def test_failing_notifiers_cost_a_line_each_and_leave_the_exit_code_alone(source, stand):
    stand.program("notify-send", "sys.exit(1)\n")
    mine = stand.program("my-notifier", "sys.exit(7)\n", folder=stand.tmp)
    stand.write_settings({"command": [str(mine)]})
    source.bench.script({})
    code, report, err = _fanout(source, stand, "--implementer", "codex", "--notify")
    assert code == 0, err
    assert [r["status"] for r in report["runs"]] == ["completed"]
    assert [line for line in err.splitlines() if "--notify" in line] == [
        "delegate: --notify: notify-send exited 1",
        "delegate: --notify: notify.command exited 7",
    ]
    assert (len(stand.calls("notify-send")), len(stand.calls("my-notifier"))) == (1, 1)


def test_a_users_command_that_is_not_there_costs_one_line(source, stand, tmp_path):
    missing = tmp_path / "no-such-notifier"
    stand.write_settings({"desktop": False, "command": [str(missing), "x"]})
    source.bench.script({})
    code, report, err = _fanout(source, stand, "--implementer", "codex", "--notify")
    assert code == 0, err
    assert [r["status"] for r in report["runs"]] == ["completed"]
    assert [line for line in err.splitlines() if "--notify" in line] == [
        f"delegate: --notify: cannot start notify.command ({missing}): No such file or directory"
    ]


# ---------------------------------------------------------------- batch


def _batch(stand: Stand, source: Source, document: dict, *args: str):
    plan = stand.tmp / "plan"
    plan.mkdir(exist_ok=True)
    (plan / "a.md").write_text("a brief\n")
    path = write_json(plan / "batch.json", document)
    done = stand.delegate("batch", str(path), "--cd", str(source.repo), "--json", *args)
    return (
        path,
        done.returncode,
        json.loads(done.stdout) if done.stdout.strip() else {},
        done.stderr,
    )


def test_a_batch_task_that_names_a_notify_command_is_refused(source, stand):
    stand.program("notify-send")
    planted = stand.program("planted", folder=stand.tmp)
    source.bench.script({})
    task = {"brief": "a.md", "implementer": "codex", "notify": {"command": [str(planted)]}}
    path, code, report, err = _batch(stand, source, {"tasks": [task]}, "--notify")
    assert (code, report) == (2, {})
    assert err == (
        f"delegate: {path}: task 1: unknown field notify "
        "(one of: args, brief, host, implementer, lane, timeout)\n"
    )
    assert source.bench.fake.calls("run") == []
    assert (stand.calls("notify-send"), stand.calls("planted")) == ([], [])


def test_a_batch_files_own_notify_key_is_ignored_and_the_run_is_said_on_the_desktop(source, stand):
    stand.program("notify-send")
    planted = stand.program("planted", folder=stand.tmp)
    source.bench.script({})
    document = {"tasks": [{"brief": "a.md", "implementer": "codex"}],
                "notify": {"command": [str(planted)]}}  # fmt: skip
    _path, code, report, err = _batch(stand, source, document, "--notify")
    assert code == 0, err
    (row,) = report["runs"]
    assert (row["task"], row["status"]) == ("a", "completed")
    (call,) = stand.calls("notify-send")
    assert call["argv"][:2] == ["--", COMPLETED]
    assert re.fullmatch(_summary("a: codex", "completed", _run_id(row)), call["argv"][2])
    assert stand.calls("planted") == []


# ---------------------------------------------------------------- runs watch


def test_runs_watch_says_once_when_the_run_it_follows_ends(source, stand, tmp_path):
    stand.program("notify-send")
    mine = stand.program("my-notifier", folder=stand.tmp)
    stand.write_settings({"command": [str(mine)]})
    go = tmp_path / "go"
    source.bench.script({"actions": [{"pid_file": str(tmp_path / "child.pid")},
                                     {"wait_for_file": str(go)}]})  # fmt: skip
    out = source.bench.out
    argv = relay_argv("codex", "--brief", str(source.bench.brief), "--cd", str(source.repo),
                      "--out-dir", str(out))  # fmt: skip
    shown, said = tmp_path / "watch.out", tmp_path / "watch.err"
    relay = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, env=stand.env)  # fmt: skip
    watcher = None
    try:
        read_pid(tmp_path / "child.pid")
        with open(shown, "w") as stdout, open(said, "w") as stderr:
            watcher = subprocess.Popen(
                [PYTHON, "-m", "delegate_skills", "runs", "watch", "--notify"],
                stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr, env=stand.env,
            )  # fmt: skip
        wait_for(lambda: "started " in shown.read_text())
        go.write_text("")
        assert relay.wait(timeout=60) == 0
        assert watcher.wait(timeout=60) == 0, said.read_text()
    finally:
        for proc in (watcher, relay):
            if proc is not None:
                proc.kill()
                proc.wait()
    run_id = json.loads((out / "result.json").read_text())["relayRunId"]
    assert shown.read_text().splitlines() == [f"started {run_id} (codex)",
                                              f"{run_id} ended: completed"]  # fmt: skip
    (call,) = stand.calls("notify-send")
    assert call["argv"][:2] == ["--", COMPLETED]
    assert re.fullmatch(_summary("codex", "completed", run_id), call["argv"][2])
    (own,) = stand.calls("my-notifier")
    assert own["env"] == {
        "DELEGATE_RUN_RESULT": str(out / "result.json"),
        "DELEGATE_RUN_STATUS": "completed",
        "DELEGATE_RUN_ID": run_id,
        "DELEGATE_RUN_IMPLEMENTER": "codex",
    }
    assert said.read_text() == ""
