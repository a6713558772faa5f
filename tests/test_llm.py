"""The optional model (`ccm.llm`): the real `anthropic` client against the local fake of
the Messages API on 127.0.0.1 (`tests/fakeapi.py`), never the internet."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import fastjsonschema
import pytest

from ccm import llm
from ccm.engine.health import summary as offline_summary
from ccm.store import Store
from tests.fakeapi import FakeAnthropic, Reply
from tests.helpers import ccm

KEY = "sk-ant-test-0123456789-never-written"
CHAT = [
    ("user", "We're moving the billing service from Heroku to Fly.io this week."),
    (
        "assistant",
        "Good. Start with the Postgres database: Fly's managed Postgres, or keep Heroku's?",
    ),
    ("user", "Important: we must stay on Postgres 15, the reporting jobs break on 16."),
    ("assistant", "Noted: Postgres 15. I'll pin the image to postgres:15.6 in fly.toml."),
    ("user", "The first deploy failed: the release command timed out after 60s."),
    (
        "assistant",
        "The migration takes 90s on the full data; raising release_command_timeout to 300.",
    ),
    ("user", "That worked, deploy is green. Next: move the cron jobs."),
]


def _answer(**changes: list[str]) -> dict[str, list[str]]:
    written = {name: [f"{name} as the model wrote it"] for name in llm.HANDOVER_SECTIONS}
    return written | changes


@pytest.fixture
def chat(ccm_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Store:
    source = tmp_path / "chat.jsonl"
    source.write_text(
        "".join(
            json.dumps({"role": role, "content": text, "ts": 1_767_000_000 + 60 * n}) + "\n"
            for n, (role, text) in enumerate(CHAT)
        )
    )
    ccm_home.mkdir(parents=True, exist_ok=True)
    (ccm_home / "config.yaml").write_text("llm: {provider: anthropic, model: claude-test}\n")
    assert ccm("ingest", str(source), "--session", "fly").exit_code == 0
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    return Store(ccm_home)


def _offline(store: Store) -> dict[str, list[str]]:
    from ccm import derive

    derived = derive.update(store, "fly")
    return offline_summary(derived.state, derived.tiers, derived.events)


def _everything_written(root: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file())


def _root_of(tmp_path: Path, name: str, config: str, **sessions: str) -> Path:
    """A knowledge root `name` with `config` and each of `sessions` (JSON lines) ingested."""
    root = tmp_path / name
    root.mkdir()
    (root / "config.yaml").write_text(config)
    for session, text in sessions.items():
        source = tmp_path / f"{name}-{session}.jsonl"
        source.write_text(text, encoding="utf-8")
        assert ccm("--root", str(root), "ingest", str(source), "--session", session).exit_code == 0
    return root


def _nothing_listens() -> str:
    """The address of a port on 127.0.0.1 that nothing listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}"


def test_the_sections_are_those_of_the_offline_handover(chat: Store) -> None:
    """The offline handover has the shape a model's must have, so either stands for the
    other (`llm.handover` returns the one or the other)."""
    offline = _offline(chat)
    assert tuple(offline) == llm.HANDOVER_SECTIONS
    fastjsonschema.validate(llm.HANDOVER_SCHEMA, offline)


def test_the_model_writes_the_handover_and_a_second_run_asks_nothing(
    chat: Store, fake: FakeAnthropic, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.url)
    written = _answer(key_decisions=["Stay on Postgres 15 (reporting jobs break on 16)."])
    fake.push(Reply.tool_use("handover", written))
    first = ccm("summary", "fly", "--json")
    assert first.exit_code == 0, first.output
    assert json.loads(first.stdout) == written
    assert "model: claude-test wrote the handover; 1 request(s), 0 from the cache" in first.stderr
    [asked] = fake.messages()
    assert asked["model"] == "claude-test"
    assert asked["tool_choice"] == {"type": "tool", "name": "handover"}
    assert asked["tools"][0]["input_schema"] == llm.HANDOVER_SCHEMA
    prompt = asked["messages"][0]["content"]
    assert "Postgres 15" in prompt and "release_command_timeout" in prompt  # the memory
    sent = fake.received[-1].headers  # SDK 2.13 sends the key as a bearer token
    assert sent.get("x-api-key") == KEY or sent["authorization"] == f"Bearer {KEY}"
    # the same inputs again: the answer comes from the cache, no request is made
    again = ccm("summary", "fly", "--json")
    assert again.exit_code == 0 and json.loads(again.stdout) == written
    assert len(fake.messages()) == 1 and "0 request(s), 1 from the cache" in again.stderr
    # the key is nowhere in the root
    assert KEY.encode() not in _everything_written(chat.root)
    # --no-llm: the offline handover, and no request
    offline = ccm("summary", "fly", "--json", "--no-llm")
    assert json.loads(offline.stdout) == _offline(chat) and len(fake.messages()) == 1


