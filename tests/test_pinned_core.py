"""Behaviours of the core an audit found unpinned: each test kills one surviving mutation.

Expected values are written out here (or taken from the files the test made
itself), never computed by the code under test.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
from conftest import PYTHON, commit_all, delegate, fleet_doc, git, script, write_json
from discoverkit import install, recording, runs
from fakes import alive, wait_for
from relaykit import Bench, finish, read_pid

from delegate_skills.discover import probing
from delegate_skills.discover.report import discover
from delegate_skills.errors import UserError
from delegate_skills.reading import read_json_object, read_limited

LANES_U = fleet_doc({"u": {"implementer": "kimi"}})


# ---------------------------------------------------------------- 1. inside the repository


def _evil_sibling(repo: Path) -> Path:
    """`<parent>/repo-evil/config.json`: a sibling whose name starts with the repository's."""
    evil = repo.parent / f"{repo.name}-evil"
    write_json(evil / "config.json", LANES_U)
    return evil / "config.json"


@pytest.mark.parametrize("how", ["delegate", "config.py"])
def test_a_config_in_a_sibling_that_shares_the_prefix_is_refused(repo, how):
    target = _evil_sibling(repo)
    (repo / ".delegate").mkdir()
    link = repo / ".delegate" / "config.json"
    link.symlink_to(Path("..") / ".." / target.parent.name / "config.json")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "lanes, committed as a symlink")
    real_repo = os.path.realpath(repo)
    if how == "delegate":
        done = delegate("config", "load", "--json", "--cwd", str(repo))
    else:
        done = script("config.py", "load", "--cwd", str(repo))
    assert (done.code, done.out) == (2, ""), done
    prefix = "delegate" if how == "delegate" else "config.py"
    assert done.err == (
        f"{prefix}: refusing to read {real_repo}/.delegate/config.json: it resolves outside "
        f"{real_repo} ({os.path.realpath(target)}); "
        "replace the symlink with the fleet config itself\n"
    )


def test_read_limited_refuses_a_sibling_that_shares_the_prefix(tmp_path):
    root = tmp_path / "x" / "repo"
    root.mkdir(parents=True)
    (root / "inside.txt").write_bytes(b"in\n")
    sibling = tmp_path / "x" / "repo-evil"
    sibling.mkdir()
    (sibling / "file.txt").write_bytes(b"evil\n")
    (root / "link.txt").symlink_to(sibling / "file.txt")
    real_root = os.path.realpath(root)
    real_file = os.path.realpath(sibling / "file.txt")
    # Named directly, and through a symlink inside the repository.
    for path in (sibling / "file.txt", root / "link.txt"):
        with pytest.raises(UserError) as caught:
            read_limited(str(path), 1024, within=str(root))
        assert str(caught.value) == (
            f"refusing to read {path}: it resolves outside {root} ({real_file}); "
            "replace the symlink with the file itself"
        )
    # The repository itself, with or without a trailing separator, still reads.
    assert read_limited(str(root / "inside.txt"), 1024, within=str(root)) == b"in\n"
    assert read_limited(str(root / "inside.txt"), 1024, within=real_root + os.sep) == b"in\n"


# ---------------------------------------------------------------- 2. exactly the limit


def test_a_file_of_exactly_the_limit_is_read_and_one_byte_more_is_refused(tmp_path):
    exact = tmp_path / "exact.bin"
    exact.write_bytes(b"a" * 1024)
    over = tmp_path / "over.bin"
    over.write_bytes(b"a" * 1025)
    assert read_limited(str(exact), 1024) == b"a" * 1024
    with pytest.raises(UserError) as caught:
        read_limited(str(over), 1024)
    assert (
        str(caught.value) == f"refusing to read {over}: larger than 1 KiB, more than a file holds"
    )


