"""Context health, compaction plans and the structured summary (the context-rot and
memory-continuity seeds), computed offline from the engine state and the tiers.

All three cost time in the number of segments and recent turns, never in the length
of the session.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ccm import patterns
from ccm import tokens as tokenizer
from ccm.config import Config
from ccm.engine.render import Tiers, critical_items
from ccm.engine.text import cosine, terms

NEGATED_NEAR = patterns.compile(
    r"\b(?:not|never|no|without|avoid|instead of|rather than|don'?t)\b[^.]{0,30}$"
)
RECENT_ASSISTANT = 10
STRATEGIES = ("summarize", "selective", "aggressive")


@dataclass
class Health:
    session: str
    tokens: int
    window: int
    utilization: float
    stale_tokens: int
    old_context_relevance: float
    drift: float
    drift_parts: dict[str, float]
    critical_tokens: int
    critical_ratio: float
    status: str
    issues: list[str] = field(default_factory=list)
    suggestions: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "session": self.session,
            "tokens": self.tokens,
            "window": self.window,
            "utilization": self.utilization,
            "stale_tokens": self.stale_tokens,
            "old_context_relevance": self.old_context_relevance,
            "drift": self.drift,
            "drift_parts": self.drift_parts,
            "critical_tokens": self.critical_tokens,
            "critical_ratio": self.critical_ratio,
            "status": self.status,
            "issues": self.issues,
            "suggestions": self.suggestions,
        }


def _violations(state: dict[str, Any], critical: list[dict[str, Any]]) -> list[str]:
    """Critical "never X" items whose X shows up, un-negated, in recent assistant turns."""
    answers = [(e[0], e[2].lower()) for e in state["recent"] if e[1] == "assistant"][
        -RECENT_ASSISTANT:
    ]
    found = []
    for item in critical:
        forbidden = item["forbid"]
        if forbidden:
            for turn, lower in answers:
                if item.get("turn") and turn <= item["turn"]:
                    continue
                for term in forbidden:
                    position = lower.find(term)
                    if position >= 0 and not NEGATED_NEAR.search(
                        lower[max(0, position - 40) : position]
                    ):
                        found.append(
                            f"turn {turn} mentions '{term}' although critical item "
                            f"'{item['text'][:80]}' says otherwise"
                        )
                        break
    return list(dict.fromkeys(found))


def assess(
    state: dict[str, Any], tiers: Tiers, events: list[dict[str, Any]], config: Config
) -> Health:
    """Tokens, utilization, relevance of old context, drift and what to do about it."""
    window = int(config.get("context", "window_tokens"))
    budget = int(config.get("context", "budget_tokens"))
    total = int(state["tokens"])
    segments = tiers.manifest["segments"]
    stale = [s for s in segments if s["lifecycle"] in ("stale", "compressed", "archived")]
    stale_tokens = sum(s["tokens"] for s in stale)
    critical = critical_items(state, events)
    critical_tokens = sum(c["tokens"] for c in critical)

    violations = _violations(state, critical)
    recent_superseded = sum(
        1
        for d in state["decisions"]
        if d.get("superseded_by") and state["last_turn"] - d["superseded_by"] <= 50
    )
    recent_terms: Counter[str] = Counter()
    for entry in state["recent"][-10:]:
        if entry[1] != "tool":
            recent_terms.update(terms(entry[2]))
    open_efforts = [
        e for e in state["efforts"] if e["id"] in {x["id"] for x in tiers.open["efforts"]}
    ]
    focus = max((cosine(recent_terms, e["terms"]) for e in open_efforts), default=1.0)
    parts = {
        "critical_not_honoured": min(1.0, 0.5 * len(violations)),
        "contradictions": min(1.0, 0.25 * recent_superseded),
        "topic_drift": round(1.0 - focus, 3) if open_efforts and recent_terms else 0.0,
    }
    drift = round(
        0.5 * parts["critical_not_honoured"]
        + 0.2 * parts["contradictions"]
        + 0.3 * parts["topic_drift"],
        3,
    )
    utilization = round(total / window, 4) if window else 0.0
    relevance = round(1.0 - stale_tokens / total, 3) if total else 1.0
    critical_ratio = round(critical_tokens / budget, 4) if budget else 0.0

    issues: list[str] = list(violations)
    suggestions: list[str] = []
    if utilization >= 0.7:
        issues.append(
            f"the session holds {total} tokens, {utilization:.0%} of a {window}-token window"
        )
    if stale:
        concluded = [s for s in stale if s["status"] == "concluded"]
        suggestions.append(
            f"`ccm compact {state['session']} --strategy selective` would summarize "
            f"{len(stale)} stale segments ({stale_tokens} tokens)"
            + (f", {len(concluded)} of them concluded" if concluded else "")
        )
    if violations:
        suggestions.append("restate the critical items to the model; they appear ignored")
    if recent_superseded:
        issues.append(f"{recent_superseded} decision(s) reversed in the last 50 turns")
        suggestions.append("check that the model works from the latest decisions (`ccm critical`)")
    if parts["topic_drift"] > 0.8 and open_efforts:
        suggestions.append(
            "the conversation has left its open efforts; `ccm focus` the one that matters"
        )
    if critical_ratio > 0.25:
        issues.append(f"critical items take {critical_ratio:.0%} of the {budget}-token budget")
        suggestions.append("merge or unmark critical items that say the same thing")
    unpinned_critical = [
        s["id"] for s in segments if s["critical"] and s["lifecycle"] in ("compressed", "archived")
    ]
    if unpinned_critical:
        suggestions.append(
            f"segments {', '.join(unpinned_critical[:5])} hold critical items and are compressed; "
            "the items stay in context, `ccm pin` keeps their segments too"
        )
    level = 0
    if utilization >= 0.7 or drift >= 0.4 or critical_ratio > 0.25 or violations:
        level = 1
    if utilization >= 0.9 or drift >= 0.7 or critical_ratio > 0.5:
        level = 2
    if not suggestions:
        suggestions.append("nothing to do")
    return Health(
        state["session"],
        total,
        window,
        utilization,
        stale_tokens,
        relevance,
        drift,
        parts,
        critical_tokens,
        critical_ratio,
        ("good", "warning", "critical")[level],
        issues,
        suggestions,
    )


# ---------------------------------------------------------------------------
# compaction


@dataclass
class Plan:
    strategy: str
    kept: list[str]
    summarized: list[str]
    removed: list[str]
    tokens_before: int
    tokens_after: int
    remember: list[str]

    @property
    def saved(self) -> int:
        return self.tokens_before - self.tokens_after

    def as_dict(self) -> dict[str, Any]:
        return {
            "strategy": self.strategy,
            "kept": self.kept,
            "summarized": self.summarized,
            "removed": self.removed,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "tokens_saved": self.saved,
            "remember": self.remember,
        }


def plan_compaction(
    state: dict[str, Any], tiers: Tiers, events: list[dict[str, Any]], strategy: str
) -> Plan:
    """What a strategy keeps whole, replaces by its summary, and moves out of context.

    summarize: concluded segments outside the working context become their summary;
    selective: also every stale segment, and archived ones leave the context;
    aggressive: everything but the working context and fresh segments is summarized,
    and concluded efforts' old segments are archived. Pinned segments are always
    kept, critical items always stay in context.
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}: use {', '.join(STRATEGIES)}")
    kept, summarized, removed = [], [], []
    before = after = 0
    for segment in tiers.manifest["segments"]:
        life, status = segment["lifecycle"], segment["status"]
        size = segment["tokens"]
        summary = tokenizer.count_tokens(segment["summary"])
        before += (
            size
            if life not in ("compressed", "archived")
            else (summary if life == "compressed" else 0)
        )
        if segment["pinned"] or life in ("fresh", "active"):
            action = "keep"
        elif strategy == "summarize":
            action = (
                "summarize"
                if status == "concluded" or life in ("compressed", "archived")
                else "keep"
            )
        elif strategy == "selective":
            action = "remove" if life == "archived" else "summarize"
            if life == "referenced" and status != "concluded":
                action = "keep"
        else:
            action = (
                "remove"
                if status == "concluded" and life in ("stale", "compressed", "archived")
                else "summarize"
            )
        if life == "archived" and action == "summarize":
            action = "remove" if strategy != "summarize" else "summarize"
        if action == "keep":
            kept.append(segment["id"])
            after += size if life not in ("compressed", "archived") else summary
        elif action == "summarize":
            summarized.append(segment["id"])
            after += min(size, summary)
        else:
            removed.append(segment["id"])
    remember = [f"critical: {c['text']}" for c in critical_items(state, events)]
    remember += [
        f"open: {e['topic']} ({', '.join(e['segment_refs'][-2:])})" for e in tiers.open["efforts"]
    ]
    remember += [f"decision: {d}" for d in tiers.working["state"]["recent_decisions"]]
    return Plan(strategy, kept, summarized, removed, before, after, remember)


