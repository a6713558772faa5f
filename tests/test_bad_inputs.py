"""Bad input never crashes `ccm ingest`: each bad line is reported, quarantined, and skipped.

One table of cases; for each: the exit code, the message on stderr, the good lines that
still import, the rejected lines kept verbatim in quarantine.jsonl, and nothing written
outside the knowledge root.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from ccm.cli import main


def ccm(*args: str, input: str | bytes | None = None) -> Result:
    return CliRunner().invoke(main, list(args), input=input)


def crashed(result: Result) -> bool:
    """True when the command died of an exception instead of exiting on purpose."""
    return result.exception is not None and not isinstance(result.exception, SystemExit)


def jl(*records: Any) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in records)


def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def cc_user(uuid: str, text: str, session: str = "cc-1", **extra: Any) -> dict[str, Any]:
    return {
        "type": "user",
        "uuid": uuid,
        "sessionId": session,
        "timestamp": "2026-01-01T00:00:00Z",
        "message": {"role": "user", "content": text},
        **extra,
    }


def outside(tmp_path: Path, root: Path) -> list[Path]:
    return sorted(p for p in tmp_path.rglob("*") if root not in (p, *p.parents))


HUGE = json.dumps(user("x" * 4969)).encode()
assert len(HUGE) == 5000


CASES = [
    pytest.param(
        None,
        "bad.jsonl",
        jl(user("good 1")) + b'{"role": "user", "content": \n' + jl(user("good 2")),
        [],
        1,
        "bad.jsonl:2: invalid JSON",
        "bad",
        ["good 1", "good 2"],
        [2],
        {},
        id="malformed-json",
    ),
    pytest.param(
        None,
        "types.jsonl",
        jl(user("good"), {"role": "user", "content": 5}),
        [],
        1,
        'types.jsonl:2: "content" must be a string, found int',
        "types",
        ["good"],
        [2],
        {},
        id="wrong-type",
    ),
    pytest.param(
        None,
        "roles.jsonl",
        jl({"role": "wizard", "content": "abracadabra"}, user("good")),
        [],
        1,
        "roles.jsonl:1: role must be one of user, assistant, system, tool",
        "roles",
        ["good"],
        [1],
        {},
        id="unknown-role",
    ),
    pytest.param(
        None,
        "shapes.jsonl",
        jl(user("good"), [1, 2], "text", None),
        [],
        1,
        "shapes.jsonl:3: expected a JSON object",
        "shapes",
        ["good"],
        [2, 3, 4],
        {},
        id="not-objects",
    ),
    pytest.param(
        "ingest: {max_line_bytes: 2048}\n",
        "huge.jsonl",
        jl(user("good 1")) + HUGE + b"\n" + jl(user("good 2")),
        [],
        1,
        "huge.jsonl:2: line is 5000 bytes, over the limit of 2048",
        "huge",
        ["good 1", "good 2"],
        [2],
        {},
        id="line-over-max-line-bytes",
    ),
    pytest.param(
        None,
        "latin1.jsonl",
        b'{"role": "user", "content": "caf\xe9"}\n' + jl(user("good")),
        [],
        1,
        "latin1.jsonl:1: invalid UTF-8",
        "latin1",
        ["good"],
        [1],
        {},
        id="invalid-utf8",
    ),
    pytest.param(
        None,
        "cc.jsonl",
        jl(
            cc_user("u1", "hello"),
            {"type": "wibble", "uuid": "w1", "sessionId": "cc-1", "payload": [1, 2]},
            cc_user("u2", "still here"),
        ),
        [],
        0,
        None,
        "cc-1",
        ["hello", "still here"],
        [],
        {"wibble": 1},
        id="claude-code-unknown-record-type",
    ),
    pytest.param(
        None,
        "cc.jsonl",
        jl(cc_user("u1", "hello"), {"type": "assistant", "uuid": "a1", "sessionId": "cc-1"}),
        [],
        1,
        "cc.jsonl:2: assistant record without message.content",
        "cc-1",
        ["hello"],
        [2],
        {},
        id="claude-code-record-without-content",
    ),
    pytest.param(
        None,
        "traversal.jsonl",
        jl(cc_user("u1", "hello", "../../etc"), cc_user("u2", "again", "../../etc")),
        [],
        0,
        None,
        "traversal",
        ["hello", "again"],
        [],
        {},
        id="claude-code-path-traversal-session-id",
    ),
    pytest.param(
        None,
        "traversal.jsonl",
        jl(user("good")) + b"{oops\n",
        ["--session", "safe"],
        1,
        "traversal.jsonl:2: invalid JSON",
        "safe",
        ["good"],
        [2],
        {},
        id="bad-line-goes-to-the-chosen-session",
    ),
    pytest.param(
        None,
        "empty.jsonl",
        b"",
        ["--format", "jsonl"],
        0,
        None,
        "empty",
        [],
        [],
        {},
        id="empty-file",
    ),
    pytest.param(
        None,
        "blank.jsonl",
        b"\n   \n\r\n",
        ["--format", "claude-code"],
        0,
        None,
        "blank",
        [],
        [],
        {},
        id="blank-lines-only",
    ),
    pytest.param(
        "ingest: {max_lines: 5}\n",
        "fine.jsonl",
        jl(user("good")),
        [],
        1,
        "config.yaml: data.ingest must not contain {'max_lines'}",
        "fine",
        [],
        [],
        None,
        id="config-unknown-key",
    ),
]


@pytest.mark.parametrize(
    (
        "config",
        "name",
        "data",
        "args",
        "exit_code",
        "message",
        "session",
        "imported",
        "quarantined",
        "skipped",
    ),
    CASES,
)
def test_bad_input(
    config: str | None,
    name: str,
    data: bytes,
    args: list[str],
    exit_code: int,
    message: str | None,
    session: str,
    imported: list[str],
    quarantined: list[int],
    skipped: dict[str, int] | None,
    tmp_path: Path,
    ccm_home: Path,
) -> None:
    if config is not None:
        ccm_home.mkdir()
        (ccm_home / "config.yaml").write_text(config, encoding="utf-8")
    path = tmp_path / "in" / name
    path.parent.mkdir()
    path.write_bytes(data)
    before = outside(tmp_path, ccm_home)

    result = ccm("ingest", str(path), "--json", *args)

    assert not crashed(result), result.exception
    assert result.exit_code == exit_code, result.output
    if skipped is None:  # the command stopped before reading any input
        assert result.stdout == ""
    else:
        report = json.loads(result.stdout)
        assert report["skipped"] == skipped
        assert report["turns_added"] == len(imported)
        assert len(report["rejected"]) == len(quarantined)
    if message is None:
        assert result.stderr == ""
    else:
        assert result.stderr.startswith("Error: ")
        assert message in result.stderr
    assert outside(tmp_path, ccm_home) == before

    folder = ccm_home / "chats" / session
    chats = ccm_home / "chats"
    if imported:
        entries = [json.loads(line) for line in (folder / "raw.jsonl").read_bytes().splitlines()]
        assert [e["content"] for e in entries] == imported
        assert [e["turn"] for e in entries] == list(range(1, len(imported) + 1))
        assert sorted(p.name for p in chats.iterdir()) == [session]
    else:
        assert not (folder / "raw.jsonl").exists()

    quarantine = folder / "quarantine.jsonl"
    if not quarantined:
        assert not quarantine.exists()
        return
    kept = [json.loads(line) for line in quarantine.read_bytes().splitlines()]
    assert sorted(k["line"] for k in kept) == quarantined
    source_lines = data.split(b"\n")
    for record in kept:
        assert record["source"] == str(path)
        assert record["error"]
        raw = (
            record["raw"].encode()
            if record["encoding"] == "utf-8"
            else base64.b64decode(record["raw"])
        )
        assert raw == source_lines[record["line"] - 1]
        assert f"{path}:{record['line']}: {record['error']}" in result.stderr

    again = ccm("ingest", str(path), *args)
    assert again.exit_code == exit_code
    assert len(quarantine.read_bytes().splitlines()) == len(quarantined)


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
