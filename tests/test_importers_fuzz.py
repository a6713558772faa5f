"""Every importer, fed anything: it returns what it parsed or raises FormatError."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ccm.errors import FormatError
from ccm.ingest.model import Parsed, ParseOptions
from ccm.ingest.pipeline import FORMATS, Importer, importer
from tests.helpers import json_values

JSON_VALUES = json_values(infinity=True)  # what json.dumps writes as Infinity: a bad input
FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def parses_or_format_error(parse: Importer, data: bytes) -> None:
    try:
        result = parse(data, "fuzz.json", ParseOptions())
    except FormatError:
        return
    assert isinstance(result, Parsed)


@pytest.mark.parametrize("fmt", FORMATS)
@FUZZ
@given(data=st.binary())
def test_any_bytes_parse_or_raise_format_error(fmt: str, data: bytes) -> None:
    parses_or_format_error(importer(fmt), data)


@pytest.mark.parametrize("fmt", FORMATS)
@FUZZ
@given(value=JSON_VALUES)
def test_any_json_parses_or_raises_format_error(fmt: str, value: Any) -> None:
    parses_or_format_error(importer(fmt), json.dumps(value).encode())
