"""dsh: the task that points at brief.md, DSH_PERMISSION_MODE, the model overlay, no resume,
the session-record harvest, and discover."""

from __future__ import annotations

import json
import os
import shutil
import struct
import time
from pathlib import Path

import pytest
from conftest import PYTHON, fleet_doc, run, write_json
from discoverkit import install
from fakes import ROOT, relay_argv
from relaykit import DETECT_ONLY, Bench

SESSION = "session-6e331983-fa05-433d-84fc-71ad3a08ab08"
#: A creation time no run of the suite starts after (2100-01-01), for records made beforehand.
LATER = 4102444800000
needs_zstd = pytest.mark.skipif(shutil.which("zstd") is None, reason="no zstd program here")

# Lines of the session record dsh 0.1.0-rc.8 wrote for a headless run against a scripted
# model (one bash call, then a final text), trimmed to the fields the relay reads.
RECORDED = [
    {"type": "permission/preset", "seq": 0, "data": {"preset": "workspace-write"}},
    {"type": "sandbox/mode", "seq": 1, "data": {"mode": "workspace-write"}},
    {"type": "approval/policy", "seq": 2, "data": {"policy": "ask"}},
    {"type": "turn/start", "seq": 4, "data": {"turn": 1}},
    {
        "type": "request/header",
        "seq": 10,
        "data": {
            "header": {
                "config": {"provider": "local-mock", "model": "mock-model", "maxTokens": 8192},
                "adapterDefaults": {"maxTokens": True},
            }
        },
    },
    {
        "type": "assistant/chunk",
        "seq": 16,
        "data": {"chunk": {"type": "usage", "usage": {"inputTokens": 11, "outputTokens": 3}}},
    },
    {
        "type": "assistant/message",
        "seq": 18,
        "data": {
            "turn": 1,
            "step": 1,
            "message": {"role": "assistant", "content": [{"type": "tool-call", "name": "bash"}]},
            "usage": {"inputTokens": 11, "outputTokens": 3},
        },
    },
    {
        "type": "assistant/message",
        "seq": 29,
        "data": {
            "turn": 1,
            "step": 2,
            "message": {"role": "assistant", "content": [{"type": "text", "text": "Done."}]},
            "usage": {"inputTokens": 11, "outputTokens": 3},
        },
    },
    {"type": "turn/end", "seq": 31, "data": {"turn": 1, "reason": {"kind": "completed"}}},
]
HARVESTED = {
    "sessionId": SESSION,
    "actualProvider": "local-mock",
    "actualModel": "mock-model",
    "reasoningEffort": None,
    "usage": {"inputTokens": 22, "outputTokens": 6, "assistantMessages": 2},
    "turnEndReason": "completed",
    "recordedPermissionMode": "workspace-write",
    "recordedSandboxMode": "workspace-write",
    "recordedApprovalPolicy": "ask",
}
NOTHING = dict.fromkeys([*HARVESTED, "sessionRecordPath"])


def zstd_frame(data: bytes) -> bytes:
    """One zstd frame holding `data` as a raw block (single segment, 4-byte content size)."""
    header = struct.pack("<IBI", 0xFD2FB528, 0xA0, len(data))
    return header + struct.pack("<I", 1 | len(data) << 3)[:3] + data


def record(dsh_home: Path, cwd: Path, session: str = SESSION, created: int = LATER) -> Path:
    """A session record as dsh keeps it: its header in one frame, the rest in others."""
    header = {"type": "session", "version": 0, "id": session, "createdAt": created,
              "cwd": str(cwd), "delegationDepth": 0}  # fmt: skip
    lines = [json.dumps(event) + "\n" for event in RECORDED]
    frames = [zstd_frame(json.dumps(header).encode() + b"\n")]
    frames += [zstd_frame("".join(lines[:4]).encode()), zstd_frame("".join(lines[4:]).encode())]
    workspace = dsh_home / "sessions" / ("-" + str(cwd).replace("/", "-") + "--")
    path = workspace / session / "session.jsonl.zstd"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"".join(frames))
    later = time.time() + 3600
    for touched in (path, path.parent, workspace):
        os.utime(touched, (later, later))
    return path


@pytest.fixture
def bench(tmp_path, home, monkeypatch):
    monkeypatch.delenv("DSH_PERMISSION_MODE", raising=False)
    bench = Bench(tmp_path, "dsh")
    bench.script({"actions": [{"stdout": "Done: probe ran.\n"}]}, env_keys=["DSH_PERMISSION_MODE"])
    bench.dsh_home = tmp_path / "dsh-home"
    bench.dsh_home.mkdir()
    return bench


