"""Where the per-session work runs (`ccm.executors`): here, in worker processes, or on a
Dask cluster of worker processes on loopback. Whatever the executor, `ccm consolidate`
writes the same vault, network and report, byte for byte; `ccm rebuild` the same tiers;
`ccm ingest` of many files the same logs. A worker killed with SIGKILL mid-run is
replaced, its tasks run again, and the vault is still the same.

No test here freezes time: freezegun would stop the clock of the Dask client's event
loop, which runs in a thread of this process (its timers would never fire).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ccm.cli import main
from ccm.errors import CCMError, SchemaError, UsageError
from ccm.executors import Executor, run_map
from ccm.ingest.pipeline import ingest
from ccm.sleep.consolidate import consolidate
from ccm.store import Store

distributed = pytest.importorskip("distributed")

SOURCES = Path(__file__).parent.parent / "sample_knowledge" / "sources"
NOW = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)
COPIES = 4  # sessions made of each sample source: twelve, so a killed worker has work left
VAULT = ("artifacts", "sessions", "network", "reports")


def _square(value: int) -> int:
    return value * value


def _fail_on(value: int, bad: int) -> int:
    if value == bad:
        raise SchemaError("chats/x/manifest.yaml", 3, "a bad segment", "rebuild it")
    return value


def _sources(folder: Path) -> list[Path]:
    """The sample sources, each as `COPIES` differently named files whose turns differ
    (a session names its source file)."""
    folder.mkdir()
    made = []
    for source in sorted(SOURCES.glob("*.jsonl")):
        lines = source.read_text(encoding="utf-8").splitlines()
        for copy in range(COPIES):
            path = folder / f"{source.stem}-{copy}.jsonl"
            turns = [json.loads(line) for line in lines]
            turns[0]["content"] = f"{turns[0]['content']} (take {copy})"
            path.write_text("".join(json.dumps(t) + "\n" for t in turns), encoding="utf-8")
            made.append(path)
    return made


def _root(path: Path, sources: list[Path]) -> Store:
    store = Store(path)
    store.init()
    ingest(store, [str(p) for p in sources], "jsonl")  # every turn has its time: none is now
    return store


def _vault(root: Path) -> dict[str, bytes]:
    """Every file of the vault, the network and the reports, by path."""
    return {
        str(path.relative_to(root)): path.read_bytes()
        for part in VAULT
        for path in sorted((root / part).rglob("*"))
        if path.is_file()
    }


def _tiers(root: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(root)): path.read_bytes()
        for path in sorted((root / "chats").rglob("*"))
        if path.is_file()
    }


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    """Two worker processes on loopback, with their nannies (a killed worker restarts)."""
    with (
        distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address="127.0.0.1:0",
        ) as local,
        distributed.Client(local) as client,
    ):
        yield client


@pytest.fixture
def roots(tmp_path: Path) -> tuple[Path, Path]:
    """Two copies of one root of twelve sessions, imported and not yet consolidated."""
    first = _root(tmp_path / "first", _sources(tmp_path / "sources")).root
    second = tmp_path / "second"
    shutil.copytree(first, second)
    return first, second


# ---------------------------------------------------------------- run_map


@pytest.mark.parametrize("kind", ["local", "processes"])
def test_results_come_back_in_the_order_of_the_calls(kind: str) -> None:
    sizes: list[int] = []
    calls = [(n,) for n in range(7)]
    found = run_map(_square, calls, Executor(kind, workers=2), sizes.append, [10] * 7)
    assert found == [n * n for n in range(7)]
    assert sizes == [10] * 7


def test_on_a_dask_cluster_results_come_back_in_order_too(cluster: Any) -> None:
    done: list[int] = []
    found = run_map(
        _square, [(n,) for n in range(9)], Executor("dask", client=cluster), done.append
    )
    assert found == [n * n for n in range(9)]
    assert done == [1] * 9


@pytest.mark.parametrize("kind", ["processes", "dask"])
def test_a_task_that_fails_raises_its_error_whole(kind: str, cluster: Any) -> None:
    executor = Executor(kind, workers=2, client=cluster if kind == "dask" else None)
    with pytest.raises(SchemaError) as raised:
        run_map(_fail_on, [(n, 3) for n in range(5)], executor)
    assert raised.value.path == "chats/x/manifest.yaml"
    assert raised.value.line == 3
    assert raised.value.hint == "rebuild it"
    assert str(raised.value) == "chats/x/manifest.yaml:3: a bad segment (rebuild it)"


def test_a_ccm_error_survives_pickling_whole() -> None:
    import pickle

    error = CCMError("raw.jsonl line 4 is not JSON", "fix or remove the line")
    again = pickle.loads(pickle.dumps(error))
    assert (type(again), again.message, again.hint) == (CCMError, error.message, error.hint)


def test_wrong_choices_are_usage_errors() -> None:
    with pytest.raises(UsageError, match="unknown executor"):
        Executor("threads")
    with pytest.raises(UsageError, match="--executor dask"):
        Executor("processes", scheduler="tcp://127.0.0.1:8786")
    with pytest.raises(UsageError, match="at least one worker"):
        Executor("processes", workers=0)


def test_an_unreachable_scheduler_is_an_error_that_says_how_to_start_one(tmp_path: Path) -> None:
    import socket

    with socket.socket() as taken:  # a port nothing listens on
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]
    store = _root(tmp_path / "root", [SOURCES / "ledger-sync.jsonl"])
    address = f"tcp://127.0.0.1:{port}"
    args = ["--root", str(store.root), "rebuild", "--executor", "dask", "--scheduler", address]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2
    assert f"cannot reach the Dask scheduler at tcp://127.0.0.1:{port}" in result.output
    assert "dask scheduler" in result.output


# ---------------------------------------------------------------- the commands


@pytest.mark.parametrize("kind", ["processes", "dask"])
def test_consolidate_writes_the_same_vault_wherever_the_sessions_are_read(
    kind: str, roots: tuple[Path, Path], cluster: Any
) -> None:
    here, there = roots
    local = consolidate(Store(here), now=NOW)
    executor = Executor(kind, workers=2, client=cluster if kind == "dask" else None)
    away = consolidate(Store(there), now=NOW, executor=executor)
    assert local.as_dict() == away.as_dict()
    assert len(local.consolidated) == 3 * COPIES
    written = _vault(here)
    assert any(path.startswith("artifacts/") for path in written)
    assert "network/nodes.json" in written and f"reports/{local.date}.md" in written
    assert _vault(there) == written
    assert _tiers(there) == _tiers(here)


def test_a_worker_killed_mid_run_is_replaced_and_the_vault_is_the_same(
    roots: tuple[Path, Path], cluster: Any
) -> None:
    here, there = roots
    consolidate(Store(here), now=NOW)
    pids = cluster.run(os.getpid)  # worker address -> its process
    killed: list[int] = []

    def kill_one(_: int) -> None:  # once the first session is read: the rest are queued
        if not killed:
            victim = sorted(pids.values())[0]
            os.kill(victim, signal.SIGKILL)
            killed.append(victim)

    report = consolidate(
        Store(there), now=NOW, executor=Executor("dask", client=cluster), progress=kill_one
    )
    assert killed
    with pytest.raises(ProcessLookupError):
        os.kill(killed[0], 0)  # it is gone
    assert len(report.consolidated) == 3 * COPIES
    assert _vault(there) == _vault(here)
    cluster.wait_for_workers(2, timeout=60)  # its nanny started another


@pytest.mark.parametrize("kind", ["processes", "dask"])
def test_rebuild_gives_the_same_tiers_wherever_it_runs(
    kind: str, roots: tuple[Path, Path], cluster: Any
) -> None:
    here, there = roots
    runner = CliRunner()
    local = runner.invoke(main, ["--root", str(here), "rebuild", "--json"])
    assert local.exit_code == 0, local.output
    if kind == "dask":  # the command starts a local cluster of its own
        args = ["--executor", "dask", "--workers", "2"]
    else:
        args = ["--executor", "processes", "--workers", "2"]
    away = runner.invoke(main, ["--root", str(there), "rebuild", "--json", *args])
    assert away.exit_code == 0, away.output
    assert json.loads(away.stdout) == json.loads(local.stdout)
    assert len(json.loads(local.stdout)) == 3 * COPIES
    assert _tiers(there) == _tiers(here)
    recalled = runner.invoke(main, ["--root", str(there), "recall", "ledger", "--json"])
    assert recalled.exit_code == 0 and json.loads(recalled.stdout)  # indexed here


@pytest.mark.parametrize("kind", ["processes", "dask"])
def test_ingest_of_many_files_gives_the_same_logs_and_tiers_wherever_it_parses(
    kind: str, tmp_path: Path, cluster: Any
) -> None:
    sources = _sources(tmp_path / "sources")
    bad = tmp_path / "sources" / "broken.jsonl"
    bad.write_text('{"role": "user", "content": "fine", "ts": "2026-03-01T10:00:00Z"}\n{oops\n')
    sources.append(bad)
    here, there = Store(tmp_path / "here"), Store(tmp_path / "there")
    reports = []
    away = Executor(kind, workers=2, client=cluster if kind == "dask" else None)
    for store, executor in ((here, None), (there, away)):
        store.init()
        seen: list[int] = []
        report = ingest(
            store, [str(p) for p in sources], "jsonl", None, None, seen.append, True, executor
        )
        assert sum(seen) == sum(p.stat().st_size for p in sources)
        reports.append(report.as_dict())
    assert reports[0] == reports[1]
    assert reports[0]["rejected"] and len(reports[0]["derived"]) == 3 * COPIES + 1
    tiers = [_tiers(store.root) for store in (here, there)]
    quarantined = [json.loads(t.pop("chats/broken/quarantine.jsonl")) for t in tiers]
    assert [{k: v for k, v in q.items() if k != "ts"} for q in quarantined] == [
        {k: v for k, v in quarantined[0].items() if k != "ts"}
    ] * 2  # the same line, quarantined when each run read it
    assert quarantined[0]["raw"] == "{oops"
    assert tiers[0] == tiers[1]
