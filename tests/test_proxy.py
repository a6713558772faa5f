"""`ccm proxy` end to end: the real `anthropic` SDK (and plain httpx2 where bytes count)
as the client, the proxy served by uvicorn on 127.0.0.1, and a local fake of the API
(`tests/fakeapi.py`) as the upstream. What reached the upstream, what the client got and
what raw.jsonl holds are checked; nothing leaves the machine."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import anthropic
import httpx2
import pytest

from ccm import live, tokens
from ccm.index import Index
from ccm.proxy import CLIENT_IDLE, Frames, Proxy, Reassembly, Settings
from ccm.store import Store
from tests.fakeapi import FakeAnthropic, Reply, Serving
from tests.helpers import ccm, said, wait_for

KEY = "sk-ant-test-0123456789-secret"
MODEL = "claude-test"
HEADERS = {"x-api-key": KEY, "anthropic-version": "2023-06-01"}
RULE = "Important: never push straight to main; every change goes through a pull request."


pytestmark = pytest.mark.usefixtures("kept_engines")  # as `ccm proxy` keeps them


Serve = Callable[..., Any]


@pytest.fixture
def serve(store: Store, fake: FakeAnthropic) -> Serve:
    @contextmanager
    def serving(**options: Any) -> Iterator[str]:
        settings = Settings(upstream=fake.url, **options)
        with Serving(Proxy(store, settings).app(), name="ccm-proxy", keep_alive=CLIENT_IDLE) as url:
            yield url

    return serving


_opened: list[anthropic.Anthropic] = []


@pytest.fixture(autouse=True)
def _clients_closed() -> Iterator[None]:
    """Each test's SDK clients closed when it ends. A client that an exception's
    traceback holds (`pytest.raises`) is freed only by the garbage collector, in some
    later test, which may finalize its pooled socket before the client that would close
    it: an "unclosed socket" ResourceWarning there, which the suite turns into an error."""
    yield
    while _opened:
        _opened.pop().close()


def client(url: str, **options: Any) -> Any:
    """The SDK's client on the proxy (typed loosely: the tests pass plain dicts, as
    programs that build their requests as JSON do), closed when the test ends."""
    sdk = anthropic.Anthropic(api_key=KEY, base_url=url, max_retries=0, **options)
    _opened.append(sdk)
    return sdk


def events(store: Store, session: str, kind: str | None = None) -> list[dict[str, Any]]:
    found, bad, _ = store.read_events(session)
    assert bad == []
    return [e for e in found if kind is None or e["kind"] == kind]


def body(messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"model": MODEL, "max_tokens": 256, "messages": messages, **extra}


def user(text: str) -> list[dict[str, Any]]:
    """A conversation of one user message."""
    return [{"role": "user", "content": text}]


def create(
    target: Any, messages: list[dict[str, Any]], session: str | None = None, **options: Any
) -> Any:
    """One `messages.create` through the SDK (`target`: the proxy's URL, or a client),
    with the session header when `session` is given."""
    sdk = client(target) if isinstance(target, str) else target
    if session is not None:
        options["extra_headers"] = {"x-ccm-session": session}
    options.setdefault("max_tokens", 64)
    return sdk.messages.create(model=MODEL, messages=messages, **options)


# ---------------------------------------------------------------------------
# observe: a recorder


def test_observe_forwards_the_request_and_returns_the_upstream_bytes(
    serve: Serve, fake: FakeAnthropic, store: Store
) -> None:
    fake.push(Reply.text("Paris is the capital of France."))
    sent = body(user("What is the capital of France?"), system="Be brief.")
    raw = json.dumps(sent).encode()
    with serve() as url, httpx2.Client() as http:
        answer = http.post(
            f"{url}/v1/messages",
            content=raw,
            headers={**HEADERS, "content-type": "application/json", "x-ccm-session": "geo"},
        )
    assert answer.status_code == 200
    assert answer.content == fake.sent[-1]
    assert fake.received[-1].body == raw  # unchanged, byte for byte
    assert fake.received[-1].headers["x-api-key"] == KEY  # the key goes upstream
    assert said(store, "geo") == [
        ("system", "Be brief."),
        ("user", "What is the capital of France?"),
        ("assistant", "Paris is the capital of France."),
    ]


def test_observe_stream_reaches_the_client_byte_for_byte(
    serve: Serve, fake: FakeAnthropic, store: Store
) -> None:
    fake.push(Reply.text("A long streamed answer, cut by the fake into many small deltas."))
    sent = body(user("Stream me something."), stream=True)
    with (
        serve() as url,
        httpx2.Client() as http,
        http.stream(
            "POST", f"{url}/v1/messages", json=sent, headers={**HEADERS, "x-ccm-session": "s"}
        ) as answer,
    ):
        assert answer.status_code == 200
        assert answer.headers["content-type"].startswith("text/event-stream")
        received = b"".join(answer.iter_raw())
    assert received == fake.sent[-1]
    wait_for(lambda: len(said(store, "s")) == 2)
    assert said(store, "s")[-1] == (
        "assistant",
        "A long streamed answer, cut by the fake into many small deltas.",
    )


def test_a_streamed_reply_with_thinking_is_put_together_as_the_sdk_does(
    serve: Serve, fake: FakeAnthropic, store: Store
) -> None:
    content = [
        {"type": "thinking", "thinking": "The user asks for a sum. " * 4, "signature": "sig-1"},
        {"type": "text", "text": "Two and two make four."},
    ]
    fake.push(Reply(content=content))
    with (
        serve() as url,
        client(url).messages.stream(
            model=MODEL, max_tokens=64, messages=user("2+2?"), extra_headers={"x-ccm-session": "t"}
        ) as stream,
    ):
        final = stream.get_final_message()
    assert [block.model_dump(exclude_none=True) for block in final.content] == content
    rebuilt = Reassembly()
    for frame in Frames().feed(fake.sent[-1]):
        rebuilt.add(frame)
    assert rebuilt.complete and rebuilt.message is not None
    assert rebuilt.message["content"] == content  # what the proxy records it from
    wait_for(lambda: len(said(store, "t")) == 2)
    assert said(store, "t")[-1] == ("assistant", "Two and two make four.")


def test_a_conversation_through_the_sdk_records_every_turn_once(
    serve: Serve, fake: FakeAnthropic, store: Store
) -> None:
    history: list[dict[str, Any]] = []
    prompts = ["Hello there.", "Name three rivers in Europe.", "Which is the longest?"]
    replies = ["Hi! How can I help?", "The Danube, the Rhine and the Loire.", "The Danube."]
    fake.push(*(Reply.text(text) for text in replies))
    with serve() as url:
        sdk = client(url)
        for number, prompt in enumerate(prompts):
            history.append({"role": "user", "content": prompt})
            if number == 1:  # the middle one streamed
                with sdk.messages.stream(
                    model=MODEL, max_tokens=64, system="You answer briefly.", messages=history
                ) as stream:
                    text = "".join(stream.text_stream)
                    message = stream.get_final_message()
                assert text == replies[number]
            else:
                message = sdk.messages.create(
                    model=MODEL, max_tokens=64, system="You answer briefly.", messages=history
                )
            assert message.content[0].type == "text"
            assert message.content[0].text == replies[number]
            history.append({"role": "assistant", "content": message.content[0].text})
        sessions = store.sessions()
    assert len(sessions) == 1 and sessions[0].startswith("api-")  # the digest: stable
    expected = [("system", "You answer briefly.")]
    for prompt, reply in zip(prompts, replies, strict=True):
        expected += [("user", prompt), ("assistant", reply)]
    wait_for(lambda: len(said(store, sessions[0])) == len(expected))
    assert said(store, sessions[0]) == expected
    turns, _, _ = store.read_turns(sessions[0])
    assert turns[0]["meta"].get("injected") is True  # the system prompt is not mined for rules
    assert [t["turn"] for t in turns] == list(range(1, len(expected) + 1))


def test_a_retried_request_appends_nothing_twice(
    serve: Serve, fake: FakeAnthropic, store: Store
) -> None:
    first = user("Plan the migration.")
    with serve() as url:
        sdk = client(url)
        create(sdk, first)
        # the reply was lost on the way: the client sends the same request again
        again = create(sdk, first)
        follow = [
            *first,
            {"role": "assistant", "content": again.content[0].text},
            {"role": "user", "content": "Start with the database."},
        ]
        create(sdk, follow)
        # an edited last message: a new branch, the old one stays in the log
        edited = [*follow[:2], {"role": "user", "content": "Start with the queues."}]
        create(sdk, edited)
        (session,) = store.sessions()
    users = [text for role, text in said(store, session) if role == "user"]
    assert users == ["Plan the migration.", "Start with the database.", "Start with the queues."]
    replies = [text for role, text in said(store, session) if role == "assistant"]
    assert len(replies) == 4  # each answer the client was sent, once


def test_each_bad_message_of_a_history_is_quarantined_once(store: Store) -> None:
    """A client sends its whole history with every request: a message that is no
    message is kept in quarantine the first time, each one, and never again."""
    history: list[Any] = [
        {"role": "user", "content": "Plan the migration."},
        42,
        {"role": "assistant", "content": "Database first."},
        {"role": "robot", "content": "beep"},
        {"role": "user", "content": "Go on."},
    ]
    live.record_request(store, "s", {"messages": history})
    history += [
        {"role": "assistant", "content": "Queues next."},
        {"role": "user", "content": "And then?"},
    ]
    live.record_request(store, "s", {"messages": history})
    kept = [json.loads(line) for line in store.quarantine_path("s").read_text().splitlines()]
    assert [json.loads(k["raw"]) for k in kept] == [42, {"role": "robot", "content": "beep"}]
    history += ["not a message", {"role": "user", "content": "Done?"}]
    live.record_request(store, "s", {"messages": history})
    kept = [json.loads(line) for line in store.quarantine_path("s").read_text().splitlines()]
    assert len(kept) == 3 and json.loads(kept[-1]["raw"]) == "not a message"
    users = [text for role, text in said(store, "s") if role == "user"]
    assert users == ["Plan the migration.", "Go on.", "And then?", "Done?"]


# ---------------------------------------------------------------------------
# sessions


def test_the_session_comes_from_the_header_then_the_user_id_then_a_digest(
    serve: Serve, fake: FakeAnthropic, store: Store
) -> None:
    messages = user("hi")
    with serve(session_header="x-my-session") as url:
        sdk = client(url)
        by_header = {"x-my-session": "by-header"}
        create(sdk, messages, metadata={"user_id": "someone"}, extra_headers=by_header)
        create(sdk, messages, metadata={"user_id": "Jo Smith/1"})
        create(sdk, messages)
        create(sdk, messages)  # the same digest
        with pytest.raises(anthropic.BadRequestError) as bad:
            create(sdk, messages, extra_headers={"x-my-session": "../../etc"})
        assert "x-my-session" in str(bad.value)
    sessions = store.sessions()
    assert "by-header" in sessions
    assert "Jo-Smith-1" in sessions
    digests = [s for s in sessions if s.startswith("api-")]
    assert len(sessions) == 3 and len(digests) == 1
    assert len(fake.messages()) == 4  # the refused request never went upstream


# ---------------------------------------------------------------------------
# errors


@pytest.mark.parametrize(
    ("status", "kind", "error", "headers"),
    [
        (400, "invalid_request_error", anthropic.BadRequestError, {}),
        (401, "authentication_error", anthropic.AuthenticationError, {}),
        (429, "rate_limit_error", anthropic.RateLimitError, {"retry-after": "17"}),
        (500, "api_error", anthropic.InternalServerError, {}),
        (529, "overloaded_error", anthropic.InternalServerError, {}),
    ],
)
def test_an_upstream_error_comes_back_as_it_was_and_leaves_an_event(
    serve: Serve,
    fake: FakeAnthropic,
    store: Store,
    status: int,
    kind: str,
    error: type[anthropic.APIStatusError],
    headers: dict[str, str],
) -> None:
    fake.push(Reply.error(status, kind, f"upstream said {status}", headers))
    fake.push(Reply.error(status, kind, f"upstream said {status}", headers))
    messages = user("Will this work?")
    with serve() as url:
        with pytest.raises(error) as raised:
            create(url, messages, "e")
        with httpx2.Client() as http:
            answer = http.post(
                f"{url}/v1/messages",
                json=body(messages, stream=True),
                headers={**HEADERS, "x-ccm-session": "e"},
            )
    assert raised.value.status_code == status
    assert answer.status_code == status
    assert answer.content == fake.sent[-1]
    for name, value in headers.items():
        assert answer.headers[name] == value
        assert raised.value.response.headers[name] == value
    assert said(store, "e") == [("user", "Will this work?")]  # no reply, not even half
    failures = events(store, "e", "upstream_error")
    assert len(failures) == 2
    assert failures[0]["args"] == {
        "status": status,
        "type": kind,
        "message": f"upstream said {status}",
    }


def test_an_upstream_that_does_not_answer_in_time_is_a_504(
    serve: Serve, fake: FakeAnthropic, store: Store
) -> None:
    fake.push(Reply.text("too late", delay=5))
    with serve(timeout=0.5) as url, pytest.raises(anthropic.InternalServerError) as raised:
        create(url, user("Are you there?"), "slow")
    assert raised.value.status_code == 504
    assert raised.value.body["error"]["type"] == "timeout_error"  # type: ignore[index]
    assert said(store, "slow") == [("user", "Are you there?")]
    assert [e["args"]["status"] for e in events(store, "slow", "upstream_error")] == [504]


def test_an_unreachable_upstream_is_a_502(store: Store) -> None:
    nowhere = Proxy(store, Settings(upstream="http://127.0.0.1:9")).app()
    with Serving(nowhere) as url, pytest.raises(anthropic.APIStatusError) as raised:
        create(url, user("Hello?"), "down")
    assert raised.value.status_code == 502
    assert said(store, "down") == [("user", "Hello?")]


@pytest.mark.parametrize("how", ["cut", "error"])
def test_a_stream_that_fails_leaves_the_user_turn_and_an_error_event(
    serve: Serve, fake: FakeAnthropic, store: Store, how: str
) -> None:
    text = "This answer will never arrive whole, whatever the client does."
    fake.push(Reply.text(text, **{f"{how}_after": 5}))
    with (
        serve() as url,
        pytest.raises(anthropic.APIError),
        client(url).messages.stream(
            model=MODEL,
            max_tokens=64,
            messages=user("Tell me everything."),
            extra_headers={"x-ccm-session": "broken"},
        ) as stream,
    ):
        for _ in stream.text_stream:
            pass
    wait_for(lambda: bool(events(store, "broken", "upstream_error")))
    assert said(store, "broken") == [("user", "Tell me everything.")]
    (failure,) = events(store, "broken", "upstream_error")
    assert failure["args"]["type"] == ("api_error" if how == "cut" else "overloaded_error")


def test_a_client_that_hangs_up_mid_stream_loses_nothing(
    serve: Serve, fake: FakeAnthropic, store: Store
) -> None:
    text = "A slow answer that goes on for a while, long after the client has gone. " * 3
    fake.push(Reply.text(text, pace=0.02))
    with serve() as url, httpx2.Client() as http:
        with http.stream(
            "POST",
            f"{url}/v1/messages",
            json=body(user("Go on."), stream=True),
            headers={**HEADERS, "x-ccm-session": "gone"},
        ) as answer:
            first = next(answer.iter_raw())  # one piece, then hang up
        assert first.startswith(b"event: message_start")
        wait_for(lambda: len(said(store, "gone")) == 2)
    assert said(store, "gone") == [("user", "Go on."), ("assistant", text)]
    assert events(store, "gone", "upstream_error") == []


class _Watched(httpx2.AsyncBaseTransport):
    """The proxy's upstream transport, counting the replies still open on it (a reply
    open holds its connection out of the pool)."""

    def __init__(self) -> None:
        self.inner = httpx2.AsyncHTTPTransport()
        self.open = 0

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self.inner.handle_async_request(request)
        stream, watched = response.stream, self
        assert isinstance(stream, httpx2.AsyncByteStream)
        self.open += 1

        class Closing(httpx2.AsyncByteStream):
            async def __aiter__(self) -> Any:
                async for chunk in stream:
                    yield chunk

            async def aclose(self) -> None:
                await stream.aclose()
                watched.open -= 1

        return httpx2.Response(
            response.status_code,
            headers=response.headers,
            stream=Closing(),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self.inner.aclose()


def test_a_streamed_reply_gives_its_connection_back_before_it_is_recorded(
    store: Store, fake: FakeAnthropic, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Recording waits on the session's lock and the disk; the upstream connection must
    not wait with it, idle at the upstream's end past its keep-alive (the next request
    sent on it would meet a reset)."""
    record = live.record_reply
    open_then: list[int] = []

    def recording(*args: Any, **kwargs: Any) -> Any:
        open_then.append(transport.open)
        return record(*args, **kwargs)

    monkeypatch.setattr(live, "record_reply", recording)
    transport = _Watched()
    proxy = Proxy(store, Settings(upstream=fake.url), transport=transport)
    with Serving(proxy.app(), name="ccm-proxy") as url:
        for number in range(2):
            with client(url).messages.stream(
                model=MODEL,
                max_tokens=64,
                messages=user(f"question {number}"),
                extra_headers={"x-ccm-session": "pooled"},
            ) as stream:
                assert stream.get_final_text() == f"ok: question {number}"
        wait_for(lambda: len(said(store, "pooled")) == 4)
    assert open_then == [0, 0]


