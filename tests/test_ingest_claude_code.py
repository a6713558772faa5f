"""`ccm ingest` of Claude Code transcripts: merged messages, tool turns, subagents, live files.

The expected numbers below were counted by hand from the fixture files, with the rules
of ccm/ingest/claude_code.py: the records of one assistant message (same message.id)
are one turn; each tool_result block is a turn of role tool; an isMeta user record is
a system turn; sidechain records go to ``<session>~agent-<8 hex of the root uuid>``;
summary and unknown record types are skipped and counted.
"""

from __future__ import annotations

import json
import re
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from freezegun import freeze_time
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ccm.ingest.pipeline import ingest
from ccm.store import Store
from tests.conftest import FIXTURES
from tests.helpers import ccm

S1 = "1af7fc5e-8455-4414-9ccd-011d40f70b2a"
S2 = "5c0375b4-57a5-4f26-b12d-d022ee4e51b7"
MERGED = "msg_018mu4atNCkxSiLt7VVQquTL"  # lines 6-10 of S1: five tool_use records


def raw_entries(home: Path, session: str) -> list[dict[str, Any]]:
    path = home / "chats" / session / "raw.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def file_records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


# -- every fixture, counted by hand ---------------------------------------------------


@pytest.mark.parametrize(
    ("fixture", "sessions", "exit_code", "rejected", "skipped"),
    [
        # 1 user + 1 isMeta system + 7 assistant messages (13 records) + 12 tool results
        (f"{S1}.jsonl", {S1: 21}, 0, 0, {}),
        # main: 1 user + 1 system + 11 assistant messages + 12 tool results;
        # subagent rooted at 6340ddef: 1 user + 3 assistant messages + 2 tool results;
        # subagent rooted at 83e2917c: 1 user + 7 assistant messages + 6 tool results
        (
            f"{S2}.jsonl",
            {S2: 25, f"{S2}~agent-6340ddef": 6, f"{S2}~agent-83e2917c": 14},
            0,
            0,
            {},
        ),
        # lines 1-9, 12, 17, 18 are turns (17 is another session's record, kept here);
        # 10 and 11 lack message.content, 13, 15, 16 are not objects; 14 has no type
        ("edge_cases.jsonl", {"edge_cases": 12}, 1, 5, {"summary": 1, "untyped": 1}),
        ("representative_messages.jsonl", {"test_session": 11}, 0, 0, {"summary": 1}),
        ("session_b.jsonl", {"session_b": 3}, 0, 0, {}),
        ("todowrite_examples.jsonl", {"todowrite_session": 11}, 0, 0, {"summary": 1}),
    ],
)
def test_each_fixture_gives_the_sessions_and_turns_counted_by_hand(
    fixture: str,
    sessions: dict[str, int],
    exit_code: int,
    rejected: int,
    skipped: dict[str, int],
    copy_fixture: Any,
    ccm_home: Path,
) -> None:
    path = copy_fixture(f"claude-code/{fixture}")

    result = ccm("ingest", str(path), "--json")

    assert result.exit_code == exit_code, result.stderr
    report = json.loads(result.stdout)
    assert {s["session"]: s["added"] for s in report["sessions"]} == sessions
    assert report["turns_added"] == sum(sessions.values())
    assert len(report["rejected"]) == rejected
    assert report["skipped"] == skipped
    assert sorted(p.name for p in (ccm_home / "chats").iterdir()) == sorted(sessions)
    for session, turns in sessions.items():
        entries = raw_entries(ccm_home, session)
        assert [e["turn"] for e in entries] == list(range(1, turns + 1))
        assert {e["source"] for e in entries} == {"claude-code"}


# -- merging records into turns -------------------------------------------------------


