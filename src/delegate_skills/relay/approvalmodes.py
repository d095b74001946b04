"""Implementers driven by `--approval-mode`: Gemini CLI, and Qwen Code, which forked it.

Both take the brief on stdin in headless mode, print `--output-format
stream-json`, pick their permissions with `--approval-mode <mode>` and have a
`plan` mode that keeps their file-writing and shell tools away from the
model. What the two share lives here: the flags, the checks, the lane
dials, the read-only route and the head of the command line. Each adapter
adds its own mode names, resume form, directory flag and event reader.
"""

from __future__ import annotations

from .. import registry
from .adapter import Adapter, State
from .options import (
    Flag,
    Usage,
    check_choice,
    check_model,
    switch_flag,
    timeout_ms,
    value_flag,
)
from .parts import (
    add_dir_args,
    add_dir_flag,
    check_session,
    resume_args,
    resume_lines,
    resumed,
    session_flags,
)

PLAN = "plan"


class ApprovalModeAdapter(Adapter):
    """Stdin brief, stream-json output, `--approval-mode`, `plan` for read-only runs."""

    default_timeout = "30m"
    stderr_file = True
    path_fields = ("brief", "events", "final", "stderr")
    parser = "lines"
    #: The CLI's --approval-mode values, and the one a write run uses unless told.
    modes: tuple[str, ...] = ()
    write_mode = ""
    #: The CLI's flag for an extra directory, and its arguments to resume the latest session.
    dir_flag = "--add-dir"
    latest_args: tuple[str, ...] = ()

    @property
    def flags(self) -> tuple[Flag, ...]:
        return (
            value_flag(
                "--approval-mode",
                "permissionMode",
                "<mode>",
                f"{' | '.join(m for m in self.modes if m != PLAN)} (default: {self.write_mode}; "
                "for a read-only run use --read-only).",
            ),
            switch_flag(
                "--read-only",
                "readOnly",
                f"--approval-mode plan: {self.display}'s read and search tools only.",
                flagged=True,
            ),
            *session_flags(
                f"Continue the most recent {self.display} session ({self.resume_latest_text}).",
                f"Continue this {self.display} session id (--resume <id>).",
            ),
            add_dir_flag(f"Extra directory {self.display} may use (repeatable; relative to --cd)."),
            *self.own_flags,
        )

    #: Flags only one of the two CLIs has.
    own_flags: tuple[Flag, ...] = ()

    @property
    def resume_latest_text(self) -> str:
        return " ".join((self.binary, *self.latest_args))

    def apply_dial(self, opts: dict, field: str, value) -> None:
        # A read-only lane resolves to `permissionMode: plan`: the read-only route.
        if field == "permissionMode" and value == PLAN:
            opts["readOnly"] = True
            return
        super().apply_dial(opts, field, value)

    def validate(self, opts: dict) -> None:
        check_choice(opts, "permissionMode", "--approval-mode", self.modes)
        mode = opts["permissionMode"]
        if opts["readOnly"] and mode not in (None, PLAN):
            raise Usage(
                f"--read-only and --approval-mode {mode} are mutually exclusive; pass only one"
            )
        check_session(opts)
        check_model(opts, registry.SHELL_SAFE)
        timeout_ms(opts)
        if mode == PLAN:
            opts["readOnly"] = True
        opts["permissionMode"] = PLAN if opts["readOnly"] else mode or self.write_mode

    def read_only(self, opts: dict) -> bool:
        return opts["readOnly"]

    def head_argv(self, opts: dict) -> list[str]:
        """Output format, approval mode, model, resume form and extra directories."""
        argv = ["--output-format", "stream-json", "--approval-mode", opts["permissionMode"]]
        if opts["model"]:
            argv += ["--model", opts["model"]]
        argv += resume_args(opts, self.latest_args)
        return argv + add_dir_args(opts, self.dir_flag)

    def config_fields(self, opts: dict, state: State) -> dict:
        return {
            "model": opts["model"],
            "approvalMode": opts["permissionMode"],
            "readOnly": opts["readOnly"],
            "resumed": resumed(opts),
        }

    def summary_lines(self, opts: dict, state: State, result: dict) -> list[str]:
        lines = [f"approval mode: {result['approvalMode']}"]
        return lines + resume_lines(result["resumed"], state.session_id)
