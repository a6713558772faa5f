"""The conclusion graph: edges found offline, conflicts settled, confidence from topology.

Each conclusion the engine detected is a `Node`. `link` relates them with five edge
types, each pointing from the node that acts to the node acted on:

* ``supersedes`` later choice -> earlier choice it reverses ("not Postgres" ... "switch to
  Postgres"), and every ``superseded_by`` the engine already recorded;
* ``contradicts`` later fact -> earlier fact it denies ("actually, the root cause was ...");
* ``generalizes`` short statement higher on the abstraction ladder -> a longer one that
  holds all its terms;
* ``supports`` later statement -> earlier one it restates or agrees with on the value;
* ``derived_from`` later conclusion -> the earlier one of its session it builds on.

`resolve` turns conflicts into statuses (thesis 4), `confidence` lets trust flow along
the edges to a fixed point (thesis 5), and `explain` says where a score comes from.

Everything is a pure function of its arguments, ordered by content and never by input
order, so a nightly run rebuilds the same graph byte for byte.
"""

from __future__ import annotations

import gc
import hashlib
import re
from collections import Counter, defaultdict
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from ccm import patterns
from ccm.engine.conclusions import ASSISTANT_FACTOR, CONFIDENCE, REVERSAL
from ccm.engine.text import term_of, terms, words
from ccm.sleep.ladder import layer

if TYPE_CHECKING:
    import networkx

EDGE_TYPES = ("supports", "contradicts", "generalizes", "derived_from", "supersedes")
CHOICE = frozenset({"decision", "preference", "requirement", "confirmation", "rejection"})
"""Kinds that are a matter of choice: the latest declaration stands. Every other kind
(resolution, fix, answer, insight, task, ...) states a fact, and facts need evidence."""

KEYS = 4  # rarest terms a node is blocked on
WINDOW = 6  # latest earlier mentions of each key term compared with a node
SIMILAR = 0.4  # Jaccard similarity from which a statement restates another

ALPHA = 0.85  # share of the gap between base and 1 that full support closes
ECHO = 0.25  # weight of each further supporter from a session already counted
FAILED = 0.5  # a challenge that failed, counted as support
FACTOR = {"active": 1.0, "superseded": 0.3, "contradicted": 0.1}
TOLERANCE = 1e-9
MAX_SWEEPS = 1000
ARRAY_NODES = 200_000  # from this many nodes on, confidence is computed on arrays


@dataclass(frozen=True)
class Node:
    """One conclusion: `id` is "<session>/<segment>", `ts` the ISO time (UTC) of its turn,
    which orders nodes in time; `base` is the detector's confidence."""

    id: str
    session: str
    segment: str
    kind: str
    text: str
    turn: int
    ts: str
    topic: tuple[str, ...]
    base: float
    superseded_by: str | None = None


@dataclass(frozen=True)
class Edge:
    """A relation from the node that acts to the node acted on; `evidence` tells a
    person why it was drawn, `weight` in [0, 1] how strongly."""

    source: str
    target: str
    type: str
    evidence: str
    weight: float


@dataclass(frozen=True)
class Conflict:
    """One settled conflict, for the nightly report."""

    winner: str
    loser: str
    rule: str  # "choice" or "truth"
    reason: str
    judged: bool = False  # settled by a model's judgement (`Judgement`), not the rules


@dataclass(frozen=True)
class Resolution:
    """Each node's status (active, superseded, contradicted) and the conflicts that set it."""

    status: dict[str, str]
    conflicts: list[Conflict]


@dataclass(frozen=True)
class Scores:
    """The fixed point `propagate` reached, and how: a report shows sweeps and `converged`."""

    score: dict[str, float]
    sweeps: int
    delta: float  # the largest change in the last sweep
    converged: bool


# ---------------------------------------------------------------- what a text says