def env(bench: Bench, **extra: str) -> dict[str, str]:
    return bench.fake.env(DSH_HOME=str(bench.dsh_home), **extra)


def pointer(bench: Bench) -> str:
    return f"Read the task brief at {bench.out / 'brief.md'} and execute it fully."


# ---------------------------------------------------------------- argv per mode


def test_a_plain_run_names_the_brief_file(bench):
    done = bench.relay(env=env(bench))
    assert done.code == 0, done
    call = bench.fake.run_call()
    assert call["argv"] == ["--profile", "headless", pointer(bench)]
    assert (call["stdin"], call["env"]) == ("", {})
    assert (bench.out / "brief.md").read_text() == "smoke brief: run until killed.\n"
    result = done.result
    fields = ("permissionMode", "permissionModeSource", "readOnly", "patches", "modelOverlay")
    assert [result[f] for f in fields] == [None, None, False, [], None]
    assert (result["dshVersion"], result["status"], result["finalMessage"]) == (
        "fake-cli 0.0.0",
        "completed",
        "Done: probe ran.",
    )
    assert (result["briefPath"], result["finalPath"], result["outputPath"]) == (
        str(bench.out / "brief.md"),
        str(bench.out / "final.txt"),
        str(bench.out / "output.txt"),
    )
    assert (bench.out / "output.txt").read_text() == "Done: probe ran.\n"
    assert "tool" not in result and "stderrPath" not in result


@pytest.mark.parametrize(
    ("flags", "overlay", "wanted"),
    [
        (
            ["--model", "deepseek-v4-pro"],
            "- id: agent-default-model\n  config:\n    provider: deepseek-official\n"
            "    model: deepseek-v4-pro\n",
            {"provider": "deepseek-official", "model": "deepseek-v4-pro"},
        ),
        (
            ["--model", "my-local-model", "--provider", "local-vllm"],
            "- id: agent-default-model\n  config:\n    provider: local-vllm\n"
            "    model: my-local-model\n",
            {"provider": "local-vllm", "model": "my-local-model"},
        ),
    ],
)
def test_a_model_is_a_generated_overlay(bench, flags, overlay, wanted):
    done = bench.relay(*flags, env=env(bench))
    path = bench.out / "model-overlay.yml"
    assert bench.fake.run_call()["argv"] == [
        "--profile", "headless", "--patch", str(path), pointer(bench),
    ]  # fmt: skip
    assert path.read_text() == overlay
    assert done.result["modelOverlay"] == wanted
    summary = f"model requested: {wanted['provider']}/{wanted['model']} (an overlay"
    assert summary in done.out


def test_patches_pass_through_after_the_model_overlay(bench, tmp_path, monkeypatch):
    first, second = tmp_path / "local.yml", tmp_path / "more.yml"
    first.write_text("- id: llm-pi-ai\n")
    second.write_text("- id: other\n")
    monkeypatch.chdir(tmp_path)  # a relative --patch is taken from where the relay starts
    done = bench.relay(
        "--patch", "local.yml", "--model", "m", "--patch", str(second), env=env(bench)
    )
    assert bench.fake.run_call()["argv"] == [
        "--profile", "headless", "--patch", str(bench.out / "model-overlay.yml"),
        "--patch", str(first), "--patch", str(second), pointer(bench),
    ]  # fmt: skip
    assert done.result["patches"] == [str(first), str(second)]


# ---------------------------------------------------------------- DSH_PERMISSION_MODE


@pytest.mark.parametrize(
    ("flags", "exported", "mode", "source"),
    [
        (["--permission-mode", "danger-full-access"], None, "danger-full-access", "flag"),
        (["--permission-mode", "workspace-write"], "read-only", "workspace-write", "flag"),
        (["--read-only"], None, "read-only", "flag"),
        (["--read-only"], "workspace-write", "read-only", "flag"),
        ([], "read-only", "read-only", "environment"),
        ([], "workspace-write", "workspace-write", "environment"),
    ],
)
def test_the_permission_mode_reaches_dsh_and_the_result(bench, flags, exported, mode, source):
    extra = {"DSH_PERMISSION_MODE": exported} if exported else {}
    done = bench.relay(*flags, env=env(bench, **DETECT_ONLY, **extra))
    assert done.code == 0, done
    assert bench.fake.run_call()["env"] == {"DSH_PERMISSION_MODE": mode}
    result = done.result
    read_only = mode == "read-only"
    assert (result["permissionMode"], result["permissionModeSource"]) == (mode, source)
    assert result["readOnly"] is read_only
    assert ("readOnlyViolation" in result) is read_only
    assert f"permission mode: {mode} (DSH_PERMISSION_MODE, from {source})" in done.out


