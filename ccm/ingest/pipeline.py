"""`ccm ingest`: read inputs, recognise their format, append new turns to the store.

Ingest is idempotent. Under the session's lock it reads what the session already
holds and appends only what is new: a turn with a source id is new when the id is
unknown (or, for a merged Claude Code message, when it brings records not seen
before); a turn without one is new when it is the k-th occurrence of its role and
content in the input and the session holds fewer than k such turns. So importing the
same input twice adds nothing, and importing a longer version of a session appends
only the new turns.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ccm import schemas
from ccm.errors import CCMError, FormatError, UsageError
from ccm.executors import Executor, run_map, where
from ccm.ingest.jsonl import default_session
from ccm.ingest.model import Notice, Parsed, ParseOptions, Rejected, SourceSession, SourceTurn
from ccm.store import BadLine, Store, check_session_id, slug_session_id, utc_now

FORMATS = ("jsonl", "claude-code", "chatgpt", "anthropic", "locomo")
FORMAT_HINT = "pass --format jsonl, claude-code, chatgpt, anthropic or locomo"
_CLAUDE_TYPES = {
    "user",
    "assistant",
    "summary",
    "system",
    "file-history-snapshot",
    "progress",
    "queue-operation",
    "attachment",
}

Importer = Callable[[bytes, str, ParseOptions], Parsed]


def importer(fmt: str) -> Importer:
    """The parse function of format `fmt` (imported only when needed)."""
    if fmt == "jsonl":
        from ccm.ingest import jsonl

        return jsonl.parse
    if fmt == "claude-code":
        from ccm.ingest import claude_code

        return claude_code.parse
    if fmt == "chatgpt":
        from ccm.ingest import chatgpt

        return chatgpt.parse
    if fmt == "anthropic":
        from ccm.ingest import anthropic

        return anthropic.parse
    if fmt == "locomo":
        from ccm.ingest import locomo

        return locomo.parse
    raise UsageError(f"unknown format {fmt!r}", FORMAT_HINT)


# ---------------------------------------------------------------------------
# format detection


def _json_kind(value: Any) -> str | None:
    items = value if isinstance(value, list) else [value]
    first = next((item for item in items if isinstance(item, dict)), None)
    if first is None:
        return None
    if "mapping" in first:
        return "chatgpt"
    if isinstance(first.get("conversation"), dict) and "sample_id" in first:
        return "locomo"
    if isinstance(first.get("messages"), list) or (
        first.get("type") == "message" and "content" in first
    ):
        return "anthropic"
    if not isinstance(value, list) and "role" in first and "content" in first:
        return "jsonl"
    return None


def _line_kind(value: Any) -> str | None:
    if not isinstance(value, dict):
        return None
    kind = value.get("type")
    # a bare {"type": "user"} could be anything; Claude Code's own bookkeeping records
    # (snapshots, progress) are unmistakable even without ids
    if (
        isinstance(kind, str)
        and kind in _CLAUDE_TYPES
        and (
            kind not in ("user", "assistant")
            or {"uuid", "sessionId", "message", "leafUuid"} & value.keys()
        )
    ):
        return "claude-code"
    if "role" in value and "content" in value:
        return "jsonl"
    if "type" not in value and ("role" in value or "content" in value):
        return "jsonl"  # a message missing a key: the importer says which
    return None


def detect_format(data: bytes, name: str) -> str | None:
    """Recognise an input by its content; None for an empty input (nothing to import);
    raise `FormatError` when it is none of ours, saying what it is instead."""
    from ccm.ingest.lines import first_lines, without_bom

    data = without_bom(data)
    if not data.strip():
        return None
    if data.startswith(b"PK\x03\x04"):
        return "chatgpt"
    document: Any = None
    if data.lstrip()[:1] in (b"[", b"{"):
        try:
            document = json.loads(data.decode("utf-8"))
        except (ValueError, RecursionError):
            document = None
        kind = _json_kind(document)
        if kind:
            return kind
        if document == []:
            return None  # an export without conversations
    problem = None  # what the lines are instead, when none is JSON
    for raw in first_lines(data, 50):
        try:
            kind = _line_kind(json.loads(raw.decode("utf-8")))
        except UnicodeDecodeError:
            problem = problem or "not UTF-8 text"
            continue
        except RecursionError:
            problem = problem or "JSON nested too deeply"
            continue
        except ValueError:
            problem = problem or "not JSON"
            continue
        if kind:
            return kind
        problem = "no line in it is a message or a Claude Code record"
    raise _unknown(name, document, problem)


def _unknown(name: str, document: Any, problem: str | None) -> FormatError:
    """Why an input is none of the formats, as the error to raise."""
    items = document if isinstance(document, list) else []
    if any(isinstance(item, dict) and ("role" in item or "content" in item) for item in items):
        return FormatError(
            f"{name}: a JSON array of messages, not JSON lines",
            'put each message on a line of its own, as {"role": ..., "content": ...}',
        )
    if isinstance(document, dict | list):
        shape = "object" if isinstance(document, dict) else "array"
        problem = f"a JSON {shape} in none of the formats ccm reads"
    return FormatError(f"{name}: cannot tell what format this is: {problem}", FORMAT_HINT)


# ---------------------------------------------------------------------------
# inputs


@dataclass(frozen=True)
class Input:
    name: str  # as shown in messages: the path, or '-'
    path: Path | None  # None: standard input
    size: int


def expand_inputs(paths: Iterable[str | Input]) -> list[Input]:
    """Files to read: a directory stands for the transcripts and exports inside it (an
    `Input`, already expanded, stands for itself)."""
    inputs: list[Input] = []
    for given in paths:
        if isinstance(given, Input):
            inputs.append(given)
        elif given == "-":
            inputs.append(Input("-", None, 0))
        elif (path := Path(given)).is_dir():
            found = sorted(
                p
                for p in path.rglob("*")
                if p.is_file()
                and (
                    (p.suffix == ".jsonl" and p.name != "history.jsonl")
                    or (p.suffix == ".json" and _chatgpt_export(p))
                    or (p.suffix == ".zip")
                )
            )
            if not found:
                raise UsageError(
                    f"{given}: nothing to import inside: no .jsonl transcripts, and no "
                    ".json or .zip file holding a ChatGPT export",
                    "point at a Claude Code projects folder, a session file or a ChatGPT "
                    "export; a file of another format is imported by its own path",
                )
            inputs.extend(Input(str(p), p, p.stat().st_size) for p in found)
        elif path.is_file():
            inputs.append(Input(given, path, path.stat().st_size))
        else:
            raise UsageError(
                f"{given}: no such file or directory",
                "check the path; pass - to read standard input",
            )
    return inputs


def _chatgpt_export(path: Path) -> bool:
    """Whether a .json file is a ChatGPT export: by its name, else by its content."""
    from ccm.ingest.chatgpt import looks_like_export

    return path.name.startswith("conversations") or looks_like_export(path)


# ---------------------------------------------------------------------------
# the report


@dataclass
class SessionResult:
    session: str
    source: str
    added: int = 0
    duplicates: int = 0
    first_turn: int | None = None
    last_turn: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "session": self.session,
            "source": self.source,
            "added": self.added,
            "duplicates": self.duplicates,
            "first_turn": self.first_turn,
            "last_turn": self.last_turn,
        }


@dataclass
class IngestReport:
    inputs: int = 0
    sessions: dict[str, SessionResult] = field(default_factory=dict)
    skipped: Counter[str] = field(default_factory=Counter)
    rejected: list[Rejected] = field(default_factory=list)
    warnings: list[Notice] = field(default_factory=list)  # imported, but changed or left
    errors: list[str] = field(default_factory=list)  # inputs that could not be read at all
    derived: list[str] = field(default_factory=list)  # sessions whose tiers were updated

    @property
    def turns_added(self) -> int:
        return sum(s.added for s in self.sessions.values())

    @property
    def duplicates(self) -> int:
        return sum(s.duplicates for s in self.sessions.values())

    @property
    def ok(self) -> bool:
        return not self.rejected and not self.errors

    def as_dict(self) -> dict[str, Any]:
        return {
            "inputs": self.inputs,
            "sessions": [s.as_dict() for s in self.sessions.values()],
            "turns_added": self.turns_added,
            "duplicates": self.duplicates,
            "skipped": dict(sorted(self.skipped.items())),
            "rejected": [
                {
                    "source": r.source,
                    "line": r.line,
                    "error": r.error,
                    "hint": r.hint,
                    "session": r.session,
                }
                for r in self.rejected
            ],
            "warnings": [
                {"source": w.source, "line": w.line, "message": w.message, "hint": w.hint}
                for w in self.warnings
            ],
            "errors": self.errors,
            "derived": self.derived,
        }


# ---------------------------------------------------------------------------
# appending


def content_key(role: str, content: str) -> bytes:
    """A turn's role and content as a short digest: how a turn without an id is known."""
    digest = hashlib.blake2b(role.encode() + b"\0", digest_size=16)
    digest.update(content.encode("utf-8", "surrogatepass"))
    return digest.digest()


