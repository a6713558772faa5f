"""The abstraction ladder: how specific a conclusion is, and what a shared lesson must not carry."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ccm.sleep.ladder import layer, redact

SAMPLES = Path(__file__).parent.parent / "sample_knowledge" / "chats"
EMAIL = re.compile(r"[\w.+-]+@[\w-]+\.[\w.]+")
PATH = re.compile(r"(?<![\w<])/(?:home|opt|var|etc|srv)\b")


@pytest.mark.parametrize(
    ("text", "kind", "expected"),
    [
        ("connect() in db.py runs PRAGMA journal_mode=WAL", "task", 0),
        ("The code lives in /home/dev/ledger/ and mails ops@example.com.", "insight", 0),
        ("A daily cron job at 02:30 keeps copies for 30 days.", "decision", 0),
        ("Decision: we use SQLite with WAL mode, not Postgres.", "decision", 1),
        ("The root cause was a missing index on the memo column.", "insight", 1),
        ("That fixed it, re-import is idempotent now.", "resolution", 1),
        ("Requirement: the service must restart on failure.", "requirement", 1),
        ("Change of plan: we drop the cron job and use a timer instead.", "decision", 1),
        ("Let the gaps between our reviews grow after each success.", "insight", 2),
        ("Testing yourself beats rereading.", "insight", 2),
        ("Retrieval practice strengthens memory more than rereading.", "insight", 2),
        ("Never store money as floats.", "insight", 3),
        ("Prefer a timer that catches up over a job that silently skips a night.", "preference", 3),
    ],
)
def test_layer_places_a_conclusion_on_the_ladder(text: str, kind: str, expected: int) -> None:
    assert layer(text, kind) == expected


def sample_turns() -> list[str]:
    turns = []
    for raw in sorted(SAMPLES.glob("*/raw.jsonl")):
        turns += [json.loads(line)["content"] for line in raw.read_text().splitlines()]
    return turns


def test_redact_strips_every_email_path_and_key_from_the_sample_chats() -> None:
    turns = sample_turns()
    assert len(turns) > 40
    private = [t for t in turns if EMAIL.search(t) or PATH.search(t) or "sk-test" in t]
    assert len(private) >= 6  # the samples hold what this test is about
    for turn in turns:
        clean = redact(turn)
        assert not EMAIL.search(clean) and not PATH.search(clean), clean
        assert "sk-test" not in clean and "EXAMPLE0000" not in clean
        # readable: every ordinary word of the sentence is still there
        for word in re.findall(r"(?<!\S)[A-Za-z]{3,}(?=[\s,.;:!?]|$)", turn):
            assert word in clean, (word, clean)
    cleaned = " ".join(redact(t) for t in turns)
    assert "send a short email to <email> with the file name" in cleaned
    assert "The code lives in <path>." in cleaned
    assert "the test config contains <key>." in cleaned


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "The code now reads LEDGER_SMTP_TOKEN=sk-test-EXAMPLE0000 from the environment.",
            "The code now reads LEDGER_SMTP_TOKEN=<key> from the environment.",
        ),
        ('export LEDGER_SMTP_TOKEN="p4ss word"', "export LEDGER_SMTP_TOKEN=<key>"),
        ("password: hunter2, and the token: none yet", "password: <key>, and the token: none yet"),
        ("Key AKIAIOSFODNN7EXAMPLE in us-east-1.", "Key <key> in us-east-1."),
        ("Authorization: Bearer abcdefgh12345678", "Authorization: Bearer <key>"),
        ("commit 9fceb02d0ae598e95dc970b74767f19372d61af8a", "commit <key>"),
        ("Mail ada.l+ops@mail.example.co.uk today.", "Mail <email> today."),
        ("See https://api.example.com/v1/items?x=1.", "See <url>."),
        ("Postgres on db.internal:5432 and 10.0.0.12.", "Postgres on <host> and <ip>."),
        ("Open C:\\Users\\ada\\ledger.db and ~/notes/today.md.", "Open <path> and <path>."),
        ("Edit src/ledger/importer.py (see /etc/hosts).", "Edit <path> (see <path>)."),
        ("Call +44 20 7946 0958 about account 12345678.", "Call <number> about account <number>."),
    ],
)
def test_redact_replaces_each_detail_by_its_type(text: str, expected: str) -> None:
    assert redact(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "Keep amounts as integer cents, 100 per euro, never floats.",
        "The row count stays at 1,318 after 3 imports.",
        "A daily cron job at 02:30 on 2026-03-02, dates as day/month/year.",
        "db.py opens ledger.db; Node.js and ASP.NET are fine; TX88213 is a short reference.",
        "Use @pin and @recall, and/or TCP/IP, e.g. the 12.10 amount.",
    ],
)
def test_redact_keeps_ordinary_words_and_small_numbers(text: str) -> None:
    assert redact(text) == text


def test_redact_removes_known_names_only() -> None:
    text = "Ada Lovelace asked ada lovelace and Ada; Adam and the ada compiler stay."
    assert redact(text, names=frozenset({"Ada Lovelace"})) == (
        "<name> asked <name> and <name>; Adam and the ada compiler stay."
    )
    assert redact(text) == text


WORDS = st.sampled_from(
    [
        "the",
        "importer",
        "keeps",
        "amounts",
        "as",
        "integer",
        "cents",
        "and",
        "we",
        "ship",
        "it",
        "now",
    ]
)
SECRETS = st.one_of(
    st.builds(
        "{}@{}.com".format,
        st.text("abcdefghij.", min_size=1, max_size=8).filter(lambda s: s.strip(".") == s),
        st.text("abcdefghij", min_size=1, max_size=8),
    ).map(lambda e: ("<email>", e)),
    st.lists(st.text("abcdefgh_-", min_size=1, max_size=6), min_size=1, max_size=4)
    .map(lambda parts: "/home/" + "/".join(parts))
    .map(lambda p: ("<path>", p)),
    st.text("ABCDEFGHabcdefgh0123456789", min_size=12, max_size=30)
    .map(lambda k: "sk-ant-" + k)
    .map(lambda k: ("<key>", k)),
)


@given(st.lists(WORDS, max_size=8), SECRETS, st.lists(WORDS, max_size=8))
def test_a_planted_secret_never_survives(
    before: list[str], secret: tuple[str, str], after: list[str]
) -> None:
    placeholder, value = secret
    text = " ".join([*before, value, *after]) + "."
    clean = redact(text)
    assert value not in clean and placeholder in clean
    assert clean.replace(placeholder, value) == text
    assert redact(clean) == clean


@given(st.text(max_size=200))
def test_redact_is_idempotent(text: str) -> None:
    once = redact(text)
    assert redact(once) == once
