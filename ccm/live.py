"""A live conversation over the Messages API: what the proxy records and what it sends.

Every request of a conversation repeats its history. `record_request` finds where that
history picks up from what the session holds and appends only what is new (the user's
next message, tool results); `record_reply` appends the model's answer once it is
complete. A request whose history the session's latest turns do not place (a client
that switched conversations, or a proxy started mid-way) is told apart as ``ccm
ingest`` tells an anonymous import: the k-th occurrence of a turn is new when the
session holds fewer. A retried request (the reply was lost) or an edited message picks
up before the end: nothing is appended twice, and what came after stays in the log.

`managed` builds what ``ccm proxy --mode manage`` sends upstream in place of the whole
history: the caller's system prompt whole, then ccm's context (critical items, working
state, manifest, efforts); the recalled exchanges; the latest exchanges word for word,
tool calls with their results; the caller's newest message last and unchanged.

`MEMORY_TOOLS` are what a model may call through the proxy, and `run_tool` runs one.
Every command run this way, or written as ``@command(...)`` in a message, is an event.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ccm import memory, tokens
from ccm.engine import commands as parser
from ccm.errors import CCMError, UsageError
from ccm.ingest.anthropic import read_request, read_response
from ccm.ingest.model import SourceTurn
from ccm.ingest.pipeline import content_key, entry, parse_options, quarantine_rejected, unseen
from ccm.store import Store, check_session_id, slug_session_id, utc_now

if TYPE_CHECKING:
    from ccm.derive import Derived
    from ccm.index import Index

SOURCE = "proxy"
WINDOW = 32  # the session's latest turns searched for where a request's history picks up
MATCH = 8  # turns compared to place it
MAX_ID = 64  # a longer user id is shortened, with a digest of the whole
MESSAGE_TOKENS = 4  # what a message costs beyond its text
MIN_CONTEXT = 200  # what ccm's own context gets at least, whatever the messages take
RECALL_HEADER = (
    "[ccm] Recalled from earlier in this conversation (no longer in view), for the next message:"
)
MEMORY_HEADER = (
    "# Memory (ccm)\n"
    "Earlier turns of this conversation are kept by ccm and summarised below; the latest "
    "are the messages. Honour the critical items."
)


def session_id(header: str | None, body: dict[str, Any]) -> str:
    """The session a request belongs to: the session header, else ``metadata.user_id``,
    else a digest of the system prompt and the first user message (stable for one
    conversation). A bad header value raises `InvalidSessionId`."""
    if header is not None:
        return check_session_id(header.strip())
    metadata = body.get("metadata")
    user = metadata.get("user_id") if isinstance(metadata, dict) else None
    if isinstance(user, str) and user.strip():
        slug = slug_session_id(user.strip())
        if len(slug) <= MAX_ID:
            return slug
        return f"{slug[: MAX_ID - 17]}-{_digest(user)[:16]}"
    messages = body.get("messages")
    first = (
        next((m for m in messages if isinstance(m, dict) and m.get("role") == "user"), None)
        if isinstance(messages, list)
        else None
    )
    return f"api-{_digest(_canonical(body.get('system')) + chr(0) + _canonical(first))[:16]}"


@dataclass
class Recorded:
    """What `record_request` found and appended."""

    session: str
    turns: list[SourceTurn]  # the request's history as turns
    spans: list[tuple[int, int]]  # the turns of each message: turns[first:end]
    numbers: list[int | None]  # the session's turn number of each (None: not known)
    system: str | None  # the digest of the system prompt in force
    commanded: bool = False  # a new user turn held ``@commands``, which were run


def record_request(store: Store, session: str, body: dict[str, Any]) -> Recorded:
    """Append the turns of `body` (a Messages API request) that `session` does not hold
    yet, and the system prompt when it changed; run the ``@commands`` of the new user
    turns."""
    request = read_request(body, parse_options(store, session), "request")
    keys = [content_key(turn.role, turn.content) for turn in request.turns]
    system = content_key("system", request.system.content).hex()[:16] if request.system else None
    numbers: list[int | None] = [None] * len(keys)
    with store.lock_raw(session) as raw:
        tail = store.tail_turns(session, 2 * WINDOW)
        stored = [t for t in tail if t["role"] != "system"][-WINDOW:]
        found = _picks_up(keys, [content_key(t["role"], t["content"]) for t in stored])
        if found is not None:
            start, end = found
            for back in range(min(start, end + 1)):
                numbers[start - 1 - back] = stored[end - back]["turn"]
            fresh = request.turns[start:]
            places = list(range(start, len(keys)))
        elif len(tail) < 2 * WINDOW:  # the whole session was read: none of it is here
            fresh, places = list(request.turns), list(range(len(keys)))
        else:
            fresh = unseen((line.record for line in raw.lines()), request.turns)
            ids = {id(turn) for turn in fresh}
            places = [i for i, turn in enumerate(request.turns) if id(turn) in ids]
        previous = next(filter(None, map(_system_of, reversed(tail))), None)
        if request.system is not None and system != previous:
            # kept word for word, but not mined for rules or conclusions: the client
            # sends it itself with every request
            request.system.meta["injected"] = True
            fresh, places = [request.system, *fresh], [-1, *places]
        number = tail[-1]["turn"] if tail else 0
        added = []
        now = utc_now()
        for turn, place in zip(fresh, places, strict=True):
            number += 1
            added.append(_line(turn, number, now, system))
            if place >= 0:
                numbers[place] = number
        raw.append(added, fsync=store.config.fsync)
    if request.rejected:
        quarantine_rejected(store, request.rejected, session)
    commanded = False
    for line in added:
        if line["role"] == "user":
            commanded |= run_commands(store, session, line["content"], "user")
    return Recorded(session, request.turns, request.spans, numbers, system, commanded)


def record_reply(
    store: Store, session: str, message: dict[str, Any], system: str | None = None
) -> list[dict[str, Any]]:
    """Append a complete response (a ``message``) as the session's next turn(s), once:
    a reply whose id the session's latest turns hold is not appended again. Runs the
    ``@commands`` the model wrote."""
    turns = read_response(message, parse_options(store, session))
    with store.lock_raw(session) as raw:
        tail = store.tail_turns(session, WINDOW)
        held = {t.get("id") for t in tail}
        fresh = [turn for turn in turns if turn.id is None or turn.id not in held]
        number = tail[-1]["turn"] if tail else 0
        now = utc_now()
        added = []
        for turn in fresh:
            number += 1
            added.append(_line(turn, number, now, system))
        raw.append(added, fsync=store.config.fsync)
    for line in added:
        run_commands(store, session, line["content"], "model")
    return added


def record_error(store: Store, session: str, status: int, body: bytes) -> dict[str, Any]:
    """Record a failed upstream call as an event: its status, error type and message
    (never a header: the caller's key stays out of the memory)."""
    error: Any = None
    try:
        parsed = json.loads(body)
        error = parsed.get("error") if isinstance(parsed, dict) else None
    except (ValueError, RecursionError):
        pass
    args: dict[str, Any] = {"status": status}
    if isinstance(error, dict):
        for name in ("type", "message"):
            if isinstance(error.get(name), str):
                args[name] = error[name][:500]
    elif body:
        args["message"] = body[:500].decode("utf-8", "replace")
    (event,) = store.append_events(
        session, [{"who": SOURCE, "kind": "upstream_error", "args": args}]
    )
    return event


def run_commands(store: Store, session: str, text: str, who: str) -> bool:
    """The ``@commands`` in `text`, run as ``ccm apply`` runs them (each an event);
    whether there were any."""
    if "@" in text and parser.parse(text):
        memory.apply(store, session, text, who)
        return True
    return False


# ---------------------------------------------------------------------------
# manage mode


def managed(
    store: Store,
    body: dict[str, Any],
    recorded: Recorded,
    budget: int,
    tools: bool,
    index: Index | None = None,
    derived: Derived | None = None,
) -> dict[str, Any]:
    """The request to send upstream in place of `body` (see the module docstring).
    `budget` bounds ccm's context and the messages it keeps; the caller's system prompt
    and tools are outside it, and the current exchange (from the newest user prompt) is
    kept even when it alone is larger. With `tools`, the memory tools are offered.
    `index`: an open index to use (a server keeps one), else one is opened; `derived`:
    the session's tiers to use as they are, with `index` as it is (see
    `context.assemble`)."""
    from ccm.context import assemble

    messages: list[Any] = body["messages"]
    cost = _Costs(recorded)
    prompts = [i for i, m in enumerate(messages) if _is_prompt(m)]
    start = prompts[-1] if prompts else 0
    kept = _current_exchange(messages, cost, start, budget - MIN_CONTEXT)
    used = sum(cost[i] for i in kept)
    room = min(int(store.config.get("context", "tail_tokens")), budget // 2)
    for earlier in reversed(prompts[:-1]):  # whole earlier exchanges, newest first
        extra = sum(cost[i] for i in range(earlier, kept[0]))
        if used + extra > room:
            break
        kept = list(range(earlier, kept[0])) + kept
        used += extra
    first_turn = next(
        (
            recorded.numbers[t]
            for i in kept
            for t in range(*recorded.spans[i])
            if recorded.numbers[t] is not None
        ),
        None,
    )
    # the newest prompt's words, as read when it was recorded
    said = recorded.turns[slice(*recorded.spans[start])] if messages else []
    query = "\n".join(t.content for t in said if t.role == "user")
    if first_turn is not None and first_turn <= _first_said(store, recorded.session):
        query = ""  # the whole conversation is in the messages: nothing to recall
    context = assemble(
        store,
        recorded.session,
        max(MIN_CONTEXT, budget - used),
        query or None,
        index,
        shown_from=first_turn or _next_turn(recorded),
        derived=derived,
    )
    memory_text = "\n\n".join(b.text() for b in context.blocks if b.name != "recall" and b.lines)
    recall = next((b for b in context.blocks if b.name == "recall" and b.lines), None)
    out = {key: value for key, value in body.items() if key not in ("system", "messages")}
    system = _system_blocks(body.get("system"))
    if memory_text:
        system.append({"type": "text", "text": f"{MEMORY_HEADER}\n\n{memory_text}"})
    if system:
        out["system"] = system
    sent = [messages[i] for i in kept]
    if recall is not None:
        note = {"role": "user", "content": f"{RECALL_HEADER}\n\n{recall.text()}"}
        sent = [note, *sent]
    out["messages"] = sent
    if tools:
        out["tools"] = with_memory_tools(body.get("tools"))
    return out


class _Costs:
    """The tokens of each message of a request, counted when first asked for: only the
    newest messages are weighed (a client may send thousands)."""

    def __init__(self, recorded: Recorded) -> None:
        self.recorded = recorded
        self.known: dict[int, int] = {}

    def __getitem__(self, message: int) -> int:
        found = self.known.get(message)
        if found is None:
            first, end = self.recorded.spans[message]
            turns = self.recorded.turns[first:end]
            found = MESSAGE_TOKENS + sum(tokens.count_cached(t.content) for t in turns)
            self.known[message] = found
        return found


def _current_exchange(messages: list[Any], cost: _Costs, start: int, room: int) -> list[int]:
    """The messages of the current exchange to keep: all when they fit in `room`, else
    its prompt and its newest tool rounds (an assistant message and the results that
    answer it, always together), as many as fit, at least the newest."""
    kept = list(range(start, len(messages)))
    if sum(cost[i] for i in kept) <= room or len(kept) <= 3:
        return kept
    head, rounds = kept[0], kept[1:]
    tail = rounds[-2:] if len(rounds) % 2 == 0 else rounds[-1:]
    rest = rounds[: len(rounds) - len(tail)]
    used = cost[head] + sum(cost[i] for i in tail)
    while rest and used + cost[rest[-2]] + cost[rest[-1]] <= room:  # (rounds of two)
        used += cost[rest[-2]] + cost[rest[-1]]
        tail = rest[-2:] + tail
        rest = rest[:-2]
    return [head, *tail]


def _first_said(store: Store, session: str) -> int:
    """The session's first turn that is not a system prompt (0 when none is)."""
    for line in store.scan_turns(session):
        if line.record is not None and line.record["role"] != "system":
            return int(line.record["turn"])
    return 0


def _next_turn(recorded: Recorded) -> int | None:
    numbers = [n for n in recorded.numbers if n is not None]
    return max(numbers) + 1 if numbers else None


def _is_prompt(message: Any) -> bool:
    """A user message that is not only tool results: where an exchange starts."""
    if not isinstance(message, dict) or message.get("role") != "user":
        return False
    content = message.get("content")
    if isinstance(content, str):
        return True
    return isinstance(content, list) and any(
        not (isinstance(b, dict) and b.get("type") == "tool_result") for b in content
    )


def _system_blocks(system: Any) -> list[dict[str, Any]]:
    if isinstance(system, str):
        return [{"type": "text", "text": system}] if system else []
    if isinstance(system, list):
        return list(system)
    return []


# ---------------------------------------------------------------------------
# memory tools

TARGETS = {
    "type": "array",
    "items": {"type": "string"},
    "description": "Segment ids (seg_3), ranges (seg_2..seg_5), effort ids, or topic words.",
}
MEMORY_TOOLS: list[dict[str, Any]] = [
    {
        "name": "memory_recall",
        "description": "Search everything said earlier in this conversation and in earlier "
        "ones, including what is no longer in your context. Returns the best matching "
        "exchanges with their turn numbers.",
        "input_schema": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What to look for, in words."},
                "budget": {"type": "integer", "description": "Tokens of hits (default 2000)."},
            },
            "required": ["query"],
        },
    },
    {
        "name": "memory_expand",
        "description": "Read a segment (seg_3), a turn (turn 42) or a topic of this "
        "conversation word for word from the log, and bring it back into view.",
        "input_schema": {
            "type": "object",
            "properties": {"target": {"type": "string", "description": "seg_N, turn N or words."}},
            "required": ["target"],
        },
    },
    *(
        {
            "name": f"memory_{name}",
            "description": doc,
            "input_schema": {
                "type": "object",
                "properties": {"targets": TARGETS},
                "required": ["targets"],
            },
        }
        for name, doc in memory.OPERATIONS.items()
    ),
    {
        "name": "memory_note",
        "description": "Write a note into this conversation's memory (a finding, a decision, "
        "where you stopped); recall finds it later.",
        "input_schema": {
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
        },
    },
    {
        "name": "memory_critical",
        "description": "Mark an instruction or fact as critical: it is always in your "
        "context, never compressed.",
        "input_schema": {
            "type": "object",
            "properties": {"text": {"type": "string", "description": "Word for word."}},
            "required": ["text"],
        },
    },
]
MEMORY_TOOL_NAMES = frozenset(tool["name"] for tool in MEMORY_TOOLS)


