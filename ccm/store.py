"""The store: the only code in ccm that touches the knowledge root on disk.

Layout (see DESIGN.md)::

    <root>/config.yaml
    <root>/chats/<session>/raw.jsonl          append-only, never rewritten
    <root>/chats/<session>/events.jsonl       append-only
    <root>/chats/<session>/quarantine.jsonl   input lines ccm could not accept, verbatim
    <root>/chats/<session>/*.yaml             derived, replaced atomically
    <root>/.ccm/                              caches; always safe to delete

Guarantees:

* appends take an exclusive ``flock`` on the log itself, so the daemon, several
  ``ccm ingest`` processes and CLI commands can append at once; each append is one
  ``write`` of whole lines, fsynced on request;
* a log whose last line is torn (a writer killed mid-line) is terminated before the
  next append, so the fragment stays a separate, reported line and never corrupts a
  new one;
* derived files are replaced atomically: temp file in the same folder, flush, fsync,
  ``os.replace``, fsync of the folder; the temp file is removed on error and carries
  `TEMP_MARK` in its name so that a file watcher can ignore it;
* reads are incremental from a byte offset, and a partial last line (a writer
  mid-append) is left for a later read;
* everything read is validated against ``schemas/``.
"""

from __future__ import annotations

import base64
import contextlib
import errno
import functools
import hashlib
import json
import logging
import os
import re
import secrets
import stat
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any

from ccm import locks, patterns, schemas
from ccm.config import Config
from ccm.config import load as load_config
from ccm.errors import InvalidSessionId, OutsideRoot, SchemaError, UnknownSession, UsageError
from ccm.paths import resolve_root

log = logging.getLogger(__name__)

TEMP_MARK = ".ccm-tmp"
MAX_SESSION_ID = 128
_SESSION_ID = patterns.compile(r"[A-Za-z0-9][A-Za-z0-9._~+@=-]*")
_READ_CHUNK = 1 << 20

RAW = "raw.jsonl"
EVENTS = "events.jsonl"
QUARANTINE = "quarantine.jsonl"


# ---------------------------------------------------------------------------
# names and places


def check_session_id(session_id: str) -> str:
    """Return `session_id` if it is a safe folder name, else raise `InvalidSessionId`.

    Allowed: letters, digits and ``. _ ~ + @ = -``, starting with a letter or digit,
    at most 128 characters. That rules out ``..``, path separators, control
    characters, hidden names and anything a shell or a file system treats specially.
    """
    if not isinstance(session_id, str) or not session_id:
        raise InvalidSessionId("empty session id", "give a name such as 'my-chat'")
    printable = session_id.encode("unicode_escape").decode("ascii")
    if len(session_id) > MAX_SESSION_ID:
        raise InvalidSessionId(
            f"session id is {len(session_id)} characters long",
            f"use at most {MAX_SESSION_ID}",
        )
    if not _SESSION_ID.fullmatch(session_id) or ".." in session_id:
        raise InvalidSessionId(
            f"invalid session id '{printable}'",
            "use letters, digits and . _ ~ + @ = - only, starting with a letter or digit, "
            "with no '..'",
        )
    return session_id


def slug_session_id(name: str) -> str:
    """A valid session id made from an arbitrary name (a file stem, a title)."""
    slug = re.sub(r"[^A-Za-z0-9._~+@=-]+", "-", name).strip("-._~+@=")
    slug = re.sub(r"\.{2,}", ".", slug)[:MAX_SESSION_ID].rstrip("-._~+@=")
    return slug or "session"


def is_temp_file(name: str) -> bool:
    """True for ccm's own atomic-write temp files, which watchers must ignore."""
    return TEMP_MARK in name


def utc_now() -> str:
    """Now as ISO-8601 UTC with milliseconds and a ``Z``."""
    return iso_utc(datetime.now(UTC))


def iso_utc(moment: datetime) -> str:
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


# ---------------------------------------------------------------------------
# atomic replace


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def is_inside(root: Path, path: Path) -> bool:
    """Whether `path`, every symlink followed, is `root` or under it (also followed).

    A path written under `root` whose every part below it is no link (or is not there)
    is inside whatever `root` leads to: that takes a few `lstat`s, where resolving the
    whole path takes one for each of its parts, and the store asks at every read."""
    here, written = os.fspath(root).rstrip(os.sep), os.fspath(path)
    if written == here:
        return True
    parts = written[len(here) + 1 :].split(os.sep) if written.startswith(here + os.sep) else []
    if parts and ".." not in parts:
        for part in parts:
            here += os.sep + part
            try:
                if stat.S_ISLNK(os.lstat(here).st_mode):
                    break
            except FileNotFoundError:
                return True  # nothing below is there, so nothing below is a link
        else:
            return True
    home = os.path.realpath(root)
    real = os.path.realpath(path)
    return real == home or real.startswith(home.rstrip(os.sep) + os.sep)


