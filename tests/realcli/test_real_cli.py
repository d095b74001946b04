"""The gemini, qwen and auggie relays against the real CLIs (opt-in: `-m realcli`).

These tests start the real `gemini`, `qwen` and `auggie` found on PATH, each
with a HOME of its own and no API key from this machine, and skip a CLI that
is not installed. The default run leaves them out (`-m "not realcli"` in
pyproject.toml); run them with

    python -m pytest -m realcli tests/realcli -s -n 0

Two checks:

* Argument acceptance. With no login and no model in reach, every command line
  a relay builds (each dial and flag, the read-only route, both resume forms)
  must get past the CLI's argument parser: the run then fails on a login,
  key, network or session error, never on "Unknown arguments". A made-up flag
  given to the CLI directly proves the same classifier sees a parser refusal.
  The table is printed (`-s` shows it) and, when DELEGATE_REALCLI_TABLE names
  a file, written there as Markdown.
* An offline edit. gemini and qwen talk to a scripted model server on
  127.0.0.1 (modelserver.py) that asks for one write_file call and then
  answers with a final text; a write run must create the file, a read-only
  run must leave it absent.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import select
import shutil
import subprocess
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

pytestmark = pytest.mark.realcli

HERE = Path(__file__).resolve().parent
MODEL_SERVER = HERE / "modelserver.py"
TABLE_ENV = "DELEGATE_REALCLI_TABLE"
#: Inherited by every child so the suite's process sweep can find it (see tests/conftest.py).
PASS_THROUGH = ("XDG_STATE_HOME", "DELEGATE_TESTS_PROCESS_TAG")
#: The relay's own watchdog, and the test's limit on one relay run.
RELAY_TIMEOUT = "90s"
RUN_LIMIT_S = 180
SESSION = str(uuid.UUID("0a1b2c3d-1111-4222-8333-444455556666"))

#: What an argument parser prints when it refuses a command line:
#: yargs (gemini, qwen) and commander (auggie).
PARSER_REFUSALS = re.compile(
    r"Unknown arguments?:|Invalid values?:|Not enough arguments|Missing required argument"
    r"|Arguments .+ are mutually exclusive|Cannot use both"
    r"|unknown option|error: option|error: unknown command|error: too many arguments"
    r"|error: missing required argument"
)
#: Lines that say why an accepted command line still failed (no login, no key, ...).
REASONS = re.compile(
    r"auth|sign in|log ?in|api key|session|ECONNREFUSED|connection|fetch failed|not trusted",
    re.IGNORECASE,
)
#: Lines every run of a CLI prints, which never decide anything.
NOISE = re.compile(r"^(Ripgrep |Approval mode overridden|Warning: )")

#: (variant, relay arguments) per CLI; {extra} is an existing directory outside --cd.
VARIANTS: dict[str, list[tuple[str, list[str]]]] = {
    "gemini": [
        ("default", []),
        ("read-only", ["--read-only"]),
        ("model", ["--model", "x"]),
        ("approval yolo", ["--approval-mode", "yolo"]),
        ("approval auto_edit", ["--approval-mode", "auto_edit"]),
        ("approval default", ["--approval-mode", "default"]),
        ("add-dir", ["--add-dir", "{extra}"]),
        ("skip-trust", ["--skip-trust"]),
        # gemini checks auth before it looks for docker, so --sandbox parses and
        # then fails on the missing login like every other variant.
        ("sandbox", ["--sandbox"]),
        ("session", ["--session", SESSION]),
        ("resume-last", ["--resume-last"]),
    ],
    "qwen": [
        ("default", []),
        ("read-only", ["--read-only"]),
        ("model", ["--model", "x"]),
        ("approval yolo", ["--approval-mode", "yolo"]),
        ("approval auto", ["--approval-mode", "auto"]),
        ("approval default", ["--approval-mode", "default"]),
        ("add-dir", ["--add-dir", "{extra}"]),
        ("openai-base-url", ["--openai-base-url", "http://127.0.0.1:9/v1"]),
        ("session", ["--session", SESSION]),
        ("resume-last", ["--resume-last"]),
    ],
    "auggie": [
        ("default", []),
        ("read-only", ["--read-only"]),
        ("model", ["--model", "x"]),
        ("max-turns", ["--max-turns", "3"]),
        ("permission", ["--permission", "launch-process:deny"]),
        ("session", ["--session", SESSION]),
        ("resume-last", ["--resume-last"]),
    ],
}
#: The CLI run directly with a flag that does not exist: its parser must refuse it.
CONTROL = {
    "gemini": ["--no-such-flag-xyz", "-p", "hi"],
    "qwen": ["--no-such-flag-xyz", "-p", "hi"],
    "auggie": ["--no-such-flag-xyz", "--print", "hi"],
}


def real_binary(cli: str) -> str:
    from conftest import ORIGINAL_PATH

    found = shutil.which(cli, path=ORIGINAL_PATH)
    if found is None:
        pytest.skip(f"`{cli}` is not on PATH (put the CLI's bin directory first on PATH)")
    return found


# --- environments, repositories and runs -------------------------------------------------


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    )
    return done.stdout.strip()


def one_commit_repo(path: Path) -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    (path / "README.md").write_text("scratch repository for a real-CLI relay test\n")
    git(path, "add", "-A")
    git(
        path,
        "-c", "user.name=test", "-c", "user.email=test@example.invalid",
        "-c", "commit.gpgsign=false", "commit", "-q", "-m", "initial",
    )  # fmt: skip
    return path


def shim(bin_dir: Path, cli: str, real: str, log: Path) -> None:
    """A `cli` first on PATH that records its argv in `log`, then runs the real one."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    script = bin_dir / cli
    script.write_text(
        "#!/bin/sh\n"
        f"{{ for a in \"$@\"; do printf '%s\\037' \"$a\"; done; printf '\\036'; }} >> '{log}'\n"
        f"exec '{real}' \"$@\"\n"
    )
    script.chmod(0o755)


