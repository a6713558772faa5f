"""Benchmark nightly consolidation on generated sessions.

    .venv/bin/python benchmarks/consolidate.py [--sessions 1000] [--turns 100] [--seed 0] [--json]
        [--root DIR] [--profile FILE]

Generates `--sessions` conversations of `--turns` turns with `benchmarks.generate`, and
makes about one user turn in twelve a conclusion drawn from a shared, Zipfian
vocabulary of tools and subjects (decisions, reversals, fixes, root causes and their
corrections, requirements), so that conclusions of different sessions restate,
reverse and contradict each other as in a long-lived knowledge root. They are
imported with their tiers derived (`ccm ingest`, not timed). Then, in this process:

* ``from_scratch``: the first ``consolidate`` (every session read, the graph built,
  every note, the network and the report written);
* ``nothing_new``: a second run, which writes nothing;
* ``incremental``: two turns appended to one session, then a run (that session's tiers
  derived and read again, the graph rebuilt, the notes that changed written).

Importing 1,000 sessions takes minutes: ``--root DIR`` keeps the imported root in
``DIR`` (generated once for the same sessions, turns and seed) and measures on a copy of
it, so that later runs skip the import. ``--profile FILE`` writes a cProfile of the
incremental run (``python -m pstats FILE``).

Targets from the sleep issue (reported, never enforced): 1,000 sessions / 100k turns
from scratch <= 60 s, an incremental run after one changed session <= 2 s.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import random
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.generate import write_session  # noqa: E402
from benchmarks.graph import Zipf, print_verdicts, timed, vocabulary  # noqa: E402
from ccm.ingest.pipeline import ingest  # noqa: E402
from ccm.sleep.consolidate import consolidate  # noqa: E402
from ccm.store import Store  # noqa: E402

TARGETS = {"from_scratch_s": 60.0, "incremental_s": 2.0}
EVERY = 12  # one user turn in this many becomes a conclusion


class Conclusions:
    """Conclusion sentences over a shared vocabulary, always the same for one seed."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.word = Zipf(vocabulary(3000, self.rng), self.rng)
        self.tools = [t.capitalize() for t in vocabulary(120, random.Random(seed + 1))]

    def __call__(self) -> str:
        rng, w = self.rng, [self.word() for _ in range(4)]
        tool, other = rng.sample(self.tools, 2)
        roll = rng.random()
        if roll < 0.3:
            return f"Decision: we use {tool} for the {w[0]} {w[1]}, not {other}, because {w[2]}."
        if roll < 0.4:
            return f"Change of plan: switch to {tool} for the {w[0]} {w[1]} instead of {other}."
        if roll < 0.6:
            return f"That fixed it: the {w[0]} {w[1]} works now after the {w[2]} change."
        if roll < 0.75:
            return f"So the root cause was {w[0]} {w[1]} in the {w[2]} {w[3]}."
        if roll < 0.8:
            return f"Actually, the root cause was {w[0]} {w[1]} in the {w[2]} {w[3]}."
        if roll < 0.9:
            return f"Done: the {w[0]} {w[1]} is deployed with {tool}."
        return f"Ok, so the takeaway is: always keep the {w[0]} {w[1]} out of the {w[2]}."


