"""`ccm consolidate`: the sample knowledge becomes a vault of notes and a graph, nightly.

Every test runs the CLI on real files under tmp_path: a copy of sample_knowledge, or
small sessions imported with `ccm ingest`.
"""

from __future__ import annotations

import json
import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result
from freezegun import freeze_time

from ccm.cli import main
from ccm.sleep import notes

SAMPLE = Path(__file__).parent.parent / "sample_knowledge"
FIELDS = [
    "id",
    "type",
    "status",
    "confidence",
    "layer",
    "sources",
    "tags",
    "aliases",
    "created",
    "updated",
    "links",
    "content_hash",
]
EMAIL = re.compile(r"[\w.+-]+@[\w-]+\.[\w.]+")
PATH = re.compile(r"(?<![\w<])/(?:home|opt|var|etc|srv)\b")
SQLITE_NOTE = "artifacts/decision/use-sqlite-wal-mode-not-postgres.md"
CRON_NOTE = "artifacts/decision/keep-simple-daily-cron-job-02-30.md"
TIMER_NOTE = "artifacts/decision/drop-cron-job.md"


def ccm(root: Path, *args: str) -> Result:
    result = CliRunner().invoke(main, ["--root", str(root), *args])
    assert result.exit_code == 0, (result.output, result.exception)
    return result


