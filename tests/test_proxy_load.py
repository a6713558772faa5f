"""`ccm proxy` under load, on loopback: many streaming clients at once, nothing lost.

Many conversations run at the same time through one proxy (served by uvicorn on
127.0.0.1) to the local fake of the API (`tests/fakeapi.py`), each on the real
`anthropic` SDK (`AsyncAnthropic`, streamed), as a client does: every request carries
the whole history so far (the user's earlier messages and the answers it received) and
one new user message whose text no other request has. Within a conversation the
requests go one after the other; the conversations run concurrently.

* observe: 50 conversations of 20 requests (1,000 requests, 50 streams at once);
* manage: 10 conversations of 10 requests, with a budget small enough that ccm's context
  (and recall) replaces the older history, and the memory tools offered.

Afterwards: for every session, raw.jsonl holds its user messages and the answers, in
order, each exactly once and word for word; every client got the whole text the fake
streamed to it (read back from the exact bytes the fake sent); the fake received each
request once (in observe, exactly the history the client sent). Nothing is timed: only
what arrived is checked, so a slow machine makes the test slower, never red.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import anthropic
import pytest
from anthropic.types import MessageParam

from ccm import live
from ccm.proxy import CLIENT_IDLE, Frames, Proxy, Reassembly, Settings
from ccm.store import Store
from tests.fakeapi import FakeAnthropic, Serving
from tests.helpers import said

KEY = "sk-ant-test-load"
MODEL = "claude-test"
TIMEOUT = 300.0  # seconds one request may take: a bound against a hang, not a measure


pytestmark = pytest.mark.usefixtures("kept_engines")  # as `ccm proxy` keeps them


@dataclass
class Conversation:
    """One client's conversation: what it sent and what it got, request by request."""

    session: str
    messages: list[MessageParam] = field(default_factory=list)  # the history so far
    sent: list[list[MessageParam]] = field(default_factory=list)  # each request's messages
    prompts: list[str] = field(default_factory=list)
    answers: list[str] = field(default_factory=list)  # the text the client got
    ids: list[str] = field(default_factory=list)  # the message id of each answer


def prompt(session: str, number: int) -> str:
    """A user message no other request has (the fake answers "ok: " and its first 40
    characters, which are unique too)."""
    return (
        f"{session} request {number:02d}: please check the cache of worker {number} "
        f"and tell me what the session {session} holds about the parser"
    )


async def converse(
    client: anthropic.AsyncAnthropic, conversation: Conversation, requests: int
) -> None:
    """The conversation's requests, one after the other, each streamed to its end."""
    for number in range(requests):
        text = prompt(conversation.session, number)
        conversation.messages.append({"role": "user", "content": text})
        conversation.sent.append(list(conversation.messages))
        async with client.messages.stream(
            model=MODEL,
            max_tokens=256,
            messages=conversation.messages,
            extra_headers={"x-ccm-session": conversation.session},
        ) as stream:
            deltas = [piece async for piece in stream.text_stream]
            message = await stream.get_final_message()
        answer = "".join(deltas)
        assert [block.type for block in message.content] == ["text"]
        assert message.content[0].type == "text" and message.content[0].text == answer
        assert message.stop_reason == "end_turn"
        conversation.prompts.append(text)
        conversation.answers.append(answer)
        conversation.ids.append(message.id)
        conversation.messages.append({"role": "assistant", "content": answer})


def run(proxy: Proxy, sessions: int, requests: int, prefix: str) -> list[Conversation]:
    """Serve `proxy` and run `sessions` conversations through it at once."""
    conversations = [Conversation(f"{prefix}-{n:02d}") for n in range(sessions)]

    async def clients(url: str) -> None:
        async with anthropic.AsyncAnthropic(
            api_key=KEY, base_url=url, max_retries=0, timeout=TIMEOUT
        ) as client:
            await asyncio.gather(*(converse(client, c, requests) for c in conversations))

    with Serving(proxy.app(), name="ccm-proxy", keep_alive=CLIENT_IDLE) as url:
        asyncio.run(clients(url))
    return conversations


