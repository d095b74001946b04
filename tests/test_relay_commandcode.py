"""commandcode: --yolo or plan, NDJSON with a cut tail, and a guarded --out-dir."""

from __future__ import annotations

import json
import os
import signal
import stat
import sys
from pathlib import Path

import pytest
from conftest import commit_all, fleet_doc, git, write_json
from fakes import Fake, alive, relay, wait_for
from relaykit import BRIEF, DETECT_ONLY, Bench, adapter, finish, read_pid

from delegate_skills.relay.engine import Relay
from delegate_skills.relay.options import Usage

HEADLESS = ["-p", "--output-format", "json", "--skip-onboarding", "--no-auto-update", "-t"]
SESSION = "commandcode-session-1"
USAGE = {"inputTokens": 7, "outputTokens": 2, "cacheReadTokens": 1, "cacheWriteTokens": 0}
RESULT_LINE = {
    "type": "result",
    "subtype": "success",
    "sessionId": SESSION,
    "stopReason": "end_turn",
    "usage": USAGE,
    "durationMs": 42,
    "finalText": "fake commandcode completed",
}
PRIOR = {"schema": "delegate-relay.result.v1"}
NOT_PROVEN = (
    "relay: --out-dir contains relay artifacts without a prior delegate-relay.result.v1 result\n"
)


def event(kind: str, **fields) -> dict:
    return {"type": "event", "event": {"type": kind, **fields}}


EARLY = [
    event("run_start", sessionId=SESSION),
    event("message_start"),
    event("text_delta", delta="fake commandcode "),
    event("text_delta", delta="completed"),
    event("message_end", content=[{"type": "text", "text": "fake commandcode completed"}]),
    event("turn_end"),
]


def lines(*items) -> dict:
    return {"stdout": "".join(json.dumps(i) + "\n" for i in items)}


def success(result: dict = RESULT_LINE) -> dict:
    return {"actions": [lines(*EARLY, event("run_end", result={}), result)]}


@pytest.fixture
def bench(tmp_path, home, monkeypatch):
    monkeypatch.delenv("COMMANDCODE_BIN", raising=False)
    bench = Bench(tmp_path, "commandcode")
    bench.script(
        success(),
        env_keys=["HOME", "PATH", "COMMANDCODE_BIN", "SMOKE_PROVIDER_TOKEN", "SMOKE_SECRET_TOKEN"],
    )
    return bench


def run_cc(bench: Bench, *flags: str, env: dict | None = None, **extra: str):
    return bench.relay(*flags, env=env or bench.fake.env(**extra))


def argv_of(bench, *flags) -> list[str]:
    run = run_cc(bench, *flags)
    assert run.code == 0, run
    return bench.fake.calls("run")[-1]["argv"]


def tracked(bench: Bench) -> Bench:
    (bench.work / "tracked.txt").write_text("original\n")
    commit_all(bench.work)
    return bench


# ---------------------------------------------------------------- argv and brief


@pytest.mark.parametrize(
    ("flags", "tail", "read_only", "tools_all"),
    [
        ([], ["--yolo"], False, False),
        (["--read-only"], ["--permission-mode", "plan"], True, False),
        (["--tools-all"], ["--yolo", "--tools-all"], False, True),
        (["--session", SESSION], ["--yolo", "--resume", SESSION], False, False),
        (["--continue-last"], ["--yolo", "--continue"], False, False),
        (
            ["--model", "fake/model", "--effort", "high", "--max-turns", "7"],
            ["--yolo", "-m", "fake/model", "--effort", "high", "--max-turns", "7"],
            False,
            False,
        ),
        (["--read-only", "--tools-all"], ["--permission-mode", "plan"], True, False),
        (
            ["--max-turns", "7", "--session", "s-1", "--effort", "high", "--model", "fake/model"],
            ["--yolo", "--resume", "s-1", "-m", "fake/model", "--effort", "high", "--max-turns", "7"],
            False,
            False,
        ),
    ],
)  # fmt: skip
def test_argv_and_the_run(bench, flags, tail, read_only, tools_all):
    argv = argv_of(bench, *flags)
    assert argv == [*HEADLESS, *tail]
    call = bench.fake.run_call()
    assert (call["stdin"], call["cwd"]) == (BRIEF, str(bench.work))
    assert all("smoke brief" not in arg for arg in argv)
    result = bench.result
    assert (result["status"], result["finalMessage"], result["sessionId"]) == (
        "completed",
        "fake commandcode completed",
        SESSION,
    )
    assert (result["resultLine"], result["resultSubtype"], result["stopReason"]) == (
        "complete",
        "success",
        "end_turn",
    )
    assert (result["usage"]["outputTokens"], result["durationMs"]) == (2, 42)
    assert (result["readOnly"], result["toolsAll"]) == (read_only, tools_all)
    assert result["finalPath"] == str(bench.out / "final.txt")
    assert (bench.out / "final.txt").read_text().strip() == "fake commandcode completed"


