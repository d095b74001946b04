"""ZCode (`zcode`): the brief attached as brief.md, one JSON document on stdout.

ZCode ships its CLI inside a desktop app rather than on PATH, so the relay
looks for it itself: `--zcode-path`, then `$ZCODE_CLI`, then `zcode` on PATH,
then the app's bundled script (run with node). Only two modes work headless:
`yolo` writes, `plan` reads (and arms the read-only tripwire). `build` and
`edit` are refused: with nobody to answer permission prompts they block every
write and still exit 0.
"""

from __future__ import annotations

import os
import re
import sys

from delegate_skills import registry
from delegate_skills.jsjson import js_trim
from delegate_skills.pathsearch import which
from delegate_skills.relay.adapter import Adapter, State, resume_mode_lines, session_lines
from delegate_skills.relay.options import Flag, Usage, check_exclusive, value_flag
from delegate_skills.relay.parts import read_only_flag, resume_args, session_flags
from delegate_skills.relay.scan import MAX_BUFFERED_CHARS, parse_json

ATTACH_PROMPT = "Follow the attached brief exactly."
OUTPUT = "output.json"
SESSION = re.compile(r"sess_[A-Za-z0-9][A-Za-z0-9._:-]*")
SAFE_TOOLS = re.compile(r"[A-Za-z0-9][A-Za-z0-9 ,.:*()_/-]*")
SCRIPT_SUFFIX = re.compile(r"\.(?:c?js|mjs)\Z", re.IGNORECASE)
NO_WRITE_MODES = ("build", "edit")
WARN_TRUNCATED = (
    f"ZCode's stdout exceeded {MAX_BUFFERED_CHARS} characters and was truncated; the JSON "
    "result could not be parsed. finalMessage is the raw head — read outputPath."
)
WARN_UNPARSED = (
    "ZCode's stdout did not contain a parseable JSON result; finalMessage is the raw "
    "output — read outputPath."
)


class ZcodeState(State):
    def __init__(self, opts: dict) -> None:
        super().__init__(opts)
        self.stdout = ""
        self.truncated = False
        self.document: dict | None = None
        self.parsed_at = -1

    def parse(self) -> dict | None:
        """The document: everything from the first `{` on must be one JSON object."""
        if self.parsed_at != len(self.stdout):
            self.parsed_at = len(self.stdout)
            start = self.stdout.find("{")
            value = parse_json(self.stdout[start:]) if start >= 0 else None
            self.document = value if isinstance(value, dict) else None
            self.session_id = self.document.get("sessionId") if self.document else None
        return self.document


def bundle_candidates(env: dict[str, str]) -> list[str]:
    """Where the desktop app keeps its CLI on this platform (none on Linux)."""
    platform = sys.platform if sys.platform in ("win32", "darwin") else "linux"
    home = os.path.expanduser("~")
    local = env.get("LOCALAPPDATA") or os.path.join(home, "AppData", "Local")
    found = []
    for pattern in registry.BY_KEY["zcode"].locate.candidates.get(platform, ()):
        path = pattern.replace("%LOCALAPPDATA%", local)
        if path.startswith("~"):
            path = home + path[1:]
        found.append(os.path.normpath(path))
    return found


def on_path(name: str, env: dict[str, str]) -> str | None:
    """The first `name` on PATH that is a file; as in the Node bundle, the x bit is not checked."""
    for entry in (env.get("PATH") or "").split(os.pathsep):
        if len(entry) >= 2 and entry[0] == entry[-1] == '"':
            entry = entry[1:-1]
        if not entry:
            continue
        candidate = os.path.join(os.path.abspath(entry), name)
        if os.path.isfile(candidate):
            return candidate
    return None