def confine(root: Path, path: Path) -> Path:
    """`path`, when it stays inside `root` with every symlink followed; else
    `OutsideRoot`. The knowledge root is a confinement: ccm never reads or writes
    through a link that leaves it (the root itself may be a link)."""
    if not is_inside(root, path):
        raise OutsideRoot(
            f"{path} leads out of the knowledge root {root} (to {os.path.realpath(path)})",
            "ccm reads and writes only inside its root: put the file or folder itself "
            "there in place of the link",
        )
    return path


def atomic_write(path: Path, data: bytes, durable: bool = True) -> None:
    """Replace `path` with `data` so that a reader sees the old or the new file, whole."""
    atomic_write_many(path.parent, {path.name: data}, durable)


Signature = tuple[int, int, int]  # a file's inode, size and mtime (ns)


def signature(st: os.stat_result) -> Signature:
    return (st.st_ino, st.st_size, st.st_mtime_ns)


PROBE_SPAN = 16 * 1024  # bytes read at each end (an index update takes a probe: kept small)


def probe(path: Path, offset: int) -> str:
    """A digest of the first `offset` bytes of `path` as far as a resumed reader cares:
    the offset, the first and the last `PROBE_SPAN` bytes before it. "" when the file is
    missing or shorter. Saved beside a read position, it tells a copy of the file (a
    moved or restored root: a new inode, the same bytes) from a file cut short or
    replaced."""
    digest = hashlib.blake2b(str(offset).encode(), digest_size=16)
    head_size = min(offset, PROBE_SPAN)
    tail_from = max(head_size, offset - PROBE_SPAN)
    try:
        with open(path, "rb") as handle:
            head = handle.read(head_size)
            handle.seek(tail_from)
            tail = handle.read(offset - tail_from)
    except OSError:
        return ""
    if len(head) < head_size or len(tail) < offset - tail_from:
        return ""
    digest.update(head)
    digest.update(tail)
    return digest.hexdigest()


def resumable(
    path: Path, st: os.stat_result, inode: int | None, offset: int, saved_probe: str | None
) -> bool:
    """Whether a reader that stopped at `offset` of `path` when it had `inode` may go on
    from there, `path` now being `st`: the same file, not cut short; or, with a new
    inode, a copy whose bytes up to `offset` are the ones read (its `probe` is
    `saved_probe`). Anything else (cut short, replaced, no probe) is read again whole."""
    if offset > st.st_size:
        return False
    if inode == st.st_ino:
        return True
    if saved_probe and probe(path, offset) == saved_probe:
        log.info("%s: moved or restored (a new inode, the same bytes); reading on", path)
        return True
    return False


def atomic_write_many(
    folder: Path, files: dict[str, bytes], durable: bool = True
) -> dict[str, Signature]:
    """Replace several files of one folder atomically, each on its own and in the
    order given (each as soon as it is written), with one fsync of the folder at the
    end: a reader sees each file old or new, whole. Returns each new file's signature.

    ``durable=False`` skips the fsyncs: for caches under .ccm/, which a crash may
    lose (they are rebuilt) but never tear."""
    written: dict[str, Signature] = {}
    if not files:
        return written
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        tmp = folder / f".{name}{TEMP_MARK}-{os.getpid()}-{secrets.token_hex(4)}"
        try:
            with open(tmp, "xb") as handle:
                handle.write(data)
                handle.flush()
                if durable:
                    os.fsync(handle.fileno())
                written[name] = signature(os.fstat(handle.fileno()))
            if durable or not _exchange(tmp, folder / name):
                os.replace(tmp, folder / name)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
            raise
    if durable:
        _fsync_dir(folder)
    return written


_renameat2: Any = None  # libc's renameat2 once looked up; False where there is none


