"""Random documents and random bytes: validate answers, it never crashes."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from delegate_skills import registry
from delegate_skills.skillscripts import config as config_script

DIALS = [*registry.ALL_DIALS, "implementer", "colour"]
VALUES = st.one_of(
    st.sampled_from([*registry.KEYS, "read-only", "plan", "30m", "high", "a/b", "", " "]),
    st.text(max_size=12),
    st.booleans(),
    st.none(),
    st.integers(),
    st.floats(allow_nan=False),
)
LANES = st.dictionaries(st.sampled_from(DIALS), VALUES, max_size=5)
DOCUMENTS = st.one_of(
    st.fixed_dictionaries(
        {
            "version": st.sampled_from(["delegate-fleet.v1", "delegate-fleet.v2", None]),
            "lanes": st.dictionaries(st.text(max_size=8), LANES | VALUES, max_size=4),
        }
    ),
    st.recursive(
        VALUES,
        lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=4), c, max_size=3),
    ),
)


def check_outcome(path, capsys) -> None:
    code = config_script.main(["validate", str(path)])
    out, err = capsys.readouterr()
    assert code in (0, 2)
    if code == 0:
        assert json.loads(out)["ok"] is True
        assert err == ""
    else:
        assert out == ""
        assert err.startswith("config.py: ")
        assert err.endswith("\n") and err.count("\n") == 1


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(DOCUMENTS)
def test_random_documents(tmp_path, capsys, document):
    path = tmp_path / "doc.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    check_outcome(path, capsys)


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=200))
def test_random_bytes(tmp_path, capsys, raw):
    path = tmp_path / "doc.json"
    path.write_bytes(raw)
    check_outcome(path, capsys)


def test_deep_nesting_is_an_error_not_a_crash(tmp_path, capsys):
    path = tmp_path / "deep.json"
    path.write_text("[" * 100000 + "]" * 100000)
    check_outcome(path, capsys)


POOLS = {
    "model": ["opus", "gpt-5", "a/b", "opencode/grok", "x y", "[1m]"],
    "provider": ["openai", "google", "a b"],
    "effort": ["low", "high", "max", "off", "ultracode", "very fast", "Fast-1"],
    "variant": ["high", "x&y"],
    "timeout": ["30m", "1h30m", "596h31m24s", "0s"],
    "sandbox": ["read-only", "workspace-write", "workspace", "off", "danger-full-access"],
    "permissionMode": ["plan", "yolo", "auto", "build"],
    "readOnly": [True, False],
    "force": [True, False],
}


@st.composite
def plausible_lanes(draw):
    impl = draw(st.sampled_from(registry.IMPLEMENTERS))
    dials = draw(st.lists(st.sampled_from(impl.supports), unique=True))
    lane = {"implementer": impl.key}
    for dial in dials:
        lane[dial] = draw(st.sampled_from(POOLS[dial]))
    return lane


@settings(max_examples=500)
@given(st.dictionaries(st.sampled_from(["a", "b", "c"]), plausible_lanes(), max_size=3))
def test_schema_never_rejects_what_the_rules_accept(lanes):
    from delegate_skills import validation
    from delegate_skills.schema import fleet_validator

    document = {"version": "delegate-fleet.v1", "lanes": lanes}
    if validation.check_document(document, "F") is None:
        assert list(fleet_validator().iter_errors(document)) == []
