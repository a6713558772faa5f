"""How ``ccm show`` spreads a tool call's input for reading (`ccm.transcript.body`)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ccm.transcript import body


def test_a_multiedit_shows_each_edit_one_field_a_line_and_its_texts_as_lines() -> None:
    """Written for this test: a ``MultiEdit`` whose edits are a list of objects holding
    texts of several lines, and a ``TodoWrite``'s todos: each text as the lines it is
    (no escaped line breaks), each item marked with "- ", its fields under it."""
    call = {
        "file_path": "/srv/app/README.md",
        "edits": [
            {"old_string": "Django 4.2\nPython 3.10", "new_string": "Django 5.1", "all": False},
            {"old_string": "port 8000", "new_string": "port 8080"},
        ],
    }
    lines = body("Updating the README.\n[tool_use] MultiEdit " + json.dumps(call))
    assert lines == [
        "Updating the README.",
        "\u2192 MultiEdit",
        "    file_path: /srv/app/README.md",
        "    edits:",
        "        - old_string:",
        "              Django 4.2",
        "              Python 3.10",
        "          new_string: Django 5.1",
        "          all: false",
        "        - old_string: port 8000",
        "          new_string: port 8080",
    ]
    todos = {"todos": [{"content": "Run the tests", "status": "pending"}], "ids": [3, 4]}
    assert body("[tool_use] TodoWrite " + json.dumps(todos))[1:] == [
        "    todos:",
        "        - content: Run the tests",
        "          status: pending",
        "    ids: [3, 4]",  # a list of figures stays one line
    ]


LEAVES = st.text(st.characters(blacklist_categories=("Cs",)), max_size=30)
VALUES = st.recursive(
    st.one_of(LEAVES, st.integers(), st.booleans(), st.none()),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(LEAVES, inner, max_size=3),
    max_leaves=12,
)


def _texts(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [t for item in value for t in _texts(item)]
    if isinstance(value, dict):
        return [t for item in value.values() for t in _texts(item)]
    return []


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(LEAVES.filter(lambda k: "\n" not in k), VALUES, max_size=4))
def test_every_line_of_every_text_of_a_call_is_shown(given_input: dict[str, Any]) -> None:
    """Whatever the input, each line of each of its texts is on a line of its own or
    inside the JSON of a value kept on one line: nothing of it is lost."""
    logged = json.dumps(given_input, ensure_ascii=False)
    shown = body("[tool_use] Tool " + logged)
    assert shown[0] == "\u2192 Tool"
    flat = "\n".join(shown)
    for text in _texts(given_input):
        for part in text.split("\n"):
            assert part in flat or json.dumps(part, ensure_ascii=False)[1:-1] in flat
