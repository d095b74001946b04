"""Oh My Pi (`omp --mode json`): brief on stdin, JSON events, approval mode yolo.

A write run passes `--yolo` (omp's approval mode yolo), so no tool call waits
for a person. A read-only run drops it and limits omp to the `read,grep,glob`
tools. Project-level `.omp` extras (extensions, skills, rules) stay off unless
`--approve` says the project is trusted. The lane's effort dial reaches this
relay as `thinking` (lane resolution renames it) and goes out as `--thinking`.
"""

from __future__ import annotations

from delegate_skills import registry
from delegate_skills.relay.adapter import State, session_lines
from delegate_skills.relay.options import (
    check_choice,
    switch_flag,
    value_flag,
)
from delegate_skills.relay.parts import AgentEventsAdapter, AgentState, resumed

READ_ONLY_TOOLS = "read,grep,glob"
#: What keeps a project's own `.omp` resources out of an unapproved run.
UNTRUSTED = ("--no-extensions", "--no-skills", "--no-rules")


class Omp(AgentEventsAdapter):
    key = "omp"
    resume_keeps_id = True  # checked against the real CLI
    display = "omp"
    tool = "omp"
    install_hint = (
        "Get it with `bun install -g @oh-my-pi/pi-coding-agent`, then sign in from "
        "inside omp (`/login`) or export a provider's API key."
    )
    write_access = "`omp --yolo` (approval mode yolo)"
    read_only_route = "`--read-only`: read, grep and glob tools"
    about = (
        "Runs Oh My Pi as `omp --mode json` with the brief piped to its stdin, and\n"
        "records the JSON events. Write runs use approval mode yolo (--yolo); --read-only gives\n"
        "omp only the read, grep and glob tools. The project's own .omp extensions,\n"
        "skills and rules are switched off unless --approve trusts them. To see which\n"
        "models --provider/--model can name, run `omp models` (there is no\n"
        "--list-models flag)."
    )
    default_timeout = "30m"
    stderr_file = True
    path_fields = ("brief", "final", "events", "stderr")
    flags = (
        value_flag("--provider", "provider", "<name>", "Provider for this run (see `omp models`)."),
        value_flag(
            "--thinking",
            "thinking",
            "<level>",
            f"Thinking level: {', '.join(registry.OMP_THINKING)} (a lane's effort).",
        ),
        value_flag("--session", "session", "<id>", "Resume this omp session by id.", flagged=False),
        switch_flag(
            "--resume-last",
            "resumeLast",
            "Resume the most recent session in --cd (omp --continue).",
        ),
        switch_flag(
            "--read-only",
            "readOnly",
            f"No --yolo; omp may use only the {READ_ONLY_TOOLS} tools.",
            flagged=True,
        ),
        switch_flag(
            "--approve",
            "approve",
            "Trust the project's .omp extensions, skills and rules for this run.",
        ),
    )

    def validate(self, opts: dict) -> None:
        self.check_agent_options(opts)
        check_choice(opts, "thinking", "--thinking", registry.OMP_THINKING)
        self.watchdog_ms(opts)

    def build_argv(self, opts: dict, run) -> list[str]:
        argv = self.agent_argv(opts, ("provider", "model", "thinking"))
        argv += ["--tools", READ_ONLY_TOOLS] if opts["readOnly"] else ["--yolo"]
        if not opts["approve"]:
            argv += UNTRUSTED
        return argv

    def config_fields(self, opts: dict, state: State) -> dict:
        return {
            "provider": opts["provider"],
            "model": opts["model"],
            "thinking": opts["thinking"],
            "readOnly": opts["readOnly"],
            "yolo": not opts["readOnly"],
            "projectTrusted": opts["approve"],
            "resumed": resumed(opts),
        }

    def summary_lines(self, opts: dict, state: AgentState, result: dict) -> list[str]:
        lines = []
        if result["readOnly"]:
            lines.append(f"mode: read-only (tools {READ_ONLY_TOOLS})")
        if result["yolo"]:
            lines.append("mode: --yolo (tools.approvalMode yolo)")
        if result["projectTrusted"]:
            lines.append("mode: project resources trusted (--approve)")
        if result["resumed"]:
            lines.append("mode: resumed an existing session")
        if result["thinking"]:
            lines.append(f"thinking: {result['thinking']}")
        lines += self.model_lines(state)
        lines += session_lines(state.session_id)
        return lines


ADAPTER = Omp()
