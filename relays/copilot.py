"""GitHub Copilot CLI (`copilot -p`): a file-reference prompt, JSONL events.

The prompt is `@<run dir>/brief.txt`. Copilot does not inline that file: the
model reads it with its own `view` tool, which Copilot allows headlessly only
under --cd or the system temp dir, so a run dir elsewhere is added with
`--add-dir`. A headless run auto-denies any tool call that would need a
person's approval; `--allow-all-tools` is the opt-in. `--read-only` is plan
mode. The version preflight is `copilot --version`: `copilot version` also
checks for updates over the network and, offline, keeps waiting long after it
printed the version.
"""

from __future__ import annotations

import os
import re

from delegate_skills import registry
from delegate_skills.jstext import js_trim
from delegate_skills.relay.adapter import Adapter, State, session_lines
from delegate_skills.relay.options import (
    NOT_SCHEDULABLE,
    check_choice,
    check_exclusive,
    check_filled,
    switch_flag,
    value_flag,
)
from delegate_skills.relay.parts import check_shell_tokens, resumed

#: Put before the file reference on a resumed run, so the model acts on the
#: new brief instead of summarising it. The exact words are part of the argv
#: the Node relay sends.
RESUME_DIRECTIVE = (
    "Execute the instructions in the referenced file, then report what you did. "
    "Do not just summarize the file: "
)
_SEMVER = re.compile(r"[0-9]+\.[0-9]+\.[0-9]+(?:-[A-Za-z0-9._-]+)?")


class CopilotState(State):
    def __init__(self, opts: dict) -> None:
        super().__init__(opts)
        self.denial: str | None = None


def _inside(path: str, root: str) -> bool:
    try:
        return os.path.commonpath([path, root]) == root
    except ValueError:
        return False


def readable_without_grant(run_dir: str, cd: str) -> bool:
    """Whether Copilot lets the model read `run_dir` without `--add-dir`."""
    import tempfile

    roots = (cd, tempfile.gettempdir())
    for resolve in (os.path.abspath, os.path.realpath):
        if not any(_inside(resolve(run_dir), resolve(root)) for root in roots):
            return False
    return True


