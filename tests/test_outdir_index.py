"""Finding the run of an out-dir reads the records the out-dir index names, not every record.

The index (runs/outdirs.json) is a cache: a record it does not hold yet (a new run, one an
older version wrote) is still found, an entry a record contradicts is not believed, and a
removed run is dropped. How many records a lookup reads is counted, so a store that fills
up does not make each dispatch read more.
"""

from __future__ import annotations

import json
import os

import pytest

from delegate_skills.runstore import outdirs, paths, record


@pytest.fixture
def store(tmp_path, home, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.delenv("DELEGATE_STATE_DIR", raising=False)
    monkeypatch.delenv("DELEGATE_STATE_ROOTS", raising=False)
    monkeypatch.setattr(paths, "_registered", set())
    return tmp_path / "state" / "delegate-skills" / "runs"


@pytest.fixture
def reads(monkeypatch):
    """The ids of the records read through record.load, in order."""
    seen: list[str] = []
    real = record.load

    def counted(run_id):
        seen.append(run_id)
        return real(run_id)

    monkeypatch.setattr(record, "load", counted)
    return seen


def out(tmp_path, name: str) -> str:
    path = tmp_path / name
    path.mkdir(exist_ok=True)
    return str(path)


def index_of(store) -> dict:
    return json.loads((store / "outdirs.json").read_text())["runs"]


def written_by_hand(store, run_id: str, out_dir: str, started: str = "2026-01-01T00:00:00Z"):
    """A record written straight to the store, as a version without the index writes one."""
    folder = store / run_id
    folder.mkdir(parents=True, mode=0o700)
    data = {
        "schema": record.RECORD_SCHEMA,
        "id": run_id,
        "outDir": os.path.realpath(out_dir),
        "startedAt": started,
    }
    (folder / "record.json").write_text(json.dumps(data))


def test_a_run_is_found_by_its_out_dir_and_the_index_names_it(tmp_path, store):
    made = record.new(out(tmp_path, "a"), startedAt="2026-01-01T00:00:00Z")
    found = outdirs.by_out_dir(str(tmp_path / "a"))
    assert found is not None and found.id == made.id
    assert index_of(store) == {made.id: [str(tmp_path / "a"), "2026-01-01T00:00:00Z"]}
    assert outdirs.by_out_dir(out(tmp_path, "elsewhere")) is None


def test_a_record_the_index_does_not_hold_is_still_found(tmp_path, store):
    first = record.new(out(tmp_path, "a"), startedAt="2026-02-01T00:00:00Z")
    assert outdirs.by_out_dir(str(tmp_path / "a")).id == first.id  # the index now exists
    written_by_hand(store, "2222aaaa", out(tmp_path, "b"))
    assert outdirs.by_out_dir(str(tmp_path / "b")).id == "2222aaaa"
    (store / "outdirs.json").write_text("not json")
    assert outdirs.by_out_dir(str(tmp_path / "b")).id == "2222aaaa"
    assert index_of(store) == {
        first.id: [str(tmp_path / "a"), "2026-02-01T00:00:00Z"],
        "2222aaaa": [str(tmp_path / "b"), "2026-01-01T00:00:00Z"],
    }


def test_an_entry_its_record_contradicts_is_not_believed(tmp_path, store):
    written_by_hand(store, "3333aaaa", out(tmp_path, "b"))
    outdirs.by_out_dir(str(tmp_path / "b"))
    forged = {
        "schema": outdirs.INDEX_SCHEMA,
        "runs": {"3333aaaa": [str(tmp_path / "a"), "2026-01-01T00:00:00Z"]},
    }
    (store / "outdirs.json").write_text(json.dumps(forged))
    assert outdirs.by_out_dir(out(tmp_path, "a")) is None


def test_the_newest_run_of_an_out_dir_wins(tmp_path, store):
    written_by_hand(store, "4444aaaa", out(tmp_path, "a"), "2026-01-01T00:00:00Z")
    written_by_hand(store, "4444bbbb", out(tmp_path, "a"), "2026-03-01T00:00:00Z")
    written_by_hand(store, "4444cccc", out(tmp_path, "a"), "2026-02-01T00:00:00Z")
    assert outdirs.by_out_dir(str(tmp_path / "a")).id == "4444bbbb"


def test_of_many_runs_in_one_out_dir_only_the_newest_is_read(tmp_path, store, reads):
    for n in range(20):
        written_by_hand(store, f"7777aa{n:02d}".replace("0", "b"), out(tmp_path, "a"),
                        f"2026-01-{n + 1:02d}T00:00:00Z")  # fmt: skip
    outdirs.by_out_dir(str(tmp_path / "a"))  # builds the index
    reads.clear()
    assert outdirs.by_out_dir(str(tmp_path / "a")).id == "7777aa19".replace("0", "b")
    assert reads == ["7777aa19".replace("0", "b")]


def test_an_index_that_misorders_the_runs_does_not_change_the_answer(tmp_path, store):
    written_by_hand(store, "8888aaaa", out(tmp_path, "a"), "2026-01-01T00:00:00Z")
    written_by_hand(store, "8888bbbb", out(tmp_path, "a"), "2026-05-01T00:00:00Z")
    where = str(tmp_path / "a")
    forged = {
        "schema": outdirs.INDEX_SCHEMA,
        "runs": {"8888aaaa": [where, "2027-01-01T00:00:00Z"], "8888bbbb": [where, "2026"]},
    }
    (store / "outdirs.json").write_text(json.dumps(forged))
    assert outdirs.by_out_dir(where).id == "8888bbbb"


def test_a_lookup_reads_only_new_records_and_those_of_its_out_dir(tmp_path, store, reads):
    ids = [f"5555{n:04d}".replace("0", "a") for n in range(40)]
    for n, run_id in enumerate(ids):
        written_by_hand(store, run_id, out(tmp_path, f"o{n}"))
    assert outdirs.by_out_dir(out(tmp_path, "fresh")) is None
    assert sorted(reads) == sorted(ids)  # the first lookup builds the index: each read once
    reads.clear()
    assert outdirs.by_out_dir(out(tmp_path, "fresh2")) is None
    assert reads == []
    assert outdirs.by_out_dir(str(tmp_path / "o7")).id == ids[7]
    assert reads == [ids[7]]
    reads.clear()
    written_by_hand(store, "6666aaaa", out(tmp_path, "late"))
    assert outdirs.by_out_dir(out(tmp_path, "fresh3")) is None
    assert reads == ["6666aaaa"]


def test_a_removed_run_is_not_found_and_leaves_the_index(tmp_path, store):
    gone = record.new(out(tmp_path, "a"))
    kept = record.new(out(tmp_path, "b"))
    assert outdirs.by_out_dir(str(tmp_path / "a")).id == gone.id
    record.remove(gone.id)
    assert outdirs.by_out_dir(str(tmp_path / "a")) is None
    record.new(out(tmp_path, "c"))  # the next lookup writes the index again
    outdirs.by_out_dir(str(tmp_path / "c"))
    assert gone.id not in index_of(store)
    assert kept.id in index_of(store)
