"""Memory commands a model or a person writes in text, parsed and checked.

``@expand(seg_3)``, ``@expand("auth implementation")``, ``@recall("database
migration decisions")``, ``@compress("middle", "trimmed")``, ``@compress(seg_12,
"summarized")``, ``@pin(seg_31)``, ``@unpin(seg_31)``, ``@focus(seg_12, seg_27)``,
``@archive(seg_1..seg_10)``, ``@archive("setup conversation")``, ``@update(seg_12,
"revised")``, ``@create("learned: X")``.

`parse` finds the commands in any text; `resolve` checks them against a manifest
(ids must exist, topics are matched fuzzily, positions such as "middle" select a
third of the session) and turns each into the event to record. Neither ever raises:
a malformed or unknown command, or one that names nothing, comes back with a clear
message instead.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Any

from ccm import patterns
from ccm.engine.text import terms

COMMANDS = {
    "expand": "bring a compressed or archived segment back into view",
    "recall": "search the memory for a query",
    "compress": "keep only the summary of segments (with an optional note)",
    "pin": "keep segments active: never compressed or archived",
    "unpin": "undo a pin or a focus",
    "focus": "make these segments or efforts the working context",
    "archive": "move segments out of the working context (recall still finds them)",
    "update": "replace a segment's summary",
    "create": "write a note into the memory",
}
POSITIONS = {
    "start": 0,
    "beginning": 0,
    "early": 0,
    "oldest": 0,
    "middle": 1,
    "end": 2,
    "recent": 2,
    "latest": 2,
}
_OPEN = patterns.compile(r"(?<![\w.])@([A-Za-z_]\w*)\s*\(")
_ID = patterns.compile(r"(?:seg|effort)_\d+")
_RANGE = patterns.compile(r"seg_(\d+)\s*\.\.\s*seg_(\d+)")
MAX_RANGE = 10_000


@dataclass
class Command:
    """One ``@name(args)`` found in text."""

    name: str
    args: list[str]
    quoted: list[bool]
    source: str
    error: str | None = None


@dataclass
class Resolved:
    """A command checked against the manifest: the event to record, or why not."""

    command: Command
    ok: bool
    message: str
    event: dict[str, Any] | None = None
    matched: list[str] = field(default_factory=list)


def _split_args(body: str) -> tuple[list[str], list[bool]] | str:
    """Comma-separated arguments, quotes respected; an error string when malformed."""
    args: list[str] = []
    quoted: list[bool] = []
    index = 0
    while index < len(body):
        char = body[index]
        if char in " \t\n,":
            index += 1
            continue
        if char in "\"'":
            end = index + 1
            value = []
            while end < len(body) and body[end] != char:
                if body[end] == "\\" and end + 1 < len(body):
                    end += 1
                value.append(body[end])
                end += 1
            if end >= len(body):
                return f"unclosed quote {char} in arguments"
            args.append("".join(value))
            quoted.append(True)
            index = end + 1
            continue
        end = index
        while end < len(body) and body[end] != ",":
            end += 1
        args.append(body[index:end].strip())
        quoted.append(False)
        index = end
    return args, quoted


def parse(text: str) -> list[Command]:
    """Every ``@name(...)`` in `text`, in order; malformed ones carry an error."""
    found: list[Command] = []
    position = 0
    while True:
        match = _OPEN.search(text, position)
        if match is None:
            return found
        name = match.group(1).lower()
        depth_end = None
        quote: str | None = None
        index = match.end()
        while index < len(text):
            char = text[index]
            if quote:
                if char == "\\":
                    index += 1  # an escaped character never ends the quote
                elif char == quote:
                    quote = None
            elif char in "\"'":
                quote = char
            elif char == ")":
                depth_end = index
                break
            index += 1
        if depth_end is None:
            snippet = text[match.start() : match.start() + 60]
            found.append(
                Command(name, [], [], snippet, f"malformed command: no closing ')' in {snippet!r}")
            )
            return found
        source = text[match.start() : depth_end + 1]
        split = _split_args(text[match.end() : depth_end])
        if isinstance(split, str):
            found.append(Command(name, [], [], source, f"malformed command {source}: {split}"))
        else:
            found.append(Command(name, split[0], split[1], source))
        position = depth_end + 1


def _segments(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    segments: list[dict[str, Any]] = manifest.get("segments", [])
    return segments


def match_topic(manifest: dict[str, Any], query: str) -> list[str]:
    """Segments whose topic, summary or conclusion best match `query` (fuzzy)."""
    wanted = set(terms(query))
    scored: list[tuple[float, str]] = []
    for segment in _segments(manifest):
        conclusion = segment.get("conclusion") or {}
        text = " ".join(
            [
                " ".join(segment.get("topic", [])),
                segment.get("summary", ""),
                conclusion.get("text", ""),
            ]
        )
        have = set(terms(text))
        overlap = len(wanted & have) / len(wanted) if wanted else 0.0
        closeness = difflib.SequenceMatcher(
            None, query.lower(), " ".join(segment.get("topic", []))
        ).ratio()
        scored.append((max(overlap, closeness * 0.8), segment["id"]))
    if not scored:
        return []
    best = max(score for score, _ in scored)
    if best < 0.5:
        return []
    return [sid for score, sid in scored if score >= best - 1e-9]


def _position(manifest: dict[str, Any], word: str) -> list[str]:
    """The first third, the middle (all but the first and last thirds) or the last third."""
    segments = _segments(manifest)
    count = len(segments)
    edge = max(1, count // 3)
    chosen = {0: segments[:edge], 1: segments[edge : count - edge], 2: segments[count - edge :]}
    return [s["id"] for s in chosen[POSITIONS[word]]]


def _targets(
    manifest: dict[str, Any], command: Command, args: list[str], quoted: list[bool]
) -> tuple[list[str], str | None]:
    known = {s["id"] for s in _segments(manifest)}
    known |= {s["effort"] for s in _segments(manifest) if s.get("effort")}
    targets: list[str] = []
    for arg, is_quoted in zip(args, quoted, strict=True):
        span = _RANGE.fullmatch(arg)
        if span and not is_quoted:
            first, last = int(span.group(1)), int(span.group(2))
            if last < first or last - first > MAX_RANGE:
                return [], f"bad range {arg}: write seg_A..seg_B with A <= B"
            wanted = [f"seg_{n}" for n in range(first, last + 1)]
            present = [sid for sid in wanted if sid in known]
            if not present:
                return [], f"no segment in {arg}; the manifest has {_known_range(manifest)}"
            targets.extend(present)
        elif _ID.fullmatch(arg) and not is_quoted:
            if arg not in known:
                return [], f"unknown id {arg}; the manifest has {_known_range(manifest)}"
            targets.append(arg)
        elif arg.lower() in POSITIONS and command.name in ("compress", "archive", "expand"):
            targets.extend(_position(manifest, arg.lower()))
        else:
            matched = match_topic(manifest, arg)
            if not matched:
                return [], f"no segment matches {arg!r}; try an id such as seg_1 or other words"
            targets.extend(matched)
    unique = list(dict.fromkeys(targets))
    return unique, None


def _known_range(manifest: dict[str, Any]) -> str:
    ids = [s["id"] for s in _segments(manifest)]
    if not ids:
        return "no segments yet"
    return f"{ids[0]}..{ids[-1]}" if len(ids) > 1 else ids[0]


def resolve(command: Command, manifest: dict[str, Any], who: str = "user") -> Resolved:
    """Check `command` against `manifest`; on success, the event that records it."""
    if command.error:
        return Resolved(command, False, command.error)
    if command.name not in COMMANDS:
        known = ", ".join(f"@{name}" for name in COMMANDS)
        return Resolved(command, False, f"unknown memory command @{command.name}; known: {known}")
    args, quoted = list(command.args), list(command.quoted)
    if not args:
        return Resolved(
            command, False, f"@{command.name} needs an argument: {COMMANDS[command.name]}"
        )
    event_args: dict[str, Any] = {}
    name = command.name
    if name in ("create", "recall"):
        key = "text" if name == "create" else "query"
        event_args[key] = ", ".join(args)
        targets: list[str] = []
        if name == "recall":
            targets = match_topic(manifest, event_args["query"])
    else:
        text = None
        if name in ("update", "compress") and len(args) >= 2 and quoted[-1]:
            text = args.pop()
            quoted.pop()
        if name == "update" and text is None:
            return Resolved(
                command, False, '@update needs a segment and the new text: @update(seg_3, "...")'
            )
        targets, problem = _targets(manifest, command, args, quoted)
        if problem:
            return Resolved(command, False, f"{command.source}: {problem}")
        event_args["targets"] = targets
        if text is not None:
            event_args["text"] = text
    event = {"who": who, "kind": name, "args": event_args, "result": {"matched": targets}}
    shown = ", ".join(targets) if targets else "nothing yet"
    message = (
        f"{command.source} -> {name} {shown}" if name != "create" else f"{command.source} -> note"
    )
    return Resolved(command, True, message, event, targets)
