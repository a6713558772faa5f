"""Token counting: the real BPE offline, and a documented estimate as fallback."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ccm import tokens


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0),
        ("hello world", 2),
        ("Always keep amounts as integer cents, never floats.", 10),
        ("tiktoken is great!", 6),
    ],
)
def test_bpe_counts_match_cl100k_base(text: str, expected: int) -> None:
    assert tokens.method_in_use() == "bpe"
    assert tokens.count_tokens(text) == expected


def test_special_token_text_is_counted_as_text() -> None:
    assert tokens.count_tokens("<|endoftext|>") > 1


def test_a_tampered_vocabulary_falls_back_to_the_estimate(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without rs-bpe, tiktoken's file is checked: altered, the estimate counts."""
    monkeypatch.setattr(tokens, "CL100K_SHA256", "0" * 64)
    monkeypatch.setattr(tokens, "_fast_counter", lambda: None)
    monkeypatch.setattr(tokens, "_fast_installed", lambda: False)
    monkeypatch.setattr(tokens, "_count", None)
    monkeypatch.setattr(tokens, "_bpe_failed", False)
    text = "The quick brown fox jumps over the lazy dog."
    assert tokens.count_tokens(text) == tokens.estimate_tokens(text)
    assert tokens.method_in_use() == "estimate"


def test_without_rs_bpe_tiktoken_counts_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tokens, "_fast_counter", lambda: None)
    monkeypatch.setattr(tokens, "_count", None)
    monkeypatch.setattr(tokens, "_bpe_failed", False)
    assert tokens.method_in_use() == "bpe"
    assert tokens.count_tokens("Always keep amounts as integer cents, never floats.") == 10