def test_lane_dials_and_flag_wins(bench, global_config):
    write_json(
        global_config,
        fleet_doc(
            {
                "c": {
                    "implementer": "commandcode",
                    "readOnly": True,
                    "effort": "high",
                    "model": "v/m",
                }
            }
        ),
    )
    argv = argv_of(bench, "--lane", "c", "--model", "x/y")
    assert argv == [*HEADLESS, "--permission-mode", "plan", "-m", "x/y", "--effort", "high"]
    result = bench.result
    assert (result["lane"], result["laneSource"], result["readOnly"], result["model"]) == (
        "c",
        "global",
        True,
        "x/y",
    )
    assert result["autonomy"] == "plan (write/edit/shell withheld)"


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--effort", "very fast"], 'invalid --effort "very fast" (expected a non-empty bare token)'),
        (["--effort", "1x"], 'invalid --effort "1x" (expected a non-empty bare token)'),
        (["--model", "a b;c"], "--model contains unsupported characters (allowed: letters, digits, . _ : / -)"),
        (["--max-turns", "0"], 'invalid --max-turns "0" (expected a positive integer up to 99999)'),
        (["--max-turns", "01"], 'invalid --max-turns "01" (expected a positive integer up to 99999)'),
        (["--max-turns", "100000"], 'invalid --max-turns "100000" (expected a positive integer up to 99999)'),
        (["--keep-env", "PATH"], "--keep-env requires --clean-env"),
        (["--clean-env", "--keep-env", "BAD-NAME"], 'invalid --keep-env "BAD-NAME" (expected an environment variable name)'),
        (["--clean-env", "--keep-env", "SMOKE_NOT_SET"], '--keep-env "SMOKE_NOT_SET" is not set'),
        (["--timeout", "10000h"], '--timeout "10000h" is invalid or too long; use a positive h/m/s duration no longer than about 24 days'),
        (["--session", "abc", "--continue-last"], "--session and --continue-last are mutually exclusive; pass only one"),
        (["--session", "a/b"], "--session must be a session id (letters, digits, . _ : -)"),
        (["--yolo"], "unknown option: --yolo"),
    ],
)  # fmt: skip
def test_usage_errors(bench, flags, message):
    run = run_cc(bench, *flags)
    assert (run.code, run.err) == (2, f"relay: {message}\n")
    assert not bench.out.exists()


@pytest.mark.parametrize(
    ("configured", "message"),
    [
        ("", "on Windows COMMANDCODE_BIN must be the absolute path of the Command Code executable"),
        ("cmd", "on Windows COMMANDCODE_BIN must be the absolute path of the Command Code executable"),
        ("/system/cmd.exe", "COMMANDCODE_BIN points to the Windows command interpreter; set it to the Command Code executable"),
    ],
)  # fmt: skip
def test_windows_binary_guards(bench, monkeypatch, configured, message):
    monkeypatch.setattr(sys, "platform", "win32")
    monkeypatch.setenv("COMMANDCODE_BIN", configured)
    monkeypatch.setenv("COMSPEC", "/system/cmd.exe")
    with pytest.raises(Usage) as refused:
        Relay(adapter("commandcode")).configure(
            ["--brief", str(bench.brief), "--cd", str(bench.work)]
        )
    assert str(refused.value) == message


