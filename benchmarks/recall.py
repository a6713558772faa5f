"""Benchmark the recall index and context assembly on a generated session.

    .venv/bin/python benchmarks/recall.py [--turns 100000] [--seed 0] [--json] [--recall-only]
                                          [--keep DIR]

Measures, in this process, on one session of `--turns` turns from
`benchmarks.generate` (imported without deriving):

* index build: derive the tiers, then ``Index.update`` from scratch (units/s);
* recall: ``Index.recall`` for 50 queries drawn from the session's own words, p50/p95;
* context assembly: ``context._assemble`` (library call, state and index ready) on the
  last 10,000 turns' session state, for casual and recall queries, p50/p95;
* the floor beside them: SQLite FTS5 (``porter unicode61``) building a table of the same
  turns, the same text ccm indexes of each, in one transaction, and answering the same
  queries with its ``bm25``: the best 300 turns (what recall starts from), and the best
  200 with their text (what ``Index.recall`` lists), p50/p95. Beside them, ccm's ranking
  alone (``Index.recalled``, before any hit is read) and its BM25 step alone
  (``Postings.search``). Ranking is compared with the bm25 query, listing with the listing.

Targets from the recall issue (reported, never enforced): context assembly <= 5 ms on a
10k-turn session; recall p50 <= 20 ms over 1M turns (``--turns 1000000 --recall-only``:
deriving the tiers of a 1M-turn session takes longer than the rest; without them recall
has no segments, so its topic ranking, a pass over the same posting lists, is left out).

``--keep DIR`` builds the session and its root in DIR and leaves them there; a later run
with the same DIR, turns and seed reuses them, so recall is measured again without the
minutes a 1M-turn build takes (the index build figure is then that of an update that
finds nothing new, unless the index format changed and it rebuilt itself).
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sqlite3
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
from ccm import derive, lexical  # noqa: E402
from ccm.context import _assemble  # noqa: E402
from ccm.engine.render import critical_items  # noqa: E402
from ccm.index import CANDIDATES, Index, _indexed, asked_words, render_turn  # noqa: E402
from ccm.ingest.pipeline import ingest  # noqa: E402
from ccm.store import Store  # noqa: E402

SESSION = "bench"
LISTED = 200  # the hits `Index.recall` lists (its default limit)


def _ms(values: list[float]) -> tuple[float, float]:
    ordered = sorted(values)
    return (
        round(statistics.median(ordered) * 1000, 2),
        round(ordered[int(0.95 * (len(ordered) - 1))] * 1000, 2),
    )


def _fts5(store: Store, queries: list[str], work: Path) -> dict[str, Any]:
    """SQLite FTS5 on the same turns (the text ccm indexes of each) and the same
    queries: the build in one transaction, and each query's best `CANDIDATES` by bm25."""
    turns, _, _ = store.read_turns(SESSION)
    texts = [(t["turn"], _indexed(t, render_turn(t, None))) for t in turns]
    path = work / "fts5.db"
    path.unlink(missing_ok=True)
    db = sqlite3.connect(path)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("CREATE VIRTUAL TABLE t USING fts5(text, tokenize='porter unicode61')")
    start = time.perf_counter()
    with db:
        db.executemany("INSERT INTO t(rowid, text) VALUES (?, ?)", texts)
    build = time.perf_counter() - start
    times: dict[str, list[float]] = {"query": [], "listed": []}
    for query in queries:
        words = " OR ".join(f'"{w}"' for w in asked_words(query))
        for kind, select, limit in (("query", "", CANDIDATES), ("listed", ", text", LISTED)):
            start = time.perf_counter()
            db.execute(
                f"SELECT rowid{select}, bm25(t) AS s FROM t WHERE t MATCH ? ORDER BY s LIMIT ?",
                (words, limit),
            ).fetchall()
            times[kind].append(time.perf_counter() - start)
    db.close()
    return {
        "fts5_build_s": round(build, 3),
        "fts5_query_p50_ms": _ms(times["query"])[0],
        "fts5_query_p95_ms": _ms(times["query"])[1],
        "fts5_listed_p50_ms": _ms(times["listed"])[0],
    }