def resolve(opts: dict, env: dict[str, str]) -> tuple[str, str] | None:
    """(file, source) for the ZCode CLI, or None when there is none to run."""
    named = opts["zcodePath"] or env.get("ZCODE_CLI", "").strip()
    if named:
        if not os.path.exists(named):
            return None
        return os.path.abspath(named), "flag" if opts["zcodePath"] else "env"
    found = on_path("zcode", env)
    if found:
        return found, "path"
    for candidate in bundle_candidates(env):
        if os.path.exists(candidate):
            return candidate, "bundle"
    return None


class Zcode(Adapter):
    key = "zcode"
    display = "ZCode"
    label = "ZCode"
    null_verdict_on_write_runs = True
    report_name = "zcode"
    install_hint = (
        "The ZCode CLI comes bundled with the desktop app: install the app, or name the CLI "
        "with --zcode-path <file> or ZCODE_CLI, or put a `zcode` shim on PATH."
    )
    write_access = "mode `yolo`"
    read_only_route = "`--read-only`: mode `plan`"
    about = (
        "Runs the Z.AI ZCode CLI on a brief. ZCode ignores stdin, so the brief is saved\n"
        "as brief.md and attached (--attach) with a one-line prompt; it never appears\n"
        "on the command line. The CLI is found by --zcode-path, $ZCODE_CLI, `zcode` on\n"
        "PATH, then the zcode.cjs inside the desktop app (run with node); result.json\n"
        "records which (zcodeSource). Modes: yolo (default) writes; plan (--read-only)\n"
        "only reads and is checked by the tripwire. build and edit are refused: headless,\n"
        "they block every write yet exit 0. The model and API key come from ZCode's own\n"
        "config (~/.zcode/cli/config.json) or ZAI_API_KEY, ZCODE_API_KEY or\n"
        "ANTHROPIC_API_KEY in the environment, which reaches ZCode unchanged."
    )
    has_model_flag = False
    brief_via = "attach"
    brief_name = "brief.md"
    parser = "text"
    events_name = OUTPUT
    path_fields = ("brief", ("outputPath", OUTPUT), "final")
    lane_blockers = (("readOnly", ("mode",)),)
    flags = (
        Flag(
            "--mode",
            "mode",
            metavar="<mode>",
            flags=("mode", "permissionMode"),
            help="plan | yolo (default: yolo). build and edit cannot write headless.",
        ),
        read_only_flag("Same as --mode plan: review or diagnose, no edits."),
        value_flag(
            "--disallowed-tools",
            "disallowedTools",
            "<list>",
            'Tools ZCode must not offer, comma or space separated ("Write,Edit,Bash").',
        ),
        *session_flags(
            "Resume the newest ZCode session of --cd (zcode -c).",
            "Continue this ZCode session (sess_…); not with --resume-last.",
        ),
        value_flag(
            "--zcode-path",
            "zcodePath",
            "<file>",
            "The ZCode CLI to run (a binary, a shim or a .cjs bundle).",
            flagged=False,
        ),
    )

    def apply_dial(self, opts: dict, field: str, value) -> None:
        opts["mode" if field == "permissionMode" else field] = value

    def validate(self, opts: dict) -> None:
        mode = opts["mode"]
        if opts["readOnly"] and mode is not None and mode != "plan":
            raise Usage(
                f"--read-only conflicts with --mode {mode}; read-only runs use ZCode's plan mode"
            )
        if mode is None:
            mode = opts["mode"] = "plan" if opts["readOnly"] else "yolo"
        if mode in NO_WRITE_MODES:
            raise Usage(
                f"--mode {mode} cannot write in a headless run: ZCode has no permission client "
                "there, so its write tools are blocked and the run exits 0 having changed "
                "nothing. Use --mode yolo to write, or --read-only for plan mode."
            )
        if mode not in registry.ZCODE_MODE:
            raise Usage(f'invalid --mode "{mode}" (expected: {", ".join(registry.ZCODE_MODE)})')
        opts["readOnly"] = mode == "plan"
        tools = opts["disallowedTools"]
        if tools is not None and SAFE_TOOLS.fullmatch(tools) is None:
            raise Usage(
                "--disallowed-tools contains unsupported characters "
                "(allowed: letters, digits, spaces, and , . : * ( ) _ / -)"
            )
        self.watchdog_ms(opts)
        check_exclusive(opts, ("session", "--session"), ("resumeLast", "--resume-last"))
        if opts["session"] is not None and SESSION.fullmatch(opts["session"]) is None:
            raise Usage(
                "--session must be a ZCode session id of the form sess_... "
                "(letters, digits, . _ : -)"
            )

    def launcher(self, opts: dict, env: dict[str, str]) -> list[str] | None:
        found = resolve(opts, env)
        opts["_zcodeSource"], opts["_zcodePath"] = found[1] if found else None, None
        if found is None:
            return None
        path = opts["_zcodePath"] = found[0]
        if SCRIPT_SUFFIX.search(path) is None:
            return [path]
        node = self.impl.locate.launcher
        return [which(node, env) or node, path]

    def build_argv(self, opts: dict, run) -> list[str]:
        argv = ["--cwd", opts["cd"], "--json", "--no-color", "--mode", opts["mode"]]
        if opts["disallowedTools"]:
            argv += ["--disallowed-tools", opts["disallowedTools"]]
        argv += resume_args(opts, ("-c",))
        return [*argv, "--attach", run.file(self.brief_name), "--prompt", ATTACH_PROMPT]

    def new_state(self, opts: dict) -> State:
        return ZcodeState(opts)

    def on_text(self, state: ZcodeState, text: str) -> None:
        if state.truncated:
            return
        state.stdout += text
        if len(state.stdout) > MAX_BUFFERED_CHARS:
            state.stdout = state.stdout[:MAX_BUFFERED_CHARS]
            state.truncated = True

    def final_message(self, state: ZcodeState, run) -> str:
        document = state.parse()
        if document is not None and isinstance(document.get("response"), str):
            return js_trim(document["response"])
        return js_trim(state.stdout)

    def config_fields(self, opts: dict, state: State) -> dict:
        return {
            "mode": opts["mode"],
            "readOnly": opts["readOnly"],
            "disallowedTools": opts["disallowedTools"],
            "resumeLast": opts["resumeLast"],
            "session": opts["session"],
        }

    def after_version_fields(self, state: State) -> dict:
        return {
            "zcodeSource": state.opts.get("_zcodeSource"),
            "zcodePath": state.opts.get("_zcodePath"),
        }

    def id_fields(self, state: ZcodeState) -> dict:
        state.parse()
        return {"sessionId": state.session_id}

    def reported_usage(self, state: ZcodeState) -> dict | None:
        usage = (state.parse() or {}).get("usage")
        return usage if isinstance(usage, dict) else None

    def trailing_fields(self, state: ZcodeState) -> dict:
        document = state.parse() or {}
        projection = document.get("projection")
        window = projection.get("contextWindow") if isinstance(projection, dict) else None
        fields = {"usage": document.get("usage"), "contextWindow": window}
        warning = self.parse_warning(state)
        if warning:
            fields["parseWarning"] = warning
        return fields

    def parse_warning(self, state: ZcodeState) -> str | None:
        if not state.exited or state.parse() is not None:
            return None
        return WARN_TRUNCATED if state.truncated else WARN_UNPARSED

    def summary_lines(self, opts: dict, state: ZcodeState, result: dict) -> list[str]:
        lines = []
        if result["zcodePath"]:
            lines.append(f"zcode cli: {result['zcodePath']} ({result['zcodeSource']})")
        lines.append(f"mode: {opts['mode']}" + (" (read-only)" if opts["readOnly"] else ""))
        lines += resume_mode_lines(
            opts, "resume: latest session for this directory", "resume: session {id}"
        )
        lines += session_lines(state.session_id)
        if result.get("parseWarning"):
            lines.append(f"warning: {result['parseWarning']}")
        return lines


ADAPTER = Zcode()