# ---------------------------------------------------------------- the binary and its environment


def other_fake(bench: Bench, name: str) -> Fake:
    fake = Fake(bench.tmp / f"fake-{name}")
    fake.script({"run": success()})
    fake.install(name)
    return fake


def test_commandcode_bin_names_the_binary(bench):
    other = other_fake(bench, "command-code")
    run = run_cc(bench, COMMANDCODE_BIN=str(other.bin / "command-code"))
    assert run.code == 0, run
    assert [c["kind"] for c in other.calls()] == ["version", "run"]
    assert bench.fake.calls() == []


def test_a_relative_commandcode_bin_is_resolved_before_the_cd(bench):
    other = other_fake(bench, "command-code")
    relative = os.path.relpath(other.bin / "command-code")  # against the relay's own cwd
    assert not os.path.isabs(relative) and os.getcwd() != str(bench.work)
    run = run_cc(bench, COMMANDCODE_BIN=relative)
    assert run.code == 0, run
    assert other.run_call()["stdin"] == BRIEF
    assert other.run_call()["cwd"] == str(bench.work)


def test_a_bare_commandcode_bin_is_looked_up_on_path(bench):
    other = other_fake(bench, "cmdc")
    env = bench.fake.env(COMMANDCODE_BIN="cmdc")
    env["PATH"] = f"{other.bin}{os.pathsep}{env['PATH']}"
    assert run_cc(bench, env=env).code == 0
    assert [c["kind"] for c in other.calls()] == ["version", "run"]


def test_a_missing_commandcode_bin_is_unavailable(bench):
    missing = bench.tmp / "missing-commandcode"
    run = run_cc(bench, COMMANDCODE_BIN=str(missing))
    assert run.code == 127, run
    assert run.result["status"] == "commandcode_unavailable"
    started, missing_line = run.err.splitlines(keepends=True)
    assert started.startswith(f"relay: cmd run started · {bench.out} · relay pid ")
    assert missing_line == (
        f"relay: `{missing}` not found on PATH. Get Command Code and sign in with "
        "`cmd login`, or name the binary in COMMANDCODE_BIN.\n"
    )


def test_clean_env_keeps_basics_the_binary_and_named_variables(bench, home):
    cli = str(bench.fake.bin / "cmd")
    extra = {"SMOKE_PROVIDER_TOKEN": "required", "SMOKE_SECRET_TOKEN": "must-not-leak"}
    run = run_cc(
        bench,
        "--clean-env",
        "--keep-env",
        "SMOKE_PROVIDER_TOKEN",
        COMMANDCODE_BIN=cli,
        **extra,
    )
    assert run.code == 0, run
    calls = bench.fake.calls()
    assert [c["kind"] for c in calls] == ["version", "run"]
    for call in calls:
        assert set(call["env"]) == {"HOME", "PATH", "COMMANDCODE_BIN", "SMOKE_PROVIDER_TOKEN"}
        assert (call["env"]["HOME"], call["env"]["COMMANDCODE_BIN"]) == (str(home), cli)
    assert (run.result["cleanEnv"], run.result["keepEnv"]) == (True, ["SMOKE_PROVIDER_TOKEN"])
    assert "required" not in (bench.out / "result.json").read_text()


def test_everything_is_inherited_without_clean_env(bench):
    run_cc(bench, SMOKE_SECRET_TOKEN="inherited")
    assert bench.fake.run_call()["env"]["SMOKE_SECRET_TOKEN"] == "inherited"


def test_self_updates_are_off_unless_the_user_set_them(bench):
    bench.script(success(), env_keys=["COMMANDCODE_SKIP_UPDATES"])
    run_cc(bench)
    assert bench.fake.run_call()["env"] == {"COMMANDCODE_SKIP_UPDATES": "1"}
    run_cc(bench, COMMANDCODE_SKIP_UPDATES="0")
    assert bench.fake.calls("run")[-1]["env"] == {"COMMANDCODE_SKIP_UPDATES": "0"}


