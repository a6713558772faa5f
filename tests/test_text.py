"""The engine's text primitives: fast forms checked against plain reference forms."""

from __future__ import annotations

import math
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from ccm.engine import text
from ccm.engine.critical import detect as critical_detect

# the straightforward definition `paths` is an optimised form of: every maximal run of
# characters that are neither white space nor a break character and hold a dot or a slash,
# once each glob's part after a "*/" is taken out
_TOKEN = re.compile(r"[^\s\"'`(),;{}\[\]<>=|*]*[/.][^\s\"'`(),;{}\[\]<>=|*]*")
_GLOB = re.compile(r"\*/[^\s\"'`(),;{}\[\]<>=|]*")


def reference_paths(source: str) -> list[str]:
    seen: dict[str, None] = {}
    for match in _TOKEN.finditer(_GLOB.sub("*", source)):
        token = match.group().rstrip(".:!?")
        if "/" in token:
            if "://" in token or not text._FILE_END.search(token):
                continue
        elif "." not in token or not text._FILE_NAME.fullmatch(token):
            continue
        seen.setdefault(token, None)
    return list(seen)


PIECES = st.sampled_from(
    [
        *"ab/.-_ :!?\"'()=*\n\t\u00a0\u00e91",
        *["src/", ".py", "x.json", "http://", "/usr/lib/a.so", "README.md", "a-.py", "docs/"],
        *["**/", "*.ts"],
    ]
)


@settings(max_examples=3000)
@given(st.lists(PIECES, max_size=40).map("".join))
def test_paths_match_the_reference_definition(source: str) -> None:
    assert text.paths(source) == reference_paths(source)


# the definition `sentences` is an optimised form of: cut at a run of line breaks, and at
# the white space after a sentence's mark unless the mark is an abbreviation's full stop
_SENTENCE_END = re.compile(
    r"(?<=[.!?])" + "".join(rf"(?<!\b{re.escape(a)}\.)" for a in text._ABBREVIATIONS) + r"\s+|\n+"
)
SENTENCE_PIECES = st.sampled_from(
    [
        *"ab .!?\n\t\r\u00a0\u2028\u0085xZ'_\u00e9",
        *["Dr", "Mr", "e.g", "i.e", "vs", "Mrs", "St", "approx", "incl", "cf", "E.g", "Ms"],
        *["Dr.", "...", "?!", ". ", ".\n", "\n\n", "word", "Mr. ", "e.g. ", "x? ", "!\n"],
    ]
)


@settings(max_examples=3000)
@given(st.lists(SENTENCE_PIECES, max_size=30).map("".join))
def test_sentences_match_the_reference_definition(source: str) -> None:
    expected = [s.strip() for s in _SENTENCE_END.split(source) if s and s.strip()]
    assert text.sentences(source) == expected


def test_sentences_examples() -> None:
    assert text.sentences("Ask Dr. Halvorsen. e.g. a retry!  Then stop?\nNext line") == [
        "Ask Dr. Halvorsen.",
        "e.g. a retry!",
        "Then stop?",
        "Next line",
    ]
    assert text.sentences("MDr. no. vs. that") == ["MDr.", "no.", "vs. that"]


def test_paths_examples() -> None:
    found = text.paths(
        "Edit src/ccm/store.py and (tests/test_store.py), see https://x.org/a.py, "
        "the folder docs/ and README.md; also /etc/app.conf."
    )
    assert found == ["src/ccm/store.py", "tests/test_store.py", "README.md", "/etc/app.conf"]
    assert text.paths("no files here, version 1.2 only") == []
    # a glob names no one file: not "/package.json" of "**/package.json"
    glob = 'Glob {"path":"/srv/web","pattern":"**/package.json"} then **README.md**'
    assert text.paths(glob) == ["README.md"]


WEIGHTS = st.dictionaries(
    st.sampled_from([f"t{i}" for i in range(12)]),
    st.one_of(st.just(0.0), st.floats(min_value=1e-3, max_value=100.0)),  # term weights
    max_size=12,
)