@dataclass
class _Known:
    last_turn: int = 0
    ids: set[str] = field(default_factory=set)
    parts: set[str] = field(default_factory=set)
    contents: Counter[bytes] = field(default_factory=Counter)


def _known_lines(entries: Iterable[dict[str, Any] | None], want_contents: bool) -> _Known:
    """What the stored `entries` (None: a bad line) say of the turns they hold."""
    known = _Known()
    for entry in entries:
        if entry is None:
            continue
        known.last_turn = max(known.last_turn, entry["turn"])
        turn_id = entry.get("id")
        if turn_id:
            known.ids.add(turn_id)
        elif want_contents:
            known.contents[content_key(entry["role"], entry["content"])] += 1
        parts = (entry.get("meta") or {}).get("parts")
        if isinstance(parts, list):
            known.parts.update(p for p in parts if isinstance(p, str))
    return known


def _new_turns(
    session: SourceSession, known: _Known, occurrences: Counter[bytes] | None = None
) -> tuple[list[SourceTurn], int]:
    """The turns of `session` that the store does not hold yet, and the duplicates count;
    `occurrences`: how often each turn without an id came in the input so far (an input
    read a chunk at a time carries them from one chunk to the next)."""
    if not known.last_turn and not known.ids and not known.contents:
        # an empty session: only duplicates inside the input itself can be dropped
        ids = [t.id for t in session.turns if t.id is not None]
        if len(ids) == len(set(ids)):
            return list(session.turns), 0
    fresh: list[SourceTurn] = []
    duplicates = 0
    occurrences = Counter() if occurrences is None else occurrences
    for turn in session.turns:
        if turn.id is None:
            key = content_key(turn.role, turn.content)
            if key in known.contents:  # (only those the store holds are counted)
                occurrences[key] += 1
                if occurrences[key] <= known.contents[key]:
                    duplicates += 1
                    continue
            fresh.append(turn)
            continue
        if turn.id not in known.ids:
            known.ids.add(turn.id)
            if turn.parts:
                known.parts.update(p.id for p in turn.parts)
            fresh.append(turn)
            continue
        new_parts = [p for p in turn.parts or [] if p.id not in known.parts]
        if not new_parts:
            duplicates += 1
            continue
        # the same message, with records that were not written at the last import
        known.parts.update(p.id for p in new_parts)
        continuation = SourceTurn(
            turn.role,
            "\n".join(p.text for p in new_parts),
            ts=turn.ts,
            id=f"{turn.id}+{new_parts[0].id}",
            parts=new_parts,
            tool=turn.tool,
            meta={**turn.meta, "continues": turn.id},
        )
        known.ids.add(str(continuation.id))
        fresh.append(continuation)
    return fresh, duplicates


