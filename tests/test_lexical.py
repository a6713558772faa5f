"""The turn postings: BM25 exactly as the textbook formula, however the turns arrived."""

from __future__ import annotations

import math
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ccm import index, lexical, tokens

WORDS = ["sqlite", "postgres", "wal", "backup", "ledger", "cents", "token", "deploy", "cron"]
turn_texts = st.lists(
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=12).map(" ".join),
    min_size=1,
    max_size=40,
)


def _postings() -> lexical.Postings:
    return lexical.Postings(sqlite3.connect(":memory:", isolation_level=None))


def _reference(texts: list[str], query: list[str]) -> dict[int, float]:
    """BM25 (k1 1.2, b 0.75, FTS5's idf) written out by hand over whole words."""
    docs = [text.split() for text in texts]
    avgdl = sum(map(len, docs)) / len(docs)
    scores: dict[int, float] = {}
    for term in query:
        df = sum(term in doc for doc in docs)
        if not df:
            continue
        idf = math.log((len(docs) - df + 0.5) / (df + 0.5))
        idf = idf if idf > 0 else 1e-6
        for number, doc in enumerate(docs, 1):
            tf = doc.count(term)
            if tf:
                norm = 1.2 * (1 - 0.75 + 0.75 * len(doc) / avgdl)
                scores[number] = scores.get(number, 0.0) + idf * tf * 2.2 / (tf + norm)
    return scores


@settings(max_examples=60, deadline=None)
@given(turn_texts, st.lists(st.sampled_from(WORDS), min_size=1, max_size=3, unique=True))
def test_scores_are_textbook_bm25(texts: list[str], query: list[str]) -> None:
    postings = _postings()
    postings.add("s", [(n, n, text) for n, text in enumerate(texts, 1)])
    expected = _reference(texts, query)
    found = postings.search("s", lexical.stems(query), limit=len(texts))
    assert {hit.turn for hit in found} == set(expected)
    for hit in found:
        assert math.isclose(hit.score, expected[hit.turn], rel_tol=1e-9)
        assert set(hit.terms) == {lexical.stem(w) for w in query if w in texts[hit.turn - 1]}
    scores = [hit.score for hit in found]
    assert scores == sorted(scores, reverse=True)


@settings(max_examples=40, deadline=None)
@given(
    turn_texts,
    st.lists(st.sampled_from(WORDS), min_size=2, max_size=3, unique=True),
    st.floats(0.5, 4.0),
)
def test_a_term_s_weight_multiplies_what_it_adds(
    texts: list[str], query: list[str], weight: float
) -> None:
    postings = _postings()
    postings.add("s", [(n, n, text) for n, text in enumerate(texts, 1)])
    heavy, rest = query[0], query[1:]
    expected = _reference(texts, rest)
    for turn, score in _reference(texts, [heavy]).items():
        expected[turn] = expected.get(turn, 0.0) + weight * score
    found = postings.search(
        "s", lexical.stems(query), len(texts), weights={lexical.stem(heavy): weight}
    )
    assert {hit.turn: hit.score for hit in found} == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize(("pending", "batch"), [(3, 5), (256, 20_000)])
@settings(max_examples=40, deadline=None)
@given(texts=turn_texts, chunks=st.lists(st.integers(1, 7), min_size=1, max_size=40))
def test_appending_in_any_chunks_stores_the_same_lists(
    texts: list[str], chunks: list[int], pending: int, batch: int
) -> None:
    """Turns waiting in ``pending`` and turns in blocks read the same, however they came:
    one import (tokenised `batch` turns at a time), or chunks (some repeated) that
    gather and go to the blocks every `pending` turns."""
    turns = [(n, n, text) for n, text in enumerate(texts, 1)]
    whole, pieces = _postings(), _postings()
    default = lexical.PENDING_TURNS, lexical.BATCH_TURNS
    lexical.BATCH_TURNS = batch
    try:
        whole.add("s", turns)
        lexical.PENDING_TURNS = pending
        start = 0
        for size in chunks:
            pieces.add("s", turns[start : start + size])
            pieces.add("s", turns[: start + size])  # turns already indexed are not added twice
            start += size
        pieces.add("s", turns[start:])
    finally:
        lexical.PENDING_TURNS, lexical.BATCH_TURNS = default
    terms = sorted({lexical.stem(w) for w in WORDS})
    a, b = whole.lists("s", terms).get("s", {}), pieces.lists("s", terms).get("s", {})
    assert a.keys() == b.keys()
    for term in a:
        assert a[term].tobytes() == b[term].tobytes()
    assert whole.stats("s") == pieces.stats("s")


