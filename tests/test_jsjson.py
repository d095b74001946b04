"""JSON read and written byte for byte as the Node bundle reads and writes it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import script
from hypothesis import given
from hypothesis import strategies as st

from delegate_skills import jsjson

# A document written by `config.mjs write`, and the exact bytes it produced.
TRICKY_INPUT = (
    '{"lanes":{"b":{"implementer":"claude","model":"opus","effort":"high"},'
    '"2":{"implementer":"kimi","timeout":"1h"},'
    '"01":{"implementer":"codex","sandbox":"workspace-write"},'
    '"4294967295":{"implementer":"vibe"},"4294967294":{"implementer":"vibe"}},'
    '"version":"delegate-fleet.v1",'
    '"x":[1.0,1e21,1e-7,123456789012345678901,-0.0,0.1,'
    '"\\u2028\\ud800\\u0001\\u007f/",{"3":1,"z":2,"1":3}],"y":1E400}'
)
TRICKY_NODE_BYTES = (
    '{\n  "lanes": {\n    "2": {\n      "implementer": "kimi",\n      "timeout": "1h"\n    },\n'
    '    "4294967294": {\n      "implementer": "vibe"\n    },\n    "b": {\n'
    '      "implementer": "claude",\n      "model": "opus",\n      "effort": "high"\n    },\n'
    '    "01": {\n      "implementer": "codex",\n      "sandbox": "workspace-write"\n    },\n'
    '    "4294967295": {\n      "implementer": "vibe"\n    }\n  },\n'
    '  "version": "delegate-fleet.v1",\n  "x": [\n    1,\n    1e+21,\n    1e-7,\n'
    '    123456789012345680000,\n    0,\n    0.1,\n    "\u2028\\ud800\\u0001\x7f/",\n'
    '    {\n      "1": 3,\n      "3": 1,\n      "z": 2\n    }\n  ],\n  "y": null\n}\n'
).encode()


def test_document_bytes_match_node():
    assert jsjson.document_bytes(jsjson.loads(TRICKY_INPUT)) == TRICKY_NODE_BYTES


def test_config_write_global_writes_node_bytes(tmp_path, home, global_config):
    source = tmp_path / "in.json"
    source.write_text(TRICKY_INPUT, encoding="utf-8")
    result = script("config.py", "write", "--scope", "global", str(source))
    assert result.code == 0, result
    assert global_config.read_bytes() == TRICKY_NODE_BYTES


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1.0, "1"),
        (-0.0, "0"),
        (1e21, "1e+21"),
        (1e20, "100000000000000000000"),
        (1e-7, "1e-7"),
        (1.5e-7, "1.5e-7"),
        (0.000001, "0.000001"),
        (123.456, "123.456"),
        (-2.5, "-2.5"),
        (2**53 + 1, "9007199254740992"),
        (float("inf"), "null"),
        (5e-324, "5e-324"),
        (1.7976931348623157e308, "1.7976931348623157e+308"),
    ],
)
def test_numbers_print_as_javascript_prints_them(value, text):
    assert jsjson.stringify(value) == text


def test_compact_form_matches_json_stringify():
    assert jsjson.stringify({"a": [1, "x"], "b": {}}) == '{"a":[1,"x"],"b":{}}'
    assert jsjson.stringify(jsjson.MISSING) == "undefined"


@pytest.mark.parametrize("key", ["0", "7", "4294967294"])
def test_array_index_keys_come_first(key):
    assert list(jsjson.js_ordered([("z", 1), (key, 2)])) == [key, "z"]


@pytest.mark.parametrize("key", ["01", "-1", "4294967295", "1.5", "٣"])
def test_other_numeric_looking_keys_keep_insertion_order(key):
    assert list(jsjson.js_ordered([("z", 1), (key, 2)])) == ["z", key]


def test_duplicate_keys_keep_first_position_and_last_value():
    assert list(jsjson.loads('{"a":1,"b":2,"a":3}').items()) == [("a", 3), ("b", 2)]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4)
    ),
    max_leaves=20,
)


@given(json_values)
def test_round_trip_is_stable(value):
    text = jsjson.stringify(value, 2)
    assert jsjson.stringify(jsjson.loads(text), 2) == text
    assert jsjson.loads(text) == json.loads(text)


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_numbers_read_back_to_the_same_double(value):
    assert float(jsjson.stringify(value)) == value


def test_js_trim_matches_string_trim():
    assert jsjson.js_trim("\ufeff\u00a0abc\u2028\n") == "abc"
    assert jsjson.js_trim("\x1cabc") == "\x1cabc"


def _stdlib_outcome(text: str):
    try:
        value = json.loads(
            text,
            object_pairs_hook=jsjson.js_ordered,
            parse_constant=jsjson._refuse_constant,
            parse_int=jsjson._parse_int,
        )
    except RecursionError:
        return ("error", "document nested too deeply")
    except ValueError as error:
        return ("error", str(error))
    return ("value", json.dumps(value), list(value) if isinstance(value, dict) else None)


def _our_outcome(text: str):
    try:
        value = jsjson.loads(text)
    except ValueError as error:
        return ("error", str(error))
    return ("value", json.dumps(value), list(value) if isinstance(value, dict) else None)


JSONISH = st.text(alphabet=st.sampled_from(list(' \t\n\r{}[]:,"\\01-.eE+truefalsnNIiy\ufeffx')))


@given(
    st.one_of(
        JSONISH,
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
            lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner),
        ).map(json.dumps),
    )
)
def test_loads_agrees_with_json_loads(text):
    """Same values, same key order, same error text as json.loads with our hooks."""
    assert _our_outcome(text) == _stdlib_outcome(text)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "\ufeff{}",
        "{} x",
        "NaN",
        "-Infinity",
        '{"a": 1,}',
        " [1] \n",
        '"\\ud800"',
        "[" * 100_000,
    ],
)
def test_loads_edge_cases_agree_with_json_loads(text):
    assert _our_outcome(text) == _stdlib_outcome(text)


def test_loads_reports_syntax_errors_in_a_fresh_interpreter():
    """Before anything imported `json`, a syntax error is still a ValueError with its text."""
    src = str(Path(__file__).resolve().parent.parent / "src")
    code = (
        f"import sys; sys.path.insert(0, {src!r})\n"
        "from delegate_skills import jsjson\n"
        "try:\n    jsjson.loads('{not json')\n"
        "except ValueError as error:\n    print(error)\n"
    )
    done = subprocess.run(
        [sys.executable, "-S", "-c", code], capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == _stdlib_outcome("{not json")[1]
