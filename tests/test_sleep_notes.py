"""Notes as ccm writes them: its own text recognised by hash, markdown that links nothing by
accident, stable file names."""

from __future__ import annotations

import pytest

from ccm.errors import SchemaError
from ccm.sleep import notes
from ccm.sleep.artifacts import assign_paths, slug, title
from ccm.sleep.graph import Node


def test_a_note_is_pristine_until_anyone_changes_anything() -> None:
    text = notes.render({"id": "a/seg_1", "tags": ["decision"]}, "# Title\n\nBody.\n")
    assert notes.is_pristine(text)
    assert notes.recorded_hash(text) is not None
    for edited in (
        text.replace("Body.", "Body, and mine."),
        text.replace("- decision", "- decision\n- mine"),
        text + "\n",
        text.replace(notes.recorded_hash(text) or "", "0" * 20),
    ):
        assert not notes.is_pristine(edited)
    assert not notes.is_pristine("# a note someone wrote\n")
    assert not notes.is_pristine(notes.join({"id": "x"}, "body\n"))  # no hash at all


def test_split_reads_the_frontmatter_and_keeps_the_body() -> None:
    text = notes.render({"id": "x", "sources": [{"session": "s"}]}, "Body\n---\nmore\n")
    fields, body = notes.split(text)
    assert fields is not None and fields["id"] == "x" and fields["sources"] == [{"session": "s"}]
    assert body == "Body\n---\nmore\n"
    assert notes.split("no frontmatter") == (None, "no frontmatter")
    with pytest.raises(SchemaError, match="not a mapping"):
        notes.split("---\n- a list\n---\nbody")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("plain words", "plain words"),
        ("see [[secret]] and [x](y)", "see \\[\\[secret\\]\\] and \\[x\\](y)"),
        ("two\nlines", "two lines"),
    ],
)
def test_inline_text_cannot_make_a_link(text: str, expected: str) -> None:
    assert notes.inline(text) == expected


def test_a_quote_is_fenced_by_more_backticks_than_it_holds() -> None:
    quote = "run ```make``` then `x`"
    fenced = notes.fenced(quote)
    assert fenced.startswith("````text\n") and fenced.endswith("\n````\n")
    assert quote in fenced


def test_a_link_label_holds_no_character_that_ends_a_link() -> None:
    label = notes.link_label("A [b] | c # d ^ e\nf " + "word " * 30, 40)
    assert not set("[]|#^\n") & set(label)
    assert len(label) <= 40 and label.endswith("\u2026")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "Decision: we use SQLite with WAL mode, not Postgres, because there is a single writer.",
            "use-sqlite-wal-mode-not-postgres-because",
        ),
        ("That's it!", "thats-it"),
        ("!!!", "conclusion"),
    ],
)
def test_slugs_come_from_the_conclusions_words(text: str, expected: str) -> None:
    assert slug(text) == expected  # all filler: the filler is kept


@pytest.mark.parametrize(
    ("statement", "expected"),
    [
        # the first sentence that says what, without the words that only conclude
        (
            "ok, that answers it. The staging bucket is served through the CDN.",
            "The staging bucket is served through the CDN",
        ),
        (
            "Decision: we book the Lisbon flat for five nights.",
            "We book the Lisbon flat for five nights",
        ),
        # what was accepted leads; the user's acceptance follows in parentheses
        (
            "The export job runs at 02:00 on the replica. (ok, go with that)",
            "The export job runs at 02:00 on the replica",
        ),
        # at most ten words, ending at a clause boundary and on no dangling word
        (
            "Invoices are rendered by the worker pool, the API only queues them, and retries back off.",
            "Invoices are rendered by the worker pool",
        ),
        # nothing says enough alone: the first sentences together
        ("Zero timeouts. 48 runs. All green.", "Zero timeouts. 48 runs"),
        # figures alone name nothing, a lone digit less: the clause that says what
        (
            "4.2 x 3.1 = 13 m\u00b2. so the room takes the bigger sofa after all",
            "The room takes the bigger sofa after all",
        ),
        (
            "2 weeks to Friday: the lease review, the deposit and the keys",
            "2 weeks to Friday: the lease review",
        ),
        # a clause of a word and a figure is cut at no sooner than three words of substance
        (
            "Studio: at £9 an hour, six classes cost £54 a week, about £2,000 a term.",
            "Studio: at £9 an hour, six classes cost £54",
        ),
        # a statement that opens on the dash before the evidence: not the title's first mark
        (
            "\u2014 **The release notes**: go out with the tag, never before it.",
            "The release notes: go out with the tag",
        ),
    ],
)
def test_a_title_names_what_was_concluded(statement: str, expected: str) -> None:
    found = title(statement)
    assert found == expected
    assert 1 <= len(found.split()) <= 10


def node(node_id: str, text: str, ts: str, kind: str = "decision") -> Node:
    session, segment = node_id.split("/")
    return Node(node_id, session, segment, kind, text, 1, ts, (), 0.8)


def test_paths_are_stable_unique_and_never_taken_from_another_note() -> None:
    a = node("s1/seg_1", "Use SQLite for the queue.", "2026-03-01T00:00:00Z")
    b = node("s2/seg_1", "Use SQLite for the queue.", "2026-03-02T00:00:00Z")
    c = node("s3/seg_1", "Use SQLite for the queue.", "2026-03-03T00:00:00Z")
    first = assign_paths([c, b, a], {}, lambda path: None)
    assert first == {
        "s1/seg_1": "artifacts/decision/use-sqlite-queue",
        "s2/seg_1": "artifacts/decision/use-sqlite-queue-2",
        "s3/seg_1": "artifacts/decision/use-sqlite-queue-3",
    }
    # an older conclusion found later does not move the notes already written
    early = node("s0/seg_1", "Use SQLite for the queue.", "2026-02-01T00:00:00Z")
    again = assign_paths([a, b, c, early], first, lambda path: None)
    assert {k: again[k] for k in first} == first
    assert again["s0/seg_1"] == "artifacts/decision/use-sqlite-queue-4"
    # a file there that belongs to someone else (a person's note, another id) is skipped
    owners = {"artifacts/decision/use-sqlite-queue": ""}
    assert assign_paths([a], {}, owners.get) == {
        "s1/seg_1": "artifacts/decision/use-sqlite-queue-2"
    }