def test_a_long_list_keeps_few_blocks() -> None:
    postings = _postings()
    for n in range(1, 2001):  # the daemon's path: one turn at a time
        postings.add("s", [(n, n, "sqlite")])
    blocks = postings.db.execute(
        "SELECT count(*), sum(size) FROM postings WHERE session='s' AND term='sqlite'"
    ).fetchone()
    waiting = postings.db.execute("SELECT count(*) FROM pending").fetchone()[0]
    assert 0 < waiting < lexical.PENDING_TURNS
    assert blocks[1] + waiting == 2000
    assert blocks[0] <= 2 * math.log2(2000) + 1
    listed = postings.lists("s", ["sqlite"])["s"]["sqlite"]["turn"]
    assert np.array_equal(listed, np.arange(1, 2001))


def test_sessions_are_apart_and_a_dropped_one_is_gone() -> None:
    postings = _postings()
    postings.add("a", [(1, 1, "deploy on friday"), (2, 1, "cron at night")])
    postings.add("b", [(1, 1, "deploy the ledger")])
    assert [(h.session, h.turn) for h in postings.search("a", lexical.stems(["deploy"]), 10)] == [
        ("a", 1)
    ]
    assert {h.session for h in postings.search(None, lexical.stems(["deploy"]), 10)} == {"a", "b"}
    postings.drop("a")
    assert [h.session for h in postings.search(None, lexical.stems(["deploy"]), 10)] == ["b"]
    assert postings.last_turn("a") == 0


@settings(max_examples=40, deadline=None)
@given(
    a=turn_texts,
    b=turn_texts,
    query=st.lists(st.sampled_from(WORDS), min_size=1, max_size=3, unique=True),
    limit=st.integers(1, 30),
)
def test_a_search_of_every_session_ranks_their_turns_together(
    a: list[str], b: list[str], query: list[str], limit: int
) -> None:
    postings = _postings()
    postings.add("a", [(n, n, text) for n, text in enumerate(a, 1)])
    postings.add("b", [(n, n, text) for n, text in enumerate(b, 1)])
    terms = lexical.stems(query)
    each = postings.search("a", terms, limit) + postings.search("b", terms, limit)
    found = postings.search(None, terms, limit)
    assert found == sorted(each, key=lambda hit: (-hit.score, hit.session, hit.turn))[:limit]
    for hit in found:  # the terms it holds, in the query's order
        text = (a if hit.session == "a" else b)[hit.turn - 1]
        assert hit.terms == tuple(t for t in terms if t in map(lexical.stem, text.split()))


def test_exclude_after_and_the_exchange_of_each_turn() -> None:
    postings = _postings()
    postings.add("s", [(1, 1, "sqlite?"), (2, 1, "use sqlite"), (3, 3, "sqlite again")])
    assert [(h.turn, h.pair) for h in postings.search("s", ["sqlite"], 10)] == [
        (1, 1),
        (2, 1),
        (3, 3),
    ]
    assert [h.turn for h in postings.search("s", ["sqlite"], 10, exclude_after=3)] == [1, 2]


def test_topics_score_a_segment_by_all_its_turns() -> None:
    postings = _postings()
    postings.add(
        "s",
        [
            (1, 1, "the ledger import"),
            (2, 1, "backup the ledger"),
            (3, 3, "ledger cents"),
            (4, 3, "deploy with cron"),
            (5, 5, "cron runs nightly"),
        ],
    )
    postings.set_segments("s", [1, 4])
    topics = postings.topics("s", lexical.stems(["ledger"]), 5)
    assert [(first, last) for first, last, _ in topics] == [(1, 3)]
    both = postings.topics("s", lexical.stems(["cron", "ledger"]), 5)
    assert {(first, last) for first, last, _ in both} == {(1, 3), (4, 5)}


def test_stems_follow_porter_and_fold_latin_accents() -> None:
    assert lexical.stems(["Decided", "deciding", "databases"]) == ["decid", "databas"]
    counts = lexical.term_counts("Café CAFE cafés, naïve_plan")
    # an identifier counts whole as well as by its words
    assert counts == {"cafe": 3, "naiv": 1, "plan": 1, "naive_plan": 1}
    assert lexical.stem("русский") == "русский"  # Cyrillic keeps its marks, as in FTS5


