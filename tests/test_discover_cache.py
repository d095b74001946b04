"""`delegate discover` remembers: what is answered from the cache, and what makes it probe again."""

from __future__ import annotations

import json
import os
from pathlib import Path

from discoverkit import ANSWERS, recording, runs

from delegate_skills.discover import cache
from delegate_skills.discover.report import discover_cached

FAKES = ("codex", "aider", "copilot")


def _machine(tmp_path: Path) -> tuple[dict[str, str], Path, Path]:
    bindir, log, home = tmp_path / "bin", tmp_path / "log", tmp_path / "home"
    home.mkdir()
    for binary in FAKES:
        recording(bindir, binary, log, ANSWERS[binary])
    env = {
        "PATH": f"{bindir}:/usr/bin:/bin",
        "HOME": str(home),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
    }
    return env, log, home


def _argvs(log: Path) -> list[str]:
    return sorted(run.argv for run in runs(log))


def _found(report: dict) -> list[str]:
    return [entry["key"] for entry in report["discovered"]]


def test_a_second_discover_answers_from_the_cache_with_the_same_answers(tmp_path):
    env, log, _home = _machine(tmp_path)
    first, details = discover_cached(env=env)
    assert (details["probed"], details["cached"]) == (["aider", "codex", "copilot"], [])
    probes = _argvs(log)
    assert probes == ["aider --version", "codex --version", "codex login status",
                      "copilot --version"]  # fmt: skip
    second, details = discover_cached(env=env)
    assert (details["probed"], details["cached"]) == ([], ["aider", "codex", "copilot"])
    assert details["seconds"] == {}
    assert second == first
    assert _argvs(log) == probes  # nothing ran the second time
    cache_file = tmp_path / "cache" / "delegate-skills" / "discover.json"
    assert sorted(json.loads(cache_file.read_text())["entries"]) == ["aider", "codex", "copilot"]


def test_a_changed_binary_is_probed_again_and_only_it(tmp_path):
    env, log, _home = _machine(tmp_path)
    discover_cached(env=env)
    aider = tmp_path / "bin" / "aider"
    aider.write_text(aider.read_text().replace("aider 0.86.2", "aider 0.90.0"))  # an upgrade
    report, details = discover_cached(env=env)
    assert (details["probed"], details["cached"]) == (["aider"], ["codex", "copilot"])
    versions = {entry["key"]: entry["version"] for entry in report["discovered"]}
    assert versions == {"codex": "codex-cli 0.50.0", "aider": "aider 0.90.0",
                        "copilot": "GitHub Copilot CLI 1.0.102"}  # fmt: skip
    assert [run.argv for run in runs(log)].count("aider --version") == 2


def test_a_binary_touched_in_place_is_probed_again(tmp_path):
    env, _log, _home = _machine(tmp_path)
    discover_cached(env=env)
    copilot = tmp_path / "bin" / "copilot"
    info = copilot.stat()
    os.utime(copilot, ns=(info.st_atime_ns, info.st_mtime_ns + 1_000_000_000))
    _report, details = discover_cached(env=env)
    assert details["probed"] == ["copilot"]


def test_a_new_sign_in_file_probes_that_cli_again(tmp_path):
    env, _log, home = _machine(tmp_path)
    discover_cached(env=env)
    (home / ".codex").mkdir()
    (home / ".codex" / "auth.json").write_text("{}")
    _report, details = discover_cached(env=env)
    assert (details["probed"], details["cached"]) == (["codex"], ["aider", "copilot"])


def test_a_new_key_variable_probes_again(tmp_path):
    env, _log, _home = _machine(tmp_path)
    discover_cached(env=env)
    _report, details = discover_cached(env={**env, "OPENAI_API_KEY": "sk-test"})
    assert details["probed"] == ["aider", "codex", "copilot"]
    cache_text = (tmp_path / "cache" / "delegate-skills" / "discover.json").read_text()
    assert "OPENAI_API_KEY" in cache_text and "sk-test" not in cache_text  # names, never values


def test_sign_in_state_older_than_the_ttl_is_asked_again(tmp_path):
    env, _log, _home = _machine(tmp_path)
    discover_cached(env=env)
    cache_file = Path(cache.cache_path(env))
    document = json.loads(cache_file.read_text())
    document["entries"]["codex"]["checkedAt"] -= cache.LOGIN_TTL_S + 60
    cache_file.write_text(json.dumps(document))
    _report, details = discover_cached(env=env)
    assert (details["probed"], details["cached"]) == (["codex"], ["aider", "copilot"])


def test_fresh_probes_everything_again(tmp_path):
    env, log, _home = _machine(tmp_path)
    discover_cached(env=env)
    _report, details = discover_cached(env=env, fresh=True)
    assert (details["probed"], details["cached"]) == (["aider", "codex", "copilot"], [])
    assert len(runs(log)) == 8


def test_one_key_probes_only_that_cli(tmp_path):
    env, log, _home = _machine(tmp_path)
    report, details = discover_cached(env=env, only={"aider"})
    assert (_found(report), details["probed"]) == (["aider"], ["aider"])
    assert _argvs(log) == ["aider --version"]


def test_a_cache_that_is_not_ours_is_ignored_and_replaced(tmp_path):
    env, _log, _home = _machine(tmp_path)
    cache_file = Path(cache.cache_path(env))
    cache_file.parent.mkdir(parents=True)
    cache_file.write_text('{"version": 99, "entries": {"aider": {}}}')
    _report, details = discover_cached(env=env)
    assert details["probed"] == ["aider", "codex", "copilot"]
    assert json.loads(cache_file.read_text())["version"] == cache.CACHE_VERSION
