"""Plain JSON Lines: one ``{"role", "content"}`` object a line.

Optional keys are kept: ``ts`` (ISO-8601 or epoch), ``id`` (makes re-import
idempotent), ``tool``, ``meta``; a ``turn`` of the source is kept as
``meta.source_turn`` because ccm numbers turns itself. ``content`` may also be a
list of Messages-API text blocks. A ``ts`` that is not a date is replaced by the time
of the import, with a warning naming the line, and kept as ``meta.original_ts``.
"""

from __future__ import annotations

import json
from pathlib import PurePath
from typing import Any

from ccm.ingest.lines import json_lines
from ccm.ingest.model import (
    Notice,
    Parsed,
    ParseOptions,
    Rejected,
    SourceSession,
    SourceTurn,
    normalise_ts,
)
from ccm.store import slug_session_id

ROLES = ("user", "assistant", "system", "tool")
HINT = (
    'each line must be a JSON object with "role" (user, assistant, system or tool) '
    'and "content" (a string)'
)
TS_HINT = 'write "ts" as ISO-8601 (2024-01-17T10:00:00Z) or epoch seconds, or leave it out'


def default_session(name: str, fallback: str) -> str:
    """A session id from an input's file name ('-' for stdin gives `fallback`)."""
    if name == "-":
        return fallback
    return slug_session_id(PurePath(name).stem)


def _content(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(block, dict) for block in value):
        texts = [block.get("text") for block in value if block.get("type", "text") == "text"]
        if all(isinstance(text, str) for text in texts):
            return "\n".join(str(text) for text in texts)
    return None


def _turn(value: dict[str, Any]) -> SourceTurn | tuple[str, str]:
    """A turn, or why the object is not one and how to fix it."""
    if "role" not in value:
        return 'missing "role"', 'add "role": "user" (or assistant, system, tool) to the line'
    role = value.get("role")
    if role not in ROLES:
        return f"role must be one of {', '.join(ROLES)}, found {json.dumps(role)[:40]}", HINT
    if "content" not in value:
        return 'missing "content"', 'add "content": "..." with the text of the turn to the line'
    content = _content(value.get("content"))
    if content is None:
        return f'"content" must be a string, found {type(value.get("content")).__name__}', HINT
    turn = SourceTurn(role=str(role), content=content, ts=normalise_ts(value.get("ts")))
    if isinstance(value.get("id"), str | int) and str(value["id"]):
        turn.id = str(value["id"])
    tool = value.get("tool")
    if isinstance(tool, dict):
        turn.tool = {k: str(v) for k, v in tool.items() if k in ("name", "id") and v is not None}
    meta = value.get("meta")
    if isinstance(meta, dict):
        turn.meta.update(meta)
    if isinstance(value.get("turn"), int):
        turn.meta["source_turn"] = value["turn"]
    return turn


def _not_an_object(value: Any) -> tuple[str, str]:
    if isinstance(value, list):
        return (
            "expected a JSON object, found a JSON array",
            'put each message on a line of its own, as {"role": ..., "content": ...}',
        )
    return f"expected a JSON object, found {type(value).__name__}", HINT


def _ts_notice(given: Any, name: str, number: int) -> Notice:
    shown = json.dumps(given, ensure_ascii=False)
    shown = shown if len(shown) <= 40 else shown[:37] + "..."
    return Notice(
        name,
        number,
        f'"ts" {shown} is not a date: the time of the import is stored instead, '
        "and the given value is kept as meta.original_ts",
        TS_HINT,
    )


def parse(data: bytes, name: str, options: ParseOptions) -> Parsed:
    session_id = options.session or default_session(name, "stdin")
    session = SourceSession(session_id, "jsonl")
    parsed = Parsed(sessions=[session])
    lines = json_lines(data, name, options, session_id, parsed.skipped, parsed.warnings)
    for number, offset, raw, value in lines:
        if isinstance(value, Rejected):
            parsed.rejected.append(value)
            continue
        turn = _turn(value) if isinstance(value, dict) else _not_an_object(value)
        if isinstance(turn, tuple):
            error, hint = turn
            parsed.rejected.append(Rejected(name, number, error, hint, raw, session_id, offset))
            continue
        given = value.get("ts")
        if turn.ts is None and given is not None:
            turn.meta["original_ts"] = given
            parsed.warnings.append(_ts_notice(given, name, number))
        session.turns.append(turn)
    return parsed
