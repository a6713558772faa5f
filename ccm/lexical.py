"""BM25 over turns from posting lists that ccm keeps itself, in the index database.

FTS5 ranks a query by reading every posting of every query word and scoring every
matching row one by one; a word said in a fifth of a million turns costs that fifth on
every query, and a session filter does not help, because the postings are the root's.
Here each (session, term) has its own posting list, stored as a few NumPy blocks of
(turn, term frequency, turn length). New turns are appended as a small block, and the
last two blocks are merged while the older is no more than twice the newer (a binary
counter), so a list has O(log n) blocks and each posting is rewritten O(log n) times.
A query reads the blocks of its words and scores them in a handful of vectorised
passes: its cost is the postings of its words in its session, with no per-row Python.

Words are split as FTS5's ``unicode61`` tokenizer splits them (letters and digits),
lower-cased, and stemmed with the original Porter algorithm as FTS5's ``porter``
tokenizer does (on real transcripts, 1 stem in 3,200 differs: FTS5 makes "psychology"
"psycholog"). Queries and turns go through the same function (but for the words of a
camel-case name, which only a turn's text is split into, see below). An identifier, a version or a
figure ("is_none_or", "run-0312b", "6,699.70") is a term too, whole, besides its words: a
question that names one finds the turns that say it before those that say its parts.
Two more departures from FTS5: the irregular past of a common verb is the verb ("ran" is
"run"), and the words of a camel-case name are terms besides the name ("crash loop"
finds "CrashLoopBackOff").
A batch of turns is read at once: each word looked up as a number (its stem's), the
(term, turn) pairs counted in array passes (`_read`).
Turns are immutable (``raw.jsonl`` is append-only), so a posting list is never edited:
a session whose log was replaced is dropped and indexed again.
"""

from __future__ import annotations

import math
import re
import sqlite3
import unicodedata
from array import array as int_array
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from functools import lru_cache
from itertools import repeat
from typing import NamedTuple

import numpy as np
import snowballstemmer

from ccm import patterns
from ccm.engine.text import Memo

SCHEMA = """
CREATE TABLE IF NOT EXISTS postings(
    id INTEGER PRIMARY KEY,
    session TEXT NOT NULL,
    term TEXT NOT NULL,
    block INTEGER NOT NULL,
    size INTEGER NOT NULL,
    data BLOB NOT NULL,
    UNIQUE(session, term, block)
);
CREATE INDEX IF NOT EXISTS postings_by_term ON postings(term);
CREATE TABLE IF NOT EXISTS pending(
    term TEXT NOT NULL,
    session TEXT NOT NULL,
    turn INTEGER NOT NULL,
    pair INTEGER NOT NULL,
    tf INTEGER NOT NULL,
    length INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS pending_by_term ON pending(term, session, turn);
CREATE TABLE IF NOT EXISTS turn_stats(
    session TEXT PRIMARY KEY,
    docs INTEGER NOT NULL,
    length INTEGER NOT NULL,
    last_turn INTEGER NOT NULL,
    pending INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS spans(
    session TEXT PRIMARY KEY,
    data BLOB NOT NULL
);
"""
POSTING = np.dtype([("turn", "<u4"), ("pair", "<u4"), ("tf", "<u2"), ("length", "<u2")])
FIELDS = ("turn", "pair", "tf", "length")
PENDING_TURNS = 256  # turns that wait as plain rows before going to the term blocks
BATCH_TURNS = 20_000  # turns tokenised at once on a large import
K1 = 1.2  # FTS5's bm25() constants, so that scores read as before
B = 0.75
SAMPLE = 16  # the top turns are selected from those at least as good as a 1/16 sample's
_WORD = patterns.compile(r"[^\W_]+")
# an identifier, a version or a figure: words joined by _ - or . (or digits by a comma),
# kept whole besides its parts: "is_none_or", "run-0312b", "t3.medium", "6,699.70"
_COMPOUND = patterns.compile(r"(?<![^\W_])[^\W_]++(?:(?:[_.-]|(?<=\d),(?=\d))[^\W_]++)+")
_JOINS = frozenset("_.-,")
# a join between two words of a compound (a full stop or a comma of prose joins nothing);
# one class first, so that the regex engine skips to where one may be (an alternation
# is tried at every character)
_JOIN = patterns.compile(r"[_.,\-](?:(?<=[^\W_][_.\-])(?=[^\W_])|(?<=\d,)(?=\d))")
# the same patterns for ASCII text (nearly every turn), where they find the same: a
# class such as [^\W_] is then a table lookup, not a Unicode lookup for each character
_COMPOUND_ASCII, _JOIN_ASCII = (
    patterns.compile(pattern.pattern, re.ASCII) for pattern in (_COMPOUND, _JOIN)
)
# the words of ASCII text are what is left when all but its letters and digits are
# spaces: `str.translate` and `str.split` find them in half the time of `_WORD.findall`
# (which makes a match of each)
_SPACED = {point: " " for point in range(128) if not chr(point).isalnum()}
# snowballstemmer's Porter, which is PyStemmer's (the same algorithm in C) where that is
# installed: the same stems, fifteen times as fast
_porter = snowballstemmer.stemmer("porter")


