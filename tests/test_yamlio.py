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


def _block(items: list[Any], indent: int) -> str:
    from ccm.yamlio import _emit

    part: list[str] = []
    _emit(items, indent, part)
    return "".join(part)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    chunks=st.lists(st.lists(documents, max_size=5), min_size=1, max_size=6),
    data=st.data(),
)
def test_an_extended_frozen_list_writes_what_the_plain_list_writes(
    chunks: list[list[Any]], data: st.DataObject
) -> None:
    """Each extension reuses the YAML of the shorter list, whichever of them was written
    before, at whichever indent (or none): the text is always that of the plain list."""
    from ccm.yamlio import FrozenList

    indents = st.sampled_from([0, 2, 4])
    frozen = FrozenList(chunks[0])
    plain = list(chunks[0])
    for chunk in chunks[1:]:
        if plain and data.draw(st.booleans()):
            indent = data.draw(indents)
            assert frozen.yaml(indent) == _block(plain, indent)
        frozen = frozen.extended(chunk)
        plain = plain + chunk
        assert frozen == plain
    if plain:
        indent = data.draw(indents)
        assert frozen.yaml(indent) == _block(plain, indent)
    doc = {"k": frozen, "l": [frozen], "m": {"n": frozen}}
    assert dumps(doc) == dumps({"k": plain, "l": [plain], "m": {"n": plain}})
    # a large mapping in a list (remembered by its JSON, unless it holds a FrozenList)
    wide = {f"k{n}": n for n in range(6)}
    assert dumps([{**wide, "refs": frozen}]) == dumps([{**wide, "refs": plain}])


def test_frozen_lists_refuse_changes_and_copy_as_lists() -> None:
    import copy
    import pickle

    import pytest

    from ccm.yamlio import FrozenList

    items = FrozenList(["a", "b"])
    for change in (
        lambda: items.append("c"),
        lambda: items.extend(["c"]),
        lambda: items.__setitem__(0, "x"),
        lambda: items.__delitem__(0),
        lambda: items.__iadd__(["c"]),
        items.clear,
        items.pop,
        items.sort,
        items.reverse,
    ):
        with pytest.raises(TypeError):
            change()
    assert items == ["a", "b"] and items.extended(["c"]) == ["a", "b", "c"] and items == ["a", "b"]
    assert type(pickle.loads(pickle.dumps(items))) is list
    assert type(copy.deepcopy(items)) is list and copy.deepcopy(items) == items
    assert dumps({"k": FrozenList([1, 2]).extended([3])}) == "k: [1, 2, 3]\n"


entries = st.lists(
    st.dictionaries(st.sampled_from(["id", "topic", "n", "yes"]), scalars, max_size=3),
    max_size=12,
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(st.tuples(entries, st.integers(0, 3), scalars), min_size=1, max_size=6))
def test_runs_encode_what_dumps_writes(steps: list[tuple[list[Any], int, Any]]) -> None:
    """`dumps_bytes` with remembered runs, called again and again as a long-lived writer
    does: entries kept, replaced, added and dropped, some frozen and some not."""
    from ccm.yamlio import Frozen, Runs, dumps_bytes

    runs = {"segments": Runs(size=3)}
    segments: list[Any] = []
    for new, keep, other in steps:
        fresh = [Frozen(e) if n % 2 else dict(e) for n, e in enumerate(new)]
        segments = segments[:keep] + fresh + segments[keep + 1 :]
        doc = {"session": "s", "segments": segments, "notes": other}
        assert dumps_bytes(doc, runs) == dumps(doc).encode()
    assert dumps_bytes({}, runs) == dumps({}).encode()