def recorded_argv(log: Path) -> list[str] | None:
    """The last argv the shim saw that was not the relay's `--version` preflight."""
    if not log.exists():
        return None
    records = [r for r in log.read_text().split("\036") if r]
    calls = [r.split("\037")[:-1] for r in records]
    calls = [c for c in calls if c != ["--version"]]
    return calls[-1] if calls else None


def clean_env(root: Path, path_first: Path | None = None) -> dict[str, str]:
    """A minimal environment under `root`: own HOME and TMPDIR, no keys from this machine."""
    home = root / "home"
    tmp = root / "tmp"
    home.mkdir(parents=True, exist_ok=True)
    tmp.mkdir(parents=True, exist_ok=True)
    from conftest import ORIGINAL_PATH

    path = ORIGINAL_PATH or "/usr/bin:/bin"
    env = {
        "PATH": f"{path_first}:{path}" if path_first else path,
        "HOME": str(home),
        "TMPDIR": str(tmp),
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "NO_COLOR": "1",
    }
    env.update({name: os.environ[name] for name in PASS_THROUGH if name in os.environ})
    return env


def relay_command(cli: str, *args: str) -> list[str]:
    """The relay as the orchestrator starts it, from this checkout's sources."""
    return [sys.executable, "-m", "delegate_skills.skillscripts.relay", cli, *args]


class RelayOutcome:
    def __init__(self, out_dir: Path, done: subprocess.CompletedProcess) -> None:
        self.out_dir = out_dir
        self.code = done.returncode
        self.stdout = done.stdout
        self.stderr = done.stderr

    def _read(self, name: str) -> str:
        path = self.out_dir / name
        return path.read_text(errors="replace") if path.exists() else ""

    @property
    def result(self) -> dict | None:
        text = self._read("result.json")
        return json.loads(text) if text else None

    @property
    def cli_stderr(self) -> str:
        return self._read("stderr.txt")

    @property
    def events(self) -> str:
        return self._read("events.jsonl")

    def report(self) -> str:
        """Everything a failed assertion needs to be read without rerunning."""
        return (
            f"relay exit {self.code}\n--- relay stderr\n{self.stderr[-3000:]}\n"
            f"--- result.json\n{self._read('result.json')}\n"
            f"--- stderr.txt\n{self.cli_stderr[-3000:]}\n--- events.jsonl (tail)\n"
            f"{self.events[-3000:]}"
        )


def run_relay(cli: str, args: list[str], out_dir: Path, env: dict, brief: Path) -> RelayOutcome:
    argv = relay_command(
        cli, "--brief", str(brief), "--out-dir", str(out_dir), "--timeout", RELAY_TIMEOUT, *args
    )
    done = subprocess.run(
        argv,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=RUN_LIMIT_S,
    )
    return RelayOutcome(out_dir, done)


# --- the classifier -----------------------------------------------------------------------


def _event_errors(events: str) -> list[str]:
    """Error messages the CLI put in its stdout events (qwen reports no-auth there)."""
    found = []
    for line in events.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        error = event.get("error") if isinstance(event, dict) else None
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            found.append(error["message"])
        elif isinstance(error, str):
            found.append(error)
    return found


