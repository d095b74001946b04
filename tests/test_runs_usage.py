"""`runs usage`: the tokens and cost of the recorded runs, summed per group from the run store.

Runs are dispatched through the relays with fake codex and claude CLIs that report usage the
way the real ones do; every sum below is written out by hand from the counts scripted here.
A few runs are recorded as started on given days by rewriting `startedAt` in their record
(the store is the test's own): there is no other way to have runs of past days.
"""

from __future__ import annotations

import json
import os
import pty
import subprocess
from pathlib import Path

import pytest
from conftest import PYTHON, commit_all, delegate, fleet_doc, make_repo, write_json
from fakes import Fake, relay, relay_script, wait_for

# ---------------------------------------------------------------- what the fake CLIs report


def lines(*events: dict) -> str:
    return "".join(json.dumps(event) + "\n" for event in events)


def codex_events(usage: dict | None) -> str:
    events = [{"type": "thread.started", "thread_id": "t-usage"}]
    if usage is not None:
        events.append({"type": "turn.completed", "usage": usage})
    return lines(*events)


def claude_events(usage: dict, cost: float | None) -> str:
    result = {"type": "result", "subtype": "success", "is_error": False,
              "session_id": "11111111-1111-4111-8111-111111111111", "result": "Done.",
              "num_turns": 1, "usage": usage}  # fmt: skip
    if cost is not None:
        result["total_cost_usd"] = cost
    return lines(result)


# Five runs: (name, implementer, lane, repository, what the CLI prints). Their tokenUsage:
#   feature:  codex  1000 in (400 cached), 100 out, 30 reasoning, 1100 total, no cost
#   tests:    codex  2000 in (0 cached), 250 out, 50 reasoning, 2250 total, no cost
#   silent:   codex  no usage at all
#   review-1: claude 5 + 100 cache writes + 900 cache reads = 1005 in (900 cached), 40 out,
#             1045 total, $0.25
#   review-2: claude 10 in, 20 out, 30 total, no cost reported
RUNS = [
    ("feature", "codex", "feature", "alpha", codex_events(
        {"input_tokens": 1000, "cached_input_tokens": 400, "output_tokens": 100,
         "reasoning_output_tokens": 30})),
    ("tests", "codex", "tests", "beta", codex_events(
        {"input_tokens": 2000, "cached_input_tokens": 0, "output_tokens": 250,
         "reasoning_output_tokens": 50})),
    ("silent", "codex", None, "alpha", codex_events(None)),
    ("review-1", "claude", "review", "alpha", claude_events(
        {"input_tokens": 5, "cache_creation_input_tokens": 100, "cache_read_input_tokens": 900,
         "output_tokens": 40}, 0.25)),
    ("review-2", "claude", "review", "beta", claude_events(
        {"input_tokens": 10, "output_tokens": 20}, None)),
]  # fmt: skip


def sums(runs, with_usage, without, with_cost, inp, cached, out, reasoning, total, cost) -> dict:
    return {"runs": runs, "runsWithUsage": with_usage, "runsWithoutUsage": without,
            "runsWithCost": with_cost, "inputTokens": inp, "cachedInputTokens": cached,
            "outputTokens": out, "reasoningTokens": reasoning, "totalTokens": total,
            "costUsd": cost}  # fmt: skip


FEATURE = sums(1, 1, 0, 0, 1000, 400, 100, 30, 1100, None)
TESTS = sums(1, 1, 0, 0, 2000, 0, 250, 50, 2250, None)
SILENT = sums(1, 0, 1, 0, None, None, None, None, None, None)
REVIEW = sums(2, 2, 0, 1, 1015, 900, 60, None, 1075, 0.25)
CODEX = sums(3, 2, 1, 0, 3000, 400, 350, 80, 3350, None)
ALL = sums(5, 4, 1, 1, 4015, 1300, 410, 80, 4425, 0.25)


# ---------------------------------------------------------------- the world the runs happen in


