"""Markdown notes with YAML frontmatter, and how ccm tells its own text from a person's.

Every note ccm writes ends its frontmatter with ``content_hash``: a hash of the whole
note without that line. A note whose hash still matches is ccm's own and may be
replaced; one that does not (a person edited the body, a property, anything) is the
person's, and ccm never replaces it. A note without the line was never ccm's.

Text that goes into markdown is escaped where it could turn into a link: a quote of a
conversation that says ``[[x]]`` must not become a wikilink to a note that does not
exist. Verbatim quotes go into fenced code blocks, which Obsidian never parses.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from ccm import patterns, yamlio
from ccm.errors import SchemaError

HASH_KEY = "content_hash"
_HASH_LINE = patterns.compile(rf"^{HASH_KEY}: *\"?([0-9a-f]+)\"? *\n", re.MULTILINE)
_FRONTMATTER = patterns.compile(r"\A---\n(.*?\n)?---\n", re.DOTALL)
_BACKTICKS = patterns.compile(r"`+")
_LINK_CHARS = patterns.compile(r"[\[\]]")
_NOT_IN_LINK = patterns.compile(r"[\[\]|#^\n\r\\]+")


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:20]


def render(fields: dict[str, Any], body: str) -> str:
    """A note: `fields` as frontmatter (in their order) closed by its content hash."""
    frontmatter = yamlio.dumps(fields) if fields else ""
    unhashed = f"---\n{frontmatter}---\n{body}"
    return f"---\n{frontmatter}{HASH_KEY}: {digest(unhashed)}\n---\n{body}"


def recorded_hash(text: str) -> str | None:
    """The content hash a note's frontmatter records, if any."""
    found = _FRONTMATTER.match(text)
    if found is None:
        return None
    line = _HASH_LINE.search(found.group(1) or "")
    return line.group(1) if line else None


def is_pristine(text: str) -> bool:
    """True when the note is exactly as ccm wrote it (its hash matches its content)."""
    found = _FRONTMATTER.match(text)
    if found is None:
        return False
    head = found.group(1) or ""
    line = _HASH_LINE.search(head)
    if line is None:
        return False
    unhashed = f"---\n{head[: line.start()]}{head[line.end() :]}---\n{text[found.end() :]}"
    return digest(unhashed) == line.group(1)


def split(text: str, source: str = "<note>") -> tuple[dict[str, Any] | None, str]:
    """A note's frontmatter (None without one) and its body.

    Raises `SchemaError` when the frontmatter is not a YAML mapping: a note a person
    broke is reported, never guessed at.
    """
    found = _FRONTMATTER.match(text)
    if found is None:
        return None, text
    data = yamlio.loads(found.group(1) or "", source)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise SchemaError(source, 2, "the frontmatter is not a mapping of properties")
    return data, text[found.end() :]


def join(fields: dict[str, Any], body: str) -> str:
    """A note from frontmatter and body, with no hash: a person's note, kept as theirs."""
    return f"---\n{yamlio.dumps(fields) if fields else ''}---\n{body}"


# ---------------------------------------------------------------- markdown text


def inline(text: str) -> str:
    """`text` on one line, safe in running markdown: brackets cannot make links."""
    flat = " ".join(text.split())
    return _LINK_CHARS.sub(lambda m: "\\" + m.group(), flat)


def link_label(text: str, limit: int = 80) -> str:
    """A label that can sit inside ``[[target|label]]`` (no brackets, pipes or hashes)."""
    flat = " ".join(_NOT_IN_LINK.sub(" ", text).split())
    return clip(flat, limit)


def clip(text: str, limit: int) -> str:
    """At most `limit` characters, cut at a word with an ellipsis."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1].rsplit(" ", 1)[0].rstrip(" ,;:")
    return (cut or text[: limit - 1]) + "\u2026"


def fenced(text: str, info: str = "text") -> str:
    """`text` verbatim in a code fence longer than any run of backticks inside it."""
    longest = max((len(m.group()) for m in _BACKTICKS.finditer(text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{text.rstrip()}\n{fence}\n"


def wikilink(target: str, label: str | None = None) -> str:
    """``[[target|label]]``; `target` is a vault path without ``.md``."""
    return f"[[{target}|{link_label(label)}]]" if label else f"[[{target}]]"