_CUE_TERMS = frozenset(
    terms(
        "decision decided verdict conclusion final agreed settled switch change plan instead "
        "actually scratch rather reversed replaced done finished completed shipped fixed "
        "solved resolved works takeaway turns correction wrong"
    )
)
_CLAUSE = r"([^,.;:!?()\n]{1,60})"
_BOUNDARY = patterns.compile(
    r"\b(?:with|for|because|instead|over|rather|and|or|as|to|in|on|at|from|since|so|but|"
    r"when|if|than|via|by|of|which|that|who|while|until|after|before|now)\b"
)
_NEGATION = patterns.compile(
    r"\b(?:not|never|no longer|(?:do|does|did|wo|should|ca)n't|(?:do|does|did|will|should) not|"
    r"cannot|avoid(?:ing)?|without|instead of|rather than|drop(?:ped|ping)?|remov(?:e|ed|ing)|"
    r"ditch(?:ed)?|stop(?:ped)? using|(?:switch|mov|migrat)\w* (?:away )?from|replac(?:e|ed|ing)|"
    r"prefer\w* [^,.;:!?]{1,40}? over)\s+" + _CLAUSE
)
_CHOICE_VALUE = patterns.compile(
    r"\b(?:use|using|go(?:ing)? with|stick(?:ing)? with|switch(?:ing|ed)? to|mov(?:e|ing|ed) to|"
    r"migrat(?:e|ing|ed) to|settl(?:e|ed) on|choose|chose|chosen|pick(?:ed)?|prefer(?:s|red)?|"
    r"adopt(?:ed)?|opt(?:ed)? for|replac\w* [^,.;:!?]{1,40}? with)\s+" + _CLAUSE
)
_FACT_VALUE = patterns.compile(r"\b(?:is|was|are|were)\s+(?!not\b)" + _CLAUSE)
# the engine's reversal cues, and the words that correct a fact
_CUE = patterns.compile(
    REVERSAL.pattern + r"|\b(?:wrong|incorrect|mistaken|correction|turns out|in fact)\b"
)
_CLAUSE_START = patterns.compile(r".*[,.;:!?(\n]", re.DOTALL)
_NOTHING: frozenset[str] = frozenset()


class _Facts(NamedTuple):
    """What `link` compares: a node's terms, what it negates, what value it gives."""

    node: Node
    terms: frozenset[str]  # content terms, conclusion cue words left out
    topic: frozenset[str]
    pos: frozenset[str]  # terms said outside any negation
    neg: dict[str, str]  # negated term -> the phrase that negates it ("not Postgres")
    values: dict[str, str]  # chosen or stated value term -> its phrase ("switch to Postgres")
    slots: frozenset[str]  # what a stated fact is about ("root cause" in "root cause was X")
    cue: str  # a reversal or correction word ("instead", "actually"), or ""
    choice: bool
    surface: dict[str, str]  # term -> the word it came from, for evidence


def time_order(node: Node) -> tuple[str, int, str]:
    """A node's place in time: when it was said, then its turn and id (for ties)."""
    return (node.ts, node.turn, node.id)


def _head(clause: str) -> tuple[int, list[str]]:
    """The length of a clause's part before its first boundary word, and its first two terms."""
    head = _BOUNDARY.split(clause, maxsplit=1)[0].rstrip()
    return len(head), [t for t in terms(head) if t not in _CUE_TERMS][:2]


def _facts(node: Node) -> _Facts:
    """What `link` needs to know of a node, worked out once."""
    text = node.text.replace("\u2019", "'")
    lower = text.lower()
    if len(lower) != len(text):
        text = lower  # rare letters change length when lowercased: quote the lowercase
    # term -> the first word it came from: reversed, so that the first one is kept
    said = words(text)[::-1]
    surface = dict(zip(map(term_of, map(str.lower, said)), said, strict=True))
    named = words(" ".join(node.topic))[::-1]
    topic = dict(zip(map(term_of, map(str.lower, named)), named, strict=True))
    surface.pop("", None)
    topic.pop("", None)
    found = frozenset(surface) - _CUE_TERMS
    neg: dict[str, str] = {}
    outside, last = [], 0
    for match in _NEGATION.finditer(lower):
        length, negated = _head(match.group(1))
        end = match.start(1) + length
        for term in negated:
            neg.setdefault(term, text[match.start() : end])
        outside.append(lower[last : match.start()])
        last = end
    outside.append(lower[last:])
    pos = frozenset(terms(" ".join(outside))) & found if neg else found
    values: dict[str, str] = {}
    slots: set[str] = set()
    choice = node.kind in CHOICE
    for match in (_CHOICE_VALUE if choice else _FACT_VALUE).finditer(lower):
        length, chosen = _head(match.group(1))
        if not chosen or any(t in neg for t in chosen):
            continue
        for term in chosen:
            values.setdefault(term, text[match.start() : match.start(1) + length])
        if not choice:
            before = _CLAUSE_START.sub("", lower[: match.start()])
            slots.update(terms(before)[-3:])
    cue = _CUE.search(lower)
    return _Facts(
        node=node,
        terms=found,
        topic=frozenset(topic),
        pos=pos,
        neg={t: p for t, p in neg.items() if t not in pos},
        values=values,
        slots=frozenset(slots),
        cue=cue.group() if cue else "",
        choice=choice,
        surface=topic | surface,
    )


