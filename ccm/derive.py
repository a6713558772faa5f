"""Keeping a session's derived tiers current: incremental update and full rebuild.

The engine state is cached in ``.ccm/engine/<session>.state`` (marshal) together with how
far ``raw.jsonl`` was read (byte offset, line, inode, and a probe of the bytes at that
point) and the parameters it was built with. An update folds only the turns appended
since, then renders the tiers. A log under a new inode whose bytes the probe still finds
(a moved, copied or restored root) resumes too; a missing, stale or unreadable cache, a
truncated or replaced log, or changed parameters mean a rebuild from the first turn.
Either way the files are the same, byte for byte.
"""

from __future__ import annotations

import logging
import marshal
import os
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ccm import yamlio
from ccm.engine.fold import Params, State, fold, helpers_for, new_state
from ccm.engine.render import RenderCache, Tiers, render
from ccm.store import (
    BadLine,
    Cursor,
    Line,
    Signature,
    Store,
    atomic_write,
    probe,
    resumable,
    signature,
)

log = logging.getLogger(__name__)

FILES = (("manifest.yaml", "manifest"), ("open.yaml", "open"), ("working.yaml", "working"))


@dataclass
class Derived:
    session: str
    turns_folded: int
    rebuilt: bool
    written: list[str]
    tiers: Tiers
    state: State
    events: list[dict[str, Any]]  # the session's events, as read for this update


CACHE_FORMAT = f"marshal-{sys.version_info[0]}.{sys.version_info[1]}"


def cache_path(store: Store, session: str) -> Path:
    """The engine cache: marshal, 3x faster than JSON both ways for this plain data, and
    as safe here since ccm wrote it and a damaged or foreign one is simply rebuilt."""
    return store.cache / "engine" / f"{session}.state"


def _load_cache(store: Store, session: str, params: Params) -> tuple[State, Cursor, int] | None:
    """The cached state, where it read raw.jsonl to and the inode it then had; None
    when there is no cache this log and these parameters can resume from."""
    path = cache_path(store, session)
    raw = store.raw_path(session)
    try:
        cached = marshal.loads(path.read_bytes())
        st = raw.stat()
    except (OSError, ValueError, EOFError, TypeError):
        return None
    if not isinstance(cached, dict) or cached.get("format") != CACHE_FORMAT:
        return None
    if cached.get("key") != params.key():
        log.info("%s: engine parameters changed; rebuilding", session)
        return None
    offset = int(cached.get("offset", -1))
    if not resumable(raw, st, cached.get("inode"), offset, cached.get("probe")):
        log.warning("%s: raw.jsonl was truncated or replaced; rebuilding", session)
        return None
    state = cached.get("state")
    if not isinstance(state, dict) or state.get("session") != session:
        return None
    return state, Cursor(offset, int(cached["line"])), cached["inode"]


def behind(store: Store, session: str) -> bool:
    """Whether the session's tiers may not hold all of raw.jsonl: none were written, or
    the log changed after the engine last read it (an ingest killed between its append
    and its update, a writer that does not derive)."""
    if not (store.session_dir(session) / "manifest.yaml").exists():
        return True
    try:
        read = cache_path(store, session).stat().st_mtime_ns
    except OSError:
        return True
    return store.raw_path(session).stat().st_mtime_ns > read


def _save_cache(store: Store, session: str, params: Params, state: State, cursor: Cursor) -> None:
    raw = store.raw_path(session)
    payload = {
        "format": CACHE_FORMAT,
        "key": params.key(),
        "inode": raw.stat().st_ino if raw.exists() else None,
        "probe": probe(raw, cursor.offset),
        "offset": cursor.offset,
        "line": cursor.line,
        "state": state,
    }
    try:
        atomic_write(cache_path(store, session), marshal.dumps(payload), durable=False)
    except OSError as exc:  # a cache that cannot be written only costs time
        log.warning("cannot write the engine cache for %s: %s", session, exc)


