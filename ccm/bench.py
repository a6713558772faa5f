"""``ccm bench locomo``: how much of what matters ends up in the context.

For each LoCoMo conversation: import it as one session (each LoCoMo session's date as
its turns' time), derive its tiers and index it; then, for each question with
evidence, assemble the context with the question as the query, at each budget, and
measure evidence recall: the share of the question's evidence turns whose text is in
the context. Two baselines are measured the same way: a recency window (the latest
turns that fit) and BM25 over single turns. Recall is reported overall, per category and
per conversation.

Evidence ids are normalised (``"D8:6; D9:17"``, ``"D:11:26"``, ``"D30:05"``); ids that
point at no turn are reported and skipped.
"""

from __future__ import annotations

import json
import sqlite3
import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ccm import derive, patterns, tokens
from ccm.context import _assemble
from ccm.errors import FormatError
from ccm.index import Index, query_words, render_turn
from ccm.ingest import locomo
from ccm.ingest.pipeline import append_session
from ccm.store import Store, slug_session_id, utc_now

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
SCORED = (1, 2, 3, 4)
_EVIDENCE = patterns.compile(r"D\s*:?\s*(\d+)\s*:\s*(\d+)")


def evidence_ids(raw: Any) -> list[str]:
    """Clean ``D<session>:<turn>`` ids from LoCoMo's evidence strings."""
    found: list[str] = []
    for item in raw if isinstance(raw, list) else [raw]:
        for match in _EVIDENCE.finditer(str(item)):
            dia = f"D{int(match.group(1))}:{int(match.group(2))}"
            if dia not in found:
                found.append(dia)
    return found


