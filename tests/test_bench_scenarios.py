"""`ccm bench scenarios`: the scoring functions by hand, and the command on a small
synthetic scenario written for this test."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from ccm.bench_scenarios import (
    Mark,
    conflict_resolved,
    contains,
    content_words,
    is_junk,
    key_sentence,
    match_conclusions,
    note_parts,
    pk,
    pk_window,
    prf,
    sentences,
    statement_share,
)
from ccm.cli import main

# -- a small scenario: a CSV export for a bookkeeping tool -------------------------------

CHAT = [
    (
        "user",
        "hi! I want a CSV export for ledgerly's monthly report.\n"
        "One rule for this repo: always keep money amounts as integer cents, never floats.",
    ),
    ("assistant", "Understood: amounts stay integer cents end to end. Where does the report live?"),
    ("user", "report.py, the function build_month(). which library should we use for the CSV?"),
    (
        "assistant",
        "Two options: the stdlib csv module, or pandas.\n"
        "I timed both on the March ledger: csv wrote 48,000 rows in 0.21 s, pandas in 1.9 s "
        "plus 180 MB of imports.",
    ),
    ("user", "pandas feels heavy for a single file. anything csv can't do that we need?"),
    ("assistant", "Quoting of commas in payee names; csv.writer handles that with QUOTE_MINIMAL."),
    ("user", "and use semicolons as the delimiter, our accountant's Excel wants them."),
    ("user", "ok let's go with the stdlib csv module, no pandas. decided."),
    ("assistant", "Going with csv.writer. I'll add export_month_csv() next to build_month()."),
    ("tool", "$ pytest tests/test_report.py -q\n..F\nFAILED test_export_totals - 1999 != 2000"),
    ("assistant", "The total is one cent off: a float sneaked in through the VAT rounding."),
    ("assistant", "I replaced the division with integer arithmetic. That should fix it."),
    ("tool", "$ pytest tests/test_report.py -q\n..F\nFAILED test_export_totals - 2001 != 2000"),
    ("assistant", "Still off: the rounding now goes up. Using round-half-even on cents instead."),
    ("tool", "$ pytest tests/test_report.py -q\n...\n3 passed in 0.12s"),
    ("user", "green now, that one's fixed. the totals match the ledger to the cent."),
    ("user", "what did the timing show again for csv vs pandas?"),
    ("assistant", "csv wrote the 48,000 March rows in 0.21 s; pandas took 1.9 s."),
    (
        "user",
        "Ines from accounting replied: their import wants commas, not semicolons. "
        "switch the delimiter to commas.",
    ),
    ("assistant", "Switched the delimiter to commas in export_month_csv(), tests still green."),
]

LABELS: dict[str, Any] = {
    "session": "s01",
    "segments": [
        {"start": 1, "end": 6, "topic": "t1"},
        {"start": 7, "end": 7, "topic": "t3"},
        {"start": 8, "end": 9, "topic": "t1"},
        {"start": 10, "end": 16, "topic": "t2"},
        {"start": 17, "end": 18, "topic": "t1"},
        {"start": 19, "end": 20, "topic": "t3"},
    ],
    "topics": {
        "t1": {
            "title": "CSV library for the monthly export",
            "keywords": ["csv", "pandas", "stdlib"],
            "status": "concluded",
            "concluded_at": 8,
            "conclusion": "Use the stdlib csv module for the monthly export, not pandas.",
            "type": "decision",
        },
        "t2": {
            "title": "Export totals one cent off",
            "keywords": ["cent", "rounding", "test_export_totals"],
            "status": "concluded",
            "concluded_at": 16,
            "conclusion": "The export totals match the ledger to the cent with round-half-even.",
            "type": "fix",
        },
        "t3": {
            "title": "CSV delimiter",
            "keywords": ["delimiter", "commas", "Ines"],
            "status": "concluded",
            "concluded_at": 19,
            "conclusion": "The CSV delimiter is a comma, as the accounting import wants.",
            "type": "decision",
        },
    },
    "superseded": [
        {"topic": "t3", "old_turn": 7, "new_turn": 19, "note": "semicolons, then commas"}
    ],
    "critical": [
        {
            "turn": 1,
            "text": "Keep money amounts as integer cents, never floats.",
            "kind": "instruction",
        }
    ],
    "false_conclusions": [12],
    "working_state_at_end": {
        "current_task": "The CSV export is done, with commas as the delimiter.",
        "completed_steps": ["csv chosen", "totals fixed", "delimiter switched to commas"],
        "next_step": "Ship the export.",
        "open_topics": [],
        "key_terms": ["delimiter", "commas", "Ines", "csv", "export_month_csv"],
    },
    "recall_questions": [
        {
            "q": "What did the timing show for csv and pandas?",
            "evidence": [4],
            "answer": "csv wrote 48,000 rows in 0.21 s, pandas in 1.9 s",
        }
    ],
    "conflicts": [
        {"kind": "preference", "turns": [7, 19], "resolution": "Commas replace semicolons."}
    ],
    "checkpoints": [
        {
            "turn": 10,
            "current_task": "Writing the CSV export.",
            "open_topics": ["t2"],
            "key_terms": ["csv.writer", "export_month_csv", "test_export_totals", "cents"],
        }
    ],
}


def write_scenario(folder: Path, name: str = "s01") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    lines = [
        json.dumps(
            {
                "turn": number,
                "role": role,
                "content": content,
                "ts": f"2026-05-04T10:{number:02d}:00Z",
            }
        )
        for number, (role, content) in enumerate(CHAT, 1)
    ]
    (folder / f"{name}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (folder / f"{name}.labels.yaml").write_text(
        yaml.safe_dump({**LABELS, "session": name}, sort_keys=False), encoding="utf-8"
    )
    return folder


# -- segmentation ---------------------------------------------------------------------


def test_pk_on_a_hand_computed_example() -> None:
    # gold: 1-3 | 4-8; hypothesis: 1-5 | 6-8; k = 2, pairs (i, i+2) for i in 1..6:
    # i=1 agree, i=2..5 disagree, i=6 agree
    assert pk_window([1, 4], 8) == 2
    assert pk([1, 4], [1, 6], 8) == pytest.approx(4 / 6)
    assert pk([1, 4], [1, 6], 8, k=1) == pytest.approx(2 / 7)  # only (3,4) and (5,6)


def test_pk_of_a_perfect_hypothesis_is_zero_and_of_any_between_zero_and_one() -> None:
    gold = [1, 28, 33, 39, 61, 76, 90]
    assert pk(gold, gold, 107) == 0.0
    assert pk(gold, [1], 107) == pytest.approx(pk(gold, [1], 107))
    for hypothesis in ([1], list(range(1, 108)), [1, 50], [1, 30, 60, 90]):
        assert 0.0 <= pk(gold, hypothesis, 107) <= 1.0
    assert pk_window([1], 1) == 1  # never below 1
    assert pk([1], [1], 1) == 0.0  # nothing to compare


# -- key sentences --------------------------------------------------------------------


def test_key_sentence_on_a_hand_example() -> None:
    content = (
        "Sure thing.\n"
        "- Always keep amounts as integer cents. Floats lose pennies!\n"
        "1. Tests go in tests/ as usual"
    )
    assert sentences(content) == [
        "Sure thing.",
        "Always keep amounts as integer cents.",
        "Floats lose pennies!",
        "Tests go in tests/ as usual",
    ]
    assert key_sentence(content, "keep amounts in integer cents") == (
        "Always keep amounts as integer cents."
    )
    assert key_sentence("Alpha beta. Beta alpha.", "alpha") == "Alpha beta."  # ties: earliest
    assert contains(
        "x: ALWAYS keep\n  amounts as integer   cents. y", "always keep amounts as integer cents."
    )
    assert not contains("keep amounts as floats", "Always keep amounts as integer cents.")


# -- conclusions ----------------------------------------------------------------------


def test_conclusion_matching_on_a_hand_example_with_a_trap() -> None:
    matching = match_conclusions(
        predicted=[10, 21, 30], gold=[("t1", 12), ("t2", 20), ("t3", 40)], false_turns=[29, 5]
    )
    assert matching.pairs == [(10, "t1", 12), (21, "t2", 20)]
    assert matching.unmatched == [30]
    assert matching.missed == [("t3", 40)]
    assert matching.traps == [(29, 30)]  # 5 is near no prediction
    scores = prf(matching.matched, matching.predicted, matching.gold)
    assert scores == {"precision": 0.6667, "recall": 0.6667, "f1": 0.6667}
    # one to one, nearest first: 11 takes a (distance 1, earliest), 13 then takes b
    both = match_conclusions([11, 13], [("a", 12), ("b", 14)])
    assert both.pairs == [(11, "a", 12), (13, "b", 14)]
    # two predictions for one gold conclusion: only the nearer one matches
    one = match_conclusions([9, 12], [("a", 11)])
    assert one.pairs == [(12, "a", 11)] and one.unmatched == [9]
    assert prf(0, 0, 3) == {"precision": 0.0, "recall": 0.0, "f1": 0.0}


# -- conflicts ------------------------------------------------------------------------


def test_conflict_rule() -> None:
    earlier_replaced = Mark("manifest", 11, True, "use semicolons")
    later_standing = Mark("graph", 20, False, "use commas")
    assert conflict_resolved([10, 20], [earlier_replaced, later_standing])[0]
    assert not conflict_resolved([10, 20], [later_standing])[0]  # nothing marked
    later_replaced = Mark("critical", 21, True, "use commas")
    assert not conflict_resolved([10, 20], [earlier_replaced, later_replaced])[0]
    far = Mark("graph", 13, True, "unrelated")  # more than one turn away
    assert not conflict_resolved([10, 20], [far])[0]
    # halfway between the two turns: from neither
    resolved, earlier, later = conflict_resolved([28, 30], [Mark("graph", 29, True, "x")])
    assert not resolved and earlier == [] and later == []
    # three turns: the earlier statement, then two later ones
    assert conflict_resolved(
        [3, 22, 44], [Mark("graph", 3, True, "a"), Mark("graph", 44, False, "b")]
    )[0]


# -- the vault ------------------------------------------------------------------------

NOTE = """---
id: s01/seg_1
type: decision
aliases:
- "Going with csv.writer"
---
# Going with csv.writer, no pandas

