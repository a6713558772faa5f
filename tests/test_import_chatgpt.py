"""The ChatGPT export importer: visible branch, content types, ZIP layouts, bad input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ccm.errors import FormatError
from ccm.ingest.chatgpt import parse
from ccm.ingest.model import Parsed, ParseOptions
from ccm.store import check_session_id
from tests.helpers import chatgpt_conversation as conversation
from tests.helpers import chatgpt_message as message
from tests.helpers import json_values, zipped

EXAMPLE = Path(__file__).parent / "fixtures" / "chatgpt" / "example-conversation.json"
OPTIONS = ParseOptions()


def run(value: Any, options: ParseOptions = OPTIONS, name: str = "conversations.json") -> Parsed:
    return parse(json.dumps(value).encode(), name, options)


def contents(parsed: Parsed) -> list[tuple[str, str]]:
    return [(t.role, t.content) for s in parsed.sessions for t in s.turns]


def make_zip(members: dict[str, Any]) -> bytes:
    """A ZIP of `members`, each a text or a JSON value."""
    return zipped({n: v if isinstance(v, str) else json.dumps(v) for n, v in members.items()})


# ---------------------------------------------------------------------------
# the real example


def test_example_keeps_only_the_visible_branch() -> None:
    parsed = parse(EXAMPLE.read_bytes(), "example-conversation.json", OPTIONS)
    [session] = parsed.sessions
    assert session.session_id == "conv-123"
    assert session.source == "chatgpt"
    assert session.meta == {
        "title": "Sample conversation with branch",
        "conversation_id": "conv-123",
    }
    assert [(t.id, t.role) for t in session.turns] == [
        ("msg-2", "user"),
        ("msg-3", "assistant"),
        ("msg-4", "user"),
        ("msg-6", "assistant"),
    ]
    assert [t.content for t in session.turns] == [
        "Hello! Can you help me with a programming question?",
        "Of course! I'd be happy to help with your programming question. "
        "What would you like to know?",
        "How do I write a function in JavaScript?",
        "Here's how to write a function in JavaScript:\n\n```javascript\n"
        "function greet(name) {\n  return `Hello, ${name}!`;\n}\n\n"
        "// Or using arrow function:\nconst greet = (name) => `Hello, ${name}!`;\n```",
    ]
    assert all("Python instead" not in t.content for t in session.turns)
    assert session.turns[0].ts == "2024-01-01T00:01:40.000Z"
    assert session.turns[1].meta == {"model": "gpt-4"}
    assert parsed.skipped == {"empty": 1}  # the empty system message
    assert parsed.rejected == []


def test_example_without_current_node_follows_the_last_child() -> None:
    [example] = json.loads(EXAMPLE.read_bytes())
    del example["current_node"]
    parsed = run(example)
    # msg-3's last child is msg-5, the edited question, which has no answer
    assert [t.id for t in parsed.sessions[0].turns] == ["msg-2", "msg-3", "msg-5"]


# ---------------------------------------------------------------------------
# layouts


def test_array_with_two_conversations() -> None:
    first = conversation(message("user", ["hi"]), id="c1", title="One")
    second = conversation(message("user", ["yo"]), id="c2", title="Two")
    parsed = run([first, second])
    assert [s.session_id for s in parsed.sessions] == ["c1", "c2"]
    assert [s.meta["title"] for s in parsed.sessions] == ["One", "Two"]
    assert contents(parsed) == [("user", "hi"), ("user", "yo")]


def test_single_conversation_object() -> None:
    parsed = run(conversation(message("user", ["alone"])))
    assert contents(parsed) == [("user", "alone")]


def test_split_files_inside_a_zip(tmp_path: Path) -> None:
    path = tmp_path / "export.zip"
    path.write_bytes(
        make_zip(
            {
                "chat.html": "<html></html>",
                "user.json": {"id": "user-1"},
                "conversations-001.json": [conversation(message("user", ["b"]), id="c2")],
                "conversations-000.json": [conversation(message("user", ["a"]), id="c1")],
                "file-abc.png": "not an image",
            }
        )
    )
    parsed = parse(path.read_bytes(), str(path), OPTIONS)
    assert [s.session_id for s in parsed.sessions] == ["c1", "c2"]
    assert contents(parsed) == [("user", "a"), ("user", "b")]


def test_zip_with_a_plain_conversations_json_in_a_folder() -> None:
    data = make_zip({"export/conversations.json": [conversation(message("user", ["x"]))]})
    assert contents(parse(data, "export.zip", OPTIONS)) == [("user", "x")]


def test_zip_without_conversations_names_the_file() -> None:
    with pytest.raises(FormatError, match=r"export\.zip: .*conversations\.json"):
        parse(make_zip({"chat.html": "<html/>"}), "export.zip", OPTIONS)


def test_zip_without_conversations_json_keeps_the_json_files_that_hold_conversations() -> None:
    """A ZIP whose conversations are in a file of another name: each .json is read
    once, and one that does not parse or holds something else is passed over, even
    when its text mentions a mapping and a title."""
    data = make_zip(
        {
            "chats.json": [conversation(message("user", ["kept"]))],
            "settings.json": '{"title": "x", "mapping": {"a": 1}',  # cut off
            "layout.json": {"title": "x", "mapping": [1]},  # not a conversation
        }
    )
    assert contents(parse(data, "export.zip", OPTIONS)) == [("user", "kept")]


def test_zip_member_with_bad_json_names_the_member() -> None:
    data = make_zip({"conversations.json": "[{"})
    with pytest.raises(FormatError, match=r"export\.zip:conversations\.json: not valid JSON"):
        parse(data, "export.zip", OPTIONS)


@pytest.mark.parametrize(
    ("data", "message_part"),
    [
        (b"[{", "not valid JSON"),
        (b"", "not valid JSON"),
        (b"\xff\xfe[\x00]\x00", "not UTF-8"),
        (b"42", "expected a JSON array"),
        (b'"text"', "expected a JSON array"),
        (b"PK\x03\x04 truncated", "unreadable ZIP"),
    ],
)
def test_unreadable_input_raises_format_error_naming_the_file(
    data: bytes, message_part: str
) -> None:
    with pytest.raises(FormatError) as caught:
        parse(data, "dump/conversations.json", OPTIONS)
    assert caught.value.message.startswith("dump/conversations.json")
    assert message_part in caught.value.message
    assert caught.value.hint and "--format" in caught.value.hint


# ---------------------------------------------------------------------------
# session ids


def test_forced_session_for_one_and_several_conversations() -> None:
    one = run([conversation(message("user", ["a"]))], ParseOptions(session="mine"))
    assert [s.session_id for s in one.sessions] == ["mine"]
    two = run(
        [conversation(message("user", ["a"])), conversation(message("user", ["b"]), id="c2")],
        ParseOptions(session="mine"),
    )
    assert [s.session_id for s in two.sessions] == ["mine-1", "mine-2"]


def test_forced_session_numbering_stays_a_valid_id() -> None:
    long = "a" * 128
    parsed = run([conversation(), conversation(id="c2")], ParseOptions(session=long))
    for session in parsed.sessions:
        assert check_session_id(session.session_id)


@pytest.mark.parametrize("bad_id", [None, "", "../etc", "x" * 200, 7])
def test_unusable_id_falls_back_to_title_slug_and_stable_hash(bad_id: Any) -> None:
    value = conversation(message("user", ["hi"]), id=bad_id, title="Deploy: the plan!")
    first = run(value).sessions[0].session_id
    assert first == run(value).sessions[0].session_id
    assert first.startswith("Deploy-the-plan-")
    assert len(first) == len("Deploy-the-plan-") + 8
    assert check_session_id(first)


def test_conversation_id_is_used_when_id_is_missing() -> None:
    value = conversation(message("user", ["hi"]), conversation_id="c-9")
    del value["id"]
    assert run(value).sessions[0].session_id == "c-9"


def test_untitled_conversation_with_bad_id_slugs_to_chatgpt() -> None:
    value = conversation(message("user", ["hi"]), id="../x")
    del value["title"]
    session = run(value).sessions[0]
    assert session.session_id.startswith("chatgpt-")
    assert "title" not in session.meta


# ---------------------------------------------------------------------------
# rejected conversations


def test_bad_conversations_are_rejected_and_the_rest_kept() -> None:
    good = conversation(message("user", ["kept"]), id="good")
    parsed = run([{"id": "no-map", "title": "t"}, "text", good], name="c.json")
    assert contents(parsed) == [("user", "kept")]
    assert [r.error for r in parsed.rejected] == [
        "conversation 1 (id 'no-map') has no 'mapping' object",
        "conversation 2 is not an object",
    ]
    first = parsed.rejected[0]
    assert (first.source, first.line, first.session) == ("c.json", None, None)
    assert json.loads(first.raw) == {"id": "no-map", "title": "t"}
    assert first.hint


# ---------------------------------------------------------------------------
# messages


def test_hidden_system_message_is_skipped_and_counted() -> None:
    hidden = message("system", [""], metadata={"is_visually_hidden_from_conversation": True})
    parsed = run(conversation(hidden, message("user", ["q"]), message("assistant", ["a"])))
    assert contents(parsed) == [("user", "q"), ("assistant", "a")]
    assert parsed.skipped == {"hidden": 1}


def test_hidden_message_with_text_is_still_skipped() -> None:
    hidden = message("user", ["secret"], metadata={"is_visually_hidden_from_conversation": True})
    assert contents(run(conversation(hidden))) == []


@pytest.mark.parametrize(
    ("role", "counted"),
    [("critic", "unknown_role"), (None, "unknown_role"), (["user"], "unknown_role")],
)
def test_unknown_roles_are_counted(role: Any, counted: str) -> None:
    odd = message("user", ["x"])
    odd["author"]["role"] = role
    parsed = run(conversation(odd))
    assert contents(parsed) == []
    assert parsed.skipped == {counted: 1}


def test_tool_message_keeps_the_tool_name() -> None:
    tool = message("tool", ["result"])
    tool["author"]["name"] = "python"
    turn = run(conversation(tool)).sessions[0].turns[0]
    assert (turn.role, turn.tool) == ("tool", {"name": "python"})


@pytest.mark.parametrize(
    ("times", "conversation_time", "expected"),
    [
        (
            [None, 1737000005.0],
            1737000000.0,
            ["2025-01-16T04:00:00.000Z", "2025-01-16T04:00:05.000Z"],
        ),
        (
            [1737000005.0, None],
            1737000000.0,
            ["2025-01-16T04:00:05.000Z", "2025-01-16T04:00:05.000Z"],
        ),
        ([None, None], None, [None, None]),
        (["garbage", True], None, [None, None]),
    ],
)
def test_null_create_time_falls_back(
    times: list[Any], conversation_time: Any, expected: list[str | None]
) -> None:
    bodies = [message("user", [f"m{i}"], create_time=t) for i, t in enumerate(times)]
    parsed = run(conversation(*bodies, create_time=conversation_time))
    assert [t.ts for t in parsed.sessions[0].turns] == expected


def test_message_id_falls_back_to_node_id() -> None:
    value = conversation(message("user", ["x"]))
    del value["mapping"]["n1"]["message"]["id"]
    assert run(value).sessions[0].turns[0].id == "n1"


@pytest.mark.parametrize(
    ("part", "placeholder"),
    [
        ({"content_type": "image_asset_pointer", "asset_pointer": "file-service://f"}, "[image]"),
        ({"content_type": "audio_asset_pointer"}, "[audio]"),
        ({"content_type": "real_time_user_audio_video_asset_pointer"}, "[audio]"),
        ({"content_type": "audio_transcription", "text": "spoken words"}, "spoken words"),
        ({"content_type": "file", "name": "notes.pdf"}, "[file: notes.pdf]"),
        ({"content_type": "sediment"}, "[sediment]"),
        ({}, "[attachment]"),
    ],
)
def test_non_text_parts_become_placeholders(part: dict[str, Any], placeholder: str) -> None:
    content = {"content_type": "multimodal_text", "parts": ["look:", part, None, 3]}
    parsed = run(conversation(message("user", content)))
    assert contents(parsed) == [("user", f"look:\n{placeholder}")]


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (
            {"content_type": "code", "language": "python", "text": "print(1)"},
            "```python\nprint(1)\n```",
        ),
        ({"content_type": "code", "language": "unknown", "text": "x"}, "```\nx\n```"),
        ({"content_type": "execution_output", "text": "1"}, "1"),
        (
            {
                "content_type": "tether_quote",
                "text": "quoted",
                "title": "Doc",
                "url": "https://e.x",
            },
            "quoted\n— Doc <https://e.x>",
        ),
        ({"content_type": "tether_quote", "text": "bare"}, "bare"),
        ({"content_type": "tether_browsing_display", "result": "page text"}, "page text"),
        ({"content_type": "tether_browsing_display", "result": ""}, "[browsing]"),
        ({"content_type": "system_error", "text": "timeout"}, "[error] timeout"),
        ({"content_type": "new_thing", "parts": ["still text"]}, "still text"),
        ({"content_type": "new_thing", "text": "also text"}, "also text"),
        ({"content_type": "text", "parts": "not a list", "text": "fallback"}, "fallback"),
    ],
)
def test_content_types(content: dict[str, Any], expected: str) -> None:
    assert contents(run(conversation(message("assistant", content)))) == [("assistant", expected)]


@pytest.mark.parametrize(
    ("content", "counted"),
    [
        ({"content_type": "thoughts", "thoughts": [{"summary": "s", "content": "c"}]}, "thinking"),
        ({"content_type": "reasoning_recap", "content": "Thought for 3s"}, "thinking"),
        ({"content_type": "user_editable_context", "user_profile": "p"}, "context"),
        ({"content_type": "model_editable_context", "model_set_context": "m"}, "context"),
        ({"content_type": "new_thing", "data": 1}, "new_thing"),
        ({"parts": [1]}, "unknown"),
        ("not a dict", "unknown"),
        (None, "unknown"),
        ({"content_type": "text", "parts": ["", "  "]}, "empty"),
        ({"content_type": "code", "text": ""}, "empty"),
    ],
)
def test_skipped_content_is_counted(content: Any, counted: str) -> None:
    body = message("assistant", [])
    body["content"] = content
    parsed = run(conversation(body))
    assert contents(parsed) == []
    assert parsed.skipped == {counted: 1}


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (
            {
                "content_type": "thoughts",
                "thoughts": [{"summary": "s", "content": "c"}, {"summary": "t"}],
            },
            "[thinking] c\nt",
        ),
        (
            {"content_type": "reasoning_recap", "content": "Thought for 3s"},
            "[thinking] Thought for 3s",
        ),
    ],
)
def test_thinking_is_kept_on_request(content: dict[str, Any], expected: str) -> None:
    parsed = run(conversation(message("assistant", content)), ParseOptions(include_thinking=True))
    assert contents(parsed) == [("assistant", expected)]


def test_lone_surrogates_are_kept_verbatim() -> None:
    # the store writes them losslessly (as JSON escapes); derived output replaces them
    data = json.dumps(conversation(message("user", ["a\ud800b"]))).encode()
    assert contents(parse(data, "c.json", OPTIONS)) == [("user", "a\ud800b")]


# ---------------------------------------------------------------------------
# broken trees


def test_cycle_in_parents_does_not_hang() -> None:
    value = conversation(message("user", ["one"]), message("assistant", ["two"]))
    value["mapping"]["n1"]["parent"] = "n2"  # n2 -> n1 -> n2 -> ...
    parsed = run(value)
    assert contents(parsed) == [("user", "one"), ("assistant", "two")]


def test_cycle_without_current_node_does_not_hang() -> None:
    value = conversation(message("user", ["one"]), message("assistant", ["two"]))
    value["mapping"]["n2"]["children"] = ["n1"]
    value["mapping"]["n1"]["parent"] = "n2"
    del value["current_node"]
    assert contents(run(value)) == [("user", "one"), ("assistant", "two")]


@pytest.mark.parametrize("current", ["missing", None, 5, ["n2"]])
def test_unusable_current_node_follows_the_last_child(current: Any) -> None:
    value = conversation(message("user", ["q"]), message("assistant", ["old"]))
    value["mapping"]["n1"]["children"].append("n3")
    value["mapping"]["n3"] = {
        "id": "n3",
        "parent": "n1",
        "children": [],
        "message": {"id": "n3", **message("assistant", ["regenerated"])},
    }
    value["current_node"] = current
    assert contents(run(value)) == [("user", "q"), ("assistant", "regenerated")]


def test_missing_parent_ends_the_walk() -> None:
    value = conversation(message("user", ["q"]), message("assistant", ["a"]))
    value["mapping"]["n2"]["parent"] = "gone"
    assert contents(run(value)) == [("assistant", "a")]


def test_odd_nodes_are_tolerated() -> None:
    value = conversation(message("user", ["q"]))
    value["mapping"].update({"junk": 3, "n2": {"parent": "n1", "message": "text"}})
    value["current_node"] = "n2"
    parsed = run(value)
    assert contents(parsed) == [("user", "q")]
    assert parsed.skipped == {"malformed": 1}


def test_empty_mapping_gives_an_empty_session() -> None:
    parsed = run({"id": "c1", "mapping": {}})
    assert [(s.session_id, s.turns) for s in parsed.sessions] == [("c1", [])]


# ---------------------------------------------------------------------------
# never raises anything but FormatError

JSON_VALUES = json_values()
NODE_IDS = st.sampled_from(["a", "b", "c", "client-created-root"])
NODES = st.fixed_dictionaries(
    {},
    optional={
        "parent": NODE_IDS | JSON_VALUES,
        "children": st.lists(NODE_IDS) | JSON_VALUES,
        "message": st.fixed_dictionaries(
            {},
            optional={
                "author": st.fixed_dictionaries(
                    {"role": st.sampled_from(["user", "tool"]) | JSON_VALUES}
                ),
                "content": st.fixed_dictionaries(
                    {
                        "content_type": st.sampled_from(
                            sorted(["text", "code", "thoughts", "tether_quote", "x"])
                        )
                    },
                    optional={"parts": JSON_VALUES, "text": JSON_VALUES, "thoughts": JSON_VALUES},
                )
                | JSON_VALUES,
                "create_time": JSON_VALUES,
                "metadata": JSON_VALUES,
                "id": JSON_VALUES,
            },
        )
        | JSON_VALUES,
    },
)
CONVERSATIONS = st.fixed_dictionaries(
    {"mapping": st.dictionaries(NODE_IDS, NODES | JSON_VALUES)},
    optional={"current_node": NODE_IDS | JSON_VALUES, "id": JSON_VALUES, "title": JSON_VALUES},
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(CONVERSATIONS, max_size=3), st.booleans())
def test_conversation_shaped_json_never_raises(value: list[Any], thinking: bool) -> None:
    parsed = parse(json.dumps(value).encode(), "fuzz.json", ParseOptions(include_thinking=thinking))
    for session in parsed.sessions:
        assert check_session_id(session.session_id)
        assert all(t.content.strip() for t in session.turns)