class Copilot(Adapter):
    key = "copilot"
    session_id_after_signal = False
    resume_keeps_id = True  # checked against the real CLI
    display = "copilot"
    tool = "copilot"
    install_hint = "Get it with `npm install -g @github/copilot`, then sign in: `copilot login`."
    write_access = "tool calls that need approval auto-denied unless `--allow-all-tools`"
    read_only_route = "`--read-only`: plan mode"
    about = (
        "Runs GitHub's Copilot CLI as `copilot -p @<run dir>/brief.txt` and records\n"
        "the JSONL events. Copilot passes the reference on; the model\n"
        "opens the file with its view tool, which may read under --cd and the temp\n"
        "dir (a run dir elsewhere is granted with --add-dir). Without\n"
        "--allow-all-tools a headless run auto-denies every tool call that needs\n"
        "approval, and the relay reports such a run as failed. --read-only runs\n"
        "Copilot in plan mode. The version check is `copilot --version` (local)."
    )
    default_timeout = "30m"
    timeout_message = NOT_SCHEDULABLE
    brief_via = "argv"
    brief_route = (
        "The relay writes it into the run directory and passes copilot a reference "
        "to that file (`copilot -p @<run dir>/brief.txt`); the model opens it with its view tool."
    )
    parser = "lines"
    stderr_file = True
    path_fields = ("brief", "final", "events", "stderr")
    #: An explicit --allow-all-tools wins over a read-only lane.
    lane_blockers = (("readOnly", ("allowAllTools",)),)
    flags = (
        value_flag(
            "--effort",
            "effort",
            "<level>",
            f"Reasoning effort: {', '.join(registry.COPILOT_EFFORT)}.",
        ),
        switch_flag(
            "--read-only",
            "readOnly",
            "Plan mode (--mode plan): Copilot plans and edits nothing.",
            flagged=True,
        ),
        switch_flag(
            "--allow-all-tools",
            "allowAllTools",
            "Grant every tool call; without it a headless run auto-denies them.",
            flagged=True,
        ),
        switch_flag(
            "--resume-last", "resumeLast", "Continue the most recent session (copilot --continue)."
        ),
        value_flag(
            "--session",
            "session",
            "<id>",
            "Continue this session (copilot --resume=<id>).",
            flagged=False,
        ),
    )

    def validate(self, opts: dict) -> None:
        check_exclusive(
            opts,
            ("readOnly", "--read-only"),
            ("allowAllTools", "--allow-all-tools"),
            "; plan mode works without tool permissions",
        )
        check_exclusive(opts, ("resumeLast", "--resume-last"), ("session", "--session"))
        check_filled(opts, "session", "--session")
        check_shell_tokens(opts, ("model", "effort", "session"))
        check_choice(opts, "effort", "--effort", registry.COPILOT_EFFORT)
        self.watchdog_ms(opts)

    def version_args(self, opts: dict) -> tuple[tuple[str, ...], ...]:
        return (("--version",),)

    def probe_name(self, opts: dict) -> str:
        return "copilot --version"

    def parse_version(self, stdout: str) -> str:
        first = js_trim(js_trim(stdout).split("\n")[0])
        found = _SEMVER.search(first)
        return found.group(0) if found else first or "unknown"

    def build_argv(self, opts: dict, run) -> list[str]:
        argv = ["--output-format", "json", "--no-color", "--stream", "off"]
        if opts["readOnly"]:
            argv += ["--mode", "plan"]
        if opts["allowAllTools"]:
            argv.append("--allow-all-tools")
        if opts["resumeLast"]:
            argv.append("--continue")
        elif opts["session"]:
            argv.append(f"--resume={opts['session']}")
        for flag in ("model", "effort"):
            if opts[flag]:
                argv += [f"--{flag}", opts[flag]]
        if not readable_without_grant(run.path, opts["cd"]):
            argv += ["--add-dir", run.path]
        prompt = "@" + run.file(self.brief_name)
        if opts["resumeLast"] or opts["session"]:
            prompt = RESUME_DIRECTIVE + prompt
        return [*argv, "-p", prompt]

    def new_state(self, opts: dict) -> State:
        return CopilotState(opts)

    def on_event(self, state: CopilotState, event: dict) -> None:
        if event.get("ephemeral"):
            return
        kind = event.get("type")
        data = event.get("data") if isinstance(event.get("data"), dict) else {}
        if kind == "assistant.message" and isinstance(data.get("content"), str):
            state.final = data["content"]
        elif kind == "result" and event.get("sessionId"):
            state.session_id = event["sessionId"]
        elif kind == "tool.execution_complete" and data.get("success") is False:
            error = data.get("error")
            if isinstance(error, dict) and error.get("code") == "denied":
                state.denial = error.get("message") or "Permission denied"

    def final_message(self, state: State, run) -> str:
        return state.final

    def failure(self, state: CopilotState) -> str | None:
        if state.denial is None:
            return None
        said = f"copilot auto-denied a tool call in headless mode: {state.denial.rstrip('.')}."
        if state.opts["readOnly"]:
            return (
                f"{said} This --read-only run is in plan mode, which refuses changes; "
                "drop --read-only (and pass --allow-all-tools) if the brief needs edits"
            )
        return f"{said} Pass --allow-all-tools to grant full tool permissions"

    def config_fields(self, opts: dict, state: State) -> dict:
        return {
            "model": opts["model"],
            "effort": opts["effort"],
            "readOnly": opts["readOnly"],
            "allowAllTools": opts["allowAllTools"],
            "resumed": resumed(opts),
            "sessionId": state.session_id,
        }

    def summary_lines(self, opts: dict, state: State, result: dict) -> list[str]:
        lines = []
        if result["readOnly"]:
            lines.append("mode: plan (read-only)")
        if result["allowAllTools"]:
            lines.append("autonomy: --allow-all-tools")
        if result["resumed"]:
            lines.append("mode: resumed an existing session")
        lines += session_lines(state.session_id)
        return lines


ADAPTER = Copilot()
