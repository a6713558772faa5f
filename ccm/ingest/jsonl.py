"""Plain JSON Lines: one ``{"role", "content"}`` object a line.

Optional keys are kept: ``ts`` (ISO-8601 or epoch), ``id`` (makes re-import
idempotent), ``tool``, ``meta``; a ``turn`` of the source is kept as
``meta.source_turn`` because ccm numbers turns itself. ``content`` may also be a
list of Messages-API text blocks.
"""

from __future__ import annotations

import json
from pathlib import PurePath
from typing import Any

from ccm.ingest.lines import json_lines
from ccm.ingest.model import Parsed, ParseOptions, Rejected, SourceSession, SourceTurn, normalise_ts
from ccm.store import slug_session_id

ROLES = ("user", "assistant", "system", "tool")
HINT = (
    'each line must be a JSON object with "role" (user, assistant, system or tool) '
    'and "content" (a string)'
)


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


def _turn(value: dict[str, Any]) -> SourceTurn | str:
    """A turn, or the reason the object is not one."""
    role = value.get("role")
    if role not in ROLES:
        return f"role must be one of {', '.join(ROLES)}, found {json.dumps(role)[:40]}"
    content = _content(value.get("content"))
    if content is None:
        return f'"content" must be a string, found {type(value.get("content")).__name__}'
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


def parse(data: bytes, name: str, options: ParseOptions) -> Parsed:
    session_id = options.session or default_session(name, "stdin")
    session = SourceSession(session_id, "jsonl")
    parsed = Parsed(sessions=[session])
    for number, offset, raw, value in json_lines(data, name, options, session_id, parsed.skipped):
        if isinstance(value, Rejected):
            parsed.rejected.append(value)
            continue
        turn = _turn(value) if isinstance(value, dict) else "expected a JSON object"
        if isinstance(turn, str):
            parsed.rejected.append(Rejected(name, number, turn, HINT, raw, session_id, offset))
            continue
        session.turns.append(turn)
    return parsed
