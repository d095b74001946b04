"""The fake implementer CLI as a pytest helper: install it, script it, read its calls."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import time
from pathlib import Path

FAKE = Path(__file__).parent / "fakecli" / "fake_cli.py"
ROOT = Path(__file__).resolve().parent.parent
#: The interpreter the fakes run on, by its real path: a confined run sees the file system but
#: its /tmp, so a checkout (and its venv) under /tmp would be out of its sight.
SHIM_PYTHON = os.path.realpath(sys.executable)


class Fake:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.bin = root / "bin"
        self.calls_dir = root / "calls"
        self.bin.mkdir(parents=True, exist_ok=True)
        self.calls_dir.mkdir(exist_ok=True)
        self.scenario_path = self.bin / "scenario.json"
        self.script({})

    def install(self, name: str) -> Path:
        shim = self.bin / name
        # The fake's code beside its shims: a confined run sees the binary's own folder.
        (self.bin / FAKE.name).write_bytes(FAKE.read_bytes())
        shim.write_text(
            f"#!{SHIM_PYTHON} -S\n"
            "import sys\n"
            f"sys.argv[1:1] = [{str(self.scenario_path)!r}]\n"
            f"sys.path.insert(0, {str(self.bin)!r})\n"
            "import fake_cli\n"
            "fake_cli.main()\n"
        )
        shim.chmod(0o755)
        if name == "claude":
            # Claude Code's write runs need socat beside bwrap (its shell sandbox);
            # the fake needs neither, so the machine's own socat does not decide.
            socat = self.bin / "socat"
            socat.write_text("#!/bin/sh\nexit 0\n")
            socat.chmod(0o755)
        return shim

    def script(self, scenario: dict) -> None:
        scenario = {"record_dir": str(self.calls_dir), **scenario}
        self.scenario_path.write_text(json.dumps(scenario))

    def env(self, **extra: str) -> dict[str, str]:
        env = {**os.environ, "PATH": f"{self.bin}{os.pathsep}{os.environ.get('PATH', '')}"}
        # A confined run may write what the user adds; the fake records its calls there.
        writable = [str(self.calls_dir), os.environ.get("DELEGATE_CONFINE_WRITABLE", "")]
        env["DELEGATE_CONFINE_WRITABLE"] = os.pathsep.join(w for w in writable if w)
        env.update(extra)
        return env

    def calls(self, kind: str | None = None) -> list[dict]:
        if not self.calls_dir.exists():
            return []
        records = sorted(self.calls_dir.glob("*.rec"))
        found = [ast.literal_eval(p.read_text()) for p in records]
        return [c for c in found if kind is None or c["kind"] == kind]

    def run_call(self) -> dict:
        calls = self.calls("run")
        assert len(calls) == 1, calls
        return calls[0]


def relay_script(key: str) -> Path:
    return ROOT / "skills" / f"{key}-delegate" / "scripts" / "relay.py"


def relay_argv(key: str, *args: str) -> list[str]:
    """How tests start a relay: this interpreter with -S.

    The skill script runs the core bundled beside it, standard library only,
    so site-packages (and whatever .pth files the machine keeps there, which
    can cost a tenth of a second per start) are skipped. test_entry_scripts
    covers the script running with site-packages, test_lone_skills with -I.
    """
    return [sys.executable, "-S", str(relay_script(key)), *args]


class RelayRun:
    def __init__(self, done: subprocess.CompletedProcess, out_dir: Path) -> None:
        self.code = done.returncode
        self.out = done.stdout
        self.err = done.stderr
        self.out_dir = out_dir

    @property
    def result(self) -> dict:
        return json.loads((self.out_dir / "result.json").read_text())

    @property
    def has_result(self) -> bool:
        return (self.out_dir / "result.json").exists()

    def __repr__(self) -> str:
        return f"RelayRun(code={self.code}, err={self.err[-2000:]!r}, out={self.out[-2000:]!r})"


def relay(
    key: str, *args: str, env: dict, out_dir: Path, stdin: str | None = None, timeout: float = 120
) -> RelayRun:
    feed = {"input": stdin} if stdin is not None else {"stdin": subprocess.DEVNULL}
    done = subprocess.run(
        relay_argv(key, *args),
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        **feed,
    )
    return RelayRun(done, out_dir)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


def wait_for(condition, timeout: float = 30.0, interval: float = 0.02) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(interval)