def _show(found: frozenset[str] | set[str], *facts: _Facts) -> str:
    """Terms as the words they came from: {SQLite, WAL}, not {sqlit, wal}."""
    shown = sorted(
        (next((f.surface[t] for f in facts if t in f.surface), t).strip("'-") for t in found),
        key=lambda w: (w.lower(), w),
    )
    return "{" + ", ".join(shown[:5]) + (", \u2026" if len(shown) > 5 else "") + "}"


# ---------------------------------------------------------------- link


def _clash(
    a: _Facts, b: _Facts, shared: frozenset[str], topic: frozenset[str]
) -> tuple[str, float, str, str] | None:
    """How the later `b` reverses or denies the earlier `a`, if it does, as (type,
    weight, evidence, rule).

    Three clashes count. Polarity: one negates what the other chooses or states ("not
    Postgres", then "switch to Postgres"), or after a reversal cue negates anything the
    other said ("drop the cron job"). Alignment: the same words around a different value
    ("the root cause was X in the importer" / "... was Y in the importer"). Reversal: a
    later value with a reversal or correction cue ("switch to Postgres", "actually").
    A later statement that names what it rejects clashes only with what it names.
    """
    kind = "supersedes" if a.choice else "contradicts"
    flips = {t: (a.neg[t], b.values[t]) for t in a.neg.keys() & b.values.keys()}
    flips |= {t: (a.values[t], b.neg[t]) for t in a.values.keys() & b.neg.keys()}
    if b.cue:
        flips |= {t: (a.surface[t], b.neg[t]) for t in a.pos & b.neg.keys()}
    if flips:
        if not shared - flips.keys() and not topic:
            return None
        said, unsaid = flips[min(flips)]
        evidence = (
            f"same subject {_show(shared | topic, b, a)}, later {b.node.kind} reverses it "
            f"('{said}' vs '{unsaid}')"
        )
        return kind, 0.9, evidence, "polarity"
    va, vb = a.values.keys(), b.values.keys()
    if b.neg or not va or not vb or va & vb or va & b.pos or vb & a.pos:
        return None
    if not a.choice and not a.slots & b.slots:
        return None  # two facts about different things ("X is fast", "Y is idempotent")
    rest_a, rest_b = a.terms - va, b.terms - vb
    if len(rest_a & rest_b) >= 3 and len(rest_a ^ rest_b) <= 1:
        rule, weight, why = "alignment", 0.6, "otherwise the same wording"
    elif b.cue:
        rule, weight, why = "reversal", 0.8, f"later says '{b.cue}'"
    else:
        return None
    evidence = (
        f"same subject {_show(shared | topic, b, a)}, different value "
        f"('{a.values[min(va)]}' vs '{b.values[min(vb)]}'), {why}"
    )
    return kind, weight, evidence, rule


def _relate(
    a: _Facts, b: _Facts, shared: frozenset[str], reversible: bool
) -> tuple[Edge, str] | None:
    """The edge between an earlier `a` and a later `b` sharing the terms `shared`, if
    any, with the rule that found it: a clash first, then agreement on a value,
    generalization, restatement.

    Topic words (segment keywords, vaguer than the text) make a common subject only
    when two agree. A reversal cue reverses one statement, the latest it fits: the
    caller passes `reversible` False once it found that one.
    """
    # a choice never clashes with a fact: they answer different questions
    clashable = a.choice == b.choice and bool(a.neg or b.neg or (a.values and b.values))
    akin = len(shared) >= 2 or bool(shared and a.values and b.values)
    if not (clashable or akin):
        return None  # the common case: too little in common for any rule
    topic = a.topic & b.topic
    if len(topic) < 2:
        if not shared:
            return None
        topic = _NOTHING
    if clashable:
        found = _clash(a, b, shared, topic)
        if found is not None and (reversible or found[3] != "reversal"):
            kind, weight, evidence, rule = found
            return Edge(b.node.id, a.node.id, kind, evidence, weight), rule
    if not akin:
        return None
    similarity = len(shared) / len(a.terms | b.terms)
    va, vb = a.values.keys(), b.values.keys()
    if (
        va
        and vb
        and (va <= vb or vb <= va)
        and a.choice == b.choice
        and (a.choice or a.slots & b.slots)
    ):
        value = min(va & vb)
        evidence = (
            f"both {'choose' if a.choice else 'state'} {_show(va & vb, b)} "
            f"('{a.values[value]}', '{b.values[value]}')"
        )
        weight = round(max(similarity, 0.5), 3)
        return Edge(b.node.id, a.node.id, "supports", evidence, weight), "agreement"
    small, large = (a, b) if len(a.terms) <= len(b.terms) else (b, a)
    if len(small.terms) >= 2 and small.terms < large.terms and len(large.terms - small.terms) >= 2:
        rungs = layer(small.node.text, small.node.kind), layer(large.node.text, large.node.kind)
        if rungs[0] > rungs[1]:
            evidence = (
                f"its terms {_show(small.terms, small)} all recur in the more specific "
                f"statement, which adds {_show(large.terms - small.terms, large)} "
                f"(abstraction layer {rungs[0]} over {rungs[1]})"
            )
            edge = Edge(small.node.id, large.node.id, "generalizes", evidence, 0.6)
            return edge, "generalization"
    if len(shared) >= 2 and similarity >= SIMILAR:
        where = (
            "in the same session"
            if a.node.session == b.node.session
            else f"in session {b.node.session}"
        )
        evidence = f"restates it {where}: shares {_show(shared, b)} (Jaccard {similarity:.2f})"
        return Edge(b.node.id, a.node.id, "supports", evidence, round(similarity, 3)), "restatement"
    return None


