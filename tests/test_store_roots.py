"""One user, several environments: a run recorded under one state dir (a shell's
XDG_STATE_HOME) is found from another (an MCP server started without it), by id, by run
directory and by --last, and `runs list` lists it; the roots index that makes this work
sits at a fixed place under the user's home.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import PYTHON, ROOT, run
from test_worktree import BRIEF_EDIT, Source

INDEX = Path(".local", "state", "delegate-skills", "roots.json")


class TwoStores:
    """One repository and one fake codex, seen from two environments with their own state dir."""

    def __init__(self, tmp_path: Path, home: Path) -> None:
        self.source = Source(tmp_path)
        self.home = home
        self.a = tmp_path / "state-a"
        self.b = tmp_path / "state-b"
        base = {k: v for k, v in self.source.env.items() if k != "DELEGATE_STATE_ROOTS"}
        self.env_a = {**base, "HOME": str(home), "XDG_STATE_HOME": str(self.a)}
        self.env_b = {**base, "HOME": str(home), "XDG_STATE_HOME": str(self.b)}

    def relay_in_a(self, *extra: str) -> dict:
        from fakes import relay

        source = self.source
        out = source.bench.out
        args = ["--brief", str(source.bench.brief), "--cd", str(source.repo), "--out-dir", str(out)]
        done = relay("codex", *args, *extra, env=self.env_a, out_dir=out)
        assert done.code == 0, done
        return done.result

    def delegate_b(self, *args: str):
        from conftest import delegate

        return delegate(*args, env=self.env_b)

    def runs_script_b(self, *args: str):
        script = ROOT / "skills" / "codex-delegate" / "scripts" / "runs.py"
        return run([PYTHON, str(script), *args], env=self.env_b)

    def record_of(self, run_id: str) -> dict:
        path = self.a / "delegate-skills" / "runs" / run_id / "record.json"
        return json.loads(path.read_text())


@pytest.fixture
def stores(tmp_path, home) -> TwoStores:
    return TwoStores(tmp_path, home)


def test_a_run_recorded_under_another_state_dir_is_listed_shown_diffed_and_undone(stores):
    repo = stores.source.repo
    stores.source.bench.script(BRIEF_EDIT)
    result = stores.relay_in_a()
    run_id = result["relayRunId"]
    assert (repo / "made.txt").read_text() == "one\ntwo\n"

    listed = stores.delegate_b("runs", "list", "--json")
    assert listed.code == 0, listed
    rows = [r for r in json.loads(listed.out)["runs"] if r["id"] == run_id]
    assert [(r["implementer"], r["status"], r["changes"]) for r in rows] == [
        ("codex", "completed", {"filesChanged": 2, "linesAdded": 3, "linesRemoved": 0})
    ]

    shown = stores.delegate_b("runs", "show", run_id, "--json")
    assert shown.code == 0, shown
    assert (json.loads(shown.out)["id"], json.loads(shown.out)["status"]) == (run_id, "completed")
    by_dir = stores.delegate_b("runs", "show", str(stores.source.bench.out), "--json")
    assert by_dir.code == 0, by_dir
    assert json.loads(by_dir.out)["id"] == run_id
    last = stores.delegate_b("runs", "show", "--last", "--json")
    assert (last.code, json.loads(last.out)["id"]) == (0, run_id), last

    diffed = stores.delegate_b("runs", "diff", run_id, "--name-only")
    assert (diffed.code, diffed.out) == (0, "a.txt\nmade.txt\n"), diffed

    from_folder = stores.runs_script_b("show", run_id[:5])
    assert from_folder.code == 0, from_folder
    assert json.loads(from_folder.out)["id"] == run_id

    undone = stores.delegate_b("runs", "undo", run_id)
    assert undone.code == 0, undone
    assert "no change record" not in undone.err
    assert (repo / "a.txt").read_text() == "first\n"
    assert not (repo / "made.txt").exists()
    # The landing went into the run's own record, under the state dir it was written in.
    assert stores.record_of(run_id)["landing"]["state"] == "undone"
    assert not (stores.b / "delegate-skills" / "runs").exists()


def test_every_store_that_records_a_run_is_in_the_index_under_home(stores):
    stores.source.bench.script({})
    stores.relay_in_a()
    index = json.loads((stores.home / INDEX).read_text())
    assert index == {
        "schema": "delegate-state-roots.v1",
        "roots": [str(stores.a / "delegate-skills")],
    }
    assert (stores.home / INDEX).read_text().endswith("}\n")


def test_a_store_others_can_write_is_not_read(stores):
    stores.source.bench.script({})
    run_id = stores.relay_in_a()["relayRunId"]
    os.chmod(stores.a / "delegate-skills" / "runs", 0o777)
    try:
        shown = stores.delegate_b("runs", "show", run_id, "--json")
        assert (shown.code, shown.out) == (2, "")
        assert shown.err.startswith(f"delegate: {run_id}: no "), shown.err
    finally:
        os.chmod(stores.a / "delegate-skills" / "runs", 0o700)


def test_an_index_of_an_unknown_version_stops_with_both_versions(stores):
    path = stores.home / INDEX
    path.parent.mkdir(parents=True)
    path.write_text('{"schema": "delegate-state-roots.v9", "roots": []}\n')
    listed = stores.delegate_b("runs", "list", "--json")
    assert listed.code == 2
    assert listed.err.strip() == (
        f"delegate: {path}: version 'delegate-state-roots.v9' is not one this delegate-skills "
        "reads (delegate-state-roots.v1); fix the file or upgrade"
    )


def test_a_confined_run_hides_every_state_dir_the_roots_index_lists(tmp_path, monkeypatch):
    """Another environment's store holds runs and worktrees too: a confined implementer sees
    none of them, nor this environment's own, nor the one in use."""
    from delegate_skills.isolation.sandbox import Allowlist, bwrap_argv
    from delegate_skills.relay import confine

    mine, other = tmp_path / "mine", tmp_path / "other" / "delegate-skills"
    (other / "runs").mkdir(parents=True, mode=0o700)
    index = tmp_path / "roots.json"
    index.write_text(json.dumps({"schema": "delegate-state-roots.v1", "roots": [str(other)]}))
    monkeypatch.setenv("XDG_STATE_HOME", str(mine))
    monkeypatch.setenv("DELEGATE_STATE_ROOTS", str(index))
    monkeypatch.delenv("DELEGATE_STATE_DIR", raising=False)
    assert confine._state_dirs() == [str(mine / "delegate-skills"), str(other)]
    allow = Allowlist()
    allow.hidden += confine._state_dirs()
    argv = bwrap_argv(allow, str(tmp_path), "bwrap", as_root=False)
    assert ["--tmpfs", str(other)] == argv[argv.index(str(other)) - 1 : argv.index(str(other)) + 1]
    # An index of another version still leaves the environment's own hidden.
    index.write_text(json.dumps({"schema": "delegate-state-roots.v9", "roots": [str(other)]}))
    assert confine._state_dirs() == [str(mine / "delegate-skills")]
