"""Context assembly: everything the model should receive for its next turn, within budget.

Blocks, in the order the model reads them:

1. critical items (always, never compressed);
2. the working state (always: current task, next step, blockers; then steps done,
   decisions and files as its share allows; with no question about the past, the
   specifics of the work that nothing else shows);
3. the manifest block (under 500 tokens): what exists, what was compressed or archived
   and how to get it back, the budget left;
4. the active efforts, expanded (their latest turns) or summarized, by relevance;
5. recalled units, when the query asks about the past (recall is gated on intent);
6. the latest turns, as far back as the budget leaves room for, old tool results
   cleared to one line; the newest exchange always, cut (never dropped) when it is
   longer than its room.

The budget is allocated per query type (casual, recall, summary), a block's unused share
passes to the next, and the total never exceeds the budget. Critical items and the
working state's task, next step and blockers are always included; a budget too small for
them is an error.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from ccm import derive, patterns, tokens
from ccm.engine.critical import core
from ccm.engine.text import counted, without_calls
from ccm.errors import UsageError
from ccm.index import (
    TOOL_CHARS,
    Hit,
    Index,
    Recalled,
    as_shown,
    clipped,
    excerpt,
    pairs,
    render_turn,
    tool_name,
    undated,
)
from ccm.store import Store
from ccm.transcript import CALL

# shares of the budget per query type; what recall is given is all that the others leave
# (for a casual message, which recalls nothing, the tail may take all of it). Critical
# items are always all there, whole within their share, else by their rules alone
# (`_critical_lines`): for a recall question, sooner. A manifest that gets no line gives
# the budget line alone: a recall question's, whose room goes to what is recalled
SHARES: dict[str, dict[str, float]] = {
    "casual": {
        "critical": 0.25,
        "state": 0.10,
        "specifics": 0.10,
        "manifest": 0.10,
        "efforts": 0.05,
        "tail": 1.0,
    },
    "recall": {"critical": 0.15, "state": 0.0, "manifest": 0.0, "efforts": 0.0, "tail": 0.03},
    "summary": {"critical": 0.25, "state": 0.20, "manifest": 0.10, "efforts": 0.50, "tail": 0.25},
}
MANIFEST_CAP = 500
MANIFEST_FREE = 1000  # the first tokens of a budget, of which the manifest takes no share
# the specifics line's room at most: the tail, fitted before it is written, shows what
# a larger budget leaves, and room it does not use is not given back to the tail
SPECIFICS_CAP = 100
CRITICAL_TITLE = "Critical (always honour)"
JOIN_TOKENS = 2
MIN_EXCHANGE_TOKENS = 20
ELLIPSIS = "\u2026"  # between turns of a long exchange that are not next to each other
ELLIPSIS_TOKENS = 2  # its line, and its line break
RENDERED = "_rendered"  # a tail turn's line, kept on it while the context is assembled
CUT_NOTE_TOKENS = 16  # what the note on a shortened turn takes, and then some
HAND_WEIGHT = 2.0  # a specific term said in the open segment counts this much more
# ... and one said in the latest turn this much more than one said in the oldest kept
# (held-out checkpoint key terms at 1,000 tokens: 1.0 0.906, 2.0 0.909, 4.0 0.909)
RECENCY = 2.0
MIN_TAIL_TOKENS = 60  # the newest exchange gets this much at least, whatever its share

RECALL_CUES = patterns.compile(
    r"\b(?:remember|recall|remind me|earlier|previously|last time|before|back then|"
    r"what did (?:we|i|you)|did (?:we|i|you) (?:ever|already)|when did|when was|when were|"
    r"what was|what were|who was|where did|how did|have (?:we|i|you) (?:ever|already)|"
    r"decided|agreed|mentioned|said|told|history)\b"
)
SUMMARY_CUES = patterns.compile(
    r"\b(?:summari[sz]e|summary|recap|overview|where are we|status update|catch me up|tl;?dr)\b"
)
PAST_QUESTION = patterns.compile(r"\b(?:did|was|were|had|went|said|got|made|used|bought|saw|met)\b")
CASUAL = patterns.compile(
    r"^(?:hi|hello|hey|thanks|thank you|thx|ok(?:ay)?|cool|great|nice|good (?:morning|night)|"
    r"bye|yes|no|sure|lol)\b[\s!.,]*$"
)


def classify(query: str | None) -> tuple[str, str]:
    """The query type and why: recall is gated on intent, never on by default."""
    if not query or not query.strip():
        return "casual", "no query"
    lower = query.strip().lower()
    if CASUAL.match(lower):
        return "casual", "a casual message"
    if SUMMARY_CUES.search(lower):
        return "summary", f"asks for a summary ('{SUMMARY_CUES.search(lower).group()}')"  # type: ignore[union-attr]
    cue = RECALL_CUES.search(lower)
    if cue:
        return "recall", f"asks about the past ('{cue.group()}')"
    if lower.endswith("?") and PAST_QUESTION.search(lower):
        return "recall", "a question in the past tense"
    if lower.endswith("?") or lower.startswith(
        ("what", "when", "who", "where", "which", "how", "why")
    ):
        return "recall", "a question that memory may answer"
    return "casual", "no sign of a question about the past"


@dataclass
class Block:
    name: str
    title: str
    lines: list[str] = field(default_factory=list)
    items: list[Any] = field(default_factory=list)
    tokens: int = 0

    def text(self) -> str:
        return f"## {self.title}\n" + "\n".join(self.lines) if self.lines else ""


@dataclass
class Context:
    session: str
    budget: int
    query: str | None
    query_type: str
    reason: str
    blocks: list[Block]
    tail: list[dict[str, Any]]

    @property
    def tokens(self) -> int:
        return tokens.count_cached(self.text())

    def text(self) -> str:
        return "\n\n".join(t for t in (b.text() for b in self.blocks) if t)

    def as_dict(self) -> dict[str, Any]:
        return {
            "session": self.session,
            "budget": self.budget,
            "tokens": self.tokens,
            "query": self.query,
            "query_type": self.query_type,
            "reason": self.reason,
            "blocks": [
                {"name": b.name, "tokens": b.tokens, "text": b.text(), "items": b.items}
                for b in self.blocks
            ],
        }

    def messages(self) -> dict[str, Any]:
        """An Anthropic Messages API ``system`` + ``messages`` pair, ready to send."""
        system = "\n\n".join(t for t in (b.text() for b in self.blocks if b.name != "tail") if t)
        messages: list[dict[str, Any]] = []

        def add(role: str, text: str) -> None:
            if messages and messages[-1]["role"] == role:
                messages[-1]["content"] += "\n\n" + text
            else:
                messages.append({"role": role, "content": text})

        for turn in self.tail:
            if turn["role"] == "assistant":
                add("assistant", turn["content"])
            elif turn["role"] == "user":
                add("user", turn["content"])
            elif turn["role"] == "tool":
                add("user", render_turn(turn, None))
            elif turn.get("gap"):
                add(messages[-1]["role"] if messages else "user", turn["content"])
            else:
                add("user", f"[system note] {turn['content']}")
        if self.query:
            add("user", self.query)
        if not messages or messages[0]["role"] != "user":
            messages.insert(0, {"role": "user", "content": "(the conversation continues)"})
        if messages[-1]["role"] != "user":
            add("user", "(continue)")
        return {"system": system, "messages": messages}


class _Budget:
    def __init__(self, total: int) -> None:
        self.total = total
        self.used = 0

    @property
    def left(self) -> int:
        return self.total - self.used

    def take(self, count: int) -> None:
        self.used += count


def _fill(block: Block, candidates: list[tuple[str, Any]], allowance: int) -> int:
    """Add whole lines while they fit in `allowance`; returns tokens used."""
    used = tokens.count_cached(f"## {block.title}\n") + JOIN_TOKENS
    if not candidates or used >= allowance:
        return 0
    for line, item in candidates:
        cost = tokens.count_cached(line) + 1
        if used + cost > allowance:
            continue
        block.lines.append(line)
        block.items.append(item)
        used += cost
    if not block.lines:
        return 0
    block.tokens = used
    return used


def _lines_tokens(block: Block) -> int:
    """The tokens of a block, counted a line at a time (with its line break, and the
    blank line after it): never below the count of the whole (see `_assemble`), and each
    line is counted once in a process, however long the block (the critical items)."""
    header = tokens.count_cached(f"## {block.title}\n") + JOIN_TOKENS
    return header + sum(tokens.count_cached(line) + 1 for line in block.lines)


def _critical_lines(items: list[dict[str, Any]], share: int) -> list[str]:
    """The critical items as lines, each whole while their block fits in `share` tokens;
    past it, the detected items that gain the most are shown by their rule sentences
    alone (`ccm.engine.critical.core`), until the block fits or none is left to shorten.
    Every item is always there: a small context keeps the rules and gives up their
    reasons. What a person marked critical is shown as they wrote it, always."""
    lines = [f"- {item['text']}" for item in items]
    used = _lines_tokens(Block("critical", CRITICAL_TITLE, lines))
    if used <= share:
        return lines
    shorter = []
    for at, line in enumerate(lines):
        if items[at].get("source") == "event":  # marked by a person (`ccm critical --add`)
            continue
        short = f"- {core(items[at]['text'])}"
        saved = tokens.count_cached(line) - tokens.count_cached(short)
        if saved > 0:
            shorter.append((saved, at, short))
    for saved, at, short in sorted(shorter, key=lambda entry: (-entry[0], entry[1])):
        if used <= share:
            break
        lines[at] = short
        used -= saved
    return lines


def _state_lines(working: dict[str, Any]) -> tuple[list[str], list[str]]:
    """The working state as lines: those always shown (the current task, the next step,
    what blocks it), and the rest, most useful first (the latest steps done and
    decisions, then the files), shown as the state's share of the budget allows."""
    state = working.get("state") or {}
    always = []
    for key, label in [("current_task", "Current task"), ("next_step", "Next step")]:
        if state.get(key):
            always.append(f"{label}: {state[key]}")
    always += [f"Blocked by: {item}" for item in state.get("blockers", [])]
    rest = []
    done = [f"Done: {item}" for item in reversed(state.get("completed_steps", []))]
    decided = [f"Decided: {item}" for item in reversed(state.get("recent_decisions", []))]
    for pair in itertools.zip_longest(done, decided):  # the latest of each first
        rest += [line for line in pair if line]
    if state.get("open_files"):
        rest.append(f"Open files: {', '.join(state['open_files'][:8])}")
    return always, rest


