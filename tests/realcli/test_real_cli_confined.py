"""Confined relay runs against the real CLIs (opt-in: `-m realcli`).

Each CLI found on PATH (codex, claude, grok, gemini, qwen, opencode) is started
through our relay under bubblewrap, with a fresh HOME that holds only its own
state folder and a config that points it at the scripted model server on
127.0.0.1 (modelserver.py). The server asks for one write of `hello.txt` in
the work tree, then answers with a final text. The runs, for each CLI:

* a write run with `--confine`, the write made with the CLI's file-writing tool
  (codex has only its shell tool), and one made with its shell tool for the
  CLIs that offer both (claude, grok, opencode): the file exists afterwards,
  owned by the user who started the relay, and the result says
  `"confined": "bwrap"`, status completed, the final text;
* a read-only run: the CLI refuses the write (its words are checked), the file
  does not exist, and the result says `"readOnlyEnforced": "bwrap"`,
  `"readOnlyViolation": false`.

Each runs as root and as a normal user (the account NORMAL_USER, started with
`setpriv`); the normal-user half is skipped when this process is not root or
the account is missing. Claude Code's write runs need `socat` on PATH, as its
relay says. Run with

    python -m pytest -m realcli tests/realcli/test_real_cli_confined.py -s -n 0

The table of outcomes is printed at the end (`-s` shows it) and, when
DELEGATE_REALCLI_TABLE names a file, written there as Markdown.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from conftest import ORIGINAL_PATH

from realcli.test_real_cli import (
    FINAL_TEXT,
    MARKER,
    RELAY_TIMEOUT,
    RUN_LIMIT_S,
    RelayOutcome,
    clean_env,
    model_server,
    one_commit_repo,
    real_binary,
    relay_command,
    version_of,
    write_table_section,
)

pytestmark = pytest.mark.realcli

CLIS = ("codex", "claude", "grok", "gemini", "qwen", "opencode")
NORMAL_USER = "tester"
TARGET = "hello.txt"
BRIEF = f"Create {TARGET} in the repository root containing the line `hi`. {MARKER}\n"
CONTENT = "hi\n"
#: The runs: a write run where the model takes the CLI's file-writing tool (its shell tool
#: when it has none), a write run through its shell tool (for the CLIs that offer both), and
#: a read-only run.
MODES = ("write", "shell-write", "read-only")
#: The tool the scripted model calls, per CLI and run. A read-only tool set offers no tool
#: that writes, and the server asks for `write_file` anyway.
WRITE_TOOL = {
    ("codex", "write"): "exec_command",
    ("codex", "read-only"): "exec_command",
    ("claude", "write"): "Write",
    ("claude", "shell-write"): "Bash",
    ("claude", "read-only"): "write_file",
    ("grok", "write"): "write",
    ("grok", "shell-write"): "run_terminal_command",
    ("grok", "read-only"): "write",
    ("gemini", "write"): "write_file",
    ("gemini", "read-only"): "write_file",
    ("qwen", "write"): "write_file",
    ("qwen", "read-only"): "write_file",
    ("opencode", "write"): "write",
    ("opencode", "shell-write"): "bash",
    ("opencode", "read-only"): "write_file",
}
RUNS = [(cli, mode) for cli in CLIS for mode in MODES if (cli, mode) in WRITE_TOOL]
#: How each CLI refuses the write in a read-only run, as the model is told ({target}: the
#: file's path). Grok's plan mode cancels the run instead (the relay reports it as failed,
#: with GROK_CANCEL in its error); the others refuse the call and go on to the final text.
READ_ONLY_REFUSAL = {
    "codex": "{target}: Read-only file system",
    "claude": "No such tool available: write_file",
    "gemini": "must be within the designated plans directory",
    "qwen": 'Qwen Code requires permission to use "write_file", but that permission was declined',
    "opencode": "Model tried to call unavailable tool 'write_file'",
    "grok": None,
}
GROK_CANCEL = "User cancelled the execution for tool `write`"
TABLE_HEAD = ("CLI", "version", "user", "run", "outcome", "what the run said")


# --- the fresh HOME of each CLI ----------------------------------------------------------


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def prepare_cli(cli: str, home: Path, port: int) -> tuple[dict[str, str], list[str]]:
    """(environment, relay flags) for `cli` with its state under `home`, on the scripted server.

    Each CLI's state folder exists, as it does for a CLI used before: the relay
    binds only existing folders writable.
    """
    url = f"http://127.0.0.1:{port}"
    if cli == "codex":
        _write(
            home / ".codex" / "config.toml",
            'model = "mock-model"\nmodel_provider = "mock"\n\n[model_providers.mock]\n'
            f'name = "mock"\nbase_url = "{url}/v1"\nenv_key = "MOCK_API_KEY"\n'
            'wire_api = "responses"\n',
        )
        return {"MOCK_API_KEY": "x"}, []
    if cli == "claude":
        (home / ".claude").mkdir(parents=True)
        return {"ANTHROPIC_API_KEY": "sk-ant-scripted", "ANTHROPIC_BASE_URL": url}, []
    if cli == "grok":
        _write(
            home / ".grok" / "config.toml",
            '[models]\ndefault = "mock"\n\n[model.mock]\nmodel = "mock-model"\n'
            f'base_url = "{url}/v1"\napi_key = "x"\napi_backend = "chat_completions"\n'
            "context_window = 128000\n",
        )
        return {}, []
    if cli == "gemini":
        # Naming the API key auth keeps GOOGLE_GEMINI_BASE_URL and passes the headless check.
        settings = {"security": {"auth": {"selectedType": "gemini-api-key"}}}
        _write(home / ".gemini" / "settings.json", json.dumps(settings))
        env = {"GEMINI_API_KEY": "x", "GOOGLE_GEMINI_BASE_URL": url}
        # A concrete model skips gemini's routing call.
        return env, ["--model", "gemini-2.5-flash", "--skip-trust"]
    if cli == "qwen":
        # Without this qwen runs a memory agent against the same endpoint after each turn.
        settings = {"memory": {"enableManagedAutoMemory": False}}
        _write(home / ".qwen" / "settings.json", json.dumps(settings))
        env = {"OPENAI_API_KEY": "x", "OPENAI_BASE_URL": f"{url}/v1", "OPENAI_MODEL": "mock-model"}
        return env, []
    if cli == "opencode":
        provider = {
            "npm": "@ai-sdk/openai-compatible",
            "name": "Mock",
            "options": {"baseURL": f"{url}/v1", "apiKey": "x"},
            "models": {"mock-model": {"name": "Mock model"}},
        }
        config = {"provider": {"mock": provider}}
        _write(home / ".config" / "opencode" / "opencode.json", json.dumps(config))
        for folder in (".local/share/opencode", ".local/state/opencode", ".cache/opencode"):
            (home / folder).mkdir(parents=True)
        return {}, ["--model", "mock/mock-model"]
    raise AssertionError(f"no set-up for {cli}")


# --- who runs the relay, and where -------------------------------------------------------


def needs_bwrap() -> None:
    if shutil.which("bwrap", path=ORIGINAL_PATH) is None:
        pytest.skip("`bwrap` is not on PATH: a confined run cannot start here")


def account_for(user: str) -> pwd.struct_passwd | None:
    """None for a run as this process's own user (root); the account for a normal user."""
    if user == "root":
        if os.geteuid() != 0:
            pytest.skip("the root half needs this test process to run as root")
        return None
    if os.geteuid() != 0:
        pytest.skip(f"the normal-user half starts the relay as {NORMAL_USER!r}: needs root")
    try:
        account = pwd.getpwnam(NORMAL_USER)
    except KeyError:
        pytest.skip(f"the normal-user half needs an account {NORMAL_USER!r}; there is none")
    if shutil.which("setpriv", path=ORIGINAL_PATH) is None:
        pytest.skip("the normal-user half needs `setpriv` (util-linux) to change user")
    return account


