"""Recall and context assembly: budgets, gating, whole units, the Messages API shape."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ccm import tokens
from ccm.bench import evidence_ids, run_locomo
from ccm.cli import main
from ccm.context import SHARES, assemble, classify
from ccm.engine.critical import core
from ccm.index import excerpt
from ccm.ingest.pipeline import ingest
from ccm.store import Store
from tests.helpers import ccm_at as ccm

SAMPLE = Path(__file__).parent.parent / "sample_knowledge"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "root"
    assert ccm(path, "ingest", str(SAMPLE / "sources")).exit_code == 0
    return path


# -- gating -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "kind"),
    [
        (None, "casual"),
        ("thanks!", "casual"),
        ("ok", "casual"),
        ("Let's add the fee column now.", "casual"),
        ("What did we decide about the database?", "recall"),
        ("Remember the duplicate rows bug?", "recall"),
        ("When did Caroline go to the support group?", "recall"),
        ("Can you summarize where we are?", "summary"),
    ],
)
def test_recall_is_gated_on_intent(query: str | None, kind: str) -> None:
    assert classify(query)[0] == kind


def test_a_casual_message_recalls_nothing_and_a_recall_question_does(root: Path) -> None:
    store = Store(root)
    casual = assemble(store, "ledger-sync", 3000, "thanks!")
    assert "recall" not in [b.name for b in casual.blocks]
    asked = assemble(
        store, "ledger-sync", 3000, "Remember the duplicate rows on re-import? What was the fix?"
    )
    recalled = next(b for b in asked.blocks if b.name == "recall")
    assert any("fingerprint" in line for line in recalled.lines)
    assert asked.query_type == "recall" and "past" in asked.reason


# -- the budget ---------------------------------------------------------------------

TEXTS = [
    json.loads(line)["content"]
    for line in (SAMPLE / "sources" / "ledger-sync.jsonl").read_text().splitlines()
]


# for the property tests that build a root per example (with tmp_path_factory), so that
# hypothesis's check on function-scoped fixtures does not apply
ROOT_PER_EXAMPLE = settings(
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def _chat(base: Path, picks: list[int], roles: str, seconds: int) -> Store:
    """A store whose session "chat" holds the sample texts `picks`, said by the roles in
    the repeating pattern `roles` ("u" user, "a" assistant), one every `seconds`."""
    source = base / "chat.jsonl"
    lines = [
        {
            "role": "user" if roles[n % len(roles)] == "u" else "assistant",
            "content": TEXTS[p],
            "ts": 1_767_000_000 + seconds * n,
        }
        for n, p in enumerate(picks)
    ]
    source.write_text("".join(json.dumps(line) + "\n" for line in lines))
    store = Store(base / "root")
    ingest(store, [str(source)], derive=True)
    return store


@settings(ROOT_PER_EXAMPLE, max_examples=40)
@given(
    picks=st.lists(st.integers(0, len(TEXTS) - 1), min_size=1, max_size=40),
    budget=st.integers(400, 6000),
    query=st.sampled_from(
        [
            None,
            "thanks",
            "what did we decide about storage?",
            "summarize",
            "Remember the rate question?",
        ]
    ),
)
def test_budget_is_never_exceeded_and_critical_items_are_always_there(
    tmp_path_factory: pytest.TempPathFactory, picks: list[int], budget: int, query: str | None
) -> None:
    store = _chat(tmp_path_factory.mktemp("ctx"), picks, "ua", 90)
    context = assemble(store, "chat", budget, query)
    assert tokens.count_tokens(context.text()) <= budget
    critical = next((b for b in context.blocks if b.name == "critical"), None)
    working = __import__("yaml").safe_load((store.session_dir("chat") / "working.yaml").read_text())
    for item in working["critical"]:  # whole, or by its rule when they crowd the budget
        assert critical is not None
        assert f"- {item}" in critical.lines or f"- {core(item)}" in critical.lines
    if working["state"]["current_task"]:
        assert any(b.name == "state" for b in context.blocks)


@pytest.mark.parametrize("budget", [900, 1200, 1500])
def test_recall_fills_what_the_other_blocks_leave(root: Path, budget: int) -> None:
    import re

    from ccm.context import _day, _day_heading
    from ccm.index import Index, as_shown

    store = Store(root)
    query = "What did we decide about the duplicate rows and the import?"
    context = assemble(store, "ledger-sync", budget, query)
    blocks = {b.name: b for b in context.blocks}
    assert "recall" in blocks and "tail" in blocks, "the latest exchange keeps its place"
    shown = {item["turns"][0] for item in blocks["recall"].items if "turns" in item}
    days = {item.get("day") for item in blocks["recall"].items}
    found = re.search(r"Budget: \d+ tokens, (\d+) left", context.text())
    assert found is not None
    left = int(found.group(1))
    with Index(store) as index:
        hits = index.recall(query, "ledger-sync", exclude_after=context.tail[0]["turn"])
    unshown = [h for h in hits if h.kind == "pair" and h.first_turn not in shown]
    assert unshown, "the session holds more than fits"
    # every exchange left out is one that could not have fitted in the room left over
    for hit in unshown:
        day, text = _day(hit), as_shown(hit.kind, hit.ts, hit.text)
        heading = tokens.count_cached(_day_heading(day)) + 1 if day not in days else 0
        assert tokens.count_cached(text) + 1 + heading > left


def test_the_index_stores_the_token_count_of_each_unit_as_a_context_shows_it(
    root: Path,
) -> None:
    from ccm.index import Index, as_shown

    with Index(Store(root)) as index:
        rows = index.db.execute(
            "SELECT kind, ts, text, tokens, shown FROM units WHERE kind != 'turn'"
        ).fetchall()
        assert {row[0] for row in rows} >= {"pair", "segment"}
        for kind, ts, text, count, shown in rows:
            assert count == tokens.count_tokens(text)
            assert shown == tokens.count_tokens(as_shown(kind, ts, text))
        assert index.counted_with() == "bpe"


class _EveryHit:
    """Every hit of a recall, each counted afresh: what a context would show, had it
    read and counted them all (as it did before the counts were stored)."""

    def __init__(self, hits: list[Any]) -> None:
        self.hits = hits

    def shown(self, room: Any) -> Any:
        from ccm.index import as_shown

        return ((h, tokens.count_cached(as_shown(h.kind, h.ts, h.text))) for h in self.hits)


@settings(ROOT_PER_EXAMPLE, max_examples=25)
@given(
    picks=st.lists(st.integers(0, len(TEXTS) - 1), min_size=8, max_size=60),
    query=st.one_of(
        st.sampled_from(
            [
                "Remember the duplicate rows on re-import?",
                "when did we talk about the ledger import and the fingerprint?",
            ]
        ),
        st.lists(st.sampled_from(sorted(set(" ".join(TEXTS).split()))), min_size=1, max_size=5)
        .map(" ".join)
        .map(lambda words: f"what about {words}?"),
    ),
    allowances=st.lists(st.integers(0, 4000), min_size=1, max_size=6),
    limit=st.integers(1, 60),
    cut=st.one_of(st.none(), st.integers(1, 60)),
)
@example(  # a segment summary ranks between the exchanges
    picks=list(range(1, 21)),
    query="when did we talk about the ledger import and the fingerprint?",
    allowances=[100, 500, 2000],
    limit=60,
    cut=None,
)
def test_recall_reads_only_what_the_context_can_show_and_shows_what_reading_all_would(
    tmp_path_factory: pytest.TempPathFactory,
    picks: list[int],
    query: str,
    allowances: list[int],
    limit: int,
    cut: int | None,
) -> None:
    from ccm.context import Block, _fill_recall
    from ccm.index import Index

    store = _chat(tmp_path_factory.mktemp("lazy"), picks, "uau", 5000)  # some a day apart
    assemble(store, "chat", 4000, query)  # indexes the session and its segments
    with Index(store) as index:
        every = index.recall(query, "chat", exclude_after=cut, limit=limit)
        assert list(index.recalled(query, "chat", exclude_after=cut, limit=limit)) == every
        assert len([h for h in every if h.kind == "pair"]) <= limit
        scores = [h.score for h in every]  # summaries merged in by score, none read ahead
        assert scores == sorted(scores, reverse=True)
        for allowance in allowances:
            lazy, eager = Block("recall", "Recalled"), Block("recall", "Recalled")
            recalled = index.recalled(query, "chat", exclude_after=cut, limit=limit)
            used = _fill_recall(lazy, recalled, allowance)
            assert used == _fill_recall(eager, _EveryHit(every), allowance) <= allowance
            assert (lazy.lines, lazy.items) == (eager.lines, eager.items)


def test_recall_reads_nothing_once_no_unit_of_the_session_can_fit(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ccm.index import Index

    query = "What did we decide about the duplicate rows and the import?"
    with Index(Store(root)) as index:
        index.update("ledger-sync")
        (smallest,) = index.db.execute(  # the shortest unit recalled whole, as shown
            "SELECT min(shown) FROM units WHERE session='ledger-sync' AND kind != 'turn'"
        ).fetchone()
        reads: list[str] = []
        for name in ("_exchanges", "_summaries"):
            original = getattr(index, name)
            monkeypatch.setattr(
                index, name, lambda *a, _f=original, _n=name: reads.append(_n) or _f(*a)
            )
        assert list(index.recalled(query, "ledger-sync").shown(lambda: smallest - 1)) == []
        assert reads == []
        assert list(index.recalled(query, "ledger-sync").shown(lambda: smallest))
        assert reads


def test_stored_token_counts_are_used_only_when_counted_the_same_way(tmp_path: Path) -> None:
    from ccm.index import Index, as_shown

    store = Store(tmp_path / "root")
    query = "What did we decide about the duplicate rows and the import?"
    tokens.set_method("estimate")
    ingest(store, [str(SAMPLE / "sources" / "ledger-sync.jsonl")], session="ledger-sync")
    with Index(store) as index:
        index.update("ledger-sync")
        assert index.counted_with() == "estimate"
        for method in ("estimate", "bpe"):  # the counts follow the method in use
            tokens.set_method(method)
            shown = list(index.recalled(query, "ledger-sync").shown(lambda: 10**6))
            assert shown
            for hit, count in shown:
                assert count == tokens.count_tokens(as_shown(hit.kind, hit.ts, hit.text))
        ingest(store, [str(SAMPLE / "sources" / "deploy-checklist.jsonl")], session="deploy")
        index.update("deploy")  # counted with the BPE now: the index holds both
        assert index.counted_with() == "mixed"


RULES_WITH_REASONS = [
    "Never force-push to the release branch. Two of the packagers build straight from it "
    "every hour and a rewritten history breaks their mirrors for the whole afternoon.",
    "Keep all money as integer cents. A float total put the March invoice run out by "
    "a cent on three hundred invoices and we wrote to every one of those customers.",
    "Don't rename anything in the public API. The plugin authors pin against it and the "
    "last rename cost them a week of patch releases across a dozen repositories.",
    "The staging database is read-only for us. The data team reloads it every night from "
    "the warehouse and anything we write there is overwritten before anyone looks at it.",
    "Keep every migration reversible. Our rollback runbook assumes a down step exists for "
    "each one and the on-call engineer has no time to write one at three in the morning.",
    "No new dependencies without asking me first. The security review for each new package "
    "takes the compliance team about two weeks and blocks the release train meanwhile.",
]


def test_critical_items_that_crowd_a_small_budget_are_shown_by_their_rules(
    tmp_path: Path,
) -> None:
    source = tmp_path / "rules.jsonl"
    said = [
        turn
        for n, rule in enumerate(RULES_WITH_REASONS)
        for turn in (
            {"role": "user", "content": rule, "ts": 1_767_000_000 + 120 * n},
            {"role": "assistant", "content": "Understood.", "ts": 1_767_000_060 + 120 * n},
        )
    ]
    source.write_text("".join(json.dumps(line) + "\n" for line in said))
    store = Store(tmp_path / "root")
    ingest(store, [str(source)], derive=True)
    roomy = next(b for b in assemble(store, "rules", 8000).blocks if b.name == "critical")
    assert roomy.lines == [f"- {text}" for text in RULES_WITH_REASONS]  # whole, in order
    rules = [f"- {text.split('. ')[0]}." for text in RULES_WITH_REASONS]
    share = SHARES["casual"]["critical"]
    assert roomy.tokens > share * 600  # so they crowd both budgets below
    for budget in (400, 600):
        small = assemble(store, "rules", budget)
        assert tokens.count_tokens(small.text()) <= budget
        critical = next(b for b in small.blocks if b.name == "critical")
        assert critical.tokens <= share * budget
        # every rule there, whole or without its reason; those that gain most go first
        assert all(
            line in (whole, rule)
            for line, whole, rule in zip(critical.lines, roomy.lines, rules, strict=True)
        )
        gains = [
            tokens.count_tokens(w) - tokens.count_tokens(r)
            for w, r in zip(roomy.lines, rules, strict=True)
        ]
        cut = [
            gain
            for gain, line, rule in zip(gains, critical.lines, rules, strict=True)
            if line == rule
        ]
        kept = [
            gain
            for gain, line, rule in zip(gains, critical.lines, rules, strict=True)
            if line != rule
        ]
        assert cut and min(cut) >= max(kept, default=0)
    assert critical.lines != rules and critical.lines != roomy.lines  # at 600: some of each
    # what a person marked critical stays as they wrote it, however little room is left
    marked = (
        "Never page the on-call engineer for staging. The rota only covers production, and "
        "last quarter three staging pages in one week burned out two people on the team, "
        "so staging alerts go to the channel and wait for the morning."
    )
    assert ccm(tmp_path / "root", "critical", "rules", "--add", marked).exit_code == 0
    lines = next(b for b in assemble(store, "rules", 400).blocks if b.name == "critical").lines
    assert f"- {marked}" in lines and lines[: len(rules)] == rules
    assert core(marked) != marked  # it would have been shortened, were it found
    # a question about the past is answered from recall: the rules give up more room
    asked = assemble(store, "rules", 1000, "What did we say about the staging database?")
    critical = next(b for b in asked.blocks if b.name == "critical")
    assert asked.query_type == "recall" and critical.lines != roomy.lines
    assert critical.tokens <= SHARES["recall"]["critical"] * 1000 < roomy.tokens
    assert any(b.name == "tail" for b in small.blocks)  # the room went to the latest turns


def test_a_budget_too_small_for_the_critical_items_is_a_clear_error(root: Path) -> None:
    result = ccm(root, "context", "ledger-sync", "--budget", "60")
    assert result.exit_code == 2 and "cannot hold the critical items" in result.stderr


# -- units, tail and formats --------------------------------------------------------------


def test_recall_returns_whole_exchanges_and_says_why(root: Path) -> None:
    result = ccm(root, "recall", "duplicate rows NULL reference", "--json")
    assert result.exit_code == 0
    hits = json.loads(result.stdout)["hits"]
    pair = next(h for h in hits if h["kind"] == "pair")
    assert pair["text"].count("\n") >= 1  # a user turn with its answer
    assert {"duplicate", "null", "reference"} <= set(pair["matched"])
    only = json.loads(
        ccm(root, "recall", "systemd timer", "--session", "deploy-checklist", "--json").stdout
    )
    assert only["hits"] and {h["session"] for h in only["hits"]} == {"deploy-checklist"}
    assert json.loads(ccm(root, "recall", "systemd timer", "--json").stdout)["hits"]


def test_the_index_follows_a_growing_session(tmp_path: Path) -> None:
    root = tmp_path / "root"
    source = tmp_path / "live.jsonl"
    first = [
        {"role": "user", "content": "Which port does the staging proxy use?", "ts": 1_767_000_000}
    ]
    source.write_text("".join(json.dumps(x) + "\n" for x in first))
    ccm(root, "ingest", str(source))
    assert json.loads(ccm(root, "recall", "staging proxy port", "--json").stdout)["hits"]
    first.append(
        {"role": "assistant", "content": "The staging proxy listens on 8443.", "ts": 1_767_000_060}
    )
    source.write_text("".join(json.dumps(x) + "\n" for x in first))
    ccm(root, "ingest", str(source))
    (hit,) = [
        h
        for h in json.loads(ccm(root, "recall", "staging proxy port", "--json").stdout)["hits"]
        if h["kind"] == "pair"
    ]
    assert "8443" in hit["text"] and hit["turns"] == [1, 2]


def test_two_open_indexes_on_one_root_keep_working(root: Path) -> None:
    """A daemon and a CLI call each hold a connection: opening a second one (which sets
    the index up) and writing through it must not break the first."""
    from ccm import derive
    from ccm.index import Index

    store = Store(root)
    first = Index(store)
    before = first.search("systemd timer", session="deploy-checklist")
    assert before
    with Index(store) as second:
        assert second.search("systemd timer", session="deploy-checklist") == before
        second.drop("deploy-checklist")
        second.update("deploy-checklist", derive.update(store, "deploy-checklist").tiers.manifest)
    assert [h.key for h in first.search("systemd timer", session="deploy-checklist")] == [
        h.key for h in before
    ]
    first.close()


@pytest.mark.parametrize("steps", [3, 30, 130])
def test_the_last_exchange_is_whole_however_long(tmp_path: Path, steps: int) -> None:
    """An agent's last exchange can hold hundreds of tool turns: the tail still starts at
    its user turn (the log is read further back only as far as needed)."""
    lines: list[dict[str, Any]] = [
        {"role": "user", "content": "Earlier question.", "ts": 1_767_000_000},
        {"role": "assistant", "content": "Earlier answer.", "ts": 1_767_000_001},
        {"role": "user", "content": "Fix the flaky test.", "ts": 1_767_000_002},
    ]
    for n in range(steps):
        lines.append({"role": "assistant", "content": f"step {n}", "ts": 1_767_000_003 + n})
    source = tmp_path / "agent.jsonl"
    source.write_text("".join(json.dumps(x) + "\n" for x in lines))
    store = Store(tmp_path / "root")
    ingest(store, [str(source)], derive=True)
    context = assemble(store, "agent", 50_000, None)
    tail = next(b for b in context.blocks if b.name == "tail")
    # the budget holds it all: the exchange before comes too, however many messages
    assert tail.items == list(range(1, 4 + steps))
    assert tail.lines[2].startswith("[") and "user: Fix the flaky test." in tail.lines[2]


def test_old_tool_results_are_cleared_but_their_calls_kept(tmp_path: Path) -> None:
    root = tmp_path / "root"
    source = tmp_path / "tools.jsonl"
    lines: list[dict[str, Any]] = [
        {"role": "user", "content": "Read the five config files.", "ts": 1_767_000_000}
    ]
    for n in range(5):
        lines.append(
            {
                "role": "assistant",
                "content": f'[tool_use] Read {{"file_path":"conf{n}.yaml"}}',
                "ts": 1_767_000_001 + 2 * n,
            }
        )
        lines.append(
            {
                "role": "tool",
                "content": f"contents of conf{n}: " + "x " * 50,
                "tool": {"name": "Read"},
                "ts": 1_767_000_002 + 2 * n,
            }
        )
    source.write_text("".join(json.dumps(x) + "\n" for x in lines))
    ccm(root, "ingest", str(source))
    text = ccm(root, "context", "tools", "--budget", "3000").stdout
    assert text.count("[tool_use] Read") == 5
    assert text.count("result cleared; @expand(turn") == 2
    assert "contents of conf4" in text and "contents of conf0" not in text


def test_messages_format_has_the_messages_api_shape(root: Path) -> None:
    result = ccm(
        root,
        "context",
        "ledger-sync",
        "--budget",
        "1500",
        "--format",
        "messages",
        "--query",
        "What rate should we use?",
    )
    assert result.exit_code == 0
    request = json.loads(result.stdout)
    assert set(request) == {"system", "messages"} and isinstance(request["system"], str)
    assert "Critical" in request["system"]
    roles = [m["role"] for m in request["messages"]]
    assert roles[0] == "user" and roles[-1] == "user"
    assert all(a != b for a, b in itertools.pairwise(roles))
    assert all(isinstance(m["content"], str) and m["content"] for m in request["messages"])
    assert request["messages"][-1]["content"].endswith("What rate should we use?")


def test_json_format_reports_blocks_and_tokens(root: Path) -> None:
    result = ccm(root, "context", "ledger-sync", "--budget", "2000", "--format", "json")
    report = json.loads(result.stdout)
    assert report["tokens"] <= 2000 and report["query_type"] == "casual"
    names = [b["name"] for b in report["blocks"]]
    assert names[:3] == ["critical", "state", "manifest"] and "tail" in names
    manifest = next(b for b in report["blocks"] if b["name"] == "manifest")
    assert (
        "@expand" in manifest["text"] and "left." in manifest["text"] and manifest["tokens"] < 500
    )


# -- the benchmark --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "ids"),
    [
        (["D1:3"], ["D1:3"]),
        (["D8:6; D9:17"], ["D8:6", "D9:17"]),
        (["D9:1 D4:4 D4:6"], ["D9:1", "D4:4", "D4:6"]),
        (["D:11:26"], ["D11:26"]),
        (["D30:05"], ["D30:5"]),
        (["D"], []),
    ],
)
def test_evidence_ids_are_normalised(raw: list[str], ids: list[str]) -> None:
    assert evidence_ids(raw) == ids


def test_bench_on_a_synthetic_locomo_file(tmp_path: Path) -> None:
    chatter = [
        f"Just chatting about the weather, day {n}, nothing special at all." for n in range(40)
    ]
    session_1 = [
        {"speaker": "Ann" if n % 2 == 0 else "Bo", "dia_id": f"D1:{n + 1}", "text": t}
        for n, t in enumerate(chatter)
    ]
    session_1[5]["text"] = "I adopted a tortoise named Pebble from the shelter."
    session_2 = [
        {"speaker": "Ann" if n % 2 == 0 else "Bo", "dia_id": f"D2:{n + 1}", "text": t}
        for n, t in enumerate(chatter)
    ]
    session_2[7]["text"] = "Pebble the tortoise loves dandelion leaves."
    sample = {
        "sample_id": "syn-1",
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Bo",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": session_1,
            "session_2_date_time": "10:00 am on 20 June, 2023",
            "session_2": session_2,
        },
        "qa": [
            {
                "question": "What is the name of the tortoise Ann adopted?",
                "answer": "Pebble",
                "evidence": ["D1:6"],
                "category": 4,
            },
            {
                "question": "What does Pebble the tortoise eat?",
                "answer": "dandelion leaves",
                "evidence": ["D2:8; D1:6"],
                "category": 1,
            },
            {
                "question": "Who adopted a parrot?",
                "adversarial_answer": "Ann",
                "evidence": ["D1:6"],
                "category": 5,
            },
            {
                "question": "Where is the lost ring?",
                "answer": "?",
                "evidence": ["D9:99"],
                "category": 4,
            },
        ],
    }
    # a second conversation, the same chat, asked about its very last turn: there the
    # recency window finds the evidence, in syn-1 it finds none
    other = json.loads(json.dumps(sample))
    other["sample_id"] = "syn-2"
    last = {"question": "How was the weather on day 39?", "answer": "nothing special"}
    other["qa"] = [{**last, "evidence": ["D2:40"], "category": 4}]
    path = tmp_path / "syn.json"
    path.write_text(json.dumps([sample, other]))
    report = run_locomo(path, [300])
    rows = {(r["method"], r["budget"]): r for r in report["results"]}
    assert report["questions"] == 4 and report["unresolved_evidence"] == ["syn-1:D9:99"]
    assert rows[("ccm", 300)]["recall"] == 1.0
    assert rows[("ccm", 300)]["by_conversation"] == {"syn-1": 1.0, "syn-2": 1.0}
    # syn-1 has two scored questions, syn-2 one: the overall recall weighs each question
    assert rows[("recency", 300)]["by_conversation"] == {"syn-1": 0.0, "syn-2": 1.0}
    assert rows[("recency", 300)]["recall"] == round(1 / 3, 4)
    assert rows[("ccm", 300)]["by_category"]["5"] == 1.0
    assert rows[("recency", 300)]["recall"] < 1.0
    assert rows[("ccm", 300)]["tokens_mean"] <= 300
    out = CliRunner().invoke(main, ["bench", "locomo", str(path), "--budget", "300", "--json"])
    assert out.exit_code == 0 and json.loads(out.stdout)["results"][0]["method"] == "ccm"
    table = CliRunner().invoke(main, ["bench", "locomo", str(path), "--budget", "300"])
    assert table.exit_code == 0, table.output
    by_conversation = table.stdout.split("recall by conversation\n", 1)[1].splitlines()
    assert by_conversation[0].split()[2:] == ["syn-1", "syn-2"]
    assert by_conversation[1].split() == ["ccm", "300", "1.000", "1.000"]


def test_recall_filters_by_time(root: Path) -> None:
    # ledger-sync is from 2 March 2026, deploy-checklist from 4 March
    def sessions(*args: str) -> set[str]:
        result = ccm(root, "recall", "ledger", "--json", *args)
        assert result.exit_code == 0, result.output
        return {hit["session"] for hit in json.loads(result.stdout)["hits"]}

    assert sessions() >= {"ledger-sync", "deploy-checklist"}
    assert sessions("--since", "2026-03-04") == {"deploy-checklist"}
    assert sessions("--until", "2026-03-02") == {"ledger-sync"}
    assert ccm(root, "recall", "ledger", "--since", "March").exit_code == 2


# -- ranking: speakers, neighbours, days ------------------------------------------------


def _two_people(tmp_path: Path) -> Store:
    """A LoCoMo-shaped chat between Ann and Bo over two days, imported as one session."""
    filler = [
        "How was your week?",
        "Busy but fine, lots of work.",
        "Same here, the weather was lovely though.",
        "Glad to hear it!",
    ]

    def said(day: int, texts: list[str]) -> list[dict[str, str]]:
        """Ann and Bo taking turns, Ann first."""
        return [
            {"speaker": "Bo" if n % 2 else "Ann", "dia_id": f"D{day}:{n + 1}", "text": text}
            for n, text in enumerate(texts)
        ]

    day_1 = said(
        1,
        [
            *filler,
            "Thanks, Bo! I went hiking in the hills yesterday.",
            "That sounds wonderful, Ann.",
            "It was, thank you.",
            "Did you ever try kayaking, Ann?",
            "Once, on the river by the old mill, in spring.",
            "Sounds fun.",
        ],
    )
    day_2 = said(
        2,
        [
            *filler,
            "And yours?",
            "Thanks, Ann! Bo here: I went hiking too, on the coast.",
            "Nice, Bo.",
        ],
    )
    sample = {
        "sample_id": "ann-bo",
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Bo",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": day_1,
            "session_2_date_time": "10:00 am on 20 June, 2023",
            "session_2": day_2,
            "session_3_date_time": "9:00 am on 1 July, 2023",
            "session_3": [
                {"speaker": "Ann", "dia_id": f"D3:{n}", "text": f"Chat {n} about the garden."}
                for n in range(1, 21)
            ],
        },
    }
    source = tmp_path / "ann-bo.json"
    source.write_text(json.dumps([sample]))
    store = Store(tmp_path / "root")
    ingest(store, [source], session="ann-bo")
    return store


def test_a_named_person_is_whose_turns_to_rank_first_not_a_word_to_match(
    tmp_path: Path,
) -> None:
    from ccm.index import Index

    store = _two_people(tmp_path)
    with Index(store) as index:
        index.update("ann-bo")
        assert index.speakers_named("ann-bo", "Where did Ann go hiking?") == ["Ann"]
        hits = [h for h in index.recall("Where did Ann go hiking?", "ann-bo") if h.kind == "pair"]
    # Ann's own hiking turn comes first, ahead of Bo's "Thanks, Ann! ... hiking too"
    assert "hills" in hits[0].text and "said by Ann" in hits[0].why
    assert "hiking" in hits[0].matched and "ann" not in hits[0].matched


def test_the_turns_next_to_a_hit_come_with_it(tmp_path: Path) -> None:
    from ccm.index import Index

    store = _two_people(tmp_path)
    with Index(store) as index:
        index.update("ann-bo")
        hits = index.recall("Has Ann ever been kayaking?", "ann-bo")
    # Ann's answer shares no word with the question: it comes as the asking turn's neighbour
    answer = next(h for h in hits if "old mill" in h.text)
    assert "next to a hit" in answer.why and "kayaking" not in answer.text
    garden = [h for h in hits if "garden" in h.text]
    assert all(answer.score > h.score for h in garden)


def _one_day(tmp_path: Path, session: str, texts: list[tuple[str, str]], chat: str) -> Store:
    """A LoCoMo-shaped day of Ann and Bo: `texts`, then a dozen turns of chatter about
    the weather and `chat`, imported as `session`."""
    chatter = [
        ("Ann" if n % 2 else "Bo", f"Chat {n} about the weather and {chat}.") for n in range(12)
    ]
    sample = {
        "sample_id": session,
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Bo",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": who, "dia_id": f"D1:{n + 1}", "text": text}
                for n, (who, text) in enumerate([*texts, *chatter])
            ],
        },
    }
    source = tmp_path / f"{session}.json"
    source.write_text(json.dumps([sample]))
    store = Store(tmp_path / "root")
    ingest(store, [source], session=session)
    return store


def _recalled_pairs(store: Store, session: str, question: str) -> list[Any]:
    """The exchanges `Index.recall` finds for `question` in `session`, best first."""
    from ccm.index import Index

    with Index(store) as index:
        index.update(session)
        return [h for h in index.recall(question, session) if h.kind == "pair"]


def test_a_fact_said_two_turns_after_the_question_comes_before_the_chatter(
    tmp_path: Path,
) -> None:
    store = _one_day(
        tmp_path,
        "fair",
        [
            ("Ann", "Morning! The garden is full of weeds again."),
            ("Bo", "Mine too. What will you bake for the village fair, Ann?"),
            ("Ann", "Oh, I have been practising all month."),
            ("Ann", "A lemon tart with thyme from my garden."),
            ("Bo", "Sounds lovely."),
        ],
        "the weeds",
    )
    hits = _recalled_pairs(store, "fair", "What did Ann bake for the fair?")
    tart = next(n for n, h in enumerate(hits) if "lemon tart" in h.text)
    assert "next to a hit" in hits[tart].why and "bake" not in hits[tart].text
    chatter = [n for n, h in enumerate(hits) if "Chat " in h.text and "tart" not in h.text]
    assert all(tart < n for n in chatter)


def test_what_a_question_asks_with_is_no_word_to_match() -> None:
    from ccm.index import query_words

    assert query_words("How many miles has the van really done?") == ["miles", "van", "done"]
    assert query_words("Why didn't we end up keeping the first quote?") == ["keeping", "quote"]
    assert query_words("What kind of kiln did they actually order?") == ["kiln", "order"]


def test_a_turn_full_of_the_question_s_filler_words_does_not_outrank_its_answer(
    tmp_path: Path,
) -> None:
    store = _one_day(
        tmp_path,
        "van",
        [
            ("Ann", "I really, really like that van. So many options though, really so many."),
            ("Bo", "It is a lovely colour."),
            ("Ann", "Found the MOT history: the van is on 84,210 miles, not 62k."),
            ("Bo", "Ouch, that is a lot more than the advert said."),
        ],
        "the garden",
    )
    hits = _recalled_pairs(store, "van", "How many miles has the van really done?")
    assert "84,210 miles" in hits[0].text
    assert not {"many", "really"} & set(hits[0].matched)


def test_a_figure_asked_about_says_which_turn_is_meant(tmp_path: Path) -> None:
    """Asked where the 240 came from, the turn that says the 240 outranks the turns full
    of the question's other words."""
    store = _one_day(
        tmp_path,
        "kitchen",
        [
            ("Ann", "All the units go on the kitchen wall."),
            ("Bo", "Then it needs one long worktop."),
            ("Ann", "Tiles next for the kitchen: white, grout in grey."),
            ("Bo", "Grey grout hides the dirt better."),
            ("Ann", "The 240 was before the pipe box went in."),
            ("Bo", "So the box takes 14 cm off it."),
        ],
        "the tiles",
    )
    hits = _recalled_pairs(store, "kitchen", "Where did the 240 for the kitchen wall come from?")
    assert "The 240 was before" in hits[0].text