STEM_MAX = 64  # longer words are kept whole (FTS5_PORTER_MAX_TOKEN)
# The irregular past forms of common verbs, which Porter leaves as they are, as the
# verb: "who ran the refresh?" finds "I'll run it", "what did we choose" finds "we
# chose". Left out: forms that are as often another word ("left", "saw", "meant" a
# mean, "rose", "bit", "lay", "wound", "bound", "felt", "ground").
_IRREGULAR_FORMS = """
arise arose arisen|awake awoke awoken|bear bore borne|beat beaten|become became|begin began
begun|bend bent|bleed bled|blow blew blown|break broke broken|breed bred|bring brought|build
built|burn burnt|buy bought|catch caught|choose chose chosen|cling clung|come came|creep
crept|deal dealt|dig dug|draw drew drawn|drink drank drunk|drive drove driven|eat ate eaten|
fall fell fallen|feed fed|fight fought|find found|flee fled|fly flew flown|forbid forbade
forbidden|forget forgot forgotten|forgive forgave forgiven|freeze froze frozen|get got gotten|
give gave given|go went gone|grow grew grown|hang hung|hear heard|hide hid hidden|hold held|
keep kept|know knew known|lend lent|lose lost|make made|meet met|mistake mistook
mistaken|overcome overcame|override overrode overridden|pay paid|rebuild rebuilt|rerun reran|
rewrite rewrote rewritten|ride rode ridden|ring rang rung|run ran|say said|see seen|seek
sought|sell sold|send sent|shake shook shaken|shine shone|shoot shot|shrink shrank shrunk|
sing sang sung|sink sank sunk|sleep slept|slide slid|speak spoke spoken|spend spent|
spin spun|stand stood|steal stole stolen|stick stuck|sting stung|strike struck|swear swore
sworn|sweep swept|swim swam swum|swing swung|take took taken|teach taught|tear tore torn|tell
told|think thought|throw threw thrown|undergo underwent undergone|understand understood|undo
undid undone|wake woke woken|wear wore worn|weep wept|win won|withdraw withdrew
withdrawn|write wrote written"""
IRREGULAR: dict[str, str] = {
    form: forms.split()[0] for forms in _IRREGULAR_FORMS.split("|") for form in forms.split()[1:]
}


@lru_cache(maxsize=1 << 17)
def stem(word: str) -> str:
    """One lower-cased word as the index keeps it: the diacritics of Latin letters
    removed (as unicode61 does: "cafés" is "cafes", kana and Cyrillic keep their
    marks), then Porter-stemmed when ASCII and 3 to `STEM_MAX` characters long (as
    FTS5's porter tokenizer does; the stemmer's time grows with the square of a word's
    length, and a pasted blob is one long word). An irregular past is its verb's stem
    (`IRREGULAR`)."""
    word = _folded(word)
    word = IRREGULAR.get(word, word)
    if word.isascii() and 2 < len(word) <= STEM_MAX:
        return str(_porter.stemWord(word))
    return word


def _fold(char: str) -> str:
    base = unicodedata.normalize("NFD", char)
    return base[0] if len(base) > 1 and ord(base[0]) < 0x250 else char


_STEMS = Memo(stem, 1 << 18)  # word -> stem, looked up by `map` (a hot path)


def _split(text: str) -> tuple[list[str], list[str]]:
    """The lower-cased words of `text` (each to be stemmed), and its terms besides them:
    its compounds whole and the words of its camel-case names (already terms)."""
    lower = text.lower()
    words = lower.translate(_SPACED).split() if lower.isascii() else _WORD.findall(lower)
    extra: list[str] = []
    if not _JOINS.isdisjoint(lower):
        extra += map(_folded, compound_words(lower))
    if _CAMEL_AT.search(text):
        extra += (term for _, term in camel_parts(text))
    return words, extra


