"""Benchmark the embedding models of hybrid recall (``recall.model``): what a turn and a
question cost each.

    .venv/bin/python benchmarks/embed.py [--locomo FILE] [--questions 200] [--json]

Turns and questions come from LoCoMo-format conversations: the two written for the tests
(``tests/fixtures/semantic/``, German and Portuguese, 212 turns) unless ``--locomo``
names a file (the LoCoMo development subset: 2,080 turns). For each model installed here,
in this process:

* load: the first ``semantic.encoder(name)`` (weights mapped or read);
* turns: every turn embedded as ``Index.embed`` does it, in batches of 256, per turn;
* a long turn: 20 turns of 2,000 characters (what of a turn is embedded), per turn;
* a question: ``query`` one at a time, p50/p95 (what a recall adds to its ranking).

A model that is not installed is reported as such, with the reason. Nothing downloads.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.timing import progress, ratio, summary  # noqa: E402
from ccm import semantic  # noqa: E402
from ccm.index import EMBED_BATCH  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures" / "semantic"


def conversations(paths: list[Path]) -> tuple[list[str], list[str]]:
    """The turns' texts and the questions of LoCoMo-format files."""
    turns: list[str] = []
    questions: list[str] = []
    for path in paths:
        samples = json.loads(path.read_text(encoding="utf-8"))
        for sample in samples if isinstance(samples, list) else [samples]:
            for key, value in sample["conversation"].items():
                if key.startswith("session_") and isinstance(value, list):
                    turns.extend(str(turn["text"]) for turn in value)
            questions.extend(str(qa["question"]) for qa in sample.get("qa", []))
    return turns, questions


def measure(name: str, turns: list[str], questions: list[str]) -> dict[str, Any]:
    why = semantic.available(name)
    if why is not None:
        return {"model": name, "unavailable": why}
    started = time.perf_counter()
    encoder = semantic.encoder(name)
    load = time.perf_counter() - started
    encoder.passages(turns[:8])  # warm: first-call allocations are not the model's cost
    started = time.perf_counter()
    for start in range(0, len(turns), EMBED_BATCH):
        encoder.passages(turns[start : start + EMBED_BATCH])
    per_turn = (time.perf_counter() - started) / len(turns)
    long = ["the build failed on the arm runner again, " * 50] * 20
    started = time.perf_counter()
    encoder.passages([text[: semantic.MAX_CHARS] for text in long])
    per_long = (time.perf_counter() - started) / len(long)
    asked = []
    for question in questions:
        started = time.perf_counter()
        encoder.query(question)
        asked.append(time.perf_counter() - started)
    return {
        "model": name,
        "load_ms": round(load * 1000, 1),
        "turn_ms": round(per_turn * 1000, 2),
        "long_turn_ms": round(per_long * 1000, 1),
        "query": summary(asked),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--locomo", type=Path, help="LoCoMo-format JSON to take turns from")
    parser.add_argument("--questions", type=int, default=200, help="questions to time")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    paths = [args.locomo] if args.locomo else sorted(FIXTURES.glob("multilingual_*.json"))
    turns, questions = conversations(paths)
    questions = questions[: args.questions]
    results = []
    for name in semantic.MODELS:
        progress("embed", f"{name}: {len(turns)} turns, {len(questions)} questions")
        results.append(measure(name, turns, questions))
    measured = {r["model"]: r for r in results if "unavailable" not in r}
    ratios = {}
    if len(measured) == 2:
        e5, minilm = (measured[name] for name in semantic.MODELS)
        ratios = {
            "turn": ratio(e5["turn_ms"], minilm["turn_ms"]),
            "long_turn": ratio(e5["long_turn_ms"], minilm["long_turn_ms"]),
            "query_p50": ratio(e5["query"]["p50_ms"], minilm["query"]["p50_ms"]),
        }
    if args.json:
        print(json.dumps({"turns": len(turns), "results": results, "ratio_e5_to_minilm": ratios}))
        return
    print(f"{len(turns)} turns, {len(questions)} questions")
    print("model       load ms  per turn ms  long turn ms  query p50 ms  query p95 ms")
    for r in results:
        if "unavailable" in r:
            print(f"{r['model']:<10}  not installed: {r['unavailable']}")
            continue
        print(
            f"{r['model']:<10}  {r['load_ms']:>7.1f}  {r['turn_ms']:>11.2f}  "
            f"{r['long_turn_ms']:>12.1f}  {r['query']['p50_ms']:>12.1f}  {r['query']['p95_ms']:>12.1f}"
        )
    if ratios:
        print(
            "e5-small / minilm: "
            + ", ".join(f"{key} x{value}" for key, value in ratios.items() if value is not None)
        )


if __name__ == "__main__":
    main()
