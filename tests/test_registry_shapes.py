"""The hand-written value checks agree with the regular expressions they stand for.

Lane names, tokens and durations are checked without `re` on the dispatch path;
the schema and the Node bundle state the same rules as patterns. These tests
hold the two forms together.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from conftest import ROOT, fleet_doc, script, write_json
from hypothesis import given
from hypothesis import strategies as st

from delegate_skills import durations, registry
from delegate_skills.relay.options import ENV_NAME, SESSION

SHAPES = {
    "lane name": registry.LANE_NAME,
    "bare token": registry.BARE_TOKEN,
    "claude model": registry.CLAUDE_MODEL.shape,
    "cursor model": registry.CURSOR_MODEL.shape,
    "shell safe": registry.SHELL_SAFE.shape,
    "session": SESSION.shape,
    "env name": ENV_NAME,
}

# Characters near every class boundary, plus a few that only Unicode-aware
# matching would confuse with ASCII (Kelvin sign, long s, fullwidth digit).
NEAR = "AZaz09_-.:@/[],=\\ \n\t\u212a\u017f\uff10\u00e9\u0000~`!#$%^&*()+{}|;'\"<>?"
TEXT = st.text(alphabet=st.sampled_from(list(NEAR)), max_size=12) | st.text(max_size=12)


@pytest.mark.parametrize("name", sorted(SHAPES))
@given(text=TEXT)
def test_shape_accepts_exactly_what_its_pattern_matches(name, text):
    shape = SHAPES[name]
    assert shape.accepts(text) == (re.fullmatch(shape.pattern, text) is not None)


def test_shape_patterns_are_the_documented_classes():
    assert registry.LANE_NAME.pattern == "[A-Za-z0-9][A-Za-z0-9._-]*"
    assert registry.CLAUDE_MODEL.pattern == r"[A-Za-z0-9][A-Za-z0-9._:@/\[\]-]*"
    assert registry.BARE_TOKEN.accepts("xHigh") and not registry.BARE_TOKEN.accepts("\u212a")


DURATION = st.text(alphabet=st.sampled_from(list("0123456789hmsxH \u0661")), max_size=10)


@given(DURATION)
def test_duration_parts_match_the_timeout_pattern(text):
    match = re.fullmatch(durations.TIMEOUT.pattern, text)
    assert durations.duration_parts(text) == (None if match is None else match.groups())


@pytest.mark.parametrize(
    ("text", "ms"),
    [("30m", 1_800_000), ("1h30m", 5_400_000), ("90s", 90_000), ("596h31m23s", 2_147_483_000)],
)
def test_timeouts_parse(text, ms):
    assert durations.parse_timeout_ms(text) == ms


@pytest.mark.parametrize(
    "text", ["", "0s", "1m1h", "1h1h", "h", "1", "596h31m24s", "\u0661s", "1d"]
)
def test_bad_timeouts_are_refused(text):
    assert durations.parse_timeout_ms(text) is None


def test_lane_resolve_imports_no_third_party_package(repo, home, global_config, tmp_path):
    """`lane resolve` is on every dispatch: click, jsonschema, filelock and git stay off it."""
    write_json(global_config, fleet_doc({"review": {"implementer": "codex", "timeout": "1h"}}))
    lanes = write_json(tmp_path / "lanes.json", fleet_doc({"feature": {"implementer": "claude"}}))
    assert (
        script("config.py", "write", "--scope", "project", "--cwd", str(repo), str(lanes)).code == 0
    )
    src, where = str(ROOT / "src"), str(repo)
    code = (
        f"import sys; sys.path.insert(0, {src!r})\n"
        "from delegate_skills.lanes import resolve\n"
        f"assert resolve({where!r}, 'review', 'codex')['source'] == 'global'\n"
        f"assert resolve({where!r}, 'feature', 'claude')['source'] == 'project'\n"
        "print(sorted({'click', 'jsonschema', 'filelock', 'git', 'mcp'} & set(sys.modules)))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