def test_an_irregular_past_is_its_verb() -> None:
    """Porter leaves "ran" and "broken" as they are: a question in one tense finds a
    turn in another."""
    assert lexical.stems(["ran", "running", "runs"]) == ["run"]
    assert lexical.stems(["broke", "broken", "breaking"]) == ["break"]
    assert lexical.stems(["chose", "chosen", "choosing"]) == ["choos"]
    # words that are as often something else are left alone
    assert lexical.stems(["left", "saw", "led", "sat"]) == ["left", "saw", "led", "sat"]
    assert sorted(lexical.needles("run")) == ["ran", "ru"]


def test_camel_case_names_count_by_their_words_too() -> None:
    counts = lexical.term_counts("pod in CrashLoopBackOff; HTTPServer raised OperationalError")
    assert {"crashloopbackoff", "crash", "loop", "back", "off"} <= set(counts)
    assert {"httpserver", "http", "server", "operationalerror", "oper", "error"} <= set(counts)
    # an acronym's plural, a capitalised word and a name in other letters are one word
    for text in ("URLs and IDs", "Staging", "ÉcoleNormale", "ALL CAPS", "aB3xZqK9fLm", "aB" * 40):
        assert not list(lexical.camel_parts(text))
    # an "İ" lowers to two characters: the words after it are found where they are
    text = "İstanbul CrashLoopBackOff"
    lowered = lexical.folded_lower(text)
    assert {"crash", "loop"} <= set(lexical.term_counts(text))
    assert [lowered[at : at + 5] for at, _ in lexical.camel_terms(text, lowered)][:2] == [
        "crash",
        "loopb",
    ]
    text = "x\nthe CrashLoopBackOff again"
    lowered = lexical.folded_lower(text)
    camel = lexical.camel_terms(text, lowered)
    found = list(lexical.terms_at(lowered, frozenset({"crash", "loop"}), camel))
    assert sorted(found) == [(6, "crash"), (11, "loop")]


# text with what the reader treats apart: compounds, camel-case names, accents, digits
rich_words = st.sampled_from(
    [
        "deploy",
        "Deploying",
        "run-0312b",
        "t3.medium",
        "6,699.70",
        "is_none_or",
        "CrashLoopBackOff",
        "HTTPServer",
        "café",
        "naïve_plan",
        "ran",
        "İstanbul",
        "x",
        "2026-03-04",
        "main.py:",
        "(see",
        "a.b.c",
        "—",
    ]
)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.lists(rich_words, min_size=0, max_size=10).map(" ".join), min_size=1, max_size=20),
    st.booleans(),
)
def test_a_batch_is_read_as_each_text_alone(texts: list[str], restart: bool) -> None:
    """The postings of a batch of turns (read at once, into arrays) are each turn's
    `term_counts`, whatever the process read before (or after its numbers started again)."""
    if restart:
        lexical._NUMBERS = lexical._WordNumbers()
    turns = [(n, n - n % 2, text) for n, text in enumerate(texts, 1)]
    terms, bounds, rows, length = lexical._postings(turns)
    found: dict[int, dict[str, int]] = {}
    for at, term in enumerate(terms):
        for row in rows[bounds[at] : bounds[at + 1]]:
            found.setdefault(int(row["turn"]), {})[term] = int(row["tf"])
        assert np.all(np.diff(rows["turn"][bounds[at] : bounds[at + 1]].astype(int)) > 0)
    expected = {n: dict(lexical.term_counts(text)) for n, _, text in turns}
    assert found == {n: counts for n, counts in expected.items() if counts}
    assert length == sum(sum(counts.values()) for counts in expected.values())
    for row in rows:
        assert row["length"] == sum(expected[int(row["turn"])].values())
        assert row["pair"] == row["turn"] - row["turn"] % 2
    assert len(set(terms)) == len(terms)


def test_the_stemmer_in_use_stems_as_the_reference_one() -> None:
    """The C stemmer (PyStemmer, when installed) and snowballstemmer's own Python one
    make the same stems: an index is the same whichever a machine has."""
    from snowballstemmer.porter_stemmer import PorterStemmer

    reference = PorterStemmer()
    fixtures = Path(__file__).parent / "fixtures"
    words = sorted(
        {
            word
            for path in sorted((fixtures / "claude-code").glob("*.jsonl"))
            for word in lexical._WORD.findall(path.read_text().lower())
            if word.isascii() and 2 < len(word) <= lexical.STEM_MAX
        }
    )
    assert len(words) > 1000
    assert [lexical._porter.stemWord(w) for w in words] == [reference.stemWord(w) for w in words]