#: Where each run's folder (HOME, repository, run directory) is made: outside /tmp, as a
#: user's home is. A confined run gets a private /tmp of its own, with $TMPDIR pointing
#: there, and Codex sets up no sandbox helper for a CODEX_HOME under $TMPDIR (every shell
#: command then fails with `bwrap: execvp codex-linux-sandbox`); pytest's tmp_path is under
#: /tmp, and under a folder only root may enter.
WORK_BASE = "/var/tmp"


@pytest.fixture
def workspace(user):
    """(folder for the run, the account running it, or None for root); removed afterwards."""
    account = account_for(user)
    folder = Path(tempfile.mkdtemp(prefix="delegate-realcli-confined-", dir=WORK_BASE))
    try:
        if account is not None:
            os.chown(folder, account.pw_uid, account.pw_gid)
        yield folder / "ws", account
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def hand_over(path: Path, account: pwd.struct_passwd | None) -> None:
    """Give everything under `path` to `account` (nothing to do for root)."""
    if account is None:
        return
    os.lchown(path, account.pw_uid, account.pw_gid)
    for folder, dirs, files in os.walk(path):
        for name in dirs + files:
            os.lchown(os.path.join(folder, name), account.pw_uid, account.pw_gid)


def run_confined_relay(
    cli: str, args: list[str], ws: Path, env: dict, account: pwd.struct_passwd | None
) -> RelayOutcome:
    out = ws / "out"
    argv = relay_command(
        cli, "--brief", str(ws / "brief.txt"), "--out-dir", str(out),
        "--timeout", RELAY_TIMEOUT, *args,
    )  # fmt: skip
    if account is not None:
        argv = [
            "setpriv", f"--reuid={account.pw_uid}", f"--regid={account.pw_gid}",
            "--init-groups", *argv,
        ]  # fmt: skip
    done = subprocess.run(
        argv,
        env=env,
        cwd=ws,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=RUN_LIMIT_S,
    )
    return RelayOutcome(out, done)


