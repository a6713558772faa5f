"""The sleep jobs' reads and writes of the knowledge root, through the store's atomic writer.

Notes, the network files and reports are replaced whole (temp file, fsync, rename);
the job's memory of what it did last time lives in ``.ccm/sleep.state``, a cache: when
it is lost or damaged the next run starts over from the sessions and the notes on disk,
and still never replaces a note a person edited (each note carries its own hash).
"""

from __future__ import annotations

import contextlib
import logging
import marshal
import os
import re
import sys
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ccm import locks, patterns
from ccm.errors import CCMError
from ccm.store import (
    EVENTS,
    RAW,
    Store,
    atomic_write,
    atomic_write_many,
    confine,
    is_temp_file,
    probe,
)

log = logging.getLogger(__name__)

STATE_NAME = "sleep.state"
STATE_FORMAT = f"5-marshal-{sys.version_info[0]}.{sys.version_info[1]}"  # raise 5 when notes
# render differently; marshal's format changes with Python's version
_ID_LINE = patterns.compile(r"^id: *\"?([^\"\n]+?)\"? *$", re.MULTILINE)


LOCK_NAME = "sleep.lock"


@contextlib.contextmanager
def run_lock(store: Store) -> Iterator[None]:
    """One consolidation at a time per root (cron and a person may start one together)."""
    store.cache.mkdir(parents=True, exist_ok=True)
    path = store.cache / LOCK_NAME
    with contextlib.ExitStack() as stack:
        try:  # only the lock's refusal: what the run raises is its own
            stack.enter_context(locks.held(path, wait=False))
        except BlockingIOError as exc:
            raise CCMError(
                f"another ccm consolidate is running on {store.root} (it holds {path})",
                "wait for it to finish",
            ) from exc
        yield


def state_path(store: Store) -> Path:
    return store.cache / STATE_NAME


def load_state(store: Store) -> dict[str, Any]:
    """What the last run recorded, or an empty state (the first run, or a lost cache).

    The state is a cache ccm alone writes, in marshal: several times faster than JSON
    both ways for this plain data, which a nightly run after a small change reads and
    writes whole. A damaged or foreign one is simply rebuilt."""
    path = state_path(store)
    try:
        data = marshal.loads(path.read_bytes())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError, EOFError, TypeError) as exc:
        log.warning("%s is unreadable (%s); consolidating every session again", path, exc)
        return {}
    if not isinstance(data, dict) or data.get("format") != STATE_FORMAT:
        log.info("%s is from another version of ccm; consolidating every session again", path)
        return {}
    return data


def save_state(store: Store, state: dict[str, Any]) -> None:
    atomic_write(state_path(store), marshal.dumps(state))
    with contextlib.suppress(FileNotFoundError):
        (store.cache / "sleep.json").unlink()  # the JSON state of earlier versions


def stat_signature(path: Path) -> list[int]:
    """Size, mtime and inode of a file ([0, 0, 0] when missing): a file ccm wrote and
    nobody touched since has the signature recorded when it was written."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return [0, 0, 0]
    return [st.st_size, st.st_mtime_ns, st.st_ino]


def signature(store: Store, session: str) -> list[int]:
    """What changes when a session's sources change: size, mtime and inode of
    raw.jsonl and events.jsonl (0 for a missing file)."""
    folder = store.session_dir(session)
    return stat_signature(folder / RAW) + stat_signature(folder / EVENTS)


def probes(store: Store, session: str, sig: list[int]) -> list[str]:
    """The `store.probe` of raw.jsonl and events.jsonl at the sizes in `sig`."""
    folder = store.session_dir(session)
    return [probe(folder / RAW, sig[0]), probe(folder / EVENTS, sig[3])]


def same_sources(store: Store, session: str, entry: dict[str, Any], sig: list[int]) -> bool:
    """Whether a session's sources are the ones `entry` (of the sleep state) was read
    from: the same signature, or the same sizes and bytes under new inodes and times
    (a moved or restored root)."""
    old = entry.get("signature")
    if old == sig:
        return True
    if not isinstance(old, list) or len(old) != len(sig) or old[0::3] != sig[0::3]:
        return False
    return bool(entry.get("probes")) and entry["probes"] == probes(store, session, sig)


def read_text(root: Path, relative: str) -> str | None:
    """A note's text, or None when there is no such file."""
    try:
        return (root / relative).read_text(encoding="utf-8", errors="surrogateescape")
    except FileNotFoundError:
        return None


def exists(root: Path, relative: str) -> bool:
    return os.path.isfile(os.path.join(root, relative))


def owner(root: Path, relative: str) -> str | None:
    """The id in the frontmatter of the note at `relative` (a vault path without .md):
    None when there is no such note, "" when it has no id (a person's own note)."""
    text = read_text(root, relative + ".md")
    return None if text is None else note_id(text)


def note_id(text: str) -> str:
    """The id in a note's frontmatter, "" when it has none."""
    head = text[: text.find("\n---", 3) + 1] if text.startswith("---\n") else ""
    found = _ID_LINE.search(head)
    return found.group(1) if found else ""


def scan_artifacts(root: Path) -> dict[str, str]:
    """Node id -> vault path of every artifact on disk (when the cache is lost)."""
    found: dict[str, str] = {}
    folder = root / "artifacts"
    if not folder.is_dir():
        return found
    for path in sorted(folder.glob("*/*.md")):
        if is_temp_file(path.name):
            continue
        relative = path.relative_to(root).as_posix()[: -len(".md")]
        node_id = owner(root, relative)
        if node_id:
            found.setdefault(node_id, relative)
    return found


def write_files(root: Path, files: dict[str, bytes]) -> None:
    """Replace each file (paths relative to `root`) atomically, one fsync per folder."""
    by_folder: defaultdict[Path, dict[str, bytes]] = defaultdict(dict)
    for relative, data in files.items():
        path = root / relative
        by_folder[path.parent][path.name] = data
    for folder in sorted(by_folder):
        atomic_write_many(confine(root, folder), by_folder[folder])


def read_bytes(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def is_empty_dir(folder: Path) -> bool:
    return not folder.exists() or (folder.is_dir() and not any(folder.iterdir()))


def remove(folder: Path, relatives: list[str]) -> None:
    """Delete files a previous export or consolidation wrote (never anything else)."""
    for relative in relatives:
        parts = Path(relative).parts
        if not parts or Path(relative).is_absolute() or ".." in parts:
            continue  # a marker someone edited: never delete outside the export
        path = folder / relative
        try:
            path.unlink()
        except FileNotFoundError:
            continue
        parent = path.parent
        while parent != folder and not any(parent.iterdir()):
            parent.rmdir()
            parent = parent.parent