Going with csv.writer for the monthly export. I'll add export_month_csv().

*decision · active*

## Context
"""


def test_vault_statement_rule() -> None:
    assert note_parts(NOTE) == (
        "Going with csv.writer, no pandas",
        "Going with csv.writer for the monthly export. I'll add export_month_csv().",
    )
    assert note_parts("no heading here\n\nsecond", "fallback") == ("fallback", "no heading here")
    conclusion = "Use the stdlib csv module for the monthly export, not pandas."
    # content words: use, stdlib, csv, module, monthly, export, pandas (7)
    assert content_words(conclusion) == {
        "use", "stdlib", "csv", "module", "monthly", "export", "pandas"
    }  # fmt: skip
    title, paragraph = note_parts(NOTE)
    assert statement_share(conclusion, title, paragraph) == pytest.approx(4 / 7)
    assert statement_share(conclusion, "Pandas", "") == pytest.approx(1 / 7)  # below 25%
    assert is_junk("Done.") and is_junk("That's a good result.") and is_junk("Then (a) is it")
    assert not is_junk("Going with csv.writer, no pandas")


# -- the command ----------------------------------------------------------------------


def test_bench_scenarios_json_on_a_synthetic_scenario(tmp_path: Path) -> None:
    folder = write_scenario(tmp_path / "scenarios")
    result = CliRunner().invoke(main, ["bench", "scenarios", str(folder), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["methods"] == ["ccm", "recency", "bm25"]
    (scenario,) = report["scenarios"]
    assert scenario["scenario"] == "s01" and scenario["turns"] == 20
    segmentation = scenario["segmentation"]
    assert 0.0 <= segmentation["pk"] <= 1.0
    assert segmentation["k"] == 2 and segmentation["gold_starts"] == [1, 7, 8, 10, 17, 19]
    assert segmentation["predicted_starts"][0] == 1

    conclusions = scenario["conclusions"]
    assert conclusions["counts"]["gold"] == 3 and conclusions["counts"]["false_conclusions"] == 1
    assert conclusions["counts"]["predicted"] == len(conclusions["predicted"])
    matched = [p["matched"] for p in conclusions["predicted"] if p["matched"] != "unmatched"]
    missed = [m["topic"] for m in conclusions["missed"]]
    assert sorted(matched + missed) == ["t1", "t2", "t3"]
    for trap in conclusions["traps"]:
        assert trap["turn"] == 12 and abs(trap["predicted_turn"] - 12) <= 1

    # the whole chat fits every budget, so the recency window (and BM25, which with no
    # query is the recency window) holds everything
    critical = scenario["critical"]
    assert critical["total"] == 1
    assert critical["items"][0]["sentence"] == (
        "One rule for this repo: always keep money amounts as integer cents, never floats."
    )
    assert critical["share"]["recency"] == 1.0 and critical["share"]["bm25"] == 1.0
    assert scenario["end_terms"]["total"] == 5
    assert scenario["end_terms"]["share"]["recency"] == 1.0
    (checkpoint,) = scenario["checkpoints"]["checkpoints"]
    assert checkpoint["turn"] == 10 and checkpoint["total"] == 4
    assert checkpoint["share"]["recency"] == 1.0
    assert scenario["recall"]["questions"] == 1
    assert scenario["recall"]["score"]["recency"] == 1.0
    for key in ("critical", "end_terms", "checkpoints"):
        assert 0.0 <= scenario[key]["share"]["ccm"] <= 1.0
    assert scenario["conflicts"]["total"] == 1
    assert scenario["conflicts"]["resolved"] in (0, 1)

    totals = report["totals"]
    assert totals["scenarios"] == 1 and totals["turns"] == 20
    assert totals["pk_mean"] == segmentation["pk"]
    assert totals["conclusions"]["gold"] == 3
    vault = report["vault"]
    assert vault["conclusions"] == 3 and 0 <= vault["stated"] <= 3
    assert vault["junk"] == len(vault["junk_titles"]) <= vault["notes"]
    assert report["seconds"] >= 0


def test_bench_scenarios_table(tmp_path: Path) -> None:
    folder = write_scenario(tmp_path / "scenarios")
    result = CliRunner().invoke(main, ["bench", "scenarios", str(folder)])
    assert result.exit_code == 0, result.output
    assert "measured s01" in result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split()[:3] == ["scenario", "turns", "Pk"]
    assert lines[1].startswith("s01") and lines[2].startswith("total")
    assert any(line.startswith("vault: stated ") and "junk titles" in line for line in lines)
    assert "scenarios measured in" in lines[-1]


def test_bad_inputs_name_the_file(tmp_path: Path) -> None:
    folder = write_scenario(tmp_path / "missing")
    (folder / "s01.labels.yaml").unlink()
    result = CliRunner().invoke(main, ["bench", "scenarios", str(folder), "--json"])
    assert result.exit_code == 1
    assert "s01.labels.yaml" in result.stderr and "s01.jsonl" in result.stderr

    folder = write_scenario(tmp_path / "bad-yaml")
    (folder / "s01.labels.yaml").write_text("segments: [\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["bench", "scenarios", str(folder)])
    assert result.exit_code == 1 and "s01.labels.yaml" in result.stderr

    folder = write_scenario(tmp_path / "no-segments")
    (folder / "s01.labels.yaml").write_text("topics: {}\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["bench", "scenarios", str(folder)])
    assert result.exit_code == 1 and "'segments'" in result.stderr

    empty = tmp_path / "empty"
    empty.mkdir()
    result = CliRunner().invoke(main, ["bench", "scenarios", str(empty)])
    assert result.exit_code == 1 and "no scenarios" in result.stderr

    folder = write_scenario(tmp_path / "shuffled")
    chat = folder / "s01.jsonl"
    lines = chat.read_text(encoding="utf-8").splitlines()
    chat.write_text("\n".join([lines[1], lines[0], *lines[2:]]) + "\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["bench", "scenarios", str(folder)])
    assert result.exit_code == 1 and "s01.jsonl: line 1 holds turn 2" in result.stderr


def test_the_held_out_scenarios_keep_what_their_measure_found(tmp_path: Path) -> None:
    """The first four conversations written as a held-out set
    (tests/fixtures/scenarios_heldout, h01-h04): the rules mended for them hold. (One trap
    is counted accepted for a right answer: the question next to it, "so, options. we just
    roll back?", is one turn after it.) h05-h08 are measured in the README."""
    import shutil

    from ccm.bench_scenarios import run_scenarios

    held_out = Path(__file__).parent / "fixtures" / "scenarios_heldout"
    for name in ("h01", "h02", "h03", "h04"):
        for suffix in (".jsonl", ".labels.yaml"):
            shutil.copy(held_out / f"{name}{suffix}", tmp_path)
    report = run_scenarios(tmp_path)
    totals = report["totals"]
    assert [s["scenario"] for s in report["scenarios"]] == ["h01", "h02", "h03", "h04"]
    assert totals["critical"]["share"]["ccm"] >= 0.95
    assert totals["conclusions"]["traps"] <= 1
    assert totals["conclusions"]["f1"] >= 0.85
    assert totals["pk_mean"] <= 0.16
    assert totals["end_terms"]["share"]["ccm"] >= 0.95
