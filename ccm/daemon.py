"""``ccm watch``: keep every session's tiers and the index current as the logs grow.

One daemon per knowledge root. A watchdog observer (inotify on Linux, FSEvents on
macOS) reports changes under ``chats/``; only ``raw.jsonl``, ``events.jsonl`` and session
folders matter, ccm's own atomic-write temp files and derived files are ignored. Events
are debounced and batched: the sessions touched in a short window are updated once
each, in name order.

An update is the engine's incremental path (`ccm.derive.Engine`, kept in memory per
session, least recently used ones saved and dropped past `MAX_ENGINES`) and the index's
(`ccm.index.Index.update`): its cost is that of the new lines. ``working.yaml`` and
``open.yaml`` come first: while appends keep arriving, the manifest (the one derived
file whose size grows with the session: rewriting it costs its length) and the index
wait until they pause (`INDEX_IDLE_SECONDS`) or until they are `INDEX_LAG_SECONDS`
behind, then take all that came in one write and one update. Readers lose nothing by
it: a CLI command or a recall brings the files and the index up to date itself. Where
each file was read to is kept under ``.ccm/`` (the engine cache, the index's progress
table), so a restarted daemon resumes where it stopped; at start it catches up on every
session.
A log truncated or replaced is detected (inode, size) and that session rebuilt. A crash
at any instant loses nothing: the logs are only read, derived files are replaced
atomically, and the caches are snapshots of a consistent past point that the next start
folds forward from.

Files under ``.ccm/``: ``daemon.lock`` (held with flock while the daemon runs; holds
its pid) and ``daemon.json`` (its status, rewritten after every batch).
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import queue
import socket
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ccm import derive, locks
from ccm.errors import CCMError
from ccm.index import Index
from ccm.paths import socket_path
from ccm.store import EVENTS, RAW, Store, atomic_write, is_temp_file, utc_now

log = logging.getLogger("ccm.watch")

DEBOUNCE_SECONDS = 0.0  # a burst gathers while the daemon works
INDEX_IDLE_SECONDS = 0.01  # the index is brought up to date once appends pause this long
INDEX_LAG_SECONDS = 1.0  # or at the latest this long after it fell behind
SAVE_EVERY_SECONDS = 30.0
MAX_ENGINES = 64
WAKE = ""  # put in the queue of changed sessions when a request waits
REQUEST_BYTES = 16 * 1024 * 1024  # a hook's input (its prompt) is far smaller
RUN_SECONDS = 60.0  # how long a connection waits for a request that started
LOCK_NAME = "daemon.lock"
STATUS_NAME = "daemon.json"


class AlreadyRunning(CCMError):
    """Another daemon holds this root's lock."""


class RootLock:
    """The root's daemon lock: an flock on ``.ccm/daemon.lock``, which holds the pid.

    The kernel releases an flock when its process dies, however it dies, so a stale
    lock file never blocks a new daemon.
    """

    def __init__(self, store: Store) -> None:
        self.path = store.cache / LOCK_NAME
        self._fd: int | None = None

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            locks.lock(fd, wait=False)  # held until release (or the process ends)
        except BlockingIOError as exc:
            os.close(fd)
            pid = holder(self.path)
            raise AlreadyRunning(
                f"another ccm watch (pid {pid or 'unknown'}) is running for {self.path.parent.parent}",
                "stop it first (kill -TERM PID), or use it: `ccm status` shows what it does",
            ) from exc
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, 0)
            os.close(self._fd)
            self._fd = None


def holder(path: Path) -> int | None:
    """The pid written in a lock file, or None."""
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def running(store: Store) -> int | None:
    """The pid of the daemon holding this root's lock, or None when none runs."""
    path = store.cache / LOCK_NAME
    try:
        with locks.held(path, shared=True, wait=False, flags=os.O_RDONLY):
            return None
    except FileNotFoundError:
        return None
    except BlockingIOError:
        return holder(path) or -1  # held: a daemon runs (pid unknown if not yet written)