def test_a_project_config_of_exactly_one_mebibyte_loads(repo):
    body = json.dumps(LANES_U).encode()
    config = repo / ".delegate" / "config.json"
    config.parent.mkdir()
    config.write_bytes(body + b" " * ((1 << 20) - len(body)))  # JSON, padded with blanks
    assert config.stat().st_size == 1 << 20
    done = script("config.py", "load", "--cwd", str(repo))
    assert done.code == 0, done
    report = json.loads(done.out)
    assert (report["projectPresent"], report["projectTrusted"]) == (True, False)
    assert report["lanes"] == {"u": {"implementer": "kimi", "source": "project"}}
    config.write_bytes(body + b" " * ((1 << 20) - len(body) + 1))
    done = script("config.py", "load", "--cwd", str(repo))
    assert done.code == 2
    assert done.err.endswith(": larger than 1 MiB, more than a fleet config holds\n"), done.err


# ---------------------------------------------------------------- 3. a cut-short project write

#: Runs `config write --scope project` as the CLI does, but stops for good at the
#: atomic write of the file named argv[2] ("r" on stdout first), to be SIGKILLed there.
HELD_WRITER = """
import json, os, sys, time
from delegate_skills import fleet, store
repo, stop_at, doc = sys.argv[1:4]
original = store.atomic_write
def held(target, data, **kw):
    if os.path.basename(target) == stop_at:
        os.write(1, b"r")
        while True:
            time.sleep(3600)
    return original(target, data, **kw)
store.atomic_write = held
with open(doc) as handle:
    fleet.write_document("project", repo, json.load(handle))
"""