def test_final_txt_is_created_once_and_later_calls_answer_the_same(tmp_path):
    from delegate_skills.relay.rundir import RunDir

    run = RunDir(str(tmp_path), "2026-01-01T00:00:00Z")
    assert run.create_final_once("first") is None
    assert run.create_final_once("second") is None
    assert (tmp_path / "final.txt").read_text() == "first\n"
    taken = RunDir(str(tmp_path), "2026-01-01T00:00:00Z")  # final.txt stands there already
    refused = taken.create_final_once("third")
    assert refused == "could not safely create final.txt: EEXIST"
    (tmp_path / "final.txt").unlink()
    assert taken.create_final_once("fourth") == refused
    assert not (tmp_path / "final.txt").exists()


# ---------------------------------------------------------------- the stream


def test_unfinished_exit_0_is_a_failure(bench):
    unfinished = {
        **RESULT_LINE,
        "subtype": "max_turns",
        "stopReason": "max_turns",
        "finalText": "ran out of turns partway",
    }
    bench.script(success(unfinished))
    run = run_cc(bench)
    assert run.code == 1, run
    result = run.result
    assert (result["status"], result["resultSubtype"], result["stopReason"]) == (
        "failed",
        "max_turns",
        "max_turns",
    )
    assert result["error"] == (
        'Command Code reported subtype "max_turns" (stopReason max_turns), not success'
    )
    assert result["finalMessage"] == "ran out of turns partway"
    assert "Command Code result: max_turns (stopReason max_turns)" in run.out


def test_turn_cap_exit_8_of_the_real_cli_is_kept(bench):
    capped = {**RESULT_LINE, "subtype": "max_turns", "stopReason": "max_turns", "finalText": ""}
    bench.script({**success(capped), "exit": 8})
    run = run_cc(bench, "--max-turns", "3")
    assert run.code == 8, run
    result = run.result
    assert (result["status"], result["exitCode"], result["maxTurns"]) == ("failed", 8, 3)
    assert "max_turns" in result["error"]
    assert result["finalMessage"] == "fake commandcode completed"
    assert (
        "hint: hit the turn cap — raise --max-turns or split the brief into smaller tasks"
        in run.out.splitlines()
    )


def test_not_authenticated_like_the_real_cli(bench):
    refused = {
        "type": "result",
        "subtype": "error",
        "usage": {"inputTokens": 0, "outputTokens": 0, "cacheReadTokens": 0, "cacheWriteTokens": 0},
        "durationMs": 17,
        "finalText": "",
        "error": 'Error: Not authenticated. Please run "cmd login" first.',
    }
    bench.script({"actions": [lines(refused), {"stderr": refused["error"] + "\n"}], "exit": 3})
    run = run_cc(bench, "--read-only")
    assert run.code == 3, run
    result = run.result
    assert (result["status"], result["resultLine"], result["sessionId"]) == (
        "failed",
        "complete",
        None,
    )
    assert result["error"] == (
        'Command Code reported error: Error: Not authenticated. Please run "cmd login" first.'
    )
    assert result["stderrTail"] == [refused["error"]]
    assert (result["finalMessage"], result["finalPath"], result["durationMs"]) == ("", None, 17)
    assert "hint: not authenticated — run `cmd login`, then re-dispatch" in run.out
    assert result["readOnlyViolation"] is False


def test_a_cut_tail_still_completes(bench):
    fragment = json.dumps(event("run_end", result={"messages": ["x" * 4096]}))[:4000]
    bench.script({"actions": [lines(*EARLY), {"stdout": fragment}]})
    run = run_cc(bench)
    assert run.code == 0, run
    result = run.result
    assert (result["status"], result["resultLine"], result["resultSubtype"]) == (
        "completed",
        "truncated",
        None,
    )
    assert (result["usage"], result["durationMs"], result["sessionId"]) == (None, None, SESSION)
    assert result["finalMessage"] == "fake commandcode completed"
    assert "note: cmd's result line was truncated" in run.out


def test_an_oversized_unfinished_line_counts_as_truncated(bench):
    bench.script(
        {"actions": [lines(*EARLY), {"stdout": '{"type":"event","x":"' + "y" * 1_100_000}]}
    )
    result = run_cc(bench).result
    assert (result["status"], result["resultLine"]) == ("completed", "truncated")