def tiers_yaml(tiers: Tiers) -> dict[str, str]:
    """The text of each derived file."""
    return {
        "manifest.yaml": yamlio.dumps(tiers.manifest),
        "open.yaml": yamlio.dumps(tiers.open),
        "working.yaml": yamlio.dumps(tiers.working),
    }


class Engine:
    """One session's engine, kept in memory between updates.

    `update` folds only what was appended since the last call. A short-lived process
    (a CLI command) starts from the cache under ``.ccm/``; a long-lived one (the
    daemon) keeps the state in memory and may save the cache less often
    (``save=False``), since the cache can always be rebuilt from the log.
    """

    def __init__(self, store: Store, session: str) -> None:
        self.store = store
        self.session = session
        self.state: State | None = None
        self.cursor = Cursor()
        self.key = ""
        self.inode: int | None = None
        self.saved: tuple[int, int | None] | None = None  # the cache's (offset, inode)
        self.render_cache = RenderCache()
        # what the derived files held when last written or read, and the manifest's
        # segments as encoded runs: a long-lived engine compares and encodes the
        # changes only
        self.known: dict[str, tuple[Signature, bytes]] = {}
        self.runs = {"segments": yamlio.Runs()}
        # the manifest an update left for later (``later=True``), and how many segments
        # the manifest this engine last wrote held (the newer ones are checked when it
        # is written; None: the newest three)
        self.manifest_due: dict[str, Any] | None = None
        self.manifest_segments: int | None = None
        # the events, config and tiers of the last render
        self.last: tuple[list[dict[str, Any]], Any, Tiers] | None = None

    def _fresh_start(self, params: Params, rebuild: bool) -> bool:
        """Load the cache (or start empty); True when the state is built from scratch."""
        self.render_cache = RenderCache()
        cached = None if rebuild else _load_cache(self.store, self.session, params)
        if cached is None:
            self.state, self.cursor = new_state(self.session), Cursor()
            return True
        self.state, self.cursor, inode = cached
        self.saved = (self.cursor.offset, inode)
        return False

    def _standing(self, params: Params) -> str:
        """What the state in memory is worth: "current" (fold on from it), "unknown"
        (start from the cache, if it can resume: a new inode may be a moved or restored
        root, or a replaced log), or "cut" (the log is shorter than what was folded:
        start from nothing)."""
        if self.state is None or self.key != params.key():
            return "unknown"
        try:
            st = self.store.raw_path(self.session).stat()
        except FileNotFoundError:
            return "unknown"
        if st.st_size < self.cursor.offset:
            log.warning("%s: raw.jsonl was truncated; rebuilding", self.session)
            return "cut"
        return "current" if st.st_ino == self.inode else "unknown"

    def update(
        self,
        rebuild: bool = False,
        save: bool = True,
        durable: bool = True,
        later: bool = False,
        progress: Callable[[int, int], None] | None = None,
    ) -> Derived:
        """Fold what was appended, render, write the files that changed (`progress`:
        told the turns folded, of how many, as `fold` goes).

        ``durable=False`` skips the fsyncs of the derived files (still replaced
        atomically): for a process that re-renders at its next start anyway (the
        daemon), since after a power loss it rewrites whatever does not match.
        ``later=True`` leaves the manifest, the one file whose size grows with the
        session, to `write_later` (the daemon writes it once appends pause): an update
        then writes what does not grow with the session, whatever its length.
        """
        store, session = self.store, self.session
        store.require_session(session)
        config = store.config
        params = Params.from_config(config)
        rebuilt = False
        standing = "cut" if rebuild else self._standing(params)
        if standing != "current":
            rebuilt = self._fresh_start(params, standing == "cut")
        assert self.state is not None
        turns, bad, repeated, self.cursor = _read_turns(
            store, session, self.cursor, self.state["last_turn"]
        )
        if bad or repeated:
            store.quarantine(session, bad + repeated)
            for line in bad:
                log.warning("%s; kept in quarantine.jsonl and skipped", line.describe())
            for line in repeated:
                log.warning("%s", line.describe())
        fold(self.state, turns, params, helpers_for(len(turns), config.helpers), progress)
        self.key = params.key()
        raw = store.raw_path(session)
        self.inode = raw.stat().st_ino if raw.exists() else None
        events, bad_events, _ = store.read_events(session)
        for line in bad_events:
            log.warning("%s; this event is ignored", line.describe())
        if not turns and not rebuilt and self._unchanged(events, config, later):
            assert self.last is not None
            if save:
                self.save()
            return Derived(session, 0, False, [], self.last[2], self.state, events)
        self.last = None  # until the files are written
        tiers = render(self.state, events, config, self.render_cache)
        self.manifest_due = tiers.manifest if later and not rebuilt else None
        written = _write(
            store,
            session,
            tiers,
            rebuilt,
            durable,
            known=self.known,
            runs=self.runs,
            manifest=self.manifest_due is None,
            since=self.manifest_segments,
        )
        if self.manifest_due is None:
            self.manifest_segments = len(tiers.manifest["segments"])
        self.last = (events, config, tiers)
        if save or rebuilt:
            self._save(params)
        return Derived(session, len(turns), rebuilt, written, tiers, self.state, events)

    def _unchanged(self, events: list[dict[str, Any]], config: Any, later: bool) -> bool:
        """True when nothing was folded since the last render and its events and config
        are the same: the tiers are those of the last render. Its files must also be
        the ones this engine wrote (same signature), and the manifest may stay due only
        if it is due and `later`: otherwise the files are written as after a change."""
        if self.last is None or self.last[1] is not config or self.last[0] != events:
            return False
        if self.manifest_due is not None and not later:
            return False
        folder = self.store.session_dir(self.session)
        for name, _ in FILES:
            known = self.known.get(name)
            try:
                if known is None or signature(os.stat(folder / name)) != known[0]:
                    return False
            except FileNotFoundError:
                return False
        return True

    def write_later(self, durable: bool = True) -> list[str]:
        """Write the manifest the last update left for later, if it did; returns the
        names written (none when the file already holds it). A write that fails leaves
        it due."""
        manifest = self.manifest_due
        if manifest is None:
            return []
        written = _write_files(
            self.store,
            self.session,
            {"manifest.yaml": yamlio.dumps_bytes(manifest, self.runs)},
            {"manifest.yaml": _newest_segments(manifest, self.manifest_segments)},
            durable,
            self.known,
        )
        self.manifest_due = None
        self.manifest_segments = len(manifest["segments"])
        return written

    def save(self) -> None:
        """Write the engine cache now, unless it holds this state already (a long-lived
        process saves now and then, and before it exits)."""
        if self.state is not None and self.saved != (self.cursor.offset, self.inode):
            self._save(Params.from_config(self.store.config))

    def _save(self, params: Params) -> None:
        assert self.state is not None
        _save_cache(self.store, self.session, params, self.state, self.cursor)
        self.saved = (self.cursor.offset, self.inode)