def consolidate_json(root: Path, *args: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(ccm(root, "consolidate", "--json", *args).stdout)
    return found


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    """A copy of the sample knowledge (three sessions with their tiers)."""
    root = tmp_path / "vault"
    shutil.copytree(SAMPLE, root, ignore=shutil.ignore_patterns(".ccm"))
    return root


def turns(*said: tuple[str, str, str]) -> str:
    return "".join(json.dumps({"role": r, "content": c, "ts": t}) + "\n" for r, c, t in said)


def ingest(root: Path, tmp_path: Path, session: str, text: str) -> None:
    source = tmp_path / f"{session}.jsonl"
    source.write_text(text, encoding="utf-8")
    ccm(root, "ingest", str(source), "--session", session)


def frontmatter(path: Path) -> dict[str, Any]:
    fields, _ = notes.split(path.read_text(encoding="utf-8"), str(path))
    assert fields is not None, path
    return fields


def snapshot(root: Path) -> dict[str, tuple[int, bytes]]:
    return {
        p.relative_to(root).as_posix(): (p.stat().st_mtime_ns, p.read_bytes())
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


# ---------------------------------------------------------------- Obsidian's view

_FENCE = re.compile(r"^(`{3,}|~{3,})")
_INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1")
_WIKILINK = re.compile(r"!?\[\[([^\[\]]+?)\]\]")


def wikilinks(text: str) -> list[str]:
    """Link targets as Obsidian reads them: not inside code fences or inline code,
    `[[target|alias]]` and `[[target#heading]]` point at `target`."""
    found = []
    fence = ""
    body = notes.split(text)[1]
    for line in body.splitlines():
        opened = _FENCE.match(line)
        if fence:
            if opened and opened.group(1)[0] == fence[0] and len(opened.group(1)) >= len(fence):
                fence = ""
            continue
        if opened:
            fence = opened.group(1)
            continue
        line = _INLINE_CODE.sub("", line)
        for match in _WIKILINK.finditer(line):
            if match.start() > 0 and line[match.start() - 1] == "\\":
                continue
            target = match.group(1).split("|", 1)[0].split("#", 1)[0].split("^", 1)[0]
            found.append(target.strip())
    return found


def resolves(root: Path, target: str, names: dict[str, list[Path]]) -> bool:
    """Obsidian: a target with a slash is a path from the vault root, else a file name
    anywhere in the vault; either may leave out `.md`; names compare case-insensitively."""
    if not target:
        return True  # [[#heading]] links into the same note
    if "/" in target:
        return any((root / candidate).is_file() for candidate in (target, target + ".md"))
    stem = target.removesuffix(".md").lower()
    return bool(names.get(stem))


def broken_links(root: Path) -> list[tuple[str, str]]:
    markdown = [p for p in root.rglob("*.md") if ".ccm" not in p.parts]
    names: dict[str, list[Path]] = {}
    for path in markdown:
        names.setdefault(path.stem.lower(), []).append(path)
    broken = []
    for path in markdown:
        for target in wikilinks(path.read_text(encoding="utf-8")):
            if not resolves(root, target, names):
                broken.append((path.relative_to(root).as_posix(), target))
    return broken


def test_the_wikilink_reader_reads_like_obsidian(tmp_path: Path) -> None:
    text = (
        "---\nid: x\n---\nSee [[a/b|B]], [[c#Part]], ![[d]] and `[[not a link]]`.\n"
        "```text\n[[inside a fence]]\n```\n\\[\\[escaped]] \\[[escaped too]]\n"
    )
    assert wikilinks(text) == ["a/b", "c", "d"]
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "b.md").write_text("")
    (tmp_path / "C.md").write_text("")
    names = {"b": [tmp_path / "a" / "b.md"], "c": [tmp_path / "C.md"]}
    assert resolves(tmp_path, "a/b", names) and resolves(tmp_path, "c", names)
    assert not resolves(tmp_path, "d", names) and not resolves(tmp_path, "b/a", names)


# ---------------------------------------------------------------- the sample vault


@freeze_time("2026-03-10 03:00:00")
def test_the_sample_knowledge_becomes_a_vault(vault: Path) -> None:
    report = consolidate_json(vault)

    assert report["sessions"]["consolidated"] == [
        "deploy-checklist",
        "ledger-sync",
        "reading-notes",
    ]
    found = sorted(p.relative_to(vault).as_posix() for p in (vault / "artifacts").rglob("*.md"))
    assert found == [
        TIMER_NOTE,
        CRON_NOTE,
        SQLITE_NOTE,
        "artifacts/insight/test-myself-instead-rereading.md",
        "artifacts/resolution/reference-alone-cant-key.md",
        "artifacts/task/unit-file-place-enabled.md",
    ]
    assert sorted(a["path"] for a in report["artifacts"]["new"]) == found
    for relative in found:
        path = vault / relative
        fields = frontmatter(path)
        assert list(fields) == FIELDS, relative
        assert fields["type"] == path.parent.name
        assert fields["status"] in ("active", "superseded", "contradicted")
        assert 0.0 <= fields["confidence"] <= 1.0 and fields["layer"] in (0, 1, 2, 3)
        source = fields["sources"][0]
        assert (vault / "chats" / source["session"] / "raw.jsonl").is_file()
        assert source["segment"] == fields["id"].split("/")[1]
        assert notes.is_pristine(path.read_text(encoding="utf-8"))
        body = path.read_text(encoding="utf-8")
        assert "## Evidence" in body and "## Related" in body
    sqlite = (vault / SQLITE_NOTE).read_text(encoding="utf-8")
    # the verbatim quote of turn 7, with its number
    assert "Turn 7 · user · 2026-03-02 09:23" in sqlite
    assert "```text\nDecision: we use SQLite with WAL mode, not Postgres" in sqlite
    # the change of plan the next morning (a decision with a restore test left) supersedes
    # the cron job
    cron = frontmatter(vault / CRON_NOTE)
    assert cron["status"] == "superseded" and cron["confidence"] < 0.5
    assert cron["links"] == [
        {"type": "supersedes", "direction": "in", "id": "deploy-checklist/seg_3"}
    ]
    for session in ("deploy-checklist", "ledger-sync", "reading-notes"):
        note = vault / "chats" / session / f"{session}.md"
        assert frontmatter(note)["type"] == "session"
        assert "## Segments" in note.read_text(encoding="utf-8")
    nodes = json.loads((vault / "network" / "nodes.json").read_text())["nodes"]
    edges = json.loads((vault / "network" / "edges.json").read_text())["edges"]
    assert [n["id"] for n in nodes] == sorted(n["id"] for n in nodes)
    assert {n["id"]: n["status"] for n in nodes}["deploy-checklist/seg_2"] == "superseded"
    assert ("deploy-checklist/seg_3", "deploy-checklist/seg_2", "supersedes") in [
        (e["source"], e["target"], e["type"]) for e in edges
    ]
    assert report["report"] == "reports/2026-03-10.md"
    text = (vault / "reports" / "2026-03-10.md").read_text(encoding="utf-8")
    assert "### New conflicts (1 of 1)" in text and "is superseded" in text
    assert broken_links(vault) == []


def test_consolidating_from_scratch_gives_the_same_vault_byte_for_byte(tmp_path: Path) -> None:
    vaults = []
    for name in ("one", "two"):
        root = tmp_path / name
        shutil.copytree(SAMPLE, root, ignore=shutil.ignore_patterns(".ccm"))
        with freeze_time("2026-03-10 03:00:00"):
            ccm(root, "consolidate")
        vaults.append(
            {
                p.relative_to(root).as_posix(): p.read_bytes()
                for p in root.rglob("*")
                if p.is_file() and ".ccm" not in p.parts and p.suffix in (".md", ".json")
            }
        )
    assert len(vaults[0]) == 6 + 3 + 2 + 1  # artifacts, session notes, network, report
    assert vaults[0] == vaults[1]


def test_a_second_run_with_nothing_new_changes_no_file(vault: Path) -> None:
    ccm(vault, "consolidate")
    before = snapshot(vault)

    result = ccm(vault, "consolidate")

    assert "Nothing new" in result.stdout
    assert snapshot(vault) == before
    report = consolidate_json(vault)
    assert report["sessions"]["consolidated"] == [] and report["files_written"] == 0
    assert report["report"] is None
    assert snapshot(vault) == before


def test_a_run_with_nothing_new_restores_a_deleted_note_and_a_touched_network(
    vault: Path,
) -> None:
    ccm(vault, "consolidate")
    before = snapshot(vault)
    (vault / SQLITE_NOTE).unlink()
    (vault / "network" / "edges.json").write_text("{}")

    report = consolidate_json(vault)

    assert report["sessions"]["consolidated"] == []
    assert [(o["path"], o["action"]) for o in report["artifacts"]["changed"]] == [
        (SQLITE_NOTE, "restored")
    ]
    assert report["network"]["written"] == ["network/edges.json"]
    after = snapshot(vault)
    for path in (SQLITE_NOTE, "network/edges.json"):
        assert after[path][1] == before[path][1]
    assert consolidate_json(vault)["files_written"] == 0


def test_only_the_changed_session_is_read_again(vault: Path, tmp_path: Path) -> None:
    ccm(vault, "consolidate")
    before = snapshot(vault)
    more = turns(
        (
            "user",
            "One more thing about spaced repetition: review in the morning.",
            "2026-03-07T09:00:00Z",
        ),
        ("assistant", "Morning reviews work well for most people.", "2026-03-07T09:00:20Z"),
    )
    ingest(vault, tmp_path, "reading-notes", more)

    report = consolidate_json(vault)

    assert report["sessions"]["consolidated"] == ["reading-notes"]
    assert report["sessions"]["unchanged"] == 2
    after = snapshot(vault)
    for session in ("deploy-checklist", "ledger-sync"):
        note = f"chats/{session}/{session}.md"
        assert after[note] == before[note]
    assert (
        after["chats/reading-notes/reading-notes.md"]
        != before["chats/reading-notes/reading-notes.md"]
    )
    assert "review in the morning" in (vault / "chats/reading-notes/reading-notes.md").read_text()


def test_a_lost_state_costs_one_full_run_even_for_one_session(vault: Path) -> None:
    def graph(report: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in report["network"].items() if k != "written"}

    whole = graph(consolidate_json(vault))
    assert whole["nodes"] > 2
    (vault / ".ccm" / "sleep.state").unlink()

    report = consolidate_json(vault, "--session", "reading-notes")

    assert sorted(report["sessions"]["consolidated"]) == [
        "deploy-checklist",
        "ledger-sync",
        "reading-notes",
    ]
    assert graph(report) == whole  # not shrunk to one session's conclusions
    again = consolidate_json(vault, "--session", "reading-notes")
    assert again["sessions"]["consolidated"] == ["reading-notes"]
    assert graph(again) == whole


def test_a_dry_run_writes_nothing(vault: Path) -> None:
    before = snapshot(vault)

    report = consolidate_json(vault, "--dry-run")

    assert report["dry_run"] and len(report["artifacts"]["new"]) == 6
    assert report["files_written"] == 11 and report["report"] is None  # no report
    assert snapshot(vault) == before


def test_since_leaves_out_older_sessions(vault: Path) -> None:
    report = consolidate_json(vault, "--since", "2026-03-04")

    assert report["sessions"]["consolidated"] == ["deploy-checklist", "reading-notes"]
    assert [s["session"] for s in report["sessions"]["skipped"]] == ["ledger-sync"]
    assert not (vault / SQLITE_NOTE).exists()
    # a later run without --since catches up on it
    assert consolidate_json(vault)["sessions"]["consolidated"] == ["ledger-sync"]
    assert (vault / SQLITE_NOTE).exists()


# ---------------------------------------------------------------- a person's edits


RESTATED = turns(
    ("user", "Back on the ledger storage question for the new laptop.", "2026-03-08T10:00:00Z"),
    (
        "assistant",
        "Same constraints as before: one process writes, nothing remote.",
        "2026-03-08T10:00:30Z",
    ),
    (
        "user",
        "Decision: we use SQLite with WAL mode, not Postgres, because there is a single writer.",
        "2026-03-08T10:01:00Z",
    ),
    ("assistant", "Agreed, SQLite in WAL mode it stays.", "2026-03-08T10:01:30Z"),
)


def test_a_persons_edit_survives_and_only_gains_the_new_sources(
    vault: Path, tmp_path: Path
) -> None:
    ccm(vault, "consolidate")
    note = vault / SQLITE_NOTE
    edited = note.read_text(encoding="utf-8").replace(
        "## Context", "My own words: we benchmarked this on 2026-03-01.\n\n## Context"
    )
    note.write_text(edited, encoding="utf-8")
    ingest(vault, tmp_path, "ledger-laptop", RESTATED)

    report = consolidate_json(vault)

    [kept] = report["artifacts"]["kept_edits"]
    assert kept["path"] == SQLITE_NOTE and kept["action"] == "merged"
    assert "ledger-laptop/seg_1" in kept["detail"]
    text = note.read_text(encoding="utf-8")
    assert "My own words: we benchmarked this on 2026-03-01." in text
    assert text.split("\n---\n", 1)[1] == edited.split("\n---\n", 1)[1]  # the body, untouched
    sources = frontmatter(note)["sources"]
    assert [s["session"] for s in sources] == ["ledger-sync", "ledger-laptop"]
    # the new session's own artifact links back, and the report says what was kept
    restated = frontmatter(vault / "artifacts/decision/use-sqlite-wal-mode-not-postgres-2.md")
    assert {"type": "supports", "direction": "out", "id": "ledger-sync/seg_2"} in restated["links"]
    [changed] = report["confidence_changes"]
    assert changed["id"] == "ledger-sync/seg_2" and changed["delta"] > 0
    day = report["report"]
    assert "edited by you" in (vault / day).read_text(encoding="utf-8")
    # a third run leaves the edit alone and reports nothing new
    again = consolidate_json(vault)
    assert again["artifacts"]["kept_edits"] == [] and again["files_written"] == 0
    assert "My own words" in note.read_text(encoding="utf-8")


def test_an_edit_is_kept_even_when_ccm_would_change_the_note(vault: Path, tmp_path: Path) -> None:
    ccm(vault, "consolidate")
    note = vault / "artifacts/insight/test-myself-instead-rereading.md"
    text = note.read_text(encoding="utf-8").replace("status: active", "status: active  # mine")
    note.write_text(text, encoding="utf-8")
    ccm(vault, "consolidate", "--session", "reading-notes")
    assert note.read_text(encoding="utf-8") == text  # nothing new for it: not even touched
    # a deleted note of ccm's own comes back
    (vault / SQLITE_NOTE).unlink()
    report = consolidate_json(vault, "--session", "ledger-sync")
    assert [c["path"] for c in report["artifacts"]["changed"]] == [SQLITE_NOTE]
    assert notes.is_pristine((vault / SQLITE_NOTE).read_text(encoding="utf-8"))


# ---------------------------------------------------------------- conflicts


QUEUE_SQLITE = turns(
    ("user", "We need a store for the job queue of the importer.", "2026-03-05T10:00:00Z"),
    ("assistant", "A single writer and a local file: SQLite would do.", "2026-03-05T10:00:30Z"),
    (
        "user",
        "Decision: we use SQLite for the job queue, not Postgres, because there is a single writer.",
        "2026-03-05T10:01:00Z",
    ),
    ("assistant", "Noted: the job queue lives in SQLite.", "2026-03-05T10:01:30Z"),
)
QUEUE_POSTGRES = turns(
    ("user", "The importer now runs on three machines at once.", "2026-03-09T10:00:00Z"),
    (
        "assistant",
        "Then a single-writer store no longer fits the job queue.",
        "2026-03-09T10:00:30Z",
    ),
    (
        "user",
        "Change of plan: switch to Postgres for the job queue instead of SQLite, we now have "
        "several writers.",
        "2026-03-09T10:01:00Z",
    ),
    ("assistant", "Understood, the job queue moves to Postgres.", "2026-03-09T10:01:30Z"),
)
MEMO_INDEX = turns(
    ("user", "I looked at the slow import of the bank files today.", "2026-03-06T10:00:00Z"),
    ("assistant", "Did the query plan show anything?", "2026-03-06T10:00:30Z"),
    ("user", "Yes: the root cause was a missing index on the memo column.", "2026-03-06T10:01:00Z"),
    ("assistant", "Then an index on the memo column should make it fast.", "2026-03-06T10:01:30Z"),
)
MEMO_NULLS = turns(
    ("user", "I profiled the slow import again with the query log on.", "2026-03-10T10:00:00Z"),
    ("assistant", "What did the log show?", "2026-03-10T10:00:30Z"),
    (
        "user",
        "Actually, the root cause was NULL references in the memo column.",
        "2026-03-10T10:01:00Z",
    ),
    (
        "assistant",
        "That explains the full scans; I will handle them in the importer.",
        "2026-03-10T10:01:30Z",
    ),
)


def artifact_of(root: Path, node_id: str) -> dict[str, Any]:
    for path in (root / "artifacts").rglob("*.md"):
        fields = frontmatter(path)
        if fields["id"] == node_id:
            return fields
    raise AssertionError(f"no artifact for {node_id}")


def test_a_reversed_decision_ends_superseded(tmp_path: Path) -> None:
    root = tmp_path / "root"
    ingest(root, tmp_path, "queue-a", QUEUE_SQLITE)
    ccm(root, "consolidate")
    assert artifact_of(root, "queue-a/seg_1")["status"] == "active"
    ingest(root, tmp_path, "queue-b", QUEUE_POSTGRES)

    report = consolidate_json(root)

    old, new = artifact_of(root, "queue-a/seg_1"), artifact_of(root, "queue-b/seg_1")
    assert (old["status"], new["status"]) == ("superseded", "active")
    assert old["confidence"] < new["confidence"]
    [conflict] = report["conflicts"]["new"]
    assert (conflict["winner"], conflict["loser"], conflict["rule"]) == (
        "queue-b/seg_1",
        "queue-a/seg_1",
        "choice",
    )
    assert [c["path"] for c in report["artifacts"]["changed"]] == [
        "artifacts/decision/use-sqlite-job-queue-not-postgres.md"
    ]
    body = (root / "artifacts/decision/use-sqlite-job-queue-not-postgres.md").read_text()
    assert "> [!warning] Superseded by [[artifacts/decision/switch-postgres-job-queue" in body
    assert broken_links(root) == []


def test_a_corrected_fact_ends_contradicted(tmp_path: Path) -> None:
    root = tmp_path / "root"
    # imported out of time order: the correction first, the older claim after it
    ingest(root, tmp_path, "memo-later", MEMO_NULLS)
    ingest(root, tmp_path, "memo-earlier", MEMO_INDEX)

    report = consolidate_json(root)

    assert artifact_of(root, "memo-earlier/seg_1")["status"] == "contradicted"
    assert artifact_of(root, "memo-later/seg_1")["status"] == "active"
    [conflict] = report["conflicts"]["new"]
    assert conflict["rule"] == "truth" and "the user stated it" in conflict["reason"]
    explained = json.loads(ccm(root, "graph", "explain", "memo-earlier/seg_1", "--json").stdout)
    assert explained["status"] == "contradicted"
    assert explained["challenged_by"][0]["id"] == "memo-later/seg_1"


# ---------------------------------------------------------------- incremental = from scratch

QUEUE_LATER = turns(
    ("user", "We load-tested the job queue on Postgres this week.", "2026-03-12T09:00:00Z"),
    ("assistant", "How did it hold up with several writers?", "2026-03-12T09:00:30Z"),
    (
        "user",
        "Decision: we use Postgres for the job queue, not SQLite, because writers contend.",
        "2026-03-12T09:01:00Z",
    ),
    ("assistant", "Agreed, Postgres stays for the job queue.", "2026-03-12T09:01:30Z"),
)


def vault_files(root: Path) -> dict[str, bytes]:
    """What consolidation writes, but the report: notes and the network."""
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
        and (
            p.parts[len(root.parts)] in ("artifacts", "network")
            or (p.parts[len(root.parts)] == "chats" and p.suffix == ".md")
        )
    }


