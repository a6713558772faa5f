"""The semantic extra: the NumPy MiniLM against a PyTorch reference, hybrid recall."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from ccm import semantic
from ccm.errors import CCMError
from ccm.index import Index
from ccm.ingest.pipeline import ingest
from ccm.store import Store

FIXTURES = Path(__file__).parent / "fixtures" / "semantic"
needs_model = pytest.mark.skipif(semantic.available() is not None, reason=str(semantic.available()))


@needs_model
def test_numpy_forward_pass_matches_the_pytorch_reference() -> None:
    import numpy as np

    reference = json.loads((FIXTURES / "reference.json").read_text())
    expected = np.array(reference["vectors"], dtype=np.float32)
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    got = semantic.encoder().encode(reference["texts"])
    assert got.shape == (len(reference["texts"]), semantic.DIMENSIONS)
    assert np.abs(got - expected).max() < 1e-4
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    # batching and order do not change a vector
    alone = semantic.encoder().encode([reference["texts"][3]])[0]
    assert np.abs(alone - got[3]).max() < 1e-5
    assert semantic.encoder().encode([]).shape == (0, semantic.DIMENSIONS)


def _chat(tmp_path: Path, semantic_on: bool) -> Store:
    root = tmp_path / "root"
    root.mkdir()
    (root / "config.yaml").write_text(f"recall: {{semantic: {str(semantic_on).lower()}}}\n")
    lines = [
        ("user", "My dog Rex goes crazy for tennis balls at the park."),
        ("assistant", "Sounds like Rex has plenty of energy."),
        ("user", "The quarterly tax filing is due at the end of the month."),
        ("assistant", "Set a reminder a week before the deadline."),
        ("user", "I repainted the kitchen a pale green colour last weekend."),
        ("assistant", "Green kitchens feel calm."),
    ]
    source = tmp_path / "chat.jsonl"
    source.write_text(
        "".join(
            json.dumps({"role": role, "content": text, "ts": 1_767_000_000 + 60 * n}) + "\n"
            for n, (role, text) in enumerate(lines)
        )
    )
    store = Store(root)
    ingest(store, [str(source)], derive=True)
    return store


@needs_model
def test_hybrid_recall_finds_a_paraphrase_that_shares_no_word(tmp_path: Path) -> None:
    store = _chat(tmp_path, semantic_on=True)
    query = "Which pet enjoys playing fetch outdoors?"
    with Index(store) as index:
        assert index.semantic
        count = index.db.execute("SELECT count(*) FROM vectors").fetchone()[0]
        assert count == 6  # every turn embedded at ingest
        hits = [h for h in index.recall(query, "chat") if h.kind == "pair"]
        assert hits and "Rex" in hits[0].text
    with Index(store, semantic=False) as lexical:
        assert not [h for h in lexical.recall(query, "chat") if h.kind == "pair"]


@needs_model
def test_vectors_follow_their_units(tmp_path: Path) -> None:
    store = _chat(tmp_path, semantic_on=True)
    with Index(store) as index:
        index.drop("chat")
        assert index.db.execute("SELECT count(*) FROM vectors").fetchone()[0] == 0
        index.update("chat")
        assert index.db.execute("SELECT count(*) FROM vectors").fetchone()[0] == 6
        assert index.embed("chat") == 0  # nothing left to do


def test_without_the_extra_the_error_says_how_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "tokenizers", None)  # an import of it now fails
    semantic.encoder.cache_clear()
    try:
        why = semantic.available()
        assert why is not None and "pip install 'ccm[semantic]'" in why
        root = tmp_path / "root"
        root.mkdir()
        (root / "config.yaml").write_text("recall: {semantic: true}\n")
        source = tmp_path / "chat.jsonl"
        source.write_text(json.dumps({"role": "user", "content": "hello", "ts": 1}) + "\n")
        with pytest.raises(CCMError, match=r"ccm\[semantic\]"):
            ingest(Store(root), [str(source)], derive=True)
        # the words were kept all the same: the index is derived, the log is not
        assert Store(root).read_turns("chat")[0]
    finally:
        semantic.encoder.cache_clear()


def test_semantic_recall_is_off_by_default(tmp_path: Path) -> None:
    store = _chat(tmp_path, semantic_on=False)
    with Index(store) as index:
        assert not index.semantic
        assert index.db.execute("SELECT count(*) FROM vectors").fetchone()[0] == 0
