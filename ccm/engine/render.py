"""From engine state, events and config to the derived tiers.

``manifest.yaml`` (tier 2), ``open.yaml`` (tier 3) and ``working.yaml`` (tier 4) are
pure functions of the folded state, the session's events and the config. Rendering
costs time in the number of segments and efforts, never in the number of turns.

Events are applied here, in order: ``pin``/``unpin``, ``focus``, ``archive``,
``compress``, ``expand``, ``update``, ``create``/``note``, ``critical``,
``importance``; an ``undo`` event cancels the event it names (and an undone undo
restores it).
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ccm.config import Config
from ccm.engine import working_state
from ccm.engine.critical import forbidden_terms
from ccm.engine.fold import State, match_effort, segment_record
from ccm.engine.text import cosine, prose, terms, top_terms
from ccm.tokens import count_tokens
from ccm.yamlio import Frozen, FrozenList

# relevance weights (whitepaper section 4.2), they sum to 1
WEIGHTS = {"mention": 0.35, "similarity": 0.25, "recency": 0.2, "flag": 0.15, "proximity": 0.05}
RECENCY_SCALE = 50.0


@dataclass
class Tiers:
    manifest: dict[str, Any]
    open: dict[str, Any]
    working: dict[str, Any]
    # the live critical items (`critical_items`) as rendered, with their ids and turns
    critical: list[dict[str, Any]] = field(default_factory=list)


def cancelled_ids(events: list[dict[str, Any]]) -> set[str]:
    """Ids of the events cancelled by an undo that is itself not cancelled."""
    cancelled: set[str] = set()
    for event in reversed(events):
        if event["id"] in cancelled:
            continue
        if event["kind"] == "undo" and event.get("reverts"):
            cancelled.add(event["reverts"])
    return cancelled


def active_events(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Events still in force (undo events themselves excluded)."""
    cancelled = cancelled_ids(events)
    return [e for e in events if e["id"] not in cancelled and e["kind"] != "undo"]


@dataclass
class _Marks:
    pinned: set[str]
    focused: set[str]
    archived: set[str]
    compressed: dict[str, str]
    expanded: set[str]
    updated: dict[str, str]
    notes: list[dict[str, Any]]
    critical: list[dict[str, Any]]
    importance: dict[str, float]


def _marks(events: list[dict[str, Any]]) -> _Marks:
    marks = _Marks(set(), set(), set(), {}, set(), {}, [], [], {})
    for event in events:
        kind = event["kind"]
        args = event.get("args") or {}
        targets = [str(t) for t in args.get("targets", [])]
        if kind == "pin":
            marks.pinned.update(targets)
        elif kind == "unpin":
            marks.pinned.difference_update(targets)
            marks.focused.difference_update(targets)
        elif kind == "focus":
            marks.focused = set(targets)
        elif kind == "archive":
            marks.archived.update(targets)
        elif kind == "compress":
            for target in targets:
                marks.compressed[target] = str(args.get("text") or "")
        elif kind == "expand":
            marks.expanded.update(targets)
            for target in targets:
                marks.compressed.pop(target, None)
                marks.archived.discard(target)
        elif kind == "update":
            for target in targets:
                marks.updated[target] = str(args.get("text") or "")
        elif kind in ("create", "note"):
            marks.notes.append({"id": event["id"], "text": str(args.get("text") or "")})
        elif kind == "critical":
            marks.critical.append(
                {"id": event["id"], "text": str(args.get("text") or ""), "kind": "marked"}
            )
        elif kind == "importance":
            for target in targets:
                marks.importance[target] = marks.importance.get(target, 0.0) + float(
                    args.get("delta", 1.0)
                )
    return marks


