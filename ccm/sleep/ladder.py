"""The abstraction ladder (thesis 3): how far a conclusion stands from its occasion.

=====  ==============================  ==================================================
layer  what                            example
=====  ==============================  ==================================================
0      a raw, specific fact            "connect() in db.py runs PRAGMA journal_mode=WAL"
1      a specific conclusion           "Decision: we use SQLite with WAL mode"
2      a project-independent lesson    "Let the gaps between our reviews grow"
3      a general principle             "Never store money as floats."
=====  ==============================  ==================================================

`layer` decides with deterministic rules, the first that applies:

* 0 when the text holds a detail only one project has (anything `redact` removes: a
  path, URL, e-mail, host, IP, key, long number; or a code identifier: snake_case,
  camelCase, ``call()``, ``--flag``, ``key=value``, ``module.name``), or two or more
  numbers and quoted strings;
* 1 when it holds one such number or quote, a proper name (a capitalised word inside a
  sentence: SQLite, Postgres), a word tying it to one occasion (was, did, today), or
  when its kind binds it to one project (a decision, requirement, task, resolution, fix
  or confirmation: what a lesson is drawn from, not the lesson);
* 2 when it speaks of us (we, my, you, let's) or runs past 25 words: a lesson still
  told from the situation;
* 3 when it states a rule (always, never, prefer, avoid, should, must, every...);
* 2 otherwise.

Layers from 1 up are shared beyond their project, so their text goes through `redact`
first: private detail becomes a typed placeholder and the sentence stays readable.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from ccm import patterns

SPECIFIC = frozenset({"decision", "requirement", "task", "resolution", "fix", "confirmation"})

_IDENTIFIER = patterns.compile(
    r"\b[A-Za-z]\w*_\w+|\b[a-z]+[A-Z]\w*|\b\w+\(\)|(?<![\w-])--?[a-z][\w-]*|\b\w+=\S|"
    r"\b[A-Za-z_]\w*\.[A-Za-z_]\w+"
)
_NUMBER = patterns.compile(r"(?<![\w.])\d+(?:[.,:/]\d+)*(?![\w.]\d)")
_QUOTED = patterns.compile(r"\"[^\"]+\"|(?<!\w)'[^']+'(?!\w)|`[^`]+`")
_OCCASION = patterns.compile(
    r"\b(?:was|were|had|did|today|yesterday|tonight|earlier|last (?:week|night))\b"
)
_PERSONAL = patterns.compile(
    r"\b(?:i|i'm|i've|i'll|i'd|me|my|mine|myself|we|we're|we've|we'll|us|our|ours|ourselves|"
    r"you|your|yours|yourself|let's)\b"
)
_RULE = patterns.compile(
    r"\b(?:always|never|prefer|avoid|should|must|every|any|only|rule|principle|in general|"
    r"as a rule|don't|do not)\b"
)
_SENTENCE_START = patterns.compile(r"(?:^|[.!?:;]\s+|\n)\W*(\w+)")
_WORD = patterns.compile(r"\b[A-Za-z][A-Za-z]+\b")
_INNER_CAPITAL = patterns.compile(r"[a-z][A-Z]|^[A-Z]+[a-z]+[A-Z]")


def _named(text: str) -> bool:
    """A proper name: a capitalised word that does not open a sentence (acronyms
    aside), or a word with inner capitals (GitHub)."""
    openers = {m.start(1) for m in _SENTENCE_START.finditer(text)}
    return any(
        (m.start() not in openers and m.group()[0].isupper() and not m.group().isupper())
        or _INNER_CAPITAL.search(m.group())
        for m in _WORD.finditer(text)
    )


def layer(node_text: str, kind: str) -> int:
    """How abstract a conclusion is, from 0 (a raw fact) to 3 (a principle)."""
    text = " ".join(node_text.split())
    if redact(text) != text or _IDENTIFIER.search(text):
        return 0
    specifics = len(_NUMBER.findall(text)) + len(_QUOTED.findall(text))
    if specifics >= 2:
        return 0
    lower = text.lower().replace("\u2019", "'")
    if specifics or kind in SPECIFIC or _named(text) or _OCCASION.search(lower):
        return 1
    if _PERSONAL.search(lower) or len(text.split()) > 25:
        return 2
    return 3 if _RULE.search(lower) else 2


# ---------------------------------------------------------------- redact

_SECRET_NAME = (
    r"[A-Za-z0-9_.-]*(?:token|secret|passw(?:or)?d|pwd|api[_-]?key|access[_-]?key|"
    r"private[_-]?key|credentials?)[A-Za-z0-9_]*"
)
# lowercase only, and no top-level domain that is also a file extension or a word
_TLD = (
    r"(?:com|net|org|io|dev|app|ai|co|edu|gov|local|internal|lan|corp|cloud|info|biz|"
    r"uk|de|fr|nl|eu|ch|jp|cn|ru)"
)
_OCTET = r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
_TRAILING = ".,:;!?"


def _assignment(match: re.Match[str]) -> str:
    name, separator, value = match.group(1), match.group(2), match.group(3)
    quoted = value[:1] in "\"'"
    if not quoted and not re.search(r"[\d\W_]", value):
        return match.group()  # "Token: the relay needs one" is prose, not a secret
    return f"{name}{separator}<key>"


def _trimmed(placeholder: str) -> Callable[[re.Match[str]], str]:
    """A replacement that leaves sentence punctuation (and an unopened bracket) outside."""

    def replace(match: re.Match[str]) -> str:
        found = match.group()
        kept = found.rstrip(_TRAILING)
        while kept.endswith((")", "]")) and kept.count(kept[-1]) > kept.count(
            "(" if kept[-1] == ")" else "["
        ):
            kept = kept[:-1].rstrip(_TRAILING)
        return placeholder + found[len(kept) :]

    return replace


def _phone(match: re.Match[str]) -> str:
    return "<number>" if sum(c.isdigit() for c in match.group()) >= 8 else match.group()


_RULES: list[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]]] = [
    (
        patterns.compile(
            rf"\b({_SECRET_NAME})(\s*[=:]\s*)(\"[^\"\n]*\"|'[^'\n]*'|[^\s\"'<>,;]+)",
            re.IGNORECASE,
        ),
        _assignment,
    ),
    (patterns.compile(r"\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]{8,}"), r"\1 <key>"),
    (
        patterns.compile(
            r"(?<![\w-])(?:sk-[A-Za-z0-9_-]{8,}|(?:AKIA|ASIA)[0-9A-Z]{16}|"
            r"gh[pousr]_[A-Za-z0-9]{20,}|github_pat_\w{20,}|xox[abprs]-[A-Za-z0-9-]{10,}|AIza[0-9A-Za-z_-]{30,}|"
            r"glpat-[A-Za-z0-9_-]{16,}|eyJ[\w-]{8,}\.[\w-]{8,}\.[\w-]{8,})"
        ),
        "<key>",
    ),
    (patterns.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s\"'<>`]+"), _trimmed("<url>")),
    (patterns.compile(r"(?<![\w.+-])[\w.+-]+@[\w-]+(?:\.[\w-]+)*\.[A-Za-z]{2,}\b"), "<email>"),
    (
        patterns.compile(r"(?<![\w\\])(?:[A-Za-z]:[\\/]|\\\\[\w.$-]+\\)[^\s\"'<>|*?`]*"),
        _trimmed("<path>"),
    ),
    (
        # a shell substitution inside a path ("/backups/$(date +%F).db") belongs to it
        patterns.compile(
            r"(?<![\w:/.~-])(?:~|\.\.?)?/(?=[\w.~$-])(?:\$\([^)\n]*\)|[^\s\"'`<>|;,])*"
        ),
        _trimmed("<path>"),
    ),
    (patterns.compile(r"(?<![\w/.-])[\w.-]+(?:/[\w.-]+)+\.[A-Za-z]\w{0,5}\b"), "<path>"),
    (
        patterns.compile(rf"(?<![\w.]){_OCTET}(?:\.{_OCTET}){{3}}(?::\d{{1,5}})?(?![\w.]\d|\w)"),
        "<ip>",
    ),
    (
        patterns.compile(
            r"(?<![\w:])(?:[0-9a-fA-F]{1,4}:){7}[0-9a-fA-F]{1,4}(?![\w:])|(?<![\w:])"
            r"(?:[0-9a-fA-F]{1,4}:){1,6}:(?:[0-9a-fA-F]{1,4}(?::[0-9a-fA-F]{1,4})*)?(?![\w:])"
        ),
        "<ip>",
    ),
    (
        patterns.compile(
            rf"(?<![\w.@/-])(?:[A-Za-z0-9](?:[A-Za-z0-9-]{{0,61}}[A-Za-z0-9])?\.)+{_TLD}"
            r"(?::\d{1,5})?(?![\w-])"
        ),
        "<host>",
    ),
    (
        patterns.compile(
            r"(?<![\w+/=-])(?=[\w+/-]*\d)(?=[\w+/-]*[A-Za-z])[A-Za-z0-9+/_-]{32,}={0,2}(?![\w+/=-])"
        ),
        "<key>",
    ),
    (
        patterns.compile(
            r"(?<![\w+])(?:\+\d{1,3}(?:[\s.-]?\(?\d{1,4}\)?){2,5}|"
            r"\(?\d{3}\)?[\s.-]\d{3}[\s.-]\d{4})(?![\w-])"
        ),
        _phone,
    ),
    (patterns.compile(r"\b[A-Za-z]{0,6}[-#]?\d{6,}\b"), "<number>"),
]


def redact(text: str, names: frozenset[str] = frozenset()) -> str:
    """`text` without the private detail a shared lesson must not carry.

    Secrets go first (an assignment to a token keeps its name, loses its value), then
    URLs before e-mails, paths and hosts, so that each detail gets the placeholder of
    what it is as a whole: ``<key> <url> <email> <path> <ip> <host> <number> <name>``.
    Ordinary words, bare file names and small numbers stay. Person names are only
    known from `names`: a full name anywhere, in any case; each part of three or more
    letters where it is written capitalised.
    """
    for pattern, replacement in _RULES:
        text = pattern.sub(replacement, text)
    if names:
        full = sorted({n.strip() for n in names if n.strip()}, key=lambda n: (-len(n), n))
        parts = sorted(
            {p for n in full for p in n.split() if len(p) >= 3}, key=lambda p: (-len(p), p)
        )
        if full:
            text = re.sub(
                r"(?<!\w)(?:" + "|".join(map(re.escape, full)) + r")(?!\w)",
                "<name>",
                text,
                flags=re.IGNORECASE,
            )
        if parts:
            text = re.sub(
                r"(?<!\w)(?:"
                + "|".join(re.escape(p[:1].upper() + p[1:]) for p in parts)
                + r")(?!\w)",
                "<name>",
                text,
            )
    return text