def measure(turns: int, seed: int, work: Path, recall_only: bool = False) -> dict[str, Any]:
    source = work / "session.jsonl"
    store = Store(work / "root")
    stamp = work / "built.json"
    wanted = {"turns": turns, "seed": seed}
    if not (stamp.exists() and json.loads(stamp.read_text()) == wanted):
        if store.root.exists():
            shutil.rmtree(store.root)
        write_session(source, turns, seed=seed)
        store.root.mkdir(parents=True)
        (store.root / "config.yaml").write_text("ingest: {fsync: false}\n")
        ingest(store, [str(source)], session=SESSION)
        stamp.write_text(json.dumps(wanted))
    derived = None if recall_only else derive.update(store, SESSION)

    index = Index(store)
    start = time.perf_counter()
    index.update(SESSION, derived.tiers.manifest if derived else None)
    build = time.perf_counter() - start
    units = index.count(SESSION)

    rng = random.Random(seed)
    texts = [line["content"] for line in map(json.loads, source.open()) if line["role"] == "user"]
    queries = []
    for _ in range(50):
        words = [w for w in rng.choice(texts).split() if w.isalpha() and len(w) > 4]
        queries.append(
            "what did we decide about " + " ".join(rng.sample(words, min(3, len(words)))) + "?"
        )
    recall_times = []
    for query in queries:
        start = time.perf_counter()
        index.recall(query, SESSION)
        recall_times.append(time.perf_counter() - start)

    recall_p50, recall_p95 = _ms(recall_times)
    ranked_times, bm25_times = [], []
    for query in queries:
        start = time.perf_counter()
        index.recalled(query, SESSION)
        ranked_times.append(time.perf_counter() - start)
        start = time.perf_counter()
        index.postings.search(SESSION, lexical.stems(asked_words(query)), CANDIDATES)
        bm25_times.append(time.perf_counter() - start)
    floor = _fts5(store, queries, work)
    result: dict[str, Any] = {
        "turns": turns,
        "units": units,
        "index_build_s": round(build, 2),
        "units_per_s": round(units / build),
        "recall_p50_ms": recall_p50,
        "recall_p95_ms": recall_p95,
        "ranked_p50_ms": _ms(ranked_times)[0],
        "bm25_p50_ms": _ms(bm25_times)[0],
        **floor,
        "build_ratio": round(build / floor["fts5_build_s"], 2),
        "ranked_ratio": round(_ms(ranked_times)[0] / floor["fts5_query_p50_ms"], 2),
        "recall_ratio": round(recall_p50 / floor["fts5_listed_p50_ms"], 2),
    }
    if derived is None:  # --recall-only: no tiers, so no segments to rank topics by
        index.close()
        return result
    # generated text is dense with "must" and "always": give the always-included
    # critical items room, so that what is measured is the assembly, not the refusal
    events, _, _ = store.read_events(SESSION)
    critical = sum(c["tokens"] for c in critical_items(derived.state, events))
    budget = max(8000, 2 * critical + 2000)
    assembly: dict[str, list[float]] = {"casual": [], "recall": []}
    for query in queries[:30]:
        for kind, text in (("casual", "ok, go on"), ("recall", query)):
            start = time.perf_counter()
            _assemble(store, SESSION, budget, text, derived, index)
            assembly[kind].append(time.perf_counter() - start)
    index.close()
    casual_p50, casual_p95 = _ms(assembly["casual"])
    asked_p50, asked_p95 = _ms(assembly["recall"])
    return result | {
        "context_budget": budget,
        "critical_tokens": critical,
        "context_casual_p50_ms": casual_p50,
        "context_casual_p95_ms": casual_p95,
        "context_recall_p50_ms": asked_p50,
        "context_recall_p95_ms": asked_p95,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--recall-only",
        action="store_true",
        help="index and recall only: no tiers derived (fast at 1M turns), no context figures",
    )
    parser.add_argument(
        "--keep",
        type=Path,
        metavar="DIR",
        help="build in DIR and keep it; a later run with the same DIR, turns and seed reuses it",
    )
    args = parser.parse_args(argv)
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
        result = measure(args.turns, args.seed, args.keep, args.recall_only)
    else:
        with tempfile.TemporaryDirectory(prefix="ccm-recall-bench-") as tmp:
            result = measure(args.turns, args.seed, Path(tmp), args.recall_only)
    if args.json:
        print(json.dumps(result))
        return
    print(f"ccm recall benchmark: {result['turns']:,} turns, {result['units']:,} index units")
    print(f"  index build        {result['index_build_s']} s ({result['units_per_s']:,} units/s)")
    print(
        f"  recall             p50 {result['recall_p50_ms']} ms, p95 {result['recall_p95_ms']} ms"
    )
    print(
        f"  recall, ranked     p50 {result['ranked_p50_ms']} ms (`Index.recalled`, nothing read "
        f"yet); its BM25 step alone p50 {result['bm25_p50_ms']} ms"
    )
    print(
        f"  FTS5 (the floor)   build {result['fts5_build_s']} s; bm25 query p50 "
        f"{result['fts5_query_p50_ms']} ms (p95 {result['fts5_query_p95_ms']}), the best "
        f"{LISTED} with their text p50 {result['fts5_listed_p50_ms']} ms"
    )
    print(
        f"  ccm / FTS5         index build {result['build_ratio']}x (goal: within 3x); "
        f"ranked / bm25 query {result['ranked_ratio']}x, recall / the best {LISTED} listed "
        f"{result['recall_ratio']}x (goal: no slower)"
    )
    if "context_budget" not in result:
        return
    print(
        f"  context (casual)   p50 {result['context_casual_p50_ms']} ms, "
        f"p95 {result['context_casual_p95_ms']} ms (budget {result['context_budget']}, "
        f"{result['critical_tokens']} of them critical items)"
    )
    print(
        f"  context (recall)   p50 {result['context_recall_p50_ms']} ms, "
        f"p95 {result['context_recall_p95_ms']} ms"
    )


if __name__ == "__main__":
    main()