def test_a_read_only_run_that_writes_trips_the_wire(bench):
    bench.script({"actions": [{"write": ["hello.txt", "hi\n"]}]})
    done = bench.relay("--read-only", env=env(bench, **DETECT_ONLY))
    assert (done.result["readOnlyViolation"], done.result["readOnlyChanges"]) == (
        True,
        ["hello.txt"],
    )


@pytest.mark.parametrize(
    ("flags", "exported", "message"),
    [
        (
            ["--permission-mode", "yolo"],
            None,
            'invalid --permission-mode "yolo" (expected: read-only, workspace-write, '
            "danger-full-access)",
        ),
        (
            [],
            "full",
            'invalid DSH_PERMISSION_MODE "full" (expected: read-only, workspace-write, '
            "danger-full-access)",
        ),
        (
            ["--read-only", "--permission-mode", "workspace-write"],
            None,
            "--read-only conflicts with --permission-mode workspace-write; read-only runs use "
            "permission mode read-only",
        ),
        (
            ["--provider", "local-vllm"],
            None,
            "--provider requires --model; pass both or neither for the agent-default-model overlay",
        ),
        (
            ["--model", "a b"],
            None,
            "--model contains unsupported characters (allowed: letters, digits, . _ : / -)",
        ),
        (
            ["--model", "m", "--provider", "p;q"],
            None,
            "--provider contains unsupported characters (allowed: letters, digits, . _ : / -)",
        ),
        (["--session", "s"], None, "unknown option: --session"),
        (["--resume-last"], None, "unknown option: --resume-last"),
    ],
)
def test_usage_errors(bench, flags, exported, message):
    extra = {"DSH_PERMISSION_MODE": exported} if exported else {}
    done = bench.relay(*flags, env=env(bench, **extra))
    assert (done.code, done.err) == (2, f"relay: {message}\n")
    assert not bench.out.exists()


def test_a_missing_patch_file_is_a_usage_error(bench, tmp_path):
    done = bench.relay("--patch", str(tmp_path / "nope.yml"), env=env(bench))
    assert (done.code, done.err) == (2, f"relay: --patch file not found: {tmp_path / 'nope.yml'}\n")


def test_lanes_set_the_mode_and_a_read_only_lane_holds(bench, global_config):
    write_json(
        global_config,
        fleet_doc(
            {
                "wide": {"implementer": "dsh", "permissionMode": "danger-full-access"},
                "review": {"implementer": "dsh", "readOnly": True, "model": "m"},
            }
        ),
    )
    done = bench.relay("--lane", "wide", env=env(bench))
    assert bench.fake.calls("run")[-1]["env"] == {"DSH_PERMISSION_MODE": "danger-full-access"}
    assert (done.result["permissionMode"], done.result["permissionModeSource"]) == (
        "danger-full-access",
        "lane",
    )
    done = bench.relay("--lane", "review", env=env(bench, **DETECT_ONLY))
    assert bench.fake.calls("run")[-1]["env"] == {"DSH_PERMISSION_MODE": "read-only"}
    assert (done.result["permissionModeSource"], done.result["readOnly"]) == ("lane", True)
    assert done.result["modelOverlay"] == {"provider": "deepseek-official", "model": "m"}
    refused = bench.relay(
        "--lane", "review", "--permission-mode", "workspace-write", env=env(bench)
    )
    assert refused.code == 2
    assert refused.err == (
        "relay: lane review is read-only, and --permission-mode would let DeepSeek Harness "
        "write; a read-only lane is a policy: drop the flag, or dispatch through a lane that "
        "may write\n"
    )


def test_a_run_cannot_be_continued(bench):
    first = bench.relay(env=env(bench))
    assert first.code == 0, first
    run_id = first.result["relayRunId"]
    argv = relay_argv("dsh", "--brief", str(bench.brief), "--continue", run_id)
    done = run(argv, env=env(bench))
    assert (done.code, done.err) == (
        2,
        f"relay: --continue {run_id}: that run left no session id to resume\n",
    )


# ---------------------------------------------------------------- the session record


