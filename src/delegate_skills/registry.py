"""The twenty-three implementers, and the value rules lanes and relays share.

Everything that knows an implementer by name reads it from here: the fleet
validator, lane resolution, discovery, the relays and the generated skill texts.
Patterns are written for Python's `re` with the semantics of the JavaScript
patterns the Node bundle uses: matched whole with `fullmatch`, ASCII classes.
The value shapes themselves (Pattern, Shape, Token) are in rules.py; h/m/s
durations are read in durations.py.
"""

from __future__ import annotations

from .rules import Pattern, Shape, Token

CONFIG_VERSION = "delegate-fleet.v1"
RESULT_VERSION = "delegate-relay.result.v1"
DISCOVER_VERSION = "delegate-discover.v1"

#: Every field a lane may hold besides `implementer`, in the Node bundle's order.
ALL_DIALS = (
    "model",
    "effort",
    "variant",
    "timeout",
    "readOnly",
    "sandbox",
    "permissionMode",
    "force",
    "provider",
)
BOOLEAN_DIALS = ("readOnly", "force")
#: What each dial asks of a relay, for help texts.
DIAL_MEANINGS = {
    "model": "The model the implementer runs",
    "effort": "Reasoning effort, in the words the CLI uses (low, medium, high, …)",
    "variant": "The model variant",
    "timeout": "The relay's watchdog, an h/m/s duration such as 30m",
    "readOnly": "A run that must change nothing (the relay's read-only route)",
    "sandbox": "The sandbox the CLI runs its tools in",
    "permissionMode": "The CLI's permission mode (plan, yolo, …)",
    "force": "Let the CLI act without asking",
    "provider": "The model provider the CLI routes to",
}


LANE_NAME = Shape("A-Za-z0-9", "A-Za-z0-9._-")


CLAUDE_EFFORT = ("low", "medium", "high", "xhigh", "max", "ultracode")
AGY_EFFORT = ("low", "medium", "high")
COPILOT_EFFORT = ("low", "medium", "high", "xhigh", "max")
OMP_THINKING = ("off", "auto", "minimal", "low", "medium", "high", "xhigh", "max")
CODEX_SANDBOX = ("read-only", "workspace-write", "danger-full-access")
GROK_SANDBOX = ("workspace", "read-only", "off")
QODER_PERMISSION = ("default", "accept_edits", "auto", "bypass_permissions", "dont_ask", "plan")
#: ZCode's --mode. `build` and `edit` are left out on purpose: with no one to
#: answer permission prompts, a headless run in those modes writes nothing and
#: still exits 0.
ZCODE_MODE = ("plan", "yolo")

#: Grok's relay speaks `autonomy`; the fleet speaks `sandbox`.
GROK_SANDBOX_TO_AUTONOMY = {
    "workspace": "workspace-write",
    "read-only": "read-only",
    "off": "full-access",
}

#: Effort lists enforced per implementer; codex, grok and commandcode take any
#: bare token instead.
EFFORT_CHOICES = {
    "agy": AGY_EFFORT,
    "claude": CLAUDE_EFFORT,
    "copilot": COPILOT_EFFORT,
    "omp": OMP_THINKING,
}
BARE_EFFORT_IMPLEMENTERS = ("codex", "grok", "commandcode")
BARE_TOKEN = Shape("A-Za-z", "A-Za-z0-9-")

SANDBOX_CHOICES = {"codex": CODEX_SANDBOX, "grok": GROK_SANDBOX}
#: Gemini CLI's and Qwen Code's `--approval-mode` values (Qwen forked Gemini CLI).
GEMINI_APPROVAL = ("default", "auto_edit", "yolo", "plan")
QWEN_APPROVAL = ("plan", "default", "auto-edit", "auto", "yolo")
#: DeepSeek Harness's DSH_PERMISSION_MODE values.
DSH_PERMISSION = ("read-only", "workspace-write", "danger-full-access")
PERMISSION_CHOICES = {
    "qoder": QODER_PERMISSION,
    "zcode": ZCODE_MODE,
    "gemini": GEMINI_APPROVAL,
    "qwen": QWEN_APPROVAL,
    "dsh": DSH_PERMISSION,
}