def with_memory_tools(tools: Any) -> list[Any]:
    """The caller's tools, then the memory tools whose names it does not use."""
    given = list(tools) if isinstance(tools, list) else []
    names = {t.get("name") for t in given if isinstance(t, dict)}
    return given + [tool for tool in MEMORY_TOOLS if tool["name"] not in names]


def run_tool(store: Store, session: str, name: str, arguments: Any) -> tuple[str, bool]:
    """Run memory tool `name`; its result as text, and whether it is an error (a bad
    argument, or a command that could not be done, is an error result the model can
    read, never an exception)."""
    args = arguments if isinstance(arguments, dict) else {}
    try:
        return _run_tool(store, session, name, args), False
    except CCMError as exc:
        return str(exc), True
    except (TypeError, ValueError) as exc:
        return f"bad arguments for {name}: {exc}", True


def _run_tool(store: Store, session: str, name: str, args: dict[str, Any]) -> str:
    if name == "memory_recall":
        query = str(args.get("query") or "").strip()
        if not query:
            raise UsageError("memory_recall needs a query")
        memory.command(store, session, "recall", [], who="model", text=query)
        hits, _ = memory.recall(store, query, session, int(args.get("budget") or 2000))
        if not hits:
            return f"nothing found for {query!r}"
        return "\n\n".join(
            f"[{hit.session}, turns {hit.first_turn}-{hit.last_turn}]\n{hit.text}" for hit in hits
        )
    if name == "memory_expand":
        found = memory.expand(store, session, str(args.get("target") or ""), who="model")
        more = f"\n\n({found['next']})" if found.get("next") else ""
        return f"{found['text']}{more}"
    if name in ("memory_note", "memory_critical"):
        text = str(args.get("text") or "")
        act = memory.note if name == "memory_note" else memory.mark_critical
        return _done(act(store, session, text, who="model"))
    operation = name.removeprefix("memory_")
    if name in MEMORY_TOOL_NAMES and operation in memory.OPERATIONS:
        targets = args.get("targets")
        if isinstance(targets, str):
            targets = [targets]
        if not isinstance(targets, list) or not targets:
            raise UsageError(f'{name} needs targets such as ["seg_2"]')
        return _done(memory.command(store, session, operation, [str(t) for t in targets], "model"))
    raise UsageError(f"no memory tool {name!r}")


