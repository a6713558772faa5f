"""Properties of ingest on arbitrary input: it never crashes and never writes a bad line.

For any bytes, and for any JSON lines (random values, and records shaped like Claude
Code or plain JSON lines turns with random fields), `ingest` returns a report or raises
`CCMError`; every line of every raw.jsonl and quarantine.jsonl it writes matches its
schema, turns are numbered 1..n, nothing is written outside the root, and importing
the same input again changes nothing.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from freezegun import freeze_time
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ccm.errors import CCMError
from ccm.ingest.pipeline import IngestReport, ingest
from ccm.store import Store, check_session_id, scan_jsonl

FORMATS = ["jsonl", "claude-code", "auto"]
SETTINGS = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

# -- strategies -------------------------------------------------------------------------

KEYS = st.sampled_from(
    [
        "type",
        "role",
        "content",
        "message",
        "uuid",
        "parentUuid",
        "sessionId",
        "isSidechain",
        "isMeta",
        "agentId",
        "timestamp",
        "ts",
        "id",
        "tool",
        "meta",
        "turn",
        "summary",
        "leafUuid",
        "text",
        "name",
        "tool_use_id",
        "mapping",
        "messages",
    ]
) | st.text(max_size=6)

# integers stay within 64 bits: huge ones have their own test in test_bad_inputs
LEAVES = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63)
    | st.floats()
    | st.text(max_size=20)
)
JSON = st.recursive(
    LEAVES,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=5),
    max_leaves=20,
)
IDS = st.sampled_from(["u1", "u2", "u3", "m1", "m2", "t1", "t2", "u1#1", "result:t1"])
TS = (
    st.sampled_from(
        [
            "2026-01-01T00:00:00Z",
            "2026-01-01T00:00:00.5+02:00",
            "2026-01-01",
            "0001-01-01T00:00:00+01:00",
            "9999-12-31T23:59:59-01:00",
            "not a time",
            "",
        ]
    )
    | st.integers(min_value=-(2**63), max_value=2**63)
    | st.floats()
    | JSON
)
BLOCK = st.fixed_dictionaries(
    {
        "type": st.sampled_from(
            ["text", "tool_use", "tool_result", "thinking", "redacted_thinking", "image"]
        )
        | JSON
    },
    optional={
        "text": st.text(max_size=20) | JSON,
        "id": IDS | JSON,
        "name": st.text(max_size=8) | JSON,
        "input": JSON,
        "tool_use_id": IDS | JSON,
        "content": st.text(max_size=20) | st.lists(JSON, max_size=3) | JSON,
        "is_error": st.booleans(),
        "thinking": st.text(max_size=20) | JSON,
    },
)
CONTENT = st.text(max_size=30) | st.lists(BLOCK | JSON, max_size=4) | JSON
CLAUDE_RECORD = st.fixed_dictionaries(
    {
        "type": st.sampled_from(
            [
                "user",
                "assistant",
                "summary",
                "system",
                "progress",
                "file-history-snapshot",
                "wibble",
            ]
        )
    },
    optional={
        "uuid": IDS | JSON,
        "parentUuid": IDS | st.none(),
        "sessionId": st.sampled_from(["s1", "s-2", "../../etc", "a/b", "", "x" * 200]) | JSON,
        "isSidechain": st.booleans(),
        "isMeta": st.booleans(),
        "isCompactSummary": st.booleans(),
        "agentId": IDS | JSON,
        "timestamp": TS,
        "cwd": st.text(max_size=10),
        "summary": st.text(max_size=10),
        "message": st.fixed_dictionaries(
            {},
            optional={
                "id": IDS | JSON,
                "role": st.sampled_from(["user", "assistant"]),
                "model": st.text(max_size=5) | JSON,
                "content": CONTENT,
            },
        )
        | JSON,
    },
)
JSONL_RECORD = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "system", "tool", "wizard"]) | JSON},
    optional={
        "content": CONTENT,
        "ts": TS,
        "id": IDS | JSON,
        "tool": st.fixed_dictionaries({}, optional={"name": JSON, "id": JSON, "x": JSON}) | JSON,
        "meta": JSON,
        "turn": JSON,
    },
)


@st.composite
def json_lines(draw: st.DrawFn) -> bytes:
    """A file of JSON lines, with now and then a line of junk bytes or a blank line."""
    lines = []
    for value in draw(st.lists(JSON | CLAUDE_RECORD | JSONL_RECORD, max_size=12)):
        lines.append(json.dumps(value, ensure_ascii=draw(st.booleans())).encode())
        if draw(st.integers(0, 9)) == 0:
            lines.append(draw(st.binary(max_size=20)).replace(b"\n", b""))
        if draw(st.integers(0, 9)) == 0:
            lines.append(b"")
    return b"\n".join(lines) + draw(st.sampled_from([b"\n", b""]))


# -- the property ---------------------------------------------------------------------------


def run(root: Path, path: Path, fmt: str, thinking: bool) -> IngestReport | CCMError:
    try:
        return ingest(Store(root), [str(path)], fmt, include_thinking=thinking)
    except CCMError as exc:  # any other exception fails the test
        return exc


def files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def check_written(root: Path) -> int:
    """Validate every log under `root`; returns the number of turns."""
    turns = 0
    for raw in root.rglob("raw.jsonl"):
        check_session_id(raw.parent.name)
        assert raw.parent.parent == root / "chats"
        data = raw.read_bytes()
        assert data.endswith(b"\n")
        lines = list(scan_jsonl(raw, schema="raw_entry"))
        assert [line.bad for line in lines if line.bad] == []
        assert len(lines) == data.count(b"\n")
        assert [line.record["turn"] for line in lines if line.record] == list(
            range(1, len(lines) + 1)
        )
        turns += len(lines)
    for quarantine in root.rglob("quarantine.jsonl"):
        check_session_id(quarantine.parent.name)
        lines = list(scan_jsonl(quarantine, schema="quarantine"))
        assert [line.bad for line in lines if line.bad] == []
    return turns


def check_ingest(data: bytes, fmt: str, thinking: bool, tmp_path: Path) -> None:
    work = Path(tempfile.mkdtemp(dir=tmp_path))
    try:
        path = work / "input.jsonl"
        path.write_bytes(data)
        root = work / "root"

        first = run(root, path, fmt, thinking)

        turns = check_written(root)
        if isinstance(first, IngestReport):
            json.dumps(first.as_dict())
            assert first.turns_added == turns
            assert first.inputs == 1
        assert sorted(work.iterdir()) == sorted([path, root])

        before = files(root)
        second = run(root, path, fmt, thinking)

        assert type(second) is type(first)
        if isinstance(second, IngestReport):
            assert second.turns_added == 0
            assert isinstance(first, IngestReport)
            assert second.duplicates == first.turns_added + first.duplicates
        assert files(root) == before
    finally:
        shutil.rmtree(work)
    assert list(tmp_path.iterdir()) == []  # nothing was written beside the work folder


@pytest.mark.parametrize("fmt", FORMATS)
@SETTINGS
@given(data=st.binary(), thinking=st.booleans())
def test_any_bytes(fmt: str, data: bytes, thinking: bool, tmp_path: Path) -> None:
    check_ingest(data, fmt, thinking, tmp_path)


@pytest.mark.parametrize(
    "fmt",
    [
        "jsonl",
        "claude-code",
        "auto",
    ],
)
@SETTINGS
@given(data=json_lines(), thinking=st.booleans())
@example(data=b'{"type": []}\n{"role": "user", "content": "hi"}\n', thinking=False)
def test_any_json_lines(fmt: str, data: bytes, thinking: bool, tmp_path: Path) -> None:
    check_ingest(data, fmt, thinking, tmp_path)


# -- an input read a chunk at a time imports as if read whole -----------------------------

TURN_LINES = st.one_of(
    st.builds(
        lambda role, content, tid: json.dumps(
            {"role": role, "content": content, "ts": "2026-01-02T03:04:05Z"}
            | ({"id": tid} if tid is not None else {})
        ).encode(),
        st.sampled_from(["user", "assistant"]),
        st.sampled_from(["ok", "done", "and the next?", "x" * 40, "naïve ✓"]),
        st.none() | st.sampled_from(["a", "b", "c", "d"]),
    ),
    st.sampled_from([b"", b"not json", b'{"role": "robot", "content": "?"}', b"[1, 2]"]),
)


def _raw(root: Path) -> list[bytes]:
    return [p.read_bytes() for p in sorted(root.rglob("*.jsonl"))]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    before=st.lists(TURN_LINES, max_size=6),
    lines=st.lists(TURN_LINES, min_size=1, max_size=30),
    chunk=st.integers(min_value=1, max_value=200),
    fmt=st.sampled_from(["jsonl", "auto"]),
    torn=st.booleans(),
)
def test_an_input_read_a_chunk_at_a_time_imports_as_if_read_whole(
    before: list[bytes], lines: list[bytes], chunk: int, fmt: str, torn: bool
) -> None:
    """Duplicates by id and by content (the k-th occurrence of a turn without an id),
    bad lines and their line numbers, an unfinished last line: the same raw.jsonl and
    quarantine.jsonl, and the same report, whatever the chunk size."""
    work = Path(tempfile.mkdtemp(prefix="ccm-chunks-"))
    try:
        data = b"\n".join(lines) + (b"" if torn else b"\n")
        if not any(json_turn(line) for line in lines):
            return  # nothing the format detection would call JSON Lines
        source = work / "chat.jsonl"
        source.write_bytes(data)
        earlier = work / "earlier.jsonl"
        earlier.write_bytes(b"".join(line + b"\n" for line in before))
        reports = []
        for name, size in (("whole", 1 << 30), ("chunked", chunk)):
            with freeze_time("2026-11-25T08:00:00Z"):  # the time a quarantined line is kept
                reports.append(_imported(work / name, earlier, before, source, fmt, size))
        assert _raw(work / "whole") == _raw(work / "chunked")
        assert reports[0] == reports[1]
    finally:
        shutil.rmtree(work)


def _imported(
    root: Path, earlier: Path, before: list[bytes], source: Path, fmt: str, size: int
) -> Any:
    from ccm.ingest import pipeline

    store = Store(root)
    store.init()
    if before:
        ingest(store, [str(earlier)], "jsonl", session="chat")
    original = pipeline.CHUNK_BYTES
    pipeline.CHUNK_BYTES = size
    try:
        return ingest(store, [str(source)], fmt, session="chat").as_dict()
    except CCMError as exc:
        return str(exc)
    finally:
        pipeline.CHUNK_BYTES = original


def json_turn(line: bytes) -> bool:
    try:
        value = json.loads(line)
    except ValueError:
        return False
    return isinstance(value, dict) and "role" in value
