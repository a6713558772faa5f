"""Benchmark where the per-session work runs: here, in processes, on a Dask cluster.

    .venv/bin/python benchmarks/executors.py [--sessions 1000] [--turns 100] [--workers 2]
        [--root DIR] [--json]

The sessions of ``benchmarks/consolidate.py`` (generated, imported with their tiers
derived; ``--root DIR`` keeps them between runs, as there). On copies of that root, each
executor of `ccm.executors` (``local``; ``processes`` with ``--workers``; ``dask`` on a
`distributed.LocalCluster` of ``--workers`` processes on loopback, started before the
clock) runs:

* ``consolidate``: a first consolidation (each session read: its tiers are current, so a
  task reads its log and builds its record; then the graph, notes and writes here);
* ``fold``: the tiers of every session folded again from raw.jsonl, the map of
  ``ccm rebuild`` (`derive.folded`), without the index, which is built here either way.

Each run's vault is checked to be byte for byte the local one. The ratios say what
the map gains on this machine; the reduce (graph, notes, writes) is the same work
everywhere, so it bounds the gain of the whole command (Amdahl).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.consolidate import _share_logs, imported  # noqa: E402
from benchmarks.graph import timed  # noqa: E402
from ccm import derive  # noqa: E402
from ccm.executors import Executor, run_map, where  # noqa: E402
from ccm.sleep.consolidate import consolidate  # noqa: E402
from ccm.store import Store  # noqa: E402

VAULT = ("artifacts", "sessions", "network")


def _vault(root: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(root)): path.read_bytes()
        for part in VAULT
        for path in sorted((root / part).rglob("*"))
        if path.is_file()
    }


def _run(kind: str, made: Path, work: Path, workers: int, client: Any) -> dict[str, Any]:
    root = work / kind
    shutil.copytree(made, root, symlinks=True, copy_function=_share_logs)
    executor = Executor(kind, workers if kind == "processes" else None, client=client)
    store = Store(root)
    report, seconds = timed(lambda: consolidate(store, executor=executor))
    sessions = store.sessions()
    calls = [(where(store, executor), session, True) for session in sessions]
    _, fold = timed(lambda: run_map(derive.folded, calls, executor))
    return {
        "consolidate_s": round(seconds, 2),
        "fold_s": round(fold, 2),
        "sessions": len(report.consolidated),
        "vault": _vault(root),
    }


def measure(
    sessions: int, turns: int, workers: int, work: Path, keep: Path | None
) -> dict[str, Any]:
    import distributed

    made, _, importing = imported(keep or work / "generated", sessions, turns, 0)
    found: dict[str, dict[str, Any]] = {}
    found["local"] = _run("local", made, work, workers, None)
    found["processes"] = _run("processes", made, work, workers, None)
    with (
        distributed.LocalCluster(
            n_workers=workers,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address="127.0.0.1:0",
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        found["dask"] = _run("dask", made, work, workers, client)
    local = found["local"]
    result: dict[str, Any] = {
        "sessions": sessions,
        "turns": sessions * turns,
        "workers": workers,
        "import_s": round(importing, 2),
    }
    vaults = {kind: run.pop("vault") for kind, run in found.items()}
    for kind, run in found.items():
        result[kind] = {
            **run,
            "same_vault": vaults[kind] == vaults["local"],
            "consolidate_ratio": round(local["consolidate_s"] / run["consolidate_s"], 2),
            "fold_ratio": round(local["fold_s"] / run["fold_s"], 2),
        }
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--turns", type=int, default=100, help="turns a session")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--root",
        type=Path,
        help="keep the imported sessions in this folder and reuse them (skips the import)",
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="ccm-bench-executors-") as tmp:
        result = measure(args.sessions, args.turns, args.workers, Path(tmp), args.root)
    if args.json:
        print(json.dumps(result))
        return
    print("ccm executors benchmark (this machine)")
    print(
        f"{result['sessions']} sessions, {result['turns']} turns, {result['workers']} workers; "
        f"imported in {result['import_s']} s (0 when reused)"
    )
    for kind in ("local", "processes", "dask"):
        run = result[kind]
        print(
            f"{kind:<10} consolidate {run['consolidate_s']:>7} s (x{run['consolidate_ratio']}), "
            f"fold {run['fold_s']:>7} s (x{run['fold_ratio']}); "
            f"vault {'identical' if run['same_vault'] else 'DIFFERENT'}"
        )
    if not all(result[kind]["same_vault"] for kind in ("processes", "dask")):
        sys.exit(1)


if __name__ == "__main__":
    main()
