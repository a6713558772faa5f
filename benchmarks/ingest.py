"""Benchmark `ccm ingest` on one large generated session.

    .venv/bin/python benchmarks/ingest.py [--turns 100000] [--seed 0]
        [--format jsonl|claude-code] [--keep DIR] [--json]

Generates a session with `benchmarks.generate` (timed apart, not counted), then
measures, each in a child process of its own so that the generator's memory does not
count and each peak RSS is that phase's alone:

* bare parse: read the file and ``json.loads`` every line, best of 3 (the floor any
  importer pays);
* ingest: ``ingest(store, [file], fmt, session)`` into a fresh knowledge root, with
  config defaults (fsync on: one fsync per session append);
* re-import: the same file again, which must add 0 turns (the idempotency path);
* session stats: ``store.session_stats(session)`` cold (every turn's tokens counted
  with the BPE; the BPE's load is timed apart) and warm (from the .ccm/ cache);
* the commands as a user runs them, each a ``ccm`` process of its own, wall time and
  that process's peak RSS (``--no-commands`` leaves them out): ``ccm rebuild`` on the
  imported session (the first derive of its tiers, and the index built), ``ccm
  rebuild`` again (the tiers derived anew; the index only brought up to date), and
  ``ccm rebuild --index`` (the index built again too). ccm's modules are compiled to
  bytecode first, as an install compiles them (``timing.compile_bytecode``).

The goal ">= 20,000 turns/s for import alone" (the ingest phase) is reported, never
enforced. To profile one phase, keep the files and run its child under cProfile::

    .venv/bin/python benchmarks/ingest.py --turns 100000 --keep /tmp/bench
    rm -rf /tmp/bench/knowledge
    .venv/bin/python -m cProfile -s cumtime benchmarks/ingest.py --child ingest \\
        --file /tmp/bench/session.jsonl --root /tmp/bench/knowledge | head -60
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.generate import FORMATS, write_session  # noqa: E402
from benchmarks.timing import compile_bytecode  # noqa: E402

GOAL_TURNS_PER_S = 20_000
SESSION = "bench"
MB = 1_000_000
PARSE_ROUNDS = 3


def _peak_rss_bytes(who: int) -> int:
    """Peak RSS of this process (RUSAGE_SELF) or of its waited-for children."""
    peak = resource.getrusage(who).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024  # Linux reports KiB


# ---------------------------------------------------------------------------
# the child: one phase, its result as one JSON line on stdout


def _child_parse(path: Path) -> dict[str, Any]:
    best = float("inf")
    lines = 0
    for _ in range(PARSE_ROUNDS):
        start = time.perf_counter()
        data = path.read_bytes()
        lines = 0
        for raw in data.split(b"\n"):
            if raw.strip():
                json.loads(raw)
                lines += 1
        del data
        best = min(best, time.perf_counter() - start)
    return {"seconds": best, "lines": lines, "rounds": PARSE_ROUNDS}


def _child_ingest(path: Path, root: Path, fmt: str) -> dict[str, Any]:
    from ccm import tokens
    from ccm.ingest.pipeline import ingest
    from ccm.store import Store

    start = time.perf_counter()
    store = Store(root)
    tokens.set_method(store.config.tokens_method)
    report = ingest(store, [str(path)], fmt, SESSION)
    seconds = time.perf_counter() - start
    return {
        "seconds": seconds,
        "added": report.turns_added,
        "duplicates": report.duplicates,
        "sessions": sorted(report.sessions),
        "rejected": len(report.rejected),
        "errors": report.errors,
        "fsync": store.config.fsync,
    }


def _child_stats(root: Path) -> dict[str, Any]:
    from ccm import tokens
    from ccm.store import Store

    store = Store(root)
    tokens.set_method(store.config.tokens_method)
    cache = store.cache / "stats" / f"{SESSION}.json"
    if cache.exists():
        raise SystemExit(f"{cache} exists before the cold run: not a fresh root")
    start = time.perf_counter()
    method = tokens.method_in_use()  # loads the BPE
    load_s = time.perf_counter() - start
    start = time.perf_counter()
    cold = store.session_stats(SESSION)
    cold_s = time.perf_counter() - start
    start = time.perf_counter()
    warm = store.session_stats(SESSION)
    warm_s = time.perf_counter() - start
    if warm != cold:
        raise SystemExit("warm session_stats differs from cold")
    return {
        "method": method,
        "bpe_load_seconds": load_s,
        "cold_seconds": cold_s,
        "warm_seconds": warm_s,
        "turns": cold.turns,
        "tokens": cold.tokens,
    }


def _child(args: argparse.Namespace) -> None:
    path, root = Path(args.file), Path(args.root)
    if args.child != "parse":
        import ccm.ingest.pipeline  # noqa: F401  (imported before the clock starts)
    base = _peak_rss_bytes(resource.RUSAGE_SELF)  # the interpreter, before the work
    if args.child == "parse":
        result = _child_parse(path)
    elif args.child in ("ingest", "reimport"):
        result = _child_ingest(path, root, args.format)
    else:
        result = _child_stats(root)
    result["base_rss_bytes"] = base
    result["peak_rss_bytes"] = _peak_rss_bytes(resource.RUSAGE_SELF)
    print(json.dumps(result))


# ---------------------------------------------------------------------------
# the parent


def _run_child(phase: str, path: Path, root: Path, fmt: str) -> dict[str, Any]:
    command = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        phase,
        "--file",
        str(path),
        "--root",
        str(root),
        "--format",
        fmt,
    ]
    done = subprocess.run(command, stdout=subprocess.PIPE, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"benchmark child {phase!r} failed with exit code {done.returncode}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    result["children_peak_rss_bytes"] = _peak_rss_bytes(resource.RUSAGE_CHILDREN)
    return result


def _command(root: Path, *args: str) -> dict[str, Any]:
    """``ccm --root ROOT ARGS`` in a process of its own: its wall time and peak RSS."""
    command = [sys.executable, "-m", "ccm", "--root", str(root), *args]
    start = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise SystemExit(f"`ccm {' '.join(args)}` failed with exit code {child.returncode}")
    rss = usage.ru_maxrss if sys.platform == "darwin" else usage.ru_maxrss * 1024
    return {"seconds": seconds, "peak_rss_bytes": rss}


def _phase(name: str, seconds: float, turns: int, size: int, rss: int) -> dict[str, Any]:
    return {
        "name": name,
        "seconds": round(seconds, 4),
        "turns_per_s": round(turns / seconds, 1) if seconds else None,
        "mb_per_s": round(size / MB / seconds, 2) if seconds else None,
        "peak_rss_mb": round(rss / MB, 1),
    }


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    path = work / "session.jsonl"
    root = work / "knowledge"
    if root.exists():
        raise SystemExit(f"{root} exists: --keep needs a folder without a knowledge/ in it")
    work.mkdir(parents=True, exist_ok=True)

    start = time.perf_counter()
    info = write_session(path, args.turns, seed=args.seed, fmt=args.format)
    generate_s = time.perf_counter() - start
    size = info.bytes

    # ingest runs first, so RUSAGE_CHILDREN right after it is its peak alone
    first = _run_child("ingest", path, root, args.format)
    if first["errors"] or first["rejected"] or first["added"] != args.turns:
        raise SystemExit(f"ingest added {first['added']} of {args.turns} turns: {first}")
    again = _run_child("reimport", path, root, args.format)
    if again["added"] != 0 or again["errors"] or again["rejected"]:
        raise SystemExit(f"re-import was not idempotent: it added {again['added']} turns")
    parse = _run_child("parse", path, root, args.format)
    stats = _run_child("stats", path, root, args.format)
    if stats["turns"] != args.turns:
        raise SystemExit(f"session_stats counts {stats['turns']} turns, not {args.turns}")

    commands = {}
    if args.commands:
        for key, name, options in (
            ("rebuild_first", "ccm rebuild (1st)", ()),
            ("rebuild", "ccm rebuild", ()),
            ("rebuild_index", "ccm rebuild --index", ("--index",)),
        ):
            done = _command(root, "rebuild", SESSION, *options)
            commands[key] = _phase(name, done["seconds"], args.turns, size, done["peak_rss_bytes"])

    ingest_s = first["seconds"]
    turns_per_s = args.turns / ingest_s if ingest_s else 0.0
    return {
        "turns": args.turns,
        "format": args.format,
        "seed": args.seed,
        "records": info.records,
        "roles": dict(sorted(info.roles.items())),
        "file_mb": round(size / MB, 2),
        "generate_seconds": round(generate_s, 3),
        "phases": {
            "parse": {
                **_phase(
                    "bare JSON parse", parse["seconds"], args.turns, size, parse["peak_rss_bytes"]
                ),
                "rounds": parse["rounds"],
            },
            "ingest": {
                **_phase("ingest", ingest_s, args.turns, size, first["children_peak_rss_bytes"]),
                "added": first["added"],
                "fsync": first["fsync"],
                "base_rss_mb": round(first["base_rss_bytes"] / MB, 1),
            },
            "reimport": {
                **_phase("re-import", again["seconds"], args.turns, size, again["peak_rss_bytes"]),
                "added": again["added"],
                "duplicates": again["duplicates"],
            },
            **commands,
        },
        "ingest_over_parse": round(ingest_s / parse["seconds"], 2),
        "session_stats": {
            "method": stats["method"],
            "tokens": stats["tokens"],
            "bpe_load_seconds": round(stats["bpe_load_seconds"], 4),
            "cold_seconds": round(stats["cold_seconds"], 4),
            "warm_seconds": round(stats["warm_seconds"], 6),
        },
        "goal": {
            "turns_per_s": GOAL_TURNS_PER_S,
            "measured": round(turns_per_s, 1),
            "met": turns_per_s >= GOAL_TURNS_PER_S,
        },
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "kept": str(work) if args.keep else None,
    }


def print_table(result: dict[str, Any]) -> None:
    roles = ", ".join(f"{role} {n:,}" for role, n in result["roles"].items())
    print(
        f"ccm ingest benchmark: {result['turns']:,} turns, {result['format']}, "
        f"seed {result['seed']}"
    )
    print(f"input: {result['file_mb']:.1f} MB, {result['records']:,} records ({roles})")
    print(f"generated in {result['generate_seconds']:.2f} s (not counted)")
    print()
    print(f"{'phase':<24}{'seconds':>10}{'turns/s':>12}{'MB/s':>9}{'peak RSS MB':>14}")
    for phase in result["phases"].values():
        name = phase["name"]
        if name == "ingest":
            name = "ingest (fsync on)" if phase["fsync"] else "ingest (fsync off)"
        elif name == "re-import":
            name = f"re-import (+{phase['added']})"
        elif name == "bare JSON parse":
            name = f"bare parse (best of {phase['rounds']})"
        print(
            f"{name:<24}{phase['seconds']:>10.3f}{phase['turns_per_s']:>12,.0f}"
            f"{phase['mb_per_s']:>9.1f}{phase['peak_rss_mb']:>14.1f}"
        )
    print()
    print(f"ingest / bare parse: {result['ingest_over_parse']:.2f}x")
    stats = result["session_stats"]
    print(
        f"session_stats: cold {stats['cold_seconds']:.3f} s ({stats['tokens']:,} tokens, "
        f"{stats['method']}; BPE load {stats['bpe_load_seconds']:.3f} s apart), "
        f"warm {stats['warm_seconds']:.6f} s"
    )
    goal = result["goal"]
    verdict = "met" if goal["met"] else "NOT met"
    print(
        f"goal >= {goal['turns_per_s']:,} turns/s for import alone: {verdict} "
        f"({goal['measured']:,.0f} turns/s)"
    )
    if result["kept"]:
        print(f"files kept in {result['kept']}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description="Benchmark ccm ingest on a generated session.",
    )
    parser.add_argument("--turns", type=int, default=100_000, help="turns to generate")
    parser.add_argument("--seed", type=int, default=0, help="generator seed")
    parser.add_argument("--format", choices=FORMATS, default="jsonl", help="input format")
    parser.add_argument("--keep", metavar="DIR", help="keep the session and knowledge root here")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--commands",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also time `ccm rebuild` (twice) and `ccm rebuild --index` as commands",
    )
    parser.add_argument(
        "--child", choices=("parse", "ingest", "reimport", "stats"), help=argparse.SUPPRESS
    )
    parser.add_argument("--file", help=argparse.SUPPRESS)
    parser.add_argument("--root", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        if not args.file or not args.root:
            parser.error("--child needs --file and --root")
        _child(args)
        return
    if args.turns < 1:
        parser.error("--turns must be at least 1")
    if args.commands:
        compile_bytecode()
    if args.keep:
        result = run(args, Path(args.keep).expanduser().absolute())
    else:
        with tempfile.TemporaryDirectory(prefix="ccm-bench-") as work:
            result = run(args, Path(work))
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print_table(result)


if __name__ == "__main__":
    main()
