"""Text primitives shared by the engine: terms, sentences, vectors.

Deterministic and dependency-free: the same text always gives the same terms, so
every derived file can be rebuilt byte for byte.
"""

from __future__ import annotations

import heapq
import importlib
import math
import re
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from ccm import patterns

_K = TypeVar("_K")
_V = TypeVar("_V")

STOPWORDS = frozenset(
    """
    a about above after again against all also am an and any are aren as at be because been
    before being below between both but by can cannot could couldn did didn do does doesn
    doing don down during each few for from further had hadn has hasn have haven having he
    her here hers herself him himself his how i if in into is isn it its itself just let ll
    me more most mustn my myself no nor not now of off on once only or other our ours
    ourselves out over own re same shan she should shouldn so some such than that the their
    theirs them themselves then there these they this those through to too under until up ve
    very was wasn we were weren what when where which while who whom why will with won would
    wouldn you your yours yourself yourselves yes ok okay oh yeah hey hi hello thanks thank
    please sure really well like get got go going gonna want one two also use using used
    make made need needs thing things something anything know think see look maybe still
    even much many lot way back new good great right sounds sound let's i'm it's that's
    don't can't won't i've i'll you're we're there's said say says tell told way ve d s t m
    hm hmm hmmm ugh argh lol haha btw fyi tbh
    """.split()  # noqa: SIM905 - a word list reads better as text
)

# str.translate + split is 4x faster than a regex for cutting text into words
_SEPARATORS = {
    **{i: " " for i in range(128) if not (chr(i).isalnum() or chr(i) in "'-")},
    **{ord(c): " " for c in "\u2014\u2013\u2026\u201c\u201d\u00ab\u00bb\u00a0\u3001\u3002\uff0c"},
    # punctuation, arrows, box drawing (directory trees), shapes, dingbats and emoji:
    # no word is made of them
    **{i: " " for i in range(0x2010, 0x2C00)},
    **{i: " " for i in range(0x1F300, 0x1FB00)},
    ord("\u2019"): "'",
    ord("\u2018"): "'",
}
# a full stop ends a sentence except after an abbreviation that a word follows ("sensors
# vs. the CV blocks", "e.g. a retry", "Dr. Halvorsen")
_ABBREVIATIONS = (
    "vs",
    "e.g",
    "i.e",
    "E.g",
    "I.e",
    "cf",
    "Dr",
    "Mr",
    "Mrs",
    "Ms",
    "St",
    "approx",
    "incl",
)
# a mark that ends a sentence and the white space after it (split by: the text before, the
# mark, the space, the text after; a pattern that opens with a class of characters lets
# the scan skip to them)
_MARK_SPACE = patterns.compile(r"([.!?])(\s+)")
_EXTENSIONS = (
    "py|js|ts|tsx|jsx|md|json|yaml|yml|toml|sql|sh|rs|go|java|rb|css|html|txt|csv|cfg|ini|lock|db"
)
_BREAK = patterns.compile(r"[\"'`(),;{}\[\]<>=|*]")
# a necessary condition for `paths` to find anything, 8x cheaper than tokenizing
_PATH_HINT = patterns.compile(rf"/[\w.-]*\w\.\w|[\w-]\.(?:{_EXTENSIONS})\b")
_FILE_NAME = patterns.compile(rf"[\w-]+\.(?:{_EXTENSIONS})")
_FILE_END = patterns.compile(r"/[\w.-]*\w\.\w{1,6}$")
_GLOB_TAIL = patterns.compile(r"\*/[^\"'`(),;{}\[\]<>=|\s]*")  # a glob's part after a "*/"

_LONE_SURROGATE = patterns.compile("[\ud800-\udfff]")


def printable(text: str) -> str:
    """`text` for derived output (the index, the model's context): a lone surrogate,
    which JSON escapes can carry and UTF-8 cannot encode, becomes U+FFFD. The raw log
    keeps the original, losslessly."""
    # an ASCII text has none (and isascii reads a flag of the string, not its characters)
    if text.isascii() or not _LONE_SURROGATE.search(text):
        return text
    return _LONE_SURROGATE.sub("\ufffd", text)