def unseen(entries: Iterable[dict[str, Any] | None], turns: list[SourceTurn]) -> list[SourceTurn]:
    """The turns of `turns` that a session holding `entries` does not hold yet, told apart
    as an import tells them (by id, else the k-th occurrence of role and content)."""
    fresh, _ = _new_turns(SourceSession("", "", list(turns)), _known_lines(entries, True))
    return fresh


def entry(turn: SourceTurn, number: int, source: str, now: str) -> dict[str, Any]:
    """The raw.jsonl line of `turn` as turn `number` of its session."""
    entry: dict[str, Any] = {
        "turn": number,
        "role": turn.role,
        "content": turn.content,
        "ts": turn.ts or now,
    }
    if turn.id is not None:
        entry["id"] = turn.id
    entry["source"] = source
    if turn.tool:
        entry["tool"] = turn.tool
    meta = dict(turn.meta)
    if turn.parts:
        meta["parts"] = [p.id for p in turn.parts]
    if meta:
        entry["meta"] = meta
    return entry


@dataclass
class _Carried:
    """What the chunks of one input read a chunk at a time share, per session: what the
    store held before the input (`known`, its last turn kept current), and how often
    each turn without an id came in the chunks so far."""

    known: _Known
    occurrences: Counter[bytes] = field(default_factory=Counter)


