"""Discovery: every probe kind, parallel and bounded, JSON as the Node bundle prints it."""

from __future__ import annotations

import contextlib
import json
import os
import pty
import signal
import subprocess
import time
from pathlib import Path

import pytest
from conftest import PYTHON, SETUP_SCRIPTS, delegate, node_bytes, run
from discoverkit import (
    ANSWERS,
    codex_cache,
    install,
    most_at_once,
    pids,
    recording,
    runs,
    session_store,
)
from fakes import alive, wait_for

from delegate_skills import registry
from delegate_skills.discover import answers, probing
from delegate_skills.discover.report import discover
from delegate_skills.discover.usage import usage_of

DATA = Path(__file__).parent / "data"


@pytest.fixture
def machine(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    bindir = install(tmp_path / "bin")
    (bindir / "cline").write_text("#!/bin/sh\necho 1\n")  # present, not executable
    codex_cache(home, ["gpt-5-codex", "gpt-5", "gpt-5"])
    session_store(home)
    env = {"PATH": f"{bindir}:/usr/bin:/bin", "HOME": str(home)}
    return env, bindir, home


def normalized(text: str, bindir: Path, home: Path) -> dict:
    return json.loads(text.replace(str(bindir), "<BIN>").replace(str(home), "<HOME>"))


#: The implementers the Node bundle does not know, not installed on this machine: the
#: report lists them as missing after Node's own.
BEYOND_NODE = [
    {"key": "gemini", "binary": "gemini", "skill": "gemini-delegate"},
    {"key": "qwen", "binary": "qwen", "skill": "qwen-delegate"},
    {"key": "auggie", "binary": "auggie", "skill": "auggie-delegate"},
    {"key": "kilo", "binary": "kilo", "skill": "kilo-delegate"},
    {"key": "hermes", "binary": "hermes", "skill": "hermes-delegate"},
    {"key": "dsh", "binary": "dsh", "skill": "dsh-delegate"},
]


def with_beyond_node(expected: str) -> str:
    """Node's pinned report with the implementers it lacks added to `missing`."""
    document = json.loads(expected)
    assert node_bytes(document).decode() == expected  # the pinned bytes are JSON.stringify's
    document["missing"] += BEYOND_NODE
    return node_bytes(document).decode()


@pytest.mark.parametrize("usage", [False, True])
def test_report_matches_the_node_bundle_field_for_field(machine, usage):
    env, bindir, home = machine
    args = ["--usage"] if usage else []
    done = run([PYTHON, str(SETUP_SCRIPTS / "discover.py"), *args], env=env)
    assert done.code == 0, done
    pinned = (DATA / f"discover_expected{'_usage' if usage else ''}.json").read_text()
    expected = with_beyond_node(pinned)
    assert normalized(done.out, bindir, home) == json.loads(expected)
    assert done.out.replace(str(bindir), "<BIN>").replace(str(home), "<HOME>") == expected


def test_delegate_discover_json_is_the_same_document(machine):
    env, _bindir, _home = machine
    script = run([PYTHON, str(SETUP_SCRIPTS / "discover.py"), "--usage"], env=env)
    cli = delegate("discover", "--usage", "--json", env={**os.environ, **env})
    assert cli.code == 0, cli
    document = json.loads(cli.out)
    extra = {k: document.pop(k) for k in ("probed", "cached", "probeSeconds", "missingTools")}
    assert document == json.loads(script.out)
    assert extra["cached"] == [] and extra["probed"] == sorted(
        e["key"] for e in document["discovered"]
    )
    assert set(extra["probeSeconds"]) == set(extra["probed"])


@pytest.mark.parametrize(
    ("args", "code"), [(["--help"], 0), (["-h"], 0), (["--bogus"], 2), (["extra"], 2)]
)
def test_script_arguments(args, code):
    done = run([PYTHON, str(SETUP_SCRIPTS / "discover.py"), *args])
    assert done.code == code
    if code == 2:
        assert done.err == "discover.py: unexpected arguments. Use --help.\n"


def test_a_hanging_probe_is_cut_at_10s_and_reported_unknown(tmp_path):
    """Alone on the machine, a probe that hits the cap is not tried again."""
    log = tmp_path / "log"
    recording(tmp_path / "bin", "qodercli", log, {"--version": ("", "", 0)}, hang=("--version",))
    env = {"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path)}
    started = time.monotonic()
    report = discover(env=env)
    took = time.monotonic() - started
    assert 9.5 < took < 14
    qoder = next(e for e in report["discovered"] if e["key"] == "qoder")
    assert qoder["version"] is None
    assert "qoder" not in [m["key"] for m in report["missing"]]
    assert len(runs(log)) == 1
    wait_for(lambda: not any(alive(pid) for pid in pids(log)), timeout=5)


def _env(bindir: Path, home: Path) -> dict[str, str]:
    return {"PATH": f"{bindir}:/usr/bin:/bin", "HOME": str(home)}


def test_a_probe_cut_while_others_ran_is_tried_again_alone(tmp_path, monkeypatch):
    monkeypatch.setattr(probing, "PROBE_TIMEOUT_S", 2.0)
    bindir, log = tmp_path / "bin", tmp_path / "log"
    recording(
        bindir, "aider", log, {"--version": ("aider 0.86.2\n", "", 0)}, spin_once=("--version",)
    )
    # Three probes of 1 s in the other slot: one of them is running when aider is cut at 2 s.
    recording(bindir, "copilot", log, {"--version": ("copilot 1.0\n", "", 0)}, work=1.0)
    recording(bindir, "oz", log, ANSWERS["oz"], work=1.0)
    report = discover(env=_env(bindir, tmp_path), slots=2)
    entries = {e["key"]: e for e in report["discovered"]}
    assert entries["aider"]["version"] == "aider 0.86.2"
    assert (entries["copilot"]["version"], entries["warp"]["authenticated"]) == (
        "copilot 1.0",
        True,
    )
    logged = runs(log)
    aider = [r for r in logged if r.argv == "aider --version"]
    assert len(aider) == 2
    # The retry had the machine to itself: every other run had ended, or started after it.
    retry = aider[1]
    assert retry.end is not None
    others = [r for r in logged if r is not retry and r is not aider[0]]
    assert len(others) == 3
    assert all(r.end < retry.start or r.start > retry.end for r in others), logged
    wait_for(lambda: not any(alive(pid) for pid in pids(log)), timeout=5)


def test_a_probe_cut_twice_is_reported_unknown(tmp_path, monkeypatch):
    """One more try, never two: a probe that hangs every time is cut twice."""
    monkeypatch.setattr(probing, "PROBE_TIMEOUT_S", 2.0)
    bindir, log = tmp_path / "bin", tmp_path / "log"
    recording(bindir, "qodercli", log, {"--version": ("", "", 0)}, spin=("--version",))
    recording(bindir, "copilot", log, {"--version": ("copilot 1.0\n", "", 0)}, work=0.5)
    report = discover(env=_env(bindir, tmp_path), slots=2)
    entries = {e["key"]: e for e in report["discovered"]}
    assert (entries["qoder"]["version"], entries["copilot"]["version"]) == (None, "copilot 1.0")
    assert len([r for r in runs(log) if r.argv == "qodercli --version"]) == 2
    wait_for(lambda: not any(alive(pid) for pid in pids(log)), timeout=5)


def test_probe_seconds_are_each_probes_own_time_not_its_wait_for_a_slot(tmp_path):
    bindir, log = tmp_path / "bin", tmp_path / "log"
    for binary, version in (("aider", "aider 1\n"), ("copilot", "copilot 1\n"), ("vibe", "v 1\n")):
        recording(bindir, binary, log, {"--version": (version, "", 0)}, work=1.0)
    seconds: dict = {}
    discover(env=_env(bindir, tmp_path), slots=1, seconds=seconds)
    assert sorted(seconds) == ["aider", "copilot", "vibe"]
    # One slot: two of them waited 1 s and 2 s for it; each still reports its own ~1 s.
    assert all(1.0 <= seconds[key]["version"] < 1.8 for key in seconds), seconds


def test_a_probe_that_waited_idle_through_the_cap_is_not_tried_again(tmp_path, monkeypatch):
    """Others ran beside it, but it slept (a model list waiting on the network): no retry."""
    monkeypatch.setattr(probing, "PROBE_TIMEOUT_S", 2.0)
    bindir, log = tmp_path / "bin", tmp_path / "log"
    recording(bindir, "qodercli", log, {"--version": ("", "", 0)}, hang=("--version",))
    recording(bindir, "copilot", log, {"--version": ("copilot 1.0\n", "", 0)}, work=1.0)
    recording(bindir, "oz", log, ANSWERS["oz"], work=1.0)
    started = time.monotonic()
    report = discover(env=_env(bindir, tmp_path), slots=2)
    took = time.monotonic() - started
    entries = {e["key"]: e for e in report["discovered"]}
    assert (entries["qoder"]["version"], entries["copilot"]["version"]) == (None, "copilot 1.0")
    assert len([r for r in runs(log) if r.argv == "qodercli --version"]) == 1
    assert took < 3.9, took  # not a second 2 s cap after the others
    wait_for(lambda: not any(alive(pid) for pid in pids(log)), timeout=5)


def test_a_probe_that_had_the_cap_nearly_to_itself_is_not_tried_again(tmp_path, monkeypatch):
    """Others ran beside it for a moment only: it hangs on its own, as copilot's update check."""
    monkeypatch.setattr(probing, "PROBE_TIMEOUT_S", 4.0)
    bindir, log = tmp_path / "bin", tmp_path / "log"
    recording(bindir, "copilot", log, {"--version": ("", "", 0)}, hang=("--version",))
    install(bindir, {"aider": ANSWERS["aider"]})  # answers at once: one short process
    report = discover(env=_env(bindir, tmp_path), slots=2)
    entries = {e["key"]: e for e in report["discovered"]}
    assert (entries["aider"]["version"], entries["copilot"]["version"]) == ("aider 0.86.2", None)
    assert len([r for r in runs(log) if r.argv == "copilot --version"]) == 1
    wait_for(lambda: not any(alive(pid) for pid in pids(log)), timeout=5)


@pytest.mark.parametrize("slots", [None, 3])
def test_probes_never_run_more_at_once_than_the_slots(tmp_path, slots):
    bindir, log = tmp_path / "bin", tmp_path / "log"
    for binary, table in ANSWERS.items():
        recording(bindir, binary, log, table, work=0.1)
    report = discover(env=_env(bindir, tmp_path), slots=slots)
    assert len(report["discovered"]) == len(ANSWERS)
    logged = runs(log)
    assert len(logged) > 20 and all(r.end for r in logged)
    bound = slots or probing.probe_slots()
    assert 2 <= most_at_once(logged) <= bound


def test_probe_slots_follow_the_machine():
    cpus = len(os.sched_getaffinity(0))
    assert probing.probe_slots() == min(max(2 * cpus, 2), 8)


def _delegate_discover(env: dict[str, str], **kw) -> subprocess.Popen:
    return subprocess.Popen(
        [PYTHON, "-m", "delegate_skills.commands.cli", "discover", "--json"],
        env={**os.environ, **env},
        # Ctrl-C is the default SIGINT handler's job, even under a parent that ignores it.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        **kw,
    )


def _skill_discover(env: dict[str, str], **kw) -> subprocess.Popen:
    from conftest import SETUP_SCRIPTS

    return subprocess.Popen(
        [PYTHON, "-I", "-S", str(SETUP_SCRIPTS / "discover.py")],
        env={**os.environ, **env},
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        **kw,
    )


@pytest.mark.parametrize("start", [_delegate_discover, _skill_discover], ids=["delegate", "skill"])
def test_ctrl_c_kills_every_probe_and_exits_at_once(tmp_path, start):
    bindir, log = tmp_path / "bin", tmp_path / "log"
    for binary, table in ANSWERS.items():
        recording(bindir, binary, log, table, hang=tuple(table))
    proc = start(_env(bindir, tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # Every probe that may run at once has started, child and all.
        busy = probing.probe_slots()
        wait_for(lambda: len(list(log.glob("*.child"))) >= busy, timeout=30)
        started = time.monotonic()
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=30)
        took = time.monotonic() - started
        assert took < 5, took
        assert proc.returncode != 0
        assert "Traceback" not in err, err
        assert len(list(log.glob("*.child"))) == busy  # nothing started after the Ctrl-C
        wait_for(lambda: not any(alive(pid) for pid in pids(log)), timeout=5)
    finally:
        proc.kill()
        proc.wait()
        for pid in pids(log):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def test_progress_lines_on_a_terminal_and_none_on_a_pipe(machine):
    env, _bindir, _home = machine
    piped = _delegate_discover(env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    pipe_out, pipe_err = piped.communicate(timeout=120)
    assert piped.returncode == 0
    assert pipe_err == ""
    keys = [e["key"] for e in json.loads(pipe_out)["discovered"]]
    assert len(keys) >= 10

    leader, follower = pty.openpty()
    try:
        on_tty = _delegate_discover(env, stdout=subprocess.PIPE, stderr=follower)
    finally:
        os.close(follower)
    shown = b""
    try:
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # EIO: the terminal's other end is closed
                break
            if not chunk:
                break
            shown += chunk
        tty_out = on_tty.communicate(timeout=120)[0].decode()
    finally:
        os.close(leader)
        on_tty.kill()
        on_tty.wait()
    assert on_tty.returncode == 0
    piped_doc, tty_doc = json.loads(pipe_out), json.loads(tty_out)
    assert (piped_doc["cached"], tty_doc["probed"]) == ([], [])  # the second answered from cache
    for extra in ("probed", "cached", "probeSeconds", "missingTools"):
        piped_doc.pop(extra)
        tty_doc.pop(extra)
    assert tty_doc == piped_doc  # the same answers either way
    lines = shown.decode().replace("\r\n", "\n").splitlines()
    assert sorted(line.split()[0] for line in lines) == sorted(keys)
    assert "claude       2.1.0 (Claude Code)  ·  logged in  ·  4 models" in lines
    assert any(line.startswith("cursor") and "NOT logged in" in line for line in lines)


def test_non_executable_binary_is_missing(machine):
    env, _bindir, _home = machine
    report = discover(env=env)
    assert "cline" in [m["key"] for m in report["missing"]]


def test_probes_of_one_cli_are_shared_when_identical(tmp_path):
    counter = tmp_path / "count"
    grok = tmp_path / "bin" / "grok"
    grok.parent.mkdir()
    grok.write_text(
        "#!/bin/sh\n"
        'case "$1" in version) echo grok 2;; models)\n'
        f'  echo x >> "{counter}"; echo "You are not authenticated." >&2; exit 1;; esac\n'
    )
    grok.chmod(0o755)
    report = discover(
        env={"PATH": f"{grok.parent}:/usr/bin:/bin", "HOME": str(tmp_path)}, only={"grok"}
    )
    entry = report["discovered"][0]
    assert (entry["authenticated"], entry["models"]["status"]) == (False, "failed")
    assert counter.read_text() == "x\n"


def test_commandcode_pin(tmp_path):
    override = tmp_path / "commandcode-override"
    override.write_text(
        '#!/bin/sh\nif [ "$1" = "--version" ]; then echo override-commandcode; exit 0; fi\nexit 1\n'
    )
    override.chmod(0o755)
    env = {"PATH": "", "COMMANDCODE_BIN": str(override), "HOME": str(tmp_path)}
    report = discover(env=env, only={"commandcode"})
    entry = report["discovered"][0]
    assert (entry["path"], entry["version"]) == (str(override), "override-commandcode")


@pytest.mark.parametrize(
    ("pin", "expected"),
    [
        (None, "missing"),
        ("cmd", "missing"),
        ("C:/tools/cmd.cmd", "missing"),
        ("C:/Windows/cmd.exe", "missing"),
    ],
)
def test_commandcode_is_never_guessed_on_windows(tmp_path, pin, expected):
    bindir = install(tmp_path / "bin", {"cmd": ANSWERS["cmd"]})
    env = {"PATH": str(bindir), "HOME": str(tmp_path), "COMSPEC": "C:/Windows/cmd.exe"}
    if pin:
        env["COMMANDCODE_BIN"] = pin
    report = discover(env=env, platform="win32", only={"commandcode"})
    assert [m["key"] for m in report["missing"]] == ["commandcode"]


def test_zcode_bundle_fallback_is_launched_with_node(tmp_path):
    home = tmp_path / "home"
    bundle = home / "Applications/ZCode.app/Contents/Resources/glm/zcode.cjs"
    bundle.parent.mkdir(parents=True)
    bundle.write_text("// bundle\n")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    node = bindir / "node"
    node.write_text(
        f'#!/bin/sh\nif [ "$1" = "{bundle}" ] && [ "$2" = "--version" ]; then echo zcode 0.16.3; exit 0; fi\nexit 9\n'
    )
    node.chmod(0o755)
    report = discover(
        env={"PATH": str(bindir), "HOME": str(home)}, platform="darwin", only={"zcode"}
    )
    entry = report["discovered"][0]
    assert (entry["path"], entry["version"]) == (str(bundle), "zcode 0.16.3")
    linux = discover(env={"PATH": str(bindir), "HOME": str(home)}, platform="linux", only={"zcode"})
    assert linux["missing"] == [{"key": "zcode", "binary": "zcode", "skill": "zcode-delegate"}]


def test_zcode_on_path_wins_over_the_bundle(tmp_path):
    home = tmp_path / "home"
    bundle = home / "Applications/ZCode.app/Contents/Resources/glm/zcode.cjs"
    bundle.parent.mkdir(parents=True)
    bundle.write_text("")
    bindir = install(tmp_path / "bin", {"zcode": {"--version": ("0.17.0\n", "", 0)}})
    report = discover(
        env={"PATH": str(bindir), "HOME": str(home)}, platform="darwin", only={"zcode"}
    )
    assert report["discovered"][0]["path"] == str(bindir / "zcode")


def probe(stdout="", stderr="", ok=True):
    return probing.Probe(ok, stdout, stderr)


@pytest.mark.parametrize(
    ("key", "result", "expected"),
    [
        ("claude", probe('{"loggedIn": false}'), False),
        ("claude", probe('{"loggedIn": "yes"}'), None),
        ("claude", probe("", '{"loggedIn": false}', ok=False), False),
        ("claude", probe("", "", ok=False), None),
        ("codex", probe("", "Not logged in\n"), False),
        ("codex", probe("", "Logged in using an API key\n"), True),
        ("codex", probe("", "something else\n"), None),
        ("opencode", probe("0 credentials\n"), False),
        ("opencode", probe("", "", ok=False), None),
        ("opencode", probe("\x1b[32m●\x1b[0m Anthropic api\n"), True),
        ("grok", probe("* grok-4\n"), True),
        ("grok", probe("", "Temporary failure", ok=False), None),
        ("kimi", probe("p source=api\n"), True),
        ("kimi", probe("p source=file\n"), None),
        ("warp", probe("user:abc\n"), True),
    ],
)
def test_auth_probe_readings(key, result, expected):
    assert answers.auth_of(registry.BY_KEY[key], result) is expected


def test_model_lists_are_capped_at_200():
    listing = "\n".join(f"m{i}" for i in range(250)) + "\n"
    models = answers.parse_model_list(listing, "lines")
    assert (len(models["values"]), models["truncated"]) == (200, True)


def test_codex_cache_missing_is_failed_not_an_error(tmp_path):
    models = answers.models_of(
        registry.BY_KEY["codex"], None, {"HOME": str(tmp_path)}, str(tmp_path)
    )
    assert models == {"status": "failed", "values": [], "truncated": False}


def test_usage_is_null_without_a_store(tmp_path):
    assert usage_of(registry.BY_KEY["claude"], {}, str(tmp_path)) is None
    assert usage_of(registry.BY_KEY["opencode"], {}, str(tmp_path)) is None


def test_usage_honours_the_env_dir(tmp_path):
    store = tmp_path / "elsewhere"
    (store / "projects" / "p").mkdir(parents=True)
    (store / "projects" / "p" / "s.jsonl").write_text("")
    usage = usage_of(registry.BY_KEY["claude"], {"CLAUDE_CONFIG_DIR": str(store)}, str(tmp_path))
    assert usage["sessions"] == 1


def test_table_for_a_terminal(machine):
    from delegate_skills.commands.discover_cli import discover_table

    env, _bindir, _home = machine
    text = discover_table(discover(with_usage=True, env=env))
    assert "claude       2.1.0 (Claude Code)" in text
    assert "NOT logged in" in text
    assert "sessions: 2, last used 2026-09-21T14:14:10.000Z" in text
    assert text.splitlines()[-1] == (
        "not installed: cline, qoder, vibe, omp, zcode, gemini, qwen, auggie, kilo, hermes, dsh"
    )
