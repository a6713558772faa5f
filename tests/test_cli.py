"""The `ccm` command line: version, init, sessions, show, and usage errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ccm import __version__
from tests.helpers import ccm


def raw_entries(home: Path, session: str) -> list[dict[str, Any]]:
    path = home / "chats" / session / "raw.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture
def chat(tmp_path: Path) -> Path:
    """An imported session `chat` of five turns with known timestamps."""
    path = tmp_path / "chat.jsonl"
    turns = [
        ("user", "How fast is inotify?", "2026-03-01T10:00:00Z"),
        ("assistant", "Sub-millisecond.", "2026-03-01T10:00:05Z"),
        ("user", "And on NFS?", "2026-03-01T10:01:00Z"),
        ("assistant", "It does not see remote changes.", "2026-03-01T10:01:07Z"),
        ("user", "Thanks.", "2026-03-01T11:30:00Z"),
    ]
    path.write_text(
        "".join(json.dumps({"role": r, "content": c, "ts": t}) + "\n" for r, c, t in turns),
        encoding="utf-8",
    )
    result = ccm("ingest", str(path))
    assert result.exit_code == 0, result.stderr
    return path


def listing(folder: Path, leave_out: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if leave_out not in (p, *p.parents))


# -- version ----------------------------------------------------------------------------


def test_version() -> None:
    result = ccm("--version")

    assert result.exit_code == 0
    assert result.stdout == f"ccm, version {__version__}\n"


def test_version_imports_nothing_heavy() -> None:
    code = (
        "import sys; from ccm.cli import main\n"
        "try:\n main(['--version'])\nexcept SystemExit: pass\n"
        "print(','.join(m for m in ('yaml','fastjsonschema','tiktoken','ccm.store') "
        "if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)

    assert done.stdout.splitlines() == [f"ccm, version {__version__}", ""]


def test_cli_runs_as_a_module() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ccm.cli", "--version"], capture_output=True, text=True, check=True
    )

    assert done.stdout == f"ccm, version {__version__}\n"


# -- init -------------------------------------------------------------------------------


def test_init_creates_the_root_then_changes_nothing(ccm_home: Path) -> None:
    first = ccm("init")

    assert first.exit_code == 0
    assert f"Initialised knowledge root at {ccm_home}" in first.stdout
    assert (ccm_home / "chats").is_dir()
    assert (ccm_home / ".ccm").is_dir()
    config = (ccm_home / "config.yaml").read_text(encoding="utf-8")
    assert "max_line_bytes: 16777216" in config
    for name in ("chats", ".ccm", "config.yaml"):
        assert f"created {ccm_home / name}" in first.stdout

    config_bytes = (ccm_home / "config.yaml").read_bytes()
    second = ccm("init")

    assert second.exit_code == 0
    assert second.stdout == f"Knowledge root at {ccm_home} already exists; nothing changed\n"
    assert (ccm_home / "config.yaml").read_bytes() == config_bytes


def test_init_json_lists_what_was_created(ccm_home: Path) -> None:
    first = json.loads(ccm("init", "--json").stdout)
    second = json.loads(ccm("init", "--json").stdout)

    assert first["root"] == str(ccm_home)
    assert sorted(first["created"]) == sorted(
        str(ccm_home / name) for name in ("", "chats", ".ccm", "config.yaml")
    )
    assert second["created"] == []


def test_root_option_beats_ccm_home(tmp_path: Path, ccm_home: Path) -> None:
    other = tmp_path / "other"

    result = ccm("--root", str(other), "init")

    assert result.exit_code == 0
    assert (other / "config.yaml").is_file()
    assert not ccm_home.exists()


# -- sessions ---------------------------------------------------------------------------


def test_sessions_on_an_empty_root(ccm_home: Path) -> None:
    result = ccm("sessions")

    assert result.exit_code == 0
    assert result.stdout == (
        f"No sessions under {ccm_home / 'chats'} yet; import some with `ccm ingest`.\n"
    )
    assert json.loads(ccm("sessions", "--json").stdout) == []


def test_sessions_lists_turns_tokens_and_activity(chat: Path) -> None:
    result = ccm("sessions")

    assert result.exit_code == 0
    header, row = result.stdout.splitlines()
    assert header.split() == ["SESSION", "TURNS", "TOKENS", "FIRST", "LAST"]
    fields = row.split()
    assert fields[:2] == ["chat", "5"]
    assert int(fields[2]) > 0
    assert fields[3:] == ["2026-03-01", "10:00:00", "2026-03-01", "11:30:00"]


def test_sessions_json(chat: Path) -> None:
    result = ccm("sessions", "--json")

    assert result.exit_code == 0
    [stats] = json.loads(result.stdout)
    assert stats["session"] == "chat"
    assert stats["turns"] == 5
    assert stats["last_turn"] == 5
    assert stats["tokens"] > 0
    assert stats["first_ts"] == "2026-03-01T10:00:00.000Z"
    assert stats["last_ts"] == "2026-03-01T11:30:00.000Z"
    assert stats["roles"] == {"assistant": 2, "user": 3}
    assert stats["source"] == "jsonl"
    assert stats["bad_lines"] == 0


# -- show -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("turns", "shown"),
    [("2:3", [2, 3]), ("4:", [4, 5]), (":2", [1, 2]), ("3", [3]), (None, [1, 2, 3, 4, 5])],
)
def test_show_prints_a_range_of_turns(turns: str | None, shown: list[int], chat: Path) -> None:
    args = ["show", "chat", *(["--turns", turns] if turns else [])]

    text = ccm(*args)
    as_json = ccm(*args, "--json")

    assert text.exit_code == as_json.exit_code == 0
    assert [e["turn"] for e in json.loads(as_json.stdout)] == shown
    headers = [line for line in text.stdout.splitlines() if line.startswith("[")]
    assert [int(h[1 : h.index("]")]) for h in headers] == shown


def test_show_text_has_role_time_and_the_verbatim_content(chat: Path) -> None:
    result = ccm("show", "chat", "--turns", "2:3")

    assert result.stdout == (
        "[2] assistant · 2026-03-01 10:00:05\nSub-millisecond.\n\n"
        "[3] user · 2026-03-01 10:01:00\nAnd on NFS?\n\n"
    )


def test_show_json_gives_the_raw_entries(chat: Path, ccm_home: Path) -> None:
    result = ccm("show", "chat", "--turns", "2:3", "--json")

    assert json.loads(result.stdout) == raw_entries(ccm_home, "chat")[1:3]


def test_show_an_unknown_session(chat: Path) -> None:
    result = ccm("show", "nope")

    assert result.exit_code == 1
    assert result.stderr.startswith("Error: no session 'nope'")
    assert "`ccm sessions` lists them" in result.stderr


def test_show_a_range_past_the_end_says_what_the_session_holds(chat: Path) -> None:
    result = ccm("show", "chat", "--turns", "99:100")

    assert result.exit_code == 2
    assert "--turns 99:100: session chat has turns 1-5" in result.stderr


def test_a_unique_prefix_names_a_session(chat: Path, tmp_path: Path) -> None:
    other = tmp_path / "chit.jsonl"
    other.write_text(json.dumps({"role": "user", "content": "hi"}) + "\n", encoding="utf-8")
    assert ccm("ingest", str(other)).exit_code == 0

    shown = ccm("show", "cha", "--turns", "1", "--json")
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout)[0]["content"] == "How fast is inotify?"
    assert ccm("events", "chi", "--json").exit_code == 0
    ambiguous = ccm("show", "ch")
    assert ambiguous.exit_code == 2
    assert "session prefix 'ch' is ambiguous: chat, chit" in ambiguous.stderr
    # every command that takes sessions takes a prefix
    rebuilt = ccm("rebuild", "cha", "--json")
    assert rebuilt.exit_code == 0, rebuilt.output
    assert "chat" in rebuilt.stdout and "chit" not in rebuilt.stdout
    found = ccm("recall", "inotify", "--session", "cha", "--json")
    assert found.exit_code == 0, found.output
    assert {hit["session"] for hit in json.loads(found.stdout)["hits"]} == {"chat"}
    consolidated = ccm("consolidate", "--session", "chi", "--json")
    assert consolidated.exit_code == 0, consolidated.output
    assert "chit" in json.loads(consolidated.stdout)["sessions"]["consolidated"]


@pytest.mark.parametrize("bad_range", ["a:b", "1:x", "two"])
def test_show_a_bad_range_is_a_usage_error(bad_range: str, chat: Path) -> None:
    result = ccm("show", "chat", "--turns", bad_range)

    assert result.exit_code == 2
    assert "is not A:B, A: or :B" in result.stderr


@pytest.mark.parametrize(
    ("bad_line", "error"),
    [
        (b'{"turn": "x"}\n', "does not match raw_entry schema"),
        (b'{"turn": 6, "role": "user", "content": "cut sh\n', "invalid JSON"),
        (b'[6, "user"]\n', "expected a JSON object"),
    ],
)
def test_show_reports_and_quarantines_a_damaged_line(
    bad_line: bytes, error: str, chat: Path, ccm_home: Path
) -> None:
    raw = ccm_home / "chats" / "chat" / "raw.jsonl"
    with open(raw, "ab") as handle:
        handle.write(bad_line)
    quarantine = ccm_home / "chats" / "chat" / "quarantine.jsonl"

    result = ccm("show", "chat")

    assert result.exit_code == 1
    assert [line for line in result.stdout.splitlines() if line.startswith("[")] == [
        "[1] user · 2026-03-01 10:00:00",
        "[2] assistant · 2026-03-01 10:00:05",
        "[3] user · 2026-03-01 10:01:00",
        "[4] assistant · 2026-03-01 10:01:07",
        "[5] user · 2026-03-01 11:30:00",
    ]
    assert f"Error: {raw}:6: {error}" in result.stderr
    assert "kept in quarantine.jsonl" in result.stderr
    [kept] = [json.loads(line) for line in quarantine.read_text(encoding="utf-8").splitlines()]
    assert (kept["source"], kept["line"]) == (str(raw), 6)
    assert kept["raw"] == bad_line.decode().rstrip("\n")

    assert ccm("show", "chat").exit_code == 1
    assert len(quarantine.read_text(encoding="utf-8").splitlines()) == 1


def test_sessions_warns_about_a_damaged_log(chat: Path, ccm_home: Path) -> None:
    with open(ccm_home / "chats" / "chat" / "raw.jsonl", "ab") as handle:
        handle.write(b"not json\n")

    result = ccm("sessions", "--json")

    assert result.exit_code == 0
    assert json.loads(result.stdout)[0]["bad_lines"] == 1
    assert json.loads(result.stdout)[0]["turns"] == 5


# -- usage errors -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["ingest"], "Missing argument 'PATHS...'"),
        (["ingest", "chat.jsonl", "--format", "yaml"], "Invalid value for '--format'"),
        (["ingest", "missing.jsonl"], "missing.jsonl: no such file or directory"),
        (["show"], "Missing argument 'SESSION'"),
        (["frobnicate"], "No such command 'frobnicate'"),
    ],
)
def test_usage_errors_exit_2(
    args: list[str], message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "chat.jsonl").write_text('{"role": "user", "content": "hi"}\n', encoding="utf-8")

    result = ccm(*args)

    assert result.exit_code == 2
    assert message in result.stderr


@pytest.mark.parametrize(
    ("session", "message"),
    [
        ("../evil", "invalid session id '../evil'"),
        ("a/b", "invalid session id 'a/b'"),
        ("..", "invalid session id '..'"),
        ("x" * 200, "session id is 200 characters long"),
        ("bad\x01id", "invalid session id 'bad\\x01id'"),
    ],
)
@pytest.mark.parametrize("command", ["ingest", "show"])
def test_an_unsafe_session_id_is_refused_and_creates_nothing(
    command: str,
    session: str,
    message: str,
    tmp_path: Path,
    ccm_home: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    work = tmp_path / "work" / "deep"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    (work / "chat.jsonl").write_text('{"role": "user", "content": "hi"}\n', encoding="utf-8")
    before = listing(tmp_path, ccm_home)
    args = (
        ["ingest", "chat.jsonl", "--session", session] if command == "ingest" else ["show", session]
    )

    result = ccm(*args)

    assert result.exit_code == 2
    assert message in result.stderr
    assert listing(tmp_path, ccm_home) == before
    assert not (ccm_home / "chats").exists() or not any((ccm_home / "chats").iterdir())