CLAUDE_MODEL = Token(r"A-Za-z0-9._:@/\[\]-", "letters, digits, . _ : @ / [ ] -")
CURSOR_MODEL = Token(r"A-Za-z0-9._:@/\[\],=-", "letters, digits, . _ : @ / [ ] , = -")
SHELL_SAFE = Token(r"A-Za-z0-9._:/-", "letters, digits, . _ : / -")
#: Kilo Code's model ids, whose gateway catalog spells some with `~` (kilo/~anthropic/…).
KILO_MODEL = Token(r"A-Za-z0-9._:/~-", "letters, digits, . _ : / ~ -")
#: Session, thread and conversation ids that go on a command line.
SESSION_ID = Token("A-Za-z0-9._:-", "letters, digits, . _ : -")
#: A display label such as an Antigravity model name ("Gemini 3 Pro (High)").
LABEL = Token(r"A-Za-z0-9 ._:/()\[\]+-", "letters, digits, spaces, . _ : / ( ) [ ] + -")
#: A tool name or pattern (vibe's --enabled-tools): globs and re: expressions.
TOOL_PATTERN = Token(
    r"A-Za-z0-9._:*?/\[\]^$+|(){},-",
    "letters, digits, . _ : * ? / [ ] ^ $ + | ( ) { } , -",
    first=r"A-Za-z0-9*?\[",
)


class AuthProbe:
    """How to ask a CLI whether it is logged in."""

    __slots__ = ("args", "fail", "json_field", "miss_means_false", "success")

    def __init__(
        self,
        args: tuple[str, ...],
        *,
        json_field: str | None = None,
        success: Pattern | None = None,
        fail: Pattern | None = None,
        miss_means_false: bool = False,
    ) -> None:
        self.args = args
        self.json_field = json_field
        self.success = success
        self.fail = fail
        self.miss_means_false = miss_means_false


class ModelProbe:
    """Where a CLI's model names come from: a command, a cache file or a fixed list."""

    __slots__ = ("args", "env_dir", "file", "format", "home_subdir", "static")

    def __init__(
        self,
        *,
        args: tuple[str, ...] = (),
        format: str | None = None,
        static: tuple[str, ...] = (),
        env_dir: str | None = None,
        home_subdir: str | None = None,
        file: str | None = None,
    ) -> None:
        self.args = args
        self.format = format
        self.static = static
        self.env_dir = env_dir
        self.home_subdir = home_subdir
        self.file = file


class UsageProbe:
    """Where a CLI keeps one entry per session, listed and stat'ed, never opened.

    Patterns here, like every probe pattern, are applied with `search`.

    `path` walks down from the state directory; "*" matches any directory at
    that level. `entry` says whether files, directories or either count.
    """

    __slots__ = ("entry", "env_dir", "home_subdir", "match", "path")

    def __init__(
        self,
        home_subdir: str,
        path: tuple[str, ...],
        entry: str,
        match: Pattern,
        env_dir: str | None = None,
    ) -> None:
        self.env_dir = env_dir
        self.home_subdir = home_subdir
        self.path = path
        self.entry = entry
        self.match = match


class Locate:
    """A CLI shipped inside a desktop app: per-platform paths and the launcher."""

    __slots__ = ("candidates", "launcher")

    def __init__(self, launcher: str, candidates: dict[str, tuple[str, ...]]) -> None:
        self.launcher = launcher
        self.candidates = candidates


