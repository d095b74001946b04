"""The suite never reaches a real implementer CLI: the machine's PATH is filtered for it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

from conftest import ORIGINAL_PATH

#: Every implementer binary, written out (registry.py holds the same list).
BINARIES = [
    "agy", "aider", "auggie", "claude", "cline", "cmd", "codex", "copilot", "cursor-agent",
    "gemini", "grok", "kimi", "omp", "opencode", "oz", "pi", "qodercli", "qwen", "vibe", "zcode",
    "kilo", "hermes", "dsh",
]  # fmt: skip


def test_the_written_list_is_the_registrys():
    from delegate_skills import registry

    assert sorted(BINARIES) == sorted({impl.binary for impl in registry.IMPLEMENTERS})


def test_no_implementer_is_on_the_suites_path(tmp_path):
    for name in BINARIES:
        assert shutil.which(name) is None, (name, shutil.which(name))
    # A child process sees the same PATH.
    found = subprocess.run(
        [sys.executable, "-c", f"import shutil; print([shutil.which(n) for n in {BINARIES!r}])"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert found.strip() == repr([None] * len(BINARIES))


def test_the_rest_of_path_is_still_there():
    for tool in ("git", "sh"):
        assert shutil.which(tool) is not None
        assert shutil.which(tool, path=ORIGINAL_PATH) is not None
    assert len(os.environ["PATH"].split(os.pathsep)) <= len(ORIGINAL_PATH.split(os.pathsep))