def test_stems_agree_with_fts5_on_real_transcripts() -> None:
    """FTS5's porter tokenizer and ccm's stems differ on only a handful of words."""
    fixtures = Path(__file__).parent / "fixtures"
    texts = [p.read_text() for p in sorted((fixtures / "claude-code").glob("*.jsonl"))]
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE t USING fts5(x, tokenize='porter unicode61')")
    db.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, row)")
    db.executemany("INSERT INTO t(x) VALUES (?)", [(text,) for text in texts])
    # ccm's own: an irregular form is its verb, a camel-case name's words are terms too
    fts5 = {row[0] for row in db.execute("SELECT term FROM v")}
    fts5 = {lexical.stem(term) if term in lexical.IRREGULAR else term for term in fts5}
    fts5 |= {term for text in texts for _, term in lexical.camel_parts(text)}
    ours = {
        term
        for text in texts
        for term in lexical.term_counts(text)
        if not lexical.is_compound(term)  # compounds are ccm's own: FTS5 has none
    }
    assert len(fts5) > 1000
    assert len(fts5 ^ ours) <= 0.005 * len(fts5)


@settings(max_examples=100, deadline=None)
@given(
    texts=st.lists(
        st.lists(st.sampled_from(WORDS), min_size=1, max_size=6).map(" ".join),
        min_size=1,
        max_size=400,
    ),
    query=st.lists(st.sampled_from(WORDS), min_size=1, max_size=4, unique=True),
    limit=st.integers(1, 50),
    exclude=st.one_of(st.none(), st.integers(1, 400)),
)
def test_the_top_turns_are_the_best_of_all_ties_included(
    texts: list[str], query: list[str], limit: int, exclude: int | None
) -> None:
    """The best `limit` turns are picked from those above a sampled floor, not from a
    partition of every score: they are still the first `limit` of every matching turn
    sorted by score, then turn (short turns from few words tie often)."""
    postings = _postings()
    postings.add("s", [(n, n, text) for n, text in enumerate(texts, 1)])
    scores = _reference(texts, query)
    ranked = sorted(
        (turn for turn in scores if exclude is None or turn < exclude),
        key=lambda turn: (-scores[turn], turn),
    )
    found = postings.search("s", lexical.stems(query), limit, exclude_after=exclude)
    assert [hit.turn for hit in found] == ranked[:limit]
    for hit in found:
        assert math.isclose(hit.score, scores[hit.turn], rel_tol=1e-9)


@settings(max_examples=60, deadline=None)
@given(
    texts=turn_texts,
    cuts=st.sets(st.integers(1, 40), min_size=1, max_size=8),
    query=st.lists(st.sampled_from(WORDS), min_size=1, max_size=3, unique=True),
)
def test_topics_are_segment_bm25(texts: list[str], cuts: set[int], query: list[str]) -> None:
    """A segment scores as one document of all its turns: its terms' frequencies summed,
    its length its turn count times the mean turn length (turns before the first
    segment belong to none)."""
    postings = _postings()
    postings.add("s", [(n, n, text) for n, text in enumerate(texts, 1)])
    firsts = sorted(cut for cut in cuts if cut <= len(texts)) or [1]
    postings.set_segments("s", firsts)
    docs = [text.split() for text in texts]
    avgdl = sum(map(len, docs)) / len(docs)
    spans = list(zip(firsts, [*(f - 1 for f in firsts[1:]), len(texts)], strict=True))
    sizes = [(last - first + 1) * avgdl for first, last in spans]
    expected: dict[tuple[int, int], float] = {}
    for term in query:
        tfs = [sum(doc.count(term) for doc in docs[first - 1 : last]) for first, last in spans]
        df = sum(tf > 0 for tf in tfs)
        if not df:
            continue
        idf = math.log((len(spans) - df + 0.5) / (df + 0.5))
        idf = idf if idf > 0 else 1e-6
        for span, tf, size in zip(spans, tfs, sizes, strict=True):
            if tf:
                norm = 1.2 * (1 - 0.75 + 0.75 * size / (sum(sizes) / len(sizes)))
                expected[span] = expected.get(span, 0.0) + idf * tf * 2.2 / (tf + norm)
    found = postings.topics("s", lexical.stems(query), len(spans))
    assert {(first, last) for first, last, _ in found} == set(expected)
    for first, last, score in found:
        assert math.isclose(score, expected[(first, last)], rel_tol=1e-9)