def _percentile(values: list[float], share: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


class MeasuredSession:
    """One derived and indexed session, and the ways of filling a context from it that
    the benchmarks compare: ccm's assembly, a recency window and BM25 over single turns.
    Each method takes the query (None or "" for none) and a budget in tokens."""

    def __init__(self, store: Store, session: str, derived: derive.Derived | None = None) -> None:
        self.store = store
        self.session = session
        self.derived = derived if derived is not None else derive.update(store, session)
        self.index = Index(store)
        self.index.update(session, self.derived.tiers.manifest)
        self.turns, _, _ = store.read_turns(session)
        self._hybrid: Index | None = None  # the semantic method's index, made when first used
        self.single = sqlite3.connect(":memory:")
        self.single.execute("CREATE VIRTUAL TABLE t USING fts5(text, tokenize='porter unicode61')")
        self.rendered = [render_turn(t) for t in self.turns]
        self.costs = [tokens.count_tokens(text) + 1 for text in self.rendered]
        self.single.executemany(
            "INSERT INTO t(rowid, text) VALUES (?, ?)", enumerate(self.rendered)
        )

    def close(self) -> None:
        self.index.close()
        if self._hybrid is not None:
            self._hybrid.close()
        self.single.close()

    def semantic(self, question: str | None, budget: int) -> str:
        """ccm with hybrid recall (the semantic extra): the same context assembly, with
        embedding similarity added to the ranking."""
        if self._hybrid is None:
            self._hybrid = Index(self.store, semantic=True)
            self._hybrid.embed(self.session)
        return _assemble(
            self.store, self.session, budget, question or None, self.derived, self._hybrid
        ).text()

    def ccm(self, question: str | None, budget: int) -> str:
        return _assemble(
            self.store, self.session, budget, question or None, self.derived, self.index
        ).text()

    def recency(self, question: str | None, budget: int) -> str:
        """The latest rendered turns that fit the budget."""
        chosen: list[str] = []
        used = 0
        for text, cost in zip(reversed(self.rendered), reversed(self.costs), strict=True):
            if used + cost > budget:
                break
            chosen.append(text)
            used += cost
        return "\n".join(reversed(chosen))

    def bm25(self, question: str | None, budget: int) -> str:
        """The single turns BM25 ranks highest for the query, as many as fit; with no
        query at all, the recency window."""
        if not question:
            return self.recency(question, budget)
        words = query_words(question)
        if not words:
            return ""
        match = " OR ".join(f'"{w}"' for w in words)
        chosen: list[str] = []
        used = 0
        for (rowid,) in self.single.execute(
            "SELECT rowid FROM t WHERE t MATCH ? ORDER BY bm25(t) LIMIT 200", (match,)
        ):
            cost = self.costs[rowid]
            if used + cost > budget:
                continue
            chosen.append(self.rendered[rowid])
            used += cost
        return "\n".join(chosen)


class _Conversation(MeasuredSession):
    """One LoCoMo sample imported into a private knowledge root."""

    def __init__(self, sample: dict[str, Any], root: Path, model: str | None = None) -> None:
        self.sample_id = str(sample.get("sample_id") or "locomo")
        session = slug_session_id(self.sample_id)
        store = Store(root / session)
        store.root.mkdir(parents=True)
        chosen = f"recall: {{model: {model}}}\n" if model else ""
        (store.root / "config.yaml").write_text("ingest: {fsync: false}\n" + chosen)
        source, _ = locomo.sample_session(sample, session)
        append_session(store, source, utc_now())
        super().__init__(store, session)
        self.by_dia = {
            t["meta"]["dia_id"]: t
            for t in self.turns
            if isinstance((t.get("meta") or {}).get("dia_id"), str)
        }


METHODS: dict[str, Callable[[MeasuredSession, str | None, int], str]] = {
    "ccm": MeasuredSession.ccm,
    "recency": MeasuredSession.recency,
    "bm25-turns": MeasuredSession.bm25,
    "ccm-semantic": MeasuredSession.semantic,  # needs the extra
}


def default_methods(model: str | None = None) -> list[str]:
    """The methods measured when none is named: ccm with semantic recall too, where the
    embedding model (`recall.model`'s default unless named) is installed."""
    from ccm import semantic

    extra = ["ccm-semantic"] if semantic.available(model or semantic.DEFAULT_MODEL) is None else []
    return ["ccm", *extra, "recency", "bm25-turns"]


def run_locomo(
    path: Path,
    budgets: list[int],
    methods: list[str] | None = None,
    progress: Callable[[str], None] | None = None,
    model: str | None = None,
) -> dict[str, Any]:
    """Measure evidence recall on every conversation in `path` (see the module docstring);
    `model` is the embedding model of the ccm-semantic method (`recall.model`)."""
    try:
        samples = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise FormatError(
            f"{path}: cannot read LoCoMo JSON ({exc})", "pass the locomo10.json file"
        ) from exc
    if isinstance(samples, dict):
        samples = [samples]
    chosen = methods or default_methods(model)
    scores: dict[tuple[str, int], dict[str, Any]] = {
        (m, b): {
            "hits": defaultdict(list),
            "conversations": defaultdict(list),
            "tokens": [],
            "latency": [],
        }
        for m in chosen
        for b in budgets
    }
    unresolved: list[str] = []
    questions = 0
    with tempfile.TemporaryDirectory(prefix="ccm-locomo-") as tmp:
        for sample in samples:
            conversation = _Conversation(sample, Path(tmp), model)
            try:
                for qa in sample.get("qa", []):
                    category = int(qa.get("category", 0))
                    ids = evidence_ids(qa.get("evidence", []))
                    missing = [i for i in ids if i not in conversation.by_dia]
                    unresolved.extend(f"{conversation.sample_id}:{i}" for i in missing)
                    wanted = [
                        conversation.by_dia[i]["content"] for i in ids if i in conversation.by_dia
                    ]
                    if not wanted or category not in CATEGORIES:
                        continue
                    questions += 1
                    for method in chosen:
                        for budget in budgets:
                            start = time.perf_counter()
                            text = METHODS[method](conversation, str(qa["question"]), budget)
                            elapsed = time.perf_counter() - start
                            found = sum(1 for content in wanted if content in text) / len(wanted)
                            record = scores[(method, budget)]
                            record["hits"][category].append(found)
                            if category in SCORED:
                                record["conversations"][conversation.sample_id].append(found)
                            record["tokens"].append(tokens.count_tokens(text))
                            record["latency"].append(elapsed * 1000)
            finally:
                conversation.close()
            if progress:
                progress(conversation.sample_id)
    results = []
    for (method, budget), record in scores.items():
        scored = [v for c in SCORED for v in record["hits"].get(c, [])]
        results.append(
            {
                "method": method,
                "budget": budget,
                "recall": round(statistics.fmean(scored), 4) if scored else 0.0,
                "by_category": {
                    str(c): round(statistics.fmean(record["hits"][c]), 4)
                    for c in sorted(record["hits"])
                },
                # how far one conversation is from another: what a held-out one may give
                "by_conversation": {
                    name: round(statistics.fmean(found), 4)
                    for name, found in record["conversations"].items()
                },
                "tokens_mean": round(statistics.fmean(record["tokens"]), 1)
                if record["tokens"]
                else 0,
                "latency_ms_p50": round(_percentile(record["latency"], 0.5), 2),
                "latency_ms_p95": round(_percentile(record["latency"], 0.95), 2),
            }
        )
    return {
        "file": str(path),
        "conversations": len(samples),
        "questions": questions,
        "unresolved_evidence": sorted(set(unresolved)),
        "results": results,
    }