def test_an_answer_that_does_not_validate_is_asked_again_once(
    chat: Store, fake: FakeAnthropic, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.url)
    incomplete = {"task_context": ["moving billing to Fly.io"]}  # six sections missing
    fake.push(Reply.tool_use("handover", incomplete), Reply.tool_use("handover", _answer()))
    fixed = ccm("summary", "fly", "--json")
    assert fixed.exit_code == 0 and json.loads(fixed.stdout) == _answer()
    first, second = fake.messages()
    assert second["messages"][:1] == first["messages"]
    assert second["messages"][1]["content"][0]["input"] == incomplete
    [result] = second["messages"][2]["content"]
    assert result["type"] == "tool_result" and result["is_error"] is True
    assert "does not match the schema" in result["content"]
    # wrong twice: the offline handover stands, and stderr says why
    (chat.root / "config.yaml").write_text("llm: {provider: anthropic, model: claude-other}\n")
    fake.push(Reply.tool_use("handover", incomplete), Reply.text("I'd rather not."))
    kept = ccm("summary", "fly", "--json")
    assert kept.exit_code == 0 and json.loads(kept.stdout) == _offline(chat)
    assert "kept offline: handover: the answer used no tool, twice" in kept.stderr
    assert len(fake.messages()) == 4


def test_429_and_529_are_retried_honouring_retry_after(
    chat: Store, fake: FakeAnthropic, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.url)
    fake.push(
        Reply.error(429, "rate_limit_error", "slow down", {"retry-after-ms": "30"}),
        Reply.error(529, "overloaded_error", "overloaded", {"retry-after-ms": "30"}),
        Reply.tool_use("handover", _answer()),
    )
    with llm.Model(Store(chat.root)) as model:
        written, source = llm.handover(model, _offline(chat), "memory")
    assert source == "model" and written == _answer()
    assert len(fake.messages()) == 3  # two retries by the SDK, one request of the run
    assert model.report()["requests"] == 1 and model.report()["answered"] == 1


def test_an_api_that_refuses_or_cannot_be_reached_leaves_the_offline_handover(
    chat: Store, fake: FakeAnthropic, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.url)
    fake.push(Reply.error(401, "authentication_error", "invalid x-api-key"))
    refused = ccm("summary", "fly", "--json")
    assert refused.exit_code == 0 and json.loads(refused.stdout) == _offline(chat)
    assert "the API answered 401 (authentication_error)" in refused.stderr
    monkeypatch.setenv("ANTHROPIC_BASE_URL", _nothing_listens())
    monkeypatch.setattr(llm, "MAX_RETRIES", 0)
    down = ccm("summary", "fly")
    assert down.exit_code == 0, down.output
    assert "## Key decisions" in down.stdout
    assert "the API could not be reached (APIConnectionError)" in down.stderr
    assert KEY.encode() not in _everything_written(chat.root)