def term_counts(text: str) -> dict[str, int]:
    """The stemmed terms of `text` with their frequencies, its compounds whole, and
    the words of its camel-case names besides the names."""
    words, extra = _split(text)
    counts = Counter(map(_STEMS.__getitem__, words))
    counts.update(extra)
    return counts


# a name written in camel case ("CrashLoopBackOff", "OperationalError", "HTTPServer"; not
# "URLs"): its words are terms too, besides the name, so that "crash loop" finds it. Only
# names of ASCII letters and digits, `STEM_MAX` long at most (a base64 blob is no name);
# the name is matched whole, possessively (a lazy match of a long mixed-case run backed
# off at each change of case)
# where a camel-case name may be: "aB" or "ABc". Searched for at every upper-case letter
# (the same places as r"[a-z][A-Z]|[A-Z][A-Z][a-z]", but an alternation tried at each
# character costs four times as much on prose)
_CAMEL_AT = patterns.compile(r"[A-Z](?:(?<=[a-z][A-Z])|(?=[A-Z][a-z]))")
_CAMEL = patterns.compile(
    r"(?<![^\W_])(?=[A-Za-z0-9]*?(?:[a-z][A-Z]|[A-Z][A-Z][a-z]{2}))"
    rf"[A-Za-z0-9]{{2,{STEM_MAX}}}+(?![^\W_])"
)
_CAMEL_PART = patterns.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


def camel_names(text: str) -> Iterator[re.Match[str]]:
    """The camel-case names of `text` (the matches of `_CAMEL`), looked for only in the
    runs of letters and digits where `_CAMEL_AT` finds a change of case: `_CAMEL` tried
    at every word costs a pass of its lookahead over each."""
    tried = -1  # the start of the last run tried
    for change in _CAMEL_AT.finditer(text):
        start = change.start()
        while start > 0 and text[start - 1].isalnum():  # back to the start of its run
            start -= 1
            if change.start() - start > STEM_MAX:  # too long to be a name
                break
        if start == tried:
            continue
        tried = start
        name = _CAMEL.match(text, start)
        if name is not None:
            yield name


def camel_parts(text: str) -> Iterator[tuple[int, str]]:
    """Where each word of each camel-case name of `text` starts, with its term. A run
    with a letter alone after its start ("aB3xZq", a token or a hash) is no name."""
    for name in camel_names(text):
        parts = list(_CAMEL_PART.finditer(name.group()))
        if any(len(p.group()) == 1 and p.group().isalpha() for p in parts[1:]):
            continue
        for part in parts:
            yield name.start() + part.start(), _STEMS[part.group().lower()]


_THOUSANDS = patterns.compile(r"(?<![\w.,])(\d{1,6}(?:\.\d{1,3})?)k(?![^\W_])", re.IGNORECASE)


def spelled_out(text: str) -> list[str]:
    """The figures `text` abbreviates with k, as a log or a table writes them: "20k"
    is also "20000" and "20,000" (a question says "at 20k steps", the log "step 20000")."""
    found: list[str] = []
    for match in _THOUSANDS.finditer(text):
        value = round(float(match.group(1)) * 1000)
        found += [str(value), f"{value:,}"]
    return list(dict.fromkeys(found))


def compound_words(lower: str) -> Iterator[str]:
    """The matches of `_COMPOUND` in `lower`, looked for only where `_JOIN` finds a
    join: `_COMPOUND` tried at every word costs a third more on prose."""
    joins, compound = (_JOIN_ASCII, _COMPOUND_ASCII) if lower.isascii() else (_JOIN, _COMPOUND)
    end = -1  # where the last compound ended: a join before it was part of it
    for join in joins.finditer(lower):
        start = join.start()
        if start < end:
            continue
        while start > 0 and lower[start - 1].isalnum():  # back to its first word
            start -= 1
        found = compound.match(lower, start)
        if found is not None:  # (always: a join has a word on each side)
            end = found.end()
            yield found.group()


def compounds(text: str) -> list[str]:
    """The compounds of `text` (see `_COMPOUND`), lower-cased, in order, once each: a
    query's identifiers, matched whole (they are rarer, so weigh more, than their parts)."""
    return list(dict.fromkeys(map(_folded, compound_words(text.lower()))))


def is_compound(term: str) -> bool:
    """Whether a term is a compound (kept whole, not stemmed)."""
    return not _JOINS.isdisjoint(term)


