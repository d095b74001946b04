"""DeepSeek Harness (`dsh --profile headless`): a pointer to the brief, plain-text answer.

See `Dsh.about` for the run itself. What dsh does not print (session id, usage,
the model that served) it records: each run appends to
`$DSH_HOME/sessions/<workspace>/session-<uuid>/session.jsonl.zstd`, a series of
zstd frames. After the run the relay reads the record whose own header names
this run's folder and a creation time after the relay started (with the `zstd`
program; `sessionHarvest` says why its fields are null when they are).
--permission-mode, a lane or an exported DSH_PERMISSION_MODE sets the mode, and
`permissionModeSource` says which.
"""

from __future__ import annotations

import os
import time

from delegate_skills import registry
from delegate_skills.pathsearch import which
from delegate_skills.relay.adapter import State
from delegate_skills.relay.options import (
    Flag,
    Usage,
    check_choice,
    check_model,
    check_token,
    timeout_ms,
)
from delegate_skills.relay.parts import StdoutReportAdapter, StdoutState, is_number, text_or_none
from delegate_skills.relay.records import (
    command_output,
    first_object,
    json_objects,
    recent_records,
)

BRIEF = "brief.md"
OUTPUT = "output.txt"
OVERLAY = "model-overlay.yml"
DEFAULT_PROVIDER = "deepseek-official"
READ_ONLY = "read-only"
MODE_ENV = "DSH_PERMISSION_MODE"
RECORD = "session.jsonl.zstd"
#: Bounds of the harvest: records looked at, bytes read of a header and of a record.
MAX_CANDIDATES = 64
HEADER_BYTES = 64 * 1024
RECORD_BYTES = 64 * 1024 * 1024
#: Records last written this long before the run started are not looked at.
MTIME_SLACK_S = 2.0
#: The longest one record's decompression may take.
UNPACK_SECONDS = 10.0
HARVEST_FIELDS = (
    "sessionId", "sessionRecordPath", "actualProvider", "actualModel", "reasoningEffort",
    "usage", "turnEndReason", "recordedPermissionMode", "recordedSandboxMode",
    "recordedApprovalPolicy",
)  # fmt: skip


def sessions_root(cd: str) -> str | None:
    """`$DSH_HOME/sessions` (a relative DSH_HOME is dsh's, from --cd), else ~/.dsh/sessions."""
    home = os.environ.get("DSH_HOME", "").strip()
    base = home or os.path.join(os.environ.get("HOME") or os.path.expanduser("~"), ".dsh")
    root = os.path.join(cd, base, "sessions")
    return root if os.path.isdir(root) else None


def unpack(zstd: str, path: str, limit: int) -> bytes:
    """The first `limit` bytes of every frame of the zstd file at `path`, decompressed."""
    return command_output([zstd, "-dcq", "--", path], limit, UNPACK_SECONDS)


def _data(event: dict) -> dict:
    return event["data"] if isinstance(event.get("data"), dict) else {}


def find_record(zstd: str, root: str, cd: str, started_ms: float) -> tuple[str, str] | None:
    """(path, session id) of the newest record made for `cd` since `started_ms`."""
    cutoff = started_ms / 1000 - MTIME_SLACK_S
    folders = {cd, os.path.realpath(cd)}
    best = None
    for record in recent_records(root, RECORD, cutoff, MAX_CANDIDATES):
        header = first_object(unpack(zstd, record, HEADER_BYTES))
        created = header.get("createdAt")
        if header.get("type") != "session" or not isinstance(header.get("id"), str):
            continue
        if not is_number(created) or created < started_ms or header.get("cwd") not in folders:
            continue
        if best is None or created > best[0]:
            best = (created, record, header["id"])
    return None if best is None else (best[1], best[2])


def read_record(zstd: str, path: str, session_id: str) -> dict:
    last: dict[str, dict] = {}
    usage = {"inputTokens": 0, "outputTokens": 0, "assistantMessages": 0}
    for event in json_objects(unpack(zstd, path, RECORD_BYTES)):
        kind = event.get("type")
        if isinstance(kind, str):
            last[kind] = _data(event)
        counted = _data(event).get("usage") if kind == "assistant/message" else None
        if isinstance(counted, dict):
            for key in ("inputTokens", "outputTokens"):
                usage[key] += counted[key] if is_number(counted.get(key)) else 0
            usage["assistantMessages"] += 1
    header = (last.get("request/header") or {}).get("header")
    config = header.get("config") if isinstance(header, dict) else None
    config = config if isinstance(config, dict) else {}
    reason = (last.get("turn/end") or {}).get("reason")
    return {
        "sessionId": session_id,
        "sessionRecordPath": path,
        "actualProvider": text_or_none(config.get("provider")),
        "actualModel": text_or_none(config.get("model")),
        "reasoningEffort": text_or_none(config.get("reasoningEffort")),
        "usage": usage if usage["assistantMessages"] else None,
        "turnEndReason": text_or_none(reason.get("kind")) if isinstance(reason, dict) else None,
        "recordedPermissionMode": text_or_none((last.get("permission/preset") or {}).get("preset")),
        "recordedSandboxMode": text_or_none((last.get("sandbox/mode") or {}).get("mode")),
        "recordedApprovalPolicy": text_or_none((last.get("approval/policy") or {}).get("policy")),
    }