# a unit after a figure, which a figure is remembered with ("2 km", "45 cm", "430-490 g")
_UNIT = r"(?<=\d) ?(?:g|kg|mg|km|m|cm|mm|ml|l|s|ms|min|mins|minutes|h|hours|days|weeks|months|K|kB|KB|MB|GB|TB|pt|px|W|kW|kWh|A|mA|V|mV|Hz|kHz|MHz|GHz|miles|mph|lb|lbs|oz|ft)(?=[\s.,;:)]|$)"
_SPECIFIC = patterns.compile(
    r"(?<![\w/.-])(?:"
    r"\d{1,2}(?:st|nd|rd|th)? (?:January|February|March|April|May|June|July|August|September|"
    r"October|November|December)\b|"  # a date, day first or month first ("Jun 11")
    r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)[a-z]* \d{1,2}(?:st|nd|rd|th)?\b|"
    r"[\u00a3$\u20ac]?/?_*[^\W_]+(?:(?:::|[-_./:=]|(?<=\d),(?=\d))[^\W_]+)+/?(?:%|"
    + _UNIT
    + r")?|"  # an identifier, a setting ("TimeoutStartSec=8h"), a path, a figure (with
    # its unit: "430-490 g", "0.38%")
    # a name or a part of a document with its number ("Flutter 3.19", "ADR 0007", "clause
    # 14.3", "revision 24")
    r"(?:(?!(?:On|At|In|By|For|From|To|Since|Until|Till|Before|After|About|Around|Under|"
    r"Over|Only|Just|And|But|Or|So|If|When|Then|Now|The|An|All|Every|Each|Some|Top)\b)"
    r"[A-Z][\w-]+|(?:clause|section|condition|article|paragraph|revision|version|rule|step|"
    r"phase|chapter|page|item|table|appendix|part)) \d+(?:\.\d+)*(?![\w%])|"
    # an issue or a pull request ("#148"), a channel ("#ci-noise"; not a C directive)
    r"#\d+|#(?!(?:include|define|undef|if|ifdef|ifndef|else|elif|endif|pragma|import)\b)"
    r"[a-z][\w-]*[a-z0-9]|"
    r"[\u00a3$\u20ac]?[^\W\d_]*\d[^\W_]*(?:%|" + _UNIT + r")?|"  # a word with a digit (a price)
    r"[A-Z][a-z]+[A-Z]\w*|[a-z]+[A-Z][a-z]\w*|[A-Z]{2,}\w*"  # CamelCase, camelCase, CAPITALS
    r")(?![\w/-])"
)
# a capitalised word inside a sentence, with the title it is said with ("Mr Okafor"),
# and the capitalised words that go on with it: a name of several words is one term
# ("Fox & Hounds", "Linda's Book Club"); a figure ends it (`_SPECIFIC` names "Ryzen 7")
_NAME = patterns.compile(
    r"(?:(?<=[a-z,;] )|(?<=\())(?:(?:Mr|Mrs|Ms|Dr|Prof)\.? )?[A-Z][a-z]{2,}(?:'s)?"
    r"(?: (?:&|of|and|the|de|da|van) [A-Z][a-z]+| [A-Z][a-z]+(?:'s)?| [A-Z]{2,}\b)*\b|"
    # ... or a name of several words that opens a sentence ("Two Lads came back at £410"),
    # whole: not its last word alone
    r"(?:^|(?<=[.!?:\n] ))(?!(?:The|A|An|So|And|But|Or|If|When|Our|My|Your|Their|We|I|It|"
    r"This|That|Then|Now|Ok|Okay|Yes|No|Hi|Hey|Thanks|Good|Great|Right|Well)\b)"
    r"[A-Z][a-z]+(?:'s)?(?: (?:&|of|and) [A-Z][a-z]+| [A-Z][a-z]+)+\b"
)


