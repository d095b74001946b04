"""Every skill folder, copied alone, runs with a bare Python: nothing installed, no network.

This is how the Skills CLI and `delegate skills install` hand a skill to an
agent: one folder, copied. Each copy here sits alone in a fresh directory and
is run with `python3 -I -S` (no site-packages, no user paths, no PYTHON*
variables) on every CPython 3.10–3.13 this machine has.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import ROOT, fleet_doc, make_repo
from fakes import Fake
from pythons import PYTHONS

#: The 21 skill folders of the bundle and the scripts each one ships.
SETUP_SCRIPTS = ["config.py", "discover.py", "lane.py"]
IMPLEMENTER_SCRIPTS = ["config.py", "discover.py", "lane.py", "relay.py", "runs.py"]
SKILLS = {
    "delegate-setup": SETUP_SCRIPTS,
    **{
        f"{key}-delegate": IMPLEMENTER_SCRIPTS
        for key in [
            "agy",
            "aider",
            "claude",
            "cline",
            "codex",
            "commandcode",
            "copilot",
            "cursor",
            "grok",
            "kimi",
            "omp",
            "opencode",
            "pi",
            "qoder",
            "vibe",
            "warp",
            "zcode",
            "gemini",
            "qwen",
            "auggie",
            "kilo",
            "hermes",
            "dsh",
        ]
    },
}
VERSIONS = sorted(PYTHONS)


def interpreter(version: str) -> str:
    python = PYTHONS[version]
    if python is None:
        pytest.skip(f"no CPython {version} on this machine (looked in /usr/bin and pyenv)")
    return python


@pytest.fixture(scope="module")
def lone_copies(tmp_path_factory) -> dict[str, Path]:
    """Each skill folder copied into a directory of its own, and nothing else."""
    copies = {}
    for skill in SKILLS:
        home = tmp_path_factory.mktemp(f"alone-{skill}")
        shutil.copytree(ROOT / "skills" / skill, home / skill)
        copies[skill] = home / skill
    return copies


def bare(python: str, script: Path, *args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(
        [python, "-I", "-S", str(script), *args],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=kw.pop("stdin", subprocess.DEVNULL),
        **kw,
    )


def dispatch(python: str, copy: Path, fake: Fake, tmp: Path, work: Path, *extra: str) -> dict:
    """Run `copy`'s relay on tmp/brief.txt into tmp/out; its result, which must exit 0."""
    args = ["--brief", str(tmp / "brief.txt"), "--cd", str(work), "--out-dir", str(tmp / "out")]
    done = bare(python, copy / "scripts" / "relay.py", *extra, *args, env=fake.env())
    assert done.returncode == 0, done.stderr
    return json.loads((tmp / "out" / "result.json").read_text())


def test_the_bundle_has_exactly_these_skill_folders():
    found = sorted(p.name for p in (ROOT / "skills").iterdir() if (p / "SKILL.md").is_file())
    assert found == sorted(SKILLS)
    for skill, scripts in SKILLS.items():
        shipped = sorted(p.name for p in (ROOT / "skills" / skill / "scripts").glob("*.py"))
        assert shipped == scripts, skill


#: Skills whose every script runs on every Python; the others run every script on
#: the oldest Python found and their relay.py on each. The scripts other than relay.py
#: reach the same core modules in every implementer skill, byte for byte
#: (test_build_dist), so one implementer skill stands for the rest there.
EVERY_SCRIPT_EVERYWHERE = {"delegate-setup", "codex-delegate"}
OLDEST = next((v for v in VERSIONS if PYTHONS[v] is not None), None)


def scripts_to_run(skill: str, version: str) -> list[str]:
    if skill in EVERY_SCRIPT_EVERYWHERE or version == OLDEST:
        return SKILLS[skill]
    return ["relay.py"]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("skill", sorted(SKILLS))
def test_every_script_of_a_lone_copy_prints_its_help(lone_copies, version, skill):
    python = interpreter(version)
    for name in scripts_to_run(skill, version):
        done = bare(python, lone_copies[skill] / "scripts" / name, "--help")
        assert done.returncode == 0, (name, done.stderr)
        assert done.stderr == "", name
        expected = skill if name == "relay.py" else name
        assert expected in done.stdout, (name, done.stdout[:300])