def classify(stderr: str, stdout: str = "", result: dict | None = None) -> tuple[str, str]:
    """(REJECTED or ACCEPTED, the deciding line) for one CLI run.

    REJECTED when the CLI's argument parser refused the command line; anything
    else (no login, no key, no network, no such session, the relay's watchdog)
    means the arguments were accepted.
    """
    lines = [line.strip() for line in (stderr + "\n" + stdout).splitlines() if line.strip()]
    for line in lines:
        if PARSER_REFUSALS.search(line):
            return "REJECTED", line
    if result is not None and result.get("status") == "timeout":
        return "ACCEPTED", f"relay watchdog: {result.get('error') or 'timeout'}"
    errs = [line.strip() for line in stderr.splitlines() if line.strip()]
    errs = [line for line in errs if not NOISE.match(line)]
    candidates = errs + _event_errors(stdout)
    # The last reason is the error that ended the run (gemini warns "No previous
    # sessions found" and then stops on the missing login).
    for line in reversed(candidates):
        if REASONS.search(line):
            return "ACCEPTED", line
    if candidates:
        return "ACCEPTED", candidates[-1]
    if result is not None:
        return "ACCEPTED", f"status {result.get('status')}: {result.get('error') or '-'}"
    return "ACCEPTED", "(no output)"


# --- the table ----------------------------------------------------------------------------


def _cell(text: str, limit: int = 400) -> str:
    text = " ".join(text.split())
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return text.replace("|", "\\|")


def table_lines(rows: list[tuple[str, ...]]) -> list[str]:
    head = ("CLI", "version", "variant", "argv tail", "outcome", "deciding line")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return lines


def write_table_section(cli: str, lines: list[str]) -> None:
    """Put this CLI's section into the Markdown file named by DELEGATE_REALCLI_TABLE.

    Each CLI owns the part between its two markers, so CLIs tested in any
    order, or by parallel workers (under a lock), end up in one file, and a
    rerun replaces its own section.
    """
    target = os.environ.get(TABLE_ENV)
    if not target:
        return
    path = Path(target)
    path.parent.mkdir(parents=True, exist_ok=True)
    begin, end = f"<!-- realcli:{cli} -->", f"<!-- /realcli:{cli} -->"
    section = "\n".join([begin, f"### {cli}", "", *lines, end])
    with open(path, "a+", encoding="utf-8") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        handle.seek(0)
        text = handle.read()
        if not text.strip():
            text = "# Relay argument acceptance against the real CLIs\n"
        pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.DOTALL)
        if pattern.search(text):
            text = pattern.sub(lambda _match: section, text)
        else:
            text = text.rstrip("\n") + "\n\n" + section + "\n"
        handle.seek(0)
        handle.truncate()
        handle.write(text)


