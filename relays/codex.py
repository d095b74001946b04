"""Codex (`codex exec`): brief on stdin, JSON events, final message via `-o`.

Autonomy is Codex's own sandbox (`-s read-only | workspace-write |
danger-full-access`), which Codex enforces. A resumed run keeps the sandbox
the session was configured with unless a flag or lane names one.
"""

from __future__ import annotations

import os

from delegate_skills import registry
from delegate_skills.reading import tail_of_file
from delegate_skills.relay.adapter import FINAL_LIMIT, Adapter, State, session_lines
from delegate_skills.relay.console import say
from delegate_skills.relay.options import (
    SESSION,
    Flag,
    Usage,
    check_choice,
    check_model,
    switch_flag,
    timeout_ms,
    value_flag,
)
from delegate_skills.relay.parts import (
    check_effort_token,
    check_keep_env,
    clean_env_fields,
    clean_env_flags,
    clean_environment,
)

RESUME_SANDBOX_NOTE = "(Codex config on resume)"


class Codex(Adapter):
    key = "codex"
    resume_keeps_id = True  # checked against the real CLI
    display = "Codex"
    install_hint = "Get it with `npm i -g @openai/codex`, then sign in: `codex login`."
    session_field = "threadId"
    write_access = "sandbox `workspace-write`"
    read_only_route = "`--read-only`: sandbox `read-only`"
    about = (
        "Runs `codex exec`, OpenAI's Codex CLI, with the brief piped to its stdin, and\n"
        "records the run. Codex's sandbox decides what it may touch: workspace-write by default,\n"
        "read-only for review (--read-only), danger-full-access only when asked."
    )
    child_writes_final = True
    path_fields = ("brief", "events", "final")
    flags = (
        value_flag(
            "--effort",
            "effort",
            "<level>",
            "Reasoning effort, sent as -c model_reasoning_effort=<level>.",
        ),
        Flag(
            "--sandbox",
            "sandbox",
            metavar="<mode>",
            sets={"sandboxConfigured": True},
            flags=("sandbox",),
            help="read-only | workspace-write | danger-full-access (default: workspace-write).",
        ),
        Flag(
            "--read-only",
            sets={"sandbox": "read-only", "sandboxConfigured": True},
            flags=("sandbox", "readOnly"),
            help="Same as --sandbox read-only: review or diagnose, no edits.",
        ),
        switch_flag(
            "--resume-last",
            "resumeLast",
            "Resume Codex's latest session; brief it with only what changed.",
        ),
        value_flag(
            "--session",
            "session",
            "<id>",
            "Continue the Codex session with this thread id.",
            flagged=False,
        ),
        *clean_env_flags("Codex"),
        switch_flag(
            "--skip-git-repo-check", "skipGitRepoCheck", "Let Codex run outside a git repository."
        ),
    )

    def defaults(self) -> dict:
        return {**super().defaults(), "sandbox": "workspace-write"}

    def apply_dial(self, opts: dict, field: str, value) -> None:
        opts[field] = value
        if field == "sandbox":
            opts["sandboxConfigured"] = True

    def validate(self, opts: dict) -> None:
        check_choice(opts, "sandbox", "--sandbox", registry.CODEX_SANDBOX)
        check_effort_token(opts)
        check_model(opts, registry.SHELL_SAFE)
        check_keep_env(opts)
        timeout_ms(opts)
        if opts["session"] is not None and opts["resumeLast"]:
            raise Usage("--session and --resume-last are mutually exclusive; pass only one")
        if opts["session"] is not None and not SESSION.accepts(opts["session"]):
            raise Usage("--session must be a shell-safe thread id (letters, digits, . _ : -)")

    def read_only(self, opts: dict) -> bool:
        return opts["sandbox"] == "read-only"

    def own_sandbox(self, opts: dict) -> bool:
        return opts["sandbox"] != "danger-full-access"

    def child_env(self, opts: dict) -> dict[str, str]:
        return clean_environment(opts, ("CODEX_HOME",))

    def build_argv(self, opts: dict, run) -> list[str]:
        resuming = bool(opts["session"] or opts["resumeLast"])
        argv = ["exec"]
        if resuming and opts["sandboxConfigured"]:
            argv += ["-s", opts["sandbox"]]
        if opts["session"]:
            argv += ["resume", opts["session"]]
        elif opts["resumeLast"]:
            argv += ["resume", "--last"]
        argv += ["--json", "-o", run.final_path]
        if not resuming:
            argv += ["-s", opts["sandbox"]]
        if opts["model"]:
            argv += ["-m", opts["model"]]
        if opts["effort"] is not None:
            argv += ["-c", f"model_reasoning_effort={opts['effort']}"]
        if opts["skipGitRepoCheck"]:
            argv.append("--skip-git-repo-check")
        argv.append("-")
        return argv

    def new_state(self, opts: dict) -> State:
        return State(opts)

    def before_launch(self, state: State) -> None:
        opts = state.opts
        if not opts["skipGitRepoCheck"] and not inside_git(opts["cd"]):
            say(
                f"--cd {opts['cd']} is not in a git repository, and Codex refuses to start "
                "there without --skip-git-repo-check: add that flag to run it anyway"
            )

    def on_event(self, state: State, event: dict) -> None:
        thread = event.get("thread")
        found = event.get("thread_id") or event.get("threadId")
        if not found and isinstance(thread, dict):
            found = thread.get("thread_id") or thread.get("id")
        if found:
            state.session_id = found
        if event.get("type") == "turn.completed" and isinstance(event.get("usage"), dict):
            state.usage = event["usage"]  # the turn's counts; `codex exec` runs one turn

    def final_message(self, state: State, run) -> str:
        return tail_of_file(run.final_path, FINAL_LIMIT).decode("utf-8", errors="replace").strip()

    def config_fields(self, opts: dict, state: State) -> dict:
        resuming = bool(opts["session"] or opts["resumeLast"])
        shown = (
            opts["sandbox"] if not resuming or opts["sandboxConfigured"] else RESUME_SANDBOX_NOTE
        )
        return {
            "sandbox": shown,
            "model": opts["model"],
            "effort": opts["effort"],
            "resumeLast": opts["resumeLast"],
            "session": opts["session"],
            **clean_env_fields(opts),
        }

    def id_fields(self, state: State) -> dict:
        return {"threadId": state.session_id}

    def summary_lines(self, opts: dict, state: State, result: dict) -> list[str]:
        lines = []
        if opts["resumeLast"]:
            lines.append("mode: resumed most recent session")
        if opts["session"]:
            lines.append(f"mode: resumed session {opts['session']}")
        lines += session_lines(state.session_id, label="thread id")
        return lines


def inside_git(folder: str) -> bool:
    """Whether `folder` or a folder above it holds `.git` (a directory, or the file of a
    linked worktree): where `codex exec` starts without --skip-git-repo-check."""
    here = os.path.abspath(folder)
    while True:
        if os.path.exists(os.path.join(here, ".git")):
            return True
        parent = os.path.dirname(here)
        if parent == here:
            return False
        here = parent


ADAPTER = Codex()