def test_max_calls_per_run_is_a_hard_cap_and_asks_run_side_by_side(
    chat: Store, fake: FakeAnthropic, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.url)
    (chat.root / "config.yaml").write_text(
        "llm: {provider: anthropic, max_calls_per_run: 2, concurrency: 2}\n"
    )
    schema: dict[str, Any] = {
        "type": "object",
        "required": ["title"],
        "properties": {"title": {"type": "string"}},
    }
    asks = [llm.Ask("title", "Title it.", f"segment {n}", schema) for n in range(3)]
    fake.push(*(Reply.tool_use("title", {"title": f"Title {n}"}) for n in range(3)))
    with llm.Model(Store(chat.root)) as model:
        answers = model.ask_all(asks)
    assert sorted(a["title"] for a in answers if a is not None) == ["Title 0", "Title 1"]
    assert answers.count(None) == 1 and len(fake.messages()) == 2
    report = model.report()
    assert report["requests"] == 2
    assert report["offline"] == ["title: llm.max_calls_per_run (2) reached"]
    assert report["input_tokens"] > 0 and report["output_tokens"] > 0


def test_the_model_is_off_unless_configured_with_a_key(
    chat: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert llm.Model(chat).on
    assert llm.Model(chat, enabled=False).off == "--no-llm"
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    assert llm.Model(chat).off == "no API key: set ANTHROPIC_API_KEY in the environment"
    (chat.root / "config.yaml").write_text("recall: {semantic: false}\n")
    assert llm.Model(Store(chat.root)).off == "off (llm.provider: none)"
    result = ccm("summary", "fly", "--llm")
    assert (
        result.exit_code == 0
        and "model: offline (--llm, but config.yaml sets no llm.provider" in (result.stderr)
    )
    bad = Store(chat.root)
    (chat.root / "config.yaml").write_text("llm: {api_key: sk-oops}\n")
    refused = ccm("summary", "fly")
    assert refused.exit_code != 0 and "api_key" in refused.output
    assert bad.root.exists()


def test_consolidate_with_the_model_states_titles_and_places_each_conclusion(
    tmp_path: Path, fake: FakeAnthropic, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.test_consolidate import QUEUE_SQLITE, artifact_of, broken_links

    config = "llm: {provider: anthropic, model: claude-test}\n"
    root = _root_of(tmp_path, "root", config, queue=QUEUE_SQLITE)
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.url)
    stated = {
        "statement": "The importer's job queue is stored in SQLite, not Postgres, because "
        "the importer has a single writer.",
        "title": "SQLite for the importer's job queue",
        "kind": "decision",
        "layer": 1,
    }
    fake.push(Reply.text("Sure!"), Reply.tool_use("conclusion", stated))  # asked again once
    done = ccm("--root", str(root), "consolidate", "--json")
    assert done.exit_code == 0, done.output
    report = json.loads(done.stdout)
    assert report["llm"]["distilled"] == 1 and report["llm"]["requests"] == 2
    assert report["llm"]["input_tokens"] > 0 and report["llm"]["offline"] == []
    first = fake.messages()[0]
    assert first["tool_choice"] == {"type": "tool", "name": "conclusion"}
    assert "single writer" in first["messages"][0]["content"]  # the segment's turns
    note = root / "artifacts/decision/sqlite-importers-job-queue.md"  # its slug
    text = note.read_text(encoding="utf-8")
    assert "# SQLite for the importer's job queue" in text
    assert stated["statement"] in text
    assert "Decision: we use SQLite for the job queue" in text  # the evidence, verbatim
    fields = artifact_of(root, "queue/seg_1")
    assert (fields["type"], fields["layer"]) == ("decision", 1)
    assert broken_links(root) == []
    report_md = (root / report["report"]).read_text(encoding="utf-8")
    assert (
        "The model (claude-test) stated 1 conclusion(s) and settled 0 conflict(s): 2 request(s)"
        in report_md
    )
    # the session read again: the answer comes from the cache, no request is made
    again = ccm("--root", str(root), "consolidate", "--json", "--session", "queue")
    assert again.exit_code == 0 and len(fake.messages()) == 2
    assert json.loads(again.stdout)["llm"]["cached"] == 1
    assert note.read_text(encoding="utf-8") == text
    assert KEY.encode() not in _everything_written(root)


def test_consolidate_with_the_api_down_writes_the_offline_vault_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.test_consolidate import QUEUE_SQLITE

    def vault_of(name: str, config: str) -> tuple[dict[str, bytes], Any]:
        root = _root_of(tmp_path, name, config, queue=QUEUE_SQLITE)
        done = ccm("--root", str(root), "consolidate")
        assert done.exit_code == 0, done.output
        files = {
            p.relative_to(root).as_posix(): p.read_bytes()
            for p in sorted(root.rglob("*.md"))
            if ".ccm" not in p.parts and "reports" not in p.parts
        }
        return files, done

    offline, _ = vault_of("offline", "")
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", _nothing_listens())
    monkeypatch.setattr(llm, "MAX_RETRIES", 0)
    down, done = vault_of("down", "llm: {provider: anthropic}\n")
    assert down == offline
    assert "model: claude-haiku-4-5 stated 0 conclusion(s), settled 0 conflict(s)" in done.stderr
    assert "kept offline: conclusion: the API could not be reached" in done.stderr
    [report] = (tmp_path / "down" / "reports").glob("*.md")  # the sleep report says why too
    assert "kept their offline form (conclusion: the API could not be reached" in (
        report.read_text(encoding="utf-8")
    )


def test_the_model_settles_a_conflict_and_the_vault_follows_its_word(
    tmp_path: Path, fake: FakeAnthropic, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.test_consolidate import QUEUE_POSTGRES, QUEUE_SQLITE, artifact_of

    config = "llm: {provider: anthropic, model: claude-test}\n"
    sessions = {"queue-a": QUEUE_SQLITE, "queue-b": QUEUE_POSTGRES}
    root = _root_of(tmp_path, "root", config, **sessions)
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.url)
    # the conclusions keep the detector's words (the model's answers to them are not
    # tools), then the one conflict: offline, the later decision would win
    fake.push(*(Reply.text("no") for _ in range(4)))
    reason = "the importer still has one writer per machine, so SQLite still fits"
    fake.push(
        Reply.tool_use("conflict", {"matter": "truth", "stands": "earlier", "reason": reason})
    )
    done = ccm("--root", str(root), "consolidate", "--json")
    assert done.exit_code == 0, done.output
    report = json.loads(done.stdout)
    assert (report["llm"]["distilled"], report["llm"]["judged"]) == (0, 1)
    asked = fake.messages()[-1]
    assert asked["tool_choice"] == {"type": "tool", "name": "conflict"}
    prompt = asked["messages"][0]["content"]
    assert "Earlier (decision" in prompt and "Later (decision" in prompt
    [conflict] = report["conflicts"]["new"]
    assert (conflict["winner"], conflict["loser"], conflict["rule"]) == (
        "queue-a/seg_1",
        "queue-b/seg_1",
        "truth",
    )
    assert reason in conflict["reason"]
    old, new = artifact_of(root, "queue-a/seg_1"), artifact_of(root, "queue-b/seg_1")
    assert (old["status"], new["status"]) == ("active", "contradicted")
    # --no-llm: the offline rule again (the later decision stands)
    offline = json.loads(ccm("--root", str(root), "consolidate", "--json", "--no-llm").stdout)
    assert "llm" not in offline
    assert (
        artifact_of(root, "queue-a/seg_1")["status"],
        artifact_of(root, "queue-b/seg_1")["status"],
    ) == (
        "superseded",
        "active",
    )


def test_compact_with_the_model_records_its_summaries_as_events(
    tmp_path: Path, fake: FakeAnthropic, monkeypatch: pytest.MonkeyPatch
) -> None:
    import yaml

    sample = Path(__file__).parents[1] / "sample_knowledge" / "sources"
    root = tmp_path / "root"
    assert ccm("--root", str(root), "ingest", str(sample)).exit_code == 0
    (root / "config.yaml").write_text(
        "lifecycle: {fresh_turns: 2, stale_turns: 4}\n"
        "llm: {provider: anthropic, model: claude-test, concurrency: 1}\n"
    )
    assert ccm("--root", str(root), "rebuild").exit_code == 0
    plan = json.loads(
        ccm("--root", str(root), "compact", "ledger-sync", "--dry-run", "--json").stdout
    )
    chosen = plan["summarized"]
    assert len(chosen) >= 2 and fake.messages() == []  # a dry run asks nothing
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.url)
    written = [
        f"Model summary {n}: amounts are integer cents in the ledger sync."
        for n in range(len(chosen))
    ]
    fake.push(*(Reply.tool_use("summary", {"summary": text}) for text in written[:-1]))
    fake.push(Reply.error(400, "invalid_request_error", "too long"))  # the last keeps ccm's
    done = ccm("--root", str(root), "compact", "ledger-sync", "--json")
    assert done.exit_code == 0, done.output
    assert f"model: claude-test wrote {len(chosen) - 1} of {len(chosen)} summaries" in done.stderr
    assert "the API answered 400 (invalid_request_error)" in done.stderr
    asked = fake.messages()[0]
    assert asked["tool_choice"] == {"type": "tool", "name": "summary"}
    assert "<turns>" in asked["messages"][0]["content"]
    events = [
        json.loads(line)
        for line in (root / "chats" / "ledger-sync" / "events.jsonl").read_text().splitlines()
    ]
    updates = [e for e in events if e["kind"] == "update"]
    assert [(e["who"], e["args"]["targets"], e["args"]["text"]) for e in updates] == [
        ("compaction", [sid], text) for sid, text in zip(chosen[:-1], written[:-1], strict=True)
    ]
    manifest = yaml.safe_load((root / "chats" / "ledger-sync" / "manifest.yaml").read_text())
    summaries = {s["id"]: s["summary"] for s in manifest["segments"]}
    assert [summaries[sid] for sid in chosen[:-1]] == written[:-1]
    assert summaries[chosen[-1]] not in written