@settings(max_examples=40, deadline=None)
@given(
    size=st.integers(1, 40_000),
    most_tf=st.integers(1, 8),
    longest=st.integers(1, 300),
    outlier=st.booleans(),
    avgdl=st.floats(1.0, 5000.0),
    seed=st.integers(0, 2**32 - 1),
)
def test_weights_from_the_table_are_the_formula_to_the_bit(
    size: int, most_tf: int, longest: int, outlier: bool, avgdl: float, seed: int
) -> None:
    """Long lists take their weights from a table of (tf, length) pairs (with a very
    long turn, the table would be too big: the formula itself), the same bits."""
    rng = np.random.default_rng(seed)
    array = np.zeros(size, dtype=lexical.POSTING)
    array["tf"] = rng.integers(1, most_tf + 1, size)
    array["length"] = rng.integers(1, longest + 1, size)
    if outlier:
        array["tf"][-1], array["length"][0] = 0xFFFF, 0xFFFF
    idf = float(rng.uniform(1e-6, 12))
    tf = array["tf"].astype(np.float64)
    norm = 1.2 * (1 - 0.75 + 0.75 * array["length"] / avgdl)
    expected = idf * tf * 2.2 / (tf + norm)
    assert lexical._weights(array, idf, avgdl).tobytes() == expected.tobytes()


def _exchanges_by_loop(
    base: dict[int, float], starts: dict[int, int]
) -> dict[int, tuple[float, int]]:
    """The neighbour scoring and best turn per exchange, written plainly with dicts."""
    get = base.get
    one, two = index.NEIGHBOUR_WEIGHT, index.NEIGHBOUR_WEIGHT**2
    score = {}
    for turn, value in base.items():
        beside = max(get(turn - 1, 0.0), get(turn + 1, 0.0))
        apart = max(get(turn - 2, 0.0), get(turn + 2, 0.0))
        score[turn] = value + max(one * beside, two * apart)
    exchange: dict[int, tuple[float, int]] = {}
    for turn, value in score.items():
        first = starts.get(turn)
        if first is not None and value > exchange.get(first, (0.0, 0))[0]:
            exchange[first] = (value, turn)
    return exchange


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(
        st.integers(1, 60),
        st.one_of(st.just(0.0), st.just(0.5), st.floats(0, 3, allow_nan=False)),
        max_size=40,
    ),
    st.data(),
)
def test_best_of_exchanges_equals_the_plain_loop(
    base: dict[int, float], data: st.DataObject
) -> None:
    """Recall's array scoring gives every exchange the same score and best turn as the
    plain loop, ties (equal values, found in a given order) included."""
    # turns of an exchange are consecutive; some turns (a tool's output) have none
    starts = {}
    first = 1
    for turn in range(1, 61):
        if data.draw(st.booleans(), label=f"new exchange at {turn}"):
            first = turn
        if data.draw(st.integers(0, 9), label=f"said {turn}"):
            starts[turn] = first
    turns = np.fromiter(base, dtype=np.int64, count=len(base))
    values = np.fromiter(base.values(), dtype=np.float64, count=len(base))
    assert index._best_of_exchanges(turns, values, starts) == _exchanges_by_loop(base, starts)


