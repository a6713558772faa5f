"""``ccm proxy``: a managed context in front of the Anthropic Messages API, for any client.

Any program that talks to the Messages API (an agent, a chat UI, a script on the
`anthropic` SDK, Claude Code) gets ccm's memory by pointing ``ANTHROPIC_BASE_URL`` here.
A thin shell over `ccm.live` (what is recorded, what is sent) on Starlette, served by
uvicorn, with httpx2 as the client of the upstream API.

``POST /v1/messages``, streamed (SSE) or not: the request's session is found (the
session header, else ``metadata.user_id``, else a digest of the system prompt and first
user message); its new turns are appended to ``raw.jsonl`` before the call, the reply
once it is complete, under the same lock as every other writer. In ``observe`` mode the
request goes upstream unchanged and the caller gets the upstream's bytes; in ``manage``
mode ccm's context replaces the history (`ccm.live.managed`), and the memory tools are
offered to a model that uses tools: when it calls only those, the proxy runs them,
sends the results upstream and goes on, so the caller sees one answer (at most
``max_memory_calls`` rounds; the last round may not call tools).

Every other path (``/v1/messages/count_tokens``, ``/v1/models``...) passes through
unchanged. An upstream error comes back with its status, body and headers
(``retry-after`` included) and is recorded as an event; a timeout is a 504 and an
unreachable upstream a 502, in the API's error shape. A reply is recorded only whole:
a stream that fails leaves the user's turn and an error event. A caller that hangs up
mid-stream does not stop the proxy reading the reply to its end and recording it.
The caller's API key goes upstream and nowhere else: no log line, event or error
names a header.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import re
import threading
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio.to_thread
import httpx2
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from ccm import context, derive, live, tokens
from ccm.errors import CCMError
from ccm.index import Index
from ccm.ingest import lines
from ccm.store import Store

log = logging.getLogger("ccm.proxy")

DEFAULT_UPSTREAM = "https://api.anthropic.com"
KEPT_ENGINES = 32  # sessions whose engines the proxy keeps in memory
WRITE_LATER = 2.0  # seconds: a session's manifest and engine cache are written this long after
# the first request that left them (a steady stream of requests writes them this often)
METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]
# not forwarded either way: they describe one connection, not the message
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
    }
)
_FRAME_END = re.compile(rb"\r?\n\r?\n")

T = TypeVar("T")


# A connection kept open is used again only while the other end surely still holds it. A
# server closes an idle connection after its own timeout (uvicorn's default: 5 s); a client
# whose pool keeps it as long sends its next request into a socket being closed, and gets a
# reset (httpx's ReadError). So the proxy drops an idle upstream connection well before
# any usual server timeout, and keeps an idle client's connection longer than clients'
# pools do (httpx's and the anthropic SDK's: 5 s).
UPSTREAM_IDLE = 2.0  # seconds an idle upstream connection is kept for reuse
CLIENT_IDLE = 75  # seconds the proxy keeps a client's idle connection open


@dataclass(frozen=True)
class Settings:
    """How the proxy runs (the options of ``ccm proxy``)."""

    upstream: str = DEFAULT_UPSTREAM
    mode: str = "observe"
    budget: int | None = None  # manage mode: None for the configured context budget
    session_header: str = "x-ccm-session"
    memory_tools: str = "auto"  # auto: offered when the request has tools
    max_memory_calls: int = 4
    timeout: float = 600.0  # seconds the upstream may take to answer


# ---------------------------------------------------------------------------
# server-sent events


@dataclass
class Frame:
    """One server-sent event, with the bytes it came as."""

    raw: bytes
    event: str
    data: Any  # the parsed JSON of its data; None when there is none or it is not JSON

    @classmethod
    def parse(cls, raw: bytes) -> Frame:
        event, data = "message", []
        for line in raw.decode("utf-8", "replace").splitlines():
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if name == "event":
                event = value
            elif name == "data":
                data.append(value)
        try:
            parsed = json.loads("\n".join(data)) if data else None
        except ValueError:
            parsed = None
        return cls(raw, event, parsed)

    @classmethod
    def of(cls, event: str, data: dict[str, Any]) -> Frame:
        text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
        return cls(f"event: {event}\ndata: {text}\n\n".encode(), event, data)


class Frames:
    """Splits a byte stream into events as it arrives."""

    def __init__(self) -> None:
        self.buffer = b""

    def feed(self, chunk: bytes) -> list[Frame]:
        self.buffer += chunk
        frames: list[Frame] = []
        while True:
            found = _FRAME_END.search(self.buffer)
            if found is None:
                return frames
            raw, self.buffer = self.buffer[: found.end()], self.buffer[found.end() :]
            if raw.strip():
                frames.append(Frame.parse(raw))


class Reassembly:
    """A message rebuilt from its stream's events, as the SDK rebuilds it."""

    def __init__(self) -> None:
        self.message: dict[str, Any] | None = None
        self.partial: dict[int, str] = {}  # a tool call's input, as its JSON arrives
        self.complete = False
        self.error: dict[str, Any] | None = None

    def add(self, frame: Frame) -> None:
        data = frame.data if isinstance(frame.data, dict) else {}
        kind = frame.event
        if kind == "message_start" and isinstance(data.get("message"), dict):
            self.message = {**data["message"], "content": []}
        elif kind == "error":
            self.error = data.get("error") if isinstance(data.get("error"), dict) else data
        elif self.message is None:
            return
        elif kind == "content_block_start":
            block = dict(data.get("content_block") or {})
            content = self.message["content"]
            index = int(data.get("index", len(content)))
            while len(content) <= index:
                content.append({})
            content[index] = block
        elif kind == "content_block_delta":
            self._delta(int(data.get("index", -1)), data.get("delta") or {})
        elif kind == "content_block_stop":
            index = int(data.get("index", -1))
            if index in self.partial:
                text = self.partial.pop(index)
                try:
                    self.message["content"][index]["input"] = json.loads(text) if text else {}
                except ValueError:
                    self.message["content"][index]["input"] = {}
        elif kind == "message_delta":
            self.message.update(data.get("delta") or {})
            usage = data.get("usage")
            if isinstance(usage, dict):
                self.message["usage"] = {**(self.message.get("usage") or {}), **usage}
        elif kind == "message_stop":
            self.complete = True

    def _delta(self, index: int, delta: dict[str, Any]) -> None:
        assert self.message is not None
        content = self.message["content"]
        if not 0 <= index < len(content):
            return
        block = content[index]
        kind = delta.get("type")
        if kind == "text_delta":
            block["text"] = block.get("text", "") + str(delta.get("text", ""))
        elif kind == "input_json_delta":
            self.partial[index] = self.partial.get(index, "") + str(delta.get("partial_json", ""))
        elif kind == "thinking_delta":
            block["thinking"] = block.get("thinking", "") + str(delta.get("thinking", ""))
        elif kind == "signature_delta":
            block["signature"] = str(delta.get("signature", ""))
        elif kind == "citations_delta":
            block.setdefault("citations", []).append(delta.get("citation"))