def _exchange(tmp: Path, path: Path) -> bool:
    """Swap `tmp` and an existing `path` atomically (Linux ``renameat2``, RENAME_EXCHANGE),
    then delete what is now at `tmp`, the old file; False when it cannot be done here
    (no such call, a file system without it, `path` missing): the caller renames.

    For writes without fsync: on ext4 a rename over an existing file starts the
    writeback of the new one (``auto_da_alloc``), which made replacing a 1.3 MB
    manifest cost 1.3 ms against 0.35 ms for the exchange, and a 135 KB file 0.27
    against 0.07 ms. A reader sees the old file or the new one, whole, either way.
    """
    global _renameat2
    if _renameat2 is None:
        _renameat2 = False
        if sys.platform.startswith("linux"):
            import ctypes

            try:
                call = ctypes.CDLL(None, use_errno=True).renameat2
            except (OSError, AttributeError):
                return False
            call.argtypes = [
                ctypes.c_int,
                ctypes.c_char_p,
                ctypes.c_int,
                ctypes.c_char_p,
                ctypes.c_uint,
            ]
            call.restype = ctypes.c_int
            _renameat2 = call
    if not _renameat2:
        return False
    import ctypes

    here = -100  # AT_FDCWD
    if _renameat2(here, os.fsencode(tmp), here, os.fsencode(path), 2) != 0:
        code = ctypes.get_errno()
        if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
            _renameat2 = False  # the file system cannot: plain renames from now on
        if code in (errno.ENOENT, errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
            return False
        raise OSError(code, os.strerror(code), str(path))
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)
    return True


def _current(path: Path, known: tuple[Signature, bytes] | None) -> tuple[Signature, bytes] | None:
    """A file's signature and bytes (None when it is missing): the remembered bytes
    when its signature is the remembered one, else read (signature and bytes taken
    from one open file, so they always belong together). A file replaced by anyone
    has a new inode; only an edit in place that keeps the size within one tick of the
    file system's clock goes unseen, until the content next changes."""
    try:
        if known is not None and signature(os.stat(path)) == known[0]:
            return known
        with open(path, "rb") as handle:
            sig = signature(os.fstat(handle.fileno()))
            return sig, handle.read()
    except FileNotFoundError:
        return None


# ---------------------------------------------------------------------------
# JSON lines


_ASCII_ENCODER = json.JSONEncoder(ensure_ascii=True, separators=(",", ":"))
_UTF8_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
_WRITE_CHUNK = 4 * 1024 * 1024


def dumps_line(record: dict[str, Any]) -> bytes:
    """One compact JSON line, UTF-8, newline-terminated.

    Lone surrogates (which an input can carry as ``\\ud800`` escapes) cannot be UTF-8
    encoded; such a record is written with ASCII escapes instead, which reads back
    to the identical string.
    """
    ascii_text = _ASCII_ENCODER.encode(record)
    if "\\u" not in ascii_text:  # pure ASCII: the same bytes, and the fast C encoder
        return ascii_text.encode("ascii") + b"\n"
    text = _UTF8_ENCODER.encode(record)
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        data = ascii_text.encode("ascii")
    return data + b"\n"


@dataclass(frozen=True)
class Cursor:
    """How far a log has been read: bytes consumed and whole lines consumed."""

    offset: int = 0
    line: int = 0


@dataclass
class BadLine:
    """A line that is not a valid record; kept verbatim for the quarantine."""

    path: str
    line: int | None  # None: the input is not line-based (a JSON document)
    offset: int | None
    error: str
    raw: bytes
    hint: str | None = None

    def describe(self) -> str:
        return located(self.path, self.line, self.error, self.hint)


def located(source: str, line: int | None, text: str, hint: str | None) -> str:
    """ "file:line: what (what to do)": how ccm reports a place in a file or an input."""
    where = f"{source}:{line}" if line is not None else source
    return f"{where}: {text} ({hint})" if hint else f"{where}: {text}"


@dataclass
class Line:
    """One complete line of a log: its record, or why it is bad."""

    number: int
    offset: int
    end: int
    record: dict[str, Any] | None = None
    bad: BadLine | None = None

    @property
    def cursor(self) -> Cursor:
        return Cursor(self.end, self.number)


def parse_line(
    raw: bytes, path: str, number: int, offset: int, schema: str | None
) -> dict[str, Any] | BadLine:
    """Parse one JSON line (without its newline) and validate it against `schema`."""
    try:
        record = json.loads(raw.decode("utf-8"))  # bytes would let json guess UTF-16/32
    except UnicodeDecodeError as exc:
        return BadLine(path, number, offset, f"invalid UTF-8 ({exc.reason})", raw)
    except (ValueError, RecursionError) as exc:
        return BadLine(path, number, offset, f"invalid JSON ({exc})", raw)
    if not isinstance(record, dict):
        return BadLine(
            path, number, offset, f"expected a JSON object, found {type(record).__name__}", raw
        )
    if schema is not None:
        why = schemas.problem(schema, record)
        if why is not None:
            return BadLine(path, number, offset, f"does not match {schema} schema: {why}", raw)
    return record