def test_a_fast_counter_that_miscounts_a_probe_is_refused(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    pytest.importorskip("rs_bpe")
    assert tokens._fast_counter() is not None
    wrong = dict(tokens.PROBES)
    wrong["hello world"] = 3  # cl100k_base says 2
    monkeypatch.setattr(tokens, "PROBES", wrong)
    assert tokens._fast_counter() is None
    assert "otherwise than cl100k_base" in caplog.text
    monkeypatch.setattr(tokens, "_count", None)
    monkeypatch.setattr(tokens, "_bpe_failed", False)
    assert tokens.count_tokens("hello world") == 2  # tiktoken's
    assert tokens.method_in_use() == "bpe"


def test_the_probes_are_cl100k_base_counts() -> None:
    tiktoken_count = tokens._tiktoken_counter()
    assert {text: tiktoken_count(text) for text in tokens.PROBES} == tokens.PROBES


@settings(max_examples=500)
@given(st.text())
def test_rs_bpe_counts_as_tiktoken_does(text: str) -> None:
    """Any text, lone surrogates (valid in JSON) included."""
    pytest.importorskip("rs_bpe")
    fast = tokens._fast_counter()
    assert fast is not None
    assert fast(text) == tokens._tiktoken_counter()(text)


def test_rs_bpe_counts_real_sessions_as_tiktoken_does(fixtures: Path) -> None:
    """Every line of every Claude Code and ChatGPT fixture, as JSON text and each string
    in it: prose, code, tool output, escaped JSON."""
    pytest.importorskip("rs_bpe")
    import json

    fast, slow = tokens._fast_counter(), tokens._tiktoken_counter()
    assert fast is not None
    texts: list[str] = []

    def strings(value: object) -> None:
        if isinstance(value, str):
            texts.append(value)
        elif isinstance(value, dict):
            for item in value.values():
                strings(item)
        elif isinstance(value, list):
            for item in value:
                strings(item)

    for path in sorted(fixtures.rglob("*.jsonl")) + sorted(fixtures.rglob("*.json")):
        for line in path.read_text(encoding="utf-8").splitlines():
            texts.append(line)
            try:
                strings(json.loads(line))
            except json.JSONDecodeError:
                continue
    assert len(texts) > 5000
    assert [fast(text) for text in texts] == [slow(text) for text in texts]


def test_estimate_method_from_config() -> None:
    tokens.set_method("estimate")
    assert tokens.count_tokens("one two three") == tokens.estimate_tokens("one two three") == 3
    with pytest.raises(ValueError, match="bpe or estimate"):
        tokens.set_method("words")


@pytest.mark.parametrize(
    "text",
    [
        "We decided to use SQLite with WAL mode because there is a single writer. " * 20,
        'def parse(row: dict[str, str]) -> int:\n    return int(row["amount"]) * 100\n' * 20,
        '{"type":"assistant","message":{"id":"msg_01","content":[{"type":"text"}]}}\n' * 20,
    ],
)
def test_estimate_stays_close_and_errs_high_on_prose_code_and_json(text: str) -> None:
    real = tokens.count_tokens(text)
    assert real * 0.95 <= tokens.estimate_tokens(text) <= real * 1.35


@given(st.text())
def test_counts_are_never_negative_and_empty_is_zero(text: str) -> None:
    assert tokens.estimate_tokens(text) >= 0
    assert (tokens.count_tokens(text) == 0) == (text == "")


@given(
    st.lists(st.sampled_from([*"abcXYZ019 .,;-_\n\u00e9\u4e2d", "supercalifragilistic"])).map(
        "".join
    )
)
def test_estimate_matches_its_definition(text: str) -> None:
    """One token per letter run (plus one per 9 letters), digit group, punctuation run
    and non-ASCII character: the fast form counts exactly what the definition says."""
    expected = 0
    for match in tokens._PIECE.finditer(text):
        piece = match.group()
        expected += 1 + len(piece) // 9 if piece[0].isascii() and piece[0].isalpha() else 1
    assert tokens.estimate_tokens(text) == expected


def test_cached_count_follows_the_method() -> None:
    text = "\u00dcn\u00efc\u00f6d\u00e9 na\u00efvet\u00e9: supercalifragilisticexpialidocious 1234567!!!"
    assert tokens.count_tokens(text) != tokens.estimate_tokens(text)  # the methods differ here
    try:
        tokens.set_method("bpe")
        assert tokens.count_cached(text) == tokens.count_tokens(text)
        tokens.set_method("estimate")
        assert tokens.count_cached(text) == tokens.estimate_tokens(text)
        long = "word " * 5000  # beyond the cache's size limit: counted each time
        assert tokens.count_cached(long) == tokens.estimate_tokens(long)
    finally:
        tokens.set_method("bpe")


LINE = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\n"), max_size=60
)


@settings(max_examples=300)
@given(lines=st.lists(LINE, min_size=1, max_size=8), method=st.sampled_from(["bpe", "estimate"]))
def test_lines_joined_by_line_breaks_never_count_more_than_their_parts(
    lines: list[str], method: str
) -> None:
    """What context assembly relies on to never count the whole context again."""
    tokens.set_method(method)
    try:
        parts = sum(tokens.count_tokens(line) + 1 for line in lines)
        assert tokens.count_tokens("\n".join(lines)) <= parts
    finally:
        tokens.set_method("bpe")


# what a turn's text may hold: letters of several scripts, digits, marks, punctuation,
# emoji, spaces and line breaks (the pieces a text is split into before counting)
TURN_TEXT = st.lists(
    st.one_of(
        st.sampled_from(list("aZé9 .,!?'\"()*-_:;#`\n\t\u0301\u00b2\u0663")),
        st.sampled_from(["'s", "'ll", "don't", "...", "**", "```", "  \n", "\r\n", "👍", "日本"]),
        st.characters(blacklist_categories=("Cs",)),
    ),
    max_size=30,
).map("".join)
LABEL = st.sampled_from(
    ["user", "assistant", "Bash result", "Dr. Müller", "mcp__fs__read result", "A"]
)


