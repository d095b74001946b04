"""A run's token usage in one shape, whatever shape its CLI reports it in.

Every relay whose implementer reports usage writes `tokenUsage` into its
result, beside the fields the Node relay writes (Claude's `usage` and
`totalCostUsd`, OpenCode's `cost`, …), which keep their own names and shapes:

    {"inputTokens", "cachedInputTokens", "outputTokens", "reasoningTokens",
     "totalTokens", "costUsd"}

each a number, or null where the CLI does not say (see `usage_summary`).
"""

from __future__ import annotations

#: The fields of a result's `tokenUsage`, in order.
TOKEN_USAGE_FIELDS = (
    "inputTokens", "cachedInputTokens", "outputTokens", "reasoningTokens", "totalTokens",
    "costUsd",
)  # fmt: skip
#: The names CLIs give each count, tried in order ("a.b": field b of object a).
_INPUT = ("input_tokens", "inputTokens", "prompt_tokens", "promptTokens", "input")
_OUTPUT = ("output_tokens", "outputTokens", "completion_tokens", "completionTokens", "output")
_TOTAL = ("total_tokens", "totalTokens", "total")
_REASONING = ("reasoning_output_tokens", "reasoning_tokens", "reasoningTokens", "thoughtTokens",
              "reasoning")  # fmt: skip
#: Cached input counted inside the input count, as OpenAI's API counts it (Codex, Gemini).
_CACHED = ("cached_input_tokens", "cachedInputTokens", "cached_tokens", "cached")
#: Cache reads and writes, counted apart from the input count as Anthropic's API does
#: (Claude, OpenCode, Pi) unless the adapter says its CLI counts them inside.
_CACHE_READ = ("cache_read_input_tokens", "cacheReadTokens", "cache_read_tokens", "cacheRead",
               "cachedReadTokens", "cache.read")  # fmt: skip
_CACHE_WRITE = ("cache_creation_input_tokens", "cacheWriteTokens", "cache_write_tokens",
                "cacheWrite", "cache.write")  # fmt: skip
_COST = ("total_cost_usd", "cost_usd", "costUsd", "cost.total", "cost")
#: Counts past this are not counts (the largest integer a JSON reader keeps exact).
_COUNT_LIMIT = 2**53


def _first(raw: dict, names: tuple[str, ...]):
    for name in names:
        outer, _, inner = name.partition(".")
        value = raw.get(outer)
        if inner:
            value = value.get(inner) if isinstance(value, dict) else None
        if value is not None:
            return value
    return None


def _count(value) -> int | None:
    """A token count: a whole number from 0 up (12.0 reads as 12), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not value.is_integer():
        return None
    return int(value) if 0 <= value < _COUNT_LIMIT else None


def _usd(value) -> float | int | None:
    """A cost: a finite number from 0 up, else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value if 0 <= value < float("inf") else None


def add_counts(summed: dict | None, step: dict, shape: dict) -> dict:
    """`summed` (None: nothing yet) plus one step's usage as the CLI reports it per step,
    for the keys of `shape` (counts, and objects of counts such as a cache's)."""
    if summed is None:
        summed = {key: add_counts(None, {}, inner) if isinstance(inner, dict) else 0
                  for key, inner in shape.items()}  # fmt: skip
    for key, inner in shape.items():
        value = step.get(key)
        if isinstance(inner, dict):
            if isinstance(value, dict):
                add_counts(summed[key], value, inner)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            summed[key] += value
    return summed


def usage_summary(raw, cost=None, cache_inside_input: bool = False) -> dict | None:
    """A result's `tokenUsage` from one usage object as a CLI reports it; None when it
    gives no count and no cost.

    inputTokens counts every input token, cached ones included: cache reads and
    writes a CLI counts apart from its input are added in (unless
    `cache_inside_input`). cachedInputTokens is the part of the input read from
    the cache; reasoningTokens the reasoning tokens as the CLI counts them;
    totalTokens the CLI's own total, else inputTokens + outputTokens; costUsd the
    cost the CLI reported (`cost` when the adapter read it elsewhere). What the CLI
    does not say is null.
    """
    raw = raw if isinstance(raw, dict) else {}
    given = _count(_first(raw, _INPUT))
    read, written = _count(_first(raw, _CACHE_READ)), _count(_first(raw, _CACHE_WRITE))
    extra = 0 if cache_inside_input else (read or 0) + (written or 0)
    inputs = None if given is None and not extra else (given or 0) + extra
    cached = _count(_first(raw, _CACHED))
    outputs = _count(_first(raw, _OUTPUT))
    total = _count(_first(raw, _TOTAL))
    if total is None and inputs is not None and outputs is not None:
        total = inputs + outputs
    spent = _usd(cost) if cost is not None else _usd(_first(raw, _COST))
    values = (inputs, cached if cached is not None else read, outputs,
              _count(_first(raw, _REASONING)), total, spent)  # fmt: skip
    if all(value is None for value in values):
        return None
    return dict(zip(TOKEN_USAGE_FIELDS, values, strict=True))