def _kill_writer_at(repo: Path, stop_at: str, document: dict, tmp_path: Path) -> None:
    doc = write_json(tmp_path / "new-lanes.json", document)
    proc = subprocess.Popen(
        [PYTHON, "-c", HELD_WRITER, str(repo), stop_at, str(doc)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert proc.stdout.read(1) == b"r", proc.stderr.read()
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()
        proc.stderr.close()


def _sha(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()


@pytest.mark.parametrize("stop_at", ["config.json", "project-config.sha256"])
@pytest.mark.parametrize("approved_before", [False, True])
def test_a_killed_project_write_never_leaves_unreviewed_bytes_trusted(
    repo, tmp_path, stop_at, approved_before
):
    config = repo / ".delegate" / "config.json"
    records = repo / ".git" / "delegate-skills"
    if approved_before:
        # Approved once; then a pull brought bytes nobody here reviewed.
        first = write_json(tmp_path / "first.json", fleet_doc({"a": {"implementer": "kimi"}}))
        done = delegate("config", "write", "--scope", "project", "--cwd", str(repo), str(first))
        assert done.code == 0, done
        assert (records / "project-config.sha256").read_text() == _sha(config.read_bytes()) + "\n"
    unreviewed = b'{"version": "delegate-fleet.v1", "lanes": {"u": {"implementer": "kimi"}}}\n'
    config.parent.mkdir(exist_ok=True)
    config.write_bytes(unreviewed)
    commit_all(repo, "unreviewed lanes")

    _kill_writer_at(repo, stop_at, fleet_doc({"n": {"implementer": "vibe"}}), tmp_path)
    # The writer was cut short: its pending record is there, the unreviewed bytes too.
    assert (records / "project-config.pending").exists()
    assert config.read_bytes() == unreviewed

    loaded = delegate("config", "load", "--json", "--cwd", str(repo))
    assert loaded.code == 0, loaded
    report = loaded.json()
    assert (report["projectPresent"], report["projectTrusted"]) == (True, False)
    listed = delegate("lane", "list", "--json", "--cwd", str(repo))
    assert listed.code == 0, listed
    assert listed.json() == {
        "lanes": [
            {"lane": "u", "implementer": "kimi", "source": "project", "trusted": False,
             "dials": {}},
        ]
    }  # fmt: skip
    resolved = delegate("lane", "resolve", "--lane", "u", "--implementer", "kimi",
                        "--cwd", str(repo))  # fmt: skip
    assert resolved.code == 2, resolved

    # The user reviews the bytes and approves them: the record of the cut write goes.
    approved = delegate("config", "approve", "--json", "--cwd", str(repo))
    assert approved.code == 0, approved
    assert approved.json()["projectTrusted"] is True
    assert not (records / "project-config.pending").exists()
    assert sorted(p.name for p in records.iterdir() if not p.name.endswith(".lock")) == [
        "project-config.sha256"
    ]
    assert (records / "project-config.sha256").read_text() == _sha(unreviewed) + "\n"
    assert config.read_bytes() == unreviewed
    report = delegate("config", "load", "--json", "--cwd", str(repo)).json()
    assert report["projectTrusted"] is True


# ---------------------------------------------------------------- 4. the sweep's SIGKILL


def _sigterm_ignored(pid: int) -> bool:
    """Whether process `pid` has SIGTERM ignored (its SigIgn mask in /proc)."""
    try:
        with open(f"/proc/{pid}/status") as handle:
            for line in handle:
                if line.startswith("SigIgn:"):
                    return bool(int(line.split()[1], 16) & (1 << (signal.SIGTERM - 1)))
    except OSError:
        pass
    return False


def test_a_grandchild_deaf_to_sigterm_is_sigkilled_after_the_grace(tmp_path, home):
    bench = Bench(tmp_path, "codex")
    grand_file, child_file = bench.pid_file("grand.pid"), bench.pid_file("child.pid")
    bench.script(
        {
            "on_term": {"exit": 0},  # the test ends the implementer once the grandchild is deaf
            "actions": [
                {"grandchild": {"ignore_term": True, "pid_file": str(grand_file)}},
                {"pid_file": str(child_file)},
                {"wait": "forever"},
            ],
        }
    )
    proc = bench.start(env=bench.fake.env(DELEGATE_RELAY_ABORT_GRACE="0.5"))
    grand = 0
    try:
        child = read_pid(child_file)
        grand = read_pid(grand_file)
        # Its SIG_IGN is in place before the relay can signal it.
        wait_for(lambda: _sigterm_ignored(grand))
        os.kill(child, signal.SIGTERM)  # the implementer exits 0, leaving the grandchild
        ended = time.monotonic()
        code, _out, err = finish(proc)
        took = time.monotonic() - ended
    finally:
        proc.kill()
        proc.wait()
        if grand and alive(grand):
            os.kill(grand, signal.SIGKILL)
    assert code == 0, err
    assert not alive(grand)
    assert took >= 0.5, took  # SIGTERM, the whole grace, then SIGKILL
    result = bench.result
    assert (result["status"], result["exitCode"], result["signal"]) == ("completed", 0, None)
    assert f"relay: ended 1 process(es) Codex left running (pid {grand})" in err


# ---------------------------------------------------------------- 6. discovery


def _env(bindir: Path, home: Path) -> dict[str, str]:
    return {"PATH": f"{bindir}:/usr/bin:/bin", "HOME": str(home)}


def test_a_retry_waits_for_every_other_probe_and_runs_alone(tmp_path, monkeypatch):
    """Cut at the cap while others ran beside it: the retry starts once all the rest are done.

    slots=2, cap 2 s: aider spins (busy); the other slot runs two of the three 1.2 s
    probes (0-1.2 s, 1.2-2.4 s); at the cut the third takes aider's slot
    (2.0-3.2 s). A retry that did not run alone would start beside it.
    """
    monkeypatch.setattr(probing, "PROBE_TIMEOUT_S", 2.0)
    bindir, log = tmp_path / "bin", tmp_path / "log"
    recording(bindir, "aider", log, {"--version": ("aider 0.86.2\n", "", 0)},
              work=0.3, spin_once=("--version",))  # fmt: skip
    recording(bindir, "copilot", log, {"--version": ("copilot 1.0\n", "", 0)}, work=1.2)
    recording(bindir, "oz", log, {"--version": ("oz 0.9.1\n", "", 0),
              "whoami --output-format text": ("user:abc\n", "", 0)}, work=1.2)  # fmt: skip
    report = discover(env=_env(bindir, tmp_path), slots=2)
    entries = {e["key"]: e for e in report["discovered"]}
    assert entries["aider"]["version"] == "aider 0.86.2"
    assert (entries["copilot"]["version"], entries["warp"]["version"]) == (
        "copilot 1.0",
        "oz 0.9.1",
    )
    assert entries["warp"]["authenticated"] is True
    logged = runs(log)
    assert sorted(r.argv for r in logged) == sorted(
        ["aider --version", "aider --version", "copilot --version", "oz --version",
         "oz whoami --output-format text"]
    )  # fmt: skip
    cut, retry = [r for r in logged if r.argv == "aider --version"]
    assert cut.end is None and all(r.end is not None for r in logged if r is not cut), logged
    others = [r for r in logged if r.argv != "aider --version"]
    assert all(r.end < retry.start for r in others), logged


def test_nothing_starts_beside_a_probe_that_runs_alone(tmp_path):
    bindir, log = tmp_path / "bin", tmp_path / "log"
    recording(bindir, "aider", log, {"--version": ("aider 0.86.2\n", "", 0)}, work=1.0)
    recording(bindir, "copilot", log, {"--version": ("copilot 1.0\n", "", 0)})
    slots = probing.Slots(2)
    env = _env(bindir, tmp_path)
    answers: dict[str, object] = {}

    def ask(name: str, argv: list[str], alone: bool) -> None:
        answers[name] = slots.run(argv, env, alone=alone)[0]

    lone = threading.Thread(target=ask, args=("aider", [str(bindir / "aider"), "--version"], True))
    lone.start()
    try:
        wait_for(lambda: len(runs(log)) == 1)
        other = threading.Thread(
            target=ask, args=("copilot", [str(bindir / "copilot"), "--version"], False)
        )
        other.start()
        other.join(timeout=60)
    finally:
        lone.join(timeout=60)
    assert (answers["aider"].stdout, answers["copilot"].stdout) == (
        "aider 0.86.2\n",
        "copilot 1.0\n",
    )
    first, second = runs(log)
    assert (first.argv, second.argv) == ("aider --version", "copilot --version")
    assert first.end < second.start, runs(log)


def test_a_failing_version_probe_is_not_a_version(tmp_path):
    bindir = install(
        tmp_path / "bin",
        {
            "aider": {"--version": ("aider 0.86.2\n", "", 1)},
            # grok asks `version` first, then `--version`.
            "grok": {"version": ("grok junk\n", "", 2), "--version": ("grok 1.0.41\n", "", 0)},
        },
    )
    report = discover(env=_env(bindir, tmp_path), only={"aider", "grok"})
    entries = {e["key"]: e["version"] for e in report["discovered"]}
    assert entries == {"aider": None, "grok": "grok 1.0.41"}


def test_delegate_discover_prints_null_for_a_failing_version_probe(tmp_path):
    bindir = install(tmp_path / "bin", {"aider": {"--version": ("aider 0.86.2\n", "", 1)}})
    env = {**os.environ, **_env(bindir, tmp_path)}
    done = delegate("discover", "--json", env=env)
    assert done.code == 0, done
    aider = [e for e in done.json()["discovered"] if e["key"] == "aider"]
    assert [(e["version"], e["path"]) for e in aider] == [(None, str(bindir / "aider"))]


# ---------------------------------------------------------------- 7. deep JSON


@pytest.mark.parametrize("text", ["[" * 100000, '{"a":' * 100000, "[" * 100000 + "]" * 100000])
def test_deeply_nested_json_reads_as_none(tmp_path, text):
    path = tmp_path / "deep.json"
    path.write_text(text)
    assert read_json_object(str(path), 1 << 20) is None


def test_runs_show_survives_a_deeply_nested_result(tmp_path, home):
    """A run directory's result.json of nested brackets reads as no result, and no trace."""
    out = tmp_path / "run"
    out.mkdir()
    (out / "result.json").write_text("[" * 100000)
    done = delegate("runs", "show", str(out), "--json")
    assert (done.code, done.err) == (0, ""), done
    shown = json.loads(done.out)
    assert (shown["status"], shown["id"], shown["result"]) == ("foreign", None, None)
