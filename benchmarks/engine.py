"""Benchmark the engine on generated sessions.

    .venv/bin/python benchmarks/engine.py [--sizes 10000,100000] [--seed 0] [--json]

For each size: a session from `benchmarks.generate` is imported without deriving,
then measured in this process:

* full derive: ``derive.update(store, session, rebuild=True)`` (fold every turn,
  render, write the three tiers and the cache);
* incremental update after one appended turn: append a turn to raw.jsonl, then
  ``derive.update`` (load the cache, fold one turn, render, write, save the cache),
  p50 and p95; and the same with the state kept in memory (``Engine.update(save=
  False)``, the watch daemon's path);
* health (``health.assess``) and critical lookup (``render.critical_items``) on the
  up-to-date state, median of repeated library calls.

Targets from the engine issue (reported, never enforced): on 10k turns health
<= 10 ms, critical lookup <= 5 ms, one incremental update <= 20 ms; a full derive of
100k turns <= 10 s.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.generate import write_session  # noqa: E402
from ccm import derive  # noqa: E402
from ccm.engine.health import assess  # noqa: E402
from ccm.engine.render import critical_items  # noqa: E402
from ccm.ingest.pipeline import ingest  # noqa: E402
from ccm.store import Store, utc_now  # noqa: E402

SESSION = "bench"
TARGETS = {
    "health_ms": 10.0,
    "critical_ms": 5.0,
    "update_p50_ms": 20.0,
    "live_update_p50_ms": 20.0,
    "derive_100k_s": 10.0,
}


def _timed(call: Any, repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return times


def _append_one(store: Store, number: int) -> None:
    with store.lock_raw(SESSION) as raw:
        last = raw.last_record()
        turn = (last["turn"] if last else 0) + 1
        raw.append(
            [
                {
                    "turn": turn,
                    "role": "user" if number % 2 else "assistant",
                    "content": f"Follow-up {number}: does the importer still keep integer cents "
                    "when the CSV has a thousands separator?",
                    "ts": utc_now(),
                    "source": "bench",
                }
            ],
            fsync=False,
        )


def measure(turns: int, seed: int, work: Path) -> dict[str, Any]:
    source = work / f"session-{turns}.jsonl"
    write_session(source, turns, seed=seed)
    store = Store(work / f"root-{turns}")
    (store.root).mkdir(parents=True)
    (store.root / "config.yaml").write_text("ingest: {fsync: false}\n")
    ingest(store, [str(source)], session=SESSION)

    start = time.perf_counter()
    derived = derive.update(store, SESSION, rebuild=True)
    full = time.perf_counter() - start
    segments = len(derived.tiers.manifest["segments"])

    updates = []
    for number in range(30):
        _append_one(store, number)
        start = time.perf_counter()
        derive.update(store, SESSION)
        updates.append(time.perf_counter() - start)

    engine = derive.Engine(store, SESSION)
    engine.update()
    live = []
    for number in range(30, 60):
        _append_one(store, number)
        start = time.perf_counter()
        engine.update(save=False)
        live.append(time.perf_counter() - start)

    derived = derive.update(store, SESSION)
    events, _, _ = store.read_events(SESSION)
    health = _timed(lambda: assess(derived.state, derived.tiers, events, store.config), 30)
    critical = _timed(lambda: critical_items(derived.state, events), 200)
    return {
        "turns": turns,
        "segments": segments,
        "efforts": len(derived.state["efforts"]),
        "full_derive_s": round(full, 3),
        "fold_us_per_turn": round(full / turns * 1e6, 1),
        "update_p50_ms": round(statistics.median(updates) * 1000, 2),
        "update_p95_ms": round(sorted(updates)[int(0.95 * len(updates)) - 1] * 1000, 2),
        "live_update_p50_ms": round(statistics.median(live) * 1000, 2),
        "live_update_p95_ms": round(sorted(live)[int(0.95 * len(live)) - 1] * 1000, 2),
        "health_ms": round(statistics.median(health) * 1000, 3),
        "critical_ms": round(statistics.median(critical) * 1000, 4),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000", help="comma-separated session sizes")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    with tempfile.TemporaryDirectory(prefix="ccm-engine-bench-") as tmp:
        results = [measure(size, args.seed, Path(tmp)) for size in sizes]
    if args.json:
        print(json.dumps({"results": results, "targets": TARGETS}))
        return
    print("ccm engine benchmark (library calls, this machine)")
    header = (
        f"{'turns':>8} {'segs':>6} {'derive s':>9} {'us/turn':>8} {'upd p50':>8} {'upd p95':>8} "
        f"{'live p50':>9} {'live p95':>9} {'health':>8} {'critical':>9}"
    )
    print(header)
    for r in results:
        print(
            f"{r['turns']:>8} {r['segments']:>6} {r['full_derive_s']:>9} {r['fold_us_per_turn']:>8} "
            f"{r['update_p50_ms']:>6}ms {r['update_p95_ms']:>6}ms "
            f"{r['live_update_p50_ms']:>7}ms {r['live_update_p95_ms']:>7}ms "
            f"{r['health_ms']:>6}ms {r['critical_ms']:>7}ms"
        )
    small = next((r for r in results if r["turns"] == 10_000), None)
    big = next((r for r in results if r["turns"] == 100_000), None)
    if small:
        for key in ("health_ms", "critical_ms", "update_p50_ms", "live_update_p50_ms"):
            verdict = "met" if small[key] <= TARGETS[key] else "NOT met"
            print(f"10k turns: {key} {small[key]} (target <= {TARGETS[key]}): {verdict}")
    if big:
        verdict = "met" if big["full_derive_s"] <= TARGETS["derive_100k_s"] else "NOT met"
        print(f"100k turns: full derive {big['full_derive_s']} s (target <= 10 s): {verdict}")
        if small:
            print(
                f"ratio of update p50, 100k/10k: {big['update_p50_ms'] / small['update_p50_ms']:.2f}"
            )


if __name__ == "__main__":
    main()
