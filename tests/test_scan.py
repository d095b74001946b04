"""The stdout readers: objects anywhere in a stream, or one JSON value per line."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from delegate_skills.relay.scan import MAX_BUFFERED_CHARS, LineScanner, ObjectScanner, Utf8Stream


def objects(*chunks: str, finish: bool = True) -> list[dict]:
    found: list[dict] = []
    scanner = ObjectScanner(found.append)
    for chunk in chunks:
        scanner.feed(chunk)
    if finish:
        scanner.finish()
    return found


def test_one_object_per_line():
    assert objects('{"a":1}\n{"b":2}\n') == [{"a": 1}, {"b": 2}]


def test_junk_prefix_and_glued_objects():
    assert objects('\x1b[0m junk "quote {"a":1}{"b":"}"}\n') == [{"a": 1}, {"b": "}"}]


def test_object_split_across_chunks():
    assert objects('{"a": "x', 'y"', ', "n": {"m": [1, 2]}}', "\n") == [
        {"a": "xy", "n": {"m": [1, 2]}}
    ]


def test_pretty_printed_object():
    assert objects('{\n  "a": {\n    "b": "{not a brace}"\n  }\n}\n') == [
        {"a": {"b": "{not a brace}"}}
    ]


def test_escaped_quotes_and_braces_in_strings():
    assert objects('{"s": "a \\" } { b"} tail\n') == [{"s": 'a " } { b'}]


def test_malformed_object_is_skipped_and_the_next_parses():
    assert objects('{"a": nope} {"ok": 1}\n') == [{"ok": 1}]


def test_deep_nesting():
    deep = '{"a":' * 200 + "1" + "}" * 200
    assert objects(deep + "\n")[0]["a"]["a"]["a"]


def test_empty_chunks_are_no_ops():
    assert objects("", '{"a":', "", "1}", "", "\n") == [{"a": 1}]


def test_unterminated_tail_is_dropped_and_a_later_object_parses():
    tail = '{"huge": "' + "x" * (MAX_BUFFERED_CHARS + 100_000)
    assert objects(tail + '{"ok":1}\n') == [{"ok": 1}]
    half = len(tail) // 2
    assert objects(tail[:half], tail[half:], '{"ok":1}\n') == [{"ok": 1}]
    assert objects(tail[:half], tail[half:] + '{"ok":1}\n') == [{"ok": 1}]


def test_a_complete_oversized_object_still_parses():
    big = json.dumps({"big": "y" * (MAX_BUFFERED_CHARS + 10)})
    assert objects(big + "\n") == [{"big": "y" * (MAX_BUFFERED_CHARS + 10)}]


def test_last_line_without_newline():
    assert objects('{"a":1}') == [{"a": 1}]


def test_nan_is_not_json():
    assert objects('{"a": NaN}\n{"b": 1}\n') == [{"b": 1}]


@given(
    st.lists(st.dictionaries(st.text(max_size=5), st.text(max_size=8), max_size=3), max_size=6),
    st.data(),
)
def test_any_chunking_finds_the_same_objects(values, data):
    text = "noise " + " ".join(json.dumps(v) for v in values) + "\n"
    cuts = sorted(data.draw(st.lists(st.integers(0, len(text)), max_size=8)))
    pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    assert objects(*pieces) == values


def test_line_scanner():
    found: list[dict] = []
    scanner = LineScanner(found.append)
    for chunk in ('{"a":1}\n\nnot json\n{"b"', ':2}\n[1]\n{"c":3}'):
        scanner.feed(chunk)
    scanner.finish()
    assert found == [{"a": 1}, {"b": 2}, {"c": 3}]


def test_line_scanner_drops_an_oversized_partial():
    found: list[dict] = []
    scanner = LineScanner(found.append)
    scanner.feed('{"x": "' + "z" * (MAX_BUFFERED_CHARS + 5))
    scanner.feed('"}\n{"next": 1}\n')
    assert found == [{"next": 1}]


def test_utf8_split_across_reads():
    stream = Utf8Stream()
    data = "café — ✅".encode()
    assert (
        "".join(stream.decode(data[i : i + 1]) for i in range(len(data))) + stream.flush()
        == "café — ✅"
    )
