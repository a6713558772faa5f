"""From a session's manifest to graph nodes, and from the settled graph to markdown notes.

Pure functions: the consolidation job reads the store, calls these, and writes what they
return. A note is a function of its session records and the graph only (no clock), so
consolidating the same sessions from scratch gives the same vault byte for byte.

Notes, as an Obsidian vault sees them:

* ``artifacts/<kind>/<slug>.md``, one per conclusion of a concluded segment: frontmatter
  (id, type, status, confidence, layer, sources, tags, aliases, created, updated,
  links, content_hash), then the conclusion, its context, the verbatim evidence with
  its turn numbers, and a Related list of wikilinks;
* ``chats/<session>/<session>.md``, one per session: title, dates, each segment with
  its summary and a link to its conclusion's artifact.

Every conclusion is a node of the graph, also the one of a segment still open (a
question was raised after it): it may supersede an older conclusion, and its artifact
is written once the segment is concluded.

Links are written as vault paths (``[[artifacts/decision/use-sqlite|...]]``), which
resolve the same whatever other notes share a file name.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict

from ccm import patterns
from ccm.engine.conclusions import CUE_WORDS, lead_sentences, plain
from ccm.engine.text import counted, terms, unwrapped
from ccm.sleep import notes
from ccm.sleep.graph import Conflict, Edge, Node, fingerprint, time_order
from ccm.sleep.ladder import layer

QUOTE_CHARS = 2000  # longest verbatim quote kept in an artifact
FOLLOWS_BACK = 5  # turns back in which a user's conclusion finds the answer it follows
OWN_CHARS = 60  # of a statement, found in its turn: the statement is the turn's own words
FOLLOWS_SENTENCES = 2  # of the answer a user's conclusion follows, that its note adds
RELATED_MAX = 40  # related notes listed in a body (the frontmatter keeps every link)
SLUG_WORDS = 7
SLUG_CHARS = 60


class Evidence(TypedDict):
    turn: int
    role: str
    ts: str
    text: str
    clipped: bool


class SegmentRecord(TypedDict):
    id: str
    raw_lines: list[int]
    summary: str
    status: str
    lifecycle: str
    topic: list[str]
    conclusion: dict[str, Any] | None
    ts: str  # when its conclusion was said ("" without one)
    evidence: list[Evidence]
    follows: str  # what the answer a user's conclusion follows says ("" if none: `_follows`)


class SessionRecord(TypedDict, total=False):
    session: str
    title: str | None
    source: str | None
    turns: int
    first_ts: str | None
    last_ts: str | None
    segments: list[SegmentRecord]
    parent: str | None  # the session a subagent session was started from


# ---------------------------------------------------------------- reading a session


def _quoted(conclusion: dict[str, Any]) -> list[int]:
    """The turns an artifact quotes for a conclusion: its turn, after the turn before
    it when the detector says the conclusion confirms it."""
    turn = int(conclusion["turn"])
    if "previous turn" in str(conclusion.get("reason", "")) and turn > 1:
        return [turn - 1, turn]
    return [turn]


def evidence_turns(manifest: dict[str, Any]) -> set[int]:
    """The turns the artifacts of a session may quote (see `_quoted`), with those in
    which the answer each conclusion follows may be (see `_follows`)."""
    wanted: set[int] = set()
    for segment in manifest.get("segments", []):
        if segment.get("conclusion"):
            turn = int(segment["conclusion"]["turn"])
            wanted.update(_quoted(segment["conclusion"]))
            wanted.update(range(max(1, turn - FOLLOWS_BACK), turn))
    return wanted


def _follows(conclusion: dict[str, Any], turns: dict[int, dict[str, Any]]) -> tuple[int, str]:
    """The assistant turn a user's conclusion follows (the nearest within
    `FOLLOWS_BACK`, tool output between) and what of it the note adds: "22h with zero
    restarts, I'm calling the OOM thing closed" says that a fix held, the answer before
    it what the fix was (its first sentences); a statement that leads with the answer it
    accepts ("The cheapest fit is ... (ok, go with that)") goes on with the answer's
    next sentences. (0, "") when there is none, or the statement is neither."""
    turn = int(conclusion["turn"])
    said = turns.get(turn)
    if said is None or said["role"] != "user":
        return 0, ""
    answer = 0
    for number in range(turn - 1, max(0, turn - FOLLOWS_BACK - 1), -1):
        before = turns.get(number)
        if before is None or before["role"] == "user":
            break
        if before["role"] == "assistant":
            answer = number
            break
    if not answer:
        return 0, ""
    statement = " ".join(str(conclusion["text"]).rstrip("\u2026").split())[:OWN_CHARS]
    content = str(said["content"])
    lead = lead_sentences(str(turns[answer]["content"]), 2 * FOLLOWS_SENTENCES)
    if statement in " ".join(plain(content).split()) or statement in " ".join(content.split()):
        added = lead[:FOLLOWS_SENTENCES]  # the user's own words: what the answer says
    elif " ".join(lead).startswith(statement):
        added = lead[FOLLOWS_SENTENCES:]  # what was accepted, said on
    else:
        return 0, ""
    # what the statement says already (it may go on with the answer it accepts: "lovely,
    # that's the rota sorted then! — That's 21 households for 24 slots") is not said twice
    whole = " ".join(str(conclusion["text"]).split())
    added = [s for s in added if " ".join(s.split()) not in whole]
    # list items read as sentences
    return answer, " ".join(s if s.endswith((".", "!", ":", ";")) else s + "." for s in added)


def session_record(
    manifest: dict[str, Any],
    turns: dict[int, dict[str, Any]],
    title: str | None,
    source: str | None,
    first_ts: str | None,
    last_ts: str | None,
    parent: str | None = None,
) -> SessionRecord:
    """What consolidation keeps of a session: its segments, with each conclusion's time
    and verbatim evidence (`turns` holds at least the `evidence_turns`)."""
    segments: list[SegmentRecord] = []
    for segment in manifest.get("segments", []):
        conclusion = segment.get("conclusion")
        evidence: list[Evidence] = []
        ts = ""
        follows = ""
        if conclusion:
            said = turns.get(int(conclusion["turn"]))
            ts = str(said["ts"]) if said else (last_ts or "")
            followed, follows = _follows(conclusion, turns)
            quoted = _quoted(conclusion)
            for number in ([followed] if followed and followed not in quoted else []) + quoted:
                turn = turns.get(number)
                if turn is None:
                    continue
                text = str(turn["content"])
                evidence.append(
                    {
                        "turn": number,
                        "role": str(turn["role"]),
                        "ts": str(turn["ts"]),
                        "text": text[:QUOTE_CHARS],
                        "clipped": len(text) > QUOTE_CHARS,
                    }
                )
        if conclusion:
            conclusion = {
                **conclusion,
                "layer": layer(str(conclusion["text"]), str(conclusion["kind"])),
            }
        segments.append(
            {
                "id": str(segment["id"]),
                "raw_lines": [int(n) for n in segment["raw_lines"]],
                "summary": str(segment.get("summary", "")),
                "status": str(segment.get("status", "open")),
                "lifecycle": str(segment.get("lifecycle", "active")),
                "topic": [str(t) for t in segment.get("topic", [])],
                "conclusion": dict(conclusion) if conclusion else None,
                "ts": ts,
                "evidence": evidence,
                "follows": follows,
            }
        )
    return {
        "session": str(manifest["session"]),
        "title": title,
        "source": source,
        "turns": int(manifest.get("turns", 0)),
        "first_ts": first_ts,
        "last_ts": last_ts,
        "segments": segments,
        "parent": parent,
    }


def nodes_of(record: SessionRecord) -> list[Node]:
    """A node for each conclusion (of a concluded or an open segment); the engine's `superseded_by`
    (a turn) becomes the id of the node said at that turn."""
    session = record["session"]
    at_turn = {
        int(s["conclusion"]["turn"]): f"{session}/{s['id']}"
        for s in record["segments"]
        if s["conclusion"]
    }
    found = []
    for segment in record["segments"]:
        conclusion = segment["conclusion"]
        if not conclusion:
            continue
        later = conclusion.get("superseded_by")
        found.append(
            Node(
                id=f"{session}/{segment['id']}",
                session=session,
                segment=segment["id"],
                kind=str(conclusion["kind"]),
                text=str(conclusion["text"]),
                turn=int(conclusion["turn"]),
                ts=segment["ts"],
                topic=tuple(segment["topic"]),
                base=float(conclusion["confidence"]),
                superseded_by=at_turn.get(int(later)) if later else None,
            )
        )
    return found


# ---------------------------------------------------------------- names


_SLUG_WORD = patterns.compile(r"[a-z0-9]+")
_FILLER = (
    "a an the and or but of to in on at for with by from as is are was were be been it its "
    "this that these those we i you our my your us so then now ok okay yes lets thats "
    "decision decided final change plan takeaway conclusion verdict done fixed"
)
_STOP = frozenset(_FILLER.split())
_SENTENCE_END = patterns.compile(r"(?<=[.!?])\s")
TITLE_WORDS = 10
TITLE_SUBSTANCE = 3
# a sentence, or the parenthesis a statement ends with (what the user said)
_CLAUSES = patterns.compile(r"(?<=[.!?])\s+|\s*[()]\s*|\s+\u2014\s+")
_LEAD_FILLER = patterns.compile(
    r"^(?:(?:ok(?:ay)?|so|and|great|nice|good|perfect|right|yes|yep|yeah|well|ugh|hm+|"
    r"thanks|then|that answers it|that'?s it|decided|decision|final|verdict|done|"
    r"conclusion|update|note)\b[\s,.!:;\u2014-]*)+",
    re.IGNORECASE,
)
_DANGLING = frozenset(
    """
    a an the and or but of to in on at for with by from as is are was were be it its this
    that so then if because which who per into over under about than via through after
    before without within not no
    """.split()  # noqa: SIM905 - a word list reads better as text
)


def title(text: str) -> str:
    """A heading that names what a conclusion is about: 3 to 10 words of its statement,
    from the first sentence or clause that carries at least three words of substance
    (the words that only say that something concluded, "ok, that answers it", "go
    with the 45 then", do not count), cut at a clause boundary where one is near."""
    flat = plain(" ".join(text.split()))
    pieces = [
        _LEAD_FILLER.sub("", p.strip(" :;\u2014\u2013-")).split() for p in _CLAUSES.split(flat)
    ]
    pieces = [words for words in pieces if words]
    chosen = next((w for w in pieces if _substance(w) >= TITLE_SUBSTANCE), None)
    if chosen is None:  # no sentence says enough alone: the first ones together
        chosen = []
        for words in pieces:
            chosen += words
            if _substance(chosen) >= TITLE_SUBSTANCE:
                break
    chosen = chosen[:TITLE_WORDS]
    # end at the last clause boundary that keeps enough substance
    for end in range(len(chosen), 2, -1):
        # (three words of substance, a figure aside: "Library: at £8 an hour," names too
        # little alone)
        if chosen[end - 1].endswith((",", ":", ";")) and _substance(chosen[:end], False) >= 3:
            chosen = chosen[:end]
            break
    while len(chosen) > 3 and chosen[-1].lower().strip(",:;.-") in _DANGLING:
        chosen = chosen[:-1]
    heading = " ".join(chosen).rstrip(",:;.!-\u2014 ") or notes.clip(flat, 90)
    return heading[:1].upper() + heading[1:]


def request_title(text: str) -> str:
    """A session named after what it was asked first: the request's first words that
    say what (a slash command's wrapper tags left out, its name and arguments kept)."""
    return title(" ".join(unwrapped(text).split()))


def _substance(words: Sequence[str], figures: bool = True) -> int:
    """Words that say what (not stop words, not the words that only conclude), and with
    `figures`, one more for the figures among them."""
    found = {
        t for t in terms(" ".join(words)) if t not in CUE_WORDS and not any(c.isdigit() for c in t)
    }
    if not figures:
        return len(found)
    # figures say what as one word does ("24.6 x 5.1 = 125.5 m²" alone names nothing), and
    # a lone digit not even that ("3 days to Monday")
    return len(found) + min(1, sum(1 for w in words if len(w) > 1 and any(c.isdigit() for c in w)))


def slug(text: str) -> str:
    """File name stem from a conclusion's words: lowercase, no filler, at most 60 chars."""
    lowered = text.lower().replace("'", "")
    words = [w for w in _SLUG_WORD.findall(lowered) if w not in _STOP] or _SLUG_WORD.findall(
        lowered
    )
    stem = ""
    for word in words[:SLUG_WORDS]:
        grown = f"{stem}-{word}" if stem else word
        if len(grown) > SLUG_CHARS:
            break
        stem = grown
    return stem or "conclusion"


def assign_paths(
    nodes: Sequence[Node],
    known: dict[str, str],
    owner: Callable[[str], str | None],
    titles: dict[str, str] | None = None,
) -> dict[str, str]:
    """Each node's vault path (``artifacts/<kind>/<slug>``, no ``.md``), the slug of its
    title (`titles`, a model's, else `title` of its statement).

    A node keeps the path it already has (`known`, from earlier runs) while its kind is
    the same; a new one gets its slug, or ``<slug>-2``... in time order when taken by
    another node or by a file `owner` says belongs to another id (or to a person).
    """
    paths: dict[str, str] = {}
    taken: set[str] = set()
    ordered = sorted(nodes, key=time_order)
    for node in ordered:
        path = known.get(node.id)
        if path and path.startswith(f"artifacts/{node.kind}/") and path not in taken:
            paths[node.id] = path
            taken.add(path)
    for node in ordered:
        if node.id in paths:
            continue
        named = (titles or {}).get(node.id) or title(node.text)
        stem = f"artifacts/{node.kind}/{slug(named)}"
        number = 1
        while True:
            path = stem if number == 1 else f"{stem}-{number}"
            if path not in taken and owner(path) in (None, node.id):
                break
            number += 1
        paths[node.id] = path
        taken.add(path)
    return paths


def session_path(session: str) -> str:
    return f"chats/{session}/{session}"


def _tag(word: str) -> str | None:
    """An Obsidian tag: letters, digits, _ - /, not only digits."""
    tag = re.sub(r"[^\w/-]+", "-", word.lower()).strip("-/")
    return tag if tag and not tag.isdigit() else None


# ---------------------------------------------------------------- the settled graph


@dataclass
class Graph:
    """Nodes, edges and what the sleep jobs concluded about them."""

    nodes: dict[str, Node]
    edges: list[Edge]
    status: dict[str, str]
    scores: dict[str, float]
    conflicts: list[Conflict]
    paths: dict[str, str]
    sweeps: int = 0
    converged: bool = True
    layers: dict[str, int] = field(default_factory=dict)
    outgoing: dict[str, list[Edge]] = field(default_factory=dict)
    incoming: dict[str, list[Edge]] = field(default_factory=dict)
    lost_to: dict[str, Conflict] = field(default_factory=dict)
    retired: dict[str, str] = field(default_factory=dict)  # old artifact path -> node id
    titles: dict[str, str] = field(default_factory=dict)  # a model's titles, by node id

    def __post_init__(self) -> None:
        if not self.layers:
            self.layers = {i: layer(n.text, n.kind) for i, n in self.nodes.items()}
        outgoing: defaultdict[str, list[Edge]] = defaultdict(list)
        incoming: defaultdict[str, list[Edge]] = defaultdict(list)
        for edge in self.edges:
            outgoing[edge.source].append(edge)
            incoming[edge.target].append(edge)
        self.outgoing, self.incoming = dict(outgoing), dict(incoming)
        for conflict in self.conflicts:
            if self.status.get(conflict.loser, "active") != "active":
                self.lost_to.setdefault(conflict.loser, conflict)

    def score(self, node_id: str) -> float:
        return round(self.scores.get(node_id, 0.0), 3)

    def label(self, node_id: str) -> str:
        return self.titles.get(node_id) or title(self.nodes[node_id].text)

    def mention(self, node_id: str) -> str:
        """A wikilink to the node's artifact, or, for a conclusion of a segment still
        open (no artifact yet), its words and where it was said."""
        path = self.paths.get(node_id)
        if path is not None:
            return notes.wikilink(path, self.label(node_id))
        node = self.nodes[node_id]
        return (
            f"\u201c{notes.inline(self.label(node_id))}\u201d ({node.session} {node.segment}, "
            "a segment still open)"
        )


RELATION_OUT = {
    "supersedes": "supersedes",
    "contradicts": "contradicts",
    "supports": "supports",
    "generalizes": "generalizes",
    "derived_from": "builds on",
}
RELATION_IN = {
    "supersedes": "superseded by",
    "contradicts": "contradicted by",
    "supports": "supported by",
    "generalizes": "generalized by",
    "derived_from": "built on by",
}


def _related(graph: Graph, node_id: str) -> list[tuple[str, str, Edge]]:
    """(relation, other node, edge) for every edge of a node, strongest relations first."""
    rank = {t: i for i, t in enumerate(RELATION_OUT)}
    found = [(RELATION_OUT[e.type], e.target, e) for e in graph.outgoing.get(node_id, [])]
    found += [(RELATION_IN[e.type], e.source, e) for e in graph.incoming.get(node_id, [])]
    found = [f for f in found if f[1] in graph.nodes and f[1] != node_id]
    found.sort(key=lambda f: (rank[f[2].type], -f[2].weight, f[1], f[0]))
    return found


def _source(record: SegmentRecord, session: str, turn: int) -> dict[str, Any]:
    return {
        "session": session,
        "segment": record["id"],
        "raw_lines": list(record["raw_lines"]),
        "turn": turn,
    }


def _when(ts: str) -> str:
    return ts[:16].replace("T", " ") if ts else "unknown time"


def artifact_note(
    graph: Graph,
    node_id: str,
    segments: dict[str, SegmentRecord],
) -> tuple[str, list[dict[str, Any]]]:
    """The artifact of one conclusion, and its sources (for merging into a note a
    person edited). `segments` maps node ids to their segment records."""
    node = graph.nodes[node_id]
    record = segments[node_id]
    status = graph.status.get(node_id, "active")
    related = _related(graph, node_id)
    sources = [_source(record, node.session, node.turn)]
    seen = {node.session + "/" + record["id"]}
    updated = node.ts
    for relation, other, _ in related:
        if relation not in ("supports", "supported by"):
            continue
        other_node = graph.nodes[other]
        if other_node.session == node.session or other in seen:
            continue
        seen.add(other)
        sources.append(_source(segments[other], other_node.session, other_node.turn))
        updated = max(updated, other_node.ts)
    lost = graph.lost_to.get(node_id)
    if lost is not None and lost.winner in graph.nodes:
        updated = max(updated, graph.nodes[lost.winner].ts)
    tags = [node.kind, f"status/{status}", f"layer/{graph.layers[node_id]}"]
    for word in node.topic:
        tag = _tag(word)
        if tag and tag not in tags:
            tags.append(f"topic/{tag}")
    heading = graph.label(node_id)
    fields: dict[str, Any] = {
        "id": node_id,
        "type": node.kind,
        "status": status,
        "confidence": graph.score(node_id),
        "layer": graph.layers[node_id],
        "sources": sources,
        "tags": tags,
        "aliases": [notes.link_label(heading, 90)],
        "created": node.ts,
        "updated": updated,
        "links": [
            {"type": edge.type, "direction": "out" if edge.source == node_id else "in", "id": other}
            for _, other, edge in related
        ],
    }
    session_link = notes.wikilink(session_path(node.session), node.session)
    # the lead paragraph: what was concluded, what the answer it follows says, then
    # what the segment was about
    context = _context(record["summary"], f"{node.text} {record['follows']}")
    lines = [f"# {notes.inline(heading)}", "", notes.inline(node.text)]
    if record["follows"]:
        lines.append(notes.inline(record["follows"]))
    lines += [notes.inline(context), ""] if context else [""]
    lines.append(
        f"*{node.kind} · {status} · confidence {graph.score(node_id):.2f} "
        f"(detected {node.base:.2f}) · layer {graph.layers[node_id]}*"
    )
    lines.append("")
    if lost is not None and lost.winner in graph.nodes:
        verb = "Superseded" if status == "superseded" else "Contradicted"
        lines += [
            f"> [!warning] {verb} by {graph.mention(lost.winner)}",
            f"> {notes.inline(lost.reason)}",
            "",
        ]
    first, last = record["raw_lines"]
    conclusion = record["conclusion"] or {}
    lines += [
        "## Context",
        "",
        f"From {session_link}, {record['id']} (turns {first}-{last}), {_when(node.ts)}; "
        f"the segment is {record['lifecycle']}.",
    ]
    if record["topic"]:
        lines.append(f"Topic: {notes.inline(', '.join(record['topic']))}.")
    if conclusion.get("reason"):
        lines.append(f"Detected by: {notes.inline(str(conclusion['reason']))}.")
    lines += ["", "## Evidence", ""]
    for quote in record["evidence"]:
        cut = " (clipped; the whole turn: `ccm show " + node.session + f" --turns {quote['turn']}`)"
        lines.append(
            f"Turn {quote['turn']} · {quote['role']} · {_when(quote['ts'])}"
            + (cut if quote["clipped"] else "")
        )
        lines.append("")
        lines.append(notes.fenced(quote["text"]))
    if not record["evidence"]:
        lines += ["(the turn is no longer in raw.jsonl)", ""]
    lines += ["## Related", ""]
    for relation, other, edge in related[:RELATED_MAX]:
        lines.append(
            f"- {relation} {graph.mention(other)} "
            f"({edge.weight:.2f}): {notes.inline(edge.evidence)}"
        )
    if len(related) > RELATED_MAX:
        lines.append(f"- \u2026 and {len(related) - RELATED_MAX} more (see `links` above)")
    lines.append(f"- session {session_link}")
    return notes.render(fields, "\n".join(lines) + "\n"), sources


def _context(summary: str, statement: str) -> str:
    """A segment's summary as the context of its conclusion: without the conclusion it
    ends with (the summary's "→ ..."), nor what the statement (and the answer it
    follows) already says."""
    text = summary.split(" \u2192 ", 1)[0] if " \u2192 " in summary else summary
    text = text.removeprefix("\u2192 ").strip()
    said = " ".join(statement.split())
    kept = [s for s in _SENTENCE_END.split(text) if s.strip() and s.strip() not in said]
    return " ".join(kept).strip()


def artifact_key(graph: Graph, node_id: str, segments: dict[str, SegmentRecord]) -> str:
    """What an artifact shows of the graph (its own session aside), as a digest: equal
    keys of a session not read again mean an equal note, which is then not rendered."""
    lost = graph.lost_to.get(node_id)
    return fingerprint(
        (
            graph.status.get(node_id, "active"),
            graph.score(node_id),
            graph.layers[node_id],
            graph.paths.get(node_id),
            [
                (
                    relation,
                    other,
                    edge.weight,
                    edge.evidence,
                    graph.paths.get(other),
                    graph.nodes[other].text,
                    graph.nodes[other].ts,
                    segments[other]["raw_lines"],
                )
                for relation, other, edge in _related(graph, node_id)
            ],
            (lost.winner, lost.reason, graph.paths.get(lost.winner)) if lost else None,
        )
    )


def session_key(
    record: SessionRecord, graph: Graph, children: Sequence[tuple[str, str]] = ()
) -> str:
    """What a session note shows of the graph and of its subagent sessions, as a digest
    (see `artifact_key`)."""
    shown: list[Any] = [[list(child) for child in children]]
    for segment in record["segments"]:
        node_id = f"{record['session']}/{segment['id']}"
        if node_id in graph.nodes:
            shown.append(
                (node_id, graph.status.get(node_id), graph.score(node_id), graph.paths.get(node_id))
            )
    return fingerprint(shown)


def session_note(
    record: SessionRecord, graph: Graph, children: Sequence[tuple[str, str]] = ()
) -> str:
    """The note of a session: what was talked about, segment by segment, and the
    session it was started from or the subagent sessions it started."""
    session = record["session"]
    heading = record["title"] or session
    parent = record.get("parent")
    concluded = sum(1 for s in record["segments"] if s["status"] in ("concluded", "superseded"))
    fields: dict[str, Any] = {
        "id": f"session/{session}",
        "type": "session",
        "status": "active",
        "session": session,
        "turns": record["turns"],
        "tags": ["session"] + ([f"source/{t}"] if (t := _tag(record["source"] or "")) else []),
        "aliases": [notes.link_label(heading, 90)] if heading != session else [],
        "created": record["first_ts"] or "",
        "updated": record["last_ts"] or "",
    }
    lines = [
        f"# {notes.inline(heading)}",
        "",
        f"Session `{session}`: {counted(record['turns'], 'turn')} from "
        f"{_when(record['first_ts'] or '')} to {_when(record['last_ts'] or '')}; "
        f"{counted(len(record['segments']), 'segment')}, "
        f"{concluded} concluded.",
        "",
    ]
    if parent:
        lines += [f"A subagent of {notes.wikilink(session_path(parent), parent)}.", ""]
    if children:
        lines += ["## Subagents", ""]
        lines += [
            f"- {notes.wikilink(session_path(child), notes.link_label(label, 80))}"
            for child, label in children
        ]
        lines.append("")
    lines += ["## Segments", ""]
    for segment in record["segments"]:
        first, last = segment["raw_lines"]
        lines.append(
            f"### {segment['id']} · turns {first}-{last} · {segment['status']} · "
            f"{segment['lifecycle']}"
        )
        lines.append("")
        if segment["topic"]:
            lines.append(f"Topic: {notes.inline(', '.join(segment['topic']))}.")
            lines.append("")
        lines.append(notes.inline(segment["summary"]) or "(no summary)")
        node_id = f"{session}/{segment['id']}"
        if segment["conclusion"] and node_id in graph.nodes:
            status = graph.status.get(node_id, "active")
            lines.append("")
            lines.append(
                f"Conclusion ({segment['conclusion']['kind']}, {status}, confidence "
                f"{graph.score(node_id):.2f}): {graph.mention(node_id)}"
            )
        lines.append("")
    return notes.render(fields, "\n".join(lines))


def layers_of(segments: dict[str, SegmentRecord]) -> dict[str, int]:
    """Each conclusion's rung on the abstraction ladder, worked out when its session was read."""
    return {
        node_id: int((segment["conclusion"] or {}).get("layer", 0))
        for node_id, segment in segments.items()
    }


def titles_of(segments: dict[str, SegmentRecord]) -> dict[str, str]:
    """The titles a model gave conclusions when their sessions were read (`ccm.llm`)."""
    return {
        node_id: str(segment["conclusion"]["title"])
        for node_id, segment in segments.items()
        if segment["conclusion"] and segment["conclusion"].get("title")
    }


def segments_by_node(records: Iterable[SessionRecord]) -> dict[str, SegmentRecord]:
    return {
        f"{record['session']}/{segment['id']}": segment
        for record in records
        for segment in record["segments"]
        if segment["conclusion"]
    }
