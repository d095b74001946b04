"""The kilo, hermes and dsh relays against the real CLIs (opt-in: `-m realcli`).

The same two checks as test_real_cli.py, with its functions, for Kilo Code, Hermes Agent
and DeepSeek Harness found on PATH (a CLI that is not installed is skipped; dsh needs
Node 22 first on PATH):

* Argument acceptance. With no login and no model in reach, every command line the
  relay builds must get past the CLI's parser: the run then fails on a missing model,
  provider or key, never on a parser's refusal. kilo answers an unknown option with its
  usage text, hermes (argparse) with "unrecognized arguments", dsh (commander) with
  "unknown option"; a made-up flag given to each CLI directly proves the classifier
  sees that refusal.
* An offline edit. Each CLI talks to the scripted model server (modelserver.py), which
  asks for one file write and then answers with a final text: a write run must create
  the file, a read-only run must leave it absent with a clean verdict.
"""

from __future__ import annotations

import json
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from .test_real_cli import (
    BRIEF,
    FINAL_TEXT,
    RUN_LIMIT_S,
    _short,
    classify,
    clean_env,
    model_server,
    one_commit_repo,
    real_binary,
    recorded_argv,
    run_relay,
    shim,
    table_lines,
    version_of,
    write_table_section,
)

pytestmark = pytest.mark.realcli

KILO_SESSION = "ses_0a1b2c3d4e5f60718293a4b5c6"
HERMES_SESSION = "20261207_000000_abcdef"
#: Refusals test_real_cli.classify does not know: argparse's (hermes), and kilo's usage
#: text, which kilo prints (and exits 1) for an option it does not know.
MORE_REFUSALS = re.compile(
    r"unrecognized arguments|argument .+: (?:invalid choice|expected one argument)"
    r"|^kilo run \[message\.\.\]$"
)
#: (variant, relay arguments) per CLI; {patch} is an existing overlay file.
VARIANTS: dict[str, list[tuple[str, list[str]]]] = {
    "kilo": [
        ("default", []),
        ("read-only", ["--read-only"]),
        ("model", ["--model", "nosuch/other-model"]),
        ("gateway model id", ["--model", "kilo/~anthropic/claude-sonnet-latest"]),
        ("variant", ["--variant", "high"]),
        ("agent", ["--agent", "debug"]),
        ("no-auto", ["--no-auto"]),
        ("pure", ["--pure"]),
        ("session", ["--session", KILO_SESSION]),
        ("resume-last", ["--resume-last"]),
        ("read-only session", ["--read-only", "--session", KILO_SESSION]),
    ],
    "hermes": [
        ("default", []),
        ("read-only", ["--read-only"]),
        ("model", ["--model", "anthropic/claude-sonnet-4.6"]),
        ("provider", ["--provider", "openrouter", "--model", "x/y"]),
        ("max-turns", ["--max-turns", "3"]),
        ("session", ["--session", HERMES_SESSION]),
        ("resume-last", ["--resume-last"]),
        ("read-only session", ["--read-only", "--session", HERMES_SESSION]),
    ],
    "dsh": [
        ("default", []),
        ("read-only", ["--read-only"]),
        ("permission workspace-write", ["--permission-mode", "workspace-write"]),
        ("permission danger-full-access", ["--permission-mode", "danger-full-access"]),
        ("model overlay", ["--model", "deepseek-v4-pro"]),
        ("model and provider", ["--model", "m", "--provider", "local-vllm"]),
        ("patch", ["--patch", "{patch}"]),
    ],
}
#: The CLI run directly with a flag that does not exist: its parser must refuse it.
CONTROL = {
    "kilo": ["run", "--no-such-flag-xyz", "hi"],
    "hermes": ["chat", "-Q", "--no-such-flag-xyz", "--query=hi"],
    "dsh": ["--profile", "headless", "--no-such-flag-xyz", "hi"],
}


#: Where each CLI keeps its state, under HOME: a confined run may write there only if it
#: exists (the relay makes nothing in the user's home), as it does for a CLI used before.
STATE_DIRS = {
    "kilo": [".local/share/kilo", ".local/state/kilo", ".local/state/kilo-sandbox-policy",
             ".cache/kilo", ".config/kilo"],
    "hermes": [".hermes"],
    "dsh": [".dsh"],
}  # fmt: skip


