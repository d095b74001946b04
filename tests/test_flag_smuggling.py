"""A flag's value never becomes the implementer's own flag.

ENGINE_MESSAGE is what a relay says when no check of its own caught the value.

`--session --version` must not reach opencode as `--session` followed by
opencode's `--version`: every value flag of every relay refuses a value that
starts with `-` (exit 2, before anything is launched), and values with their
own shape are checked against it.
"""

from __future__ import annotations

import pytest
from relaykit import VALUE_FLAGS, Bench

CASES = [(key, flag) for key, flags in VALUE_FLAGS.items() for flag in flags]
#: Flags that had no check of their own: the engine's refusal is what stops them.
ENGINE_CAUGHT = [
    ("qoder", "--model"),
    ("aider", "--file"),
    ("aider", "--read"),
    ("aider", "--history-file"),
    ("agy", "--add-dir"),
    ("kimi", "--add-dir"),
    ("qoder", "--add-dir"),
    ("cursor", "--add-dir"),
    ("zcode", "--zcode-path"),
    ("codex", "--out-dir"),
]
ENGINE_MESSAGE = (
    "relay: {flag} requires a value; --version looks like an option "
    "(a path that starts with - can be written ./--version)\n"
)


@pytest.mark.parametrize(("key", "flag"), CASES, ids=[f"{k}{f}" for k, f in CASES])
def test_a_value_that_looks_like_an_option_is_refused(tmp_path, capfd, key, flag):
    bench = Bench(tmp_path, key)
    code, out, err = bench.in_process(capfd, flag, "--version")
    assert code == 2, (out, err)
    # One line naming the flag: the relay's own wording where it has one, else the engine's.
    assert err.count("\n") == 1 and err.startswith("relay: "), err
    assert flag in err or "--version" in err, err
    assert bench.fake.calls() == []
    assert not bench.out.exists()


@pytest.mark.parametrize(("key", "flag"), ENGINE_CAUGHT)
def test_the_engine_catches_what_no_relay_check_does(tmp_path, capfd, key, flag):
    bench = Bench(tmp_path, key)
    code, _out, err = bench.in_process(capfd, flag, "--version")
    assert (code, err) == (2, ENGINE_MESSAGE.format(flag=flag))


def test_the_table_above_is_every_value_flag(tmp_path):
    """A relay that gains a value flag must be added to relaykit.VALUE_FLAGS (and so be tested)."""
    from relaykit import adapter

    for key, flags in VALUE_FLAGS.items():
        found = [flag.name for flag in adapter(key).flag_table() if flag.value]
        assert found == flags, key


@pytest.mark.parametrize(
    ("key", "args", "message"),
    [
        ("opencode", ["--session", "ses 1"], "--session contains unsupported characters"),
        ("opencode", ["--agent", "plan;x"], "--agent contains unsupported characters"),
        ("vibe", ["--session", "a/b"], "--session contains unsupported characters"),
        ("vibe", ["--enabled-tools", "bash", "--enabled-tools", "x y"], "--enabled-tools"),
        ("agy", ["--conversation", "c 1"], "--conversation contains unsupported characters"),
        ("agy", ["--project", "p 1"], "--project contains unsupported characters"),
        ("agy", ["--model", "m\n"], "--model contains unsupported characters"),
        ("kimi", ["--model", "k m"], "--model contains unsupported characters"),
    ],
)
def test_values_that_reach_argv_keep_their_shape(tmp_path, capfd, key, args, message):
    bench = Bench(tmp_path, key)
    code, _out, err = bench.in_process(capfd, *args)
    assert code == 2
    assert err.startswith(f"relay: {message}")
    assert bench.fake.calls() == []


@pytest.mark.parametrize(
    ("key", "args", "expected"),
    [
        ("vibe", ["--enabled-tools", "re:^serena_.*$"], ["--enabled-tools", "re:^serena_.*$"]),
        ("vibe", ["--disabled-tools", "*_write"], ["--disabled-tools", "*_write"]),
        ("agy", ["--model", "Gemini 3 Pro (High)"], ["--model", "Gemini 3 Pro (High)"]),
    ],
)
def test_shaped_values_still_pass_through(tmp_path, key, args, expected):
    bench = Bench(tmp_path, key)
    bench.relay(*args)
    argv = bench.fake.run_call()["argv"]
    at = argv.index(expected[0])
    assert argv[at : at + 2] == expected