def test_a_question_about_the_first_time_ranks_the_earliest_episode_first(
    tmp_path: Path,
) -> None:
    """Two fixes of the export failed; "why did the first one fail" is about the earlier,
    though the later says the question's words more often."""
    texts = [
        ("Ann", "The export fix failed: the timeout was never the cause."),
        ("Bo", "So it is the encoding after all?"),
        ("Ann", "Tiles next for the bathroom: white, grout in grey."),
        ("Bo", "Grey grout hides the dirt better."),
        ("Ann", "The new export fix failed as well, the export fix failed on the dates."),
        ("Bo", "Then the date parser is next."),
    ]
    store = _one_day(tmp_path, "export", texts, "the tiles")
    hits = _recalled_pairs(store, "export", "Why did the first export fix fail?")
    assert "timeout was never the cause" in hits[0].text
    before = _recalled_pairs(store, "export", "What broke the export before the fix?")
    assert "timeout was never the cause" in before[0].text
    later = _recalled_pairs(store, "export", "Why did the export fix fail on the dates?")
    assert "failed on the dates" in later[0].text


def test_recalled_exchanges_are_shown_in_order_under_their_day(tmp_path: Path) -> None:
    store = _two_people(tmp_path)
    context = assemble(store, "ann-bo", 1200, "When did Ann and Bo go hiking?")
    recalled = next(b for b in context.blocks if b.name == "recall")
    days = [line for line in recalled.lines if line.startswith("[2023-")]
    assert days == sorted(days) and "[2023-05-08 Mon]" in days and "[2023-06-20 Tue]" in days
    # one heading per day; the exchanges under it carry no time stamp of their own
    assert len(days) == len(set(days))
    assert not [line for line in recalled.lines if line.startswith("[2023-") and ":" in line]
    assert any("hills" in line for line in recalled.lines)
    assert context.tokens <= 1200


