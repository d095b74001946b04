"""A scripted model server on 127.0.0.1 for the real-CLI tests.

It speaks just enough of four HTTP APIs for a coding CLI to run one turn:

* the Gemini API (`gemini`): `POST /v1beta/models/<m>:streamGenerateContent?alt=sse`,
  `:generateContent` and `:countTokens`;
* OpenAI chat completions (`qwen`, `grok`, `opencode`): `POST <base>/chat/completions`,
  streamed (SSE) or not, and `GET <base>/models`;
* OpenAI Responses (`codex`): `POST <base>/responses`, streamed;
* Anthropic Messages (`claude`): `POST <base>/v1/messages`, streamed or not, and
  `POST <base>/v1/messages/count_tokens`.

The script: the first main-conversation call (its user text contains --marker and
no tool result is present yet) is answered with one tool call that writes
--content to --target. The tool is the first file-writing one the request offers
(`write_file`, `Write`, `write`, `create_file`), else its first shell tool
(`exec_command`, `Bash`, `run_terminal_command`, `run_shell_command`, `bash`,
`shell`), whose command is a `printf` into the target; its arguments are filled
in from the tool's own parameter schema. A request that offers tools but
neither kind (a read-only tool set) still gets a `write_file` call, which the
CLI must refuse; one that offers no tools at all is a side request. With
`--via shell` the shell tool is taken even when a file-writing one is offered.
Once a tool result is present (a Gemini `functionResponse` part, an OpenAI
`role: "tool"` message, a Responses `function_call_output` item, an Anthropic
`tool_result` block) the answer is the final text, --final.

Anything else that asks for a model reply gets plain text: a side request of the
CLI (a router, a memory agent, a next-speaker check, a title), or a small JSON
object when it asks for JSON, or a call of the one function it forces with
`tool_choice`. Other paths get a 404.

Every request is appended to --log as one JSON line: method, path, the reply
kind (`tool`, `final`, `plain`, `json`, `forced`, `count`, `models`, `unknown`),
the tool called (for `tool`) and the body. Run as `python modelserver.py --log
FILE --target PATH ...`; it binds a free port (or --port) and prints `PORT <n>`
on stdout once it listens. It exits on SIGTERM, when its parent goes away, or
after --lifetime seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PLAIN_TEXT = "Plain reply from the scripted model server."
USAGE_GEMINI = {"promptTokenCount": 11, "candidatesTokenCount": 3, "totalTokenCount": 14}
USAGE_OPENAI = {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14}
USAGE_RESPONSES = {
    "input_tokens": 11,
    "input_tokens_details": {"cached_tokens": 0},
    "output_tokens": 3,
    "output_tokens_details": {"reasoning_tokens": 0},
    "total_tokens": 14,
}
USAGE_ANTHROPIC = {"input_tokens": 11, "output_tokens": 3}
#: Marks a side agent's conversation that happens to quote the main one (qwen's memory agent).
SIDE_AGENT_MARKS = ("managed memory", "memory extraction")
#: Tools that write a file, then tools that run a shell command, in order of preference.
WRITE_TOOLS = ("write_file", "Write", "write", "create_file")
SHELL_TOOLS = (
    "exec_command",
    "Bash",
    "run_terminal_command",
    "run_shell_command",
    "bash",
    "shell",
)
#: The call made when a request offers no tool that writes.
FALLBACK_TOOL = "write_file"
PATH_KEYS = ("file_path", "filePath", "path", "absolute_path")
CONTENT_KEYS = ("content", "contents", "text")
COMMAND_KEYS = ("cmd", "command")


class Script:
    """What the scripted model says; shared by every handler thread."""

    def __init__(
        self, target: str, content: str, marker: str, final: str, log: str, via: str = "any"
    ) -> None:
        self.target = target
        self.via = via
        self.content = content
        self.marker = marker
        self.final = final
        self.log_path = log
        self._lock = threading.Lock()

    def shell_command(self) -> str:
        return f"printf '%s' {shlex.quote(self.content)} > {shlex.quote(self.target)}"

    def call(self, offered: dict[str, dict]) -> tuple[str, dict]:
        """(tool name, arguments) of the one write, given {name: parameter schema} offered."""
        for name in WRITE_TOOLS if self.via == "any" else ():
            if name in offered:
                return name, self._write_args(offered[name])
        for name in SHELL_TOOLS:
            if name in offered:
                return name, self._shell_args(offered[name])
        return FALLBACK_TOOL, {"file_path": self.target, "content": self.content}

    def _write_args(self, schema: dict) -> dict:
        props = _properties(schema)
        path_key = next((k for k in PATH_KEYS if k in props), "file_path")
        content_key = next((k for k in CONTENT_KEYS if k in props), "content")
        return {path_key: self.target, content_key: self.content}

    def _shell_args(self, schema: dict) -> dict:
        props = _properties(schema)
        key = next((k for k in COMMAND_KEYS if k in props), "command")
        command = self.shell_command()
        if str((props.get(key) or {}).get("type", "")).lower() == "array":
            value: object = ["bash", "-c", command]
        else:
            value = command
        args = {key: value}
        if "description" in props:
            args["description"] = "Write the requested file"
        return args

    def log(self, method: str, path: str, kind: str, body: str, tool: str | None = None) -> None:
        entry = {"t": time.time(), "method": method, "path": path, "kind": kind, "body": body}
        if tool is not None:
            entry["tool"] = tool
        with self._lock, open(self.log_path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(entry) + "\n")


def _json(text: str):
    try:
        value = json.loads(text or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _properties(schema) -> dict:
    props = schema.get("properties") if isinstance(schema, dict) else None
    return props if isinstance(props, dict) else {}


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


def _side(system_text: str) -> bool:
    lowered = system_text.lower()
    return any(mark in lowered for mark in SIDE_AGENT_MARKS)


# --- deciding the reply, one function per wire format ---------------------------------------


def gemini_reply(script: Script, request: dict) -> tuple[str, dict, str | None]:
    """(kind, the model's content part, tool) for a Gemini generateContent request."""
    config = request.get("generationConfig") or {}
    if config.get("responseMimeType") == "application/json":
        schema = config.get("responseJsonSchema") or config.get("responseSchema") or {}
        return "json", {"text": json.dumps(_schema_value(schema))}, None
    contents = request.get("contents") or []
    has_result = any(
        isinstance(part, dict) and "functionResponse" in part
        for turn in contents
        if isinstance(turn, dict)
        for part in turn.get("parts") or []
    )
    side = _side(_texts(request.get("systemInstruction")))
    if has_result and not side:
        return "final", {"text": script.final}, None
    offered = {
        str(declaration.get("name")): declaration.get("parametersJsonSchema")
        or declaration.get("parameters")
        or {}
        for group in request.get("tools") or []
        if isinstance(group, dict)
        for declaration in group.get("functionDeclarations") or []
        if isinstance(declaration, dict)
    }
    if script.marker in _texts(contents) and offered and not side:
        name, args = script.call(offered)
        return "tool", {"functionCall": {"name": name, "args": args}}, name
    return "plain", {"text": PLAIN_TEXT}, None


def _chat_offered(request: dict) -> dict[str, dict]:
    offered = {}
    for tool in request.get("tools") or []:
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict) and function.get("name"):
            offered[str(function["name"])] = function.get("parameters") or {}
    return offered


