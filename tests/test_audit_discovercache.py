"""When `delegate discover`'s cache may answer for a CLI, and how it is written (discover/cache.py).

An entry stands only while the binary, the sign-in files and the names of the
key-carrying variables are as they were, and for at most LOGIN_TTL_S (15
minutes) after it was probed, never from a time still to come. The relay
refuses a dispatch on it ("signed out"), so a stale entry stops a run that
would work.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from delegate_skills.discover import cache

SIGNED_OUT = {"key": "codex", "authenticated": False}


@pytest.fixture
def cached(tmp_path) -> tuple[dict, Path, float]:
    """(env, binary, checkedAt) of a cache that has just seen codex signed out."""
    home = tmp_path / "home"
    home.mkdir()
    binary = tmp_path / "bin" / "codex"
    binary.parent.mkdir()
    binary.write_text("#!/bin/sh\necho codex-cli 1.0\n")
    binary.chmod(0o755)
    env = {"HOME": str(home), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    cache.store({"codex": {"entry": SIGNED_OUT, "path": str(binary)}}, env)
    checked = cache.load(env)["codex"]["checkedAt"]
    return env, binary, checked


def fresh(env: dict, binary: Path, now: float) -> dict | None:
    return cache.fresh_entry(cache.load(env), "codex", str(binary), env, now)


def test_an_entry_stands_while_nothing_moved(cached):
    env, binary, checked = cached
    assert fresh(env, binary, checked + 1)["entry"] == SIGNED_OUT


def test_a_reinstalled_binary_is_probed_again(cached):
    env, binary, checked = cached
    with open(binary, "a") as handle:
        handle.write("# upgraded\n")
    assert fresh(env, binary, checked + 1) is None


def test_an_entry_stands_for_fifteen_minutes_and_no_longer(cached):
    env, binary, checked = cached
    assert fresh(env, binary, checked + 15 * 60 - 1) is not None
    assert fresh(env, binary, checked + 15 * 60 + 1) is None


def test_an_entry_probed_in_the_future_does_not_stand(cached):
    env, binary, checked = cached
    assert fresh(env, binary, checked - 60) is None


def test_a_new_key_variable_is_probed_again(cached):
    env, binary, checked = cached
    assert fresh({**env, "OPENAI_API_KEY": "sk-test"}, binary, checked + 1) is None
    assert fresh({**env, "DELEGATE_RELAY_TOKEN": "ours"}, binary, checked + 1) is not None


def test_the_cache_is_replaced_whole(cached):
    env, binary, _checked = cached
    path = Path(cache.cache_path(env))
    before = os.stat(path).st_ino
    cache.store({"codex": {"entry": SIGNED_OUT, "path": str(binary)}}, env)
    assert os.stat(path).st_ino != before  # a new file renamed over the old one
    assert sorted(os.listdir(path.parent)) == ["discover.json", "discover.json.lock"]