def scan_jsonl(path: Path, start: Cursor = Cursor(), schema: str | None = None) -> Iterator[Line]:
    """Yield the complete lines of `path` after `start`; blank lines are skipped.

    A last line without its newline is a writer mid-append: it is not yielded, and
    the cursor of the last yielded line stops before it, so a later scan picks it up.
    """
    shown = str(path)
    with open(path, "rb") as handle:
        handle.seek(start.offset)
        number = start.line
        offset = start.offset
        pending = b""
        while True:
            chunk = handle.read(_READ_CHUNK)
            if not chunk:
                return
            pending += chunk
            begin = 0
            while True:
                newline = pending.find(b"\n", begin)
                if newline < 0:
                    break
                raw = pending[begin:newline]
                number += 1
                end = offset + newline + 1
                line = Line(number, offset + begin, end)
                if raw.strip():
                    parsed = parse_line(raw.rstrip(b"\r"), shown, number, line.offset, schema)
                    if isinstance(parsed, BadLine):
                        line.bad = parsed
                    else:
                        line.record = parsed
                    yield line
                begin = newline + 1
            offset += begin
            pending = pending[begin:]


def read_log(
    path: Path, start: Cursor = Cursor(), schema: str | None = None
) -> tuple[list[dict[str, Any]], list[BadLine], Cursor]:
    """The valid records of a log after `start`, its bad lines, and the new cursor
    (a missing log is an empty one)."""
    records: list[dict[str, Any]] = []
    bad: list[BadLine] = []
    cursor = start
    if path.exists():
        for line in scan_jsonl(path, start, schema):
            cursor = line.cursor
            if line.record is not None:
                records.append(line.record)
            elif line.bad is not None:
                bad.append(line.bad)
    return records, bad, cursor


# ---------------------------------------------------------------------------
# locked appends


BACK_BLOCK = 64 * 1024  # bytes first read from a file's end, doubled up to BACK_MOST
BACK_MOST = 8 * 1024 * 1024


def lines_backwards(read: Callable[[int, int], bytes], size: int) -> Iterator[tuple[int, bytes]]:
    """The lines of a file of `size` bytes, last first, each with the offset where it
    starts (its line break left off), read from the end in growing blocks with
    `read(length, offset)`. The first is what follows the last line break: empty when
    the file ends with one, else a line a writer has not finished (or a torn one)."""
    position, block, carry = size, BACK_BLOCK, b""
    while position > 0:
        step = min(block, position)
        position -= step
        chunk = read(step, position) + carry
        parts = chunk.split(b"\n")
        carry = parts.pop(0) if position > 0 else b""  # it may start in the block before
        at = position + len(chunk)
        for raw in reversed(parts):
            at -= len(raw)
            yield at, raw
            at -= 1
        block = min(block * 2, BACK_MOST)


def _quarantined(source: Any, offset: Any, line: Any, raw: Any) -> tuple[Any, ...]:
    """What tells one quarantined input from another: its place, else its bytes."""
    return (source, offset, line, raw if offset is None and line is None else None)