def test_records_of_one_message_are_one_turn(copy_fixture: Any, ccm_home: Path) -> None:
    path = copy_fixture(f"claude-code/{S1}.jsonl")
    uuids = [r["uuid"] for r in file_records(path) if r.get("message", {}).get("id") == MERGED]
    assert len(uuids) == 5

    assert ccm("ingest", str(path)).exit_code == 0

    [turn] = [e for e in raw_entries(ccm_home, S1) if e.get("id") == MERGED]
    assert turn["role"] == "assistant"
    lines = turn["content"].split("\n")
    assert len(lines) == 5
    assert all(line.startswith("[tool_use] ") for line in lines)
    assert lines[0].startswith("[tool_use] Bash {")
    assert turn["meta"]["parts"] == uuids
    assert [c["name"] for c in turn["meta"]["tool_calls"]] == [
        "Bash",
        "Glob",
        "Glob",
        "Glob",
        "Glob",
    ]


@pytest.mark.parametrize(
    ("call_id", "name"),
    [
        ("toolu_01FHpVtawG6NqQ943umBMky8", "TodoWrite"),
        ("toolu_01UwiR8tuGvGJN2J7BW4KbPx", "Bash"),  # answered after two other results
        ("toolu_01QhjL1byZZsWexdkc7SBXUi", "Glob"),
        ("toolu_01LM7vfs6eMdhHJokVajzJA1", "Write"),
    ],
)
def test_tool_results_are_tool_turns_named_after_their_call(
    call_id: str, name: str, copy_fixture: Any, ccm_home: Path
) -> None:
    path = copy_fixture(f"claude-code/{S1}.jsonl")
    assert ccm("ingest", str(path)).exit_code == 0

    [turn] = [e for e in raw_entries(ccm_home, S1) if e.get("id") == f"result:{call_id}"]
    assert turn["role"] == "tool"
    assert turn["tool"] == {"id": call_id, "name": name}


def test_injected_meta_text_is_a_system_turn(copy_fixture: Any, ccm_home: Path) -> None:
    path = copy_fixture(f"claude-code/{S1}.jsonl")
    assert ccm("ingest", str(path)).exit_code == 0

    first, second = raw_entries(ccm_home, S1)[:2]
    assert first["role"] == "user"
    assert first["content"].startswith("<command-message>init is analyzing")
    assert second["role"] == "system"
    assert second["meta"] == {"injected": True}
    assert second["content"].startswith("Please analyze this codebase")


# -- subagents --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("agent", "first_words"),
    [("6340ddef", "Examine the package.json"), ("83e2917c", "Analyze the current project")],
)
def test_subagent_sessions_name_their_parent(
    agent: str, first_words: str, copy_fixture: Any, ccm_home: Path
) -> None:
    path = copy_fixture(f"claude-code/{S2}.jsonl")
    assert ccm("ingest", str(path)).exit_code == 0

    entries = raw_entries(ccm_home, f"{S2}~agent-{agent}")
    assert entries[0]["role"] == "user"
    assert entries[0]["content"].startswith(first_words)
    assert entries[0]["meta"]["parent_session"] == S2
    assert all("parent_session" not in e.get("meta", {}) for e in entries[1:])
    # the parent holds none of the subagent's turns (only the Task call that started it)
    parent_ids = {e["id"] for e in raw_entries(ccm_home, S2)}
    assert parent_ids.isdisjoint(e["id"] for e in entries)
    assert "parent_session" not in raw_entries(ccm_home, S2)[0].get("meta", {})


# -- thinking ---------------------------------------------------------------------------


THINKING = [
    {
        "type": "user",
        "uuid": "u1",
        "sessionId": "think-1",
        "timestamp": "2026-01-01T00:00:00Z",
        "message": {"role": "user", "content": "Is 91 prime?"},
    },
    {
        "type": "assistant",
        "uuid": "a1",
        "sessionId": "think-1",
        "timestamp": "2026-01-01T00:00:01Z",
        "message": {
            "id": "msg_t",
            "role": "assistant",
            "content": [{"type": "thinking", "thinking": "91 = 7 * 13", "signature": "c2ln"}],
        },
    },
    {
        "type": "assistant",
        "uuid": "a2",
        "sessionId": "think-1",
        "timestamp": "2026-01-01T00:00:02Z",
        "message": {
            "id": "msg_t",
            "role": "assistant",
            "content": [{"type": "text", "text": "No: 91 is 7 times 13."}],
        },
    },
]