def from_scratch(root: Path, tmp_path: Path) -> dict[str, bytes]:
    """The vault a first consolidation of `root`'s sessions writes, in a copy of it."""
    fresh = tmp_path / "fresh"
    shutil.rmtree(fresh, ignore_errors=True)
    shutil.copytree(
        root, fresh, ignore=shutil.ignore_patterns(".ccm", "artifacts", "network", "reports")
    )
    for note in fresh.glob("chats/*/*.md"):
        note.unlink()
    ccm(fresh, "consolidate")
    return vault_files(fresh)


@pytest.mark.parametrize(
    "steps",
    [
        pytest.param([("reading-notes", "MORE")], id="a session gains turns"),
        pytest.param([("queue-a", "QUEUE_SQLITE"), ("queue-b", "QUEUE_POSTGRES")], id="reversal"),
        pytest.param(
            [("memo-later", "MEMO_NULLS"), ("memo-earlier", "MEMO_INDEX")],
            id="an older claim arrives after its correction",
        ),
        pytest.param(
            [
                ("queue-a", "QUEUE_SQLITE"),
                ("queue-a", "QUEUE_POSTGRES"),
                ("queue-c", "QUEUE_LATER"),
            ],
            id="a session reverses itself, another agrees",
        ),
        pytest.param(
            [("queue-a", "QUEUE_SQLITE"), ("lose the cache", ""), ("queue-b", "QUEUE_POSTGRES")],
            id="the cache is lost between runs",
        ),
    ],
)
def test_runs_after_changes_leave_the_vault_a_first_run_writes(
    vault: Path, tmp_path: Path, steps: list[tuple[str, str]]
) -> None:
    said = {
        "MORE": turns(
            ("user", "Decision: review cards in the morning.", "2026-03-07T09:00:00Z"),
            ("assistant", "Morning reviews work well.", "2026-03-07T09:00:20Z"),
        ),
        "QUEUE_SQLITE": QUEUE_SQLITE,
        "QUEUE_POSTGRES": QUEUE_POSTGRES,
        "QUEUE_LATER": QUEUE_LATER,
        "MEMO_NULLS": MEMO_NULLS,
        "MEMO_INDEX": MEMO_INDEX,
    }
    ccm(vault, "consolidate")
    for session, text in steps:
        if session == "lose the cache":
            (vault / ".ccm" / "sleep.state").unlink()
            continue
        ingest(vault, tmp_path, session, said[text])
        ccm(vault, "consolidate")
        assert vault_files(vault) == from_scratch(vault, tmp_path), session
    assert consolidate_json(vault)["files_written"] == 0


