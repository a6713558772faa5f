"""`ccm hook EVENT` with the JSON Claude Code sends (tests/fixtures/claude-code/hooks), on
real transcripts: what the model is given, incremental ingest between calls, and a hook
that never fails the session."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from ccm.cli import main
from ccm.hook import LIMIT_CHARS, _additional
from ccm.store import Store

FIXTURES = Path(__file__).parent / "fixtures" / "claude-code"
REAL = "5c0375b4-57a5-4f26-b12d-d022ee4e51b7"
PROJECT = "/home/dev/ledger"
NEW = "7d2f0c1e-0000-4000-8000-000000000001"
EARLIER = "7d2f0c1e-0000-4000-8000-000000000002"


def payload(event: str, session: str, transcript: Path | str, **fields: Any) -> str:
    data = json.loads((FIXTURES / "hooks" / f"{event}.json").read_text("utf-8"))
    data.update(session_id=session, transcript_path=str(transcript), cwd=PROJECT, **fields)
    return json.dumps(data)


def hook(root: Path, event: str, text: str) -> Result:
    return CliRunner().invoke(main, ["--root", str(root), "hook", event], input=text)


def context_of(result: Result, event: str) -> str:
    assert result.exit_code == 0, result.output
    output = json.loads(result.output)
    assert output["hookSpecificOutput"]["hookEventName"] == event
    text = str(output["hookSpecificOutput"]["additionalContext"])
    assert 0 < len(text) <= LIMIT_CHARS
    return text


class Transcript:
    """A Claude Code transcript written a record at a time, as Claude Code writes it."""

    def __init__(self, path: Path, session: str) -> None:
        self.path, self.session, self.count, self.parent = path, session, 0, None

    def add(self, role: str, text: str) -> None:
        self.count += 1
        uuid = f"00000000-0000-4000-8000-{self.count:012d}"
        message: dict[str, Any] = {"role": role, "content": text}
        if role == "assistant":
            message = {
                "id": f"msg_{self.session[:8]}_{self.count}",
                "type": "message",
                "role": "assistant",
                "content": [{"type": "text", "text": text}],
            }
        record = {
            "parentUuid": self.parent,
            "isSidechain": False,
            "userType": "external",
            "cwd": PROJECT,
            "sessionId": self.session,
            "version": "2.0.0",
            "type": role,
            "message": message,
            "uuid": uuid,
            "timestamp": f"2026-03-02T10:{self.count:02d}:00.000Z",
        }
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\n")
        self.parent = uuid  # type: ignore[assignment]


LEDGER = [
    (
        "user",
        "We're writing the ledger importer. One rule: always keep amounts as integer "
        "cents, never floats. Every parser and test has to respect that.",
    ),
    (
        "assistant",
        "Understood: amounts as integer cents everywhere. Shall I start with the CSV parser?",
    ),
    ("user", "Yes. Postgres or SQLite for storage?"),
    ("assistant", "SQLite in WAL mode fits: one writer, no server, a single file to back up."),
    (
        "user",
        "Decision: we use SQLite with WAL mode, not Postgres, because there is a single "
        "writer and a single file is trivial to back up.",
    ),
    ("assistant", "Noted. I'll create the schema with amount_cents INTEGER columns."),
]


@pytest.fixture
def real(tmp_path: Path) -> Path:
    """A copy of a real Claude Code transcript."""
    path = tmp_path / "projects" / f"{REAL}.jsonl"
    path.parent.mkdir(parents=True)
    shutil.copy(FIXTURES / f"{REAL}.jsonl", path)
    return path


def test_session_start_on_resume_gives_state_and_manifest_not_the_tail(
    tmp_path: Path, real: Path
) -> None:
    root = tmp_path / "root"
    text = context_of(
        hook(root, "SessionStart", payload("SessionStart", REAL, real, source="resume")),
        "SessionStart",
    )
    assert "## Working state" in text and "## Memory manifest" in text
    assert "## Latest turns" not in text  # Claude Code holds those itself
    assert f"Session {REAL}: 25 turns" in text
    assert Store(root).session_stats(REAL).turns == 25  # ingested under Claude Code's id


def test_session_start_after_compaction_gives_the_latest_turns_too(
    tmp_path: Path, real: Path
) -> None:
    root = tmp_path / "root"
    result = hook(root, "SessionStart", payload("SessionStart", REAL, real, source="compact"))
    assert "## Latest turns" in context_of(result, "SessionStart")


def test_a_new_session_is_given_what_earlier_sessions_in_the_project_concluded(
    tmp_path: Path,
) -> None:
    root = tmp_path / "root"
    earlier = Transcript(tmp_path / f"{EARLIER}.jsonl", EARLIER)
    for role, text in LEDGER:
        earlier.add(role, text)
    assert hook(root, "Stop", payload("Stop", EARLIER, earlier.path)).output == ""

    # the new session's transcript does not exist yet at startup
    result = hook(root, "SessionStart", payload("SessionStart", NEW, tmp_path / "none.jsonl"))
    text = context_of(result, "SessionStart")
    assert "## Concluded in earlier sessions here" in text
    assert "SQLite with WAL mode" in text and EARLIER in text
    # a session elsewhere is told nothing of this project
    elsewhere = json.loads(payload("SessionStart", NEW, tmp_path / "none.jsonl"))
    elsewhere["cwd"] = "/somewhere/else"
    assert hook(root, "SessionStart", json.dumps(elsewhere)).output == ""


def test_prompts_ingest_incrementally_run_commands_and_recall(tmp_path: Path) -> None:
    root = tmp_path / "root"
    transcript = Transcript(tmp_path / f"{NEW}.jsonl", NEW)
    for role, text in LEDGER[:4]:
        transcript.add(role, text)
    store = Store(root)

    casual = hook(
        root,
        "UserPromptSubmit",
        payload("UserPromptSubmit", NEW, transcript.path, prompt="ok go on"),
    )
    assert casual.exit_code == 0 and casual.output == ""  # nothing to add
    assert store.session_stats(NEW).turns == 4

    for role, text in LEDGER[4:]:
        transcript.add(role, text)
    prompt = "@pin(seg_1) and remind me: what did we decide about storage?"
    text = context_of(
        hook(
            root,
            "UserPromptSubmit",
            payload("UserPromptSubmit", NEW, transcript.path, prompt=prompt),
        ),
        "UserPromptSubmit",
    )
    assert store.session_stats(NEW).turns == 6  # only the two new turns were added
    assert "## Memory commands ccm ran" in text and "pin seg_1" in text
    assert "## Recalled from memory" in text and "SQLite" in text
    events, _, _ = store.read_events(NEW)
    assert [(e["kind"], e["who"]) for e in events] == [("pin", "user")]

    again = hook(root, "Stop", payload("Stop", NEW, transcript.path))
    assert again.exit_code == 0 and again.output == ""
    assert store.session_stats(NEW).turns == 6  # ingest is idempotent

    bad = hook(
        root,
        "UserPromptSubmit",
        payload("UserPromptSubmit", NEW, transcript.path, prompt="@pin(seg_77)"),
    )
    assert "not done: " in context_of(bad, "UserPromptSubmit")


def test_pre_compact_asks_to_keep_the_critical_items_word_for_word(tmp_path: Path) -> None:
    root = tmp_path / "root"
    transcript = Transcript(tmp_path / f"{NEW}.jsonl", NEW)
    for role, text in LEDGER:
        transcript.add(role, text)
    result = hook(root, "PreCompact", payload("PreCompact", NEW, transcript.path))
    assert result.exit_code == 0
    # plain text: Claude Code hands it to its summarizer as instructions
    assert result.output.startswith("When you summarize this conversation")
    assert "always keep amounts as integer cents, never floats" in result.output
    assert "## Working state" in result.output
    assert len(result.output) <= LIMIT_CHARS + 1


@pytest.mark.parametrize("event", ["Stop", "SessionEnd"])
def test_stop_and_session_end_only_ingest(tmp_path: Path, real: Path, event: str) -> None:
    root = tmp_path / "root"
    result = hook(root, event, payload(event, REAL, real))
    assert result.exit_code == 0 and result.output == ""
    assert Store(root).session_stats(REAL).turns == 25


@pytest.mark.parametrize(
    ("event", "text", "logged"),
    [
        ("Stop", "{not json", "not JSON (line 1, column 2"),
        ("Stop", "[]", "no session_id"),
        ("Bogus", '{"session_id": "s"}', "unknown hook event 'Bogus'"),
        ("Stop", json.dumps({"session_id": "s", "hook_event_name": "SessionEnd"}), "not Stop"),
    ],
)
def test_bad_input_exits_0_quietly_and_is_logged(
    tmp_path: Path, event: str, text: str, logged: str
) -> None:
    root = tmp_path / "root"
    result = hook(root, event, text)
    assert result.exit_code == 0 and result.output == ""
    (line,) = (root / ".ccm" / "hook.log").read_text("utf-8").splitlines()
    assert logged in json.loads(line)["error"]


def test_a_missing_transcript_or_a_broken_root_never_fails_the_session(
    tmp_path: Path, real: Path
) -> None:
    root = tmp_path / "root"
    missing = hook(
        root,
        "UserPromptSubmit",
        payload("UserPromptSubmit", NEW, tmp_path / "gone.jsonl", prompt="what did we say?"),
    )
    assert missing.exit_code == 0 and missing.output == ""

    broken = tmp_path / "file-not-root"
    broken.write_text("not a folder")
    for event in ("SessionStart", "UserPromptSubmit", "PreCompact", "Stop"):
        result = hook(broken, event, payload(event, REAL, real, prompt="what did we decide?"))
        assert result.exit_code == 0 and result.output == "", event
    assert broken.read_text() == "not a folder"

    unreadable = tmp_path / "root2"
    (unreadable / "chats").mkdir(parents=True)
    (unreadable / "config.yaml").write_text("context: [\n")  # a config that cannot be read
    result = hook(unreadable, "SessionStart", payload("SessionStart", REAL, real, source="resume"))
    assert result.exit_code == 0 and result.output == ""
    assert "config" in (unreadable / ".ccm" / "hook.log").read_text("utf-8")


def test_context_is_cut_at_a_line_to_what_claude_code_keeps() -> None:
    lines = "\n".join(f"- rule {n}: " + "word " * 30 for n in range(200))
    output = json.loads(_additional("SessionStart", lines))
    text = output["hookSpecificOutput"]["additionalContext"]
    assert len(text) <= LIMIT_CHARS and text.endswith("\n\u2026")
    assert text.splitlines()[-2].startswith("- rule ")  # whole lines only
    assert _additional("SessionStart", "  \n") == ""


def _stored(root: Path, session: str) -> list[tuple[str, str, str | None]]:
    """The turns of `session`, a message read in two parts (its second part stored as a
    turn that continues the first, as `ccm ingest` of a growing file stores it) as one."""
    turns, _, _ = Store(root).read_turns(session)
    merged: list[tuple[str, str, str | None]] = []
    for t in turns:
        continues = (t.get("meta") or {}).get("continues")
        if continues and merged and merged[-1][2] == continues:
            role, content, turn_id = merged[-1]
            merged[-1] = (role, f"{content}\n{t['content']}", turn_id)
        else:
            merged.append((t["role"], t["content"], t.get("id")))
    return merged


@pytest.mark.parametrize("step", [1, 4, 9])
def test_hooks_as_the_transcript_grows_store_what_one_import_of_it_stores(
    tmp_path: Path, step: int
) -> None:
    """A hook reads the transcript again only from where nothing was pending; cut
    anywhere (inside an exchange, between a tool's call and its result, between the
    records of one assistant message), what is stored is what a whole import stores,
    word for word and in order."""
    lines = (FIXTURES / f"{REAL}.jsonl").read_bytes().splitlines(keepends=True)
    growing = tmp_path / f"{REAL}.jsonl"
    root = tmp_path / "root"
    for end in range(step, len(lines) + step, step):
        growing.write_bytes(b"".join(lines[:end]))
        result = hook(root, "Stop", payload("Stop", REAL, growing))
        assert result.exit_code == 0 and result.output == ""
    assert not (root / ".ccm" / "hook.log").exists()

    whole = tmp_path / "whole"
    assert CliRunner().invoke(main, ["--root", str(whole), "ingest", str(growing)]).exit_code == 0
    assert _stored(root, REAL) == _stored(whole, REAL)
    cursor = json.loads((root / ".ccm" / "hooks" / f"{REAL}.json").read_text("utf-8"))
    assert cursor["size"] == growing.stat().st_size and 0 < cursor["resume"] < cursor["size"]


def test_only_the_new_part_is_read_and_a_replaced_transcript_is_read_whole(
    tmp_path: Path,
) -> None:
    root = tmp_path / "root"
    transcript = Transcript(tmp_path / f"{NEW}.jsonl", NEW)
    for role, text in LEDGER[:4]:
        transcript.add(role, text)
    assert hook(root, "Stop", payload("Stop", NEW, transcript.path)).output == ""
    # a line before the last exchange goes bad in place: it is not read again
    data = transcript.path.read_bytes()
    first_end = data.index(b"\n")
    transcript.path.write_bytes(b"x" * first_end + data[first_end:])
    for role, text in LEDGER[4:]:
        transcript.add(role, text)
    assert hook(root, "Stop", payload("Stop", NEW, transcript.path)).output == ""
    assert len(_stored(root, NEW)) == 6
    assert not Store(root).quarantine_path(NEW).exists()

    # replaced by a new file (another inode): read whole, its bad first line reported
    # where it is in the file, and nothing stored twice
    replaced = tmp_path / "replaced.jsonl"
    replaced.write_bytes(transcript.path.read_bytes())
    replaced.replace(transcript.path)
    assert hook(root, "Stop", payload("Stop", NEW, transcript.path)).output == ""
    assert len(_stored(root, NEW)) == 6
    quarantined = Store(root).quarantine_path(NEW).read_text("utf-8")
    assert json.loads(quarantined.splitlines()[0])["line"] == 1


# -- answered by the daemon ------------------------------------------------------------


def _ledger_root(tmp_path: Path, name: str) -> tuple[Path, Transcript]:
    root = tmp_path / name
    root.mkdir()
    (root / "config.yaml").write_text("ingest: {fsync: false}\n")
    transcript = Transcript(tmp_path / f"{name}-{NEW}.jsonl", NEW)
    for role, text in LEDGER:
        transcript.add(role, text)
    assert hook(root, "Stop", payload("Stop", NEW, transcript.path)).output == ""
    return root, transcript


def test_a_running_daemon_answers_as_the_hook_itself_would(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import functools
    import subprocess
    import sys
    import time

    from ccm import daemon as ccm_daemon
    from ccm import hook as ccm_hook
    from ccm.paths import socket_path

    # what is asked is that the daemon answers as the hook would, not how fast: on a loaded
    # machine a daemon just started may take its first request up after the hook's 2 s
    patient = functools.partial(ccm_hook.ask_daemon, wait=60.0)
    monkeypatch.setattr(ccm_hook, "ask_daemon", patient)

    alone, alone_transcript = _ledger_root(tmp_path, "alone")
    served, served_transcript = _ledger_root(tmp_path, "served")
    process = subprocess.Popen(
        [sys.executable, "-m", "ccm", "--root", str(served), "watch"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while not socket_path(served).exists() or ccm_daemon.running(Store(served)) is None:
            assert time.monotonic() < deadline, "the daemon did not start listening"
            time.sleep(0.05)
        prompt = "@pin(seg_1) what did we decide about storage earlier?"
        answers = [
            context_of(
                hook(
                    root, "UserPromptSubmit", payload("UserPromptSubmit", NEW, path, prompt=prompt)
                ),
                "UserPromptSubmit",
            )
            for root, path in ((alone, alone_transcript.path), (served, served_transcript.path))
        ]
        status = json.loads((served / ".ccm" / "daemon.json").read_text("utf-8"))
    finally:
        process.terminate()
        process.wait(timeout=30)
    assert answers[0] == answers[1] and "SQLite" in answers[1]
    assert status["answered"] == 1  # the daemon answered it, not the hook's own process
    events, _, _ = Store(served).read_events(NEW)
    assert [e["kind"] for e in events] == ["pin"]  # run once
    assert not socket_path(served).exists()  # taken down on the way out


def test_a_request_the_daemon_does_not_take_up_in_time_is_never_run(tmp_path: Path) -> None:
    from ccm.daemon import Daemon
    from ccm.hook import ask_daemon
    from ccm.paths import socket_path

    root, transcript = _ledger_root(tmp_path, "root")
    daemon = Daemon(Store(root))  # listening, but its loop busy elsewhere
    daemon._listen()
    try:
        text = payload("UserPromptSubmit", NEW, transcript.path, prompt="@pin(seg_1)")
        assert ask_daemon(root, "UserPromptSubmit", text, wait=0.2) is None
        daemon.answer_requests()  # the loop comes round: the request expired
        assert daemon.answered == 0
        assert Store(root).read_events(NEW)[0] == []
    finally:
        daemon._close_listener()
    assert not socket_path(root).exists()

    # a socket file no daemon listens on: the hook answers in its own process
    socket_path(root).parent.mkdir(parents=True, exist_ok=True)
    import socket as sockets

    with sockets.socket(sockets.AF_UNIX, sockets.SOCK_STREAM) as stale:
        stale.bind(str(socket_path(root)))
    assert ask_daemon(root, "Stop", "{}") is None
    result = hook(
        root,
        "UserPromptSubmit",
        payload("UserPromptSubmit", NEW, transcript.path, prompt="@pin(seg_1)"),
    )
    assert "pin seg_1" in context_of(result, "UserPromptSubmit")


@pytest.mark.parametrize("reply", [b"[]\n", b'{"state": "running"}\n[1]\n', b"not json\n", b""])
def test_a_daemon_that_answers_nonsense_leaves_the_hook_to_answer_itself(
    tmp_path: Path, reply: bytes
) -> None:
    import socket as sockets
    import threading

    from ccm.hook import ask_daemon
    from ccm.paths import socket_path

    root = tmp_path / "root"
    path = socket_path(root)
    path.parent.mkdir(parents=True)
    with sockets.socket(sockets.AF_UNIX, sockets.SOCK_STREAM) as listener:
        listener.bind(str(path))
        listener.listen(1)

        def serve() -> None:
            connection, _ = listener.accept()
            with connection:
                connection.makefile("rb").readline()
                connection.sendall(reply)

        server = threading.Thread(target=serve)
        server.start()
        assert ask_daemon(root, "Stop", "{}", wait=2.0) is None
        server.join(timeout=10)
