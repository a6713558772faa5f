"""Timings as the benchmarks report them: milliseconds, p50, p95 and the worst; the
ratio of two figures; progress lines on standard error."""

from __future__ import annotations

import json
import os
import statistics
import sys
from typing import Any


def summary(seconds: list[float], target_ms: float | None = None) -> dict[str, Any]:
    """`seconds` (one per run) as ``runs``, ``p50_ms``, ``p95_ms``, ``max_ms``, and the
    ratio of the p95 to `target_ms` when one is given."""
    ordered = sorted(seconds)
    p95 = ordered[round(0.95 * (len(ordered) - 1))]
    found: dict[str, Any] = {
        "runs": len(ordered),
        "p50_ms": round(statistics.median(ordered) * 1000, 1),
        "p95_ms": round(p95 * 1000, 1),
        "max_ms": round(ordered[-1] * 1000, 1),
    }
    if target_ms is not None:
        found["p95_target_ratio"] = round(p95 * 1000 / target_ms, 2)
    return found


def ratio(high: float, low: float) -> float | None:
    """`high` / `low` to two places (None when `low` is 0): how a figure grows with size."""
    return round(high / low, 2) if low else None


def report_json(
    results: list[dict[str, Any]], ratios: dict[str, Any], sizes: list[int], **extra: Any
) -> None:
    """A size benchmark's report as one JSON object on standard output: the figures of
    each size, the ratios of the p50s between the largest and the smallest size, what
    else the benchmark reports (`extra`), and the CPUs they ran on."""
    found = {"sizes": results, "ratio_p50": ratios, "ratio_sizes": [sizes[0], sizes[-1]]}
    print(json.dumps({**found, **extra, "cpus": os.cpu_count()}))


def progress(bench: str, message: str) -> None:
    """A progress line of benchmark `bench` on standard error (standard output is the
    report)."""
    print(f"[{bench} bench] {message}", file=sys.stderr, flush=True)


def compile_bytecode() -> None:
    """Compile ccm's modules to bytecode, as pip does when it installs a package, for
    benchmarks that time ccm's commands as whole processes: where
    ``PYTHONDONTWRITEBYTECODE`` is set (a container, a CI), each process would
    otherwise compile every module from source, some 0.1 s of its start that no
    installed ccm spends."""
    import compileall
    from pathlib import Path

    compileall.compile_dir(Path(__file__).resolve().parent.parent / "ccm", quiet=1)