def test_no_output_is_absent(bench):
    bench.script({})
    run = run_cc(bench)
    result = run.result
    assert (result["status"], result["resultLine"], result["finalMessage"]) == (
        "completed",
        "absent",
        "",
    )
    assert "note: cmd's result line was absent" in run.out


def test_a_whole_result_line_without_a_newline_is_complete(bench):
    bench.script({"actions": [lines(*EARLY), {"stdout": json.dumps(RESULT_LINE)}]})
    assert run_cc(bench).result["resultLine"] == "complete"


def test_report_falls_back_to_streamed_deltas(bench):
    bench.script(
        {
            "actions": [
                lines(
                    event("run_start", sessionId="s-early"),
                    event("message_start"),
                    event("text_delta", delta="part one "),
                    event("text_delta", delta="part two"),
                    {**RESULT_LINE, "sessionId": "s-late", "finalText": ""},
                )
            ]
        }
    )
    result = run_cc(bench).result
    assert (result["finalMessage"], result["sessionId"]) == ("part one part two", "s-late")


def test_text_end_and_blank_lines(bench):
    bench.script(
        {
            "actions": [
                {"stdout": "\n   \nnot json\n"},
                lines(event("text_end", text="  final words  "), event("text_end", text="  ")),
            ]
        }
    )
    run = run_cc(bench)
    assert run.result["finalMessage"] == "final words"
    assert (bench.out / "events.jsonl").read_text().startswith("\n   \nnot json\n")


def test_read_only_verdicts_and_lines(bench):
    tracked(bench)
    run = run_cc(bench, "--read-only")
    assert run.result["readOnlyViolation"] is False
    assert (
        "read-only check: no Git-visible change detected (ignored or outside-repository "
        "paths are not covered)" in run.out
    )
    bench.script({"actions": [{"write": ["sneaked.txt", "x\n"]}]})
    run = run_cc(bench, "--read-only", **DETECT_ONLY)
    assert run.result["readOnlyViolation"] is True
    assert "read-only check: FAILED" in run.out
    run = run_cc(bench)
    # Present and null on a write run: the read-only question does not apply to it.
    assert run.result["readOnly"] is False
    assert run.result["readOnlyViolation"] is None
    assert "read-only check" not in run.out
    assert "autonomy: --yolo (all permissions bypassed)" in run.out


def test_a_run_that_moves_a_file_onto_final_txt_keeps_it_and_fails(bench):
    (bench.work / "source.txt").write_text("tracked source\n")
    commit_all(bench.work)
    bench.out = bench.work
    rename = {"git": ["mv", "-f", "source.txt", "final.txt"]}
    bench.script({"actions": [rename, *success()["actions"]]})
    run = run_cc(bench)  # a write run: a read-only one may not keep its run dir in its work tree
    assert run.code == 1, run
    result = run.result
    assert (result["status"], result["exitCode"]) == ("failed", 1)
    assert result["error"] == "could not safely create final.txt: EEXIST"
    assert result["finalMessage"] == "fake commandcode completed"
    assert result["readOnlyViolation"] is None
    assert (bench.work / "final.txt").read_text() == "tracked source\n"
    assert "R  source.txt -> final.txt" in result["touchedFiles"]  # content as it was
    assert run.out.count("relay: failed (exit 1)") == 1


def test_final_txt_is_created_once_with_a_closing_newline(bench):
    run = run_cc(bench)
    assert run.code == 0, run
    assert (bench.out / "final.txt").read_text() == "fake commandcode completed\n"
    assert stat.S_IMODE((bench.out / "final.txt").stat().st_mode) == 0o600


def test_summary_lines(bench):
    run = run_cc(bench, "--session", "s-1")
    out = run.out.splitlines()
    for line in (
        "relay: completed (exit 0)  ·  cmd fake-cli 0.0.0",
        "autonomy: --yolo (all permissions bypassed)",
        "mode: resumed session s-1",
        f"session id (resume with: --session {SESSION})",
        "--- Command Code final report ---",
        f"result: {bench.out / 'result.json'}",
    ):
        assert line in out, run.out
    assert "mode: continued most recent session" in run_cc(bench, "--continue-last").out


