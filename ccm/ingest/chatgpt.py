"""Importer for the ChatGPT data export (``conversations.json`` or the export ZIP).

Only the visible branch of each conversation is kept: edits and regenerations are
the other children of a node, and the user never saw them as part of the thread.
Everything here tolerates odd shapes, because exports change without notice; only an
input that is not JSON (or a ZIP without conversations) raises `FormatError`. An
export is recognised by its content, whatever its file name (`looks_like_export`).
"""

from __future__ import annotations

import hashlib
import io
import json
import posixpath
import re
import zipfile
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ccm import patterns
from ccm.errors import FormatError, InvalidSessionId
from ccm.ingest.lines import load_document, without_bom
from ccm.ingest.model import (
    Parsed,
    ParseOptions,
    Rejected,
    SourceSession,
    SourceTurn,
    normalise_ts,
)
from ccm.store import MAX_SESSION_ID, check_session_id, slug_session_id

SOURCE = "chatgpt"
HINT = "is this a ChatGPT export? pass --format to choose another importer"
ROLES = frozenset({"system", "user", "assistant", "tool"})
CONVERSATIONS_FILE = patterns.compile(r"conversations(-\d+)?\.json")
ZIP_MAGIC = b"PK\x03\x04"
HASH_CHARS = 8
SNIFF_BYTES = 1 << 20  # how much of a file `looks_like_export` reads
# a conversation object's keys, as the export writes them before its "mapping"
_SNIFF_MAPPING = re.compile(rb'"mapping"\s*:\s*\{')
CONVERSATION_KEYS = ("title", "create_time", "current_node", "conversation_id")
_SNIFF_CONVERSATION = re.compile(rb'"(' + "|".join(CONVERSATION_KEYS).encode() + rb')"\s*:')

# What a message's content becomes: (text, "") or (None, reason it is skipped).
Converted = tuple[str | None, str]
Node = tuple[str, dict[str, Any]]


def parse(data: bytes, name: str, options: ParseOptions) -> Parsed:
    """Read every conversation in `data`; a bad conversation is rejected, not fatal."""
    conversations = list(_conversations(data, name))
    parsed = Parsed()
    several = len(conversations) > 1
    for index, conversation in enumerate(conversations, start=1):
        forced = _forced_id(options.session, index, several)
        session = _session(conversation, index, name, forced, options, parsed)
        if session is not None:
            parsed.sessions.append(session)
    return parsed


# ---------------------------------------------------------------------------
# recognising an export


def is_export(head: bytes) -> bool:
    """Whether `head`, the start of a JSON file (or all of it), looks like a ChatGPT
    export: an array or an object whose text has a "mapping" object and one of a
    conversation's keys (a title, a time, a current node). The importer reads it
    whole later; this only tells an export from the other .json files of a folder
    (a ZIP's are parsed: see `_zip_members`)."""
    text = without_bom(head).lstrip()
    return (
        text[:1] in (b"[", b"{")
        and _SNIFF_MAPPING.search(text) is not None
        and _SNIFF_CONVERSATION.search(text) is not None
    )


