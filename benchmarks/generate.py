"""Seeded generator of realistic chat sessions, for benchmarks.

``write_session(path, turns, seed=0, fmt="jsonl")`` writes one conversation of
`turns` turns: alternating user and assistant turns, with about 5% ``tool`` turns
(2-8 KB of log-like output) after an assistant turn that called a tool. Timestamps
are ISO-8601 UTC with milliseconds, seconds to minutes apart, with an occasional
gap of hours. A turn holds 20-400 words (mostly 40-150) drawn from a fixed technical
vocabulary in sentences, with inline code (paths, calls) and, in some assistant
turns, a code block.

Formats:

* ``jsonl``: one ``{"role", "content", "ts"}`` object a line;
* ``claude-code``: the same conversation as Claude Code records (``type``, ``uuid``,
  ``parentUuid``, ``sessionId``, ``timestamp``, ``message``...). An assistant turn
  that calls a tool is two records sharing ``message.id`` (a text block, then a
  ``tool_use`` block), and the tool turn is a ``user`` record with a ``tool_result``
  block, so ccm reads back exactly `turns` turns.

Only ``random.Random`` instances seeded from `seed` are used: the same arguments give
a byte-identical file. Nothing is downloaded; the vocabulary is built in this module.
"""

from __future__ import annotations

import json
import math
import random
import re
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FORMATS = ("jsonl", "claude-code")

# ---------------------------------------------------------------------------
# vocabulary (a few hundred words, fixed)


def _words(text: str) -> list[str]:
    return text.split()


NOUNS = _words(
    """
cache buffer index session transcript token parser schema lock file offset cursor
thread process queue worker request response payload header stream socket daemon
watcher event handler callback module function method class object field record
entry line byte chunk batch commit branch merge diff patch test fixture assertion
failure error exception traceback warning timeout retry latency throughput benchmark
profile memory heap allocation pointer reference counter checksum hash digest
encoding decoder tokenizer vocabulary embedding vector model prompt context window
budget summary topic decision note config setting option flag argument parameter
variable constant type annotation interface protocol endpoint route proxy server
client database table column row query migration transaction snapshot backup
directory folder path symlink permission container image build pipeline job runner
artifact release version dependency package registry wheel environment shell
terminal command script log output input result value key map list tuple string
integer timestamp deadline scheduler signal descriptor inode journal boundary
generator iterator decorator closure coroutine loop task future mutex semaphore
condition barrier replica shard partition cluster node graph tree leaf root parent
child sibling layer adapter wrapper fallback default limit quota threshold metric
histogram trace span sample estimate heuristic invariant contract regression
"""
)

ADJECTIVES = _words(
    """
stale fresh empty partial torn corrupt valid invalid atomic durable idempotent
incremental lazy eager slow fast hot cold large small long short nested flat sorted
unsorted duplicate unique missing optional required deprecated experimental stable
flaky deterministic concurrent parallel blocking async synchronous compact verbose
explicit implicit local remote global private public internal external cached
pending current previous original derived canonical raw normalised encoded binary
readable writable exclusive shared broken noisy quiet expensive cheap safe unsafe
"""
)

ADVERBS = _words(
    """
always never usually rarely already still only just probably certainly quickly
slowly silently eventually immediately correctly twice again later first instead
"""
)

PREPOSITIONS = _words(
    """
in on from into after before under over through across inside behind without
against between around within per via like
"""
)

# base form -> (third person, past); regular verbs are derived
_IRREGULAR = {
    "read": ("reads", "read"),
    "write": ("writes", "wrote"),
    "run": ("runs", "ran"),
    "build": ("builds", "built"),
    "hold": ("holds", "held"),
    "keep": ("keeps", "kept"),
    "send": ("sends", "sent"),
    "find": ("finds", "found"),
    "take": ("takes", "took"),
    "split": ("splits", "split"),
    "set": ("sets", "set"),
    "get": ("gets", "got"),
    "catch": ("catches", "caught"),
    "throw": ("throws", "threw"),
    "hit": ("hits", "hit"),
    "break": ("breaks", "broke"),
    "choose": ("chooses", "chose"),
    "leave": ("leaves", "left"),
    "lose": ("loses", "lost"),
}
_REGULAR = _words(
    """
parse load store append flush sync lock release open close scan validate reject
accept check compare merge rebase commit revert retry skip count cache evict update
insert delete rename move copy index hash encode decode compress format print log
trace profile measure benchmark test assert mock patch wrap call return yield raise
handle ignore filter sort group join map reduce stream buffer allocate free start
stop restart block wait poll notify signal spawn fork kill emit watch detect infer
resolve import export serialize truncate pad round clamp normalise summarise rank
"""
)


