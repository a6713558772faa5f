"""Bad input never crashes `ccm ingest`: each bad line is reported, quarantined, and skipped.

One table of cases (the catalogue); for each: the exit code, the message on stderr (it
names the file, or what is wrong, and says what to do), the good lines that still
import, the rejected lines kept verbatim in quarantine.jsonl, an import of the same
input again that adds nothing, and nothing written outside the knowledge root.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result
from freezegun import freeze_time

from tests.helpers import ccm, chatgpt_conversation, chatgpt_message, zipped

BOM = b"\xef\xbb\xbf"


def crashed(result: Result) -> bool:
    """True when the command died of an exception instead of exiting on purpose."""
    return result.exception is not None and not isinstance(result.exception, SystemExit)


def jl(*records: Any) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in records)


def user(text: str, **extra: Any) -> dict[str, Any]:
    return {"role": "user", "content": text, **extra}


def cc_user(uuid: str, text: str, session: str = "cc-1", **extra: Any) -> dict[str, Any]:
    return {
        "type": "user",
        "uuid": uuid,
        "sessionId": session,
        "timestamp": "2026-01-01T00:00:00Z",
        "message": {"role": "user", "content": text},
        **extra,
    }


def chatgpt_export(*texts: str, ident: str = "conv-1") -> bytes:
    """A ChatGPT export (conversations.json) of one linear conversation of user turns."""
    turns = [
        chatgpt_message("user", [text], create_time=1737000000.0 + number)
        for number, text in enumerate(texts, start=1)
    ]
    return json.dumps([chatgpt_conversation(*turns, id=ident)], indent=1).encode()


def outside(tmp_path: Path, root: Path) -> list[Path]:
    return sorted(p for p in tmp_path.rglob("*") if root not in (p, *p.parents))


HUGE = json.dumps(user("x" * 4969)).encode()
assert len(HUGE) == 5000
LONG = json.dumps(user("long line " * 150_000)).encode()  # over the 1 MiB format detection read
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xd8\n"
EXPORT = chatgpt_export("first question", "second question")
HINT = re.compile(r"\(.+\)$")  # a message ends with what to do, in parentheses


@dataclass(frozen=True)
class Case:
    """One bad input and what `ccm ingest` must do with it."""

    name: str  # the input: a file of that name, or a folder when `data` is a dict
    data: bytes | dict[str, bytes] | None  # None: the path does not exist
    exit_code: int
    message: str | None  # a part of the message on stderr (Warning: with exit 0, else Error:)
    session: str  # where the good lines and the rejected ones go
    imported: list[str] = field(default_factory=list)  # contents of the turns imported
    quarantined: list[int | None] = field(default_factory=list)  # their lines (None: a record)
    skipped: dict[str, int] | None = field(default_factory=dict)  # None: stopped before reading
    args: list[str] = field(default_factory=list)
    config: str | None = None
    names: str | None = None  # what the message names, when it is not the input's path


CASES = [
    # -- lines that are not turns ------------------------------------------------------------
    pytest.param(
        Case(
            "bad.jsonl",
            jl(user("good 1")) + b'{"role": "user", "content": \n' + jl(user("good 2")),
            1,
            "bad.jsonl:2: invalid JSON",
            "bad",
            ["good 1", "good 2"],
            [2],
        ),
        id="malformed-json",
    ),
    pytest.param(
        Case(
            "types.jsonl",
            jl(user("good"), {"role": "user", "content": 5}),
            1,
            'types.jsonl:2: "content" must be a string, found int',
            "types",
            ["good"],
            [2],
        ),
        id="wrong-type",
    ),
    pytest.param(
        Case(
            "roles.jsonl",
            jl({"role": "wizard", "content": "abracadabra"}, user("good")),
            1,
            "roles.jsonl:1: role must be one of user, assistant, system, tool",
            "roles",
            ["good"],
            [1],
        ),
        id="unknown-role",
    ),
    pytest.param(
        Case(
            "shapes.jsonl",
            jl(user("good"), [1, 2], "text", None),
            1,
            "shapes.jsonl:3: expected a JSON object",
            "shapes",
            ["good"],
            [2, 3, 4],
        ),
        id="not-objects",
    ),
    pytest.param(
        Case(
            "nocontent.jsonl",
            jl({"role": "user"}),
            1,
            'nocontent.jsonl:1: missing "content" (add "content": ',
            "nocontent",
            [],
            [1],
        ),
        id="missing-content-alone",
    ),
    pytest.param(
        Case(
            "nocontent.jsonl",
            jl(user("good"), {"role": "assistant", "ts": "2026-01-01T00:00:00Z"}),
            1,
            'nocontent.jsonl:2: missing "content"',
            "nocontent",
            ["good"],
            [2],
        ),
        id="missing-content",
    ),
    pytest.param(
        Case(
            "norole.jsonl",
            jl({"content": "who said this?"}, user("good")),
            1,
            'norole.jsonl:1: missing "role" (add "role": ',
            "norole",
            ["good"],
            [1],
        ),
        id="missing-role",
    ),
    pytest.param(
        Case(
            "array.jsonl",
            jl(user("good"), [user("a"), user("b")]),
            1,
            "array.jsonl:2: expected a JSON object, found a JSON array",
            "array",
            ["good"],
            [2],
        ),
        id="json-array-on-a-line",
    ),
    pytest.param(
        Case(
            "array.jsonl",
            json.dumps([user("a"), user("b")]).encode() + b"\n",
            1,
            "array.jsonl: a JSON array of messages, not JSON lines (put each message",
            "array",
        ),
        id="json-array-where-lines-were-expected",
    ),
    pytest.param(
        Case(
            "messages.json",
            json.dumps([user("a"), user("b")], indent=2).encode(),
            1,
            "messages.json: a JSON array of messages, not JSON lines",
            "messages",
        ),
        id="pretty-printed-json-array",
    ),
    pytest.param(
        Case(
            "nan.jsonl",
            b'{"role": "user", "content": "hi", "ts": NaN}\n' + jl(user("good")),
            1,
            "nan.jsonl:1: invalid JSON (NaN is not JSON; write null or a number)",
            "nan",
            ["good"],
            [1],
        ),
        id="nan-is-not-json",
    ),
    pytest.param(
        Case(
            "huge.jsonl",
            b'{"role": "user", "content": "hi", "ts": 1e999}\n' + jl(user("good")),
            1,
            "huge.jsonl:1: invalid JSON (1e999 is beyond what a float holds; write a smaller "
            "number)",
            "huge",
            ["good"],
            [1],
        ),
        id="a-number-too-large-is-not-infinity",
    ),
    pytest.param(
        Case(
            "nul.jsonl",
            jl(user("good 1")) + b"\x00\x00\x00\n" + jl(user("good 2")),
            1,
            "nul.jsonl:2: invalid JSON",
            "nul",
            ["good 1", "good 2"],
            [2],
        ),
        id="nul-bytes",
    ),
    # -- sizes and nesting -----------------------------------------------------------------
    pytest.param(
        Case(
            "huge.jsonl",
            jl(user("good 1")) + HUGE + b"\n" + jl(user("good 2")),
            1,
            "huge.jsonl:2: line is 5000 bytes, over the limit of 2048",
            "huge",
            ["good 1", "good 2"],
            [2],
            config="ingest: {max_line_bytes: 2048}\n",
        ),
        id="line-over-max-line-bytes",
    ),
    pytest.param(
        Case(
            "long.jsonl",
            LONG + b"\n" + jl(user("good")),
            0,
            None,
            "long",
            ["long line " * 150_000, "good"],
        ),
        id="long-first-line-is-recognised",
    ),
    pytest.param(
        Case(
            "deep.jsonl",
            jl(user("good")) + b"[" * 100_000 + b"\n",
            1,
            "deep.jsonl:2: invalid JSON (maximum recursion depth exceeded",
            "deep",
            ["good"],
            [2],
        ),
        id="deeply-nested-line",
    ),
    pytest.param(
        Case(
            "deep.json",
            b"[" * 100_000 + b"]" * 100_000,
            1,
            "deep.json: cannot tell what format this is: JSON nested too deeply",
            "deep",
        ),
        id="deeply-nested-document",
    ),
    # -- encodings and line ends -----------------------------------------------------------
    pytest.param(
        Case(
            "latin1.jsonl",
            b'{"role": "user", "content": "caf\xe9"}\n' + jl(user("good")),
            1,
            "latin1.jsonl:1: invalid UTF-8",
            "latin1",
            ["good"],
            [1],
        ),
        id="invalid-utf8",
    ),
    pytest.param(
        Case(
            "middle.jsonl",
            jl(user("good 1"))
            + b'{"role": "user", "content": "ab\xff\xfecd"}\n'
            + jl(user("good 2")),
            1,
            "middle.jsonl:2: invalid UTF-8 (invalid start byte at byte 31)",
            "middle",
            ["good 1", "good 2"],
            [2],
        ),
        id="invalid-utf8-in-the-middle",
    ),
    *(
        pytest.param(
            Case(
                "wide.jsonl",
                '{"role": "user", "content": "hi"}\n'.encode("utf-16"),
                1,
                "wide.jsonl: UTF-16 text, not UTF-8 (save the file as UTF-8",
                "wide",
                args=args,
            ),
            id=f"utf16-file{named}",
        )
        for args, named in [([], ""), (["--format", "jsonl"], "-with-its-format-named")]
    ),
    pytest.param(
        Case(
            "nan.json",
            b'{"messages": [{"role": "user", "content": "hi"}], "temperature": NaN}',
            1,
            "nan.json: not valid JSON: NaN is not JSON; write null or a number",
            "nan",
        ),
        id="nan-in-a-json-document",
    ),
    pytest.param(
        Case(
            "late.jsonl",
            b"\n" * 60 + jl(user("after blank lines")),
            0,
            None,
            "late",
            ["after blank lines"],
        ),
        id="many-blank-lines-before-the-first-message",
    ),
    pytest.param(
        Case(
            "bom.jsonl",
            BOM + jl(user("first"), user("second")),
            0,
            None,
            "bom",
            ["first", "second"],
        ),
        id="bom-json-lines",
    ),
    pytest.param(
        Case("bom.jsonl", BOM + jl(user("only")), 0, None, "bom", ["only"]),
        id="bom-one-line",
    ),
    pytest.param(
        Case(
            "bom.jsonl",
            BOM + b"{oops\n" + jl(user("good")),
            1,
            "bom.jsonl:1: invalid JSON",
            "bom",
            ["good"],
            [1],
        ),
        id="bom-before-a-bad-line",
    ),
    pytest.param(
        Case("bom.jsonl", BOM + jl(cc_user("u1", "hello")), 0, None, "cc-1", ["hello"]),
        id="bom-claude-code",
    ),
    pytest.param(
        Case("bom.json", BOM + EXPORT, 0, None, "conv-1", ["first question", "second question"]),
        id="bom-chatgpt-export",
    ),
    pytest.param(
        Case(
            "bom.json",
            BOM + json.dumps({"model": "m", "messages": [user("asked")]}).encode(),
            0,
            None,
            "bom",
            ["asked"],
        ),
        id="bom-anthropic-request",
    ),
    pytest.param(
        Case(
            "crlf.jsonl",
            b'{"role": "user", "content": "a"}\r\n{"role": "assistant", "content": "b"}\r\n',
            0,
            None,
            "crlf",
            ["a", "b"],
        ),
        id="crlf-line-ends",
    ),
    pytest.param(
        Case(
            "crlf.jsonl",
            b'{"role": "user", "content": "a"}\r\n{oops\r\n',
            1,
            "crlf.jsonl:2: invalid JSON",
            "crlf",
            ["a"],
            [2],
        ),
        id="crlf-bad-line-kept-with-its-cr",
    ),
    # -- timestamps ------------------------------------------------------------------------
    pytest.param(
        Case(
            "ts.jsonl",
            jl(user("hi", ts="not a date")),
            0,
            'ts.jsonl:1: "ts" "not a date" is not a date: the time of the import is stored',
            "ts",
            ["hi"],
        ),
        id="ts-not-a-date",
    ),
    pytest.param(
        Case(
            "ts.jsonl",
            jl(user("a", ts="2026-01-01T00:00:00Z"))
            + b'{"role": "user", "content": "b", "ts": 1e300}\n',
            0,
            'ts.jsonl:2: "ts" 1e+300 is not a date',
            "ts",
            ["a", "b"],
        ),
        id="ts-1e300",
    ),
    pytest.param(
        Case(
            "ts.jsonl",
            jl(user("hi", ts=10**20)),
            0,
            'ts.jsonl:1: "ts" 100000000000000000000 is not a date',
            "ts",
            ["hi"],
        ),
        id="ts-number-out-of-range",
    ),
    pytest.param(
        Case(
            "ts.jsonl",
            jl(user("hi", ts={"year": 2024})),
            0,
            'ts.jsonl:1: "ts" {"year": 2024} is not a date',
            "ts",
            ["hi"],
        ),
        id="ts-an-object",
    ),
    # -- whole inputs ----------------------------------------------------------------------
    pytest.param(
        Case("empty.jsonl", b"", 0, None, "empty", args=["--format", "jsonl"]),
        id="empty-file",
    ),
    pytest.param(
        Case("empty.jsonl", b"", 0, None, "empty", skipped={"empty_input": 1}),
        id="empty-file-auto",
    ),
    pytest.param(
        Case("blank.jsonl", b"\n   \n\r\n", 0, None, "blank", args=["--format", "claude-code"]),
        id="blank-lines-only",
    ),
    pytest.param(
        Case("blank.jsonl", b" \t \n\n\t\r\n  ", 0, None, "blank", skipped={"empty_input": 1}),
        id="only-whitespace-auto",
    ),
    pytest.param(
        Case(
            "trunc.jsonl",
            jl(user("good")) + b'{"role": "user", "cont',
            0,
            "trunc.jsonl:2: the last line is incomplete",
            "trunc",
            ["good"],
            skipped={"incomplete_last_line": 1},
        ),
        id="truncated-json-at-eof",
    ),
    pytest.param(
        Case(
            "conversations.json",
            EXPORT[: len(EXPORT) // 2],
            1,
            "conversations.json: not valid JSON",
            "conversations",
            args=["--format", "chatgpt"],
        ),
        id="truncated-export",
    ),
    pytest.param(
        Case(
            "image.png",
            PNG,
            1,
            "image.png: cannot tell what format this is: not UTF-8 text",
            "image",
        ),
        id="binary-garbage",
    ),
    pytest.param(
        Case(
            "image.png",
            PNG,
            1,
            "image.png:1: invalid UTF-8",
            "image",
            [],
            [1, 2, 3],
            args=["--format", "jsonl"],
        ),
        id="binary-garbage-as-json-lines",
    ),
    pytest.param(
        Case(
            "answer.json",
            b"42",
            1,
            "answer.json: cannot tell what format this is: no line in it is a message",
            "answer",
        ),
        id="json-scalar",
    ),
    pytest.param(
        Case(
            "settings.json",
            json.dumps({"theme": "dark"}).encode(),
            1,
            "settings.json: cannot tell what format this is: a JSON object in none of the formats",
            "settings",
        ),
        id="json-object-of-no-format",
    ),
    pytest.param(
        Case("conversations.json", b"[]", 0, None, "conversations", skipped={"empty_input": 1}),
        id="export-without-conversations",
    ),
    pytest.param(
        Case(
            "conversations.json",
            json.dumps([{"title": "no mapping", "id": "c9"}]).encode(),
            1,
            "conversations.json: conversation 1 (id 'c9') has no 'mapping' object",
            "conversations",
            [],
            [None],
            args=["--format", "chatgpt"],
        ),
        id="export-conversation-without-mapping",
    ),
    # -- ChatGPT exports under other names, folders, ZIPs ---------------------------------
    pytest.param(
        Case("backup.json", EXPORT, 0, None, "conv-1", ["first question", "second question"]),
        id="export-file-of-another-name",
    ),
    pytest.param(
        Case(
            "export",
            {
                "my-chats.json": EXPORT,
                "user.json": json.dumps({"email": "ada@example.com"}).encode(),
                "chat.html": b"<html></html>",
            },
            0,
            None,
            "conv-1",
            ["first question", "second question"],
        ),
        id="export-folder-of-another-name",
    ),
    pytest.param(
        Case(
            "export.zip",
            zipped({"export/chats-2024.json": EXPORT, "user.json": b"{}"}),
            0,
            None,
            "conv-1",
            ["first question", "second question"],
        ),
        id="export-zip-of-another-name",
    ),
    pytest.param(
        Case(
            "export.zip",
            zipped({"user.json": b"{}"}),
            1,
            "export.zip: ZIP file has no conversations.json",
            "export",
        ),
        id="zip-without-conversations",
    ),
    pytest.param(
        Case(
            "notes",
            {"notes.txt": b"hello", "user.json": b'{"email": "ada@example.com"}'},
            2,
            "notes: nothing to import inside: no .jsonl transcripts, and no .json or .zip",
            "notes",
            skipped=None,
        ),
        id="folder-with-nothing-importable",
    ),
    pytest.param(
        Case("void", {}, 2, "void: nothing to import inside", "void", skipped=None),
        id="empty-folder",
    ),
    pytest.param(
        Case("gone.jsonl", None, 2, "gone.jsonl: no such file or directory", "gone", skipped=None),
        id="missing-path",
    ),
    pytest.param(
        Case(
            "fine.jsonl",
            jl(user("good")),
            2,
            "invalid session id '../x'",
            "fine",
            skipped=None,
            args=["--session", "../x"],
            names="'../x'",
        ),
        id="invalid-session-id",
    ),
    # -- Claude Code -----------------------------------------------------------------------
    pytest.param(
        Case(
            "cc.jsonl",
            jl(
                cc_user("u1", "hello"),
                {"type": "wibble", "uuid": "w1", "sessionId": "cc-1", "payload": [1, 2]},
                cc_user("u2", "still here"),
            ),
            0,
            None,
            "cc-1",
            ["hello", "still here"],
            skipped={"wibble": 1},
        ),
        id="claude-code-unknown-record-type",
    ),
    pytest.param(
        Case(
            "cc.jsonl",
            jl(cc_user("u1", "hello"), {"type": "assistant", "uuid": "a1", "sessionId": "cc-1"}),
            1,
            "cc.jsonl:2: assistant record without message.content",
            "cc-1",
            ["hello"],
            [2],
        ),
        id="claude-code-record-without-content",
    ),
    pytest.param(
        Case(
            "traversal.jsonl",
            jl(cc_user("u1", "hello", "../../etc"), cc_user("u2", "again", "../../etc")),
            0,
            None,
            "traversal",
            ["hello", "again"],
        ),
        id="claude-code-path-traversal-session-id",
    ),
    pytest.param(
        Case(
            "traversal.jsonl",
            jl(user("good")) + b"{oops\n",
            1,
            "traversal.jsonl:2: invalid JSON",
            "safe",
            ["good"],
            [2],
            args=["--session", "safe"],
        ),
        id="bad-line-goes-to-the-chosen-session",
    ),
    # -- configuration ---------------------------------------------------------------------
    pytest.param(
        Case(
            "fine.jsonl",
            jl(user("good")),
            1,
            "config.yaml: data.ingest must not contain {'max_lines'}",
            "fine",
            skipped=None,
            config="ingest: {max_lines: 5}\n",
            names="config.yaml",
        ),
        id="config-unknown-key",
    ),
]


def _write_input(case: Case, folder: Path) -> tuple[Path, dict[str, bytes]]:
    """Write the case's input under `folder`; its path and each file's bytes by path."""
    path = folder / case.name
    if case.data is None:
        return path, {}
    if isinstance(case.data, dict):
        path.mkdir()
        for name, data in case.data.items():
            (path / name).write_bytes(data)
        return path, {str(path / name): data for name, data in case.data.items()}
    path.write_bytes(case.data)
    return path, {str(path): case.data}


@pytest.mark.parametrize("case", CASES)
def test_bad_input(case: Case, tmp_path: Path, ccm_home: Path) -> None:
    if case.config is not None:
        ccm_home.mkdir()
        (ccm_home / "config.yaml").write_text(case.config, encoding="utf-8")
    (tmp_path / "in").mkdir()
    path, files = _write_input(case, tmp_path / "in")
    before = outside(tmp_path, ccm_home)

    result = ccm("ingest", str(path), "--json", *case.args)

    assert not crashed(result), result.exception
    assert result.exit_code == case.exit_code, result.output
    if case.skipped is None:  # the command stopped before reading any input
        assert result.stdout == ""
    else:
        report = json.loads(result.stdout)
        assert report["skipped"] == case.skipped
        assert bool(report["errors"]) == (case.exit_code == 1 and not case.quarantined)
        assert report["turns_added"] == len(case.imported)
        assert len(report["rejected"]) == len(case.quarantined)
    if case.message is None:
        assert result.stderr == ""
    else:
        [said] = [line for line in result.stderr.splitlines() if case.message in line]
        assert said.startswith("Warning: " if case.exit_code == 0 else "Error: "), said
        assert (case.names or str(path)) in said  # names the file (or what is wrong)
        assert HINT.search(said), said  # and says what to do
    assert outside(tmp_path, ccm_home) == before

    folder = ccm_home / "chats" / case.session
    chats = ccm_home / "chats"
    raw_path = folder / "raw.jsonl"
    if case.imported:
        entries = [json.loads(line) for line in raw_path.read_bytes().splitlines()]
        assert [e["content"] for e in entries] == case.imported
        assert [e["turn"] for e in entries] == list(range(1, len(case.imported) + 1))
        assert sorted(p.name for p in chats.iterdir()) == [case.session]
    else:
        assert not raw_path.exists()

    quarantine = folder / "quarantine.jsonl"
    if case.quarantined:
        kept = [json.loads(line) for line in quarantine.read_bytes().splitlines()]
        assert sorted(k["line"] or 0 for k in kept) == sorted(n or 0 for n in case.quarantined)
        for record in kept:
            assert record["source"] in files
            assert record["error"]
            raw = (
                record["raw"].encode()
                if record["encoding"] == "utf-8"
                else base64.b64decode(record["raw"])
            )
            if record["line"] is None:  # a record of a JSON document, kept as JSON
                assert json.loads(raw)
                continue
            source_lines = files[record["source"]].removeprefix(BOM).split(b"\n")
            assert raw == source_lines[record["line"] - 1]  # verbatim
            assert f"{record['source']}:{record['line']}: {record['error']}" in result.stderr
    else:
        assert not quarantine.exists()

    raw_before = raw_path.read_bytes() if raw_path.exists() else None
    again = ccm("ingest", str(path), *case.args)
    assert not crashed(again), again.exception
    assert again.exit_code == case.exit_code
    assert (raw_path.read_bytes() if raw_path.exists() else None) == raw_before  # nothing twice
    if case.quarantined:
        assert len(quarantine.read_bytes().splitlines()) == len(case.quarantined)


def test_the_catalogue_has_at_least_forty_cases() -> None:
    assert len(CASES) >= 40
    assert len({c.id for c in CASES}) == len(CASES)


def test_invalid_utf8_is_kept_as_base64(tmp_path: Path, ccm_home: Path) -> None:
    path = tmp_path / "latin1.jsonl"
    line = b'{"role": "user", "content": "caf\xe9"}'
    path.write_bytes(line + b"\n")

    assert ccm("ingest", str(path), "--format", "jsonl").exit_code == 1

    [kept] = (ccm_home / "chats" / "latin1" / "quarantine.jsonl").read_bytes().splitlines()
    record = json.loads(kept)
    assert record["encoding"] == "base64"
    assert base64.b64decode(record["raw"]) == line


def test_a_bad_line_on_stdin_is_quarantined_in_the_stdin_session(ccm_home: Path) -> None:
    result = ccm("ingest", "-", input=jl(user("good")) + b"nope\n")

    assert result.exit_code == 1
    assert "Error: -:2: invalid JSON" in result.stderr
    [kept] = (ccm_home / "chats" / "stdin" / "quarantine.jsonl").read_bytes().splitlines()
    assert json.loads(kept)["raw"] == "nope"
    assert json.loads(kept)["source"] == "-"


# -- regressions: each was a crash or a false error on input a user will meet -----------------


@pytest.mark.parametrize(
    ("name", "line"),
    [
        ("big.jsonl", {"role": "user", "content": "hi", "ts": 10**400}),
        ("big-cc.jsonl", cc_user("u1", "hi", timestamp=10**400)),
    ],
)
def test_a_huge_integer_timestamp_is_not_a_crash(
    name: str, line: dict[str, Any], tmp_path: Path, ccm_home: Path
) -> None:
    path = tmp_path / name
    path.write_bytes(jl(line))

    result = ccm("ingest", str(path))

    assert not crashed(result), result.exception
    assert result.exit_code == 0
    [session] = (ccm_home / "chats").iterdir()
    [entry] = (session / "raw.jsonl").read_bytes().splitlines()
    assert json.loads(entry)["content"] == "hi"


@pytest.mark.parametrize("fmt", ["jsonl", "claude-code", "auto"])
def test_a_deeply_nested_line_is_rejected_not_a_crash(
    fmt: str, tmp_path: Path, ccm_home: Path
) -> None:
    path = tmp_path / "deep.jsonl"
    good = user("good") if fmt == "jsonl" else cc_user("u1", "good", "deep")
    path.write_bytes(jl(good) + b"[" * 100_000 + b"\n")

    result = ccm("ingest", str(path), "--format", fmt)

    assert not crashed(result), result.exception
    assert result.exit_code == 1
    assert f"{path}:2: " in result.stderr
    [entry] = (ccm_home / "chats" / "deep" / "raw.jsonl").read_bytes().splitlines()
    assert json.loads(entry)["content"] == "good"
    [kept] = (ccm_home / "chats" / "deep" / "quarantine.jsonl").read_bytes().splitlines()
    assert json.loads(kept)["line"] == 2


@pytest.mark.parametrize("kind", [[], {}, ["user"]])
def test_auto_detection_survives_a_type_that_is_not_a_string(
    kind: Any, tmp_path: Path, ccm_home: Path
) -> None:
    path = tmp_path / "odd.jsonl"
    path.write_bytes(jl({"type": kind, "uuid": "x"}, user("good")))

    result = ccm("ingest", str(path))

    assert not crashed(result), result.exception
    [entry] = (ccm_home / "chats" / "odd" / "raw.jsonl").read_bytes().splitlines()
    assert json.loads(entry)["content"] == "good"
    assert result.exit_code == 1  # line 1 is no turn: reported and quarantined
    assert f"{path}:1: " in result.stderr


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(
            jl(
                {
                    "type": "file-history-snapshot",
                    "messageId": "b26b161c",
                    "snapshot": {"messageId": "b26b161c", "trackedFileBackups": {}},
                    "isSnapshotUpdate": False,
                }
            ),
            id="snapshots-only",
        ),
        pytest.param(b"", id="empty"),
    ],
)
def test_a_projects_folder_with_an_idle_transcript_imports_cleanly(
    data: bytes, copy_fixture: Any, ccm_home: Path
) -> None:
    session = "1af7fc5e-8455-4414-9ccd-011d40f70b2a"
    transcript = copy_fixture(f"claude-code/{session}.jsonl")
    (transcript.parent / "0b8c2d4e-idle.jsonl").write_bytes(data)

    result = ccm("ingest", str(transcript.parent), "--format", "auto")

    assert not crashed(result), result.exception
    assert len((ccm_home / "chats" / session / "raw.jsonl").read_bytes().splitlines()) > 0
    assert result.stderr == ""
    assert result.exit_code == 0


def test_a_lone_surrogate_is_kept_and_never_breaks_a_command(
    tmp_path: Path, ccm_home: Path
) -> None:
    path = tmp_path / "broken.jsonl"
    path.write_bytes(b'{"role": "user", "content": "broken \\ud800 escape in the deploy notes"}\n')
    assert ccm("ingest", str(path)).exit_code == 0
    [entry] = (ccm_home / "chats" / "broken" / "raw.jsonl").read_bytes().splitlines()
    assert json.loads(entry)["content"] == "broken \ud800 escape in the deploy notes"
    for args in (
        ["show", "broken"],
        ["recall", "deploy notes", "--json"],
        ["context", "broken", "--query", "what was in the deploy notes?"],
        ["summary", "broken"],
    ):
        result = ccm(*args)
        assert result.exit_code == 0, (args, result.output)
    assert "deploy notes" in ccm("recall", "deploy notes").stdout


# -- a `ts` that is not a date: the import time, a warning, the given value kept ------------


@pytest.mark.parametrize(
    "given",
    ["not a date", "", 1e300, 10**20, -(10**20), 10**400, [2024, 1, 17], {"day": 17}, True],
    ids=["text", "empty", "1e300", "far-future", "far-past", "10**400", "list", "object", "bool"],
)
@freeze_time("2026-01-02T03:04:05Z")
def test_a_ts_that_is_not_a_date_is_said_and_kept_in_meta(
    given: Any, tmp_path: Path, ccm_home: Path
) -> None:
    path = tmp_path / "when.jsonl"
    path.write_bytes(jl(user("dated", ts="2025-01-01T00:00:00Z"), user("undated", ts=given)))

    result = ccm("ingest", str(path), "--json")

    assert result.exit_code == 0, result.output
    [warning] = json.loads(result.stdout)["warnings"]
    assert (warning["source"], warning["line"]) == (str(path), 2)
    [said] = result.stderr.splitlines()
    assert said.startswith(f'Warning: {path}:2: "ts" ')
    assert "is not a date: the time of the import is stored instead" in said
    assert "meta.original_ts" in said and "ISO-8601" in said
    first, second = [
        json.loads(line)
        for line in (ccm_home / "chats" / "when" / "raw.jsonl").read_bytes().splitlines()
    ]
    assert first["ts"] == "2025-01-01T00:00:00.000Z" and "meta" not in first
    assert second["ts"] == "2026-01-02T03:04:05.000Z"
    assert second["meta"] == {"original_ts": given}


def test_a_missing_or_null_ts_is_no_warning(tmp_path: Path, ccm_home: Path) -> None:
    path = tmp_path / "plain.jsonl"
    path.write_bytes(jl(user("a"), user("b", ts=None)))

    result = ccm("ingest", str(path))

    assert (result.exit_code, result.stderr) == (0, "")
    for line in (ccm_home / "chats" / "plain" / "raw.jsonl").read_bytes().splitlines():
        assert "meta" not in json.loads(line)


# -- a hand-appended line of raw.jsonl that repeats a turn number ---------------------------


def _tiers(folder: Path) -> dict[str, bytes]:
    return {n: (folder / n).read_bytes() for n in ("manifest.yaml", "open.yaml", "working.yaml")}


def _repeat_a_turn(tmp_path: Path, ccm_home: Path) -> tuple[Path, bytes, bytes]:
    """A session of three turns, then turn 2 again appended by hand: the folder, the
    appended line, and raw.jsonl as it is then."""
    path = tmp_path / "chat.jsonl"
    path.write_bytes(
        jl(
            user("the deploy fails on the staging host"),
            {"role": "assistant", "content": "the disk is full; clear /var/log"},
            user("cleared, it deploys now"),
        )
    )
    assert ccm("ingest", str(path)).exit_code == 0
    folder = ccm_home / "chats" / "chat"
    line = json.dumps(
        {"turn": 2, "role": "user", "content": "added by hand", "ts": "2026-01-01T00:00:00Z"}
    ).encode()
    with open(folder / "raw.jsonl", "ab") as raw:
        raw.write(line + b"\n")
    return folder, line, (folder / "raw.jsonl").read_bytes()


def test_rebuild_says_a_repeated_turn_number_and_quarantines_the_line(
    tmp_path: Path, ccm_home: Path
) -> None:
    folder, line, raw = _repeat_a_turn(tmp_path, ccm_home)
    tiers = _tiers(folder)
    raw_path = folder / "raw.jsonl"

    done = subprocess.run(
        [sys.executable, "-m", "ccm", "rebuild", "chat"],
        env={**os.environ, "CCM_HOME": str(ccm_home)},
        capture_output=True,
        check=False,
    )

    assert done.returncode == 0, done.stderr
    said = done.stderr.decode()
    assert f"{raw_path}:4: turn 2 repeats an earlier turn number (the turn before it is 3)" in said
    assert "the line stays in raw.jsonl, is kept in quarantine.jsonl, and is skipped" in said
    assert "append it again with the next turn number" in said
    assert raw_path.read_bytes() == raw  # never rewritten
    [kept] = (folder / "quarantine.jsonl").read_bytes().splitlines()
    record = json.loads(kept)
    assert (record["source"], record["line"], record["raw"]) == (str(raw_path), 4, line.decode())
    assert _tiers(folder) == tiers  # the tiers skip it: turn numbers stay those of raw.jsonl
    assert ccm("rebuild", "chat").exit_code == 0
    assert len((folder / "quarantine.jsonl").read_bytes().splitlines()) == 1  # not twice


def test_the_incremental_update_skips_a_repeated_turn_as_a_rebuild_does(
    tmp_path: Path, ccm_home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder, _, _ = _repeat_a_turn(tmp_path, ccm_home)
    more = tmp_path / "more.jsonl"
    more.write_bytes(jl(user("and the next deploy?")))

    with caplog.at_level(logging.WARNING, logger="ccm.derive"):
        assert ccm("ingest", str(more), "--session", "chat").exit_code == 0

    assert "raw.jsonl:4: turn 2 repeats an earlier turn number" in caplog.text
    turns = [json.loads(x)["turn"] for x in (folder / "raw.jsonl").read_bytes().splitlines()]
    assert turns == [1, 2, 3, 2, 4]  # the next turn follows the highest number
    incremental = _tiers(folder)
    assert ccm("rebuild", "chat").exit_code == 0
    assert _tiers(folder) == incremental
    assert b"turns: 4\n" in incremental["manifest.yaml"]


def test_a_large_chatgpt_export_of_any_name_in_a_folder_is_found_by_its_content(
    tmp_path: Path, ccm_home: Path
) -> None:
    folder = tmp_path / "export"
    folder.mkdir()
    texts = [f"question {n}: " + "words to make it long " * 5000 for n in range(12)]
    (folder / "archive.json").write_bytes(chatgpt_export(*texts, ident="big"))
    (folder / "mapping-notes.json").write_bytes(
        json.dumps({"mapping": {"a": "b"}, "version": 2}).encode()
    )
    assert (folder / "archive.json").stat().st_size > 1 << 20  # read in part to tell

    result = ccm("ingest", str(folder), "--no-derive", "--json")

    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["inputs"] == 1
    entries = (ccm_home / "chats" / "big" / "raw.jsonl").read_bytes().splitlines()
    assert [json.loads(e)["content"] for e in entries] == texts