def streamed_text(sent: bytes) -> str:
    """The text of a message, from the exact bytes of its event stream."""
    message = Reassembly()
    for frame in Frames().feed(sent):
        message.add(frame)
    assert message.complete and message.error is None and message.message is not None
    return "".join(b.get("text", "") for b in message.message["content"] if b["type"] == "text")


def check(
    store: Store, fake: FakeAnthropic, conversations: list[Conversation], requests: int
) -> list[dict[str, Any]]:
    """What the clients got and what raw.jsonl holds; returns the bodies the fake got."""
    total = len(conversations) * requests
    calls = [r for r in fake.received if r.method == "POST" and r.path == "/v1/messages"]
    assert len(calls) == total
    assert len(fake.received) == total  # nothing else, nothing twice
    assert len(fake.sent) == total
    bodies = [call.json for call in calls]
    assert all(body["stream"] is True for body in bodies)
    # the fake numbers its messages msg_fake_1, 2... in the order of `fake.sent`
    by_id = {f"msg_fake_{number}": sent for number, sent in enumerate(fake.sent, 1)}
    answered = Counter(ident for c in conversations for ident in c.ids)
    assert answered == Counter(by_id.keys())  # every answer reached one client, once
    for conversation in conversations:
        assert len(conversation.answers) == requests
        expected: list[tuple[str, str]] = []
        for number, (text, answer, ident) in enumerate(
            zip(conversation.prompts, conversation.answers, conversation.ids, strict=True)
        ):
            assert text == prompt(conversation.session, number)
            assert answer == streamed_text(by_id[ident])  # the whole stream arrived
            assert answer == "ok: " + text[:40]  # and it answers this request
            expected += [("user", text), ("assistant", answer)]
        assert said(store, conversation.session) == expected
    assert store.sessions() == sorted(c.session for c in conversations)
    return bodies


def test_observe_50_streaming_clients_1000_requests(store: Store, fake: FakeAnthropic) -> None:
    sessions, requests = 50, 20
    proxy = Proxy(store, Settings(upstream=fake.url, mode="observe"))
    conversations = run(proxy, sessions, requests, "load")
    bodies = check(store, fake, conversations, requests)
    # observe forwards each request as it came: the whole history and the new message
    got = Counter(json.dumps(body["messages"]) for body in bodies)
    assert got == Counter(json.dumps(sent) for c in conversations for sent in c.sent)


def test_manage_10_streaming_clients_100_requests(store: Store, fake: FakeAnthropic) -> None:
    sessions, requests = 10, 10  # on a new root: the sessions' first requests open the index
    settings = Settings(upstream=fake.url, mode="manage", budget=500, memory_tools="always")
    conversations = run(Proxy(store, settings), sessions, requests, "managed")
    bodies = check(store, fake, conversations, requests)
    # ccm's context went upstream: the newest user message last and unchanged, the
    # memory tools offered, and the older history replaced by ccm's memory
    newest = Counter(json.dumps(body["messages"][-1]) for body in bodies)
    wanted = Counter(
        json.dumps({"role": "user", "content": text}) for c in conversations for text in c.prompts
    )
    assert newest == wanted
    names = {tool["name"] for tool in live.MEMORY_TOOLS}
    assert all(names <= {tool["name"] for tool in body["tools"]} for body in bodies)
    # every request whose history did not go whole carried ccm's memory in its place
    history = {
        text: len(sent) for c in conversations for text, sent in zip(c.prompts, c.sent, strict=True)
    }
    cut = [
        body for body in bodies if len(body["messages"]) < history[body["messages"][-1]["content"]]
    ]
    assert cut  # the budget is small: the longer conversations did not fit
    assert all(
        any(block["text"].startswith(live.MEMORY_HEADER) for block in body.get("system", []))
        for body in cut
    )