class Linked(NamedTuple):
    """What `link` remembers of one node for the next run: its content (`digest`), the
    terms it is blocked on and compared with (`terms`, topic words included), the nodes
    it was compared with (`candidates`, latest first) and the edges that comparison drew
    (`edges`). Equal content and equal candidates give equal edges."""

    digest: str
    terms: tuple[str, ...]
    candidates: tuple[str, ...]
    edges: tuple[Edge, ...]


def fingerprint(value: Any) -> str:
    """A short digest of `value`'s repr (plain data: strings, numbers, tuples, lists)."""
    return hashlib.blake2b(repr(value).encode("utf-8", "surrogatepass"), digest_size=10).hexdigest()


def digest(node: Node) -> str:
    """What of a node `link` reads (its text, kind, topic, time, turn), as a digest."""
    return fingerprint((node.kind, node.text, node.topic, node.ts, node.turn))


def link(nodes: Sequence[Node]) -> list[Edge]:
    """Every edge between `nodes`, found without comparing all pairs.

    A node is compared only with the latest `WINDOW` earlier nodes that mention one of
    its `KEYS` rarest terms (topic words included): a reversal or a restatement shares
    a specific word, and a word said everywhere says nothing about a pair. The work is
    linear in the number of nodes.
    """
    return relink(nodes, {})[0]


def relink(
    nodes: Sequence[Node], memo: Mapping[str, Linked]
) -> tuple[list[Edge], dict[str, Linked]]:
    """`link`, reusing what an earlier call remembered (`memo`, by node id); returns
    the edges and what to remember for the next call.

    The edges are exactly `link(nodes)`: a node whose content and candidates are the
    same as remembered, and whose candidates' contents are too, draws the same edges,
    so only the others are compared again (a nightly run after one changed session
    compares the few nodes whose rare terms or windows that session touched).
    """
    ordered = sorted(nodes, key=time_order)
    by_id = {node.id: node for node in ordered}
    if len(by_id) != len(ordered):
        raise ValueError("conclusion graph: two nodes share an id; ids must be unique")
    with _bulk():
        return _link(ordered, by_id, memo)


def _link(
    ordered: list[Node], by_id: dict[str, Node], memo: Mapping[str, Linked]
) -> tuple[list[Edge], dict[str, Linked]]:
    """`relink` on nodes in time order: each node meets its candidates latest first."""
    found: dict[tuple[str, str, str], Edge] = {}

    def keep(edge: Edge) -> None:
        found.setdefault((edge.source, edge.target, edge.type), edge)

    for node in ordered:
        later = by_id.get(node.superseded_by or "")
        if later is not None and time_order(later) > time_order(node):
            keep(
                Edge(
                    later.id,
                    node.id,
                    "supersedes",
                    f"the engine saw the later {later.kind} reverse it in session {later.session}",
                    1.0,
                )
            )
    digests = [digest(node) for node in ordered]
    facts: dict[int, _Facts] = {}

    def facts_of(index: int) -> _Facts:
        if index not in facts:
            facts[index] = _facts(ordered[index])
        return facts[index]

    remembered: list[Linked | None] = []
    said: list[tuple[str, ...]] = []
    for index, node in enumerate(ordered):
        old = memo.get(node.id)
        if old is not None and old.digest == digests[index]:
            remembered.append(old)
            said.append(old.terms)
        else:
            remembered.append(None)
            fact = facts_of(index)
            said.append(tuple(sorted(fact.terms | fact.topic)))
    frequency = Counter(t for terms_said in said for t in terms_said)
    postings: defaultdict[str, list[int]] = defaultdict(list)
    kept: dict[str, Linked] = {}
    for index, node in enumerate(ordered):
        mentioned = [t for t in said[index] if frequency[t] > 1]
        keys = sorted(mentioned, key=lambda t: (frequency[t], t))[:KEYS]
        candidates = sorted({j for t in keys for j in postings[t][-WINDOW:]}, reverse=True)
        names = tuple(ordered[j].id for j in candidates)
        old = remembered[index]
        if (
            old is not None
            and old.candidates == names
            and all(remembered[j] is not None for j in candidates)
        ):
            edges = old.edges
        else:
            edges = _compare(facts_of(index), [facts_of(j) for j in candidates])
        kept[node.id] = Linked(digests[index], said[index], names, edges)
        for edge in edges:
            keep(edge)
        for term in mentioned:
            postings[term].append(index)
    return sorted(found.values(), key=lambda e: (e.source, e.target, e.type)), kept