def session_of(root: Path, path: str) -> str | None:
    """The session a changed path belongs to, when the change matters to the daemon."""
    try:
        relative = Path(path).relative_to(root / "chats")
    except ValueError:
        return None
    parts = relative.parts
    if not parts or is_temp_file(parts[-1]):
        return None
    if len(parts) == 1:
        return parts[0]  # a session folder created, moved or deleted
    if len(parts) == 2 and parts[1] in (RAW, EVENTS):
        return parts[0]
    return None


def unpaired_moves() -> None:
    """Let watchdog pass each move event on at once instead of holding it to pair it.

    On Linux, watchdog holds every IN_MOVED_FROM for half a second to pair it with its
    IN_MOVED_TO, and its queue sleeps that whole time even when the pair comes at once
    (the sleeping reader is not woken): each atomic write under ``chats/`` (the daemon's
    own working.yaml, an editor's save) could hold the next append back by 0.5 s. The
    daemon needs no pairs, since any event only names a session to look at again, so
    it sets the wait to zero; an unpaired move arrives as a deletion and a creation.
    """
    try:
        from watchdog.observers import inotify_move_event_grouper as module

        grouper: Any = module.InotifyMoveEventGrouper
    except ImportError:  # watchdog < 6 names it InotifyBuffer; other systems have none
        try:
            from watchdog.observers import inotify_buffer as older  # type: ignore[attr-defined]

            grouper = older.InotifyBuffer
        except ImportError:
            return
    grouper.delay = 0.0


def event_kinds() -> list[Any]:
    """The kinds of change the daemon is told of: those that can change a log or a
    session folder. An append is a modification (reported at each write); a log or
    folder replaced is a creation, move or deletion. Opens and closes are left out:
    every read of a file under ``chats/`` (the daemon's own, a reader polling
    working.yaml) would be two events more, handled in Python by the observer's
    threads while the daemon works."""
    from watchdog import events

    return [
        events.FileModifiedEvent,
        events.FileCreatedEvent,
        events.FileMovedEvent,
        events.FileDeletedEvent,
        events.DirCreatedEvent,
        events.DirMovedEvent,
        events.DirDeletedEvent,
    ]


class Request:
    """What a hook asked over the socket, and its answer. Run once at most: whichever
    of the daemon (taking it up) and the connection (giving up at its deadline)
    `claim`s it first decides."""

    def __init__(self, body: dict[str, Any]) -> None:
        self.body = body
        self.started = threading.Event()
        self.done = threading.Event()
        self.answer: dict[str, Any] | None = None
        self._claimed = threading.Lock()

    def claim(self) -> bool:
        return self._claimed.acquire(blocking=False)


def _line(data: dict[str, Any]) -> bytes:
    return json.dumps(data, ensure_ascii=False).encode("utf-8") + b"\n"


