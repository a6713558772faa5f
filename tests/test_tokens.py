"""Token counting: the real BPE offline, and a documented estimate as fallback."""

from __future__ import annotations

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
    monkeypatch.setattr(tokens, "CL100K_SHA256", "0" * 64)
    monkeypatch.setattr(tokens, "_encode", None)
    monkeypatch.setattr(tokens, "_bpe_failed", False)
    text = "The quick brown fox jumps over the lazy dog."
    assert tokens.count_tokens(text) == tokens.estimate_tokens(text)
    assert tokens.method_in_use() == "estimate"


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