def _added_usage(total: dict[str, Any], usage: Any) -> dict[str, Any]:
    """`total` with a round's `usage` added: its counts summed, anything else (the
    service tier) as the round says."""
    added = dict(total)
    for name, value in (usage if isinstance(usage, dict) else {}).items():
        if isinstance(value, int) and not isinstance(value, bool):
            added[name] = int(added.get(name) or 0) + value
        elif name not in added:
            added[name] = value
    return added


def _is_memory_call(block: Any) -> bool:
    return (
        isinstance(block, dict)
        and block.get("type") == "tool_use"
        and block.get("name") in live.MEMORY_TOOL_NAMES
    )


def _memory_calls(content: list[Any], stop_reason: Any) -> list[dict[str, Any]]:
    """The memory tool calls of a reply that the proxy answers: those of a reply that
    stops to use tools and calls no other (a caller's tool call goes to the caller,
    and the memory calls beside it are not run)."""
    if stop_reason != "tool_use":
        return []
    calls = [b for b in content if _is_memory_call(b)]
    others = any(
        isinstance(b, dict) and b.get("type") == "tool_use" and not _is_memory_call(b)
        for b in content
    )
    return [] if others else calls


def _shown(content: list[Any]) -> list[Any]:
    """What the caller sees of a reply: all but the memory tool calls."""
    return [b for b in content if not _is_memory_call(b)]