def test_bench_scenarios_llm_consolidates_the_vault_with_the_model(
    tmp_path: Path, fake: FakeAnthropic, monkeypatch: pytest.MonkeyPatch, ccm_home: Path
) -> None:
    from tests.test_bench_scenarios import write_scenario

    folder = write_scenario(tmp_path / "scenarios")
    refused = ccm("bench", "scenarios", str(folder), "--llm")
    assert refused.exit_code == 2 and "--llm: the model is off" in refused.output
    ccm_home.mkdir(parents=True, exist_ok=True)
    (ccm_home / "config.yaml").write_text("llm: {provider: anthropic, model: claude-test}\n")
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.url)
    title = {
        "statement": "The export writes integer cents with csv.writer, no pandas.",
        "title": "CSV export with csv.writer",
        "kind": "decision",
        "layer": 1,
    }
    fake.push(*(Reply.tool_use("conclusion", title) for _ in range(20)))
    result = ccm("bench", "scenarios", str(folder), "--json", "--llm")
    assert result.exit_code == 0, result.output
    done = json.loads(result.stdout)["vault"]["llm"]
    assert done["model"] == "claude-test" and done["distilled"] >= 1
    assert done["requests"] == len(fake.messages()) >= 1
    assert all(m["tool_choice"]["name"] in ("conclusion", "conflict") for m in fake.messages())