class Implementer:
    __slots__ = (
        "auth_probe",
        "binary",
        "display",
        "key",
        "locate",
        "login",
        "model_probe",
        "skill",
        "supports",
        "usage_probe",
        "version_args",
        "version_fallback_args",
        "version_format",
        "win_shell",
    )

    def __init__(
        self,
        key: str,
        binary: str,
        display: str,
        supports: tuple[str, ...],
        *,
        win_shell: bool,
        version_args: tuple[str, ...] = ("--version",),
        version_fallback_args: tuple[str, ...] | None = None,
        version_format: str | None = None,
        auth_probe: AuthProbe | None = None,
        model_probe: ModelProbe | None = None,
        usage_probe: UsageProbe | None = None,
        locate: Locate | None = None,
        login: str | None = None,
    ) -> None:
        self.key = key
        self.skill = f"{key}-delegate"
        self.binary = binary
        self.display = display
        self.supports = supports
        self.win_shell = win_shell
        self.version_args = version_args
        self.version_fallback_args = version_fallback_args
        self.version_format = version_format
        self.auth_probe = auth_probe
        self.model_probe = model_probe
        self.usage_probe = usage_probe
        self.locate = locate
        #: How the user signs the CLI in (doctor quotes it when a probe says logged out).
        self.login = login

    def __repr__(self) -> str:
        return f"Implementer({self.key!r})"


_UUID_FILE = Pattern(r"(?i)\A[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\.jsonl\Z")
_UUID_PREFIX = Pattern(r"(?i)\A[0-9a-f]{8}-[0-9a-f]{4}-")

