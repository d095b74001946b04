"""zcode: finding the CLI, plan/yolo modes, brief.md attached, one JSON document on stdout."""

from __future__ import annotations

import json
import os
import sys

import pytest
from conftest import commit_all, fleet_doc, write_json
from delegate_skills.relays import zcode
from fakes import Fake
from relaykit import BRIEF, DETECT_ONLY, Bench, adapter

from delegate_skills import registry

PROMPT = "Follow the attached brief exactly."
KEYS = ("ZAI_API_KEY", "ZCODE_API_KEY", "ANTHROPIC_API_KEY")
USAGE = {
    "source": "provider",
    "modelRequestCount": 1,
    "inputTokens": 7,
    "outputTokens": 2,
    "totalTokens": 9,
    "cacheReadTokens": 0,
    "cacheWriteTokens": 0,
    "reasoningTokens": 0,
}
DOCUMENT = {
    "sessionId": "sess_smoke-1",
    "traceId": "t-1",
    "response": "  fake zcode completed\n",
    "usage": USAGE,
    "projection": {"status": "completed", "contextWindow": 200000},
}
BANNER = "AI SDK Warning System: To turn off warning logging, set the AI_SDK_LOG_WARNINGS global to false.\n"


def document(doc: dict = DOCUMENT, banner: str = BANNER) -> dict:
    return {"stdout": banner + json.dumps(doc, indent=2) + "\n"}


@pytest.fixture
def bench(tmp_path, home, monkeypatch):
    monkeypatch.delenv("ZCODE_CLI", raising=False)
    bench = Bench(tmp_path, "zcode")
    bench.script({"actions": [document()]}, env_keys=list(KEYS))
    return bench


def run_zcode(bench: Bench, *flags: str, **env: str):
    return bench.relay(*flags, env=bench.fake.env(**env))


def argv_of(bench, *flags) -> list[str]:
    run = run_zcode(bench, *flags)
    assert run.code == 0, run
    return bench.fake.calls("run")[-1]["argv"]


def head(bench, mode: str = "yolo") -> list[str]:
    return ["--cwd", str(bench.work), "--json", "--no-color", "--mode", mode]


def attach(bench) -> list[str]:
    return ["--attach", str(bench.out / "brief.md"), "--prompt", PROMPT]


# ---------------------------------------------------------------- argv and brief


def test_default_argv_attaches_brief_md(bench):
    argv = argv_of(bench)
    assert argv == [*head(bench), *attach(bench)]
    call = bench.fake.run_call()
    assert (call["stdin"], call["cwd"]) == ("", str(bench.work))
    assert (bench.out / "brief.md").read_text() == BRIEF
    assert not (bench.out / "brief.txt").exists()
    assert all("smoke brief" not in arg for arg in argv)


@pytest.mark.parametrize(
    ("flags", "mode", "middle"),
    [
        (["--read-only"], "plan", []),
        (["--mode", "plan"], "plan", []),
        (["--mode", "yolo"], "yolo", []),
        (["--disallowed-tools", "Write,Edit"], "yolo", ["--disallowed-tools", "Write,Edit"]),
        (["--disallowed-tools", "Bash(git push:*) Write"], "yolo", ["--disallowed-tools", "Bash(git push:*) Write"]),
        (["--session", "sess_prior-0"], "yolo", ["--resume", "sess_prior-0"]),
        (["--resume-last"], "yolo", ["-c"]),
        (["--read-only", "--resume-last"], "plan", ["-c"]),
        (["--read-only", "--mode", "plan"], "plan", []),
        (
            ["--session", "sess_prior-0", "--disallowed-tools", "Write,Edit"],
            "yolo",
            ["--disallowed-tools", "Write,Edit", "--resume", "sess_prior-0"],
        ),
    ],
)  # fmt: skip
def test_flags(bench, flags, mode, middle):
    assert argv_of(bench, *flags) == [*head(bench, mode), *middle, *attach(bench)]
    result = bench.result
    assert (result["mode"], result["readOnly"]) == (mode, mode == "plan")


