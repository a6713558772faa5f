"""Memory operations on a session: commands, marks, notes and undo, recorded as events;
and recall, the search every surface (CLI, MCP server, hooks) offers.

Every operation appends to ``events.jsonl`` (who, when, what, result) and brings the
derived tiers up to date; nothing is ever deleted, and ``undo`` is itself an event.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ccm import derive, patterns, tokens
from ccm.engine import commands as parser
from ccm.errors import UsageError
from ccm.store import Store

EXPAND_TOKENS = 4000  # what `expand` shows of a segment at most, unless asked for more
# the commands on segments a model may call (as MCP tools, or the proxy's memory tools)
OPERATIONS = {
    "pin": "Keep segments in the working context: never compressed or archived.",
    "unpin": "Undo a pin or a focus on segments.",
    "focus": "Make these segments or efforts the working context.",
    "archive": "Move segments out of the working context (the log keeps them).",
}
CUT_NOTE_TOKENS = 20  # room for the note that says a turn was cut
_TURN = patterns.compile(r"(?:turn\s*)?(\d+)", re.IGNORECASE)


@dataclass
class Outcome:
    """What one command did: its event (when recorded) and a message for people."""

    ok: bool
    message: str
    event: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "message": self.message, "event": self.event}


def apply(store: Store, session: str, text: str, who: str = "user") -> list[Outcome]:
    """Run every memory command found in `text`; bad ones only get a message."""
    manifest = derive.update(store, session).tiers.manifest
    outcomes: list[Outcome] = []
    for command in parser.parse(text):
        resolved = parser.resolve(command, manifest, who)
        if not resolved.ok or resolved.event is None:
            outcomes.append(Outcome(False, resolved.message))
            continue
        (event,) = store.append_events(session, [resolved.event])
        outcomes.append(Outcome(True, f"{event['id']}: {resolved.message}", event))
        manifest = derive.update(store, session).tiers.manifest
    return outcomes


def command(
    store: Store,
    session: str,
    name: str,
    args: list[str],
    who: str = "cli",
    text: str | None = None,
) -> Outcome:
    """One operation given as arguments (the CLI's pin, focus, archive, ...)."""
    quoted = [not parser._ID.fullmatch(a) and not parser._RANGE.fullmatch(a) for a in args]
    if text is not None:
        args, quoted = [*args, text], [*quoted, True]
    cmd = parser.Command(name, args, quoted, f"{name} {' '.join(args)}".strip())
    manifest = derive.update(store, session).tiers.manifest
    resolved = parser.resolve(cmd, manifest, who)
    if not resolved.ok or resolved.event is None:
        return Outcome(False, resolved.message)
    (event,) = store.append_events(session, [resolved.event])
    derive.update(store, session)
    return Outcome(True, f"{event['id']}: {resolved.message}", event)


def _record(store: Store, session: str, kind: str, text: str, who: str, done: str) -> Outcome:
    if not text.strip():
        raise UsageError(f"the {kind} text is empty", "pass the text to record")
    store.require_session(session)
    (event,) = store.append_events(
        session, [{"who": who, "kind": kind, "args": {"text": text.strip()}}]
    )
    derive.update(store, session)
    return Outcome(True, f"{event['id']}: {done}", event)


def mark_critical(store: Store, session: str, text: str, who: str = "cli") -> Outcome:
    """Mark `text` as critical: never compressed, never displaced, always given."""
    return _record(store, session, "critical", text, who, "marked critical")


def note(store: Store, session: str, text: str, who: str = "cli") -> Outcome:
    """Write a note (an agent's or a person's) into the session's memory."""
    return _record(store, session, "note", text, who, "note recorded")


def undo(store: Store, session: str, event_id: str | None = None, who: str = "cli") -> Outcome:
    """Cancel an event (by default the latest one in force that changed something)
    with an ``undo`` event."""
    from ccm.engine.render import active_events

    store.require_session(session)
    events, _, _ = store.read_events(session)
    if event_id is None:
        live = [
            e for e in active_events(events) if e["kind"] != "recall"
        ]  # a search changes nothing
        if not live:
            raise UsageError(f"nothing to undo in {session}", "`ccm events SESSION` lists events")
        event_id = live[-1]["id"]
    target = next((e for e in events if e["id"] == event_id), None)
    if target is None:
        raise UsageError(f"no event {event_id} in {session}", "`ccm events SESSION` lists events")
    (event,) = store.append_events(
        session, [{"who": who, "kind": "undo", "reverts": event_id, "args": {}}]
    )
    derive.update(store, session)
    return Outcome(True, f"{event['id']}: undid {event_id} ({target['kind']})", event)


def compact(
    store: Store, session: str, strategy: str, dry_run: bool = False, model: Any = None
) -> Any:
    """Plan a compaction and, unless `dry_run`, record it as events (undo reverts them).
    With `model` (a `ccm.llm.Model` that is on), the segments summarized get summaries
    the model writes from their turns, recorded as ``update`` events before the
    compression; one it gives none for keeps ccm's own."""
    from ccm.engine import health

    derived = derive.update(store, session)
    plan = health.plan_compaction(derived.state, derived.tiers, derived.events, strategy)
    if dry_run:
        return plan
    note = f"compacted ({strategy})"
    new = [
        {"who": "compaction", "kind": "update", "args": {"targets": [sid], "text": text}}
        for sid, text in _written_summaries(store, session, derived, plan.summarized, model)
    ]
    if plan.summarized:
        new.append(
            {
                "who": "compaction",
                "kind": "compress",
                "args": {"targets": plan.summarized, "text": note},
            }
        )
    if plan.removed:
        new.append(
            {
                "who": "compaction",
                "kind": "archive",
                "args": {"targets": plan.removed, "text": note},
            }
        )
    if new:
        store.append_events(session, new)
        derive.update(store, session)
    return plan


def _written_summaries(
    store: Store, session: str, derived: Any, chosen: list[str], model: Any
) -> list[tuple[str, str]]:
    """A model's summaries of the `chosen` segments, in their order (see `compact`)."""
    from ccm import llm

    if model is None or not model.on or not chosen:
        return []
    wanted = {s["id"]: s for s in derived.tiers.manifest["segments"] if s["id"] in chosen}
    spans = {sid: (int(s["raw_lines"][0]), int(s["raw_lines"][1])) for sid, s in wanted.items()}
    said: dict[str, list[str]] = {sid: [] for sid in spans}
    ordered = sorted(spans, key=lambda sid: spans[sid][0])  # segments do not overlap
    starts = [spans[sid][0] for sid in ordered]
    for line in store.scan_turns(session):
        turn = line.record
        if turn is None:
            continue
        at = bisect.bisect_right(starts, turn["turn"]) - 1
        if at >= 0 and turn["turn"] <= spans[ordered[at]][1]:
            said[ordered[at]].append(llm.as_read(turn))
    segments = [(sid, "\n\n".join(said[sid]), str(wanted[sid]["summary"])) for sid in chosen]
    words = int(store.config.get("segments", "summary_tokens"))
    written = llm.summaries(model, segments, words)
    return [(sid, written[sid]) for sid in chosen if sid in written]


def raise_importance(
    store: Store, session: str, targets: list[str], delta: float = 1.0, who: str = "cli"
) -> Outcome:
    """Make efforts (or the efforts of segments) more important to the working context."""
    manifest = derive.update(store, session).tiers.manifest
    cmd = parser.Command("importance", list(targets), [False] * len(targets), " ".join(targets))
    resolved_targets, problem = parser._targets(
        manifest, cmd, list(targets), [False] * len(targets)
    )
    if problem:
        return Outcome(False, problem)
    effort_of = {s["id"]: s["effort"] for s in manifest["segments"]}
    efforts = list(dict.fromkeys(effort_of.get(t, t) for t in resolved_targets))
    (event,) = store.append_events(
        session, [{"who": who, "kind": "importance", "args": {"targets": efforts, "delta": delta}}]
    )
    derive.update(store, session)
    return Outcome(True, f"{event['id']}: importance {delta:+g} for {', '.join(efforts)}", event)


def recall(
    store: Store,
    query: str,
    session: str | None = None,
    budget: int = 2000,
    limit: int = 20,
    since: str | None = None,
    until: str | None = None,
) -> tuple[list[Any], int]:
    """The best hits for `query` within `budget` tokens and `limit` hits, and the tokens
    they take: in one session ranked as its context ranks them (speakers, days,
    neighbours), else across every session. `since` and `until` are dates or times
    (`ccm.dates.bound`). The index is brought up to date first."""
    from ccm.dates import bound
    from ccm.index import Index

    start, end = bound(since, "--since", end=False), bound(until, "--until", end=True)
    chosen = [session] if session else store.sessions()
    if session:
        store.require_session(session)
    kept: list[Any] = []
    used = 0
    with Index(store) as index:
        for name in chosen:
            if store.raw_path(name).exists():
                index.update(name, derive.update(store, name).tiers.manifest)
        # one session's hits are read as they are reached: the best `limit` that fit
        # need not read the hundreds ranked below them
        hits: Iterable[Any] = (
            (hit for hit in index.recalled(query, session) if hit.said_within(start, end))
            if session
            else index.search(query, limit=limit * 3, since=start, until=end)
        )
        for hit in hits:
            if len(kept) >= limit:
                break
            if used + hit.tokens > budget:
                continue
            kept.append(hit)
            used += hit.tokens
    return kept, used


def expand(
    store: Store, session: str, target: str, budget: int = EXPAND_TOKENS, who: str = "model"
) -> dict[str, Any]:
    """A segment, a range, a turn (``turn 42`` or ``42``) or a topic of `session`, word for
    word from the log within `budget` tokens; says where the rest starts. A segment or a
    topic is also brought back into the working context, as ``@expand`` does (its event
    is in the answer; undo reverts it)."""
    store.require_session(session)
    found = _TURN.fullmatch(target.strip())
    event = None
    if found:
        first = last = int(found.group(1))
    else:
        outcome = command(store, session, "expand", [target], who=who)
        if not outcome.ok or outcome.event is None:
            raise UsageError(outcome.message, "pass seg_N, turn N, or other words")
        event = outcome.event
        manifest = derive.update(store, session).tiers.manifest
        spans = [
            s["raw_lines"] for s in manifest["segments"] if s["id"] in event["args"]["targets"]
        ]
        first, last = min(a for a, _ in spans), max(b for _, b in spans)
    return {**_turns_text(store, session, first, last, budget), "event": event}


def _turns_text(store: Store, session: str, first: int, last: int, budget: int) -> dict[str, Any]:
    """Turns `first`..`last` of `session` for reading, as many as fit in `budget` tokens
    (a turn that does not fit whole is cut); says where the rest starts."""
    from ccm.transcript import rendered

    turns, _, _ = store.read_turns(session)
    if not turns or not 1 <= first <= len(turns):
        raise UsageError(
            f"no turn {first} in {session}",
            f"pass a turn from 1 to {len(turns)}" if turns else "the session has no turns yet",
        )
    chosen = [t for t in turns if first <= t["turn"] <= last]
    parts: list[str] = []
    used = 0
    shown = first - 1
    for turn, text in zip(chosen, rendered(chosen, turns), strict=True):
        cost = tokens.count_tokens(text) + 2
        if used + cost > budget:
            if not parts:  # the first turn alone is too long: its beginning
                chars = len(text) * (budget - CUT_NOTE_TOKENS) // cost
                parts.append(f"{text[:chars]} \u2026 [{len(text)} chars; pass a larger budget]")
                used = budget
            break
        parts.append(text)
        used += cost
        shown = turn["turn"]
    rest = chosen[-1]["turn"] - shown if chosen else 0
    answer: dict[str, Any] = {
        "session": session,
        "turns": [first, max(shown, first)],
        "tokens": used,
        "text": "\n\n".join(parts),
        "more": rest,
    }
    if rest:
        answer["next"] = f"expand turn {shown + 1} (or a larger budget) for the {rest} more"
    return answer
