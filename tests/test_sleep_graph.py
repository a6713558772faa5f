"""The conclusion graph: what `link` finds, how `resolve` settles it, what `confidence` gives."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ccm.sleep.graph import (
    EDGE_TYPES,
    FACTOR,
    KEYS,
    MAX_SWEEPS,
    WINDOW,
    Edge,
    Node,
    confidence,
    explain,
    link,
    propagate,
    relink,
    resolve,
    to_networkx,
)


def node(
    session: str,
    number: int,
    kind: str,
    text: str,
    day: int,
    base: float = 0.85,
    topic: tuple[str, ...] = (),
    superseded_by: str | None = None,
) -> Node:
    return Node(
        id=f"{session}/seg_{number}",
        session=session,
        segment=f"seg_{number}",
        kind=kind,
        text=text,
        turn=number,
        ts=f"2026-03-{day:02d}T10:00:00Z",
        topic=topic,
        base=base,
        superseded_by=superseded_by,
    )


def supports(source: str, target: str, weight: float = 0.8) -> Edge:
    return Edge(source, target, "supports", "restates it", weight)


def edge_between(edges: list[Edge], source: str, target: str) -> Edge:
    found = [e for e in edges if (e.source, e.target) == (source, target)]
    assert len(found) == 1, edges
    return found[0]


SQLITE = node(
    "ledger",
    1,
    "decision",
    "We use SQLite for the ledger.",
    day=2,
    topic=("storage", "database"),
)
POSTGRES = node(
    "ledger", 5, "decision", "Decision: switch to Postgres.", day=9, topic=("storage", "database")
)
# the corpus of the determinism properties: every rule of `link` fires on some pair
CORPUS = [
    SQLITE,
    POSTGRES,
    node(
        "ledger",
        7,
        "decision",
        "Decision: we use SQLite with WAL mode, not Postgres, because there is a single writer "
        "and nothing needs network access.",
        day=3,
    ),
    node(
        "sync",
        2,
        "decision",
        "Decision: switch to Postgres, we now need network access from several hosts.",
        day=12,
    ),
    node("deploy", 9, "decision", "Let's keep it simple: a daily cron job backs up the file.", 4),
    node(
        "deploy",
        13,
        "decision",
        "Change of plan: we drop the cron job and use a systemd timer to back up the file instead.",
        day=4,
    ),
    node("bugs", 1, "insight", "The root cause was a missing index on the memo column.", 5, 0.49),
    node(
        "bugs",
        2,
        "insight",
        "Actually, the root cause was NULL references in the memo column.",
        day=6,
        base=0.7,
    ),
    node("money", 1, "requirement", "Always keep amounts as integer cents, never floats.", 1, 0.8),
    node("money", 2, "insight", "Keep amounts as integer cents and never floats.", 7, 0.7),
    node(
        "money",
        3,
        "decision",
        "Parse the amount column with Decimal and keep amounts as integer cents, never floats, "
        "in every parser.",
        day=8,
    ),
    node("dedup", 2, "decision", "Store a fingerprint over the date, amount and memo of a row.", 2),
    node(
        "dedup",
        3,
        "resolution",
        "That fixed it: the fingerprint column stops duplicate rows on re-import.",
        day=3,
        base=0.9,
    ),
]


# ---------------------------------------------------------------- link and resolve


def test_a_reversed_decision_ends_superseded() -> None:
    edges = link([POSTGRES, SQLITE])
    edge = edge_between(edges, POSTGRES.id, SQLITE.id)
    assert edge.type == "supersedes"
    assert "'use SQLite' vs 'switch to Postgres'" in edge.evidence
    settled = resolve([SQLITE, POSTGRES], edges)
    assert settled.status == {SQLITE.id: "superseded", POSTGRES.id: "active"}
    [conflict] = settled.conflicts
    assert (conflict.winner, conflict.loser, conflict.rule) == (POSTGRES.id, SQLITE.id, "choice")
    scores = confidence([SQLITE, POSTGRES], edges, settled.status)
    assert scores[SQLITE.id] <= FACTOR["superseded"] < scores[POSTGRES.id]


def test_a_reversal_quotes_what_was_said_and_unsaid() -> None:
    earlier, later = CORPUS[2], CORPUS[3]
    edge = edge_between(link([earlier, later]), later.id, earlier.id)
    assert edge.type == "supersedes"
    assert "'not Postgres' vs 'switch to Postgres'" in edge.evidence
    assert "same subject {access, network, Postgres}" in edge.evidence


def test_a_change_of_plan_supersedes_what_it_drops() -> None:
    cron, timer = CORPUS[4], CORPUS[5]
    edge = edge_between(link([cron, timer]), timer.id, cron.id)
    assert edge.type == "supersedes" and "drop the cron job" in edge.evidence


def test_unrelated_decisions_stay_active() -> None:
    nodes = [SQLITE, node("cli", 1, "decision", "We use click for the command line.", 5)]
    edges = link(nodes)
    assert not [e for e in edges if e.type in ("supersedes", "contradicts")]
    assert set(resolve(nodes, edges).status.values()) == {"active"}


def test_the_engines_superseded_by_becomes_an_edge() -> None:
    old = node("s", 1, "decision", "Let's use cron.", 1, superseded_by="s/seg_2")
    new = node("s", 2, "decision", "We go with a timer.", 2)
    [edge] = [e for e in link([old, new]) if e.type == "supersedes"]
    assert (edge.source, edge.target, edge.weight) == (new.id, old.id, 1.0)


def test_an_old_statement_never_overturns_a_newer_one() -> None:
    backwards = Edge(SQLITE.id, POSTGRES.id, "supersedes", "hand-made, pointing back in time", 1)
    settled = resolve([SQLITE, POSTGRES], [backwards])
    assert settled.status == {SQLITE.id: "superseded", POSTGRES.id: "active"}


def test_a_corrected_fact_ends_contradicted() -> None:
    wrong, right = CORPUS[6], CORPUS[7]
    edges = link([right, wrong])
    edge = edge_between(edges, right.id, wrong.id)
    assert edge.type == "contradicts"
    assert "'was a missing index' vs 'was NULL references'" in edge.evidence
    settled = resolve([wrong, right], edges)
    assert settled.status == {wrong.id: "contradicted", right.id: "active"}
    [conflict] = settled.conflicts
    assert conflict.rule == "truth" and conflict.winner == right.id
    assert "more confidence (0.70 > 0.49)" in conflict.reason
    scores = confidence([wrong, right], edges, settled.status)
    assert scores[wrong.id] <= FACTOR["contradicted"] < scores[right.id]


FIX = node("s", 1, "resolution", "The fingerprint column fixed the duplicates.", 1, 0.9)


@pytest.mark.parametrize(
    ("later", "confirmations", "winner", "why"),
    [
        # a user's later claim wins even at a lower base confidence
        (node("s", 2, "insight", "No, the memo column caused it.", 2, 0.7), [], "s/seg_2", "user"),
        # an assistant's unconfirmed claim does not
        (
            node("s", 2, "insight", "No, the memo column caused it.", 2, 0.49),
            [],
            "s/seg_1",
            "failed",
        ),
        # unless a confirmation backs it
        (
            node("s", 2, "insight", "No, the memo column caused it.", 2, 0.49),
            [node("s", 3, "confirmation", "Yes, the memo column.", 3, 0.75)],
            "s/seg_2",
            "confirmation s/seg_3 confirms",
        ),
    ],
)
def test_a_fact_goes_to_the_later_claim_only_with_evidence(
    later: Node, confirmations: list[Node], winner: str, why: str
) -> None:
    edges = [Edge(later.id, FIX.id, "contradicts", "hand-made", 0.8)]
    edges += [supports(c.id, later.id) for c in confirmations]
    settled = resolve([FIX, later, *confirmations], edges)
    [conflict] = settled.conflicts
    assert conflict.winner == winner and why in conflict.reason
    loser = later.id if winner == FIX.id else FIX.id
    assert settled.status[loser] == "contradicted" and settled.status[winner] == "active"


def test_a_general_statement_generalizes_the_specific_one() -> None:
    general, specific = CORPUS[9], CORPUS[10]
    edge = edge_between(link([specific, general]), general.id, specific.id)
    assert edge.type == "generalizes" and "Decimal" in edge.evidence


def test_a_later_conclusion_of_a_session_derives_from_an_earlier_one() -> None:
    plan, fix = CORPUS[11], CORPUS[12]
    edge = edge_between(link([plan, fix]), fix.id, plan.id)
    assert edge.type == "derived_from" and "{fingerprint, rows}" in edge.evidence


def test_restatements_in_other_sessions_support_each_other() -> None:
    rule = CORPUS[8]
    again = node(
        "later", 4, "requirement", "Always keep amounts as integer cents, never floats!", 20
    )
    edge = edge_between(link([rule, again]), again.id, rule.id)
    assert edge.type == "supports" and "in session later" in edge.evidence


def test_blocking_never_compares_all_pairs() -> None:
    nodes = [
        node(f"s{i // 100}", i, "decision", "We use SQLite for the ledger file.", 1 + i % 28)
        for i in range(2000)
    ]
    edges = link(nodes)
    # all 2000 say the same: comparing all pairs would give ~2 million edges
    assert 2000 <= len(edges) <= len(nodes) * (KEYS * WINDOW + 1)


def test_link_rejects_two_nodes_with_one_id() -> None:
    with pytest.raises(ValueError, match="share an id"):
        link([SQLITE, SQLITE])


@given(st.permutations(CORPUS))
def test_link_is_the_same_whatever_the_input_order(shuffled: list[Node]) -> None:
    assert link(shuffled) == link(CORPUS)


def test_link_output_is_sorted_and_clashes_point_back_in_time() -> None:
    edges = link(CORPUS)
    assert edges == sorted(edges, key=lambda e: (e.source, e.target, e.type))
    assert {e.type for e in edges} == set(EDGE_TYPES)
    when = {n.id: (n.ts, n.turn) for n in CORPUS}
    for edge in edges:
        if edge.type in ("supersedes", "contradicts"):
            assert when[edge.source] > when[edge.target], edge
        assert 0 <= edge.weight <= 1 and edge.evidence


TEMPLATES = (
    "Decision: we use {0} for the {1} {2}, not {3}.",
    "Change of plan: switch to {0} for the {1} {2} instead of {3}.",
    "That fixed it: the {1} {2} works now after the {3} change.",
    "So the root cause was {1} {2} in the {3} {0}.",
    "Actually, the root cause was {2} {1} in the {3} {0}.",
    "Always keep the {1} {2} out of the {3}.",
)
WORDS = ("sqlite", "postgres", "ledger", "cache", "importer", "memo", "cron", "index")


@st.composite
def conclusions(draw: st.DrawFn) -> list[Node]:
    """A few sessions' conclusions over a small vocabulary: many share rare terms, so
    windows fill and edges of every rule appear; ids repeat with other texts."""
    found: dict[str, Node] = {}
    for _ in range(draw(st.integers(0, 30))):
        words = draw(st.lists(st.sampled_from(WORDS), min_size=4, max_size=4))
        made = node(
            draw(st.sampled_from("abcd")),
            draw(st.integers(1, 8)),
            draw(st.sampled_from(("decision", "insight", "resolution"))),
            draw(st.sampled_from(TEMPLATES)).format(*words),
            day=draw(st.integers(1, 28)),
            topic=tuple(draw(st.lists(st.sampled_from(WORDS), max_size=2))),
        )
        found[made.id] = made
    return list(found.values())


@st.composite
def histories(draw: st.DrawFn) -> list[list[Node]]:
    """Runs over one growing set of conclusions: each run drops a few, adds and
    rewrites others (an id said again with another text), as sessions change."""
    current = {n.id: n for n in draw(conclusions())}
    runs = [list(current.values())]
    for _ in range(draw(st.integers(1, 3))):
        for gone in draw(st.lists(st.sampled_from(sorted(current)), max_size=3)) if current else []:
            current.pop(gone, None)
        current.update({n.id: n for n in draw(conclusions())[:4]})
        runs.append(list(current.values()))
    return runs


@settings(max_examples=40, deadline=None)
@given(histories())
def test_relink_after_any_changes_draws_the_edges_of_a_link_from_scratch(
    runs: list[list[Node]],
) -> None:
    memo: dict = {}
    for nodes in runs:
        edges, memo = relink(nodes, memo)
        assert edges == link(nodes)
        assert set(memo) == {n.id for n in nodes}


def test_relink_compares_again_only_what_a_change_touches(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import ccm.sleep.graph as graph

    nodes = [
        node(f"s{i}", 1, "decision", f"We use {WORDS[i % 8]} for the {WORDS[(i + 3) % 8]}.", 1)
        for i in range(40)
    ]
    later = node("s99", 1, "decision", "Switch to postgres for the memo instead.", 2)
    before, after = link(nodes), link([*nodes, later])
    _, memo = relink(nodes, {})
    compared: list[str] = []
    real = graph._compare
    monkeypatch.setattr(
        graph, "_compare", lambda fact, others: compared.append(fact.node.id) or real(fact, others)
    )
    assert relink(nodes, memo)[0] == before
    assert compared == []
    assert relink([*nodes, later], memo)[0] == after
    assert compared == [later.id]


# ---------------------------------------------------------------- confidence


def star(sessions: list[str]) -> tuple[list[Node], list[Edge]]:
    target = node("t", 1, "insight", "Retrieval practice beats rereading.", 1, 0.6)
    helpers = [
        node(session, 10 + i, "insight", "Testing yourself beats rereading.", 2 + i, 0.7)
        for i, session in enumerate(sessions)
    ]
    return [target, *helpers], [supports(h.id, target.id) for h in helpers]


def test_independent_sessions_give_more_confidence_than_one_sessions_echo() -> None:
    status: dict[str, str] = {}
    independent = confidence(*star(["a", "b", "c"]), status)["t/seg_1"]
    echoed = confidence(*star(["a", "a", "a"]), status)["t/seg_1"]
    single = confidence(*star(["a"]), status)["t/seg_1"]
    assert 0.6 < single < echoed < independent <= 1


def test_a_failed_contradiction_raises_the_targets_confidence() -> None:
    fact = node("s", 1, "insight", "The root cause was NULL references in the memo column.", 1, 0.7)
    challenge = node(
        "t",
        2,
        "insight",
        "Actually, the root cause was a missing index on the memo column.",
        2,
        0.49,
    )
    edges = link([fact, challenge])
    settled = resolve([fact, challenge], edges)
    assert settled.status == {fact.id: "active", challenge.id: "contradicted"}
    assert "challenge failed" in settled.conflicts[0].reason
    unchallenged = confidence([fact], [], {})[fact.id]
    challenged = confidence([fact, challenge], edges, settled.status)
    assert unchallenged == pytest.approx(0.7)
    assert challenged[fact.id] > unchallenged
    why = explain(fact.id, [fact, challenge], edges, settled.status, challenged)
    assert [f["id"] for f in why["failed_contradictions"]] == [challenge.id]


def test_supporters_pass_on_their_own_confidence() -> None:
    nodes, edges = star(["a"])
    helper = nodes[1]
    backed = node("z", 1, "insight", "Testing yourself beats rereading, said again.", 9, 0.9)
    strong = confidence([*nodes, backed], [*edges, supports(backed.id, helper.id)], {})
    weak = confidence(nodes, edges, {})
    assert strong[helper.id] > weak[helper.id]
    assert strong["t/seg_1"] > weak["t/seg_1"]


def test_a_cycle_converges_to_a_symmetric_fixed_point() -> None:
    ring = [node(f"s{i}", i, "insight", f"Claim {i}.", 1, 0.5) for i in range(40)]
    edges = [supports(ring[i].id, ring[(i + 1) % 40].id) for i in range(40)]
    edges += [
        Edge(ring[i].id, ring[(i + 7) % 40].id, "derived_from", "hand-made", 0.5) for i in range(40)
    ]
    result = propagate(ring, edges, {})
    assert result.converged and result.sweeps < MAX_SWEEPS and result.delta < 1e-9
    values = list(result.score.values())
    assert max(values) - min(values) < 1e-8
    assert 0.5 < values[0] < 1


def test_explain_names_the_supporters_and_their_sessions() -> None:
    nodes, edges = star(["b", "a"])
    scores = confidence(nodes, edges, {})
    why = explain("t/seg_1", nodes, edges, {}, scores)
    assert why["score"] == scores["t/seg_1"] and why["base"] == 0.6
    assert why["sessions"] == ["a", "b"]
    assert {s["id"] for s in why["supporters"]} == {"b/seg_10", "a/seg_11"}
    assert all(s["score"] == scores[s["id"]] for s in why["supporters"])
    with pytest.raises(ValueError, match="no node"):
        explain("missing", nodes, edges, {}, scores)


KINDS = ["decision", "preference", "resolution", "insight", "fix", "answer", "confirmation"]


@st.composite
def graphs(draw: st.DrawFn) -> tuple[list[Node], list[Edge]]:
    count = draw(st.integers(1, 25))
    nodes = [
        node(
            draw(st.sampled_from(["a", "b", "c"])) + str(i),
            i,
            draw(st.sampled_from(KINDS)),
            "x",
            draw(st.integers(1, 28)),
            draw(st.floats(0, 1)),
        )
        for i in range(count)
    ]
    ids = st.sampled_from([n.id for n in nodes] + ["unknown"])
    edges = draw(
        st.lists(
            st.builds(
                Edge, ids, ids, st.sampled_from(EDGE_TYPES), st.just("random"), st.floats(0, 1)
            ),
            max_size=80,
        )
    )
    return nodes, edges


@given(graphs())
def test_scores_stay_in_range_and_converge_on_any_graph(
    graph: tuple[list[Node], list[Edge]],
) -> None:
    nodes, edges = graph
    status = resolve(nodes, edges).status
    result = propagate(nodes, edges, status)
    assert result.converged
    assert set(result.score) == {n.id for n in nodes}
    for node_id, score in result.score.items():
        assert 0 <= score <= FACTOR[status[node_id]]
    reordered = propagate(list(reversed(nodes)), random.Random(0).sample(edges, len(edges)), status)
    assert reordered.score == result.score


def test_the_graph_exports_to_graphml() -> None:
    import networkx

    edges = link(CORPUS)
    status = resolve(CORPUS, edges).status
    scores = confidence(CORPUS, edges, status)
    graph = to_networkx(CORPUS, edges, scores, status)
    assert graph.number_of_nodes() == len(CORPUS) and graph.number_of_edges() == len(edges)
    assert graph.nodes[SQLITE.id]["status"] == "superseded"
    assert graph.nodes[SQLITE.id]["topic"] == "storage, database"
    graphml = "\n".join(networkx.generate_graphml(graph))
    assert 'key="d' in graphml and "supersedes" in graphml and "switch to Postgres" in graphml


@st.composite
def trust_graphs(draw: st.DrawFn) -> tuple[list[Node], list[Edge], dict[str, str]]:
    """Nodes of a few sessions with any edges between them (supports, derivations,
    generalizations, contradictions; cycles and several flows of a session allowed)."""
    count = draw(st.integers(2, 30))
    bases = draw(st.lists(st.floats(0.0, 1.0), min_size=count, max_size=count))
    nodes = [
        node(f"s{draw(st.integers(0, 3))}", i, "insight", f"Claim {i}.", 1, base)
        for i, base in enumerate(bases)
    ]
    kinds = st.sampled_from(["supports", "derived_from", "generalizes", "contradicts"])
    pairs = st.tuples(st.integers(0, count - 1), st.integers(0, count - 1), kinds, st.floats(0, 1))
    edges = [
        Edge(nodes[a].id, nodes[b].id, kind, "drawn", weight)
        for a, b, kind, weight in draw(st.lists(pairs, max_size=4 * count))
    ]
    statuses = st.sampled_from(["active", "superseded", "contradicted"])
    status = {n.id: draw(statuses) for n in nodes if draw(st.booleans())}
    return nodes, edges, status


@given(trust_graphs())
def test_confidence_on_arrays_reaches_the_same_fixed_point(
    graph: tuple[list[Node], list[Edge], dict[str, str]],
) -> None:
    from ccm.sleep import graph as module

    nodes, edges, status = graph
    in_place = propagate(nodes, edges, status)
    saved = module.ARRAY_NODES
    module.ARRAY_NODES = 0  # every graph is large enough
    try:
        arrays = propagate(nodes, edges, status)
    finally:
        module.ARRAY_NODES = saved
    assert in_place.converged and arrays.converged
    assert arrays.score.keys() == in_place.score.keys()
    for node_id, value in in_place.score.items():
        assert arrays.score[node_id] == pytest.approx(value, abs=1e-7), node_id
