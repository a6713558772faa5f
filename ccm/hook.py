"""``ccm hook EVENT``: Claude Code's command hooks, so that the model receives ccm's memory.

Claude Code runs ``ccm hook EVENT`` with the hook's JSON on standard input
(``session_id``, ``transcript_path``, ``cwd``, ``hook_event_name``, and per event
``source``, ``prompt``, ``trigger``) and reads what it prints:

* ``SessionStart`` (startup, resume, clear, compact): the transcript is ingested, then the
  critical items, the working state, the manifest and the active efforts of the session
  are given to the model (after a compaction, the latest turns too); a new session in a
  project with earlier sessions is given what those concluded.
* ``UserPromptSubmit``: what the transcript gained is ingested; the ``@...`` memory
  commands the prompt holds are run and the model is told what they did; a prompt that
  asks about the past (the gate `ccm.context.classify` applies) gets the recalled
  exchanges.
* ``PreCompact``: ingested, and answered (plain text: Claude Code passes it to its
  summarizer as instructions) with what its compaction must keep: the critical items word
  for word, the working state and the open efforts.
* ``Stop``, ``SessionEnd``: ingested.

What the model is given goes out as ``hookSpecificOutput.additionalContext``, which
Claude Code caps at 10,000 characters (`LIMIT_CHARS`). A hook must never break or slow
the user's session: on any error it prints nothing, exits 0, and logs the error to
``.ccm/hook.log`` under the knowledge root. The Claude Code session id is the ccm
session id, as ``ccm ingest ~/.claude/projects`` gives it, so the two never diverge.
"""

from __future__ import annotations

import itertools
import json
import logging
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ccm.errors import CCMError, UsageError

if TYPE_CHECKING:  # the store is imported when a hook runs: `ccm install` reads EVENTS
    from ccm.store import Store

log = logging.getLogger("ccm.hook")

EVENTS = ("SessionStart", "UserPromptSubmit", "PreCompact", "Stop", "SessionEnd")
LIMIT_CHARS = 10_000  # what Claude Code keeps of a hook's additionalContext
START_TOKENS = 2000  # the memory a session starts (or resumes) with
RECALL_TOKENS = 1500  # what a prompt about the past recalls
PROJECT_CONCLUSIONS = 12  # of the earlier sessions of a project, at most
UNBOUNDED = 10**9  # a budget nothing exceeds
KEPT = ("critical", "state")  # what the model is given when nothing else fits
LOG_NAME = "hook.log"
DAEMON_WAIT = 2.0  # seconds a daemon has to take a hook's request up
RUN_WAIT = 7.0  # and then to answer it (Claude Code gives a prompt's hook 10 s)
CURSORS = "hooks"  # under .ccm/: where each session's transcript was read to
HEADER = (
    "[ccm memory: what this conversation and earlier ones established. The ccm MCP tools "
    "recall, expand and memory_command give more.]"
)


@dataclass
class Payload:
    """What Claude Code sends a hook (the fields ccm reads)."""

    event: str
    session: str
    transcript: Path | None
    cwd: str | None
    source: str
    prompt: str

    @classmethod
    def parse(cls, event: str, text: str) -> Payload:
        if event not in EVENTS:
            raise UsageError(f"unknown hook event {event!r}", f"use one of {', '.join(EVENTS)}")
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise UsageError(
                f"the hook input is not JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})",
                "Claude Code sends one JSON object on standard input",
            ) from exc
        if not isinstance(data, dict) or not isinstance(data.get("session_id"), str):
            raise UsageError("the hook input has no session_id", "send Claude Code's hook JSON")
        named = data.get("hook_event_name")
        if isinstance(named, str) and named != event:
            raise UsageError(
                f"the hook input is for {named}, not {event}", f"run `ccm hook {named}`"
            )
        transcript = data.get("transcript_path")
        return cls(
            event=event,
            session=_session_id(data["session_id"]),
            transcript=Path(transcript).expanduser() if isinstance(transcript, str) else None,
            cwd=data["cwd"] if isinstance(data.get("cwd"), str) else None,
            source=str(data.get("source") or data.get("trigger") or ""),
            prompt=str(data.get("prompt") or ""),
        )