def version_of(cli: str, root: Path) -> str:
    done = subprocess.run(
        [cli, "--version"],
        env=clean_env(root),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = done.stdout.strip().splitlines()
    return lines[0] if lines else f"(exit {done.returncode})"


def _short(argv: list[str] | None, root: Path) -> str:
    if argv is None:
        return "(the CLI never started)"
    return " ".join(argv).replace(str(root), "<tmp>")


# --- 1. argument acceptance ---------------------------------------------------------------


@pytest.mark.parametrize("cli", list(VARIANTS))
def test_every_argv_the_relay_builds_gets_past_the_cli_parser(cli, tmp_path):
    real = real_binary(cli)
    version = version_of(cli, tmp_path / "version")
    extra = tmp_path / "extra-dir"
    extra.mkdir()
    brief = tmp_path / "brief.txt"
    brief.write_text("Say hello. (argument acceptance check; no model is reachable)\n")

    def one(index: int, variant: str, args: list[str]):
        root = tmp_path / f"v{index:02d}"
        log = root / "argv.log"
        shim(root / "bin", cli, real, log)
        env = clean_env(root, path_first=root / "bin")
        repo = one_commit_repo(root / "repo")
        args = [a.replace("{extra}", str(extra)) for a in args]
        outcome = run_relay(cli, ["--cd", str(repo), *args], root / "out", env, brief)
        return variant, outcome, recorded_argv(log)

    jobs = [(i, name, args) for i, (name, args) in enumerate(VARIANTS[cli])]
    # Two at a time: the relay gives `<cli> --version` 10 s, and gemini's takes
    # several seconds on a busy two-core machine.
    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = list(pool.map(lambda job: one(*job), jobs))

    rows: list[tuple[str, ...]] = []
    failures: list[str] = []
    for variant, outcome, argv in runs:
        result = outcome.result
        if result is None:
            verdict, line = "RELAY-REFUSED", outcome.stderr.strip().splitlines()[-1:] or ["-"]
            line = line[0]
        else:
            verdict, line = classify(outcome.cli_stderr, outcome.events, result)
        shown = f"{verdict} (exit {outcome.code})"
        line = line.replace(str(tmp_path), "<tmp>")
        rows.append((cli, version, variant, _short(argv, tmp_path), shown, line))
        if verdict != "ACCEPTED" or argv is None:
            failures.append(f"{variant}: {verdict} ({line})\n{outcome.report()}")

    # The control: the same classifier must see the parser refuse a made-up flag.
    control = subprocess.run(
        [cli, *CONTROL[cli]],
        env=clean_env(tmp_path / "control"),
        cwd=one_commit_repo(tmp_path / "control-repo"),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=RUN_LIMIT_S,
    )
    verdict, line = classify(control.stderr, control.stdout)
    shown = f"{verdict} (exit {control.returncode})"
    rows.append((cli, version, "control: made-up flag", " ".join(CONTROL[cli]), shown, line))
    if verdict != "REJECTED":
        failures.append(
            f"control run was not refused by the parser: exit {control.returncode}\n"
            f"stderr: {control.stderr[-2000:]}\nstdout: {control.stdout[-2000:]}"
        )

    lines = table_lines(rows)
    print(f"\n\n{cli} {version}: relay argument acceptance (no login, no model)")
    print("\n".join(lines))
    write_table_section(cli, lines)
    assert not failures, "\n\n".join(failures)


# --- 2. an offline edit against a scripted model server -----------------------------------

MARKER = "[realcli scripted edit]"
FINAL_TEXT = "Done: hello.txt now says hi."
BRIEF = f"Create hello.txt in the repository root containing the line `hi`. {MARKER}\n"


class ModelServer:
    def __init__(self, proc: subprocess.Popen, port: int, log: Path) -> None:
        self.proc = proc
        self.port = port
        self.log = log

    def requests(self) -> list[dict]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines() if line]

    def kinds(self) -> list[str]:
        return [entry["kind"] for entry in self.requests()]

    def summary(self) -> str:
        return "\n".join(
            f"{e['method']} {e['path']} -> {e['kind']}; tools offered: {offered_tools(e['body'])}"
            for e in self.requests()
        )


def offered_tools(body: str) -> list[str]:
    """The tool names a Gemini or OpenAI request offered the model."""
    try:
        request = json.loads(body or "{}")
    except ValueError:
        return []
    names = []
    for group in request.get("tools") or [] if isinstance(request, dict) else []:
        if not isinstance(group, dict):
            continue
        for declaration in group.get("functionDeclarations") or []:  # Gemini
            names.append(str(declaration.get("name")))
        if isinstance(group.get("function"), dict):  # OpenAI
            names.append(str(group["function"].get("name")))
    return sorted(names)