def critical_items(state: State, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every live critical item: detected ones not superseded, then explicit marks."""
    return _detected_critical(state["critical"]).items + _marked_critical(events)


def _marked_critical(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            **mark,
            "turn": None,
            "source": "event",
            "tokens": count_tokens(mark["text"]),
            "forbid": forbidden_terms(mark["text"]),
        }
        for mark in _marks(active_events(events)).critical
    ]


class _Detected:
    """The detected critical items not superseded, in state order, with their texts and
    their (turn, position) pairs sorted for finding a segment's items."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []
        self.texts = FrozenList()
        self.placed: list[tuple[int, int]] = []
        self.turns: list[int] = []

    def add(self, found: list[dict[str, Any]]) -> None:
        for item in found:
            pair = (item["turn"], len(self.items))
            self.items.append(item)
            if not self.placed or pair >= self.placed[-1]:  # turns mostly arrive in order
                self.placed.append(pair)
                self.turns.append(pair[0])
            else:
                at = bisect.bisect_right(self.placed, pair)
                self.placed.insert(at, pair)
                self.turns.insert(at, pair[0])
        self.texts = self.texts.extended(item["text"] for item in found)


def _detected_critical(found: list[dict[str, Any]], into: _Detected | None = None) -> _Detected:
    detected = into if into is not None else _Detected()
    detected.add(
        [
            {
                "id": c["id"],
                "text": c["text"],
                "turn": c["turn"],
                "kind": c["kind"],
                "source": "pattern",
                "tokens": c["tokens"],
                "forbid": c["forbid"],
            }
            for c in found
            if not c.get("superseded_by")
        ]
    )
    return detected


def _segments(state: State, params_summary_tokens: int) -> list[dict[str, Any]]:
    """Closed segments plus the open one, rendered provisionally."""
    segments = list(state["segments"])  # read only: closed segments are never copied
    current = state["current"]
    if current is not None and current["open"]:
        record, counts = segment_record(state, current, params_summary_tokens)
        effort_index, _ = match_effort(state, counts, current.get("resume"))
        record["effort"] = (
            state["efforts"][effort_index]["id"]
            if effort_index is not None
            else f"effort_{len(state['efforts']) + 1}"
        )
        record["current"] = True
        segments.append(record)
    return segments


def _efforts(
    state: State,
    segments: list[dict[str, Any]],
    by_id: dict[str, dict[str, Any]],
    cache: RenderCache | None = None,
) -> list[dict[str, Any]]:
    # shallow copies: only the open segment's effort gets a new segment list (with a
    # cache, each effort's list is a FrozenList that knows its YAML)
    if cache is None:
        efforts = {e["id"]: {**e} for e in state["efforts"]}
    else:
        efforts = {e["id"]: {**e, "segments": cache.refs(e)} for e in state["efforts"]}
    if segments and segments[-1].get("current"):
        last = segments[-1]
        effort = efforts.setdefault(
            last["effort"],
            {"id": last["effort"], "terms": {}, "segments": [], "first": last["first"]},
        )
        merged = Counter(effort["terms"])
        merged.update(last["terms"])
        effort["terms"] = {t: merged[t] for t in top_terms(dict(merged), 60)}
        refs = effort["segments"]
        effort["segments"] = (
            refs.extended([last["id"]]) if type(refs) is FrozenList else [*refs, last["id"]]
        )
        effort["last"] = last["last"]
    for effort in efforts.values():
        final = by_id[effort["segments"][-1]]
        effort["status"] = "open" if final.get("left") else final["status"]
        effort["topic"] = ", ".join(final["topic"][:3]) or effort["id"]
    return list(efforts.values())


def _holds(effort: dict[str, Any], ids: set[str], by_segment: dict[str, dict[str, Any]]) -> bool:
    """Whether any of `ids` is one of the effort's segments: looked up by segment (each
    names its effort), at the cost of `ids`, not of the effort's segments."""
    return any(
        segment is not None and segment["effort"] == effort["id"]
        for segment in map(by_segment.get, ids)
    )


def _relevance(
    effort: dict[str, Any],
    recent_terms: Counter[str],
    latest_terms: set[str],
    last_turn: int,
    marks: _Marks,
    near: set[str],
    by_segment: dict[str, dict[str, Any]],
) -> tuple[float, list[str]]:
    top = top_terms(effort["terms"], 10)
    signals = {
        "mention": (len(set(top) & latest_terms) / len(top)) if top else 0.0,
        "similarity": cosine(effort["terms"], recent_terms),
        "recency": math.exp(-max(0, last_turn - effort["last"]) / RECENCY_SCALE),
        "flag": 1.0
        if (
            effort["id"] in marks.focused
            or effort["id"] in marks.pinned
            or _holds(effort, marks.pinned, by_segment)
            or _holds(effort, marks.focused, by_segment)
        )
        else 0.0,
        "proximity": 1.0 if _holds(effort, near, by_segment) else 0.0,
    }
    score = sum(WEIGHTS[name] * value for name, value in signals.items())
    score += 0.05 * marks.importance.get(effort["id"], 0.0)
    reasons = [f"{name} {value:.2f}" for name, value in signals.items() if value > 0.005]
    if marks.importance.get(effort["id"]):
        reasons.append(f"importance +{marks.importance[effort['id']]:g}")
    return round(score, 4), reasons


def _lifecycle(
    segment: dict[str, Any], last_turn: int, active_efforts: set[str], marks: _Marks, config: Config
) -> str:
    """fresh -> active -> referenced -> stale -> compressed -> archived, from distances.

    Marks from events win (a pinned segment never goes past active; ``@archive`` and
    ``@compress`` move a segment at once; ``@expand`` brings it back to referenced).
    """
    sid = segment["id"]
    distance = last_turn - segment["last"]
    age = last_turn - segment["first"]
    fresh = int(config.get("lifecycle", "fresh_turns"))
    stale = int(config.get("lifecycle", "stale_turns"))
    if sid in marks.pinned:
        return "fresh" if segment.get("current") and age < fresh else "active"
    if sid in marks.archived or distance > int(config.get("lifecycle", "archive_turns")):
        return "archived"
    if sid in marks.compressed or distance > int(config.get("lifecycle", "compress_turns")):
        return "compressed"
    if (segment.get("current") and age < fresh) or (
        not segment.get("current") and distance < fresh
    ):
        return "fresh"
    if segment.get("current") or segment.get("effort") in active_efforts:
        return "active"
    referenced = segment.get("referenced") or 0
    if sid in marks.expanded or (referenced and last_turn - referenced <= stale):
        return "referenced"
    if segment["status"] == "concluded" or distance > stale:
        return "stale"
    return "active"


def _keywords(effort: dict[str, Any], by_segment: dict[str, dict[str, Any]]) -> list[str]:
    """Readable keywords of an effort: its segments' topic words, latest first."""
    words: dict[str, None] = {}
    for sid in reversed(effort["segments"]):
        for word in by_segment[sid]["topic"]:
            words.setdefault(word, None)
        if len(words) >= 8:
            break
    return list(words)[:8]


def _span(segment: dict[str, Any]) -> list[int]:
    return [segment["first"], segment["last"]]


class RenderCache:
    """Manifest entries of closed segments, kept between renders of one session.

    A closed segment's record never changes, except through what an entry's key holds
    (lifecycle, marks, critical items, a superseded conclusion): an entry whose key is
    unchanged is reused with its YAML. While the `signature` (events, active efforts,
    config, superseded critical items) stays the same, an entry is reused without even
    computing its key until its segment's ``rev`` changes or its lifecycle may move
    on, so an update renders the changed segments only; which revs changed since the
    last render it learns from the fold's note of its latest bumps (``bumps`` and
    ``bumped``), so that it need not compare every segment's. Reset it whenever the
    state is rebuilt.
    """

    def __init__(self) -> None:
        # what every closed segment's entry depends on beyond the segment itself
        self.signature: tuple[Any, ...] | None = None
        # per closed segment, by index: (its rev, the turn its lifecycle may change,
        # its key, its entry); the revs and entries also as lists of their own, and
        # (turn its lifecycle may change, index) as a heap
        self.closed: list[tuple[int, int, tuple[Any, ...], Frozen]] = []
        self.revs: list[int] = []
        self.entries: list[Frozen] = []
        self.heap: list[tuple[int, int]] = []
        # closed segments by id, and the open one
        self.by_id: dict[str, dict[str, Any]] = {}
        self.mapped = 0
        self.open_id: str | None = None
        # the detected critical items, as of (count, critical_rev)
        self.critical_key: tuple[int, int] = (0, -1)
        self.critical = _Detected()
        # the state's count of segment rev bumps at the last render
        self.bumps: int | None = None
        # each effort's closed segments (ids), as a FrozenList that knows its YAML
        self.effort_refs: dict[str, FrozenList] = {}

    def record(self, index: int, record: tuple[int, int, tuple[Any, ...], Frozen]) -> None:
        if index < len(self.closed):
            self.closed[index] = record
            self.revs[index] = record[0]
            self.entries[index] = record[3]
        else:
            self.closed.append(record)
            self.revs.append(record[0])
            self.entries.append(record[3])
        if record[1] < _NEVER:
            heapq.heappush(self.heap, (record[1], index))

    def truncate(self, count: int) -> None:
        del self.closed[count:], self.revs[count:], self.entries[count:]

    def changed(
        self, closed: list[dict[str, Any]], last_turn: int, bumped: list[int] | None = None
    ) -> list[int]:
        """Indices of the recorded segments whose rev changed or whose lifecycle may have
        moved on by `last_turn`. `bumped`: the only segments whose rev may have changed
        since the last render (None: any of them)."""
        found: set[int] = set()
        count = min(len(closed), len(self.revs))  # segments closed since are not recorded yet
        if bumped is not None:
            found.update(n for n in bumped if n < count and closed[n].get("rev", 0) != self.revs[n])
        else:
            revs = [segment.get("rev", 0) for segment in closed[:count]]
            # look into the blocks that differ only (compared in C)
            for start in range(0, count, 64):
                if revs[start : start + 64] != self.revs[start : start + 64]:
                    found.update(
                        n for n in range(start, min(start + 64, count)) if revs[n] != self.revs[n]
                    )
        heap = self.heap
        while heap and heap[0][0] <= last_turn:
            expiry, index = heapq.heappop(heap)
            if index < len(self.closed) and self.closed[index][1] == expiry:
                found.add(index)
        return sorted(found)

    def refs(self, effort: dict[str, Any]) -> FrozenList:
        """The effort's closed segments as a FrozenList, extended by those closed since
        the last call (the fold only ever appends to an effort's list)."""
        segments = effort["segments"]
        known = self.effort_refs.get(effort["id"])
        if (
            known is None
            or len(known) > len(segments)
            or (known and segments[len(known) - 1] != known[-1])
        ):
            known = FrozenList(segments)
        elif len(known) < len(segments):
            known = known.extended(segments[len(known) :])
        self.effort_refs[effort["id"]] = known
        return known

    def bumped_since(self, state: State) -> list[int] | None:
        """The closed segments whose rev the fold bumped since the last render, from its
        note of the latest bumps; None when that note does not reach back so far."""
        bumps, bumped = state.get("bumps"), state.get("bumped")
        if bumps is None or bumped is None or self.bumps is None:
            return None
        since = bumps - self.bumps
        return bumped[len(bumped) - since :] if 0 <= since <= len(bumped) else None

    def segment_map(
        self, closed: list[dict[str, Any]], segments: list[dict[str, Any]]
    ) -> dict[str, dict[str, Any]]:
        """Every segment by id (the closed ones and the open one), kept up to date."""
        by_id = self.by_id
        if len(closed) < self.mapped:
            by_id.clear()
            self.mapped, self.open_id = 0, None
        if self.open_id is not None:
            del by_id[self.open_id]
        for segment in closed[self.mapped :]:
            by_id[segment["id"]] = segment
        self.mapped = len(closed)
        self.open_id = None
        if len(segments) > len(closed):
            self.open_id = segments[-1]["id"]
            by_id[self.open_id] = segments[-1]
        return by_id

    def detected(self, state: State) -> _Detected:
        """The detected critical items, extended by those the fold added since the last
        call; rebuilt when one was superseded (the fold bumps ``critical_rev``)."""
        count, rev = len(state["critical"]), state.get("critical_rev", 0)
        known, known_rev = self.critical_key
        if rev != known_rev or count < known:
            self.critical, known = _Detected(), 0
        if count > known:
            _detected_critical(state["critical"][known:], self.critical)
        self.critical_key = (count, rev)
        return self.critical


_NEVER = 1 << 62


def _lifecycle_expiry(segment: dict[str, Any], last_turn: int, config: Config) -> int:
    """The first later turn at which a closed segment's lifecycle may change, with
    marks and active efforts unchanged (early is safe: the entry is only rebuilt)."""
    last = segment["last"]
    points = [
        last + int(config.get("lifecycle", "fresh_turns")),
        last + int(config.get("lifecycle", "stale_turns")) + 1,
        last + int(config.get("lifecycle", "compress_turns")) + 1,
        last + int(config.get("lifecycle", "archive_turns")) + 1,
    ]
    if segment.get("referenced"):
        points.append(segment["referenced"] + int(config.get("lifecycle", "stale_turns")) + 1)
    return min((p for p in points if p > last_turn), default=_NEVER)


def render(
    state: State,
    events: list[dict[str, Any]],
    config: Config,
    cache: RenderCache | None = None,
) -> Tiers:
    session = state["session"]
    live = active_events(events)
    marks = _marks(live)
    segments = _segments(state, int(config.get("segments", "summary_tokens")))
    by_segment = (
        cache.segment_map(state["segments"], segments)
        if cache is not None
        else {s["id"]: s for s in segments}
    )
    efforts = _efforts(state, segments, by_segment, cache)
    last_turn = state["last_turn"]
    capacity = int(config.get("working", "capacity"))

    recent = state["recent"]
    recent_terms: Counter[str] = Counter()
    for entry in recent[-6:]:
        if entry[1] != "tool":
            recent_terms.update(terms(prose(entry[2])))
    latest_terms: set[str] = set()
    for entry in recent[-3:]:
        if entry[1] != "tool":
            latest_terms.update(terms(prose(entry[2])))
    near = {s["id"] for s in segments[-2:]}

    open_efforts = [e for e in efforts if e["status"] != "concluded" or e["id"] in marks.focused]
    scored = []
    for effort in open_efforts:
        score, reasons = _relevance(
            effort, recent_terms, latest_terms, last_turn, marks, near, by_segment
        )
        focused = effort["id"] in marks.focused or _holds(effort, marks.focused, by_segment)
        scored.append((focused, score, effort, reasons))
    scored.sort(key=lambda item: (not item[0], -item[1], item[2]["id"]))
    active = scored[:capacity]
    active_ids = {item[2]["id"] for item in active}

    detected = cache.detected(state) if cache is not None else _detected_critical(state["critical"])
    marked = _marked_critical(events)
    critical = detected.items + marked
    placed, turns_of = detected.placed, detected.turns  # marked items have no turn
    closed_count = len(state["segments"])
    signature = (
        len(events),
        events[-1]["id"] if events else "",
        tuple(sorted(active_ids)),
        capacity,
        tuple(sorted(config.values.get("lifecycle", {}).items())),
        state.get("critical_rev", 0),
    )
    quick = cache is not None and cache.signature == signature and len(cache.closed) <= closed_count

    def entry_of(index: int, segment: dict[str, Any]) -> Frozen:
        """The manifest entry of one segment; a closed one's is recorded in the cache,
        reused as is when its key did not change."""
        closed = cache is not None and index < closed_count
        known = cache.closed[index] if closed and index < len(cache.closed) else None  # type: ignore[union-attr]
        rev = segment.get("rev", 0)
        sid = segment["id"]
        conclusion = segment["conclusion"]
        low = bisect.bisect_left(turns_of, segment["first"])
        high = bisect.bisect_right(turns_of, segment["last"])
        crit = [critical[position]["text"] for _, position in placed[low:high]]
        lifecycle = _lifecycle(segment, last_turn, active_ids, marks, config)
        key = (
            (
                lifecycle,
                sid in marks.pinned,
                marks.updated.get(sid),
                marks.compressed.get(sid),
                tuple(crit),
                conclusion and conclusion.get("superseded_by"),
                segment["status"],
            )
            if closed
            else ()
        )
        if known is not None and known[2] == key:
            entry = known[3]
        else:
            item: dict[str, Any] = {
                "id": sid,
                "raw_lines": [segment["first"], segment["last"]],
                "topic": segment["topic"],
                "summary": marks.updated.get(sid) or segment["summary"],
                "status": segment["status"],
                "conclusion": None
                if conclusion is None
                else {
                    "text": conclusion["text"],
                    "turn": conclusion["turn"],
                    "kind": conclusion["kind"],
                    "confidence": conclusion["confidence"],
                    "reason": conclusion["reason"],
                    "superseded_by": conclusion.get("superseded_by"),
                    **(
                        {"retracted_by": conclusion["retracted_by"]}
                        if conclusion.get("retracted_by")
                        else {}
                    ),
                },
                "tokens": segment["tokens"],
                "critical": crit,
                "lifecycle": lifecycle,
                "pinned": sid in marks.pinned,
                "effort": segment["effort"],
                "cue": segment["cue"],
                "artifacts": [],
            }
            if marks.compressed.get(sid):
                item["compressed_note"] = marks.compressed[sid]
            entry = Frozen(item)
        if closed:
            assert cache is not None
            expiry = _lifecycle_expiry(segment, last_turn, config)
            cache.record(index, (rev, expiry, key, entry))
        return entry

    if cache is None:
        manifest_segments = [entry_of(index, segment) for index, segment in enumerate(segments)]
    else:
        if quick:
            # only segments whose rev changed, whose lifecycle may have moved on, and
            # those closed since the last render
            known_count = len(cache.closed)
            bumped = cache.bumped_since(state)
            for index in cache.changed(state["segments"], last_turn, bumped):
                entry_of(index, segments[index])
        else:
            cache.heap.clear()
            known_count = 0
        for index in range(known_count, closed_count):
            entry_of(index, segments[index])
        cache.truncate(closed_count)
        cache.signature = signature
        cache.bumps = state.get("bumps")
        manifest_segments = list(cache.entries)
        if len(segments) > closed_count:
            manifest_segments.append(entry_of(closed_count, segments[-1]))

    manifest = {
        "session": session,
        "turns": state["turns"],
        "events": len(events),
        "tokens": state["tokens"],
        "segments": manifest_segments,
        "notes": marks.notes,
    }
    open_doc = {
        "session": session,
        "efforts": [
            {
                "id": effort["id"],
                "topic": effort["topic"],
                "keywords": _keywords(effort, by_segment),
                "segment_refs": effort["segments"],
                "last_active": effort["last"],
                "importance": round(1.0 + marks.importance.get(effort["id"], 0.0), 3),
                "status": "open",
            }
            for effort in efforts
            if effort["status"] != "concluded"
        ],
    }
    working = {
        "session": session,
        "capacity": capacity,
        "active": [
            {
                "effort_id": effort["id"],
                "topic": effort["topic"],
                "expanded": bool(
                    index == 0 or score >= 0.5 or _holds(effort, marks.expanded, by_segment)
                ),
                "relevance_score": score,
                "reasons": (["focused by user", *reasons] if focused else reasons),
                "expanded_lines": _span(by_segment[effort["segments"][-1]]),
            }
            for index, (focused, score, effort, reasons) in enumerate(active)
        ],
        "displaced": [item[2]["id"] for item in scored[capacity:]],
        "state": working_state.derive(state, segments, efforts, critical, by_segment),
        "critical": detected.texts.extended(c["text"] for c in marked),
        "critical_replaced": [
            {"text": text, "turn": turn, "replaced_by": later}
            for turn, later, text in state["critical_replaced"]
        ],
    }
    return Tiers(manifest, open_doc, working, critical)