def prepare_home(cli: str, home: Path, config: dict | None = None) -> None:
    """A home where `cli` has been used: its state folders, and kilo's config.

    kilo's default model is its gateway, which a run without network waits on; a
    model that does not exist, with the gateway provider off, fails at once.
    """
    for folder in STATE_DIRS[cli]:
        (home / folder).mkdir(parents=True, exist_ok=True)
    if cli == "kilo":
        settings = {"model": "nosuch/model", "disabled_providers": ["kilo"], **(config or {})}
        (home / ".config" / "kilo" / "kilo.jsonc").write_text(json.dumps(settings))


def cli_stderr(outcome) -> str:
    """The CLI's stderr: stderr.txt where the relay keeps one, else the result's tail."""
    if outcome.cli_stderr:
        return outcome.cli_stderr
    result = outcome.result or {}
    return "\n".join(result.get("stderrTail") or [])


def cli_stdout(outcome) -> str:
    for name in ("events.jsonl", "stdout.txt", "output.txt"):
        path = outcome.out_dir / name
        if path.exists():
            return path.read_text(errors="replace")
    return ""


def verdict(stderr: str, stdout: str, result: dict | None = None) -> tuple[str, str]:
    lines = [line.strip() for line in (stderr + "\n" + stdout).splitlines() if line.strip()]
    for line in lines:
        if MORE_REFUSALS.search(line):
            return "REJECTED", line
    found, line = classify(stderr, stdout, result)
    if found == "ACCEPTED" and line.startswith("status ") and lines:
        return found, lines[-1]  # hermes says why on stdout
    return found, line


@pytest.mark.parametrize("cli", list(VARIANTS))
def test_every_argv_the_relay_builds_gets_past_the_cli_parser(cli, tmp_path):
    real = real_binary(cli)
    version = version_of(cli, tmp_path / "version")
    patch = tmp_path / "overlay.yml"
    patch.write_text("- id: agent-default-model\n  config:\n    provider: p\n    model: m\n")
    brief = tmp_path / "brief.txt"
    brief.write_text("Say hello. (argument acceptance check; no model is reachable)\n")

    def one(index: int, variant: str, args: list[str]):
        root = tmp_path / f"v{index:02d}"
        log = root / "argv.log"
        shim(root / "bin", cli, real, log)
        env = clean_env(root, path_first=root / "bin")
        # A read-only run is confined: the shim's log is the one other place it may write.
        env["DELEGATE_CONFINE_WRITABLE"] = str(root)
        prepare_home(cli, Path(env["HOME"]))
        repo = one_commit_repo(root / "repo")
        args = [a.replace("{patch}", str(patch)) for a in args]
        outcome = run_relay(cli, ["--cd", str(repo), *args], root / "out", env, brief)
        return variant, outcome, recorded_argv(log)

    jobs = [(i, name, args) for i, (name, args) in enumerate(VARIANTS[cli])]
    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = list(pool.map(lambda job: one(*job), jobs))

    rows: list[tuple[str, ...]] = []
    failures: list[str] = []
    for variant, outcome, argv in runs:
        result = outcome.result
        if result is None:
            found, line = "RELAY-REFUSED", (outcome.stderr.strip().splitlines() or ["-"])[-1]
        else:
            found, line = verdict(cli_stderr(outcome), cli_stdout(outcome), result)
        line = line.replace(str(tmp_path), "<tmp>")
        rows.append((cli, version, variant, _short(argv, tmp_path), f"{found} (exit {outcome.code})", line))  # fmt: skip
        if found != "ACCEPTED" or argv is None:
            failures.append(f"{variant}: {found} ({line})\n{outcome.report()}")

    control = subprocess.run(
        [cli, *CONTROL[cli]],
        env=clean_env(tmp_path / "control"),
        cwd=one_commit_repo(tmp_path / "control-repo"),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=RUN_LIMIT_S,
    )
    found, line = verdict(control.stderr, control.stdout)
    rows.append((cli, version, "control: made-up flag", " ".join(CONTROL[cli]),
                 f"{found} (exit {control.returncode})", line))  # fmt: skip
    if found != "REJECTED":
        failures.append(
            f"control run was not refused by the parser: exit {control.returncode}\n"
            f"stderr: {control.stderr[-2000:]}\nstdout: {control.stdout[-2000:]}"
        )

    lines = table_lines(rows)
    print(f"\n\n{cli} {version}: relay argument acceptance (no login, no model)")
    print("\n".join(lines))
    write_table_section(cli, lines)
    assert not failures, "\n\n".join(failures)