def write_corpus(folder: Path, sessions: int, turns: int, seed: int) -> int:
    """One jsonl file per session; returns the number of conclusion turns planted."""
    said = Conclusions(seed)
    planted = 0
    for number in range(sessions):
        path = folder / f"s{number:05d}.jsonl"
        write_session(path, turns, seed=seed * 100_003 + number)
        lines = path.read_text(encoding="utf-8").splitlines()
        users = 0
        for index, line in enumerate(lines):
            record = json.loads(line)
            if record["role"] != "user":
                continue
            users += 1
            if users % (EVERY // 2) == 0:
                record["content"] = said()
                lines[index] = json.dumps(record)
                planted += 1
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return planted


def imported(folder: Path, sessions: int, turns: int, seed: int) -> tuple[Path, int, float]:
    """The generated sessions imported with their tiers derived, in `folder/root`: made
    once for one (sessions, turns, seed) and reused; returns it, the conclusions planted
    and the import time (0 when reused)."""
    marker = folder / "generated.json"
    wanted = {"sessions": sessions, "turns": turns, "seed": seed}
    root = folder / "root"
    if marker.is_file():
        known = json.loads(marker.read_text())
        if {k: known.get(k) for k in wanted} == wanted:
            return root, int(known["planted"]), 0.0
    for stale in (root, folder / "sources", marker):
        if stale.is_dir():
            shutil.rmtree(stale)
        elif stale.exists():
            stale.unlink()
    sources = folder / "sources"
    sources.mkdir(parents=True)
    planted = write_corpus(sources, sessions, turns, seed)
    root.mkdir()
    (root / "config.yaml").write_text("ingest: {fsync: false}\n")
    _, importing = timed(lambda: ingest(Store(root), [str(sources)], derive=True))
    shutil.rmtree(sources)
    marker.write_text(json.dumps({**wanted, "planted": planted}))
    return root, planted, importing


CHANGED = "s00000"  # the session the incremental run finds two new turns in


def _share_logs(source: str, target: str) -> None:
    """Copy a file of the kept root, but hard-link the append-only logs the runs only
    read: a copied log is a new inode, which the engine takes for a replaced log and
    derives again (minutes at 1,000 sessions, which are not part of the measure)."""
    path = Path(source)
    if path.name in ("raw.jsonl", "events.jsonl") and path.parent.name != CHANGED:
        import os

        os.link(source, target)
    else:
        shutil.copy2(source, target)


def measure(
    sessions: int,
    turns: int,
    seed: int,
    work: Path,
    keep: Path | None = None,
    profile: Path | None = None,
) -> dict[str, Any]:
    made, planted, importing = imported(keep or work / "generated", sessions, turns, seed)
    root = work / "root"
    shutil.copytree(made, root, symlinks=True, copy_function=_share_logs)
    store = Store(root)
    first, scratch = timed(lambda: consolidate(Store(root)))
    second, idle = timed(lambda: consolidate(Store(root)))
    extra = work / "extra.jsonl"
    extra.write_text(
        json.dumps({"role": "user", "content": "Ok, so the takeaway is: measure first."})
        + "\n"
        + json.dumps({"role": "assistant", "content": "Noted: measure before tuning."})
        + "\n"
    )
    ingest(store, [str(extra)], session=CHANGED, derive=False)
    profiler = cProfile.Profile() if profile else None
    if profiler is not None:
        profiler.enable()
    third, incremental = timed(lambda: consolidate(Store(root)))
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(str(profile))
    data = first.as_dict()
    return {
        "sessions": sessions,
        "turns": sessions * turns,
        "planted_conclusions": planted,
        "nodes": first.nodes,
        "edges": first.edges,
        "edge_types": first.edge_types,
        "statuses": first.statuses,
        "artifacts": len(data["artifacts"]["new"]),
        "files_written": len(first.written),
        "import_s": round(importing, 2),
        "from_scratch_s": round(scratch, 2),
        "nothing_new_s": round(idle, 2),
        "nothing_new_files": len(second.written),
        "incremental_s": round(incremental, 2),
        "incremental_sessions": third.consolidated,
        "incremental_files": len(third.written),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--turns", type=int, default=100, help="turns a session")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--root",
        type=Path,
        help="keep the imported sessions in this folder and reuse them (skips the import)",
    )
    parser.add_argument("--profile", type=Path, help="write a cProfile of the incremental run")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="ccm-bench-sleep-") as tmp:
        result = measure(args.sessions, args.turns, args.seed, Path(tmp), args.root, args.profile)
    if args.json:
        print(json.dumps({"result": result, "targets": TARGETS}))
        return
    print("ccm consolidate benchmark (library calls, this machine)")
    print(
        f"{result['sessions']} sessions, {result['turns']} turns, "
        f"{result['planted_conclusions']} conclusion turns planted; imported in "
        f"{result['import_s']} s (not part of the targets; 0 when reused)"
    )
    print(
        f"graph: {result['nodes']} conclusions, {result['edges']} edges {result['edge_types']}, "
        f"statuses {result['statuses']}; {result['artifacts']} artifacts, "
        f"{result['files_written']} files written"
    )
    print(
        f"from scratch {result['from_scratch_s']} s; nothing new {result['nothing_new_s']} s "
        f"({result['nothing_new_files']} files written); incremental after one changed "
        f"session {result['incremental_s']} s ({result['incremental_sessions']}, "
        f"{result['incremental_files']} files written)"
    )
    print_verdicts(result, TARGETS)


if __name__ == "__main__":
    main()