def test_a_request_that_times_out_is_retried_and_a_run_that_never_gets_an_answer_goes_on(
    chat: Store, fake: FakeAnthropic, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.url)
    monkeypatch.setattr(llm, "TIMEOUT", 0.3)
    monkeypatch.setattr(llm, "MAX_RETRIES", 1)
    fake.push(Reply.text("too late", delay=1.0), Reply.tool_use("handover", _answer()))
    with llm.Model(Store(chat.root)) as model:
        written, source = llm.handover(model, _offline(chat), "memory")
    assert (written, source) == (_answer(), "model")
    assert len(fake.received) == 2  # the SDK gave up on the first and asked again
    fake.push(Reply.text("too late", delay=1.0), Reply.text("too late", delay=1.0))
    (chat.root / "config.yaml").write_text("llm: {provider: anthropic, model: claude-slow}\n")
    with llm.Model(Store(chat.root)) as model:
        kept, source = llm.handover(model, _offline(chat), "memory")
        assert model.report()["offline"] == [
            "handover: the API could not be reached (APITimeoutError)"
        ]
    assert (kept, source) == (_offline(chat), "offline")


def test_a_configured_model_without_its_key_says_so_and_the_run_goes_on(
    chat: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    done = ccm("consolidate")
    assert done.exit_code == 0, done.output
    assert "model: offline (no API key: set ANTHROPIC_API_KEY in the environment)" in done.stderr
