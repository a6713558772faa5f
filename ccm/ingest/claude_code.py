"""Claude Code session transcripts (``~/.claude/projects/<project>/<session>.jsonl``).

Claude Code appends one record per content block, so the records of one assistant
message share ``message.id``: they are merged into one turn (deduplicated by record
``uuid``). Text is kept; a tool call becomes one compact line (tool name and its
input); a tool result becomes a turn of role ``tool``; thinking is left out unless
asked for. ``summary``, ``system``, ``file-history-snapshot``, ``progress`` and any
record type ccm does not know are skipped and counted, never an error. Subagent
(sidechain) records go to a session of their own, ``<parent>~agent-<id>``, whose
first turn names the parent session.

A transcript too large to hold is read a chunk at a time, twice (`Stream`): the first
read keeps the few facts a turn depends on that may come anywhere in the file, the
second builds the turns and hands over those that can no longer change, so that the
result is the one a whole read gives.
"""

from __future__ import annotations

import json
import sys
from array import array
from collections import Counter
from collections.abc import Callable, Iterator
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
        # read a chunk at a time (`Stream`): only these uuids (by hash) come more than
        # once, so only these need remembering; and a rejected record waits for the end
        # of the input without its bytes (its length says what to read again)
        self.repeated: set[int] | None = None
        self.deferred: list[tuple[Rejected, int]] | None = None

    def reject(self, record: _Record, error: str, session: str) -> None:
        if self.deferred is not None:
            rejected = Rejected(
                self.name, record.number, error, CONTENT_HINT, b"", session, record.offset
            )
            self.deferred.append((rejected, len(record.raw)))
            return
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
        if record.uuid is not None and (
            self.repeated is None or hash(record.uuid) in self.repeated
        ):
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


def _not_an_object(
    name: str, number: int, offset: int, raw: bytes, value: Any, session: str
) -> Rejected:
    return Rejected(
        name,
        number,
        f"expected a JSON object (a Claude Code record), found {type(value).__name__}",
        "remove the line or fix it; other lines still import",
        raw,
        session,
        offset,
    )


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
            parsed.rejected.append(_not_an_object(name, number, offset, raw, value, fallback))
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


# -- a transcript read a chunk at a time ----------------------------------------------


def _vote(counts: Counter[str]) -> str | None:
    """The session id most records name (the first named, on a tie), of those that are
    valid; `counts` holds the raw values in the order they first came."""
    valid: Counter[str] = Counter()
    for given, count in counts.items():
        if (session_id := _session_id(given)) is not None:
            valid[session_id] += count
    return valid.most_common(1)[0][0] if valid else None


def _spanning(hashes: array[int], lines: array[int], starts: list[int]) -> dict[int, int]:
    """Of the message keys (by hash, one entry per record), those whose records lie in
    more than one chunk (`starts`: the line each chunk starts after), each with the
    line of its last record. Two keys of one hash count as one: a message is then held
    longer than it needs to be, never handed over too soon."""
    import numpy as np

    if not hashes:
        return {}
    keys = np.frombuffer(hashes, dtype=np.int64)
    numbers = np.frombuffer(lines, dtype=np.int64)
    order = np.lexsort((numbers, keys))
    keys, numbers = keys[order], numbers[order]
    first = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1])))
    last = np.concatenate((first[1:], [len(keys)])) - 1
    chunk = np.searchsorted(np.asarray(starts, dtype=np.int64), numbers, side="left")
    spans = chunk[first] != chunk[last]
    return dict(zip(keys[first][spans].tolist(), numbers[last][spans].tolist(), strict=True))


def _repeated(hashes: array[int]) -> set[int]:
    """The uuids (by hash) that more than one record has: only those can be duplicates."""
    import numpy as np

    ordered = np.sort(np.frombuffer(hashes, dtype=np.int64))
    return set(np.unique(ordered[1:][ordered[1:] == ordered[:-1]]).tolist())


