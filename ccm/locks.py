"""Advisory file locks, the one place that knows the platform.

On POSIX a lock is ``flock`` on the file itself (shared or exclusive, released when
the descriptor closes, also by a crash). Windows has byte-range locks
(``msvcrt.locking``), which are mandatory: ccm locks one byte far past the end of any
log, so that a reader, who never locks, is never refused; there a shared lock is
exclusive. Either way a lock that cannot be taken at once raises `BlockingIOError`
when ``wait=False``.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

if sys.platform == "win32":
    import msvcrt

    _BYTE = 2**31 - 2  # the byte locked: past the end of any log
    _RETRY = 0.01  # seconds between attempts while waiting

    def _at_byte(fd: int, mode: int) -> None:
        """`msvcrt.locking` of `_BYTE`, the file's position left where it was (a
        caller may write after locking)."""
        position = os.lseek(fd, 0, os.SEEK_CUR)
        os.lseek(fd, _BYTE, os.SEEK_SET)
        try:
            msvcrt.locking(fd, mode, 1)
        finally:
            os.lseek(fd, position, os.SEEK_SET)

    def lock(fd: int, shared: bool = False, wait: bool = True) -> None:
        while True:
            try:
                _at_byte(fd, msvcrt.LK_NBLCK)
                return
            except OSError as exc:
                if not wait:
                    raise BlockingIOError(errno.EAGAIN, "the file is locked") from exc
            time.sleep(_RETRY)

    def unlock(fd: int) -> None:
        _at_byte(fd, msvcrt.LK_UNLCK)

else:
    import fcntl

    def lock(fd: int, shared: bool = False, wait: bool = True) -> None:
        """Lock the open file `fd` (blocking unless ``wait=False``)."""
        kind = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
        fcntl.flock(fd, kind if wait else kind | fcntl.LOCK_NB)

    def unlock(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_UN)


@contextlib.contextmanager
def held(
    path: Path, shared: bool = False, wait: bool = True, flags: int = os.O_RDWR | os.O_CREAT
) -> Iterator[int]:
    """`path` opened with `flags` and locked while the block runs (its descriptor);
    unlocked and closed after, whatever happens (Windows may keep a lock that a close
    alone leaves for a while). A lock that cannot be taken at once raises
    `BlockingIOError` when ``wait=False``, the file closed."""
    fd = os.open(path, flags, 0o644)
    try:
        lock(fd, shared, wait)
        try:
            yield fd
        finally:
            unlock(fd)
    finally:
        os.close(fd)