def test_a_day_the_question_names_weighs_what_was_said_then(tmp_path: Path) -> None:
    from ccm.index import Index

    store = _two_people(tmp_path)
    with Index(store) as index:
        index.update("ann-bo")
        hits = [
            h for h in index.recall("Who went hiking in June 2023?", "ann-bo") if h.kind == "pair"
        ]
    assert "coast" in hits[0].text and "said on 2023-06-20" in hits[0].why
    assert "hills" in hits[1].text


def test_ccm_recall_in_one_session_ranks_as_the_context_does_and_says_why(
    tmp_path: Path,
) -> None:
    store = _two_people(tmp_path)
    out = ccm(store.root, "recall", "Where did Ann go hiking?", "--session", "ann-bo", "--json")
    assert out.exit_code == 0, out.output
    hits = json.loads(out.stdout)["hits"]
    assert "hills" in hits[0]["text"] and "said by Ann" in hits[0]["why"]
    text = ccm(store.root, "recall", "Where did Ann go hiking?", "--session", "ann-bo").stdout
    assert "said by Ann" in text.splitlines()[0]
    # a time filter keeps only what was said then
    june = ccm(
        store.root,
        "recall",
        "hiking",
        "--session",
        "ann-bo",
        "--since",
        "2023-06-01",
        "--until",
        "2023-06-30",
        "--json",
    )
    assert {h["ts"][:7] for h in json.loads(june.stdout)["hits"]} == {"2023-06"}