def test_result_field_order(bench):
    run_cc(bench)
    assert list(bench.result) == [
        "schema", "lane", "laneSource", "workdir", "readOnly", "autonomy", "toolsAll", "model",
        "effort", "maxTurns", "session", "continueLast", "cleanEnv", "keepEnv",
        "commandCodeVersion", "startedAt", "finishedAt", "briefPath", "eventsPath", "finalPath",
        "status", "exitCode", "signal", "sessionId", "resultLine", "resultSubtype",
        "stopReason", "usage", "durationMs", "finalMessage", "tokenUsage", "touchedFiles", "changes", "overlap", "relayRunId", "implementerArgv",
        "readOnlyViolation",
    ]  # fmt: skip


def test_outcomes_that_never_closed_have_no_result_line(bench):
    bench.script(version={"stdout": "", "stderr": "needs Node.js 22\n", "exit": 1})
    result = run_cc(bench).result
    assert (result["status"], result["resultLine"], result["durationMs"]) == ("failed", None, None)


# ---------------------------------------------------------------- the out dir


def prior_run(out: Path, **artifacts: str) -> Path:
    out.mkdir(exist_ok=True)
    (out / "result.json").write_text(json.dumps(PRIOR))
    for name, text in artifacts.items():
        (out / name.replace("_", ".")).write_text(text)
    return out


def test_a_reused_out_dir_loses_stale_results_before_the_preflight(bench):
    prior_run(bench.out, final_txt="stale report\n")
    bench.script(version={"hang": True})
    proc = bench.start("--timeout", "5s", env=bench.fake.env())
    wait_for(lambda: (bench.out / "events.jsonl").exists(), timeout=10)
    assert not (bench.out / "final.txt").exists()
    assert not (bench.out / "result.json").exists()
    assert proc.poll() is None
    code, _out, _err = finish(proc)
    assert code == 124
    assert bench.result["status"] == "timeout"


def test_foreign_artifacts_without_a_result_are_refused(bench):
    bench.out.mkdir()
    (bench.out / "final.txt").write_text("user report\n")
    run = run_cc(bench)
    assert (run.code, run.err) == (2, NOT_PROVEN)
    assert sorted(os.listdir(bench.out)) == ["final.txt"]
    assert (bench.out / "final.txt").read_text() == "user report\n"
    assert bench.fake.calls() == []


def test_a_result_symlink_is_never_proof(bench, tmp_path):
    victim = tmp_path / "victim.json"
    victim.write_text(json.dumps(PRIOR))
    bench.out.mkdir()
    (bench.out / "result.json").symlink_to(victim)
    run = run_cc(bench)
    assert (run.code, run.err) == (2, NOT_PROVEN)
    assert (bench.out / "result.json").is_symlink()
    assert victim.read_text() == json.dumps(PRIOR)


@pytest.mark.parametrize(
    "content",
    [json.dumps({"schema": "something-else.v1"}), "{not json", '"delegate-relay.result.v1"', None],
    ids=["other-schema", "malformed", "not-an-object", "directory"],
)
def test_a_result_that_is_not_a_relay_result_is_no_proof(bench, content):
    bench.out.mkdir()
    target = bench.out / "result.json"
    if content is None:
        target.mkdir()
    else:
        target.write_text(content)
    run = run_cc(bench)
    assert (run.code, run.err) == (2, NOT_PROVEN)
    assert target.is_dir() if content is None else target.read_text() == content


def test_a_case_aliased_result_is_refused(bench, monkeypatch):
    bench.out.mkdir()
    alias = bench.out / "RESULT.JSON"
    alias.write_text(json.dumps(PRIOR))
    real = os.path.lexists

    def case_insensitive(path):
        folder, name = os.path.split(path)
        if real(path) or not os.path.isdir(folder):
            return real(path)
        return any(entry.lower() == name.lower() for entry in os.listdir(folder))

    # Only this patch is undone: the suite's own (the private roots index) stay.
    with monkeypatch.context() as patch:
        patch.setattr(os.path, "lexists", case_insensitive)
        with pytest.raises(Usage) as refused:
            adapter("commandcode").check_out_dir(str(bench.out))
    assert str(refused.value) == "--out-dir contains a case-aliased result.json artifact"
    # On this case-sensitive file system RESULT.JSON is just another file, left alone.
    assert run_cc(bench).code == 0
    assert alias.read_text() == json.dumps(PRIOR)


