"""`ccm mcp` through the SDK's real client over stdio: the server runs as a subprocess
(``python -m ccm --root R mcp``) on a root built from the fixtures."""

from __future__ import annotations

import json
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner
from mcp import ClientSession, StdioServerParameters, stdio_client

from ccm.cli import main

SAMPLE = Path(__file__).parent.parent / "sample_knowledge" / "sources"
CLAUDE = Path(__file__).parent / "fixtures" / "claude-code"
CLAUDE_SESSION = "1af7fc5e-8455-4414-9ccd-011d40f70b2a"

TOOLS = {
    "sessions",
    "context",
    "recall",
    "expand",
    "memory_command",
    "pin",
    "unpin",
    "focus",
    "archive",
    "note",
    "summary",
    "graph_explain",
    "get_context_health",
    "trigger_compaction",
    "mark_critical",
    "get_critical_context",
}


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "root"
    for source in (str(SAMPLE), str(CLAUDE / f"{CLAUDE_SESSION}.jsonl")):
        result = CliRunner().invoke(main, ["--root", str(path), "ingest", source])
        assert result.exit_code == 0, result.output
    return path


Client = Callable[[ClientSession], Awaitable[Any]]


def talk(root: Path, body: Client, *extra: str) -> Any:
    """Start `ccm mcp` on `root`, initialize a client session and run `body` in it."""

    async def run() -> Any:
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "ccm", "--root", str(root), "mcp", *extra]
        )
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            return await body(session)

    return anyio.run(run)


async def call(client: ClientSession, name: str, /, **arguments: Any) -> Any:
    """A tool's structured answer; fails the test on a tool error."""
    result = await client.call_tool(name, arguments)
    assert not result.is_error, result.content
    # the text content says the same as the structured one
    assert json.loads(result.content[0].text) == result.structured_content
    return result.structured_content


async def error(client: ClientSession, name: str, /, **arguments: Any) -> str:
    result = await client.call_tool(name, arguments)
    assert result.is_error, result.structured_content
    return str(result.content[0].text)


def test_tools_are_listed_with_schemas_and_descriptions(root: Path) -> None:
    async def body(session: ClientSession) -> Any:
        return (await session.list_tools()).tools, await session.list_resource_templates()

    tools, templates = talk(root, body)
    assert {t.name for t in tools} == TOOLS
    by_name = {t.name: t for t in tools}
    for tool in tools:
        assert tool.description and len(tool.description) > 30, tool.name
        assert tool.input_schema["type"] == "object"
    context = by_name["context"].input_schema
    assert context["required"] == ["session"]
    assert {"budget", "query"} <= set(context["properties"])
    assert "description" in context["properties"]["query"]
    strategy = by_name["trigger_compaction"].input_schema["properties"]["strategy"]
    assert set(strategy["enum"]) == {"summarize", "selective", "aggressive"}
    assert [t.uri_template for t in templates.resource_templates] == [
        "ccm://session/{session}/manifest"
    ]


def test_reading_tools_answer_from_the_root(root: Path) -> None:
    async def body(session: ClientSession) -> dict[str, Any]:
        answers: dict[str, Any] = {}
        answers["sessions"] = await call(session, "sessions")
        answers["context"] = await call(
            session, "context", session="ledger-sync", budget=800, query="why did we pick SQLite?"
        )
        answers["recall"] = await call(session, "recall", query="SQLite WAL mode", limit=3)
        answers["recall_one"] = await call(
            session, "recall", query="integer cents", session="ledger-sync", budget=500
        )
        answers["segment"] = await call(session, "expand", session="ledger-sync", target="seg_2")
        answers["turn"] = await call(session, "expand", session="ledger-sync", target="turn 3")
        answers["cut"] = await call(
            session, "expand", session="ledger-sync", target="seg_1..seg_5", budget=200
        )
        answers["summary"] = await call(session, "summary", session="ledger-sync")
        answers["health"] = await call(session, "get_context_health", session="ledger-sync")
        answers["critical"] = await call(session, "get_critical_context", session="ledger-sync")
        answers["claude"] = await call(session, "context", session=CLAUDE_SESSION, budget=2000)
        manifest = await session.read_resource("ccm://session/ledger-sync/manifest")
        answers["manifest"] = manifest.contents[0].text
        return answers

    answers = talk(root, body)
    names = {s["session"] for s in answers["sessions"]["sessions"]}
    assert names == {"ledger-sync", "deploy-checklist", "reading-notes", CLAUDE_SESSION}

    context = answers["context"]
    assert context["tokens"] <= 800 and context["query_type"] == "recall"
    assert "integer cents" in context["text"]  # the critical rule, always there
    assert context["blocks"][0]["name"] == "critical"

    assert answers["recall"]["hits"] and len(answers["recall"]["hits"]) <= 3
    assert answers["recall"]["hits"][0]["session"] == "ledger-sync"
    assert all(h["session"] == "ledger-sync" for h in answers["recall_one"]["hits"])
    assert answers["recall_one"]["tokens"] <= 500

    segment = answers["segment"]
    assert segment["turns"] == [5, 8] and segment["more"] == 0
    assert "SQLite" in segment["text"] and segment["event"]["kind"] == "expand"
    assert answers["turn"]["turns"] == [3, 3] and answers["turn"]["event"] is None
    assert answers["turn"]["text"].startswith("[3] user")
    cut = answers["cut"]
    assert cut["tokens"] <= 200 and cut["more"] > 0 and "expand turn" in cut["next"]

    assert len(answers["summary"]) == 7
    assert answers["health"]["session"] == "ledger-sync" and answers["health"]["tokens"] > 0
    critical = answers["critical"]
    assert any("integer cents" in item["text"] for item in critical["items"])
    assert critical["tokens"] == sum(item["tokens"] for item in critical["items"])
    assert answers["claude"]["session"] == CLAUDE_SESSION and answers["claude"]["text"]
    assert answers["manifest"].startswith("session: ledger-sync")
    assert "seg_2" in answers["manifest"]


