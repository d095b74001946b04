"""What `pip install .` ships: every package of the core is named in pyproject.toml."""

from __future__ import annotations

import re

from conftest import ROOT


def listed_packages() -> list[str]:
    text = (ROOT / "pyproject.toml").read_text()
    block = re.search(r"^packages = \[(.*?)^\]", text, re.S | re.M)
    assert block is not None
    return re.findall(r'"([^"]+)"', block.group(1))


def test_every_package_of_the_core_is_installed_by_a_normal_install():
    source = ROOT / "src" / "delegate_skills"
    found = {"delegate_skills"} | {
        "delegate_skills." + ".".join(init.parent.relative_to(source).parts)
        for init in source.glob("*/**/__init__.py")
    }
    found |= {"delegate_skills.relays", "delegate_skills.bundle"}
    assert sorted(found) == sorted(listed_packages())
    assert "delegate_skills.remote" in listed_packages()