def test_a_long_turn_is_focused_on_the_lines_that_hold_the_query() -> None:
    rows = "\n".join(f"| region-{k} | {100 + k} ms |" for k in range(60))
    text = f"[2026-01-05 10:00] Bash result: $ bench --all\n| latency table |\n{rows}\nok"
    terms = lexical.stems(["latency"])
    found = index.focused(text, terms, 120, 7, tool=True)
    assert found is not None
    shown, count = found
    lines = shown.splitlines()
    # counted by its lines: a line's break may join its last token ("|\n"), never more
    assert tokens.count_tokens(shown) <= count <= tokens.count_tokens(shown) + len(lines)
    # the command, the matched header with the rows under it, how it ended, a way back
    assert lines[:4] == [
        "[2026-01-05 10:00] Bash result: $ bench --all",
        "| latency table |",
        "| region-0 | 100 ms |",
        "| region-1 | 101 ms |",
    ]
    assert "| region-30 | 130 ms |" not in lines and lines[-2] == "ok"
    assert lines[-1] == f"\u2026 [{len(text)} chars; @expand(turn 7)]"
    # a turn in which no line holds a word of the query has nothing to show, nor one
    # in which no such line fits: its first and last lines, or the lines around an
    # answer left out, would say nothing asked
    assert index.focused(text, lexical.stems(["deploy"]), 120, 7) is None
    assert index.focused(text, terms, 22, 7, tool=True) is None
    wide = text.replace("| latency table |", "| latency table |" + " p50 p95" * 60)
    assert index.focused(wide, terms, 120, 7, tool=True) is None


def test_the_lines_a_reading_names_are_kept_when_a_tool_output_is_focused() -> None:
    """Written for this test: a log read by the assistant, who quotes the commit that
    caused it and a figure. A question about it ("why was the invoice a penny short?")
    shares no word with the commit's line; the reading names it, and its line is kept,
    half as strongly as a line that holds a word asked; a few of them only."""
    reading = (
        "[2026-02-03 10:04] assistant: It started with `c41d9e2`, which rounds each "
        "line before the VAT, so the 3 lines lose 0.4p each; the 1.2p short adds up."
    )
    named = index.named_in(reading)
    assert {"c41d9e2", "0.4p", "1.2p"} <= named
    assert not named & {"2026", "02", "10", "04", "the", "which"}  # its stamp, its prose
    log = "\n".join(
        [
            "$ git log --oneline -8 -- billing/",
            *(f"{k}a0b1c{k} chore: tidy billing module {k}" for k in range(3)),
            "c41d9e2 fix(billing): round each line before the VAT",
            *(f"line {k}: totals check ok" for k in range(60)),
            "invoice INV-207 total: 118.80 (expected 118.81)",
            "done",
        ]
    )
    asked = lexical.stems(["invoice", "penny", "short"])
    without = index.focused(log, asked, 120, 7, tool=True)
    found = index.focused(log, asked, 120, 7, tool=True, named=named)
    assert without is not None and found is not None
    assert "c41d9e2" not in without[0] and "c41d9e2 fix(billing)" in found[0]
    assert "invoice INV-207 total" in found[0]  # and the line asked about
    assert "line 30: totals check ok" not in found[0]
    table = "\n".join(["$ cat prices", *(f"item {k}: {k}.40p" for k in range(40)), "end"])
    many = frozenset(f"{k}.40p" for k in range(40))
    shown = index.focused(table, lexical.stems(["prices"]), 400, 7, tool=True, named=many)
    assert shown is not None and shown[0].count(".40p") == index.NAMED_LINES


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.sampled_from([*WORDS, "\n", "."]), min_size=1, max_size=300),
    st.integers(20, 200),
)
def test_a_focused_turn_keeps_within_its_tokens(words: list[str], most: int) -> None:
    text = " ".join(words)
    found = index.focused(text, lexical.stems(WORDS[:2]), most, 1)
    if found is not None:  # its lines, each with its line break
        shown, count = found
        assert tokens.count_tokens(shown) <= count <= most
        assert sum(tokens.count_tokens(line) + 1 for line in shown.splitlines()) <= most


def test_words_longer_than_fts5_stems_are_kept_whole() -> None:
    """As FTS5's porter tokenizer (64 bytes at most): a pasted blob is one long word,
    and the stemmer's time grows with the square of its length."""
    from ccm.lexical import STEM_MAX, stem

    stemmed = "x" * (STEM_MAX - 7) + "walking"
    assert stem(stemmed) == "x" * (STEM_MAX - 7) + "walk"
    whole = "x" * (STEM_MAX - 6) + "walking"
    assert stem(whole) == whole
    blob = "ab" * 500_000 + "ing"
    assert stem(blob) == blob


