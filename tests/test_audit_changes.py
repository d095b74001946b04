"""The change record's second snapshot never trusts the repository's index (changes.py).

The implementer can rewrite `.git/index`. If the snapshot after the run
started again from it, an entry forged to carry the edited file's stat data
with the old blob would make git skip the file, and the edit would vanish
from the record (and from a read-only verdict: `ls-files --stage` shows no
stat data). The record must go on from the index its first snapshot left.
"""

from __future__ import annotations

import hashlib
import os
import struct
import time
from pathlib import Path

from conftest import commit_all, git, make_repo

from delegate_skills.gitmeta import repo_paths
from delegate_skills.snapshots.changes import ChangeRecord

_ENTRY = struct.Struct(">10I20sH")


def forge_stat(index: Path, name: bytes, info: os.stat_result) -> None:
    """Rewrite the stat data of entry `name` in a version 2 index to `info`'s; keep its blob."""
    data = bytearray(index.read_bytes())
    signature, version, count = struct.unpack(">4sII", data[:12])
    assert (signature, version) == (b"DIRC", 2)
    offset = 12
    for _ in range(count):
        fields = _ENTRY.unpack_from(data, offset)
        length = fields[11] & 0xFFF
        entry_name = bytes(data[offset + 62 : offset + 62 + length])
        if entry_name == name:
            stat = (
                int(info.st_ctime), info.st_ctime_ns % 10**9,
                int(info.st_mtime), info.st_mtime_ns % 10**9,
                info.st_dev & 0xFFFFFFFF, info.st_ino & 0xFFFFFFFF, fields[6],
                info.st_uid, info.st_gid, info.st_size,
            )  # fmt: skip
            _ENTRY.pack_into(data, offset, *stat, fields[10], fields[11])
            break
        offset += (62 + length + 8) & ~7
    else:
        raise AssertionError(f"{name!r} is not in {index}")
    body = bytes(data[:-20])
    index.write_bytes(body + hashlib.sha1(body).digest())


def test_an_index_forged_during_the_run_hides_no_edit(tmp_path):
    repo = make_repo(tmp_path / "repo")
    path = repo / "app.py"
    path.write_text("return 41\n")
    commit_all(repo, "start")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    record = ChangeRecord(repo_paths(str(repo)), str(scratch))
    record.begin()
    # The run: an edit, its mtime set well before the index (never racily clean),
    # and the index entry forged to match the edited file while naming the old blob.
    path.write_text("return 42 and more\n")
    old = time.time_ns() - 100 * 10**9
    os.utime(path, ns=(old, old))
    forge_stat(repo / ".git" / "index", b"app.py", os.stat(path))
    assert git(repo, "status", "--porcelain") == ""  # git itself is fooled
    record.end()
    assert record.same() is False
    field, problem = record.field(None)
    assert problem is None
    assert [(f["path"], f["status"]) for f in field["files"]] == [("app.py", "modified")]