class World:
    """Two repositories, fake codex and claude, a fleet with three lanes, a state dir."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        self.repos = {}
        for name in ("alpha", "beta"):
            repo = make_repo(tmp_path / name)
            (repo / "a.txt").write_text("first\n")
            commit_all(repo, "start")
            self.repos[name] = repo
        self.fake = Fake(tmp_path / "fake")
        for binary in ("codex", "claude"):
            self.fake.install(binary)
        self.brief = tmp_path / "brief.txt"
        self.brief.write_text("a brief\n")
        self.state = tmp_path / "state"
        self.env = self.fake.env(XDG_STATE_HOME=str(self.state), TMPDIR=str(tmp_path))
        lanes = {"feature": {"implementer": "codex"}, "tests": {"implementer": "codex"},
                 "review": {"implementer": "claude"}}  # fmt: skip
        config = Path(os.environ["HOME"]) / ".config" / "delegate-skills" / "config.json"
        write_json(config, fleet_doc(lanes))
        self.ids: dict[str, str] = {}

    def dispatch(self, name: str, key: str, lane: str | None, repo: str, stdout: str) -> str:
        """One run to its end; its run id."""
        self.fake.script({"run": {"actions": [{"stdout": stdout}]}})
        out = self.tmp / "runs" / name
        args = ["--brief", str(self.brief), "--cd", str(self.repos[repo]), "--out-dir", str(out)]
        args += ["--lane", lane] if lane else []
        args += ["--skip-preflight"] if key == "claude" else []
        done = relay(key, *args, env=self.env, out_dir=out)
        assert done.code == 0, done
        self.ids[name] = done.result["relayRunId"]
        return self.ids[name]

    def dispatch_all(self) -> None:
        for run in RUNS:
            self.dispatch(*run)

    def record_path(self, name: str) -> Path:
        return self.state / "delegate-skills" / "runs" / self.ids[name] / "record.json"

    def started_at(self, name: str, stamp: str) -> None:
        """The run `name` as recorded to have started at `stamp`."""
        path = self.record_path(name)
        record = json.loads(path.read_text())
        record["startedAt"] = stamp
        path.write_text(json.dumps(record, indent=2) + "\n")

    def usage(self, *args: str) -> dict:
        done = delegate("runs", "usage", *args, env=self.env)
        assert (done.code, done.err) == (0, ""), done
        return json.loads(done.out)

    def real(self, repo: str) -> str:
        return os.path.realpath(self.repos[repo])


@pytest.fixture
def world(tmp_path, home) -> World:
    return World(tmp_path)


def groups(report: dict) -> list[tuple]:
    by = report["by"]
    return [(group[by], {k: v for k, v in group.items() if k != by}) for group in report["groups"]]


# ---------------------------------------------------------------- the sums


def test_usage_by_implementer_sums_each_field_and_counts_runs_without_usage(world):
    world.dispatch_all()
    report = world.usage("--json")
    assert report["by"] == "implementer"
    assert report["since"] is None
    assert groups(report) == [("claude", REVIEW), ("codex", CODEX)]
    assert report["total"] == ALL
    assert report["runsInFlight"] == 0
    assert world.usage() == report  # on a pipe, JSON without --json too


def test_a_skill_folder_copied_alone_sums_the_same_under_a_bare_python(world, tmp_path):
    """`runs.py usage` from a copied codex-delegate folder, `python3 -I -S`: the same report."""
    import shutil

    from conftest import ROOT, run

    world.dispatch_all()
    folder = tmp_path / "agent-skills" / "codex-delegate"
    shutil.copytree(ROOT / "skills" / "codex-delegate", folder)
    script = [PYTHON, "-I", "-S", str(folder / "scripts" / "runs.py"), "usage"]
    done = run([*script, "--by", "lane", "--since", "7d"], env=world.env, timeout=120)
    assert (done.code, done.err) == (0, ""), done
    ours, theirs = json.loads(done.out), world.usage("--by", "lane", "--since", "7d")
    assert ours.pop("since").startswith(theirs.pop("since")[:10])  # "now - 7d": a moment apart
    assert ours == theirs
    assert [g["lane"] for g in ours["groups"]] == ["feature", "review", "tests", None]
    bad = run([*script, "--by", "model"], env=world.env, timeout=120)
    assert bad.code == 2 and bad.err.startswith("runs.py: --by model: "), bad
    assert bad.err.count("\n") == 1


def test_usage_by_lane_repo_and_day(world):
    world.dispatch_all()
    assert groups(world.usage("--by", "lane")) == [
        ("feature", FEATURE), ("review", REVIEW), ("tests", TESTS), (None, SILENT),
    ]  # fmt: skip
    by_repo = world.usage("--by", "repo")
    assert groups(by_repo) == [
        (world.real("alpha"), sums(3, 2, 1, 1, 2005, 1300, 140, 30, 2145, 0.25)),
        (world.real("beta"), sums(2, 2, 0, 0, 2010, 0, 270, 50, 2280, None)),
    ]
    assert by_repo["total"] == ALL
    for name, stamp in (("feature", "2026-01-05T10:00:00.000Z"),
                        ("tests", "2026-01-06T00:00:00.000Z"),
                        ("silent", "2026-01-06T12:30:00.000Z"),
                        ("review-1", "2026-01-07T08:00:00.000Z"),
                        ("review-2", "2026-01-08T01:59:59.999+02:00")):  # fmt: skip
        world.started_at(name, stamp)
    # review-2 started at 23:59:59.999 UTC on 2026-01-07 (01:59:59.999 at +02:00 on the 8th).
    assert groups(world.usage("--by", "day")) == [
        ("2026-01-05", FEATURE),
        ("2026-01-06", sums(2, 1, 1, 0, 2000, 0, 250, 50, 2250, None)),
        ("2026-01-07", REVIEW),
    ]


def test_since_a_day_counts_from_its_start_in_utc_and_since_an_age_from_now(world):
    world.dispatch_all()
    world.started_at("feature", "2026-01-05T23:59:59.999Z")
    world.started_at("tests", "2026-01-06T00:00:00.000Z")
    world.started_at("silent", "2020-01-01T00:00:00.000Z")
    since_day = world.usage("--since", "2026-01-06")
    assert since_day["since"] == "2026-01-06T00:00:00.000Z"
    # tests (at the very start of the day), review-1 and review-2 (now)
    assert groups(since_day) == [("claude", REVIEW), ("codex", TESTS)]
    assert since_day["total"] == sums(3, 3, 0, 1, 3015, 900, 310, 50, 3325, 0.25)
    # The two claude runs, started now; the codex runs are all of January 2026 or before.
    assert groups(world.usage("--since", "12h")) == [("claude", REVIEW)]
    assert groups(world.usage("--since", "7d", "--by", "lane")) == [("review", REVIEW)]
    # Every run started after 2019, the one of 2020-01-01 too.
    assert world.usage("--since", "2019-12-31")["total"] == ALL
    nothing = world.usage("--since", "2099-01-01")
    assert (nothing["groups"], nothing["total"]["runs"]) == ([], 0)


def test_a_rewritten_result_json_changes_nothing_the_records_decide(world):
    run_id = world.dispatch(*RUNS[0])
    before = world.usage()
    assert before["total"] == FEATURE
    result_path = world.tmp / "runs" / "feature" / "result.json"
    forged = json.loads(result_path.read_text())
    huge = 10**15
    forged["tokenUsage"] = {"inputTokens": huge, "cachedInputTokens": 0, "outputTokens": huge,
                            "reasoningTokens": 0, "totalTokens": 2 * huge, "costUsd": 99999.0}  # fmt: skip
    forged["usage"] = {"input_tokens": huge, "output_tokens": huge}
    result_path.write_text(json.dumps(forged, indent=2) + "\n")
    assert world.usage() == before
    listed = delegate("runs", "list", "--json", env=world.env)
    assert listed.code == 0, listed
    assert [(r["id"], r["tokens"]) for r in json.loads(listed.out)["runs"]] == [(run_id, 1100)]


def test_runs_compare_takes_the_tokens_from_the_record(world):
    run_id = world.dispatch(*RUNS[0])
    result_path = world.tmp / "runs" / "feature" / "result.json"
    forged = json.loads(result_path.read_text())
    forged["tokenUsage"]["totalTokens"] = 10**15
    result_path.write_text(json.dumps(forged, indent=2) + "\n")
    compared = delegate("runs", "compare", run_id, "--json", env=world.env)
    assert compared.code == 0, compared
    assert [(r["id"], r["tokens"]) for r in json.loads(compared.out)["runs"]] == [(run_id, 1100)]


def test_a_run_recorded_before_records_held_usage(world):
    """Its record has no tokenUsage: `runs list` still reads its result.json, as before;
    `runs usage` (records alone) counts it as a run without usage."""
    run_id = world.dispatch(*RUNS[1])
    path = world.record_path("tests")
    record = json.loads(path.read_text())
    assert record["tokenUsage"] == {"inputTokens": 2000, "cachedInputTokens": 0,
                                    "outputTokens": 250, "reasoningTokens": 50,
                                    "totalTokens": 2250, "costUsd": None}  # fmt: skip
    del record["tokenUsage"]
    path.write_text(json.dumps(record, indent=2) + "\n")
    listed = delegate("runs", "list", "--json", env=world.env)
    assert [(r["id"], r["tokens"]) for r in json.loads(listed.out)["runs"]] == [(run_id, 2250)]
    assert world.usage()["total"] == SILENT


def test_a_run_without_usage_is_recorded_as_null_and_never_read_from_its_result(world):
    world.dispatch(*RUNS[2])
    assert json.loads(world.record_path("silent").read_text())["tokenUsage"] is None
    result_path = world.tmp / "runs" / "silent" / "result.json"
    forged = json.loads(result_path.read_text())
    forged["tokenUsage"] = {"inputTokens": 7, "cachedInputTokens": None, "outputTokens": 3,
                            "reasoningTokens": None, "totalTokens": 10, "costUsd": 1.5}  # fmt: skip
    result_path.write_text(json.dumps(forged) + "\n")
    assert world.usage()["groups"] == [{"implementer": "codex", **SILENT}]
    listed = delegate("runs", "list", "--json", env=world.env)
    assert [r["tokens"] for r in json.loads(listed.out)["runs"]] == [None]


def test_a_run_in_flight_is_left_out_until_it_ends(world):
    go = world.tmp / "go"
    world.fake.script({"run": {"actions": [
        {"stdout": codex_events({"input_tokens": 8, "output_tokens": 2})},
        {"wait_for_file": str(go)},
    ]}})  # fmt: skip
    out = world.tmp / "runs" / "live"
    args = ["--brief", str(world.brief), "--cd", str(world.repos["alpha"]), "--out-dir", str(out)]
    proc = subprocess.Popen([PYTHON, "-S", str(relay_script("codex")), *args],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=world.env)  # fmt: skip
    try:
        wait_for(lambda: world.fake.calls("run"), timeout=60)  # recorded, and started
        running = world.usage()
        assert (running["groups"], running["runsInFlight"]) == ([], 1)
        go.write_text("")
        assert proc.wait(timeout=120) == 0
        ended = world.usage()
        assert ended["runsInFlight"] == 0
        assert ended["total"] == sums(1, 1, 0, 0, 8, None, 2, None, 10, None)
    finally:
        go.write_text("")
        proc.kill()
        proc.wait()


# ---------------------------------------------------------------- for a person, and for agents


def _on_a_terminal(argv: list[str], env: dict) -> str:
    """What `argv` prints to a terminal (a pseudo-terminal), once it has exited."""
    leader, follower = pty.openpty()
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=follower,
                                stderr=subprocess.DEVNULL, env=env)  # fmt: skip
    finally:
        os.close(follower)
    shown = b""
    try:
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the other end closed: the command has exited
                break
            if not chunk:
                break
            shown += chunk
        assert proc.wait(timeout=60) == 0
    finally:
        os.close(leader)
        proc.kill()
        proc.wait()
    return shown.decode().replace("\r\n", "\n")


def test_the_table_on_a_terminal(world):
    world.dispatch_all()
    shown = _on_a_terminal([PYTHON, "-m", "delegate_skills", "runs", "usage", "--by", "lane"],
                           world.env)  # fmt: skip
    assert shown.splitlines() == [
        "lane     runs  input  cached  output  reasoning  total              cost-usd  no-usage",
        "feature     1   1000     400     100         30   1100                     -         0",
        "review      2   1015     900      60          -   1075  0.2500 (1 of 2 runs)         0",
        "tests       1   2000       0     250         50   2250                     -         0",
        "-           1      -       -       -          -      -                     -         1",
        "all         5   4015    1300     410         80   4425  0.2500 (1 of 4 runs)         1",
        "no-usage: 1 run(s) whose implementer reported no usage (not counted as zero)",
        "cost-usd: the costs reported, summed; (N of M runs): only N of the M runs that "
        "reported usage reported a cost",
    ]
    nothing = _on_a_terminal(
        [PYTHON, "-m", "delegate_skills", "runs", "usage", "--since", "2099-01-01"], world.env
    )
    assert nothing == "no ended runs since 2099-01-01T00:00:00.000Z\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--by", "model"], "delegate: --by model: group by one of implementer, lane, repo, day"),
        (["--by", "days"], "delegate: --by days: group by one of implementer, lane, repo, day; "
                           "did you mean day?"),
        (["--since", "yesterday"], "delegate: --since yesterday: use a day as YYYY-MM-DD (from "
                                   "its start, UTC) or an age such as 7d, 12h or 90m"),
        (["--since", "2026-13-01"], "delegate: --since 2026-13-01: use a day as YYYY-MM-DD (from "
                                    "its start, UTC) or an age such as 7d, 12h or 90m"),
        (["--since", "0"], "delegate: --since 0: use a day as YYYY-MM-DD (from its start, UTC) "
                           "or an age such as 7d, 12h or 90m"),
    ],
)  # fmt: skip
def test_a_bad_by_or_since_is_one_line_and_exit_2(home, args, message):
    done = delegate("runs", "usage", *args)
    assert (done.code, done.out, done.err) == (2, "", message + "\n")


def test_the_mcp_tool_returns_what_the_command_prints(world):
    pytest.importorskip("mcp")
    from test_mcp import text, with_server

    world.dispatch_all()

    async def body(session):
        by_lane = await session.call_tool("runs_usage", {"by": "lane", "since": "2026-01-01"})
        bad = await session.call_tool("runs_usage", {"by": "model"})
        return by_lane, bad

    by_lane, bad = with_server(world.env, body)
    assert not by_lane.is_error, text(by_lane)
    assert json.loads(text(by_lane)) == world.usage("--by", "lane", "--since", "2026-01-01")
    assert groups(json.loads(text(by_lane)))[1] == ("review", REVIEW)
    assert bad.is_error
    assert "--by model: group by one of implementer, lane, repo, day" in text(bad)