def _compare(fact: _Facts, candidates: list[_Facts]) -> tuple[Edge, ...]:
    """The edges a node draws with its candidates (latest first): one per related
    candidate, and derived_from the candidate of its session it shares most with."""
    drawn: list[Edge] = []
    foundation: tuple[int, _Facts] | None = None
    reversible = True
    for earlier in candidates:
        shared = earlier.terms & fact.terms
        related = _relate(earlier, fact, shared, reversible)
        if related is not None:
            drawn.append(related[0])
            reversible = reversible and related[1] != "reversal"
        elif (
            shared
            and earlier.node.session == fact.node.session
            and (foundation is None or len(shared) > foundation[0])
        ):
            foundation = (len(shared), earlier)
    if foundation is not None:
        earlier = foundation[1]
        shared_terms = earlier.terms & fact.terms
        cover = len(shared_terms) / min(len(earlier.terms), len(fact.terms))
        drawn.append(
            Edge(
                fact.node.id,
                earlier.node.id,
                "derived_from",
                f"same session {fact.node.session}, "
                f"builds on its subject {_show(shared_terms, fact)}",
                round(0.2 + 0.4 * cover, 3),
            )
        )
    return tuple(drawn)


# ---------------------------------------------------------------- resolve


def _user_stated(node: Node) -> bool:
    """The detector scales an assistant's claim by ASSISTANT_FACTOR: a base above the
    kind's assistant ceiling can only come from the user."""
    return node.base > CONFIDENCE.get(node.kind, 0.75) * ASSISTANT_FACTOR + 1e-9


def _evidence(later: Node, earlier: Node, backers: list[Node]) -> str:
    """Why the later of two conflicting facts deserves to win, or "" if nothing does;
    `backers` are the nodes a supports edge joins to `later`."""
    if later.base > earlier.base:
        return f"it is held with more confidence ({later.base:.2f} > {earlier.base:.2f})"
    if _user_stated(later):
        return "the user stated it"
    for backer in backers:
        if backer.kind in ("confirmation", "resolution") and backer.id != earlier.id:
            return f"the {backer.kind} {backer.id} confirms it"
    return ""


@dataclass(frozen=True)
class Judgement:
    """A model's word on one conflict (`ccm.llm.judge`): a matter of truth or of
    preference, whether the later statement stands, and why."""

    truth: bool
    later_stands: bool
    reason: str


def candidates(nodes: Sequence[Node], edges: Sequence[Edge]) -> list[tuple[Node, Node, Edge]]:
    """The conflicts `resolve` settles, as (earlier, later, edge), in its order."""
    by_id = {node.id: node for node in nodes}
    found = []
    for edge in sorted(edges, key=lambda e: (e.source, e.target, e.type)):
        if edge.type not in ("supersedes", "contradicts") or edge.source == edge.target:
            continue
        if edge.source not in by_id or edge.target not in by_id:
            continue
        earlier, later = sorted((by_id[edge.source], by_id[edge.target]), key=time_order)
        found.append((earlier, later, edge))
    return found


