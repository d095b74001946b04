"""Helpers for relay tests: the adapters under test and how to run them."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest
from conftest import make_repo
from fakes import ROOT, Fake, RelayRun, relay, relay_argv, wait_for

from delegate_skills import registry
from delegate_skills.relay.main import load_adapter

#: Every implementer that has a relay adapter: new adapters join every matrix.
#: (Found by file, so one adapter that fails to import cannot hide the others;
#: test_every_adapter_loads catches that failure.)
RELAYS = [key for key in registry.KEYS if (ROOT / "relays" / f"{key}.py").is_file()]
#: Arguments a relay needs for a plain fresh run beyond --brief/--cd/--out-dir.
EXTRA_ARGS = {"opencode": ["--model", "fake/model"]}
BRIEF = "smoke brief: run until killed.\n"
SHORT_GRACE = {"DELEGATE_RELAY_KILL_GRACE": "0.5"}


def binary(key: str) -> str:
    return registry.BY_KEY[key].binary


class Bench:
    """One relay under test: a work repo, a brief, an out dir and a fake CLI."""

    def __init__(self, tmp_path: Path, key: str, repo: bool = True) -> None:
        self.key = key
        self.tmp = tmp_path
        self.work = make_repo(tmp_path / "work") if repo else tmp_path / "work"
        self.work.mkdir(exist_ok=True)
        self.out = tmp_path / "out"
        self.brief = tmp_path / "brief.txt"
        self.brief.write_text(BRIEF)
        self.fake = Fake(tmp_path / "fake")
        self.fake.install(binary(key))

    def args(self, *extra: str, brief: bool = True, plain: bool = False) -> list[str]:
        base = ["--cd", str(self.work), "--out-dir", str(self.out)]
        if brief:
            base = ["--brief", str(self.brief), *base]
        needed = [] if plain else EXTRA_ARGS.get(self.key, [])
        return [*base, *needed, *extra]

    def script(self, run: dict | None = None, **scenario) -> None:
        self.fake.script({**scenario, "run": run or {}})

    def relay(
        self,
        *extra: str,
        env: dict | None = None,
        stdin: str | None = None,
        plain: bool = False,
        **kw,
    ) -> RelayRun:
        """Run the relay; `plain` leaves out the arguments a fresh run needs."""
        args = self.args(*extra, plain=plain, brief=stdin is None)
        return relay(
            self.key, *args, env=env or self.fake.env(), out_dir=self.out, stdin=stdin, **kw
        )

    def in_process(self, capfd, *extra: str) -> tuple[int, str, str]:
        """Run the relay in this process, for paths that end before anything is launched.

        Usage errors and --help never start a child, so they need no process of
        their own; returns (exit code, stdout, stderr).
        """
        from delegate_skills.relay.engine import Relay

        capfd.readouterr()
        code = Relay(adapter(self.key)).main(self.args(*extra))
        out, err = capfd.readouterr()
        return code, out, err

    def start(self, *extra: str, env: dict | None = None) -> subprocess.Popen:
        return subprocess.Popen(
            relay_argv(self.key, *self.args(*extra)),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env or self.fake.env(),
        )

    @property
    def result(self) -> dict:
        return json.loads((self.out / "result.json").read_text())

    def pid_file(self, name: str) -> Path:
        return self.tmp / name


def read_pid(path: Path) -> int:
    wait_for(lambda: path.exists() and path.read_text().strip() != "")
    return int(path.read_text())


def finish(proc: subprocess.Popen, timeout: float = 60) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out.decode(), err.decode()


def signal_number(name: str) -> int:
    return int(getattr(signal, name))


def adapter(key: str):
    return load_adapter(key)


def needs(flag: str):
    """The relays whose flag table has `flag` (relays that fail to load are left out)."""
    found = []
    for key in RELAYS:
        try:
            table = adapter(key).flag_table()
        except Exception:  # reported by test_every_adapter_loads
            continue
        if any(f.name == flag for f in table):
            found.append(key)
    return found


#: The flag that asks a relay for a read-only run, where it is not --read-only.
READ_ONLY_FLAG = {"vibe": "--plan-only", "cline": "--plan"}


def read_only_flag(key: str) -> str:
    return READ_ONLY_FLAG.get(key, "--read-only")


def read_only_relays() -> list[str]:
    """The relays with a flag that asks for a read-only run (kimi's --read-only refuses)."""
    from delegate_skills.relay.options import parse

    found = []
    for key in RELAYS:
        relay_adapter = adapter(key)
        table = {flag.name: flag for flag in relay_adapter.flag_table()}
        if read_only_flag(key) not in table:
            continue
        opts = {"cd": "/", "timeout": None, "model": "fake/model", **relay_adapter.defaults()}
        parse([read_only_flag(key)], table, opts)
        try:
            relay_adapter.validate(opts)
        except Exception:
            continue
        if relay_adapter.read_only(opts):
            found.append(key)
    return found


def elapsed(start: float) -> float:
    return time.monotonic() - start


__all__ = ["RELAYS", "ROOT", "Bench", "pytest"]


def argv_of(bench: Bench, *flags: str, **kw) -> list[str]:
    """The argv the implementer got from a relay run that must succeed."""
    run = bench.relay(*flags, **kw)
    assert run.code == 0, run
    return bench.fake.calls("run")[-1]["argv"]