@given(WEIGHTS, WEIGHTS)
def test_cosine_is_symmetric_bounded_and_matches_the_definition(a, b) -> None:
    value = text.cosine(a, b)
    assert value == text.cosine(b, a)
    assert 0.0 <= value <= 1.0 + 1e-12
    dot = sum(w * b.get(t, 0.0) for t, w in a.items())
    norm = math.sqrt(sum(w * w for w in a.values())) * math.sqrt(sum(w * w for w in b.values()))
    expected = dot / norm if dot and norm else 0.0
    assert math.isclose(value, expected, rel_tol=1e-9, abs_tol=1e-12)


@given(
    st.dictionaries(st.text("abcdef", min_size=1, max_size=3), st.integers(0, 5), max_size=60),
    st.integers(1, 12),
)
def test_top_terms_partial_sort_keeps_the_full_order(counts, limit) -> None:
    full = [t for t, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))][:limit]
    assert text.top_terms(counts, limit) == full


def test_critical_screen_keeps_every_kind() -> None:
    """The literal screen in front of the critical patterns lets each kind through."""
    cases = {
        "Please don't push to main.": "instruction",
        "Don't ever log the API key.": "instruction",
        "We'd rather keep amounts in cents.": "preference",
        "The report has to be in EUR.": "requirement",
        "Hard limit: two deploys a day.": "constraint",
        "Always run the linter first.": "instruction",
    }
    for sentence, kind in cases.items():
        assert critical_detect("user", sentence) == [(kind, sentence)], sentence


def test_a_full_stop_after_an_abbreviation_does_not_end_the_sentence() -> None:
    said = (
        "Compare the old index vs. the new one, e.g. on the big repo. "
        "Dr. Osei signed it off. I said no. Then we stopped!"
    )
    assert text.sentences(said) == [
        "Compare the old index vs. the new one, e.g. on the big repo.",
        "Dr. Osei signed it off.",
        "I said no.",
        "Then we stopped!",
    ]


def test_fillers_are_no_topic_words() -> None:
    """Written for this test: "hmm", "ugh", "lol", "btw", "fyi" say how something is said,
    not what about: a topic is never named after them."""
    found = text.terms("hmm ugh, the nightly deploy broke again lol. btw fyi the cert expires")
    assert not {"hm", "hmm", "ugh", "lol", "btw", "fyi"} & set(found)
    assert {"nightly", "deploy", "cert"} <= set(found)


# literals that share beginnings, contain one another and hold regex characters
_LITERALS = st.lists(
    st.text(alphabet="ab .|(*", min_size=1, max_size=5), min_size=1, max_size=12, unique=True
)


@given(_LITERALS, st.text(alphabet="ab .|(*x", max_size=60))
@settings(max_examples=400, deadline=None)
def test_any_of_matches_the_longest_first_alternation(literals, source) -> None:
    plain = re.compile("|".join(re.escape(w) for w in sorted(literals, key=lambda w: (-len(w), w))))
    assert text.any_of(literals).findall(source) == plain.findall(source)


def test_any_of_takes_the_longest_literal_where_several_start() -> None:
    pattern = text.any_of(["fix", "fixed", "fixed it", "it"])
    assert pattern.findall("we fixed it, then fix it") == ["fixed it", "fix", "it"]
    assert pattern.pattern.count("fix") == 1  # a shared beginning is written once


def test_skipping_looks_ahead_only_where_the_first_characters_are_known() -> None:
    assert text.skipping(r"\bfoo|(?<=x)bar").pattern.startswith("(?=[bf])")
    assert text.skipping(r"^(?:oh|ah) no\b").pattern.startswith("(?=[ao])")
    assert text.skipping(r"a?b").pattern.startswith("(?=[ab])")
    # a group of nothing but anchors and lookbehinds matches no character
    assert text.skipping(r"(?:(?<=: )|^)\"x\"|'y'").pattern.startswith("(?=[\"'])")
    for unknown in (r"\w+ done", r"a?", r"[^a]b", r"(?:|x)y", r"(?i)done", r"\d+"):
        assert text.skipping(unknown).pattern == unknown, unknown
    assert text.skipping("done", re.IGNORECASE).pattern == "done"


