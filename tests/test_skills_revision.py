"""The revision of a skill folder: its exact definition, and what does and does not move it."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from delegate_skills.installer import bundle

FILES = {
    "SKILL.md": b"---\nname: demo\n---\nUse it.\n",
    "references/a.md": b"alpha\n",
    "references/b.md": b"beta\n",
    "scripts/run.py": b"print('hi')\n",
}


def make_tree(root: Path, order: list[str], *, file_mode: int = 0o644) -> Path:
    for name in order:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(FILES[name])
        os.chmod(path, 0o755 if name.startswith("scripts/") else file_mode)
    return root


def test_the_definition_by_hand(tmp_path):
    tree = make_tree(tmp_path / "demo", list(FILES))
    os.symlink("references/a.md", tree / "alias.md")
    entries = [
        ("SKILL.md", b"100644", FILES["SKILL.md"]),
        ("alias.md", b"120000", b"references/a.md"),
        ("references/a.md", b"100644", FILES["references/a.md"]),
        ("references/b.md", b"100644", FILES["references/b.md"]),
        ("scripts/run.py", b"100755", FILES["scripts/run.py"]),
    ]
    digest = hashlib.sha256()
    for path, mode, content in sorted(entries, key=lambda e: e[0].encode()):
        digest.update(path.encode() + b"\0" + mode + b"\0" + str(len(content)).encode() + b"\0")
        digest.update(content + b"\0")
    assert bundle.revision(tree) == "sha256:" + digest.hexdigest()


def test_stable_across_creation_order_umask_and_machines(tmp_path):
    first = make_tree(tmp_path / "one", list(FILES))
    old = os.umask(0o077)
    try:
        second = make_tree(tmp_path / "two", list(reversed(FILES)), file_mode=0o600)
    finally:
        os.umask(old)
    os.chmod(second / "scripts" / "run.py", 0o700)
    os.utime(second / "SKILL.md", (0, 0))
    assert bundle.revision(first) == bundle.revision(second)


@pytest.mark.parametrize(
    "change",
    ["byte", "file name", "executable bit", "new file", "symlink target", "moved"],
)
def test_changes_when_content_names_or_executable_bits_change(tmp_path, change):
    tree = make_tree(tmp_path / "demo", list(FILES))
    os.symlink("SKILL.md", tree / "link.md")
    before = bundle.revision(tree)
    if change == "byte":
        (tree / "references" / "a.md").write_bytes(b"alphA\n")
    elif change == "file name":
        (tree / "references" / "b.md").rename(tree / "references" / "c.md")
    elif change == "executable bit":
        os.chmod(tree / "references" / "a.md", 0o744)
    elif change == "new file":
        (tree / "references" / "empty.md").write_bytes(b"")
    elif change == "symlink target":
        os.unlink(tree / "link.md")
        os.symlink("references/a.md", tree / "link.md")
    else:
        (tree / "references" / "a.md").rename(tree / "a.md")
    assert bundle.revision(tree) != before


def test_caches_and_empty_directories_do_not_count(tmp_path):
    tree = make_tree(tmp_path / "demo", list(FILES))
    before = bundle.revision(tree)
    (tree / "scripts" / "__pycache__").mkdir()
    (tree / "scripts" / "__pycache__" / "run.cpython-311.pyc").write_bytes(b"\x00junk")
    (tree / "stray.pyc").write_bytes(b"junk")
    (tree / "empty-dir").mkdir()
    assert bundle.revision(tree) == before


def test_a_copy_has_the_revision_of_its_source(tmp_path):
    source = bundle.bundle_dir() / "codex-delegate"
    copy = tmp_path / "copy"
    bundle.copy_skill(str(source), str(copy))
    assert bundle.revision(copy) == bundle.revision(source)
    assert bundle.revision(source).startswith("sha256:")
    assert len(bundle.revision(source)) == len("sha256:") + 64


def test_the_bundle_is_found_and_lists_every_skill():
    names = bundle.skill_names()
    assert "delegate-setup" in names
    assert "codex-delegate" in names
    assert names == sorted(names)
    assert all((bundle.bundle_dir() / n / "SKILL.md").is_file() for n in names)
