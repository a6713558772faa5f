"""The file locks (`ccm.locks`): one process at a time, across processes, and the only
module that knows the platform."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ccm import locks

CCM = Path(__file__).parent.parent / "ccm"


def hold_in_child(path: Path, shared: bool = False) -> subprocess.Popen[str]:
    """A child process that takes the lock on `path`, says so, and holds it until its
    standard input closes."""
    code = textwrap.dedent(
        f"""
        import os, sys
        from ccm import locks
        fd = os.open({str(path)!r}, os.O_RDWR | os.O_CREAT)
        locks.lock(fd, shared={shared})
        print("held", flush=True)
        sys.stdin.read()
        """
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "held"
    return child


def test_an_exclusive_lock_keeps_other_processes_out(tmp_path: Path) -> None:
    path = tmp_path / "log"
    child = hold_in_child(path)
    fd = os.open(path, os.O_RDWR)
    try:
        with pytest.raises(BlockingIOError):
            locks.lock(fd, wait=False)
        with pytest.raises(BlockingIOError):
            locks.lock(fd, shared=True, wait=False)
        child.communicate(timeout=30)  # its input closed: it exits
        locks.lock(fd, wait=False)  # the holder is gone: free (also after a crash)
        locks.unlock(fd)
    finally:
        os.close(fd)


def test_shared_locks_go_together_and_keep_a_writer_out(tmp_path: Path) -> None:
    path = tmp_path / "lock"
    child = hold_in_child(path, shared=True)
    fd = os.open(path, os.O_RDONLY)
    try:
        locks.lock(fd, shared=True, wait=False)
        locks.unlock(fd)
        other = os.open(path, os.O_RDWR)
        try:
            with pytest.raises(BlockingIOError):
                locks.lock(other, wait=False)
        finally:
            os.close(other)
    finally:
        os.close(fd)
        child.communicate(timeout=30)


def test_held_locks_for_the_block_and_frees_the_file_after(tmp_path: Path) -> None:
    """`held` opens, locks, and unlocks and closes whatever the block does; a lock it
    cannot take at once is a BlockingIOError, its file closed."""
    path = tmp_path / "log"
    with pytest.raises(RuntimeError), locks.held(path) as fd:
        os.write(fd, b"x")
        with pytest.raises(BlockingIOError), locks.held(path, wait=False):
            pass  # a second open file of this process is refused too (flock)
        raise RuntimeError("the block fails")
    with pytest.raises(OSError):
        os.fstat(fd)  # closed
    child = hold_in_child(path)  # the lock was released: another process takes it
    with pytest.raises(BlockingIOError), locks.held(path, shared=True, wait=False):
        pass
    child.communicate(timeout=30)
    with locks.held(path, shared=True, wait=False, flags=os.O_RDONLY):
        assert path.read_bytes() == b"x"


def test_only_the_locks_module_knows_the_platform() -> None:
    """ccm imports on any platform: fcntl and msvcrt are imported in one place."""
    for path in sorted(CCM.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            if {"fcntl", "msvcrt"} & set(names):
                assert path.name == "locks.py", f"{path} imports {names}"


def test_the_windows_locks_type_check() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--platform", "win32", "--no-incremental", "ccm/locks.py"],
        cwd=CCM.parent,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