# -- the tail fills what the budget leaves; the newest exchange is cut, never dropped ---


def _agent(tmp_path: Path, lines: list[tuple[str, str]], name: str = "agent") -> Path:
    """A root holding session `name`: (role, content) turns one minute apart; a tool
    turn is a Bash result."""
    records = []
    for n, (role, content) in enumerate(lines):
        record: dict[str, Any] = {"role": role, "content": content, "ts": 1_767_000_000 + 60 * n}
        if role == "tool":
            record["tool"] = {"name": "Bash"}
        records.append(record)
    source = tmp_path / f"{name}.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in records))
    root = tmp_path / "root"
    assert ccm(root, "ingest", str(source)).exit_code == 0
    return root


def test_the_tail_uses_what_the_budget_leaves_clearing_old_tool_results(tmp_path: Path) -> None:
    lines: list[tuple[str, str]] = []
    for n in range(80):
        lines += [
            ("user", f"Step {n}: run the checks on shard {n}."),
            ("tool", f"shard {n}: " + "ok " * 60),
            ("assistant", f"Shard {n} passed."),
        ]
    root = _agent(tmp_path, lines)
    small = json.loads(ccm(root, "context", "agent", "--budget", "1000", "--format", "json").stdout)
    large = json.loads(ccm(root, "context", "agent", "--budget", "4000", "--format", "json").stdout)
    tail = {
        d["tokens"]: next(b for b in d["blocks"] if b["name"] == "tail") for d in (small, large)
    }
    short, long = tail[small["tokens"]], tail[large["tokens"]]
    # far more than the 10 preserved messages when the budget allows, and the budget used
    assert len(long["items"]) > len(short["items"]) > 10
    assert large["tokens"] > 0.85 * 4000 and large["tokens"] <= 4000
    # the latest results whole; older ones cleared to a line that keeps how to get them
    assert "shard 79: ok ok" in long["text"]
    assert "[Bash result cleared; @expand(turn" in long["text"]
    assert "Shard 79 passed." in short["text"] and "Shard 79 passed." in long["text"]