def stem(word: str) -> str:
    """A light suffix stripper: fix/fixes/fixed/fixing and decide/decided meet."""
    for suffix, keep in (("ies", "y"), ("ing", ""), ("ed", ""), ("es", ""), ("s", "")):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            if suffix == "s" and word.endswith(("ss", "us", "is")):
                break
            word = word[: len(word) - len(suffix)] + keep
            if suffix in ("ing", "ed") and len(word) > 3 and word[-1] == word[-2]:
                word = word[:-1]  # stopped -> stop
            break
    if len(word) >= 5 and word.endswith("e"):
        word = word[:-1]  # decide -> decid, like decided
    return word


def root(term: str) -> str:
    """A term without the final "e" that `stem` strips from longer words only, so that
    the short word and its inflections meet: "page" and "paging" ("pag"), "rule" and
    "rules" ("rul")."""
    return term[:-1] if len(term) == 4 and term.endswith("e") else term


class Memo(dict[_K, _V]):
    """key -> `fill(key)`, filled on first sight and emptied when it holds more than
    `limit`: a memo looked up in C (by `map`, by `str.translate`) on a hot path."""

    def __init__(self, fill: Callable[[_K], _V], limit: int) -> None:
        super().__init__()
        self.fill, self.limit = fill, limit

    def __missing__(self, key: _K) -> _V:
        if len(self) > self.limit:
            self.clear()
        self[key] = value = self.fill(key)
        return value


def any_of(literals: list[str] | set[str] | frozenset[str]) -> re.Pattern[str]:
    """A pattern matching any of `literals`, the longest one where several start at
    the same place: what ``"|".join`` of them, longest first, matches, but as a trie
    (``s(?:orted|ettled)``), so each place in a text tries one branch, not every
    literal (a scan for 300 cue words reads a turn several times faster)."""
    trie: dict[str, Any] = {}
    for literal in literals:
        node = trie
        for char in literal:
            node = node.setdefault(char, {})
        node[""] = {}  # a literal ends here
    return patterns.compile(_branches(trie))


def _branches(node: dict[str, Any]) -> str:
    """The pattern of a trie node: its children in order (each a character, then what
    follows it), the end of a literal last, so a longer literal is matched first."""
    children = [re.escape(char) + _branches(child) for char, child in sorted(node.items()) if char]
    if not children:
        return ""
    body = children[0] if len(children) == 1 else "(?:" + "|".join(children) + ")"
    if "" not in node:
        return body
    if len(children) == 1 and len(body) > 1:
        body = "(?:" + body + ")"
    return body + "?"


# the parser `re` itself uses (private, so `skipping` falls back to a plain compile)
try:
    _SRE: Any = importlib.import_module("re._constants")
    _PARSER: Any = importlib.import_module("re._parser")
except ImportError:  # pragma: no cover - another Python's `re`
    _SRE = _PARSER = None


def skipping(pattern: str, flags: int = 0) -> re.Pattern[str]:
    """`pattern` compiled with a lookahead of the characters it can start with, when they
    can be told (a few): `re` then skips to them, where a leading "\\b" or lookbehind
    would have it try the whole pattern at every character."""
    return patterns.compile(
        patterns.derived(pattern, flags, lambda: _skipping(pattern, flags)), flags
    )


def _skipping(pattern: str, flags: int) -> str:
    """The pattern `skipping` compiles (found by parsing `pattern`: cached)."""
    try:
        parsed = _PARSER.parse(pattern, flags)
        # (a case-blind pattern starts with either case of its letters: left as it is)
        blind = (flags | parsed.state.flags) & re.IGNORECASE
        first = None if blind else _firsts(list(parsed), _SRE)
    except Exception:  # an unknown construct, or another Python's parser: as it is
        first = None
    if not first or len(first) > 24:
        return pattern
    chars = "".join(sorted(re.escape(c) for c in first))
    try:
        re.compile(f"(?=[{chars}])(?:{pattern})", flags)
    except re.error:  # (an inline flag that must stay first, say)
        return pattern
    return f"(?=[{chars}])(?:{pattern})"