class Stream:
    """A transcript too large to hold, read a chunk at a time, twice; the turns and
    rejected lines are those `parse` gives. What is held is a chunk, the turns waiting
    for a message's last record, and what grows with the file only slowly: 8 bytes for
    each record's uuid and 16 for each assistant record's message key during the first
    read, the tool names, and the parent links of sidechain records.

    A turn depends on facts that may come anywhere in the file: the session id (a vote
    over every record), the subagent of a sidechain record (the root of its parentUuid
    chain), the title (a summary record), the cwd; and an assistant message is merged
    from records that share its message.id. So `survey` reads every chunk first and
    keeps only those facts, the hashes of the message keys and uuids, and where each
    chunk starts. `read` then reads the chunks again (the same chunks: the same bytes,
    cut at the same line ends), builds their turns with one parser state, and hands
    over what can no longer change: every turn of a session up to its first message
    whose last record is still to come. `end` hands over the rest, and the records
    rejected for their content, which a whole read lists after the bad lines.
    """

    def __init__(self, name: str, options: ParseOptions) -> None:
        self.name = name
        self.options = options
        self.votes: Counter[str] = Counter()  # sessionId of the main-chain records
        self.all_votes: Counter[str] = Counter()  # ... and of every record
        self.title: str | None = None
        self.cwd: str | None = None
        self.records = 0  # user and assistant records
        self.sidechain_records = 0
        self.parents: dict[str, str | None] = {}  # sidechain uuid -> its parentUuid
        self.key_hashes: array[int] = array("q")  # an assistant record's message key...
        self.key_lines: array[int] = array("q")  # ... and its line
        self.uuid_hashes: array[int] = array("q")
        self.starts: list[int] = []  # the line each chunk starts after
        self.parser: _Parser | None = None
        self.main = ""
        self.main_builder: _Builder | None = None
        self.agent_file = False
        self.builders: dict[str, _Builder] = {}
        self.spanning: dict[int, int] = {}  # key hash -> line of its last record
        self.roots: dict[str, str] = {}  # sidechain uuid -> root, where the walk ended

    def _lines(
        self, data: bytes, start: tuple[int, int], skipped: Counter[str]
    ) -> Iterator[tuple[int, int, bytes, Any | Rejected]]:
        """`json_lines` of one chunk, with the line numbers and offsets of the file."""
        lines, offset = start
        given = json_lines(data, self.name, self.options, self.main, skipped, at_start=offset == 0)
        for number, at, raw, value in given:
            if isinstance(value, Rejected):
                value.line = number + lines
                value.offset = at + offset
            yield number + lines, at + offset, raw, value

    # -- the first read ----------------------------------------------------------
    def survey(self, data: bytes, start: tuple[int, int]) -> None:
        """Keep, of one chunk, the facts the turns of the whole file depend on."""
        self.starts.append(start[0])
        counting = self.options.session is None
        for number, _, _, value in self._lines(data, start, Counter()):
            if not isinstance(value, dict):
                continue
            kind = value.get("type")
            if kind == "summary" and isinstance(value.get("summary"), str):
                self.title = value["summary"]
            if kind != "user" and kind != "assistant":
                continue
            self.records += 1
            sidechain = value.get("isSidechain") is True
            given = value.get("sessionId")
            if counting and isinstance(given, str):
                self.all_votes[given] += 1
                if not sidechain:
                    self.votes[given] += 1
            if self.cwd is None and isinstance(value.get("cwd"), str):
                self.cwd = value["cwd"]
            uuid = value.get("uuid")
            uuid = uuid if isinstance(uuid, str) and uuid else None
            if uuid is not None:
                self.uuid_hashes.append(hash(uuid))
            if sidechain:
                self.sidechain_records += 1
                if uuid is not None:
                    parent = value.get("parentUuid")
                    self.parents[uuid] = parent if isinstance(parent, str) else None
            message = value.get("message")
            if kind == "assistant" and isinstance(message, dict):
                message_id = message.get("id")
                key = message_id if isinstance(message_id, str) and message_id else uuid
                if key is not None:
                    self.key_hashes.append(hash(key))
                    self.key_lines.append(number)

    def _begin(self) -> _Parser:
        """The parser state of the second read, from what the first one kept."""
        if self.parser is not None:
            return self.parser
        options = self.options
        self.main = (
            options.session
            or _vote(self.votes)
            or _vote(self.all_votes)
            or default_session(self.name, "claude-code")
        )
        self.votes = self.all_votes = Counter()
        self.spanning = _spanning(self.key_hashes, self.key_lines, self.starts)
        parser = self.parser = _Parser(self.name, options)
        parser.repeated = _repeated(self.uuid_hashes)
        parser.deferred = []
        self.key_hashes, self.key_lines, self.uuid_hashes = array("q"), array("q"), array("q")
        stem = PurePath(self.name).stem
        self.agent_file = (
            stem.startswith("agent-")
            and self.records > 0
            and self.sidechain_records == self.records
        )
        if self.agent_file:
            agent = _agent_session(self.main, stem.removeprefix("agent-"))
            self.main_builder = self._builder(agent, self.main)
        else:
            self.main_builder = self._builder(self.main, None)
            if self.title:
                self.main_builder.session.meta["title"] = self.title
        if self.cwd:
            self.main_builder.session.meta["cwd"] = self.cwd
        return parser

    def _builder(self, session_id: str, parent: str | None) -> _Builder:
        if session_id not in self.builders:
            session = SourceSession(session_id, "claude-code")
            if parent:
                session.meta["parent_session"] = parent
            self.builders[session_id] = _Builder(session)
        return self.builders[session_id]

    def _root(self, uuid: str | None) -> str | None:
        """Where `_sidechain_keys` walks the parentUuid chain from `uuid` to; a walk that
        ends (not one cut short in a cycle) is remembered for every uuid on it."""
        parents, roots = self.parents, self.roots
        node, steps, path = uuid, 0, []
        while node is not None and isinstance(parents.get(node), str):
            if node in roots:
                node = roots[node]
                break
            if steps >= len(parents):
                return node  # a cycle: the walk stops where the whole read's stops
            path.append(node)
            node = parents[node]
            steps += 1
        if node is not None:
            roots.update(dict.fromkeys(path, node))
        return node

    def _builder_of(self, record: _Record) -> _Builder:
        assert self.main_builder is not None
        if self.agent_file or not record.sidechain:
            return self.main_builder
        agent = record.value.get("agentId")
        if isinstance(agent, str) and agent:
            key = agent
        else:
            node = self._root(record.uuid)
            key = node[:8] if node else f"line{record.number}"
        return self._builder(_agent_session(self.main, key), self.main)

    # -- the second read ---------------------------------------------------------
    def read(self, data: bytes, start: tuple[int, int]) -> Parsed:
        """The turns of one chunk (and the chunks before it) that can no longer change,
        and its bad lines, numbered as in the whole file."""
        parser = self._begin()
        parsed = parser.parsed = Parsed()
        for number, offset, raw, value in self._lines(data, start, parsed.skipped):
            if isinstance(value, Rejected):
                parsed.rejected.append(value)
                continue
            if not isinstance(value, dict):
                parsed.rejected.append(
                    _not_an_object(self.name, number, offset, raw, value, self.main)
                )
                continue
            kind = value.get("type")
            if kind == "user" or kind == "assistant":
                record = _Record(number, offset, raw, value)
                parser.record(self._builder_of(record), record)
                continue
            parsed.skipped[kind if isinstance(kind, str) and kind else "untyped"] += 1
        through = start[0] + data.count(b"\n")  # the last line read whole
        parsed.sessions = [self._ready(builder, through) for builder in self.builders.values()]
        return parsed

    def _ready(self, builder: _Builder, through: int) -> SourceSession:
        """The turns of `builder` up to its first message that a record after line
        `through` may still add to (they leave it; the rest wait)."""
        turns = builder.session.turns
        messages = builder.messages
        cut = len(turns)
        for at, turn in enumerate(turns):
            if (
                turn.parts is not None
                and turn.id is not None
                and messages.get(turn.id) is turn
                and self.spanning.get(hash(turn.id), 0) > through
            ):
                cut = at
                break
        ready, builder.session.turns = turns[:cut], turns[cut:]
        for turn in ready:
            if turn.id is not None and messages.get(turn.id) is turn:
                del messages[turn.id]  # no record of it is left to come
        session = builder.session
        return SourceSession(session.session_id, session.source, ready, session.meta)

    def end(self, reread: Callable[[int, int], bytes]) -> Parsed:
        """The turns still held, and the records rejected for their content, whose
        bytes `reread(offset, length)` reads again from the file."""
        parser = self._begin()
        parsed = parser.parsed = Parsed()
        parsed.sessions = [self._ready(b, sys.maxsize) for b in self.builders.values()]
        for rejected, length in parser.deferred or []:
            assert rejected.offset is not None
            rejected.raw = reread(rejected.offset, length)
            parsed.rejected.append(rejected)
        parser.deferred = []
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
