"""``ccm mcp``: ccm's memory as an MCP server over stdio, for Claude Code and any MCP client.

A thin shell over the library: every tool calls what the CLI command of the same name
calls (`ccm.context`, `ccm.memory`, `ccm.store`, the engine's health and summary, the
graph), and answers with structured output (the JSON the CLI's ``--json`` prints) and
the same as text. The model can read its context, search the past, bring a segment or a
turn back whole, run the memory commands (``@pin``, ``@expand``, ...), mark what must
never be compressed, and ask how healthy its context is.

A bad argument (an unknown session, a bad segment id, a budget below the floor) is a tool
error whose message says what to pass instead; the server itself never stops for one.
Nothing but the protocol goes to stdout: logs go to stderr, or to ``--log-file``. The
`mcp` SDK is imported only here, so the rest of ccm runs without it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from pydantic import Field

from ccm import __version__, derive, memory, tokens
from ccm.errors import CCMError, UsageError
from ccm.store import Store

log = logging.getLogger("ccm.mcp")

MIN_BUDGET = 50  # tokens: what `ccm context --budget` accepts at least
KEPT_ENGINES = 16  # sessions whose engines the server keeps in memory

INSTRUCTIONS = """\
ccm keeps every word of this conversation and of earlier ones, and gives you a small
working context: the critical instructions (never compressed), the working state, a
manifest of the conversation's segments (seg_1, seg_2, ...) and the latest turns.
Use `context` to read it, `recall` to search what was said before (here or in other
sessions), `expand` to read a segment or a turn whole, and `memory_command` (or pin,
focus, archive) to manage what stays in view. Mark what must never be forgotten with
`mark_critical`. A session id is the conversation's id (Claude Code's session id);
`sessions` lists them."""

Session = Annotated[str, Field(description="The session id (`sessions` lists them).")]
Targets = Annotated[
    list[str],
    Field(description="Segment ids (seg_3), ranges (seg_2..seg_5), effort ids, or topic words."),
]


def build(store: Store) -> MCPServer[Any]:
    """The server, its tools and its resource, over `store`."""
    server: MCPServer[Any] = MCPServer(
        "ccm", instructions=INSTRUCTIONS, version=__version__, log_level="WARNING"
    )
    lock = threading.Lock()  # one call at a time: tools may run in worker threads

    @contextmanager
    def answering() -> Iterator[None]:
        with lock:
            try:
                yield
            except CCMError as exc:
                log.info("answered with an error: %s", exc)
                raise ToolError(str(exc)) from exc

    def session_of(session: str) -> str:
        store.require_session(session)
        return session

    @server.tool()
    def sessions() -> dict[str, Any]:
        """List every session in memory with its turns, tokens, and first and last
        activity, newest activity last."""
        with answering():
            stats = [store.session_stats(name).as_dict() for name in store.sessions()]
            stats.sort(key=lambda s: s.get("last_ts") or "")
            return {"sessions": stats}

    @server.tool()
    def context(
        session: Session,
        budget: Annotated[
            int | None, Field(description="Token budget (default: the configured one).")
        ] = None,
        query: Annotated[
            str | None,
            Field(description="The next user message: decides whether and what to recall."),
        ] = None,
    ) -> dict[str, Any]:
        """The context ccm would give the model for the session's next turn, never above
        the budget: critical items, working state, manifest, active efforts, what the
        query recalls, and the latest turns. `text` is it ready to read."""
        from ccm.context import assemble

        with answering():
            if budget is not None and budget < MIN_BUDGET:
                raise UsageError(
                    f"a budget of {budget} tokens is too small",
                    f"pass at least {MIN_BUDGET}, or none for the default",
                )
            assembled = assemble(store, session_of(session), budget, query)
            return {**assembled.as_dict(), "text": assembled.text()}

    @server.tool()
    def recall(
        query: Annotated[str, Field(description="What to look for, in words.")],
        session: Annotated[
            str | None, Field(description="Only this session (default: every session).")
        ] = None,
        budget: Annotated[int, Field(ge=1, description="Tokens of hits to return.")] = 2000,
        limit: Annotated[int, Field(ge=1, description="At most this many hits.")] = 20,
        since: Annotated[
            str | None, Field(description="Only what was said from this date (YYYY-MM-DD).")
        ] = None,
        until: Annotated[
            str | None, Field(description="Only what was said up to this date (YYYY-MM-DD).")
        ] = None,
    ) -> dict[str, Any]:
        """Search what was said before, in one session or in all of them, and say why
        each hit was chosen. Each hit is an exchange (or a segment summary, or a note)
        with its turns; `expand` gives more around it."""
        with answering():
            hits, used = memory.recall(store, query, session, budget, limit, since, until)
            return {"query": query, "tokens": used, "hits": [hit.as_dict() for hit in hits]}

    @server.tool()
    def expand(
        session: Session,
        target: Annotated[
            str,
            Field(
                description="A segment (seg_3), a range (seg_2..seg_4), a turn (turn 42 or "
                "42), or a topic in words."
            ),
        ],
        budget: Annotated[
            int, Field(ge=MIN_BUDGET, description="Tokens of text to return at most.")
        ] = memory.EXPAND_TOKENS,
    ) -> dict[str, Any]:
        """Read a segment, a turn or a topic of the session whole, word for word from the
        log. A segment or topic is also brought back into the working context (as
        @expand does; `memory_command` with @undo or `unpin` reverts it)."""
        with answering():
            return memory.expand(store, session, target, budget, who="model")  # (it checks)

    @server.tool()
    def memory_command(
        session: Session,
        text: Annotated[
            str,
            Field(
                description="Text holding @commands: @pin(seg_2) @unpin(seg_2) "
                '@focus(seg_3) @archive(seg_1) @expand(seg_1) @compress(seg_1, "note") '
                '@recall("words") @note("text") @critical("text") @undo'
            ),
        ],
    ) -> dict[str, Any]:
        """Run the memory commands found in `text`, as ``ccm apply`` does: each is kept
        as an event (undo reverts it) and the working context follows."""
        with answering():
            outcomes = memory.apply(store, session_of(session), text, who="model")
            if not outcomes:
                raise UsageError("no memory command in the text", "write one such as @pin(seg_2)")
            return {"outcomes": [o.as_dict() for o in outcomes]}

    def operation(name: str, doc: str) -> None:
        def run(session: Session, targets: Targets) -> dict[str, Any]:
            with answering():
                if not targets:
                    raise UsageError(f"{name} needs a target", "pass segment ids such as seg_2")
                outcome = memory.command(store, session_of(session), name, targets, who="model")
                if not outcome.ok:
                    raise UsageError(outcome.message, "`context` lists the segments")
                return outcome.as_dict()

        run.__doc__ = doc
        server.add_tool(run, name=name)

    for name, doc in memory.OPERATIONS.items():
        operation(name, doc)

    @server.tool()
    def note(
        session: Session,
        text: Annotated[str, Field(description="The note, in a sentence or two.")],
    ) -> dict[str, Any]:
        """Write a note into the session's memory (a finding, a decision, where you
        stopped): it is kept as an event and found by recall."""
        with answering():
            return memory.note(store, session_of(session), text, who="model").as_dict()

    @server.tool()
    def summary(session: Session) -> dict[str, Any]:
        """The structured handover summary of the session: its seven sections, built
        from the log offline."""
        from ccm.engine.health import summary as build_summary

        with answering():
            derived = derive.update(store, session_of(session))
            return build_summary(derived.state, derived.tiers, derived.events)

    @server.tool()
    def graph_explain(
        id: Annotated[
            str,
            Field(description="A conclusion id (session/seg_N) or a vault note's file name."),
        ],
    ) -> dict[str, Any]:
        """Why a conclusion of the knowledge graph has its confidence: what supports it,
        what challenged it, and in which sessions (after `ccm consolidate`)."""
        from ccm.sleep.network import explained

        with answering():
            return explained(store, id)

    @server.tool()
    def get_context_health(session: Session) -> dict[str, Any]:
        """How healthy the session's context is: tokens against the window, how relevant
        the old context still is, topic drift, the critical items' share, and what to
        do (compact, pin, focus)."""
        from ccm.engine.health import assess

        with answering():
            derived = derive.update(store, session_of(session))
            return assess(derived.state, derived.tiers, derived.events, store.config).as_dict()

    @server.tool()
    def trigger_compaction(
        session: Session,
        strategy: Annotated[
            Literal["summarize", "selective", "aggressive"],
            Field(description="How much to compact."),
        ] = "selective",
        dry_run: Annotated[bool, Field(description="Only say what would be done.")] = False,
    ) -> dict[str, Any]:
        """Summarize or archive old segments of the session to make room. Reversible:
        each step is an event (undo, or @expand a segment, brings it back)."""
        with answering():
            plan = memory.compact(store, session_of(session), strategy, dry_run)
            return {**plan.as_dict(), "dry_run": dry_run}

    @server.tool()
    def mark_critical(
        session: Session,
        text: Annotated[str, Field(description="The instruction or fact, word for word.")],
    ) -> dict[str, Any]:
        """Mark an instruction or fact as critical: never compressed, never displaced,
        always in the context."""
        with answering():
            return memory.mark_critical(store, session_of(session), text, who="model").as_dict()

    @server.tool()
    def get_critical_context(session: Session) -> dict[str, Any]:
        """The session's critical items (detected rules and explicit marks), as the
        context always gives them, with their tokens."""
        with answering():
            items = derive.update(store, session_of(session)).tiers.critical
            return {"items": items, "tokens": sum(int(i.get("tokens") or 0) for i in items)}

    @server.resource(
        "ccm://session/{session}/manifest",
        name="manifest",
        mime_type="application/yaml",
        description="The session's memory manifest: its segments with their summaries, "
        "status and conclusions.",
    )
    def manifest(session: str) -> str:
        with lock:
            try:
                store.require_session(session)
                derive.update(store, session)
                return (store.session_dir(session) / "manifest.yaml").read_text("utf-8")
            except CCMError as exc:
                raise ResourceError(str(exc)) from exc

    return server


def serve(store: Store, log_file: Path | None = None) -> None:
    """Run the server on stdin and stdout until the client closes them."""
    if log_file is not None:  # in place of standard error
        handler = logging.FileHandler(log_file, encoding="utf-8")
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        logging.getLogger().handlers[:] = [handler]
    log.setLevel(logging.INFO)  # its start and the errors it answered with, at least
    tokens.set_method(store.config.tokens_method)
    # a server lives long: its sessions' engines stay in memory
    derive.keeper = derive.Keeper(KEPT_ENGINES)
    log.info("serving %s", store.root)
    build(store).run("stdio")
