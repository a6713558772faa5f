"""Where the per-session work of a long command runs: here, in a pool of processes, or
on a Dask cluster.

``ccm consolidate``, ``ccm rebuild`` and ``ccm ingest`` of many inputs each split into a
map, one task per session (or input), whose results the command then reduces and writes
itself. `run_map` runs that map:

* ``local``: one after the other, in this process (the default; what a person's root
  needs);
* ``processes``: a pool of worker processes on this machine (`--workers`, else one per
  core);
* ``dask``: a Dask cluster (the ``ccm[dask]`` extra): the one at ``--scheduler ADDRESS``
  (``tcp://host:8786``), else a `distributed.LocalCluster` of `--workers` processes
  started for the run. Dask retries a task whose worker died; a task that fails raises
  its error here.

A task is a module-level function and its arguments (both sent to the worker by
pickling) and reads the knowledge root by its path: a worker needs the same ccm version
and the root on storage it sees (a shared file system). Results come back in the order
of the inputs, whatever order the tasks finish in, so a command's output does not depend
on where its map ran.

Only this module imports Dask, and only when the ``dask`` executor is asked for.
"""

from __future__ import annotations

import functools
import importlib
import logging
import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any, TypeVar

from ccm.errors import UsageError
from ccm.store import Store

EXECUTORS = ("local", "processes", "dask")
DASK_HINT = "pip install 'ccm[dask]' (dask[distributed]) on this machine and on every worker"

T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True)
class Executor:
    """How a map runs: `kind` (one of `EXECUTORS`), with `workers` processes (None:
    one per core) or, for ``dask``, the cluster at `scheduler`; `client`, a
    `distributed.Client` already connected (a program that runs its own cluster)."""

    kind: str = "local"
    workers: int | None = None
    scheduler: str | None = None
    client: Any = None

    def __post_init__(self) -> None:
        if self.kind not in EXECUTORS:
            raise UsageError(
                f"unknown executor {self.kind!r}", f"use one of {', '.join(EXECUTORS)}"
            )
        if self.workers is not None and self.workers < 1:
            raise UsageError(f"--workers {self.workers}", "give at least one worker")
        if (self.scheduler or self.client is not None) and self.kind != "dask":
            raise UsageError("--scheduler is for the dask executor", "add --executor dask")

    @property
    def remote(self) -> bool:
        """Whether the tasks run outside this process."""
        return self.kind != "local"

    def describe(self) -> str:
        if self.kind == "local":
            return "local"
        if self.kind == "processes":
            return f"processes ({self.size()} workers)"
        where = self.scheduler or ("a running cluster" if self.client else "a local cluster")
        return f"dask ({where})"

    def size(self) -> int:
        return self.workers or os.cpu_count() or 1


def store_at(root: Store | str) -> Store:
    """The knowledge root a task is given: the caller's own `Store` when the task runs
    in its process, else its path, opened once in the worker's process."""
    return root if isinstance(root, Store) else _opened(root)


@functools.lru_cache(maxsize=4)
def _opened(root: str) -> Store:
    return Store(root)


def where(store: Store, executor: Executor | None) -> Store | str:
    """What a task is given of `store` (see `store_at`): the store itself, or its path
    for a task run in another process."""
    return str(store.root) if executor is not None and executor.remote else store


def run_map(
    task: Callable[..., R],
    calls: Sequence[tuple[Any, ...]],
    executor: Executor | None = None,
    progress: Callable[[int], None] | None = None,
    sizes: Sequence[int] | None = None,
) -> list[R]:
    """``[task(*args) for args in calls]``, run where `executor` says; `progress` is
    called as each task finishes, with its size (`sizes`, e.g. an input's bytes; 1 each
    by default). The first task that fails raises its error (the others are cancelled)."""
    executor = executor or Executor()
    if not calls:
        return []
    done = _Done(progress, sizes)
    if executor.kind == "local" or (executor.kind == "processes" and len(calls) == 1):
        results = []
        for at, args in enumerate(calls):
            results.append(task(*args))
            done(at)
        return results
    if executor.kind == "processes":
        return _in_processes(task, calls, executor.size(), done)
    return _on_dask(task, calls, executor, done)


class _Done:
    """Tells `progress` that the task at a position finished."""

    def __init__(self, progress: Callable[[int], None] | None, sizes: Sequence[int] | None) -> None:
        self.progress = progress
        self.sizes = sizes

    def __call__(self, at: int) -> None:
        if self.progress is not None:
            self.progress(self.sizes[at] if self.sizes is not None else 1)


def _in_processes(
    task: Callable[..., R],
    calls: Sequence[tuple[Any, ...]],
    workers: int,
    done: _Done,
) -> list[R]:
    # spawned, not forked: a fork copies this process's threads' locks (a watch daemon,
    # a progress bar) in whatever state they are in
    context = multiprocessing.get_context("spawn")
    results: list[Any] = [None] * len(calls)
    with ProcessPoolExecutor(max_workers=min(workers, len(calls)), mp_context=context) as pool:
        futures = {pool.submit(task, *args): at for at, args in enumerate(calls)}
        try:
            for future in as_completed(futures):
                results[futures[future]] = future.result()
                done(futures[future])
        except BaseException:
            for future in futures:
                future.cancel()
            raise
    return results


def _on_dask(
    task: Callable[..., R],
    calls: Sequence[tuple[Any, ...]],
    executor: Executor,
    done: _Done,
) -> list[R]:
    try:  # untyped: Any
        distributed: Any = importlib.import_module("distributed")
    except ImportError as exc:
        raise UsageError("the dask executor needs Dask's distributed scheduler", DASK_HINT) from exc
    import contextlib

    # the scheduler's and workers' own log lines (a line per worker started and stopped)
    # say nothing a user of ccm needs; warnings and errors still show
    if not logging.getLogger("ccm").isEnabledFor(logging.DEBUG):
        logging.getLogger("distributed").setLevel(logging.WARNING)
    with contextlib.ExitStack() as stack:
        client = executor.client
        if client is None:
            if executor.scheduler:
                try:
                    client = distributed.Client(executor.scheduler, timeout="10s")
                except OSError as exc:
                    raise UsageError(
                        f"cannot reach the Dask scheduler at {executor.scheduler}: {exc}",
                        "start it with `dask scheduler` and give its address (tcp://host:8786)",
                    ) from exc
            else:
                cluster = distributed.LocalCluster(
                    n_workers=min(executor.size(), len(calls)),
                    threads_per_worker=1,
                    processes=True,
                    host="127.0.0.1",
                    # its web server on a free port of loopback (the default, 8787, is
                    # the port `ccm proxy` listens on)
                    dashboard_address="127.0.0.1:0",
                )
                stack.enter_context(cluster)
                client = distributed.Client(cluster)
            stack.enter_context(client)
        columns = list(zip(*calls, strict=True))
        futures = client.map(task, *columns, pure=False)
        position = {future.key: at for at, future in enumerate(futures)}
        try:
            for future in distributed.as_completed(futures):
                done(position[future.key])
            return list(client.gather(futures))
        finally:
            client.cancel(futures)
