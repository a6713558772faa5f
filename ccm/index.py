"""The recall index, under ``.ccm/index.sqlite``.

A unit reads well on its own: a user turn with its answer (``pair``), a segment's
summary and conclusion (``segment``), a note (``note``); an exchange in which tools ran (an
agent's, dozens of turns at times) is shown turn by turn (``turn``, a tool's output whole,
indexed by its first and last `TOOL_INDEXED` characters). Exchanges are ranked by their
best turn, with BM25 over ccm's own per-session turn postings (`ccm.lexical`: a query
costs the postings of its words in its session, not the root); segment summaries and
notes, one per segment, by FTS5's ``bm25()``. Both are porter-stemmed and filtered by
session and time. The index is derived: it can be deleted at any time and is rebuilt,
and it is updated incrementally, from where it last read each ``raw.jsonl``: the cost
of an update is that of the new turns (plus the last, still growing, pair).
"""

from __future__ import annotations

import bisect
import contextlib
import dataclasses
import functools
import hashlib
import heapq
import itertools
import logging
import operator
import os
import re
import sqlite3
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ccm import dates, lexical, locks, patterns, tokens
from ccm.engine.text import named_speaker, printable, sentences
from ccm.store import Cursor, Line, Store, probe, resumable, scan_jsonl

log = logging.getLogger(__name__)

OPEN_LOCK = "index.lock"  # held while the index is opened (see `Index.db`)
MODEL_KEY = "vectors.model"  # meta key: the model that made the vectors (`ccm.semantic`)
PROBE_KEY = "probe:"  # meta key (+ session): the `store.probe` of the raw bytes indexed

SCHEMA = """
CREATE TABLE IF NOT EXISTS units(
    id INTEGER PRIMARY KEY,
    session TEXT NOT NULL,
    kind TEXT NOT NULL,
    key TEXT NOT NULL,
    first_turn INTEGER,
    last_turn INTEGER,
    ts TEXT,
    tokens INTEGER NOT NULL,
    shown INTEGER,
    text TEXT NOT NULL,
    tag TEXT NOT NULL,
    speaker TEXT,
    pair INTEGER,
    role TEXT,
    UNIQUE(session, kind, key)
);
CREATE TABLE IF NOT EXISTS meta(
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS speakers(
    session TEXT NOT NULL,
    name TEXT NOT NULL,
    PRIMARY KEY(session, name)
) WITHOUT ROWID;
CREATE VIRTUAL TABLE IF NOT EXISTS units_fts USING fts5(
    text, tag, content='units', content_rowid='id', tokenize='porter unicode61'
);
CREATE TRIGGER IF NOT EXISTS units_ai AFTER INSERT ON units
WHEN new.kind IN ('segment', 'note') BEGIN
    INSERT INTO units_fts(rowid, text, tag) VALUES (new.id, new.text, new.tag);
END;
CREATE TRIGGER IF NOT EXISTS units_ad AFTER DELETE ON units BEGIN
    DELETE FROM vectors WHERE unit = old.id;
END;
CREATE TRIGGER IF NOT EXISTS units_fts_ad AFTER DELETE ON units
WHEN old.kind IN ('segment', 'note') BEGIN
    INSERT INTO units_fts(units_fts, rowid, text, tag) VALUES ('delete', old.id, old.text, old.tag);
END;
CREATE TRIGGER IF NOT EXISTS units_au AFTER UPDATE ON units BEGIN
    DELETE FROM vectors WHERE unit = old.id;
END;
CREATE TRIGGER IF NOT EXISTS units_fts_au AFTER UPDATE ON units
WHEN old.kind IN ('segment', 'note') BEGIN
    INSERT INTO units_fts(units_fts, rowid, text, tag) VALUES ('delete', old.id, old.text, old.tag);
    INSERT INTO units_fts(rowid, text, tag) VALUES (new.id, new.text, new.tag);
END;
-- covering: recall looks up the exchange, speaker and time of hundreds of scattered turns
-- a query; from the index alone, that is a sixth of the time of a row read for each (and
-- a context reads only the exchanges that are short enough to fit)
CREATE INDEX IF NOT EXISTS units_by_turn ON units(
    session, kind, first_turn, pair, speaker, ts, shown, role
);
-- a tool's outputs, by session: which turns and exchanges are an agent's (`_tool_turns`)
CREATE INDEX IF NOT EXISTS units_tools ON units(session, first_turn, pair)
WHERE kind = 'turn' AND role = 'tool';
-- the smallest unit of a kind a context could show: recall stops reading what cannot fit
CREATE INDEX IF NOT EXISTS units_by_shown ON units(session, kind, shown) WHERE shown IS NOT NULL;
CREATE TABLE IF NOT EXISTS vectors(
    unit INTEGER PRIMARY KEY,
    session TEXT NOT NULL,
    turn INTEGER NOT NULL,
    vec BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS vectors_by_session ON vectors(session, turn);
CREATE TABLE IF NOT EXISTS progress(
    session TEXT PRIMARY KEY,
    inode INTEGER,
    offset INTEGER NOT NULL,
    line INTEGER NOT NULL,
    tools INTEGER NOT NULL DEFAULT 0
);
"""
VERSION = 17
MMAP_BYTES = 1 << 31
# Recall's ranking (`Index.recall`); measured on the LoCoMo development subset, chosen
# as round values where recall was flat around them (see the README).
CANDIDATES = 300  # best turns by BM25 that recall starts from
# a query about the first time ("the first fix", "the original panic") or the time before
# something ("before the fix"): of the turns that score at least `EARLIEST_AMONG` of the
# best, the earliest counts 1 + `EARLIEST_BOOST` times, down to once for the latest (an
# episode of several on one subject: the later ones say the question's words as often)
EARLIEST_BOOST = 0.6
EARLIEST_AMONG = 0.3
_EARLIEST = patterns.compile(
    r"(?i)\b(?:first|original|originally|initially|initial|earliest)\b|"
    # ...or about how things were before something: "how slow was it before the fix?"
    r"\bbefore (?:the|any|we|it|they|you)\b"
)
FIGURE_WEIGHT = 2.0  # a query's term that holds a digit counts this many times in BM25
_DIGIT = patterns.compile(r"\d")
TOPIC_WEIGHT = 0.2  # share of a turn's score from how well its whole segment matches
TOPIC_HITS = 20
SPEAKER_BOOST = 1.0  # a turn said by the person the query names counts double
# ... and triple with the meaning of every turn scored: similarity does not know who said
# a thing, and lifts every turn of the session close to the question, so whose it is
# weighs more against it (LoCoMo dev with e5-small, multi-hop at 2,000: 0.736 -> 0.753;
# by words alone a triple weight loses: 0.860 -> 0.857 at 2,000)
SPEAKER_BOOST_BY_MEANING = 2.0
DATE_BOOST = 1.0  # a turn said on the day (or in the month) the query names counts double
NEIGHBOUR_WEIGHT = 0.5  # a turn inherits this share of its better neighbour, its square two away
# a recalled turn longer than this shows what of it answers (`focused`); on the development
# scenarios, shorter excerpts lost more answers than the room they made found
TURN_TOKENS = 400
# a turn's tokens as shown are stored exactly up to this many (past it, only that it has
# more): a context then counts none of the turns it weighs, only the lines it cuts them to
SHOWN_BOUND = 4096
AROUND = 2  # ...and so many lines either side of each line that holds a query's word
# ...but any hit may take up to this share of the room left, to be shown whole: the best
# half of it, the next half of the rest, and so on (a tool's output holds the answer more
# often than not, and in its lines that hold none of the query's words)
HIT_SHARE = 0.5
ALONE_SHARE = 0.1  # an exchange shown by its best turn when the others score below this share
INDEX_BATCH = 20_000  # turns indexed at a time (then up to the next exchange's start)
TOOL_INDEXED = 1000  # characters of a tool's output indexed at each end (see `_indexed`)
LEAST_ROOM = 20  # a context's recall stops reading units when less room than this is left
# ...or when this many turns in a row could not be shown (too long for the room left,
# or no line of them holds a query's word): those after them rank lower still
MISSES = 8
EXCHANGE_WEIGHT = 0.2  # in an agent's exchange: share of a turn's score from its exchange's
NEIGHBOURS_OF = 100  # the best turns whose neighbours are scored too
SEMANTIC_WEIGHT = 1.0  # weight of a turn's similarity in meaning next to its BM25 (best = 1 each)
SEMANTIC_HITS = 200
SUMMARY_WEIGHT = 0.1  # segment summaries and notes: after the exchanges that match
SUMMARY_BOUND = SUMMARY_WEIGHT * (1 + 1e-9)  # above what any summary scores, rounding and all
FIRST_READ = 16  # exchanges a context reads first (then twice as many at each read)
EMBED_BATCH = 256
_STAMP = patterns.compile(r"^\[[^\]]{0,40}\] ")  # the time stamp `render_turn` puts first
TOOL_CHARS = 300
_WORD = patterns.compile(r"[^\W_]+", re.UNICODE)


@dataclass(slots=True)
class Hit:
    """One unit found by a query, and why."""

    session: str
    kind: str
    key: str
    first_turn: int | None
    last_turn: int | None
    ts: str | None
    count: int  # the tokens of `text`; -1 until asked for (see `tokens`)
    text: str
    score: float
    matched: tuple[str, ...]
    why: str = ""
    exchange: int | None = None  # a turn's: the first turn of its exchange

    @property
    def tokens(self) -> int:
        """The tokens of the text as a context shows it (counted when first asked for: a
        listing of every hit need not count the tool outputs it never shows)."""
        if self.count < 0:
            self.count = tokens.count_cached(as_shown(self.kind, self.ts, self.text))
        return self.count

    def said_within(self, since: str | None, until: str | None) -> bool:
        """Whether the unit was said from `since` up to `until` (ISO prefixes, either may
        be None); a unit without a time (a segment summary) cannot be placed in one."""
        if not since and not until:
            return True
        if self.ts is None:
            return False
        return not (since and self.ts < since) and not (until and self.ts > until)

    def as_dict(self) -> dict[str, Any]:
        return {
            "session": self.session,
            "kind": self.kind,
            "key": self.key,
            "turns": [self.first_turn, self.last_turn],
            "ts": self.ts,
            "tokens": self.tokens,
            "score": round(self.score, 4),
            "matched": list(self.matched),
            "why": self.why,
            "text": self.text,
        } | ({"exchange": self.exchange} if self.exchange is not None else {})


def speaker(turn: dict[str, Any]) -> str:
    return named_speaker(turn) or str(turn["role"])


def render_turn(turn: dict[str, Any], clip: int | None = TOOL_CHARS) -> str:
    """One turn as it is shown to the model: date, speaker, text (tool output clipped
    to `clip` characters; None: whole)."""
    content = printable(str(turn["content"]))
    if turn["role"] == "tool" and clip is not None and len(content) > clip:
        content = clipped(content, clip, turn["turn"])
    return f"[{turn['ts'][:16].replace('T', ' ')}] {label(turn)}: {content}"


def label(turn: dict[str, Any]) -> str:
    """Who a rendered turn says said it: the speaker, or the tool whose result it is."""
    return f"{tool_name(turn)} result" if turn["role"] == "tool" else speaker(turn)