NO_WRITE = (
    "--mode {} cannot write in a headless run: ZCode has no permission client there, so its "
    "write tools are blocked and the run exits 0 having changed nothing. Use --mode yolo to "
    "write, or --read-only for plan mode."
)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--mode", "build"], NO_WRITE.format("build")),
        (["--mode", "edit"], NO_WRITE.format("edit")),
        (["--mode", "definitely-not-a-mode"], 'invalid --mode "definitely-not-a-mode" (expected: plan, yolo)'),
        (["--mode", "YOLO"], 'invalid --mode "YOLO" (expected: plan, yolo)'),
        (["--read-only", "--mode", "yolo"], "--read-only conflicts with --mode yolo; read-only runs use ZCode's plan mode"),
        (["--read-only", "--mode", "build"], "--read-only conflicts with --mode build; read-only runs use ZCode's plan mode"),
        (["--session", "not-a-zcode-session"], "--session must be a ZCode session id of the form sess_... (letters, digits, . _ : -)"),
        (["--session", "sess_"], "--session must be a ZCode session id of the form sess_... (letters, digits, . _ : -)"),
        (["--session", "sess_a", "--resume-last"], "--session and --resume-last are mutually exclusive; pass only one"),
        (["--disallowed-tools", "Write;rm -rf"], "--disallowed-tools contains unsupported characters (allowed: letters, digits, spaces, and , . : * ( ) _ / -)"),
        (["--timeout", "0s"], '--timeout "0s" is invalid or too long; use a positive h/m/s duration no longer than about 24 days'),
        (["--model", "glm"], "unknown option: --model"),
        (["--zcode-path"], "--zcode-path requires a value"),
    ],
)  # fmt: skip
def test_usage_errors(bench, flags, message):
    run = run_zcode(bench, *flags)
    assert (run.code, run.err) == (2, f"relay: {message}\n")
    assert not bench.out.exists()


# ---------------------------------------------------------------- lanes


def lane(global_config, **dials) -> None:
    write_json(global_config, fleet_doc({"z": {"implementer": "zcode", **dials}}))


def test_lane_permission_mode_plan_is_a_read_only_run(bench, global_config):
    lane(global_config, permissionMode="plan", timeout="5m")
    assert argv_of(bench, "--lane", "z")[:6] == head(bench, "plan")
    result = bench.result
    assert (result["lane"], result["laneSource"], result["mode"], result["readOnly"]) == (
        "z",
        "global",
        "plan",
        True,
    )
    assert result["readOnlyViolation"] is False


def test_lane_read_only_gives_plan_and_refuses_a_write_mode(bench, global_config):
    lane(global_config, readOnly=True)
    assert argv_of(bench, "--lane", "z")[:6] == head(bench, "plan")
    run = run_zcode(bench, "--lane", "z", "--mode", "yolo")
    assert run.code == 2
    assert "lane z is read-only, and --mode would let" in run.err


def test_a_plan_lane_refuses_a_write_mode(bench, global_config):
    lane(global_config, permissionMode="plan")
    run = run_zcode(bench, "--lane", "z", "--mode", "yolo")
    assert run.code == 2
    assert "lane z is read-only, and --mode would let" in run.err


def test_lane_read_only_with_lane_mode_yolo_conflicts(bench, global_config):
    lane(global_config, readOnly=True, permissionMode="yolo")
    run = run_zcode(bench, "--lane", "z")
    assert (run.code, run.err) == (
        2,
        "relay: --read-only conflicts with --mode yolo; read-only runs use ZCode's plan mode\n",
    )
    assert not bench.out.exists()


# ---------------------------------------------------------------- finding the CLI


def other_fake(bench: Bench, name: str) -> Fake:
    fake = Fake(bench.tmp / f"fake-{name}")
    fake.script({"run": {"actions": [document()]}})
    fake.install(name)
    return fake