def _plain_patterns() -> list[re.Pattern[str]]:
    """Every pattern the engine compiles with `text.skipping` (the conclusion and rule
    cues, the failure and pending scans) that starts with a lookahead."""
    from ccm.engine import conclusions, critical, fold

    found = [p for p in vars(conclusions).values() if isinstance(p, re.Pattern)]
    found += [pattern for _, _, pattern in conclusions.CUES]
    found += [cue.pattern for cue in critical.CUES] + [fold.BLOCKER, fold.PENDING]
    return [p for p in found if p.pattern.startswith("(?=[")]


def test_the_patterns_that_skip_match_as_their_plain_forms_on_real_turns() -> None:
    """The patterns that start with a lookahead find what the same patterns without it
    find, in every turn of the first held-out conversations (lowercased, as read)."""
    import json
    from pathlib import Path

    patterns = _plain_patterns()
    assert len(patterns) >= 100  # most of them skip
    folder = Path(__file__).parent / "fixtures" / "scenarios_heldout"
    turns = [
        json.loads(line)["content"].lower()
        for path in sorted(folder.glob("h*.jsonl"))[:24]
        for line in path.read_text(encoding="utf-8").splitlines()
    ]
    for fast in patterns:
        plain = re.compile(re.sub(r"^\(\?=\[(?:\\.|[^\]])*\]\)\(\?:", "", fast.pattern)[:-1])
        assert len(plain.pattern) < len(fast.pattern)
        assert [m.span() for t in turns for m in fast.finditer(t)] == [
            m.span() for t in turns for m in plain.finditer(t)
        ], fast.pattern[:80]


def test_a_memo_fills_on_first_sight_and_empties_past_its_limit() -> None:
    calls: list[str] = []

    def upper(word: str) -> str:
        calls.append(word)
        return word.upper()

    memo = text.Memo(upper, 2)
    assert list(map(memo.__getitem__, ["a", "b", "a", "c"])) == ["A", "B", "A", "C"]
    assert calls == ["a", "b", "c"]  # "a" the second time came from the memo
    assert memo["d"] == "D" and len(memo) == 1  # it held 3 > 2: emptied, then "d" filled


@settings(max_examples=1000)
@given(
    st.lists(
        st.sampled_from(
            [" \u2014 ", " | ", " \u00b7 ", " \u2013 ", "PASS", "84,210", "14", "x", " "]
        ),
        max_size=12,
    ).map("".join)
)
def test_a_record_is_what_its_patterns_say(line: str) -> None:
    """The plain-text check in front of `_FIELD` hides no record."""
    fields, figures = text._FIELD.findall(line), text._FIGURE.findall(line)
    assert text.is_record(line) == (len(fields) >= 2 and len(figures) >= 3)


def test_prose_leaves_out_tool_calls_wrappers_and_a_slash_commands_status_line() -> None:
    """What was said: not a tool call's JSON input, nor a client's wrapper tags, nor the
    status line it shows while a slash command runs (its name and arguments stay)."""
    from ccm.engine.text import prose, unwrapped, without_calls

    turn = (
        "<command-message>review is running…</command-message>\n"
        "<command-name>/review</command-name>\n<command-args>the parser</command-args>"
    )
    assert unwrapped(turn).split() == ["/review", "the", "parser"]
    said = 'Reading it now.\n[tool_use] Read {"file_path": "/srv/app/parse.rs"}\nDone.'
    assert without_calls(said).split() == ["Reading", "it", "now.", "Done."]
    assert "file_path" not in prose(said) and "```" not in prose("see\n```\nx = 1\n```")
    assert unwrapped("a < b and c > d") == "a < b and c > d"  # no tag, nothing taken


def test_a_count_of_one_takes_the_singular() -> None:
    from ccm.engine.text import counted

    assert [counted(n, "segment") for n in (0, 1, 2)] == ["0 segments", "1 segment", "2 segments"]
