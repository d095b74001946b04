"""Kilo Code (`kilo run`): OpenCode's headless surface under Kilo's names.

Kilo Code is a fork of OpenCode and keeps its `run` command: the brief on
stdin, `--format json` events (a `sessionID` on each, text parts, per-step
`cost` and `tokens`), `--session` / `--continue`, `--agent`, `--model
provider/model`, `--variant`, `--auto` and `--pure`. So this adapter is the
OpenCode one with what Kilo does differently (checked against kilo 7.7.7):

* The write agent is `code` (Kilo has no `build`); it edits headlessly with
  `--auto`, without which kilo rejects the first permission it would ask
  for and exits 1.
* A model is optional: Kilo has a default (its gateway), and catalog ids may
  hold `~` (`kilo/~anthropic/claude-sonnet-latest`).
* `--read-only` is the `plan` agent without `--auto`. Kilo's plan asks
  before `bash` (rejected headless) and denies edits, except plan files
  (`.kilo/plans/*.md`, and `plans/*.md`, `.plans/*.md` in the repository),
  and may start subagents. So a plan run gets OpenCode's plan overrides
  through Kilo's variables (KILO_CONFIG_CONTENT, KILO_PERMISSION,
  KILO_DISABLE_PROJECT_CONFIG): every tool but the read tools denied, plan
  files included, whatever the user's config says. Snapshots are off too:
  kilo keeps them as refs (`refs/kilo/…`) in the repository's git dir.
* A plan run makes `.kilo/plans` at the top of the work tree and fails (an
  "Unexpected server error") when it cannot, as in the read-only sandbox; the
  relay makes that folder, empty, beforehand and leaves it writable there.
* Each step's `tokens` are summed into the result's `usage`.
"""

from __future__ import annotations

import json
import os

from delegate_skills import registry
from delegate_skills.relay.options import (
    switch_flag,
    value_flag,
)

from .opencode import PLAN, OpenCode, OpenCodeState, plan_environment

CODE = "code"
#: The variables through which OpenCode's plan overrides reach Kilo, by their OpenCode names.
PLAN_VARIABLES = {
    "OPENCODE_CONFIG_CONTENT": "KILO_CONFIG_CONTENT",
    "OPENCODE_PERMISSION": "KILO_PERMISSION",
    "OPENCODE_DISABLE_PROJECT_CONFIG": "KILO_DISABLE_PROJECT_CONFIG",
}
#: Where a plan run keeps its plan files, under the top of the work tree.
PLANS_DIR = (".kilo", "plans")


def work_tree_root(cwd: str) -> str:
    """The folder at or above `cwd` that holds `.git` (`cwd` itself when there is none)."""
    directory = os.path.abspath(cwd)
    while not os.path.exists(os.path.join(directory, ".git")):
        parent = os.path.dirname(directory)
        if parent == directory:
            return os.path.abspath(cwd)
        directory = parent
    return directory


def kilo_plan_environment(env: dict[str, str], cwd: str) -> dict[str, str]:
    """`env` with OpenCode's plan overrides under Kilo's names (the user's inline config kept)."""
    inline = env.get("KILO_CONFIG_CONTENT")
    planned = plan_environment({"OPENCODE_CONFIG_CONTENT": inline} if inline else {}, cwd)
    content = json.loads(planned["OPENCODE_CONFIG_CONTENT"])
    # Kilo's snapshots write refs (refs/kilo/…) into the repository's git dir.
    content["snapshot"] = False
    planned["OPENCODE_CONFIG_CONTENT"] = json.dumps(content)
    return {**env, **{kilo: planned[ours] for ours, kilo in PLAN_VARIABLES.items()}}


class KiloState(OpenCodeState):
    def __init__(self, opts: dict) -> None:
        super().__init__(opts)
        self.error: str | None = None