def _session_id(value: str) -> str:
    """The ccm session of a Claude Code session id (the same id, as its importer gives)."""
    from ccm.store import check_session_id, slug_session_id

    try:
        return check_session_id(value)
    except CCMError:
        return slug_session_id(value)


def answer(store: Store, event: str, text: str) -> str:
    """What ``ccm hook EVENT`` prints for the hook input `text` ("" for nothing)."""
    payload = Payload.parse(event, text)
    _ingest(store, payload)
    if payload.event == "SessionStart":
        return _additional(payload.event, _started(store, payload))
    if payload.event == "UserPromptSubmit":
        return _additional(payload.event, _prompted(store, payload))
    if payload.event == "PreCompact":
        return _compaction(store, payload.session)
    return ""


def run(root: str | None, event: str, text: str) -> str:
    """`answer`, from the root's daemon when one runs (`ask_daemon`), else in this
    process; never raising: an error is logged under the root and nothing printed."""
    from ccm.paths import resolve_root

    asked = ask_daemon(resolve_root(root), event, text)
    if asked is not None:
        return asked
    try:
        from ccm.store import Store

        store = Store(root)
    except Exception as exc:  # a hook must never break the user's session
        _log_error(None, event, exc)
        return ""
    return respond(store, event, text)


def respond(store: Store, event: str, text: str) -> str:
    """`answer`, with an error logged under the root instead of raised."""
    from ccm import tokens

    try:
        tokens.set_method(store.config.tokens_method)
        return answer(store, event, text)
    except Exception as exc:  # a hook must never break the user's session
        _log_error(store, event, exc)
        return ""


def ask_daemon(root: Path, event: str, text: str, wait: float = DAEMON_WAIT) -> str | None:
    """What the daemon of `root` (``ccm watch``) answers, or None when none answers in
    `wait` seconds: it holds every engine in memory and the tokenizer loaded, where a
    process of its own would load them first. A request the daemon has not taken up by
    then is never run by it, so the hook then answers in its own process, once."""
    import socket
    import time

    from ccm.paths import socket_path

    path = socket_path(root)
    if not path.exists():
        return None
    request = {"op": "hook", "event": event, "input": text, "deadline": time.time() + wait}
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
            connection.settimeout(wait + 1.0)
            connection.connect(str(path))
            connection.sendall(json.dumps(request).encode("utf-8") + b"\n")
            reader = connection.makefile("rb")
            reply = json.loads(reader.readline())
            if isinstance(reply, dict) and reply.get("state") == "running":
                connection.settimeout(RUN_WAIT)  # taken up: it answers, however long
                reply = json.loads(reader.readline())
    except (OSError, ValueError):
        return None
    if not isinstance(reply, dict) or not reply.get("ok"):
        return None
    return str(reply.get("output") or "")


def _log_error(store: Store | None, event: str, exc: BaseException) -> None:
    """One JSON line in ``.ccm/hook.log``; where it cannot be written, standard error."""
    from ccm.store import utc_now

    line = {
        "ts": utc_now(),
        "event": event,
        "error": str(exc),
        "type": type(exc).__name__,
    }
    if not isinstance(exc, CCMError):
        line["traceback"] = "".join(traceback.format_exception(exc))
    try:
        if store is None:
            raise OSError("no knowledge root")
        store.cache.mkdir(parents=True, exist_ok=True)
        with open(store.cache / LOG_NAME, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(line, ensure_ascii=False) + "\n")
    except Exception:  # nowhere to write it: say it where Claude Code's debug log shows it
        log.error("ccm hook %s: %s", event, exc)