@pytest.mark.parametrize(
    ("flags", "content", "skipped"),
    [
        ([], "No: 91 is 7 times 13.", {"thinking": 1}),
        (["--no-thinking"], "No: 91 is 7 times 13.", {"thinking": 1}),
        (["--thinking"], "[thinking] 91 = 7 * 13\nNo: 91 is 7 times 13.", {}),
    ],
)
def test_thinking_is_left_out_unless_asked_for(
    flags: list[str], content: str, skipped: dict[str, int], tmp_path: Path, ccm_home: Path
) -> None:
    path = tmp_path / "think.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in THINKING), encoding="utf-8")

    result = ccm("ingest", str(path), "--json", *flags)

    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["skipped"] == skipped
    user, assistant = raw_entries(ccm_home, "think-1")
    assert user["content"] == "Is 91 prime?"
    assert assistant["content"] == content


def test_text_after_a_tool_result_without_id_is_kept(tmp_path: Path, ccm_home: Path) -> None:
    record = {
        "type": "user",
        "uuid": "u1",
        "sessionId": "mixed",
        "message": {
            "content": [
                {"type": "text", "text": "before"},
                {"type": "tool_result", "content": "result without id"},
                {"type": "text", "text": "after"},
            ]
        },
    }
    path = tmp_path / "mixed.jsonl"
    path.write_text(json.dumps(record) + "\n", encoding="utf-8")

    result = ccm("ingest", str(path), "--json")

    assert json.loads(result.stdout)["duplicates"] == 0
    entries = raw_entries(ccm_home, "mixed")
    assert [(e["role"], e["content"]) for e in entries] == [
        ("user", "before"),
        ("tool", "result without id"),
        ("user", "after"),
    ]


# -- records that are not turns -----------------------------------------------------------


def test_non_conversation_records_are_skipped_and_counted(tmp_path: Path, ccm_home: Path) -> None:
    records = [
        {"type": "summary", "summary": "Primes", "leafUuid": "a1"},
        {"type": "file-history-snapshot", "messageId": "m", "snapshot": {}},
        {"type": "user", "uuid": "u1", "sessionId": "skips", "message": {"content": "hi"}},
        {"type": "system", "uuid": "s1", "sessionId": "skips", "subtype": "turn_duration"},
        {"type": "progress", "uuid": "p1", "sessionId": "skips", "data": {"n": 1}},
        {"type": "wibble", "uuid": "w1", "sessionId": "skips", "message": {"content": "?"}},
        {
            "type": "assistant",
            "uuid": "a1",
            "sessionId": "skips",
            "message": {"id": "m1", "content": [{"type": "text", "text": "hello"}]},
        },
    ]
    path = tmp_path / "skips.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")

    result = ccm("ingest", str(path), "--json")

    assert result.exit_code == 0, result.stderr
    assert result.stderr == ""
    report = json.loads(result.stdout)
    assert report["skipped"] == {
        "file-history-snapshot": 1,
        "progress": 1,
        "summary": 1,
        "system": 1,
        "wibble": 1,
    }
    assert report["rejected"] == []
    entries = raw_entries(ccm_home, "skips")
    assert [(e["role"], e["content"]) for e in entries] == [("user", "hi"), ("assistant", "hello")]
    assert entries[0]["meta"]["title"] == "Primes"
    assert not (ccm_home / "chats" / "skips" / "quarantine.jsonl").exists()


