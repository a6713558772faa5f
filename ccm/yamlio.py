"""YAML in and out, with libyaml's C loader and dumper when they are installed."""

from __future__ import annotations

import json
import operator
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from ccm import patterns
from ccm.errors import SchemaError

# the C implementations (libyaml) are several times faster; pure Python otherwise
_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_Dumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def loads(text: str, source: str = "<string>") -> Any:
    try:
        return yaml.load(text, Loader=_Loader)
    except yaml.YAMLError as exc:
        line = None
        mark = getattr(exc, "problem_mark", None)
        if mark is not None:
            line = mark.line + 1
        raise SchemaError(source, line, f"not valid YAML: {exc}", "fix the syntax") from exc


def load_file(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise SchemaError(path, None, f"not UTF-8 text: {exc}", "save the file as UTF-8") from exc
    return loads(text, str(path))


def dumps(data: Any) -> str:
    """Stable, readable YAML: keys in the order given, unicode kept, block style.

    ccm's own emitter: PyYAML's representer costs about 5 microseconds a node, which
    made writing a large manifest the slowest part of an update. Documents are plain
    data (dicts with string keys, lists, strings, numbers, booleans, None); strings
    that could be read back as anything else are written as JSON strings, which YAML
    reads as double-quoted scalars. ``dumps_pyyaml`` is the reference it is tested
    against.
    """
    out: list[str] = []
    _emit(data, 0, out)
    return "".join(out)


class Frozen(dict):  # type: ignore[type-arg]
    """A mapping that never changes once built, so its YAML is worked out once.

    The engine keeps the manifest entries of closed segments as `Frozen` between
    updates: writing a manifest of thousands of segments then costs the changed ones
    only. Changing one raises TypeError (a stale YAML text would be a silent bug); a
    copy (``dict(entry)``, pickle, deepcopy) is a plain dict.
    """

    __slots__ = ("_yaml",)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._yaml: dict[int, str] = {}

    def _readonly(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("a Frozen mapping cannot be changed; copy it with dict(...)")

    __setitem__ = __delitem__ = __ior__ = _readonly
    clear = pop = popitem = setdefault = update = _readonly

    def __reduce__(self) -> tuple[Any, ...]:
        return (dict, (dict(self),))

    def yaml(self, indent: int) -> str:
        """The block YAML of this mapping, its first line at the current position."""
        text = self._yaml.get(indent)
        if text is None:
            part: list[str] = []
            _emit(self, indent, part)
            text = self._yaml[indent] = "".join(part)
        return text


class FrozenList(list):  # type: ignore[type-arg]
    """A list that never changes once built, whose YAML is worked out once.

    `extended` makes a longer one whose YAML is this one's text plus that of the new
    items: the engine keeps the working context's critical items this way, since they
    only grow at the end between updates, so writing them costs the new items, not all
    of them. Changing one raises TypeError; a copy (``list(items)``, pickle, deepcopy)
    is a plain list.
    """

    __slots__ = ("_base", "_flow", "_yaml")

    def __init__(self, items: Iterable[Any] = ()) -> None:
        super().__init__(items)
        self._yaml: dict[int, str] = {}
        self._base: FrozenList | None = None  # a prefix whose YAML this one extends
        self._flow = _numbers(self)

    def _readonly(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("a FrozenList cannot be changed; copy it with list(...)")

    __setitem__ = __delitem__ = __iadd__ = __imul__ = _readonly
    append = extend = insert = remove = pop = clear = sort = reverse = _readonly

    def __reduce__(self) -> tuple[Any, ...]:
        return (list, (list(self),))

    def extended(self, more: Iterable[Any]) -> FrozenList:
        """This list followed by `more`, as a new FrozenList that reuses this one's YAML."""
        tail = list(more)
        if not tail:
            return self
        new = FrozenList.__new__(FrozenList)
        list.extend(new, self[:])  # a plain list: copied in one go, not item by item
        list.extend(new, tail)
        new._yaml = {}
        # a list never written links to its own prefix instead: the chain stays short
        new._base = self if self._yaml or self._base is None else self._base
        if not new._base:
            new._base = None
        new._flow = self._flow and _numbers(tail)
        return new

    def yaml(self, indent: int) -> str:
        """The block YAML of this list (not empty), its first line at the current position."""
        chain: list[FrozenList] = []
        node = self
        while indent not in node._yaml and node._base is not None:
            chain.append(node)
            node = node._base
        text = node._yaml.get(indent)
        if text is None:
            part: list[str] = []
            _emit(list(node), indent, part)
            text = node._yaml[indent] = "".join(part)
        for longer in reversed(chain):
            part = [text]
            _items(longer[len(node) :], indent, part, lead=False)
            text = longer._yaml[indent] = "".join(part)
            longer._base = None  # the text is known: let the shorter lists go
            node = longer
        return text


def _numbers(items: Iterable[Any]) -> bool:
    """True when every item is a number: such a list is written inline, ``[1, 2]``."""
    return all(isinstance(v, int | float) and not isinstance(v, bool) for v in items)


class Runs:
    """The encoded YAML of one long top-level list, remembered in runs of `size` items.

    For `dumps_bytes`: a run whose items are the very same `Frozen` mappings as at the
    previous call is reused as bytes, so encoding a manifest of thousands of segments
    costs the runs that changed plus one join, not a pass over every entry. Only the
    leading `Frozen` items of a run are remembered (immutable, they can be recognised
    by identity); the others (a manifest's open segment, last) are encoded each time.
    """

    def __init__(self, size: int = 64) -> None:
        self.size = size
        self.runs: list[tuple[list[Any], bytes]] = []

    def encode(self, items: list[Any], indent: int) -> bytes:
        size = self.size
        chunks = []
        for number, start in enumerate(range(0, len(items), size)):
            run = items[start : start + size]
            known = self.runs[number] if number < len(self.runs) else None
            if (
                known is not None
                and len(known[0]) <= len(run)
                and all(map(operator.is_, known[0], run))  # C: no loop over the run here
                and (len(known[0]) == len(run) or type(run[len(known[0])]) is not Frozen)
            ):
                frozen = len(known[0])
                chunks.append(known[1])
            else:
                frozen = 0
                while frozen < len(run) and type(run[frozen]) is Frozen:
                    frozen += 1
                head = run[:frozen]
                encoded = self._encode(head, start, indent)
                if number < len(self.runs):
                    self.runs[number] = (head, encoded)
                else:
                    self.runs.append((head, encoded))
                chunks.append(encoded)
            if frozen < len(run):
                chunks.append(self._encode(run[frozen:], start + frozen, indent))
        del self.runs[(len(items) + size - 1) // size :]
        return b"".join(chunks)

    @staticmethod
    def _encode(items: list[Any], start: int, indent: int) -> bytes:
        part: list[str] = []
        _items(items, indent, part, lead=start == 0)
        return "".join(part).encode("utf-8")


def dumps_bytes(data: dict[str, Any], runs: dict[str, Runs]) -> bytes:
    """``dumps(data).encode()`` for a mapping, with the long lists under the keys of
    `runs` encoded run by run (each `Runs` kept by the caller between calls)."""
    if not data:
        return b"{}\n"
    chunks = []
    for key, value in data.items():
        kept = runs.get(key)
        if kept is not None and isinstance(value, list | tuple) and value and not _numbers(value):
            chunks.append(f"{_key(key)}:\n".encode())
            chunks.append(kept.encode(list(value), 0))
        else:
            part: list[str] = [_key(key) + ":"]
            _value(value, 0, part)
            chunks.append("".join(part).encode("utf-8"))
    return b"".join(chunks)


_Dumper.add_representer(Frozen, _Dumper.represent_dict)
_Dumper.add_representer(FrozenList, _Dumper.represent_list)


def dumps_pyyaml(data: Any) -> str:
    text: str = yaml.dump(
        data,
        Dumper=_Dumper,
        sort_keys=False,
        allow_unicode=True,
        default_flow_style=False,
        width=100,
    )
    return text


_PLAIN = patterns.compile(r"[A-Za-z_/][\w .,/()+@=~'!?%$&;:#-]*")
_PLAIN_KEY = patterns.compile(r"[A-Za-z_][\w-]*")
_UNSAFE = patterns.compile("[\x7f-\x9f\u2028\u2029\ufeff\ufffe\uffff\ud800-\udfff]")
_RESERVED = frozenset(
    [
        "y",
        "Y",
        "yes",
        "Yes",
        "YES",
        "n",
        "N",
        "no",
        "No",
        "NO",
        "true",
        "True",
        "TRUE",
        "false",
        "False",
        "FALSE",
        "on",
        "On",
        "ON",
        "off",
        "Off",
        "OFF",
        "null",
        "Null",
        "NULL",
    ]
)


def _scalar(value: Any) -> str:
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            return {"nan": ".nan", "inf": ".inf", "-inf": "-.inf"}[repr(value)]
        text = repr(value)
        # YAML 1.1 reads an exponent as a float only with a dot in the mantissa
        return text.replace("e", ".0e") if "e" in text and "." not in text else text
    text = str(value)
    if (
        _PLAIN.fullmatch(text)
        and text not in _RESERVED
        and not text.endswith((" ", ":"))
        and ": " not in text
        and " #" not in text
    ):
        return text
    encoded = json.dumps(text, ensure_ascii=False)
    # YAML forbids some characters JSON leaves raw, and reads others as line breaks
    return _UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", encoded)


def _key(key: Any) -> str:
    text = str(key)
    if _PLAIN_KEY.fullmatch(text) and text not in _RESERVED:
        return text
    return _scalar(text) if isinstance(key, str) else json.dumps(text)


def _emit(data: Any, indent: int, out: list[str]) -> None:
    """Block YAML for `data`, whose first line starts at the current position."""
    pad = " " * indent
    if isinstance(data, dict):
        if not data:
            out.append("{}\n")
            return
        first = True
        for key, value in data.items():
            if not first:
                out.append(pad)
            first = False
            out.append(_key(key) + ":")
            _value(value, indent, out)
        return
    if isinstance(data, list | tuple):
        if not data:
            out.append("[]\n")
            return
        _items(data, indent, out, lead=True)
        return
    out.append(_scalar(data) + "\n")


def _items(items: Iterable[Any], indent: int, out: list[str], lead: bool) -> None:
    """Block list items at `indent`; with `lead`, the first starts at the current
    position (no padding), as the first line of a list does."""
    dash = " " * indent + "- "
    for item in items:
        out.append("- " if lead else dash)
        lead = False
        _item(item, indent + 2, out)


def _item(item: Any, indent: int, out: list[str]) -> None:
    """A list item after its ``- ``; `indent` is that of the item's own lines."""
    if type(item) is Frozen or (type(item) is FrozenList and item):
        out.append(item.yaml(indent))
    elif isinstance(item, dict) and len(item) >= _MEMO_MIN_KEYS and not _holds_frozen(item):
        out.append(_memo(item, indent))
    elif isinstance(item, dict | list | tuple) and item:
        _emit(item, indent, out)
    else:
        out.append(
            _scalar(item)
            if not isinstance(item, dict | list | tuple)
            else ("{}" if isinstance(item, dict) else "[]")
        )
        out.append("\n")


def _holds_frozen(mapping: dict[Any, Any]) -> bool:
    """True when a value is a FrozenList: its YAML is known, and the mapping's is then
    cheaper to write than to look up by its JSON (which costs the whole list)."""
    return any(type(value) is FrozenList for value in mapping.values())


_MEMO: dict[tuple[str, int], str] = {}
_MEMO_MIN_KEYS = 6
_MEMO_MIN_ITEMS = 16
_MEMO_MAX_CHARS = 32_000_000  # keys and texts together; a long-lived process stays bounded
_memo_chars = 0


def _memo(value: Any, indent: int) -> str:
    """The YAML of a large mapping or a long list, remembered by its JSON (C-fast) form.

    A manifest is mostly segments that did not change since the last write; a
    long-running process (the daemon) then pays for the changed ones only.
    """
    global _memo_chars
    key = (json.dumps(value, ensure_ascii=False, separators=(",", ":")), indent)
    text = _MEMO.get(key)
    if text is None:
        part: list[str] = []
        _emit(value, indent, part)
        text = "".join(part)
        _memo_chars += len(key[0]) + len(text)
        if _memo_chars > _MEMO_MAX_CHARS:
            _MEMO.clear()
            _memo_chars = len(key[0]) + len(text)
        _MEMO[key] = text
    return text


def _value(value: Any, indent: int, out: list[str]) -> None:
    """The value of a mapping key: inline when scalar, on the next lines otherwise."""
    if isinstance(value, dict) and value:
        out.append("\n" + " " * (indent + 2))
        _emit(value, indent + 2, out)
    elif isinstance(value, list | tuple) and value:
        if type(value) is FrozenList and not value._flow:
            out.append("\n" + " " * indent)
            out.append(value.yaml(indent))
        elif _numbers(value):
            out.append(" [" + ", ".join(_scalar(v) for v in value) + "]\n")
        elif len(value) >= _MEMO_MIN_ITEMS and type(value[0]) is not Frozen:
            out.append("\n" + " " * indent)
            out.append(_memo(value, indent))
        else:
            out.append("\n" + " " * indent)
            _emit(value, indent, out)
    elif isinstance(value, dict):
        out.append(" {}\n")
    elif isinstance(value, list | tuple):
        out.append(" []\n")
    else:
        out.append(" " + _scalar(value) + "\n")