def _forced(request: dict) -> str | None:
    """The function a chat request forces through `tool_choice` (a side task), if any."""
    choice = request.get("tool_choice")
    if isinstance(choice, dict) and isinstance(choice.get("function"), dict):
        name = choice["function"].get("name")
        return name if isinstance(name, str) else None
    return None


def chat_reply(script: Script, request: dict) -> tuple[str, str, dict | None]:
    """(kind, text, tool call) for an OpenAI chat completions request."""
    messages = [m for m in request.get("messages") or [] if isinstance(m, dict)]
    system = "\n".join(_texts(m.get("content")) for m in messages if m.get("role") == "system")
    side = _side(system)
    offered = _chat_offered(request)
    forced = _forced(request)
    if forced is not None:
        return "forced", "", {"name": forced, "args": _schema_value(offered.get(forced) or {})}
    has_result = any(m.get("role") == "tool" for m in messages)
    users = "\n".join(_texts(m.get("content")) for m in messages if m.get("role") == "user")
    if has_result and not side:
        return "final", script.final, None
    if script.marker in users and offered and not side:
        name, args = script.call(offered)
        return "tool", "", {"name": name, "args": args}
    return "plain", PLAIN_TEXT, None


def responses_reply(script: Script, request: dict) -> tuple[str, dict, str | None]:
    """(kind, the output item, tool) for an OpenAI Responses request."""
    items = [i for i in request.get("input") or [] if isinstance(i, dict)]
    has_result = any(
        i.get("type") in ("function_call_output", "custom_tool_call_output") for i in items
    )
    users = _texts([i.get("content") for i in items if i.get("role") == "user"])
    offered = {
        str(tool["name"]): tool.get("parameters") or {}
        for tool in request.get("tools") or []
        if isinstance(tool, dict) and tool.get("name")
    }
    if has_result:
        kind, text = "final", script.final
    elif script.marker in users and offered:
        name, args = script.call(offered)
        item = {
            "type": "function_call",
            "id": "fc_scripted_1",
            "call_id": "call_scripted_1",
            "name": name,
            "arguments": json.dumps(args),
            "status": "completed",
        }
        return "tool", item, name
    else:
        kind, text = "plain", PLAIN_TEXT
    item = {
        "type": "message",
        "id": f"msg_scripted_{kind}",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }
    return kind, item, None