def looks_like_export(path: Path) -> bool:
    """Whether the file at `path` holds a ChatGPT export, by its content (its first MiB)."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(SNIFF_BYTES)
    except OSError:
        return False
    return is_export(head)


# ---------------------------------------------------------------------------
# reading the input


def _conversations(data: bytes, name: str) -> Iterator[Any]:
    if data.startswith(ZIP_MAGIC):
        for member, document in _zip_members(data, name):
            yield from _as_list(document, f"{name}:{member}")
    else:
        yield from _as_list(load_document(data, name, HINT), name)


def _holds_conversations(document: Any) -> bool:
    """Whether a parsed JSON document is an export: its first conversation (or the
    object itself) has a "mapping" of nodes and a title, a time or a current node."""
    items = document if isinstance(document, list) else [document]
    first = next((item for item in items if isinstance(item, dict)), None)
    return (
        first is not None
        and isinstance(first.get("mapping"), dict)
        and any(key in first for key in CONVERSATION_KEYS)
    )


def _as_list(document: Any, where: str) -> list[Any]:
    if isinstance(document, list):
        return document
    if isinstance(document, dict):
        return [document]
    raise FormatError(
        f"{where}: expected a JSON array of conversations or one conversation object", HINT
    )


def _zip_members(data: bytes, name: str) -> list[tuple[str, Any]]:
    """The conversation files of an export ZIP, parsed; large exports split them in
    -NNN parts. Without a file of those names, any .json file that holds
    conversations (one that does not parse, or holds something else, is passed over)."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            files = [info for info in archive.infolist() if not info.is_dir()]
            members = sorted(
                info.filename
                for info in files
                if CONVERSATIONS_FILE.fullmatch(posixpath.basename(info.filename))
            )
            found = [
                (member, load_document(archive.read(member), f"{name}:{member}", HINT))
                for member in members
            ]
            if not found:
                others = sorted(i.filename for i in files if i.filename.endswith(".json"))
                for member in others:
                    payload = archive.read(member)
                    if not is_export(payload):
                        continue
                    try:
                        document = load_document(payload, f"{name}:{member}", HINT)
                    except FormatError:
                        continue
                    if _holds_conversations(document):  # kept only when it is one
                        found.append((member, document))
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError) as exc:
        raise FormatError(f"{name}: unreadable ZIP file: {exc}", HINT) from exc
    except (RuntimeError, NotImplementedError, ValueError) as exc:  # encrypted, odd codec
        raise FormatError(f"{name}: cannot extract from ZIP file: {exc}", HINT) from exc
    if not found:
        raise FormatError(
            f"{name}: ZIP file has no conversations.json, conversations-NNN.json or other "
            "JSON file of conversations",
            "pass the ChatGPT data export ZIP, or the conversations.json inside it",
        )
    return found


# ---------------------------------------------------------------------------
# one conversation


def _session(
    conversation: Any,
    index: int,
    name: str,
    forced: str | None,
    options: ParseOptions,
    parsed: Parsed,
) -> SourceSession | None:
    mapping = conversation.get("mapping") if isinstance(conversation, dict) else None
    if not isinstance(conversation, dict) or not isinstance(mapping, dict):
        parsed.rejected.append(_reject(conversation, index, name))
        return None
    title = _text(conversation.get("title")).strip()
    source_id = _conversation_id(conversation)
    session = SourceSession(
        session_id=forced or _session_id(source_id, title, conversation), source=SOURCE
    )
    if title:
        session.meta["title"] = title
    if source_id:
        session.meta["conversation_id"] = source_id
    start = normalise_ts(conversation.get("create_time"))
    branch = _branch(mapping, conversation.get("current_node"))
    session.turns = _turns(branch, start, options, parsed.skipped)
    return session


def _conversation_id(conversation: dict[str, Any]) -> str | None:
    return _first_str(conversation.get("id"), conversation.get("conversation_id"))


def _reject(conversation: Any, index: int, name: str) -> Rejected:
    if isinstance(conversation, dict):
        ident = _conversation_id(conversation)
        label = f"conversation {index}" + (f" (id {ident!r})" if ident else "")
        error = f"{label} has no 'mapping' object"
    else:
        error = f"conversation {index} is not an object"
    return Rejected(
        source=name,
        line=None,
        error=error,
        hint="each conversation needs a 'mapping' of message nodes; is this a ChatGPT export?",
        raw=_dump(conversation),
    )


def _forced_id(session: str | None, index: int, several: bool) -> str | None:
    """--session names the only conversation, or numbers them all (kept within the limit)."""
    if session is None or not several:
        return session
    suffix = f"-{index}"
    return session[: MAX_SESSION_ID - len(suffix)].rstrip("-._~+@=") + suffix


def _session_id(source_id: str | None, title: str, conversation: dict[str, Any]) -> str:
    """The export's id when it is a safe name, else the title's slug made unique by a hash.

    The hash is of the conversation itself, so re-importing the same export finds the
    same session again.
    """
    if source_id:
        try:
            return check_session_id(source_id)
        except InvalidSessionId:
            pass
    digest = hashlib.sha256(_dump(conversation, ascii_only=True)).hexdigest()[:HASH_CHARS]
    stem = slug_session_id(title or SOURCE)[: MAX_SESSION_ID - HASH_CHARS - 1]
    return f"{stem.rstrip('-._~+@=') or SOURCE}-{digest}"