def _firsts(items: list[Any], sre: Any) -> set[str] | None:
    """The characters a parsed pattern can start with; None when that cannot be told
    (a category, a negated set, a pattern that can match nothing)."""
    found: set[str] = set()
    for op, arg in items:
        if _zero_width(op, arg, sre):
            continue  # "\\b", a lookbehind, "(?:(?<=: )|^)"
        if op is sre.LITERAL:
            return found | {chr(arg)}
        if op is sre.IN:
            for kind, value in arg:
                if kind is sre.LITERAL:
                    found.add(chr(value))
                elif kind is sre.RANGE and value[1] - value[0] <= 64:
                    found.update(chr(c) for c in range(value[0], value[1] + 1))
                else:
                    return None
            return found
        if op is sre.BRANCH:
            for branch in arg[1]:
                inner = _firsts(list(branch), sre)
                if inner is None:
                    return None
                found |= inner
            return found
        if op is sre.SUBPATTERN:
            inner = _firsts(list(arg[-1]), sre)
            return None if inner is None else found | inner
        if op in (sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT):
            inner = _firsts(list(arg[2]), sre)
            if inner is None:
                return None
            found |= inner
            if arg[0] >= 1:
                return found
            continue
        return None
    return None  # it may match the empty string


def _zero_width(op: Any, arg: Any, sre: Any) -> bool:
    """Whether a parsed item matches no character: an anchor, a lookaround, or a group or
    choice of nothing else."""
    if op in (sre.AT, sre.ASSERT, sre.ASSERT_NOT):
        return True
    if op is sre.SUBPATTERN:
        return all(_zero_width(o, a, sre) for o, a in arg[-1])
    if op is sre.BRANCH:
        return all(branch and all(_zero_width(o, a, sre) for o, a in branch) for branch in arg[1])
    return False


def words(lower: str) -> list[str]:
    """The words of already lowercased text, apostrophes and inner hyphens kept."""
    return lower.translate(_SEPARATORS).split()


def term_of(word: str) -> str:
    """The term of one lowercased word ("" for a stop word), memoised."""
    return _TERM_CACHE[word]


def _term(word: str) -> str:
    """The term a word stands for, or "" for a stop word, a number or a single letter."""
    word = word.strip("'-")
    if word.endswith("'s"):
        word = word[:-2]
    if len(word) < 2 or word in STOPWORDS or word.isdigit():
        return ""
    return stem(word)


_TERM_CACHE = Memo(_term, 200_000)  # `terms` is on the engine's per-turn path


def terms(text: str) -> list[str]:
    """Content terms of `text`: lowercased, stop words removed, lightly stemmed."""
    return list(filter(None, map(_TERM_CACHE.__getitem__, words(text.lower()))))


_FENCE = patterns.compile(r"```.*?(?:```|\Z)", re.S)
_TOOL_CALL = patterns.compile(r"^\[tool_use\][^\n]*$", re.M)
# a client's wrapper tags (``<command-name>``), and the status line a slash command shows
# while it runs ("<command-message>orchestrator is running…</command-message>"), whole
_WRAPPER = patterns.compile(r"<command-message>.*?</command-message>|</?[A-Za-z][\w-]*>", re.S)


def prose(text: str) -> str:
    """What a person or a model wrote in words: without fenced code, tool calls with
    their JSON inputs and a client's wrapper tags (``<command-name>``): the words of a
    conversation, not of the code and payloads it carries."""
    if "```" in text:
        text = _FENCE.sub(" ", text)
    return unwrapped(without_calls(text))


def unwrapped(text: str) -> str:
    """`text` without a client's wrapper tags and the status lines they carry
    (`_WRAPPER`): "<command-name>/review</command-name>" is "/review"."""
    return _WRAPPER.sub(" ", text) if "<" in text else text


def without_calls(text: str) -> str:
    """`text` without the tool calls it holds, each with its JSON input (a line
    ``[tool_use] Name {...}``): what was said besides the payloads."""
    return _TOOL_CALL.sub(" ", text) if "[tool_use]" in text else text