@contextlib.contextmanager
def model_server(log: Path, target: Path, *options: str):
    """The scripted server as a child process on a free port, killed on leaving.

    `options` are more modelserver.py arguments (`--via shell`).
    """
    proc = subprocess.Popen(
        [
            sys.executable, str(MODEL_SERVER), "--log", str(log), "--target", str(target),
            "--marker", MARKER, "--final", FINAL_TEXT, "--lifetime", "900", *options,
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        line = ""
        while not line and time.monotonic() < deadline:
            ready, _, _ = select.select([proc.stdout], [], [], 0.5)
            if ready:
                line = proc.stdout.readline()
            if proc.poll() is not None and not line:
                break
        match = re.fullmatch(r"PORT (\d+)\s*", line)
        assert match, f"the model server did not start (said {line!r}, exit {proc.poll()})"
        yield ModelServer(proc, int(match.group(1)), log)
    finally:
        proc.kill()
        proc.wait(timeout=30)
        if proc.stdout:
            proc.stdout.close()


@pytest.fixture
def scripted(cli, tmp_path):
    """A one-commit repo, and a model server scripted to write <repo>/hello.txt."""
    real_binary(cli)
    repo = one_commit_repo(tmp_path / "repo")
    with model_server(tmp_path / "requests.jsonl", repo / "hello.txt") as server:
        yield repo, server


def tool_outcomes(events: str) -> list[tuple[bool, str]]:
    """(ok, text) for every tool result in a gemini or qwen event stream."""
    found = []
    for line in events.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if not isinstance(event, dict):
            continue
        if event.get("type") == "tool_result":  # gemini
            error = event.get("error") or {}
            text = error.get("message") if isinstance(error, dict) else None
            found.append(
                (
                    event.get("status") == "success",
                    text or str(event.get("output") or event.get("status")),
                )
            )
        message = event.get("message") if event.get("type") == "user" else None
        blocks = message.get("content") if isinstance(message, dict) else None
        for block in blocks if isinstance(blocks, list) else []:  # qwen
            if isinstance(block, dict) and block.get("type") == "tool_result":
                content = block.get("content")
                if isinstance(content, list):
                    content = " ".join(
                        str(part.get("text", "")) for part in content if isinstance(part, dict)
                    )
                found.append((block.get("is_error") is not True, str(content)))
    return found


def offline_setup(cli: str, root: Path, port: int) -> tuple[dict, list[str]]:
    """(environment, relay flags) that point `cli` at the scripted server."""
    env = clean_env(root)
    if cli == "gemini":
        gemini_home = root / "gemini-home"
        settings = gemini_home / ".gemini" / "settings.json"
        settings.parent.mkdir(parents=True)
        # With GOOGLE_GEMINI_BASE_URL alone gemini picks auth "gateway", which its
        # headless check refuses ("Invalid auth method selected."); naming the API
        # key auth in settings keeps the base URL and passes the check.
        settings.write_text(json.dumps({"security": {"auth": {"selectedType": "gemini-api-key"}}}))
        env.update(
            GEMINI_CLI_HOME=str(gemini_home),
            GEMINI_API_KEY="x",
            GOOGLE_GEMINI_BASE_URL=f"http://127.0.0.1:{port}",
        )
        # A concrete model skips gemini's routing call.
        return env, ["--model", "gemini-2.5-flash", "--skip-trust"]
    qwen_home = root / "qwen-home"
    qwen_home.mkdir()
    # Without this qwen runs a memory agent against the same endpoint after each turn.
    (qwen_home / "settings.json").write_text(
        json.dumps({"memory": {"enableManagedAutoMemory": False}})
    )
    env.update(
        QWEN_HOME=str(qwen_home),
        OPENAI_API_KEY="x",
        OPENAI_BASE_URL=f"http://127.0.0.1:{port}/v1",
        OPENAI_MODEL="mock-model",
    )
    return env, []


@pytest.mark.parametrize("read_only", [False, True], ids=["write", "read-only"])
@pytest.mark.parametrize("cli", ["gemini", "qwen"])
def test_offline_edit_through_the_relay(cli, read_only, tmp_path, scripted):
    repo, server = scripted
    target = repo / "hello.txt"
    env, flags = offline_setup(cli, tmp_path / "cli", server.port)
    brief = tmp_path / "brief.txt"
    brief.write_text(BRIEF)
    args = ["--cd", str(repo), *flags, *(["--read-only"] if read_only else [])]
    outcome = run_relay(cli, args, tmp_path / "out", env, brief)
    result = outcome.result
    context = f"{outcome.report()}\n--- model server requests\n{server.summary()}"

    assert result is not None, context
    assert "tool" in server.kinds(), f"the CLI never made the scripted call\n{context}"
    assert "final" in server.kinds(), f"no tool result came back to the model\n{context}"
    assert result["status"] == "completed", context
    assert outcome.code == 0, context
    assert result["finalMessage"] == FINAL_TEXT, context
    assert result["readOnly"] is read_only, context
    assert result["sessionId"], context
    assert result["usage"], context
    tools = tool_outcomes(outcome.events)
    assert len(tools) == 1, context
    if read_only:
        assert result["approvalMode"] == "plan", context
        assert tools[0][0] is False, f"the CLI reports the write as done\n{context}"
        assert not target.exists(), context
        assert result["readOnlyViolation"] is False, context
    else:
        assert tools[0][0] is True, context
        assert target.read_text() == "hi\n", context
        assert "?? hello.txt" in result["touchedFiles"], context
    print(
        f"\n{cli} {'read-only' if read_only else 'write'}: status {result['status']}, "
        f"approvalMode {result['approvalMode']}, touchedFiles {result['touchedFiles']}, "
        f"finalMessage {result['finalMessage']!r}, "
        f"readOnlyViolation {result.get('readOnlyViolation')!r}, "
        f"model calls {server.kinds()}, write_file result {tools[0]}".replace(
            str(tmp_path), "<tmp>"
        )
    )
