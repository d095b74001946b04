"""JSON read and written the way the Node bundle reads and writes it.

Files we share with the Node implementation must come out byte for byte the same
as `JSON.stringify(doc, null, 2) + "\\n"`, and documents must be walked in the
order JavaScript walks object keys. Three things differ from Python's `json`:

* key order: JavaScript lists array-index keys ("0", "17", ...) first, in
  numeric order, then every other key in insertion order;
* numbers: JavaScript holds every number as a double and prints it in its own
  shortest form (`1`, not `1.0`; `1e+21`; `1e-7`);
* strings: lone surrogates are written as `\\udxxx` escapes.

`NaN` and `Infinity` are not JSON to JavaScript, so they are refused here too.
"""

from __future__ import annotations

import json

from .jstext import js_trim  # noqa: F401  (where readers of JSON files trim their text)

_ARRAY_INDEX_MAX = 2**32 - 2
_SAFE_INT = 2**53


class Missing:
    """Stands for a property that is absent (JavaScript's `undefined`)."""

    def __repr__(self) -> str:
        return "undefined"


MISSING = Missing()


def _is_array_index(key: str) -> bool:
    if not key or not key.isascii() or not key.isdigit():
        return False
    if len(key) > 1 and key[0] == "0":
        return False
    return int(key) <= _ARRAY_INDEX_MAX


def js_ordered(pairs) -> dict:
    """A dict holding `pairs` in the order JavaScript would enumerate them."""
    merged = dict(pairs)
    indices = [k for k in merged if _is_array_index(k)]
    if not indices:
        return merged
    indices.sort(key=int)
    ordered = {k: merged[k] for k in indices}
    for k, v in merged.items():
        if k not in ordered:
            ordered[k] = v
    return ordered


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not valid JSON")


def _parse_int(text: str):
    value = int(text)
    return float(value) if abs(value) > _SAFE_INT else value


_DECODER = json.JSONDecoder(
    object_pairs_hook=js_ordered, parse_int=_parse_int, parse_constant=_refuse_constant
)


def loads(text: str):
    """Parse `text` as JavaScript's JSON.parse would.

    Raises ValueError (json.JSONDecodeError, with json.loads's messages) on
    anything JSON.parse rejects, and on nesting too deep to walk.
    """
    if text.startswith("\ufeff"):
        raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
    try:
        return _DECODER.decode(text)
    except RecursionError:
        raise ValueError("document nested too deeply") from None


def decode_utf8(raw: bytes) -> str:
    """Bytes to text as Node's `buffer.toString("utf8")` does (U+FFFD for bad bytes)."""
    return raw.decode("utf-8", errors="replace")


def _string(value: str) -> str:
    """A JSON string literal as JSON.stringify writes it.

    `json.dumps` escapes exactly what JavaScript escapes (quote, backslash,
    control characters; \\b \\f \\n \\r \\t short) except lone surrogates,
    which it passes through and JavaScript writes as \\udxxx escapes.
    """
    text = json.dumps(value, ensure_ascii=False)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        pass
    else:
        return text
    return "".join(f"\\u{ord(c):04x}" if 0xD800 <= ord(c) <= 0xDFFF else c for c in text)


def js_number(value: float) -> str:
    """Format a number as JavaScript's Number#toString does."""
    if value != value or value in (float("inf"), float("-inf")):
        return "null"
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    mantissa, _, exp = repr(abs(value)).partition("e")
    whole, _, frac = mantissa.partition(".")
    digits = whole + frac
    point = len(whole) + (int(exp) if exp else 0)
    stripped = digits.lstrip("0")
    point -= len(digits) - len(stripped)
    digits = stripped.rstrip("0") or "0"
    k, n = len(digits), point
    if k <= n <= 21:
        body = digits + "0" * (n - k)
    elif 0 < n <= 21:
        body = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        body = "0." + "0" * (-n) + digits
    else:
        e = n - 1
        tail = "." + digits[1:] if k > 1 else ""
        body = f"{digits[0]}{tail}e{'+' if e >= 0 else '-'}{abs(e)}"
    return sign + body


def _scalar(value) -> str | None:
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, int):
        return str(value) if abs(value) <= _SAFE_INT else js_number(float(value))
    if isinstance(value, float):
        return js_number(value)
    return None


def stringify(value, indent: int | None = None) -> str:
    """JSON.stringify(value, null, indent). `MISSING` gives "undefined"."""
    if value is MISSING:
        return "undefined"
    parts: list[str] = []
    _emit(value, parts, indent, "")
    return "".join(parts)


def _emit(value, out: list[str], indent: int | None, pad: str) -> None:
    scalar = _scalar(value)
    if scalar is not None:
        out.append(scalar)
        return
    if isinstance(value, dict):
        items = list(js_ordered(value.items()).items())
        opener, closer = "{", "}"
    elif isinstance(value, (list, tuple)):
        items = list(value)
        opener, closer = "[", "]"
    else:
        raise TypeError(f"cannot serialise {type(value).__name__}")
    if not items:
        out.append(opener + closer)
        return
    inner = pad + " " * indent if indent else pad
    sep = ",\n" + inner if indent else ","
    out.append(opener + ("\n" + inner if indent else ""))
    for i, item in enumerate(items):
        if i:
            out.append(sep)
        if isinstance(value, dict):
            key, item = item
            out.append(_string(key) + (": " if indent else ":"))
        _emit(item, out, indent, inner)
    out.append(("\n" + pad if indent else "") + closer)


def document_bytes(doc) -> bytes:
    """The bytes the Node bundle writes for `doc`: two-space JSON and a newline."""
    return (stringify(doc, 2) + "\n").encode("utf-8")