# ---------------------------------------------------------------------------
# the structured summary


def _tone(state: dict[str, Any]) -> str:
    users = [e for e in state["recent"] if e[1] == "user"]
    opening = state.get("opening")
    if not users and opening:  # a long agent run: its prompt is further back
        users = [[opening[0], "user", opening[1]]]
    if not users:
        return "No user turns yet."
    words = [len(e[2].split()) for e in users]
    average = sum(words) / len(words)
    code = sum(1 for e in state["recent"] if "```" in e[2] or "[tool_use]" in e[2]) / max(
        1, len(state["recent"])
    )
    informal = sum(
        1
        for e in users
        if re.search(r"\b(?:i'm|don't|can't|it's|gonna|lol|thx)\b|!|:\)", e[2].lower())
    )
    register = "informal" if informal / len(users) > 0.3 else "neutral to formal"
    length = "terse" if average < 25 else "detailed" if average > 80 else "moderate"
    kind = "technical, with code" if code > 0.2 else "conversational"
    return (
        f"{kind.capitalize()}; {register}; {length} user turns "
        f"(about {average:.0f} words); answer in the same register."
    )


HANDOVER_SECTIONS = (  # of a handover, in order (`summary`, and a model's: `ccm.llm`)
    "task_context",
    "completed_work",
    "key_decisions",
    "current_state",
    "open_threads",
    "corrections_and_failed_approaches",
    "tone_and_register",
)