def append_session(
    store: Store,
    session: SourceSession,
    now: str,
    recent: int | None = None,
    carried: dict[str, _Carried] | None = None,
) -> SessionResult:
    """Append the new turns of `session`; returns what was added. With `recent`, its
    turns can only be among the last `recent` of the stored session (see
    `ingest_data`). With `carried`, `session` is a chunk of an input read a chunk at a
    time: its turns are told apart from what the store held before the input and from
    the chunks before it, as they would be were the input read whole."""
    session_id = check_session_id(session.session_id)
    result = SessionResult(session_id, session.source)
    if not session.turns:
        return result
    validate = schemas.validator("raw_entry")
    with store.lock_raw(session_id) as raw:
        held = carried.get(session_id) if carried is not None else None
        if held is not None:
            known = held.known
            last = raw.last_record()  # another writer may have appended since
            known.last_turn = max(known.last_turn, int(last["turn"]) if last else 0)
        else:
            # (a later chunk may hold turns without an id: their like are counted now)
            anonymous = carried is not None or any(t.id is None for t in session.turns)
            if recent is not None and not anonymous:
                known = _known_lines(store.tail_turns(session_id, recent), False)
            else:
                known = _known_lines((line.record for line in raw.lines()), anonymous)
            if carried is not None:
                held = carried[session_id] = _Carried(known)
        fresh, result.duplicates = _new_turns(
            session, known, held.occurrences if held is not None else None
        )
        if held is not None:  # the next chunk knows these (`_new_turns` may not add them)
            known.ids.update(str(t.id) for t in fresh if t.id is not None)
            known.parts.update(p.id for t in fresh for p in t.parts or [])
        entries = []
        number = known.last_turn
        for turn in fresh:
            number += 1
            record = entry(turn, number, session.source, now)
            if number == 1 and session.meta:
                record["meta"] = {**session.meta, **record.get("meta", {})}
            validate(record)
            entries.append(record)
        raw.append(entries, fsync=store.config.fsync)
        known.last_turn = number
    result.added = len(entries)
    if entries:
        result.first_turn = entries[0]["turn"]
        result.last_turn = entries[-1]["turn"]
    return result


def quarantine_rejected(store: Store, rejected: list[Rejected], fallback: str) -> None:
    """Keep what an importer rejected in its session's quarantine (`fallback` for what
    names none), verbatim."""
    by_session: dict[str, list[BadLine]] = {}
    for item in rejected:
        session = item.session or fallback
        try:
            check_session_id(session)
        except CCMError:
            session = slug_session_id(session)
        item.session = session
        by_session.setdefault(session, []).append(
            BadLine(item.source, item.line, item.offset, item.error, item.raw, item.hint)
        )
    for session, lines in by_session.items():
        store.quarantine(session, lines)


