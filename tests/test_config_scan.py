"""A dispatch asks git for the configuration's drivers only when a configuration file could name
one (gitmeta: the files git reads are looked at first), and a driver configured anywhere git
reads it still never runs.

The git commands of a dispatch are read from GIT_TRACE, which git writes for every process.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import pytest
from relaykit import Bench

from delegate_skills import gitmeta

EDIT = {"actions": [{"write": ["notes.txt", "changed by the run\n"]}], "exit": 0}


def bench(tmp_path: Path) -> Bench:
    b = Bench(tmp_path, "codex")
    (b.work / "notes.txt").write_text("before\n")
    (b.work / ".gitattributes").write_text("*.txt filter=evil\n")
    import subprocess

    subprocess.run(["git", "-C", str(b.work), "add", "-A"], check=True)
    subprocess.run(
        ["git", "-C", str(b.work), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm",
         "base"], check=True,
    )  # fmt: skip
    b.script(run=EDIT)
    return b


def home_env(tmp_path: Path, b: Bench, **extra: str) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = b.fake.env(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), **extra)
    for name in ("GIT_CONFIG_SYSTEM", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_COUNT",
                 "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_NOSYSTEM"):  # fmt: skip
        if name not in extra:
            env.pop(name, None)
    return env


def git_commands(trace: Path) -> Counter:
    """The git subcommand of every git process the trace shows."""
    found: Counter = Counter()
    for line in trace.read_text().splitlines():
        if "trace: built-in: git " in line:
            args = line.split("trace: built-in: git ", 1)[1].split()
            found[args[0]] += 1
    return found


def test_a_plain_dispatch_asks_git_no_configuration_when_nothing_names_a_driver(tmp_path):
    b = bench(tmp_path)
    (b.work / ".gitattributes").unlink()
    for name in ("notes.txt",):  # written a while ago: git's stat cache trusts it
        past = os.stat(b.work / name).st_mtime_ns - 100 * 10**9
        os.utime(b.work / name, ns=(past, past))
    b.script(run={"exit": 0})
    trace = tmp_path / "trace.log"
    run = b.relay(env=home_env(tmp_path, b, GIT_TRACE=str(trace)))
    assert run.code == 0, run.stderr
    # Literal: the paths (1), the first snapshot's listing, add and tree (3), the second
    # snapshot's add (its tree is the first: nothing changed), Node's `git status` (1).
    assert git_commands(trace) == Counter(
        {"rev-parse": 1, "ls-files": 1, "add": 2, "write-tree": 1, "status": 1}
    )


def test_a_git_that_is_not_the_systems_own_is_asked(tmp_path):
    """Another git may read a system configuration file elsewhere: its answer is asked for."""
    b = Bench(tmp_path, "codex")
    b.script(run={"exit": 0})
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "git").write_text('#!/bin/sh\nexec /usr/bin/git "$@"\n')
    (shim / "git").chmod(0o755)
    trace = tmp_path / "trace.log"
    env = home_env(tmp_path, b, GIT_TRACE=str(trace))
    env["PATH"] = f"{shim}{os.pathsep}{env['PATH']}"
    run = b.relay(env=env)
    assert run.code == 0, run.stderr
    assert git_commands(trace)["config"] == 1


def filter_text(marker: Path, header: str = '[filter "evil"]') -> str:
    return f"{header}\n\tclean = touch {marker}; cat\n\tsmudge = cat\n"


#: Where a filter can be configured, as the test writes it: (name, how).
PLACES = [
    "home-gitconfig",
    "xdg-config",
    "GIT_CONFIG_GLOBAL",
    "GIT_CONFIG_SYSTEM",
    "repository-config",
    "upper-case-header",
    "old-style-subsection",
    "included-from-home",
    "GIT_CONFIG_COUNT",
]


@pytest.mark.parametrize("place", PLACES)
def test_a_filter_configured_anywhere_git_reads_never_runs(tmp_path, place):
    b = bench(tmp_path)
    marker = tmp_path / "filter-ran"
    home = tmp_path / "home"
    home.mkdir()
    extra: dict[str, str] = {}
    text = filter_text(marker)
    if place == "home-gitconfig":
        (home / ".gitconfig").write_text(text)
    elif place == "xdg-config":
        (home / ".config" / "git").mkdir(parents=True)
        (home / ".config" / "git" / "config").write_text(text)
    elif place in ("GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM"):
        (tmp_path / "elsewhere.cfg").write_text(text)
        extra[place] = str(tmp_path / "elsewhere.cfg")
    elif place == "repository-config":
        with open(b.work / ".git" / "config", "a") as handle:
            handle.write(text)
    elif place == "upper-case-header":
        with open(b.work / ".git" / "config", "a") as handle:
            handle.write(filter_text(marker, '[FILTER "evil"]'))
    elif place == "old-style-subsection":
        with open(b.work / ".git" / "config", "a") as handle:
            handle.write(filter_text(marker, "[filter.evil]"))
    elif place == "included-from-home":
        (tmp_path / "more.cfg").write_text(text)
        (home / ".gitconfig").write_text(f"[Include]\n\tpath = {tmp_path / 'more.cfg'}\n")
    elif place == "GIT_CONFIG_COUNT":
        extra.update(GIT_CONFIG_COUNT="1", GIT_CONFIG_KEY_0="filter.evil.clean",
                     GIT_CONFIG_VALUE_0=f"touch {marker}; cat")  # fmt: skip
    env = home_env(tmp_path, b, **extra)
    # The filter is live: git itself runs it.
    import subprocess

    probe = subprocess.run(["git", "-C", str(b.work), "add", "--dry-run", "-A"], env=env,
                           capture_output=True, check=False)  # fmt: skip
    (b.work / "notes.txt").write_text("before, touched\n")
    subprocess.run(["git", "-C", str(b.work), "hash-object", "--path=notes.txt", "notes.txt"],
                   env=env, capture_output=True, check=False)  # fmt: skip
    assert marker.exists(), (place, probe.stderr)
    marker.unlink()
    (b.work / "notes.txt").write_text("before\n")
    run = b.relay(env=env)
    assert run.code == 0, run.stderr
    assert not marker.exists(), place
    assert [f["path"] for f in run.result["changes"]["files"]] == ["notes.txt"]


def test_the_system_configuration_of_an_unknown_git_is_not_guessed(tmp_path):
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "git").write_text('#!/bin/sh\nexec /usr/bin/git "$@"\n')
    (shim / "git").chmod(0o755)
    assert gitmeta._system_config({"PATH": str(shim)}) is None
    assert gitmeta._system_config({"PATH": "/usr/bin"}) == ["/etc/gitconfig"]
    assert gitmeta._system_config({"PATH": str(shim), "GIT_CONFIG_NOSYSTEM": "1"}) == []