class LockedLog:
    """An append-only JSONL log held under an exclusive lock.

    Use as a context manager. While it is held, no other ccm process appends to the
    same log, so a reader of the tail (the last turn number, the known ids) and the
    append that follows see one consistent file.
    """

    def __init__(self, path: Path, schema: str | None = None) -> None:
        self.path = path
        self.schema = schema
        self._fd = -1
        self._held = contextlib.ExitStack()

    def __enter__(self) -> LockedLog:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        flags = os.O_RDWR | os.O_APPEND | os.O_CREAT
        self._fd = self._held.enter_context(locks.held(self.path, flags=flags))
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._held.close()
        self._fd = -1

    def size(self) -> int:
        return os.fstat(self._fd).st_size

    def lines(self, start: Cursor = Cursor()) -> Iterator[Line]:
        """Every complete line, read while the lock is held."""
        return scan_jsonl(self.path, start, self.schema)

    def last_record(self) -> dict[str, Any] | None:
        """The last valid record, read backwards from the end (cheap on big logs)."""
        for _, raw in lines_backwards(functools.partial(os.pread, self._fd), self.size()):
            if raw.strip():
                parsed = parse_line(raw, str(self.path), 0, 0, self.schema)
                if isinstance(parsed, dict):
                    return parsed
        return None

    def _ends_torn(self) -> bool:
        size = self.size()
        return size > 0 and os.pread(self._fd, 1, size - 1) != b"\n"

    def append(self, records: list[dict[str, Any]], fsync: bool = True) -> int:
        """Append whole lines; returns the bytes written.

        Lines go out in writes of up to 4 MiB that always end at a line end, so every
        line is written whole by one write (a small batch is one write), and a large
        import does not need a second copy of itself in memory.
        """
        if not records:
            return 0
        pending: list[bytes] = []
        size = 0
        total = 0
        if self._ends_torn():
            log.warning(
                "%s ends with a torn line (a writer stopped mid-line); "
                "terminating it so that it stays separate",
                self.path,
            )
            pending, size = [b"\n"], 1
        for record in records:
            line = dumps_line(record)
            if size + len(line) > _WRITE_CHUNK and pending:
                total += self._write(b"".join(pending))
                pending, size = [], 0
            pending.append(line)
            size += len(line)
        total += self._write(b"".join(pending))
        if fsync:
            os.fsync(self._fd)
        return total

    def _write(self, data: bytes) -> int:
        view = memoryview(data)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]
        return len(data)


# ---------------------------------------------------------------------------
# the store


@dataclass
class SessionStats:
    """What `ccm sessions` shows; cached under .ccm/ and updated incrementally."""

    session: str
    turns: int = 0
    tokens: int = 0
    first_ts: str | None = None
    last_ts: str | None = None
    last_turn: int = 0
    roles: dict[str, int] = field(default_factory=dict)
    bad_lines: int = 0
    source: str | None = None
    title: str | None = None
    parent: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "session": self.session,
            "turns": self.turns,
            "tokens": self.tokens,
            "first_ts": self.first_ts,
            "last_ts": self.last_ts,
            "last_turn": self.last_turn,
            "roles": dict(sorted(self.roles.items())),
            "bad_lines": self.bad_lines,
            "source": self.source,
            "title": self.title,
            "parent": self.parent,
        }


TAIL_KEPT = 256  # turns kept of each raw log read from its end (`Store.tail_turns`)
TAIL_CHECK = 4096  # bytes before the end read, compared before a log is read on from it


@dataclass(frozen=True)
class _Tail:
    """The last turns of a raw log as read, with where they end: `end`, the offset
    after its last complete line, and the bytes before it (`check`), to tell a log that
    only grew since from one written again."""

    identity: tuple[int, int]  # the file's device and inode
    stamp: tuple[int, int]  # its size and modification time when read
    end: int
    check: bytes
    turns: list[dict[str, Any]]
    whole: bool  # `turns` are all the valid turns before `end`

    @classmethod
    def read(cls, path: Path, count: int) -> _Tail:
        """The last `count` valid turns of `path`, read backwards from its end."""
        found: list[dict[str, Any]] = []
        with open(path, "rb") as handle:
            status = os.fstat(handle.fileno())
            read = functools.partial(os.pread, handle.fileno())
            lines = lines_backwards(read, status.st_size)
            end, _ = next(lines, (0, b""))  # what follows the last line break is no line yet
            for _, raw in lines:
                turn = _turn(raw, path)
                if turn is not None:
                    found.append(turn)
                    if len(found) == count:
                        break
            check = read(min(end, TAIL_CHECK), end - min(end, TAIL_CHECK))
        found.reverse()
        return cls(*_file_stamp(status), end, check, found, len(found) < count)

    def grown(self, path: Path, status: os.stat_result, count: int) -> _Tail | None:
        """This tail brought up to date with `path` (whose `status` was just read), read
        on from `end`; None when the file is another one, was written again (its last
        line read is not where it was), or `count` turns are more than kept."""
        identity, stamp = _file_stamp(status)
        if identity != self.identity or stamp[0] < self.end:
            return None
        if count > len(self.turns) and not self.whole:
            return None
        if stamp == self.stamp:
            return self
        start = self.end - len(self.check)
        with open(path, "rb") as handle:
            handle.seek(start)
            data = handle.read(stamp[0] - start)
        if data[: len(self.check)] != self.check:
            return None
        data = data[len(self.check) :]
        cut = data.rfind(b"\n")
        if cut < 0:
            return _Tail(identity, stamp, self.end, self.check, self.turns, self.whole)
        added = [turn for raw in data[:cut].split(b"\n") if (turn := _turn(raw, path))]
        turns = self.turns + added
        end = self.end + cut + 1
        check = (self.check + data[: cut + 1])[-TAIL_CHECK:]
        whole = self.whole and len(turns) <= TAIL_KEPT
        return _Tail(identity, stamp, end, check, turns[-TAIL_KEPT:], whole)