def test_resolution_flag_beats_env_beats_path(bench):
    flag, env = other_fake(bench, "zcode-flag"), other_fake(bench, "zcode-env")
    flag_cli, env_cli = flag.bin / "zcode-flag", env.bin / "zcode-env"
    run = run_zcode(bench, "--zcode-path", str(flag_cli), ZCODE_CLI=str(env_cli))
    assert run.code == 0, run
    assert (run.result["zcodeSource"], run.result["zcodePath"]) == ("flag", str(flag_cli))
    assert [c["kind"] for c in flag.calls()] == ["version", "run"]
    assert env.calls() == [] and bench.fake.calls() == []
    assert f"zcode cli: {flag_cli} (flag)" in run.out

    run = run_zcode(bench, ZCODE_CLI=f"  {env_cli}  ")
    assert (run.result["zcodeSource"], run.result["zcodePath"]) == ("env", str(env_cli))
    assert [c["kind"] for c in env.calls()] == ["version", "run"]
    assert bench.fake.calls() == []

    run = run_zcode(bench)
    assert (run.result["zcodeSource"], run.result["zcodePath"]) == (
        "path",
        str(bench.fake.bin / "zcode"),
    )
    assert [c["kind"] for c in bench.fake.calls()] == ["version", "run"]


def test_a_relative_zcode_cli_is_resolved_against_the_relay_cwd(bench):
    env = other_fake(bench, "zcode-env")
    relative = os.path.relpath(env.bin / "zcode-env")  # the relay runs in this process's cwd
    assert not os.path.isabs(relative) and os.getcwd() != str(bench.work)
    run = run_zcode(bench, ZCODE_CLI=relative)
    assert run.code == 0, run
    assert bench.result["zcodePath"] == str(env.bin / "zcode-env")
    assert [c["cwd"] for c in env.calls("run")] == [str(bench.work)]


def test_a_named_cli_that_does_not_exist_is_unavailable_not_a_fallback(bench):
    missing = bench.tmp / "no-such-zcode.cjs"
    for run in (
        run_zcode(bench, ZCODE_CLI=str(missing)),
        run_zcode(bench, "--zcode-path", str(missing)),
    ):
        assert run.code == 127, run
        result = run.result
        assert (result["status"], result["exitCode"]) == ("zcode_unavailable", 127)
        assert (result["zcodeVersion"], result["zcodeSource"], result["zcodePath"]) == (
            None,
            None,
            None,
        )
        assert result["touchedFiles"] == []
        assert "parseWarning" not in result and "stderrTail" not in result
        assert "--zcode-path <file> or ZCODE_CLI" in run.err
    assert bench.fake.calls() == []


def test_a_script_cli_is_launched_with_node(bench):
    node = other_fake(bench, "node")
    script = bench.tmp / "ZCode" / "resources" / "glm" / "zcode.cjs"
    script.parent.mkdir(parents=True)
    script.write_text("// the desktop app's bundle\n")
    env = bench.fake.env(ZCODE_CLI=str(script))
    env["PATH"] = f"{node.bin}{os.pathsep}{env['PATH']}"
    run = bench.relay(env=env)
    assert run.code == 0, run
    assert [c["argv"][0] for c in node.calls()] == [str(script), str(script)]
    assert node.calls("run")[0]["argv"][1:] == [*head(bench), *attach(bench)]
    assert (run.result["zcodeSource"], run.result["zcodePath"]) == ("env", str(script))


