"""The working state: what someone taking over the conversation needs first.

The memory-continuity seed: current task, task chain, completed steps, next step,
open files, recent decisions and blockers, derived offline from the latest turns and
the engine's conclusions, and updated every turn.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ccm.engine.text import sentences, terms

NEXT = re.compile(
    r"\b(?:next(?: step)?[:,]?|then i'?ll|i'?ll now|i will now|now i'?ll|let me|i'?m going to|"
    r"we should|you should|todo[:]?|remaining[:]?)\b"
)
LIMIT = 5


TAG = re.compile(r"</?[A-Za-z][\w-]*>")


REQUEST = re.compile(
    r"\?$|^(?:can|could|would|will|let'?s|please|how|what|why|should|we need|i need|i want|"
    r"make|add|write|fix|create|implement|update|remove|set up|next step)\b"
)


def _first_sentence(text: str, limit: int = 200) -> str:
    """The sentence that states the task: the first request or question, else the
    first sentence that says something (three content words or more)."""
    found = sentences(TAG.sub(" ", text))
    sentence = next(
        (s for s in found if REQUEST.search(s.lower()) and len(terms(s)) >= 2),
        next((s for s in found if len(terms(s)) >= 3), found[0] if found else text),
    )
    sentence = " ".join(sentence.split())
    return sentence if len(sentence) <= limit else sentence[: limit - 1].rstrip() + "\u2026"


def _todo_in_progress(text: str) -> str | None:
    """The in-progress item of a TodoWrite call, when the turn made one."""
    marker = "[tool_use] TodoWrite "
    start = text.rfind(marker)
    if start < 0:
        return None
    try:
        payload = json.loads(text[start + len(marker) :].split("\n", 1)[0])
    except ValueError:
        return None
    todos = payload.get("todos") if isinstance(payload, dict) else None
    for item in todos or []:
        if isinstance(item, dict) and item.get("status") == "in_progress":
            return str(item.get("content") or item.get("activeForm") or "") or None
    return None


def derive(
    state: dict[str, Any],
    segments: list[dict[str, Any]],
    efforts: list[dict[str, Any]],
    critical: list[dict[str, Any]],
    by_id: dict[str, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """`by_id`: the segments by id, when the caller has them at hand."""
    recent = state["recent"]
    current = segments[-1] if segments else None
    effort = next((e for e in efforts if current and e["id"] == current["effort"]), None)
    if by_id is None:
        by_id = {s["id"]: s for s in segments} if effort else {}
    in_effort = [by_id[sid] for sid in effort["segments"] if sid in by_id] if effort else []

    current_task = None
    open_turns = state["current"]["open"] if state["current"] else []
    first_user = next((e for e in open_turns if e[1] == "user" and not e[7]), None)
    if first_user is not None:
        current_task = _first_sentence(first_user[2])

    chain = [s["summary"].split(". ")[0][:160] for s in in_effort[-LIMIT:] if s["summary"]]

    completed = []
    for segment in in_effort:
        found = segment["conclusion"]
        if found and found["kind"] in ("task", "resolution") and not found.get("superseded_by"):
            completed.append(found["text"])
    for entry in open_turns:
        found = entry[5]
        if found and found["kind"] in ("task", "resolution") and found["text"] not in completed:
            completed.append(found["text"])

    next_step = None
    answers = [entry for entry in recent if entry[1] == "assistant"]
    if answers:
        for sentence in reversed(sentences(answers[-1][2])):
            if NEXT.search(sentence.lower()) and not sentence.endswith("?"):
                next_step = _first_sentence(sentence)
                break
    for entry in reversed(answers):
        if next_step is not None:
            break
        next_step = _todo_in_progress(entry[2])

    files: list[str] = []
    for entry in reversed(recent):
        for path in entry[4]:
            if path not in files:
                files.append(path)
    decisions: list[str] = []  # the latest few, found from the end
    for d in reversed(state["decisions"]):
        if len(decisions) == LIMIT:
            break
        if not d.get("superseded_by") and d["kind"] == "decision":
            decisions.append(d["text"])
    decisions.reverse()

    blockers = []
    last_resolution = max(
        (e[0] for e in open_turns if e[5] and e[5]["kind"] in ("resolution", "task")), default=0
    )
    for entry in open_turns:
        if entry[6] and entry[0] > last_resolution:
            blockers.append(_first_sentence(entry[2]))

    return {
        "current_task": current_task,
        "task_chain": chain,
        "completed_steps": completed[-LIMIT:],
        "next_step": next_step,
        "open_files": files[:10],
        "recent_decisions": decisions,
        "blockers": blockers[-3:],
    }
