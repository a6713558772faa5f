"""Memory commands, undo, critical marks, health, compaction and the summary."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ccm.cli import main
from ccm.engine.commands import parse, resolve
from tests.helpers import ccm_at as ccm

SAMPLE = Path(__file__).parent.parent / "sample_knowledge"
MANIFEST: dict[str, Any] = {
    "segments": [
        {
            "id": "seg_1",
            "topic": ["setup", "install", "virtualenv"],
            "summary": "Setting up the project.",
            "effort": "effort_1",
        },
        {
            "id": "seg_2",
            "topic": ["auth", "login", "token"],
            "summary": "Auth implementation with tokens.",
            "effort": "effort_2",
            "conclusion": {"text": "Decision: JWT for the API."},
        },
        {
            "id": "seg_3",
            "topic": ["database", "migration"],
            "summary": "Database migration decisions.",
            "effort": "effort_3",
        },
        {
            "id": "seg_4",
            "topic": ["report", "layout"],
            "summary": "Report layout.",
            "effort": "effort_3",
        },
    ]
}


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "root"
    result = CliRunner().invoke(main, ["--root", str(path), "ingest", str(SAMPLE / "sources")])
    assert result.exit_code == 0, result.output
    return path


def tier(root: Path, session: str, name: str) -> Any:
    return yaml.safe_load((root / "chats" / session / f"{name}.yaml").read_text())


# -- the parser -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "kind", "targets", "extra"),
    [
        ("@expand(seg_3)", "expand", ["seg_3"], {}),
        ('@expand("auth implementation")', "expand", ["seg_2"], {}),
        (
            '@recall("database migration decisions")',
            "recall",
            ["seg_3"],
            {"query": "database migration decisions"},
        ),
        ('@compress("middle", "trimmed")', "compress", ["seg_2", "seg_3"], {"text": "trimmed"}),
        ('@compress(seg_4, "summarized")', "compress", ["seg_4"], {"text": "summarized"}),
        ("@pin(seg_1)", "pin", ["seg_1"], {}),
        ("@unpin(seg_1)", "unpin", ["seg_1"], {}),
        ("@focus(seg_2, seg_4)", "focus", ["seg_2", "seg_4"], {}),
        ("@focus(effort_3)", "focus", ["effort_3"], {}),
        ("@archive(seg_1..seg_3)", "archive", ["seg_1", "seg_2", "seg_3"], {}),
        ('@archive("setup conversation")', "archive", ["seg_1"], {}),
        ('@update(seg_4, "revised")', "update", ["seg_4"], {"text": "revised"}),
        ('@create("learned: X")', "create", [], {"text": "learned: X"}),
    ],
)
def test_commands_resolve_to_events(
    text: str, kind: str, targets: list[str], extra: dict[str, str]
) -> None:
    (command,) = parse(f"some prose before {text} and after")
    resolved = resolve(command, MANIFEST, who="model")
    assert resolved.ok, resolved.message
    assert resolved.event is not None
    assert resolved.event["kind"] == kind and resolved.event["who"] == "model"
    assert resolved.event["args"].get("targets", resolved.matched) == targets
    for key, value in extra.items():
        assert resolved.event["args"][key] == value


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("@pin(seg_99)", "unknown id seg_99; the manifest has seg_1..seg_4"),
        ("@pin(", "no closing ')'"),
        ('@expand("unclosed)', "no closing ')'"),
        ("@frobnicate(seg_1)", "unknown memory command @frobnicate"),
        ("@pin()", "needs an argument"),
        ("@archive(seg_5..seg_9)", "no segment in seg_5..seg_9"),
        ("@archive(seg_3..seg_1)", "bad range"),
        ('@expand("quantum chromodynamics")', "no segment matches"),
        ("@update(seg_1)", "@update needs a segment and the new text"),
    ],
)
def test_bad_commands_get_a_message(text: str, fragment: str) -> None:
    (command,) = parse(text)
    resolved = resolve(command, MANIFEST)
    assert not resolved.ok and resolved.event is None
    assert fragment in resolved.message


def test_an_email_address_is_not_a_command() -> None:
    assert parse("write to ops@example.com (or me@host) today") == []


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(alphabet=st.sampled_from(list("@()\"',._ seg1234pinxpandarchive\\")), max_size=80))
def test_commands_never_raise(text: str) -> None:
    for command in parse(text):
        resolved = resolve(command, MANIFEST)
        assert isinstance(resolved.message, str) and resolved.message


# -- through the CLI ------------------------------------------------------------------


def test_apply_runs_good_commands_and_reports_bad_ones(root: Path) -> None:
    result = ccm(
        root,
        "apply",
        "ledger-sync",
        '@pin(seg_2) @frob(x) @expand(seg_99) @create("learned: CSVs use ;")',
    )
    assert result.exit_code == 1
    assert "evt_1: @pin(seg_2) -> pin seg_2" in result.stdout
    assert "unknown memory command @frob" in result.stderr and "unknown id seg_99" in result.stderr
    manifest = tier(root, "ledger-sync", "manifest")
    assert manifest["segments"][1]["pinned"] is True
    assert manifest["notes"] == [{"id": "evt_2", "text": "learned: CSVs use ;"}]
    events = [
        json.loads(line)
        for line in (root / "chats" / "ledger-sync" / "events.jsonl").read_text().splitlines()
    ]
    assert [(e["kind"], e["who"]) for e in events] == [("pin", "user"), ("create", "user")]


def test_apply_reads_a_file_of_commands(root: Path, tmp_path: Path) -> None:
    commands = tmp_path / "reply.txt"
    commands.write_text("Let me keep that in view: @focus(effort_3)\n")
    result = ccm(root, "apply", "ledger-sync", str(commands), "--who", "model", "--json")
    assert result.exit_code == 0
    (outcome,) = json.loads(result.stdout)
    assert outcome["ok"] and outcome["event"]["who"] == "model"
    assert tier(root, "ledger-sync", "working")["active"][0]["effort_id"] == "effort_3"


def test_undo_the_latest_then_undo_the_undo(root: Path) -> None:
    assert ccm(root, "pin", "ledger-sync", "seg_2").exit_code == 0
    first = ccm(root, "undo", "ledger-sync")
    assert first.exit_code == 0 and "undid evt_1 (pin)" in first.stdout
    assert tier(root, "ledger-sync", "manifest")["segments"][1]["pinned"] is False
    again = ccm(root, "undo", "ledger-sync", "evt_2")
    assert again.exit_code == 0
    assert tier(root, "ledger-sync", "manifest")["segments"][1]["pinned"] is True
    listing = ccm(root, "events", "ledger-sync")
    assert "evt_2" in listing.stdout and "(undone)" in listing.stdout
    assert ccm(root, "undo", "ledger-sync", "evt_42").exit_code == 2


def test_critical_add_list_and_undo(root: Path) -> None:
    added = ccm(root, "critical", "ledger-sync", "--add", "Reports are always in EUR.")
    assert added.exit_code == 0 and "Reports are always in EUR." in added.stdout
    listing = json.loads(ccm(root, "critical", "ledger-sync", "--json").stdout)
    assert {
        "text": "Reports are always in EUR.",
        "kind": "marked",
        "source": "event",
    }.items() <= listing[-1].items()
    assert any("integer cents" in item["text"] for item in listing)
    assert "Reports are always in EUR." in tier(root, "ledger-sync", "working")["critical"]
    ccm(root, "undo", "ledger-sync")
    assert "Reports are always in EUR." not in tier(root, "ledger-sync", "working")["critical"]
    assert ccm(root, "critical", "ledger-sync", "--add", "  ").exit_code == 2


def test_operations_on_a_missing_session_fail_cleanly(root: Path) -> None:
    for args in (
        ["pin", "nope", "seg_1"],
        ["critical", "nope"],
        ["health", "nope"],
        ["undo", "nope"],
    ):
        result = ccm(root, *args)
        assert result.exit_code == 1 and "no session 'nope'" in result.stderr


# -- health, compaction, summary ----------------------------------------------------------


def test_health_reports_figures_and_suggestions(root: Path) -> None:
    result = ccm(root, "health", "ledger-sync", "--json")
    assert result.exit_code == 0
    report = json.loads(result.stdout)
    assert report["status"] == "good" and report["window"] == 200_000
    assert report["tokens"] == sum(
        s["tokens"] for s in tier(root, "ledger-sync", "manifest")["segments"]
    )
    assert 0 <= report["drift"] <= 1 and 0 < report["old_context_relevance"] <= 1
    assert report["suggestions"]


def test_health_sees_a_critical_instruction_being_ignored(tmp_path: Path) -> None:
    source = tmp_path / "floats.jsonl"
    lines = [
        ("user", "Never use floats for money in this code base."),
        ("assistant", "Understood, amounts stay integers."),
        ("user", "Now write the parser for the amount column."),
        ("assistant", "Here it is: amount = float(row['amount']) and we round it later."),
    ]
    source.write_text("".join(json.dumps({"role": r, "content": c}) + "\n" for r, c in lines))
    root = tmp_path / "root"
    assert ccm(root, "ingest", str(source)).exit_code == 0
    report = json.loads(ccm(root, "health", "floats", "--json").stdout)
    assert report["drift_parts"]["critical_not_honoured"] > 0
    assert any("turn 4" in issue and "float" in issue for issue in report["issues"])
    assert report["status"] in ("warning", "critical")


def test_compaction_dry_run_changes_nothing_and_real_run_is_reversible(root: Path) -> None:
    (root / "config.yaml").write_text("lifecycle: {fresh_turns: 2, stale_turns: 4}\n")
    ccm(root, "rebuild")
    before = {p: p.read_bytes() for p in root.glob("chats/ledger-sync/*")}
    plan = json.loads(ccm(root, "compact", "ledger-sync", "--dry-run", "--json").stdout)
    assert plan["dry_run"] and plan["summarized"] and plan["tokens_saved"] > 0
    assert any(item.startswith("critical: ") for item in plan["remember"])
    assert {p: p.read_bytes() for p in root.glob("chats/ledger-sync/*")} == before
    done = ccm(root, "compact", "ledger-sync", "--strategy", "aggressive")
    assert done.exit_code == 0 and "ccm undo ledger-sync" in done.stdout
    states = {s["id"]: s["lifecycle"] for s in tier(root, "ledger-sync", "manifest")["segments"]}
    assert {"compressed", "archived"} & set(states.values())
    assert "integer cents" in " ".join(tier(root, "ledger-sync", "working")["critical"])
    while ccm(root, "undo", "ledger-sync").exit_code == 0:
        pass
    after = {s["id"]: s["lifecycle"] for s in tier(root, "ledger-sync", "manifest")["segments"]}
    assert "compressed" not in after.values() and "archived" not in after.values()


def test_summary_has_the_seven_sections(root: Path) -> None:
    sections = json.loads(ccm(root, "summary", "deploy-checklist", "--json").stdout)
    assert list(sections) == [
        "task_context",
        "completed_work",
        "key_decisions",
        "current_state",
        "open_threads",
        "corrections_and_failed_approaches",
        "tone_and_register",
    ]
    assert any("systemd timer" in d for d in sections["key_decisions"])
    assert any(
        "Reversed at turn 13" in c and "cron" in c
        for c in sections["corrections_and_failed_approaches"]
    )
    ledger = json.loads(ccm(root, "summary", "ledger-sync", "--json").stdout)
    assert any("didn't fix it" in c for c in ledger["corrections_and_failed_approaches"])
    assert ledger["task_context"][0].startswith("I'm starting a small Python service")
    text = ccm(root, "summary", "ledger-sync")
    assert text.exit_code == 0 and "## Key decisions" in text.stdout


def test_importance_raises_an_effort_in_open_and_working(root: Path) -> None:
    before = {
        a["effort_id"]: a["relevance_score"] for a in tier(root, "ledger-sync", "working")["active"]
    }
    segment = next(
        s for s in tier(root, "ledger-sync", "manifest")["segments"] if s["id"] == "seg_4"
    )
    effort = segment["effort"]  # the open one about error reporting
    result = ccm(root, "importance", "ledger-sync", "seg_4", "--by", "2")
    assert result.exit_code == 0 and f"importance +2 for {effort}" in result.stdout
    efforts = {e["id"]: e for e in tier(root, "ledger-sync", "open")["efforts"]}
    assert efforts[effort]["importance"] == 3.0
    after = {a["effort_id"]: a for a in tier(root, "ledger-sync", "working")["active"]}
    assert after[effort]["relevance_score"] > before[effort]
    assert "importance +2" in after[effort]["reasons"]
    assert ccm(root, "importance", "ledger-sync", "seg_42").exit_code == 1


def test_recall_in_one_session_keeps_the_best_hits_that_fit_in_rank_order(root: Path) -> None:
    """`memory.recall` reads one session's hits as it reaches them: what it keeps is the
    ranked list's first `limit` hits that fit the budget, in the ranked order."""
    from ccm import memory
    from ccm.index import Index
    from ccm.store import Store

    store = Store(root)
    session = store.sessions()[0]
    query = "backup schedule decision"
    with Index(store) as index:
        ranked = index.recall(query, session)
    assert len(ranked) > 3
    budget = sum(hit.tokens for hit in ranked[:3]) + ranked[3].tokens // 2
    expected, used = [], 0
    for hit in ranked:
        if len(expected) >= 3:
            break
        if used + hit.tokens <= budget:
            expected.append(hit)
            used += hit.tokens
    kept, spent = memory.recall(store, query, session, budget, 3)
    assert [(h.kind, h.key) for h in kept] == [(h.kind, h.key) for h in expected]
    assert spent == used <= budget