# --- the table ---------------------------------------------------------------------------

_VERSIONS: dict[str, str] = {}


def cli_version(cli: str, root: Path) -> str:
    if cli not in _VERSIONS:
        _VERSIONS[cli] = version_of(cli, root)
    return _VERSIONS[cli]


@pytest.fixture(scope="module")
def table():
    rows: list[tuple[str, ...]] = []
    yield rows
    if not rows:
        return
    lines = ["| " + " | ".join(TABLE_HEAD) + " |", "|" + "---|" * len(TABLE_HEAD)]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows]
    print("\n\nConfined relay runs against the real CLIs\n" + "\n".join(lines))
    write_table_section("confined", lines)


def said(result: dict | None, written: bool, requests: list[dict]) -> str:
    """One line of what a run reported, for the table."""
    if result is None:
        return "no result.json"
    fields = [f"status {result.get('status')}", f"confined {result.get('confined')!r}"]
    if "readOnlyEnforced" in result:
        fields.append(f"readOnlyEnforced {result.get('readOnlyEnforced')!r}")
        fields.append(f"readOnlyViolation {result.get('readOnlyViolation')!r}")
    if result.get("confinedUnavailable"):
        fields.append(f"confinedUnavailable {result['confinedUnavailable']!r}")
    if result.get("error"):
        fields.append(f"error {' '.join(str(result['error']).split())[:160]!r}")
    fields.append(f"{TARGET} {'written' if written else 'absent'}")
    kinds = [e["kind"] + (f" {e['tool']}" if e.get("tool") else "") for e in requests]
    fields.append(f"model calls: {', '.join(kinds)}")
    return "; ".join(fields)


def _text_of(content) -> str:
    """A tool result's text: a string, a list of text blocks, or anything else as JSON."""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(
        isinstance(block, dict) and isinstance(block.get("text"), str) for block in content
    ):
        return "\n".join(block["text"] for block in content)
    return json.dumps(content)


def tool_feedback(requests: list[dict]) -> str:
    """What the CLI sent back to the model as the result of the scripted call."""
    for entry in requests:
        if entry["kind"] != "final":
            continue
        try:
            body = json.loads(entry["body"] or "{}")
        except ValueError:
            continue
        found = []
        for item in body.get("input") or []:  # Responses
            if isinstance(item, dict) and item.get("type") == "function_call_output":
                found.append(item.get("output"))
        for message in body.get("messages") or []:  # chat completions, Anthropic Messages
            if not isinstance(message, dict):
                continue
            if message.get("role") == "tool":
                found.append(message.get("content"))
            for block in message.get("content") if isinstance(message.get("content"), list) else []:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    found.append(block.get("content"))
        for turn in body.get("contents") or []:  # Gemini
            for part in turn.get("parts") or [] if isinstance(turn, dict) else []:
                if isinstance(part, dict) and "functionResponse" in part:
                    found.append(part["functionResponse"].get("response"))
        if found:
            return " ".join(_text_of(found[-1]).split())
    return ""


# --- the runs ----------------------------------------------------------------------------


