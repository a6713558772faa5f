"""Reading JSON Lines input: one place for line numbers, size limits and decoding."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from typing import Any

from ccm.errors import FormatError
from ccm.ingest.model import ParseOptions, Rejected


def load_document(data: bytes, where: str, hint: str) -> Any:
    """One whole JSON document, strictly UTF-8 (`json.loads` on bytes would also guess
    UTF-16 and UTF-32); anything else is a `FormatError` naming `where`."""
    try:
        return json.loads(data.decode("utf-8-sig"))
    except UnicodeDecodeError as exc:
        raise FormatError(f"{where}: not UTF-8 text ({exc.reason})", hint) from exc
    except RecursionError as exc:
        raise FormatError(f"{where}: JSON nested too deeply", hint) from exc
    except ValueError as exc:
        raise FormatError(f"{where}: not valid JSON: {exc}", hint) from exc


def _reject(
    where: tuple[str, int, int, bytes, str | None], error: str, hint: str
) -> tuple[int, int, bytes, Rejected]:
    name, number, start, raw, session = where
    return number, start, raw, Rejected(name, number, error, hint, raw, session, start)


def json_lines(
    data: bytes,
    name: str,
    options: ParseOptions,
    session: str | None,
    skipped: Counter[str] | None = None,
) -> Iterator[tuple[int, int, bytes, Any | Rejected]]:
    """Yield ``(line_number, offset, raw, value_or_rejected)`` for each non-blank line.

    A line that is too long, not UTF-8 or not JSON becomes a `Rejected` naming the
    file and line, to be quarantined in `session`; the other lines still import. An
    unterminated last line that does not parse is a writer mid-line (a live
    transcript): it is counted in `skipped` as ``incomplete_last_line`` and left for
    the next import, not reported as an error.
    """
    offset = 0
    number = 0
    size = len(data)
    while offset < size:
        newline = data.find(b"\n", offset)
        end = size if newline < 0 else newline
        raw = data[offset:end]
        number += 1
        start = offset
        offset = end + 1
        if not raw.strip():
            continue
        where = (name, number, start, raw, session)
        if len(raw) > options.max_line_bytes:
            yield _reject(
                where,
                f"line is {len(raw)} bytes, over the limit of {options.max_line_bytes}",
                "raise ingest.max_line_bytes in config.yaml if the line is genuine",
            )
            continue
        if newline < 0 and skipped is not None:
            try:
                json.loads(raw.decode("utf-8"))
            except (ValueError, RecursionError):
                skipped["incomplete_last_line"] += 1
                return
        try:
            value = json.loads(raw.decode("utf-8"))  # bytes would let json guess UTF-16/32
        except UnicodeDecodeError as exc:
            yield _reject(
                where, f"invalid UTF-8 ({exc.reason} at byte {exc.start})", "save the file as UTF-8"
            )
            continue
        except (ValueError, RecursionError) as exc:
            yield _reject(
                where, f"invalid JSON ({exc})", "each line must be one complete JSON object"
            )
            continue
        yield number, start, raw, value