IMPLEMENTERS: tuple[Implementer, ...] = (
    Implementer(
        "claude",
        "claude",
        "Claude Code",
        ("model", "effort", "timeout", "readOnly"),
        win_shell=True,
        auth_probe=AuthProbe(("auth", "status"), json_field="loggedIn"),
        # No listing command: --model takes one of these aliases or a full name.
        model_probe=ModelProbe(static=("fable", "opus", "sonnet", "haiku")),
        usage_probe=UsageProbe(
            ".claude", ("projects", "*"), "file", Pattern(r"\.jsonl\Z"), "CLAUDE_CONFIG_DIR"
        ),
        login="claude auth login",
    ),
    Implementer(
        "cline",
        "cline",
        "Cline",
        ("provider", "model", "timeout"),
        win_shell=True,
        login="cline auth",
    ),
    Implementer(
        "codex",
        "codex",
        "Codex",
        ("model", "effort", "sandbox", "timeout", "readOnly"),
        win_shell=True,
        # codex prints its login state on stderr.
        auth_probe=AuthProbe(
            ("login", "status"),
            success=Pattern(r"(?i)logged in"),
            fail=Pattern(r"(?i)not logged in"),
        ),
        # `codex models` would send a prompt; the cached catalog is the offline list.
        model_probe=ModelProbe(
            env_dir="CODEX_HOME",
            home_subdir=".codex",
            file="models_cache.json",
            format="codex-cache",
        ),
        usage_probe=UsageProbe(
            ".codex",
            ("sessions", "*", "*", "*"),
            "file",
            Pattern(r"\Arollout-.*\.jsonl\Z"),
            "CODEX_HOME",
        ),
        login="codex login",
    ),
    Implementer(
        "commandcode",
        "cmd",
        "Command Code",
        ("model", "effort", "timeout", "readOnly"),
        win_shell=False,
        auth_probe=AuthProbe(
            ("status",),
            success=Pattern(r"(?i)Authenticated"),
            fail=Pattern(r"(?i)not authenticated|logged out"),
        ),
        # A flag, never a word: `cmd models` would be read as a prompt.
        model_probe=ModelProbe(args=("--list-models",), format="commandcode"),
        usage_probe=UsageProbe(".commandcode", ("projects", "*"), "file", _UUID_FILE),
        login="cmd login",
    ),
    Implementer(
        "opencode",
        "opencode",
        "OpenCode",
        ("model", "variant", "timeout", "readOnly"),
        win_shell=True,
        # Exits 0 with an empty list too: a "●" row is the only sign of a login.
        auth_probe=AuthProbe(("auth", "list"), success=Pattern(r"(?m)^●\s"), miss_means_false=True),
        model_probe=ModelProbe(args=("models",), format="lines"),
        login="opencode auth login",
    ),
    Implementer(
        "agy",
        "agy",
        "Antigravity",
        ("model", "effort", "timeout", "readOnly"),
        win_shell=False,
        version_args=("changelog",),
        version_format="colon-prefix",
        model_probe=ModelProbe(args=("models",), format="lines"),
        usage_probe=UsageProbe(
            ".gemini/antigravity-cli", ("conversations",), "file", Pattern(r"\.db\Z")
        ),
        login="the Antigravity CLI's first-launch setup",
    ),
    Implementer(
        "grok",
        "grok",
        "Grok",
        ("model", "effort", "sandbox", "timeout", "readOnly"),
        win_shell=True,
        version_args=("version",),
        version_fallback_args=("--version",),
        auth_probe=AuthProbe(("models",), fail=Pattern(r"(?i)not authenticated")),
        model_probe=ModelProbe(args=("models",), format="grok"),
        usage_probe=UsageProbe(".grok", ("sessions", "*"), "dir", _UUID_PREFIX),
        login="grok login",
    ),
    Implementer(
        "kimi",
        "kimi",
        "Kimi Code",
        ("model", "timeout"),
        win_shell=False,
        auth_probe=AuthProbe(("provider", "list"), success=Pattern(r"source=(oauth|api)")),
        usage_probe=UsageProbe(".kimi-code", ("sessions", "*"), "dir", Pattern(r"\Asession_")),
        login="kimi login",
    ),
    Implementer(
        "qoder",
        "qodercli",
        "Qoder",
        ("model", "permissionMode", "timeout", "readOnly"),
        win_shell=False,
        login="qodercli login, or QODER_PERSONAL_ACCESS_TOKEN",
    ),
    Implementer(
        "vibe",
        "vibe",
        "Mistral Vibe",
        ("timeout", "readOnly"),
        win_shell=False,
        login="MISTRAL_API_KEY in the environment",
    ),
    Implementer(
        "cursor",
        "cursor-agent",
        "Cursor Agent",
        ("model", "force", "timeout", "readOnly"),
        win_shell=True,
        auth_probe=AuthProbe(
            ("status",),
            success=Pattern(r"(?i)logged in as"),
            fail=Pattern(r"(?i)not logged in"),
        ),
        model_probe=ModelProbe(args=("models",), format="cursor"),
        usage_probe=UsageProbe(
            ".cursor", ("projects", "*", "agent-transcripts"), "any", _UUID_PREFIX
        ),
        login="cursor-agent login",
    ),
    Implementer(
        "pi",
        "pi",
        "Pi",
        ("provider", "model", "timeout", "readOnly"),
        win_shell=True,
        # A flag, never a word: `pi models` would be read as a prompt.
        model_probe=ModelProbe(args=("--list-models",), format="table"),
        usage_probe=UsageProbe(".pi/agent", ("sessions", "*"), "file", Pattern(r"\.jsonl\Z")),
        login="/login inside pi, or a provider API-key variable",
    ),
    Implementer(
        "omp",
        "omp",
        "Oh My Pi",
        ("provider", "model", "effort", "timeout", "readOnly"),
        win_shell=False,
        usage_probe=UsageProbe(
            ".omp/agent", ("sessions", "*"), "file", Pattern(r"\.jsonl\Z"), "PI_CODING_AGENT_DIR"
        ),
        login="/login inside omp, or a provider API-key variable",
    ),
    Implementer(
        "aider",
        "aider",
        "Aider",
        ("model", "timeout", "readOnly"),
        win_shell=False,
        login="a provider API key in the environment or aider's config",
    ),
    Implementer(
        "copilot",
        "copilot",
        "GitHub Copilot CLI",
        ("model", "effort", "timeout", "readOnly"),
        win_shell=True,
        # `copilot version` prints, then waits on an update check (80 s here).
        version_args=("--version",),
        login="copilot login",
    ),
    Implementer(
        "warp",
        "oz",
        "Warp (oz)",
        ("model", "timeout"),
        win_shell=False,
        # `text` output prints `user:<id>` or `service_account:<id>`.
        auth_probe=AuthProbe(
            ("whoami", "--output-format", "text"),
            success=Pattern(r"(?m)^(?:user|service_account):\S"),
        ),
        login="oz login (or set WARP_API_KEY on a headless host)",
    ),
    Implementer(
        "zcode",
        "zcode",
        "ZCode",
        ("permissionMode", "timeout", "readOnly"),
        win_shell=False,
        locate=Locate(
            "node",
            {
                "win32": ("%LOCALAPPDATA%/Programs/ZCode/resources/glm/zcode.cjs",),
                "darwin": (
                    "/Applications/ZCode.app/Contents/Resources/glm/zcode.cjs",
                    "~/Applications/ZCode.app/Contents/Resources/glm/zcode.cjs",
                ),
                # An AppImage has no fixed install path: nothing honest to guess.
                "linux": (),
            },
        ),
        login="ZAI_API_KEY (or ZCODE_API_KEY) in the environment",
    ),
    Implementer(
        "gemini",
        "gemini",
        "Gemini CLI",
        ("model", "permissionMode", "timeout", "readOnly"),
        win_shell=True,
        usage_probe=UsageProbe(
            ".gemini", ("tmp", "*", "chats"), "file", Pattern(r"\Asession-.*\.jsonl\Z")
        ),
        login="run `gemini` once to sign in, or set GEMINI_API_KEY",
    ),
    Implementer(
        "qwen",
        "qwen",
        "Qwen Code",
        ("model", "permissionMode", "timeout", "readOnly"),
        win_shell=True,
        usage_probe=UsageProbe(
            ".qwen", ("projects", "*", "chats"), "file", _UUID_FILE, "QWEN_HOME"
        ),
        login="run `qwen` once to choose an auth type, or set OPENAI_API_KEY, "
        "OPENAI_BASE_URL and OPENAI_MODEL",
    ),
    Implementer(
        "auggie",
        "auggie",
        "Auggie",
        ("model", "timeout", "readOnly"),
        win_shell=True,
        login="auggie login, or AUGMENT_SESSION_AUTH",
    ),
    Implementer(
        "kilo",
        "kilo",
        "Kilo Code",
        ("model", "variant", "timeout", "readOnly"),
        win_shell=True,
        # OpenCode's fork lists its credentials the same way: a "●" row per login.
        auth_probe=AuthProbe(("auth", "list"), success=Pattern(r"(?m)^●\s"), miss_means_false=True),
        model_probe=ModelProbe(args=("models",), format="lines"),
        login="kilo auth login, or a provider in ~/.config/kilo/kilo.jsonc",
    ),
    Implementer(
        "hermes",
        "hermes",
        "Hermes Agent",
        ("model", "provider", "timeout", "readOnly"),
        win_shell=False,
        login="hermes model (or a provider API key in ~/.hermes/.env)",
    ),
    Implementer(
        "dsh",
        "dsh",
        "DeepSeek Harness",
        ("model", "provider", "permissionMode", "timeout", "readOnly"),
        win_shell=True,
        usage_probe=UsageProbe(
            ".dsh", ("sessions", "*"), "dir", Pattern(r"\Asession-"), "DSH_HOME"
        ),
        login="DEEPSEEK_API_KEY, or the provider key its settings.yaml names",
    ),
)

