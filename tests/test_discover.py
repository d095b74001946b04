"""Discovery: every probe kind, parallel and bounded, JSON as the Node bundle prints it."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from conftest import PYTHON, SETUP_SCRIPTS, delegate, run
from discoverkit import ANSWERS, codex_cache, hanging, install, session_store
from fakes import alive, wait_for

from delegate_skills import discover as disc

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


@pytest.mark.parametrize("usage", [False, True])
def test_report_matches_the_node_bundle_field_for_field(machine, usage):
    env, bindir, home = machine
    args = ["--usage"] if usage else []
    done = run([PYTHON, str(SETUP_SCRIPTS / "discover.py"), *args], env=env)
    assert done.code == 0, done
    expected = (DATA / f"discover_expected{'_usage' if usage else ''}.json").read_text()
    assert normalized(done.out, bindir, home) == json.loads(expected)
    assert done.out.replace(str(bindir), "<BIN>").replace(str(home), "<HOME>") == expected


def test_delegate_discover_json_is_the_same_document(machine):
    env, _bindir, _home = machine
    script = run([PYTHON, str(SETUP_SCRIPTS / "discover.py"), "--usage"], env=env)
    cli = delegate("discover", "--usage", "--json", env={**os.environ, **env})
    assert cli.code == 0, cli
    assert cli.out == script.out


@pytest.mark.parametrize(
    ("args", "code"), [(["--help"], 0), (["-h"], 0), (["--bogus"], 2), (["extra"], 2)]
)
def test_script_arguments(args, code):
    done = run([PYTHON, str(SETUP_SCRIPTS / "discover.py"), *args])
    assert done.code == code
    if code == 2:
        assert done.err == "discover.py: unexpected arguments. Use --help.\n"


def test_a_hanging_probe_is_cut_at_10s_and_reported_unknown(tmp_path):
    bindir = install(tmp_path / "bin", {"kimi": ANSWERS["kimi"]})
    hanging(bindir, "qodercli", tmp_path / "qoder.pid")
    env = {"PATH": f"{bindir}:/usr/bin:/bin", "HOME": str(tmp_path)}
    started = time.monotonic()
    report = disc.discover(env=env)
    took = time.monotonic() - started
    assert 9.5 < took < 14
    qoder = next(e for e in report["discovered"] if e["key"] == "qoder")
    assert qoder["version"] is None
    assert "qoder" not in [m["key"] for m in report["missing"]]
    pid = int((tmp_path / "qoder.pid").read_text())
    wait_for(lambda: not alive(pid), timeout=5)


def test_non_executable_binary_is_missing(machine):
    env, _bindir, _home = machine
    report = disc.discover(env=env)
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
    report = disc.discover(
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
    report = disc.discover(env=env, only={"commandcode"})
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
    report = disc.discover(env=env, platform="win32", only={"commandcode"})
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
    report = disc.discover(
        env={"PATH": str(bindir), "HOME": str(home)}, platform="darwin", only={"zcode"}
    )
    entry = report["discovered"][0]
    assert (entry["path"], entry["version"]) == (str(bundle), "zcode 0.16.3")
    linux = disc.discover(
        env={"PATH": str(bindir), "HOME": str(home)}, platform="linux", only={"zcode"}
    )
    assert linux["missing"] == [{"key": "zcode", "binary": "zcode", "skill": "zcode-delegate"}]


def test_zcode_on_path_wins_over_the_bundle(tmp_path):
    home = tmp_path / "home"
    bundle = home / "Applications/ZCode.app/Contents/Resources/glm/zcode.cjs"
    bundle.parent.mkdir(parents=True)
    bundle.write_text("")
    bindir = install(tmp_path / "bin", {"zcode": {"--version": ("0.17.0\n", "", 0)}})
    report = disc.discover(
        env={"PATH": str(bindir), "HOME": str(home)}, platform="darwin", only={"zcode"}
    )
    assert report["discovered"][0]["path"] == str(bindir / "zcode")


def probe(stdout="", stderr="", ok=True):
    return disc.Probe(ok, stdout, stderr)


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
    assert disc.auth_of(disc.registry.BY_KEY[key], result) is expected


def test_model_lists_are_capped_at_200():
    listing = "\n".join(f"m{i}" for i in range(250)) + "\n"
    models = disc.parse_model_list(listing, "lines")
    assert (len(models["values"]), models["truncated"]) == (200, True)


def test_codex_cache_missing_is_failed_not_an_error(tmp_path):
    models = disc.models_of(
        disc.registry.BY_KEY["codex"], None, {"HOME": str(tmp_path)}, str(tmp_path)
    )
    assert models == {"status": "failed", "values": [], "truncated": False}


def test_usage_is_null_without_a_store(tmp_path):
    assert disc.usage_of(disc.registry.BY_KEY["claude"], {}, str(tmp_path)) is None
    assert disc.usage_of(disc.registry.BY_KEY["opencode"], {}, str(tmp_path)) is None


def test_usage_honours_the_env_dir(tmp_path):
    store = tmp_path / "elsewhere"
    (store / "projects" / "p").mkdir(parents=True)
    (store / "projects" / "p" / "s.jsonl").write_text("")
    usage = disc.usage_of(
        disc.registry.BY_KEY["claude"], {"CLAUDE_CONFIG_DIR": str(store)}, str(tmp_path)
    )
    assert usage["sessions"] == 1


def test_table_for_a_terminal(machine):
    from delegate_skills.commands.cli import discover_table

    env, _bindir, _home = machine
    text = discover_table(disc.discover(with_usage=True, env=env))
    assert "claude       2.1.0 (Claude Code)" in text
    assert "NOT logged in" in text
    assert "sessions: 2, last used 2026-09-21T14:14:10.000Z" in text
    assert text.splitlines()[-1] == "not installed: cline, qoder, vibe, omp, zcode"