_DOUBLED = ("stop", "wrap", "skip", "map", "pad", "commit", "emit", "log", "format")


def _verb_forms(base: str) -> tuple[str, str, str]:
    """(base, third person, past) of a verb."""
    if base in _IRREGULAR:
        third, past = _IRREGULAR[base]
        return base, third, past
    if base.endswith("y"):
        return base, base[:-1] + "ies", base[:-1] + "ied"
    third = base + ("es" if base.endswith(("s", "sh", "ch", "x", "z")) else "s")
    if base.endswith("e"):
        past = base + "d"
    elif base in _DOUBLED:
        past = base + base[-1] + "ed"
    else:
        past = base + "ed"
    return base, third, past


VERBS = [_verb_forms(v) for v in sorted(_IRREGULAR)] + [_verb_forms(v) for v in _REGULAR]
VERB_BASE = [v[0] for v in VERBS]
VERB_THIRD = [v[1] for v in VERBS]
VERB_PAST = [v[2] for v in VERBS]

PACKAGES = _words("ccm app core api store ingest index tokens proxy daemon cli utils")
FILES = _words(
    """
store pipeline jsonl claude_code chatgpt config schemas tokens lines model errors
watcher server client cache summary topics budget retrieval worker handlers main
"""
)
OBJECTS = _words("store raw log parser report session stats cursor config index db client")
FUNCS = _words(
    """
append_session scan_jsonl parse_line session_stats count_tokens load_config
validate read_turns write_derived lock_raw detect_format expand_inputs normalise_ts
dumps_line json_lines last_record flush open_log build_index fetch_page retry_after
"""
)
VARS = _words("data raw line turn entry record offset path session text value result n")
ARGS = [
    "session_id",
    "path",
    "raw",
    "offset=0",
    "fsync=True",
    "schema='raw_entry'",
    "start",
    "data",
    "turns[-1]",
    "max_bytes",
    "timeout=5.0",
    "*paths",
]
TOOLS = ("Bash", "Read", "Grep")
LOGGERS = _words("ccm.store ccm.ingest ccm.proxy ccm.daemon uvicorn asyncio urllib3 app.worker")
LEVELS = ("DEBUG", "INFO", "INFO", "INFO", "INFO", "WARNING", "ERROR")
OPENERS = [
    word + ","
    for word in _words(
        "ok right so well hmm actually also honestly interesting thanks sure yes no wait"
    )
]
MODEL = "claude-sonnet-4-5-20250929"
MIN_WORDS, MAX_WORDS = 20, 400  # words in a user or assistant turn
_ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

# Sentence templates. Slots: N noun, A adjective, D adverb, P preposition, V verb
# (third person), B verb (base), T verb (past), C inline code; other words are kept.
STATEMENTS = [
    "the A N V the N P the N",
    "when the N V , the N V the A N",
    "we should B the N before the N V",
    "I think the N is A because the N V the N",
    "it looks like C V the N P the N",
    "the N in C is still A",
    "let me B the N and B the N",
    "after I T the N , the N was A",
    "this D V the N , so the N stays A",
    "the N of the N is A P C",
    "the fix is to B the N P C",
    "run C and check the N",
    "that N V D when the N is A",
    "each N V one N , and the N T D",
    "C T the A N , which is why the N is A",
    "the A N V every N P the N",
    "so far the N T the N D",
    "if the N is A we B it and B the N",
    "I T C P the N and the N is A now",
    "the N V a N per N , not per N",
    "note that the N is A until the N V",
    "the test T because C is A",
    "we can B the N D , then B the A N",
]
QUESTIONS = [
    "can you B the N in C",
    "why does the N B the N",
    "what happens when the N is A",
    "should we B the N P the N",
    "is the N A after C V",
    "how do I B the A N",
    "does C B the N or the N",
    "where does the N get T",
]

