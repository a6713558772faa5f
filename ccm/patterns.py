"""Regular expressions compiled once per machine, not once per process.

ccm reads text with some 330 regular expressions, compiled when its modules are
imported: about 0.11 s of every command's start on a 2-core machine (a hook's, the
CLI's, a rebuild's), because `re` parses a pattern and generates its code in Python.
`compile` keeps the generated code of each pattern in a file under the user's cache
directory and, in a later process, hands it to the regular expression engine
directly (`_sre.compile`, which checks the code it is given), as Python keeps the
bytecode of a module in ``__pycache__``.

The cache is a `marshal` file named after the Python build and the regex engine's
version: another Python never reads it. Each pattern's code is checked when first
written: a pattern made from it must equal the one `re.compile` makes (a `Pattern`
compares its code). Anything unexpected (another Python's `re` internals, a damaged
or unwritable file) means `re.compile` as usual. New patterns are written at exit,
atomically; ``CCM_PATTERN_CACHE=0`` turns the cache off.
"""

from __future__ import annotations

import atexit
import hashlib
import logging
import marshal
import os
import re
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

try:  # the internals `re.compile` is made of (CPython's)
    import _sre  # type: ignore[import-not-found,unused-ignore]
    from re import _compiler, _parser  # type: ignore[attr-defined,unused-ignore]

    _ENGINE = f"{sys.implementation.cache_tag}-{_sre.MAGIC}"
except (ImportError, AttributeError):  # pragma: no cover - another Python
    _sre = _compiler = _parser = None
    _ENGINE = ""

Spec = tuple[int, list[int], int, dict[str, int], tuple[str | None, ...]]
Key = tuple[str, int]
MOST = 4000  # patterns kept in the file; past them, only those the writing process used

_lock = threading.Lock()
_specs: dict[Key, Spec] = {}  # (pattern, flags) -> what `_sre.compile` takes besides it
_derived: dict[Key, str] = {}  # (pattern, flags) -> a pattern written from it (`derived`)
_new: dict[Key, re.Pattern[str]] = {}  # compiled here, not yet in the file
_new_derived: dict[Key, str] = {}
_used: set[Key] = set()  # read from the file and used here
_loaded = False
_failed = False  # the internals did not behave as expected: plain `re.compile` from now on


def enabled() -> bool:
    return bool(_ENGINE) and os.environ.get("CCM_PATTERN_CACHE", "1") != "0"


def cache_path() -> Path:
    """The cache file of this Python: under ``$XDG_CACHE_HOME/ccm`` (``~/.cache/ccm``)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    build = hashlib.sha256(sys.version.encode()).hexdigest()[:12]
    return Path(base) / "ccm" / f"patterns-{_ENGINE}-{build}.marshal"


def _load() -> None:
    global _loaded
    _loaded = True
    if not enabled():
        return
    try:
        data = marshal.loads(cache_path().read_bytes())
        specs, derived = data["specs"], data["derived"]
        if isinstance(specs, dict) and isinstance(derived, dict):
            _specs.update(specs)
            _derived.update(derived)
    except FileNotFoundError:
        pass
    except Exception as exc:  # damaged, or written by something else: compiled anew
        log.debug("pattern cache unreadable (%s); compiling", exc)
    atexit.register(save)


def _ready() -> None:
    """The file read, once a process (by the first caller)."""
    if not _loaded:
        with _lock:
            if not _loaded:
                _load()


def compile(pattern: str, flags: int = 0) -> re.Pattern[str]:
    """`re.compile(pattern, flags)`, from the code cached for it when there is some."""
    flags = int(flags)
    _ready()
    if _failed or not enabled():
        return re.compile(pattern, flags)
    key = (pattern, flags)
    spec = _specs.get(key)
    if spec is not None:
        try:
            built: re.Pattern[str] = _sre.compile(pattern, *spec)
            _used.add(key)
            return built
        except Exception:  # a spec this engine refuses: compiled as usual, and kept again
            _specs.pop(key, None)
    compiled = re.compile(pattern, flags)
    _new[key] = compiled
    return compiled


def derived(pattern: str, flags: int, make: Callable[[], str]) -> str:
    """The pattern `make` writes from `pattern` (a longer one that runs faster, say),
    cached as the compiled code is: `make` parses, which costs as much as compiling."""
    _ready()
    key = (pattern, int(flags))
    found = _derived.get(key)
    if found is None:
        found = make()
        if enabled():
            _new_derived[key] = found
    else:
        _used.add(key)
    return found


def _spec(pattern: str, flags: int) -> Spec:
    """What `_sre.compile` is given for `pattern` (as `re._compiler.compile` makes it)."""
    parsed = _parser.parse(pattern, flags)
    code = [int(op) for op in _compiler._code(parsed, flags)]  # (opcodes are int subclasses)
    groupindex = dict(parsed.state.groupdict)
    indexgroup: list[str | None] = [None] * parsed.state.groups
    for name, index in groupindex.items():
        indexgroup[index] = name
    return (
        flags | parsed.state.flags,
        code,
        parsed.state.groups - 1,
        groupindex,
        tuple(indexgroup),
    )


def save() -> None:
    """Write the patterns compiled here that the file lacks (at exit), atomically."""
    global _failed
    if not (_new or _new_derived) or _failed or not enabled():
        return
    with _lock:
        new, new_derived = dict(_new), dict(_new_derived)
        _new.clear()
        _new_derived.clear()
    for (pattern, flags), compiled in new.items():
        try:
            spec = _spec(pattern, flags)
            if _sre.compile(pattern, *spec) != compiled:
                raise ValueError(f"code for {pattern[:40]!r} differs from re.compile's")
        except Exception as exc:  # another `re`: no cache in this process
            log.debug("pattern cache off: %s", exc)
            _failed = True
            return
        _specs[(pattern, flags)] = spec
        _used.add((pattern, flags))
    _derived.update(new_derived)
    _used.update(new_derived)
    if len(_specs) > MOST:  # patterns of older versions of ccm: dropped
        for kept in (_specs, _derived):
            for key in [key for key in kept if key not in _used]:
                del kept[key]
    _write({"specs": _specs, "derived": _derived})


def _write(data: dict[str, Any]) -> None:
    """The file replaced atomically (`store.atomic_write`, no fsync: a cache); a file
    that cannot be written costs only the time it would have saved."""
    from ccm.store import atomic_write  # (here: the store compiles its patterns with this)

    try:
        path = cache_path()
        if path.exists() and not path.is_file():
            raise OSError(f"{path} is not a file")
        atomic_write(path, marshal.dumps(data), durable=False)
    except (OSError, ValueError, RuntimeError) as exc:  # a read-only or no home, a full disk
        log.debug("pattern cache not written (%s)", exc)
