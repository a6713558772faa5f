"""The engine end to end: segments, efforts, working context, critical items, lifecycle."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ccm import derive
from ccm.cli import main
from ccm.config import from_mapping
from ccm.engine import working_state
from ccm.engine.fold import SWITCH, Params, fold, new_state
from ccm.engine.render import render
from ccm.ingest.pipeline import ingest
from ccm.store import Store

SAMPLE = Path(__file__).parent.parent / "sample_knowledge"
FIXTURES = Path(__file__).parent / "fixtures"


def tiers(root: Path, session: str) -> dict[str, Any]:
    folder = root / "chats" / session
    return {
        name: yaml.safe_load((folder / f"{name}.yaml").read_text())
        for name in ("manifest", "open", "working")
    }


def imported(tmp_path: Path, *paths: Path) -> Store:
    store = Store(tmp_path / "root")
    report = ingest(store, [str(p) for p in paths], derive=True)
    assert report.turns_added > 0
    return store


# -- segmentation -----------------------------------------------------------------


def test_ledger_sync_segments_follow_the_conversation(tmp_path: Path) -> None:
    store = imported(tmp_path, SAMPLE / "sources" / "ledger-sync.jsonl")
    manifest = tiers(store.root, "ledger-sync")["manifest"]
    starts = {s["raw_lines"][0]: s["cue"] for s in manifest["segments"]}
    assert starts[1] == "start"
    assert starts[5] == "shift"  # "Good. Now storage."
    assert starts[17] == "shift"  # "Switching gears: ..."
    assert starts[21] == "shift"  # "Back again. New topic: ..." (after four hours)
    spans = [s["raw_lines"] for s in manifest["segments"]]
    # segments tile the session: no gap, no overlap
    assert spans[0][0] == 1 and spans[-1][1] == 24
    assert all(a[1] + 1 == b[0] for a, b in itertools.pairwise(spans))


def test_decision_fix_and_open_question_are_found(tmp_path: Path) -> None:
    store = imported(tmp_path, SAMPLE / "sources" / "ledger-sync.jsonl")
    manifest = tiers(store.root, "ledger-sync")["manifest"]
    conclusions = {s["conclusion"]["kind"]: s for s in manifest["segments"] if s["conclusion"]}
    assert conclusions["decision"]["conclusion"]["turn"] == 7
    fix = conclusions["resolution"]
    assert fix["conclusion"]["turn"] == 15 and fix["status"] == "concluded"
    assert "fingerprint" in fix["summary"] or "fingerprint" in fix["conclusion"]["text"]
    assert manifest["segments"][-1]["status"] == "open"  # currency conversion is unresolved


def test_locomo_session_boundaries_are_segment_boundaries(tmp_path: Path) -> None:
    store = imported(tmp_path, FIXTURES / "locomo" / "conv-26.json")
    raw = [json.loads(line) for line in store.raw_path("conv-26").read_text().splitlines()]
    session_starts = [
        entry["turn"]
        for previous, entry in zip([None, *raw], raw, strict=False)
        if previous is None or previous["meta"]["locomo_session"] != entry["meta"]["locomo_session"]
    ]
    manifest = tiers(store.root, "conv-26")["manifest"]
    segment_starts = {s["raw_lines"][0] for s in manifest["segments"]}
    assert len(session_starts) == 19
    assert set(session_starts) <= segment_starts
    # and the engine finds topics inside sessions too, without shredding them
    assert len(manifest["segments"]) > len(session_starts)
    assert max(s["raw_lines"][1] - s["raw_lines"][0] + 1 for s in manifest["segments"]) <= 60


@pytest.mark.parametrize("name", sorted(p.name for p in (FIXTURES / "claude-code").glob("*.jsonl")))
def test_every_claude_code_fixture_derives_valid_tiers(name: str, tmp_path: Path) -> None:
    store = Store(tmp_path / "root")
    ingest(store, [str(FIXTURES / "claude-code" / name)], derive=True)
    for session in store.sessions():
        found = tiers(store.root, session)
        assert found["manifest"]["turns"] == len(store.read_turns(session)[0])
        assert found["working"]["capacity"] == 4


def test_working_state_reads_files_and_todos(tmp_path: Path) -> None:
    store = imported(
        tmp_path, FIXTURES / "claude-code" / "1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl"
    )
    state = tiers(store.root, "1af7fc5e-8455-4414-9ccd-011d40f70b2a")["working"]["state"]
    assert any(f.endswith("CLAUDE.md") for f in state["open_files"])
    # a slash command is the task, not the status line its client shows while it runs
    # ("<command-message>init is analyzing your codebase…</command-message>")
    assert state["current_task"] == "/init"
    # ... with its arguments (written for this test)
    asked = (
        "<command-message>review is running…</command-message>\n"
        "<command-name>/review</command-name>\n"
        "<command-args>check the parser module for panics</command-args>"
    )
    assert working_state._task(asked) == "/review check the parser module for panics"
    todo = tiers(
        imported(tmp_path / "b", FIXTURES / "claude-code" / "todowrite_examples.jsonl").root,
        "todowrite_session",
    )
    assert todo["working"]["state"]["next_step"]


def test_a_segment_joins_the_effort_it_shares_rare_words_with_not_the_one_of_common_words() -> None:
    """Every topic of a conversation about house jobs speaks of the budget, the week and
    the quote: a segment on the boiler joins the boiler's effort, by the words only it
    and that effort use, not the tiles' effort that said "budget" most (`match_effort`
    weighs terms by idf)."""
    from collections import Counter

    from ccm.engine.fold import _index_add, match_effort

    state = new_state("house")
    state["docs"] = 40
    state["df"] = {"budget": 30, "week": 28, "quote": 25, "tiles": 4, "boiler": 4, "valve": 3}
    for index, terms in enumerate(
        [{"budget": 9, "week": 7, "quote": 6, "tiles": 1}, {"boiler": 4, "valve": 3, "budget": 1}]
    ):
        state["segments"].append({"id": f"seg_{index + 1}", "terms": terms})
        state["efforts"].append(
            {"id": f"effort_{index + 1}", "terms": dict(terms), "segments": [f"seg_{index + 1}"]}
        )
        _index_add(state["effort_index"], list(terms), index)
    boiler = Counter({"budget": 3, "week": 2, "quote": 2, "boiler": 2, "valve": 2})
    assert match_effort(state, boiler, None)[0] == 1
    # ... and a segment of none of them starts an effort of its own
    assert match_effort(state, Counter({"budget": 2, "week": 1, "garden": 3}), None)[0] is None


def test_a_reversed_decision_ends_superseded_and_leaves_the_working_state(tmp_path: Path) -> None:
    store = imported(tmp_path, SAMPLE / "sources" / "deploy-checklist.jsonl")
    found = tiers(store.root, "deploy-checklist")
    segments = found["manifest"]["segments"]
    # the unit file is done; the assistant moves on to backups, where the cron job
    # decided at turn 9 is replaced by a systemd timer the next morning (turn 13)
    assert [s["raw_lines"] for s in segments] == [[1, 7], [8, 10], [11, 14]]
    assert segments[0]["conclusion"]["kind"] == "task"
    cron, timer = segments[1]["conclusion"], segments[2]["conclusion"]
    assert "cron job at 02:30" in cron["text"] and cron["superseded_by"] == 13
    assert segments[1]["status"] == "superseded"
    assert timer["turn"] == 13 and "systemd timer" in timer["text"]
    decided = found["working"]["state"]["recent_decisions"]
    assert any("systemd timer" in d for d in decided)
    assert not any("cron job at 02:30" in d for d in decided)
    assert found["open"]["efforts"], "the restore test is still open"


def _on_day(number: int, role: str, text: str, day: int) -> dict[str, Any]:
    """A turn said at 09:00 on day `day` of May 2026 (a day apart: a segment each)."""
    return {"turn": number, "role": role, "content": text, "ts": f"2026-05-0{day}T09:00:00Z"}


def test_a_later_conclusion_of_an_effort_supersedes_the_earlier_one() -> None:
    """A plan decided in one segment and carried out in a later one of the same effort:
    the effort stands where it ended, and the earlier conclusion is superseded."""
    turn = _on_day
    turns = [
        turn(1, "user", "the invoice PDFs render without the logo font. options?", 1),
        turn(2, "assistant", "Embed the font in the PDF template, or rasterise the logo.", 1),
        turn(3, "user", "ok, embed the font in the invoice template then. go", 1),
        turn(4, "assistant", "Embedding the logo font in the invoice template now.", 1),
        turn(5, "user", "morning. the invoice template renders the logo font now", 2),
        turn(6, "assistant", "Checked all three invoice layouts: the logo font is embedded.", 2),
        turn(7, "user", "great, invoice font done \u2714", 2),
        turn(8, "assistant", "Good.", 2),
    ]
    state = fold(new_state("s"), turns, Params())
    result = render(state, [], from_mapping({}))
    first, second = result.manifest["segments"]
    assert first["effort"] == second["effort"]
    assert first["status"] == "superseded" and first["conclusion"]["superseded_by"] == 7
    assert second["status"] == "concluded" and second["conclusion"]["turn"] == 7


def test_a_fix_said_to_hold_this_time_supersedes_the_effort_s_earlier_one() -> None:
    """Written for this test: "that's done" on the nightly export one day, then, the
    effort taken up again, "that's the export properly sorted now": the first was
    early, though the two share no subject word."""
    turn = _on_day
    turns = [
        turn(1, "user", "the nightly csv export to the warehouse drops rows. can you look?", 1),
        turn(2, "assistant", "Retried the warehouse export with a bigger buffer: 4,210 rows.", 1),
        turn(3, "user", "looks fine, that's done", 1),
        turn(4, "assistant", "Good.", 1),
        turn(
            5, "user", "morning. the warehouse export again, I moved it to the streaming writer", 2
        ),
        turn(6, "assistant", "The streaming writer sent all 4,210 rows of the nightly csv.", 2),
        turn(7, "user", "that's the export properly sorted now, closing the ticket", 2),
        turn(8, "assistant", "Closed.", 2),
    ]
    state = fold(new_state("s"), turns, Params())
    first, second = render(state, [], from_mapping({})).manifest["segments"]
    assert first["effort"] == second["effort"]
    assert first["status"] == "superseded" and first["conclusion"]["superseded_by"] == 7
    assert second["status"] == "concluded" and second["conclusion"]["turn"] == 7


def test_a_failure_reported_again_takes_back_a_premature_fix() -> None:
    first = _segments_of(
        [
            ("user", "the sync job keeps timing out on the big tenant"),
            ("assistant", "Raised the batch timeout to 300 s and retried."),
            ("user", "FIXED, the big tenant synced. lunch"),
            ("assistant", "Enjoy."),
            ("user", "next: the billing export. can you add the VAT column?"),
            ("assistant", "Added the VAT column to the billing export."),
            ("user", "hm, the sync job is timing out again on the big tenant"),
        ]
    )[0]
    assert first["raw_lines"] == [1, 4]
    assert first["status"] == "open" and first["conclusion"]["retracted_by"] == 7


def test_a_failure_of_the_fix_at_hand_leaves_an_earlier_fix_alone() -> None:
    """Written for this test: the sync fix is confirmed and a new topic (the export)
    gets a fix of its own; "that didn't fix it" takes back the export's fix, which the
    open segment holds, not the confirmed sync fix before it, though the two share
    words."""
    first, second = _segments_of(
        [
            ("user", "the sync job keeps timing out on the big tenant"),
            ("assistant", "Raised the sync batch timeout to 300 s and retried."),
            ("user", "the big tenant synced. that's the sync fixed, commit it"),
            ("assistant", "Committed the sync fix."),
            ("user", "next: the billing export. it drops the VAT column"),
            ("assistant", "Fixed: the billing export now writes the VAT column, tests pass."),
            (
                "user",
                "nope, the export still has no VAT column, that didn't fix it. revert the commit",
            ),
        ]
    )
    assert first["raw_lines"] == [1, 4]
    assert first["status"] == "concluded" and "retracted_by" not in first["conclusion"]
    assert second["status"] == "open"  # the export's fix, which the failure is of


def test_patterns_mark_rules_for_a_model_not_care_between_people() -> None:
    def turn(number: int, role: str, text: str, **meta: str) -> dict[str, Any]:
        return {"turn": number, "role": role, "content": text, "ts": None, "meta": meta}

    said = "Make sure you take care of yourself, and never skip the stretching."
    alone = fold(new_state("s"), [turn(1, "user", said)], Params())
    assert [c["text"] for c in alone["critical"]] == [said]
    # the same words from one named person to another (LoCoMo, a group chat) mark nothing
    people = fold(new_state("p"), [turn(1, "user", said, speaker="Ann")], Params())
    assert people["critical"] == []


# -- properties ---------------------------------------------------------------------

CRITICAL = [
    "Always keep amounts as integer cents, never floats.",
    "The service must restart on failure.",
    "Never commit the .env file.",
    "I prefer plain systemd units over Docker.",
]
CHATTER = [
    "Can you look at the report layout for the monthly totals?",
    "The monthly totals come from a GROUP BY on the month column.",
    "Switching gears: what about the backup timer?",
    "The timer runs at 02:30 with Persistent=true.",
    "That fixed it!",
    "ok",
    "Back to the report layout: add a column for fees.",
    "Decision: fees get their own column in the report.",
]


@st.composite
def conversations(draw: st.DrawFn) -> list[dict[str, Any]]:
    texts = draw(st.lists(st.sampled_from(CHATTER + CRITICAL), min_size=1, max_size=80))
    gaps = draw(
        st.lists(st.sampled_from([20, 60, 3 * 3600]), min_size=len(texts), max_size=len(texts))
    )
    clock, turns = 1_767_000_000, []
    for number, (text, gap) in enumerate(zip(texts, gaps, strict=True), start=1):
        clock += gap
        turns.append(
            {
                "turn": number,
                "role": "user" if number % 2 else "assistant",
                "content": text,
                "ts": _iso(clock),
            }
        )
    return turns


def _iso(seconds: int) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


PROPS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPS
@given(turns=conversations(), capacity=st.integers(1, 5))
def test_critical_items_are_never_dropped_and_efforts_never_lost(
    turns: list[dict[str, Any]], capacity: int
) -> None:
    config = from_mapping({"working": {"capacity": capacity}})
    state = fold(new_state("s"), turns, Params.from_config(config))
    result = render(state, [], config)
    said = {t["content"] for t in turns if t["role"] == "user"} & set(CRITICAL)
    assert said <= set(result.working["critical"])
    # every segment belongs to one effort; every open effort is active or displaced
    segment_ids = [s["id"] for s in result.manifest["segments"]]
    assert segment_ids == [f"seg_{n}" for n in range(1, len(segment_ids) + 1)]
    active = [a["effort_id"] for a in result.working["active"]]
    displaced = result.working["displaced"]
    assert len(active) <= capacity
    assert not set(active) & set(displaced)
    assert {e["id"] for e in result.open["efforts"]} <= set(active) | set(displaced)
    refs = [ref for e in result.open["efforts"] for ref in e["segment_refs"]]
    assert len(refs) == len(set(refs))


# -- lifecycle and marks ------------------------------------------------------------


def test_lifecycle_moves_old_segments_down_and_marks_win(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "config.yaml").write_text(
        "lifecycle: {fresh_turns: 2, stale_turns: 6, compress_turns: 12, archive_turns: 20}\n"
    )
    lines = []
    for n in range(1, 31):
        topic = f"topic{n // 6} " * 5
        role = "user" if n % 2 else "assistant"
        lines.append(
            {
                "role": role,
                "content": f"Switching gears: {topic}" if n % 6 == 1 else topic,
                "ts": 1_767_000_000 + 60 * n,
            }
        )
    source = tmp_path / "chat.jsonl"
    source.write_text("".join(json.dumps(line) + "\n" for line in lines))
    store = Store(root)
    ingest(store, [str(source)], derive=True)
    states = {s["id"]: s["lifecycle"] for s in tiers(root, "chat")["manifest"]["segments"]}
    assert states["seg_1"] == "archived" and states["seg_2"] == "compressed"
    assert list(states.values())[-1] == "active"  # the current segment, older than fresh_turns

    runner = CliRunner()
    assert runner.invoke(main, ["--root", str(root), "pin", "chat", "seg_1"]).exit_code == 0
    assert runner.invoke(main, ["--root", str(root), "archive", "chat", "seg_4"]).exit_code == 0
    states = {s["id"]: s["lifecycle"] for s in tiers(root, "chat")["manifest"]["segments"]}
    assert states["seg_1"] == "active" and states["seg_4"] == "archived"
    undone = runner.invoke(main, ["--root", str(root), "undo", "chat"])
    assert undone.exit_code == 0 and "archive" in undone.stdout
    states = {s["id"]: s["lifecycle"] for s in tiers(root, "chat")["manifest"]["segments"]}
    assert states["seg_4"] != "archived"


def test_rebuild_reproduces_incremental_files_with_events(tmp_path: Path) -> None:
    root = tmp_path / "root"
    runner = CliRunner()
    runner.invoke(main, ["--root", str(root), "ingest", str(SAMPLE / "sources")])
    for args in (
        ["pin", "ledger-sync", "seg_2"],
        ["focus", "ledger-sync", "effort_3"],
        ["note", "ledger-sync", "remember the fee column"],
    ):
        assert runner.invoke(main, ["--root", str(root), *args]).exit_code == 0
    before = {p: p.read_bytes() for p in root.glob("chats/*/*.yaml")}
    result = runner.invoke(main, ["--root", str(root), "rebuild", "--json"])
    assert result.exit_code == 0
    assert all(item["written"] == [] for item in json.loads(result.stdout))
    assert {p: p.read_bytes() for p in root.glob("chats/*/*.yaml")} == before
    working = tiers(root, "ledger-sync")["working"]
    assert working["active"][0]["effort_id"] == "effort_3"
    assert "focused by user" in working["active"][0]["reasons"]


def test_golden_tiers_of_the_sample_knowledge(tmp_path: Path) -> None:
    root = tmp_path / "root"
    assert (
        CliRunner().invoke(main, ["--root", str(root), "ingest", str(SAMPLE / "sources")]).exit_code
        == 0
    )
    for bundled in SAMPLE.glob("chats/*/*.yaml"):
        rebuilt = root / bundled.relative_to(SAMPLE)
        assert rebuilt.read_text() == bundled.read_text(), (
            f"{bundled.name} of {bundled.parent.name} changed"
        )


def test_a_truncated_log_is_rebuilt_not_trusted(tmp_path: Path) -> None:
    store = imported(tmp_path, SAMPLE / "sources" / "ledger-sync.jsonl")
    raw = store.raw_path("ledger-sync")
    lines = raw.read_bytes().splitlines(keepends=True)
    raw.write_bytes(b"".join(lines[:10]))  # someone cut the log (never ccm)
    derived = derive.update(store, "ledger-sync")
    assert derived.rebuilt and derived.tiers.manifest["turns"] == 10


def _segments_of(lines: list[tuple[str, str]], per_day: int = 0) -> list[dict[str, Any]]:
    """The manifest segments of a chat of (role, text) turns a minute apart (with
    `per_day`, that many turns a day, each day's the next morning)."""
    turns = [
        {
            "turn": number,
            "role": role,
            "content": text,
            "ts": f"2026-05-{4 + (number - 1) // (per_day or 99):02d}T09:{number:02d}:00Z",
        }
        for number, (role, text) in enumerate(lines, start=1)
    ]
    result = render(fold(new_state("s"), turns, Params()), [], from_mapping({}))
    return list(result.manifest["segments"])


def _segment_at(segments: list[dict[str, Any]], turn: int) -> dict[str, Any]:
    """The segment of `segments` that holds `turn`."""
    return next(s for s in segments if s["raw_lines"][0] <= turn <= s["raw_lines"][1])


HELD_OUT = Path(__file__).parent / "fixtures" / "scenarios_heldout"
WEDDING = [
    ("user", "we need a caterer for 60 guests, vegetarian options, under 40 a head"),
    ("assistant", "Three caterers fit: Basil & Rye at 38, Green Table at 36, Lindgren at 41."),
    ("user", "Green Table looks good, do they do gluten free desserts?"),
    ("assistant", "Yes, Green Table lists two gluten free desserts on their wedding menu."),
    ("user", "Green Table looks nice, I'll ask Sam about it tonight."),
    ("assistant", "Good idea: Green Table, 60 guests, 36 a head."),
]


@pytest.mark.parametrize(
    "opening",
    [
        [("user", "About the music: the band cancelled, can we find a DJ for the evening?")],
        [
            (
                "user",
                "Oh, and the florist sent a quote for the table flowers, 480 for twelve tables.",
            )
        ],
        [
            ("user", "perfect, thanks. one more thing"),
            ("user", "the florist sent a quote for the table flowers, 480 for twelve tables."),
        ],
        [("user", "Speaking of the evening: the band cancelled, can we find a DJ instead?")],
        [("user", "before you go on: my sister asks whether kids are invited, are they?")],
        [("user", "The seating plan next. Sam's parents can't sit near the speakers.")],
        [("user", "Random thought while I think of it: is the barn heated in October?")],
        [("user", "Second thing: the photographer wants a shot list by Friday.")],
        [("user", "Transport, while we're on it. Is there a bus back to town after midnight?")],
        [("user", "Before the invitations: does the barn allow confetti, or only petals?")],
        [("user", "While Sam checks the guest list, let's do the cake: two tiers or three?")],
        [("user", "Right, the speech I've been putting off: who thanks the parents, me or Sam?")],
        [("user", "Good evening! Flowers first: the florist wants a deposit of 200 by Monday.")],
        [("user", "Before you dive in: the venue moved our slot to 3pm, does the bus still work?")],
        [("user", "ok, the cake. two tiers or three, and does the barn have a fridge for it?")],
        [("user", "Right, Sam's list: the photographer, the shuttle times and the rings.")],
        [("user", "Table 4 next. Sam's aunt can't sit near the bar, doctor's orders.")],
        [("user", "Florist update: she can do peonies after all, 40 more for the lot.")],
        [("user", "The thing that bugs me about the barn. It has one loo for sixty people.")],
        [("user", "Emailed the vicar. Anyway, back to the music. Is a DJ louder than a band?")],
        [("user", "Quick update. The florist can do peonies after all, 40 more.")],
        [("user", "And then the invitations. Sam wants them posted by the 1st, is that late?")],
        [("user", "while Sam rings the barn, the other fire. the band cancelled on us.")],
        [("user", "while she reads that: the seating plan. who sits with Gran at dinner?")],
        [("user", "Sent! She's usually quick. Let's do the seating plan while I'm awake.")],
        [("user", "Ok, the bit that really scares me. The speeches, and Sam's uncle with a mic.")],
        [("user", "side thought: why did nobody mention the barn closes at eleven?")],
        [
            (
                "user",
                "one thing's been bugging me since Sunday. does the barn have a licence for music?",
            )
        ],
        [
            (
                "user",
                "something's been bothering me about the barn. is there parking for sixty cars?",
            )
        ],
        [("user", "On that: the florist rang back, so let's talk flowers: peonies or roses?")],
        [("user", "Other news, less fun: the barn has doubled the deposit to 800.")],
        [("user", "and while we're on money, the photographer wants 300 up front now.")],
        [("user", "oh while we're on drinks. does the barn let us bring our own wine?")],
        [("user", "ok flowers. the florist wants 200 up front and peonies decided by friday.")],
        [
            (
                "user",
                "ok the photographer. she wants the shot list by friday, 300 up front and the church times.",
            )
        ],
    ],
)
def test_a_user_turn_that_raises_another_topic_starts_a_segment(
    opening: list[tuple[str, str]],
) -> None:
    """Written for this test: "About X:", "Oh, and ...", and a turn ending "one more
    thing" with the topic in the next user turn start a new segment there."""
    lines = [*WEDDING, *opening, ("assistant", "Happy to help with that.")]
    segments = _segments_of(lines)
    assert [s["raw_lines"][0] for s in segments] == [1, len(WEDDING) + len(opening)]
    assert segments[1]["cue"] == "shift"  # said to open a topic, not only new words


def test_a_rule_quoted_from_someone_else_does_not_hold_its_turn_in_the_topic_at_hand() -> None:
    """Written for this test: a rule the user writes is about the work at hand (the turn
    stays in its topic unless it opens one outright); a message someone else wrote, pasted
    as a quote with a rule in it, is news that may open a topic, and opens it at its own
    turn (not only when its answer turns out to share little with what came before)."""
    pasted = (
        "news from the venue this morning, pasting:\n\n> Quick update on your booking. The "
        "barn closes at 23:00 sharp from June, and amplified music has to stop by 22:30 under "
        "the new licence.\n\nso the timings we drew up need another look."
    )
    lines = [*WEDDING, ("user", pasted), ("assistant", "Then the first dance moves to 21:00.")]
    segments = _segments_of(lines)
    assert [s["raw_lines"][0] for s in segments] == [1, len(WEDDING) + 1]
    assert segments[1]["cue"] != "cohesion"  # opened by the turn, not split at its answer


def test_a_report_that_opens_with_a_name_stays_in_its_topic() -> None:
    """Written for this test: "ok, the caterer is booked." names a thing and reports on it,
    in the topic at hand; only a name said alone ("ok, the cake.") takes a topic up."""
    lines = [*WEDDING, ("user", "ok, the caterer is booked. anything else for Green Table?")]
    assert [s["raw_lines"] for s in _segments_of([*lines, ("assistant", "All set.")])] == [[1, 8]]


def test_a_fix_the_other_side_doubts_leaves_its_segment_open() -> None:
    """Written for this test: "the timeout's gone then" answered with "I wouldn't call it
    gone on one run" is no settled fix; answered with thanks, it is."""
    lines = [
        ("user", "the nightly import keeps timing out on the big tenant, can you look?"),
        ("assistant", "The batch size was 50k rows; I lowered it to 5k and the run passed."),
        ("user", "the timeout is gone then \U0001f389"),
    ]
    doubted = [*lines, ("assistant", "I wouldn't call it gone on one run: it failed 1 in 5.")]
    taken = [*lines, ("assistant", "Good. I'll keep an eye on tomorrow's run.")]
    assert [s["status"] for s in _segments_of(doubted)] == ["open"]
    waits = "The big tenant is. I'd watch the other two tonight before calling the imports fixed."
    assert [s["status"] for s in _segments_of([*lines, ("assistant", waits)])] == ["open"]
    assert [s["status"] for s in _segments_of(taken)] == ["concluded"]


def test_oh_no_after_a_fix_reopens_it() -> None:
    """Written for this test: "seating plan sorted ✅", then "oh no, the seating plan
    forgot the kids' table" is a premature fix found out: its segment is open again."""
    lines = [
        ("user", "can you check the seating plan has all 60 guests on it?"),
        ("assistant", "All 60 guests are seated across eight tables of 7 or 8."),
        ("user", "seating plan sorted \u2705"),
        ("assistant", "Good. Next is the menu cards."),
        ("user", "oh no, the seating plan forgot the kids' table, 6 more chairs"),
        ("assistant", "Then tables 7 and 8 go to six each and the kids get table 9."),
    ]
    assert _segments_of(lines)[0]["status"] == "open"


def test_a_topic_opened_in_answer_to_the_assistants_question_weighs_as_one_opened_unasked() -> None:
    """Written for this test: "Anything else, or shall we go on?" answered with "The
    seating plan first." opens the seating plan as surely as it would unasked; an answer
    that opens nothing belongs to the question."""
    from ccm.engine.fold import _topic_score, _turn_terms, step

    def score(answer: str, text: str) -> float:
        state, params = new_state("wedding"), Params()
        for number, (role, said) in enumerate([*WEDDING, ("assistant", answer)], 1):
            step(state, {"turn": number, "role": role, "content": said}, params)
        terms = _turn_terms("user", text)
        return _topic_score(state, params, text, terms, None, None, False)[0]

    opens = "The seating plan first. Sam's parents can't sit near the speakers."
    replies = "Sam's parents can't sit near the speakers, so yes, the barn."
    asked, told = "Anything else, or shall we go on?", "Green Table is booked."
    assert score(asked, opens) == score(told, opens)
    assert score(asked, replies) < score(told, replies)


def test_a_decision_that_says_instead_replaces_only_one_it_shares_a_subject_with(
    tmp_path: Path,
) -> None:
    """A trip planned over two evenings (tests/fixtures/scenarios_heldout/h02, written
    for ccm's tests): "Lake Garda instead of Como" (turn 43) replaces the route decided
    at turn 9; the arrival-day decision of turn 33, which shares no subject with it but
    the trip's words, still stands."""
    store = Store(tmp_path / "root")
    ingest(store, [str(HELD_OUT / "h02.jsonl")], session="h02", derive=True)
    manifest = store.read_derived("h02", "manifest.yaml", "manifest")
    by_turn = {s["conclusion"]["turn"]: s for s in manifest["segments"] if s.get("conclusion")}
    assert by_turn[9]["status"] == "superseded"
    assert by_turn[9]["conclusion"]["superseded_by"] == 43
    assert by_turn[33]["status"] == "concluded"


def _open_entry(turn: int, text: str) -> list[Any]:
    """A user turn as the fold keeps it in an open segment, with the conclusion it states."""
    from ccm.engine.conclusions import detect

    found = detect(turn, "user", text)
    return [turn, "user", text, None, 0, found.as_dict() if found else None, False]


def test_a_decision_stays_its_segments_conclusion_when_the_work_is_reported_done() -> None:
    """ "decided: X" then "merged" in one segment: the topic was settled where it was
    decided; the merge is the work it decided, carried out. A fix confirmed after a
    task still replaces it. (Written for this test.)"""
    from ccm.engine.fold import segment_conclusion

    decided = _open_entry(3, "ok, decided: the dead-letter queue instead of the retry table.")
    merged = _open_entry(5, "Priya approved. merged. release it today")
    fixed = _open_entry(7, "that fixed it, the replays work now")
    assert merged[5]["kind"] == "task"
    assert segment_conclusion([decided, merged])["turn"] == 3
    assert segment_conclusion([merged, fixed])["turn"] == 7


def test_a_task_that_names_what_it_finishes_takes_the_segment_from_a_decision_on_the_way() -> None:
    """ "Invoices first then" decides a step; "that's the quarter's books done" ends the
    topic, and when it says little itself its statement keeps the decision beside it.
    "merged it" names nothing: the decision stays. (Written for this test.)"""
    from ccm.engine.fold import segment_conclusion

    step = _open_entry(3, "ok, go with the invoices first, the receipts can wait till after lunch.")
    books = _open_entry(9, "balances to the cent. that's the quarter's books done.")
    short = _open_entry(9, "That section's done.")
    merged = _open_entry(9, "Dana approved and merged it")
    assert step[5]["kind"] == "decision" and books[5]["kind"] == "task"
    assert segment_conclusion([step, books])["turn"] == 9
    said = segment_conclusion([step, short])
    assert said["turn"] == 9 and said["text"].startswith("That section's done.")
    assert "invoices first" in said["text"]
    assert segment_conclusion([step, merged])["turn"] == 3


def test_back_after_a_break_with_something_else_starts_a_segment(tmp_path: Path) -> None:
    """An incident session (tests/fixtures/scenarios_heldout/h03, written for ccm's
    tests): "back, incident doc is drafted. what still bugs me: ..." two hours after the
    fix was confirmed opens the next topic."""
    store = Store(tmp_path / "root")
    ingest(store, [str(HELD_OUT / "h03.jsonl")], session="h03", derive=True)
    manifest = store.read_derived("h03", "manifest.yaml", "manifest")
    starts = [s["raw_lines"][0] for s in manifest["segments"]]
    assert 52 in starts


@pytest.mark.parametrize(
    "follow_up",
    [
        "the starters are fine but what about the allergy list, Priya's nephew reacts badly "
        "to sesame and walnuts?",
        "sounds good but what about the wine, corkage fees, glasses and a licence for the bar?",
    ],
)
def test_a_reply_that_takes_the_answer_and_asks_about_more_stays_in_its_topic(
    follow_up: str,
) -> None:
    """Written for this test: after a choice is made, "X is fine but what about Y?" takes
    the answer up and asks about more of the same thing, in new words; it opens nothing."""
    lines = [
        *WEDDING,
        ("user", "ok, Green Table then. the three-course vegetarian menu."),
        ("assistant", "Booked in principle: Green Table, three courses, 60 guests."),
        ("user", follow_up),
        ("assistant", "Green Table can do a nut-free cake and a children's plate at 18."),
    ]
    assert [s["raw_lines"][0] for s in _segments_of(lines)] == [1]


def test_a_failure_that_opens_a_topic_of_its_own_leaves_the_last_fix_alone() -> None:
    """Written for this test: right after "the export is fixed", "next fire. the invoice
    mailer is broken" is another problem, not the fix failing; "the export
    fails again" takes the fix back."""
    fixed = [
        ("user", "the nightly export keeps timing out on the big tenant, can you look?"),
        ("assistant", "The batch was 50k rows; at 5k the run passes in four minutes."),
        ("user", "ran it twice more, both green. the export is fixed \U0001f389"),
        ("assistant", "Good. I'll keep the 5k batch and note it in the runbook."),
    ]
    other = [
        *fixed,
        ("user", "next fire. the invoice mailer is broken, stuck since Monday"),
    ]
    back = [*fixed, ("user", "ugh. the export failed again overnight, same timeout")]
    assert _segments_of([*other, ("assistant", "Looking.")])[0]["status"] == "concluded"
    assert _segments_of([*back, ("assistant", "Looking.")])[0]["status"] == "open"


def test_off_to_bed_is_no_topic_named() -> None:
    """Written for this test: "bed." ends an evening; it names no topic to take up."""
    lines = [
        *WEDDING,
        ("user", "bed. the cake still to order, and the seating plan, Sam's aunt and all."),
        ("assistant", "Sleep well. Tomorrow: the cake order and the seating plan."),
    ]
    assert [s["raw_lines"][0] for s in _segments_of(lines)] == [1]


def test_an_agents_report_of_a_fix_waits_for_its_user_to_confirm_it() -> None:
    """Written for this test: a fix concludes when its user confirms it works; an agent's
    "All green: ..." that the user leaves unanswered (the next topic starts) leaves its
    segment open, and the user's "confirmed, that's fixed" closes it. A task the agent
    reports done ("Booked: ...") is done when it says so."""
    fix = [
        ("user", "the invoice export crashes on accented names, can you fix it?"),
        ("assistant", "The CSV writer used latin-1; I switched it to utf-8 with a BOM."),
        ("user", "ok run the export tests"),
        ("assistant", "All green: 14 export tests pass, including Zoë and Łukasz."),
    ]
    other = [
        ("user", "different thing: the staging database needs a bigger disk, 200 GB"),
        ("assistant", "I can resize it tonight when traffic is low."),
    ]
    reported = _segments_of([*fix, *other], per_day=4)
    assert reported[0]["conclusion"]["turn"] == 4
    assert reported[0]["status"] == "open"
    confirmed = [*fix, ("user", "checked it on prod data myself, that's fixed. thanks")]
    segments = _segments_of([*confirmed, *other], per_day=5)
    assert segments[0]["conclusion"]["turn"] == 5
    assert segments[0]["status"] == "concluded"
    booked = [
        ("user", "can you book the venue for the team offsite on the 14th?"),
        ("assistant", "Booked: the Harbour Room for 14 June, 12 people, 480 in total."),
    ]
    assert _segments_of([*booked, *other], per_day=2)[0]["status"] == "concluded"


def test_a_claim_quoted_back_as_not_holding_reopens_its_segment() -> None:
    """Written for this test: "insurance sorted ✅", then other topics, then "so much for
    sorted: the insurer wants the engine number after all" takes that claim back, however
    many segments ago it was made; a claim it does not quote stays."""
    lines = [
        ("user", "can you help me get the van insured before the trip on the 12th?"),
        ("assistant", "Vansure quoted 480 for the year, fully comp, conversion declared."),
        ("user", "rang them back and paid. insurance sorted \u2705"),
        ("assistant", "Good. That leaves the route and the campsites."),
        ("user", "different thing: the route. I want the coast road north, two nights on the way"),
        ("assistant", "Then Whitby on night one and Alnmouth on night two."),
        ("user", "perfect, Whitby then Alnmouth, booked both. route's done"),
        ("assistant", "Both sites take dogs, and the Alnmouth one has hook-ups."),
        ("user", "ugh. vansure rang. so much for sorted: they want the engine number after all"),
        ("assistant", "It's on the V5C, section 5; send it today so the cover starts."),
    ]
    segments = _segments_of(lines, per_day=20)
    by_first = {s["raw_lines"][0]: s for s in segments}
    assert by_first[1]["conclusion"]["turn"] == 3
    assert by_first[1]["status"] == "open"
    assert by_first[1]["conclusion"]["retracted_by"] == 9
    route = _segment_at(segments, 7)
    assert route["status"] == "concluded"


@pytest.mark.parametrize(
    ("report", "reopened"),
    [
        ("the print queue jammed at 9 again. you said the print queue was fixed", True),
        ("hm, I thought the queue's sorted? it jammed twice this morning", True),
        ("you said it was fixed. it jammed again at 9", False),  # names nothing
        ("you said the wifi was fixed, and it was. the queue is fine too", False),
    ],
)
def test_a_claim_named_as_said_to_hold_reopens_its_segment(report: str, reopened: bool) -> None:
    """Written for this test: "print queue's fixed", then other topics, then "you said
    the print queue was fixed" takes that fix back, however many segments ago it was;
    one that names nothing, or another thing, leaves it."""
    lines = [
        ("user", "the office print queue keeps jamming on big PDFs, can you look?"),
        ("assistant", "The spooler's temp folder was full; I moved it to the data disk."),
        ("user", "printed the 80-page contract fine. print queue's fixed, thanks"),
        ("assistant", "Good. I also set the temp folder to clear itself nightly."),
        ("user", "different thing: the wifi in the meeting room drops every hour"),
        ("assistant", "The access point renews its lease hourly; I gave it a static address."),
        ("user", "no drops all afternoon. wifi's done"),
        ("assistant", "Noted. The lease change is in the router notes."),
        ("user", "now the team calendar: can it show holidays for both offices?"),
        ("assistant", "Yes: I added the Berlin and Leeds holiday calendars to it."),
        ("user", "lovely, calendar sorted"),
        ("assistant", "Both offices' holidays now show in the team calendar."),
        ("user", report),
        ("assistant", "Looking at the spooler again."),
    ]
    segments = _segments_of(lines, per_day=20)
    queue = _segment_at(segments, 3)
    assert queue["conclusion"]["turn"] == 3
    assert (queue["status"] == "open") is reopened
    assert _segment_at(segments, 7)["status"] == "concluded"


def test_a_question_about_another_failure_leaves_a_fix_just_made() -> None:
    """Written for this test: "the leak is dead, closing that one", then "and the stuck
    orders? anything new since the deploy?" asks about another thing; it reports no
    failure, and the fix stays concluded. "orders are stuck again" would report one."""
    lines = [
        ("user", "the worker's memory keeps climbing since the upgrade, can you find it?"),
        ("assistant", "An unbounded cache in menu_for; 2.5.1 caps it at 512 entries. Deployed."),
        ("user", "grafana says 208 MB and flat three hours on. the leak is dead, closing that one"),
        ("assistant", "Good. The cache is keyed on restaurant and menu version now."),
        ("user", "and the stuck orders? anything new since the deploy went out?"),
        ("assistant", "Checking prod for orders pending more than 10 minutes."),
    ]
    segments = _segments_of(lines)
    fix = _segment_at(segments, 3)
    assert (fix["conclusion"]["turn"], fix["status"]) == (3, "concluded")
    stuck = [*lines[:4], ("user", "ugh, orders are stuck again since the deploy")]
    fix = _segment_at(_segments_of(stuck), 3)
    assert fix["status"] == "open"


@pytest.mark.parametrize(
    "opening",
    [
        "btw unrelated, did the photos from the rehearsal ever get uploaded?",
        "on another note, the florist wants the colours by friday",
        "unrelated: the barn rang about the parking for the coaches",
    ],
)
def test_a_turn_that_says_it_is_unrelated_opens_a_topic(opening: str) -> None:
    """Written for this test: a turn that says it is on something else ("btw unrelated,",
    "on another note,") opens a topic, shift and all."""
    segments = _segments_of([*WEDDING, ("user", opening), ("assistant", "I'll check.")])
    assert [s["raw_lines"][0] for s in segments] == [1, len(WEDDING) + 1]
    assert segments[1]["cue"] == "shift"


@pytest.mark.parametrize(
    "opening",
    [
        "hold that, Sam just rang: the 60 guests need a coach from the station",
        "one more on the guests: Sam's aunt can't do stairs, is the barn step-free for 60 guests?",
        "ok. desserts. two gluten free ones for 60 guests?",
    ],
)
def test_an_interruption_or_one_more_on_a_named_thing_opens_a_topic(opening: str) -> None:
    """Written for this test: "hold that, ..." breaks off for something that came up,
    "one more on the guests:" and "ok. desserts. ..." name what comes next (the last in
    few words): each opens a topic, though it shares words with the caterer's answer."""
    segments = _segments_of([*WEDDING, ("user", opening), ("assistant", "Let me look.")])
    assert [s["raw_lines"][0] for s in segments] == [1, len(WEDDING) + 1]


@pytest.mark.parametrize(
    "opening",
    [
        "About the coach. 60 guests at Green Table means a coach from the station",
        "yeah, about the cake. Green Table does the cake for 60 guests too?",
        "OK problem two: Green Table only seats 50 guests at 36 a head",
        "ok bad news, Green Table is booked for 60 guests that day",
        "Related question. Green Table at 36 a head, do 60 guests need chairs?",
        "ok, moment of truth. the table plan for 60 guests at 36 a head came in, look",
        "park that for a sec. the caterer wants 60 guests confirmed at 36 a head by friday",
        "wait, stop, something else first. Green Table has 60 guests at 36 a head on the 5th?",
    ],
)
def test_a_topic_named_after_about_or_put_next_opens_a_topic(opening: str) -> None:
    """Written for this test: a topic named after "about" and said alone ("About the
    coach."), the next of several ("problem two"), news ("ok bad news, ...") and a
    question next to the last ("Related question.") and what is at hand put aside ("park
    that for a sec.", "something else first.") each open a topic, though they share words
    with the caterer's answer."""
    segments = _segments_of([*WEDDING, ("user", opening), ("assistant", "Let me look.")])
    assert [s["raw_lines"][0] for s in segments] == [1, len(WEDDING) + 1]


@pytest.mark.parametrize(
    "opening",
    [
        "good, I'll ring Green Table in the morning about the 60 guests and the deposit. "
        "different thing. the bus from the hotel for the 60 guests at 36 a head?",
        "ok so Sam signs the Green Table contract for 60 guests on friday then. on another "
        "note, what does a string quartet cost for 36 minutes?",
        "fine, the 60 guests at 36 a head stays as it is. unrelated: can Gran's wheelchair "
        "get into the Green Table barn?",
        "while Sam reads the Green Table menu, different fire \U0001f525 the DJ cancelled "
        "on us for the 60 guests",
        "ugh. totally different thing, the Green Table deposit for 60 guests bounced",
    ],
)
def test_words_that_change_the_subject_open_a_topic_after_any_aside(opening: str) -> None:
    """Written for this test: "different thing.", "on another note", "unrelated:",
    "different fire" change the subject after an aside of any length that closes the last
    one, though the turn shares words with the caterer's answer; "the other one's" does
    not."""
    segments = _segments_of([*WEDDING, ("user", opening), ("assistant", "Let me look.")])
    assert [s["raw_lines"][0] for s in segments] == [1, len(WEDDING) + 1]
    assert not SWITCH.search("found two. one's £55. other one's £70, new felt.")


@pytest.mark.parametrize(
    "opening",
    [
        "Music. Let's go with the DJ Sam's cousin knows, 350 for the evening and he brings "
        "his own lights.",
        "Photos. Decided: Maya does the day, 900 with the album, she's free on the 14th.",
        "ok transport. we'll go with the coach from the station, 46 seats, 280 return.",
    ],
)
def test_a_topic_named_and_settled_in_one_turn_opens_a_segment_it_concludes(
    opening: str,
) -> None:
    """Written for this test: a turn that names a topic ("Music.") and settles it in the
    same breath concludes the topic it opens, not the caterer's before it."""
    answer = ("assistant", "Noted, I'll add it to the plan.")
    segments = _segments_of([*WEDDING, ("user", opening), answer])
    assert [s["raw_lines"][0] for s in segments] == [1, len(WEDDING) + 1]
    assert segments[1]["conclusion"]["turn"] == len(WEDDING) + 1


@pytest.mark.parametrize(
    "opening",
    [
        "right, transport. is there a coach from the station?",
        "ok photos. who's free on the 14th",
        "so, seating. who goes next to Gran?",
        "anyway, flowers. peonies or roses?",
    ],
)
def test_a_topic_named_after_ok_opens_a_segment_in_few_words(opening: str) -> None:
    """Written for this test: a topic named after "ok", "right", "so" or "anyway" ("right,
    transport.") opens a segment with three words of its own, also in a topic that has
    not concluded."""
    for before in (WEDDING, WEDDING[:4]):
        segments = _segments_of([*before, ("user", opening), ("assistant", "Let me look.")])
        assert [s["raw_lines"][0] for s in segments] == [1, len(before) + 1]


@pytest.mark.parametrize(
    "reply",
    [
        "lovely. Sam's parents pay for the drinks, the cake and the string quartet, and his "
        "aunt brings the flowers",
        "go. and ask whether the quartet and the cake from Sam's aunt can come in through "
        "their kitchen",
    ],
)
def test_a_word_of_approval_or_a_go_ahead_alone_names_no_topic(reply: str) -> None:
    """Written for this test: "lovely." or "go." before the rest of a turn is a reply to
    the answer, not a topic named in a word ("logs. ..."): the turn stays in its topic
    when the answer to it takes it up."""
    answer = (
        "Noted: Sam's parents pay for the drinks, the cake and the quartet, Green Table "
        "does the desserts."
    )
    segments = _segments_of([*WEDDING[:4], ("user", reply), ("assistant", answer)])
    assert [s["raw_lines"][0] for s in segments] == [1]


@pytest.mark.parametrize(
    ("aside", "opens"),
    [
        (
            "oh and one rule from Sam: no speeches longer than five minutes, his uncle included",
            False,
        ),
        (
            "oh and before I forget: nothing with nuts anywhere on the menu, Sam's niece is "
            "allergic",
            False,
        ),
        ("oh and the florist rang, she can do peonies after all for 40 more", True),
    ],
)
def test_an_aside_that_lays_down_a_rule_stays_with_the_work_at_hand(
    aside: str, opens: bool
) -> None:
    """Written for this test: "oh and ..." opens a topic ("the florist rang"), unless what
    it says is a rule for the work at hand ("one rule from Sam: ...")."""
    answer = ("assistant", "Noted, that goes on the list for Green Table and the 60 guests.")
    segments = _segments_of([*WEDDING[:4], ("user", aside), answer])
    assert [s["raw_lines"][0] for s in segments] == ([1, 5] if opens else [1])


@pytest.mark.parametrize(
    "reply",
    [
        "about right. the 60 guests fit if the caterer serves at the tables",
        "about 40 of the 60 guests want the vegetarian menu, the caterer can do that",
    ],
)
def test_about_a_figure_or_about_right_opens_nothing(reply: str) -> None:
    """Written for this test: "about right." and "about 40" go on with the answer."""
    segments = _segments_of([*WEDDING, ("user", reply), ("assistant", "Good.")])
    assert [s["raw_lines"][0] for s in segments] == [1]


@pytest.mark.parametrize(
    "stop",
    [
        "ok that's it for today, brain is mush. barn visit tomorrow, then the seating plan",
        "right, I'm done for tonight. the florist and the band can wait till the weekend",
        "let's stop here for today, I'll send Sam the caterer list tomorrow morning",
        "haha no, Sam's parents will survive a buffet with a string quartet and cake. night!",
        "fair. right I'm knackered, the quartet and the cake can wait. bed x",
    ],
)
def test_a_stop_for_the_day_opens_no_topic(stop: str) -> None:
    """Written for this test: the user stops for the day and lists what is left ("barn
    visit tomorrow, then the seating plan"), or says a last word and goodnight ("...
    night!"): the work at hand goes on in its segment, and the next topic starts when the
    work on it does."""
    for before in (WEDDING, WEDDING[:4]):
        segments = _segments_of([*before, ("user", stop), ("assistant", "Good night!")])
        assert [s["raw_lines"][0] for s in segments] == [1]


@pytest.mark.parametrize(
    "reply",
    [
        "ok keep it. deposit 500 on friday, Sam signs, the rest after the wedding day, "
        "Green Table invoice",
        "do it. deposit 500 on friday, Sam signs, the rest after the wedding day, "
        "Green Table invoice",
    ],
)
def test_a_turn_that_acts_on_what_was_just_said_opens_no_topic(reply: str) -> None:
    """Written for this test: a turn that opens by acting on what was just said ("ok
    keep it.", "do it.") goes on with the topic at hand, though most of its words are
    new and the segment has concluded."""
    answer = "Noted: Green Table for 60 guests at 36 a head, the deposit of 500 on friday."
    segments = _segments_of([*WEDDING, ("user", reply), ("assistant", answer)])
    assert [s["raw_lines"][0] for s in segments] == [1]


def test_a_conclusion_about_an_earlier_topic_starts_a_segment_of_its_own() -> None:
    """Written for this test: the crash fix goes out for testing, another topic is decided,
    then "beta2 in reaper and live, sample rate switched back and forth, no crash. ok that
    one's dead now, merge it" concludes the crash, not the topic at hand: it starts a
    segment, and the decision keeps its own."""
    lines = [
        ("user", "the plugin crashes when the host changes sample rate mid playback, look?"),
        ("assistant", "The delay lines are resized on the audio thread when the rate changes."),
        ("user", "fix it, preallocate for the highest sample rate and make a beta for reaper"),
        ("assistant", "Done: buffers sized for 192k up front; beta2 built for reaper and live."),
        ("user", "different thing, decided with ines: we're dropping macOS 10.13 support"),
        ("assistant", "Then 2.4 ships with a 10.15 minimum and 2.3.2 stays for older macs."),
        (
            "user",
            "beta2 back from ines: reaper and live, sample rate switched back and forth twenty "
            "times while playing, no crash. ok that one's dead now, merge it",
        ),
        ("assistant", "Merged; the crash fix goes out in 2.4."),
    ]
    segments = _segments_of(lines)
    starts = [s["raw_lines"][0] for s in segments]
    assert 7 in starts
    decided = _segment_at(segments, 5)
    assert (decided["conclusion"]["turn"], decided["status"]) == (5, "concluded")


def test_a_failure_in_a_topic_taken_up_again_takes_back_its_fix() -> None:
    """Written for this test: the export fix is celebrated ("fixed 🎉"), two other
    topics follow, then "ok back to the export ... it's worse than before" takes the
    fix back, however many segments ago; the fix just before it, on another subject,
    stays (the failure is of the topic taken up)."""
    lines = [
        ("user", "the csv export drops every row after 10k, can you look at the export?"),
        ("assistant", "The export streams through a 10k page cap; removed the cap in export.py."),
        ("user", "fixed \U0001f389 all 48k rows in the csv, shipping the export"),
        ("assistant", "Shipped the export fix in 3.4.1."),
        ("user", "different thing: the signup emails go to spam at gmail"),
        ("assistant", "SPF lacks the mailer's include; added it and set a DMARC record."),
        ("user", "mail-tester says 10/10 now, signup emails land in the inbox. done"),
        ("assistant", "Good."),
        ("user", "next: the avatar uploads fail over 2 MB"),
        ("assistant", "nginx had client_max_body_size 2m; raised it to 10m and reloaded."),
        ("user", "a 6 MB avatar uploads fine now, that fixed it"),
        ("assistant", "Anything else?"),
        (
            "user",
            "ok back to the export. priya ran the 48k report this morning and it's "
            "worse than before, the csv stops at 5k rows now",
        ),
        ("assistant", "Looking at the export's second page query."),
    ]
    segments = _segments_of(lines)
    export = next(s for s in segments if s["raw_lines"][0] == 1)
    assert export["status"] == "open" and export["conclusion"]["retracted_by"] == 13
    avatar = _segment_at(segments, 11)
    assert avatar["status"] == "concluded" and avatar["conclusion"]["turn"] == 11


@pytest.mark.parametrize(
    "said",
    [
        "tried it on the staging box: so not fixed, same 502 on every third request",
        "the cert renewal is not sorted, kuma went red again this morning",
        "it's back to square one with the landlord, he wants the full deposit",
    ],
)
def test_a_fix_that_did_not_hold_is_a_failure(said: str) -> None:
    from ccm.engine.fold import _failure_said

    assert _failure_said(said.lower())
    assert not _failure_said("is it fixed now, or not fixed yet?")


@pytest.mark.parametrize(
    "said",
    [
        "good, do the other four the same way, and stop if anything hangs",
        "run the backfill overnight; in case the job is stuck again, page me",
        "leave the old worker up unless the new one crashes again",
        # what is not wanted, what a change is for
        "Sven's away till monday. I don't want this blocked on him though, ship it",
        "and add a requeue endpoint so they can kick stuck jobs without pinging me",
    ],
)
def test_a_failure_supposed_is_no_failure_reported(said: str) -> None:
    """Written for this test: a failure word in a condition ("stop if anything hangs")
    supposes a failure; it reports none. Said as a report, after a comma or outright, it
    is one."""
    from ccm.engine.fold import _failure_said

    assert not _failure_said(said.lower())
    assert _failure_said("when I run the other four, the second one hangs")
    assert _failure_said("the job is stuck again, same as monday")
    assert _failure_said("the release is blocked on the review again")


def test_a_failure_supposed_leaves_the_fix_just_made() -> None:
    """Written for this test: the fix is confirmed, a new topic starts, and a turn of that
    topic says "stop if anything hangs": the fix stays concluded."""
    lines = [
        ("user", "the nightly export has been timing out since monday, can you look?"),
        ("assistant", "The export query lost its index in the last migration; restored it."),
        ("user", "ran it by hand, 40 seconds instead of 20 minutes. that's fixed, thanks"),
        ("assistant", "Good. The migration now keeps the index."),
        ("user", "next: the four replicas need the kernel patch, drain them one at a time"),
        ("assistant", "Replica 1 drained, patched and back. Three to go: same way?"),
        ("user", "yes, go through the rest one by one, stop if anything hangs"),
        ("assistant", "Draining replica 2."),
    ]
    segments = _segments_of(lines)
    fix = _segment_at(segments, 3)
    assert (fix["conclusion"]["turn"], fix["status"]) == (3, "concluded")


def test_the_thing_in_hand_done_as_a_whole_concludes_after_the_decision_on_the_way() -> None:
    """Written for this test: "fix it in the worker then" decides how; "ok that one's done
    for real: ..." later in the same topic says the whole of it is done, and is where it
    concluded. A bare "merged" after a decision leaves the decision as the conclusion."""
    lines = [
        ("user", "the invoice emails go out an hour late since the clocks changed, why?"),
        ("assistant", "The worker reads the send time as UTC; the shop's times are local."),
        ("user", "ok, fix it in the worker then, and add a test for the changeover week"),
        ("assistant", "Parsing send times in Europe/Lisbon now, with a test for 29 March."),
        ("user", "ran it on staging, the 9:00 batch went out at 9:00"),
        ("assistant", "Good. Deployed to production; 212 queued emails moved an hour."),
        ("user", "ok that one's done for real: prod on time, 212 emails moved. telling Ana"),
        ("assistant", "Noted."),
    ]
    segment = _segments_of(lines)[0]
    assert segment["conclusion"]["turn"] == 7 and segment["status"] == "concluded"
    merged = [*lines[:6], ("user", "merged"), ("assistant", "Noted.")]
    assert _segments_of(merged)[0]["conclusion"]["turn"] == 3


def test_what_the_assistant_lists_to_do_after_a_decision_leaves_it_decided() -> None:
    """Written for this test: "Ines it is, Tuesdays and Fridays" decides; the assistant's
    "Still to do: the deposit ..." carries it out: the topic is concluded, and its effort
    stays open for what is left. The user's own "still need to ..." after it leaves the
    topic open, as before."""
    lines = [
        ("user", "which piano teacher for Mia, Ines or the music school?"),
        ("assistant", "Ines is 28 a lesson and comes to you; the school is 24 but a drive."),
        ("user", "Ines it is, Tuesdays and Fridays, Mia liked her trial"),
        (
            "assistant",
            "Great, Ines on Tuesdays and Fridays. Still to do: the deposit and the book.",
        ),
    ]
    segment = _segments_of(lines)[0]
    assert segment["conclusion"]["turn"] == 3 and segment["status"] == "concluded"
    turns = [
        {"turn": n, "role": role, "content": text, "ts": f"2026-05-04T09:0{n}:00Z"}
        for n, (role, text) in enumerate(lines, start=1)
    ]
    result = render(fold(new_state("s"), turns, Params()), [], from_mapping({}))
    assert [e["status"] for e in result.open["efforts"]] == ["open"]
    done = [*lines[:3], ("assistant", "Great, Ines on Tuesdays and Fridays.")]
    done_turns = [{**t, "content": text} for t, (_, text) in zip(turns, done, strict=True)]
    finished = render(fold(new_state("s"), done_turns, Params()), [], from_mapping({}))
    assert finished.open["efforts"] == []
    unsure = [*lines, ("user", "still need to check Fridays with her dad though")]
    assert _segments_of(unsure)[0]["status"] == "open"


def test_a_choice_changed_after_a_colon_is_kept_as_a_rule() -> None:
    """Written for this test: "changed my mind: ..." states the choice that stands now, a
    critical item whether or not the one it replaces was kept as one."""
    lines = [
        ("user", "the two report pages are the same template with the names swapped"),
        ("assistant", "Right: one template with a parameter would do for both."),
        (
            "user",
            "I know I said two pages earlier. changed my mind: one template, a parameter per "
            "report.",
        ),
        ("assistant", "Merging them into one template."),
    ]
    turns = [
        {"turn": n, "role": role, "content": text, "ts": f"2026-05-04T09:{n:02d}:00Z"}
        for n, (role, text) in enumerate(lines, start=1)
    ]
    state = fold(new_state("s"), turns, Params())
    kept = [item["text"] for item in state["critical"] if not item.get("superseded_by")]
    assert any("changed my mind: one template, a parameter per report" in text for text in kept)


def test_a_fix_the_other_side_asks_to_wait_on_stays_open() -> None:
    """Written for this test: "that's the sync sorted then 🎉" is met with "I'd hold off
    until tomorrow's run": the fix is not taken as concluded until it is seen to work."""
    lines = [
        ("user", "the nightly sync drops a few hundred rows since the upgrade, can you look"),
        ("assistant", "The queue evicts under memory pressure; moved it to its own instance."),
        ("user", "no evictions for an hour. that's the sync sorted then \U0001f389"),
        ("assistant", "I'd hold off until tomorrow's run: eviction was one way to lose rows."),
        ("user", "fine. tomorrow"),
        ("assistant", "I'll compare tomorrow's counts with the source first thing."),
    ]
    segments = _segments_of(lines)
    assert _segment_at(segments, 3)["status"] == "open"


PENDING_PIECES = st.sampled_from(
    [
        *["still need to ", "still needs to ", "remaining", "left to do", "todo:", "to do:"],
        *["not yet", "open question", "except for the ", "except one ", "unresolved"],
        *[
            "haven't decided",
            "havent decided",
            "not sure yet",
            "i wouldn't call it ",
            "i wouldnt say it's ",
        ],
        *[
            "too early to say",
            "too soon to tell",
            "before calling it done",
            "before we call it fixed",
        ],
        *["i'd hold off", "id wait for ", "i'd wait until ", "not so fast", "before ", "except "],
        *["still", "need", "yet", "not ", "so ", "fast", "wait", "hold", " ", ".", "ok", "x"],
    ]
)


@settings(max_examples=2000)
@given(st.lists(PENDING_PIECES, max_size=12).map("".join))
def test_pending_words_are_looked_for_before_the_pattern(said: str) -> None:
    """The plain-text check in front of `PENDING` never hides a match of it."""
    from ccm.engine import fold as engine_fold

    assert engine_fold._pending(said) == (engine_fold.PENDING.search(said) is not None)