# Templates of code and shell lines: {X} is a slot as above, plus F function, O object,
# R variable, G argument, M package, L file stem, I integer.
CODE_LINES = [
    "{R} = {O}.{F}({G})",
    "if {R} is None:",
    "    return {R}",
    "for {R} in {O}.{F}({G}):",
    "    {R}.{F}({G})",
    "assert {R} == {I}",
    "with {O}.{F}({G}) as {R}:",
    "    raise ValueError('{A} {N}: ' + repr({R}))",
    "{R} = [{R} for {R} in {O}.{F}() if {R}.{N}]",
    "log.warning('%s: {A} {N}', {R})",
    "def {F}({R}, {G}):",
    "    {R} += {I}",
    "    yield {R}",
    "return dict({N}={R}, count={I})",
    "from {M}.{L} import {F}",
    "# {B} the {N} before the {N} {V}",
]
SHELL_LINES = [
    "$ make test",
    "$ .venv/bin/python -m pytest tests/test_{L}.py -q",
    "$ git diff --stat",
    "$ git log --oneline -{I}",
    "$ ccm ingest ~/.claude/projects/-home-dev-app/ --json",
    "$ ccm sessions",
    "$ rg -n '{F}' {M}/",
    "$ python -m cProfile -s cumtime -m ccm ingest big.jsonl",
    "$ ls -la ~/.knowledge/chats/",
    "$ wc -l {M}/{L}.py",
]
_SLOT = re.compile(r"\{([A-Z])\}")


def _pieces(template: str) -> list[str]:
    """A code template as [literal, slot, literal, slot, ..., literal]."""
    return _SLOT.split(template)


