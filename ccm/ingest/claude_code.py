"""Claude Code session transcripts (``~/.claude/projects/<project>/<session>.jsonl``).

Claude Code appends one record per content block, so the records of one assistant
message share ``message.id``: they are merged into one turn (deduplicated by record
``uuid``). Text is kept; a tool call becomes one compact line (tool name and its
input); a tool result becomes a turn of role ``tool``; thinking is left out unless
asked for. ``summary``, ``system``, ``file-history-snapshot``, ``progress`` and any
record type ccm does not know are skipped and counted, never an error. Subagent
(sidechain) records go to a session of their own, ``<parent>~agent-<id>``, whose
first turn names the parent session.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

from ccm.errors import InvalidSessionId
from ccm.ingest.jsonl import default_session
from ccm.ingest.lines import json_lines
from ccm.ingest.model import (
    Parsed,
    ParseOptions,
    Part,
    Rejected,
    SourceSession,
    SourceTurn,
    normalise_ts,
)
from ccm.store import MAX_SESSION_ID, check_session_id, slug_session_id

CONTENT_HINT = (
    'a "user" or "assistant" record needs "message": {"content": a string or a list of blocks}'
)


@dataclass
class _Record:
    number: int
    offset: int
    raw: bytes
    value: dict[str, Any]

    @property
    def uuid(self) -> str | None:
        uuid = self.value.get("uuid")
        return uuid if isinstance(uuid, str) and uuid else None

    @property
    def sidechain(self) -> bool:
        return self.value.get("isSidechain") is True


@dataclass
class _Builder:
    """Turns of one session, assembled record by record."""

    session: SourceSession
    messages: dict[str, SourceTurn] = field(default_factory=dict)
    seen: set[str] = field(default_factory=set)
    last_ts: str | None = None


def _session_id(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    try:
        return check_session_id(value)
    except InvalidSessionId:
        return None


def _main_session(records: list[_Record], name: str, options: ParseOptions) -> str:
    if options.session:
        return options.session
    votes = Counter(
        sid for r in records if not r.sidechain and (sid := _session_id(r.value.get("sessionId")))
    )
    if not votes:
        votes = Counter(sid for r in records if (sid := _session_id(r.value.get("sessionId"))))
    if votes:
        return votes.most_common(1)[0][0]
    return default_session(name, "claude-code")


def _agent_session(main: str, key: str) -> str:
    suffix = "~agent-" + slug_session_id(key)[:40]
    return main[: MAX_SESSION_ID - len(suffix)] + suffix


def _sidechain_keys(records: list[_Record]) -> dict[int, str]:
    """Which subagent each sidechain record belongs to (its agentId, else its root uuid)."""
    parents = {r.uuid: r.value.get("parentUuid") for r in records if r.sidechain and r.uuid}
    keys: dict[int, str] = {}
    for index, record in enumerate(records):
        if not record.sidechain:
            continue
        agent = record.value.get("agentId")
        if isinstance(agent, str) and agent:
            keys[index] = agent
            continue
        node = record.uuid
        steps = 0
        while node is not None and isinstance(parents.get(node), str) and steps < len(parents):
            node = parents[node]
            steps += 1
        # a root uuid is long; its first 8 hex digits name the subagent well enough
        keys[index] = node[:8] if node else f"line{record.number}"
    return keys


def _compact_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def _block_text(block: Any) -> str:
    """Text of a tool-result content element, with placeholders for non-text."""
    if isinstance(block, str):
        return block
    if isinstance(block, dict):
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            return str(block["text"])
        return f"[{kind}]" if isinstance(kind, str) else "[block]"
    return _compact_json(block)


def _result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_block_text(block) for block in content)
    return "" if content is None else _compact_json(content)


class _Parser:
    def __init__(self, name: str, options: ParseOptions) -> None:
        self.name = name
        self.options = options
        self.parsed = Parsed()
        self.tool_names: dict[str, str] = {}

    def reject(self, record: _Record, error: str, session: str) -> None:
        self.parsed.rejected.append(
            Rejected(
                self.name, record.number, error, CONTENT_HINT, record.raw, session, record.offset
            )
        )

    # -- user records ------------------------------------------------------
    def user(self, builder: _Builder, record: _Record, content: Any, ts: str | None) -> None:
        value = record.value
        uuid = record.uuid
        if isinstance(content, str):
            blocks: list[Any] = [{"type": "text", "text": content}]
        else:
            blocks = content
        role = "user"
        meta: dict[str, Any] = {}
        if value.get("isCompactSummary") is True:
            role, meta = "system", {"compact_summary": True}
        elif value.get("isMeta") is True or _local_command_caveat(blocks):
            role, meta = "system", {"injected": True}
        texts: list[str] = []
        emitted = 0

        def flush() -> None:
            nonlocal emitted
            text = "\n".join(texts).strip("\n")
            texts.clear()
            if not text.strip():
                return
            turn_id = None
            if uuid:
                turn_id = uuid if emitted == 0 else f"{uuid}#{emitted}"
            builder.session.turns.append(SourceTurn(role, text, ts=ts, id=turn_id, meta=dict(meta)))
            emitted += 1

        for index, block in enumerate(blocks):
            if isinstance(block, dict) and block.get("type") == "tool_result":
                flush()
                self.tool_result(builder, block, index, uuid, ts)
            elif isinstance(block, dict) and block.get("type") == "text":
                text = block.get("text")
                texts.append(text if isinstance(text, str) else _compact_json(text))
            else:
                texts.append(_block_text(block))
        flush()

    def tool_result(
        self, builder: _Builder, block: dict[str, Any], index: int, uuid: str | None, ts: str | None
    ) -> None:
        call_id = block.get("tool_use_id")
        tool: dict[str, str] = {}
        if isinstance(call_id, str) and call_id:
            tool["id"] = call_id
            if call_id in self.tool_names:
                tool["name"] = self.tool_names[call_id]
            turn_id: str | None = f"result:{call_id}"
        else:
            turn_id = f"{uuid}#result{index}" if uuid else None
        meta: dict[str, Any] = {"is_error": True} if block.get("is_error") is True else {}
        text = _result_text(block.get("content"))
        builder.session.turns.append(
            SourceTurn("tool", text, ts=ts, id=turn_id, tool=tool or None, meta=meta)
        )

    # -- assistant records -------------------------------------------------
    def assistant(
        self, builder: _Builder, record: _Record, message: dict[str, Any], ts: str | None
    ) -> None:
        content: Any = message.get("content")
        blocks: list[Any] = (
            [{"type": "text", "text": content}] if isinstance(content, str) else content
        )
        pieces: list[str] = []
        calls: list[dict[str, str]] = []
        for block in blocks:
            kind = block.get("type") if isinstance(block, dict) else None
            if not isinstance(block, dict):
                pieces.append(_block_text(block))
            elif kind == "text":
                text = block.get("text")
                if isinstance(text, str) and text.strip():
                    pieces.append(text)
            elif kind == "tool_use":
                name = str(block.get("name") or "tool")
                call_id = block.get("id")
                if isinstance(call_id, str):
                    self.tool_names[call_id] = name
                    calls.append({"name": name, "id": call_id})
                pieces.append(f"[tool_use] {name} {_compact_json(block.get('input'))}")
            elif kind in ("thinking", "redacted_thinking"):
                thought = block.get("thinking")
                if (
                    kind == "thinking"
                    and self.options.include_thinking
                    and isinstance(thought, str)
                ):
                    pieces.append(f"[thinking] {thought}")
                else:
                    self.parsed.skipped["thinking"] += 1
            else:
                pieces.append(_block_text(block))
        if not pieces:
            return
        message_id = message.get("id")
        key = message_id if isinstance(message_id, str) and message_id else record.uuid
        part = Part(record.uuid or f"{key}@{record.number}", "\n".join(pieces))
        existing = builder.messages.get(key) if key else None
        if existing is not None and existing.parts is not None:
            existing.parts.append(part)
            existing.content = "\n".join(p.text for p in existing.parts)
            if calls:
                existing.meta.setdefault("tool_calls", []).extend(calls)
            return
        meta: dict[str, Any] = {}
        if isinstance(message.get("model"), str):
            meta["model"] = message["model"]
        if calls:
            meta["tool_calls"] = calls
        turn = SourceTurn("assistant", part.text, ts=ts, id=key, parts=[part], meta=meta)
        builder.session.turns.append(turn)
        if key:
            builder.messages[key] = turn

    # -- one record --------------------------------------------------------
    def record(self, builder: _Builder, record: _Record) -> None:
        value = record.value
        message = value.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(message, dict) or not isinstance(content, str | list):
            self.reject(
                record,
                f"{value['type']} record without message.content",
                builder.session.session_id,
            )
            return
        if record.uuid is not None:
            if record.uuid in builder.seen:
                self.parsed.skipped["duplicate_record"] += 1
                return
            builder.seen.add(record.uuid)
        ts = normalise_ts(value.get("timestamp")) or builder.last_ts
        builder.last_ts = ts
        if value["type"] == "user":
            self.user(builder, record, content, ts)
        else:
            self.assistant(builder, record, message, ts)


def parse(data: bytes, name: str, options: ParseOptions) -> Parsed:
    fallback = options.session or default_session(name, "claude-code")
    parser = _Parser(name, options)
    parsed = parser.parsed
    records: list[_Record] = []
    title: str | None = None
    # a transcript is read while Claude Code writes it: a last line caught half written
    # is left for the next import without a word (no `warnings`)
    for number, offset, raw, value in json_lines(data, name, options, fallback, parsed.skipped):
        if isinstance(value, Rejected):
            parsed.rejected.append(value)
            continue
        if not isinstance(value, dict):
            parsed.rejected.append(
                Rejected(
                    name,
                    number,
                    f"expected a JSON object (a Claude Code record), found {type(value).__name__}",
                    "remove the line or fix it; other lines still import",
                    raw,
                    fallback,
                    offset,
                )
            )
            continue
        kind = value.get("type")
        if kind in ("user", "assistant"):
            records.append(_Record(number, offset, raw, value))
            continue
        if kind == "summary" and isinstance(value.get("summary"), str):
            title = value["summary"]
        parsed.skipped[kind if isinstance(kind, str) and kind else "untyped"] += 1

    main = _main_session(records, name, options)
    for rejected in parsed.rejected:
        rejected.session = main
    stem = PurePath(name).stem
    whole_file_agent = stem.startswith("agent-") and records and all(r.sidechain for r in records)
    keys = {} if whole_file_agent else _sidechain_keys(records)

    builders: dict[str, _Builder] = {}

    def builder_for(session_id: str, parent: str | None) -> _Builder:
        if session_id not in builders:
            session = SourceSession(session_id, "claude-code")
            if parent:
                session.meta["parent_session"] = parent
            builders[session_id] = _Builder(session)
        return builders[session_id]

    if whole_file_agent:
        main_builder = builder_for(_agent_session(main, stem.removeprefix("agent-")), main)
    else:
        main_builder = builder_for(main, None)
        if title:
            main_builder.session.meta["title"] = title
    cwd = next((r.value["cwd"] for r in records if isinstance(r.value.get("cwd"), str)), None)
    if cwd:
        main_builder.session.meta["cwd"] = cwd

    for index, record in enumerate(records):
        if index in keys:
            builder = builder_for(_agent_session(main, keys[index]), main)
        else:
            builder = main_builder
        parser.record(builder, record)

    parsed.sessions = [b.session for b in builders.values()]
    return parsed


# Claude Code puts this in front of the output of a local command (`!cmd`, `/cost`...);
# it is the client talking to the model, not the user, even where isMeta is missing
LOCAL_COMMAND_CAVEAT = (
    "Caveat: The messages below were generated by the user while running local commands."
)


def _local_command_caveat(blocks: list[Any]) -> bool:
    first = blocks[0] if blocks else None
    text = first.get("text") if isinstance(first, dict) else None
    return isinstance(text, str) and text.lstrip().startswith(LOCAL_COMMAND_CAVEAT)