def checks_for(
    cli: str, mode: str, outcome: RelayOutcome, requests: list[dict], target: Path, owner: int
) -> list[tuple[str, bool]]:
    """(what is expected, whether it holds) for one run: every line must hold."""
    result = outcome.result or {}
    kinds = [entry["kind"] for entry in requests]
    tools = [entry["tool"] for entry in requests if entry["kind"] == "tool"]
    expected_tool = WRITE_TOOL[(cli, mode)]
    checks = [
        ("result.json written", outcome.result is not None),
        (f"one scripted call, of {expected_tool}", tools == [expected_tool]),
        ('confined "bwrap"', result.get("confined") == "bwrap"),
    ]
    if mode != "read-only":
        written = target.exists()
        return [
            *checks,
            ("status completed, exit 0", result.get("status") == "completed" and outcome.code == 0),
            ("the tool result went back to the model", "final" in kinds),
            ("finalMessage is the final text", result.get("finalMessage") == FINAL_TEXT),
            (f"{TARGET} holds the content", written and target.read_text() == CONTENT),
            (f"{TARGET} belongs to uid {owner}", written and target.stat().st_uid == owner),
            (f"touchedFiles has ?? {TARGET}", f"?? {TARGET}" in (result.get("touchedFiles") or [])),
        ]
    checks += [
        ('readOnlyEnforced "bwrap"', result.get("readOnlyEnforced") == "bwrap"),
        ("readOnlyViolation false", result.get("readOnlyViolation") is False),
        (f"{TARGET} absent", not target.exists()),
    ]
    refusal = READ_ONLY_REFUSAL[cli]
    if refusal is None:
        return [
            *checks,
            ("status failed", result.get("status") == "failed"),
            ("the error names the cancelled write", GROK_CANCEL in str(result.get("error"))),
        ]
    refusal = refusal.format(target=target)
    return [
        *checks,
        ("status completed, exit 0", result.get("status") == "completed" and outcome.code == 0),
        (f"the CLI refused: {refusal}", refusal in tool_feedback(requests)),
        ("finalMessage is the final text", result.get("finalMessage") == FINAL_TEXT),
    ]


@pytest.mark.parametrize("user", ["root", "normal-user"])
@pytest.mark.parametrize(("cli", "mode"), RUNS)
def test_confined_relay_run_starts_and_answers(cli, mode, user, tmp_path, workspace, table):
    real_binary(cli)
    needs_bwrap()
    if cli == "claude" and mode != "read-only" and not shutil.which("socat", path=ORIGINAL_PATH):
        pytest.skip("Claude Code's write run needs `socat` on PATH for its shell sandbox")
    ws, account = workspace
    version = cli_version(cli, tmp_path / "version")
    ws.mkdir()
    repo = one_commit_repo(ws / "repo")
    target = repo / TARGET
    (ws / "brief.txt").write_text(BRIEF)
    via = ("--via", "shell") if mode == "shell-write" else ()
    with model_server(tmp_path / "requests.jsonl", target, *via) as server:
        env = clean_env(ws)
        env.pop("XDG_STATE_HOME", None)  # the relay's run store lives under the fresh HOME
        env["PYTHONPYCACHEPREFIX"] = str(ws / "pycache")
        cli_env, flags = prepare_cli(cli, Path(env["HOME"]), server.port)
        env.update(cli_env)
        hand_over(ws, account)
        args = ["--cd", str(repo), *flags, "--read-only" if mode == "read-only" else "--confine"]
        outcome = run_confined_relay(cli, args, ws, env, account)
        requests = server.requests()
    owner = 0 if account is None else account.pw_uid
    checks = checks_for(cli, mode, outcome, requests, target, owner)
    failed = [label for label, holds in checks if not holds]
    feedback = tool_feedback(requests)
    summary = said(outcome.result, target.exists(), requests)
    if failed:
        summary += f"; tool result {feedback[:200]!r}; failed: {'; '.join(failed)}"
    summary = summary.replace(str(ws), "<ws>")
    table.append((cli, version, user, mode, "FAIL" if failed else "PASS", summary))
    calls = "\n".join(
        f"{e['method']} {e['path']} -> {e['kind']} {e.get('tool', '')}" for e in requests
    )
    assert not failed, (
        f"{cli} {mode} as {user}: {failed}\n{outcome.report()}\n"
        f"--- the tool's result, as the model got it\n{feedback}\n--- model calls\n{calls}"
    )