class Daemon:
    """Watches a root and keeps its sessions current; `run` until `stop`."""

    def __init__(
        self,
        store: Store,
        debounce: float = DEBOUNCE_SECONDS,
        save_every: float = SAVE_EVERY_SECONDS,
    ) -> None:
        self.store = store
        self.debounce = debounce
        self.save_every = save_every
        self.index = Index(store)
        self.engines: OrderedDict[str, derive.Engine] = OrderedDict()
        self.unsaved: set[str] = set()
        self.pending: queue.Queue[str] = queue.Queue()
        self.stopping = threading.Event()
        self.started = utc_now()
        self.batches = 0
        self.updates = 0
        self.last_batch: str | None = None
        self.last_error: str | None = None
        self.offsets: dict[str, int] = {}
        # sessions whose manifest and index update wait (see `index_later`), with their
        # manifest
        self.index_due: dict[str, dict[str, Any]] = {}
        self.index_since = 0.0
        self.index_later = False  # set while following changes, never for a catch-up
        # what hooks ask over the socket, answered between batches (`answer_requests`)
        self.requests: queue.Queue[Request] = queue.Queue()
        self.listener: socket.socket | None = None
        self.answered = 0

    # -- one session -----------------------------------------------------------
    def update(self, session: str) -> derive.Derived | None:
        """Bring one session up to date; None when it is gone (its state is dropped)."""
        store = self.store
        try:
            folder = store.session_dir(session)
        except CCMError:
            return None  # not a valid session id: some other folder
        if not (folder / RAW).exists():
            if session in self.engines or session in self.offsets:
                log.info("%s: session removed", session)
                self.engines.pop(session, None)
                self.unsaved.discard(session)
                self.offsets.pop(session, None)
                self.index_due.pop(session, None)
                if not folder.exists():
                    self.index.drop(session)
            return None
        engine = self.engines.get(session)
        if engine is None:
            engine = derive.Engine(store, session)
            self.engines[session] = engine
        self.engines.move_to_end(session)
        # not durable: the catch-up at start heals
        derived = engine.update(save=False, durable=False, later=self.index_later)
        if self.index_later:
            if not self.index_due:
                self.index_since = time.monotonic()
            self.index_due[session] = derived.tiers.manifest
        else:
            self.index.update(session, derived.tiers.manifest)
        self.offsets[session] = engine.cursor.offset
        self.updates += 1
        if derived.turns_folded or derived.rebuilt or derived.written:
            self.unsaved.add(session)
            log.debug(
                "%s: %d new turns%s, wrote %s",
                session,
                derived.turns_folded,
                " (rebuilt)" if derived.rebuilt else "",
                ", ".join(derived.written) or "nothing",
            )
        while len(self.engines) > MAX_ENGINES:
            old, dropped = next(iter(self.engines.items()))
            dropped.write_later(durable=False)
            self._save(old)
            self.engines.pop(old)
        return derived

    def _save(self, session: str) -> None:
        engine = self.engines.get(session)
        if engine is not None and session in self.unsaved:
            engine.save()
        self.unsaved.discard(session)

    def save_all(self) -> None:
        for session in list(self.unsaved):
            self._save(session)

    # -- batches ---------------------------------------------------------------
    def catch_up(self) -> list[str]:
        """Update every session (what changed while no daemon ran); returns them. A
        session whose folder went away meanwhile leaves the index."""
        present = self.store.sessions()
        for session in set(self.index.sessions()) - set(present):
            log.info("%s: session removed", session)
            self.index.drop(session)
        done = []
        for session in present:
            if self.stopping.is_set():
                break
            if self._guarded(session):
                done.append(session)
        self._status()
        return done

    def _guarded(self, session: str, work: Callable[[], bool] | None = None) -> bool:
        """`update` (or `work` for that session), logging a failure instead of stopping
        the daemon."""
        try:
            return work() if work is not None else self.update(session) is not None
        except CCMError as exc:
            self.last_error = f"{session}: {exc}"
            log.error("%s: %s", session, exc)
        except OSError as exc:
            self.last_error = f"{session}: {exc}"
            log.error("%s: %s (will retry on the next change)", session, exc)
        return False

    def index_pending(self) -> None:
        """Write the manifests and bring the index up to date for the sessions whose
        update waited."""
        due, self.index_due = self.index_due, {}
        for session, manifest in sorted(due.items()):
            self._guarded(session, functools.partial(self._index, session, manifest))

    def _index(self, session: str, manifest: dict[str, Any]) -> bool:
        engine = self.engines.get(session)
        if engine is not None:
            engine.write_later(durable=False)
        self.index.update(session, manifest)
        return True

    def _index_timeout(self) -> float | None:
        """How long to wait for the next change: not past the moment the index is due."""
        if not self.index_due:
            return None
        lag = INDEX_LAG_SECONDS - (time.monotonic() - self.index_since)
        return max(0.0, min(INDEX_IDLE_SECONDS, lag))

    def batches_from_queue(self, timeout: float = 1.0) -> Iterator[set[str]]:
        """Debounced batches: after a first event, everything that arrives within the
        debounce window joins it (and whatever queued up during the last batch: a burst
        of appends is gathered while the daemon works, not by waiting longer)."""
        while not self.stopping.is_set():
            wait = self._index_timeout()
            try:
                first = self.pending.get(timeout=timeout if wait is None else wait)
            except queue.Empty:
                yield set()
                continue
            batch = {first}
            with contextlib.suppress(queue.Empty):
                while True:  # what queued up meanwhile joins, even with no debounce
                    batch.add(self.pending.get_nowait())
            deadline = time.monotonic() + self.debounce
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                try:
                    batch.add(self.pending.get(timeout=left))
                except queue.Empty:
                    break
            yield batch

    def run(self, follow: bool = True) -> None:
        """Catch up, then (with `follow`) follow changes until `stop` (SIGTERM/SIGINT via
        the CLI); caches are saved and the status written on the way out."""
        observer = self._observer() if follow else None
        if follow:
            self._listen()
        try:
            from ccm import tokens

            tokens.count_tokens("load the tokenizer now, not at the first update")
            if follow:
                log.info("watching %s", self.store.chats)
            caught = self.catch_up()
            log.info("caught up on %d sessions", len(caught))
            if not follow:
                return
            last_save = time.monotonic()
            self.index_later = True
            for batch in self.batches_from_queue():
                woken = WAKE in batch
                batch.discard(WAKE)
                for session in sorted(batch):
                    self._guarded(session)
                if woken or not self.requests.empty():
                    self.answer_requests()
                if batch:
                    self.batches += 1
                    self.last_batch = utc_now()
                    self._status()
                if self._index_timeout() == 0.0 or (self.index_due and not batch):
                    self.index_pending()  # appends paused, or too far behind
                    self._status()
                if time.monotonic() - last_save >= self.save_every:
                    self.save_all()
                    last_save = time.monotonic()
        finally:
            self._close_listener()
            if observer is not None:
                observer.stop()
                observer.join(timeout=5)
            self.index_later = False
            self.index_pending()
            self.save_all()
            self._status(stopped=True)
            self.index.close()
            if follow:
                log.info("stopped")

    def stop(self) -> None:
        self.stopping.set()

    def _observer(self) -> Any:
        from watchdog.events import FileSystemEvent, FileSystemEventHandler
        from watchdog.observers import Observer

        root = self.store.root
        pending = self.pending

        class Handler(FileSystemEventHandler):
            def on_any_event(self, event: FileSystemEvent) -> None:
                if event.event_type in ("opened", "closed_no_write"):
                    return
                if event.is_directory and event.event_type == "modified":
                    return  # a file changed inside: its own event says which
                for path in (event.src_path, getattr(event, "dest_path", "")):
                    if path:
                        session = session_of(root, os.fsdecode(path))
                        if session is not None:
                            pending.put(session)

        self.store.chats.mkdir(parents=True, exist_ok=True)
        unpaired_moves()
        observer = Observer()
        observer.schedule(
            Handler(), str(self.store.chats), recursive=True, event_filter=event_kinds()
        )
        observer.start()
        return observer

    # -- requests ----------------------------------------------------------------
    def _listen(self) -> None:
        """Answer on the root's Unix socket (`ccm.paths.socket_path`): a hook asks here
        first, and the daemon, with every engine in memory and the tokenizer loaded,
        answers in a fraction of the time a process of its own would take. The daemon
        holds the root's lock, so a socket file left there is stale."""
        path = socket_path(self.store.root)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            listener.bind(str(path))
            os.chmod(path, 0o600)  # the root's owner only
            listener.listen(16)
            listener.settimeout(0.5)
        except OSError as exc:  # hooks then work in their own process
            log.warning("cannot listen on %s: %s", path, exc)
            return
        self.listener = listener
        threading.Thread(target=self._accept, name="ccm-socket", daemon=True).start()

    def _close_listener(self) -> None:
        listener, self.listener = self.listener, None
        if listener is not None:
            listener.close()
            with contextlib.suppress(OSError):
                socket_path(self.store.root).unlink()

    def _accept(self) -> None:
        while not self.stopping.is_set() and self.listener is not None:
            try:
                connection, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return  # closed
            threading.Thread(target=self._converse, args=(connection,), daemon=True).start()

    def _converse(self, connection: socket.socket) -> None:
        """One request: a JSON line in; ``{"state": "running"}`` once the daemon takes it
        up, then the answer, each a JSON line. A request not taken up by its deadline is
        answered "expired" and never run: the asker then works on its own."""
        with connection:
            try:
                connection.settimeout(5.0)
                body = json.loads(connection.makefile("rb").readline(REQUEST_BYTES))
                if not isinstance(body, dict):
                    raise ValueError("a request is a JSON object")
                request = Request(body)
                self.requests.put(request)
                self.pending.put(WAKE)
                wait = float(body.get("deadline", 0)) - time.time()
                if not request.started.wait(max(0.0, wait)) and request.claim():
                    connection.sendall(_line({"ok": False, "error": "expired"}))
                    return
                connection.sendall(_line({"state": "running"}))
                request.done.wait(RUN_SECONDS)
                connection.sendall(_line(request.answer or {"ok": False, "error": "no answer"}))
            except (OSError, ValueError) as exc:
                log.debug("request: %s", exc)

    def answer_requests(self) -> None:
        """Answer what hooks asked, here in the thread that owns the engines and the
        index: `ccm.derive.update` then uses the daemon's engines."""
        from ccm import hook

        while True:
            try:
                request = self.requests.get_nowait()
            except queue.Empty:
                return
            if not request.claim():
                continue  # expired
            request.started.set()
            derive.keeper = self._kept
            try:
                if request.body.get("op") != "hook":
                    raise ValueError(f"unknown request {request.body.get('op')!r}")
                output = hook.respond(
                    self.store, str(request.body.get("event")), str(request.body.get("input"))
                )
                request.answer = {"ok": True, "output": output}
                self.answered += 1
                self._status()
            except Exception as exc:  # an answer that failed must not stop the daemon
                log.error("request failed: %s", exc)
                request.answer = {"ok": False, "error": str(exc)}
            finally:
                derive.keeper = None
                request.done.set()

    def _kept(self, store: Store, session: str) -> derive.Derived:
        """`ccm.derive.update` with the daemon's own engine for `session`."""
        derived = self.update(session) if store is self.store else None
        return derived or derive.Engine(store, session).update()

    # -- status ----------------------------------------------------------------
    def _status(self, stopped: bool = False) -> None:
        status = {
            "pid": os.getpid(),
            "root": str(self.store.root),
            "started": self.started,
            "stopped": utc_now() if stopped else None,
            "batches": self.batches,
            "updates": self.updates,
            "last_batch": self.last_batch,
            "last_error": self.last_error,
            "offsets": dict(sorted(self.offsets.items())),
            "answered": self.answered,  # hooks answered over the socket
            # sessions whose manifest.yaml and index wait for the appends to pause
            "waiting": sorted(self.index_due),
        }
        with contextlib.suppress(OSError):
            atomic_write(
                self.store.cache / STATUS_NAME,
                (json.dumps(status, indent=1) + "\n").encode(),
                durable=False,
            )


def status(store: Store) -> dict[str, Any]:
    """Whether a daemon runs for the root, and how far behind the logs it is."""
    pid = running(store)
    try:
        recorded = json.loads((store.cache / STATUS_NAME).read_text())
    except (OSError, ValueError):
        recorded = {}
    offsets = recorded.get("offsets") or {}
    sessions = []
    for session in store.sessions():
        try:
            size = store.raw_path(session).stat().st_size
        except FileNotFoundError:
            continue
        done = int(offsets.get(session, 0))
        sessions.append({"session": session, "bytes": size, "behind": max(0, size - done)})
    return {
        "running": pid is not None,
        "pid": pid if pid and pid > 0 else None,
        "started": recorded.get("started") if pid else None,
        "last_batch": recorded.get("last_batch"),
        "last_error": recorded.get("last_error"),
        "behind_bytes": sum(s["behind"] for s in sessions),
        "sessions_behind": [s["session"] for s in sessions if s["behind"]],
        "sessions_waiting": list(recorded.get("waiting") or []) if pid else [],
        "sessions": len(sessions),
    }