@needs_zstd
def test_the_record_of_this_run_is_harvested(bench):
    path = record(bench.dsh_home, bench.work)
    done = bench.relay(env=env(bench))
    assert done.code == 0, done
    result = done.result
    assert {k: result[k] for k in HARVESTED} == HARVESTED
    assert (result["sessionRecordPath"], result["sessionHarvest"]) == (str(path), "ok")
    # After the outcome, as the Node relay orders them.
    keys = list(result)
    assert keys.index("readOnly") < keys.index("dshVersion") < keys.index("finalMessage")
    assert keys.index("touchedFiles") < keys.index("sessionId") < keys.index("sessionHarvest")
    assert "model served: local-mock/mock-model" in done.out
    assert f"session record: {SESSION} (dsh cannot resume it)" in done.out
    assert "usage: 22 in / 6 out" in done.out


@needs_zstd
def test_the_newest_record_of_this_folder_wins(bench, tmp_path):
    record(bench.dsh_home, bench.work, "session-older", LATER - 1000)
    newest = record(bench.dsh_home, bench.work, "session-newer", LATER)
    record(bench.dsh_home, tmp_path / "elsewhere", "session-elsewhere", LATER + 1000)
    result = bench.relay(env=env(bench)).result
    assert (result["sessionId"], result["sessionRecordPath"]) == ("session-newer", str(newest))


@needs_zstd
def test_a_record_made_before_the_run_is_not_this_runs(bench):
    record(bench.dsh_home, bench.work, created=int(time.time() * 1000) - 60_000)
    done = bench.relay(env=env(bench))
    result = done.result
    assert {k: result[k] for k in NOTHING} == NOTHING
    assert result["sessionHarvest"] == "not-found"
    assert "session harvest: not-found; its fields are null, not zero" in done.out


@needs_zstd
def test_a_record_that_is_a_link_is_not_read(bench, tmp_path):
    path = record(bench.dsh_home, bench.work)
    real = tmp_path / "real.zstd"
    path.rename(real)
    path.symlink_to(real)
    assert bench.relay(env=env(bench)).result["sessionHarvest"] == "not-found"


def test_without_a_sessions_folder(bench):
    result = bench.relay(env=env(bench)).result
    assert {k: result[k] for k in NOTHING} == NOTHING
    assert result["sessionHarvest"] == "no-dsh-home"


def test_without_the_zstd_program(bench, tmp_path):
    record(bench.dsh_home, bench.work)
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "git").symlink_to(shutil.which("git"))
    path = f"{bench.fake.bin}{os.pathsep}{tools}"
    result = bench.relay(env={**env(bench), "PATH": path}).result
    assert result["status"] == "completed"
    assert {k: result[k] for k in NOTHING} == NOTHING
    assert result["sessionHarvest"] == "unsupported (the zstd program is not on PATH)"


def test_missing_binary(tmp_path, home):
    bench = Bench(tmp_path, "dsh")
    (bench.fake.bin / "dsh").unlink()
    done = bench.relay()
    assert done.code == 127
    result = done.result
    assert (result["status"], result["exitCode"]) == ("dsh_unavailable", 127)
    assert result["sessionHarvest"] == "skipped (dsh was not dispatched)"
    assert "`dsh` not found on PATH. Install it with `npm i -g @deepseek-ai/dsh`" in done.err


# ---------------------------------------------------------------- discover


def test_discover_reads_the_version_and_counts_the_session_records(tmp_path, home):
    bindir = install(tmp_path / "bin", {"dsh": {"--version": ("0.1.0-rc.8\n", "", 0)}})
    stored = tmp_path / "dsh-home" / "sessions" / "--repo--"
    for name, mtime in (("session-a", 1_790_000_000), ("session-b", 1_790_000_100)):
        (stored / name).mkdir(parents=True)
        os.utime(stored / name, (mtime, mtime))
    (stored / "notes").mkdir()
    script = ROOT / "skills" / "dsh-delegate" / "scripts" / "discover.py"
    environment = {
        "PATH": f"{bindir}:/usr/bin:/bin",
        "HOME": str(home),
        "DSH_HOME": str(tmp_path / "dsh-home"),
    }
    done = run([PYTHON, str(script), "--usage"], env=environment)
    assert done.code == 0, done
    found = next(e for e in done.json()["discovered"] if e["key"] == "dsh")
    assert (found["version"], found["authenticated"]) == ("0.1.0-rc.8", None)
    assert found["usage"] == {"sessions": 2, "lastUsed": "2026-09-21T14:15:00.000Z"}