def test_a_caller_that_asks_again_at_the_end_of_a_stream_finds_its_answer_recorded(
    serve: Serve, fake: FakeAnthropic, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The caller has the end of a streamed reply before it is recorded (a slow disk
    does not hold it up), and a caller that stops reading at message_stop and asks
    again at once finds its last answer recorded first: nothing twice, nothing out of
    order."""
    slow = live.record_reply
    ends = threading.Semaphore(0)  # one for each reply whose end the caller has
    had_end: list[bool] = []

    def slow_disk(*args: Any, **kwargs: Any) -> Any:
        had_end.append(ends.acquire(timeout=10))
        time.sleep(0.3)
        return slow(*args, **kwargs)

    monkeypatch.setattr(live, "record_reply", slow_disk)
    messages: list[dict[str, Any]] = []
    with serve() as url, httpx2.Client(timeout=30) as http:
        for number in range(3):
            messages.append({"role": "user", "content": f"question {number}"})
            with http.stream(
                "POST",
                f"{url}/v1/messages",
                json=body(messages, stream=True),
                headers={**HEADERS, "x-ccm-session": "quick"},
            ) as answer:
                frames, reply = Frames(), Reassembly()
                for chunk in answer.iter_raw():
                    for frame in frames.feed(chunk):
                        reply.add(frame)
                    if reply.complete:
                        ends.release()
                        break  # the answer is whole: ask the next question now
            assert reply.message is not None
            messages.append({"role": "assistant", "content": reply.message["content"][0]["text"]})
        wait_for(lambda: len(said(store, "quick")) >= 6)
        time.sleep(0.5)  # a late second record would land now
    assert said(store, "quick") == [(m["role"], m["content"]) for m in messages]
    assert had_end == [True, True, True]


# ---------------------------------------------------------------------------
# other paths, and the key


def test_other_paths_pass_through_and_record_nothing(
    serve: Serve, fake: FakeAnthropic, store: Store
) -> None:
    with serve() as url:
        counted = client(url).messages.count_tokens(model=MODEL, messages=user("count me " * 20))
        with httpx2.Client() as http:
            models = http.get(f"{url}/v1/models?limit=3", headers=HEADERS)
            not_json = http.post(f"{url}/v1/messages", content=b"{oops", headers=HEADERS)
    # the upstream's count (the fake counts a quarter token a byte of the body)
    assert counted.input_tokens == len(json.dumps(fake.received[-3].json)) // 4
    assert models.status_code == 200
    assert models.json() == {"data": [], "path": "/v1/models"}
    assert fake.received[-2].query == "limit=3"
    assert not_json.status_code == 400  # the upstream says what is wrong with it
    assert fake.received[-1].body == b"{oops"
    assert store.sessions() == []


def test_the_api_key_is_never_written(
    serve: Serve,
    fake: FakeAnthropic,
    store: Store,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    fake.push(Reply.text("fine"), Reply.error(401, "authentication_error", "invalid x-api-key"))
    fake.push(Reply.text("x", cut_after=3))
    with serve(mode="manage") as url:
        sdk = client(url)
        messages = user("Remember: I like tea.")
        create(sdk, messages)
        with pytest.raises(anthropic.AuthenticationError):
            create(sdk, messages)
        with (
            pytest.raises(anthropic.APIError),
            sdk.messages.stream(model=MODEL, max_tokens=8, messages=messages) as stream,
        ):
            stream.get_final_message()
        (session,) = store.sessions()
        wait_for(lambda: len(events(store, session, "upstream_error")) == 2)
    written = [p for p in store.root.rglob("*") if p.is_file()]
    assert any(p.name == "raw.jsonl" for p in written)
    for path in written:
        assert KEY.encode() not in path.read_bytes(), path
    assert KEY not in caplog.text


# ---------------------------------------------------------------------------
# manage: ccm's context in place of the history

TOPICS = [
    "the staging database password rotation happens on Tuesdays at 14:00 UTC",
    "the billing service is written in Go and deployed with Helm",
    "the nightly export job writes parquet files to the archive bucket",
    "the mobile app reads its feature flags from the config service",
    "the search cluster runs three nodes with two replicas per shard",
]


def long_history(exchanges: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": f"{RULE} We are cleaning up the platform together."},
        {"role": "assistant", "content": "Understood, every change goes through a pull request."},
    ]
    for number in range(exchanges):
        topic = TOPICS[number % len(TOPICS)]
        messages.append(
            {
                "role": "user",
                "content": f"Note {number}: {topic}. Please check the runbook for step {number} "
                "and tell me what it says about owners, alerts and the rollback plan.",
            }
        )
        messages.append(
            {
                "role": "assistant",
                "content": f"Step {number} of the runbook lists the owners, the alerts to watch "
                f"and a rollback plan; it agrees that {topic}.",
            }
        )
    return messages


def tool_round(number: int) -> list[dict[str, Any]]:
    use = {
        "type": "tool_use",
        "id": f"toolu_{number}",
        "name": "bash",
        "input": {"command": f"pytest tests/test_parser.py -k case_{number}"},
    }
    result = {
        "type": "tool_result",
        "tool_use_id": f"toolu_{number}",
        "content": f"case_{number} passed " + "log line " * 30,
    }
    return [
        {"role": "assistant", "content": [{"type": "text", "text": "Running it."}, use]},
        {"role": "user", "content": [result]},
    ]


BASH = {
    "name": "bash",
    "description": "Run a shell command.",
    "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}},
}


def pairs_whole(messages: list[dict[str, Any]]) -> bool:
    """Every tool_result answers a tool_use of the message just before it, and every
    tool_use is answered by the next message."""
    for index, message in enumerate(messages):
        content = message["content"] if isinstance(message["content"], list) else []
        uses = {b["id"] for b in content if b.get("type") == "tool_use"}
        results = {b["tool_use_id"] for b in content if b.get("type") == "tool_result"}
        if results:
            before = messages[index - 1] if index else {"content": []}
            held = before["content"] if isinstance(before["content"], list) else []
            if results != {b["id"] for b in held if b.get("type") == "tool_use"}:
                return False
        if uses:
            after = messages[index + 1]["content"] if index + 1 < len(messages) else []
            answered = {b["tool_use_id"] for b in after if b.get("type") == "tool_result"}
            if uses != answered:
                return False
    return True


def size_of(request: dict[str, Any]) -> int:
    """What the request costs as ccm counts: its messages' text and ccm's system block."""
    total = 0
    for message in request["messages"]:
        content = message["content"]
        if isinstance(content, str):
            total += tokens.count_tokens(content)
        else:
            for block in content:
                if block.get("type") == "text":
                    total += tokens.count_tokens(block["text"])
                elif block.get("type") == "tool_use":
                    total += tokens.count_tokens(json.dumps(block["input"]))
                elif block.get("type") == "tool_result":
                    total += tokens.count_tokens(str(block["content"]))
    ccm_blocks = [b["text"] for b in request["system"] if b["text"].startswith(live.MEMORY_HEADER)]
    return total + sum(tokens.count_tokens(text) for text in ccm_blocks)


def test_manage_sends_ccms_context_within_the_budget(
    serve: Serve, fake: FakeAnthropic, store: Store
) -> None:
    history = long_history(60)
    current: list[dict[str, Any]] = user("Now fix the flaky parser test.")
    for number in range(4):
        current += tool_round(number)
    messages = history + current
    system = "You are a careful coding agent working in the platform repository."
    budget = 2000
    with serve(mode="manage", budget=budget) as url:
        reply = create(url, messages, "platform", system=system, tools=[BASH])
    assert reply.content[0].type == "text"
    upstream = fake.messages()[-1]
    assert upstream["system"][0] == {"type": "text", "text": system}  # the caller's, first, whole
    memory = upstream["system"][-1]["text"]
    assert memory.startswith(live.MEMORY_HEADER)
    assert "never push straight to main" in memory  # the critical item, though its turn is gone
    sent = upstream["messages"]
    assert len(sent) < len(messages)
    assert sent[0]["role"] == "user"
    assert sent[-1] == messages[-1]  # the newest message last, unchanged
    assert current[0] in sent  # the current exchange's prompt
    assert pairs_whole(sent)
    assert size_of(upstream) <= budget * 1.05
    names = [tool["name"] for tool in upstream["tools"]]
    assert names[0] == "bash" and "memory_recall" in names and "memory_expand" in names
    # everything the caller sent is in raw.jsonl, once: prompts as user turns, results as tool turns
    roles = [role for role, _ in said(store, "platform")]
    assert roles.count("user") == 1 + 60 + 1
    assert roles.count("tool") == 4
    last_result = current[-1]["content"][0]
    assert said(store, "platform")[-2] == ("tool", last_result["content"])


def test_manage_recalls_what_the_question_is_about(
    serve: Serve, fake: FakeAnthropic, store: Store
) -> None:
    history = long_history(60)
    question = {
        "role": "user",
        "content": "When does the staging database password rotation happen?",
    }
    with serve(mode="manage", budget=1500) as url:
        create(url, [*history, question], "ops")
    sent = fake.messages()[-1]["messages"]
    assert sent[0]["role"] == "user"
    assert sent[0]["content"].startswith(live.RECALL_HEADER)
    assert "Tuesdays at 14:00 UTC" in sent[0]["content"]
    assert sent[-1] == question
    assert "tools" not in fake.messages()[-1]  # a request without tools gets none


def test_manage_sends_a_short_conversation_whole(
    serve: Serve, fake: FakeAnthropic, store: Store
) -> None:
    messages = [
        {"role": "user", "content": RULE},
        {"role": "assistant", "content": "Noted."},
        {"role": "user", "content": "What is the rule about main?"},
    ]
    with serve(mode="manage", budget=3000) as url:
        create(url, messages, system="Be kind.")
    upstream = fake.messages()[-1]
    assert upstream["messages"] == messages  # all of it fits: nothing recalled, nothing cut
    assert upstream["system"][0] == {"type": "text", "text": "Be kind."}


@pytest.mark.parametrize("stream", [False, True])
def test_each_exchange_is_taken_in_once_answered_and_the_next_starts_from_it(
    fake: FakeAnthropic, store: Store, monkeypatch: pytest.MonkeyPatch, stream: bool
) -> None:
    """Once a managed request is answered, the proxy folds and indexes the exchange; the
    next request's context is assembled from that, without reading the log again, unless
    its message ran commands (which may change what the context holds)."""
    # the turns folded into the tiers each managed request was assembled from, and their
    # critical items (None: the proxy read the log first)
    given: list[tuple[int, list[str]] | None] = []
    managed = live.managed

    def spy(*args: Any, **kwargs: Any) -> Any:
        derived = kwargs.get("derived", args[6] if len(args) > 6 else None)
        if derived is None:
            given.append(None)
        else:
            critical = [item["text"] for item in derived.state["critical"]]
            given.append((derived.state["last_turn"], critical))
        return managed(*args, **kwargs)

    monkeypatch.setattr(live, "managed", spy)
    budget = 1500
    proxy = Proxy(store, Settings(upstream=fake.url, mode="manage", budget=budget))
    rule = "Hard rule: the staging cluster stays on Postgres 14 until the audit ends."
    messages = [*long_history(40), {"role": "user", "content": rule}]
    with Serving(proxy.app(), name="ccm-proxy", keep_alive=CLIENT_IDLE) as url:
        sdk = client(url)

        def ask(text: str) -> None:
            messages.append({"role": "user", "content": text})
            options = {"extra_headers": {"x-ccm-session": "taken"}, "max_tokens": 64}
            if stream:
                with sdk.messages.stream(model=MODEL, messages=messages, **options) as events:
                    reply = events.get_final_message()
            else:
                reply = sdk.messages.create(model=MODEL, messages=messages, **options)
            messages.append({"role": "assistant", "content": reply.content[0].text})
            assert proxy.quiet(30)

        messages.pop()
        ask(rule)  # the first request of a session reads its log
        assert given[-1] is None
        ask("Which database version does staging run?")
        held = given[-1]
        assert held is not None  # the tiers the last exchange left, as they were
        assert held[0] == len(said(store, "taken")) - 2  # all but this exchange
        assert rule in held[1]
        memory = fake.messages()[-1]["system"][-1]["text"]
        assert "Postgres 14" in memory
        ask('Anything else? @recall("rollback plan")')  # a command: read again
        assert given[-1] is None
        ask("And the alerts?")
        assert given[-1] is not None
    # what the last exchange said was taken in: the index finds it
    with Index(store) as index:
        found = index.recall("alerts", "taken")
    assert any("And the alerts?" in hit.text for hit in found)
    assert proxy.settling == 0


def memory_round_request(url: str, stream: bool) -> Any:
    sdk = client(url)
    options: dict[str, Any] = {
        "model": MODEL,
        "max_tokens": 128,
        "messages": [*long_history(30), {"role": "user", "content": "What did we say about Helm?"}],
        "tools": [BASH],
        "extra_headers": {"x-ccm-session": "mem"},
    }
    if not stream:
        return sdk.messages.create(**options)
    with sdk.messages.stream(**options) as events_seen:
        kinds = [event.type for event in events_seen]
        final = events_seen.get_final_message()
    assert kinds.count("message_start") == 1 and kinds.count("message_stop") == 1
    return final


@pytest.mark.parametrize("stream", [False, True])
def test_the_proxy_answers_the_memory_tools_itself(
    serve: Serve, fake: FakeAnthropic, store: Store, stream: bool
) -> None:
    fake.push(
        Reply.tool_use("memory_recall", {"query": "billing service Helm"}, text="Let me look."),
        Reply.text("The billing service is deployed with Helm."),
    )
    with serve(mode="manage", budget=1500) as url:
        reply = memory_round_request(url, stream)
    assert [block.type for block in reply.content] == ["text", "text"]
    assert reply.content[-1].text == "The billing service is deployed with Helm."
    assert reply.stop_reason == "end_turn"
    first, second = fake.messages()[-2:]
    # what both rounds cost, as the fake counts it (a quarter token a character)
    assert reply.usage.input_tokens == sum(len(json.dumps(b)) // 4 for b in (first, second))
    assert reply.usage.output_tokens > len("The billing service is deployed with Helm.") // 4 + 1
    assert first["messages"][-1]["content"] == "What did we say about Helm?"
    result = second["messages"][-1]["content"][0]
    assert result["type"] == "tool_result"
    assert "Helm" in result["content"]
    assert second["messages"][-2]["content"][-1]["name"] == "memory_recall"
    wait_for(lambda: said(store, "mem")[-1][0] == "assistant")
    recalls = events(store, "mem", "recall")
    assert recalls and recalls[-1]["who"] == "model"
    assistant = [t for r, t in said(store, "mem") if r == "assistant"]
    assert assistant[-1].endswith("The billing service is deployed with Helm.")
    assert "memory_recall" not in assistant[-1]


def test_a_memory_tool_that_cannot_do_what_it_is_asked_is_an_error_result(store: Store) -> None:
    """The model reads why in the tool result, marked is_error, as the MCP server says
    it; what was done is a plain result."""
    live.record_request(store, "s", {"messages": [{"role": "user", "content": "Hello."}]})
    for name, arguments, words in [
        ("memory_recall", {}, "needs a query"),
        ("memory_pin", {}, "needs targets"),
        ("memory_pin", {"targets": ["seg_999"]}, "seg_999"),
        ("memory_note", {"text": ""}, "note"),
        ("memory_nothing", {}, "no memory tool"),
    ]:
        text, error = live.run_tool(store, "s", name, arguments)
        assert error and words in text, (name, text)
    text, error = live.run_tool(store, "s", "memory_note", {"text": "Deploys on Thursdays."})
    assert not error and events(store, "s", "note")


@pytest.mark.parametrize("stream", [False, True])
def test_memory_rounds_are_bounded(
    serve: Serve, fake: FakeAnthropic, store: Store, stream: bool
) -> None:
    fake.push(
        Reply.tool_use("memory_recall", {"query": "Helm"}),
        Reply.tool_use("memory_recall", {"query": "Go"}),
        Reply.text("Enough looking."),
    )
    with serve(mode="manage", budget=1500, max_memory_calls=2) as url:
        reply = memory_round_request(url, stream)
    assert reply.content[-1].text == "Enough looking."
    requests = fake.messages()[-3:]
    assert "tool_choice" not in requests[0] and "tool_choice" not in requests[1]
    assert requests[2]["tool_choice"] == {"type": "none"}  # the last round answers in words


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("beside", [False, True])
def test_a_caller_tool_call_reaches_the_caller(
    serve: Serve, fake: FakeAnthropic, store: Store, stream: bool, beside: bool
) -> None:
    """A reply that calls the caller's tool goes to the caller; a memory call beside
    it is not run (its round does not continue), streamed or not."""
    reply = Reply.tool_use("bash", {"command": "ls"}, id="toolu_caller")
    if beside:
        note = {"type": "tool_use", "id": "toolu_note", "name": "memory_note"}
        reply.content.insert(0, {**note, "input": {"text": "the team deploys on Thursdays"}})
    fake.push(reply)
    with serve(mode="manage", budget=1500) as url:
        answer = memory_round_request(url, stream=stream)
    assert answer.stop_reason == "tool_use"
    assert [b.name for b in answer.content if b.type == "tool_use"] == ["bash"]
    assert len(fake.messages()) == 1
    wait_for(lambda: said(store, "mem")[-1][0] == "assistant")
    assert events(store, "mem", "note") == []


def test_commands_in_messages_are_run_and_are_events(
    serve: Serve, fake: FakeAnthropic, store: Store
) -> None:
    fake.push(Reply.text('Noted. @create("the team deploys on Thursdays")'))
    with serve() as url:
        create(url, user('Where were we? @recall("linter settings")'), "cmd")
    wait_for(lambda: len(said(store, "cmd")) == 2)
    kinds = {(e["who"], e["kind"]) for e in events(store, "cmd")}
    assert ("user", "recall") in kinds
    assert ("model", "create") in kinds
    result = ccm("events", "cmd", "--json")
    assert result.exit_code == 0, result.output
    assert "the team deploys on Thursdays" in result.output


# ---------------------------------------------------------------------------
# the command


def test_proxy_help_names_the_one_setting() -> None:
    result = ccm("proxy", "--help")
    assert result.exit_code == 0
    assert "ANTHROPIC_BASE_URL" in result.output
    assert "--mode [observe|manage]" in result.output


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--upstream", "api.anthropic.com"], "--upstream 'api.anthropic.com' is not a URL"),
        (["--mode", "rewrite"], "'rewrite' is not one of 'observe', 'manage'"),
        (["--budget", "10"], "10 is not in the range x>=500"),
    ],
)
def test_proxy_refuses_bad_options(args: list[str], words: str) -> None:
    result = ccm("proxy", *args)
    assert result.exit_code != 0
    assert words in result.output