def _ingest(store: Store, payload: Payload) -> None:
    """Bring the session up to date with its transcript, reading only what it gained.

    Where the transcript was read to is kept in ``.ccm/hooks/<session>.json``: its
    inode, the size read, and where the next read starts (`_resume_point`: records that
    belong together, a tool's call and its result, are always parsed together). The
    turns already stored are skipped (ingest is idempotent). A transcript replaced or
    cut short is read whole again; one not written yet is no error."""
    from ccm.ingest.pipeline import ingest_data
    from ccm.store import atomic_write

    path = payload.transcript
    if path is None:
        return
    try:
        st = path.stat()
    except OSError:
        return
    cursor_file = store.cache / CURSORS / f"{payload.session}.json"
    saved = _read_cursor(cursor_file)
    start = line = 0
    if (
        saved.get("path") == str(path)
        and saved.get("inode") == st.st_ino
        and int(saved.get("size", -1)) <= st.st_size
        and store.raw_path(payload.session).is_file()
    ):
        if saved["size"] == st.st_size:
            return  # nothing new
        start, line = int(saved["resume"]), int(saved["line"])
    with open(path, "rb") as handle:
        handle.seek(start)
        data = handle.read(st.st_size - start)
    data = data[: data.rfind(b"\n") + 1]  # whole lines: Claude Code may be writing one
    if not data:
        return
    recent = 2 * data.count(b"\n") + 64 if start else None
    report = ingest_data(store, data, path.name, "claude-code", None, recent, (line, start))
    if report.errors:
        raise CCMError("; ".join(report.errors))
    at = _resume_point(data)
    cursor = {
        "path": str(path),
        "inode": st.st_ino,
        "size": start + len(data),
        "resume": start + at,
        "line": line + data.count(b"\n", 0, at),
    }
    atomic_write(cursor_file, json.dumps(cursor).encode("utf-8"), durable=False)


def _read_cursor(path: Path) -> dict[str, Any]:
    """The cursor kept for a transcript; {} when there is none, or a damaged one (the
    transcript is then read whole)."""
    from ccm.store import read_json

    found = read_json(path) or {}
    return found if all(k in found for k in ("path", "inode", "size", "resume", "line")) else {}


def _resume_point(data: bytes) -> int:
    """Where in `data` (whole JSON lines of a Claude Code transcript, read from a point
    where nothing was pending) the next read may start: the last record before which
    every tool call has its result and that does not go on with the assistant message
    of the record before it. The records after it are parsed together again, so a
    tool's result is read with its call and a message split over several records is
    read whole. 0 when there is no such record but the first."""
    pending: set[str] = set()
    at = position = 0
    previous: Any = None
    for raw in data.splitlines(keepends=True):
        try:
            record = json.loads(raw)
        except ValueError:
            record = None
        message = record.get("message") if isinstance(record, dict) else None
        message = message if isinstance(message, dict) else {}
        if not pending and (message.get("id") is None or message.get("id") != previous):
            at = position
        previous = message.get("id")
        content = message.get("content")
        for block in content if isinstance(content, list) else []:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_use" and isinstance(block.get("id"), str):
                pending.add(block["id"])
            elif block.get("type") == "tool_result":
                pending.discard(str(block.get("tool_use_id")))
        position += len(raw)
    return at


def _has(store: Store, session: str) -> bool:
    return store.raw_path(session).is_file()


def _started(store: Store, payload: Payload) -> str:
    parts = []
    if _has(store, payload.session):
        tail = payload.source == "compact"  # the conversation itself was just summarized
        parts.append(_blocks(store, payload.session, START_TOKENS, tail))
    if payload.source in ("startup", "clear", "") and payload.cwd:
        parts.append(_project(store, payload.session, payload.cwd))
    return "\n\n".join(p for p in parts if p)


