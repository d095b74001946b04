"""Pi (`pi --mode json`): brief on stdin, JSON events, full local tools.

Pi offers neither a sandbox nor permission modes: a write run gets every built-in
tool with the user's own rights. Read-only is a tool set (`read,grep,find,ls`),
not a boundary; the relay reports the git tripwire for it. Project-local pi
files (settings, extensions, skills) stay untrusted (`--no-approve`) unless
--approve opts in. An assistant turn that ends in error or aborted fails the
run even when pi exits 0.
"""

from __future__ import annotations

from delegate_skills.relay.adapter import State
from delegate_skills.relay.options import Usage, switch_flag, value_flag
from delegate_skills.relay.parts import AgentEventsAdapter, AgentState, resume_lines, resumed

READ_ONLY_TOOLS = "read,grep,find,ls"


class Pi(AgentEventsAdapter):
    key = "pi"
    resume_keeps_id = True  # checked against the real CLI
    display = "pi"
    tool = "pi"
    install_hint = (
        "Get it with `npm install -g @earendil-works/pi-coding-agent`, then sign in from "
        "inside pi (`/login`) or export a provider's API key."
    )
    write_access = "every built-in tool, no sandbox"
    read_only_route = "`--read-only`: read, grep, find and ls tools (not a boundary)"
    about = (
        "Hands a brief to pi (`pi --mode json`) on stdin and records its JSON events.\n"
        "Pi offers neither a sandbox nor permission modes: a run has pi's full tools\n"
        "with your rights. --read-only narrows the tools to read,grep,find,ls (a tool\n"
        "set, not a boundary; readOnlyViolation reports what git saw). Project-local\n"
        "pi settings, extensions and skills are ignored unless --approve. pi 1.x\n"
        "needs --model whenever --provider is given."
    )
    default_timeout = "30m"
    stderr_file = True
    path_fields = ("brief", "final", "events", "stderr")
    flags = (
        value_flag("--provider", "provider", "<name>", "Provider to pick --model from."),
        value_flag("--session", "session", "<id>", "Resume this session id.", flagged=False),
        switch_flag(
            "--resume-last",
            "resumeLast",
            "Continue the most recent session in --cd (pi --continue).",
        ),
        switch_flag(
            "--approve", "approve", "Trust project-local pi files for this run (pi --approve)."
        ),
        switch_flag("--read-only", "readOnly", f"Only the {READ_ONLY_TOOLS} tools.", flagged=True),
    )

    def validate(self, opts: dict) -> None:
        self.check_agent_options(opts)
        self.watchdog_ms(opts)
        if opts["provider"] is not None and opts["model"] is None:
            # pi 1.x exits 1 with "--provider requires --model"; say so before dispatching.
            raise Usage(
                "--provider requires --model (pi 1.x refuses a provider alone); "
                "pass both, e.g. --provider google --model <pattern>"
            )

    def build_argv(self, opts: dict, run) -> list[str]:
        argv = self.agent_argv(opts)
        argv.append("--approve" if opts["approve"] else "--no-approve")
        if opts["readOnly"]:
            argv += ["--tools", READ_ONLY_TOOLS]
        return argv

    def config_fields(self, opts: dict, state: State) -> dict:
        return {
            "provider": opts["provider"],
            "model": opts["model"],
            "readOnly": opts["readOnly"],
            "projectTrusted": opts["approve"],
            "resumed": resumed(opts),
        }

    def summary_lines(self, opts: dict, state: AgentState, result: dict) -> list[str]:
        lines = []
        if opts["readOnly"]:
            lines.append(f"mode: read-only (tools {READ_ONLY_TOOLS})")
        if opts["approve"]:
            lines.append("mode: project resources trusted (--approve)")
        lines += self.model_lines(state)
        return [*lines, *resume_lines(result["resumed"], state.session_id)]


ADAPTER = Pi()
