"""An optional model (Anthropic's) for the few texts a model writes better than a
heuristic: the handover of a session (`handover`), and in time a conclusion's statement
and title, its layer, and whether a conflict is one of truth or of preference.

Off unless config.yaml says ``llm: {provider: anthropic}`` and the environment holds the
key (in the variable ``llm.api_key_env`` names, ANTHROPIC_API_KEY by default; the key is
read when a request is made and never written anywhere). Every result keeps its offline
form: a model that is off, unreachable, out of requests or answering what does not
validate leaves the offline result in place, and `Model.report` says why.

A request asks for a structured answer: one tool, whose input schema is the answer's,
and ``tool_choice`` forcing it. The answer is validated against that schema; one that
does not validate is asked again once, with the validation error as the tool's result.
Answers are cached under ``.ccm/llm/`` by a hash of the model, the task, the prompt and
the schema, so a second run with the same inputs makes no request. The SDK retries 429,
529 and other transient failures with backoff, honouring ``retry-after``
(`MAX_RETRIES`); ``llm.max_calls_per_run`` caps the requests (retries aside) of one
`Model`, which a command makes once.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import fastjsonschema

from ccm.engine.health import HANDOVER_SECTIONS
from ccm.store import Store, atomic_write

log = logging.getLogger(__name__)

CACHE_FOLDER = "llm"  # under the root's .ccm/
CACHE_VERSION = 1  # a change of prompts or of the cache's layout starts a new cache
MAX_RETRIES = 3  # the SDK's retries of one request (429, 529, 5xx, a dropped connection)
TIMEOUT = 120.0  # seconds a request may take
MAX_TOKENS = 4096  # of an answer


@dataclass(frozen=True)
class Ask:
    """One structured question: `task` names the answer's tool (and the cache entry)."""

    task: str
    system: str
    prompt: str
    schema: dict[str, Any]
    description: str = "Give the answer."


@dataclass
class _Tally:
    requests: int = 0
    cached: int = 0
    answered: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    offline: list[str] = field(default_factory=list)  # why an ask kept its offline result


