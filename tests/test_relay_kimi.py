"""kimi: the brief in --prompt=, resume forms, stream-json messages, no read-only mode."""

from __future__ import annotations

import json
import os
import signal

import pytest
from conftest import fleet_doc, write_json
from fakes import alive, wait_for
from relaykit import Bench, argv_of

from delegate_skills.relay.main import load_adapter
from delegate_skills.relay.options import Usage

BRIEF_TOKEN = "--prompt=smoke brief: run until killed.\n"
HEAD = ["--output-format", "stream-json"]


@pytest.fixture
def bench(tmp_path, home):
    bench = Bench(tmp_path, "kimi")
    bench.script({})
    return bench


def lines(*events: dict) -> str:
    return "".join(json.dumps(e) + "\n" for e in events)


def test_default_run(bench):
    run = bench.relay()
    assert (run.code, bench.fake.run_call()["argv"]) == (0, [*HEAD, BRIEF_TOKEN]), run
    call = bench.fake.run_call()
    assert call["stdin"] == ""
    assert call["cwd"] == str(bench.work)
    result = run.result
    assert (result["status"], result["exitCode"], result["resumed"]) == ("completed", 0, False)
    assert result["sessionId"] is None
    assert "permission mode: auto" in run.out


@pytest.mark.parametrize(
    ("flags", "middle"),
    [
        (["--model", "kimi-k2"], ["-m", "kimi-k2"]),
        (["--resume-last"], ["--continue"]),
        (["--session", "session_f4472906"], ["--session", "session_f4472906"]),
        (["--model", "k", "--session", "s1"], ["-m", "k", "--session", "s1"]),
        (["--timeout", "5m"], []),
    ],
)
def test_argv(bench, flags, middle):
    assert argv_of(bench, *flags) == [*HEAD, *middle, BRIEF_TOKEN]


def test_add_dirs_resolve_against_cd_also_on_resume(bench, tmp_path):
    argv = argv_of(bench, "--add-dir", "../docs", "--resume-last", "--add-dir", "/abs/dir")
    assert argv == [
        *HEAD, "--continue", "--add-dir", str(tmp_path / "docs"), "--add-dir", "/abs/dir",
        BRIEF_TOKEN,
    ]  # fmt: skip


def test_brief_starting_with_a_dash_stays_bound_to_prompt(bench):
    bench.brief.write_text("--help me fix the parser")
    assert argv_of(bench)[-1] == "--prompt=--help me fix the parser"


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ["--resume-last", "--session", "s1"],
            "--resume-last and --session are mutually exclusive; pass only one",
        ),
        (
            ["--session", "-x"],
            "--session contains unsupported characters (allowed: letters, digits, . _ : -)",
        ),
        (["--session"], "--session requires a value"),
        (["--yolo"], "unknown option: --yolo"),
        (
            ["--timeout", "1.5s"],
            '--timeout "1.5s" is invalid or too long; use a positive h/m/s duration no longer '
            "than about 24 days",
        ),
    ],
)
def test_usage_errors(bench, flags, message):
    run = bench.relay(*flags)
    assert (run.code, run.err) == (2, f"relay: {message}\n")
    assert not bench.out.exists()


def test_oversized_brief_is_refused(bench):
    bench.brief.write_text("x" * (120 * 1024 + 600))
    run = bench.relay()
    assert run.code == 2
    assert run.err == (
        "relay: brief is 121KB; kimi passes the prompt as a CLI argument, which the OS caps "
        "(~128KB on Linux). Trim it, or have kimi read large context from the workspace "
        "instead of inlining it.\n"
    )
    assert not bench.out.exists()


def test_brief_at_the_cap_is_accepted(bench):
    bench.brief.write_text("x" * (120 * 1024))
    assert bench.relay().code == 0


def test_nul_in_the_brief_is_refused(bench):
    bench.brief.write_text("a\0b")
    run = bench.relay()
    assert (run.code, run.err) == (
        2,
        "relay: brief contains a NUL byte, which cannot be passed in --prompt\n",
    )
    assert not bench.out.exists()


def test_read_only_lane_is_refused(bench, global_config):
    # The fleet validator already refuses the dial for kimi, before any run.
    write_json(global_config, fleet_doc({"review": {"implementer": "kimi", "readOnly": True}}))
    run = bench.relay("--lane", "review")
    assert run.code == 2
    assert "kimi does not support readOnly" in run.err
    assert not bench.out.exists()


def test_read_only_dial_refusal_says_kimi_has_no_read_only_mode():
    with pytest.raises(Usage) as caught:
        load_adapter("kimi").refuse_dials("review", {"readOnly": True})
    assert "kimi has no read-only mode" in str(caught.value)
    load_adapter("kimi").refuse_dials("review", {"model": "k"})


