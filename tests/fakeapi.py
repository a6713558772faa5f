"""A local stand-in for the Anthropic Messages API, for testing `ccm proxy` without the internet.

`ccm proxy` sits between an agent and the Anthropic API: it forwards `POST /v1/messages`
(JSON or a server-sent-event stream) and passes every other path through. Its tests and the
proxy benchmark point it at this fake instead of the real API. `FakeAnthropic` serves a small
starlette app with uvicorn, on 127.0.0.1 in a background thread, and:

- records every request it receives (`received`) and every `/v1/messages` answer body it sends
  (`sent`, the exact bytes, the whole event stream when streaming);
- answers `/v1/messages` with the queued `Reply` objects (`push`), in order, or with a default
  text `"ok: <start of the last user message>"` when the queue is empty;
- streams in the wire format of the real API (`message_start`, `ping`, `content_block_start`,
  `content_block_delta`, `content_block_stop`, `message_delta`, `message_stop`), and can delay an
  answer or pace a stream's events, answer with an API error, cut a stream abruptly, or end it
  with an `error` event;
- answers `POST /v1/messages/count_tokens` with a rough count, and any other path with
  `{"data": [], "path": ...}` so that a pass-through can be checked.

Usage::

    with FakeAnthropic() as fake:
        fake.push(Reply.text("hello"), Reply.tool_use("search", {"q": "x"}))
        client = anthropic.Anthropic(api_key="k", base_url=fake.url, max_retries=0)
        ...
        assert fake.messages()[-1]["model"] == "claude-test"
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import socket
import threading
import time
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, ClassVar

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

TEXT_CHUNK = 12  # characters of text per content_block_delta
JSON_CHUNK = 12  # characters of a tool's JSON input per input_json_delta (at least 2 pieces)
STARTUP_TIMEOUT = 10.0  # seconds to wait for uvicorn to accept connections
# seconds the fake keeps an idle connection, as the API does: far longer than the proxy's
# pool keeps one (`ccm.proxy.UPSTREAM_IDLE`). At uvicorn's 5 s, the load tests' three event
# loops in one process (clients, proxy, fake) can lag by seconds on a busy machine, and a
# connection the proxy takes from its pool is closed by the fake as the request goes out
KEEP_ALIVE = 60
_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]


@dataclass
class Received:
    """One request as the fake received it."""

    method: str
    path: str  # without the query
    query: str
    headers: dict[str, str]  # lower-cased names
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Reply:
    """What to answer to one `/v1/messages` request."""

    content: list[dict[str, Any]]  # blocks of the answer: text / tool_use (thinking works too)
    stop_reason: str = "end_turn"
    status: int = 200  # != 200: an error reply (error_type, message, headers)
    error_type: str = "api_error"
    message: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds to wait before answering (timeouts)
    cut_after: int | None = None  # streaming only: drop the connection after this many events
    error_after: int | None = None  # streaming only: send an `error` event after this many
    pace: float = 0.0  # streaming only: seconds between events (a slow model)

    _tool_ids: ClassVar[itertools.count[int]] = itertools.count(1)

    @classmethod
    def text(cls, text: str, **options: Any) -> Reply:
        """One text block; `options` are the other fields (delay, pace, cut_after...)."""
        return cls(content=[{"type": "text", "text": text}], **options)

    @classmethod
    def tool_use(
        cls,
        name: str,
        input: dict[str, Any],
        text: str | None = None,
        id: str | None = None,
    ) -> Reply:
        """An optional text block, then a tool_use block; stop_reason "tool_use"."""
        content: list[dict[str, Any]] = []
        if text is not None:
            content.append({"type": "text", "text": text})
        tool_id = id if id is not None else f"toolu_fake_{next(cls._tool_ids)}"
        content.append({"type": "tool_use", "id": tool_id, "name": name, "input": input})
        return cls(content=content, stop_reason="tool_use")

    @classmethod
    def error(
        cls,
        status: int,
        error_type: str,
        message: str,
        headers: dict[str, str] | None = None,
    ) -> Reply:
        return cls(
            content=[],
            status=status,
            error_type=error_type,
            message=message,
            headers=dict(headers or {}),
        )


class _CutConnection(Exception):
    """Raised inside a stream's body iterator to drop the connection mid-stream (`cut_after`)."""


class _QuietCuts(logging.Filter):
    """Keep uvicorn from logging a traceback for the connections the fake cuts on purpose."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not _is_cut(exc)


def _is_cut(exc: BaseException | None) -> bool:
    if isinstance(exc, _CutConnection):
        return True
    if isinstance(exc, BaseExceptionGroup):
        return all(_is_cut(inner) for inner in exc.exceptions)
    return False


_QUIET_CUTS = _QuietCuts()


def _frame(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def _user_text(body: Any) -> str:
    """The text of the last user message of a request body ("" when there is none)."""
    messages = body.get("messages") if isinstance(body, dict) else None
    if not isinstance(messages, list):
        return ""
    for message in reversed(messages):
        if not isinstance(message, dict) or message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            return " ".join(
                str(block.get("text", ""))
                for block in content
                if isinstance(block, dict) and block.get("type") == "text"
            )
        return ""
    return ""


def _output_tokens(content: list[dict[str, Any]]) -> int:
    """Rough output tokens: the characters of the text (and thinking and tool input) // 4 + 1."""
    chars = 0
    for block in content:
        if block.get("type") == "text":
            chars += len(str(block.get("text", "")))
        elif block.get("type") == "thinking":
            chars += len(str(block.get("thinking", "")))
        elif block.get("type") == "tool_use":
            chars += len(json.dumps(block.get("input", {})))
    return chars // 4 + 1