BY_KEY: dict[str, Implementer] = {impl.key: impl for impl in IMPLEMENTERS}
KEYS: tuple[str, ...] = tuple(BY_KEY)


def get(key: str) -> Implementer | None:
    return BY_KEY.get(key)


def model_token(key: str) -> Token | None:
    """The shape a model or provider value must have for `key`, if any."""
    if key == "claude":
        return CLAUDE_MODEL
    if key == "cursor":
        return CURSOR_MODEL
    impl = BY_KEY.get(key)
    if key in ("grok", "pi", "omp", "opencode", "commandcode", "codex") or (
        impl and impl.win_shell
    ):
        return SHELL_SAFE
    return None


#: Programs an implementer's own shell sandbox needs on Linux, with the Debian/Ubuntu
#: package for each: Claude Code's write runs require its sandbox (bubblewrap + socat).
SANDBOX_TOOLS: dict[str, tuple[tuple[str, str], ...]] = {
    "claude": (("bwrap", "bubblewrap"), ("socat", "socat")),
}


def dial_help(dial: str) -> str:
    """A dial's meaning and the implementers that take it."""
    takers = [impl.key for impl in IMPLEMENTERS if dial in impl.supports]
    return f"{DIAL_MEANINGS[dial]}. Taken by: {', '.join(takers) or 'none'}."
