"""The days and months a question names, as the stretch of time recall weighs more."""

from __future__ import annotations

from datetime import date

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ccm.dates import window


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("What did we decide on 3 June, 2023?", ("2023-06-02", "2023-06-04T99")),
        ("the painting shown on October 13, 2023", ("2023-10-12", "2023-10-14T99")),
        ("Oct. 5th, 2022 at noon", ("2022-10-04", "2022-10-06T99")),
        ("the 5th of May 2021", ("2021-05-04", "2021-05-06T99")),
        ("logs from 2024-02-29", ("2024-02-28", "2024-03-01T99")),
        ("What setback did she face in October 2023?", ("2023-10-01", "2023-11-07T99")),
        ("a class she started in December 2023", ("2023-12-01", "2024-01-07T99")),
        ("31 February 2023", ("2023-02-01", "2023-03-07T99")),  # no such day: the month
        ("What did we decide about the database?", None),
        ("you may 2 weeks", None),
    ],
)
def test_the_day_or_month_a_question_names(text: str, expected: object) -> None:
    assert window(text) == expected


@given(st.dates(min_value=date(1900, 1, 1), max_value=date(2099, 12, 31)))
def test_every_written_day_is_inside_its_own_window(day: date) -> None:
    for text in (
        f"on {day.day} {day:%B} {day.year}",
        f"on {day:%B} {day.day}, {day.year}",
        day.isoformat(),
    ):
        found = window(text)
        assert found is not None
        assert found[0] < day.isoformat() + "T12:00:00Z" < found[1]


@given(st.text(max_size=80))
def test_any_text_gives_a_window_or_none(text: str) -> None:
    found = window(text)
    assert found is None or found[0] < found[1]