def test_the_newest_exchange_is_cut_when_it_does_not_fit_never_dropped(tmp_path: Path) -> None:
    """A subagent's session is one exchange: its prompt, then hundreds of steps."""
    lines: list[tuple[str, str]] = [("user", "Survey the repository and report its layout.")]
    for n in range(40):
        lines += [
            ("assistant", f'[tool_use] Bash {{"command": "ls dir{n}"}}'),
            ("tool", "\n".join(f"dir{n}/file{k}.py" for k in range(40))),
        ]
    lines.append(("assistant", "The layout: " + "a package per service, " * 20 + "done."))
    root = _agent(tmp_path, lines)
    for budget in (400, 2000, 30_000):
        out = ccm(root, "context", "agent", "--budget", str(budget), "--format", "json")
        context = json.loads(out.stdout)
        tail = next(b for b in context["blocks"] if b["name"] == "tail")["text"]
        # the request and the newest turn are there; what is left out says how to get it
        assert "user: Survey the repository and report its layout." in tail
        assert "assistant: The layout: a package per service" in tail
        assert "not shown; @expand(turn" in tail or "result cleared" in tail
        assert context["tokens"] <= budget


def test_the_inputs_of_tool_calls_are_clipped_before_any_step_is_left_out(
    tmp_path: Path,
) -> None:
    """An agent's exchange whose calls carry payloads (a file written whole, a list of
    edits): when it does not fit, each call's input is clipped to its first characters,
    like a tool's output, so that every step of it is still there."""
    page = "\\n".join(f"<p>Paragraph {k} of the about page.</p>" for k in range(120))
    lines: list[tuple[str, str]] = [("user", "Write the about page, then link it from the footer.")]
    for name in ("about.html", "footer.html", "index.html"):
        call = f'[tool_use] Write {{"file_path": "site/{name}", "content": "{page}"}}'
        lines += [("assistant", f"Writing {name}.\n{call}"), ("tool", f"wrote site/{name}")]
    lines.append(("assistant", "The about page is written and linked from the footer."))
    root = _agent(tmp_path, lines)
    context = json.loads(
        ccm(root, "context", "agent", "--budget", "1500", "--format", "json").stdout
    )
    tail = next(b for b in context["blocks"] if b["name"] == "tail")["text"]
    assert "not shown; @expand(turn" not in tail  # no step left out
    for turn, name in ((2, "about.html"), (4, "footer.html"), (6, "index.html")):
        assert f"Writing {name}." in tail and f'"file_path": "site/{name}"' in tail
        assert f"chars; @expand(turn {turn})]" in tail  # each input clipped, and how to get it
    assert "Paragraph 100 of the about page" not in tail
    assert "The about page is written and linked from the footer." in tail
    assert context["tokens"] <= 1500


def test_a_newest_turn_too_long_for_the_budget_is_shortened(tmp_path: Path) -> None:
    root = _agent(
        tmp_path,
        [
            ("user", "Explain the design."),
            ("assistant", "The design: " + "layer upon layer " * 400),
        ],
    )
    text = ccm(root, "context", "agent", "--budget", "300").stdout
    assert "user: Explain the design." in text
    assert "assistant: The design: layer upon layer" in text and "chars; @expand(turn 2)]" in text


def test_the_newest_tool_output_shows_its_first_and_last_lines_when_cut(tmp_path: Path) -> None:
    log = "\n".join(f"test_{k} PASSED" for k in range(200)) + "\nFAILED test_export: KeyError"
    root = _agent(tmp_path, [("user", "Run the tests."), ("tool", log)])
    text = ccm(root, "context", "agent", "--budget", "400").stdout
    assert "test_0 PASSED" in text and "FAILED test_export: KeyError" in text
    assert "test_100 PASSED" not in text and "chars; @expand(turn 2)]" in text


def test_a_cut_tool_output_keeps_the_lines_between_that_say_it_failed(tmp_path: Path) -> None:
    """Written for this test: a build log that fails in its middle, and a diff whose
    settings say "error": the error line is shown between the first and last lines, a
    setting's value is no error."""
    build = [f"[09:{k:02d}] step {k}: compiling module_{k}.c" for k in range(60)]
    build[31] = "[09:31] ERROR E1042: linker could not find symbol render_frame_v2"
    log = "\n".join([*build, "build finished with errors"])
    root = _agent(tmp_path, [("user", "Build it."), ("tool", log)])
    text = ccm(root, "context", "agent", "--budget", "400").stdout
    assert "[09:00] step 0" in text and "build finished with errors" in text
    assert "ERROR E1042: linker could not find symbol" in text
    assert "step 45" not in text and "chars; @expand(turn 2)]" in text
    # settings with "severity: error", a diff that adds a call to log an error: cut to
    # their first and last lines
    settings = [f"  model_{k}: {{tests: [unique]}}" for k in range(60)]
    settings[30] = "  severity: error"
    diff = [f"+    step_{k}()" for k in range(60)]
    diff[30] = "+    log.error('retrying %s', job)"
    for lines in (settings, diff):
        cut = excerpt("\n".join(lines), 300, 3)
        assert "error" not in cut and cut.count("\n\u2026 ") == 1


def test_the_working_state_names_the_specifics_the_context_does_not_show(tmp_path: Path) -> None:
    lines: list[tuple[str, str]] = [
        ("user", "The nightly bench flagged count_by_field at 671 ms; v0.8.0 was 412.3 ms."),
        ("assistant", "I'll bisect it with scripts/bench_gate.sh."),
        ("tool", "first bad commit: a41c9e2 refactor(core): store owned Strings"),
        ("assistant", "The culprit is a41c9e2: owned Strings per field."),
    ]
    for n in range(12):
        lines += [
            ("user", f"Meanwhile, question {n}: which of the lunch places is open today?"),
            ("assistant", "The one on the corner, as every day this week. " * 4),
        ]
    root = _agent(tmp_path, lines)
    text = ccm(root, "context", "agent", "--budget", "800").stdout
    state = text.split("## Working state\n", 1)[1].split("\n\n", 1)[0]
    specifics = next(line for line in state.splitlines() if line.startswith("Specifics: "))
    assert "a41c9e2" in specifics and "412.3" in specifics
    # what the context shows already is not named again
    assert "lunch" not in specifics


def test_specifics_keep_an_issue_number_and_a_duration_as_written() -> None:
    """A pull request or issue is named with its "#" ("#148", not "148"), a figure with
    its unit of time ("90 minutes", "48 hours") and a path of names with its "::", as the
    conversation says them."""
    from ccm.context import _specific_terms

    found = _specific_terms(
        "Merged PR #148 and #742 after 90 minutes; item#3 waits 48 hours on Net::ReadTimeout."
    )
    assert {"#148", "#742", "90 minutes", "48 hours", "Net::ReadTimeout"} <= found
    assert "148" not in found and "item#3" not in found and "#3" not in found
    assert not _specific_terms("# Notes\n## Plan")


def test_the_specific_said_last_comes_before_one_said_twice_long_before() -> None:
    """The work at hand is what the latest turns speak of: a figure said once in the
    newest turn is named before one said twice at the start of what is kept."""
    from ccm.context import Block, _Shown, _specifics

    recent = [[n, "user", f"Chat {n} about lunch."] for n in range(1, 11)]
    recent[0][2] = recent[1][2] = "The old run was run-0312b."
    recent[9][2] = "Now look at run-0419c."
    nothing = _Shown(Block("critical", "Critical"), [])
    line = _specifics(recent, 1, nothing, 200)
    assert line.index("run-0419c") < line.index("run-0312b")