def test_memory_tools_record_events(root: Path) -> None:
    async def body(session: ClientSession) -> dict[str, Any]:
        s = "ledger-sync"
        return {
            "command": await call(session, "memory_command", session=s, text="ok @pin(seg_1)"),
            "focus": await call(session, "focus", session=s, targets=["seg_2"]),
            "unpin": await call(session, "unpin", session=s, targets=["seg_2"]),
            "archive": await call(session, "archive", session=s, targets=["seg_3"]),
            "note": await call(session, "note", session=s, text="the importer reads CSV only"),
            "mark": await call(session, "mark_critical", session=s, text="never push to main"),
            "critical": await call(session, "get_critical_context", session=s),
            "plan": await call(session, "trigger_compaction", session=s, dry_run=True),
            "compacted": await call(
                session, "trigger_compaction", session=s, strategy="aggressive"
            ),
        }

    answers = talk(root, body)
    (pinned,) = answers["command"]["outcomes"]
    assert pinned["ok"] and pinned["event"]["kind"] == "pin"
    assert pinned["event"]["who"] == "model" and pinned["event"]["args"]["targets"] == ["seg_1"]
    assert answers["focus"]["event"]["kind"] == "focus"
    assert answers["archive"]["event"]["args"]["targets"] == ["seg_3"]
    assert any(i["text"] == "never push to main" for i in answers["critical"]["items"])
    assert answers["plan"]["dry_run"] is True and answers["compacted"]["dry_run"] is False

    listed = CliRunner().invoke(main, ["--root", str(root), "events", "ledger-sync", "--json"])
    kinds = [e["kind"] for e in json.loads(listed.output)]
    # the dry run recorded nothing; the real compaction did
    assert kinds[:6] == ["pin", "focus", "unpin", "archive", "note", "critical"]
    assert set(kinds[6:]) <= {"compress", "archive"} and kinds[6:]


def test_bad_arguments_are_tool_errors_that_say_what_to_pass(root: Path) -> None:
    async def body(session: ClientSession) -> dict[str, Any]:
        found = {
            "unknown": await error(session, "context", session="nope"),
            "escape": await error(session, "summary", session="../etc"),
            "budget": await error(session, "context", session="ledger-sync", budget=10),
            "segment": await error(session, "pin", session="ledger-sync", targets=["seg_99"]),
            "turn": await error(session, "expand", session="ledger-sync", target="turn 999"),
            "topic": await error(session, "expand", session="ledger-sync", target="zebra quux"),
            "date": await error(session, "recall", query="sqlite", since="last week"),
            "no_command": await error(session, "memory_command", session="ledger-sync", text="hi"),
            "strategy": await error(
                session, "trigger_compaction", session="ledger-sync", strategy="all"
            ),
            "graph": await error(session, "graph_explain", id="ledger-sync/seg_1"),
        }
        try:
            await session.read_resource("ccm://session/nope/manifest")
        except Exception as exc:  # the SDK raises its protocol error
            found["resource"] = str(exc)
        # the server is still there, and answers
        found["after"] = await call(session, "sessions")
        return found

    found = talk(root, body)
    assert "no session 'nope'" in found["unknown"] and "ccm sessions" in found["unknown"]
    assert "invalid session id" in found["escape"]
    assert "pass at least 50" in found["budget"]
    assert "unknown id seg_99" in found["segment"] and "seg_1..seg_5" in found["segment"]
    assert "no turn 999" in found["turn"] and "from 1 to 24" in found["turn"]
    assert "no segment matches" in found["topic"]
    assert "not a date" in found["date"] and "2026-03-02" in found["date"]
    assert "no memory command" in found["no_command"]
    assert "strategy" in found["strategy"]
    assert "ccm consolidate" in found["graph"]
    assert "no session 'nope'" in found["resource"]
    assert len(found["after"]["sessions"]) == 4


def test_logs_go_to_the_log_file_and_never_to_stdout(root: Path, tmp_path: Path) -> None:
    log = tmp_path / "mcp.log"

    async def body(session: ClientSession) -> str:
        return await error(session, "context", session="nope")

    # a stray line on stdout would break the client's JSON-RPC stream
    assert "no session" in talk(root, body, "--log-file", str(log))
    logged = log.read_text("utf-8")
    assert "serving" in logged and "answered with an error: no session" in logged
