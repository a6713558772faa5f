"""Critical context: instructions, requirements, preferences and constraints.

Critical items are never compressed, never displaced, and always given to the model.
They come from patterns in what the user (or a system prompt) says, and from explicit
marks (``ccm critical SESSION --add``, ``@pin``-like events). Assistant turns are not
scanned: an assistant explaining that "you must restart" is not a user's rule. Nor are
turns whose source names the person who said them (a conversation between people, as
LoCoMo's): "make sure you take care of yourself" is care between friends, not a rule.
"""

from __future__ import annotations

import re

from ccm.engine.text import sentences

_KINDS: list[tuple[str, re.Pattern[str]]] = [
    (
        "instruction",
        re.compile(
            # imperative, not descriptive: "Always keep ...", "..., never floats",
            # "we always ...", not "this never splits the limit"
            r"(?:^|[:;,\u2014-]\s*|\b(?:you|we|i|please|to|should|must|will)\s+)(?:always|never)\b|"
            r"\b(?:don'?t ever|do not ever|under no circumstances|make sure (?:to|you|that)|"
            r"remember to|be sure to)\b",
        ),
    ),
    (
        "requirement",
        re.compile(
            # a rule, not a guess ("that must have been fun") or a chore ("we still have to do")
            r"\bmust(?:n'?t| not)?\b(?!\s*(?:'ve|have been|have had|be (?:so|really|very|nice|fun|great|hard|tough|awesome|amazing)))|"
            r"\b(?:(?:is|are) required|required:|requirement|needs? to be|is mandatory|at all times)\b|"
            r"(?<!\bi )(?<!\bwe )(?<!\byou )(?<!\bthey )(?<!\bstill )\b(?:has|have) to\b",
        ),
    ),
    (
        "constraint",
        re.compile(
            r"\b(?:constraint|limit(?:ed)? to|no more than|at most|at least|only (?:use|allow)|"
            r"not allowed|forbidden|do not use|don'?t use|avoid)\b",
        ),
    ),
    (
        "preference",
        re.compile(
            # a preference about the work ("I want reports in EUR"), not a wish ("I want to travel")
            r"\b(?:i|we)(?: prefer| would rather|'d rather)\b|\b(?:i|we) want (?!to\b)(?:the |all |every |reports?|it |them |amounts?|\w+s\b)|"
            r"\bmy preference\b|\bplease (?:use|keep|write|don'?t)\b",
        ),
    ),
]
# a cheap literal screen: every alternative of every pattern above holds one of these
# strings, and most turns hold none of them; a sentence is only matched when it holds
# one of the turn's hits
_ANY = re.compile(
    r"always|never|t ever|under no circumstances|make sure|remember to|be sure to|must|"
    r"require|need|mandatory|at all times|has to|have to|constraint|limit|no more than|"
    r"at most|at least|only use|only allow|not allowed|forbidden|t use|avoid|prefer|rather|"
    r"want|please"
)
FORBID = re.compile(r"\b(?:never|don'?t|do not|avoid|no)\s+((?:[\w.-]+\s+){0,2}[\w.-]+)")
_QUESTION = re.compile(r"\?\s*$")
_MAX_CHARS = 300


def detect(role: str, text: str) -> list[tuple[str, str]]:
    """``(kind, sentence)`` for each critical sentence of a user or system turn."""
    if role not in ("user", "system"):
        return []
    hits = set(_ANY.findall(text.lower()))
    if not hits:
        return []
    found: list[tuple[str, str]] = []
    for sentence in sentences(text):
        if _QUESTION.search(sentence) or len(sentence) > _MAX_CHARS * 2:
            continue
        lower = sentence.lower()
        if not any(hit in lower for hit in hits):
            continue
        for kind, pattern in _KINDS:
            if pattern.search(lower):
                clipped = " ".join(sentence.split())
                if len(clipped) > _MAX_CHARS:
                    clipped = clipped[: _MAX_CHARS - 1].rstrip() + "\u2026"
                found.append((kind, clipped))
                break
    return found


def forbidden_terms(text: str) -> list[str]:
    """What a "never X" / "don't X" / "avoid X" item forbids, as terms (for drift checks)."""
    from ccm.engine.text import terms

    found: list[str] = []
    for match in FORBID.finditer(text.lower()):
        found.extend(t for t in terms(match.group(1)) if len(t) > 2 and t not in found)
    return found