def _folded(word: str) -> str:
    """The diacritics of Latin letters removed, as in `stem`."""
    return word if word.isascii() else word.translate(_FOLDS)


# code point -> what `_fold` makes of it (for `str.translate`: a tool's output is
# folded a line at a time)
_FOLDS: Memo[int, str] = Memo(lambda point: _fold(chr(point)), 1 << 16)


def folded_lower(text: str) -> str:
    """`text` lower-cased with the diacritics of Latin letters removed, as `term_counts`
    reads its words: each word of it starts with the `needle` of its term."""
    return _folded(text.lower())


def camel_terms(text: str, lowered: str) -> list[tuple[int, str]]:
    """`camel_parts` of `text`, each at its offset in `lowered` (its `folded_lower`:
    lowering moves what follows an "İ", which becomes two characters)."""
    if not _CAMEL_AT.search(text):
        return []
    found = list(camel_parts(text))
    if len(text) == len(lowered):
        return found
    return [(len(text[:at].lower()), term) for at, term in found]


def terms_at(
    lowered: str, wanted: frozenset[str], camel: Sequence[tuple[int, str]] = ()
) -> Iterator[tuple[int, str]]:
    """Where in the `folded_lower` text `lowered` each of the terms `wanted` is, as
    `term_counts` reads it: (offset, term). Only the words that start with a term's
    `needle` (a compound: the compound) are read, found by a plain search: of a long
    tool output, a few. The words of its camel-case names are those of `camel` (its
    `camel_terms`, found once for every query)."""
    yield from ((at, term) for at, term in camel if term in wanted)
    for found in sorted({found for term in wanted for found in needles(term)}):
        compound = is_compound(found)
        at = lowered.find(found)
        while at >= 0:
            if at == 0 or not lowered[at - 1].isalnum():  # a word starts there
                if not compound:
                    match = _WORD.match(lowered, at)
                    if match is not None and _STEMS[match.group()] in wanted:
                        yield at, _STEMS[match.group()]
                elif not _joined_before(lowered, at):
                    match = _COMPOUND.match(lowered, at)
                    if match is not None and match.group() in wanted:
                        yield at, match.group()
            at = lowered.find(found, at + 1)


def _joined_before(text: str, at: int) -> bool:
    """Whether the word at `at` is joined to the one before it (as in `_COMPOUND`): a
    compound found there is part of a longer one, which `term_counts` reads instead."""
    if at < 2 or not text[at - 2].isalnum():
        return False
    join = text[at - 1]
    return join in "_.-" or (join == "," and text[at - 2].isdigit() and text[at].isdigit())


def needle(term: str) -> str:
    """What every `folded_lower` word whose stem is `term` starts with: the stem less
    its last letter (Porter only rewrites a word's end: "happy" is "happi", "hoping" is
    "hope"); a word of one or two letters, kept as it is, and a compound, whole."""
    return term if len(term) <= 2 or is_compound(term) else term[:-1]


# stem -> its irregular forms that its `needle` does not start ("ran", not "given")
_FORMS_OF: dict[str, list[str]] = {}
for _form, _verb in IRREGULAR.items():
    if not _form.startswith(needle(stem(_verb))):
        _FORMS_OF.setdefault(stem(_verb), []).append(_form)


def needles(term: str) -> list[str]:
    """The `needle` of `term`, and the irregular forms whose stem it is ("ran" is
    "run", which does not start it)."""
    return [needle(term), *_FORMS_OF.get(term, ())]


def stems(words: Iterable[str]) -> list[str]:
    """The distinct stems of query words, in order (a compound is kept as it is)."""
    return list(
        dict.fromkeys(_folded(w.lower()) if is_compound(w) else stem(w.lower()) for w in words)
    )


class TurnHit(NamedTuple):
    """A turn found by a query: where, its exchange, its score, the terms it holds."""

    session: str
    turn: int
    pair: int
    score: float
    terms: tuple[str, ...]