# a markdown heading, whose capitals are title case, not names ("## Error Handling")
_HEADINGS = patterns.compile(r"^#{1,6} [^\n]*", re.M)
# the abbreviations of prose, which `_SPECIFIC` reads as identifiers ("e.g", "i.e")
_ABBREVIATIONS = frozenset(["e.g", "i.e", "etc", "cf", "vs", "viz", "n.b", "p.s", "a.k.a"])


def _specifics(recent: list[list[Any]], first: int, shown: _Shown, room: int) -> str:
    """The figures, names and identifiers the latest turns keep coming back to that the
    context does not show yet, as one line within `room` tokens: the specifics of the
    work at hand, which a summary loses first. A term counts once per turn that says it
    (a tool's output half), the latest turns most (`RECENCY`), and those of the open
    segment (from turn `first`) `HAND_WEIGHT` times as much; one that only a tool's
    output or a system turn holds (a file of a listing, a heading of a slash command's
    prompt) is not named: the user or the assistant never spoke of it."""
    if room <= 0 or not recent:
        return ""
    weight: dict[str, float] = {}
    said: set[str] = set()  # by the user or the assistant, not only in a tool's output
    for position, entry in enumerate(recent):
        value = (0.5 if entry[1] == "tool" else 1.0) * (1 + RECENCY * position / len(recent))
        value *= HAND_WEIGHT if entry[0] >= first else 1.0
        text = str(entry[2])  # (what was said, not the JSON input of a tool call)
        terms = _specific_terms(text if entry[1] == "tool" else without_calls(text))
        for term in terms:
            weight[term] = weight.get(term, 0.0) + value
        if entry[1] in ("user", "assistant"):  # (not a slash command's prompt, a system turn)
            said |= terms
    line = "Specifics:"
    for term in sorted(weight, key=lambda t: (-weight[t], t)):
        if term.lower() in shown or term not in said:
            continue
        longer = f"{line} {term},"
        if tokens.count_cached(longer) - 1 > room:
            break
        line = longer
    return line.rstrip(",") if line != "Specifics:" else ""


