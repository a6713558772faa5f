"""Reading JSON Lines input: one place for line numbers, size limits and decoding."""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterator
from typing import Any

from ccm.errors import FormatError
from ccm.ingest.model import Notice, ParseOptions, Rejected

BOM = b"\xef\xbb\xbf"  # UTF-8's byte order mark, which some editors put first
_WIDE_BOMS = (  # longest first: UTF-32 LE starts like UTF-16 LE
    (b"\xff\xfe\x00\x00", "UTF-32"),
    (b"\x00\x00\xfe\xff", "UTF-32"),
    (b"\xff\xfe", "UTF-16"),
    (b"\xfe\xff", "UTF-16"),
)
UTF8_HINT = "save the file as UTF-8 and import it again"


def without_bom(data: bytes) -> bytes:
    """`data` without a UTF-8 byte order mark at its start."""
    return data[len(BOM) :] if data.startswith(BOM) else data


def wide_encoding(data: bytes) -> str | None:
    """'UTF-16' or 'UTF-32' when `data` starts with that encoding's byte order mark."""
    return next((name for mark, name in _WIDE_BOMS if data.startswith(mark)), None)


def first_lines(data: bytes, count: int) -> Iterator[bytes]:
    """The first `count` lines of `data` that are not blank, whole however long (without
    copying the rest)."""
    start = 0
    while count and start < len(data):
        end = data.find(b"\n", start)
        end = len(data) if end < 0 else end
        if data[start:end].strip():
            yield data[start:end]
            count -= 1
        start = end + 1


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON; write null or a number")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e999
        raise ValueError(f"{text} is beyond what a float holds; write a smaller number")
    return value


def loads(text: str | bytes) -> Any:
    """Strict JSON: NaN and Infinity, which Python's json would accept, are errors, and
    so is a number too large to be anything but infinite (the store writes only what
    any JSON reader can read back)."""
    return json.loads(text, parse_constant=_no_constant, parse_float=_finite)


def load_document(data: bytes, where: str, hint: str) -> Any:
    """One whole JSON document, strictly UTF-8 (`json.loads` on bytes would also guess
    UTF-16 and UTF-32; a UTF-8 byte order mark is fine); anything else is a
    `FormatError` naming `where`."""
    try:
        return loads(data.decode("utf-8-sig"))
    except UnicodeDecodeError as exc:
        wide = wide_encoding(data)
        if wide is not None:
            raise FormatError(
                f"{where}: not UTF-8 text but {wide}: save it as UTF-8", hint
            ) from exc
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
    warnings: list[Notice] | None = None,
    at_start: bool = True,
) -> Iterator[tuple[int, int, bytes, Any | Rejected]]:
    """Yield ``(line_number, offset, raw, value_or_rejected)`` for each non-blank line.

    A line that is too long, not UTF-8 or not JSON becomes a `Rejected` naming the
    file and line, to be quarantined in `session`; the other lines still import. An
    unterminated last line that does not parse is a writer mid-line (a live
    transcript): it is counted in `skipped` as ``incomplete_last_line``, said in
    `warnings` if given, and left for the next import, not an error. A UTF-8 byte
    order mark at the start is not part of line 1 (offsets still count it), unless
    `data` is not `at_start` of its input (a later chunk of an input read a chunk at
    a time, where those bytes begin a line of their own, rejected as in a whole read).
    Line ends may be CRLF.
    """
    offset = len(BOM) if at_start and data.startswith(BOM) else 0
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
                loads(raw.decode("utf-8"))
            except (ValueError, RecursionError):
                skipped["incomplete_last_line"] += 1
                if warnings is not None:
                    warnings.append(
                        Notice(
                            name,
                            number,
                            "the last line is incomplete (no newline at its end, and not "
                            "complete JSON); it is skipped for now",
                            "it is imported once its writer completes it; if the file was "
                            "cut off, complete or remove that line and import it again",
                        )
                    )
                return
        try:
            value = loads(raw.decode("utf-8"))  # bytes would let json guess UTF-16/32
        except UnicodeDecodeError as exc:
            yield _reject(where, f"invalid UTF-8 ({exc.reason} at byte {exc.start})", UTF8_HINT)
            continue
        except (ValueError, RecursionError) as exc:
            yield _reject(
                where, f"invalid JSON ({exc})", "each line must be one complete JSON object"
            )
            continue
        yield number, start, raw, value