# ---------------------------------------------------------------------------
# the visible branch


def _branch(mapping: dict[str, Any], current: Any) -> list[Node]:
    """Nodes from the root down to `current`; a cycle or a missing parent ends the walk.

    Without a usable `current_node`, the thread is taken to end at the leaf reached by
    following the last child from the root: ChatGPT appends an edit or regeneration
    as the last child, so that is the branch the user saw last.
    """
    if not isinstance(current, str) or not isinstance(mapping.get(current), dict):
        current = _last_leaf(mapping)
    path: list[Node] = []
    seen: set[str] = set()
    while isinstance(current, str) and current not in seen:
        node = mapping.get(current)
        if not isinstance(node, dict):
            break
        seen.add(current)
        path.append((current, node))
        current = node.get("parent")
    path.reverse()
    return path


def _last_leaf(mapping: dict[str, Any]) -> str | None:
    """The last node reached from the root by last children, before any cycle closes."""
    current = _root(mapping)
    leaf = current
    seen: set[str] = set()
    while current is not None and current not in seen:
        seen.add(current)
        leaf = current
        children = _known_children(mapping, mapping[current])
        current = children[-1] if children else None
    return leaf


def _root(mapping: dict[str, Any]) -> str | None:
    """The first node without a parent in `mapping` (the export's root node)."""
    for key, node in mapping.items():
        if not isinstance(node, dict):
            continue
        parent = node.get("parent")
        if not isinstance(parent, str) or not isinstance(mapping.get(parent), dict):
            return key
    return None


def _known_children(mapping: dict[str, Any], node: dict[str, Any]) -> list[str]:
    children = node.get("children")
    if not isinstance(children, list):
        return []
    return [c for c in children if isinstance(c, str) and isinstance(mapping.get(c), dict)]


# ---------------------------------------------------------------------------
# messages


def _turns(
    branch: list[Node], start: str | None, options: ParseOptions, skipped: Counter[str]
) -> list[SourceTurn]:
    """Turns of the branch; a message without a time takes the previous one's."""
    turns: list[SourceTurn] = []
    last_ts = start
    for node_id, node in branch:
        message = node.get("message")
        if message is None:
            continue
        if not isinstance(message, dict):
            skipped["malformed"] += 1
            continue
        last_ts = normalise_ts(message.get("create_time")) or last_ts
        turn = _turn(message, node_id, last_ts, options, skipped)
        if turn is not None:
            turns.append(turn)
    return turns


def _turn(
    message: dict[str, Any],
    node_id: str,
    ts: str | None,
    options: ParseOptions,
    skipped: Counter[str],
) -> SourceTurn | None:
    metadata = _dict(message.get("metadata"))
    if metadata.get("is_visually_hidden_from_conversation") is True:
        skipped["hidden"] += 1
        return None
    author = _dict(message.get("author"))
    role = author.get("role")
    if not isinstance(role, str) or role not in ROLES:
        skipped["unknown_role"] += 1
        return None
    text, reason = _content(message.get("content"), options)
    if text is None:
        skipped[reason] += 1
        return None
    if not text.strip():
        skipped["empty"] += 1
        return None
    ident = _first_str(message.get("id")) or node_id
    turn = SourceTurn(role=role, content=text, ts=ts, id=ident)
    tool_name = _first_str(author.get("name"))
    if role == "tool" and tool_name:
        turn.tool = {"name": tool_name}
    model = _first_str(metadata.get("model_slug"))
    if model:
        turn.meta["model"] = model
    return turn


def _content(content: Any, options: ParseOptions) -> Converted:
    if not isinstance(content, dict):
        return None, "unknown"
    kind = content.get("content_type")
    handler = HANDLERS.get(kind) if isinstance(kind, str) else None
    if handler is not None:
        return handler(content, options)
    text = _parts_text(content.get("parts")) or _text(content.get("text"))
    if text:
        return text, ""
    return None, kind if isinstance(kind, str) and kind else "unknown"


