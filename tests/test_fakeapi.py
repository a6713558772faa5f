"""The fake Anthropic API that `ccm proxy` is tested against, checked with the real SDK.

If the fake drifted from the wire format the `anthropic` SDK expects, the proxy's tests would
pass against something the real API never sends; these tests keep it honest, locally (no test
here touches the internet).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx2
import pytest

from tests.fakeapi import FakeAnthropic, Reply

MODEL = "claude-test-1"


@pytest.fixture
def client(fake: FakeAnthropic) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(api_key="k", base_url=fake.url, max_retries=0) as sdk:
        yield sdk


def ask(text: str) -> list[Any]:
    return [{"role": "user", "content": text}]


def events(stream: bytes) -> list[tuple[str, dict[str, Any]]]:
    """The (event, data) pairs of a server-sent-event body."""
    pairs = []
    for frame in stream.decode().split("\n\n"):
        if not frame:
            continue
        event_line, data_line = frame.split("\n")
        assert event_line.startswith("event: ") and data_line.startswith("data: ")
        pairs.append((event_line[len("event: ") :], json.loads(data_line[len("data: ") :])))
    return pairs


def test_text_reply_and_the_request_as_received(
    fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    fake.push(Reply.text("The watchdog was configured on Tuesday."))
    message = client.messages.create(
        model=MODEL,
        max_tokens=100,
        system="be brief",
        messages=ask("when was the watchdog configured?"),
    )
    assert message.content[0].type == "text"
    assert message.content[0].text == "The watchdog was configured on Tuesday."
    assert message.id == "msg_fake_1"
    assert message.model == MODEL
    assert message.stop_reason == "end_turn"
    assert message.usage.output_tokens == len("The watchdog was configured on Tuesday.") // 4 + 1
    request = fake.received[-1]
    assert (request.method, request.path) == ("POST", "/v1/messages")
    # the key, as the SDK sends it: `x-api-key: k` (SDK 2.13 sends `authorization: Bearer k`)
    assert request.headers.get("x-api-key") == "k" or request.headers["authorization"] == "Bearer k"
    assert request.json["messages"] == ask("when was the watchdog configured?")
    assert request.json["system"] == "be brief"
    assert fake.messages() == [request.json]
    assert json.loads(fake.sent[-1])["content"] == [
        {"type": "text", "text": "The watchdog was configured on Tuesday."}
    ]
    # with the queue empty, the default answer echoes the start of the last user message
    again = client.messages.create(model=MODEL, max_tokens=100, messages=ask("x" * 60))
    assert again.content[0].type == "text"
    assert again.content[0].text == "ok: " + "x" * 40
    assert again.id == "msg_fake_2"


def test_streamed_text_and_tool_use_reassemble(
    fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    text = "A reply long enough to be split into several text deltas by the fake."
    fake.push(
        Reply.text(text),
        Reply.tool_use("search", {"query": "watchdog", "n": 3}, text="Let me look."),
    )
    with client.messages.stream(model=MODEL, max_tokens=100, messages=ask("hi")) as stream:
        first = stream.get_final_message()
    assert [block.type for block in first.content] == ["text"]
    assert first.content[0].type == "text" and first.content[0].text == text
    assert first.stop_reason == "end_turn"
    frames = events(fake.sent[-1])
    assert fake.sent[-1].startswith(b"event: message_start")
    assert [name for name, _ in frames[:2]] == ["message_start", "ping"]
    assert all(name == data["type"] for name, data in frames)
    deltas = [data for name, data in frames if name == "content_block_delta"]
    assert len(deltas) > 2 and "".join(d["delta"]["text"] for d in deltas) == text

    with client.messages.stream(model=MODEL, max_tokens=100, messages=ask("find")) as stream:
        second = stream.get_final_message()
    assert second.stop_reason == "tool_use"
    assert [block.type for block in second.content] == ["text", "tool_use"]
    tool = second.content[1]
    assert tool.type == "tool_use"
    assert tool.name == "search" and tool.id.startswith("toolu_fake_")
    assert tool.input == {"query": "watchdog", "n": 3}
    assert fake.sent[-1].startswith(b"event: message_start")
    assert fake.sent[-1].endswith(b'event: message_stop\ndata: {"type": "message_stop"}\n\n')
    frames = events(fake.sent[-1])
    pieces = [d["delta"]["partial_json"] for _, d in frames if d.get("index") == 1 and "delta" in d]
    assert len(pieces) >= 2
    assert json.loads("".join(pieces)) == {"query": "watchdog", "n": 3}
    assert [name for name, _ in frames[-2:]] == ["message_delta", "message_stop"]
    assert fake.received[-1].json["stream"] is True


def test_rate_limit_error_with_retry_after(
    fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    fake.push(Reply.error(429, "rate_limit_error", "slow down", {"retry-after": "7"}))
    with pytest.raises(anthropic.RateLimitError) as caught:
        client.messages.create(model=MODEL, max_tokens=100, messages=ask("hi"))
    assert caught.value.status_code == 429
    assert caught.value.response.headers["retry-after"] == "7"
    assert caught.value.response.headers["request-id"].startswith("req_fake_")
    assert caught.value.body == {
        "type": "error",
        "error": {"type": "rate_limit_error", "message": "slow down"},
    }


def test_cut_stream_raises_and_error_event_raises(
    fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    fake.push(Reply.text("never finished " * 5, cut_after=3))
    with (
        pytest.raises((anthropic.APIError, httpx2.HTTPError)),
        client.messages.stream(model=MODEL, max_tokens=100, messages=ask("hi")) as stream,
    ):
        stream.get_final_message()
    assert [name for name, _ in events(fake.sent[-1])] == [
        "message_start",
        "ping",
        "content_block_start",
    ]

    fake.push(Reply.text("overloaded midway " * 5, error_after=4))
    with (
        pytest.raises(anthropic.APIStatusError, match="Overloaded"),
        client.messages.stream(model=MODEL, max_tokens=100, messages=ask("hi")) as stream,
    ):
        stream.get_final_message()
    assert events(fake.sent[-1])[-1] == (
        "error",
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
    )
    # the fake still serves normally after both
    assert client.messages.create(model=MODEL, max_tokens=10, messages=ask("hi")).id == (
        "msg_fake_3"
    )


def test_count_tokens_and_pass_through_paths(
    fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    counted = client.messages.count_tokens(model=MODEL, messages=ask("count these words"))
    body = fake.received[-1].json
    assert fake.received[-1].path == "/v1/messages/count_tokens"
    assert counted.input_tokens == len(json.dumps(body)) // 4 > 0

    with httpx2.Client(base_url=fake.url) as http:
        answer = http.get("/v1/models", params={"limit": "5"}, headers={"X-Api-Key": "k"})
    assert answer.status_code == 200
    assert answer.json() == {"data": [], "path": "/v1/models"}
    request = fake.received[-1]
    assert (request.method, request.path, request.query) == ("GET", "/v1/models", "limit=5")
    assert request.headers["x-api-key"] == "k"
    assert fake.messages() == []  # neither request counts as a /v1/messages request
    assert fake.sent == []
