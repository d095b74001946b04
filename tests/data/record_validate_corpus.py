"""Make tests/data/validate_corpus.json: fleet documents and the Node original's verdicts.

The documents come from a fixed seed, so a rerun makes the same corpus. Each
is validated by the Node original (`node config.mjs validate doc.json`, run in
a scratch directory so the label is always `doc.json`), and its exit code and
output are recorded: `lanes` (in the order Node printed them) when it
accepted the document, `error` (stderr without the `config.mjs: ` prefix)
when it refused it. test_validate_fuzz.py checks ours against those verdicts.

This script does not fetch Node or the original; point it at a checkout:

    python tests/data/record_validate_corpus.py \\
        /path/to/delegate-skills/skills/delegate-setup/scripts/config.mjs

Recorded with Node v20 against amElnagdy/delegate-skills 2ecfa84.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

SEED = 20250607
COUNT = 300
OUT = Path(__file__).with_name("validate_corpus.json")

IMPLEMENTERS = {
    "claude": ["model", "effort", "timeout", "readOnly"],
    "cline": ["provider", "model", "timeout"],
    "codex": ["model", "effort", "sandbox", "timeout", "readOnly"],
    "commandcode": ["model", "effort", "timeout", "readOnly"],
    "opencode": ["model", "variant", "timeout", "readOnly"],
    "agy": ["model", "effort", "timeout", "readOnly"],
    "grok": ["model", "effort", "sandbox", "timeout", "readOnly"],
    "kimi": ["model", "timeout"],
    "qoder": ["model", "permissionMode", "timeout", "readOnly"],
    "vibe": ["timeout", "readOnly"],
    "cursor": ["model", "force", "timeout", "readOnly"],
    "pi": ["provider", "model", "timeout", "readOnly"],
    "omp": ["provider", "model", "effort", "timeout", "readOnly"],
    "aider": ["model", "timeout", "readOnly"],
    "copilot": ["model", "effort", "timeout", "readOnly"],
    "warp": ["model", "timeout"],
    "zcode": ["permissionMode", "timeout", "readOnly"],
}
DIALS = ["model", "effort", "variant", "timeout", "readOnly", "sandbox", "permissionMode",
         "force", "provider"]  # fmt: skip
BOGUS_IMPLEMENTERS = ["", "Claude", "codex ", "toString", "__proto__", "constructor", "gemini"]
POOLS = {
    "model": ["opus", "gpt-5", "a/b", "opencode/grok", "x y", "[1m]", "claude-opus-4[1m]",
              "m@v", "a,b=c", "/x", "a/", "a//", "-m", "opus\n", " ", "\u00fc", "a:b",
              "a/b/c", "x&y", " lead", "\u00a0", "gpt-5.1-codex"],
    "provider": ["openai", "google", "a b", " ", "\u00a0", "\ufeff", "x\n", "anthropic"],
    "effort": ["low", "medium", "high", "xhigh", "max", "ultracode", "off", "auto",
               "minimal", "very fast", "Fast-1", "1fast", "ultra_code", "high\n", "HIGH"],
    "variant": ["high", "x&y", "a/b", "-v", "max:1", "v\n"],
    "timeout": ["30m", "1h30m", "596h31m23s", "596h31m24s", "0s", "0h0m1s", "10", "1h30",
                "h", "m", "1h1h", "\u0663m", "35791m", "35792m", "2147483s", "2147484s",
                "00001s", "99999999999999999999h", "1m\n", " 5m"],
    "sandbox": ["read-only", "workspace-write", "danger-full-access", "workspace", "off",
                "Read-only", "read-only "],
    "permissionMode": ["default", "accept_edits", "auto", "bypass_permissions", "dont_ask",
                       "plan", "yolo", "build", "edit", "PLAN", "plan\n"],
}  # fmt: skip
ODD_VALUES = [True, False, None, 0, 1, 1.5, [], {}, "", "true", [1], {"a": 1}]
LANE_NAMES = ["a", "feature", "tests", "review", "10", "2", "01", "0", "-x", "_x", ".x",
              "a b", "\u00fc", "x\n", "A.b_c-9", "", "x" * 120, "4294967295", "4294967294",
              "__proto__", "9007199254740993", "a/b"]  # fmt: skip


#: A value every implementer that has the dial accepts.
SAFE = {"model": "a/b", "provider": "openai", "effort": "high", "variant": "high",
        "timeout": "30m", "sandbox": "read-only", "permissionMode": "plan"}  # fmt: skip


def dial_value(rng: random.Random, dial: str, clean: bool = False):
    if clean and dial in SAFE:
        return SAFE[dial]
    if dial in ("readOnly", "force"):
        return rng.choice([True, False, True, False, "true", 1, None])
    if rng.random() < 0.12 or dial not in POOLS:
        return rng.choice([*ODD_VALUES, "x"])
    return rng.choice(POOLS[dial])


def lane(rng: random.Random) -> dict:
    if rng.random() < 0.1:
        impl = rng.choice(BOGUS_IMPLEMENTERS)
        supports = DIALS
    else:
        impl = rng.choice(list(IMPLEMENTERS))
        supports = IMPLEMENTERS[impl]
    dials = rng.sample(supports, rng.randint(0, len(supports)))
    if rng.random() < 0.15:
        dials.append(rng.choice([*DIALS, "colour", "Model", "implementer"]))
    clean = rng.random() < 0.5
    entry = {"implementer": impl}
    if rng.random() < 0.05:
        entry = {}
    for dial in dials:
        entry[dial] = impl if dial == "implementer" else dial_value(rng, dial, clean)
    if rng.random() < 0.25:  # implementer somewhere other than first
        items = list(entry.items())
        rng.shuffle(items)
        entry = dict(items)
    return entry


def plausible(rng: random.Random) -> dict:
    lanes = {}
    for _ in range(rng.randint(0, 3)):
        name = rng.choice(LANE_NAMES[:6]) if rng.random() < 0.8 else rng.choice(LANE_NAMES)
        lanes[name] = lane(rng)
    return {"version": "delegate-fleet.v1", "lanes": lanes}


def structural(rng: random.Random):
    good = plausible(rng)
    kind = rng.randrange(9)
    if kind == 0:
        good["version"] = rng.choice(["delegate-fleet.v2", "", None, 1, "Delegate-fleet.v1"])
    elif kind == 1:
        del good["version"]
    elif kind == 2:
        good["lanes"] = rng.choice([None, [], [{"implementer": "kimi"}], "lanes", 0, True])
    elif kind == 3:
        del good["lanes"]
    elif kind == 4:
        good["lanes"][rng.choice(LANE_NAMES)] = rng.choice(ODD_VALUES)
    elif kind == 5:
        good["extra"] = rng.choice(ODD_VALUES)
    elif kind == 6:
        return rng.choice([[], [good], "delegate-fleet.v1", 0, None, True])
    elif kind == 7:
        names = rng.sample(LANE_NAMES, 4)
        good["lanes"] = {name: {"implementer": "kimi"} for name in names}
    else:
        good = {"lanes": good["lanes"], "version": good.get("version")}
    return good


def random_json(rng: random.Random, depth: int = 0):
    roll = rng.random()
    if depth > 3 or roll < 0.4:
        return rng.choice([*ODD_VALUES, "delegate-fleet.v1", "kimi", "a"])
    if roll < 0.6:
        return [random_json(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    keys = ["version", "lanes", "implementer", "model", "a", "10", "timeout"]
    return {rng.choice(keys): random_json(rng, depth + 1) for _ in range(rng.randint(0, 3))}


RAW_TEXTS = [
    '{"version":"delegate-fleet.v1","lanes":{"a":{"implementer":"kimi"},"a":{"implementer":"nope"}}}',
    '{"version":"delegate-fleet.v1","lanes":{"a":{"implementer":"nope"},"a":{"implementer":"kimi"}}}',
    '{"version":"delegate-fleet.v1","version":"delegate-fleet.v2","lanes":{}}',
    '{"version":"delegate-fleet.v2","version":"delegate-fleet.v1","lanes":{}}',
    '{"version":"delegate-fleet.v1","lanes":{"b":{"implementer":"kimi"},"3":{"implementer":"kimi"},"1":{"implementer":"kimi"}}}',
    '{"version":"delegate-fleet.v1","lanes":{"x":{"implementer":"kimi","model":"\\ud800"}}}',
    '{"version":"delegate-fleet.v1","lanes":{"x":{"implementer":"claude","model":"a\\u0000"}}}',
    '{"version":"delegate-fleet.v1","lanes":{"x":{"implementer":"vibe","readOnly":1e400}}}',
    '{"version":"delegate-fleet.v1","lanes":{"x":{"implementer":"kimi","timeout":"30m"}},}',
    '{"version":"delegate-fleet.v1","lanes":{"x":{"implementer":"kimi"}}} trailing',
    '{"version":"delegate-fleet.v1","lanes":{}}\n\n\t ',
    '\ufeff{"version":"delegate-fleet.v1","lanes":{}}',
    '{"version":"delegate-fleet.v1","lanes":{"n":{"implementer":"kimi","timeout":NaN}}}',
    "{'version':'delegate-fleet.v1','lanes':{}}",
    '// comment\n{"version":"delegate-fleet.v1","lanes":{}}',
    '{"version":"delegate-fleet.v1","lanes":{"x":{"implementer":"kimi"}}',
    '{"version":"delegate-fleet\\u002ev1","lanes":{"\\u0061":{"implementer":"k\\u0069mi"}}}',
    '{"version":"delegate-fleet.v1","lanes":{"x":{"implementer":"vibe","readOnly":true,"readOnly":"yes"}}}',
    '{"version":"delegate-fleet.v1","lanes":{"x":{"implementer":"codex","readOnly":true,"sandbox":"danger-full-access"}}}',
    '{"version":"delegate-fleet.v1","lanes":{"x":{"implementer":"cursor","readOnly":true,"force":true}}}',
    '{"version":"delegate-fleet.v1","lanes":{"x":{"implementer":"qoder","readOnly":true,"permissionMode":"auto"}}}',
    '{"version":"delegate-fleet.v1","lanes":{"x":{"implementer":"grok","readOnly":true,"sandbox":"off"}}}',
    '{"version":"delegate-fleet.v1","lanes":{"x":{"implementer":"opencode"}}}',
    '{"version":"delegate-fleet.v1","lanes":{"x":{"implementer":"opencode","model":"a/"}}}',
    '{"version":"delegate-fleet.v1","lanes":{"x":{"implementer":"qoder","model":"\\u2028"}}}',
    '{"version":"delegate-fleet.v1","lanes":{"x":{"implementer":"qoder","model":"\\ufeff"}}}',
    '{"version":"delegate-fleet.v1","lanes":{"x":{"implementer":"qoder","model":"\\u0085"}}}',
    '{"version":"delegate-fleet.v1","lanes":{"x":{"implementer":"kimi","timeout":"\\uff11m"}}}',
    "[" * 900 + "]" * 900,
    '{"version":"delegate-fleet.v1","lanes":{"x":{"implementer":"kimi"}}}\u2028',
    '{"version":"delegate-fleet.v1","lanes":{"x":{"implementer":"kimi","model":"\\/x"}}}',
    "",
    " ",
    "null",
    "1",
    '"delegate-fleet.v1"',
]


def documents(rng: random.Random) -> list[dict]:
    docs = [{"text": text} for text in RAW_TEXTS]
    while len(docs) < COUNT:
        roll = rng.random()
        if roll < 0.55:
            doc = plausible(rng)
        elif roll < 0.75:
            doc = structural(rng)
        elif roll < 0.88:
            doc = random_json(rng)
        else:
            raw = bytes(rng.randrange(256) for _ in range(rng.randint(0, 40)))
            if rng.random() < 0.5:
                raw = (
                    b'{"version":"delegate-fleet.v1","lanes":{"'
                    + raw
                    + b'":{"implementer":"kimi"}}}'
                )
            docs.append({"hex": raw.hex()})
            continue
        indent = rng.choice([None, None, 2])
        docs.append({"text": json.dumps(doc, indent=indent, ensure_ascii=rng.random() < 0.5)})
    return docs


def record(config_mjs: str, doc: dict, scratch: str) -> dict:
    path = os.path.join(scratch, "doc.json")
    with open(path, "wb") as handle:
        handle.write(bytes.fromhex(doc["hex"]) if "hex" in doc else doc["text"].encode("utf-8"))
    done = subprocess.run(
        ["node", config_mjs, "validate", "doc.json"], cwd=scratch, capture_output=True, timeout=60
    )
    if done.returncode == 0:
        return {**doc, "ok": True, "lanes": json.loads(done.stdout)["lanes"]}
    err = done.stderr.decode("utf-8")
    assert done.returncode == 2 and err.startswith("config.mjs: ") and err.endswith("\n"), done
    return {**doc, "ok": False, "error": err[len("config.mjs: ") : -1]}


def main() -> None:
    config_mjs = os.path.abspath(sys.argv[1])
    rng = random.Random(SEED)
    with tempfile.TemporaryDirectory() as scratch:
        corpus = [record(config_mjs, doc, scratch) for doc in documents(rng)]
    OUT.write_text(json.dumps(corpus, indent=1, ensure_ascii=True) + "\n", encoding="utf-8")
    accepted = sum(entry["ok"] for entry in corpus)
    print(f"{len(corpus)} documents, {accepted} accepted, written to {OUT}")


if __name__ == "__main__":
    main()