def _text_content(content: dict[str, Any], options: ParseOptions) -> Converted:
    return _parts_text(content.get("parts")) or _text(content.get("text")), ""


def _parts_text(parts: Any) -> str:
    if not isinstance(parts, list):
        return ""
    return "\n".join(piece for piece in map(_part_text, parts) if piece)


def _part_text(part: Any) -> str:
    """A string part as is; an attachment as a short placeholder, so the turn reads right."""
    if isinstance(part, str):
        return part
    if not isinstance(part, dict):
        return ""
    kind = _text(part.get("content_type"))
    transcript = _text(part.get("text"))
    if kind == "audio_transcription" and transcript:
        return transcript
    if kind == "image_asset_pointer":
        return "[image]"
    if "audio" in kind:
        return "[audio]"
    file_name = _first_str(part.get("name"), _dict(part.get("metadata")).get("name"))
    if file_name:
        return f"[file: {file_name}]"
    return f"[{kind}]" if kind else "[attachment]"


def _code(content: dict[str, Any], options: ParseOptions) -> Converted:
    text = _text(content.get("text"))
    if not text.strip():
        return "", ""
    language = _text(content.get("language")).strip()
    language = "" if language == "unknown" else language
    return f"```{language}\n{text}\n```", ""


def _plain_text(content: dict[str, Any], options: ParseOptions) -> Converted:
    return _text(content.get("text")), ""


def _quote(content: dict[str, Any], options: ParseOptions) -> Converted:
    text = _text(content.get("text"))
    title = _text(content.get("title")).strip()
    url = _text(content.get("url")).strip()
    origin = " ".join(filter(None, (title, f"<{url}>" if url else "")))
    if text.strip() and origin:
        return f"{text}\n— {origin}", ""
    return text, ""


def _browsing(content: dict[str, Any], options: ParseOptions) -> Converted:
    result = _text(content.get("result"))
    return (result if result.strip() else "[browsing]"), ""


def _system_error(content: dict[str, Any], options: ParseOptions) -> Converted:
    text = _text(content.get("text")).strip()
    return f"[error] {text}" if text else "[error]", ""


def _thoughts(content: dict[str, Any], options: ParseOptions) -> Converted:
    thoughts = content.get("thoughts")
    items = thoughts if isinstance(thoughts, list) else []
    pieces = (_first_str(_dict(t).get("content"), _dict(t).get("summary")) for t in items)
    return _thinking("\n".join(p for p in pieces if p), options)


def _recap(content: dict[str, Any], options: ParseOptions) -> Converted:
    return _thinking(_text(content.get("content")), options)


def _thinking(text: str, options: ParseOptions) -> Converted:
    """Reasoning is not what the user read, so it is kept only on request."""
    if not options.include_thinking:
        return None, "thinking"
    return (f"[thinking] {text}" if text.strip() else ""), ""


def _context(content: dict[str, Any], options: ParseOptions) -> Converted:
    """Memory and profile text is injected on every turn; it is not conversation."""
    return None, "context"


HANDLERS: dict[str, Callable[[dict[str, Any], ParseOptions], Converted]] = {
    "text": _text_content,
    "multimodal_text": _text_content,
    "code": _code,
    "execution_output": _plain_text,
    "tether_quote": _quote,
    "tether_browsing_display": _browsing,
    "system_error": _system_error,
    "thoughts": _thoughts,
    "reasoning_recap": _recap,
    "user_editable_context": _context,
    "model_editable_context": _context,
}


# ---------------------------------------------------------------------------
# small helpers


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _first_str(*values: Any) -> str | None:
    for value in values:
        if isinstance(value, str) and value:
            return value
    return None


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _dump(value: Any, ascii_only: bool = False) -> bytes:
    """The value as JSON bytes, for a quarantine entry or a stable hash."""
    try:
        return json.dumps(value, ensure_ascii=ascii_only).encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(value).encode("ascii")
    except (RecursionError, ValueError):
        return repr(type(value)).encode("ascii")
