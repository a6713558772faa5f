"""A session's turns as a person reads them (``ccm show``).

The raw log keeps a tool call as one line, ``[tool_use] Name {json input}``, and a
tool result as its own turn carrying the call's id. For reading, a call's input is
spread out (a ``Write``'s file content as the text it is, not one line of escaped
JSON) and each result says which turn's call it answers.
"""

from __future__ import annotations

import json
from typing import Any

CALL = "[tool_use] "
INDENT = "    "


def call_turns(turns: list[dict[str, Any]]) -> dict[str, int]:
    """The turn that made each tool call, by call id."""
    made: dict[str, int] = {}
    for turn in turns:
        for call in (turn.get("meta") or {}).get("tool_calls") or []:
            if isinstance(call, dict) and isinstance(call.get("id"), str):
                made.setdefault(call["id"], int(turn["turn"]))
    return made


def heading(turn: dict[str, Any], made: dict[str, int]) -> str:
    """``[3] tool Bash · 2025-09-07 09:52:27 · result of the call in turn 2``."""
    tool = turn.get("tool") or {}
    name = f" {tool.get('name', '')}" if tool.get("name") else ""
    ts = (turn.get("ts") or "-")[:19].replace("T", " ")
    text = f"[{turn['turn']}] {turn['role']}{name} \u00b7 {ts}"
    call = tool.get("id")
    if turn["role"] == "tool" and isinstance(call, str):
        where = made.get(call)
        text += f" \u00b7 result of the call in turn {where}" if where else f" \u00b7 call {call}"
    return text


def body(content: str) -> list[str]:
    """A turn's text, with each tool call's input spread over lines."""
    lines: list[str] = []
    for line in content.split("\n"):
        if not line.startswith(CALL):
            lines.append(line)
            continue
        name, _, raw = line[len(CALL) :].partition(" ")
        try:
            given = json.loads(raw) if raw else {}
        except ValueError:
            lines.append(line)  # not JSON after all: as it was logged
            continue
        lines.append(f"\u2192 {name}")
        if not isinstance(given, dict):
            lines.append(INDENT + json.dumps(given, ensure_ascii=False))
            continue
        for key, value in given.items():
            if isinstance(value, str) and "\n" in value:
                lines.append(f"{INDENT}{key}:")
                lines.extend(INDENT * 2 + part for part in value.split("\n"))
            elif isinstance(value, str):
                lines.append(f"{INDENT}{key}: {value}")
            else:
                lines.append(f"{INDENT}{key}: {json.dumps(value, ensure_ascii=False)}")
    return lines


def readable(turns: list[dict[str, Any]], context: list[dict[str, Any]] | None = None) -> str:
    """`turns` for reading; `context`: all the turns their calls may be in."""
    return "\n\n".join(rendered(turns, context))


def rendered(turns: list[dict[str, Any]], context: list[dict[str, Any]] | None = None) -> list[str]:
    """Each of `turns` for reading, on its own (`readable` joins them)."""
    made = call_turns(context if context is not None else turns)
    return ["\n".join([heading(turn, made), *body(str(turn["content"]))]) for turn in turns]