SUFFIXES = ["", "s", "es", "ies", "ed", "ing", "ly", "y", "ation", "ational", "ization"]
SUFFIXES += ["iveness", "fulness", "ousness", "bility", "ability", "ically", "ement", "ness"]
WORD_PARTS = ["happ", "hop", "sensib", "relat", "digitiz", "troubl", "generaliz", "cafe", "parse"]
PIECE_WORDS = st.one_of(
    st.builds(lambda stem, end: stem + end, st.sampled_from(WORD_PARTS), st.sampled_from(SUFFIXES)),
    st.sampled_from(["Café", "CAFÉS", "naïve_plan", "fct_order.rev", "20,000", "İstanbul"]),
    st.sampled_from(["x__order.rev", "1,20,000", "a-b.c", "order.rev.x", "-order.rev", "12,0"]),
    st.sampled_from(["│├──", "->", "=", "(x)", "42", "v1.74", "ß", "русский", "日本語"]),
    st.sampled_from(["CrashLoopBackOff", "HTTPServer", "getHTTP2Response", "iPhone", "URLs"]),
    st.sampled_from(["ran", "Broken", "went", "gone", "thought", "x_fooBar", "naïveCase"]),
    st.text(st.characters(codec="utf-8"), max_size=8),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(PIECE_WORDS, min_size=1, max_size=20), st.data())
def test_terms_at_finds_what_term_counts_reads(words: list[str], data: st.DataObject) -> None:
    """`focused` finds a line's terms only among the words that start with a query
    term's needle: it must count exactly the terms `term_counts` reads in the line."""
    line = " ".join(words)
    terms = set(lexical.term_counts(line))
    others = lexical.stems(["parser", "deploy", "cafe_x", "order.rev", "20,000", "b.c", "zz"])
    wanted = frozenset(data.draw(st.sets(st.sampled_from(sorted(terms | set(others))))))
    lowered = lexical.folded_lower(line)
    found = list(lexical.terms_at(lowered, wanted, lexical.camel_terms(line, lowered)))
    assert {term for _, term in found} == terms & wanted
    assert all(any(lowered[at:].startswith(n) for n in lexical.needles(term)) for at, term in found)


def test_a_needle_starts_every_word_of_its_stem() -> None:
    """Porter rewrites only a word's end: the stem less its last letter starts the word."""
    words = {part + end for part in WORD_PARTS for end in SUFFIXES}
    words |= {w.lower() for w in (Path(__file__).parent / "test_lexical.py").read_text().split()}
    words = {w for w in words if w.isascii() and w.isalpha()}
    assert len(words) > 300
    words |= set(lexical.IRREGULAR)
    assert [w for w in words if not w.startswith(tuple(lexical.needles(lexical.stem(w))))] == []


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from([*WORDS, "\n", ".", "  "]), max_size=900), st.integers(1, 300))
def test_count_within_is_exact_up_to_its_limit(words: list[str], limit: int) -> None:
    text = " ".join(words)
    whole = tokens.count_tokens(text)
    counted = tokens.count_within(text, limit)
    if whole <= limit:
        assert counted == whole
    else:
        assert counted > limit


@given(st.text(alphabet="aBcZ09 _-.é\n", max_size=40))
def test_the_camel_case_check_finds_the_same_places_as_the_plain_pattern(text: str) -> None:
    import re

    plain = re.compile(r"[a-z][A-Z]|[A-Z][A-Z][a-z]")  # what lexical._CAMEL_AT stands for
    assert bool(lexical._CAMEL_AT.search(text)) == bool(plain.search(text))


@given(st.text(alphabet="aBcZ09 _-.é\n", max_size=80), st.integers(0, 70))
def test_camel_names_are_the_matches_of_the_pattern(text: str, run: int) -> None:
    text = text + "aB" * run  # and runs around STEM_MAX long
    found = [(m.start(), m.end()) for m in lexical.camel_names(text)]
    assert found == [(m.start(), m.end()) for m in lexical._CAMEL.finditer(text)]


@given(st.text(alphabet="ab1_-.,2 é\n", max_size=80))
def test_compound_words_are_the_matches_of_the_pattern(text: str) -> None:
    assert list(lexical.compound_words(text)) == lexical._COMPOUND.findall(text)


@given(st.text(alphabet="aΣςσİ é.\nB ", max_size=60), st.integers(0, 300))
def test_a_turn_is_lowered_whole_as_its_pieces_would_be(text: str, long: int) -> None:
    text = text + " Ab." * long  # and a line long enough to be taken a sentence at a time
    split = index._Pieces(text)
    assert split.lowered.split("\n") == [lexical.folded_lower(p) for p in split.pieces]
    said = [at for at, piece in enumerate(split.pieces) if piece.strip()]
    assert split.last == (said[-1] if said else 0)