CHUNK_BYTES = 16 * 1024 * 1024  # inputs longer than this are read a chunk at a time
HEAD_BYTES = 1024 * 1024  # what of such an input tells its format (its first lines)
STREAMED = ("jsonl", "claude-code")  # the formats read a chunk at a time


def _streamed_format(path: Path, fmt: str) -> str | None:
    """The format of the input at `path` when it is one read a chunk at a time, holding
    a chunk of it, not the file (plain JSON Lines or a Claude Code transcript, given or
    found in its first lines); None when it is read whole. A first line longer than
    `HEAD_BYTES` tells nothing, and the input is read whole."""
    if fmt != "auto":
        return fmt if fmt in STREAMED else None
    with path.open("rb") as handle:
        head = handle.read(HEAD_BYTES)
    head = head[: head.rfind(b"\n") + 1] or head
    try:
        kind = detect_format(head, str(path))
    except FormatError:  # a whole JSON document, say: read whole, as any other
        return None
    return kind if kind in STREAMED else None


def _chunks(path: Path, limit: int | None = None) -> Iterator[tuple[bytes, tuple[int, int]]]:
    """The input at `path` (its first `limit` bytes) in pieces of about `CHUNK_BYTES`
    that end at a line end (the last may not), each with the line and byte offset it
    starts at. The same bytes give the same pieces, which a transcript read twice
    (`claude_code.Stream`) relies on."""
    lines = offset = 0
    rest = b""
    left = limit  # bytes still to read, if limited
    with path.open("rb") as handle:
        while block := handle.read(CHUNK_BYTES if left is None else min(left, CHUNK_BYTES)):
            if left is not None:
                left -= len(block)
            data = rest + block
            cut = data.rfind(b"\n") + 1
            if cut == 0:  # a line longer than a chunk: read on (its importer caps it)
                rest = data
                continue
            chunk, rest = data[:cut], data[cut:]
            yield chunk, (lines, offset)
            lines += chunk.count(b"\n")
            offset += len(chunk)
    if rest:
        yield rest, (lines, offset)