@settings(max_examples=400)
@given(label=LABEL, text=TURN_TEXT, method=st.sampled_from(["bpe", "estimate"]))
def test_a_rendered_turn_counts_from_its_text(label: str, text: str, method: str) -> None:
    """`labelled`: a turn shown as "speaker: text" is counted from the count of its text
    (the fold's), exactly, whatever the text opens with."""
    tokens.set_method(method)
    try:
        shown = tokens.labelled(label, text, tokens.count_tokens(text))
        assert shown == tokens.count_tokens(f"{label}: {text}")
    finally:
        tokens.set_method("bpe")


@settings(max_examples=400)
@given(
    turns=st.lists(st.tuples(LABEL, TURN_TEXT), min_size=1, max_size=5),
    method=st.sampled_from(["bpe", "estimate"]),
)
def test_an_exchange_counts_from_its_turns(turns: list[tuple[str, str]], method: str) -> None:
    """An exchange's lines, joined by line breaks, count what each turn's line counts and
    each break what `line_break` says: the index counts no text the fold counted."""
    tokens.set_method(method)
    try:
        lines = [tokens.labelled(label, text, tokens.count_tokens(text)) for label, text in turns]
        breaks = [tokens.line_break(f"{label}: {text}") for label, text in turns[:-1]]
        whole = "\n".join(f"{label}: {text}" for label, text in turns)
        assert sum(n for n in lines if n is not None) + sum(breaks) == tokens.count_tokens(whole)
    finally:
        tokens.set_method("bpe")


def test_a_label_that_opens_with_whitespace_is_counted_anew() -> None:
    assert tokens.labelled(" user", "hello", 1) is None
    assert tokens.labelled("user", "hello", 1) == tokens.count_tokens("user: hello")


def test_noted_counts_are_kept_per_method() -> None:
    text = "a text counted where it was read"
    tokens.note(text, 7)
    assert tokens.noted(text) == 7
    assert tokens.noted(text + ".") is None
    tokens.set_method("estimate")
    try:
        assert tokens.noted(text) is None  # noted under the BPE
        tokens.note(text, 9)
        assert tokens.noted(text) == 9
    finally:
        tokens.set_method("bpe")
    assert tokens.noted(text) is None


def test_an_index_after_the_fold_stores_the_counts_it_would_count(tmp_path: Path) -> None:
    """The index built where the fold just ran (`ccm ingest`, the daemon) tells its
    exchanges' counts from the fold's; they are the counts an index built alone makes."""
    import sqlite3

    from ccm import derive
    from ccm.index import Index
    from ccm.ingest.pipeline import ingest
    from ccm.store import Store

    fixtures = Path(__file__).parent / "fixtures" / "scenarios_heldout"
    store = Store(tmp_path / "root")
    told: list[str] = []
    real = tokens.labelled

    def counted(label: str, text: str, count: int) -> int | None:
        told.append(text)
        return real(label, text, count)

    for name in ("h01", "h02"):  # an agent session with tools, an assistant chat
        ingest(store, [str(fixtures / f"{name}.jsonl")], "jsonl", name)
    rows = "SELECT session, kind, key, tokens, shown FROM units WHERE kind IN ('pair', 'turn')"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tokens, "labelled", counted)
        index = Index(store)
        for name in ("h01", "h02"):
            index.update(name, derive.update(store, name, rebuild=True).tiers.manifest)
        index.close()
    after_fold = sqlite3.connect(store.cache / "index.sqlite").execute(rows).fetchall()
    assert len(told) > 100  # the counts were told, not counted
    tokens._noted.clear()
    for path in store.cache.glob("index.sqlite*"):
        path.unlink()
    index = Index(store)
    for name in ("h01", "h02"):
        index.update(name, None)
    index.close()
    alone = sqlite3.connect(store.cache / "index.sqlite").execute(rows).fetchall()
    assert sorted(after_fold) == sorted(alone)


def test_noted_counts_are_bounded_oldest_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tokens, "NOTED_MAX", 16)
    tokens._noted.clear()
    for number in range(40):
        tokens.note(f"text {number}", number)
    assert len(tokens._noted) <= 16
    assert tokens.noted("text 39") == 39
    assert tokens.noted("text 0") is None  # the oldest went first