class _Shown:
    """What a context shows, to tell whether a term is in it (lower-cased): anywhere in
    the text of its blocks, or, for the critical items (the same long text at every
    turn), among the specific terms they hold."""

    def __init__(self, critical: Block, blocks: list[Block]) -> None:
        self.text = "\n".join(b.text() for b in blocks).lower()
        self.terms = {t.lower() for line in critical.lines for t in _specific_terms(line)}

    def __contains__(self, term: object) -> bool:
        return isinstance(term, str) and (term in self.terms or term in self.text)


@functools.lru_cache(maxsize=4096)
def _specific_terms(text: str) -> frozenset[str]:
    """The figures, identifiers, dates and names `text` holds (see `_SPECIFIC`); a name
    said with its number ("Flutter 3.19") is that term, not its name again ("Flutter")."""
    found = {m.group().strip(".,:") for m in _SPECIFIC.finditer(text)}
    numbered = {t.rsplit(" ", 1)[0] for t in found if " " in t and t[-1].isdigit()}
    found |= set(_NAME.findall(_HEADINGS.sub(" ", text) if "#" in text else text)) - numbered
    return frozenset(
        t
        for t in found
        if len(t) > 1 and not (t.isdigit() and len(t) < 3) and t.lower() not in _ABBREVIATIONS
    )


def _manifest_lines(
    manifest: dict[str, Any], working: dict[str, Any], open_doc: dict[str, Any]
) -> list[str]:
    segments = manifest["segments"]
    active = working.get("active", [])
    lines = [
        f"Session {manifest['session']}: {counted(manifest['turns'], 'turn')}, "
        f"{counted(len(segments), 'segment')}, "
        f"{manifest['tokens']} tokens. Working context {len(active)}/{working['capacity']} efforts.",
    ]
    if active:
        lines.append(
            "Active: " + "; ".join(f"{a['effort_id']} ({a.get('topic', '')})" for a in active)
        )
    waiting = [
        e for e in open_doc.get("efforts", []) if e["id"] not in {a["effort_id"] for a in active}
    ]
    if waiting:
        lines.append(
            "Open, not active: " + "; ".join(f"{e['id']} ({e['topic']})" for e in waiting[:8])
        )
    for state in ("compressed", "archived"):
        chosen = [s for s in segments if s["lifecycle"] == state]
        if chosen:
            shown = "; ".join(f"{s['id']} ({', '.join(s['topic'][:3])})" for s in chosen[:10])
            more = f" and {len(chosen) - 10} more" if len(chosen) > 10 else ""
            lines.append(f"{state.capitalize()}: {shown}{more}")
    lines.append(
        'Get anything back with @expand(seg_N) or @recall("words"); @pin(seg_N) keeps a segment.'
    )
    return lines


def assemble(
    store: Store,
    session: str,
    budget: int | None = None,
    query: str | None = None,
    index: Index | None = None,
    shown_from: int | None = None,
    derived: derive.Derived | None = None,
) -> Context:
    """Assemble the context of `session` for its next turn (see the module docstring).

    `shown_from`: the turns from this one on reach the model otherwise (the proxy sends
    them as messages): there is no block of latest turns, the efforts and recall do not
    repeat them, and their room goes to the rest. `derived`: the tiers to assemble from
    as they are, with `index` as it is (neither is brought up to date first): a server
    that updates both once a reply is recorded passes those of that update."""
    total = int(budget if budget is not None else store.config.get("context", "budget_tokens"))
    if derived is not None and index is not None:
        return _assemble(store, session, total, query, derived, index, shown_from)
    with _current(store, session, index) as (derived, index):
        return _assemble(store, session, total, query, derived, index, shown_from)


