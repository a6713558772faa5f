"""`ccm ingest` of plain JSON lines: numbering, timestamps, idempotency, stdin, concurrency."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from freezegun import freeze_time

from tests.helpers import ccm


def lines(*turns: dict[str, Any]) -> str:
    return "".join(json.dumps(turn) + "\n" for turn in turns)


def raw_entries(home: Path, session: str) -> list[dict[str, Any]]:
    path = home / "chats" / session / "raw.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def said(home: Path, session: str) -> list[tuple[str, str]]:
    return [(e["role"], e["content"]) for e in raw_entries(home, session)]


CHAT = [
    {"role": "user", "content": "Why does the watcher miss appends?"},
    {"role": "assistant", "content": "It only handles created events."},
    {"role": "user", "content": "Fix it?"},
    {"role": "assistant", "content": "Handle modified events too."},
]


# -- numbering and timestamps ---------------------------------------------------------


@freeze_time("2026-01-02T03:04:05Z")
def test_missing_turn_and_ts_are_assigned(tmp_path: Path, ccm_home: Path) -> None:
    path = tmp_path / "chat.jsonl"
    path.write_text(lines(*CHAT), encoding="utf-8")

    result = ccm("ingest", str(path))

    assert result.exit_code == 0, result.stderr
    assert "chat  +4 (turns 1-4)  [jsonl]" in result.stdout
    entries = raw_entries(ccm_home, "chat")
    assert [e["turn"] for e in entries] == [1, 2, 3, 4]
    assert {e["ts"] for e in entries} == {"2026-01-02T03:04:05.000Z"}
    assert [(e["role"], e["content"]) for e in entries] == [(t["role"], t["content"]) for t in CHAT]
    assert {e["source"] for e in entries} == {"jsonl"}


@pytest.mark.parametrize(
    ("given", "stored"),
    [
        ("2025-11-01T01:23:44.615Z", "2025-11-01T01:23:44.615Z"),
        ("2025-11-01T01:23:44Z", "2025-11-01T01:23:44.000Z"),
        ("2025-11-01T03:23:44.5+02:00", "2025-11-01T01:23:44.500Z"),
        ("2025-11-01T01:23:44", "2025-11-01T01:23:44.000Z"),  # no zone: UTC
        (1762000000, "2025-11-01T12:26:40.000Z"),  # epoch seconds
        (1762000000123, "2025-11-01T12:26:40.123Z"),  # epoch milliseconds
        ("yesterday", "2026-01-02T03:04:05.000Z"),  # unusable: the time of the import
    ],
)
@freeze_time("2026-01-02T03:04:05Z")
def test_given_ts_is_kept_in_utc_with_milliseconds(
    given: object, stored: str, tmp_path: Path, ccm_home: Path
) -> None:
    path = tmp_path / "ts.jsonl"
    path.write_text(lines({"role": "user", "content": "hi", "ts": given}), encoding="utf-8")

    assert ccm("ingest", str(path)).exit_code == 0

    [entry] = raw_entries(ccm_home, "ts")
    assert entry["ts"] == stored


def test_a_source_turn_number_is_kept_as_meta(tmp_path: Path, ccm_home: Path) -> None:
    path = tmp_path / "numbered.jsonl"
    path.write_text(
        lines(
            {"role": "user", "content": "a", "turn": 40},
            {"role": "assistant", "content": "b", "turn": 41, "meta": {"model": "m"}},
        ),
        encoding="utf-8",
    )

    assert ccm("ingest", str(path)).exit_code == 0

    entries = raw_entries(ccm_home, "numbered")
    assert [e["turn"] for e in entries] == [1, 2]
    assert [e["meta"] for e in entries] == [{"source_turn": 40}, {"model": "m", "source_turn": 41}]


# -- idempotency ------------------------------------------------------------------------


def test_the_same_file_twice_adds_nothing(tmp_path: Path, ccm_home: Path) -> None:
    path = tmp_path / "chat.jsonl"
    path.write_text(lines(*CHAT), encoding="utf-8")
    raw = ccm_home / "chats" / "chat" / "raw.jsonl"

    first = ccm("ingest", str(path), "--json")
    before = raw.read_bytes()
    second = ccm("ingest", str(path), "--json")

    assert json.loads(first.stdout)["turns_added"] == 4
    report = json.loads(second.stdout)
    assert (report["turns_added"], report["duplicates"]) == (0, 4)
    assert raw.read_bytes() == before


def test_a_longer_version_appends_only_the_new_lines(tmp_path: Path, ccm_home: Path) -> None:
    path = tmp_path / "chat.jsonl"
    path.write_text(lines(*CHAT), encoding="utf-8")
    assert ccm("ingest", str(path)).exit_code == 0
    new = [
        {"role": "user", "content": "Thanks."},
        {"role": "assistant", "content": "Anything else?"},
        {"role": "user", "content": "No."},
    ]
    path.write_text(lines(*CHAT, *new), encoding="utf-8")

    result = ccm("ingest", str(path), "--json")

    report = json.loads(result.stdout)
    assert report["sessions"][0]["added"] == 3
    assert (report["sessions"][0]["first_turn"], report["sessions"][0]["last_turn"]) == (5, 7)
    assert said(ccm_home, "chat") == [(t["role"], t["content"]) for t in [*CHAT, *new]]


def test_repeated_identical_lines_are_all_kept_once(tmp_path: Path, ccm_home: Path) -> None:
    ok = {"role": "assistant", "content": "ok"}
    chat = [
        {"role": "user", "content": "step 1"},
        ok,
        {"role": "user", "content": "step 2"},
        ok,
        {"role": "user", "content": "step 3"},
        ok,
    ]
    path = tmp_path / "oks.jsonl"
    path.write_text(lines(*chat), encoding="utf-8")

    assert json.loads(ccm("ingest", str(path), "--json").stdout)["turns_added"] == 6
    assert json.loads(ccm("ingest", str(path), "--json").stdout)["turns_added"] == 0
    assert Counter(said(ccm_home, "oks"))[("assistant", "ok")] == 3

    path.write_text(lines(*chat, {"role": "user", "content": "step 4"}, ok), encoding="utf-8")
    assert json.loads(ccm("ingest", str(path), "--json").stdout)["turns_added"] == 2

    assert Counter(said(ccm_home, "oks"))[("assistant", "ok")] == 4
    assert said(ccm_home, "oks")[-2:] == [("user", "step 4"), ("assistant", "ok")]


def test_lines_with_ids_are_recognised_by_id(tmp_path: Path, ccm_home: Path) -> None:
    path = tmp_path / "ids.jsonl"
    path.write_text(
        lines(
            {"role": "user", "content": "a", "id": "m1"}, {"role": "user", "content": "a", "id": 2}
        ),
        encoding="utf-8",
    )
    assert ccm("ingest", str(path)).exit_code == 0
    assert ccm("ingest", str(path)).exit_code == 0

    assert [e["id"] for e in raw_entries(ccm_home, "ids")] == ["m1", "2"]


# -- where input comes from, and where it goes ----------------------------------------------


@pytest.mark.parametrize(
    ("args", "session"), [(["--session", "s1"], "s1"), (["-s", "s1"], "s1"), ([], "stdin")]
)
def test_dash_reads_standard_input(args: list[str], session: str, ccm_home: Path) -> None:
    result = ccm("ingest", "-", *args, input=lines(*CHAT[:2]))

    assert result.exit_code == 0, result.stderr
    assert said(ccm_home, session) == [(t["role"], t["content"]) for t in CHAT[:2]]


def test_session_option_overrides_the_file_name(tmp_path: Path, ccm_home: Path) -> None:
    path = tmp_path / "chat.jsonl"
    path.write_text(lines(*CHAT), encoding="utf-8")

    assert ccm("ingest", str(path), "--session", "my-chat").exit_code == 0

    assert [p.name for p in (ccm_home / "chats").iterdir()] == ["my-chat"]
    assert len(raw_entries(ccm_home, "my-chat")) == 4


def test_format_can_be_forced_on_any_file_name(tmp_path: Path, ccm_home: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text(lines(*CHAT), encoding="utf-8")

    result = ccm("ingest", str(path), "--format", "jsonl")

    assert result.exit_code == 0, result.stderr
    assert len(raw_entries(ccm_home, "notes")) == 4


def test_an_unknown_format_is_an_error_that_names_the_file(tmp_path: Path, ccm_home: Path) -> None:
    path = tmp_path / "scores.csv"
    path.write_text("name,score\nada,3\n", encoding="utf-8")

    result = ccm("ingest", str(path))

    assert result.exit_code == 1
    assert "Error:" in result.stderr
    assert "scores.csv" in result.stderr
    assert "--format" in result.stderr
    assert not list((ccm_home / "chats").iterdir())


# -- several writers at once ------------------------------------------------------------


def test_concurrent_ingests_into_one_session_interleave_cleanly(
    tmp_path: Path, ccm_home: Path
) -> None:
    files = []
    for writer in range(4):
        path = tmp_path / f"writer{writer}.jsonl"
        path.write_text(
            lines(
                *(
                    {"role": ("user", "assistant")[n % 2], "content": f"writer {writer} line {n}"}
                    for n in range(500)
                )
            ),
            encoding="utf-8",
        )
        files.append(path)

    processes = [
        subprocess.Popen(
            [sys.executable, "-m", "ccm.cli", "ingest", str(path), "--session", "shared"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for path in files
    ]
    outcomes = [process.communicate(timeout=120) for process in processes]

    assert [p.returncode for p in processes] == [0, 0, 0, 0], outcomes
    raw = ccm_home / "chats" / "shared" / "raw.jsonl"
    assert len(raw.read_bytes().splitlines()) == 2000
    entries = raw_entries(ccm_home, "shared")
    assert [e["turn"] for e in entries] == list(range(1, 2001))
    contents = Counter(e["content"] for e in entries)
    assert contents == Counter(f"writer {w} line {n}" for w in range(4) for n in range(500))
    # each writer's lines stay in their order
    for writer in range(4):
        mine = [e["content"] for e in entries if e["content"].startswith(f"writer {writer} ")]
        assert mine == [f"writer {writer} line {n}" for n in range(500)]