SAID = (
    "Decision: we use {tool} for the {a} {b}, not {other}, because it is simpler.",
    "Change of plan: switch to {tool} for the {a} {b} instead of {other}.",
    "That fixed it: the {a} {b} works now after the {c} change.",
    "So the root cause was {a} {b} in the {c} module.",
    "Actually, the root cause was {b} {a} in the {c} module.",
    "Confirmed: the {a} {b} runs on {tool} now.",
)
TOOLS = ("Postgres", "SQLite", "Redis", "Kafka")
SUBJECTS = ("ledger", "queue", "cache", "importer", "memo", "backup")


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_appends_leave_the_vault_a_first_run_writes(
    vault: Path, tmp_path: Path, seed: int
) -> None:
    import random

    rng = random.Random(seed)
    ccm(vault, "consolidate")
    day = 10
    for step in range(4):
        for _ in range(rng.randint(1, 3)):
            day += 1
            tool, other = rng.sample(TOOLS, 2)
            a, b, c = rng.sample(SUBJECTS, 3)
            text = rng.choice(SAID).format(tool=tool, other=other, a=a, b=b, c=c)
            said = turns(
                ("user", f"Looking at the {a} {b} again.", f"2026-04-{day:02d}T09:00:00Z"),
                ("assistant", f"What about the {a} {b}?", f"2026-04-{day:02d}T09:00:30Z"),
                ("user", text, f"2026-04-{day:02d}T09:01:00Z"),
                ("assistant", "Noted.", f"2026-04-{day:02d}T09:01:30Z"),
            )
            ingest(vault, tmp_path, rng.choice(["one", "two", "three", "reading-notes"]), said)
        ccm(vault, "consolidate")
        assert vault_files(vault) == from_scratch(vault, tmp_path), step