class Model:
    """The configured model of a root, for one command's run (closed after, or used as
    a context manager)."""

    def __init__(self, store: Store, enabled: bool | None = None) -> None:
        """`enabled`: the ``--llm/--no-llm`` of a command (None: as config.yaml says)."""
        self.store = store
        settings = store.config.values["llm"]
        self.provider = str(settings["provider"])
        self.model = str(settings["model"])
        self.key_env = str(settings["api_key_env"])
        self.max_calls = int(settings["max_calls_per_run"])
        self.concurrency = int(settings["concurrency"])
        self.tally = _Tally()
        self._lock = threading.Lock()
        self._client: Any = None
        self.off = self._why_off(enabled)
        # whether the command is to say what the model did, or why it was off
        self.asked = bool(enabled) or (enabled is None and self.provider != "none")

    def _why_off(self, enabled: bool | None) -> str | None:
        if enabled is False:
            return "--no-llm"
        if self.provider == "none":
            if enabled:
                return "--llm, but config.yaml sets no llm.provider (llm: {provider: anthropic})"
            return "off (llm.provider: none)"
        if not os.environ.get(self.key_env):
            return f"no API key: set {self.key_env} in the environment"
        try:
            import anthropic  # noqa: F401
        except ImportError:
            return "the anthropic package is not installed: pip install 'ccm[llm]'"
        return None

    @property
    def on(self) -> bool:
        return self.off is None

    def close(self) -> None:
        """Close the connections the SDK's client keeps open."""
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()

    def __enter__(self) -> Model:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def ask(self, question: Ask) -> dict[str, Any] | None:
        """The model's answer to `question`, validated; None (and the reason in the
        report) where the offline result stands."""
        if self.off is not None:
            return None
        path = self._cache_path(question)
        try:
            cached = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            cached = None
        if isinstance(cached, dict) and isinstance(cached.get("answer"), dict):
            with self._lock:
                self.tally.cached += 1
            return dict(cached["answer"])
        answer, why = self._asked(question)
        if answer is None:
            with self._lock:
                self.tally.offline.append(f"{question.task}: {why}")
            return None
        record = {"task": question.task, "model": self.model, "answer": answer}
        try:
            atomic_write(path, json.dumps(record, ensure_ascii=False).encode("utf-8"))
        except OSError as exc:  # a cache that cannot be written costs a request next time
            log.warning("could not cache a model's answer in %s: %s", path, exc)
        with self._lock:
            self.tally.answered += 1
        return answer

    def ask_all(self, questions: list[Ask]) -> list[dict[str, Any] | None]:
        """`ask` for each, `llm.concurrency` at a time, in order."""
        if len(questions) <= 1 or self.concurrency == 1:
            return [self.ask(q) for q in questions]
        with ThreadPoolExecutor(self.concurrency, thread_name_prefix="ccm-llm") as pool:
            return list(pool.map(self.ask, questions))

    def report(self) -> dict[str, Any]:
        """What the model did in this run: requests made, answers from the cache, tokens,
        and why any ask kept its offline result (or why the model was off)."""
        tally = self.tally
        return {
            "provider": self.provider,
            "model": self.model,
            "on": self.on,
            "off": self.off,
            "requests": tally.requests,
            "answered": tally.answered,
            "cached": tally.cached,
            "input_tokens": tally.input_tokens,
            "output_tokens": tally.output_tokens,
            "offline": list(tally.offline),
        }

    # -- a request -------------------------------------------------------------
    def _cache_path(self, question: Ask) -> Path:
        inputs = {
            "version": CACHE_VERSION,
            "model": self.model,
            "task": question.task,
            "system": question.system,
            "prompt": question.prompt,
            "schema": question.schema,
        }
        digest = hashlib.sha256(
            json.dumps(inputs, sort_keys=True, ensure_ascii=False).encode("utf-8")
        ).hexdigest()
        return self.store.cache / CACHE_FOLDER / digest[:2] / f"{digest}.json"

    def _reserve(self) -> bool:
        """Take one request of the run's `max_calls`; False when none is left."""
        with self._lock:
            if self.tally.requests >= self.max_calls:
                return False
            self.tally.requests += 1
            return True

    def _sdk(self) -> Any:
        with self._lock:
            if self._client is None:
                import anthropic

                self._client = anthropic.Anthropic(
                    api_key=os.environ.get(self.key_env), max_retries=MAX_RETRIES, timeout=TIMEOUT
                )
            return self._client

    def _asked(self, question: Ask) -> tuple[dict[str, Any] | None, str]:
        """One request, and one more if its answer does not validate."""
        import anthropic

        check = _validator(json.dumps(question.schema, sort_keys=True))
        tool = {
            "name": question.task,
            "description": question.description,
            "input_schema": question.schema,
        }
        messages: list[dict[str, Any]] = [{"role": "user", "content": question.prompt}]
        why = ""
        for attempt in range(2):
            if not self._reserve():
                return None, f"llm.max_calls_per_run ({self.max_calls}) reached"
            try:
                message = self._sdk().messages.create(
                    model=self.model,
                    max_tokens=MAX_TOKENS,
                    system=question.system,
                    messages=messages,
                    tools=[tool],
                    tool_choice={"type": "tool", "name": question.task},
                )
            except anthropic.APIStatusError as exc:
                return None, f"the API answered {exc.status_code} ({_kind(exc)})"
            except anthropic.APIError as exc:  # unreachable, timed out, cut
                return None, f"the API could not be reached ({type(exc).__name__})"
            usage = getattr(message, "usage", None)
            with self._lock:
                self.tally.input_tokens += int(getattr(usage, "input_tokens", 0) or 0)
                self.tally.output_tokens += int(getattr(usage, "output_tokens", 0) or 0)
            block = next(
                (
                    b
                    for b in message.content
                    if getattr(b, "type", None) == "tool_use" and b.name == question.task
                ),
                None,
            )
            if block is None:
                why = "the answer used no tool"
                text = "".join(getattr(b, "text", "") for b in message.content)
                content: list[Any] = [{"type": "text", "text": text or "(no answer)"}]
                result = f"Answer with the {question.task} tool."
                tool_id = None
            else:
                answer = block.input
                try:
                    check(answer)
                except fastjsonschema.JsonSchemaException as exc:
                    why = f"the answer did not validate ({exc})"
                    result = f"That answer does not match the schema: {exc}. Answer again."
                    content = [
                        {"type": "tool_use", "id": block.id, "name": block.name, "input": answer}
                    ]
                    tool_id = block.id
                else:
                    return dict(answer), ""
            if attempt == 0:
                messages = [*messages, {"role": "assistant", "content": content}]
                reply: dict[str, Any] = (
                    {
                        "type": "tool_result",
                        "tool_use_id": tool_id,
                        "content": result,
                        "is_error": True,
                    }
                    if tool_id is not None
                    else {"type": "text", "text": result}
                )
                messages.append({"role": "user", "content": [reply]})
        return None, why + ", twice"


@functools.lru_cache(maxsize=32)
def _validator(schema: str) -> Callable[[Any], Any]:
    compiled: Callable[[Any], Any] = fastjsonschema.compile(json.loads(schema))
    return compiled