class Splice:
    """What the caller receives of one or more upstream streams: the events of each
    round, without the memory tool calls and with the blocks numbered as one message
    (the first round's start, the last round's end)."""

    def __init__(self, offered: bool) -> None:
        self.offered = offered
        self.round = 0
        self.hidden: set[int] = set()
        self.index: dict[int, int] = {}
        self.next_index = 0
        self.held = False  # this round ends in memory calls: its end is not forwarded
        self.spent: dict[str, Any] = {}  # the usage of the rounds before this one

    def next_round(self) -> None:
        self.round += 1
        self.hidden, self.index, self.held = set(), {}, False

    def out(self, frame: Frame, view: Reassembly, continuing: bool) -> Frame | None:
        """The frame to forward for `frame` (None: none); `view` is this round's reply
        so far, `continuing` whether memory calls may still be answered."""
        if not self.offered:
            return frame
        data = frame.data if isinstance(frame.data, dict) else {}
        kind = frame.event
        if kind == "message_start":
            return frame if self.round == 0 else None
        if kind in ("content_block_start", "content_block_delta", "content_block_stop"):
            index = int(data.get("index", -1))
            if kind == "content_block_start":
                if _is_memory_call(data.get("content_block")):
                    self.hidden.add(index)
                else:
                    self.index[index] = self.next_index
                    self.next_index += 1
            if index in self.hidden:
                return None
            mapped = self.index.get(index, index)
            return frame if mapped == index else Frame.of(kind, {**data, "index": mapped})
        if kind == "message_delta":
            content = view.message["content"] if view.message else []
            usage = (view.message or {}).get("usage")
            if _memory_calls(content, (data.get("delta") or {}).get("stop_reason")):
                if continuing:
                    self.held = True
                    self.spent = _added_usage(self.spent, usage)
                    return None
                delta = {**(data.get("delta") or {}), "stop_reason": "end_turn"}
                data = {**data, "delta": delta}
            elif not self.round:
                return frame
            if self.round:  # the totals of every round (a delta's usage is a total)
                data = {**data, "usage": _added_usage(self.spent, usage)}
            return Frame.of(kind, data)
        if kind == "message_stop":
            return None if self.held else frame
        return frame


# ---------------------------------------------------------------------------
# the proxy


@dataclass
class _Call:
    """One ``/v1/messages`` request on its way through."""

    request: Request
    session: str
    outgoing: bytes  # what goes upstream first
    sent: dict[str, Any] | None  # manage mode: the body sent, for the memory rounds
    offered: bool  # whether the memory tools were offered
    system: str | None
    started: float = field(default_factory=time.perf_counter)


