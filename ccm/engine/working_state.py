"""The working state: what someone taking over the conversation needs first.

The memory-continuity seed: current task, task chain, completed steps, next step,
open files, recent decisions and blockers, derived offline from the latest turns and
the engine's conclusions, and updated every turn.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ccm import patterns
from ccm.engine import conclusions
from ccm.engine.text import sentences, terms, unwrapped

# "next" says what comes next when it labels it ("Next:", "**Next (Monday)**:", "next
# step", "next up"), not in "the next run" or in a name such as "Next.js"
NEXT = patterns.compile(
    r"(?:^|[^\w.])next\b(?!\.\w)(?: steps?| up)?[*_\s]*(?:\([^)]{0,40}\))?[*_\s]*[:\u2014]|"
    r"\bnext (?:steps?|up)\b|"
    r"\b(?:then i'?ll|i'?ll now|i will now|now i'?ll|let me|i'?m going to|we should|you should)\b|"
    r"\b(?:todo|to do|remaining)\s*:"
)
LIMIT = 5


REQUEST = patterns.compile(
    r"\?$|^(?:can|could|would|will|let'?s|please|how|what|why|should|we need|i need|i want|"
    r"make|add|write|fix|create|implement|update|remove|set up|next step)\b"
)


_COMMAND = patterns.compile(r"/[a-z][\w:-]*$")  # a slash command's name, on its own


def _task(text: str, limit: int = 200) -> str:
    """The sentence that states the task (`_first_sentence`), after what the turn says
    before it when that fits in `limit` characters: "we have github actions but they
    only run the linter. I want: on merge, test and deploy" keeps its first part."""
    found = [" ".join(s.split()) for s in sentences(unwrapped(text))]
    task = _first_sentence(text, limit)
    if task not in found:
        return task
    before = found[: found.index(task)]
    while before and len(" ".join([*before, task])) > limit:
        before.pop(0)
    # (a slash command's name stays with its arguments: "/review the parser")
    return " ".join([*(s for s in before if len(terms(s)) >= 2 or _COMMAND.match(s)), task])


def _substantive(text: str) -> bool:
    """Whether a user turn says something a task can be: a request or question, or a
    sentence of three content words or more (not "hm." or "thx!")."""
    found = sentences(unwrapped(text))
    return any(
        len(terms(s)) >= 3 or (REQUEST.search(s.lower()) and len(terms(s)) >= 2) for s in found
    )


_CAPITALISED = patterns.compile(r"[A-Z][a-z]+\.\w+")
_EXTENSION = patterns.compile(r"\.[A-Za-z]\w*$")


def _files(recent: list[list[Any]]) -> list[str]:
    """The files the latest turns mention, the latest first: those the user or the
    assistant names, then those only a tool's output shows (a stack trace names many).
    A bare name written as a capitalised word ("Next.js", "Package.json" in a heading)
    is a file only when a tool call or output shows it, or it is written as code (in
    backticks); a bare name that differs from one already listed only in case, or names
    the file of a path already listed, is that file; a name without a file extension
    ("HTTP/1.1") or with a scheme or host ("host:path") is not a file."""
    said = [e for e in recent if e[1] != "tool"]
    tools = [e for e in recent if e[1] == "tool"]
    files: list[str] = []
    seen: set[str] = set()  # the file names listed, lower-cased
    for entry in [*reversed(said), *reversed(tools)]:
        for path in entry[4]:
            name = path.rsplit("/", 1)[-1]
            if path in files or ("/" not in path and name.lower() in seen):
                continue
            if ":" in path or not _EXTENSION.search(name):
                continue
            if "/" not in path and _CAPITALISED.fullmatch(path) and not _as_file(path, recent):
                continue
            files.append(path)
            seen.add(name.lower())
    named = {p.rsplit("/", 1)[-1].lower() for p in files if "/" in p}
    return [p for p in files if "/" in p or p.lower() not in named]


def _as_file(name: str, recent: list[list[Any]]) -> bool:
    """Whether `name` is written as code (in backticks), as a tool call's argument, or
    as a file in a tool's output (ending a line, as a listing shows it)."""
    listed = re.compile(rf"(?:^|[\s/]){re.escape(name)}$", re.MULTILINE)
    argument = re.compile(rf"[/\"]{re.escape(name)}\"")  # a call's "file_path": ".../name"
    for entry in recent:
        text = entry[2]
        if name not in text:
            continue
        if f"`{name}`" in text or any(
            "[tool_use]" in line and argument.search(line) for line in text.splitlines()
        ):
            return True
        if entry[1] == "tool" and listed.search(text):
            return True
    return False


def _first_sentence(text: str, limit: int = 200) -> str:
    """The sentence that states the task: the first request or question, else the
    first sentence that says something (three content words or more)."""
    found = sentences(unwrapped(text))
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
    users = [e for e in open_turns if e[1] == "user" and not e[7]]
    first_user = next((e for e in users if _substantive(e[2])), users[0] if users else None)
    if first_user is not None:
        current_task = _task(first_user[2])

    chain = [s["summary"].split(". ")[0][:160] for s in in_effort[-LIMIT:] if s["summary"]]

    completed = []
    for segment in in_effort:
        found = segment["conclusion"]
        if found and found["kind"] in conclusions.DONE and not found.get("superseded_by"):
            completed.append(found["text"])
    for entry in open_turns:
        found = entry[5]
        if found and found["kind"] in conclusions.DONE and found["text"] not in completed:
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

    files = _files(recent)
    decisions: list[str] = []  # the latest few, found from the end
    for d in reversed(state["decisions"]):
        if len(decisions) == LIMIT:
            break
        if not d.get("superseded_by") and d["kind"] == "decision":
            decisions.append(d["text"])
    decisions.reverse()

    blockers = []
    last_resolution = max(
        (e[0] for e in open_turns if e[5] and e[5]["kind"] in conclusions.DONE), default=0
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