def resolve(
    nodes: Sequence[Node],
    edges: Sequence[Edge],
    judged: Mapping[tuple[str, str], Judgement] | None = None,
) -> Resolution:
    """Settle every supersedes and contradicts edge (thesis 4).

    A matter of choice (two decisions, preferences...) goes to the latest explicit
    declaration; the earlier one is superseded, never deleted. A matter of fact goes to
    the later claim only if it has evidence: more confidence, the user's word, or a
    confirmation or resolution supporting it. Otherwise the challenge fails and the
    challenger is contradicted. The later node is taken from the timestamps, not from
    the edge's direction, so an old statement can never overturn a newer one.

    `judged`: a model's word on some conflicts, by (earlier, later) id, which settles
    them instead of these rules (a matter of preference as one of choice).
    """
    by_id = {node.id: node for node in nodes}
    status = {node_id: "active" for node_id in sorted(by_id)}
    rank = {"active": 0, "superseded": 1, "contradicted": 2}
    ordered = sorted(edges, key=lambda e: (e.source, e.target, e.type))
    backers: dict[str, list[Node]] = defaultdict(list)
    for edge in ordered:
        if edge.type == "supports" and edge.source in by_id and edge.target in by_id:
            backers[edge.source].append(by_id[edge.target])
            backers[edge.target].append(by_id[edge.source])
    conflicts = []
    for earlier, later, edge in candidates(nodes, edges):
        judgement = (judged or {}).get((earlier.id, later.id))
        if judgement is not None:
            rule, outcome = (
                ("truth", "contradicted") if judgement.truth else ("choice", "superseded")
            )
            winner, loser = (later, earlier) if judgement.later_stands else (earlier, later)
            matter = "fact" if judgement.truth else "preference"
            reason = f"a matter of {matter}, as the model judged: {judgement.reason}"
        elif edge.type == "supersedes" or (earlier.kind in CHOICE and later.kind in CHOICE):
            winner, loser, rule, outcome = later, earlier, "choice", "superseded"
            reason = (
                f"a matter of choice: the later {later.kind} ({later.ts}) replaces the "
                f"earlier {earlier.kind} ({earlier.ts}), which is kept as superseded"
            )
        else:
            rule, outcome = "truth", "contradicted"
            why = _evidence(later, earlier, backers[later.id])
            if why:
                winner, loser = later, earlier
                reason = f"a matter of fact: the later claim wins because {why}"
            else:
                winner, loser = earlier, later
                reason = (
                    "a matter of fact: the later claim has no evidence (confidence "
                    f"{later.base:.2f} <= {earlier.base:.2f}, not stated by the user, "
                    "unconfirmed), so its challenge failed"
                )
        if rank[outcome] > rank[status[loser.id]]:
            status[loser.id] = outcome
        reason = f"{reason}; edge: {edge.evidence}"
        conflicts.append(Conflict(winner.id, loser.id, rule, reason, judgement is not None))
    return Resolution(status, conflicts)


# ---------------------------------------------------------------- confidence


_Flow = tuple[str | None, str, str, float, Edge]
"""Trust reaching a target: (source, target, source's session, weight, edge). The
source is None for a challenge the target survived: a fixed amount, whatever the
challenger's score."""


def _flows(
    by_id: dict[str, Node], edges: Sequence[Edge], status: dict[str, str]
) -> Iterator[_Flow]:
    """Agreement runs both ways; an instance backs its generalization; a foundation
    backs what is derived from it; a failed challenge backs what it challenged. A
    supersede or a successful contradiction carries no trust."""
    for edge in edges:
        source, target = by_id.get(edge.source), by_id.get(edge.target)
        if source is None or target is None or source.id == target.id:
            continue
        weight = min(1.0, max(0.0, edge.weight))
        if edge.type == "supports":
            yield source.id, target.id, source.session, weight, edge
            yield target.id, source.id, target.session, weight, edge
        elif edge.type in ("generalizes", "derived_from"):
            yield target.id, source.id, target.session, weight, edge
        elif (
            edge.type == "contradicts"
            and status.get(source.id, "active") != "active"
            and status.get(target.id, "active") == "active"
        ):
            yield None, target.id, source.session, FAILED * weight, edge