def test_other_files_in_the_out_dir_are_fine_and_kept(bench):
    bench.out.mkdir()
    (bench.out / "notes.md").write_text("mine\n")
    assert run_cc(bench).code == 0
    assert (bench.out / "notes.md").read_text() == "mine\n"


def test_dangling_artifact_links_are_stale_not_foreign(bench, tmp_path):
    bench.out.mkdir()
    (bench.out / "run.json").write_text('{"schema": "delegate-run.v1"}\n')  # an earlier run's
    for name in ("result.json", "final.txt", "brief.txt", "events.jsonl"):
        (bench.out / name).symlink_to(tmp_path / "nowhere" / name)
    run = run_cc(bench)
    assert run.code == 0, run
    assert not (tmp_path / "nowhere").exists()
    for name in ("result.json", "final.txt", "brief.txt", "events.jsonl"):
        assert (bench.out / name).is_file() and not (bench.out / name).is_symlink()


def test_a_stale_brief_symlink_is_unlinked_never_followed(bench):
    victim = bench.work / "victim.txt"
    victim.write_text("protected\n")
    commit_all(bench.work)
    prior_run(bench.out)
    (bench.out / "brief.txt").symlink_to(victim)
    run = run_cc(bench, "--read-only", COMMANDCODE_BIN=str(bench.tmp / "missing-commandcode"))
    assert run.code == 127, run
    assert run.result["status"] == "commandcode_unavailable"
    assert run.result["readOnlyViolation"] is False
    assert victim.read_text() == "protected\n"
    assert not (bench.out / "brief.txt").is_symlink()
    assert (bench.out / "brief.txt").read_text() == BRIEF


def test_a_startup_artifact_that_cannot_be_created_stops_the_run(bench):
    prior_run(bench.out)
    (bench.out / "events.jsonl").mkdir()
    (bench.out / "events.jsonl" / "keep").write_text("x")
    run = run_cc(bench)
    assert run.code == 2, run
    assert run.err.startswith("relay: cannot prepare run artifacts: ")
    assert not (bench.out / "result.json").exists()
    assert (bench.out / "events.jsonl" / "keep").read_text() == "x"
    assert bench.fake.calls() == []


def test_startup_artifacts_are_private_and_fresh(bench):
    prior_run(bench.out, brief_txt="old brief\n", events_jsonl="old events\n")
    (bench.out / "brief.txt").chmod(0o644)
    assert run_cc(bench).code == 0
    for name in ("brief.txt", "events.jsonl", "final.txt", "result.json"):
        assert stat.S_IMODE((bench.out / name).stat().st_mode) == 0o600, name
    assert (bench.out / "brief.txt").read_text() == BRIEF
    assert "old events" not in (bench.out / "events.jsonl").read_text()


def test_an_explicit_out_dir_that_is_a_file_is_refused(bench):
    bench.out.write_text("a file\n")
    run = run_cc(bench)
    assert (run.code, run.err) == (2, f"relay: --out-dir is not a directory: {bench.out}\n")
    assert bench.out.read_text() == "a file\n"


def test_an_explicit_out_dir_below_a_file_is_refused(bench):
    blocker = bench.tmp / "blocker"
    blocker.write_text("a file\n")
    bench.out = blocker / "out"
    run = run_cc(bench)
    assert run.code == 2, run
    assert run.err.startswith("relay: cannot prepare run artifacts: ")
    assert blocker.read_text() == "a file\n"


def test_an_explicit_out_dir_is_created_private(bench):
    bench.out = bench.tmp / "new" / "nested" / "out"
    assert run_cc(bench).code == 0
    assert stat.S_IMODE(bench.out.stat().st_mode) == 0o700