class Proxy:
    """The ASGI app (`app`) and what it keeps: the upstream client, the sessions' locks,
    the replies still being read after their caller left."""

    def __init__(
        self,
        store: Store,
        settings: Settings,
        transport: httpx2.AsyncBaseTransport | None = None,
    ) -> None:
        self.store = store
        self.settings = settings
        self.upstream = settings.upstream.rstrip("/")
        self.transport = transport
        self.client: httpx2.AsyncClient | None = None
        self.locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
        self.pending: set[asyncio.Task[None]] = set()
        # one index kept open for manage mode's contexts, used by one thread at a time
        self.index: Index | None = None
        self.index_lock = threading.Lock()
        # manage mode: the sessions whose tiers and index were brought up to date once
        # their last reply was recorded, with nothing appended since; and how many of
        # those updates are still to run
        self.current: set[str] = set()
        self.settling = 0
        self.budget = int(
            settings.budget
            if settings.budget is not None
            else store.config.get("context", "budget_tokens")
        )

    def app(self) -> Starlette:
        routes = [
            Route("/v1/messages", self.messages, methods=["POST"]),
            Route("/{path:path}", self.passthrough, methods=METHODS),
        ]
        return Starlette(routes=routes, lifespan=self._lifespan)

    @contextlib.asynccontextmanager
    async def _lifespan(self, app: Starlette) -> AsyncIterator[None]:
        async with self.open():
            yield

    @contextlib.asynccontextmanager
    async def open(self) -> AsyncIterator[None]:
        """The upstream client, open; on the way out, the replies still being read are
        read to their end and recorded."""
        timeout = httpx2.Timeout(self.settings.timeout, connect=min(30.0, self.settings.timeout))
        limits = httpx2.Limits(
            max_connections=200, max_keepalive_connections=50, keepalive_expiry=UPSTREAM_IDLE
        )
        self.client = httpx2.AsyncClient(timeout=timeout, limits=limits, transport=self.transport)
        try:
            yield
        finally:
            if self.pending:
                await asyncio.gather(*self.pending, return_exceptions=True)
            await self.client.aclose()
            self.client = None
            with self.index_lock:
                if self.index is not None:
                    self.index.close()
                    self.index = None
            if isinstance(derive.keeper, derive.Keeper):  # what it left for later
                await _run(derive.keeper.flush)

    # -- /v1/messages ------------------------------------------------------
    async def messages(self, request: Request) -> Response:
        raw = await request.body()
        try:
            body = lines.loads(raw)  # strict: a NaN goes upstream, which refuses it
        except (ValueError, RecursionError):
            body = None
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return await self.passthrough(request, raw)  # the upstream says what is wrong
        header = self.settings.session_header
        try:
            session = live.session_id(request.headers.get(header), body)
        except CCMError as exc:
            return _error(400, "invalid_request_error", f"header {header}: {exc}")
        call = await self._prepare(request, session, body, raw)
        if body.get("stream") is True:
            response = await self._streamed(call)
        else:
            response = await self._whole(call)
        if call.sent is not None:  # once the caller has its answer, the memory takes it in
            self.settling += 1
            response.background = BackgroundTask(self._settle, call)  # (none is set here)
        return response

    async def _prepare(
        self, request: Request, session: str, body: dict[str, Any], raw: bytes
    ) -> _Call:
        """Record the request's new turns; in manage mode, build what goes upstream. A
        failure to record or to assemble is logged and the request goes on unchanged:
        the caller is never refused for ccm's sake."""
        lock = self.locks[session]
        async with lock:
            try:
                recorded = await _run(live.record_request, self.store, session, body)
            except Exception as exc:  # the caller is never refused for ccm's sake
                log.error("%s: could not record the request: %s", session, exc, exc_info=True)
                return _Call(request, session, raw, None, False, None)
            if self.settings.mode != "manage":
                return _Call(request, session, raw, None, False, recorded.system)
            offered = self._offers_tools(body)
            # the memory as the last reply left it, when it was brought up to date then:
            # the request's own turns go upstream as messages, and are taken in after
            current = session in self.current and not recorded.commanded
            self.current.discard(session)
            try:
                sent = await _run(self._managed, body, recorded, offered, current)
            except Exception as exc:  # the index, the engine...: sent unmanaged
                log.error("%s: could not assemble the context: %s", session, exc, exc_info=True)
                return _Call(request, session, raw, None, False, recorded.system)
        outgoing = json.dumps(sent, ensure_ascii=False).encode("utf-8")
        return _Call(request, session, outgoing, sent, offered, recorded.system)

    def _managed(
        self, body: dict[str, Any], recorded: live.Recorded, offered: bool, current: bool
    ) -> Any:
        """`live.managed` with the index this proxy keeps open (in a worker thread); with
        `current`, from the session's tiers and index as they are."""
        held = None
        if current and isinstance(derive.keeper, derive.Keeper):
            held = derive.keeper.held(self.store, recorded.session)
        with self.index_lock:
            index = self._index()
            return live.managed(self.store, body, recorded, self.budget, offered, index, held)

    def _index(self) -> Index:
        """The index kept open (the caller holds `index_lock`)."""
        if self.index is None:
            self.index = Index(self.store, shared=True)
        return self.index

    async def _settle(self, call: _Call) -> None:
        """After a managed request: its session's tiers and index brought up to date
        with what it appended (the request's turns and the reply), under the session's
        lock, so that its next request starts from them."""
        try:
            async with self.locks[call.session]:
                await _run(self._bring_up_to_date, call.session)
                self.current.add(call.session)
        except Exception as exc:  # the next request brings them up to date itself
            log.error("%s: could not take in the exchange: %s", call.session, exc, exc_info=True)
        finally:
            self.settling -= 1

    def _bring_up_to_date(self, session: str) -> None:
        with self.index_lock:
            context.brought_up_to_date(self.store, session, self._index())

    def quiet(self, timeout: float) -> bool:
        """Wait (at most `timeout` seconds) until no session is being brought up to date
        after its reply; whether none is. For a caller in another thread (a benchmark
        that gives the proxy a client's time to think between requests)."""
        deadline = time.monotonic() + timeout
        while self.settling > 0:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.0005)
        return True

    def _offers_tools(self, body: dict[str, Any]) -> bool:
        choice = self.settings.memory_tools
        if choice == "never":
            return False
        tool_choice = body.get("tool_choice")
        if isinstance(tool_choice, dict) and tool_choice.get("type") == "none":
            return False
        return choice == "always" or bool(body.get("tools"))

    async def _whole(self, call: _Call) -> Response:
        """A request answered in one piece, memory rounds included."""
        response = await self._send(call, call.outgoing)
        if isinstance(response, Response):
            return response
        if response.status_code != 200:
            await self._failed(call, response.status_code, response.content)
            return _passed(response, response.content)
        try:
            message = response.json()
        except ValueError:
            message = None
        if not isinstance(message, dict) or not call.offered:
            if isinstance(message, dict):
                await self._replied(call, message)
            return _passed(response, response.content)
        first, shown = message, _shown(message.get("content") or [])
        usage = _added_usage({}, message.get("usage"))
        for number in range(1, self.settings.max_memory_calls + 1):
            calls = _memory_calls(message.get("content") or [], message.get("stop_reason"))
            if not calls:
                break
            results = await self._run_tools(call, calls)
            body = self._continued(call, message, results, number)
            response = await self._send(call, json.dumps(body).encode("utf-8"))
            if isinstance(response, Response):
                return response
            if response.status_code != 200:
                await self._failed(call, response.status_code, response.content)
                return _passed(response, response.content)
            try:
                message = response.json()
            except ValueError:
                message = None
            if not isinstance(message, dict):  # not a reply: the caller sees what came
                await self._failed(call, 200, response.content)
                return _passed(response, response.content)
            shown += _shown(message.get("content") or [])
            usage = _added_usage(usage, message.get("usage"))
        final = {**message, "id": first.get("id"), "content": shown, "usage": usage}
        if _memory_calls(message.get("content") or [], message.get("stop_reason")):
            final["stop_reason"] = "end_turn"  # the rounds ran out: what it said stands
        await self._replied(call, final)
        return _passed(response, json.dumps(final, ensure_ascii=False).encode("utf-8"))

    def _continued(
        self, call: _Call, message: dict[str, Any], results: list[dict[str, Any]], number: int
    ) -> dict[str, Any]:
        """The next memory round's request: the reply so far and the tools' results."""
        assert call.sent is not None
        call.sent["messages"] = [
            *call.sent["messages"],
            {"role": "assistant", "content": message.get("content") or []},
            {"role": "user", "content": results},
        ]
        if number >= self.settings.max_memory_calls:  # the last round answers in words
            call.sent["tool_choice"] = {"type": "none"}
        return call.sent

    async def _run_tools(self, call: _Call, calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
        results = []
        for block in calls:
            text, error = await _run(
                live.run_tool, self.store, call.session, str(block.get("name")), block.get("input")
            )
            log.info("%s: ran %s", call.session, block.get("name"))
            result: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": block.get("id"),
                "content": text,
            }
            if error:
                result["is_error"] = True
            results.append(result)
        return results

    async def _streamed(self, call: _Call) -> Response:
        """A streamed request: the caller's events come from a task that reads the
        upstream to the end whatever the caller does."""
        response = await self._open_stream(call, call.outgoing)
        if isinstance(response, Response):
            return response
        queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        task = asyncio.create_task(self._pump(call, response, queue))
        self.pending.add(task)
        task.add_done_callback(self.pending.discard)

        async def events() -> AsyncIterator[bytes]:
            while (chunk := await queue.get()) is not None:
                yield chunk

        return StreamingResponse(events(), status_code=200, headers=_headers(response))

    async def _pump(
        self, call: _Call, response: httpx2.Response, queue: asyncio.Queue[bytes | None]
    ) -> None:
        splice = Splice(call.offered)
        seen = Reassembly()  # what the caller was sent
        try:
            for number in range(self.settings.max_memory_calls + 1):
                view = Reassembly()  # this round's reply, as the upstream sent it
                frames = Frames()
                end: bytes | None = None  # the caller's message_stop, sent once recorded
                try:
                    async for chunk in response.aiter_raw():
                        for frame in frames.feed(chunk):
                            view.add(frame)
                            out = splice.out(frame, view, number < self.settings.max_memory_calls)
                            if out is None:
                                continue
                            seen.add(out)
                            if out.event == "message_stop" and seen.message is not None:
                                end = out.raw
                                continue
                            queue.put_nowait(out.raw)
                except httpx2.HTTPError as exc:  # cut off, or too slow: told below
                    log.warning("%s: the upstream stream broke: %s", call.session, exc)
                finally:
                    # the connection goes back to the pool before the reply is recorded:
                    # held while a session's lock is awaited, it would sit idle at the
                    # upstream's end past its keep-alive, and the next request sent on it
                    # would meet a reset
                    await response.aclose()
                if end is not None and seen.message is not None:
                    await self._ended(call, seen.message, queue, end)
                if view.error is not None or not view.complete:
                    if view.error is None:  # the stream broke off: say so to the caller
                        broke = {"type": "api_error", "message": "the upstream stream ended early"}
                        queue.put_nowait(Frame.of("error", {"type": "error", "error": broke}).raw)
                        view.error = broke
                    failure = json.dumps({"type": "error", "error": view.error}).encode()
                    await self._failed(call, 200, failure)
                    return
                if not splice.held:
                    break
                assert view.message is not None
                calls = _memory_calls(view.message["content"], view.message.get("stop_reason"))
                results = await self._run_tools(call, calls)
                following = self._continued(call, view.message, results, number + 1)
                opened = await self._open_stream(call, json.dumps(following).encode("utf-8"))
                if isinstance(opened, Response):
                    error = json.loads(bytes(opened.body) or b"{}").get("error") or {}
                    queue.put_nowait(Frame.of("error", {"type": "error", "error": error}).raw)
                    return
                response = opened
                splice.next_round()
        except Exception as exc:  # a task's failure must reach the log, and the caller an end
            log.exception("%s: the streamed reply failed: %s", call.session, exc)
        finally:
            queue.put_nowait(None)
            log.info(
                "%s: streamed in %.0f ms", call.session, (time.perf_counter() - call.started) * 1e3
            )

    # -- upstream ----------------------------------------------------------
    def _url(self, request: Request) -> str:
        query = request.url.query
        return f"{self.upstream}{request.url.path}" + (f"?{query}" if query else "")

    def _forwarded(self, request: Request, identity: bool) -> list[tuple[bytes, bytes]]:
        headers = [
            (k, v) for k, v in request.headers.raw if k.decode("latin-1").lower() not in HOP_BY_HOP
        ]
        if identity:  # a reply ccm reads comes unencoded
            headers = [(k, v) for k, v in headers if k.lower() != b"accept-encoding"]
            headers.append((b"accept-encoding", b"identity"))
        return headers

    async def _send(self, call: _Call, body: bytes) -> httpx2.Response | Response:
        """One call upstream, read whole; a Response to return as it is when it failed."""
        assert self.client is not None
        try:
            return await self.client.post(
                self._url(call.request), content=body, headers=self._forwarded(call.request, True)
            )
        except httpx2.HTTPError as exc:
            return await self._unreachable(call, exc)

    async def _open_stream(self, call: _Call, body: bytes) -> httpx2.Response | Response:
        """One streamed call upstream, open; an error answer (read whole, recorded) to
        return as it is when it did not start."""
        assert self.client is not None
        request = self.client.build_request(
            "POST",
            self._url(call.request),
            content=body,
            headers=self._forwarded(call.request, True),
        )
        try:
            response = await self.client.send(request, stream=True)
        except httpx2.HTTPError as exc:
            return await self._unreachable(call, exc)
        if response.status_code == 200:
            return response
        try:
            content = await response.aread()
        finally:
            await response.aclose()
        await self._failed(call, response.status_code, content)
        return _passed(response, content)

    async def _unreachable(self, call: _Call, exc: httpx2.HTTPError) -> Response:
        answer = _unreachable(exc)
        await self._failed(call, answer.status_code, bytes(answer.body))
        return answer

    async def _failed(self, call: _Call, status: int, body: bytes) -> None:
        log.warning("%s: upstream answered %s", call.session, status)
        try:
            await _run(live.record_error, self.store, call.session, status, body)
        except (CCMError, OSError) as exc:
            log.error("%s: could not record the error: %s", call.session, exc)

    async def _ended(
        self, call: _Call, message: dict[str, Any], queue: asyncio.Queue[bytes | None], end: bytes
    ) -> None:
        """The end of a streamed reply to the caller, then the reply recorded. The caller
        may ask again as soon as it has the end, repeating the reply: the session's lock
        is taken first, so that its next request is recorded after the reply."""
        async with self.locks[call.session]:
            queue.put_nowait(end)
            await self._replied(call, message)

    async def _replied(self, call: _Call, message: dict[str, Any]) -> None:
        try:
            await _run(live.record_reply, self.store, call.session, message, call.system)
        except (CCMError, OSError) as exc:
            log.error("%s: could not record the reply: %s", call.session, exc)

    # -- every other path --------------------------------------------------
    async def passthrough(self, request: Request, body: bytes | None = None) -> Response:
        """Forward the request as it is and stream the answer back as it comes."""
        assert self.client is not None
        content = await request.body() if body is None else body
        upstream = self.client.build_request(
            request.method,
            self._url(request),
            content=content,
            headers=self._forwarded(request, False),
        )
        try:
            response = await self.client.send(upstream, stream=True)
        except httpx2.HTTPError as exc:
            return _unreachable(exc)
        return StreamingResponse(
            response.aiter_raw(),
            status_code=response.status_code,
            headers=_headers(response, keep_length=True),
            background=BackgroundTask(response.aclose),
        )


