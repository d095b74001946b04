"""300 MB of assistant text through every relay: bounded memory, a bounded result.

For each relay the fake implementer prints about 300 MB of the text that
becomes the run's final message, in the shape that relay's adapter reads it
(JSON events, or plain stdout for the text relays), in ~256 KiB pieces; the
last piece ends with a marker. The relay must finish as a normal successful
run, stay under 80 MiB of peak RSS, and write a small result.json whose
finalMessage ends with the last text the fake sent.

The relays and their event shapes are written out here, never read from the
adapters: a new relay must be added to SHAPES by hand.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import pytest
from fakes import relay_argv
from relaykit import Bench

HELPERS = Path(__file__).parent / "helpers"
RSS = HELPERS / "rss.py"
TOTAL_BYTES = 300 * 1024 * 1024
RSS_LIMIT_KIB = 80 * 1024
RESULT_LIMIT_BYTES = 8 * 1024 * 1024
MARKER = "<<END-OF-VOLUME-7f3a9c>>"
SENTENCE = "Refactored the café parser and re-ran the checks; every one passed. "
#: One piece of assistant text, about 256 KiB (no newline: it sits inside JSON strings).
CHUNK = SENTENCE * (256 * 1024 // len(SENTENCE.encode()))
PIECES = TOTAL_BYTES // len(CHUNK.encode())
#: The last piece: where the final message must end.
LAST = "Summary: the parser is rewritten and all checks pass. " + MARKER


def jl(*events: dict) -> str:
    return "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in events)


def blocks(text: str) -> list[dict]:
    return [{"type": "text", "text": text}]


class Shape(NamedTuple):
    #: What the fake prints before the text (session/init events).
    opening: str
    #: One piece of assistant text as the fake prints it.
    piece: Callable[[str], str]
    #: What the fake does after the last piece (result/done events, files).
    closing: Callable[[Bench], list[dict]]
    #: Relay arguments beyond --brief/--cd/--out-dir and relaykit.EXTRA_ARGS.
    args: tuple[str, ...] = ()
    #: Whether the final message keeps the end of the text. ZCode's report is
    #: one JSON document that the relay reads whole; past 1 Mi characters it is
    #: cut at its head and flagged in `parseWarning`, as the Node original does.
    keeps_tail: bool = True


def nothing(_bench: Bench) -> list[dict]:
    return []


def printed(*events: dict) -> Callable[[Bench], list[dict]]:
    return lambda _bench: [{"stdout": jl(*events)}]


def text_line(text: str) -> str:
    return text + "\n"


def commandcode_event(kind: str, **fields) -> dict:
    return {"type": "event", "event": {"type": kind, **fields}}


def codex_closing(bench: Bench) -> list[dict]:
    # Codex writes its last agent message to the -o file (final.txt) itself.
    return [
        {
            "stdout": jl(
                {"type": "turn.completed", "usage": {"input_tokens": 1, "output_tokens": 1}}
            )
        },
        {"write": [str(bench.out / "final.txt"), LAST + "\n"]},
    ]


SHAPES: dict[str, Shape] = {
    "agy": Shape("", text_line, nothing),
    "aider": Shape("", text_line, nothing),
    "claude": Shape(
        jl({"type": "system", "subtype": "init", "session_id": "cl-1"}),
        lambda t: jl(
            {
                "type": "assistant",
                "session_id": "cl-1",
                "message": {"role": "assistant", "content": blocks(t)},
            }
        ),
        # Claude's report is the terminal result event's `result`, its last message.
        printed(
            {
                "type": "result",
                "subtype": "success",
                "is_error": False,
                "session_id": "cl-1",
                "num_turns": 1,
                "result": LAST,
            }
        ),
    ),
    "cline": Shape(
        jl({"type": "run_start", "sessionId": "cline-1"}),
        lambda t: jl({"type": "agent_event", "event": {"type": "text", "text": t}}),
        printed({"type": "run_result", "finishReason": "completed", "text": LAST}),
    ),
    "codex": Shape(
        jl({"type": "thread.started", "thread_id": "t-1"}),
        lambda t: jl(
            {"type": "item.completed", "item": {"id": "item_0", "type": "agent_message", "text": t}}
        ),
        codex_closing,
    ),
    "commandcode": Shape(
        jl(
            commandcode_event("run_start", sessionId="cc-1"),
            commandcode_event("message_start"),
        ),
        lambda t: jl(commandcode_event("text_delta", delta=t)),
        # cmd's result line for a report this long has no finalText (see the adapter).
        printed(
            commandcode_event("turn_end"),
            {"type": "result", "subtype": "success", "sessionId": "cc-1", "stopReason": "end_turn"},
        ),
    ),
    "copilot": Shape(
        "",
        lambda t: jl({"type": "assistant.message", "data": {"messageId": "m", "content": t}}),
        printed({"type": "result", "sessionId": "cp-1", "exitCode": 0}),
    ),
    "cursor": Shape(
        jl({"type": "system", "subtype": "init", "session_id": "cu-1", "model": "fake"}),
        lambda t: jl({"type": "assistant", "message": {"role": "assistant", "content": blocks(t)}}),
        nothing,
    ),
    "grok": Shape(
        "",
        lambda t: jl({"type": "text", "data": t}),
        printed({"type": "end", "stopReason": "end_turn", "sessionId": "g-1"}),
    ),
    "kimi": Shape("", lambda t: jl({"role": "assistant", "content": t}), nothing),
    "omp": Shape(
        jl({"type": "session", "id": "omp-1"}),
        lambda t: jl(
            {
                "type": "message_end",
                "message": {"role": "assistant", "content": blocks(t), "stopReason": "stop"},
            }
        ),
        nothing,
    ),
    "opencode": Shape(
        jl({"type": "step_start", "sessionID": "ses_V"}),
        # Every text part has its own id ("@N@" is numbered by the fake).
        lambda t: jl(
            {
                "type": "text",
                "sessionID": "ses_V",
                "part": {"id": "prt_@N@", "type": "text", "text": t},
            }
        ),
        printed({"type": "step_finish", "sessionID": "ses_V", "part": {"cost": 0.0}}),
    ),
    "pi": Shape(
        jl({"type": "session", "id": "pi-1"}),
        lambda t: jl(
            {
                "type": "message_end",
                "message": {"role": "assistant", "content": blocks(t), "stopReason": "stop"},
            }
        ),
        nothing,
    ),
    "qoder": Shape(
        jl({"type": "system", "subtype": "init", "session_id": "q-1", "model": "fake"}),
        lambda t: jl(
            {
                "type": "assistant",
                "session_id": "q-1",
                "message": {"role": "assistant", "content": blocks(t)},
            }
        ),
        # A result event is required; with no `result` text the report is the messages.
        printed({"type": "result", "subtype": "success", "is_error": False, "session_id": "q-1"}),
    ),
    "vibe": Shape(
        "",
        lambda t: jl({"type": "message", "role": "assistant", "sessionId": "v-1", "content": t}),
        nothing,
    ),
    "warp": Shape(
        jl({"type": "system", "event_type": "run_started", "run_id": "r-1"}),
        lambda t: jl({"type": "agent", "text": t}),
        nothing,
    ),
    # ZCode prints one JSON document; its `response` is the report.
    "zcode": Shape(
        '{"sessionId": "sess_v", "response": "',
        lambda t: t,
        lambda _bench: [
            {"stdout": '", "projection": {"status": "completed", "contextWindow": 1}}\n'}
        ],
        keeps_tail=False,
    ),
}
RELAY_KEYS = [
    "agy", "aider", "claude", "cline", "codex", "commandcode", "copilot", "cursor", "grok",
    "kimi", "omp", "opencode", "pi", "qoder", "vibe", "warp", "zcode",
]  # fmt: skip


def test_every_listed_relay_has_a_shape():
    assert sorted(SHAPES) == sorted(RELAY_KEYS)


def drop_big_files(root: Path) -> None:
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink() and path.stat().st_size > 16 * 1024 * 1024:
            path.unlink()


@pytest.mark.parametrize("key", RELAY_KEYS)
def test_300mb_of_assistant_text(tmp_path, home, monkeypatch, key):
    for variable in ("ZCODE_CLI", "COMMANDCODE_BIN"):
        monkeypatch.delenv(variable, raising=False)
    shape = SHAPES[key]
    bench = Bench(tmp_path, key)
    bench.script(
        {
            "actions": [
                *([{"stdout": shape.opening}] if shape.opening else []),
                {"repeat": {"text": shape.piece(CHUNK), "count": PIECES}},
                {"stdout": shape.piece(LAST)},
                *shape.closing(bench),
            ]
        }
    )
    try:
        started = time.monotonic()
        done = subprocess.run(
            [sys.executable, str(RSS), *relay_argv(key, *bench.args(*shape.args))],
            env=bench.fake.env(),
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        seconds = time.monotonic() - started
        code, peak_kib = (int(x) for x in done.stdout.split())
        result_path = bench.out / "result.json"
        size = result_path.stat().st_size if result_path.exists() else None
        print(f"\n{key}: exit {code}, peak RSS {peak_kib} KiB, {seconds:.2f}s, result {size} B")
        assert size is not None, f"{key}: no result.json"
        result = json.loads(result_path.read_text())
        final = result["finalMessage"]
        outline = {k: v for k, v in result.items() if k not in ("finalMessage", "touchedFiles")}
        assert (code, result["status"], result["exitCode"]) == (0, "completed", 0), outline
        assert peak_kib < RSS_LIMIT_KIB, f"{key}: peak RSS {peak_kib} KiB"
        assert size < RESULT_LIMIT_BYTES, f"{key}: result.json is {size} bytes"
        if shape.keeps_tail:
            assert final.endswith(LAST), (
                f"{key}: finalMessage ({len(final)} chars) ends with {final[-80:]!r}"
            )
        else:
            assert len(final) <= 1_048_576
            assert result["parseWarning"].startswith("ZCode's stdout exceeded 1048576 characters")
    finally:
        drop_big_files(tmp_path)
