"""`runs.py fanout` from copied skill folders: attempts on several implementers, no install.

An agent that has only the codex-delegate and claude-delegate folders (as the
Skills CLI copies them) runs one brief on both, each in its own worktree, with
the folder's own runs.py and a bare interpreter (-I -S: no site-packages, no
PYTHON* variables). Each implementer's relay is the one in its own folder
beside this one. Fake codex and claude stand in for the real CLIs.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
from pathlib import Path

import pytest
from conftest import PYTHON, ROOT, commit_all, delegate, fleet_doc, git, make_repo, run, write_json
from fakes import Fake

CODEX_EDIT = {"actions": [{"write": ["codex.txt", "from codex\n"]}, {"append": ["a.txt", "c\n"]}]}
SESSION = "11111111-1111-4111-8111-111111111111"


def claude_says(text: str) -> str:
    return json.dumps({"type": "result", "subtype": "success", "is_error": False,
                       "session_id": SESSION, "result": text}) + "\n"  # fmt: skip


CLAUDE_EDIT = {
    "actions": [
        {"write": ["claude.txt", "from claude\n"]},
        {"write": ["README.md", "rewritten\n"]},
        {"stdout": claude_says("done")},
    ]
}


class Folders:
    """Two skill folders copied side by side, a repository, and fake codex and claude."""

    def __init__(self, tmp_path: Path, keys: tuple[str, ...] = ("codex", "claude")) -> None:
        self.skills = tmp_path / "agent-skills"
        for key in keys:
            shutil.copytree(ROOT / "skills" / f"{key}-delegate", self.skills / f"{key}-delegate")
        self.runs_py = self.skills / "codex-delegate" / "scripts" / "runs.py"
        self.repo = make_repo(tmp_path / "repo")
        (self.repo / "a.txt").write_text("a\n")
        (self.repo / "README.md").write_text("readme\n")
        commit_all(self.repo, "start")
        self.brief = tmp_path / "brief.txt"
        self.brief.write_text("Fix the bug.\n")
        self.codex = Fake(tmp_path / "fake-codex")
        self.codex.install("codex")
        self.claude = Fake(tmp_path / "fake-claude")
        self.claude.install("claude")
        self.state = tmp_path / "state"
        self.tmp = tmp_path / "tmp"
        self.tmp.mkdir()
        self.cwd = tmp_path
        path = os.environ["PATH"]
        self.env = {
            **os.environ,
            "PATH": os.pathsep.join([str(self.codex.bin), str(self.claude.bin), path]),
            "XDG_STATE_HOME": str(self.state),
            "TMPDIR": str(self.tmp),
            "DELEGATE_CONFINE_WRITABLE": os.pathsep.join(
                [str(self.codex.calls_dir), str(self.claude.calls_dir)]
            ),
        }

    def runs(self, *args: str, script: Path | None = None):
        """`python3 -I -S <folder>/scripts/runs.py ARGS`, as a bare interpreter runs it."""
        argv = [PYTHON, "-I", "-S", str(script or self.runs_py), *args]
        return run(argv, env=self.env, cwd=self.cwd, timeout=180)

    def fanout(self, *args: str):
        return self.runs("fanout", "--brief", str(self.brief), "--cd", str(self.repo), *args)

    def worktrees(self) -> list[str]:
        listed = git(self.repo, "worktree", "list", "--porcelain")
        return [line[9:] for line in listed.splitlines() if line.startswith("worktree ")]

    def run_dirs(self) -> list[str]:
        root = self.tmp / "delegate-relay"
        return sorted(os.listdir(root)) if root.is_dir() else []


@pytest.fixture
def folders(tmp_path, home) -> Folders:
    return Folders(tmp_path)


def _result(row: dict) -> dict:
    return json.loads(Path(row["outDir"], "result.json").read_text())


def test_fanout_from_two_copied_folders_runs_each_implementer_in_its_own_worktree(folders):
    folders.codex.script({"run": CODEX_EDIT})
    folders.claude.script({"run": CLAUDE_EDIT})
    done = folders.fanout("--implementer", "codex", "--implementer", "claude")
    assert done.code == 0, done
    report = done.json()
    rows = report["runs"]
    assert [(r["implementer"], r["lane"], r["status"], r["exitCode"]) for r in rows] == [
        ("codex", None, "completed", 0),
        ("claude", None, "completed", 0),
    ]
    codex, claude = rows
    for row in rows:
        result = _result(row)
        assert row["id"] == result["relayRunId"] and len(row["id"]) == 8
        assert Path(row["outDir"]).parent == folders.tmp / "delegate-relay"
        path = Path(row["worktree"]["path"])
        assert path.parent == folders.state / "delegate-skills" / "worktrees"
        # Confined as fanout confines: the result says whether bubblewrap held it.
        assert "confined" in result, result
    assert (Path(codex["worktree"]["path"]) / "codex.txt").read_text() == "from codex\n"
    assert not (Path(codex["worktree"]["path"]) / "claude.txt").exists()
    assert (Path(claude["worktree"]["path"]) / "claude.txt").read_text() == "from claude\n"
    assert folders.codex.run_call()["cwd"] == codex["worktree"]["path"]
    assert folders.claude.run_call()["cwd"] == claude["worktree"]["path"]
    assert sorted(folders.worktrees()) == sorted(
        [str(folders.repo), codex["worktree"]["path"], claude["worktree"]["path"]]
    )
    assert git(folders.repo, "status", "--porcelain") == ""
    runs_py = f'python3 "{folders.runs_py}"'
    assert report["next"] == {
        "compare": f"{runs_py} compare {codex['id']} {claude['id']}",
        "apply": f"{runs_py} apply <id>",
        "discard": f"{runs_py} discard <id>",
    }
    assert done.err.splitlines()[-1] == (
        f"runs.py: 2 attempts done; compare them: {runs_py} compare {codex['id']} {claude['id']}"
    )


def test_the_printed_next_commands_compare_and_land_from_the_folder(folders):
    folders.codex.script({"run": CODEX_EDIT})
    folders.claude.script({"run": CLAUDE_EDIT})
    report = folders.fanout("--implementer", "codex", "--implementer", "claude").json()
    codex, claude = report["runs"]
    compared = folders.runs("compare", codex["id"], claude["id"])
    assert compared.code == 0, compared
    table = compared.json()["runs"]
    assert [(r["id"], r["implementer"], r["status"]) for r in table] == [
        (codex["id"], "codex", "completed"),
        (claude["id"], "claude", "completed"),
    ]
    assert [r["changes"]["filesChanged"] for r in table] == [2, 2]
    # The same rows `delegate runs compare --json` gives.
    same = delegate("runs", "compare", codex["id"], claude["id"], "--json", env=folders.env)
    assert same.code == 0, same
    assert same.json() == compared.json()
    applied = folders.runs("apply", codex["id"])
    assert applied.code == 0, applied
    assert (folders.repo / "codex.txt").read_text() == "from codex\n"
    assert not (folders.repo / "claude.txt").exists()


STUB_RELAY = """import json, sys
with open(sys.argv[0] + ".called", "w") as handle:
    json.dump(sys.argv[1:], handle)