# --- an offline edit against the scripted model server -------------------------------------

#: The task dsh is given names the brief's file; the model server starts its script on it.
DSH_TASK = "Read the task brief at"


def offline_setup(cli: str, root: Path, port: int) -> tuple[dict, list[str]]:
    """(environment, relay flags) that point `cli` at the scripted server."""
    env = clean_env(root)
    home = Path(env["HOME"])
    base = f"http://127.0.0.1:{port}/v1"
    provider = {"npm": "@ai-sdk/openai-compatible", "name": "Mock",
                "options": {"baseURL": base, "apiKey": "x"},
                "models": {"mock-model": {"name": "Mock model"}}}  # fmt: skip
    prepare_home(cli, home, {"model": "mock/mock-model", "provider": {"mock": provider}})
    if cli == "kilo":
        return env, ["--model", "mock/mock-model"]
    if cli == "hermes":
        (home / ".hermes" / "config.yaml").write_text(
            f"model:\n  provider: custom\n  base_url: {base}\n  api_key: x\n  default: mock-model\n"
        )
        return env, []
    # Not under /tmp, which a confined run sees as a private folder of its own.
    overlay = home / ".dsh" / "local.yml"
    overlay.write_text(
        "- id: llm-pi-ai\n  config:\n    providers:\n      local-mock:\n"
        f"        api: openai-completions\n        baseURL: {base}\n"
        "        apiKeyEnv: LOCAL_API_KEY\n        models:\n          - id: mock-model\n"
        "- id: agent-default-model\n  config:\n    provider: local-mock\n    model: mock-model\n"
    )
    env["LOCAL_API_KEY"] = "x"
    return env, ["--patch", str(overlay)]


@pytest.mark.parametrize("mode", ["write", "confined-write", "read-only"])
@pytest.mark.parametrize("cli", list(VARIANTS))
def test_offline_edit_through_the_relay(cli, mode, tmp_path):
    """A write run, a write run under `--confine` and a read-only run (always confined)."""
    read_only = mode == "read-only"
    real_binary(cli)
    repo = one_commit_repo(tmp_path / "repo")
    target = repo / "hello.txt"
    options = ("--marker", DSH_TASK) if cli == "dsh" else ()
    with model_server(tmp_path / "requests.jsonl", target, *options) as server:
        env, flags = offline_setup(cli, tmp_path / "cli", server.port)
        brief = tmp_path / "brief.txt"
        brief.write_text(BRIEF)
        mode_flags = {"write": [], "confined-write": ["--confine"], "read-only": ["--read-only"]}
        args = ["--cd", str(repo), *flags, *mode_flags[mode]]
        outcome = run_relay(cli, args, tmp_path / "out", env, brief)
        kinds = server.kinds()
        context = f"{outcome.report()}\n--- model server requests\n{server.summary()}"
    result = outcome.result
    assert result is not None, context
    assert "tool" in kinds and "final" in kinds, context
    assert (result["status"], outcome.code) == ("completed", 0), context
    assert FINAL_TEXT in result["finalMessage"], context
    assert result["sessionId"], context
    if cli != "hermes":  # hermes reports no token counts on this surface
        assert result["usage"], context
    if read_only:
        assert not target.exists(), context
        assert (result["readOnlyViolation"], result["touchedFiles"]) == (False, []), context
        assert result["readOnlyEnforced"] == "bwrap", context
    else:
        assert result.get("confined") == ("bwrap" if mode == "confined-write" else None), context
        assert target.read_text() == "hi\n", context
        assert "?? hello.txt" in result["touchedFiles"], context
    print(
        f"\n{cli} {mode}: status {result['status']}, "
        f"sessionId {result['sessionId']}, touchedFiles {result['touchedFiles']}, "
        f"readOnlyViolation {result.get('readOnlyViolation')!r}, "
        f"readOnlyEnforced {result.get('readOnlyEnforced')!r}, usage {result.get('usage')}, "
        f"model calls {kinds}"
    )