# a long-lived process that keeps engines in memory (the daemon, while it answers a
# hook) puts here what brings a session up to date with them: every `update` then uses it
keeper: Callable[[Store, str], Derived] | None = None


class Keeper:
    """`update` with an engine per session kept in memory (the `size` most recently used):
    a call folds only what was appended since the last one. A long-lived process (the
    MCP server, the proxy) sets one as `keeper`; its threads may call it at once (one
    session's engine updates one call at a time).

    With `later` (seconds), an update leaves the manifest and the engine cache, the two
    writes whose cost grows with the session, to a background thread that writes them
    `later` seconds after the first update that left them (a burst of requests writes
    them once), and when an engine leaves memory or `flush` is called. The tiers an
    update returns are current either way; a process killed meanwhile loses only cache
    (the next update renders and writes them again)."""

    def __init__(self, size: int, later: float | None = None) -> None:
        self.size = size
        self.later = later
        self.engines: OrderedDict[tuple[Path, str], tuple[Engine, threading.Lock]] = OrderedDict()
        self.lock = threading.Lock()
        self.due: dict[tuple[Path, str], tuple[Engine, threading.Lock]] = {}
        self.timer: threading.Timer | None = None

    def __call__(self, store: Store, session: str) -> Derived:
        key = (store.root, session)
        with self.lock:
            kept = self.engines.pop(key, None) or (Engine(store, session), threading.Lock())
            self.engines[key] = kept
            dropped = []
            while len(self.engines) > self.size:
                dropped.append(self.engines.popitem(last=False))
        for old_key, old in dropped:
            self._write(old_key, old)
        engine, lock = kept
        if self.later is None:
            with lock:
                return engine.update(durable=False)
        with lock:
            derived = engine.update(save=False, durable=False, later=True)
        if derived.turns_folded or derived.rebuilt or engine.manifest_due is not None:
            with self.lock:
                self.due[key] = kept
                if self.timer is None:
                    self.timer = threading.Timer(self.later, self.flush)
                    self.timer.daemon = True
                    self.timer.start()
        return derived

    def held(self, store: Store, session: str) -> Derived | None:
        """What the session's last update returned, as it stands, without reading or
        folding anything; None when no engine of it is kept or it rendered nothing yet.
        Only for a caller that keeps the session's updates from running meanwhile (the
        proxy holds the session's lock)."""
        with self.lock:
            kept = self.engines.get((store.root, session))
        if kept is None:
            return None
        engine, lock = kept
        with lock:
            if engine.last is None or engine.state is None:
                return None
            events, _, tiers = engine.last
            return Derived(session, 0, False, [], tiers, engine.state, events)

    def flush(self) -> None:
        """Write every manifest and engine cache left for later now."""
        with self.lock:
            due, self.due = self.due, {}
            if self.timer is not None:
                self.timer.cancel()
            self.timer = None
        for key, kept in due.items():
            self._write(key, kept)

    def _write(self, key: tuple[Path, str], kept: tuple[Engine, threading.Lock]) -> None:
        with self.lock:
            self.due.pop(key, None)
        engine, lock = kept
        with lock:
            try:
                engine.write_later(durable=False)
                engine.save()
            except OSError as exc:  # only cache: the next update writes them again
                log.warning("%s: cannot write the manifest or engine cache: %s", key[1], exc)