def _done(outcome: memory.Outcome) -> str:
    """A command's message; one that was not done is an error."""
    if not outcome.ok:
        raise UsageError(outcome.message)
    return outcome.message


# ---------------------------------------------------------------------------
# helpers


def _line(turn: SourceTurn, number: int, now: str, system: str | None) -> dict[str, Any]:
    line = entry(turn, number, SOURCE, now)
    # which system prompt was in force, on every line (the prompt's own turn is added
    # only when it changes: this tells the proxy when it did)
    if system is not None:
        line["meta"] = {**line.get("meta", {}), "system": system}
    return line


def _system_of(turn: dict[str, Any]) -> str | None:
    meta = turn.get("meta")
    value = meta.get("system") if isinstance(meta, dict) else None
    return value if isinstance(value, str) else None


def _picks_up(keys: list[bytes], stored: list[bytes]) -> tuple[int, int] | None:
    """Where a request's history (`keys`) picks up from the session's latest turns
    (`stored`): ``(start, end)`` when ``keys[:start]`` ends with the turns that end at
    ``stored[end]``, the latest such end first (the end of the log when the request
    continues it; an earlier turn when a reply was lost or a message edited) and the
    longest such start; None when the history holds none of them."""
    positions: dict[bytes, list[int]] = {}
    for index, key in enumerate(keys):
        positions.setdefault(key, []).append(index)
    for end in range(len(stored) - 1, -1, -1):
        for last in reversed(positions.get(stored[end], ())):
            width = min(last + 1, end + 1, MATCH)
            if keys[last + 1 - width : last + 1] == stored[end + 1 - width : end + 1]:
                return last + 1, end
    return None


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _canonical(value: Any) -> str:
    try:
        return json.dumps(value, sort_keys=True, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        return repr(value)