def test_specifics_keep_a_setting_a_share_a_channel_and_a_numbered_part_whole() -> None:
    """A setting is named with its value ("TimeoutStartSec=8h"), a share with its "%",
    a reading with its unit ("9.63 mA", "1.9 miles"), a chat channel with its "#", a
    private name with its underscore, a date month first ("Jun 11") or with its ordinal
    ("14th November"), a name said in brackets or ending in "'s" whole, and a part of a
    document or a release with its number ("clause 14.3", "Flutter 3.19")."""
    from ccm.context import _specific_terms

    found = _specific_terms(
        "Set TimeoutStartSec=8h; 0.38% of requests failed at 9.63 mA over 1.9 miles. "
        "Warn in #ci-noise, keep _dbt_max_partition. The cert ends Jun 11, the lease on "
        "14th November. The hall (Quarto Oliveira has a shower) and then Linda's Book "
        "Club. See clause 14.3 and ADR 0007, on Flutter 3.19."
    )
    assert {
        "TimeoutStartSec=8h",
        "0.38%",
        "9.63 mA",
        "1.9 miles",
        "#ci-noise",
        "_dbt_max_partition",
        "Jun 11",
        "14th November",
        "Quarto Oliveira",
        "Linda's Book Club",
        "clause 14.3",
        "ADR 0007",
        "Flutter 3.19",
    } <= found
    # the name said with its number is named once, and a word that opens a sentence
    # before a date is no name ("On 14 March" is the date)
    assert "Flutter" not in found and "ADR" not in found
    dated = _specific_terms("On 14 March we met. At 5 we left.")
    assert "14 March" in dated and not {"On 14", "At 5"} & dated
    # a heading or a C directive is no channel, a count of things no numbered part
    assert not _specific_terms("# Notes") and "took 2" not in _specific_terms("we took 2 of them")
    assert not {"#include", "#define"} & _specific_terms("#include <stdio.h>\n#define N 4")


def test_specifics_are_not_read_from_headings_abbreviations_prompts_or_tool_inputs() -> None:
    """A heading is in title case ("## Error Handling"): its capitals are no names, nor
    is "e.g" an identifier; a slash command's prompt (a system turn, "**Task
    Decomposition**: ...") and the keys and escaped line breaks of a tool call's JSON
    input ("subagent_type", "\\nUse") are nothing the conversation spoke of."""
    from ccm.context import Block, _Shown, _specific_terms, _specifics

    found = _specific_terms("## Error Handling\n- split it (e.g. by file), ask Priya Nair.")
    assert "Priya Nair" in found
    assert not {"Handling", "Error Handling", "e.g"} & found
    prompt = [2, "system", "## Steps\n1. **Task Decomposition**: into 3-5 subtasks."]
    call = (
        'On it.\n[tool_use] Task {"subagent_type":"general-purpose","prompt":"Scan.\\nUse '
        'the 150-200 word limit"}'
    )
    recent = [[1, "user", "Bump it to v2.4.1 please."], prompt, [3, "assistant", call]]
    nothing = _Shown(Block("critical", "Critical"), [])
    line = _specifics(recent, 1, nothing, 40)
    assert "v2.4.1" in line
    named = set(line.removeprefix("Specifics: ").split(", "))
    assert not {"subagent_type", "general-purpose", "nUse", "150-200", "3-5"} & named
    assert not {"Decomposition", "Task Decomposition"} & named


def test_specifics_name_a_camel_case_name_that_starts_in_lower_case() -> None:
    """Code names a function or a variable in camelCase ("fatalError",
    "upcomingRefills") as often as in CamelCase; a word with a capital inside it is one,
    a word that only starts a sentence is not."""
    from ccm.context import _specific_terms

    found = _specific_terms("The store load calls fatalError; upcomingRefills is empty. Fine.")
    assert {"fatalError", "upcomingRefills"} <= found
    assert "Fine" not in found and "The" not in found


def test_specifics_keep_a_name_of_several_words_whole() -> None:
    from ccm.context import _specific_terms

    found = _specific_terms(
        "we booked the Fox & Hounds and asked Linda's Book Club, and Mr Okafor."
    )
    assert {"Fox & Hounds", "Linda's Book Club", "Mr Okafor"} <= found
    assert "Fox" not in found and "Hounds" not in found
    # ... also when it opens a sentence: not its last word alone
    found = _specific_terms("Green Valley Movers came back at £380. The van is fine.")
    assert "Green Valley Movers" in found and "Movers" not in found and "The" not in found


def test_the_specifics_of_the_topic_at_hand_come_first() -> None:
    from ccm.context import Block, _Shown, _specifics

    # turns 1-4 on the earlier topic name its branch four times; the open segment,
    # from turn 5, names its figure twice: the topic at hand weighs more
    recent = [
        [1, "user", "Rebase feat/cli-args on main."],
        [2, "assistant", "Rebased feat/cli-args."],
        [3, "user", "Push feat/cli-args."],
        [4, "assistant", "Pushed feat/cli-args."],
        [5, "user", "The nightly says 671.2 ms."],
        [6, "assistant", "671.2 ms is the regression."],
    ]
    nothing = _Shown(Block("critical", "Critical"), [])
    first = _specifics(recent, 5, nothing, 8)
    assert first.startswith("Specifics: 671.2")
    # with no open segment, the branch said most wins
    assert _specifics(recent, 10**9, nothing, 8).startswith("Specifics: feat/cli-args")
    # a file only a tool's listing holds was never spoken of
    listing = [*recent, [7, "tool", "$ ls\nconfig-array.js config-ops.js 671.2"]]
    line = _specifics(listing, 5, nothing, 40)
    assert "671.2" in line and "feat/cli-args" in line and "config-" not in line


def test_a_figure_is_named_with_its_unit() -> None:
    from ccm.context import _specific_terms

    said = (
        "Blocks of 2 km, 45 cm of clearance, 430-490 g a day, 12 ms at p50, 15% off, at 3 is fine."
    )
    found = _specific_terms(said)
    assert {"2 km", "45 cm", "430-490 g", "12 ms", "15%"} <= found
    assert not {"2", "45", "430-490", "12"} & found
    assert not any(term.endswith(" is") for term in found)  # "is" is no unit
    assert {"\u00a31,540", "$25", "\u20ac846"} <= _specific_terms(
        "\u00a31,540 back, $25 a month, \u20ac846"
    )
    # a name with the title it is said with
    assert "Mr Okafor" in _specific_terms("the letter from Mr Okafor came in")


# -- recall in an agent's session ------------------------------------------------------


def _deploy(tmp_path: Path) -> Path:
    """An agent's session: two requests, each followed by tool runs and readings."""
    noise = "\n".join(f"INFO step {k}: nothing to report" for k in range(80))
    return _agent(
        tmp_path,
        [
            ("user", "Why does the staging deploy fail? Check the pods."),
            ("assistant", "Looking at the pods first."),
            ("tool", "$ kubectl get pods\nweb-1  CrashLoopBackOff  restarts 12"),
            (
                "tool",
                f"$ kubectl logs web-1\n{noise}\nERROR database: too many connections (max 20)",
            ),
            ("assistant", "The web pods crash because the database refuses connections."),
            ("tool", "$ kubectl describe configmap db\n" + noise),
            ("assistant", "Raised the pool limit; the pods are green."),
            ("user", "Now tidy the README, please."),
            ("tool", "$ git diff README.md\n" + noise),
            ("assistant", "README tidied."),
        ],
        "deploy",
    )


def test_what_a_context_shows_is_counted_once_when_indexed_and_the_counts_change_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The turns of an exchange in which tools ran are recalled one by one: the index
    stores their tokens as shown (up to `SHOWN_BOUND`), and a context uses those counts
    instead of counting the turns again (the exchange itself is not counted whole)."""
    from ccm import index as index_module
    from ccm.index import SHOWN_BOUND, Index, as_shown

    counted: list[str] = []
    count_within = tokens.count_within

    def counting(text: str, limit: int, cached: bool = True) -> int:
        counted.append(text)
        return count_within(text, limit, cached)

    root = _deploy(tmp_path)
    store = Store(root)
    asked = ["--budget", "1500", "--query", "why do the web pods crash?"]
    with Index(store) as index:
        index.update("deploy")
        rows = index.db.execute(
            "SELECT kind, first_turn, ts, text, shown, role FROM units "
            "WHERE session='deploy' AND kind IN ('pair', 'turn') ORDER BY kind, first_turn"
        ).fetchall()
        exchanges = {r[1]: r for r in rows if r[0] == "pair"}
        assert exchanges[1][5] == "tools" and exchanges[1][4] is None  # shown turn by turn
        for kind, _, ts, text, shown, _ in rows:
            if kind == "turn":
                assert shown == tokens.count_within(as_shown("turn", ts, text), SHOWN_BOUND)
        before = ccm(root, "context", "deploy", *asked).stdout
        assert "too many connections" in before
        monkeypatch.setattr(index_module.tokens, "count_within", counting)
        query = "why do the web pods crash?"
        assert list(index.recalled(query, "deploy").shown(lambda: 10**5))
        assert counted == []  # every turn it weighed was counted when indexed
        index.db.execute("UPDATE units SET shown=NULL WHERE kind='turn'")  # counted again
        index.db.commit()
        assert list(index.recalled(query, "deploy").shown(lambda: 10**5))
        assert counted
        monkeypatch.undo()
    assert ccm(root, "context", "deploy", *asked).stdout == before


def test_recall_stops_reading_after_misses_in_a_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When turn after turn cannot be shown in the room left (`MISSES` in a row), those
    ranked after them are not read: a long agent session would otherwise be read to its
    end for the last few tokens of room."""
    from ccm import index as index_module
    from ccm.index import MISSES, Index

    lines: list[tuple[str, str]] = []
    for n in range(3 * MISSES):
        lines += [
            ("user", f"Check the parser on shard {n}."),
            ("tool", f"$ parse shard-{n}\n" + "\n".join(f"parser row {k} ok" for k in range(40))),
            (
                "assistant",
                f"The parser is fine on shard {n}: all forty of its rows were read, "
                "none of them with a warning, and none was skipped.",
            ),
        ]
    root = _agent(tmp_path, lines)
    tried: list[int] = []
    single = index_module.Recalled._single

    def counted(self: Any, value: float, row: Any, most: int | None, *rest: Any) -> Any:
        tried.append(most or 0)
        return single(self, value, row, most, *rest)

    monkeypatch.setattr(index_module.Recalled, "_single", counted)
    with Index(Store(root)) as index:
        index.update("agent")
        room = index_module.LEAST_ROOM + 1  # too little for any of the turns
        assert list(index.recalled("parser rows", "agent").shown(lambda: room)) == []
        assert len(tried) == MISSES
        tried.clear()
        monkeypatch.setattr(index_module, "MISSES", 3 * MISSES)
        assert list(index.recalled("parser rows", "agent").shown(lambda: room)) == []
        assert len(tried) > MISSES