def summary(
    state: dict[str, Any], tiers: Tiers, events: list[dict[str, Any]]
) -> dict[str, list[str]]:
    """The seven sections of a handover: extractive, offline, from the tiers."""
    segments = tiers.manifest["segments"]
    work = tiers.working["state"]
    opening = state.get("opening")
    first = (
        " ".join(opening[1].split())[:400]
        if opening
        else (segments[0]["summary"] if segments else "")
    )
    task_context = [s for s in [first, work.get("current_task")] if s]
    completed = [
        f"{c['text']} (turn {c['turn']})"
        for c in state.get("conclusions", [])
        if c["kind"] in ("task", "resolution", "insight")
    ]
    decisions = []
    for s in segments:
        c = s["conclusion"]
        if c and c["kind"] in ("decision", "confirmation") and not c.get("superseded_by"):
            decisions.append(f"{c['text']} (turn {c['turn']})")
    current = []
    if work.get("current_task"):
        current.append(f"Working on: {work['current_task']}")
    if work.get("next_step"):
        current.append(f"Next: {work['next_step']}")
    if work.get("open_files"):
        current.append(f"Files: {', '.join(work['open_files'][:6])}")
    current += [f"Blocked: {b}" for b in work.get("blockers", [])]
    threads = [f"{e['topic']} (last active turn {e['last_active']})" for e in tiers.open["efforts"]]
    corrections = []
    reversed_turns = set()
    for s in segments:
        c = s["conclusion"]
        if c and c.get("superseded_by"):
            reversed_turns.add(c["turn"])
            corrections.append(f"Reversed at turn {c['superseded_by']}: {c['text']}")
        if c and c["kind"] == "rejection":
            corrections.append(f"Rejected: {c['text']}")
    # a decision reversed inside its own segment is no segment's conclusion any more
    corrections += [
        f"Reversed at turn {d['superseded_by']}: {d['text']}"
        for d in state.get("decisions", [])
        if d.get("superseded_by") and d["turn"] not in reversed_turns
    ]
    corrections += [
        f"Failed attempt (turn {turn}): {text}" for turn, text in state.get("failures", [])[-5:]
    ]
    notes = [n["text"] for n in tiers.manifest.get("notes", [])]
    if notes:
        task_context += [f"Note: {n}" for n in notes]
    found = (task_context, completed, decisions, current, threads, corrections, [_tone(state)])
    return dict(zip(HANDOVER_SECTIONS, found, strict=True))
