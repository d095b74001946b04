"""A scripted model server on 127.0.0.1 for the real-CLI tests.

It speaks just enough of two HTTP APIs for a coding CLI to run one turn:

* the Gemini API (`gemini`): `POST /v1beta/models/<m>:streamGenerateContent?alt=sse`,
  `:generateContent` and `:countTokens`;
* OpenAI chat completions (`qwen`): `POST <base>/chat/completions`, streamed
  (SSE) or not, and `GET <base>/models`.

The script: the first main-conversation call (its text contains --marker and no
tool result is present yet) is answered with one `write_file` tool call,
`{"file_path": --target, "content": --content}`. Once a tool result is present
(a Gemini `functionResponse` part, an OpenAI `role: "tool"` message) the answer
is the final text, --final. Anything else that asks for a model reply, such as
a side request of the CLI (a router, a memory agent, a next-speaker check),
gets plain text, or a small JSON object when it asks for JSON. Other paths
get a 404.

Every request is appended to --log as one JSON line: method, path, the reply
kind (`tool`, `final`, `plain`, `json`, `count`, `models`, `unknown`) and the
body. Run as `python modelserver.py --log FILE --target PATH ...`; it binds a
free port (or --port) and prints `PORT <n>` on stdout once it listens. It
exits on SIGTERM, when its parent goes away, or after --lifetime seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PLAIN_TEXT = "Plain reply from the scripted model server."
USAGE_GEMINI = {"promptTokenCount": 11, "candidatesTokenCount": 3, "totalTokenCount": 14}
USAGE_OPENAI = {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14}
#: Marks a side agent's conversation that happens to quote the main one (qwen's memory agent).
SIDE_AGENT_MARKS = ("managed memory", "memory extraction")


class Script:
    """What the scripted model says; shared by every handler thread."""

    def __init__(self, target: str, content: str, marker: str, final: str, log: str) -> None:
        self.target = target
        self.content = content
        self.marker = marker
        self.final = final
        self.log_path = log
        self._lock = threading.Lock()

    def tool_args(self) -> dict:
        return {"file_path": self.target, "content": self.content}

    def log(self, method: str, path: str, kind: str, body: str) -> None:
        entry = {"t": time.time(), "method": method, "path": path, "kind": kind, "body": body}
        with self._lock, open(self.log_path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(entry) + "\n")


def _json(text: str):
    try:
        return json.loads(text or "{}")
    except ValueError:
        return {}


def _schema_value(schema):
    """A small value that fits a JSON schema (for side calls that ask for JSON)."""
    if not isinstance(schema, dict):
        return ""
    kind = str(schema.get("type", "")).lower()
    if schema.get("enum"):
        values = schema["enum"]
        # Gemini's next-speaker check: hand the turn back to the user.
        return "user" if "user" in values else values[0]
    if kind == "object" or "properties" in schema:
        props = schema.get("properties") or {}
        return {name: _schema_value(sub) for name, sub in props.items()}
    if kind == "array":
        return []
    if kind in ("integer", "number"):
        return 1
    if kind == "boolean":
        return False
    return "ok"


def _texts(value) -> str:
    """Every string inside a request body part, joined, to look for the marker."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return "\n".join(_texts(v) for v in value.values())
    if isinstance(value, list):
        return "\n".join(_texts(v) for v in value)
    return ""


def gemini_reply(script: Script, request: dict) -> tuple[str, dict]:
    """(kind, the model's content part) for a Gemini generateContent request."""
    config = request.get("generationConfig") or {}
    if config.get("responseMimeType") == "application/json":
        schema = config.get("responseJsonSchema") or config.get("responseSchema") or {}
        return "json", {"text": json.dumps(_schema_value(schema))}
    contents = request.get("contents") or []
    has_result = any(
        isinstance(part, dict) and "functionResponse" in part
        for turn in contents
        if isinstance(turn, dict)
        for part in turn.get("parts") or []
    )
    system = _texts(request.get("systemInstruction"))
    side = any(mark in system.lower() for mark in SIDE_AGENT_MARKS)
    if has_result and not side:
        return "final", {"text": script.final}
    if script.marker in _texts(contents) and not side:
        return "tool", {"functionCall": {"name": "write_file", "args": script.tool_args()}}
    return "plain", {"text": PLAIN_TEXT}