def _kind(exc: Any) -> str:
    """The error type an API error's body names (``rate_limit_error``...), else its class."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and isinstance(error.get("type"), str):
            return str(error["type"])
    return type(exc).__name__


# -- what the model writes ---------------------------------------------------------

HANDOVER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": list(HANDOVER_SECTIONS),
    "properties": {
        name: {"type": "array", "items": {"type": "string", "minLength": 1}, "maxItems": 12}
        for name in HANDOVER_SECTIONS
    },
}
HANDOVER_SYSTEM = (
    "You write the handover of a long conversation between a user and an AI assistant, "
    "for the assistant that takes it over with no other memory of it. Be specific: names, "
    "numbers, files, commands, versions, dates as the conversation gives them. Say only "
    "what the conversation says. Each section is a list of short, self-contained lines; "
    "an empty list where the conversation gives nothing for it."
)


def handover(
    model: Model, offline: dict[str, list[str]], context_text: str
) -> tuple[dict[str, list[str]], str]:
    """The seven sections of a session's handover written by `model` from its assembled
    context (`context_text`: the manifest, critical items, working state and latest
    turns) and the offline sections as a draft; with where they came from: ``model``, or
    ``offline`` when the model is off or its answer did not come."""
    if not model.on:
        return offline, "offline"
    draft = json.dumps(offline, ensure_ascii=False, indent=1)
    prompt = (
        "The conversation's memory, as ccm keeps it:\n\n<memory>\n"
        f"{context_text}\n</memory>\n\n"
        "A draft handover that ccm extracted without a model (its lines may be cut, "
        f"misplaced or missing):\n\n<draft>\n{draft}\n</draft>\n\n"
        "Write the handover with the sections the tool asks for: task_context (what the "
        "user is doing and why), completed_work, key_decisions (still in force), "
        "current_state (what is being done now, next step, blockers), open_threads, "
        "corrections_and_failed_approaches (what was reversed or did not work, and why), "
        "tone_and_register (how the user writes and wants answers)."
    )
    answer = model.ask(
        Ask("handover", HANDOVER_SYSTEM, prompt, HANDOVER_SCHEMA, "Write the handover.")
    )
    if answer is None:
        return offline, "offline"
    return {name: [str(line) for line in answer[name]] for name in HANDOVER_SECTIONS}, "model"


SEGMENT_CHARS = 8000  # of a segment's turns a model reads (the last of them)
TURN_CHARS = 2000  # of each turn


def as_read(turn: dict[str, Any]) -> str:
    """A turn as a model reads it, among its segment's (`distil`, `summaries`)."""
    return f"[turn {turn['turn']}] {turn['role']}: {str(turn['content'])[:TURN_CHARS]}"


TITLE_WORDS = r"^\s*\S+(\s+\S+){2,9}\s*$"  # 3 to 10 words
LAYERS = (
    "0: a raw, specific fact (connect() in db.py runs PRAGMA journal_mode=WAL); "
    "1: a specific conclusion (we use SQLite with WAL mode); "
    "2: a lesson beyond this project (let the gaps between reviews grow); "
    "3: a general principle (never store money as floats)"
)
CONCLUSION_SYSTEM = (
    "You state the conclusion a stretch of a conversation between a user and an AI "
    "assistant reached, for a notes vault a person reads months later without the "
    "conversation. Say only what the turns say; keep their specifics (names, numbers, "
    "versions, files, commands)."
)


def conclusion_schema(kinds: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["statement", "title", "kind", "layer"],
        "properties": {
            "statement": {"type": "string", "minLength": 10, "maxLength": 600},
            "title": {"type": "string", "maxLength": 90, "pattern": TITLE_WORDS},
            "kind": {"enum": kinds},
            "layer": {"type": "integer", "minimum": 0, "maximum": 3},
        },
    }