def _stream_frames(message: dict[str, Any]) -> list[bytes]:
    """The server-sent events of a whole message, in the order the real API sends them."""
    usage = message["usage"]
    start = dict(message, content=[], stop_reason=None, stop_sequence=None)
    start["usage"] = {"input_tokens": usage["input_tokens"], "output_tokens": 1}
    frames = [
        _frame("message_start", {"type": "message_start", "message": start}),
        _frame("ping", {"type": "ping"}),
    ]
    for index, block in enumerate(message["content"]):
        kind = block.get("type")
        deltas: list[dict[str, Any]] = []
        if kind == "text":
            opening: dict[str, Any] = {"type": "text", "text": ""}
            deltas = [
                {"type": "text_delta", "text": piece}
                for piece in _pieces(str(block.get("text", "")), TEXT_CHUNK)
            ]
        elif kind == "tool_use":
            opening = {
                "type": "tool_use",
                "id": block.get("id"),
                "name": block.get("name"),
                "input": {},
            }
            encoded = json.dumps(block.get("input", {}))
            size = min(JSON_CHUNK, max(1, len(encoded) // 2))
            deltas = [
                {"type": "input_json_delta", "partial_json": piece}
                for piece in _pieces(encoded, size)
            ]
        elif kind == "thinking":
            opening = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [
                {"type": "thinking_delta", "thinking": piece}
                for piece in _pieces(str(block.get("thinking", "")), TEXT_CHUNK)
            ]
            deltas.append({"type": "signature_delta", "signature": block.get("signature", "")})
        else:
            opening = block  # any other block arrives whole, without deltas
        frames.append(
            _frame(
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": opening},
            )
        )
        for delta in deltas:
            frames.append(
                _frame(
                    "content_block_delta",
                    {"type": "content_block_delta", "index": index, "delta": delta},
                )
            )
        frames.append(_frame("content_block_stop", {"type": "content_block_stop", "index": index}))
    frames.append(
        _frame(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                "usage": {"output_tokens": usage["output_tokens"]},
            },
        )
    )
    frames.append(_frame("message_stop", {"type": "message_stop"}))
    return frames


_OVERLOADED = _frame(
    "error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
)


class Serving:
    """An ASGI app served by uvicorn on 127.0.0.1 (a free port) in a daemon thread: the
    fake API, and in the proxy's tests and benchmark the proxy itself."""

    def __init__(
        self, app: Any, lifespan: str = "on", name: str = "asgi", keep_alive: int = 5
    ) -> None:
        self.app, self.lifespan, self.name = app, lifespan, name
        self.keep_alive = keep_alive  # seconds an idle connection is kept (uvicorn's default)
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._socket: socket.socket | None = None

    def start(self) -> str:
        """Serve; returns the base URL once it accepts connections."""
        # proto named: asyncio sets TCP_NODELAY on the connections it accepts only when
        # the socket says TCP (else each response's last write waits on a delayed ACK)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.bind(("127.0.0.1", 0))
        self._socket = sock
        port = sock.getsockname()[1]
        config = uvicorn.Config(
            self.app,
            host="127.0.0.1",
            port=port,
            log_level="warning",
            lifespan=self.lifespan,
            ws="none",
            timeout_keep_alive=self.keep_alive,
        )
        server = uvicorn.Server(config)
        self._server = server
        thread = threading.Thread(
            target=server.run, kwargs={"sockets": [sock]}, name=self.name, daemon=True
        )
        self._thread = thread
        thread.start()
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"{self.name} did not start")
            time.sleep(0.01)
        return f"http://127.0.0.1:{port}"

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=STARTUP_TIMEOUT)
        if self._socket is not None:
            self._socket.close()

    def __enter__(self) -> str:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class FakeAnthropic:
    """Context manager: `with FakeAnthropic() as fake:` starts uvicorn on 127.0.0.1 on a free port
    in a daemon thread, waits until it accepts connections, and stops it on exit."""

    url: str  # "http://127.0.0.1:PORT"
    received: list[Received]  # every request, in arrival order
    sent: list[bytes]  # for each /v1/messages request, the exact body bytes sent back

    def __init__(self) -> None:
        self.url = ""
        self.received = []
        self.sent = []
        self._replies: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._count = 0  # /v1/messages requests so far
        self._request_ids = itertools.count(1)
        self._closing = False
        self._serving: Serving | None = None
        self.app = Starlette(routes=[Route("/{path:path}", self._handle, methods=_METHODS)])

    # -- the test side ---------------------------------------------------------------------

    def push(self, *replies: Reply) -> None:
        """Queue replies; each /v1/messages request pops the next one."""
        with self._lock:
            self._replies.extend(replies)

    def messages(self) -> list[dict[str, Any]]:
        """The JSON bodies of the /v1/messages requests received (bodies that are not JSON
        objects are left out)."""
        with self._lock:
            requests = list(self.received)
        bodies: list[dict[str, Any]] = []
        for request in requests:
            if request.method != "POST" or request.path != "/v1/messages":
                continue
            try:
                body = request.json
            except ValueError:
                continue
            if isinstance(body, dict):
                bodies.append(body)
        return bodies

    def __enter__(self) -> FakeAnthropic:
        logger = logging.getLogger("uvicorn.error")
        if _QUIET_CUTS not in logger.filters:
            logger.addFilter(_QUIET_CUTS)
        self._serving = Serving(
            self.app, lifespan="off", name="fake-anthropic", keep_alive=KEEP_ALIVE
        )
        self.url = self._serving.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._closing = True  # ends pending delays at once
        if self._serving is not None:
            self._serving.stop()

    # -- the server side -------------------------------------------------------------------

    async def _handle(self, request: Request) -> Response:
        body = await request.body()
        received = Received(
            method=request.method,
            path=request.url.path,
            query=request.url.query,
            headers={name.lower(): value for name, value in request.headers.items()},
            body=body,
        )
        request_id = f"req_fake_{next(self._request_ids)}"
        with self._lock:
            self.received.append(received)
        if request.method == "POST" and received.path == "/v1/messages":
            return await self._messages(received, request_id)
        if request.method == "POST" and received.path == "/v1/messages/count_tokens":
            try:
                size = len(json.dumps(received.json))
            except ValueError:
                size = len(body)
            return _json(200, {"input_tokens": size // 4}, {"request-id": request_id})
        return _json(200, {"data": [], "path": received.path}, {"request-id": request_id})

    async def _messages(self, received: Received, request_id: str) -> Response:
        with self._lock:
            self._count += 1
            number = self._count
            slot = len(self.sent)
            self.sent.append(b"")
        try:
            body = received.json
        except ValueError:
            body = None
        if not isinstance(body, dict):
            bad = Reply.error(400, "invalid_request_error", "the body is not a JSON object")
            return self._answer(slot, bad, {"request-id": request_id})
        with self._lock:
            reply = self._replies.popleft() if self._replies else None
        if reply is None:
            reply = Reply.text("ok: " + _user_text(body)[:40])
        remaining = reply.delay
        while remaining > 0 and not self._closing:
            step = min(remaining, 0.05)
            await asyncio.sleep(step)
            remaining -= step
        headers = {"request-id": request_id, **reply.headers}
        if reply.status != 200:
            return self._answer(slot, reply, headers)
        message = {
            "id": f"msg_fake_{number}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model") or "claude-fake",
            "content": reply.content,
            "stop_reason": reply.stop_reason,
            "stop_sequence": None,
            "usage": {
                "input_tokens": len(json.dumps(body)) // 4,
                "output_tokens": _output_tokens(reply.content),
            },
        }
        if not body.get("stream"):
            return self._send(slot, 200, json.dumps(message).encode(), headers)
        headers.setdefault("cache-control", "no-cache")
        return StreamingResponse(
            self._stream(slot, _stream_frames(message), reply),
            media_type="text/event-stream",
            headers=headers,
        )

    def _answer(self, slot: int, reply: Reply, headers: dict[str, str]) -> Response:
        """An error answer: the API's error body, with `retry-after` on a 429 by default."""
        if reply.status == 429:
            headers = {"retry-after": "1", **headers}
        error = {"type": "error", "error": {"type": reply.error_type, "message": reply.message}}
        return self._send(slot, reply.status, json.dumps(error).encode(), headers)

    def _send(self, slot: int, status: int, content: bytes, headers: dict[str, str]) -> Response:
        with self._lock:
            self.sent[slot] = content
        return Response(content, status_code=status, headers=headers, media_type="application/json")

    async def _stream(self, slot: int, frames: list[bytes], reply: Reply) -> AsyncIterator[bytes]:
        for count, frame in enumerate(frames):
            if reply.cut_after is not None and count >= reply.cut_after:
                raise _CutConnection(f"cut after {count} events")
            if reply.error_after is not None and count >= reply.error_after:
                frame = _OVERLOADED
            with self._lock:  # recorded before it is handed over, so never after the client has it
                self.sent[slot] += frame
            yield frame
            if frame is _OVERLOADED:
                return
            await asyncio.sleep(reply.pace)  # let the other streams interleave


def _json(status: int, data: Any, headers: dict[str, str]) -> Response:
    return Response(
        json.dumps(data).encode(),
        status_code=status,
        headers=headers,
        media_type="application/json",
    )