@contextmanager
def _bulk() -> Iterator[None]:
    """Pause the cyclic garbage collector while millions of small objects are built
    that all stay alive: its repeated scans of them would double the running time."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def propagate(nodes: Sequence[Node], edges: Sequence[Edge], status: dict[str, str]) -> Scores:
    """Confidence as the least fixed point of trust flowing along the edges (thesis 5).

    score = factor(status) * (base + (1 - base) * ALPHA * support), where support
    combines the incoming flows (each an edge weight times the supporter's own score)
    by noisy-or across sessions; within one session only the strongest flow counts
    fully and every further one by ECHO, so independent sessions weigh more than
    echoes of one conversation. The update is monotone and bounded, so iterating it
    from the unsupported scores climbs to the least fixed point even around cycles;
    sweeps run in place over the nodes whose inputs moved by at least TOLERANCE.
    """
    with _bulk():
        by_id = {node.id: node for node in nodes}
        ids = sorted(by_id)
        index = {node_id: i for i, node_id in enumerate(ids)}
        fixed = len(ids)  # a pseudo-node whose score stays 1: flows of failed challenges
        if len(ids) >= ARRAY_NODES:
            return _propagate_arrays(by_id, ids, index, edges, status)
        grouped: list[dict[str, list[tuple[int, float]]]] = [{} for _ in ids]
        dependents: list[list[int]] = [[] for _ in ids]
        for source_id, target_id, session, weight, _ in _flows(by_id, edges, status):
            target = index[target_id]
            source = fixed if source_id is None else index[source_id]
            grouped[target].setdefault(session, []).append((source, weight))
            if source_id is not None:
                dependents[source].append(target)
        # per node: the flows alone in their session, then the sessions with several;
        # sorted, so that the products never depend on the order of `edges`
        singles: list[list[tuple[int, float]]] = []
        several: list[list[list[tuple[int, float]]]] = []
        for sessions in grouped:
            singles.append(sorted(f[0] for f in sessions.values() if len(f) == 1))
            several.append([sorted(sessions[s]) for s in sorted(sessions) if len(sessions[s]) > 1])
        offset, scale = [], []
        for node_id in ids:
            base = min(1.0, max(0.0, by_id[node_id].base))
            factor = FACTOR[status.get(node_id, "active")]
            offset.append(factor * base)
            scale.append(factor * (1.0 - base) * ALPHA)
        score = [*offset, 1.0]
        dirty: list[int] = list(range(len(ids)))
        sweeps, delta = 0, 0.0
        while dirty and sweeps < MAX_SWEEPS:
            sweeps += 1
            delta = 0.0
            moved: set[int] = set()
            for i in dirty:
                miss = 1.0
                for j, weight in singles[i]:
                    miss *= 1.0 - weight * score[j]
                for group in several[i]:
                    best, rest = 0.0, 1.0
                    for j, weight in group:
                        value = weight * score[j]
                        if value > best:
                            rest *= 1.0 - ECHO * best
                            best = value
                        else:
                            rest *= 1.0 - ECHO * value
                    miss *= (1.0 - best) * rest
                new = offset[i] + scale[i] * (1.0 - miss)
                change = new - score[i]  # scores only rise: the update is monotone
                score[i] = new
                if change >= TOLERANCE:
                    moved.update(dependents[i])
                if change > delta:
                    delta = change
            dirty = sorted(moved)
        return Scores(dict(zip(ids, score, strict=False)), sweeps, delta, not dirty)


def _propagate_arrays(
    by_id: dict[str, Node],
    ids: list[str],
    index: dict[str, int],
    edges: Sequence[Edge],
    status: dict[str, str],
) -> Scores:
    """`propagate` on a large graph: the same update and the same least fixed point, on
    NumPy arrays, every node at once at each sweep (Jacobi's order, where `propagate`
    updates in place, Gauss-Seidel's: both climb from the unsupported scores to the
    least fixed point, and stop once no score moves by `TOLERANCE`, so they agree to
    about that). The flows are sorted by target and session once; a sweep takes the
    best flow of each (target, session) and the product of the rest, then each target's
    product over its sessions, with `reduceat`."""
    import numpy as np

    fixed = len(ids)
    sessions: dict[str, int] = {}
    rows = [
        (
            fixed if source is None else index[source],
            index[target],
            sessions.setdefault(s, len(sessions)),
            w,
        )
        for source, target, s, w, _ in _flows(by_id, edges, status)
    ]
    flows = np.array(rows, dtype=np.float64).reshape(-1, 4)
    order = np.lexsort((flows[:, 2], flows[:, 1]))  # by target, then session
    source = flows[order, 0].astype(np.int64)
    target = flows[order, 1].astype(np.int64)
    session = flows[order, 2].astype(np.int64)
    weight = flows[order, 3]
    offset = np.empty(fixed)
    scale = np.empty(fixed)
    for at, node_id in enumerate(ids):
        base = min(1.0, max(0.0, by_id[node_id].base))
        factor = FACTOR[status.get(node_id, "active")]
        offset[at] = factor * base
        scale[at] = factor * (1.0 - base) * ALPHA
    score = np.append(offset, 1.0)
    if not len(source):
        return Scores(dict(zip(ids, score[:fixed].tolist(), strict=True)), 1, 0.0, True)
    group = np.ones(len(source), dtype=bool)  # where each (target, session) starts
    group[1:] = (target[1:] != target[:-1]) | (session[1:] != session[:-1])
    starts = np.flatnonzero(group)
    alone = np.diff(np.append(starts, len(source))) == 1
    group_target = target[starts]
    firsts = np.ones(len(starts), dtype=bool)  # where each target's groups start
    firsts[1:] = group_target[1:] != group_target[:-1]
    target_starts = np.flatnonzero(firsts)
    targets = group_target[target_starts]
    sweeps, delta, converged = 0, 0.0, False
    while sweeps < MAX_SWEEPS:
        sweeps += 1
        value = weight * score[source]
        best = np.maximum.reduceat(value, starts)
        # the others of a session count by ECHO: all of them, the best taken out
        rest = np.multiply.reduceat(1.0 - ECHO * value, starts) / (1.0 - ECHO * best)
        factors = np.where(alone, 1.0 - best, (1.0 - best) * rest)
        miss = np.ones(fixed)
        miss[targets] = np.multiply.reduceat(factors, target_starts)
        new = offset + scale * (1.0 - miss)
        delta = float(np.max(new - score[:fixed]))
        score[:fixed] = new
        if delta < TOLERANCE:
            converged = True
            break
    return Scores(
        dict(zip(ids, score[:fixed].tolist(), strict=True)), sweeps, max(delta, 0.0), converged
    )


def confidence(
    nodes: Sequence[Node], edges: Sequence[Edge], status: dict[str, str]
) -> dict[str, float]:
    """Each node's emergent confidence in [0, 1]; see `propagate`."""
    return propagate(nodes, edges, status).score


def explain(
    node_id: str,
    nodes: Sequence[Node],
    edges: Sequence[Edge],
    status: dict[str, str],
    scores: dict[str, float],
) -> dict[str, Any]:
    """Where a node's score comes from, for a person who doubts it."""
    by_id = {node.id: node for node in nodes}
    if node_id not in by_id:
        raise ValueError(f"conclusion graph: no node {node_id!r}; see network/nodes.json for ids")
    node = by_id[node_id]
    incoming = [flow for flow in _flows(by_id, edges, status) if flow[1] == node_id]
    backing = sorted(
        (scores.get(source, 0.0), source, session, weight, edge)
        for source, _, session, weight, edge in incoming
        if source is not None
    )
    backing.sort(key=lambda b: -b[0] * b[3])  # stable: ties stay in the order of ids
    supporters = [
        {
            "id": source,
            "session": session,
            "score": score,
            "via": edge.type,
            "weight": weight,
            "evidence": edge.evidence,
        }
        for score, source, session, weight, edge in backing
    ]
    failed = [
        {"id": edge.source, "session": session, "evidence": edge.evidence}
        for source, _, session, _, edge in sorted(incoming, key=lambda f: f[4].source)
        if source is None
    ]
    challenges = [
        {"id": e.source, "type": e.type, "evidence": e.evidence}
        for e in sorted(edges, key=lambda e: (e.source, e.type))
        if e.target == node_id and e.type in ("supersedes", "contradicts") and e.source in by_id
    ]
    return {
        "id": node_id,
        "kind": node.kind,
        "text": node.text,
        "status": status.get(node_id, "active"),
        "factor": FACTOR[status.get(node_id, "active")],
        "base": node.base,
        "supporters": supporters,
        "failed_contradictions": failed,
        "challenged_by": challenges,
        "sessions": sorted({flow[2] for flow in incoming}),
        "score": scores.get(node_id, 0.0),
    }


def to_networkx(
    nodes: Sequence[Node],
    edges: Sequence[Edge],
    scores: dict[str, float],
    status: dict[str, str],
) -> networkx.MultiDiGraph:
    """The graph for GraphML export: every attribute a plain string or number."""
    import networkx

    graph = networkx.MultiDiGraph()
    for node in sorted(nodes, key=lambda n: n.id):
        graph.add_node(
            node.id,
            session=node.session,
            segment=node.segment,
            kind=node.kind,
            text=node.text,
            turn=node.turn,
            ts=node.ts,
            topic=", ".join(node.topic),
            base=node.base,
            score=scores.get(node.id, 0.0),
            status=status.get(node.id, "active"),
        )
    for edge in edges:
        if edge.source in graph and edge.target in graph:
            graph.add_edge(
                edge.source,
                edge.target,
                key=edge.type,
                type=edge.type,
                evidence=edge.evidence,
                weight=edge.weight,
            )
    return graph