def test_an_artifact_whose_conclusion_changed_kind_moves_unless_you_edited_it(
    vault: Path, tmp_path: Path
) -> None:
    old = "artifacts/insight/test-myself-instead-rereading.md"
    more = turns(
        ("user", "Decision: review cards in the morning.", "2026-03-07T09:00:00Z"),
        ("assistant", "Morning reviews work well.", "2026-03-07T09:00:20Z"),
    )
    edited = tmp_path / "edited"
    shutil.copytree(vault, edited)
    for root in (vault, edited):
        ccm(root, "consolidate")
        assert frontmatter(root / old)["id"] == "reading-notes/seg_1"
    with (edited / old).open("a", encoding="utf-8") as note:
        note.write("My own words.\n")

    reports = []
    for root in (vault, edited):
        ingest(root, tmp_path, "reading-notes", more)
        reports.append(consolidate_json(root))

    assert not (vault / old).exists()
    assert reports[0]["artifacts"]["removed"] == [
        {
            "path": old,
            "action": "removed",
            "id": "reading-notes/seg_1",
            "detail": "its conclusion is gone",
        }
    ]
    assert "My own words." in (edited / old).read_text()
    assert reports[1]["artifacts"]["removed"] == []
    for root in (vault, edited):
        assert (
            frontmatter(root / "artifacts/decision/review-cards-morning.md")["type"] == "decision"
        )


