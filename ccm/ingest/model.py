"""What an importer produces: pure values, no disk access.

An importer is a function ``parse(data: bytes, name: str, options: ParseOptions) ->
Parsed``. It turns the bytes of one input (a file, or stdin) into sessions of
`SourceTurn`, counts what it skipped on purpose, and lists what it had to reject.
It never raises on bad content: a broken line or record becomes a `Rejected` entry
(kept verbatim in the session's quarantine by the caller); only an input that cannot
be read as that format at all raises `ccm.errors.FormatError`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ccm import patterns
from ccm.store import located


@dataclass(frozen=True)
class ParseOptions:
    """Choices that change what an importer produces."""

    session: str | None = None  # forced session id (--session)
    include_thinking: bool = False  # keep thinking blocks as text
    max_line_bytes: int = 16 * 1024 * 1024  # longer lines are rejected


@dataclass(frozen=True)
class Part:
    """One source record merged into a turn (Claude Code writes a record per block)."""

    id: str
    text: str


@dataclass
class SourceTurn:
    """A turn as read from a source, before ccm numbers it.

    `id` makes re-import idempotent; without one, the turn is recognised by its role
    and content (the k-th identical turn of an input matches the k-th stored one).
    `parts` lists the source records merged into the turn: when a later import of the
    same message brings records that were not there before (a transcript read while
    it was being written), only those are appended, as a continuation turn.
    """

    role: str  # user | assistant | system | tool
    content: str
    ts: str | None = None  # ISO-8601 UTC; None: the time of the ingest
    id: str | None = None
    parts: list[Part] | None = None
    tool: dict[str, str] | None = None  # {"name": ..., "id": ...}
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class SourceSession:
    """The turns of one session found in an input."""

    session_id: str
    source: str  # jsonl | claude-code | chatgpt | anthropic
    turns: list[SourceTurn] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)  # title, parent_session, ...


@dataclass
class Rejected:
    """Input that could not be accepted, with where it was and how to fix it."""

    source: str  # file path, or '-' for stdin
    line: int | None  # 1-based line in the input, when line-based
    error: str
    hint: str | None
    raw: bytes
    session: str | None = None  # the session whose quarantine keeps it
    offset: int | None = None

    def describe(self) -> str:
        return located(self.source, self.line, self.error, self.hint)


@dataclass
class Notice:
    """Something an importer accepted but changed or left for later, said with where it
    was and what to do about it (a warning: the input still imports)."""

    source: str  # file path, or '-' for stdin
    line: int | None  # 1-based line in the input, when line-based
    message: str
    hint: str | None = None

    def describe(self) -> str:
        return located(self.source, self.line, self.message, self.hint)


@dataclass
class Parsed:
    """Everything an importer found in one input."""

    sessions: list[SourceSession] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)
    rejected: list[Rejected] = field(default_factory=list)
    warnings: list[Notice] = field(default_factory=list)


_CANONICAL = patterns.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z")


def epoch_to_iso(seconds: float) -> str:
    """Epoch seconds as ISO-8601 UTC with milliseconds and a ``Z``."""
    moment = datetime.fromtimestamp(seconds, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def normalise_ts(value: Any) -> str | None:
    """An ISO-8601 string or epoch number as ISO-8601 UTC; None when unusable."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        try:
            seconds = float(value)
            if seconds > 1e11:  # milliseconds
                seconds /= 1000.0
            return epoch_to_iso(seconds)
        except (OverflowError, OSError, ValueError):
            return None
    if isinstance(value, str):
        if _CANONICAL.fullmatch(value):
            return value  # already ISO-8601 UTC with milliseconds: the common case
        text = value.strip()
        if not text:
            return None
        try:
            moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            return None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        try:
            utc = moment.astimezone(UTC)
        except (OverflowError, ValueError):
            return None
        return utc.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return None