def openai_reply(script: Script, request: dict) -> tuple[str, str]:
    """(kind, text) for an OpenAI chat completions request; text is unused for `tool`."""
    messages = [m for m in request.get("messages") or [] if isinstance(m, dict)]
    system = "\n".join(_texts(m.get("content")) for m in messages if m.get("role") == "system")
    side = any(mark in system.lower() for mark in SIDE_AGENT_MARKS)
    has_result = any(m.get("role") == "tool" for m in messages)
    users = "\n".join(_texts(m.get("content")) for m in messages if m.get("role") == "user")
    if has_result and not side:
        return "final", script.final
    if script.marker in users and not side:
        return "tool", ""
    return "plain", PLAIN_TEXT


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    script: Script  # set on the subclass made in serve()

    def log_message(self, format, *args):
        pass

    def _body(self) -> str:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length).decode("utf-8", "replace") if length else ""

    def _send(self, code: int, content_type: str, data: str) -> None:
        raw = data.encode()
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def _sse(self, events: list[str]) -> None:
        self._send(200, "text/event-stream", "".join(events))

    def handle_any(self) -> None:
        body = self._body()
        path = self.path
        route = path.split("?", 1)[0].rstrip("/")
        if ":streamGenerateContent" in route or ":generateContent" in route:
            kind, part = gemini_reply(self.script, _json(body))
            self.script.log(self.command, path, kind, body)
            reply = {
                "candidates": [
                    {
                        "content": {"role": "model", "parts": [part]},
                        "finishReason": "STOP",
                        "index": 0,
                    }
                ],
                "usageMetadata": USAGE_GEMINI,
                "modelVersion": "scripted-model",
            }
            if ":streamGenerateContent" in route:
                self._sse(["data: " + json.dumps(reply) + "\r\n\r\n"])
            else:
                self._send(200, "application/json", json.dumps(reply))
        elif ":countTokens" in route:
            self.script.log(self.command, path, "count", body)
            self._send(200, "application/json", json.dumps({"totalTokens": 11}))
        elif route.endswith("/chat/completions"):
            self._chat(path, body)
        elif route.endswith("/models"):
            self.script.log(self.command, path, "models", body)
            listing = {"object": "list", "data": [{"id": "mock-model", "object": "model"}]}
            self._send(200, "application/json", json.dumps(listing))
        else:
            self.script.log(self.command, path, "unknown", body)
            error = {"error": {"code": 404, "message": "scripted model server: no " + route}}
            self._send(404, "application/json", json.dumps(error))

    def _chat(self, path: str, body: str) -> None:
        request = _json(body)
        kind, text = openai_reply(self.script, request)
        self.script.log(self.command, path, kind, body)
        model = request.get("model") or "mock-model"
        head = {"id": "chatcmpl-scripted", "created": int(time.time()), "model": model}
        if kind == "tool":
            call = {
                "id": "call_scripted_1",
                "type": "function",
                "function": {
                    "name": "write_file",
                    "arguments": json.dumps(self.script.tool_args()),
                },
            }
            delta = {"role": "assistant", "content": None, "tool_calls": [{"index": 0, **call}]}
            message = {"role": "assistant", "content": None, "tool_calls": [call]}
            finish = "tool_calls"
        else:
            delta = {"role": "assistant", "content": text}
            message = {"role": "assistant", "content": text}
            finish = "stop"
        if request.get("stream"):
            chunk = {**head, "object": "chat.completion.chunk"}
            events = [
                {**chunk, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
                {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]},
                {**chunk, "choices": [], "usage": USAGE_OPENAI},
            ]
            self._sse([f"data: {json.dumps(e)}\n\n" for e in events] + ["data: [DONE]\n\n"])
        else:
            choice = {"index": 0, "message": message, "finish_reason": finish}
            reply = {
                **head,
                "object": "chat.completion",
                "choices": [choice],
                "usage": USAGE_OPENAI,
            }
            self._send(200, "application/json", json.dumps(reply))

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = handle_any


def _watch_parent(parent: int, server: ThreadingHTTPServer, deadline: float) -> None:
    while os.getppid() == parent and time.time() < deadline:
        time.sleep(0.5)
    server.shutdown()


def serve(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Scripted model server for real-CLI tests.")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--log", required=True, help="JSONL request log")
    parser.add_argument("--target", required=True, help="absolute file_path of the write_file call")
    parser.add_argument("--content", default="hi\n")
    parser.add_argument("--marker", required=True, help="text in the brief that starts the script")
    parser.add_argument("--final", required=True, help="final text, once a tool result came back")
    parser.add_argument(
        "--lifetime", type=float, default=900.0, help="exit after this many seconds"
    )
    args = parser.parse_args(argv)
    script = Script(args.target, args.content, args.marker, args.final, args.log)
    handler = type("ScriptedHandler", (Handler,), {"script": script})
    server = ThreadingHTTPServer(("127.0.0.1", args.port), handler)
    server.daemon_threads = True
    deadline = time.time() + args.lifetime
    watcher = threading.Thread(
        target=_watch_parent, args=(os.getppid(), server, deadline), daemon=True
    )
    watcher.start()
    sys.stdout.write(f"PORT {server.server_address[1]}\n")
    sys.stdout.flush()
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        server.server_close()


if __name__ == "__main__":
    serve()
