"""The Anthropic Messages API importer: requests, responses, tools, thinking, bad input."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ccm.errors import FormatError
from ccm.ingest.anthropic import parse
from ccm.ingest.model import Parsed, ParseOptions
from tests.helpers import json_values

OPTIONS = ParseOptions()
THINKING = ParseOptions(include_thinking=True)

TOOL_USE = {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"b": 1, "a": "é"}}
RESPONSE = {
    "id": "msg_01",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5",
    "content": [{"type": "text", "text": "Let me look."}, TOOL_USE],
    "stop_reason": "tool_use",
    "usage": {"input_tokens": 3, "output_tokens": 4},
}


def request(*messages: Any, **extra: Any) -> dict[str, Any]:
    return {"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": list(messages), **extra}


def user(content: Any) -> dict[str, Any]:
    return {"role": "user", "content": content}


def assistant(content: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": content}


def run(value: Any, options: ParseOptions = OPTIONS, name: str = "dump/req.json") -> Parsed:
    return parse(json.dumps(value).encode(), name, options)


def contents(parsed: Parsed) -> list[tuple[str, str]]:
    return [(t.role, t.content) for s in parsed.sessions for t in s.turns]


# ---------------------------------------------------------------------------
# requests and responses


@pytest.mark.parametrize(
    "system",
    [
        "Be brief.\nUse SI units.",
        [
            {"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}},
            {"type": "text", "text": "Use SI units."},
        ],
    ],
)
def test_request_with_system_string_or_blocks(system: Any) -> None:
    parsed = run(request(user("How fast is inotify?"), assistant("Fast."), system=system))
    [session] = parsed.sessions
    assert (session.session_id, session.source) == ("req", "anthropic")
    assert session.meta == {"model": "claude-sonnet-4-5"}
    assert contents(parsed) == [
        ("system", "Be brief.\nUse SI units."),
        ("user", "How fast is inotify?"),
        ("assistant", "Fast."),
    ]
    assert all(t.id is None and t.ts is None for t in session.turns)
    assert parsed.skipped == {} and parsed.rejected == []


def test_response_with_tool_use() -> None:
    [turn] = run(RESPONSE).sessions[0].turns
    assert turn.role == "assistant"
    assert turn.id == "msg_01"
    assert turn.content == 'Let me look.\n[tool_use] Read {"a":"é","b":1}'
    assert turn.meta == {"tool_calls": [{"name": "Read", "id": "toolu_1"}]}


def test_tool_result_turn_knows_the_tool_name() -> None:
    value = request(
        user("Read w.py"),
        assistant([TOOL_USE]),
        user(
            [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "import os"},
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_9",
                    "is_error": True,
                    "content": [{"type": "text", "text": "no"}, {"type": "text", "text": "such"}],
                },
            ]
        ),
    )
    turns = run(value).sessions[0].turns
    assert [(t.role, t.content, t.tool, t.meta) for t in turns[2:]] == [
        ("tool", "import os", {"id": "toolu_1", "name": "Read"}, {}),
        ("tool", "no\nsuch", {"id": "toolu_9"}, {"is_error": True}),
    ]


def test_tool_result_in_a_later_array_item_knows_the_tool_name() -> None:
    follow_up = request(user([{"type": "tool_result", "tool_use_id": "toolu_1", "content": "x"}]))
    turns = run([RESPONSE, follow_up]).sessions[0].turns
    assert turns[-1].tool == {"id": "toolu_1", "name": "Read"}


@pytest.mark.parametrize(
    ("blocks", "expected"),
    [
        (
            [
                {"type": "tool_result", "tool_use_id": "t1", "content": "out"},
                {"type": "text", "text": "and now?"},
            ],
            [("tool", "out"), ("user", "and now?")],
        ),
        (
            [
                {"type": "text", "text": "first"},
                {"type": "tool_result", "tool_use_id": "t1", "content": "out"},
                {"type": "text", "text": "then"},
            ],
            [("user", "first"), ("tool", "out"), ("user", "then")],
        ),
    ],
)
def test_text_and_tool_results_keep_block_order(
    blocks: list[Any], expected: list[tuple[str, str]]
) -> None:
    assert contents(run(request(user(blocks)))) == expected


@pytest.mark.parametrize(
    ("block", "text"),
    [
        (
            {
                "type": "image",
                "source": {"type": "base64", "media_type": "image/png", "data": "AA=="},
            },
            "[image]",
        ),
        ({"type": "document", "source": {"type": "text", "data": "d"}}, "[document]"),
        ({"type": "search_result", "text": "found"}, "found"),
        ("bare string", "bare string"),
    ],
)
def test_other_blocks(block: Any, text: str) -> None:
    assert contents(run(request(user([block])))) == [("user", text)]


def test_image_inside_a_tool_result() -> None:
    block = {"type": "tool_result", "tool_use_id": "t", "content": [{"type": "image"}]}
    assert contents(run(request(user([block])))) == [("tool", "[image]")]


@pytest.mark.parametrize(
    ("block", "counted"),
    [
        ({"type": "server_tool_use", "id": "s", "name": "web_search"}, "server_tool_use"),
        ({"no_type": 1}, "unknown"),
        (7, "unknown"),
        ({"type": "text", "text": ""}, "empty"),
    ],
)
def test_unusable_blocks_are_counted(block: Any, counted: str) -> None:
    parsed = run(request(user([block])))
    assert contents(parsed) == []
    assert parsed.skipped == {counted: 1}


# ---------------------------------------------------------------------------
# thinking

THOUGHTFUL = {
    **RESPONSE,
    "content": [
        {"type": "thinking", "thinking": "Check the file.", "signature": "sig"},
        {"type": "redacted_thinking", "data": "xyz"},
        {"type": "text", "text": "Done."},
    ],
}


def test_thinking_is_skipped_by_default() -> None:
    parsed = run(THOUGHTFUL)
    assert contents(parsed) == [("assistant", "Done.")]
    assert parsed.skipped == {"thinking": 2}


def test_thinking_is_kept_on_request_but_redacted_never() -> None:
    parsed = run(THOUGHTFUL, THINKING)
    assert contents(parsed) == [("assistant", "[thinking] Check the file.\nDone.")]
    assert parsed.skipped == {"thinking": 1}


# ---------------------------------------------------------------------------
# several payloads, session ids


def test_array_of_request_and_response_is_one_session_in_order() -> None:
    parsed = run([request(user("Read w.py")), RESPONSE], name="/tmp/calls.json")
    [session] = parsed.sessions
    assert session.session_id == "calls"
    assert [(t.role, t.id) for t in session.turns] == [("user", None), ("assistant", "msg_01")]


@pytest.mark.parametrize(
    ("name", "options", "expected"),
    [
        ("-", OPTIONS, "anthropic"),
        ("dir/My Request.json", OPTIONS, "My-Request"),
        ("dir/My Request.json", ParseOptions(session="forced"), "forced"),
    ],
)
def test_session_id(name: str, options: ParseOptions, expected: str) -> None:
    assert run(request(user("x")), options, name).sessions[0].session_id == expected


# ---------------------------------------------------------------------------
# bad input


def test_bad_messages_are_rejected_and_the_rest_kept() -> None:
    value = request(
        user("kept"),
        "not an object",
        {"role": "system", "content": "no"},
        {"role": "user", "content": 5},
        assistant("also kept"),
    )
    parsed = run(value, name="req.json")
    assert contents(parsed) == [("user", "kept"), ("assistant", "also kept")]
    assert [r.error for r in parsed.rejected] == [
        "messages[1]: not an object",
        "messages[2]: role 'system' is not 'user' or 'assistant'",
        "messages[3]: content is neither a string nor a list of blocks",
    ]
    first = parsed.rejected[0]
    assert (first.source, first.line, first.session) == ("req.json", None, "req")
    assert json.loads(first.raw) == "not an object"
    assert first.hint


def test_array_items_that_are_not_payloads_are_rejected() -> None:
    parsed = run([{"hello": 1}, request(user("x"))])
    assert contents(parsed) == [("user", "x")]
    assert [r.error for r in parsed.rejected] == [
        "[0]: neither a Messages API request (with 'messages') nor a response (type 'message')"
    ]


def test_messages_in_array_items_are_named_by_path() -> None:
    parsed = run([request(user("x")), request(7)])
    assert [r.error for r in parsed.rejected] == ["[1].messages[0]: not an object"]


@pytest.mark.parametrize(
    ("data", "message_part"),
    [
        (b"{not json", "not valid JSON"),
        (b"\xff\xfe{\x00}\x00", "not UTF-8"),
        (b"3", "neither a Messages API request"),
        (b'{"model": "m"}', "neither a Messages API request"),
        (b'{"messages": "text"}', "neither a Messages API request"),
        (b"[]", "no Messages API request or response"),
        (b"[1, 2]", "no Messages API request or response"),
    ],
)
def test_unreadable_input_raises_format_error_naming_the_file(
    data: bytes, message_part: str
) -> None:
    with pytest.raises(FormatError) as caught:
        parse(data, "dump/req.json", OPTIONS)
    assert caught.value.message.startswith("dump/req.json: ")
    assert message_part in caught.value.message
    assert caught.value.hint and "--format" in caught.value.hint


# ---------------------------------------------------------------------------
# never raises anything but FormatError

JSON_VALUES = json_values()
BLOCK_TYPES = ["text", "image", "tool_use", "tool_result", "thinking", "redacted_thinking", "x"]
BLOCKS = st.fixed_dictionaries(
    {"type": st.sampled_from(BLOCK_TYPES)},
    optional={
        "text": JSON_VALUES,
        "thinking": JSON_VALUES,
        "id": st.sampled_from(["t1", "t2"]) | JSON_VALUES,
        "tool_use_id": st.sampled_from(["t1", "t2"]) | JSON_VALUES,
        "name": JSON_VALUES,
        "input": JSON_VALUES,
        "content": JSON_VALUES,
        "is_error": JSON_VALUES,
    },
)
MESSAGES = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant"]) | JSON_VALUES},
    optional={"content": st.text() | st.lists(BLOCKS | JSON_VALUES) | JSON_VALUES},
)
PAYLOADS = st.fixed_dictionaries(
    {"messages": st.lists(MESSAGES | JSON_VALUES)}, optional={"system": JSON_VALUES}
) | st.fixed_dictionaries(
    {"type": st.just("message"), "content": st.lists(BLOCKS)}, optional={"id": JSON_VALUES}
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(PAYLOADS | st.lists(PAYLOADS, min_size=1, max_size=3), st.booleans())
def test_payload_shaped_json_never_raises(value: Any, thinking: bool) -> None:
    parsed = parse(json.dumps(value).encode(), "fuzz.json", ParseOptions(include_thinking=thinking))
    assert len(parsed.sessions) == 1
