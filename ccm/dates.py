"""Dates written the way people write them: month names, and the days a question names.

A question that names a day or a month ("what did we decide on March 3, 2024?", "in
July 2023") is asking about what was said then: `window` gives the stretch of time
whose turns recall should weigh more.
"""

from __future__ import annotations

import re
from datetime import date, timedelta

from ccm import patterns

MONTHS = {
    name: number
    for number, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ],
        start=1,
    )
    for name in names
}
_MONTH = r"(?P<month>" + "|".join(sorted(MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(?P<day>\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>(?:19|20)\d\d)"
_FORMS = [
    patterns.compile(rf"\b{_YEAR}-(?P<mon>\d\d)-(?P<day>\d\d)\b"),
    patterns.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MONTH},?\s+{_YEAR}\b", re.IGNORECASE),
    patterns.compile(rf"\b{_MONTH}\s+{_DAY},?\s+{_YEAR}\b", re.IGNORECASE),
    patterns.compile(rf"\b{_MONTH},?\s+{_YEAR}\b", re.IGNORECASE),
]
DAY_SLACK = timedelta(days=1)  # said the day before or after still counts
MONTH_SLACK = timedelta(days=7)  # told in the first days of the next month


def window(text: str) -> tuple[str, str] | None:
    """The first day or month `text` names, as an ISO range ``(start, end)`` of times
    (compare with ISO time stamps), widened by a little slack; None if it names none."""
    for form in _FORMS:
        match = form.search(text)
        if match is None:
            continue
        parts = match.groupdict()
        month = int(parts["mon"]) if parts.get("mon") else MONTHS[parts["month"].lower()]
        year = int(parts["year"])
        try:
            if parts.get("day"):
                day = date(year, month, int(parts["day"]))
                return _span(day - DAY_SLACK, day + DAY_SLACK)
            first = date(year, month, 1)
        except ValueError:
            continue  # "31 February": not a day
        following = date(year + month // 12, month % 12 + 1, 1)
        return _span(first, following - timedelta(days=1) + MONTH_SLACK)
    return None


def _span(first: date, last: date) -> tuple[str, str]:
    return first.isoformat(), last.isoformat() + "T99"


def bound(text: str | None, option: str, end: bool) -> str | None:
    """A date or time given by a person (``--since``, ``until``...) as the ISO prefix the
    index compares with; a bare date covers its whole day (to its last instant when it
    is an `end`)."""
    if text is None:
        return None
    from datetime import datetime

    from ccm.errors import UsageError

    try:
        datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise UsageError(
            f"{option}: {text!r} is not a date", "pass one such as 2026-03-02 or 2026-03-02T10:00"
        ) from exc
    if len(text) == 10 and end:
        return text + "T23:59:59.999Z"
    return text