def _turn(raw: bytes, path: Path) -> dict[str, Any] | None:
    """The turn a line of a raw log holds; None for a blank or bad line."""
    parsed = parse_line(raw, str(path), 0, 0, "raw_entry") if raw.strip() else None
    return parsed if isinstance(parsed, dict) else None


def _file_stamp(status: os.stat_result) -> tuple[tuple[int, int], tuple[int, int]]:
    return (status.st_dev, status.st_ino), (status.st_size, status.st_mtime_ns)


class Store:
    """A knowledge root on disk."""

    def __init__(self, root: str | os.PathLike[str] | None = None) -> None:
        self.root = resolve_root(root)
        self._config: Config | None = None
        self._tails: dict[Path, _Tail] = {}  # the last turns read of each raw log

    # -- layout ----------------------------------------------------------
    @property
    def chats(self) -> Path:
        return self.root / "chats"

    @property
    def cache(self) -> Path:
        return self.root / ".ccm"

    @property
    def config_path(self) -> Path:
        return self.root / "config.yaml"

    @property
    def config(self) -> Config:
        if self._config is None:
            self._config = load_config(self.config_path)
        return self._config

    def init(self) -> list[Path]:
        """Create the layout (and a config.yaml of defaults); returns what was created."""
        from ccm.config import default_yaml

        created = []
        for folder in (self.root, self.chats, self.cache):
            if not folder.exists():
                folder.mkdir(parents=True)
                created.append(folder)
        if not self.config_path.exists():
            atomic_write(self.config_path, default_yaml().encode("utf-8"))
            created.append(self.config_path)
        return created

    def session_dir(self, session_id: str) -> Path:
        return confine(self.root, self.chats / check_session_id(session_id))

    def raw_path(self, session_id: str) -> Path:
        return self._session_file(session_id, RAW)

    def events_path(self, session_id: str) -> Path:
        return self._session_file(session_id, EVENTS)

    def quarantine_path(self, session_id: str) -> Path:
        return self._session_file(session_id, QUARANTINE)

    def _session_file(self, session_id: str, name: str) -> Path:
        # one resolution covers the folder and the file
        return confine(self.root, self.chats / check_session_id(session_id) / name)

    def sessions(self) -> list[str]:
        """Every session folder under chats/, sorted by name (a folder that leads out
        of the root is left out, with a warning)."""
        if not self.chats.is_dir():
            return []
        if not is_inside(self.root, self.chats):
            log.warning(
                "%s leads out of the knowledge root %s; no session read", self.chats, self.root
            )
            return []
        found = []
        for entry in self.chats.iterdir():
            if not (entry.is_dir() and _SESSION_ID.fullmatch(entry.name)):
                continue
            # inside `chats`, only a link can lead out: plain files are not resolved
            # (a third of the time `confine` takes, for the same answer)
            paths = (entry, entry / RAW, entry / EVENTS)
            try:
                for path in paths if any(p.is_symlink() for p in paths) else ():
                    confine(self.root, path)
            except OutsideRoot as exc:
                log.warning("%s; left out", exc)
                continue
            found.append(entry.name)
        return sorted(found)

    def resolve_session(self, name: str) -> str:
        """`name`, or the one session whose id starts with it (as git takes a commit
        prefix); an ambiguous prefix is an error that lists the candidates. A name
        that matches nothing comes back as it is (`require_session` says so)."""
        if (self.chats / name).is_dir() or not name:
            return name
        matches = [s for s in self.sessions() if s.startswith(name)]
        if len(matches) > 1:
            shown = ", ".join(matches[:5]) + (", ..." if len(matches) > 5 else "")
            raise UsageError(
                f"session prefix '{name}' is ambiguous: {shown}", "give more of the id"
            )
        return matches[0] if matches else name

    def require_session(self, session_id: str) -> Path:
        folder = self.session_dir(session_id)
        if not folder.is_dir():
            known = self.sessions()
            hint = "`ccm sessions` lists them" if known else "import one with `ccm ingest`"
            raise UnknownSession(f"no session '{session_id}' under {self.chats}", hint)
        return folder

    # -- raw turns ---------------------------------------------------------
    def lock_raw(self, session_id: str) -> LockedLog:
        """The session's raw log, for a read-then-append under one lock."""
        return LockedLog(self.raw_path(session_id), "raw_entry")

    def scan_turns(self, session_id: str, start: Cursor = Cursor()) -> Iterator[Line]:
        path = self.raw_path(session_id)
        if not path.exists():
            return iter(())
        return scan_jsonl(path, start, "raw_entry")

    def read_turns(
        self, session_id: str, start: Cursor = Cursor()
    ) -> tuple[list[dict[str, Any]], list[BadLine], Cursor]:
        """Valid turns after `start`, the bad lines met, and the new cursor."""
        return read_log(self.raw_path(session_id), start, "raw_entry")

    def tail_turns(self, session_id: str, count: int) -> list[dict[str, Any]]:
        """The last `count` valid turns, read backwards from the end (cheap on big logs).

        A partial last line (a writer mid-append) is not a turn yet and is skipped.
        What was read is kept (`TAIL_KEPT` turns at most): a log that only grew since is
        read from where it ended then, once its last line read is found the same.
        """
        if count <= 0:
            return []
        path = self.raw_path(session_id)
        try:
            status = os.stat(path)
        except FileNotFoundError:
            return []
        kept = self._tails.get(path)
        tail = kept.grown(path, status, count) if kept is not None else None
        if tail is None:
            tail = _Tail.read(path, max(count, TAIL_KEPT))
        self._tails[path] = tail
        return tail.turns[-count:]

    # -- events ------------------------------------------------------------
    def append_events(
        self, session_id: str, events: list[dict[str, Any]], fsync: bool = True
    ) -> list[dict[str, Any]]:
        """Append events, giving each an ``evt_N`` id and a timestamp when missing."""
        self.require_session(session_id)
        with LockedLog(self.events_path(session_id), "event") as events_log:
            last = events_log.last_record()
            number = int(str(last["id"]).removeprefix("evt_")) if last else 0
            stamped = []
            for event in events:
                number += 1
                record = {"id": f"evt_{number}", "ts": event.get("ts") or utc_now(), **event}
                record["id"] = f"evt_{number}"
                why = schemas.problem("event", record)
                if why is not None:
                    raise SchemaError(self.events_path(session_id), None, f"bad event: {why}")
                stamped.append(record)
            events_log.append(stamped, fsync=fsync)
        return stamped

    def read_events(
        self, session_id: str, start: Cursor = Cursor()
    ) -> tuple[list[dict[str, Any]], list[BadLine], Cursor]:
        """Valid events after `start`, the bad lines met, and the new cursor."""
        return read_log(self.events_path(session_id), start, "event")

    # -- quarantine --------------------------------------------------------
    def quarantine(self, session_id: str, bad_lines: list[BadLine]) -> int:
        """Keep `bad_lines` verbatim in the session's quarantine.jsonl.

        A line already quarantined (same source, same offset) is not added twice, so
        reading a damaged log again does not grow the quarantine; nor is an input that
        has no place (a message of a request, which a client sends again with every
        request) when the same source gave the same bytes.
        """
        if not bad_lines:
            return 0
        path = self.quarantine_path(session_id)
        with LockedLog(path, "quarantine") as qlog:
            seen = {
                _quarantined(r.get("source"), r.get("offset"), r.get("line"), r.get("raw"))
                for r in (line.record for line in qlog.lines())
                if r is not None
            }
            records = []
            for bad in bad_lines:
                try:
                    raw, encoding = bad.raw.decode("utf-8"), "utf-8"
                except UnicodeDecodeError:
                    raw, encoding = base64.b64encode(bad.raw).decode("ascii"), "base64"
                key = _quarantined(bad.path, bad.offset, bad.line, raw)
                if key in seen:
                    continue
                seen.add(key)
                records.append(
                    {
                        "ts": utc_now(),
                        "source": bad.path,
                        "line": bad.line,
                        "offset": bad.offset,
                        "error": bad.error,
                        "hint": bad.hint,
                        "raw": raw,
                        "encoding": encoding,
                    }
                )
            qlog.append(records, fsync=self.config.fsync)
        return len(records)

    # -- derived files -----------------------------------------------------
    def write_derived(self, session_id: str, name: str, data: Any, schema: str) -> Path:
        """Validate `data` and replace ``chats/<session>/<name>`` atomically as YAML."""
        from ccm import yamlio

        self.write_derived_files(session_id, {name: (schema, data, yamlio.dumps(data))})
        return self.session_dir(session_id) / name

    def write_derived_files(
        self,
        session_id: str,
        files: dict[str, tuple[str, Any, str | bytes]],
        durable: bool = True,
        known: dict[str, tuple[Signature, bytes]] | None = None,
    ) -> list[str]:
        """Replace the derived files whose content changed, all checked first, in the
        order given; returns the names written. `files` maps a name to (schema, data
        checked, content written): the data may be a part of the document (its newest
        entries) when the rest was checked when first written.

        `known` is a long-lived writer's memory of each file as it last saw it (its
        signature and bytes), kept up to date here: a file whose signature did not
        change since is compared with the remembered bytes instead of being read."""
        folder = self.session_dir(session_id)
        for name, (schema, data, _) in files.items():
            why = schemas.problem(schema, data)
            if why is not None:
                raise SchemaError(folder / name, None, f"refusing to write: {why}")
        changed: dict[str, bytes] = {}
        for name, (_, _, content) in files.items():
            encoded = content if isinstance(content, bytes) else content.encode("utf-8")
            current = _current(folder / name, known.get(name) if known is not None else None)
            if current is not None and current[1] == encoded:
                if known is not None:
                    known[name] = current
                continue
            changed[name] = encoded
        written = atomic_write_many(folder, changed, durable=durable)
        if known is not None:
            for name, sig in written.items():
                known[name] = (sig, changed[name])
        return list(changed)

    def read_derived(self, session_id: str, name: str, schema: str) -> Any:
        """Read a derived YAML file and validate it; a bad file is an error, not a default."""
        from ccm import yamlio

        path = self.session_dir(session_id) / name
        data = yamlio.load_file(path)
        why = schemas.problem(schema, data)
        if why is not None:
            raise SchemaError(path, None, why, "run `ccm rebuild` to regenerate it")
        return data

    # -- cached statistics -------------------------------------------------
    def session_stats(self, session_id: str) -> SessionStats:
        """Turns, tokens and activity of a session, read incrementally via .ccm/."""
        from ccm import tokens

        self.require_session(session_id)
        raw = self.raw_path(session_id)
        cache_file = self.cache / "stats" / f"{session_id}.json"
        method = tokens.method_in_use()
        stats = SessionStats(session_id)
        cursor = Cursor()
        try:
            st = raw.stat()
        except FileNotFoundError:
            return stats
        cached = read_json(cache_file)
        if (
            cached
            and cached.get("method") == method
            and isinstance(cached.get("offset"), int)
            and resumable(raw, st, cached.get("inode"), cached["offset"], cached.get("probe"))
        ):
            try:
                stats = SessionStats(**cached["stats"])
                cursor = Cursor(int(cached["offset"]), int(cached["line"]))
            except (KeyError, TypeError, ValueError):  # a damaged cache is only recounted
                stats, cursor = SessionStats(session_id), Cursor()
            if cursor.offset == st.st_size and cached.get("inode") == st.st_ino:
                return stats
        for line in self.scan_turns(session_id, cursor):
            cursor = line.cursor
            turn = line.record
            if turn is None:
                stats.bad_lines += 1
                continue
            stats.turns += 1
            stats.tokens += tokens.count_tokens(turn["content"])
            stats.first_ts = stats.first_ts or turn["ts"]
            stats.last_ts = turn["ts"]
            stats.last_turn = max(stats.last_turn, turn["turn"])
            stats.roles[turn["role"]] = stats.roles.get(turn["role"], 0) + 1
            meta = turn.get("meta") or {}
            stats.source = stats.source or turn.get("source")
            stats.title = stats.title or meta.get("title")
            stats.parent = stats.parent or meta.get("parent_session")
        payload = {
            "inode": st.st_ino,
            "probe": probe(raw, cursor.offset),
            "method": method,
            "offset": cursor.offset,
            "line": cursor.line,
            "stats": stats.as_dict(),
        }
        with contextlib.suppress(OSError):  # a cache that cannot be written is only slower
            atomic_write(cache_file, json.dumps(payload).encode("utf-8"), durable=False)
        return stats


def read_json(path: Path) -> dict[str, Any] | None:
    """The JSON object a small file under .ccm/ holds, or None when it is missing,
    unreadable or not an object (a cache that is only rebuilt)."""
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