@pytest.mark.parametrize("version", VERSIONS)
def test_a_lone_codex_copy_dispatches_to_the_fake_codex(lone_copies, tmp_path, home, version):
    python = interpreter(version)
    work = make_repo(tmp_path / "work")
    (tmp_path / "brief.txt").write_text("Add a NOTES file.\n")
    fake = Fake(tmp_path / "fake")
    fake.install("codex")
    fake.script(
        {
            "run": {
                "actions": [
                    {"write": ["NOTES", "hello\n"]},
                    {"stdout": '{"type":"thread.started","thread_id":"t-1"}\n'},
                ]
            }
        }
    )
    out = tmp_path / "out"
    result = dispatch(python, lone_copies["codex-delegate"], fake, tmp_path, work)
    assert result["status"] == "completed"
    assert result["exitCode"] == 0
    assert result["touchedFiles"] == ["?? NOTES"]
    assert result["threadId"] == "t-1"
    assert fake.run_call()["argv"][:2] == ["exec", "--json"]
    runs = lone_copies["codex-delegate"] / "scripts" / "runs.py"
    waited = bare(python, runs, "wait", str(out), "--timeout", "30s")
    assert waited.returncode == 0, waited.stderr
    shown = json.loads(bare(python, runs, "show", str(out)).stdout)
    assert (shown["status"], shown["implementer"], shown["result"]["status"]) == (
        "completed",
        "codex",
        "completed",
    )


# `config.py write --scope project` of this document writes these exact bytes,
# and this approval beside them, in the Node bundle.
NODE_CONFIG_BYTES = (
    b'{\n  "version": "delegate-fleet.v1",\n  "lanes": {\n    "feature": {\n'
    b'      "implementer": "claude",\n      "effort": "high"\n    },\n    "review": {\n'
    b'      "implementer": "codex",\n      "readOnly": true,\n      "model": "gpt-5.1-codex"\n'
    b"    }\n  }\n}\n"
)
NODE_APPROVAL = b"b7c7687ff6a410127d5ed32d80a153121b402a90f27af18d04b9798af97ec5ec\n"


@pytest.mark.parametrize("version", VERSIONS)
def test_a_lone_setup_copy_approves_lanes_a_lone_codex_copy_then_uses(
    lone_copies, tmp_path, home, version
):
    python = interpreter(version)
    repo = make_repo(tmp_path / "repo")
    lanes = tmp_path / "lanes.json"
    lanes.write_text(
        json.dumps(
            fleet_doc(
                {
                    "feature": {"implementer": "claude", "effort": "high"},
                    "review": {"implementer": "codex", "readOnly": True, "model": "gpt-5.1-codex"},
                }
            )
        )
    )
    setup = lone_copies["delegate-setup"] / "scripts"
    wrote = bare(
        python, setup / "config.py", "write", "--scope", "project", "--cwd", str(repo), str(lanes)
    )
    assert wrote.returncode == 0, wrote.stderr
    assert json.loads(wrote.stdout)["projectTrusted"] is True
    config = repo / ".delegate" / "config.json"
    approval = repo / ".git" / "delegate-skills" / "project-config.sha256"
    assert config.read_bytes() == NODE_CONFIG_BYTES
    assert approval.read_bytes() == NODE_APPROVAL
    assert approval.read_bytes() == hashlib.sha256(config.read_bytes()).hexdigest().encode() + b"\n"

    fake = Fake(tmp_path / "fake")
    fake.install("codex")
    (tmp_path / "brief.txt").write_text("Review the change.\n")
    result = dispatch(
        python, lone_copies["codex-delegate"], fake, tmp_path, repo, "--lane", "review"
    )
    assert (result["status"], result["lane"], result["laneSource"]) == (
        "completed",
        "review",
        "project",
    )
    argv = fake.run_call()["argv"]
    assert argv[argv.index("-s") + 1] == "read-only"
    assert argv[argv.index("-m") + 1] == "gpt-5.1-codex"


def test_a_folder_missing_its_core_says_so_in_one_line(tmp_path):
    copy = tmp_path / "codex-delegate"
    shutil.copytree(ROOT / "skills" / "codex-delegate", copy)
    shutil.rmtree(copy / "scripts" / "delegate_skills")
    done = bare(shutil.which("python3") or "python3", copy / "scripts" / "relay.py", "--help")
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1
    assert "incomplete" in done.stderr and "copy the whole skill folder again" in done.stderr