def _ingest_transcript(
    store: Store,
    report: IngestReport,
    path: Path,
    name: str,
    options: ParseOptions,
    now: str,
    progress: Callable[[int], None] | None = None,
) -> None:
    """Import a Claude Code transcript too large to hold, as a whole read would, holding
    a chunk of it, not the file: read it a chunk at a time once for the facts its
    turns depend on (`claude_code.Stream`), then again for the turns, appending after
    each chunk those that can no longer change. The second read stops where the first
    did, should Claude Code be appending to the file meanwhile."""
    from ccm.ingest.claude_code import Stream
    from ccm.ingest.lines import UTF8_HINT, wide_encoding

    stream = Stream(name, options)
    size = 0
    for data, start in _chunks(path):
        if start[1] == 0 and (wide := wide_encoding(data)) is not None:
            report.errors.append(str(FormatError(f"{name}: {wide} text, not UTF-8", UTF8_HINT)))
            if progress is not None:
                progress(path.stat().st_size)
            return
        stream.survey(data, start)
        size = start[1] + len(data)
        if progress is not None:  # half of each chunk's bytes in each read
            progress(len(data) // 2)
    carried: dict[str, _Carried] = {}
    for data, start in _chunks(path, size):
        _append(store, report, stream.read(data, start), name, options, now, carried=carried)
        if progress is not None:
            progress(len(data) - len(data) // 2)
    with path.open("rb") as handle:

        def reread(offset: int, length: int) -> bytes:
            handle.seek(offset)
            return handle.read(length)

        _append(store, report, stream.end(reread), name, options, now, carried=carried)


def _read(item: Input) -> bytes:
    if item.path is None:
        return sys.stdin.buffer.read()
    return item.path.read_bytes()


def ingest(
    store: Store,
    paths: Iterable[str | Input],
    fmt: str = "auto",
    session: str | None = None,
    include_thinking: bool | None = None,
    progress: Callable[[int], None] | None = None,
    derive: bool = False,
    executor: Executor | None = None,
) -> IngestReport:
    """Import every input in `paths` (paths, or inputs `expand_inputs` found) into
    `store`; see the module docstring.

    With `derive`, the tiers (manifest, open, working) of every session that gained
    turns are brought up to date afterwards, incrementally. `executor`: where the
    inputs are parsed and the tiers derived (`ccm.executors`); the turns are appended
    and the index updated here.
    """
    if fmt != "auto" and fmt not in FORMATS:
        raise UsageError(f"unknown format {fmt!r}", FORMAT_HINT)
    if session is not None:
        check_session_id(session)
    inputs = expand_inputs(paths)
    options = parse_options(store, session, include_thinking)
    store.chats.mkdir(parents=True, exist_ok=True)
    now = utc_now()
    report = IngestReport(inputs=len(inputs))
    streamed = [
        _streamed_format(item.path, fmt)
        if item.path is not None and item.size > CHUNK_BYTES
        else None
        for item in inputs
    ]
    # elsewhere, the whole inputs are parsed by the map's tasks, then appended here in
    # their order (a session's turns are numbered as one process would number them)
    mapped = [
        at
        for at, item in enumerate(inputs)
        if executor is not None and executor.remote and item.path is not None and not streamed[at]
    ]
    parsed: dict[int, Parsed | str | None] = {}
    if len(mapped) > 1:
        calls = [(str(inputs[at].path), inputs[at].name, fmt, options) for at in mapped]
        sizes = [inputs[at].size for at in mapped]
        parsed = dict(
            zip(mapped, run_map(parse_file, calls, executor, progress, sizes), strict=True)
        )
    for at, item in enumerate(inputs):
        if at in parsed:
            _append(store, report, parsed[at], item.name, options, now)
            continue
        if streamed[at] == "claude-code":
            assert item.path is not None
            _ingest_transcript(store, report, item.path, item.name, options, now, progress)
            continue
        if streamed[at] == "jsonl":
            assert item.path is not None
            carried: dict[str, _Carried] = {}
            for data, start in _chunks(item.path):
                _ingest_input(
                    store, report, data, item.name, "jsonl", options, now, None, start, carried
                )
                if progress is not None:
                    progress(len(data))
            continue
        data = _read(item)
        _ingest_input(store, report, data, item.name, fmt, options, now)
        if progress is not None:
            progress(item.size or len(data))
    if derive:
        _derive(store, report, executor)
    return report


def parse_options(
    store: Store, session: str | None = None, include_thinking: bool | None = None
) -> ParseOptions:
    """How the importers read an input into `session`, as the root's config says
    (`include_thinking`, when given, in place of the configured one)."""
    config = store.config
    return ParseOptions(
        session=session,
        include_thinking=config.include_thinking if include_thinking is None else include_thinking,
        max_line_bytes=config.max_line_bytes,
    )


def ingest_data(
    store: Store,
    data: bytes,
    name: str,
    fmt: str,
    session: str | None = None,
    recent: int | None = None,
    start: tuple[int, int] = (0, 0),
) -> IngestReport:
    """`ingest` of one input already read (`name` says where from), with the tiers of
    the sessions that gained turns brought up to date. `start`: the line and byte
    offset in the input that `data` begins at, for the reports of bad lines.

    With `recent`, `data` is known to be the end of an input the store already holds
    all but the end of (a transcript read again from where no tool call was pending):
    a turn of it can only be among the last `recent` turns of its session, so only
    those are read to tell which turns are new, not the whole session. Turns without a
    source id are told apart by counting them over the whole session, so with any of
    those every turn is read anyway."""
    options = parse_options(store, session)
    store.chats.mkdir(parents=True, exist_ok=True)
    report = IngestReport(inputs=1)
    _ingest_input(store, report, data, name, fmt, options, utc_now(), recent, start)
    _derive(store, report)
    return report


def _ingest_input(
    store: Store,
    report: IngestReport,
    data: bytes,
    name: str,
    fmt: str,
    options: ParseOptions,
    now: str,
    recent: int | None = None,
    start: tuple[int, int] = (0, 0),
    carried: dict[str, _Carried] | None = None,
) -> None:
    """Parse one input (or, with `carried`, one chunk of an input read a chunk at a
    time) and append its new turns, adding what happened to `report`."""
    parsed = _parse(data, name, fmt, options)
    _append(store, report, parsed, name, options, now, recent, start, carried)


def parse_file(path: str, name: str, fmt: str, options: ParseOptions) -> Parsed | str | None:
    """An input file read and parsed (`_parse`): a task of the map of ``ccm ingest``
    over many inputs (`ccm.executors`), whose appends run where the command does."""
    return _parse(Path(path).read_bytes(), name, fmt, options)


def _parse(data: bytes, name: str, fmt: str, options: ParseOptions) -> Parsed | str | None:
    """What an importer found in one input; the error that says why it cannot be read
    as a whole; or None for an empty input."""
    from ccm.ingest.lines import UTF8_HINT, wide_encoding

    try:
        wide = wide_encoding(data)
        if wide is not None:  # whatever the format: every importer reads UTF-8
            raise FormatError(f"{name}: {wide} text, not UTF-8", UTF8_HINT)
        kind = fmt if fmt != "auto" else detect_format(data, name)
        if kind is None:
            return None
        return importer(kind)(data, name, options)
    except FormatError as exc:
        return str(exc)


def _append(
    store: Store,
    report: IngestReport,
    parsed: Parsed | str | None,
    name: str,
    options: ParseOptions,
    now: str,
    recent: int | None = None,
    start: tuple[int, int] = (0, 0),
    carried: dict[str, _Carried] | None = None,
) -> None:
    """Append the new turns of one parsed input (see `_parse`) and add what happened
    to `report`."""
    if parsed is None:
        report.skipped["empty_input"] += 1
        return
    if isinstance(parsed, str):
        report.errors.append(parsed)
        return
    for found in parsed.sessions:
        result = append_session(store, found, now, recent, carried)
        if result.session in report.sessions:
            previous = report.sessions[result.session]
            previous.added += result.added
            previous.duplicates += result.duplicates
            previous.first_turn = previous.first_turn or result.first_turn
            previous.last_turn = result.last_turn or previous.last_turn
        else:
            report.sessions[result.session] = result
    report.skipped.update(parsed.skipped)
    for bad in parsed.rejected:  # where in the whole input
        bad.line = None if bad.line is None else bad.line + start[0]
        bad.offset = None if bad.offset is None else bad.offset + start[1]
    for notice in parsed.warnings:
        notice.line = None if notice.line is None else notice.line + start[0]
    report.warnings.extend(parsed.warnings)
    if parsed.rejected:
        quarantine_rejected(
            store, parsed.rejected, options.session or default_session(name, "stdin")
        )
        report.rejected.extend(parsed.rejected)


def _derive(store: Store, report: IngestReport, executor: Executor | None = None) -> None:
    """Bring the tiers (manifest, open, working) and the index of every session that
    gained turns up to date, incrementally: the tiers where `executor` says, the index
    here."""
    from ccm import derive as derive_tiers
    from ccm.index import Index

    chosen = []
    for result in report.sessions.values():
        folder = store.session_dir(result.session)
        if not (folder / "raw.jsonl").exists():
            continue  # nothing was ever imported into it
        if result.added or derive_tiers.behind(store, result.session):
            chosen.append(result.session)
    if not chosen:
        return
    calls = [(where(store, executor), session) for session in chosen]
    folded = run_map(derive_tiers.folded, calls, executor)
    index = Index(store)
    for session, item in zip(chosen, folded, strict=True):
        index.update(session, item["manifest"])
        report.derived.append(session)
    index.close()