def _error_text(error) -> str | None:
    """The message of an `error` event: a string, or `{name, data: {message}}`."""
    if isinstance(error, str):
        return error
    if isinstance(error, dict):
        data = error.get("data")
        for holder in (data, error):
            if isinstance(holder, dict) and isinstance(holder.get("message"), str):
                return holder["message"]
        if isinstance(error.get("name"), str):
            return error["name"]
    return None


class Kilo(OpenCode):
    key = "kilo"
    git_dir_state = ("kilo",)  # the project id kilo writes on its first run, as opencode does
    resume_keeps_id = True  # checked against the real CLI
    display = "Kilo Code"
    tool = "kilo"
    install_hint = (
        "Get it with `npm i -g @kilocode/cli`, then sign in: `kilo auth login` (or name a "
        "provider in ~/.config/kilo/kilo.jsonc)."
    )
    write_access = "code agent with `--auto`"
    read_only_route = "`--read-only`: plan agent, edits (plan files too) and shell denied"
    about = (
        "Runs `kilo run` with the brief piped to its stdin, and records the JSON\n"
        "events. Autonomy follows the agent: code (default) edits headlessly with\n"
        "--auto; plan (--read-only) gets no --auto and runs with every tool but the\n"
        "read tools denied. A model is optional (provider/model; kilo's default\n"
        "otherwise). The result sums each step's tokens as usage, and its cost."
    )
    flags = tuple(
        {
            "--agent": value_flag(
                "--agent",
                "agent",
                "<name>",
                "Kilo agent (default: code); plan for read-only.",
                token=registry.SHELL_SAFE,
            ),
            "--auto": switch_flag("--auto", "auto", "Pass --auto to write runs (the default)."),
        }.get(flag.name, flag)
        for flag in OpenCode.flags
    )
    #: A read-only lane (`readOnly: true`) yields to an explicit --agent.
    lane_blockers = (("readOnly", ("agent",)),)

    #: Kilo's gateway model ids may hold `~`; a model is optional (Kilo picks its own).
    model_token = registry.KILO_MODEL
    needs_model = False

    def defaults(self) -> dict:
        return {**super().defaults(), "agent": CODE}

    def apply_dial(self, opts: dict, field: str, value) -> None:
        # The lane's read-only dial is the plan agent here.
        if field == "readOnly":
            if value is True:
                opts["agent"] = PLAN
            return
        super().apply_dial(opts, field, value)

    def sandbox_writable(self, opts: dict) -> list[str]:
        """`.kilo/plans`, made here, empty (git shows no empty folder), for a plan run.

        The sandbox binds only what exists; the plan overrides deny the model every
        edit there all the same, and what still lands is a change to the tripwire.
        """
        if not self.read_only(opts):
            return []
        root = work_tree_root(opts["cd"])
        plans = os.path.join(root, *PLANS_DIR)
        if os.path.realpath(plans) != os.path.join(os.path.realpath(root), *PLANS_DIR):
            return []  # a link on the way: nothing is made, or bound, through it
        try:
            os.makedirs(plans, exist_ok=True)
        except OSError:
            return []
        return [plans]

    def child_env(self, opts: dict) -> dict[str, str]:
        env = {**os.environ, "PWD": opts["cd"]}
        return kilo_plan_environment(env, opts["cd"]) if self.read_only(opts) else env

    def new_state(self, opts: dict) -> KiloState:
        return KiloState(opts)

    def on_event(self, state: KiloState, event: dict) -> None:
        super().on_event(state, event)  # sums each step's tokens (OpenCodeState.tokens)
        if event.get("type") == "error":
            state.error = _error_text(event.get("error")) or state.error

    def failure(self, state: KiloState) -> str | None:
        # A failed exit says why in its last error event (a run that exits 0 stands).
        if state.exit_code not in (0, None) and state.error:
            return f"kilo reported an error: {state.error}"
        return None

    def metric_fields(self, state: KiloState) -> dict:
        return {"usage": state.tokens, **super().metric_fields(state)}


ADAPTER = Kilo()