def update(
    store: Store,
    session: str,
    rebuild: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> Derived:
    """Bring the session's derived files up to date with raw.jsonl and events.jsonl
    (`progress`: see `Engine.update`)."""
    if keeper is not None and not rebuild:
        return keeper(store, session)
    return Engine(store, session).update(rebuild=rebuild, progress=progress)


def folded(
    root: Store | str,
    session: str,
    rebuild: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """`update` as a task of a map (``ccm rebuild``, ``ccm ingest``; `ccm.executors`):
    what a command reports of the session, and the manifest its index is brought up to
    date with (the tiers are written where the task runs, under the session's lock, as
    by any update)."""
    from ccm.executors import store_at

    derived = update(store_at(root), session, rebuild=rebuild, progress=progress)
    manifest = derived.tiers.manifest
    return {
        "session": session,
        "turns": derived.turns_folded,
        "segments": len(manifest["segments"]),
        "open_efforts": len(derived.tiers.open["efforts"]),
        "written": derived.written,
        "manifest": manifest,
    }


def _read_turns(
    store: Store, session: str, start: Cursor, last: int
) -> tuple[list[dict[str, Any]], list[BadLine], list[BadLine], Cursor]:
    """`Store.read_turns` (the valid turns after `start`, the bad lines, the new cursor),
    with the turns whose number does not follow the one before (`last` before `start`)
    set apart as the third item.

    ccm numbers turns 1, 2, 3... under the session's lock, so a repeated or earlier
    number is a line added by hand. raw.jsonl is never rewritten: the line stays where
    it is, is kept in quarantine.jsonl with the reason, and the tiers skip it, so their
    turn numbers stay those of raw.jsonl (and a rebuild gives what the updates gave)."""
    turns: list[dict[str, Any]] = []
    bad: list[BadLine] = []
    repeated: list[tuple[Line, int]] = []
    cursor = start
    for line in store.scan_turns(session, start):
        cursor = line.cursor
        if line.bad is not None:
            bad.append(line.bad)
        elif line.record is not None:
            if line.record["turn"] <= last:
                repeated.append((line, last))
                continue
            last = line.record["turn"]
            turns.append(line.record)
    return turns, bad, _repeats(store.raw_path(session), repeated) if repeated else [], cursor


def _repeats(path: Path, lines: list[tuple[Line, int]]) -> list[BadLine]:
    """The lines whose turn number does not follow `last`, as bad lines (their bytes read
    back for the quarantine)."""
    if not lines:
        return []
    found = []
    with open(path, "rb") as handle:
        for line, last in lines:
            assert line.record is not None
            handle.seek(line.offset)
            raw = handle.read(line.end - line.offset).rstrip(b"\n").rstrip(b"\r")
            number = line.record["turn"]
            found.append(
                BadLine(
                    str(path),
                    line.number,
                    line.offset,
                    f"turn {number} repeats an earlier turn number (the turn before it is "
                    f"{last}); the line stays in raw.jsonl, is kept in quarantine.jsonl, "
                    "and is skipped",
                    raw,
                    "to keep it as a turn, append it again with the next turn number, one "
                    "more than the highest in raw.jsonl; raw.jsonl is append-only: never "
                    "edit or remove its lines",
                )
            )
    return found


def _write(
    store: Store,
    session: str,
    tiers: Tiers,
    full_check: bool = True,
    durable: bool = True,
    known: dict[str, tuple[Signature, bytes]] | None = None,
    runs: dict[str, yamlio.Runs] | None = None,
    manifest: bool = True,
    since: int | None = None,
) -> list[str]:
    """Replace each derived file whose content changed; returns the names written.

    Each document is checked against its schema before it is written; on an
    incremental update the manifest (its segments from the `since`-th, the last one it
    held when last written, and at least the newest three), open.yaml and the critical
    items of working.yaml are checked on their newest entries (older ones were checked
    when first written and change only in their values since). working.yaml is written
    first: it is what a reader waits for, and the manifest is the largest. With
    ``manifest=False`` the manifest is left as it is (the caller writes it later).
    """
    open_doc, working = tiers.open, tiers.working
    contents: dict[str, str | bytes] = {
        "working.yaml": yamlio.dumps(working),
        "open.yaml": yamlio.dumps(open_doc),
    }
    checked: dict[str, Any] = {"working.yaml": working, "open.yaml": open_doc}
    if manifest:
        contents["manifest.yaml"] = yamlio.dumps_bytes(
            tiers.manifest, runs if runs is not None else {}
        )
        checked["manifest.yaml"] = tiers.manifest
    if not full_check:
        open_doc = {
            **open_doc,
            "efforts": [{**e, "segment_refs": e["segment_refs"][-3:]} for e in open_doc["efforts"]],
        }
        checked["open.yaml"] = open_doc
        checked["working.yaml"] = {**working, "critical": working["critical"][-3:]}
        if manifest:
            checked["manifest.yaml"] = _newest_segments(tiers.manifest, since)
    return _write_files(store, session, contents, checked, durable, known)


def _newest_segments(manifest: dict[str, Any], since: int | None) -> dict[str, Any]:
    """The manifest with its segments from the `since`-th (1-based), at least the
    newest three."""
    segments = manifest["segments"]
    start = len(segments) - 3 if since is None else min(since - 1, len(segments) - 3)
    return {**manifest, "segments": segments[max(0, start) :]}


def _write_files(
    store: Store,
    session: str,
    contents: dict[str, str | bytes],
    checked: dict[str, Any],
    durable: bool,
    known: dict[str, tuple[Signature, bytes]] | None,
) -> list[str]:
    files: dict[str, tuple[str, Any, str | bytes]] = {
        name: (schema, checked[name], contents[name])
        for name, schema in reversed(FILES)
        if name in contents
    }
    return store.write_derived_files(session, files, durable=durable, known=known)
