"""Reading the Claude-style stream-json events (qodercli, cursor-agent and alike print them)."""

from __future__ import annotations


def text_blocks(content) -> list[str]:
    """The texts of the `{"type": "text", "text": …}` blocks of a message's content."""
    if not isinstance(content, list):
        return []
    return [
        block["text"]
        for block in content
        if isinstance(block, dict)
        and block.get("type") == "text"
        and isinstance(block.get("text"), str)
    ]


def is_init(event: dict) -> bool:
    return event.get("type") == "system" and event.get("subtype") == "init"