def messages_reply(script: Script, request: dict) -> tuple[str, dict, str | None]:
    """(kind, the content block, tool) for an Anthropic Messages request."""
    messages = [m for m in request.get("messages") or [] if isinstance(m, dict)]
    has_result = any(
        isinstance(block, dict) and block.get("type") == "tool_result"
        for m in messages
        if isinstance(m.get("content"), list)
        for block in m["content"]
    )
    side = _side(_texts(request.get("system")))
    users = _texts([m.get("content") for m in messages if m.get("role") == "user"])
    offered = {
        str(tool["name"]): tool.get("input_schema") or {}
        for tool in request.get("tools") or []
        if isinstance(tool, dict) and tool.get("name")
    }
    if has_result and not side:
        return "final", {"type": "text", "text": script.final}, None
    if script.marker in users and offered and not side:
        name, args = script.call(offered)
        return (
            "tool",
            {"type": "tool_use", "id": "toolu_scripted_1", "name": name, "input": args},
            name,
        )
    return "plain", {"type": "text", "text": PLAIN_TEXT}, None


# --- the HTTP side -----------------------------------------------------------------------------


def _sse_named(events: list[tuple[str, dict]]) -> str:
    return "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events)


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

    def _sse(self, text: str) -> None:
        self._send(200, "text/event-stream", text)

    def handle_any(self) -> None:
        body = self._body()
        path = self.path
        route = path.split("?", 1)[0].rstrip("/")
        if ":streamGenerateContent" in route or ":generateContent" in route:
            self._gemini(path, route, body)
        elif ":countTokens" in route:
            self.script.log(self.command, path, "count", body)
            self._send(200, "application/json", json.dumps({"totalTokens": 11}))
        elif route.endswith("/chat/completions"):
            self._chat(path, body)
        elif route.endswith("/responses"):
            self._responses(path, body)
        elif route.endswith("/messages/count_tokens"):
            self.script.log(self.command, path, "count", body)
            self._send(200, "application/json", json.dumps({"input_tokens": 11}))
        elif route.endswith("/messages"):
            self._messages(path, body)
        elif route.endswith("/models"):
            self.script.log(self.command, path, "models", body)
            listing = {"object": "list", "data": [{"id": "mock-model", "object": "model"}]}
            self._send(200, "application/json", json.dumps(listing))
        else:
            self.script.log(self.command, path, "unknown", body)
            error = {"error": {"code": 404, "message": "scripted model server: no " + route}}
            self._send(404, "application/json", json.dumps(error))

    def _gemini(self, path: str, route: str, body: str) -> None:
        kind, part, tool = gemini_reply(self.script, _json(body))
        self.script.log(self.command, path, kind, body, tool)
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
            self._sse("data: " + json.dumps(reply) + "\r\n\r\n")
        else:
            self._send(200, "application/json", json.dumps(reply))

    def _chat(self, path: str, body: str) -> None:
        request = _json(body)
        kind, text, call = chat_reply(self.script, request)
        self.script.log(self.command, path, kind, body, call["name"] if kind == "tool" else None)
        model = request.get("model") or "mock-model"
        head = {"id": "chatcmpl-scripted", "created": int(time.time()), "model": model}
        if call is not None:
            wire = {
                "id": "call_scripted_1",
                "type": "function",
                "function": {"name": call["name"], "arguments": json.dumps(call["args"])},
            }
            delta = {"role": "assistant", "content": None, "tool_calls": [{"index": 0, **wire}]}
            message = {"role": "assistant", "content": None, "tool_calls": [wire]}
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
            self._sse("".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n")
        else:
            choice = {"index": 0, "message": message, "finish_reason": finish}
            reply = {
                **head,
                "object": "chat.completion",
                "choices": [choice],
                "usage": USAGE_OPENAI,
            }
            self._send(200, "application/json", json.dumps(reply))

    def _responses(self, path: str, body: str) -> None:
        request = _json(body)
        kind, item, tool = responses_reply(self.script, request)
        self.script.log(self.command, path, kind, body, tool)
        response = {
            "id": "resp_scripted",
            "object": "response",
            "created_at": int(time.time()),
            "model": request.get("model") or "mock-model",
            "status": "in_progress",
            "output": [],
        }
        done = {**response, "status": "completed", "output": [item], "usage": USAGE_RESPONSES}
        events = [
            ("response.created", {"type": "response.created", "response": response}),
            (
                "response.output_item.added",
                {"type": "response.output_item.added", "output_index": 0, "item": item},
            ),
            (
                "response.output_item.done",
                {"type": "response.output_item.done", "output_index": 0, "item": item},
            ),
            ("response.completed", {"type": "response.completed", "response": done}),
        ]
        self._sse(_sse_named(events))

    def _messages(self, path: str, body: str) -> None:
        request = _json(body)
        kind, block, tool = messages_reply(self.script, request)
        self.script.log(self.command, path, kind, body, tool)
        model = request.get("model") or "claude-scripted"
        stop = "tool_use" if block["type"] == "tool_use" else "end_turn"
        message = {
            "id": "msg_scripted",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [block],
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": USAGE_ANTHROPIC,
        }
        if not request.get("stream"):
            self._send(200, "application/json", json.dumps(message))
            return
        opening = {**message, "content": [], "stop_reason": None, "usage": {**USAGE_ANTHROPIC}}
        opening["usage"]["output_tokens"] = 0
        if block["type"] == "tool_use":
            start = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        else:
            start = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        events = [
            ("message_start", {"type": "message_start", "message": opening}),
            (
                "content_block_start",
                {"type": "content_block_start", "index": 0, "content_block": start},
            ),
            ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": USAGE_ANTHROPIC["output_tokens"]},
                },
            ),
            ("message_stop", {"type": "message_stop"}),
        ]
        self._sse(_sse_named(events))

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = handle_any


def _watch_parent(parent: int, server: ThreadingHTTPServer, deadline: float) -> None:
    while os.getppid() == parent and time.time() < deadline:
        time.sleep(0.5)
    server.shutdown()


def serve(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Scripted model server for real-CLI tests.")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--log", required=True, help="JSONL request log")
    parser.add_argument("--target", required=True, help="absolute path of the file to write")
    parser.add_argument("--content", default="hi\n")
    parser.add_argument("--marker", required=True, help="text in the brief that starts the script")
    parser.add_argument("--final", required=True, help="final text, once a tool result came back")
    parser.add_argument(
        "--via",
        choices=("any", "shell"),
        default="any",
        help="any: a file-writing tool first, else a shell tool; shell: a shell tool only",
    )
    parser.add_argument(
        "--lifetime", type=float, default=900.0, help="exit after this many seconds"
    )
    args = parser.parse_args(argv)
    script = Script(args.target, args.content, args.marker, args.final, args.log, args.via)
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
