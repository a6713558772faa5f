"""ccm's YAML emitter reads back as exactly the data it was given."""

from __future__ import annotations

from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ccm.yamlio import dumps, dumps_pyyaml, loads

scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(10**12), 10**12)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
    | st.sampled_from(
        [
            "yes",
            "no",
            "null",
            "~",
            "- x",
            "a: b",
            "#c",
            "12",
            "1.5",
            "seg_1",
            "",
            " ",
            "@x",
            "*a",
            "!t",
            "[x]",
            "{y}",
        ]
    )
)
documents = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.text(min_size=1, max_size=12) | st.sampled_from(["id", "n", "yes", "raw_lines"]),
            inner,
            max_size=4,
        )
    ),
    max_leaves=30,
)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents)
def test_round_trip(data: Any) -> None:
    assert yaml.safe_load(dumps(data)) == data
    assert loads(dumps(data)) == data


def test_same_data_as_pyyaml_on_a_manifest_shape() -> None:
    manifest = {
        "session": "ledger-sync",
        "segments": [
            {
                "id": "seg_1",
                "raw_lines": [1, 8],
                "topic": ["cents", "integer"],
                "summary": "Decision: we use SQLite.",
                "conclusion": {
                    "text": "x",
                    "turn": 7,
                    "kind": "decision",
                    "confidence": 0.85,
                    "superseded_by": None,
                },
                "critical": [],
                "pinned": False,
            },
        ],
        "notes": [],
    }
    assert yaml.safe_load(dumps(manifest)) == yaml.safe_load(dumps_pyyaml(manifest)) == manifest
    assert "raw_lines: [1, 8]" in dumps(manifest)


def test_frozen_mappings_render_like_dicts_and_refuse_changes() -> None:
    import copy
    import pickle

    import pytest

    from ccm.yamlio import Frozen

    entry = {"id": "seg_1", "raw_lines": [1, 4], "topic": ["cents"], "conclusion": None}
    frozen = Frozen(entry)
    doc = {"segments": [frozen, Frozen(entry)], "plain": [dict(entry)]}
    assert dumps(doc) == dumps({"segments": [entry, entry], "plain": [entry]})
    assert dumps(doc) == dumps(doc)  # the second time from the remembered text
    plain = {"segments": [dict(entry), dict(entry)], "plain": [dict(entry)]}
    assert yaml.safe_load(dumps_pyyaml(doc)) == yaml.safe_load(dumps(doc)) == plain
    for change in (
        lambda: frozen.__setitem__("id", "x"),
        lambda: frozen.update(id="x"),
        lambda: frozen.pop("id"),
        lambda: frozen.setdefault("new", 1),
        lambda: frozen.__delitem__("id"),
        frozen.clear,
    ):
        with pytest.raises(TypeError):
            change()
    assert frozen == entry
    assert type(pickle.loads(pickle.dumps(frozen))) is dict
    assert type(copy.deepcopy(frozen)) is dict and copy.deepcopy(frozen) == entry