def test_skipped_records_are_listed_in_the_summary(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text(
        '{"type":"summary","summary":"t","leafUuid":"x"}\n'
        '{"type":"wibble","uuid":"w","sessionId":"s"}\n'
        '{"type":"user","uuid":"u","sessionId":"s","message":{"content":"hi"}}\n',
        encoding="utf-8",
    )

    result = ccm("ingest", str(path))

    assert result.exit_code == 0
    assert "Skipped on purpose: summary 1, wibble 1" in result.stdout
    assert "s  +1 (turns 1-1)  [claude-code]" in result.stdout


# -- idempotency ------------------------------------------------------------------------


def test_importing_the_fixture_folder_twice_adds_nothing(copy_fixture: Any, ccm_home: Path) -> None:
    folder = copy_fixture("claude-code")

    first = ccm("ingest", str(folder), "--json")
    before = snapshot(ccm_home)
    second = ccm("ingest", str(folder), "--json")

    assert first.exit_code == 1  # edge_cases.jsonl has 5 bad lines
    assert json.loads(first.stdout)["turns_added"] == 21 + 25 + 6 + 14 + 12 + 11 + 3 + 11
    report = json.loads(second.stdout)
    assert report["turns_added"] == 0
    assert report["duplicates"] == json.loads(first.stdout)["turns_added"]
    assert second.exit_code == 1  # the same bad lines are reported again ...
    assert snapshot(ccm_home) == before  # ... but nothing on disk changes


# -- a transcript read while Claude Code is still writing it -----------------------------------


def test_a_growing_transcript_loses_nothing(
    copy_fixture: Any, tmp_path: Path, ccm_home: Path
) -> None:
    full = copy_fixture(f"claude-code/{S1}.jsonl")
    lines = full.read_bytes().splitlines(keepends=True)
    # line 7 is the 2nd of the 5 records of MERGED: the cut falls inside the message
    assert json.loads(lines[6])["message"]["id"] == MERGED
    assert json.loads(lines[7])["message"]["id"] == MERGED
    live = tmp_path / "live" / full.name
    live.parent.mkdir()

    live.write_bytes(b"".join(lines[:7]))
    first = ccm("ingest", str(live), "--json")
    live.write_bytes(b"".join(lines))
    second = ccm("ingest", str(live), "--json")
    one_shot = ccm("--root", str(tmp_path / "one-shot"), "ingest", str(full), "--json")

    assert (first.exit_code, second.exit_code, one_shot.exit_code) == (0, 0, 0)
    assert json.loads(first.stdout)["turns_added"] == 5
    entries = raw_entries(ccm_home, S1)
    fresh = raw_entries(tmp_path / "one-shot", S1)
    continuations = [e for e in entries if "continues" in e.get("meta", {})]
    assert len(fresh) == 21
    assert len(continuations) == 1
    assert len(entries) == len(fresh) + len(continuations)
    assert [e["turn"] for e in entries] == list(range(1, len(entries) + 1))

    [more] = continuations
    uuids = [json.loads(line)["uuid"] for line in lines[5:10]]
    assert more["meta"]["continues"] == MERGED
    assert more["meta"]["parts"] == uuids[2:]
    [head] = [e for e in entries if e.get("id") == MERGED]
    assert head["meta"]["parts"] == uuids[:2]
    assert more["turn"] > head["turn"]

    def tool_lines(turns: list[dict[str, Any]]) -> Counter[str]:
        return Counter(
            line
            for turn in turns
            for line in turn["content"].split("\n")
            if line.startswith("[tool_use] ")
        )

    calls = [
        block
        for record in file_records(full)
        if record["type"] == "assistant"
        for block in record["message"]["content"]
        if block["type"] == "tool_use"
    ]
    assert tool_lines(entries) == tool_lines(fresh)
    assert sum(tool_lines(entries).values()) == len(calls) == 12
    for call in calls:
        assert any(f"[tool_use] {call['name']} " in line for line in tool_lines(entries))
    # every tool result is there once
    result_ids = [e["id"] for e in entries if e["role"] == "tool"]
    assert sorted(result_ids) == sorted(f"result:{call['id']}" for call in calls)


def test_a_transcript_caught_mid_line_is_not_an_error(
    copy_fixture: Any, tmp_path: Path, ccm_home: Path
) -> None:
    full = copy_fixture(f"claude-code/{S1}.jsonl")
    lines = full.read_bytes().splitlines(keepends=True)
    live = tmp_path / "live" / full.name
    live.parent.mkdir()
    live.write_bytes(b"".join(lines[:7]) + lines[7][:60])  # line 8 is half written

    first = ccm("ingest", str(live))
    live.write_bytes(b"".join(lines))
    second = ccm("ingest", str(live))

    assert len(raw_entries(ccm_home, S1)) == 22
    assert not (ccm_home / "chats" / S1 / "quarantine.jsonl").exists()
    assert (first.exit_code, first.stderr) == (0, "")
    assert second.exit_code == 0


# -- bad lines ----------------------------------------------------------------------------


def test_bad_lines_are_quarantined_verbatim(copy_fixture: Any, ccm_home: Path) -> None:
    path = copy_fixture("claude-code/edge_cases.jsonl")
    source_lines = path.read_text(encoding="utf-8").split("\n")
    quarantine = ccm_home / "chats" / "edge_cases" / "quarantine.jsonl"

    result = ccm("ingest", str(path))

    assert result.exit_code == 1
    for line in (10, 11, 13, 15, 16):
        assert f"Error: {path}:{line}: " in result.stderr
    assert result.stderr.count("Error: ") == 5
    assert "Rejected 5 line(s)" in result.stdout
    records = [json.loads(line) for line in quarantine.read_text(encoding="utf-8").splitlines()]
    assert sorted(r["line"] for r in records) == [10, 11, 13, 15, 16]
    for record in records:
        assert record["source"] == str(path)
        assert record["error"]
        assert record["encoding"] == "utf-8"
        assert record["raw"] == source_lines[record["line"] - 1]
    by_line = {r["line"]: r for r in records}
    assert "without message.content" in by_line[10]["error"]
    assert "found int" in by_line[15]["error"]

    before = quarantine.read_bytes()
    again = ccm("ingest", str(path))

    assert again.exit_code == 1
    assert quarantine.read_bytes() == before


# -- what the engine and the vault make of real transcripts ----------------------------


def test_a_local_command_caveat_is_the_client_talking_not_the_user(
    copy_fixture: Any, ccm_home: Path
) -> None:
    path = copy_fixture("claude-code/edge_cases.jsonl")
    ccm("ingest", str(path))
    [caveat] = [e for e in raw_entries(ccm_home, "edge_cases") if "Caveat:" in e["content"]]
    assert caveat["role"] == "system" and caveat["meta"] == {"injected": True}
    working = yaml.safe_load((ccm_home / "chats" / "edge_cases" / "working.yaml").read_text())
    assert not any("Caveat" in item for item in working["critical"])


def test_topics_are_words_of_the_conversation_not_of_tool_payloads(
    copy_fixture: Any, ccm_home: Path
) -> None:
    path = copy_fixture(f"claude-code/{S2}.jsonl")
    assert ccm("ingest", str(path)).exit_code == 0
    for session in (S2, f"{S2}~agent-83e2917c", f"{S2}~agent-6340ddef"):
        manifest = yaml.safe_load((ccm_home / "chats" / session / "manifest.yaml").read_text())
        opened = yaml.safe_load((ccm_home / "chats" / session / "open.yaml").read_text())
        words = [w for s in manifest["segments"] for w in s["topic"]]
        words += [w for e in opened["efforts"] for w in e["keywords"]]
        assert words and all(any(c.isalnum() for c in w) for w in words), words
        assert not any(w.startswith(("n\u2502", "\u251c", "\u2514")) for w in words), words
        # a segment's topic is named by words the session says, never by a stem
        # ("execut"), even where the word is only in a turn its summary did not draw on
        said = " ".join(e["content"] for e in raw_entries(ccm_home, session)).lower()
        for word in (w for s in manifest["segments"] for w in s["topic"]):
            assert re.search(rf"(?<!\w){re.escape(word.lower())}(?!\w)", said), word


def test_a_subagents_brief_gives_its_critical_items(copy_fixture: Any, ccm_home: Path) -> None:
    path = copy_fixture(f"claude-code/{S2}.jsonl")
    assert ccm("ingest", str(path)).exit_code == 0
    working = yaml.safe_load(
        (ccm_home / "chats" / f"{S2}~agent-6340ddef" / "working.yaml").read_text()
    )
    assert any("Return a structured summary (100-150 words)" in c for c in working["critical"])
    assert any("Dependencies" in c for c in working["critical"])


def test_show_spreads_a_tool_call_and_pairs_each_result_with_its_call(
    copy_fixture: Any, ccm_home: Path
) -> None:
    path = copy_fixture(f"claude-code/{S1}.jsonl")
    assert ccm("ingest", str(path)).exit_code == 0
    entries = raw_entries(ccm_home, S1)
    result = next(e for e in entries if e["role"] == "tool" and (e.get("tool") or {}).get("id"))
    caller = next(
        e
        for e in entries
        if any(c["id"] == result["tool"]["id"] for c in (e.get("meta") or {}).get("tool_calls", []))
    )
    shown = ccm("show", S1, "--turns", f"{caller['turn']}:{result['turn']}").stdout
    assert f"result of the call in turn {caller['turn']}" in shown
    assert "[tool_use]" not in shown and "\u2192 " in shown


def test_a_subagent_session_note_is_named_after_its_brief_and_links_its_parent(
    copy_fixture: Any, ccm_home: Path
) -> None:
    path = copy_fixture(f"claude-code/{S2}.jsonl")
    assert ccm("ingest", str(path)).exit_code == 0
    assert ccm("consolidate").exit_code == 0
    child = f"{S2}~agent-6340ddef"
    note = (ccm_home / "chats" / child / f"{child}.md").read_text()
    assert "\n# Examine the package.json file" in note
    assert f"A subagent of [[chats/{S2}/{S2}|{S2}]]." in note
    parent = (ccm_home / "chats" / S2 / f"{S2}.md").read_text()
    assert "## Subagents" in parent
    assert f"[[chats/{child}/{child}|Examine the package.json file]]" in parent


# -- a transcript too large to hold is read a chunk at a time, as if read whole ----------------

UUIDS = st.sampled_from(["u1", "u2", "u3", "u4", "u5", "u6", "u7", "u8"])  # few: repeats
TOOL_IDS = st.sampled_from(["toolu_1", "toolu_2", "toolu_3"])
TEXTS = st.sampled_from(["ok", "", "  ", "and then?", "naïve ✓", "x" * 30])


def _blocks(kinds: list[str]) -> st.SearchStrategy[list[dict[str, Any]]]:
    block = st.one_of(
        *(
            {
                "text": st.builds(lambda t: {"type": "text", "text": t}, TEXTS),
                "tool_use": st.builds(
                    lambda i, n: {"type": "tool_use", "id": i, "name": n, "input": {"n": 1}},
                    TOOL_IDS,
                    st.sampled_from(["Bash", "Read"]),
                ),
                "thinking": st.builds(lambda t: {"type": "thinking", "thinking": t}, TEXTS),
                "tool_result": st.builds(
                    lambda i, c, e: (
                        {"type": "tool_result", "content": c}
                        | ({"tool_use_id": i} if i else {})
                        | ({"is_error": True} if e else {})
                    ),
                    st.none() | TOOL_IDS,
                    TEXTS | st.just([{"type": "text", "text": "out"}, {"type": "image"}]),
                    st.booleans(),
                ),
            }[kind]
            for kind in kinds
        )
    )
    return st.lists(block, min_size=1, max_size=3)


RECORD_FIELDS = st.fixed_dictionaries(
    {},
    optional={
        "uuid": UUIDS,
        "parentUuid": st.none() | UUIDS,
        "sessionId": st.sampled_from(["s-main", "s-other", "not a valid id!"]),
        "isSidechain": st.booleans(),
        "agentId": st.sampled_from(["a1", "a2"]),
        "timestamp": st.sampled_from(["2026-01-02T03:04:05Z", "2026-01-02T03:05:00Z", "soon"]),
        "cwd": st.sampled_from(["/home/dev/app", "/tmp", ""]),
    },
)
# a subagent's records without agentId: parentUuid chains among four uuids, often cycles
SIDECHAIN_FIELDS = st.fixed_dictionaries(
    {"isSidechain": st.just(True), "uuid": st.sampled_from(["u1", "u2", "u3", "u4"])},
    optional={"parentUuid": st.none() | st.sampled_from(["u1", "u2", "u3", "u4", "u0"])},
)
FIELDS = RECORD_FIELDS | SIDECHAIN_FIELDS
USER = st.builds(
    lambda fields, content, meta: (
        {**fields, "type": "user", "message": {"content": content}}
        | ({"isMeta": True} if meta else {})
    ),
    FIELDS,
    TEXTS | _blocks(["text", "tool_result"]),
    st.booleans(),
)
ASSISTANT = st.builds(
    # few message ids, so that the records of one message are near or far apart
    lambda fields, message_id, content: {
        **fields,
        "type": "assistant",
        "message": {"content": content, "model": "claude"}
        | ({"id": message_id} if message_id else {}),
    },
    FIELDS,
    st.none() | st.sampled_from(["msg_1", "msg_2", "msg_3", "msg_4"]),
    TEXTS | _blocks(["text", "tool_use", "thinking"]),
)
OTHER_LINES = st.sampled_from(
    [
        {"type": "summary", "summary": "Fixing the parser", "leafUuid": "u1"},
        {"type": "summary", "summary": "A later title"},
        {"type": "system", "content": "compacted"},
        {"type": "user", "uuid": "u9"},  # no message.content: rejected at the end
        {"type": "assistant", "message": {"content": 5}, "isSidechain": True, "agentId": "a1"},
        {"type": []},
        b"not json",
        b"[1, 2]",
        b"",
        # a line of its own that starts with a byte order mark: not JSON, also where a
        # chunk starts with it
        b'\xef\xbb\xbf{"type": "user", "message": {"content": "hi"}}',
    ]
)
CLAUDE_LINES = st.one_of(USER, ASSISTANT, ASSISTANT, OTHER_LINES)


def _line(item: dict[str, Any] | bytes) -> bytes:
    return item if isinstance(item, bytes) else json.dumps(item, ensure_ascii=False).encode()


def _imported_twice(
    root: Path, source: Path, prefix: bytes, data: bytes, fmt: str, session: str | None, size: int
) -> tuple[list[Any], dict[str, bytes]]:
    """Into a new knowledge `root`, import `prefix` of a transcript (read whole), then
    the whole of it with inputs over `size` bytes read a chunk at a time, both from
    `source`: the reports and every file written."""
    from ccm.ingest import pipeline

    store = Store(root)
    store.init()
    reports: list[Any] = []
    original = pipeline.CHUNK_BYTES
    try:
        for given, chunk in ((prefix, original), (data, size)):
            if not given:
                continue
            source.write_bytes(given)
            pipeline.CHUNK_BYTES = chunk
            with freeze_time("2026-11-25T08:00:00Z"):  # the time a bad line is quarantined
                reports.append(ingest(store, [str(source)], fmt, session).as_dict())
    finally:
        pipeline.CHUNK_BYTES = original
    written = {
        str(p.relative_to(store.root)): p.read_bytes() for p in sorted(store.chats.rglob("*.jsonl"))
    }
    return reports, written


def _sidechain(uuid: str, parent: str, text: str) -> dict[str, Any]:
    return {
        "type": "user",
        "isSidechain": True,
        "uuid": uuid,
        "parentUuid": parent,
        "message": {"content": text},
    }


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    items=st.lists(CLAUDE_LINES, min_size=1, max_size=30),
    cut=st.integers(min_value=0, max_value=30),
    bom=st.booleans(),
    torn=st.booleans(),
    chunk=st.integers(min_value=1, max_value=200),
    name=st.sampled_from(["transcript.jsonl", "agent-a7.jsonl"]),
    fmt=st.sampled_from(["claude-code", "auto"]),
    session=st.none() | st.just("forced"),
)
@example(  # a cycle: where the walk up the chain stops depends on where it starts
    items=[_sidechain("u1", "u2", "a"), _sidechain("u2", "u1", "b"), _sidechain("u3", "u2", "c")],
    cut=0,
    bom=False,
    torn=False,
    chunk=1,
    name="transcript.jsonl",
    fmt="claude-code",
    session=None,
)
def test_a_transcript_read_a_chunk_at_a_time_imports_as_if_read_whole(
    items: list[dict[str, Any] | bytes],
    cut: int,
    bom: bool,
    torn: bool,
    chunk: int,
    name: str,
    fmt: str,
    session: str | None,
    tmp_path: Path,
) -> None:
    """Merged messages whose records are near or far apart, tool results named after
    their call, sidechains by agentId or by parentUuid chain (cycles too), repeated
    uuids, a title, bad lines and records, a half-written last line, a transcript read
    again after it grew: every raw.jsonl and quarantine.jsonl, and the reports, are
    those of a whole read, whatever the chunk size."""
    lines = [_line(item) for item in items]
    data = b"\xef\xbb\xbf" * bom + b"".join(line + b"\n" for line in lines)
    if torn:
        data += b'{"type": "assistant", "message": {"id": "msg_1", "con'
    kept = len(b"\xef\xbb\xbf" * bom + b"".join(line + b"\n" for line in lines[:cut]))
    prefix = data[:kept] if cut < len(lines) else b""
    work = Path(tempfile.mkdtemp(dir=tmp_path))  # one for each example
    source = work / name
    whole = _imported_twice(work / "whole", source, prefix, data, fmt, session, 1 << 30)
    chunked = _imported_twice(work / "chunked", source, prefix, data, fmt, session, chunk)

    assert chunked[1] == whole[1]
    assert chunked[0] == whole[0]