def recalled(
    store: Store, session: str, budget: int, query: str, index: Index | None = None
) -> Block:
    """The "Recalled from memory" block alone: what `query` recalls of `session` in
    `budget` tokens (a hook adds it to a model's context that holds the rest)."""
    with _current(store, session, index) as (_, index):
        block = Block("recall", "Recalled from memory")
        limit = max(20, budget // MIN_EXCHANGE_TOKENS)
        _fill_recall(block, index.recalled(query, session, None, limit), budget)
        return block


def brought_up_to_date(store: Store, session: str, index: Index) -> derive.Derived:
    """Fold what the session's log holds that its tiers do not, index it in `index`;
    the tiers."""
    derived = derive.update(store, session)
    index.update(session, derived.tiers.manifest)
    return derived


@contextlib.contextmanager
def _current(
    store: Store, session: str, index: Index | None
) -> Iterator[tuple[derive.Derived, Index]]:
    """The session's tiers and `index` (or one of its own, closed after), both brought
    up to date."""
    own = index or Index(store)
    try:
        yield brought_up_to_date(store, session, own), own
    finally:
        if index is None:
            own.close()


def _assemble(
    store: Store,
    session: str,
    total: int,
    query: str | None,
    derived: derive.Derived,
    index: Index,
    shown_from: int | None = None,
) -> Context:
    config = store.config
    tiers = derived.tiers
    kind, reason = classify(query)
    shares = SHARES[kind]
    budget = _Budget(total)

    critical = Block("critical", CRITICAL_TITLE)
    items = tiers.critical  # as `critical_items` gives them, found when rendered
    critical.lines = _critical_lines(items, int(total * shares["critical"]))
    critical.items = [c["id"] for c in items]
    state = Block("state", "Working state")
    always, rest = _state_lines(tiers.working)
    state.lines = always
    for block in (critical, state):
        if block.lines:  # counted a line at a time, as the other blocks (each is cached)
            block.tokens = _lines_tokens(block)
            budget.take(block.tokens)
    if rest:  # the rest of the state, in order, within its share
        share = min(int(total * shares["state"]), budget.left)
        used = state.tokens or tokens.count_cached(f"## {state.title}\n") + JOIN_TOKENS
        for line in rest:
            cost = tokens.count_cached(line) + 1
            if used + cost > share:
                break
            state.lines.append(line)
            used += cost
        if state.lines:
            budget.take(used - state.tokens)
            state.tokens = used
    if budget.left < 0:
        raise UsageError(
            f"a budget of {total} tokens cannot hold the critical items and working state "
            f"({budget.used} tokens)",
            "raise --budget or unmark critical items",
        )

    manifest = Block("manifest", "Memory manifest")
    # the manifest's share is of the budget past `MANIFEST_FREE`: a small context is
    # what was said, the index of what exists costs more than it tells there
    allowance = min(
        MANIFEST_CAP, max(0, int((total - MANIFEST_FREE) * shares["manifest"])), budget.left
    )
    reserve = tokens.count_cached(f"Budget: {total} tokens, {total} left.") + 1
    if allowance > reserve:  # (a recall question's manifest is its budget line)
        lines = _manifest_lines(tiers.manifest, tiers.working, tiers.open)
        budget.take(_fill(manifest, [(line, None) for line in lines], allowance - reserve))
    header = tokens.count_cached(f"## {manifest.title}\n") + JOIN_TOKENS
    if not manifest.lines and header + reserve <= budget.left:  # the budget line alone
        manifest.tokens = header
        budget.take(header)
    if manifest.tokens:
        manifest.lines.append("")  # the budget line, written last
        budget.take(reserve)

    # room for the specifics of the work (figures, names, identifiers said lately), in
    # the working state: which to name is known once the rest is chosen (those shown
    # are not named again)
    specifics = min(int(total * shares.get("specifics", 0.0)), SPECIFICS_CAP, max(0, budget.left))
    budget.take(specifics)

    # the tail is fitted first, within its share and the efforts' share, so that recall
    # can fill all the rest exactly (its units are small; the tail's whole exchanges
    # would leave more room unused); the newest exchange is always there, cut to the
    # share when it is longer. What the efforts and recall leave goes back to the tail,
    # which reaches back no further than the turns they show
    tail = Block("tail", "Latest turns")
    tail_tokens = int(config.get("context", "tail_tokens"))
    efforts_share = int(total * shares["efforts"])
    allowance = min(budget.left - efforts_share, tail_tokens, int(total * shares["tail"]))
    allowance = max(allowance, min(MIN_TAIL_TOKENS, budget.left))
    latest = _Latest(store, session)
    if shown_from is None:
        chosen = _tail(latest, config, max(0, allowance), tail)
        budget.take(tail.tokens)
        tail_first = _whole_from(chosen)
    else:
        chosen, tail_first = [], shown_from

    efforts = Block("efforts", "Active efforts")
    room = min(budget.left, efforts_share)
    if room > 0:  # (none for a recall question: its effort lines are not read)
        budget.take(_fill(efforts, _effort_lines(tiers, index, session, tail_first), room))

    recall = Block("recall", "Recalled from memory")
    if kind != "casual" and query:
        # as many exchanges as could fit were each as short as a chat turn or two
        limit = max(20, budget.left // MIN_EXCHANGE_TOKENS)
        whole = frozenset(t["turn"] for t in chosen if not (t.get("cut") or t.get("gap")))
        hits = index.recalled(query, session, tail_first, limit, whole)
        budget.take(_fill_recall(recall, hits, budget.left))

    if shown_from is None and budget.left > 0 and (not chosen or _more(chosen)):
        after = max(
            [item["last_turn"] for item in efforts.items if isinstance(item, dict)]
            + [item["turns"][1] for item in recall.items if item.get("turns")],
            default=0,
        )
        if not chosen:  # the newest exchange, whatever recall showed
            after = 0
        if not chosen or after < _newest_start(chosen):
            budget.used -= tail.tokens
            room = min(budget.left, tail_tokens)
            chosen = _tail(latest, config, room, tail, after or None, partial=True)
            budget.take(tail.tokens)

    if specifics:
        shown = _Shown(critical, [state, manifest, efforts, recall, tail])
        header = 0 if state.lines else tokens.count_cached(f"## {state.title}\n") + JOIN_TOKENS
        current = derived.state.get("current") or {}
        first = current["open"][0][0] if current.get("open") else 0  # the topic at hand
        recent = derived.state.get("recent") or []
        line = _specifics(recent, first, shown, specifics - header - 1)
        if line:
            state.lines.append(line)
            used = tokens.count_cached(line) + 1 + header
            state.tokens += used
            specifics -= used
        budget.used -= specifics

    if manifest.lines:
        manifest.lines[-1] = f"Budget: {total} tokens, {max(0, budget.left)} left."
    blocks = [b for b in (critical, state, manifest, efforts, recall, tail) if b.lines]
    # no need to count the whole again: each line was counted with one token more for
    # its line break, and each block with two more for the blank line, and neither
    # tokenizer (cl100k's BPE, or the estimate) joins pieces across a line break, so the
    # sum of the parts is never below the count of the whole
    latest_turns = [{k: v for k, v in t.items() if k != RENDERED} for t in chosen]
    return Context(session, total, query, kind, reason, blocks, latest_turns)


def _effort_lines(
    tiers: Any, index: Index, session: str, tail_first: int | None
) -> list[tuple[str, Any]]:
    segments = {s["id"]: s for s in tiers.manifest["segments"]}
    lines: list[tuple[str, Any]] = []
    for active in tiers.working.get("active", []):
        first, last = active["expanded_lines"]
        refs = [s for s in segments.values() if s.get("effort") == active["effort_id"]]
        summary = refs[-1]["summary"] if refs else ""
        lines.append(
            (f"- {active['effort_id']} ({active.get('topic', '')}): {summary}", active["effort_id"])
        )
        if active.get("expanded"):
            for text, first_turn, last_turn in index.db.execute(
                "SELECT text, first_turn, last_turn FROM units WHERE session=? AND kind='pair' "
                "AND first_turn BETWEEN ? AND ? ORDER BY first_turn DESC LIMIT 4",
                (session, first, last),
            ):
                if tail_first is None or last_turn < tail_first:
                    item = {"effort": active["effort_id"], "first_turn": first_turn}
                    lines.append((text, {**item, "last_turn": last_turn}))
    return lines


def _fill_recall(block: Block, hits: Recalled, allowance: int) -> int:
    """The best units that fit in `allowance`, shown in the order they were said under
    the day they were said (a dated exchange loses its own time stamp: a day heading
    shared by several exchanges leaves room for about a sixth more of them); segment
    summaries and notes follow. Returns the tokens used.

    The hits come with the token counts of their texts as shown, stored in the index:
    only those chosen are rendered, and once the room left is below the smallest unit
    the session has, the rest are not read at all."""
    used = tokens.count_cached(f"## {block.title}\n") + JOIN_TOKENS
    if used >= allowance:
        return 0
    chosen: list[tuple[str, Hit]] = []  # (day, hit)
    days: set[str] = set()

    def text_room() -> int:  # what a text may take: each takes a line break too
        return allowance - used - 1

    for hit, count in hits.shown(text_room):
        day = _day(hit)
        room = allowance - used
        cost = count + 1 + (ELLIPSIS_TOKENS if hit.kind == "turn" else 0)
        if cost <= room and day and day not in days:
            cost += tokens.count_cached(_day_heading(day)) + 1
        if cost > room:
            continue
        chosen.append((day, hit))
        days.add(day)
        used += cost
    if not chosen:
        return 0
    shown_day = None
    last = None
    for day, hit in sorted(chosen, key=lambda c: (c[0] or "~", c[1].first_turn or 0)):
        if day and day != shown_day:
            block.lines.append(_day_heading(day))
            block.items.append({"day": day})
            shown_day = day
        if hit.kind == "turn" and hit.first_turn not in (hit.exchange, (last or -1) + 1):
            block.lines.append(ELLIPSIS)  # a turn of a longer exchange: not all of it
            block.items.append({"gap": True})
        last = hit.last_turn
        block.lines.append(as_shown(hit.kind, hit.ts, hit.text))
        block.items.append({k: v for k, v in hit.as_dict().items() if k != "text"})
    block.tokens = used
    return used


def _day(hit: Hit) -> str:
    """The day a dated exchange was said on (it is shown under its heading), or ""."""
    return hit.ts[:10] if hit.kind in ("pair", "turn") and hit.ts else ""


@functools.lru_cache(maxsize=1024)
def _day_heading(day: str) -> str:
    """``[2024-01-17 Wed]``: the weekday helps place "last Friday" and "yesterday"."""
    try:
        weekday = date.fromisoformat(day).strftime("%a")
    except ValueError:
        return f"[{day}]"
    return f"[{day} {weekday}]"


class _Latest:
    """The latest turns of a session, read backwards from the end of its log as far as
    asked, once: a context fits its tail twice (before and after recall)."""

    def __init__(self, store: Store, session: str) -> None:
        self.store = store
        self.session = session
        self.turns: list[dict[str, Any]] = []
        self.complete = False  # whether `turns` holds the whole log

    def last(self, count: int) -> tuple[list[dict[str, Any]], bool]:
        """The last `count` turns (fewer when the log holds fewer), and whether they
        are all of it."""
        if len(self.turns) < count and not self.complete:
            self.turns = self.store.tail_turns(self.session, count)
            self.complete = len(self.turns) < count
        return self.turns[-count:], self.complete and count >= len(self.turns)


def _tail(
    latest: _Latest,
    config: Any,
    allowance: int,
    block: Block,
    limit: int | None = None,
    partial: bool = False,
) -> list[dict[str, Any]]:
    """The latest turns that fit in `allowance` (see `_fit_tail`), read backwards from
    the end of the log: a few more turns than the preserved tail at first, and four
    times as many again while the fit reaches the oldest exchange read and the log holds
    more (each read once: see `_Latest`). With `limit`, only turns after it; with `partial`, the oldest exchange shown
    may be cut to the room left."""
    preserved = int(config.get("context", "tail_messages"))
    keep = int(config.get("context", "keep_tool_results"))
    window = 2 * preserved + 2
    while True:
        turns, complete = latest.last(window)
        shown = turns if limit is None else [t for t in turns if t["turn"] > limit]
        chosen, reached = _fit_tail(shown, allowance, block, keep, preserved, partial)
        if complete or not reached or len(shown) < len(turns):
            return chosen
        window *= 4


def _fit_tail(
    turns: list[dict[str, Any]],
    allowance: int,
    block: Block,
    keep_results: int,
    preserved: int,
    partial: bool = False,
) -> tuple[list[dict[str, Any]], bool]:
    """The latest exchanges that fit in `allowance`, newest first, and whether the fit
    reached the oldest exchange of `turns`.

    The newest exchange is always there: when it does not fit, it is cut (`_cut`) rather
    than dropped. Older exchanges follow while they fit (with `partial`, the oldest of
    them cut to the room left). In the last `preserved` messages, the last
    `keep_results` tool results are shown whole; older ones, and every one before those
    messages, are cleared to one line that keeps the call (tool-result clearing)."""
    groups = pairs(turns)
    header = tokens.count_cached(f"## {block.title}\n") + JOIN_TOKENS
    used = header
    tool_seen = 0
    messages = 0
    chosen: list[list[dict[str, Any]]] = []
    reached = False
    for position, group in enumerate(reversed(groups)):
        reached = position == len(groups) - 1
        shown = []
        for turn in reversed(group):
            if turn["role"] == "tool":
                tool_seen += 1
                if tool_seen > keep_results or messages >= preserved:
                    turn = _cleared(turn)
            shown.append(turn)
        shown.reverse()
        messages += len(group)
        cost = _cost(shown)
        if used + cost <= allowance:
            chosen.insert(0, shown)
            used += cost
            continue
        older = bool(chosen)
        if older and not partial:
            break
        cut = _cut(shown, allowance - used)
        if cut and (not older or _cost(cut) >= MIN_EXCHANGE_TOKENS):
            chosen.insert(0, cut)
            used += _cost(cut)
        if older or not cut:  # the newest exchange cut: older ones may still fit
            break
    block.lines = [line for group in chosen for line in _lines(group)]
    flat = [turn for group in chosen for turn in group]
    block.items = [turn["turn"] for turn in flat if not turn.get("gap")]
    block.tokens = used if flat else 0
    return flat, reached


def _more(tail: list[dict[str, Any]]) -> bool:
    """Whether the session holds turns the tail does not show whole."""
    return bool(tail[0]["turn"] > 1 or any(t.get("gap") or t.get("cut") for t in tail))


def _newest_start(tail: list[dict[str, Any]]) -> int:
    """The first turn of the tail's newest exchange."""
    return int(next((t["turn"] for t in reversed(tail) if t["role"] == "user"), tail[0]["turn"]))


def _whole_from(tail: list[dict[str, Any]]) -> int | None:
    """The first turn from which the tail shows every turn whole (none cleared, cut or
    left out): recall may show any turn before it."""
    first = None
    for turn in reversed(tail):
        if turn.get("gap") or turn.get("cut"):
            break
        first = turn["turn"]
    return first


def _cleared(turn: dict[str, Any]) -> dict[str, Any]:
    """A tool result cleared to one line that keeps the call and says how to get it back
    (one shorter than that line stays as it is)."""
    note = f"[{tool_name(turn)} result cleared; @expand(turn {turn['turn']}) restores it]"
    if len(str(turn["content"])) <= len(note):
        return dict(turn, cleared=True)
    return _changed(turn, content=note, cut=True, cleared=True)


def _lines(group: list[dict[str, Any]]) -> list[str]:
    """An exchange of the tail as lines (`render_group`, tool results as they are given,
    a gap as a note)."""
    lines = []
    for position, turn in enumerate(group):
        if turn.get("gap"):
            lines.append(str(turn["content"]))
            continue
        line = turn.get(RENDERED)
        if line is None:  # rendered once, however many fits try the turn
            line = turn[RENDERED] = render_turn(turn, None)
        lines.append(undated(line) if position else line)
    return lines


def _changed(turn: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """A copy of a tail turn with `changes` (its rendering made again)."""
    copy = dict(turn, **changes)
    copy.pop(RENDERED, None)
    return copy


def _cost(group: list[dict[str, Any]]) -> int:
    return sum(tokens.count_cached(line) + 1 for line in _lines(group))


def _gap(dropped: list[dict[str, Any]]) -> dict[str, Any]:
    if len(dropped) == 1 and dropped[0].get("cleared"):
        return dropped[0]  # its line says as much, and which tool it was
    first, last = dropped[0]["turn"], dropped[-1]["turn"]
    span = f"turn {first}" if first == last else f"turns {first}-{last}"
    return {
        "turn": first,
        "role": "gap",
        "ts": dropped[0]["ts"],
        "gap": True,
        "content": f"[\u2026 {span} not shown; @expand(turn {first})]",
    }


def _cut(group: list[dict[str, Any]], room: int) -> list[dict[str, Any]]:
    """`group` cut to fit in `room` tokens, or [] when not even its latest turn can be
    shown: its payloads first, the oldest first (tool results cut to their first and last
    lines and the inputs of tool calls to their first characters: `_payload_cut`; then
    the results cleared to one line), then the turns between its first (the request) and the
    latest ones left out, then the longest of what is left shortened (its head kept,
    saying how long it was); when even that cannot fit, its latest turn alone."""
    shown = list(group)
    if _cost(shown) <= room:
        return shown
    for at, turn in enumerate(shown):  # its payloads cut first
        content = None if turn.get("cut") else _payload_cut(turn)
        if content is not None:
            shown[at] = _changed(turn, content=content, cut=True)
            if _cost(shown) <= room:
                return shown
    for at, turn in enumerate(shown):  # then cleared
        if turn["role"] == "tool" and not turn.get("cleared"):
            shown[at] = _cleared(turn)
            if _cost(shown) <= room:
                return shown
    head, rest = shown[:1], shown[1:]
    dropped: list[dict[str, Any]] = []
    while len(rest) > 1:
        dropped.append(rest.pop(0))
        candidate = [*head, _gap(dropped), *rest]
        if _cost(candidate) <= room:
            # the turn left out last, shortened into the room it leaves, if that says much
            last = dropped[-1]
            if last["role"] != "tool" and len(dropped) > 1:
                kept = _shorten([*head, _gap(dropped[:-1]), last, *rest], room)
                if kept and _cost(kept) - _cost(candidate) >= MIN_EXCHANGE_TOKENS:
                    return kept
            return candidate
    if len(rest) == 1 and rest[0]["role"] == "tool" and head:
        # a cleared result after its request says little: the request alone
        dropped.append(rest.pop(0))
    gap = [_gap(dropped)] if dropped else []
    return _shorten([*head, *gap, *rest], room) or _shorten(shown[-1:], room)


def _payload_cut(turn: dict[str, Any]) -> str | None:
    """A tail turn with its payload cut, or None when it has none too long: a tool's
    result to its first and last lines (`excerpt`), the inputs of an assistant's tool
    calls (a file written, a list of edits) each to its first `TOOL_CHARS` characters,
    saying how long it was."""
    content = str(turn["content"])
    if turn["role"] == "tool":
        return excerpt(content, TOOL_CHARS, turn["turn"]) if len(content) > TOOL_CHARS else None
    if turn["role"] != "assistant" or CALL not in content:
        return None
    lines = content.split("\n")
    long = [at for at, line in enumerate(lines) if line.startswith(CALL) and len(line) > TOOL_CHARS]
    for at in long:
        lines[at] = clipped(lines[at], TOOL_CHARS, turn["turn"])
    return "\n".join(lines) if long else None


def _shorten(candidate: list[dict[str, Any]], room: int) -> list[dict[str, Any]]:
    """`candidate` with its longest turns shortened (their heads kept, saying how long
    they were) until it fits in `room` tokens, or [] when it cannot."""
    for _ in range(8):
        excess = _cost(candidate) - room
        if excess <= 0:
            return candidate
        longest = max(
            (t for t in candidate if not t.get("gap")),
            key=lambda t: tokens.count_cached(str(t["content"])),
        )
        content = str(longest["content"])
        size = tokens.count_cached(content)
        keep = size - excess - CUT_NOTE_TOKENS
        if keep < CUT_NOTE_TOKENS // 2:
            return []
        chars = max(1, len(content) * keep // max(size, 1))
        short = _changed(longest, content=clipped(content, chars, longest["turn"]), cut=True)
        candidate = [short if t is longest else t for t in candidate]
    return []