def distil(model: Model, record: Any, turns: dict[int, str]) -> int:
    """A model's statement, title, kind and layer for the conclusion of each concluded
    segment of a session's `record` (`ccm.sleep.artifacts.SessionRecord`), written into
    it in place (the detector's sentence kept as ``said``); `turns`: the session's turns
    as a model reads them (`as_read`), by number. Returns how many the model gave; the others keep
    their offline form."""
    from ccm.engine.conclusions import CONFIDENCE

    if not model.on:
        return 0
    kinds = sorted(CONFIDENCE)  # the kinds the detector gives
    chosen = [
        s
        for s in record["segments"]
        if s["conclusion"] and s["status"] in ("concluded", "superseded")
    ]
    asks = []
    for segment in chosen:
        conclusion = segment["conclusion"]
        first, last = segment["raw_lines"]
        upto = min(last, int(conclusion["turn"]) + 1)
        said = "\n\n".join(turns[n] for n in range(first, upto + 1) if n in turns)
        said = said[-SEGMENT_CHARS:]
        prompt = (
            f"<turns>\n{said}\n</turns>\n\n"
            f"ccm's detector took turn {conclusion['turn']} as where this stretch concluded "
            f"({conclusion['kind']}): \u201c{conclusion['text']}\u201d\n\n"
            "Give: statement, the conclusion as one self-contained sentence (what was "
            "decided, found, fixed or done, and the specifics that make it true); title, "
            "3 to 10 words that name what it is about (never a bare 'done' or 'merged'); "
            f"kind, one of {', '.join(kinds)}; layer, its rung on the abstraction "
            f"ladder: {LAYERS}."
        )
        asks.append(Ask("conclusion", CONCLUSION_SYSTEM, prompt, conclusion_schema(kinds)))
    given = 0
    for segment, answer in zip(chosen, model.ask_all(asks), strict=True):
        if answer is None:
            continue
        conclusion = segment["conclusion"]
        segment["conclusion"] = {
            **conclusion,
            "said": conclusion.get("said", conclusion["text"]),
            "text": " ".join(str(answer["statement"]).split()),
            "title": " ".join(str(answer["title"]).split()),
            "kind": str(answer["kind"]),
            "layer": int(answer["layer"]),
            "written_by": model.model,
        }
        given += 1
    return given


CONFLICT_SYSTEM = (
    "You settle a conflict between two conclusions a person's conversations with an AI "
    "assistant reached at different times, for a notes vault. A matter of preference "
    "(a choice, a decision, a taste: the latest declaration stands) differs from a matter "
    "of truth (a fact: the claim with the better evidence stands, whenever it was said)."
)
CONFLICT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["matter", "stands", "reason"],
    "properties": {
        "matter": {"enum": ["truth", "preference"]},
        "stands": {"enum": ["earlier", "later"]},
        "reason": {"type": "string", "minLength": 10, "maxLength": 400},
    },
}


def judge(model: Model, conflicts: list[tuple[Any, Any, Any]]) -> dict[tuple[str, str], Any]:
    """A model's judgement (`ccm.sleep.graph.Judgement`) of each candidate conflict
    (earlier node, later node, the edge that relates them, as `graph.candidates` gives
    them), by (earlier id, later id); the conflicts it gives none for keep the offline
    rules."""
    from ccm.sleep.graph import Judgement

    if not model.on or not conflicts:
        return {}

    def told(node: Any) -> str:
        return f"({node.kind}, said {node.ts} in session {node.session}): \u201c{node.text}\u201d"

    asks = [
        Ask(
            "conflict",
            CONFLICT_SYSTEM,
            f"Earlier {told(earlier)}\n\nLater {told(later)}\n\n"
            f"Why ccm thinks they conflict: {edge.evidence}\n\n"
            "Say whether this is a matter of truth or of preference, which statement "
            "stands (earlier or later), and why, in one sentence.",
            CONFLICT_SCHEMA,
        )
        for earlier, later, edge in conflicts
    ]
    found: dict[tuple[str, str], Any] = {}
    for (earlier, later, _), answer in zip(conflicts, model.ask_all(asks), strict=True):
        if answer is not None:
            found[(earlier.id, later.id)] = Judgement(
                truth=answer["matter"] == "truth",
                later_stands=answer["stands"] == "later",
                reason=" ".join(str(answer["reason"]).split()),
            )
    return found


SUMMARY_SYSTEM = (
    "You summarize a stretch of a conversation between a user and an AI assistant. The "
    "summary stands in for the stretch in the assistant's context from now on: what was "
    "asked, what was done or decided and the specifics it needs (names, numbers, files, "
    "versions), in at most the words the tool allows."
)


def summaries(model: Model, segments: list[tuple[str, str, str]], words: int) -> dict[str, str]:
    """A model's summary of each of `segments` (id, its turns as text, ccm's own
    summary), of `words` words at most, by id; those it gives none for are left out."""
    if not model.on or not segments:
        return {}
    schema = {
        "type": "object",
        "additionalProperties": False,
        "required": ["summary"],
        "properties": {
            "summary": {"type": "string", "minLength": 10, "maxLength": words * 8},
        },
    }
    asks = [
        Ask(
            "summary",
            SUMMARY_SYSTEM,
            f"<turns>\n{said[-SEGMENT_CHARS:]}\n</turns>\n\n"
            f"ccm's extractive summary: \u201c{own}\u201d\n\n"
            f"Write the summary, {words} words at most.",
            schema,
        )
        for _, said, own in segments
    ]
    return {
        sid: " ".join(str(answer["summary"]).split())
        for (sid, _, _), answer in zip(segments, model.ask_all(asks), strict=True)
        if answer is not None
    }
