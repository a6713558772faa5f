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
            lines += _field(str(key), value, INDENT)
    return lines


def _field(key: str, value: Any, indent: str) -> list[str]:
    """One field of a call's input at `indent`: a text of several lines as its lines, a
    list or an object that holds texts or other lists and objects spread out one field
    a line (a ``MultiEdit``'s edits, a ``TodoWrite``'s todos), any other value as its
    JSON."""
    if isinstance(value, str) and "\n" in value:
        return [f"{indent}{key}:", *(indent + INDENT + part for part in value.split("\n"))]
    if isinstance(value, str):
        return [f"{indent}{key}: {value}"]
    if isinstance(value, dict) and value and _nested(value.values()):
        found = [f"{indent}{key}:"]
        for inner, item in value.items():
            found += _field(str(inner), item, indent + INDENT)
        return found
    if isinstance(value, list) and value and _nested(value):
        found = [f"{indent}{key}:"]
        inside = indent + INDENT + "  "  # an item's lines, after its "- "
        for item in value:
            if isinstance(item, dict) and item:
                lines = [line for k, v in item.items() for line in _field(str(k), v, inside)]
            elif isinstance(item, str):
                lines = [inside + part for part in item.split("\n")]
            else:
                lines = [inside + json.dumps(item, ensure_ascii=False)]
            found += [f"{indent}{INDENT}- {lines[0][len(inside) :]}", *lines[1:]]
        return found
    return [f"{indent}{key}: {json.dumps(value, ensure_ascii=False)}"]


def _nested(values: Any) -> bool:
    """Whether any of `values` is a text, a list or an object (worth a line of its own)."""
    return any(isinstance(v, (str, list, dict)) for v in values)


def readable(turns: list[dict[str, Any]], context: list[dict[str, Any]] | None = None) -> str:
    """`turns` for reading; `context`: all the turns their calls may be in."""
    return "\n\n".join(rendered(turns, context))


def rendered(turns: list[dict[str, Any]], context: list[dict[str, Any]] | None = None) -> list[str]:
    """Each of `turns` for reading, on its own (`readable` joins them)."""
    made = call_turns(context if context is not None else turns)
    return ["\n".join([heading(turn, made), *body(str(turn["content"]))]) for turn in turns]
