"""Benchmark the conclusion graph on generated conclusions.

    .venv/bin/python benchmarks/graph.py [--nodes 100000] [--seed 0] [--json]

Generates `--nodes` conclusion nodes like a long-lived knowledge root: sessions of
about 100 conclusions, each session on a few topic words drawn from a Zipfian
vocabulary (a few words everywhere, most words rare), kinds in realistic shares
(decisions, resolutions, insights, tasks, confirmations...), a third of them said by
the assistant (base confidence x0.7), some restated in later sessions, some decisions
reversed ("Change of plan: switch to X instead of Y") and some facts corrected
("Actually, the root cause was ..."). Then times, in this process:

* ``link`` (edge detection with blocking on rare terms),
* ``resolve`` (statuses from conflicts),
* ``propagate`` (confidence to a fixed point; sweeps and the last change reported),
  on the linked graph and again with random supports and derivations added up to 5
  edges a node, the density the confidence target is stated for.

Targets from the sleep issue (reported, never enforced): on 100k nodes ``link`` well
under a minute, confidence on ~500k edges <= 10 s.
"""

from __future__ import annotations

import argparse
import bisect
import dataclasses
import itertools
import json
import random
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from ccm.sleep.graph import Edge, Node, link, propagate, resolve  # noqa: E402

TARGETS = {"link_s": 60.0, "dense_confidence_s": 10.0}
DENSITY = 5  # edges a node for the dense confidence run
SESSION_SIZE = 100
VOCABULARY = 20_000
TOOLS = 400
SYLLABLES = [
    "ka",
    "lo",
    "mi",
    "ren",
    "tas",
    "vo",
    "dur",
    "pel",
    "si",
    "nor",
    "bex",
    "fa",
    "qui",
    "zan",
    "tor",
    "lu",
    "gra",
    "mep",
    "ondo",
    "wix",
]
KINDS = [
    ("decision", 0.25),
    ("resolution", 0.18),
    ("insight", 0.15),
    ("task", 0.14),
    ("confirmation", 0.1),
    ("rejection", 0.06),
    ("preference", 0.06),
    ("requirement", 0.06),
]
BASE = {
    "decision": 0.85,
    "resolution": 0.9,
    "insight": 0.7,
    "task": 0.8,
    "confirmation": 0.75,
    "rejection": 0.75,
    "preference": 0.8,
    "requirement": 0.8,
}


class Zipf:
    """Words drawn with probability proportional to 1 / rank^1.07."""

    def __init__(self, words: list[str], rng: random.Random) -> None:
        self.words = words
        self.cumulative = list(itertools.accumulate(1 / (r + 1) ** 1.07 for r in range(len(words))))
        self.rng = rng

    def __call__(self) -> str:
        point = self.rng.random() * self.cumulative[-1]
        return self.words[bisect.bisect_left(self.cumulative, point)]


def vocabulary(size: int, rng: random.Random) -> list[str]:
    seen: dict[str, None] = {}
    while len(seen) < size:
        word = "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4)))
        seen.setdefault(word, None)
    return list(seen)


def generate(count: int, seed: int) -> list[Node]:
    """`count` conclusion nodes, always the same ones for the same seed."""
    rng = random.Random(seed)
    word = Zipf(vocabulary(VOCABULARY, rng), rng)
    tools = [t.capitalize() for t in vocabulary(TOOLS, random.Random(seed + 1))]
    kinds, shares = zip(*KINDS, strict=True)
    nodes: list[Node] = []
    for session_number in range(0, (count + SESSION_SIZE - 1) // SESSION_SIZE):
        session = f"s{session_number:05d}"
        start = 1_700_000_000 + session_number * 3600
        project = [word() for _ in range(3)]
        chosen: list[tuple[int, str, list[str]]] = []  # (node index, tool, subject words)
        for turn in range(1, min(SESSION_SIZE, count - len(nodes)) + 1):
            kind = rng.choices(kinds, shares)[0]
            w = [word() for _ in range(6)]
            superseded: int | None = None
            tool = rng.choice(tools)
            if kind == "decision" and chosen and rng.random() < 0.15:
                superseded, old, subject = rng.choice(chosen)
                text = f"Change of plan: switch to {tool} for the {' '.join(subject)} instead of {old}."
            elif kind == "decision":
                text = f"Decision: we use {tool} for the {w[0]} {w[1]} because {w[2]} {w[3]}."
                chosen.append((len(nodes), tool, w[:2]))
            elif kind == "insight" and rng.random() < 0.1:
                text = f"Actually, the root cause was {w[0]} {w[1]} in the {project[0]} {w[2]}."
            elif kind == "insight":
                text = f"The root cause was {w[0]} {w[1]} in the {project[0]} {w[2]}."
            elif kind == "resolution":
                text = f"That fixed it: the {w[0]} {w[1]} works now after {w[2]} {w[3]}."
            elif kind == "task":
                text = f"Done: the {w[0]} {w[1]} is deployed with {w[2]}."
            elif kind == "confirmation":
                text = f"Yes, store the {w[0]} as {w[1]} {w[2]}."
            elif kind == "rejection":
                text = f"{tool} is ruled out because the {w[0]} {w[1]} is too {w[2]}."
            elif kind == "preference":
                text = f"I prefer {tool} over {rng.choice(tools)} for {w[0]} {w[1]}."
            else:
                text = f"The {w[0]} {w[1]} must always {w[2]} {w[3]}."
            if nodes and rng.random() < 0.08:  # a restatement of an earlier conclusion
                earlier = nodes[rng.randrange(max(0, len(nodes) - 5000), len(nodes))]
                kind, text = earlier.kind, earlier.text.replace(".", f" {w[4]}.", 1)
            assistant = rng.random() < 0.35
            node = Node(
                id=f"{session}/seg_{turn}",
                session=session,
                segment=f"seg_{turn}",
                kind=kind,
                text=text,
                turn=turn,
                ts=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(start + turn * 30)),
                topic=(project[0], project[1 + turn % 2], w[5]),
                base=round(BASE[kind] * (0.7 if assistant else 1.0), 3),
            )
            if superseded is not None and rng.random() < 0.5:
                nodes[superseded] = dataclasses.replace(nodes[superseded], superseded_by=node.id)
            nodes.append(node)
    return nodes