# ---------------------------------------------------------------- export, graph, JSON


def test_export_at_layer_1_holds_no_path_email_or_key(vault: Path, tmp_path: Path) -> None:
    ccm(vault, "consolidate")
    private = "\n".join(p.read_text() for p in (vault / "artifacts").rglob("*.md"))
    assert EMAIL.search(private) or PATH.search(private)  # the vault itself holds them
    shared = tmp_path / "shared"

    result = json.loads(ccm(vault, "export", "--layer", "1", str(shared), "--json").stdout)

    assert result["notes"] == 4 and result["left_out"] == 2
    files = [p for p in shared.rglob("*") if p.is_file()]
    assert any(p.suffix == ".md" and p.parent.name == "decision" for p in files)
    for path in files:
        text = path.read_text(encoding="utf-8")
        assert not EMAIL.search(text) and not PATH.search(text), path
        assert "sk-test" not in text and "EXAMPLE0000" not in text, path
        assert "ledger-sync" not in text and "chats/" not in text, path  # no session name
    assert not (shared / CRON_NOTE).exists()  # layer 0: it names a path
    for path in shared.rglob("*.md"):
        assert frontmatter(path)["layer"] >= 1 if path.name != "index.md" else True
    assert broken_links(shared) == []
    # exporting again at a higher layer replaces the earlier export
    ccm(vault, "export", "--layer", "2", str(shared))
    left = sorted(p.relative_to(shared).as_posix() for p in shared.rglob("*.md"))
    assert left == ["artifacts/insight/test-myself-instead-rereading.md", "index.md"]


def test_export_refuses_a_folder_that_is_not_an_export(vault: Path, tmp_path: Path) -> None:
    ccm(vault, "consolidate")
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    result = CliRunner().invoke(main, ["--root", str(vault), "export", str(folder)])
    assert result.exit_code == 1 and "not empty" in result.stderr
    assert (folder / "notes.txt").read_text() == "mine"