def _iso(ms: int) -> str:
    seconds, millis = divmod(ms, 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{millis:03d}Z"


@dataclass
class SessionInfo:
    """What `write_session` wrote."""

    turns: int = 0
    records: int = 0
    bytes: int = 0
    roles: Counter[str] = field(default_factory=Counter)


@dataclass
class _Turn:
    role: str  # user | assistant | tool
    content: str
    ms: int  # epoch milliseconds
    tool: str | None = None  # for a tool turn: the tool's name
    tool_input: dict[str, Any] | None = None
    calls_tool: bool = False  # an assistant turn followed by a tool turn


class _Text:
    """Text of one conversation, drawn from one seeded `random.Random`."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.random = rng.random
        self.slots: dict[str, list[str]] = {
            "N": NOUNS,
            "A": ADJECTIVES,
            "D": ADVERBS,
            "P": PREPOSITIONS,
            "V": VERB_THIRD,
            "B": VERB_BASE,
            "T": VERB_PAST,
            "F": FUNCS,
            "O": OBJECTS,
            "R": VARS,
            "G": ARGS,
            "M": PACKAGES,
            "L": FILES,
        }
        self.statements = [self.compile(t) for t in STATEMENTS]
        self.questions = [self.compile(t) for t in QUESTIONS]
        self.code_lines = [_pieces(t) for t in CODE_LINES]
        self.shell_lines = [_pieces(t) for t in SHELL_LINES]

    def pick(self, items: list[str]) -> str:
        return items[int(self.random() * len(items))]

    def code(self) -> str:
        """An inline code token: a path, a call, an attribute or a test id."""
        kind = self.random()
        pick = self.pick
        if kind < 0.3:
            return f"`{pick(PACKAGES)}/{pick(FILES)}.py`"
        if kind < 0.6:
            return f"`{pick(OBJECTS)}.{pick(FUNCS)}({pick(ARGS)})`"
        if kind < 0.8:
            return f"`{pick(FUNCS)}()`"
        if kind < 0.9:
            return f"`tests/test_{pick(FILES)}.py::test_{pick(FUNCS)}`"
        return f"`{pick(PACKAGES)}/{pick(FILES)}.py:{int(self.random() * 600) + 1}`"

    def compile(self, template: str) -> list[tuple[Any, int]]:
        """A sentence template as (pool, size) pairs: a literal is (word, 1), C is (None, 0).

        A comma after a slot ("V,") is folded into the slot's words.
        """
        compiled: list[tuple[Any, int]] = []
        for token in template.split():
            if token == ",":
                pool, size = compiled.pop()
                if size == 1:
                    compiled.append((pool + ",", 1))
                else:
                    compiled.append(([word + "," for word in pool], size))
                continue
            pool = self.slots.get(token)
            if pool is not None:
                compiled.append((pool, len(pool)))
            else:
                compiled.append((None, 0) if token == "C" else (token, 1))
        return compiled

    def fill(self, template: list[tuple[Any, int]]) -> list[str]:
        """The words of a compiled sentence template, its slots filled."""
        rnd = self.random
        code = self.code
        return [
            pool if size == 1 else pool[int(rnd() * size)] if size else code()
            for pool, size in template
        ]

    def fill_code(self, pieces: list[str]) -> str:
        """A code or shell line from `_pieces` of a template."""
        slots = self.slots
        rnd = self.random
        out = []
        for index, piece in enumerate(pieces):
            if index % 2 == 0:
                out.append(piece)
            elif piece == "I":
                out.append(str(int(rnd() * 100)))
            else:
                pool = slots[piece]
                out.append(pool[int(rnd() * len(pool))])
        return "".join(out)

    def sentence(self, question: bool) -> tuple[str, int]:
        rnd = self.random
        templates = self.questions if question else self.statements
        words = self.fill(templates[int(rnd() * len(templates))])
        if rnd() < 0.12:
            words.insert(0, OPENERS[int(rnd() * len(OPENERS))])
        first = words[0]
        words[0] = first[0].upper() + first[1:]
        words[-1] += "?" if question else "." if rnd() < 0.95 else "!"
        return " ".join(words), len(words)

    def code_block(self) -> tuple[str, int]:
        rnd = self.random
        if rnd() < 0.3:
            templates, count, lang = self.shell_lines, 1 + int(rnd() * 3), "sh"
        else:
            templates, count, lang = self.code_lines, 2 + int(rnd() * 9), "python"
        lines = [self.fill_code(templates[int(rnd() * len(templates))]) for _ in range(count)]
        text = "```" + lang + "\n" + "\n".join(lines) + "\n```"
        # words as str.split() counts them, the fences included
        return text, 2 + sum(len(line.split()) for line in lines)

    def words_target(self) -> int:
        # log-normal with a median of 85 words: mostly 40-150, clamped so that the
        # sentence that reaches the target stays within MIN_WORDS-MAX_WORDS
        return max(MIN_WORDS, min(MAX_WORDS - 20, int(math.exp(self.rng.gauss(4.44, 0.55)))))

    def message(self, role: str) -> str:
        """A user or assistant turn: paragraphs of sentences, maybe a code block."""
        rnd = self.random
        target = self.words_target()
        question_rate = 0.35 if role == "user" else 0.05
        want_code = role == "assistant" and rnd() < 0.35
        paragraphs: list[str] = []
        sentences: list[str] = []
        words = 0
        while words < target:
            if want_code and words > target // 3:
                want_code = False
                block, count = self.code_block()
                if words + count <= MAX_WORDS:
                    if sentences:
                        paragraphs.append(" ".join(sentences))
                        sentences = []
                    paragraphs.append(block)
                    words += count
                continue
            text, count = self.sentence(rnd() < question_rate)
            sentences.append(text)
            words += count
            if len(sentences) >= 3 and rnd() < 0.3:
                paragraphs.append(" ".join(sentences))
                sentences = []
        if sentences:
            paragraphs.append(" ".join(sentences))
        return "\n\n".join(paragraphs)

    def tool_call(self) -> tuple[str, dict[str, Any]]:
        """A tool name and its input, as Claude Code's tools take them."""
        pick = self.pick
        tool = TOOLS[int(self.random() * len(TOOLS))]
        if tool == "Bash":
            command = self.fill_code(self.shell_lines[int(self.random() * len(self.shell_lines))])
            description = " ".join(self.fill(self.compile("B the N"))).capitalize()
            return tool, {"command": command[2:], "description": description}
        if tool == "Read":
            return tool, {"file_path": f"/home/dev/app/{pick(PACKAGES)}/{pick(FILES)}.py"}
        return tool, {"pattern": pick(FUNCS), "path": f"/home/dev/app/{pick(PACKAGES)}"}

    def tool_output(self, tool: str, ms: int) -> str:
        """2-8 KB of log-like lines, shaped after the tool."""
        rnd = self.random
        pick = self.pick
        code_lines = self.code_lines
        target = 2048 + int(rnd() * 5900)
        lines: list[str] = []
        size = 0
        number = 1 + int(rnd() * 200)
        clock = ms - 5000
        while size < target:
            if tool == "Read":
                code = self.fill_code(code_lines[int(rnd() * len(code_lines))])
                line = f"{number:>6}\u2192{code}"
                number += 1
            elif tool == "Grep":
                code = self.fill_code(code_lines[int(rnd() * len(code_lines))]).strip()
                line = f"{pick(PACKAGES)}/{pick(FILES)}.py:{int(rnd() * 900) + 1}:    {code}"
            else:
                kind = rnd()
                clock += int(rnd() * 40)
                if kind < 0.55:
                    stamp = _iso(clock).replace("T", " ")[:-1]
                    template = self.statements[int(rnd() * len(self.statements))]
                    words = " ".join(self.fill(template))
                    line = (
                        f"{stamp} {pick(LEVELS):<7} {pick(LOGGERS)}: {words} "
                        f"({rnd() * 50:.1f} ms, {int(rnd() * 5000)} bytes)"
                    )
                elif kind < 0.8:
                    status = "PASSED" if rnd() < 0.9 else "FAILED"
                    line = (
                        f"tests/test_{pick(FILES)}.py::test_{pick(FUNCS)} {status}"
                        f" [{int(rnd() * 100):>3}%]"
                    )
                elif kind < 0.92:
                    line = (
                        f'  File "/home/dev/app/{pick(PACKAGES)}/{pick(FILES)}.py", '
                        f"line {int(rnd() * 900) + 1}, in {pick(FUNCS)}"
                    )
                else:
                    line = (
                        f"-rw-r--r-- 1 dev dev {int(rnd() * 90000):>6} "
                        f"{pick(PACKAGES)}/{pick(FILES)}.py"
                    )
            lines.append(line)
            size += len(line) + 1
        return "\n".join(lines)


def _conversation(turns: int, seed: int) -> Iterator[_Turn]:
    """The turns of one conversation; identical for every output format."""
    rng = random.Random(seed)
    text = _Text(rng)
    rnd = rng.random
    # a Monday morning in 2025, plus up to 30 days
    ms = 1_740_992_400_000 + int(rnd() * 30 * 86_400) * 1000
    role = "user"
    pending_tool = False
    for index in range(turns):
        if role == "user":
            if index and rnd() < 0.002:
                ms += int((2 + rnd() * 14) * 3_600_000)  # a break of hours
            else:
                ms += int(math.exp(rng.gauss(3.5, 1.0)) * 1000)  # ~30 s, up to minutes
            yield _Turn("user", text.message("user"), ms)
            role = "assistant"
        elif role == "assistant":
            ms += 1000 + int(rnd() * 40_000)
            # one assistant turn in ten calls a tool: tool turns are ~5% of all turns
            pending_tool = index + 1 < turns and rnd() < 0.1
            yield _Turn("assistant", text.message("assistant"), ms, calls_tool=pending_tool)
            role = "tool" if pending_tool else "user"
        else:
            ms += 50 + int(rnd() * 20_000)
            name, tool_input = text.tool_call()
            yield _Turn("tool", text.tool_output(name, ms), ms, name, tool_input)
            role = "assistant"


def _dumps(record: dict[str, Any]) -> str:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"))


def _jsonl_lines(conversation: Iterator[_Turn], info: SessionInfo) -> Iterator[str]:
    for turn in conversation:
        info.roles[turn.role] += 1
        yield _dumps({"role": turn.role, "content": turn.content, "ts": _iso(turn.ms)})


def _claude_code_lines(
    conversation: Iterator[_Turn], seed: int, info: SessionInfo
) -> Iterator[str]:
    ids = random.Random(f"claude-code ids {seed}")  # ids apart: same text in both formats

    def new_uuid() -> str:
        return str(uuid.UUID(int=ids.getrandbits(128), version=4))

    def token(prefix: str, length: int) -> str:
        return prefix + "".join(ids.choices(_ALPHABET, k=length))

    session_id = new_uuid()
    common = {
        "isSidechain": False,
        "userType": "external",
        "cwd": "/home/dev/app",
        "sessionId": session_id,
        "version": "2.0.29",
        "gitBranch": "main",
    }

    def record(
        parent: str | None,
        kind: str,
        message: dict[str, Any],
        uid: str,
        ms: int,
        request: str | None = None,
        result: dict[str, Any] | None = None,
    ) -> str:
        line: dict[str, Any] = {"parentUuid": parent, **common, "type": kind}
        if request is not None:
            line["requestId"] = request
        line.update({"message": message, "uuid": uid, "timestamp": _iso(ms)})
        if result is not None:
            line["toolUseResult"] = result
        return _dumps(line)

    def answer(
        message_id: str, content: list[dict[str, Any]], stop: str | None, usage: dict[str, Any]
    ) -> dict[str, Any]:
        return {
            "id": message_id,
            "type": "message",
            "role": "assistant",
            "model": MODEL,
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": usage,
        }

    parent: str | None = None
    message_id = request_id = ""
    for turn in conversation:
        info.roles[turn.role] += 1
        if turn.role == "user":
            uid = new_uuid()
            yield record(parent, "user", {"role": "user", "content": turn.content}, uid, turn.ms)
            parent = uid
        elif turn.role == "assistant":
            uid = new_uuid()
            message_id, request_id = token("msg_01", 22), token("req_011C", 18)
            words = turn.content.count(" ") + 1
            usage = {
                "input_tokens": 4 + ids.randrange(40),
                "cache_creation_input_tokens": ids.randrange(4000),
                "cache_read_input_tokens": 10_000 + ids.randrange(90_000),
                "output_tokens": int(words * 1.4),
                "service_tier": "standard",
            }
            content = [{"type": "text", "text": turn.content}]
            stop = None if turn.calls_tool else "end_turn"
            message = answer(message_id, content, stop, usage)
            yield record(parent, "assistant", message, uid, turn.ms, request=request_id)
            parent = uid
        else:
            # the tool_use block: a second record of the previous assistant message
            call_id = token("toolu_01", 22)
            use_uid = new_uuid()
            call = {"type": "tool_use", "id": call_id, "name": turn.tool, "input": turn.tool_input}
            usage = {"input_tokens": 4, "output_tokens": 60}
            message = answer(message_id, [call], "tool_use", usage)
            yield record(parent, "assistant", message, use_uid, turn.ms - 40, request=request_id)
            uid = new_uuid()
            block = {"tool_use_id": call_id, "type": "tool_result", "content": turn.content}
            result = {"stdout": turn.content, "stderr": "", "interrupted": False, "isImage": False}
            message = {"role": "user", "content": [block]}
            yield record(use_uid, "user", message, uid, turn.ms, result=result)
            parent = uid


def write_session(path: str | Path, turns: int, seed: int = 0, fmt: str = "jsonl") -> SessionInfo:
    """Write a conversation of `turns` turns to `path`; see the module docstring."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}: use {' or '.join(FORMATS)}")
    if turns < 0:
        raise ValueError("turns must be >= 0")
    info = SessionInfo(turns=turns)
    conversation = _conversation(turns, seed)
    if fmt == "jsonl":
        lines = _jsonl_lines(conversation, info)
    else:
        lines = _claude_code_lines(conversation, seed, info)
    batch: list[str] = []
    with open(path, "wb") as handle:
        for line in lines:
            batch.append(line)
            if len(batch) >= 2000:
                data = ("\n".join(batch) + "\n").encode("utf-8")
                handle.write(data)
                info.bytes += len(data)
                info.records += len(batch)
                batch = []
        if batch:
            data = ("\n".join(batch) + "\n").encode("utf-8")
            handle.write(data)
            info.bytes += len(data)
            info.records += len(batch)
    return info
