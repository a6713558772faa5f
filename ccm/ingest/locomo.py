"""LoCoMo conversations (the long-term memory benchmark), one session per sample.

Each LoCoMo session's date (``"1:56 pm on 8 May, 2023"``) becomes the timestamp of
its first turn, the following turns 30 seconds apart, so days and weeks between
sessions show as time gaps. The first speaker is ``user``, the second ``assistant``;
the speaker's name and the turn's ``dia_id`` are kept in ``meta``, and a shared
image becomes ``[shared an image: <caption>]`` after the text.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

from ccm import patterns
from ccm.dates import MONTHS
from ccm.errors import FormatError, InvalidSessionId
from ccm.ingest.lines import load_document
from ccm.ingest.model import Parsed, ParseOptions, Rejected, SourceSession, SourceTurn
from ccm.store import check_session_id, iso_utc, slug_session_id

HINT = "is this a LoCoMo file (a list of samples with 'conversation')? pass --format"
_SESSION = patterns.compile(r"session_(\d+)")
_DATE = patterns.compile(
    r"(?P<hour>\d{1,2}):(?P<minute>\d{2})\s*(?P<ampm>am|pm)\s+on\s+(?P<day>\d{1,2})\s+"
    r"(?P<month>[A-Za-z]+),?\s+(?P<year>\d{4})",
    re.IGNORECASE,
)
TURN_STEP = timedelta(seconds=30)


def parse_date(text: str) -> datetime | None:
    """``"1:56 pm on 8 May, 2023"`` as a UTC datetime; None when it does not parse."""
    match = _DATE.search(text or "")
    if match is None:
        return None
    month = MONTHS.get(match.group("month").lower())
    if month is None:
        return None
    hour = int(match.group("hour")) % 12 + (12 if match.group("ampm").lower() == "pm" else 0)
    try:
        return datetime(
            int(match.group("year")),
            month,
            int(match.group("day")),
            hour,
            int(match.group("minute")),
            tzinfo=UTC,
        )
    except ValueError:
        return None


def _text(turn: dict[str, Any]) -> str:
    text = str(turn.get("text") or "")
    caption = turn.get("blip_caption")
    if isinstance(caption, str) and caption.strip():
        text = f"{text} [shared an image: {caption.strip()}]".strip()
    return text


def sample_session(sample: dict[str, Any], session_id: str) -> tuple[SourceSession, list[str]]:
    """The turns of one LoCoMo sample, and the problems met (as messages)."""
    conversation = sample.get("conversation")
    session = SourceSession(session_id, "locomo")
    problems: list[str] = []
    if not isinstance(conversation, dict):
        return session, ["no 'conversation' object"]
    speakers = [conversation.get("speaker_a"), conversation.get("speaker_b")]
    session.meta["speakers"] = [s for s in speakers if isinstance(s, str)]
    numbers = sorted(
        int(m.group(1))
        for key in conversation
        if (m := _SESSION.fullmatch(key)) and isinstance(conversation[key], list)
    )
    for number in numbers:
        start = parse_date(str(conversation.get(f"session_{number}_date_time", "")))
        if start is None:
            problems.append(f"session_{number} has no readable date")
        for index, turn in enumerate(conversation[f"session_{number}"]):
            if not isinstance(turn, dict) or not isinstance(turn.get("text"), str):
                problems.append(f"session_{number} turn {index} is not a turn")
                continue
            speaker = turn.get("speaker")
            role = "assistant" if speaker == speakers[1] else "user"
            dia_id = turn.get("dia_id")
            session.turns.append(
                SourceTurn(
                    role,
                    _text(turn),
                    ts=iso_utc(start + TURN_STEP * index) if start else None,
                    id=f"{session_id}:{dia_id}" if isinstance(dia_id, str) else None,
                    meta={"speaker": speaker, "dia_id": dia_id, "locomo_session": number},
                )
            )
    return session, problems


def parse(data: bytes, name: str, options: ParseOptions) -> Parsed:
    document = load_document(data, name, HINT)
    samples = document if isinstance(document, list) else [document]
    parsed = Parsed()
    for index, sample in enumerate(samples, start=1):
        if not isinstance(sample, dict):
            raise FormatError(f"{name}: item {index} is not a LoCoMo sample", HINT)
        sample_id = str(sample.get("sample_id") or f"locomo-{index}")
        try:
            session_id = options.session or check_session_id(sample_id)
        except InvalidSessionId:
            session_id = slug_session_id(sample_id)
        if options.session and len(samples) > 1:
            session_id = f"{options.session}-{index}"
        session, problems = sample_session(sample, session_id)
        for problem in problems:
            parsed.rejected.append(
                Rejected(name, None, f"{sample_id}: {problem}", HINT, b"", session_id)
            )
        parsed.sessions.append(session)
    return parsed