def test_path_lookup_takes_a_file_without_the_execute_bit(tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    for folder in (first, second):
        folder.mkdir()
    (first / "zcode").mkdir()  # a directory is not a hit
    (second / "zcode").write_text("")
    path = os.pathsep.join(["", f'"{first}"', str(second)])
    assert zcode.on_path("zcode", {"PATH": path}) == str(second / "zcode")


def opts_for(**overrides) -> dict:
    return {"zcodePath": None, **overrides}


def test_the_bundle_is_the_last_resort(tmp_path, monkeypatch):
    bundle = tmp_path / "app" / "zcode.cjs"
    bundle.parent.mkdir()
    bundle.write_text("")
    candidates = registry.BY_KEY["zcode"].locate.candidates
    monkeypatch.setitem(candidates, "linux", (str(tmp_path / "missing.cjs"), str(bundle)))
    monkeypatch.setattr(sys, "platform", "linux")
    node_dir = tmp_path / "nodebin"
    node_dir.mkdir()
    (node_dir / "node").write_text("#!/bin/sh\n")
    (node_dir / "node").chmod(0o755)
    opts = opts_for()
    launch = adapter("zcode").launcher(opts, {"PATH": str(node_dir)})
    assert launch == [str(node_dir / "node"), str(bundle)]
    assert (opts["_zcodeSource"], opts["_zcodePath"]) == ("bundle", str(bundle))
    (node_dir / "zcode").write_text("")
    opts = opts_for()
    assert adapter("zcode").launcher(opts, {"PATH": str(node_dir)}) == [str(node_dir / "zcode")]
    assert opts["_zcodeSource"] == "path"


def test_linux_has_no_bundle_candidates(monkeypatch):
    assert registry.BY_KEY["zcode"].locate.candidates["linux"] == ()
    assert registry.BY_KEY["zcode"].locate.launcher == "node"
    monkeypatch.setattr(sys, "platform", "linux")
    assert zcode.bundle_candidates({}) == []
    opts = opts_for()
    assert adapter("zcode").launcher(opts, {"PATH": ""}) is None
    assert opts["_zcodeSource"] is None


def test_bundle_candidates_on_macos_and_windows(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setattr(sys, "platform", "darwin")
    assert zcode.bundle_candidates({}) == [
        "/Applications/ZCode.app/Contents/Resources/glm/zcode.cjs",
        f"{tmp_path}/Applications/ZCode.app/Contents/Resources/glm/zcode.cjs",
    ]
    monkeypatch.setattr(sys, "platform", "win32")
    assert zcode.bundle_candidates({"LOCALAPPDATA": "/local"}) == [
        "/local/Programs/ZCode/resources/glm/zcode.cjs"
    ]
    assert zcode.bundle_candidates({}) == [
        f"{tmp_path}/AppData/Local/Programs/ZCode/resources/glm/zcode.cjs"
    ]


# ---------------------------------------------------------------- the document


def test_success_reads_the_document_past_the_banner(bench):
    run = run_zcode(bench, "--session", "sess_prior-0", "--disallowed-tools", "Write,Edit")
    assert run.code == 0, run
    result = run.result
    assert (result["status"], result["sessionId"], result["finalMessage"]) == (
        "completed",
        "sess_smoke-1",
        "fake zcode completed",
    )
    assert (result["usage"], result["contextWindow"]) == (USAGE, 200000)
    assert "parseWarning" not in result
    assert result["mode"] == "yolo"
    assert result["readOnlyViolation"] is None  # a yolo run makes no read-only claim
    assert result["outputPath"] == str(bench.out / "output.json")
    assert (bench.out / "output.json").read_text() == document()["stdout"]
    assert (bench.out / "final.txt").read_text() == "fake zcode completed"
    assert "session id (resume with: --session sess_smoke-1): sess_smoke-1" in run.out
    assert "resume: session sess_prior-0" in run.out
    assert "mode: yolo" in run.out.splitlines()
    assert not (bench.out / "events.jsonl").exists()


def test_garbled_output_completes_with_a_warning(bench):
    bench.script({"actions": [{"stdout": "not json at all\n"}]})
    run = run_zcode(bench)
    assert run.code == 0, run
    result = run.result
    assert (result["status"], result["sessionId"], result["finalMessage"]) == (
        "completed",
        None,
        "not json at all",
    )
    assert result["parseWarning"] == zcode.WARN_UNPARSED
    assert (result["usage"], result["contextWindow"]) == (None, None)
    assert f"warning: {zcode.WARN_UNPARSED}" in run.out


@pytest.mark.parametrize(
    "stdout",
    ["", 'banner {"sessionId": "sess_x"} trailing junk\n', '["sess_x"]\n', '{"a": NaN}\n'],
    ids=["empty", "trailing-junk", "array", "nan"],
)
def test_unparseable_documents(bench, stdout):
    bench.script({"actions": [{"stdout": stdout}]})
    result = run_zcode(bench).result
    assert (result["status"], result["sessionId"]) == ("completed", None)
    assert result["parseWarning"] == zcode.WARN_UNPARSED
    assert result["finalMessage"] == stdout.strip()


def test_a_document_without_a_response_reports_the_raw_output(bench):
    doc = {"sessionId": "sess_y", "usage": USAGE}
    bench.script({"actions": [document(doc, "banner\n")]})
    result = run_zcode(bench).result
    assert result["finalMessage"] == ("banner\n" + json.dumps(doc, indent=2)).strip()
    assert result["sessionId"] == "sess_y"
    assert "parseWarning" not in result


def test_an_empty_response_is_an_empty_report(bench):
    bench.script({"actions": [document({"sessionId": "sess_z", "response": ""})]})
    run = run_zcode(bench, "--resume-last", "--read-only")
    result = run.result
    assert (result["finalMessage"], result["finalPath"]) == ("", None)
    assert "parseWarning" not in result
    assert "resume: latest session for this directory" in run.out
    assert "mode: plan (read-only)" in run.out.splitlines()


def test_oversized_stdout_is_cut_to_its_head(bench):
    bench.script({"actions": [{"stdout": '{"response": "' + "x" * 1_100_000 + '"}'}]})
    result = run_zcode(bench).result
    assert result["parseWarning"] == zcode.WARN_TRUNCATED
    assert len(result["finalMessage"]) == 1_048_576
    assert (bench.out / "output.json").stat().st_size == 1_100_000 + 16


def test_api_key_fallbacks_reach_zcode(bench):
    keys = {name: f"{name.lower()}-value" for name in KEYS}
    run = run_zcode(bench, **keys)
    assert run.code == 0, run
    assert [c["env"] for c in bench.fake.calls()] == [keys, keys]
    assert "-value" not in (bench.out / "result.json").read_text()


def test_a_plain_failure_has_a_tail_and_no_error(bench):
    bench.script({"actions": [{"stderr": "Session not found\n"}], "exit": 1})
    result = run_zcode(bench, "--session", "sess_gone").result
    assert (result["status"], result["exitCode"], result["stderrTail"]) == (
        "failed",
        1,
        ["Session not found"],
    )
    assert "error" not in result


def test_plan_runs_are_checked_by_the_tripwire(bench):
    (bench.work / "tracked.txt").write_text("x\n")
    commit_all(bench.work)
    assert run_zcode(bench, "--read-only").result["readOnlyViolation"] is False
    bench.script({"actions": [{"write": ["sneaked.txt", "x"]}, document()]})
    run = run_zcode(bench, "--mode", "plan", **DETECT_ONLY)
    assert run.result["readOnlyViolation"] is True
    assert run.result["touchedFiles"] == ["?? sneaked.txt"]


def test_help_names_every_route(bench):
    out = " ".join(run_zcode(bench, "--help").out.split())
    for phrase in (
        "--zcode-path",
        "$ZCODE_CLI",
        "zcode.cjs",
        "ZAI_API_KEY",
        "Watchdog default: off",
    ):
        assert phrase in out


def test_result_field_order(bench):
    run_zcode(bench)
    assert list(bench.result) == [
        "schema", "lane", "laneSource", "workdir", "mode", "readOnly", "disallowedTools",
        "resumeLast", "session", "zcodeVersion", "zcodeSource", "zcodePath", "startedAt",
        "finishedAt", "briefPath", "outputPath", "finalPath", "status", "exitCode", "signal",
        "sessionId", "finalMessage", "tokenUsage", "touchedFiles", "changes", "overlap", "relayRunId", "implementerArgv",
        "readOnlyViolation", "usage", "contextWindow",
    ]  # fmt: skip


def test_plan_result_field_order(bench):
    bench.script({"actions": [{"stdout": "garbled"}], "exit": 4})
    run_zcode(bench, "--read-only", **DETECT_ONLY)
    assert tail_from(bench.result, "sessionId") == [
        "sessionId", "finalMessage", "touchedFiles", "changes", "overlap", "relayRunId", "implementerArgv",
        "confined", "confinedUnavailable", "readOnlyViolation", "readOnlyEnforced",
        "readOnlyUnenforced", "usage", "contextWindow", "parseWarning", "stderrTail",
    ]  # fmt: skip


def tail_from(result: dict, first: str) -> list:
    """The result's field names from `first` on (what these tests pin)."""
    keys = list(result)
    return keys[keys.index(first) :]