class Postings:
    """The turn posting lists of one index database (the caller holds the transaction)."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db
        db.executescript(SCHEMA)

    # -- writing -------------------------------------------------------------
    def last_turn(self, session: str) -> int:
        row = self.db.execute(
            "SELECT last_turn FROM turn_stats WHERE session=?", (session,)
        ).fetchone()
        return int(row[0]) if row else 0

    def add(self, session: str, turns: Sequence[tuple[int, int, str]]) -> int:
        """Append turns (number, first turn of its exchange, text) newer than the last
        one indexed; returns how many.

        A few turns at a time (the daemon's path) wait as plain rows in ``pending``,
        one insert per turn; when `PENDING_TURNS` have gathered, or a large batch comes,
        they all go to the term blocks together.
        """
        row = self.db.execute(
            "SELECT last_turn, pending FROM turn_stats WHERE session=?", (session,)
        ).fetchone()
        last, waiting = (int(row[0]), int(row[1])) if row else (0, 0)
        fresh = [turn for turn in turns if turn[0] > last]
        if not fresh:
            return 0
        if len(fresh) > BATCH_TURNS:  # memory stays bounded on a large import
            for start in range(0, len(fresh), BATCH_TURNS):
                self.add(session, fresh[start : start + BATCH_TURNS])
            return len(fresh)
        terms, bounds, rows, length = _postings(fresh)
        if waiting + len(fresh) < PENDING_TURNS:
            self.db.executemany(
                "INSERT INTO pending(term, session, turn, pair, tf, length) VALUES (?,?,?,?,?,?)",
                zip(
                    _each_term(terms, bounds),
                    repeat(session),
                    *(rows[f].tolist() for f in FIELDS),
                ),
            )
            waiting += len(fresh)
        else:
            if waiting:  # older than the new turns: they go first
                held = self.db.execute(
                    "SELECT term, turn, pair, tf, length FROM pending WHERE session=? "
                    "ORDER BY turn, term",
                    (session,),
                ).fetchall()
                self.db.execute("DELETE FROM pending WHERE session=?", (session,))
                terms, bounds, rows = _by_term(
                    [r[0] for r in held] + _each_term(terms, bounds),
                    np.concatenate([np.array([r[1:] for r in held], dtype=POSTING), rows]),
                )
            # each term's block is a slice of `rows`, not a copy
            blocks = ((term, rows[bounds[at] : bounds[at + 1]]) for at, term in enumerate(terms))
            if last:  # the session has lists (or turns pending) to append to
                for term, block in blocks:
                    self._append(session, term, block)
            else:  # a session's first lists: each term's first block, all at once
                self.db.executemany(
                    "INSERT INTO postings(session, term, block, size, data) VALUES (?,?,0,?,?)",
                    ((session, term, len(block), block.tobytes()) for term, block in blocks),
                )
            waiting = 0
        self.db.execute(
            "INSERT INTO turn_stats(session, docs, length, last_turn, pending) "
            "VALUES (?,?,?,?,?) ON CONFLICT(session) DO UPDATE SET docs=docs+excluded.docs, "
            "length=length+excluded.length, last_turn=excluded.last_turn, "
            "pending=excluded.pending",
            (
                session,
                len(fresh),
                length,
                max(turn[0] for turn in fresh),
                waiting,
            ),
        )
        return len(fresh)

    def _append(self, session: str, term: str, block: np.ndarray) -> None:
        tail = self.db.execute(
            "SELECT id, block, size FROM postings WHERE session=? AND term=? ORDER BY block DESC",
            (session, term),
        ).fetchall()
        number = tail[0][1] + 1 if tail else 0
        parts = [block]
        size = len(block)
        # merge while the older block is no more than twice the newer: O(log n) blocks
        for rowid, old_number, old_size in tail:
            if old_size > 2 * size:
                break
            with self.db.blobopen("postings", "data", rowid, readonly=True) as blob:
                parts.append(np.frombuffer(blob.read(), dtype=POSTING))
            self.db.execute("DELETE FROM postings WHERE id=?", (rowid,))
            number, size = old_number, size + old_size
        data = parts[0] if len(parts) == 1 else np.concatenate(parts[::-1])
        self.db.execute(
            "INSERT INTO postings(session, term, block, size, data) VALUES (?,?,?,?,?)",
            (session, term, number, len(data), data.tobytes()),
        )

    def set_segments(self, session: str, firsts: Sequence[int]) -> None:
        """Record where the session's segments start (topic-level matching)."""
        data = np.array(firsts, dtype="<u4").tobytes()
        self.db.execute(
            "INSERT INTO spans(session, data) VALUES (?,?) "
            "ON CONFLICT(session) DO UPDATE SET data=excluded.data WHERE data != excluded.data",
            (session, data),
        )

    def drop(self, session: str) -> None:
        for table in ("postings", "pending", "turn_stats", "spans"):
            self.db.execute(f"DELETE FROM {table} WHERE session=?", (session,))

    # -- reading -------------------------------------------------------------
    def lists(self, session: str | None, terms: Sequence[str]) -> dict[str, dict[str, np.ndarray]]:
        """Per session (one, or all that hold a term), each term's posting list in turn order."""
        found: dict[str, dict[str, list[bytes]]] = {}
        for term in terms:
            rows = (
                self.db.execute(
                    "SELECT session, id FROM postings WHERE session=? AND term=? ORDER BY block",
                    (session, term),
                )
                if session is not None
                else self.db.execute(
                    "SELECT session, id FROM postings WHERE term=? ORDER BY session, block",
                    (term,),
                )
            ).fetchall()
            for name, rowid in rows:
                # a blob read as a blob: a SELECT of a list of a megabyte or more costs
                # ten times as much (its value is built, then copied, page by page)
                with self.db.blobopen("postings", "data", rowid, readonly=True) as blob:
                    found.setdefault(name, {}).setdefault(term, []).append(blob.read())
            waiting = (
                self.db.execute(
                    "SELECT session, turn, pair, tf, length FROM pending "
                    "WHERE term=? AND session=? ORDER BY turn",
                    (term, session),
                )
                if session is not None
                else self.db.execute(
                    "SELECT session, turn, pair, tf, length FROM pending "
                    "WHERE term=? ORDER BY session, turn",
                    (term,),
                )
            ).fetchall()
            for name in dict.fromkeys(r[0] for r in waiting):
                newest = np.array([r[1:] for r in waiting if r[0] == name], dtype=POSTING)
                found.setdefault(name, {}).setdefault(term, []).append(newest.tobytes())
        return {
            name: {
                t: np.frombuffer(blobs[0] if len(blobs) == 1 else b"".join(blobs), dtype=POSTING)
                for t, blobs in held.items()
            }
            for name, held in found.items()
        }

    def stats(self, session: str) -> tuple[int, float]:
        row = self.db.execute(
            "SELECT docs, length FROM turn_stats WHERE session=?", (session,)
        ).fetchone()
        if not row or not row[0]:
            return 0, 0.0
        return int(row[0]), row[1] / row[0]

    def firsts(self, session: str) -> np.ndarray:
        row = self.db.execute("SELECT data FROM spans WHERE session=?", (session,)).fetchone()
        data = row[0] if row else b""
        return np.frombuffer(data, dtype="<u4").astype(np.int64)

    def search(
        self,
        session: str | None,
        terms: Sequence[str],
        limit: int,
        exclude_after: int | None = None,
        read: dict[str, dict[str, np.ndarray]] | None = None,
        weights: dict[str, float] | None = None,
    ) -> list[TurnHit]:
        """The `limit` best turns for `terms` by BM25 within their session (`None`: in
        every session), best first. `read`: the lists of `terms`, when already read;
        `weights`: a term's weight, which multiplies what it adds to a turn's score (1
        for a term not there)."""
        found: list[TurnHit] = []
        searched = 0
        for name, lists in (self.lists(session, terms) if read is None else read).items():
            docs, avgdl = self.stats(name)
            if docs:
                found += _best(name, lists, docs, avgdl, limit, exclude_after, weights)
                searched += 1
        if searched > 1:  # one session's turns come in this order already
            found.sort(key=lambda hit: (-hit.score, hit.session, hit.turn))
        return found[:limit]

    def topics(
        self,
        session: str,
        terms: Sequence[str],
        limit: int,
        read: dict[str, dict[str, np.ndarray]] | None = None,
    ) -> list[tuple[int, int, float]]:
        """The `limit` segments whose turns, taken together, best match `terms`:
        (first turn, last turn, score), BM25 with a segment as the document (its terms'
        frequencies summed, its length its turn count times the mean turn length)."""
        firsts = self.firsts(session)
        _, avgdl = self.stats(session)
        lists = (self.lists(session, terms) if read is None else read).get(session)
        if not len(firsts) or not lists:
            return []
        # segments partition the turns: each runs up to the next one's first turn
        lasts = np.append(firsts[1:] - 1, max(self.last_turn(session), int(firsts[-1])))
        sizes = (lasts - firsts + 1) * avgdl
        norm = K1 * (1 - B + B * sizes / (float(sizes.mean()) or 1.0))
        total = np.zeros(len(firsts))
        for array in lists.values():
            # a list is in turn order: a segment's postings are a slice of it, and its
            # term frequency a difference of running sums (no pass over the list per segment)
            running = np.concatenate(([0], np.cumsum(array["tf"], dtype=np.int64)))
            starts = np.searchsorted(array["turn"], firsts)
            tf = (running[np.append(starts[1:], len(array))] - running[starts]).astype(np.float64)
            df = int(np.count_nonzero(tf))
            if df:
                total += _idf(len(firsts), df) * tf * (K1 + 1) / (tf + norm)
        hit = np.flatnonzero(total)
        best = hit[np.lexsort((hit, -total[hit]))][:limit]
        return [(int(firsts[i]), int(lasts[i]), float(total[i])) for i in best]


class _Terms(dict[str, int]):
    """term -> 0, 1, 2... in order of first sight, and the terms in that order."""

    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []

    def __missing__(self, term: str) -> int:
        self[term] = number = len(self.names)
        self.names.append(term)
        return number


class _WordNumbers(dict[str, int]):
    """word -> the number of its stem among every term read (`terms`): a batch of
    turns is read into an array of numbers, a dict lookup a word in C, and counted in
    a few array passes, not a Counter a turn."""

    def __init__(self) -> None:
        super().__init__()
        self.terms = _Terms()

    def __missing__(self, word: str) -> int:
        self[word] = number = self.terms[_STEMS[word]]
        return number


NUMBERED_MAX = 1 << 20  # words and terms numbered before the numbers start again
_NUMBERS = _WordNumbers()


def _read(texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """What `term_counts` finds in each of `texts`, for all of them at once: each
    (term, text) found as term number * len(texts) + text (in order: term first), its
    count, each text's length (its terms counted with repeats), and the terms by number."""
    global _NUMBERS
    if len(_NUMBERS) + len(_NUMBERS.terms) > NUMBERED_MAX:  # memory stays bounded
        _NUMBERS = _WordNumbers()
    words = _NUMBERS
    found = int_array("q")  # the term number of each word, then of each extra term
    sizes: list[int] = []
    extra: list[str] = []  # compounds and the words of camel-case names, whole
    extra_of: list[int] = []
    for position, text in enumerate(texts):
        said, besides = _split(text)
        found.extend(map(words.__getitem__, said))
        sizes.append(len(said))
        extra += besides
        extra_of += repeat(position, len(besides))
    found.extend(map(words.terms.__getitem__, extra))
    count = len(texts)
    of = np.concatenate(
        [np.repeat(np.arange(count, dtype=np.int64), sizes), np.array(extra_of, dtype=np.int64)]
    )
    keys, tfs = np.unique(np.frombuffer(found, dtype=np.int64) * count + of, return_counts=True)
    return keys, tfs, np.bincount(of, minlength=count), words.terms.names


def _postings(
    turns: Sequence[tuple[int, int, str]],
) -> tuple[list[str], list[int], np.ndarray, int]:
    """Every (turn, term) of `turns`, term by term, each term's turns in order: the
    terms, where each term's postings start (and the end), the postings, and the total
    length."""
    keys, tfs, lengths, names = _read([turn[2] for turn in turns])
    number, of = np.divmod(keys, len(turns))
    rows = np.empty(len(keys), dtype=POSTING)
    rows["turn"] = np.array([turn[0] for turn in turns], dtype=np.int64)[of]
    rows["pair"] = np.array([turn[1] for turn in turns], dtype=np.int64)[of]
    rows["tf"] = np.minimum(tfs, 0xFFFF)
    rows["length"] = np.minimum(lengths, 0xFFFF)[of]
    starts = np.flatnonzero(np.diff(number, prepend=-1)).tolist()
    terms = [names[n] for n in number[starts].tolist()]
    return terms, [*starts, len(rows)], rows, int(lengths.sum())


def _by_term(terms: list[str], rows: np.ndarray) -> tuple[list[str], list[int], np.ndarray]:
    """Postings of any order (`terms`, one a posting) term by term, each term's in the
    order given: the terms, where each term's postings start (and the end), the rows."""
    vocabulary = _Terms()
    ids = np.fromiter(map(vocabulary.__getitem__, terms), dtype=np.int64, count=len(terms))
    order = np.argsort(ids, kind="stable")
    bounds = np.searchsorted(ids[order], np.arange(len(vocabulary) + 1)).tolist()
    return vocabulary.names, bounds, rows[order]


def _each_term(terms: list[str], bounds: list[int]) -> list[str]:
    """The term of each posting, of postings term by term (see `_postings`)."""
    return [term for at, term in enumerate(terms) for _ in range(bounds[at + 1] - bounds[at])]


def _idf(docs: int, df: int) -> float:
    idf = math.log((docs - df + 0.5) / (df + 0.5))
    return idf if idf > 0 else 1e-6  # as FTS5: a word in most documents still counts a little


def _weights(array: np.ndarray, idf: float, avgdl: float) -> np.ndarray:
    """The BM25 contribution of each posting of a term.

    A contribution depends on the posting's (tf, length) alone, and a long list holds
    few distinct pairs: the formula is evaluated once per pair in a table, and each
    posting takes its entry (a third of the time, and the same bits, since each entry
    is the very same arithmetic on the same numbers)."""
    tf, length = array["tf"], array["length"]
    if len(array) >= 4096:
        most_tf, longest = int(tf.max()), int(length.max())
        if (most_tf + 1) * (longest + 1) * 4 <= len(array):
            tfs = np.arange(most_tf + 1, dtype=np.float64)[:, None]
            norm = K1 * (1 - B + B * np.arange(longest + 1) / avgdl)
            table = (idf * tfs * (K1 + 1) / (tfs + norm)).ravel()
            at = tf.astype(np.intp)
            at *= longest + 1
            at += length
            return np.asarray(table[at])
    tf = tf.astype(np.float64)
    norm = K1 * (1 - B + B * length / avgdl)
    return np.asarray(idf * tf * (K1 + 1) / (tf + norm))


def _bm25(
    lists: dict[str, np.ndarray],
    docs: int,
    avgdl: float,
    weighted: dict[str, float] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Every posting of every term as (turn, BM25 contribution), times the term's
    weight in `weighted` (1 for a term not there)."""
    turns, weights = [], []
    for term, array in lists.items():
        weight = 1.0 if weighted is None else weighted.get(term, 1.0)
        idf = _idf(docs, len(array))
        weights.append(_weights(array, idf * weight, avgdl))
        turns.append(array["turn"])
    return np.concatenate(turns, dtype=np.int64), np.concatenate(weights)


def _floor(scores: np.ndarray, limit: int) -> float:
    """A score that the `limit` best of `scores` all reach: the `limit`-th best of
    every `SAMPLE`-th score, no more than the `limit`-th best of them all (0: unknown).

    Selecting the best turns of a million by partitioning them all costs tens of
    milliseconds (most scores are 0 or equal); the turns that reach this floor are a
    few times `limit`, and sorting them gives the same top `limit`, ties included.
    """
    sample = scores[:: max(1, min(SAMPLE, len(scores) // (4 * limit)))]
    if len(sample) <= limit:
        return 0.0
    return float(np.partition(sample, len(sample) - limit)[-limit])


def _best(
    session: str,
    lists: dict[str, np.ndarray],
    docs: int,
    avgdl: float,
    limit: int,
    exclude_after: int | None,
    weighted: dict[str, float] | None = None,
) -> list[TurnHit]:
    """The `limit` best turns of one session, best first (on a tie, the earliest), each
    with its exchange and the terms it holds (`weighted`: see `_bm25`)."""
    turns, weights = _bm25(lists, docs, avgdl, weighted)
    if exclude_after is not None:
        weights = np.where(turns < exclude_after, weights, 0.0)
    scores = np.bincount(turns, weights=weights)
    floor = _floor(scores, limit)
    best = np.flatnonzero(scores >= floor if floor > 0 else scores > 0)
    best = best[np.lexsort((best, -scores[best]))][:limit]
    held = [0] * len(best)  # the terms each turn holds, a bit each
    pair = np.zeros(len(best), dtype=np.int64)
    start = 0
    for bit, array in enumerate(lists.values()):  # and the turn's exchange
        turns_of = turns[start : start + len(array)]  # this list's turns, contiguous
        start += len(array)
        at = np.minimum(np.searchsorted(turns_of, best), len(turns_of) - 1)
        inside = turns_of[at] == best
        pair[inside] = array["pair"][at[inside]]
        for i in np.flatnonzero(inside).tolist():
            held[i] |= 1 << bit
    # the turns hold a few distinct sets of terms: each set's tuple is made once
    names = list(lists)
    sets = {code: tuple(t for b, t in enumerate(names) if code >> b & 1) for code in set(held)}
    return [
        TurnHit(session, turn, exchange, score, sets[code])
        for turn, exchange, score, code in zip(
            best.tolist(), pair.tolist(), scores[best].tolist(), held, strict=True
        )
    ]
