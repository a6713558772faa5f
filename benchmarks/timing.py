"""Timings as the benchmarks report them: milliseconds, p50, p95 and the worst."""

from __future__ import annotations

import statistics
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