def _prompted(store: Store, payload: Payload) -> str:
    from ccm import memory
    from ccm.context import classify, recalled
    from ccm.engine.commands import parse

    if not payload.prompt.strip() or not _has(store, payload.session):
        return ""
    parts = []
    if parse(payload.prompt):
        outcomes = memory.apply(store, payload.session, payload.prompt, who="user")
        lines = [f"- {o.message}" if o.ok else f"- not done: {o.message}" for o in outcomes]
        parts.append("## Memory commands ccm ran\n" + "\n".join(lines))
    kind, _ = classify(payload.prompt)
    if kind == "recall":
        parts.append(recalled(store, payload.session, RECALL_TOKENS, payload.prompt).text())
    return "\n\n".join(p for p in parts if p)


def _blocks(store: Store, session: str, budget: int, tail: bool = False) -> str:
    """The context's blocks for `session` with no query: all but the latest turns,
    which Claude Code holds itself, unless `tail`. Critical items and a working state
    too long for `budget` are given alone (cut to what Claude Code keeps)."""
    from ccm.context import assemble

    try:
        blocks = assemble(store, session, budget).blocks
    except UsageError:  # more critical items than the budget: those first, whole
        blocks = [b for b in assemble(store, session, UNBOUNDED).blocks if b.name in KEPT]
    chosen = [b for b in blocks if tail or b.name != "tail"]
    return "\n\n".join(t for t in (b.text() for b in chosen) if t)


def _project(store: Store, session: str, cwd: str) -> str:
    """What the earlier sessions in the folder `cwd` concluded (newest first), for a
    session that starts there."""
    lines = [
        f"- {' '.join(str(text).split())} ({name}, {segment})"
        for name, segment, text in itertools.islice(
            _conclusions(store, _earlier(store, session, cwd)), PROJECT_CONCLUSIONS
        )
    ]
    return "## Concluded in earlier sessions here\n" + "\n".join(lines) if lines else ""


def _earlier(store: Store, session: str, cwd: str) -> list[str]:
    """The other sessions begun in the folder `cwd` (their first turn says where), the
    most recently written first."""
    found = []
    for name in store.sessions():
        if name == session or "~agent-" in name:
            continue
        raw = store.raw_path(name)
        try:
            with open(raw, "rb") as handle:
                first = json.loads(handle.readline() or b"{}")
            if (first.get("meta") or {}).get("cwd") == cwd:
                found.append((raw.stat().st_mtime, name))
        except (OSError, ValueError, AttributeError):
            continue
    return [name for _, name in sorted(found, reverse=True)]


def _conclusions(store: Store, sessions: list[str]) -> Iterator[tuple[str, str, str]]:
    """(session, segment, text) of each conclusion in force, the latest of a session
    first."""
    for name in sessions:
        try:
            manifest = store.read_derived(name, "manifest.yaml", "manifest") or {}
        except CCMError:
            continue
        for segment in reversed(manifest.get("segments") or []):
            conclusion = segment.get("conclusion") or {}
            if segment.get("status") == "concluded" and not conclusion.get("superseded_by"):
                yield name, segment["id"], conclusion["text"]


def _additional(event: str, text: str) -> str:
    """The JSON Claude Code reads a hook's context from, or "" when there is none."""
    if not text.strip():
        return ""
    body = _within_limit(f"{HEADER}\n\n{text}")
    output = {"hookSpecificOutput": {"hookEventName": event, "additionalContext": body}}
    return json.dumps(output, ensure_ascii=False)


def _within_limit(text: str) -> str:
    """`text` as Claude Code keeps it whole: cut at a line to `LIMIT_CHARS`, saying so."""
    if len(text) <= LIMIT_CHARS:
        return text
    cut = text.rfind("\n", 0, LIMIT_CHARS - 2)
    return text[: cut if cut > 0 else LIMIT_CHARS - 2] + "\n\u2026"


def _compaction(store: Store, session: str) -> str:
    """Instructions for Claude Code's own compaction: keep what ccm knows matters."""
    if not _has(store, session):
        return ""
    kept = _blocks(store, session, START_TOKENS)
    if not kept:
        return ""
    return _within_limit(
        "When you summarize this conversation, keep the critical items below word for "
        "word, keep the current task, the next step and any blockers of the working state, "
        "and say which efforts are still open.\n\n" + kept
    )