def test_the_default_out_dir_is_private(bench, tmp_path):
    tmpdir = tmp_path / "tmpdir"
    tmpdir.mkdir()
    args = ("--brief", str(bench.brief), "--cd", str(bench.work))
    done = relay("commandcode", *args, env=bench.fake.env(TMPDIR=str(tmpdir)), out_dir=bench.out)
    assert done.code == 0, done
    assert not bench.out.exists()
    result_path = next(
        line[len("result: ") :] for line in done.out.splitlines() if line.startswith("result: ")
    )
    run_dir = os.path.dirname(result_path)
    assert run_dir.startswith(str(tmpdir))
    assert stat.S_IMODE(os.stat(run_dir).st_mode) == 0o700
    result = json.loads(Path(result_path).read_text())
    for path in (result["briefPath"], result["eventsPath"], result["finalPath"], result_path):
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_a_failed_result_write_is_reported_and_never_exits_0(bench):
    bench.script({"actions": [{"git": ["init", "-q", str(bench.out / "result.json")]}]})
    run = run_cc(bench)
    assert run.code == 1, run
    assert f"relay: cannot write {bench.out / 'result.json'}: " in run.err
    assert (bench.out / "result.json" / ".git").is_dir()
    assert [p.name for p in bench.out.iterdir() if ".tmp" in p.name] == []
    assert "relay: completed (exit 0)" in run.out


def test_an_abort_whose_result_write_fails_still_kills_the_tree(bench):
    bench.script(
        {
            "on_term": {"exit": 0},
            "actions": [
                {"grandchild": {"ignore_term": True, "pid_file": str(bench.pid_file("grand.pid"))}},
                {"git": ["init", "-q", str(bench.out / "result.json")]},
                {"pid_file": str(bench.pid_file("child.pid"))},
                {"wait": "forever"},
            ],
        }
    )
    proc = bench.start(env=bench.fake.env())
    child = read_pid(bench.pid_file("child.pid"))
    grand = int(bench.pid_file("grand.pid").read_text())
    proc.send_signal(signal.SIGTERM)
    code, _out, err = finish(proc)
    assert code == 143
    assert "cannot write" in err
    wait_for(lambda: not alive(child) and not alive(grand), timeout=5)


def snapshot(root: Path, skip: tuple[Path, ...]) -> dict[str, tuple]:
    seen = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if Path(folder, d) not in skip]
        for name in [*dirs, *files]:
            path = Path(folder, name)
            info = path.lstat()
            if path.is_symlink():
                body = ("link", os.readlink(path))
            elif path.is_dir():
                body = ("dir",)
            else:
                body = ("file", path.read_bytes())
            seen[str(path)] = (*body, stat.S_IMODE(info.st_mode), info.st_mtime_ns)
    return seen


@pytest.mark.parametrize("flags", [[], ["--read-only"]], ids=["write-run", "read-only"])
def test_nothing_outside_the_out_dir_is_ever_written(bench, tmp_path, flags):
    (bench.work / "victim.txt").write_text("tracked\n")
    commit_all(bench.work)
    outside = tmp_path / "outside"
    outside.mkdir()
    prior_run(bench.out)
    for name in ("brief.txt", "events.jsonl", "final.txt"):
        (outside / name).write_text(f"outside {name}\n")
        (bench.out / name).symlink_to(outside / name)
    tmpdir = tmp_path / "tmpdir"
    tmpdir.mkdir()
    git(bench.work, "status", "--porcelain")  # let git settle its index first
    bench.fake.calls_dir.mkdir(exist_ok=True)  # the fake's own record, not the relay's
    skip = (bench.out, bench.fake.calls_dir, bench.work / ".git")
    before = snapshot(tmp_path, skip)
    run = run_cc(bench, *flags, TMPDIR=str(tmpdir))
    assert run.code == 0, run
    assert snapshot(tmp_path, skip) == before
    assert list(tmpdir.iterdir()) == []
    for name in ("brief.txt", "events.jsonl", "final.txt", "result.json"):
        assert (bench.out / name).is_file() and not (bench.out / name).is_symlink()
    assert [p for p in bench.out.iterdir() if p.is_symlink()] == []