sys.stderr.write("stub relay: not a run\\n")
sys.exit(2)
"""


def test_each_implementer_runs_through_the_relay_in_its_own_folder(tmp_path, home):
    folders = Folders(tmp_path, keys=("codex",))
    stub = folders.skills / "claude-delegate" / "scripts" / "relay.py"
    stub.parent.mkdir(parents=True)
    stub.write_text(STUB_RELAY)
    folders.codex.script({"run": CODEX_EDIT})
    done = folders.fanout("--implementer", "claude", "--implementer", "codex")
    assert done.code == 1, done
    stubbed, codex = done.json()["runs"]
    assert (stubbed["implementer"], stubbed["status"]) == ("claude", "refused")
    assert stubbed["exitCode"] == 2
    assert stubbed["error"] == "stub relay: not a run"
    assert (codex["implementer"], codex["status"]) == ("codex", "completed")
    argv = json.loads(Path(str(stub) + ".called").read_text())
    assert argv == ["--brief", str(folders.brief), "--cd", str(folders.repo), "--worktree",
                    "--out-dir", stubbed["outDir"], "--confine"]  # fmt: skip


def test_a_missing_folder_beside_it_is_one_line_and_nothing_starts(tmp_path, home):
    folders = Folders(tmp_path, keys=("codex",))
    done = folders.fanout("--implementer", "codex", "--implementer", "claude")
    assert (done.code, done.out) == (2, ""), done
    assert done.err == (
        "runs.py: fanout on claude needs the claude-delegate skill folder beside this one "
        f"({folders.skills / 'claude-delegate'}); install it there "
        "(delegate skills install claude-delegate, or the Skills CLI: "
        "npx skills add <source> -s claude-delegate), or use delegate fanout\n"
    )
    assert folders.worktrees() == [str(folders.repo)]
    assert folders.run_dirs() == []
    assert folders.codex.calls() == [] and folders.claude.calls() == []


def test_a_failed_attempt_makes_the_exit_code_1(folders):
    folders.codex.script({"run": {**CODEX_EDIT, "exit": 3}})
    folders.claude.script({"run": CLAUDE_EDIT})
    done = folders.fanout("--implementer", "codex", "--implementer", "claude")
    assert done.code == 1, done
    rows = done.json()["runs"]
    assert [(r["implementer"], r["status"], r["exitCode"]) for r in rows] == [
        ("codex", "failed", 3),
        ("claude", "completed", 0),
    ]


def test_no_confine_runs_unconfined_and_attempts_repeat_a_key(folders):
    folders.codex.script({"run": CODEX_EDIT})
    done = folders.fanout("--implementer", "codex", "--attempts", "2", "--no-confine", "--json")
    assert done.code == 0, done
    rows = done.json()["runs"]
    assert [(r["task"], r["implementer"], r["status"]) for r in rows] == [
        ("#1", "codex", "completed"),
        ("#2", "codex", "completed"),
    ]
    assert ["confined" in _result(row) for row in rows] == [False, False]
    assert len({row["worktree"]["path"] for row in rows}) == 2


def test_a_lane_runs_its_implementer_from_the_folder_beside_it(folders, global_config):
    write_json(global_config, fleet_doc({"second": {"implementer": "claude"}}))
    folders.codex.script({"run": CODEX_EDIT})
    folders.claude.script({"run": CLAUDE_EDIT})
    done = folders.fanout("--lane", "second", "--implementer", "codex")
    assert done.code == 0, done
    rows = done.json()["runs"]
    assert [(r["lane"], r["implementer"], r["status"]) for r in rows] == [
        ("second", "claude", "completed"),
        (None, "codex", "completed"),
    ]
    assert _result(rows[0])["lane"] == "second"


def test_usage_errors_are_one_line_and_start_nothing(folders):
    cases = [
        ([], "runs.py: give at least one --lane or --implementer\n"),
        (
            ["--implementer", "nosuch"],
            "runs.py: --implementer nosuch: unknown implementer (one of: "
            "claude, cline, codex, commandcode, opencode, agy, grok, kimi, qoder, vibe, cursor, "
            "pi, omp, aider, copilot, warp, zcode, gemini, qwen, auggie, kilo, hermes, dsh)\n",
        ),
        (["--implementer", "codex", "--jobs", "0"], "runs.py: --jobs must be 1 or more\n"),
        (["--implementer", "codex", "--attempts", "x"], "runs.py: --attempts must be 1 or more\n"),
        (
            ["--implementer", "codex", "--timeout", "soon"],
            "runs.py: --timeout must be an h/m/s duration such as 30m or 90s\n",
        ),
        (["--implementer", "codex", "--check", " "], "runs.py: --check needs a command\n"),
        (["--implementer", "codex", "--review-by", "x"], "runs.py: unknown option: --review-by\n"),
        (["--implementer", "codex", "extra"], "runs.py: unexpected argument: extra\n"),
    ]
    for args, message in cases:
        done = folders.fanout(*args)
        assert (done.code, done.out, done.err) == (2, "", message), args
    no_brief = folders.runs("fanout", "--implementer", "codex")
    assert (no_brief.code, no_brief.err) == (2, "runs.py: fanout needs --brief <file>\n")
    assert folders.worktrees() == [str(folders.repo)]
    assert folders.run_dirs() == []


def test_help_names_fanout_compare_and_the_exit_codes(folders):
    done = folders.runs("--help")
    assert done.code == 0
    assert "python3 runs.py fanout --brief <file>" in done.out
    assert "python3 runs.py compare <out-dir>..." in done.out
    assert (
        "fanout exits 0 when every attempt completed, 1 when one did not, 2 on a usage error or "
        "a missing folder (nothing started), 128+n after signal n" in " ".join(done.out.split())
    )


QUICKSTART = "### Two implementers on one brief, keep the better\n"


def _quickstart_commands(skill_md: Path) -> list[str]:
    """The commands of SKILL.md's two-implementer quickstart, in the order shown."""
    text = skill_md.read_text(encoding="utf-8")
    assert QUICKSTART in text, "SKILL.md has no two-implementer quickstart"
    section = text.split(QUICKSTART, 1)[1].split("\n#", 1)[0]
    return [s for s in re.findall(r"`([^`\n]+)`", section) if s.startswith("python3 ")]