def test_a_recalled_tool_result_shows_where_it_answers_not_only_its_first_lines(
    tmp_path: Path,
) -> None:
    root = _deploy(tmp_path)
    text = ccm(
        root, "context", "deploy", "--budget", "1000", "--query", "Why did the web pods crash?"
    ).stdout
    recalled = text.split("## Recalled from memory\n", 1)[1].split("\n\n## ", 1)[0]
    # the reading, and of the log it read, how it ended, far beyond its first lines; the
    # 80 lines of noise between are left out, saying how to get them back
    assert "assistant: The web pods crash because the database refuses connections." in recalled
    assert "ERROR database: too many connections (max 20)" in recalled
    assert "INFO step 40:" not in recalled and "@expand(turn 4)" in recalled
    # turn by turn: a turn of the exchange that does not match is not shown with it
    assert "describe configmap" not in recalled


def test_a_recalled_tool_result_shows_the_lines_its_reading_names(tmp_path: Path) -> None:
    """Written for this test: the log's line that answers ("why was the invoice a penny
    short?") shares no word with the question; the assistant's reading of the log names
    its commit, and that line is shown with the lines that hold the question's words."""
    checks = "\n".join(f"line {k}: totals check ok, nothing to report" for k in range(150))
    chores = "\n".join(f"9a0b1c{k} chore: tidy billing module, part {k}" for k in range(5))
    log = (
        "$ git log --oneline -6 -- billing/ && ./check-totals\n"
        f"{chores}\nc41d9e2 fix(billing): round each line before the VAT\n"
        f"{checks}\ninvoice INV-207 total: 118.80 (expected 118.81)"
    )
    root = _agent(
        tmp_path,
        [
            ("user", "Why is invoice INV-207 short?"),
            ("tool", log),
            ("assistant", "It started with `c41d9e2`: each line is rounded before the VAT."),
            ("user", "Now the footer of the site."),
            ("assistant", "The footer links are fixed."),
        ],
    )
    text = ccm(
        root, "context", "agent", "--budget", "900", "--query", "Why was the invoice short?"
    ).stdout
    recalled = text.split("## Recalled from memory\n", 1)[1].split("\n\n## ", 1)[0]
    assert "invoice INV-207 total: 118.80" in recalled and "@expand(turn 2)" in recalled
    assert "c41d9e2 fix(billing): round each line before the VAT" in recalled
    assert "line 75: totals check ok" not in recalled


def test_a_recalled_tool_result_is_shown_whole_when_it_fits_half_the_room(
    tmp_path: Path,
) -> None:
    """Past `TURN_TOKENS` a recalled turn shows the lines that hold the query's words;
    a hit may take half the room left, to be shown whole: the line that answers
    often has none of them ("Subtotal", under a table of items)."""
    from ccm.index import TURN_TOKENS

    rows = "\n".join(
        f"{k:>3} tile batch {k} of grey hexagons       {100 + k}.00" for k in range(60)
    )
    total = "Subtotal                           5,930.00"
    table = f"$ cat quote-marek.txt\n{rows}\n{total}\nValid for 30 days. VAT not included."
    root = _agent(
        tmp_path,
        [
            ("user", "Can you check the file he sent?"),
            ("tool", table),
            ("assistant", "The items add up to more than the subtotal says."),
            ("user", "Now the paint colours."),
            ("assistant", "Warm white for the walls."),
        ],
        "kitchen",
    )
    assert tokens.count_tokens(table) > TURN_TOKENS

    def recalled(budget: int) -> str:
        asked = ["--budget", str(budget), "--query", "What was in Marek's quote?"]
        text = ccm(root, "context", "kitchen", *asked).stdout
        return text.split("## Recalled from memory\n", 1)[1].split("\n\n## ", 1)[0]

    assert total in recalled(4 * tokens.count_tokens(table))
    focused = recalled(TURN_TOKENS + 300)  # half the room is less than the table
    assert "$ cat quote-marek.txt" in focused and total not in focused
    assert "@expand(turn 2)" in focused


def test_a_context_recalls_an_agent_exchange_turn_by_turn(tmp_path: Path) -> None:
    root = _deploy(tmp_path)
    asked = ["--budget", "1000", "--query", "database connections?", "--format", "json"]
    blocks = json.loads(ccm(root, "context", "deploy", *asked).stdout)["blocks"]
    recall = next(b for b in blocks if b["name"] == "recall")
    turns = [i for i in recall["items"] if i.get("kind") == "turn"]
    assert turns and all(i["turns"][0] == i["turns"][1] for i in turns)
    assert {4, 5} <= {i["turns"][0] for i in turns}
    best = next(i for i in turns if i["turns"][0] == 5)
    assert "connections" in best["matched"] and best["exchange"] == 1
    # `ccm recall` lists the exchanges, ranked as the context ranks their turns
    listed = ccm(root, "recall", "database connections", "--session", "deploy", "--json")
    hits = json.loads(listed.stdout)["hits"]
    assert hits[0]["kind"] == "pair" and hits[0]["turns"] == [1, 7]


def test_an_open_index_sees_tool_turns_another_writer_added_to_the_last_exchange(
    tmp_path: Path,
) -> None:
    """The daemon indexes what an agent adds to the exchange still going on; an index
    held open elsewhere (the proxy's) must rank those tool turns as tool turns."""
    from ccm.index import Index

    said = [("user", "Why does the build fail?"), ("assistant", "Reading the log.")]
    root = _agent(tmp_path, said, "build")
    store = Store(root)
    with Index(store) as held:
        held.update("build")
        assert held._tool_turns("build") is None
        source = tmp_path / "build.jsonl"
        more = {"role": "tool", "content": "$ make\nerror: missing libfoo", "ts": 1_767_000_200}
        more["tool"] = {"name": "Bash"}
        source.write_text(source.read_text() + json.dumps(more) + "\n")
        assert ccm(root, "ingest", str(source)).exit_code == 0
        with Index(store) as other:
            other.update("build")
        found = held._tool_turns("build")
        assert found is not None and found[0].tolist() == [3] and found[1].tolist() == [1]


def test_an_open_index_knows_the_exchange_of_turns_another_writer_added(
    tmp_path: Path,
) -> None:
    """From its second question on, recall reads the exchange of each turn it scores from
    what it kept of the index, then only the turns indexed since, by this index or
    another writer: the same as the units say, for the turns before and after (a turn no
    unit holds has none)."""
    from ccm.index import Index

    said = [("user", "Why does the build fail?"), ("assistant", "Reading the log.")]
    said += [("user", "And the tests?"), ("assistant", "Running them.")]
    root = _agent(tmp_path, said, "build")
    store = Store(root)
    with Index(store) as held:
        held.update("build")
        for _ in range(2):  # read for the turns asked, then kept for all
            assert held._exchange_of("build", [0, 1, 2, 3, 4, 5, 99]) == {1: 1, 2: 1, 3: 3, 4: 3}
        assert "build" in held._exchange_kept
        assert held._exchange_kept["build"] is not None  # every turn's, kept
        source = tmp_path / "build.jsonl"
        more = [
            {"role": "tool", "content": "$ make test\n2 failed", "ts": 1_767_000_200},
            {"role": "assistant", "content": "Two tests fail.", "ts": 1_767_000_260},
            {"role": "user", "content": "Fix them.", "ts": 1_767_000_320},
        ]
        more[0]["tool"] = {"name": "Bash"}
        source.write_text(source.read_text() + "".join(json.dumps(m) + "\n" for m in more))
        assert ccm(root, "ingest", str(source)).exit_code == 0
        with Index(store) as other:
            other.update("build")
        found = held._exchange_of("build", list(range(1, 9)))
        units = held._turn_facts("build", range(1, 9))
        assert found == {turn: fact[0] for turn, fact in units.items()}
        assert found == {1: 1, 2: 1, 3: 3, 4: 3, 5: 3, 6: 3, 7: 7}


