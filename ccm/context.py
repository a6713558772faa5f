"""Context assembly: everything the model should receive for its next turn, within budget.

Blocks, in the order the model reads them:

1. critical items (always, never compressed);
2. the working state (always: current task, next step, files, decisions, blockers);
3. the manifest block (under 500 tokens): what exists, what was compressed or archived
   and how to get it back, the budget left;
4. the active efforts, expanded (their latest turns) or summarized, by relevance;
5. recalled units, when the query asks about the past (recall is gated on intent);
6. the preserved tail: the latest whole user/assistant exchanges, old tool results
   cleared to one line.

The budget is allocated per query type (casual, recall, summary), a block's unused share
passes to the next, and the total never exceeds the budget. Critical items and the
working state are always included; a budget too small for them is an error.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from ccm import derive, tokens
from ccm.errors import UsageError
from ccm.index import Hit, Index, Recalled, as_shown, pairs, render_group, render_turn
from ccm.store import Store

# shares of the budget per query type; what recall is given is all that the others leave
# (for a casual message, which recalls nothing, the tail may take all of it)
SHARES: dict[str, dict[str, float]] = {
    "casual": {"manifest": 0.10, "efforts": 0.20, "tail": 1.0},
    "recall": {"manifest": 0.05, "efforts": 0.02, "tail": 0.05},
    "summary": {"manifest": 0.10, "efforts": 0.50, "tail": 0.25},
}
MANIFEST_CAP = 500
JOIN_TOKENS = 2
MIN_EXCHANGE_TOKENS = 20

RECALL_CUES = re.compile(
    r"\b(?:remember|recall|remind me|earlier|previously|last time|before|back then|"
    r"what did (?:we|i|you)|did (?:we|i|you) (?:ever|already)|when did|when was|when were|"
    r"what was|what were|who was|where did|how did|have (?:we|i|you) (?:ever|already)|"
    r"decided|agreed|mentioned|said|told|history)\b"
)
SUMMARY_CUES = re.compile(
    r"\b(?:summari[sz]e|summary|recap|overview|where are we|status update|catch me up|tl;?dr)\b"
)
PAST_QUESTION = re.compile(r"\b(?:did|was|were|had|went|said|got|made|used|bought|saw|met)\b")
CASUAL = re.compile(
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
                add("user", render_turn(turn))
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


def _state_lines(working: dict[str, Any]) -> list[str]:
    state = working.get("state") or {}
    lines = []
    labels = [
        ("current_task", "Current task"),
        ("next_step", "Next step"),
    ]
    for key, label in labels:
        if state.get(key):
            lines.append(f"{label}: {state[key]}")
    for key, label in [
        ("completed_steps", "Done"),
        ("recent_decisions", "Decided"),
        ("blockers", "Blocked by"),
    ]:
        lines.extend(f"{label}: {item}" for item in state.get(key, []))
    if state.get("open_files"):
        lines.append(f"Open files: {', '.join(state['open_files'][:8])}")
    return lines


def _manifest_lines(
    manifest: dict[str, Any], working: dict[str, Any], open_doc: dict[str, Any]
) -> list[str]:
    segments = manifest["segments"]
    active = working.get("active", [])
    lines = [
        f"Session {manifest['session']}: {manifest['turns']} turns, {len(segments)} segments, "
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
) -> Context:
    """Assemble the context of `session` for its next turn (see the module docstring)."""
    config = store.config
    total = int(budget if budget is not None else config.get("context", "budget_tokens"))
    derived = derive.update(store, session)
    tiers = derived.tiers
    own_index = index is None
    index = index or Index(store)
    try:
        index.update(session, tiers.manifest)
        return _assemble(store, session, total, query, derived, index)
    finally:
        if own_index:
            index.close()


def _assemble(
    store: Store,
    session: str,
    total: int,
    query: str | None,
    derived: derive.Derived,
    index: Index,
) -> Context:
    from ccm.engine.render import critical_items

    config = store.config
    tiers = derived.tiers
    kind, reason = classify(query)
    shares = SHARES[kind]
    budget = _Budget(total)
    events = derived.events

    critical = Block("critical", "Critical (always honour)")
    items = critical_items(derived.state, events)
    critical.lines = [f"- {c['text']}" for c in items]
    critical.items = [c["id"] for c in items]
    state = Block("state", "Working state")
    state.lines = _state_lines(tiers.working)
    for block in (critical, state):
        if block.lines:
            block.tokens = tokens.count_cached(block.text()) + JOIN_TOKENS
            budget.take(block.tokens)
    if budget.left < 0:
        raise UsageError(
            f"a budget of {total} tokens cannot hold the critical items and working state "
            f"({budget.used} tokens)",
            "raise --budget or unmark critical items",
        )

    manifest = Block("manifest", "Memory manifest")
    lines = _manifest_lines(tiers.manifest, tiers.working, tiers.open)
    allowance = min(MANIFEST_CAP, max(0, int(total * shares["manifest"])), budget.left)
    reserve = tokens.count_cached(f"Budget: {total} tokens, {total} left.") + 1
    budget.take(_fill(manifest, [(line, None) for line in lines], max(0, allowance - reserve)))
    if manifest.lines:
        manifest.lines.append("")  # the budget line, written last
        budget.take(reserve)

    # the tail is fitted first, within its share and the efforts' share, so that recall
    # can fill all the rest exactly (its units are small; the tail's whole exchanges
    # would leave more room unused); what the efforts and recall leave goes back to the
    # tail, which reaches back no further than the turns they show
    tail_turns = _tail_turns(store, session, config)
    tail = Block("tail", "Latest turns")
    tail_tokens = int(config.get("context", "tail_tokens"))
    keep = int(config.get("context", "keep_tool_results"))
    efforts_share = int(total * shares["efforts"])
    allowance = min(budget.left - efforts_share, tail_tokens, int(total * shares["tail"]))
    chosen = _fit_tail(tail_turns, max(0, allowance), tail, keep)
    if not chosen:  # the latest exchange, however long, as long as the budget holds it
        room = min(budget.left - efforts_share, tail_tokens)
        chosen = _fit_tail(tail_turns, max(0, room), tail, keep, most=1)
    budget.take(tail.tokens)
    tail_first = chosen[0]["turn"] if chosen else None

    efforts = Block("efforts", "Active efforts")
    effort_lines = _effort_lines(tiers, index, session, tail_first)
    budget.take(_fill(efforts, effort_lines, min(budget.left, efforts_share)))

    recall = Block("recall", "Recalled from memory")
    if kind != "casual" and query:
        # as many exchanges as could fit were each as short as a chat turn or two
        limit = max(20, budget.left // MIN_EXCHANGE_TOKENS)
        hits = index.recalled(query, session, exclude_after=tail_first, limit=limit)
        budget.take(_fill_recall(recall, hits, budget.left))

    if budget.left > 0 and len(chosen) < len(tail_turns):
        after = max(
            [item["last_turn"] for item in efforts.items if isinstance(item, dict)]
            + [item["turns"][1] for item in recall.items if item.get("turns")],
            default=0,
        )
        groups = [g for g in pairs(tail_turns) if g[0]["turn"] > after]
        budget.used -= tail.tokens
        chosen = _fit_tail(
            [t for g in groups for t in g], min(budget.left, tail_tokens), tail, keep
        )
        budget.take(tail.tokens)

    if manifest.lines:
        manifest.lines[-1] = f"Budget: {total} tokens, {max(0, budget.left)} left."
    blocks = [b for b in (critical, state, manifest, efforts, recall, tail) if b.lines]
    # no need to count the whole again: each line was counted with one token more for
    # its line break, and each block with two more for the blank line, and neither
    # tokenizer (cl100k's BPE, or the estimate) joins pieces across a line break, so the
    # sum of the parts is never below the count of the whole
    return Context(session, total, query, kind, reason, blocks, chosen)


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
        cost = count + 1
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
    for day, hit in sorted(chosen, key=lambda c: (c[0] or "~", c[1].first_turn or 0)):
        if day and day != shown_day:
            block.lines.append(_day_heading(day))
            block.items.append({"day": day})
            shown_day = day
        block.lines.append(as_shown(hit.kind, hit.ts, hit.text))
        block.items.append({k: v for k, v in hit.as_dict().items() if k != "text"})
    block.tokens = used
    return used


def _day(hit: Hit) -> str:
    """The day a dated exchange was said on (it is shown under its heading), or ""."""
    return hit.ts[:10] if hit.kind == "pair" and hit.ts else ""


@functools.lru_cache(maxsize=1024)
def _day_heading(day: str) -> str:
    """``[2024-01-17 Wed]``: the weekday helps place "last Friday" and "yesterday"."""
    try:
        weekday = date.fromisoformat(day).strftime("%a")
    except ValueError:
        return f"[{day}]"
    return f"[{day} {weekday}]"


def _tail_turns(store: Store, session: str, config: Any) -> list[dict[str, Any]]:
    """The latest whole exchanges, up to ``context.tail_messages`` messages; the last
    exchange is always whole, however many tool turns it holds.

    Reads backwards from the end of the log, a few more turns than wanted, and further
    back only while the exchange at the start of what was read is needed and cut."""
    count = int(config.get("context", "tail_messages"))
    window = 2 * count + 2
    while True:
        turns = store.tail_turns(session, window)
        groups = pairs(turns)
        chosen: list[list[dict[str, Any]]] = []
        size = 0
        for group in reversed(groups):
            if chosen and size + len(group) > count:
                break
            chosen.insert(0, group)
            size += len(group)
        cut = chosen and chosen[0] is groups[0] and chosen[0][0]["role"] != "user"
        if not cut or len(turns) < window:  # whole, or the log holds no more
            return [turn for group in chosen for turn in group]
        window *= 4


def _fit_tail(
    turns: list[dict[str, Any]],
    allowance: int,
    block: Block,
    keep_results: int,
    most: int | None = None,
) -> list[dict[str, Any]]:
    """The latest whole exchanges that fit (`most` of them at most); tool results older
    than the last `keep_results` are cleared to one line that keeps the call
    (tool-result clearing)."""
    groups = pairs(turns)
    tool_seen = 0
    chosen: list[list[dict[str, Any]]] = []
    used = tokens.count_cached(f"## {block.title}\n") + JOIN_TOKENS
    for group in reversed(groups):
        shown = []
        for turn in reversed(group):
            if turn["role"] == "tool":
                tool_seen += 1
                if tool_seen > keep_results:
                    name = (turn.get("tool") or {}).get("name", "tool")
                    note = f"[{name} result cleared; @expand(turn {turn['turn']}) restores it]"
                    turn = dict(turn, content=note)
            shown.append(turn)
        shown.reverse()
        cost = sum(tokens.count_cached(line) + 1 for line in render_group(shown))
        if used + cost > allowance or (most is not None and len(chosen) >= most):
            break
        used += cost
        chosen.insert(0, shown)
    block.lines = [line for group in chosen for line in render_group(group)]
    flat = [turn for group in chosen for turn in group]
    block.items = [turn["turn"] for turn in flat]
    block.tokens = used if flat else 0
    return flat