def test_the_skill_quickstart_runs_as_written_from_the_copied_folders(folders):
    """Every command of the quickstart, its placeholders filled in, run from the folder."""
    folders.codex.script({"run": CODEX_EDIT})
    folders.claude.script({"run": CLAUDE_EDIT})
    shown = _quickstart_commands(folders.skills / "codex-delegate" / "SKILL.md")
    assert [shlex.split(c)[2] for c in shown] == [
        "fanout", "compare", "diff", "apply", "discard", "undo",
    ]  # fmt: skip
    fill = {
        "<skill-dir>": str(folders.skills / "codex-delegate"),
        "/tmp/brief-1.txt": str(folders.brief),
        "/path/to/repo": str(folders.repo),
        "<other>": "claude",
        " PATH": " codex.txt",
    }
    ids: dict[str, str] = {}
    outputs = []
    for command in shown:
        for placeholder, value in fill.items():
            command = command.replace(placeholder, value)
        verb = shlex.split(command)[2]
        for placeholder in ("<id-1>", "<id-2>"):
            command = command.replace(placeholder, ids.get(placeholder, placeholder))
        command = command.replace("<id>", ids.get("claude" if verb == "discard" else "codex", ""))
        words = shlex.split(command)
        assert words[0] == "python3" and "<" not in command, command
        done = run([PYTHON, "-I", "-S", *words[1:]], env=folders.env, cwd=folders.cwd)
        assert done.code == 0, (command, done)
        outputs.append(done.out)
        if verb == "fanout":
            rows = json.loads(done.out)["runs"]
            ids = {"codex": rows[0]["id"], "claude": rows[1]["id"],
                   "<id-1>": rows[0]["id"], "<id-2>": rows[1]["id"]}  # fmt: skip
        if verb == "apply":
            assert (folders.repo / "codex.txt").read_text() == "from codex\n"
            assert (folders.repo / "a.txt").read_text() == "a\n"  # left out
            assert git(folders.repo, "status", "--porcelain") == "?? codex.txt"
    fanout, compared, diff, _applied, discarded, _undone = outputs
    assert [r["implementer"] for r in json.loads(compared)["runs"]] == ["codex", "claude"]
    assert "+from codex" in diff
    claude = json.loads(fanout)["runs"][1]
    dropped = json.loads(discarded)
    assert dropped["id"] == ids["claude"]
    assert dropped["deletedBranch"] == claude["worktree"]["branch"]
    assert git(folders.repo, "status", "--porcelain") == ""
    assert not (folders.repo / "codex.txt").exists()
    assert json.loads(fanout)["next"]["apply"].endswith("apply <id>")