def densify(nodes: list[Node], edges: list[Edge], seed: int) -> list[Edge]:
    """`edges` and random supports and derivations, up to DENSITY edges a node."""
    rng = random.Random(seed)
    ids = [node.id for node in nodes]
    extra = []
    for _ in range(DENSITY * len(nodes) - len(edges)):
        source, target = rng.sample(ids, 2)
        kind = rng.choice(("supports", "supports", "derived_from", "generalizes"))
        extra.append(Edge(source, target, kind, "random", round(rng.uniform(0.2, 0.9), 3)))
    return [*edges, *extra]


def timed(call: Any) -> tuple[Any, float]:
    """What `call()` returns, and the seconds it took."""
    start = time.perf_counter()
    result = call()
    return result, time.perf_counter() - start


def print_verdicts(result: dict[str, Any], targets: dict[str, float], prefix: str = "") -> None:
    """One line a target: the measured figure, the limit, and whether it was met."""
    for key, limit in targets.items():
        verdict = "met" if result[key] <= limit else "NOT met"
        print(f"{prefix}{key} {result[key]} (target <= {limit}): {verdict}")


def measure(count: int, seed: int) -> dict[str, Any]:
    nodes, generated = timed(lambda: generate(count, seed))
    edges, linking = timed(lambda: link(nodes))
    resolution, resolving = timed(lambda: resolve(nodes, edges))
    scores, scoring = timed(lambda: propagate(nodes, edges, resolution.status))
    dense = densify(nodes, edges, seed)
    crowded, crowding = timed(lambda: propagate(nodes, dense, resolution.status))
    values = list(scores.score.values())
    return {
        "nodes": len(nodes),
        "edges": len(edges),
        "edge_types": dict(sorted(Counter(e.type for e in edges).items())),
        "statuses": dict(sorted(Counter(resolution.status.values()).items())),
        "conflicts": len(resolution.conflicts),
        "generate_s": round(generated, 3),
        "link_s": round(linking, 3),
        "resolve_s": round(resolving, 3),
        "confidence_s": round(scoring, 3),
        "sweeps": scores.sweeps,
        "last_change": scores.delta,
        "converged": scores.converged,
        "mean_score": round(sum(values) / len(values), 4) if values else 0.0,
        "dense_edges": len(dense),
        "dense_confidence_s": round(crowding, 3),
        "dense_sweeps": crowded.sweeps,
        "dense_converged": crowded.converged,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=100_000, help="conclusion nodes to generate")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    result = measure(args.nodes, args.seed)
    if args.json:
        print(json.dumps({"result": result, "targets": TARGETS}))
        return
    print("ccm conclusion graph benchmark (library calls, this machine)")
    print(f"nodes {result['nodes']}, edges {result['edges']}: {result['edge_types']}")
    print(f"statuses {result['statuses']}, conflicts {result['conflicts']}")
    print(
        f"link {result['link_s']} s, resolve {result['resolve_s']} s, "
        f"confidence {result['confidence_s']} s "
        f"({result['sweeps']} sweeps, last change {result['last_change']:.1e}, "
        f"converged: {result['converged']}), mean score {result['mean_score']}"
    )
    print(
        f"confidence on {result['dense_edges']} edges: {result['dense_confidence_s']} s "
        f"({result['dense_sweeps']} sweeps, converged: {result['dense_converged']})"
    )
    print_verdicts(result, TARGETS, f"{result['nodes']} nodes: ")


if __name__ == "__main__":
    main()
