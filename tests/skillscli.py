"""The real Skills CLI (`skills` on npm) for the tests, with a Node new enough to run it.

The Skills CLI 1.7.4 needs Node 22.20 or newer. When the machine's `node` is
older, Node 22 comes from the npm registry's `node-<platform>-<arch>@22`
package, installed together with the Skills CLI into a cache directory
(`$XDG_CACHE_HOME/delegate-skills-tests`, else `~/.cache/…`) that later runs
reuse. Parallel test workers take turns through a lock file.

Overrides: DELEGATE_TEST_NODE (a node binary) with DELEGATE_TEST_SKILLS_CLI
(the CLI's bin/cli.mjs) use those instead; DELEGATE_TEST_SKIP_SKILLS_CLI=1
skips these tests. Without npm they are skipped, saying why; with npm, a
failed install fails them.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
from pathlib import Path

SKILLS_CLI_VERSION = "1.7.4"
NODE_MAJOR = 22
MIN_NODE = (22, 20)
_ARCH = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}


class Unavailable(Exception):
    """The Skills CLI cannot be run here, for a reason that is not a failure."""


def node_version(node: str) -> tuple[int, int] | None:
    try:
        done = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30)
    except OSError:
        return None
    match = re.match(r"v(\d+)\.(\d+)", done.stdout.strip())
    return (int(match.group(1)), int(match.group(2))) if match else None


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME")
    if not base or not os.path.isabs(base):
        base = os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "delegate-skills-tests" / f"skills-{SKILLS_CLI_VERSION}-node{NODE_MAJOR}"


def _node_package() -> str:
    system = platform.system().lower()
    arch = _ARCH.get(platform.machine().lower())
    if system not in ("linux", "darwin") or arch is None:
        raise Unavailable(f"no npm Node package for {platform.system()} {platform.machine()}")
    return f"node-{system}-{arch}"


def _provision(prefix: Path, with_node: bool) -> None:
    npm = shutil.which("npm")
    if npm is None:
        raise Unavailable("npm is not installed, so the Skills CLI cannot be fetched")
    packages = [f"skills@{SKILLS_CLI_VERSION}"]
    if with_node:
        packages.append(f"{_node_package()}@{NODE_MAJOR}")
    done = subprocess.run(
        [npm, "install", "--no-audit", "--no-fund", "--prefix", str(prefix), *packages],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode != 0:
        raise RuntimeError(f"npm install {' '.join(packages)} failed:\n{done.stderr[-2000:]}")


def command() -> list[str]:
    """The argv prefix that runs the Skills CLI: [node, cli.mjs]. Raises Unavailable."""
    if os.environ.get("DELEGATE_TEST_SKIP_SKILLS_CLI") == "1":
        raise Unavailable("DELEGATE_TEST_SKIP_SKILLS_CLI=1")
    node, cli = os.environ.get("DELEGATE_TEST_NODE"), os.environ.get("DELEGATE_TEST_SKILLS_CLI")
    if node and cli:
        return [node, cli]
    machine_node = shutil.which("node")
    machine_ok = bool(machine_node) and (node_version(machine_node) or (0, 0)) >= MIN_NODE
    prefix = cache_dir()
    prefix.mkdir(parents=True, exist_ok=True)
    from filelock import FileLock

    with FileLock(str(prefix) + ".lock", timeout=900):
        modules = prefix / "node_modules"
        cli_path = modules / "skills" / "bin" / "cli.mjs"
        node_path = Path(machine_node) if machine_ok else None
        if node_path is None:
            node_path = modules / _node_package() / "bin" / "node"
        if not cli_path.is_file() or not node_path.is_file():
            _provision(prefix, with_node=not machine_ok)
    version = node_version(str(node_path))
    if version is None or version < MIN_NODE:
        raise RuntimeError(f"{node_path} is not Node {MIN_NODE[0]}.{MIN_NODE[1]}+ ({version})")
    return [str(node_path), str(cli_path)]


# The Skills CLI's agent table, read from its own code: the statements from
# `const home = homedir();` to the end of `const agents = {...};` in its
# dist/cli.mjs, run with the imports they use, under the environment given.
_AGENT_TABLE_SCRIPT = r"""
import { readFileSync, existsSync } from "node:fs";
import { homedir } from "node:os";
import { dirname, join } from "node:path";
import { pathToFileURL } from "node:url";
const dist = join(dirname(process.argv[2]), "..", "dist");
const text = readFileSync(join(dist, "cli.mjs"), "utf-8");
const start = text.indexOf("\nconst home = homedir();\n");
const open = text.indexOf("\nconst agents = {\n", start);
const end = text.indexOf("\n};\n", open);
if (start < 0 || open < 0 || end < 0) throw new Error("no agent table in " + dist);
const xdg = pathToFileURL(join(dist, "_chunks", "libs", "xdg-basedir.mjs")).href;
const { xdgConfig } = await import(xdg);
const build = new Function(
  "homedir", "join", "existsSync", "readFileSync", "xdgConfig",
  text.slice(start, end + 3) + "\nreturn agents;",
);
const agents = build(homedir, join, existsSync, readFileSync, xdgConfig);
const out = {};
for (const [key, agent] of Object.entries(agents)) {
  out[key] = {
    name: agent.name,
    displayName: agent.displayName,
    skillsDir: agent.skillsDir,
    globalSkillsDir: agent.globalSkillsDir ?? null,
  };
}
process.stdout.write(JSON.stringify(out));
"""


def agent_table(command: list[str], env: dict[str, str], workdir: Path) -> dict[str, dict]:
    """The Skills CLI's agents: {key: {name, displayName, skillsDir, globalSkillsDir}}."""
    import json

    script = workdir / "agent-table.mjs"
    script.write_text(_AGENT_TABLE_SCRIPT)
    done = subprocess.run(
        [command[0], str(script), command[1]],
        capture_output=True,
        text=True,
        env=env,
        cwd=workdir,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    if done.returncode != 0:
        raise RuntimeError(f"reading the Skills CLI's agent table failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout)