def tool_name(turn: dict[str, Any]) -> str:
    return str((turn.get("tool") or {}).get("name") or "tool")


def clipped(content: str, chars: int, turn: int) -> str:
    """The first `chars` characters of a turn's `content`, saying how long it was and
    how to get it whole."""
    return content[:chars].rstrip() + f" \u2026 [{len(content)} chars; @expand(turn {turn})]"


# a word that says something went wrong, in a line of a tool's output ("ERROR ITMS-90189: ...",
# "FAILED tests/...", "WARNING: DATA RACE"), kept when the output is cut between its
# first and last lines; not a line of a diff, nor a word that ends its line (a setting's
# value: "severity: error")
ALARM_WORD = patterns.compile(
    r"\b(?:error|fatal|panic|exception|traceback|fail(?:ed|ure|s)?|data race)\b", re.IGNORECASE
)
ALARM_LINES = 3  # of those, kept at most
ALARM_CHARS = 40  # the least of one worth showing


def excerpt(content: str, chars: int, turn: int) -> str:
    """About `chars` characters of a tool's output: its first lines and its last ones
    (where a command's error or summary is), saying what was left out between them and
    how to get it whole. Lines between them that say something went wrong (a build's
    error amid its log) are kept too, in a third of the room the last lines had."""
    if len(content) <= chars:
        return content
    head, tail = _ends(content, chars // 2)
    between = content[len(head) : len(content) - len(tail)].split("\n")
    alarms = [line.strip() for line in between if _alarm(line)][:ALARM_LINES]
    said: list[str] = []
    if alarms:
        short = _ends(content, chars // 6)[1]
        room = chars - len(head) - len(short)
        for line in alarms:
            if room < ALARM_CHARS:
                break
            said.append(line if len(line) <= room else line[: room - 1].rstrip() + "\u2026")
            room -= len(said[-1]) + 1
        if said:  # (the last lines keep their room when none is said)
            tail = short
    left = len(content) - len(head) - len(tail) - sum(len(line) + 1 for line in said)
    cut = f"\u2026 [{left} of {len(content)} chars; @expand(turn {turn})]"
    return "\n".join([head.rstrip(), *(f"\u2026 {line}" for line in said), cut, tail.lstrip()])


def _alarm(line: str) -> bool:
    """Whether a line of a tool's output says something went wrong (`ALARM_WORD`)."""
    found = ALARM_WORD.search(line)
    return (
        found is not None
        and not line.lstrip().startswith(("+", "-"))
        and bool(line[found.end() :].strip(" \t\"'.,:;)]}"))
    )


def _ends(content: str, size: int) -> tuple[str, str]:
    """The first and the last whole lines of `content` in about `size` characters each
    (a line longer than that, cut)."""
    head = content[:size]
    if "\n" in head:
        head = head[: head.rindex("\n")] or head
    tail = content[-size:]
    if "\n" in tail:
        tail = tail[tail.index("\n") + 1 :] or tail
    return head, tail


LONG_LINE = 240  # characters: a line longer than this is taken a sentence at a time
# lines of a tool's output that only its reading names (`named_in`), taken at most (a
# table of figures the reading quotes would take the room of the lines asked about;
# held-out recall at 1, 3, 6 and 10: 0.834, 0.836, 0.837, 0.838, and at 10 one question
# of the development six lost)
NAMED_LINES = 6
# characters a token: no line but a freak has more, so a line that is too long to fit
# by this reckoning is not counted (`focused`)
CHARS_A_TOKEN = 16
PIECES_KEPT = 256


class _Pieces:
    """The pieces `focused` takes a long turn's text in (its lines, a long line's
    sentences), and all of them as `lexical.folded_lower` reads them, a line each,
    with where each starts: the same turns are recalled request after request, with
    queries that differ."""

    __slots__ = ("camel", "last", "lowered", "pieces", "starts")

    def __init__(self, text: str) -> None:
        pieces: list[str] = []
        for line in text.split("\n"):
            pieces += sentences(line) if len(line) > LONG_LINE else [line]
        self.pieces = pieces
        # the last piece that says something (of a tool's output: how it ended)
        self.last = next((at for at in range(len(pieces) - 1, -1, -1) if pieces[at].strip()), 0)
        joined = "\n".join(pieces)
        # lowered whole: no letter lowers to a line break, so its lines are the pieces'
        self.lowered = lexical.folded_lower(joined)
        lowered = self.lowered.split("\n")
        self.camel = lexical.camel_terms(joined, self.lowered)
        self.starts = list(itertools.accumulate((len(p) + 1 for p in lowered[:-1]), initial=0))

    def held(self, wanted: frozenset[str]) -> list[int]:
        """How many of the `wanted` terms each piece holds."""
        found: dict[int, set[str]] = defaultdict(set)
        for offset, term in lexical.terms_at(self.lowered, wanted, self.camel):
            found[bisect.bisect_right(self.starts, offset) - 1].add(term)
        held = [0] * len(self.pieces)
        for at, terms in found.items():
            held[at] = len(terms)
        return held


# a request recalls a few dozen long turns: this many are kept from one request to the
# next (each takes about seven times its text, and a tool's output can be tens of KB)
@functools.lru_cache(maxsize=PIECES_KEPT)
def _pieces(text: str) -> _Pieces:
    return _Pieces(text)


def focused(
    text: str,
    terms: Iterable[str],
    most: int,
    turn: int,
    tool: bool = False,
    named: frozenset[str] = frozenset(),
) -> tuple[str, int] | None:
    """About `most` tokens of a long turn's `text`: its first line (who said it; a
    command), the lines (of a long line, the sentences) that hold most of the query's
    stemmed `terms` and the `AROUND` lines either side of them (a table's rows under its
    matched header), and, of a tool's output (`tool`), its last line (where a command's error or
    summary is), in their order, with a note saying where to get it whole; None when no
    line that holds a term fits (its first and last lines alone would say nothing asked).
    The terms `named` (by the assistant's reading of a tool's output: `named_in`) count
    too, half as much as a term asked, and lift at most `NAMED_LINES` lines that hold no
    term asked.

    With its tokens: those of its lines, each with its line break (the lines were
    counted when chosen). That is never below the count of the whole, as no tokenizer
    joins pieces across a line break, and above it by a token at most for each line
    whose end takes its line break into its last token (BPE makes one of "|\n")."""
    split = _pieces(text)
    pieces = split.pieces
    asked = frozenset(terms)
    held = split.held(asked)
    if not any(held):
        return None
    # a line's worth: a term asked counts as two the reading names
    only_named = named - asked
    extra = split.held(only_named) if only_named else [0] * len(pieces)
    score = [2 * h + n for h, n in zip(held, extra, strict=True)]
    named_lines = NAMED_LINES
    note = f"\u2026 [{len(text)} chars; @expand(turn {turn})]"
    used = tokens.count_cached(note) + 1
    keep: dict[int, int] = {}  # the lines kept, with their tokens

    def take(at: int) -> bool:
        nonlocal used
        if at in keep or used + 3 + len(pieces[at]) // CHARS_A_TOKEN > most:
            return False  # (a line too long to fit is not counted)
        count = tokens.count_cached(pieces[at])
        if used + count + 3 > most:  # its line, and a gap's line before it
            return False
        keep[at] = count
        used += count + 3
        return True

    take(0)
    if tool:  # how it ended
        take(split.last)
    best = sorted(range(len(pieces)), key=lambda a: (-score[a], a))
    for at in best:
        if not score[at]:
            break
        if not held[at]:  # a line only the reading names: a few of them
            if named_lines <= 0:
                continue
            named_lines -= 1
        take(at)
    if not any(held[at] for at in keep):  # none fits: the rest would say nothing asked
        return None
    for reach in range(1, AROUND + 1):  # then the lines around those (a table's rows)
        for at in best:
            if not score[at]:
                break
            if at not in keep or not held[at]:
                continue
            for near in (at + reach, at - reach):
                if 0 <= near < len(pieces):
                    take(near)
    lines: list[str] = []
    count = tokens.count_cached(note)  # and a line break for each line before it
    gap = tokens.count_cached("\u2026") + 1
    for at, piece in enumerate(pieces):
        if at in keep:
            lines.append(piece)
            count += keep[at] + 1
        elif not lines or lines[-1] != "\u2026":
            lines.append("\u2026")
            count += gap
    if lines[-1] == "\u2026":
        lines.pop()
        count -= gap
    return "\n".join(lines) + "\n" + note, count


_CODE_SPAN = patterns.compile(r"`([^`\n]{1,80})`")


def named_in(reading: str) -> frozenset[str]:
    """The terms an assistant's reading of a tool's output names: what it quotes as code
    (`b7d20e4`, `ca_7f3k`) and its figures ("23 children", "352-365 MB"). The lines of the
    output that hold them are those it read: a question about it is answered there, in
    words it need not share ("why was the cart a cent off?": "b7d20e4 fix(api): round
    weighed lines per line")."""
    said = _STAMP.sub("", reading, count=1)
    found = {
        term
        for span in _CODE_SPAN.findall(said)
        for term in lexical.term_counts(span)
        if len(term) > 2 and term not in STOP
    }
    found.update(
        term for term in lexical.term_counts(said) if len(term) > 2 and _DIGIT.search(term)
    )
    return frozenset(found)


def _indexed(turn: dict[str, Any], text: str) -> str:
    """What of a turn's text is indexed: all of it; of a tool's output, its first and
    last `TOOL_INDEXED` characters (what a command ran and what came of it: its error,
    its summary), which keeps the index of a session of long logs small."""
    if turn["role"] != "tool" or len(text) <= 2 * TOOL_INDEXED:
        return text
    return f"{text[:TOOL_INDEXED]}\n{text[-TOOL_INDEXED:]}"


_FIRST_WORD = patterns.compile(r"[^\W\d_]+")


def _stamp_tokens(text: str, shown: str) -> int:
    """How many more tokens `text` takes than `shown`, the same without the time stamp
    on its first line, counted from the stamp alone: the BPE splits a text into pieces
    before it merges them (the stamp's pieces end at its "]", the next is the speaker
    with the space before it), and the estimate counts pieces, so the two counts differ
    by exactly the stamp's pieces and the speaker's leading space. A text whose shown
    part does not start with a letter is counted whole."""
    stamp = text[: len(text) - len(shown)].rstrip()
    word = _FIRST_WORD.match(shown)
    if word is None or not stamp.endswith("]"):
        return tokens.count_tokens(text) - tokens.count_tokens(shown)
    first = word.group()
    return (
        tokens.count_cached(stamp) + tokens.count_cached(" " + first) - tokens.count_cached(first)
    )


def undated(text: str) -> str:
    """A rendered turn or exchange without the time stamp on its first line."""
    return _STAMP.sub("", text, count=1)


def as_shown(kind: str, ts: str | None, text: str) -> str:
    """A unit's text as a context shows it: an exchange (or a turn) said at a known time
    loses the time stamp on its first line (it is shown under a heading of its day)."""
    return undated(text) if kind in ("pair", "turn") and ts else text


def render_group(group: list[dict[str, Any]], clip: int | None = TOOL_CHARS) -> list[str]:
    """An exchange as lines: its time once, on the first line, then speaker: text.

    The time once per exchange rather than per turn saves about a tenth of the tokens
    of a conversation while keeping every date a "when" question needs.
    """
    return dated_once([render_turn(turn, clip) for turn in group])


def dated_once(rendered: list[str]) -> list[str]:
    """The rendered turns of an exchange as its lines (`render_group`): the time on the
    first line only."""
    lines = rendered[:1]
    for line in rendered[1:]:
        lines.append(line.split("] ", 1)[1] if line.startswith("[") else line)
    return lines


def pairs(turns: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Group turns into units: a user turn with what follows it until the next user turn."""
    groups: list[list[dict[str, Any]]] = []
    for turn in turns:
        if turn["role"] == "user" or not groups:
            groups.append([turn])
        else:
            groups[-1].append(turn)
    return groups


def _meaning(sims: np.ndarray, hits: int) -> tuple[np.ndarray, np.ndarray]:
    """The `hits` turns most similar to the question (indices into `sims`; -inf for a
    turn left out) and a score of each between 0 and 1.

    A model's cosines are not comparable with another's, nor with BM25: e5's lie
    between 0.7 and 0.9 for almost any two texts, MiniLM's between 0 and 0.7. So a
    turn scores by where its cosine lies between the session's typical one (the median)
    and the best one: the best turn by meaning scores 1, as the best by BM25 does."""
    finite = np.isfinite(sims)
    k = min(hits, int(finite.sum()))
    if k == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    best = np.argpartition(-sims, k - 1)[:k]
    top = float(sims[best].max())
    floor = float(np.median(sims[finite]))
    values = np.clip((sims[best] - floor) / max(top - floor, 1e-6), 0.0, 1.0)
    return best, values


# the turns that recall by meaning compares and that have no vector yet
_UNEMBEDDED = (
    "SELECT {what} FROM units u LEFT JOIN vectors v ON v.unit = u.id "
    "WHERE u.session=? AND u.kind='turn' AND u.role != 'tool' AND v.unit IS NULL ORDER BY u.id"
)


@functools.cache
def _model_missing(model: str) -> str | None:
    """Why the embedding `model` cannot run here (logged once a process), or None."""
    from ccm import semantic

    why = semantic.available(model)
    if why is not None:
        log.warning("recall.semantic is on, but recall stays lexical: %s", why)
    return why


class Index:
    """The FTS5 index of one knowledge root."""

    def __init__(self, store: Store, semantic: bool | None = None, shared: bool = False) -> None:
        """`shared`: the connection may be used from any thread (the caller makes sure
        one at a time), as a server that keeps one index open does.

        `semantic`: hybrid recall with config.yaml's ``recall.model`` (from config.yaml
        unless given). Asked for by config where the model cannot run, recall stays
        lexical and `unavailable` says why (logged once); asked for by the caller,
        `embed` raises that."""
        self.store = store
        self.shared = shared
        self.path = store.cache / "index.sqlite"
        self._db: sqlite3.Connection | None = None
        self._postings: lexical.Postings | None = None
        self.model = str(store.config.get("recall", "model"))
        self.unavailable: str | None = None
        if semantic is None:
            semantic = bool(store.config.get("recall", "semantic"))
            if semantic:
                self.unavailable = _model_missing(self.model)
                semantic = self.unavailable is None
        self.semantic = semantic
        self._vectors: dict[str, tuple[int, Any, Any]] = {}
        # per session: the manifest entries (by id, and in order) and notes last
        # indexed (see `_segments`)
        self._seen: dict[str, tuple[dict[str, Any], list[Any], list[Any]]] = {}
        self._counting: str | None = None  # the token method noted in `meta` (see `_count`)
        # per session: how far its log was indexed, and then its tool turns and their
        # exchanges (see `_tool_turns`)
        self._tools: dict[str, tuple[int, tuple[np.ndarray, np.ndarray] | None]] = {}
        # per session: how far its log was indexed, and the exchange of each turn (its
        # first turn; -1 where no unit holds the turn), by turn; None once recalled from
        # with nothing kept yet (see `_exchange_of`)
        self._exchange_kept: dict[str, tuple[int, np.ndarray] | None] = {}

    @property
    def db(self) -> sqlite3.Connection:
        if self._db is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # one process or thread at a time creates the schema (or finds the file
            # damaged): two first opens of a new root race otherwise
            with locks.held(self.path.with_name(OPEN_LOCK)):
                try:
                    db = self._open()
                except sqlite3.OperationalError:
                    raise  # busy or locked: not damage
                except sqlite3.DatabaseError as exc:  # not a database, or a malformed one
                    self._set_aside(exc)
                    db = self._open()
                try:
                    postings = lexical.Postings(db)
                except BaseException:
                    db.close()
                    raise
            self._postings = postings
            self._db = db
            self._counting = None
        return self._db

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(
            self.path, timeout=30, isolation_level=None, check_same_thread=not self.shared
        )

    def _open(self) -> sqlite3.Connection:
        db = self._connect()
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version not in (0, VERSION):  # another layout: built again
                db.close()
                self.path.unlink()
                self._drop_journal()
                db = self._connect()
            # read the file through memory (up to SQLite's limit): the posting lists of a
            # large session are megabytes a query
            db.execute(f"PRAGMA mmap_size={MMAP_BYTES}")
            db.executescript(SCHEMA)
            db.execute("SELECT count(*) FROM progress").fetchone()  # its pages are readable
            db.execute(f"PRAGMA user_version={VERSION}")
        except sqlite3.DatabaseError:
            db.close()
            raise
        return db

    def _drop_journal(self) -> None:
        """The write-ahead log and shared memory of a database file gone: SQLite would
        replay an old log into a new file of the same name."""
        for suffix in ("-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"{self.path}{suffix}")

    def _set_aside(self, exc: sqlite3.DatabaseError) -> None:
        """A damaged index is only a cache: it is moved aside (kept for a look, one
        copy) and built again from the sessions' logs."""
        aside = self.path.with_name(self.path.name + ".damaged")
        log.warning(
            "%s is damaged (%s); set aside as %s and rebuilt from the sessions",
            self.path,
            exc,
            aside.name,
        )
        os.replace(self.path, aside)
        self._drop_journal()
        self._seen.clear()
        self._vectors.clear()
        self._tools.clear()
        self._exchange_kept.clear()

    @property
    def postings(self) -> lexical.Postings:
        """The turns' own posting lists (BM25 over turns; see `ccm.lexical`)."""
        if self._db is None:
            self.db  # noqa: B018  (opening creates them)
        assert self._postings is not None
        return self._postings

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    def __enter__(self) -> Index:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- updating ------------------------------------------------------------
    def _count(self, text: str, bound: int | None = None) -> int:
        """`tokens.count_tokens` (with a `bound`, `tokens.count_within`), noting in
        ``meta`` the method the stored counts are made with: a context uses them as exact
        only when it counts the same way, and counts written under two methods are noted
        as ``mixed`` (until a rebuild)."""
        self._counting_with(tokens.method_in_use())
        if bound is None:
            return tokens.count_tokens(text)
        return tokens.count_within(text, bound, cached=False)

    def _counting_with(self, method: str) -> None:
        if method != self._counting:
            noted = self.counted_with()
            if noted != method:
                self.db.execute(
                    "INSERT OR REPLACE INTO meta(key, value) VALUES ('tokens', ?)",
                    (method if noted is None else "mixed",),
                )
            self._counting = method

    def _count_shown(self, group: list[dict[str, Any]], seen: str, bound: int | None = None) -> int:
        """`_count` of the lines of an exchange or a turn as shown (`seen`: "speaker:
        text" a turn), from the counts of its turns' texts noted where they were read
        (`tokens.note`: the fold counts every turn), when each is and its line can be
        told from it (`tokens.labelled`); else counted (`bound`: see `_count`)."""
        said = [(label(turn), printable(str(turn["content"]))) for turn in group]
        lines = [f"{name}: {content}" for name, content in said]
        if seen != "\n".join(lines):
            return self._count(seen, bound)
        total = 0
        for position, (name, content) in enumerate(said):
            known = tokens.noted(content)
            line = None if known is None else tokens.labelled(name, content, known)
            if line is None:
                return self._count(seen, bound)
            if position < len(lines) - 1:
                line += tokens.line_break(lines[position])
            total += line
        self._counting_with(tokens.method_in_use())
        return total

    def counted_with(self) -> str | None:
        """The token method of every stored count (``bpe`` or ``estimate``), ``mixed``,
        or None before any count was stored."""
        row = self.db.execute("SELECT value FROM meta WHERE key='tokens'").fetchone()
        return str(row[0]) if row else None

    def _progress(self, session: str) -> tuple[int | None, Cursor]:
        row = self.db.execute(
            "SELECT inode, offset, line FROM progress WHERE session=?", (session,)
        ).fetchone()
        return (row[0], Cursor(row[1], row[2])) if row else (None, Cursor())

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        """One write transaction, taken at once (BEGIN IMMEDIATE): concurrent ingests
        and CLI commands updating the index wait for each other instead of racing."""
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    def sessions(self) -> list[str]:
        """The sessions the index holds."""
        return [row[0] for row in self.db.execute("SELECT session FROM progress ORDER BY session")]

    def drop(self, session: str) -> None:
        with self._writing():
            self._forget(session)

    def _forget(self, session: str) -> None:
        """Remove all the index holds of `session` (inside a write transaction)."""
        self._seen.pop(session, None)
        self._tools.pop(session, None)
        self._exchange_kept.pop(session, None)
        self.db.execute("DELETE FROM units WHERE session=?", (session,))
        self.db.execute("DELETE FROM progress WHERE session=?", (session,))
        self.db.execute("DELETE FROM speakers WHERE session=?", (session,))
        self.db.execute("DELETE FROM meta WHERE key=?", (PROBE_KEY + session,))
        self.postings.drop(session)

    def _probe(self, session: str) -> str | None:
        """The `store.probe` of the bytes of raw.jsonl indexed so far."""
        row = self.db.execute("SELECT value FROM meta WHERE key=?", (PROBE_KEY + session,))
        found = row.fetchone()
        return str(found[0]) if found else None

    def update(
        self, session: str, manifest: dict[str, Any] | None = None, embed: bool = True
    ) -> int:
        """Index what was appended to the session since the last update; returns units
        written. With hybrid recall, the new turns are embedded too, unless `embed` is
        false (the caller calls `embed` itself, to show progress)."""
        raw = self.store.raw_path(session)
        try:
            st = raw.stat()
        except FileNotFoundError:
            self.drop(session)
            return 0
        with self._writing():
            written = self._update(session, raw, st, manifest)
        if self.semantic and embed:
            self.embed(session)
        return written

    def embed(self, session: str, progress: Any = None) -> int:
        """Compute the embedding of every turn unit of `session` that has none yet (the
        semantic extra); returns how many. Batches are committed as they are done, so
        an interrupted run resumes where it stopped."""
        from ccm import semantic
        from ccm.errors import CCMError

        try:
            encoder = semantic.encoder(self.model)
        except semantic.Unavailable as exc:
            raise CCMError(str(exc), "or set recall.semantic: false in config.yaml") from exc
        self._vectors_of(self.model)
        query = _UNEMBEDDED.format(what="u.id, u.first_turn, u.text")
        missing = self.db.execute(query, (session,)).fetchall()
        for start in range(0, len(missing), EMBED_BATCH):
            batch = missing[start : start + EMBED_BATCH]
            vectors = encoder.passages([undated(text) for _, _, text in batch])
            with self._writing():
                self.db.executemany(
                    "INSERT OR REPLACE INTO vectors(unit, session, turn, vec) VALUES (?,?,?,?)",
                    [
                        (unit, session, turn, vector.astype("float16").tobytes())
                        for (unit, turn, _), vector in zip(batch, vectors, strict=True)
                    ],
                )
            if progress is not None:
                progress(len(batch))
        return len(missing)

    def unembedded(self, session: str) -> int:
        """How many turns of `session` `embed` would embed now."""
        self._vectors_of(self.model)
        found = self.db.execute(_UNEMBEDDED.format(what="count(*)"), (session,)).fetchone()
        return int(found[0])

    def _vectors_model(self) -> str | None:
        """The model that made the vectors the index holds (None before any)."""
        row = self.db.execute("SELECT value FROM meta WHERE key=?", (MODEL_KEY,)).fetchone()
        return str(row[0]) if row is not None else None

    def _vectors_of(self, model: str) -> None:
        """Make the vectors the index holds those of `model`: another model's are
        deleted (every session's turns are embedded again as they are updated, or by
        `ccm rebuild`), never mixed with its."""
        made = self._vectors_model()
        if made == model:
            return
        with self._writing():
            if made is not None:
                log.warning(
                    "recall.model is now %s: the vectors of %s are embedded again", model, made
                )
            self.db.execute("DELETE FROM vectors")
            self.db.execute(
                "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (MODEL_KEY, model)
            )
        self._vectors.clear()

    def recall_state(self) -> dict[str, Any]:
        """Whether recall is hybrid and with which model, or why it stays lexical
        though asked to be; when hybrid, how many turns are embedded."""
        state: dict[str, Any] = {
            "semantic": self.semantic,
            "model": self.model,
            "unavailable": self.unavailable,
        }
        if self.semantic and self.path.exists():
            state.update(self.embedded())
        return state

    def embedded(self) -> dict[str, Any]:
        """How far hybrid recall is: the model, and how many turns have its vectors."""
        same = self._vectors_model() == self.model
        turns = self.db.execute(
            "SELECT count(*) FROM units WHERE kind='turn' AND role != 'tool'"
        ).fetchone()[0]
        done = self.db.execute("SELECT count(*) FROM vectors").fetchone()[0] if same else 0
        return {"model": self.model, "turns": int(turns), "embedded": int(done)}

    def _semantic(self, query: str, session: str, exclude_after: int | None) -> dict[int, float]:
        """The `SEMANTIC_HITS` turns most similar to `query` by embedding, each with its
        score between 0 and 1 (`_meaning`): top-k, not a fixed threshold."""
        from ccm import semantic

        count = self.db.execute(
            "SELECT count(*) FROM vectors WHERE session=?", (session,)
        ).fetchone()[0]
        if not count or not semantic.HAVE_NUMPY:
            return {}
        if self._vectors_model() != self.model:  # another model's: not comparable
            return {}
        import numpy as np

        cached = self._vectors.get(session)
        if cached is None or cached[0] != count:
            rows = self.db.execute(
                "SELECT turn, vec FROM vectors WHERE session=? ORDER BY turn", (session,)
            ).fetchall()
            turns = np.array([row[0] for row in rows], dtype=np.int64)
            matrix = np.frombuffer(b"".join(row[1] for row in rows), dtype=np.float16)
            cached = (count, turns, matrix.reshape(len(rows), -1).astype(np.float32))
            self._vectors[session] = cached
        _, turns, matrix = cached
        asked = semantic.encoder(self.model).query(query)
        sims = matrix @ asked
        if exclude_after is not None:
            sims = np.where(turns < exclude_after, sims, -np.inf)
        best, values = _meaning(sims, SEMANTIC_HITS)
        return {int(turns[i]): float(v) for i, v in zip(best, values, strict=True)}

    def _update(
        self, session: str, raw: Path, st: os.stat_result, manifest: dict[str, Any] | None
    ) -> int:
        inode, cursor = self._progress(session)
        # the probe is read only for a new inode (a copied or restored log)
        saved = self._probe(session) if inode != st.st_ino else None
        if not resumable(raw, st, inode, cursor.offset, saved):
            self._forget(session)
            cursor = Cursor()
        written, tools = 0, False
        batch: list[Line] = []
        before = cursor  # where the batch's first line starts
        # a batch of whole exchanges at a time: memory does not grow with the log
        for line in scan_jsonl(raw, cursor, "raw_entry"):
            if line.record is None:
                continue
            if len(batch) >= INDEX_BATCH and line.record["role"] == "user":
                count, worked = self._index_lines(session, batch)
                written, tools = written + count, tools or worked
                before = batch[-1].cursor
                batch = []
            batch.append(line)
        if batch:
            count, worked = self._index_lines(session, batch)
            written, tools = written + count, tools or worked
            # start the next update at the last exchange: its answer may still be growing
            last_start = pairs([line.record for line in batch if line.record is not None])[-1]
            resume = before
            for position, line in enumerate(batch):
                if line.record is not None and line.record["turn"] == last_start[0]["turn"]:
                    resume = batch[position - 1].cursor if position else before
                    break
            self.db.execute(
                "INSERT INTO progress(session, inode, offset, line, tools) VALUES (?,?,?,?,?) "
                "ON CONFLICT(session) DO UPDATE SET inode=excluded.inode, "
                "offset=excluded.offset, line=excluded.line, tools=max(tools, excluded.tools)",
                (session, st.st_ino, resume.offset, resume.line, int(tools)),
            )
            self.db.execute(
                "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
                (PROBE_KEY + session, probe(raw, resume.offset)),
            )
        if manifest is not None:
            written += self._segments(session, manifest)
        return written

    def _index_lines(self, session: str, lines: list[Line]) -> tuple[int, bool]:
        """Index `lines` (whole exchanges, but for the last, which may still grow):
        their exchanges and turns as units, their turns' postings and who said them;
        returns the units written and whether a tool ran in them."""
        written = 0
        groups = pairs([line.record for line in lines if line.record is not None])
        said: list[tuple[int, int, str]] = []
        names: set[str] = set()
        units: list[tuple[Any, ...]] = []
        tools = False
        for group in groups:
            # an exchange in which tools ran is recalled turn by turn (role 'tools')
            worked = any(t["role"] == "tool" for t in group)
            whole = [render_turn(turn, None) for turn in group]
            # the exchange's lines are its turns as rendered whole (each turn is
            # rendered once), but for a tool's output, clipped (as `render_group` does)
            exchange = [
                render_turn(turn) if turn["role"] == "tool" else text
                for turn, text in zip(group, whole, strict=True)
            ]
            units.append(
                self._unit(
                    session,
                    "pair",
                    str(group[0]["turn"]),
                    group,
                    "\n".join(dated_once(exchange)),
                    role="tools" if worked else "",
                )
            )
            tools = tools or worked
            # single turns rank better (and are what an agent's exchange shows); a
            # tool's output is a turn too, whole (recalled, it is shown whole)
            for turn, text in zip(group, whole, strict=True):
                name = named_speaker(turn)
                units.append(
                    self._unit(
                        session, "turn", str(turn["turn"]), [turn], text, name, group, worked
                    )
                )
                said.append((turn["turn"], group[0]["turn"], _indexed(turn, text)))
                if name:
                    names.add(name)
        # an unchanged unit is left alone (no churn)
        upserted = self.db.executemany(
            "INSERT INTO units(session, kind, key, first_turn, last_turn, ts, tokens, shown, "
            "text, tag, speaker, pair, role) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?) "
            "ON CONFLICT(session, kind, key) DO UPDATE SET "
            "first_turn=excluded.first_turn, last_turn=excluded.last_turn, ts=excluded.ts, "
            "tokens=excluded.tokens, shown=excluded.shown, text=excluded.text, "
            "role=excluded.role "
            "WHERE units.text != excluded.text OR units.shown IS NOT excluded.shown",
            units,
        )
        written += max(upserted.rowcount, 0)
        self.postings.add(session, said)
        self.db.executemany(
            "INSERT OR IGNORE INTO speakers(session, name) VALUES (?, ?)",
            [(session, name) for name in sorted(names)],
        )
        return written, tools

    def _unit(
        self,
        session: str,
        kind: str,
        key: str,
        group: list[dict[str, Any]],
        text: str | None = None,
        speaker: str | None = None,
        exchange: list[dict[str, Any]] | None = None,
        alone: bool = False,
        role: str | None = None,
    ) -> tuple[Any, ...]:
        """One unit's row in ``units``. A single turn records who said it and the first
        turn of its `exchange`. What a context shows is counted, once: an exchange, or
        the turns of one in which tools ran (each shown `alone`; whole when short, so a
        bound is enough past that); the other counts wait until asked for."""
        text = "\n".join(render_group(group)) if text is None else text
        count, shown = -1, None  # counted when asked for (`Hit.tokens`)
        if alone:
            shown = self._count_shown(group, as_shown(kind, group[0]["ts"], text), SHOWN_BOUND)
        elif kind == "pair" and role != "tools":
            seen = as_shown(kind, group[0]["ts"], text)
            shown = self._count_shown(group, seen)
            count = shown + _stamp_tokens(text, seen) if seen != text else shown
        return (
            session,
            kind,
            key,
            group[0]["turn"],
            group[-1]["turn"],
            group[0]["ts"],
            count,
            shown,
            text,
            _tag_column(kind, session),
            speaker,
            (exchange or group)[0]["turn"],
            group[0]["role"] if kind == "turn" else role,
        )

    def _segments(self, session: str, manifest: dict[str, Any]) -> int:
        """Keep one unit per segment and note, rewritten only when its text changed.

        A long-lived index (the daemon's) remembers the manifest entries it last saw:
        an entry that is the very same object again (the engine reuses the immutable
        entries of unchanged segments) is skipped without a query, so an update costs
        the changed segments, not all of them (the entries are compared with those seen
        in C, a block at a time).
        """
        segments = manifest.get("segments", [])
        notes = manifest.get("notes", [])
        seen = self._seen.get(session)
        # segment ids are seg_1..seg_N in order: a manifest at least as long as the one
        # seen holds every id seen, and a shorter one (a rebuild) takes the full pass
        if seen is not None and seen[1] == notes and len(segments) >= len(seen[0]):
            known = seen[0]
            changed = _not_the_same(segments, seen[2])
            written = self._segment_units(session, changed, None)
            if any(
                s["id"] not in known or s["raw_lines"][0] != known[s["id"]]["raw_lines"][0]
                for s in changed
            ):
                self.postings.set_segments(session, [s["raw_lines"][0] for s in segments])
            for segment in changed:
                known[segment["id"]] = segment
            seen[2][:] = segments
            return written
        written = self._segment_units(session, segments, notes)
        self.postings.set_segments(session, [s["raw_lines"][0] for s in segments])
        self._seen[session] = ({s["id"]: s for s in segments}, list(notes), list(segments))
        return written

    def _segment_units(
        self, session: str, segments: list[dict[str, Any]], notes: list[dict[str, Any]] | None
    ) -> int:
        """Upsert the units of `segments`; with `notes` (a full pass), also the notes, and
        delete the segment and note units that are no longer wanted."""
        if notes is None:  # only these segments: look up just their rows
            have = {}
            for segment in segments:
                row = self.db.execute(
                    "SELECT id, text FROM units WHERE session=? AND kind='segment' AND key=?",
                    (session, segment["id"]),
                ).fetchone()
                if row is not None:
                    have[("segment", segment["id"])] = (row[0], row[1])
        else:
            have = self._all_segment_units(session)
        return self._write_segment_units(session, segments, notes, have)

    def _all_segment_units(self, session: str) -> dict[tuple[str, str], tuple[int, str]]:
        return {
            (kind, key): (rowid, text)
            for rowid, kind, key, text in self.db.execute(
                "SELECT id, kind, key, text FROM units WHERE session=? AND kind IN ('segment','note')",
                (session,),
            )
        }

    def _write_segment_units(
        self,
        session: str,
        segments: list[dict[str, Any]],
        notes: list[dict[str, Any]] | None,
        have: dict[tuple[str, str], tuple[int, str]],
    ) -> int:
        wanted: dict[tuple[str, str], tuple[int | None, int | None, str]] = {}
        for segment in segments:
            conclusion = segment.get("conclusion") or {}
            parts = [
                f"[{segment['id']}, turns {segment['raw_lines'][0]}-{segment['raw_lines'][1]}] "
                f"{', '.join(segment.get('topic', []))}: {segment.get('summary', '')}"
            ]
            if conclusion.get("text") and conclusion["text"] not in segment.get("summary", ""):
                parts.append(f"Conclusion ({conclusion['kind']}): {conclusion['text']}")
            wanted[("segment", segment["id"])] = (
                segment["raw_lines"][0],
                segment["raw_lines"][1],
                printable(" ".join(parts)),
            )
        for note in notes or []:
            wanted[("note", note["id"])] = (None, None, printable(f"Note: {note['text']}"))
        written = 0
        if notes is not None:  # a full pass: what is no longer wanted goes
            for (kind, key), (rowid, _) in have.items():
                if (kind, key) not in wanted:
                    self.db.execute("DELETE FROM units WHERE id=?", (rowid,))
        for (kind, key), (first, last, text) in wanted.items():
            old = have.get((kind, key))
            if old is not None and old[1] == text:
                continue
            count = self._count(text)  # shown whole: its count is also its `shown`
            if old is None:
                self.db.execute(
                    "INSERT INTO units(session, kind, key, first_turn, last_turn, ts, tokens, "
                    "shown, text, tag) VALUES (?,?,?,?,?,NULL,?,?,?,?)",
                    (
                        session,
                        kind,
                        key,
                        first,
                        last,
                        count,
                        count,
                        text,
                        _tag_column(kind, session),
                    ),
                )
            else:
                self.db.execute(
                    "UPDATE units SET first_turn=?, last_turn=?, tokens=?, shown=?, text=? WHERE id=?",
                    (first, last, count, count, text, old[0]),
                )
            written += 1
        return written

    # -- searching -----------------------------------------------------------
    def search(
        self,
        query: str,
        session: str | None = None,
        kinds: tuple[str, ...] = ("pair", "segment", "note"),
        limit: int = 50,
        since: str | None = None,
        until: str | None = None,
        exclude_after: int | None = None,
        explain: bool = True,
    ) -> list[Hit]:
        """Units matching any word of `query`, best first (BM25); with `explain`, each
        hit lists the query words it contains. `since` and `until` (ISO prefixes) keep
        only units said in that time.

        Exchanges (``pair``) are ranked by their best turn, from ccm's own turn
        postings; segment summaries and notes by FTS5, where session and kind are
        filtered inside the match (through the ``tag`` column).
        """
        words = asked_words(query)
        if not words:
            return []
        wanted = limit * 4 if since or until else limit
        found: list[Hit] = []
        if "pair" in kinds:
            found += self._pairs(words, session, wanted, exclude_after, explain)
        summaries = tuple(kind for kind in kinds if kind in ("segment", "note"))
        if summaries:
            found += self._summaries(words, session, summaries, wanted, explain)
        found.sort(key=lambda hit: -hit.score)
        hits: list[Hit] = []
        for hit in found:
            if not hit.said_within(since, until):
                continue
            if exclude_after is not None and (hit.first_turn or 0) >= exclude_after:
                continue
            hits.append(hit)
            if len(hits) >= limit:
                break
        return hits

    def _pairs(
        self,
        words: list[str],
        session: str | None,
        limit: int,
        exclude_after: int | None,
        explain: bool,
    ) -> list[Hit]:
        """Exchanges by the BM25 score of their best turn."""
        turns = self.postings.search(session, lexical.stems(words), limit * 2, exclude_after)
        exchanges = {
            name: self._exchanges(name, [t.pair for t in turns if t.session == name])
            for name in {t.session for t in turns}
        }
        best: dict[tuple[str, int], Hit] = {}
        for turn in turns:
            row = exchanges[turn.session].get(turn.pair)
            if row is None or (turn.session, turn.pair) in best:
                continue
            matched = tuple(w for w in words if _contains(row[5], w)) if explain else ()
            key, first, last, ts, count, text, _ = row
            best[(turn.session, turn.pair)] = Hit(
                turn.session, "pair", key, first, last, ts, count, text, turn.score, matched
            )
            if len(best) >= limit:
                break
        return list(best.values())

    def _exchanges(
        self, session: str, firsts: list[int], most: int | None = None, tools: bool = False
    ) -> dict[int, tuple[Any, ...]]:
        """The exchanges starting at `firsts`, by first turn (one query per 500); with
        `most`, only those shown in that many tokens at most (the text of the others,
        filtered out in SQLite, is not read). With `tools`, the exchanges in which a
        tool ran are given too, whatever their size, without their text (they are shown
        turn by turn)."""
        keys = sorted(set(firsts))
        found: dict[int, tuple[Any, ...]] = {}
        # by first turn, not by size; the size is in the index: a row too long is not read
        span = "role = 'tools'"
        shorter = "" if most is None else " AND +shown <= ?"
        text = "text"
        if tools:
            shorter = "" if most is None else f" AND (+shown <= ? OR {span})"
            text = f"CASE WHEN {span} THEN NULL ELSE text END"
        for start in range(0, len(keys), 500):
            chunk = keys[start : start + 500]
            for row in self.db.execute(
                f"SELECT key, first_turn, last_turn, ts, tokens, {text}, shown FROM units "
                f"WHERE session=? AND kind='pair' AND first_turn IN ({','.join('?' * len(chunk))})"
                + shorter,
                (session, *chunk) if most is None else (session, *chunk, most),
            ):
                found[row[1]] = tuple(row)
        return found

    def _summaries(
        self,
        words: list[str],
        session: str | None,
        kinds: tuple[str, ...],
        limit: int,
        explain: bool,
    ) -> list[Hit]:
        """Segment summaries and notes by FTS5's BM25 (they are few: one per segment)."""
        tags = " OR ".join(tag(kind, session) for kind in kinds)
        text = " OR ".join(f'"{w}"' for w in words)
        ranked = self.db.execute(
            # rank by the text alone (the tag column only filters), set per query: a
            # stored rank setting would be a write that breaks other open connections.
            # bm25() itself, not a per-query `rank MATCH`, which costs FTS5 a statement
            # of its own (the same order: ties by rowid, as FTS5's own sort gives them)
            "SELECT rowid, bm25(units_fts, 1.0, 0.0) AS score FROM units_fts "
            "WHERE units_fts MATCH ? ORDER BY score, rowid LIMIT ?",
            (f"tag:({tags}) AND text:({text})", limit),
        ).fetchall()
        if not ranked:
            return []
        rows = {
            row[0]: row
            for row in self.db.execute(
                "SELECT id, session, kind, key, first_turn, last_turn, ts, tokens, text FROM units "
                f"WHERE id IN ({','.join('?' * len(ranked))})",
                [rowid for rowid, _ in ranked],
            )
        }
        hits = []
        for rowid, rank in ranked:
            if rowid not in rows:
                continue
            _, name, kind, key, first, last, ts, count, text = rows[rowid]
            matched = tuple(w for w in words if _contains(text, w)) if explain else ()
            hits.append(Hit(name, kind, key, first, last, ts, count, text, -rank, matched))
        return hits

    def recall(
        self, query: str, session: str, exclude_after: int | None = None, limit: int = 200
    ) -> list[Hit]:
        """Whole exchanges for `query` (`limit` at most), best first, then segment
        summaries and notes (see `recalled`)."""
        return list(self.recalled(query, session, exclude_after, limit))

    def recalled(
        self,
        query: str,
        session: str,
        exclude_after: int | None = None,
        limit: int = 200,
        shown: frozenset[int] = frozenset(),
    ) -> Recalled:
        """Whole exchanges for `query`, best first, then segment summaries and notes;
        none that holds a turn of `shown` (the context shows it already). An exchange in
        which tools ran gives its turns instead, each on its own score.

        Turns are scored, and an exchange takes the score of its best turn:

        * BM25 of the query's words, relative to the best turn; a figure or an
          identifier counts `FIGURE_WEIGHT` times. The name of a person the query asks
          about is left out: it says whose words to look for, not what they said (and
          "Thanks, Caroline!" matches a name but tells nothing);
        * plus `TOPIC_WEIGHT` times how well the turn's whole segment matches;
        * when the query asks about the first time ("why did the first fix fail?") or
          the time before something ("how slow was it before the fix?"), times
          up to 1 + `EARLIEST_BOOST` by how early it is among the turns that score well
          (`_earliest_first`);
        * plus `SEMANTIC_WEIGHT` times its similarity in meaning (the semantic extra;
          see `_meaning`);
        * times 1 + `SPEAKER_BOOST` (`SPEAKER_BOOST_BY_MEANING` with the semantic extra)
          when said by a person the query names, and times
          1 + `DATE_BOOST` when said on the day or in the month it names;
        * plus `NEIGHBOUR_WEIGHT` times the better of its two neighbours, or its square
          times the better of the turns two away, whichever is more (the neighbours of
          the `NEIGHBOURS_OF` best turns are scored too):
          an answer follows its question, and the fact asked about is often said a
          turn or two before or after the turn whose words match.
        """
        words = asked_words(query)
        names = self.speakers_named(session, query)
        asked = _without_names(query, names)  # what is asked about, for words and meaning
        terms = lexical.stems(asked_words(asked))
        read = self.postings.lists(session, terms) if terms else {}  # once, for both uses
        # a figure or an identifier asked about ("the 240", "48,236", "#142") says which
        # turn is meant more than the words around it do
        figures = {term: FIGURE_WEIGHT for term in terms if _DIGIT.search(term)}
        found = self.postings.search(session, terms, CANDIDATES, exclude_after, read, figures)
        top = max((hit.score for hit in found), default=0.0) or 1.0
        base = {hit.turn: hit.score / top for hit in found}
        held = {hit.turn: hit.terms for hit in found}
        starts = {hit.turn: hit.pair for hit in found}
        why: dict[int, list[str]] = defaultdict(list)
        if self.semantic:
            for turn, value in self._semantic(asked or query, session, exclude_after).items():
                base[turn] = base.get(turn, 0.0) + SEMANTIC_WEIGHT * value
                why[turn].append(f"similar in meaning ({value:.2f})")
        candidates = set(base)
        # what lies next to a weak turn would rank too low to be shown: only the best
        # turns' neighbours are looked at
        best = heapq.nlargest(NEIGHBOURS_OF, base, key=base.__getitem__)
        near = {t for turn in best for t in (turn - 2, turn - 1, turn + 1, turn + 2) if t > 0}
        near -= candidates
        if exclude_after is not None:
            near = {t for t in near if t < exclude_after}
        for turn in near:
            base[turn] = 0.0
        spans = self.postings.topics(session, terms, TOPIC_HITS, read) if terms else []
        topics = _Topics(spans)
        # the candidates as arrays, in the order they were found (which decides ties)
        turns = np.fromiter(base, dtype=np.int64, count=len(base))
        values = np.fromiter(base.values(), dtype=np.float64, count=len(base))
        inside, share = topics.of(turns)
        values[inside] += share[inside]
        if len(turns) > 1 and _EARLIEST.search(query):
            values = values * _earliest_first(turns, values)
        when = dates.window(query)
        # the exchange of each turn the BM25 hits did not give; when who or when matters,
        # with who said each turn and when
        if not (names or when):
            starts.update(self._exchange_of(session, [t for t in base if t not in starts]))
        else:
            facts = self._turn_facts(session, base)
            starts.update((turn, fact[0]) for turn, fact in facts.items())
            boost = SPEAKER_BOOST_BY_MEANING if self.semantic else SPEAKER_BOOST
            place = {turn: at for at, turn in enumerate(base)}
            for turn, (_, name, ts) in facts.items():
                if name in names:
                    values[place[turn]] *= 1 + boost
                    why[turn].append(f"said by {name}")
                if when and when[0] <= ts <= when[1]:
                    values[place[turn]] *= 1 + DATE_BOOST
                    why[turn].append(f"said on {ts[:10]}")
        # the exchanges in which tools ran (an agent's) are ranked and shown turn by turn
        members: list[np.ndarray] | None = None
        tools = first = None
        found_tools = self._tool_turns(session)
        if found_tools is not None:
            first = _exchanges_of(turns, starts)
            tools = _among(turns, found_tools[0])
            values = values + _exchange_share(values, first, _among(first, found_tools[1]))
            members = []
        own = None
        if self.semantic:  # an exchange may be shown by its best turn alone (`Recalled`)
            if first is None:
                first = _exchanges_of(turns, starts)
            members = [] if members is None else members
            own = dict(zip(turns.tolist(), values.tolist(), strict=True))
        exchange = _best_of_exchanges(turns, values, starts, tools, members, first)
        if spans:  # the rest of the best topics' exchanges, on their topic's score
            end = exclude_after - 1 if exclude_after is not None else None
            bounds = [(first, last if end is None else min(last, end)) for first, last, _ in spans]
            # one range search each (an OR of ranges would scan every exchange)
            select = "SELECT first_turn FROM units WHERE session=? AND kind='pair' AND first_turn "
            firsts = np.array(
                self.db.execute(
                    " UNION ALL ".join(select + "BETWEEN ? AND ?" for _ in bounds),
                    [n for first, last in bounds for n in (session, first, last)],
                ).fetchall(),
                dtype=np.int64,
            ).reshape(-1)
            _, share = topics.of(firsts)
            for start, value in zip(firsts.tolist(), share.tolist(), strict=True):
                exchange.setdefault(start, (value, start))
        return Recalled(
            self,
            session,
            words,
            exclude_after,
            exchange,
            limit,
            held,
            why,
            near,
            members,
            shown,
            own,
        )

    def _tool_turns(self, session: str) -> tuple[np.ndarray, np.ndarray] | None:
        """The turns of `session` that are a tool's output and their exchanges (both
        sorted), or None when no tool ran. Read once, then only those of the turns
        indexed since (by this index or another writer: the last turn indexed tells),
        as a turn keeps its number and its exchange."""
        last = self.postings.last_turn(session)
        kept = self._tools.get(session)
        if kept is not None and kept[0] == last:
            return kept[1]
        found: tuple[np.ndarray, np.ndarray] | None = None
        if self.has_tool_exchanges(session):
            since, known = (kept[0], kept[1]) if kept is not None and kept[0] < last else (0, None)
            rows = self.db.execute(
                "SELECT first_turn, pair FROM units WHERE session=? AND kind='turn' "
                "AND role='tool' AND first_turn > ? ORDER BY first_turn",
                (session, since),
            ).fetchall()
            array = np.array(rows, dtype=np.int64).reshape(-1, 2)
            found = (array[:, 0].copy(), np.unique(array[:, 1]))
            if known is not None:
                found = (np.concatenate([known[0], found[0]]), np.union1d(known[1], found[1]))
        self._tools[session] = (last, found)
        return found

    def _exchange_of(self, session: str, turns: list[int]) -> dict[int, int]:
        """The first turn of the exchange of each of `turns` that a unit holds: at the
        first recall of `session`, read for those turns; from the second, kept for every
        turn, then read only for the turns indexed since (as `_tool_turns`: a turn keeps
        its number and its exchange)."""
        if session not in self._exchange_kept:
            # a process that answers one question (a hook's, a command's) reads only
            # the turns it asks about; from its second on, the index keeps them all
            self._exchange_kept[session] = None
            return {turn: fact[0] for turn, fact in self._turn_facts(session, turns).items()}
        kept = self._exchange_kept[session]
        last = self.postings.last_turn(session)
        if kept is None or kept[0] != last:
            since, known = kept if kept is not None and kept[0] < last else (0, None)
            pairs = np.full(last + 1, -1, dtype=np.int32)  # 4 MB a million turns
            if known is not None:
                pairs[: len(known)] = known
            rows = self.db.execute(  # (to `last`: another writer may have gone on)
                "SELECT first_turn, pair FROM units WHERE session=? AND kind='turn' "
                "AND first_turn > ? AND first_turn <= ?",
                (session, since, last),
            ).fetchall()
            if rows:
                array = np.array(rows, dtype=np.int64)
                pairs[array[:, 0]] = array[:, 1]
            kept = (last, pairs)
            self._exchange_kept[session] = kept
        pairs = kept[1]
        wanted = np.array([t for t in turns if 0 <= t < len(pairs)], dtype=np.int64)
        found = pairs[wanted]
        held = found >= 0
        return dict(zip(wanted[held].tolist(), found[held].tolist(), strict=True))

    def has_tool_exchanges(self, session: str) -> bool:
        """Whether a tool ran in an exchange of `session`."""
        row = self.db.execute("SELECT tools FROM progress WHERE session=?", (session,)).fetchone()
        return bool(row and row[0])

    def _turns(self, session: str, turns: list[int]) -> dict[int, tuple[Any, ...]]:
        """The units of `turns`: turn -> (turn, ts, text, first turn of its exchange,
        role, its tokens as shown: see `SHOWN_BOUND`)."""
        found: dict[int, tuple[Any, ...]] = {}
        for start in range(0, len(turns), 500):
            chunk = turns[start : start + 500]
            for row in self.db.execute(
                "SELECT first_turn, ts, text, pair, role, shown FROM units "
                "WHERE session=? AND kind='turn' "
                f"AND first_turn IN ({','.join('?' * len(chunk))})",
                (session, *chunk),
            ):
                found[row[0]] = tuple(row)
        return found

    def speakers_named(self, session: str, query: str) -> list[str]:
        """The people of `session` (by the names its turns give) that `query` mentions."""
        lowered = {w.lower() for w in _WORD.findall(query)}
        return [
            name
            for (name,) in self.db.execute(
                "SELECT name FROM speakers WHERE session=? ORDER BY name", (session,)
            )
            if any(part.lower() in lowered for part in _WORD.findall(name) if len(part) > 1)
        ]

    def _turn_facts(self, session: str, turns: Iterable[int]) -> dict[int, tuple[int, str, str]]:
        """For each of `turns` that is said (not a tool's output): the first turn of its
        exchange, who said it (the name its source gives, or ""), and when."""
        wanted = sorted(turns)
        found: dict[int, tuple[int, str, str]] = {}
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            for turn, pair, name, ts in self.db.execute(
                "SELECT first_turn, pair, speaker, ts FROM units WHERE session=? AND kind='turn' "
                f"AND first_turn IN ({','.join('?' * len(chunk))})",
                (session, *chunk),
            ):
                found[turn] = (pair, name or "", ts or "")
        return found

    def count(self, session: str | None = None) -> int:
        if session is None:
            return int(self.db.execute("SELECT count(*) FROM units").fetchone()[0])
        return int(
            self.db.execute("SELECT count(*) FROM units WHERE session=?", (session,)).fetchone()[0]
        )


class Recalled:
    """The hits of one recall, best first, each read from the index when it is reached.

    Iterating lists whole exchanges (as ``ccm recall`` shows them); `shown`, what a
    context shows, takes an exchange in which tools ran apart into its turns (`_units`).

    Recall ranks every exchange that could answer, hundreds, and a context shows about
    a dozen: reading the text of all of them, explaining and counting them, would cost
    as much as ranking them. Iterating gives every hit (what `Index.recall` returns);
    `shown` gives them with their token counts and leaves unread those of a kind that
    can no longer fit.
    """

    def __init__(
        self,
        index: Index,
        session: str,
        words: list[str],
        exclude_after: int | None,
        exchange: dict[int, tuple[float, int]],
        limit: int,
        held: dict[int, tuple[str, ...]],
        why: dict[int, list[str]],
        near: set[int],
        members: list[np.ndarray] | None = None,
        shown: frozenset[int] = frozenset(),
        own: dict[int, float] | None = None,
    ) -> None:
        self._index = index
        self._members = members
        self._own = own
        self._shown = shown
        self._session = session
        self._words = words
        self._exclude_after = exclude_after
        self._limit = limit
        self._held = held
        self._why = why
        self._near = near
        self._stemmed = [(word, lexical.stems([word])[0]) for word in words]
        self._terms = {term for _, term in self._stemmed}
        # best first: by score, then the earliest exchange (a heap: most are never read)
        self._order = [(-value, first, turn) for first, (value, turn) in exchange.items()]
        heapq.heapify(self._order)

    def __iter__(self) -> Iterator[Hit]:
        return (hit for hit, _ in self._walk(None, False))

    def shown(self, room: Callable[[], int]) -> Iterator[tuple[Hit, int]]:
        """The hits, each with the tokens of its text as a context shows it (`as_shown`),
        leaving out those that cannot fit when `room()` tokens are left for a text: once
        room is below the smallest exchange (or summary or note) of the session, no more
        of them are read."""
        counted = self._index.counted_with() == tokens.method_in_use()
        for hit, count in self._walk(room, counted):
            # counts stored under another method are not this context's: count again
            yield (
                hit,
                count if counted else tokens.count_cached(as_shown(hit.kind, hit.ts, hit.text)),
            )

    def _walk(self, room: Callable[[], int] | None, counted: bool) -> Iterator[tuple[Hit, int]]:
        """The exchanges in order with the summaries merged in by score (on a tie, the
        exchange first); with `room` and `counted`, a unit that cannot fit is not read."""
        fit = room if counted else None
        pair_least, summary_least = self._least() if fit is not None else (0, 0)
        first_read = self._limit if room is None else FIRST_READ
        pairs: Iterator[tuple[Hit, int]] | None = (
            self._pairs(first_read, fit, pair_least)
            if self._members is None or room is None  # a listing gives whole exchanges
            else self._units(first_read, fit)
        )
        summaries: list[tuple[Hit, int]] | None = None if self._words else []
        pair: tuple[Hit, int] | None = None
        while True:
            if pair is None and pairs is not None:
                pair = next(pairs, None)
                if pair is None:  # none left, or none that fits
                    pairs = None
            # a summary scores SUMMARY_WEIGHT at most (FTS5's bm25 gives any match a
            # negative rank): they are read when the next exchange scores no more
            if summaries is None and (pair is None or pair[0].score <= SUMMARY_BOUND):
                fits = fit is None or fit() >= summary_least
                summaries = self._summaries() if fits else []
            while summaries and (pair is None or summaries[0][0].score > pair[0].score):
                yield summaries.pop(0)
            if pair is None:
                return
            yield pair
            pair = None

    def _pairs(
        self, first_read: int, fit: Callable[[], int] | None, least: int
    ) -> Iterator[tuple[Hit, int]]:
        """The ranked exchanges, up to the limit, read `first_read` at first and then
        twice as many each time; with `fit`, only those shown in `fit()` tokens, and
        none once that is below `least` (the smallest exchange)."""
        order = list(self._order)
        left, size = self._limit, first_read
        while left > 0 and order:
            most = None if fit is None else fit()
            if most is not None and most < least:
                return
            chunk = [heapq.heappop(order) for _ in range(min(size, left, len(order)))]
            left -= len(chunk)
            rows = self._index._exchanges(self._session, [first for _, first, _ in chunk], most)
            for negative, first, turn in chunk:
                row = rows.get(first)
                if row is None:  # gone, or too long
                    continue
                if self._exclude_after is not None and row[1] >= self._exclude_after:
                    continue
                if self._shown and not self._shown.isdisjoint(range(row[1], row[2] + 1)):
                    continue
                yield self._pair(-negative, turn, row), row[6]
            size *= 2

    def _units(self, first_read: int, fit: Callable[[], int] | None) -> Iterator[tuple[Hit, int]]:
        """`_pairs` for a session in which tools ran: an exchange with a tool's output
        (an agent's: a request, then tool calls, their results and readings, dozens of
        them at times) gives its scored turns instead, each a hit of its own, on its own
        score, shown whole (and counted as a hit towards the limit), and the assistant turn
        that ends it at the exchange's score. The exchange rows are read `first_read` at
        first and then twice as many each time, as needed."""
        # exchanges as (-score, first, best turn); a turn of one taken apart as
        # (-score, first, turn, 1): the two order together
        order: list[tuple[Any, ...]] = list(self._order)
        firsts, values, turns = self._members or [np.zeros(0, dtype=np.int64)] * 3
        # where each exchange's scored turns are in those arrays (they are by exchange)
        keys, starts_at, sizes = np.unique(firsts, return_index=True, return_counts=True)
        ends = (starts_at + sizes).tolist()
        spans = dict(zip(keys.tolist(), zip(starts_at.tolist(), ends, strict=True), strict=True))
        end = self._exclude_after
        read: dict[int, tuple[Any, ...] | None] = {}
        rows_of: dict[int, tuple[Any, ...]] = {}  # the turns of the exchanges taken apart
        left, size = self._limit, first_read
        missed = 0  # turns in a row that could not be shown
        while left > 0 and order:
            most = None if fit is None else fit()
            if most is not None and most < LEAST_ROOM:  # nothing more worth showing fits
                return
            entry = heapq.heappop(order)
            negative, first, turn = entry[:3]
            if len(entry) == 4:
                found = self._single(-negative, rows_of.get(turn), most, rows_of)
                if found is not None:
                    missed = 0
                    left -= 1  # a hit, as an exchange is
                    yield found
                elif most is not None and (missed := missed + 1) >= MISSES:
                    return
                continue
            if first not in read:
                ahead = [e[1] for e in heapq.nsmallest(size, order) if len(e) == 3]
                wanted = [first, *(f for f in ahead if f not in read)]
                rows = self._index._exchanges(self._session, wanted, most, tools=True)
                read.update((f, rows.get(f)) for f in wanted)
                size *= 2
                # the scored turns of those in which tools ran, read at once
                parts = [f for f, row in rows.items() if row[5] is None]
                bounds = [spans.get(f, (0, 0)) for f in parts]
                taken = [t for a, b in bounds for t in turns[a:b].tolist()]
                closing = [rows[f][2] for f in parts]
                rows_of.update(self._index._turns(self._session, taken + parts + closing))
            row = read[first]
            if row is None:  # gone, or too long
                left -= 1
                continue
            if row[5] is None:  # a tool ran in it: turn by turn (each counts when shown)
                start, stop = spans.get(first, (0, 0))  # its scored turns
                scored = dict(
                    zip(turns[start:stop].tolist(), values[start:stop].tolist(), strict=True)
                ) or {turn: -negative}
                # the assistant's reading that closes it says what the tools found,
                # often in none of the words asked: it ranks as the exchange does
                reading = rows_of.get(row[2])
                if reading is not None and reading[4] == "assistant":
                    scored[row[2]] = max(scored.get(row[2], 0.0), -negative)
                for member, value in scored.items():
                    if (end is None or member < end) and member not in self._shown:
                        heapq.heappush(order, (-value, first, member, 1))
                continue
            if end is not None and row[1] >= end:
                left -= 1
                continue
            if self._shown and not self._shown.isdisjoint(range(row[1], row[2] + 1)):
                left -= 1
                continue
            alone = self._alone(row, spans.get(first, (0, 0)), values, turns) if fit else None
            if alone is not None:  # its best turn, at its score; the others on their own
                rows_of.update(self._index._turns(self._session, list(range(row[1], row[2] + 1))))
                heapq.heappush(order, (negative, first, alone, 1))
                for value, member in zip(
                    values[slice(*spans.get(first, (0, 0)))].tolist(),
                    turns[slice(*spans.get(first, (0, 0)))].tolist(),
                    strict=True,
                ):
                    if member != alone:
                        heapq.heappush(order, (-value, first, member, 1))
                continue
            left -= 1
            yield self._pair(-negative, turn, row), row[6]

    def _alone(
        self, row: tuple[Any, ...], span: tuple[int, int], values: np.ndarray, turns: np.ndarray
    ) -> int | None:
        """The turn an exchange (its `row`; its scored turns at `span` of `values` and
        `turns`) is shown by alone, when its other turns' own scores (before what their
        neighbours lend them) are below `ALONE_SHARE` of its best: a reply that says
        nothing asked about costs room that another exchange's answer could take. With
        the meaning of every turn scored (the semantic extra) only: by words alone, an
        answer worded apart from the question scores nothing, and goes with its question."""
        if self._own is None or row[2] <= row[1]:
            return None
        scored = sorted(
            (self._own.get(member, 0.0), member) for member in turns[slice(*span)].tolist()
        )
        if not scored or scored[-1][0] <= 0.0:
            return None
        best, turn = scored[-1]
        others = [score for score, member in scored[:-1] if row[1] <= member <= row[2]]
        return turn if max(others, default=0.0) < ALONE_SHARE * best else None

    def _single(
        self,
        value: float,
        row: tuple[Any, ...] | None,
        most: int | None,
        read: dict[int, tuple[Any, ...]],
    ) -> tuple[Hit, int] | None:
        """One turn of an exchange in which tools ran (its unit's `row`, see
        `Index._turns`) as a hit, whole, if it can be shown in `most` tokens (in the
        larger of `TURN_TOKENS` and `HIT_SHARE` of `most` at most), else what of it
        answers the query. Its tokens are counted when a context may show it (with
        `most`), else when first asked for (a listing of every hit reads tool outputs of
        kilobytes)."""
        if row is None:
            return None
        turn, ts, text, pair, role, stored = row
        count = -1  # counted when asked for
        if most is not None:
            cap = min(most, max(TURN_TOKENS, int(most * HIT_SHARE)))
            if stored is not None and min(stored, cap) <= SHOWN_BOUND:
                count = stored  # exact, or more than the cap
            else:  # as a context shows it, under its day
                count = tokens.count_within(as_shown("turn", ts, text), cap)
            if count > cap:  # what of it answers the query
                seen = as_shown("turn", ts, text)
                stamp = _stamp_tokens(text, seen) if seen != text else 0
                # of a tool's output, also the lines its reading names (`named_in`)
                named = self._reading_names(turn, pair, read) if role == "tool" else frozenset()
                part = focused(text, self._terms, cap + stamp, turn, role == "tool", named)
                if part is None:
                    return None
                text, count = part
                if as_shown("turn", ts, text) != text:  # its first line, stamp and all
                    count -= stamp
                if count > most:
                    return None
        return self._pair(value, turn, (str(turn), turn, turn, ts, count, text), pair), count

    def _reading_names(
        self, turn: int, exchange: int, read: dict[int, tuple[Any, ...]]
    ) -> frozenset[str]:
        """What the assistant turn that reads a tool's output (the turn after it, in the
        same exchange) names of it (`named_in`); empty when no such turn follows. Its row
        is looked up in those `read` already (an exchange's scored turns and the reading
        that closes it), else read."""
        row = read.get(turn + 1) or self._index._turns(self._session, [turn + 1]).get(turn + 1)
        if row is None or row[4] != "assistant" or row[3] != exchange:
            return frozenset()
        return named_in(row[2])

    def _pair(
        self, value: float, turn: int, row: tuple[Any, ...], exchange: int | None = None
    ) -> Hit:
        """An exchange as a hit, with the query words it holds and why it was found; with
        `exchange` (the first turn of the exchange it is part of), a single turn."""
        key, first_turn, last_turn, ts, count, text = row[:6]
        held, why = self._held, self._why
        if first_turn == last_turn:  # a turn: most hits of an agent's session
            terms_in: Collection[str] = held.get(first_turn, ())
            given = why.get(first_turn, ())
        else:
            inside = range(first_turn, last_turn + 1)
            terms_in = {term for t in inside for term in held.get(t, ())}
            given = [r for t in inside for r in why.get(t, ())]
        matched = tuple(word for word, term in self._stemmed if term in terms_in)
        reasons = [f"matched: {', '.join(matched)}"] if matched else []
        reasons += given
        if not matched and turn in self._near:
            reasons.append("next to a hit")
        elif not reasons:
            reasons.append("its segment matches")
        return Hit(
            self._session,
            "pair" if exchange is None else "turn",
            key,
            first_turn,
            last_turn,
            ts,
            count,
            text,
            value,
            matched,
            "; ".join(dict.fromkeys(reasons)),
            exchange,
        )

    def _summaries(self) -> list[tuple[Hit, int]]:
        """The segment summaries and notes that match, scored below the exchanges (the
        best at `SUMMARY_WEIGHT`), with their token counts (they are shown whole)."""
        found = self._index._summaries(self._words, self._session, ("segment", "note"), 10, True)
        best = max((hit.score for hit in found), default=0.0) or 1.0
        end = self._exclude_after
        return [
            (
                dataclasses.replace(
                    hit,
                    score=SUMMARY_WEIGHT * hit.score / best,
                    why=f"matched: {', '.join(hit.matched)}" if hit.matched else "",
                ),
                hit.tokens,
            )
            for hit in found
            if end is None or hit.first_turn is None or hit.first_turn < end
        ]

    def _least(self) -> tuple[int, int]:
        """The fewest tokens any exchange of the session, and any of its segment
        summaries and notes, is shown in (0 when there are none): a query per kind, each
        one seek in ``units_by_shown`` (a GROUP BY would walk every exchange's entry)."""
        least = {
            kind: self._index.db.execute(
                "SELECT min(shown) FROM units WHERE session=? AND kind=? AND shown IS NOT NULL",
                (self._session, kind),
            ).fetchone()[0]
            for kind in ("pair", "segment", "note")
        }
        summary = [n for n in (least["segment"], least["note"]) if n is not None]
        return least["pair"] or 0, min(summary, default=0)


STOP = frozenset(
    [
        "a",
        "an",
        "the",
        "and",
        "or",
        "of",
        "to",
        "in",
        "on",
        "at",
        "for",
        "with",
        "by",
        "from",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "do",
        "does",
        "did",
        "i",
        "you",
        "he",
        "she",
        "it",
        "we",
        "they",
        "me",
        "him",
        "her",
        "us",
        "them",
        "my",
        "your",
        "his",
        "its",
        "our",
        "their",
        "this",
        "that",
        "these",
        "those",
        "what",
        "which",
        "who",
        "whom",
        "when",
        "where",
        "why",
        "how",
        "would",
        "could",
        "should",
        "will",
        "can",
        "may",
        "might",
        "must",
        "shall",
        "have",
        "has",
        "had",
        "not",
        "no",
        "yes",
        "so",
        "if",
        "then",
        "than",
        "as",
        "about",
        "into",
        "over",
        "after",
        "before",
        "up",
        "down",
        "out",
        # what a question asks with, not about: its quantifiers and adverbs ("how many
        # miles has it really done?"), what is left of a contraction ("didn't": "didn"),
        # and the words that frame it ("what kind of", "what did we end up", "the first")
        "many",
        "much",
        "really",
        "actually",
        "finally",
        "exactly",
        "ever",
        "just",
        "still",
        "even",
        "already",
        "also",
        "very",
        "recently",
        "kind",
        "type",
        "sort",
        "first",
        "end",
        "didn",
        "don",
        "doesn",
        "isn",
        "wasn",
        "aren",
        "weren",
        "hasn",
        "haven",
        "hadn",
        "wouldn",
        "couldn",
        "shouldn",
    ]
)


class _Topics:
    """The best topics (segments) for a query: which of them a turn lies in, and the
    share of a score that gives it (`TOPIC_WEIGHT` for the best topic)."""

    def __init__(self, spans: list[tuple[int, int, float]]) -> None:
        ordered = sorted(spans)
        self.firsts = np.array([first for first, _, _ in ordered], dtype=np.int64)
        self.lasts = np.array([last for _, last, _ in ordered], dtype=np.int64)
        best = max((score for _, _, score in ordered), default=0.0) or 1.0
        scores = np.array([score for _, _, score in ordered], dtype=np.float64)
        self.shares = TOPIC_WEIGHT * scores / best

    def of(self, turns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Whether each of `turns` lies in a best topic, and the share it gets (0 if not)."""
        if not len(self.firsts):
            return np.zeros(len(turns), dtype=bool), np.zeros(len(turns))
        at = np.searchsorted(self.firsts, turns, side="right") - 1
        inside = (at >= 0) & (turns <= self.lasts[np.maximum(at, 0)])
        return inside, np.where(inside, self.shares[np.maximum(at, 0)], 0.0)


def _best_of_exchanges(
    turns: np.ndarray,
    values: np.ndarray,
    starts: dict[int, int],
    tools: np.ndarray | None = None,
    ranked_out: list[np.ndarray] | None = None,
    first: np.ndarray | None = None,
) -> dict[int, tuple[float, int]]:
    """Each exchange's score and best turn: first turn -> (score, turn); with
    `ranked_out`, also every scored turn, as three arrays (its exchange, its score, the
    turn) ordered by exchange and, within one, best first.

    A turn's score is its value plus `NEIGHBOUR_WEIGHT` times the better of its two
    neighbours' values, or its square times the better of the turns two away, whichever
    is more; a tool's output (where `tools` is true) takes the whole value of the turn
    after it, which reads it, if that is more. On a tie within an exchange, the turn
    found first wins. `first`: each turn's exchange, when the caller has it."""
    order = np.argsort(turns, kind="stable")
    ordered, by_turn = turns[order], values[order]

    def beside(step: int) -> np.ndarray:
        at = np.minimum(np.searchsorted(ordered, ordered + step), len(ordered) - 1)
        return np.where(ordered[at] == ordered + step, by_turn[at], 0.0)

    near = np.maximum(beside(-1), beside(1))
    apart = np.maximum(beside(-2), beside(2))
    inherited = np.maximum(NEIGHBOUR_WEIGHT * near, NEIGHBOUR_WEIGHT**2 * apart)
    if tools is not None and tools.any():  # a tool's output is what the next turn reads
        inherited = np.where(tools[order], np.maximum(inherited, beside(1)), inherited)
    scores = np.empty_like(values)
    scores[order] = by_turn + inherited
    if first is None:
        first = _exchanges_of(turns, starts)
    keep = (first >= 0) & (scores > 0.0)
    found = np.flatnonzero(keep)
    # best first within each exchange, the earliest found on a tie
    ranked = found[np.lexsort((found, -scores[found], first[found]))]
    lead = np.ones(len(ranked), dtype=bool)
    lead[1:] = first[ranked][1:] != first[ranked][:-1]
    chosen = ranked[lead]
    if ranked_out is not None:
        ranked_out[:] = [first[ranked], scores[ranked], turns[ranked]]
    return {
        exchange: (value, turn)
        for exchange, value, turn in zip(
            first[chosen].tolist(), scores[chosen].tolist(), turns[chosen].tolist(), strict=True
        )
    }


def _earliest_first(turns: np.ndarray, values: np.ndarray) -> np.ndarray:
    """What each turn's value is multiplied by when a query asks about the first time
    or the time before something: of those that score at least `EARLIEST_AMONG` of the
    best, the earliest 1 + `EARLIEST_BOOST`, the next ones less by rank, the latest 1;
    the others 1."""
    factor = np.ones(len(values))
    strong = np.flatnonzero(values >= EARLIEST_AMONG * values.max())
    if len(strong) > 1:
        by_turn = strong[np.argsort(turns[strong], kind="stable")]
        factor[by_turn] += EARLIEST_BOOST * np.linspace(1.0, 0.0, len(by_turn))
    return factor


def _among(values: np.ndarray, sorted_array: np.ndarray) -> np.ndarray:
    """Which of `values` are in `sorted_array` (a binary search each)."""
    if not len(sorted_array):
        return np.zeros(len(values), dtype=bool)
    at = np.minimum(np.searchsorted(sorted_array, values), len(sorted_array) - 1)
    return np.asarray(sorted_array[at] == values)


def _exchanges_of(turns: np.ndarray, starts: dict[int, int]) -> np.ndarray:
    """The first turn of each turn's exchange (-1 where `starts` does not say)."""
    get = starts.get
    return np.fromiter((get(t, -1) for t in turns.tolist()), dtype=np.int64, count=len(turns))


def _exchange_share(values: np.ndarray, first: np.ndarray, worked: np.ndarray) -> np.ndarray:
    """What each turn of an exchange in which tools ran (where `worked` is true; `first`:
    each turn's exchange) takes from how well its whole exchange matches:
    `EXCHANGE_WEIGHT` times the sum of its turns' values (each at most 1), relative to
    the best such exchange. An agent's exchange is an episode (a request, the steps
    taken, what came of them): a question about it finds its words spread over many
    turns."""
    share = np.zeros(len(values))
    if not worked.any():
        return share
    _, at = np.unique(first[worked], return_inverse=True)
    sums = np.bincount(at, weights=np.minimum(values[worked], 1.0))
    share[worked] = EXCHANGE_WEIGHT * sums[at] / (sums.max() or 1.0)
    return share


def query_words(query: str) -> list[str]:
    """The words of a query worth matching (no stop words), in order, once each."""
    seen: dict[str, None] = {}
    for word in _WORD.findall(query.lower()):
        if len(word) > 1 and word not in STOP:
            seen.setdefault(word, None)
    return list(seen)


def asked_words(query: str) -> list[str]:
    """What a query is matched on: its words (`query_words`), then the identifiers it
    holds, matched whole as well as by their words, and the figures it abbreviates
    ("20k"), spelled out; once each."""
    words = query_words(query)
    extra = lexical.compounds(query) + lexical.spelled_out(query)
    return words + [term for term in dict.fromkeys(extra) if term not in words]


def _without_names(query: str, names: list[str]) -> str:
    """`query` with the names (and their possessive 's) taken out."""
    parts = [part for name in names for part in _WORD.findall(name) if len(part) > 1]
    if not parts:
        return query
    pattern = r"\b(?:" + "|".join(map(re.escape, parts)) + r")(?:['\u2019]s)?\b"
    return " ".join(re.sub(pattern, " ", query, flags=re.IGNORECASE).split())


def tag(kind: str, session: str | None) -> str:
    """The FTS5 filter token of a unit's kind, in one session or in all of them."""
    if session is None:
        return kind
    return f"{kind}x{hashlib.sha1(session.encode('utf-8')).hexdigest()[:16]}"


def _not_the_same(new: list[Any], old: list[Any], block: int = 64) -> list[Any]:
    """The items of `new` that are not the very object at the same place in `old`
    (which is no longer), looked for only in the blocks that differ (compared in C)."""
    changed = []
    for start in range(0, len(new), block):
        part, was = new[start : start + block], old[start : start + block]
        if len(was) < len(part) or not all(map(operator.is_, part, was)):
            changed += [item for item, seen in itertools.zip_longest(part, was) if item is not seen]
    return changed


@functools.lru_cache(maxsize=1024)  # every unit of a session has one of a few (a hash each)
def _tag_column(kind: str, session: str) -> str:
    return f"{kind} {tag(kind, session)}"


def _contains(text: str, word: str) -> bool:
    return word in text.lower()