def _unreachable(exc: httpx2.HTTPError) -> JSONResponse:
    """The caller's answer when the upstream did not answer: a 504 when it was too slow,
    else a 502, in the API's error shape."""
    if isinstance(exc, httpx2.TimeoutException):
        return _error(
            504, "timeout_error", f"the upstream API did not answer in time ({type(exc).__name__})"
        )
    detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return _error(502, "api_error", f"the upstream API cannot be reached: {detail}")


def _headers(response: httpx2.Response, keep_length: bool = False) -> dict[str, str]:
    """The upstream's headers to pass back (the length, when the body is passed as it
    came)."""
    return {
        name: value
        for name, value in response.headers.items()
        if name.lower() not in HOP_BY_HOP or (keep_length and name.lower() == "content-length")
    }


def _passed(response: httpx2.Response, content: bytes) -> Response:
    return Response(content, status_code=response.status_code, headers=_headers(response))


def _error(status: int, kind: str, message: str) -> JSONResponse:
    return JSONResponse({"type": "error", "error": {"type": kind, "message": message}}, status)


async def _run(func: Callable[..., T], *args: Any) -> T:
    """`func` in a worker thread: the store's work (locks, fsync) never blocks the loop."""
    return await anyio.to_thread.run_sync(functools.partial(func, *args))


def configure(store: Store) -> None:
    """The process as a proxy runs it: tokens counted as `store` says, and, as a server
    lives long, engines kept in memory, what grows with a session written at most every
    `WRITE_LATER` seconds (`derive.Keeper`), not at every request."""
    tokens.set_method(store.config.tokens_method)
    derive.keeper = derive.Keeper(KEPT_ENGINES, later=WRITE_LATER)


def serve(store: Store, settings: Settings, host: str, port: int) -> None:
    """Run the proxy until interrupted."""
    import uvicorn

    configure(store)
    config = uvicorn.Config(
        Proxy(store, settings).app(),
        host=host,
        port=port,
        log_level="warning",
        access_log=False,  # an access log would name paths and clients, nothing ccm needs
        lifespan="on",
        timeout_keep_alive=CLIENT_IDLE,
    )
    uvicorn.Server(config).run()