def counted(count: int, noun: str) -> str:
    """A count with its noun, in the singular for one: "1 segment", "3 segments"."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


# a line of a pasted record or listing: fields between dashes or bars, figures in them
# ("MOT test 14 October 2025 — PASS — Mileage 84,210 miles")
_FIELD = patterns.compile(
    r"\s[\u2014|\u00b7]\s"
)  # (not an en dash: "27 Sept \u2013 1 Oct" is a range)
_FIGURE = patterns.compile(r"\d[\d,.]*")


def is_record(line: str) -> bool:
    """Whether `line` is a line of pasted data (a record, a listing), not a sentence a
    person wrote: two or more field separators and three or more figures."""
    if "\u2014" not in line and "|" not in line and "\u00b7" not in line:
        return False  # (no separator `_FIELD` finds: most sentences, no pattern run)
    return len(_FIELD.findall(line)) >= 2 and len(_FIGURE.findall(line)) >= 3


def sentences(text: str) -> list[str]:
    """Sentences and lines of `text`, stripped, without empty ones: `text` is cut at each
    line break, and at the white space after a ".", "!" or "?" but for a full stop after
    an abbreviation (`_ABBREVIATIONS`, a whole word: "Dr. Halvorsen", not "MDr.")."""
    found: list[str] = []
    for line in text.split("\n"):
        if "." not in line and "!" not in line and "?" not in line:
            if stripped := line.strip():
                found.append(stripped)
            continue
        parts = _MARK_SPACE.split(line)
        current = parts[0]
        for at in range(1, len(parts), 3):
            mark, space, after = parts[at], parts[at + 1], parts[at + 2]
            if mark == "." and _abbreviated(current):
                current += mark + space + after
                continue
            if stripped := (current + mark).strip():
                found.append(stripped)
            current = after
        if stripped := current.strip():
            found.append(stripped)
    return found


def _abbreviated(said: str) -> bool:
    """Whether `said` ends with an abbreviation (`_ABBREVIATIONS`) that is a word of its
    own (nothing of a word just before it)."""
    for abbreviation in _ABBREVIATIONS:
        if said.endswith(abbreviation):
            at = len(said) - len(abbreviation)
            if at == 0 or not (said[at - 1].isalnum() or said[at - 1] == "_"):
                return True
    return False


def paths(text: str) -> list[str]:
    """File paths and file names mentioned in `text`, in order, without repeats.

    A candidate is a maximal run of characters that are neither white space nor
    `_BREAK` (quotes, brackets, operators) and that holds a dot (`str.split` finds the
    runs of non-space in a third of the time a pattern takes).
    """
    if not _PATH_HINT.search(text):
        return []
    seen: dict[str, None] = {}
    for chunk in [run for run in text.split() if "." in run]:  # runs of non-space, dotted
        if "*/" in chunk:  # a glob ("**/package.json"): what follows its "*/" is no file
            chunk = _GLOB_TAIL.sub("*", chunk)
        for piece in _BREAK.split(chunk) if _BREAK.search(chunk) else (chunk,):
            token = piece.rstrip(".:!?")
            if "/" in token:
                if "://" in token or not _FILE_END.search(token):
                    continue  # a URL, or a folder: not an open file
            elif "." not in token or not _FILE_NAME.fullmatch(token):
                continue
            seen.setdefault(token, None)
    return list(seen)


def cosine(a: Mapping[str, float], b: Mapping[str, float]) -> float:
    if not a or not b:
        return 0.0
    common = a.keys() & b.keys()  # C-level set work; the sums below run over few terms
    if not common:
        return 0.0
    dot = math.fsum([a[term] * b[term] for term in common])  # exact: order-free
    if dot == 0.0:
        return 0.0
    return dot / (math.hypot(*a.values()) * math.hypot(*b.values()))


def top_terms(counts: Mapping[str, float], limit: int) -> list[str]:
    """The heaviest terms, ties broken alphabetically (deterministic)."""
    if len(counts) > 4 * limit:  # a partial sort: the same order, for long inputs
        best = heapq.nsmallest(limit, counts.items(), key=lambda kv: (-kv[1], kv[0]))
        return [t for t, _ in best]
    return [t for t, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]]


def named_speaker(turn: dict[str, Any]) -> str | None:
    """The person who said `turn` when the source names one (LoCoMo, group chats)."""
    meta = turn.get("meta") or {}
    name = meta.get("speaker")
    return name if isinstance(name, str) and name.strip() else None