@pytest.mark.parametrize(
    "fixture",
    sorted(p.name for p in (FIXTURES / "claude-code").glob("*.jsonl")),
)
@pytest.mark.parametrize("chunk", [1, 100, 1000, None])  # None: half the file
def test_each_fixture_read_a_chunk_at_a_time_imports_as_if_read_whole(
    fixture: str, chunk: int | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ccm.ingest import pipeline

    data = (FIXTURES / "claude-code" / fixture).read_bytes()
    chunk = chunk or len(data) // 2
    read = []
    streamed = pipeline._ingest_transcript
    monkeypatch.setattr(
        pipeline, "_ingest_transcript", lambda *a, **k: read.append(a) or streamed(*a, **k)
    )

    source = tmp_path / fixture
    whole = _imported_twice(tmp_path / "whole", source, b"", data, "auto", None, 1 << 30)
    chunked = _imported_twice(tmp_path / "chunked", source, b"", data, "auto", None, chunk)

    assert len(read) == 1  # the chunked import was streamed, the whole one not
    assert chunked == whole


def test_a_transcript_read_a_chunk_at_a_time_holds_back_only_the_message_being_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What waits between chunks is the message whose records are not all read yet (and
    the turns after it), not the transcript: so memory stays that of a chunk."""
    from benchmarks.generate import write_session
    from ccm.ingest import pipeline
    from ccm.ingest.claude_code import Stream
    from ccm.ingest.model import ParseOptions

    path = tmp_path / "session.jsonl"
    write_session(path, 600, seed=3, fmt="claude-code")
    monkeypatch.setattr(pipeline, "CHUNK_BYTES", 4096)
    stream = Stream(path.name, ParseOptions())
    for data, start in pipeline._chunks(path):
        stream.survey(data, start)
    handed, held = 0, []
    for data, start in pipeline._chunks(path):
        handed += sum(len(s.turns) for s in stream.read(data, start).sessions)
        held.append(sum(len(b.session.turns) for b in stream.builders.values()))
    handed += sum(len(s.turns) for s in stream.end(lambda offset, length: b"").sessions)

    assert handed == 600
    assert len(held) > 50
    assert max(held) <= 2  # an assistant message and the tool result after it, at most