def test_help_says_there_is_no_read_only_mode(bench):
    run = bench.relay("--help")
    assert "kimi has no read-only mode" in run.out
    options = run.out.split("Options:", 1)[1]
    assert "Refused: kimi has no read-only mode." in options


def test_messages_and_session_hint(bench):
    events = lines(
        {"role": "assistant", "content": "Looking."},
        {"role": "tool", "content": "file list"},
        {"role": "assistant", "content": [{"type": "text", "text": "ignored"}]},
        {"role": "assistant", "content": "Done: fixed it."},
        {
            "role": "meta",
            "type": "session.resume_hint",
            "session_id": "session_f4472906",
            "content": "To resume this session: kimi -r session_f4472906",
        },
    )
    bench.script({"actions": [{"stdout": events}]})
    run = bench.relay("--session", "session_old")
    result = run.result
    assert result["finalMessage"] == "Looking.\n\nDone: fixed it."
    assert (bench.out / "final.txt").read_text() == "Looking.\n\nDone: fixed it."
    assert result["sessionId"] == "session_f4472906"
    assert result["resumed"] is True
    assert "session id (resume with: --session session_f4472906)" in run.out
    assert "mode: resumed an existing session" in run.out


def test_empty_chunks_keep_their_place(bench):
    events = lines({"role": "assistant", "content": ""}, {"role": "assistant", "content": "Done"})
    bench.script({"actions": [{"stdout": events}]})
    assert bench.relay().result["finalMessage"] == "\n\nDone"


def test_session_stays_null_without_a_hint(bench):
    assert bench.relay("--session", "session_1").result["sessionId"] is None


def test_exit_zero_without_messages_is_completed(bench):
    run = bench.relay()
    assert (run.result["status"], run.result["finalMessage"]) == ("completed", "")
    assert run.result["finalPath"] is None


def test_config_error_exit_is_kept(bench):
    bench.script(
        {
            "actions": [
                {
                    "stderr": 'error: failed to run prompt: config.invalid: Model "x" is not '
                    "configured in config.toml\n"
                }
            ],
            "exit": 1,
        }
    )
    run = bench.relay("--model", "x")
    assert (run.code, run.result["status"]) == (1, "failed")
    assert run.result["stderrTail"][0].startswith("error: failed to run prompt")


def test_lane_dials_apply_and_flags_win(bench, global_config):
    write_json(
        global_config,
        fleet_doc({"feature": {"implementer": "kimi", "model": "lane-model", "timeout": "5m"}}),
    )
    assert argv_of(bench, "--lane", "feature") == [*HEAD, "-m", "lane-model", BRIEF_TOKEN]
    assert bench.result["model"] == "lane-model"
    argv = argv_of(bench, "--lane", "feature", "--model", "flag-model")
    assert argv == [*HEAD, "-m", "flag-model", BRIEF_TOKEN]


def test_result_field_order(bench):
    bench.relay()
    assert list(bench.result) == [
        "schema", "lane", "laneSource", "tool", "workdir", "model", "resumed", "kimiVersion",
        "startedAt", "finishedAt", "briefPath", "finalPath", "eventsPath", "stderrPath",
        "status", "exitCode", "signal", "sessionId", "finalMessage", "touchedFiles", "changes", "overlap", "relayRunId", "implementerArgv",
    ]  # fmt: skip


def test_read_only_flag_is_refused_plainly(tmp_path, capfd):
    from relaykit import Bench

    bench = Bench(tmp_path, "kimi")
    code, _out, err = bench.in_process(capfd, "--read-only")
    assert code == 2
    assert err == (
        "relay: --read-only is not available: kimi has no read-only mode (its headless "
        "--prompt mode always runs with auto permissions); use an implementer with a "
        "read-only mode for a review\n"
    )


def test_a_timed_out_kimi_that_yields_leaves_nothing_running(bench):
    # kimi exits at the watchdog's SIGTERM; its own subprocess ignores it.
    child, grand = bench.pid_file("kimi.pid"), bench.pid_file("grand.pid")
    bench.script(
        {
            "on_term": {"exit": 0},
            "actions": [
                {"grandchild": {"ignore_term": True, "pid_file": str(grand)}},
                {"pid_file": str(child)},
                {"wait": "forever"},
            ],
        }
    )
    run = bench.relay("--timeout", "1s")
    assert run.code == 1, run
    result = run.result
    assert (result["status"], result["exitCode"], result["signal"]) == ("timeout", 1, None)
    assert (
        result["error"] == "kimi did not finish within --timeout 1s; killed by the relay watchdog"
    )
    pids = [int(child.read_text()), int(grand.read_text())]
    try:
        assert not alive(pids[0])
        wait_for(lambda: not alive(pids[1]), timeout=5)
    finally:
        for pid in pids:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