def harvest(cd: str, started_ms: float | None) -> dict:
    """The harvest fields of this run's session record, and `sessionHarvest` (why, or "ok")."""
    empty = dict.fromkeys(HARVEST_FIELDS)
    if started_ms is None:
        return {**empty, "sessionHarvest": "skipped (dsh was not dispatched)"}
    zstd = which("zstd", dict(os.environ))
    if zstd is None:
        return {**empty, "sessionHarvest": "unsupported (the zstd program is not on PATH)"}
    root = sessions_root(cd)
    if root is None:
        return {**empty, "sessionHarvest": "no-dsh-home"}
    try:
        found = find_record(zstd, root, cd, started_ms)
        if found is None:
            return {**empty, "sessionHarvest": "not-found"}
        return {**read_record(zstd, *found), "sessionHarvest": "ok"}
    except OSError as problem:
        return {**empty, "sessionHarvest": f"error: {problem.strerror or problem}"}


class DshState(StdoutState):
    def __init__(self, opts: dict) -> None:
        super().__init__(opts)
        self.started_ms: float | None = None
        #: What the session record said, read once for each result written.
        self.harvested: dict | None = None


class Dsh(StdoutReportAdapter):
    key = "dsh"
    display = "DeepSeek Harness"
    install_hint = (
        "Install it with `npm i -g @deepseek-ai/dsh` (Node 22+), and give it a provider "
        "credential (DEEPSEEK_API_KEY, or the provider its settings.yaml names)."
    )
    write_access = "DSH_PERMISSION_MODE workspace-write (dsh's default)"
    read_only_route = "`--read-only`: DSH_PERMISSION_MODE=read-only, enforced by dsh's sandbox"
    about = (
        "Hands a brief to `dsh --profile headless` as a one-line task naming brief.md\n"
        "in the run directory, and keeps its final message (stdout, copied to\n"
        "output.txt). Autonomy is dsh's DSH_PERMISSION_MODE: --permission-mode or a\n"
        "lane, else an exported value, else dsh's own default (workspace-write);\n"
        "--read-only is read-only, which dsh's sandbox enforces. --model/--provider\n"
        "become a generated --patch overlay (a model stored in settings.yaml\n"
        "outranks it). dsh prints no session id and cannot resume; the relay reads\n"
        "the session record dsh wrote (with the zstd program) for the session id,\n"
        "the model that served, token usage and the recorded posture."
    )
    brief_via = "file"
    brief_name = BRIEF
    events_name = OUTPUT
    stderr_file = False
    path_fields = ("brief", "final", ("outputPath", OUTPUT))
    resumable = False
    resume_field = None
    latest_field = None
    session_id_after_signal = False
    flags = (
        Flag(
            "--provider",
            "provider",
            metavar="<name>",
            flags=("provider",),
            help=f"Provider for the model overlay (default: {DEFAULT_PROVIDER}); needs --model.",
        ),
        Flag(
            "--permission-mode",
            "permissionMode",
            metavar="<mode>",
            sets={"permissionModeSource": "flag"},
            flags=("permissionMode",),
            help="DSH_PERMISSION_MODE for the run: read-only | workspace-write | "
            "danger-full-access (default: an exported DSH_PERMISSION_MODE, else dsh's own).",
        ),
        Flag(
            "--read-only",
            sets={"readOnly": True, "readOnlySource": "flag"},
            flags=("readOnly",),
            help="Same as --permission-mode read-only (dsh's sandbox enforces it); the relay "
            "reports readOnlyViolation.",
        ),
        Flag(
            "--patch",
            "patches",
            metavar="<file>",
            append=True,
            help="Another --patch overlay for dsh (repeatable), passed through: a provider, "
            "a local endpoint.",
        ),
    )
    #: A read-only lane yields to an explicit --permission-mode (which is then checked).
    lane_blockers = (("readOnly", ("permissionMode",)),)

    def defaults(self) -> dict:
        return {**super().defaults(), "permissionModeSource": None, "readOnlySource": None}

    def apply_dial(self, opts: dict, field: str, value) -> None:
        if field == "permissionMode":
            opts.update(permissionMode=value, permissionModeSource="lane")
        elif field == "readOnly":
            opts["readOnly"] = value is True
            opts["readOnlySource"] = "lane" if value is True else opts["readOnlySource"]
        else:
            super().apply_dial(opts, field, value)

    def validate(self, opts: dict) -> None:
        ambient = os.environ.get(MODE_ENV, "").strip()
        if opts["permissionMode"] is None and ambient:
            opts.update(permissionMode=ambient, permissionModeSource="environment")
        mode, source = opts["permissionMode"], opts["permissionModeSource"]
        if opts["readOnly"]:
            if mode not in (None, READ_ONLY) and source != "environment":
                raise Usage(
                    f"--read-only conflicts with --permission-mode {mode}; read-only runs use "
                    "permission mode read-only"
                )
            source = opts["readOnlySource"] or "flag"
            opts.update(permissionMode=READ_ONLY, permissionModeSource=source)
        where = MODE_ENV if opts["permissionModeSource"] == "environment" else "--permission-mode"
        check_choice(opts, "permissionMode", where, registry.DSH_PERMISSION)
        opts["readOnly"] = opts["permissionMode"] == READ_ONLY
        check_model(opts, registry.SHELL_SAFE)
        check_token(opts, "provider", "--provider", registry.SHELL_SAFE)
        if opts["provider"] is not None and opts["model"] is None:
            raise Usage(
                "--provider requires --model; pass both or neither for the agent-default-model "
                "overlay"
            )
        timeout_ms(opts)
        opts["patches"] = [os.path.abspath(patch) for patch in opts["patches"]]
        for patch in opts["patches"]:
            if not os.path.exists(patch):
                raise Usage(f"--patch file not found: {patch}")

    def read_only(self, opts: dict) -> bool:
        return bool(opts["readOnly"]) or opts["permissionMode"] == READ_ONLY

    def own_sandbox(self, opts: dict) -> bool:
        return opts["permissionMode"] != "danger-full-access"

    def child_env(self, opts: dict) -> dict[str, str]:
        env = dict(os.environ)
        if opts["permissionMode"] is not None:
            env[MODE_ENV] = opts["permissionMode"]
        return env

    def overlay(self, opts: dict) -> dict | None:
        if opts["model"] is None:
            return None
        return {"provider": opts["provider"] or DEFAULT_PROVIDER, "model": opts["model"]}

    def extra_artifacts(self, opts: dict, run) -> dict[str, bytes]:
        wanted = self.overlay(opts)
        if wanted is None:
            return {}
        text = (
            "- id: agent-default-model\n  config:\n"
            f"    provider: {wanted['provider']}\n    model: {wanted['model']}\n"
        )
        return {OVERLAY: text.encode()}

    def build_argv(self, opts: dict, run) -> list[str]:
        argv = ["--profile", "headless"]
        if opts["model"] is not None:
            argv += ["--patch", run.file(OVERLAY)]
        for patch in opts["patches"]:
            argv += ["--patch", patch]
        argv.append(f"Read the task brief at {run.file(BRIEF)} and execute it fully.")
        return argv

    def new_state(self, opts: dict) -> State:
        return DshState(opts)

    def before_launch(self, state: DshState) -> None:
        state.started_ms = time.time() * 1000

    def config_fields(self, opts: dict, state: State) -> dict:
        return {
            "permissionMode": opts["permissionMode"],
            "permissionModeSource": opts["permissionModeSource"],
            "readOnly": opts["readOnly"],
            "patches": list(opts["patches"]),
            "modelOverlay": self.overlay(opts),
        }

    def metric_fields(self, state: DshState) -> dict:
        # The session record is read here, for tokenUsage, and its fields follow touchedFiles.
        state.harvested = harvest(state.opts["cd"], state.started_ms)
        state.usage = state.harvested.get("usage")
        return super().metric_fields(state)

    def trailing_fields(self, state: DshState) -> dict:
        return state.harvested or harvest(state.opts["cd"], state.started_ms)

    def summary_lines(self, opts: dict, state: State, result: dict) -> list[str]:
        lines = []
        if result["permissionMode"]:
            source = result["permissionModeSource"] or "flag"
            lines.append(f"permission mode: {result['permissionMode']} ({MODE_ENV}, from {source})")
        if result["modelOverlay"]:
            wanted = result["modelOverlay"]
            lines.append(f"model requested: {wanted['provider']}/{wanted['model']} (an overlay; "
                         "a model stored in settings.yaml outranks it)")  # fmt: skip
        if result["actualModel"]:
            served = "/".join(filter(None, (result["actualProvider"], result["actualModel"])))
            lines.append(f"model served: {served}")
        if result["sessionId"]:
            lines.append(f"session record: {result['sessionId']} (dsh cannot resume it)")
        if result["usage"]:
            usage = result["usage"]
            lines.append(f"usage: {usage['inputTokens']} in / {usage['outputTokens']} out")
        harvested = result["sessionHarvest"]
        if harvested != "ok" and not harvested.startswith("skipped"):
            lines.append(f"session harvest: {harvested}; its fields are null, not zero")
        return lines


ADAPTER = Dsh()
