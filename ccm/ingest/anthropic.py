"""Importer for Anthropic Messages API payloads: requests, responses, or a list of both.

This is what the proxy sees and what people save while debugging an agent. Requests
carry no message ids and usually repeat the whole history, so their turns keep
``id=None`` and the caller recognises repeats by content. Odd messages are rejected
one by one; only an input that is not a Messages API payload at all raises
`FormatError`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

from ccm.errors import FormatError
from ccm.ingest.lines import load_document
from ccm.ingest.model import Parsed, ParseOptions, Rejected, SourceSession, SourceTurn
from ccm.store import slug_session_id

SOURCE = "anthropic"
HINT = "is this an Anthropic Messages API request or response? pass --format to choose another importer"
ROLES = frozenset({"user", "assistant"})
MESSAGE_HINT = (
    "a message needs role 'user' or 'assistant' and content that is a string or a list of blocks"
)
PLACEHOLDERS = {"image": "[image]", "document": "[document]"}
_NEITHER = "neither a Messages API request (with 'messages') nor a response (type 'message')"


def parse(data: bytes, name: str, options: ParseOptions) -> Parsed:
    """Read one payload, or a JSON array of them, into a single session in order."""
    document = load_document(data, name, HINT)
    parsed = Parsed()
    session = SourceSession(session_id=options.session or _default_id(name), source=SOURCE)
    reader = _Reader(name, options, parsed, session)
    if isinstance(document, dict):
        if not reader.unit(document, ""):
            raise FormatError(f"{name}: {_NEITHER}", HINT)
    elif isinstance(document, list):
        found = [reader.unit(unit, f"[{index}].") for index, unit in enumerate(document)]
        if not any(found):
            raise FormatError(f"{name}: no Messages API request or response in the array", HINT)
    else:
        raise FormatError(f"{name}: {_NEITHER}", HINT)
    parsed.sessions.append(session)
    return parsed


@dataclass
class Request:
    """The turns of one request, as a live surface (the proxy) reads it."""

    system: SourceTurn | None  # the system prompt, as one turn
    turns: list[SourceTurn]  # the conversation's turns, in order
    spans: list[tuple[int, int]]  # the turns of each message: turns[first:end]
    rejected: list[Rejected]  # messages that are not messages


def read_request(body: dict[str, Any], options: ParseOptions, name: str = "request") -> Request:
    """The turns of a request body (a dict with ``messages``), message by message."""
    session = SourceSession(session_id=options.session or SOURCE, source=SOURCE)
    parsed = Parsed()
    reader = _Reader(name, options, parsed, session)
    reader.system(body.get("system"))
    system = session.turns.pop() if session.turns else None
    spans = []
    messages = body.get("messages")
    for index, message in enumerate(messages if isinstance(messages, list) else []):
        first = len(session.turns)
        reader.message(message, f"messages[{index}]")
        spans.append((first, len(session.turns)))
    return Request(system, session.turns, spans, parsed.rejected)


def read_response(message: dict[str, Any], options: ParseOptions) -> list[SourceTurn]:
    """The turns of a response (a ``message``), with its id."""
    session = SourceSession(session_id=options.session or SOURCE, source=SOURCE)
    reader = _Reader("response", options, Parsed(), session)
    content = message.get("content")
    reader.response(message, content if isinstance(content, list) else [])
    return session.turns


def _default_id(name: str) -> str:
    return SOURCE if name == "-" else slug_session_id(PurePath(name).stem)


@dataclass
class _Pending:
    """The text of the turn being built, until a tool result or the message ends it."""

    role: str
    pieces: list[str] = field(default_factory=list)
    tool_calls: list[dict[str, str]] = field(default_factory=list)


@dataclass
class _Reader:
    """Walks the payloads, remembering tool names so tool results can be labelled."""

    name: str
    options: ParseOptions
    parsed: Parsed
    session: SourceSession
    tool_names: dict[str, str] = field(default_factory=dict)

    def unit(self, unit: Any, where: str) -> bool:
        """Read one request or response; False (and a rejection) when it is neither."""
        if isinstance(unit, dict) and unit.get("type") == "message":
            content = unit.get("content")
            if isinstance(content, list):
                self.note_model(unit)
                self.response(unit, content)
                return True
        if isinstance(unit, dict) and isinstance(unit.get("messages"), list):
            self.note_model(unit)
            self.request(unit, where)
            return True
        if where:  # an array item; a lone object that fits neither is a FormatError
            self.reject(unit, f"{where.rstrip('.')}: {_NEITHER}", HINT)
        return False

    def note_model(self, unit: dict[str, Any]) -> None:
        model = unit.get("model")
        if isinstance(model, str) and model and "model" not in self.session.meta:
            self.session.meta["model"] = model

    def request(self, unit: dict[str, Any], where: str) -> None:
        self.system(unit.get("system"))
        for index, message in enumerate(unit["messages"]):
            self.message(message, f"{where}messages[{index}]")

    def response(self, unit: dict[str, Any], content: list[Any]) -> None:
        """The response's turns get its id; a second turn (unusual) a numbered one."""
        first = len(self.session.turns)
        self.blocks("assistant", content)
        ident = unit.get("id")
        if isinstance(ident, str) and ident:
            for number, turn in enumerate(self.session.turns[first:], start=1):
                turn.id = ident if number == 1 else f"{ident}-{number}"

    def system(self, system: Any) -> None:
        if isinstance(system, str):
            text = system
        elif isinstance(system, list):
            text = "\n".join(t for t in map(_system_block, system) if t)
        else:
            return
        if text.strip():
            self.add(SourceTurn(role="system", content=text))
        else:
            self.parsed.skipped["empty"] += 1

    def message(self, message: Any, where: str) -> None:
        if not isinstance(message, dict):
            self.reject(message, f"{where}: not an object")
            return
        role = message.get("role")
        if not isinstance(role, str) or role not in ROLES:
            self.reject(message, f"{where}: role {_short(role)} is not 'user' or 'assistant'")
            return
        content = message.get("content")
        if isinstance(content, str):
            self.flush(_Pending(role, [content]))
        elif isinstance(content, list):
            self.blocks(role, content)
        else:
            self.reject(message, f"{where}: content is neither a string nor a list of blocks")

    def blocks(self, role: str, blocks: list[Any]) -> None:
        """Text and tool calls gather into one turn; each tool result is a turn of its own."""
        pending = _Pending(role)
        for block in blocks:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                self.flush(pending)
                pending = _Pending(role)
                self.tool_result(block)
            else:
                self.block(block, pending)
        self.flush(pending)

    def block(self, block: Any, pending: _Pending) -> None:
        kind = block.get("type") if isinstance(block, dict) else None
        if not isinstance(block, dict) or not isinstance(kind, str):
            text = block if isinstance(block, str) else _text(_dict(block).get("text"))
            if text:
                pending.pieces.append(text)
            else:
                self.parsed.skipped["unknown"] += 1
        elif kind == "tool_use":
            self.tool_use(block, pending)
        elif kind in ("thinking", "redacted_thinking"):
            self.thinking(block, kind, pending)
        elif kind in PLACEHOLDERS:
            pending.pieces.append(PLACEHOLDERS[kind])
        elif isinstance(block.get("text"), str):
            pending.pieces.append(block["text"])
        else:
            self.parsed.skipped[kind or "unknown"] += 1

    def tool_use(self, block: dict[str, Any], pending: _Pending) -> None:
        name = _text(block.get("name")) or "unknown"
        ident = _text(block.get("id"))
        pending.pieces.append(f"[tool_use] {name} {_compact(block.get('input'))}")
        call = {"name": name}
        if ident:
            call["id"] = ident
            self.tool_names[ident] = name
        pending.tool_calls.append(call)

    def thinking(self, block: dict[str, Any], kind: str, pending: _Pending) -> None:
        """Reasoning is not what the user read; redacted reasoning is unreadable anyway."""
        text = _text(block.get("thinking"))
        if kind == "redacted_thinking" or not self.options.include_thinking:
            self.parsed.skipped["thinking"] += 1
        elif text.strip():
            pending.pieces.append(f"[thinking] {text}")
        else:
            self.parsed.skipped["empty"] += 1

    def tool_result(self, block: dict[str, Any]) -> None:
        ident = _text(block.get("tool_use_id"))
        tool = {"id": ident} if ident else {}
        if ident in self.tool_names:
            tool["name"] = self.tool_names[ident]
        turn = SourceTurn(role="tool", content=_result_text(block.get("content")))
        turn.tool = tool or None
        if block.get("is_error") is True:
            turn.meta["is_error"] = True
        self.add(turn)

    def flush(self, pending: _Pending) -> None:
        if not pending.pieces and not pending.tool_calls:
            return
        text = "\n".join(piece for piece in pending.pieces if piece)
        if not text.strip():
            self.parsed.skipped["empty"] += 1
            return
        turn = SourceTurn(role=pending.role, content=text)
        if pending.tool_calls:
            turn.meta["tool_calls"] = pending.tool_calls
        self.add(turn)

    def add(self, turn: SourceTurn) -> None:
        self.session.turns.append(turn)

    def reject(self, value: Any, error: str, hint: str = MESSAGE_HINT) -> None:
        self.parsed.rejected.append(
            Rejected(
                source=self.name,
                line=None,
                error=error,
                hint=hint,
                raw=_dump(value),
                session=self.session.session_id,
            )
        )


# ---------------------------------------------------------------------------
# small helpers


def _system_block(block: Any) -> str:
    if isinstance(block, str):
        return block
    return _text(block.get("text")) if isinstance(block, dict) else ""


def _result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "\n".join(piece for piece in map(_result_block, content) if piece)


def _result_block(block: Any) -> str:
    if isinstance(block, str):
        return block
    if not isinstance(block, dict):
        return ""
    kind = block.get("type")
    if isinstance(kind, str) and kind in PLACEHOLDERS:
        return PLACEHOLDERS[kind]
    return _text(block.get("text"))


def _compact(value: Any) -> str:
    """Tool input on one line, keys sorted, so identical calls read identically."""
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    except (RecursionError, TypeError, ValueError):
        return "{}"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _dump(value: Any) -> bytes:
    """The value as JSON bytes, kept verbatim in the session's quarantine."""
    try:
        return json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(value).encode("ascii")
    except (RecursionError, ValueError):
        return repr(type(value)).encode("ascii")