def test_an_open_index_reads_only_the_tool_turns_indexed_since_and_holds_them_all(
    tmp_path: Path,
) -> None:
    """A proxy's index is updated at every request: the tool turns it ranks with are
    read once, then only the new ones, and they are the same as a fresh read gives."""
    from ccm.index import Index

    root = _agent(tmp_path, [("user", "Start the checks."), ("assistant", "On it.")], "steps")
    store = Store(root)
    source = tmp_path / "steps.jsonl"
    with Index(store) as held:
        held.update("steps")
        asked: list[str] = []  # the reads of tool turns, their values bound
        held.db.set_trace_callback(lambda sql: asked.append(sql) if "role='tool'" in sql else None)
        for step in range(4):
            records = [
                {"role": "user", "content": f"Run check {step}.", "ts": 1_767_001_000 + 90 * step},
                {"role": "tool", "content": f"check {step}: ok", "ts": 1_767_001_030 + 90 * step},
            ]
            if step % 2:  # a second tool turn in the same exchange, indexed later
                records.append(
                    {"role": "tool", "content": "retry: ok", "ts": 1_767_001_060 + 90 * step}
                )
            for record in records:
                record.update({"tool": {"name": "Bash"}} if record["role"] == "tool" else {})
                source.write_text(source.read_text() + json.dumps(record) + "\n")
                assert ccm(root, "ingest", str(source)).exit_code == 0
                held.update("steps")
                found = held._tool_turns("steps")
                with Index(store) as fresh:
                    expected = fresh._tool_turns("steps")
                assert (found is None) == (expected is None)
                if found is not None and expected is not None:
                    assert found[0].tolist() == expected[0].tolist()
                    assert found[1].tolist() == expected[1].tolist()
        assert found is not None and len(found[0]) == 6 and len(found[1]) == 4
        # each read asks for the turns after those it held: none is read twice
        since = [int(sql.rsplit("first_turn >", 1)[1].split()[0]) for sql in asked]
        assert since == sorted(since) and len(set(since)) == len(since) and since[1:]
        assert all(after > 0 for after in since[1:])


def test_an_identifier_in_the_question_is_matched_whole(tmp_path: Path) -> None:
    from ccm.index import Index

    root = _agent(
        tmp_path,
        [
            ("user", "None of the parser tests fail now?"),
            ("assistant", "None fail; the parser handles none values."),
            ("user", "Why not use is_none_or there?"),
            ("assistant", "is_none_or needs Rust 1.82 and we are on 1.74."),
        ],
    )
    with Index(Store(root)) as index:
        index.update("agent")
        hits = index.recall("Why couldn't we use is_none_or in the parser?", "agent")
    assert "Rust 1.82" in hits[0].text and "is_none_or" in hits[0].matched


def test_recall_does_not_repeat_what_the_tail_shows(tmp_path: Path) -> None:
    root = _deploy(tmp_path)
    context = assemble(Store(root), "deploy", 3000, "What did we do to the README?")
    recall = next(b for b in context.blocks if b.name == "recall")
    whole = {t["turn"] for t in context.tail if not (t.get("cut") or t.get("gap"))}
    recalled = {i["turns"][0] for i in recall.items if i.get("turns")}
    # the tail shows the latest turns whole; recall shows the others, a cut one whole
    assert 10 in whole and recalled and not recalled & whole


def test_a_figure_abbreviated_with_k_finds_the_line_that_writes_it_out(tmp_path: Path) -> None:
    """ "at 20k steps" asks for the log line "eval step 20000" among many like it (more
    than fit: the newest first, as `tail -r` prints them)."""
    evals = "\n".join(
        f"2026-03-12 1{n % 10}:00:00 | eval step {2000 * n:5d} | eval_loss {3.5 - n / 100:.4f}"
        for n in range(40, 0, -1)
    )
    filler = "\n".join(f"2026-03-12 09:00:{n:02d} | step {n} | loss 9.{n:02d}" for n in range(60))
    root = _agent(
        tmp_path,
        [
            ("user", "run it to the end and show me the evals"),
            ("tool", f"$ grep eval train.log\n{evals}\n{filler}"),
            ("assistant", "It finished; the evals are above."),
            *[("user", f"next: the tokenizer task {n}") for n in range(6)],
        ],
    )
    asked = ["--budget", "600", "--query", "What was the eval loss at 20k steps?"]
    text = ccm(root, "context", "agent", *asked).stdout
    assert "eval step 20000 | eval_loss 3.4000" in text


@pytest.mark.parametrize(
    ("text", "figures"),
    [
        ("at 20k steps", ["20000", "20,000"]),
        ("1.5K rows and 300k more", ["1500", "1,500", "300000", "300,000"]),
        ("k8s, 20kb, v2.5k, 12,5k, 3.14159k", []),
    ],
)
def test_figures_abbreviated_with_k_are_spelled_out(text: str, figures: list[str]) -> None:
    from ccm import lexical

    assert lexical.spelled_out(text) == figures


def test_the_reading_that_closes_an_agent_exchange_is_recalled_with_its_best_turn(
    tmp_path: Path,
) -> None:
    """The assistant turn that ends an exchange in which tools ran reads what they
    found, often in none of the words the question asks with: it ranks as its
    exchange does, ahead of other turns that only share the question's words."""
    lines: list[tuple[str, str]] = [
        ("user", "The nightly export to the warehouse stalls again, find out why."),
        ("tool", "$ journalctl -u warehouse-export\nexport started 03:00\nexport stalled: waiting"),
        (
            "tool",
            "$ psql -c 'select * from pg_locks'\nrelation orders  AccessExclusiveLock  vacuum",
        ),
        (
            "assistant",
            "Found it: a vacuum full on the orders table holds its lock until 03:10, so "
            "the job moves to 03:30 and the vacuum to Sunday.",
        ),
    ]
    for n in range(6):
        lines += [
            ("user", f"Check export shard {n}, it stalled in March too."),
            (
                "tool",
                f"$ export-status shard-{n}\n" + f"nightly export shard {n}: stalled, ok\n" * 8,
            ),
            ("assistant", f"Shard {n} exports fine now; its one stall was a network blip."),
        ]
    lines += [("user", "Now the README, please."), ("assistant", "README tidied.")]
    root = _agent(tmp_path, lines, "export")
    asked = ["--budget", "500", "--query", "Why did the nightly warehouse export stall?"]
    text = ccm(root, "context", "export", *asked).stdout
    recalled = text.split("## Recalled from memory\n", 1)[1].split("\n\n## ", 1)[0]
    assert "a vacuum full on the orders table holds its lock until 03:10" in recalled


def test_a_small_context_gives_its_room_to_what_was_said_not_the_manifest(root: Path) -> None:
    """At 1,000 tokens the manifest is its budget line; from there it takes its share of
    what a budget has more, and a larger one shows the session and its efforts."""
    store = Store(root)
    small = assemble(store, "ledger-sync", 1000, None)
    manifest = next(b for b in small.blocks if b.name == "manifest")
    assert len(manifest.lines) == 1 and manifest.lines[0].startswith("Budget: 1000 tokens, ")
    larger = next(
        b for b in assemble(store, "ledger-sync", 4000, None).blocks if b.name == "manifest"
    )
    assert larger.lines[0].startswith("Session ledger-sync: ") and len(larger.lines) > 2


def test_a_question_about_the_past_leaves_the_manifest_its_budget_line(root: Path) -> None:
    """Recall answers a question about the past: its context's manifest is the budget
    left alone, and the room the rest of the manifest and the efforts took goes to what
    is recalled."""
    store = Store(root)
    asked = assemble(store, "ledger-sync", 1500, "What did we decide about the duplicate rows?")
    manifest = next(b for b in asked.blocks if b.name == "manifest")
    assert len(manifest.lines) == 1 and manifest.lines[0].startswith("Budget: 1500 tokens, ")
    larger = assemble(store, "ledger-sync", 6000, "What did we decide about the duplicate rows?")
    assert "efforts" not in {b.name for b in larger.blocks}
    casual = assemble(store, "ledger-sync", 1500, None)
    lines = next(b for b in casual.blocks if b.name == "manifest").lines
    assert lines[0].startswith("Session ledger-sync: ") and lines[-1].startswith("Budget: ")
    assert "efforts" in {b.name for b in assemble(store, "ledger-sync", 6000, None).blocks}


def test_a_line_well_inside_a_long_tool_output_is_found(tmp_path: Path) -> None:
    """A tool's output is indexed by its first and last 1,000 characters: the line of a
    2 KB listing that says why, 800 characters from either end, is found by its words."""
    filler = "".join(f"{n:3}  key_{n}: value {n}\n" for n in range(40))
    listing = (
        "$ cat deploy/worker.yaml\n" + filler + "  replicas: 1  # one scheduler only\n" + filler
    )
    assert 1500 < len(listing) < 2000
    lines: list[tuple[str, str]] = [
        ("user", "show me the worker deployment"),
        ("tool", listing),
        ("assistant", "That is the worker's deployment."),
    ]
    for n in range(30):  # other work since, which the latest turns show
        lines += [
            ("user", f"now tidy chapter {n} of the README"),
            ("assistant", f"Chapter {n} tidied: headings, links and the examples checked."),
        ]
    root = _agent(tmp_path, lines, "deploy")
    asked = ["--budget", "600", "--query", "Why only one scheduler replica?"]
    text = ccm(root, "context", "deploy", *asked).stdout
    recalled = text.split("## Recalled from memory\n", 1)[1].split("\n\n## ", 1)[0]
    assert "replicas: 1  # one scheduler only" in recalled