def test_graph_commands_print_json_that_parses(vault: Path) -> None:
    consolidate_json(vault)

    top = json.loads(ccm(vault, "graph", "--top", "2", "--json").stdout)
    assert top["nodes"] == 6 and len(top["top"]) == 2
    assert top["top"][0]["confidence"] >= top["top"][1]["confidence"]
    explained = json.loads(
        ccm(vault, "graph", "explain", "keep-simple-daily-cron-job-02-30", "--json").stdout
    )
    assert explained["id"] == "deploy-checklist/seg_2" and explained["status"] == "superseded"
    exported = json.loads(ccm(vault, "graph", "export", "--format", "json").stdout)
    assert len(exported["nodes"]) == 6 and len(exported["edges"]) == 2
    graphml = tmp = vault / "graph.graphml"
    ccm(vault, "graph", "export", "--format", "graphml", "--output", str(tmp))
    tree = ET.parse(graphml)
    ns = "{http://graphml.graphdrawing.org/xmlns}"
    assert len(tree.findall(f".//{ns}node")) == 6 and len(tree.findall(f".//{ns}edge")) == 2
    text = ccm(vault, "graph").stdout
    assert "6 conclusions, 2 edges" in text and "<- supersedes deploy-checklist/seg_3" in text


def test_graph_before_any_consolidation_says_what_to_run(vault: Path) -> None:
    result = CliRunner().invoke(main, ["--root", str(vault), "graph"])
    assert result.exit_code == 1
    assert "run `ccm consolidate` first" in result.stderr


def test_a_second_run_on_the_same_day_adds_to_its_report(vault: Path, tmp_path: Path) -> None:
    with freeze_time("2026-03-10 03:00:00"):
        ccm(vault, "consolidate")
    with freeze_time("2026-03-10 15:30:00"):
        ingest(vault, tmp_path, "ledger-laptop", RESTATED)
        report = consolidate_json(vault)
    assert report["report"] == "reports/2026-03-10.md"
    text = (vault / "reports" / "2026-03-10.md").read_text(encoding="utf-8")
    assert text.count("# Sleep report 2026-03-10") == 1
    assert "## Run at 2026-03-10T03:00:00Z" in text and "## Run at 2026-03-10T15:30:00Z" in text
    assert yaml.safe_load(json.dumps(report))["sessions"]["consolidated"] == ["ledger-laptop"]


def test_the_scheduling_files_run_consolidate() -> None:
    jobs = Path(__file__).parent.parent / "jobs"
    cron = (jobs / "ccm-consolidate.cron").read_text()
    assert re.search(r"^\d+ \d+ \* \* \* .*ccm consolidate", cron, re.MULTILINE)
    service = (jobs / "ccm-consolidate.service").read_text()
    timer = (jobs / "ccm-consolidate.timer").read_text()
    assert "ccm consolidate" in service and "OnCalendar=" in timer and "Persistent=true" in timer
    plist = (jobs / "com.ccm.consolidate.plist").read_text()
    ET.fromstring(plist.encode())
    assert "<string>consolidate</string>" in plist and "StartCalendarInterval" in plist


def test_one_consolidation_at_a_time(vault: Path) -> None:
    from ccm.sleep.vault import run_lock
    from ccm.store import Store

    with run_lock(Store(vault)):
        result = CliRunner().invoke(main, ["--root", str(vault), "consolidate"])
    assert result.exit_code == 1 and "another ccm consolidate is running" in result.stderr
    assert not (vault / "artifacts").exists()
    ccm(vault, "consolidate")  # free again
    assert (vault / SQLITE_NOTE).exists()
    # what the run raises is its own, not the lock's refusal
    with pytest.raises(BlockingIOError, match="the run's own"), run_lock(Store(vault)):
        raise BlockingIOError("the run's own")


def test_export_replaces_the_names_of_people_you_list(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "config.yaml").write_text("sleep:\n  private_names: [Ada Lovelace]\n")
    said = turns(
        ("user", "Who should look at the importer before the release?", "2026-03-05T10:00:00Z"),
        ("assistant", "Someone who knows the bank formats well.", "2026-03-05T10:00:30Z"),
        ("user", "Decision: we ask Ada Lovelace to review the importer.", "2026-03-05T10:01:00Z"),
        ("assistant", "Good, Ada knows those formats best.", "2026-03-05T10:01:30Z"),
    )
    ingest(root, tmp_path, "review", said)
    ccm(root, "consolidate")
    assert (
        "Ada Lovelace"
        in (root / "artifacts/decision/ask-ada-lovelace-review-importer.md").read_text()
    )
    shared = tmp_path / "shared"

    ccm(root, "export", "--layer", "1", str(shared))

    [note] = (shared / "artifacts" / "decision").glob("*.md")
    assert note.name == "ask-name-review-importer.md"
    text = note.read_text(encoding="utf-8")
    assert "we ask <name> to review the importer" in text
    for path in shared.rglob("*"):
        if path.is_file():
            assert "Ada" not in path.read_text(encoding="utf-8") and "Ada" not in path.name


def test_an_agents_report_of_a_fix_is_written_down_while_its_segment_stays_open(
    tmp_path: Path,
) -> None:
    """Written for this test: the agent reports the fix ("All green: ..."), the user never
    confirms it; the segment stays open (a fix concludes when its user confirms it), and
    the vault still keeps what was reported done."""
    root = tmp_path / "root"
    said = turns(
        (
            "user",
            "the invoice export crashes on accented names, can you fix it?",
            "2026-03-05T10:00:00Z",
        ),
        (
            "assistant",
            "The CSV writer used latin-1; I switched it to utf-8.",
            "2026-03-05T10:01:00Z",
        ),
        ("user", "ok run the export tests", "2026-03-05T10:02:00Z"),
        (
            "assistant",
            "All green: 14 export tests pass, accented names included (Zoë, Łukasz).",
            "2026-03-05T10:03:00Z",
        ),
    )
    ingest(root, tmp_path, "export", said)
    manifest = yaml.safe_load((root / "chats" / "export" / "manifest.yaml").read_text())
    [segment] = manifest["segments"]
    assert (segment["status"], segment["conclusion"]["turn"]) == ("open", 4)
    ccm(root, "consolidate")
    fields = artifact_of(root, "export/seg_1")
    assert fields["type"] == "resolution"
    assert broken_links(root) == []


# written for this test: a fix confirmed in the user's own words, after the agent's
# reading of the run that proves it (a tool's output between)
FLAKY_FIX = turns(
    (
        "user",
        "the checkout e2e test fails about one run in five on CI, never locally. find out why",
        "2026-05-04T09:00:00Z",
    ),
    (
        "assistant",
        "Two Playwright workers share the seeded basket: each test empties it in its teardown, "
        "so a slow worker sees the other's empty basket. I gave every worker its own basket "
        "fixture keyed by the worker index.",
        "2026-05-04T09:20:00Z",
    ),
    ("tool", "$ npx playwright test --repeat-each 20\n40 passed (3.1m)", "2026-05-04T09:24:00Z"),
    (
        "assistant",
        "Forty runs over two workers, all green: the per-worker basket fixture holds.",
        "2026-05-04T09:25:00Z",
    ),
    (
        "user",
        "twenty repeats and zero failures on my side as well. that's the checkout flake fixed",
        "2026-05-04T09:40:00Z",
    ),
)


def consolidated_note(tmp_path: Path, session: str, text: str) -> str:
    """The body of the one artifact a session of `text` gets, from its title on."""
    root = tmp_path / "root"
    ingest(root, tmp_path, session, text)
    consolidate_json(root)
    [path] = [p for p in (root / "artifacts").rglob("*.md") if f"{session}/" in p.read_text()]
    return path.read_text().split("\n# ", 1)[1]


def test_a_fix_confirmed_in_the_users_words_is_noted_with_the_answer_it_follows(
    tmp_path: Path,
) -> None:
    body = consolidated_note(tmp_path, "flaky", FLAKY_FIX)
    lead = body.split("\n\n")[1]  # the paragraph under the title
    assert "twenty repeats and zero failures" in lead
    assert "per-worker basket fixture holds." in lead  # what the fix was, from the answer
    evidence = body.split("## Evidence", 1)[1]
    assert evidence.index("Turn 4 · assistant") < evidence.index("Turn 5 · user")


# written for this test: a proposal of four sentences, accepted in two words
PROPOSAL_ACCEPTED = turns(
    (
        "user",
        "the nightly export keeps timing out, what are our options for the partner feed",
        "2026-05-06T08:00:00Z",
    ),
    (
        "assistant",
        "Split the export by region and run the four parts in parallel. Each part stays under "
        "ten minutes on last week's volume. The partner reads the files by prefix, so nothing "
        "changes on their side. The old single file goes away after a two-week overlap.",
        "2026-05-06T08:05:00Z",
    ),
    ("user", "ok, go with that", "2026-05-06T08:10:00Z"),
)


def test_an_accepted_proposal_is_noted_with_the_rest_of_what_was_accepted(
    tmp_path: Path,
) -> None:
    lead = consolidated_note(tmp_path, "feed", PROPOSAL_ACCEPTED).split("\n\n")[1]
    assert lead.startswith("Split the export by region")
    assert "The partner reads the files by prefix, so nothing changes on their side." in lead
    assert "The old single file goes away after a two-week overlap." in lead


# written for this test: a request, and an answer with the specifics
ROTA = (
    (
        "user",
        "can you split the watering rota for the summer between the plot holders",
        "2026-05-07T19:00:00Z",
    ),
    (
        "assistant",
        "That's 12 households for 14 weeks, so two people get a second week. I've given the "
        "second weeks to Ann and Bo for now; swap if others offer.",
        "2026-05-07T19:02:00Z",
    ),
)


@pytest.mark.parametrize(
    "reply",
    [
        # the statement goes on with the answer it accepts ("... \u2014 That's 12 ...")
        "lovely, that's the rota sorted then! I'll print it first thing tomorrow \U0001f64c",
        # the user's own words: the answer follows them, and the summary says it too
        "lovely, that's the rota sorted then! I'll print it tomorrow and pin it up in the shed",
    ],
)
def test_what_the_lead_says_of_the_answer_is_not_said_twice(tmp_path: Path, reply: str) -> None:
    text = turns(*ROTA, ("user", reply, "2026-05-07T19:05:00Z"))
    lead = consolidated_note(tmp_path, "rota", text).split("\n\n")[1]
    assert lead.startswith("lovely, that's the rota sorted then!")
    assert lead.count("so two people get a second week") == 1
