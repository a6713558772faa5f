"""The ``ccm`` command line: it parses arguments, calls the library, prints results.

Exit codes: 0 ok, 1 error (``Error: ...`` on stderr), 2 usage error. Only click is
imported at start-up so that ``ccm --version`` stays instant; each command imports
what it needs.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
from collections.abc import Callable
from functools import wraps
from typing import TYPE_CHECKING, Any, TypeVar

import click

from ccm import EMBEDDING_MODELS, __version__

if TYPE_CHECKING:
    from ccm.store import Store

F = TypeVar("F", bound=Callable[..., Any])
PROGRESS_MIN_BYTES = 8 * 1024 * 1024
HANDOVER_BUDGET = 12_000  # tokens of a session's memory a model writes its handover from


def _safe_streams() -> None:
    """Never fail to print: text ccm keeps verbatim may hold lone surrogates (from JSON
    escapes); they are written as backslash escapes instead of raising."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")


def _setup_logging() -> None:
    level = os.environ.get("CCM_LOG_LEVEL", "WARNING").upper()
    logging.basicConfig(
        level=getattr(logging, level, logging.WARNING),
        format="%(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )


if TYPE_CHECKING:
    _ParamType = click.ParamType[str]
else:  # generic only in newer click
    _ParamType = click.ParamType


class _Session(_ParamType):
    """A session id, or a unique prefix of one (as git takes a commit's)."""

    name = "session"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        from ccm.errors import CCMError

        assert ctx is not None  # a command line always has one
        try:
            return _store(ctx).resolve_session(str(value))
        except CCMError as exc:
            self.fail(str(exc), param, ctx)


SESSION = _Session()


def _store(ctx: click.Context) -> Store:
    """The store for ``--root`` (or CCM_HOME, or ~/.knowledge), built on first use."""
    from ccm import tokens
    from ccm.errors import UsageError
    from ccm.paths import resolve_root
    from ccm.store import Store

    obj = ctx.find_root().ensure_object(dict)
    if "store" not in obj:
        root = resolve_root(obj.get("root"))
        if root.is_file():
            raise UsageError(
                f"the knowledge root {root} is a file", "pass a folder with --root or CCM_HOME"
            )
        store = Store(root)
        tokens.set_method(store.config.tokens_method)
        obj["store"] = store
    found: Store = obj["store"]
    return found


def _errors_as_exit_codes(func: F) -> F:
    """Turn ccm's own errors into click's: ``Error: ...`` and exit code 1 (usage: 2)."""

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from ccm.errors import CCMError, UsageError

        try:
            return func(*args, **kwargs)
        except UsageError as exc:
            raise click.UsageError(str(exc)) from exc
        except CCMError as exc:
            raise click.ClickException(str(exc)) from exc

    return wrapper  # type: ignore[return-value]


def _executor_options(what: str) -> Callable[[F], F]:
    """``--executor``, ``--scheduler`` and ``--workers``: where a command's per-session
    work (`what`) runs (`ccm.executors`); the command gets them as ``executor``."""

    def decorate(func: F) -> F:
        @click.option(
            "--executor",
            "executor_kind",
            type=click.Choice(["local", "processes", "dask"]),
            default="local",
            help=f"Where {what} runs: here, in worker processes, or on a Dask cluster "
            "(the ccm[dask] extra; the root must be on storage every worker sees).",
        )
        @click.option(
            "--scheduler",
            metavar="ADDRESS",
            help="The Dask scheduler to use (tcp://host:8786); without it, --executor dask "
            "starts a local cluster for the run.",
        )
        @click.option(
            "--workers",
            type=click.IntRange(min=1),
            help="Worker processes for --executor processes, or of the local Dask cluster "
            "(default: one per core).",
        )
        @wraps(func)
        def wrapper(
            *args: Any,
            executor_kind: str,
            scheduler: str | None,
            workers: int | None,
            **kwargs: Any,
        ) -> Any:
            from ccm.errors import UsageError
            from ccm.executors import Executor

            try:
                executor = Executor(executor_kind, workers, scheduler)
            except UsageError as exc:
                raise click.UsageError(str(exc)) from exc
            return func(*args, executor=executor, **kwargs)

        return wrapper  # type: ignore[return-value]

    return decorate


def _emit_json(data: Any) -> None:
    click.echo(json.dumps(data, ensure_ascii=False, indent=2))


def _fail(messages: list[str]) -> None:
    for message in messages:
        click.echo(f"Error: {message}", err=True)
    sys.exit(1)


@click.group(context_settings={"help_option_names": ["-h", "--help"], "show_default": True})
@click.version_option(__version__, "--version", prog_name="ccm")
@click.option(
    "--root",
    type=click.Path(),  # checked when first used (`_store`): `ccm hook` must never fail
    envvar="CCM_HOME",
    show_envvar=True,
    help="Knowledge root (default: ~/.knowledge).",
)
@click.pass_context
def main(ctx: click.Context, root: str | None) -> None:
    """ccm: a memory for long LLM conversations that keeps every word.

    Raw turns go to an append-only log under the knowledge root; everything
    else is derived from it.
    """
    _safe_streams()
    _setup_logging()
    ctx.ensure_object(dict)["root"] = root


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_context
@_errors_as_exit_codes
def init(ctx: click.Context, as_json: bool) -> None:
    """Create the knowledge root and a config.yaml that lists every default."""
    store = _store(ctx)
    created = store.init()
    if as_json:
        _emit_json({"root": str(store.root), "created": [str(p) for p in created]})
        return
    if created:
        click.echo(f"Initialised knowledge root at {store.root}")
        for path in created:
            click.echo(f"  created {path}")
    else:
        click.echo(f"Knowledge root at {store.root} already exists; nothing changed")


@main.command()
@click.argument("paths", nargs=-1, required=True)
@click.option("--session", "-s", help="Session id to import into (default: from the input).")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["auto", "jsonl", "claude-code", "chatgpt", "anthropic", "locomo"]),
    default="auto",
    help="Input format; auto recognises it from the content.",
)
@click.option(
    "--thinking/--no-thinking",
    default=None,
    help="Keep model thinking blocks (default: ingest.include_thinking, off).",
)
@click.option(
    "--derive/--no-derive",
    default=True,
    help="Update the manifest, open and working tiers of the sessions that changed.",
)
@_executor_options("the parsing of the inputs and the deriving of the tiers")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.pass_context
@_errors_as_exit_codes
def ingest(
    ctx: click.Context,
    paths: tuple[str, ...],
    session: str | None,
    fmt: str,
    thinking: bool | None,
    derive: bool,
    as_json: bool,
    executor: Any,
) -> None:
    """Import transcripts: files, folders, or - for standard input.

    Reads Claude Code sessions (a file, a project folder or all of
    ~/.claude/projects), ChatGPT exports (conversations.json, split files or the
    zip), Anthropic Messages API JSON and plain JSON lines of {"role", "content"}.
    Importing the same input again adds nothing. Lines that cannot be read are
    reported, kept in the session's quarantine.jsonl, and make the exit code 1.
    """
    from ccm.ingest.pipeline import expand_inputs
    from ccm.ingest.pipeline import ingest as run_ingest

    store = _store(ctx)
    inputs = expand_inputs(paths)  # once: a folder's exports are found by their content
    total = sum(item.size for item in inputs)
    show_bar = not as_json and total >= PROGRESS_MIN_BYTES and sys.stderr.isatty()
    if show_bar:
        with click.progressbar(length=total, label="Importing", file=sys.stderr) as bar:
            report = run_ingest(
                store,
                inputs,
                fmt,
                session,
                thinking,
                progress=bar.update,
                derive=derive,
                executor=executor,
            )
    else:
        report = run_ingest(store, inputs, fmt, session, thinking, derive=derive, executor=executor)
    if as_json:
        _emit_json(report.as_dict())
    else:
        _print_ingest(report)
    for notice in report.warnings:
        click.echo(f"Warning: {notice.describe()}", err=True)
    problems = [r.describe() for r in report.rejected] + report.errors
    if problems:
        _fail(problems)


def _print_ingest(report: Any) -> None:
    sessions = report.sessions.values()
    click.echo(
        f"{report.inputs} input{'s' if report.inputs != 1 else ''}: "
        f"{len(report.sessions)} session{'s' if len(report.sessions) != 1 else ''}, "
        f"{report.turns_added} turn{'s' if report.turns_added != 1 else ''} added, "
        f"{report.duplicates} already present"
    )
    for result in sessions:
        span = f" (turns {result.first_turn}-{result.last_turn})" if result.added else ""
        click.echo(f"  {result.session}  +{result.added}{span}  [{result.source}]")
    if report.skipped:
        skipped = ", ".join(f"{kind} {n}" for kind, n in sorted(report.skipped.items()))
        click.echo(f"Skipped on purpose: {skipped}")
    if report.rejected:
        click.echo(
            f"Rejected {len(report.rejected)} line(s); each is kept verbatim in "
            "chats/<session>/quarantine.jsonl (details on stderr)"
        )


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print the sessions as JSON.")
@click.pass_context
@_errors_as_exit_codes
def sessions(ctx: click.Context, as_json: bool) -> None:
    """List sessions with their turns, tokens and first and last activity."""
    store = _store(ctx)
    stats = [store.session_stats(session) for session in store.sessions()]
    if as_json:
        _emit_json([s.as_dict() for s in stats])
        return
    if not stats:
        click.echo(f"No sessions under {store.chats} yet; import some with `ccm ingest`.")
        return
    width = max(len("SESSION"), *(len(s.session) for s in stats))
    click.echo(f"{'SESSION':<{width}}  {'TURNS':>6}  {'TOKENS':>8}  {'FIRST':<19}  LAST")
    for s in stats:
        click.echo(
            f"{s.session:<{width}}  {s.turns:>6}  {s.tokens:>8}  "
            f"{_short_ts(s.first_ts):<19}  {_short_ts(s.last_ts)}"
        )
    if any(s.bad_lines for s in stats):
        bad = [f"{s.session} ({s.bad_lines})" for s in stats if s.bad_lines]
        click.echo(f"Unreadable lines in: {', '.join(bad)}; `ccm show` reports them", err=True)


@main.command()
@click.argument("sessions_", metavar="[SESSION]...", nargs=-1, type=SESSION)
@click.option(
    "--index",
    "whole_index",
    is_flag=True,
    help="Build the recall index of these sessions again from raw.jsonl too (and embed "
    "their turns again, with semantic recall on). By default it is brought up to date, "
    "and built again only where raw.jsonl is no longer what it indexed.",
)
@_executor_options("the folding of each session's log")
@click.option("--json", "as_json", is_flag=True, help="Print what was rebuilt as JSON.")
@click.pass_context
@_errors_as_exit_codes
def rebuild(
    ctx: click.Context,
    sessions_: tuple[str, ...],
    whole_index: bool,
    as_json: bool,
    executor: Any,
) -> None:
    """Regenerate the derived tiers from raw.jsonl and events.jsonl (all sessions by default).

    The result is byte for byte what the incremental updates produce. With --executor
    processes or dask, each session's tiers are rebuilt as a task of its own; the recall
    index, one database, is brought up to date here once they are.
    """
    from ccm import derive
    from ccm.executors import run_map, where
    from ccm.index import Index

    store = _store(ctx)
    chosen = list(sessions_) or store.sessions()
    index = Index(store)
    with contextlib.ExitStack() as stack:
        step = None
        if not as_json and len(chosen) >= 10 and sys.stderr.isatty():
            bar = click.progressbar(length=len(chosen), label="Rebuilding", file=sys.stderr)
            step = stack.enter_context(bar).update
        calls: list[tuple[Any, ...]] = [
            (where(store, executor), session, True) for session in chosen
        ]
        if (
            step is None
            and not as_json
            and sys.stderr.isatty()
            and not (executor and executor.remote)
        ):
            # a few sessions: the fold of a long one shows how far it is
            calls = [(*call, _FoldBar(call[1], stack)) for call in calls]
        results = run_map(derive.folded, calls, executor, step)
    for item in results:
        session = item["session"]
        if whole_index:
            index.drop(session)
        indexed = index.update(session, item.pop("manifest"), embed=False)
        item["index"] = "rebuilt" if whole_index else f"{indexed} units updated"
    if index.semantic:  # the slow part, with its own progress
        missing = sum(index.unembedded(session) for session in chosen)
        with contextlib.ExitStack() as stack:
            step = None
            if not as_json and missing >= 100 and sys.stderr.isatty():
                label = f"Embedding with {index.model}"
                bar = click.progressbar(length=missing, label=label, file=sys.stderr)
                step = stack.enter_context(bar).update
            for item in results:
                item["embedded"] = index.embed(item["session"], step)
    index.close()
    if as_json:
        _emit_json(results)
        return
    from ccm.engine.text import counted

    for item in results:
        changed = ", ".join(item["written"]) or "unchanged"
        click.echo(
            f"{item['session']}: {counted(item['turns'], 'turn')}, "
            f"{counted(item['segments'], 'segment')}, "
            f"{item['open_efforts']} open efforts ({changed}); index {item['index']}"
            + (f"; {item['embedded']} turns embedded" if "embedded" in item else "")
        )


class _FoldBar:
    """A progress bar on stderr for the fold of one long session (`fold.AHEAD_TURNS` turns
    or more), drawn from the fold's first report and closed with `stack`."""

    def __init__(self, session: str, stack: contextlib.ExitStack) -> None:
        from ccm.engine.fold import AHEAD_TURNS

        self.session, self.stack = session, stack
        self.long = AHEAD_TURNS
        self.bar: Any = None
        self.done = 0

    def __call__(self, done: int, total: int) -> None:
        if self.bar is None:
            if total < self.long:
                return
            label = f"Folding {self.session}"
            bar = click.progressbar(length=total, label=label, file=sys.stderr)
            self.bar = self.stack.enter_context(bar)
        self.bar.update(done - self.done)
        self.done = done


def _print_outcomes(outcomes: list[Any], as_json: bool) -> None:
    if as_json:
        _emit_json([o.as_dict() for o in outcomes])
    else:
        for outcome in outcomes:
            if outcome.ok:
                click.echo(outcome.message)
    failed = [o.message for o in outcomes if not o.ok]
    if failed:
        _fail(failed)


def _memory_command(name: str, doc: str, text_option: bool = False) -> None:
    """Register ``ccm NAME SESSION TARGET...``, one memory operation."""

    @click.argument("session", type=SESSION)
    @click.argument("targets", nargs=-1, required=True)
    @click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON.")
    @click.pass_context
    @_errors_as_exit_codes
    def run(
        ctx: click.Context, /, session: str, targets: tuple[str, ...], as_json: bool, **extra: Any
    ) -> None:
        from ccm import memory

        store = _store(ctx)
        store.require_session(session)
        outcome = memory.command(store, session, name, list(targets), text=extra.get("note"))
        _print_outcomes([outcome], as_json)

    run.__doc__ = doc
    if text_option:
        run = click.option("--note", help="A note kept with the operation.")(run)
    main.command(name=name)(run)


_memory_command("pin", "Keep segments active: never compressed, displaced or archived.")
_memory_command("unpin", "Undo a pin or a focus.")
_memory_command("focus", "Make these segments or efforts the working context.")
_memory_command(
    "archive", "Move segments out of the working context (ids, seg_1..seg_9, or a topic)."
)
_memory_command("expand", "Bring compressed or archived segments back into view.")
_memory_command("compress", "Keep only the summary of segments.", text_option=True)


@main.command()
@click.argument("session", type=SESSION)
@click.argument("targets", nargs=-1, required=True)
@click.option("--by", "delta", type=float, default=1.0, help="How much to add.")
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON.")
@click.pass_context
@_errors_as_exit_codes
def importance(
    ctx: click.Context, session: str, targets: tuple[str, ...], delta: float, as_json: bool
) -> None:
    """Raise the importance of efforts (or of the efforts of segments)."""
    from ccm import memory

    store = _store(ctx)
    store.require_session(session)
    _print_outcomes([memory.raise_importance(store, session, list(targets), delta)], as_json)


@main.command()
@click.argument("session", type=SESSION)
@click.argument("text")
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON.")
@click.pass_context
@_errors_as_exit_codes
def note(ctx: click.Context, session: str, text: str, as_json: bool) -> None:
    """Write a note into the session's memory (kept as an event)."""
    from ccm import memory

    _print_outcomes([memory.note(_store(ctx), session, text)], as_json)


@main.command()
@click.argument("session", type=SESSION)
@click.argument("file_or_text")
@click.option("--who", default="user", help="Who wrote the commands.")
@click.option("--json", "as_json", is_flag=True, help="Print the outcomes as JSON.")
@click.pass_context
@_errors_as_exit_codes
def apply(ctx: click.Context, session: str, file_or_text: str, who: str, as_json: bool) -> None:
    """Run the memory commands (@pin, @expand, @recall, ...) found in a file or a text.

    A command that is malformed, unknown or names nothing is reported (exit code 1);
    the others still run.
    """
    from pathlib import Path

    from ccm import memory

    store = _store(ctx)
    store.require_session(session)
    path = Path(file_or_text)
    text = (
        path.read_text(encoding="utf-8")
        if len(file_or_text) < 4096 and path.is_file()
        else file_or_text
    )
    outcomes = memory.apply(store, session, text, who=who)
    if not outcomes:
        click.echo("No memory command found (they look like @pin(seg_3)).", err=True)
        sys.exit(1)
    _print_outcomes(outcomes, as_json)


@main.command()
@click.argument("session", type=SESSION)
@click.argument("event_id", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON.")
@click.pass_context
@_errors_as_exit_codes
def undo(ctx: click.Context, session: str, event_id: str | None, as_json: bool) -> None:
    """Revert an event (the latest one in force by default); the undo is an event too."""
    from ccm import memory

    _print_outcomes([memory.undo(_store(ctx), session, event_id)], as_json)


@main.command()
@click.argument("session", type=SESSION)
@click.option("--json", "as_json", is_flag=True, help="Print the events as JSON.")
@click.pass_context
@_errors_as_exit_codes
def events(ctx: click.Context, session: str, as_json: bool) -> None:
    """List a session's events: pins, focus, notes, critical marks, commands, undos."""
    from ccm.engine.render import cancelled_ids

    store = _store(ctx)
    store.require_session(session)
    found, bad, _ = store.read_events(session)
    cancelled = cancelled_ids(found)
    if as_json:
        _emit_json(found)
    else:
        for event in found:
            state = "  (undone)" if event["id"] in cancelled else ""
            args = event.get("args") or {}
            what = (
                args.get("targets")
                or args.get("text")
                or args.get("query")
                or event.get("reverts")
                or ""
            )
            if isinstance(what, list):
                what = ", ".join(what)
            click.echo(
                f"{event['id']}  {event['ts'][:19]}  {event['who']:<6} {event['kind']:<9} {what}{state}"
            )
    if bad:
        _fail([b.describe() for b in bad])


@main.command()
@click.argument("session", type=SESSION)
@click.option("--add", "add", metavar="TEXT", help="Mark TEXT as critical.")
@click.option("--json", "as_json", is_flag=True, help="Print the items as JSON.")
@click.pass_context
@_errors_as_exit_codes
def critical(ctx: click.Context, session: str, add: str | None, as_json: bool) -> None:
    """List the critical items (never compressed, never displaced, always given)."""
    from ccm import derive, memory

    store = _store(ctx)
    store.require_session(session)
    if add is not None:
        outcome = memory.mark_critical(store, session, add)
        if not as_json:
            click.echo(outcome.message)
    items = derive.update(store, session).tiers.critical
    if as_json:
        _emit_json(items)
        return
    if not items:
        click.echo("No critical items.")
    for item in items:
        where = f"turn {item['turn']}" if item["turn"] else item["id"]
        click.echo(f"[{item['kind']}] {item['text']}  ({where})")


@main.command()
@click.argument("session", type=SESSION)
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
@click.pass_context
@_errors_as_exit_codes
def health(ctx: click.Context, session: str, as_json: bool) -> None:
    """Tokens against the window, relevance of old context, drift, and what to do."""
    from ccm import derive
    from ccm.engine.health import assess

    store = _store(ctx)
    derived = derive.update(store, session)
    report = assess(derived.state, derived.tiers, derived.events, store.config)
    if as_json:
        _emit_json(report.as_dict())
        return
    click.echo(f"{session}: {report.status.upper()}")
    click.echo(f"  tokens        {report.tokens} of {report.window} ({report.utilization:.1%})")
    click.echo(
        f"  old context   {report.stale_tokens} stale tokens; relevance {report.old_context_relevance:.2f}"
    )
    parts = ", ".join(f"{k.replace('_', ' ')} {v:.2f}" for k, v in report.drift_parts.items())
    click.echo(f"  drift         {report.drift:.2f} ({parts})")
    click.echo(
        f"  critical      {report.critical_tokens} tokens, {report.critical_ratio:.1%} of the budget"
    )
    for issue in report.issues:
        click.echo(f"  ! {issue}")
    for suggestion in report.suggestions:
        click.echo(f"  -> {suggestion}")


@main.command()
@click.argument("session", type=SESSION)
@click.option(
    "--strategy",
    type=click.Choice(["summarize", "selective", "aggressive"]),
    default="selective",
    help="How much to compact.",
)
@click.option("--dry-run", is_flag=True, help="Only show the plan.")
@click.option(
    "--llm/--no-llm",
    "use_llm",
    default=None,
    help="Have the model of config.yaml's llm section write the summaries (default: as "
    "config.yaml says; ccm's own where it is off or fails).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.pass_context
@_errors_as_exit_codes
def compact(
    ctx: click.Context,
    session: str,
    strategy: str,
    dry_run: bool,
    use_llm: bool | None,
    as_json: bool,
) -> None:
    """Summarize or archive old segments; reversible (events; @expand or undo restore)."""
    from ccm import llm, memory

    store = _store(ctx)
    store.require_session(session)
    with llm.Model(store, use_llm) as model:
        plan = memory.compact(store, session, strategy, dry_run, model)
        done = model.report()
    if model.asked and not dry_run:
        written = done["answered"] + done["cached"]
        click.echo(
            _model_line(done, f"wrote {written} of {len(plan.summarized)} summaries"), err=True
        )
    if as_json:
        _emit_json({**plan.as_dict(), "dry_run": dry_run})
        return
    verb = "would" if dry_run else "did"
    click.echo(
        f"Compaction ({strategy}) {verb} save {plan.saved} tokens: {plan.tokens_before} -> {plan.tokens_after}"
    )
    click.echo(f"  kept whole   {', '.join(plan.kept) or '-'}")
    click.echo(f"  summarized   {', '.join(plan.summarized) or '-'}")
    click.echo(f"  archived     {', '.join(plan.removed) or '-'}")
    click.echo("The model should still remember:")
    for item in plan.remember:
        click.echo(f"  - {item}")
    if not dry_run and (plan.summarized or plan.removed):
        click.echo(f"Undo with `ccm undo {session}` (or @expand a segment).")


@main.command()
@click.argument("session", type=SESSION)
@click.option(
    "--llm/--no-llm",
    "use_llm",
    default=None,
    help="Have the model of config.yaml's llm section write it (default: as config.yaml "
    "says; offline when it is off or fails).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the sections as JSON.")
@click.pass_context
@_errors_as_exit_codes
def summary(ctx: click.Context, session: str, use_llm: bool | None, as_json: bool) -> None:
    """The structured handover summary: seven sections, extractive and offline, or
    written by a model (see `llm` in config.yaml)."""
    from ccm import context, derive, llm
    from ccm.engine.health import summary as build

    store = _store(ctx)
    derived = derive.update(store, session)
    sections = build(derived.state, derived.tiers, derived.events)
    source = "offline"
    with llm.Model(store, use_llm) as model:
        if model.on:
            memory = context.assemble(store, session, HANDOVER_BUDGET).text()
            sections, source = llm.handover(model, sections, memory)
        done = model.report()
    if model.asked:
        did = "wrote the handover" if source == "model" else "wrote no handover (ccm's stands)"
        click.echo(_model_line(done, did), err=True)
    if as_json:
        _emit_json(sections)
        return
    for name, lines in sections.items():
        click.echo(f"## {name.replace('_', ' ').capitalize()}")
        for line in lines or ["(none)"]:
            click.echo(f"- {line}")
        click.echo()


@main.command()
@click.argument("session", type=SESSION)
@click.option(
    "--budget", type=click.IntRange(min=50), help="Token budget (default: context.budget_tokens)."
)
@click.option("--query", help="The next user message: decides whether and what to recall.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "messages"]),
    default="text",
    help="text for reading, json with blocks and tokens, messages for the Anthropic API.",
)
@click.pass_context
@_errors_as_exit_codes
def context(
    ctx: click.Context, session: str, budget: int | None, query: str | None, fmt: str
) -> None:
    """Everything the model should receive for its next turn, never above the budget."""
    from ccm.context import assemble

    store = _store(ctx)
    store.require_session(session)
    assembled = assemble(store, session, budget, query)
    if fmt == "json":
        _emit_json(assembled.as_dict())
    elif fmt == "messages":
        _emit_json(assembled.messages())
    else:
        click.echo(assembled.text())
        click.echo(
            f"\n[{assembled.tokens} of {assembled.budget} tokens; query type "
            f"{assembled.query_type}: {assembled.reason}]",
            err=True,
        )


@main.command()
@click.argument("query")
@click.option("--session", "-s", type=SESSION, help="Only this session (default: all).")
@click.option(
    "--budget",
    type=click.IntRange(min=1),
    default=2000,
    help="Tokens of hits to return.",
)
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=20,
    help="At most this many hits.",
)
@click.option("--since", metavar="DATE", help="Only what was said from DATE (YYYY-MM-DD or ISO).")
@click.option("--until", metavar="DATE", help="Only what was said up to DATE (a whole day).")
@click.option("--json", "as_json", is_flag=True, help="Print the hits as JSON.")
@click.pass_context
@_errors_as_exit_codes
def recall(
    ctx: click.Context,
    query: str,
    session: str | None,
    budget: int,
    limit: int,
    since: str | None,
    until: str | None,
    as_json: bool,
) -> None:
    """Search every session's memory, or one session's as its context recalls it; say why
    each hit was chosen."""
    from ccm import memory

    kept, used = memory.recall(_store(ctx), query, session, budget, limit, since, until)
    if as_json:
        _emit_json({"query": query, "tokens": used, "hits": [h.as_dict() for h in kept]})
        return
    if not kept:
        click.echo("Nothing found.")
        return
    for hit in kept:
        turns = f"turns {hit.first_turn}-{hit.last_turn}" if hit.first_turn else hit.key
        why = hit.why or f"matched: {', '.join(hit.matched) or 'a stemmed word'}"
        click.echo(f"--- {hit.session} {hit.kind} {turns} (score {hit.score:.2f}; {why})")
        click.echo(hit.text)


@main.command()
@click.option(
    "--log-file",
    type=click.Path(dir_okay=False),
    help="Write the server's log here (default: standard error).",
)
@click.pass_context
@_errors_as_exit_codes
def mcp(ctx: click.Context, log_file: str | None) -> None:
    """Serve ccm's memory to an MCP client (Claude Code, Claude Desktop) over stdio.

    Tools: context, recall, expand, memory_command, pin, unpin, focus, archive,
    note, sessions, summary, graph_explain, get_context_health, trigger_compaction,
    mark_critical, get_critical_context; resource ccm://session/{id}/manifest.
    Register it with `ccm install claude-code`, or in an MCP client's settings
    as the command `ccm mcp`.
    """
    from pathlib import Path

    try:
        from ccm.mcp import serve
    except ImportError as exc:  # the SDK is a dependency; a broken install lacks it
        from ccm.errors import CCMError

        raise CCMError(f"the MCP SDK cannot be imported: {exc}", "pip install 'mcp>=2.3'") from exc
    serve(_store(ctx), Path(log_file) if log_file else None)


@main.command()
@click.option("--host", default="127.0.0.1", help="Address to listen on.")
@click.option("--port", default=8787, type=click.IntRange(0, 65535))
@click.option(
    "--upstream",
    default="https://api.anthropic.com",
    help="The Messages API the proxy calls.",
)
@click.option(
    "--mode",
    type=click.Choice(["observe", "manage"]),
    default="observe",
    help="observe: record and forward unchanged; manage: send ccm's context in place of "
    "the history.",
)
@click.option(
    "--budget",
    type=click.IntRange(min=500),
    help="manage: tokens of ccm's context and the messages it keeps (default: the "
    "configured context budget).",
)
@click.option(
    "--session-header",
    default="x-ccm-session",
    help="The request header that names the session.",
)
@click.option(
    "--memory-tools",
    type=click.Choice(["auto", "always", "never"]),
    default="auto",
    help="manage: offer the memory tools to a request that has tools (auto), to every "
    "request, or never.",
)
@click.option(
    "--max-memory-calls",
    type=click.IntRange(min=0),
    default=4,
    help="manage: memory rounds the proxy answers itself in one request.",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=1),
    default=600.0,
    help="Seconds the upstream may take to answer.",
)
@click.pass_context
@_errors_as_exit_codes
def proxy(
    ctx: click.Context,
    host: str,
    port: int,
    upstream: str,
    mode: str,
    budget: int | None,
    session_header: str,
    memory_tools: str,
    max_memory_calls: int,
    timeout: float,
) -> None:
    """Serve the Anthropic Messages API with ccm's memory in front of it.

    Point a client at it with ANTHROPIC_BASE_URL=http://127.0.0.1:8787. Every
    conversation is recorded to its session (the --session-header, else
    metadata.user_id, else a digest of the system prompt and first user message); in
    manage mode the
    history sent upstream is ccm's context within --budget, and the model may call
    the memory tools (memory_recall, memory_expand, memory_pin, ...). Other paths
    pass through unchanged. The API key goes upstream and is never written.
    """
    from ccm.errors import UsageError
    from ccm.proxy import Settings, serve

    if not upstream.startswith(("http://", "https://")):
        raise UsageError(f"--upstream {upstream!r} is not a URL", "pass http(s)://host[:port]")
    store = _store(ctx)
    store.chats.mkdir(parents=True, exist_ok=True)
    settings = Settings(
        upstream=upstream,
        mode=mode,
        budget=budget,
        session_header=session_header,
        memory_tools=memory_tools,
        max_memory_calls=max_memory_calls,
        timeout=timeout,
    )
    if host not in ("127.0.0.1", "localhost", "::1"):
        click.echo(f"warning: listening on {host}: anyone who reaches it can use it", err=True)
    click.echo(
        f"ccm proxy ({mode}) on http://{host}:{port} -> {upstream}; root {store.root}", err=True
    )
    serve(store, settings, host, port)


@main.command()
@click.argument("event", metavar="EVENT")
@click.pass_context
def hook(ctx: click.Context, event: str) -> None:
    """Answer a Claude Code hook: its JSON on standard input, what the model is given
    on standard output.

    EVENT: SessionStart (the session's critical items, working state and
    manifest; on a new session, what earlier sessions in the project concluded),
    UserPromptSubmit (runs the prompt's @commands; recalls for a question about
    the past), PreCompact (what Claude Code's compaction must keep), Stop or
    SessionEnd (ingest only). The transcript is ingested first. Never fails the
    session: on any error it prints nothing, exits 0 and logs to .ccm/hook.log.
    Installed by `ccm install claude-code`.
    """
    from ccm.hook import run

    text = sys.stdin.buffer.read().decode("utf-8", errors="replace")
    output = run(ctx.find_root().ensure_object(dict).get("root"), event, text)
    if output:
        click.echo(output)


def _add_install() -> None:
    from ccm.install import install, uninstall  # light: json, shlex and click

    main.add_command(install)
    main.add_command(uninstall)


_add_install()


@main.group()
def bench() -> None:
    """Measure memory quality on public benchmarks."""


@bench.command("locomo")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--budget",
    "budgets",
    type=click.IntRange(min=100),
    multiple=True,
    default=(2000, 4000),
    help="Context budget in tokens (repeat for several).",
)
@click.option(
    "--method",
    "methods",
    type=click.Choice(["ccm", "recency", "bm25-turns", "ccm-semantic"]),
    multiple=True,
    help="Methods to measure (default: ccm, recency, bm25-turns, and ccm-semantic where "
    "the semantic extra is installed: ccm with hybrid recall).",
)
@click.option(
    "--model",
    type=click.Choice(EMBEDDING_MODELS),
    help="The embedding model of ccm-semantic (default: recall.model's default, e5-small).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@_errors_as_exit_codes
def bench_locomo(
    file: str,
    budgets: tuple[int, ...],
    methods: tuple[str, ...],
    model: str | None,
    as_json: bool,
) -> None:
    """Evidence recall of the assembled context on LoCoMo, against two baselines."""
    from pathlib import Path

    from ccm.bench import CATEGORIES, run_locomo

    def progress(name: str) -> None:
        if not as_json:
            click.echo(f"  measured {name}", err=True)

    report = run_locomo(Path(file), list(budgets), list(methods) or None, progress, model)
    if as_json:
        _emit_json(report)
        return
    click.echo(
        f"{report['conversations']} conversations, {report['questions']} questions with evidence; "
        f"{len(report['unresolved_evidence'])} evidence ids point at no turn"
    )
    header = "method        budget  recall  " + "  ".join(
        f"{c}:{CATEGORIES[c][:6]:<6}" for c in CATEGORIES
    )
    click.echo(header + "  tokens  p50 ms  p95 ms")
    for row in report["results"]:
        cats = "  ".join(f"{row['by_category'].get(str(c), 0.0):>8.3f}" for c in CATEGORIES)
        click.echo(
            f"{row['method']:<13} {row['budget']:>6}  {row['recall']:.3f}  {cats}  "
            f"{row['tokens_mean']:>6.0f}  {row['latency_ms_p50']:>6.1f}  {row['latency_ms_p95']:>6.1f}"
        )
    click.echo("recall: categories 1-4; category 5 (adversarial) is shown apart")
    names = list(report["results"][0]["by_conversation"]) if report["results"] else []
    if len(names) > 1:
        width = max(8, *(len(name) for name in names))
        click.echo("\nrecall by conversation")
        click.echo("method        budget  " + "  ".join(f"{n:>{width}}" for n in names))
        for row in report["results"]:
            cells = "  ".join(f"{row['by_conversation'].get(n, 0.0):>{width}.3f}" for n in names)
            click.echo(f"{row['method']:<13} {row['budget']:>6}  {cells}")


@bench.command("scenarios")
@click.argument("directory", type=click.Path(exists=True, file_okay=False))
@click.option(
    "--model",
    type=click.Choice(EMBEDDING_MODELS),
    help="Measure ccm with hybrid recall on, with this embedding model (default: lexical).",
)
@click.option(
    "--llm",
    "use_llm",
    is_flag=True,
    help="Consolidate the vault with the model of config.yaml's llm section (needs its API "
    "key; makes requests, so never run in CI).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.pass_context
@_errors_as_exit_codes
def bench_scenarios(
    ctx: click.Context, directory: str, model: str | None, use_llm: bool, as_json: bool
) -> None:
    """Segmentation, conclusions, context and vault quality on labelled scenarios.

    DIRECTORY holds <name>.jsonl chats, each with <name>.labels.yaml beside it. Each
    chat is imported as its own session and scored against its labels; the context
    measures are compared with a recency window and BM25 over single turns.
    """
    from pathlib import Path

    from ccm.bench_scenarios import run_scenarios

    def progress(name: str) -> None:
        if not as_json:
            click.echo(f"  measured {name}", err=True)

    settings = None
    if use_llm:
        from ccm import llm
        from ccm.errors import UsageError

        store = _store(ctx)
        with llm.Model(store, True) as checked:
            if not checked.on:
                raise UsageError(
                    f"--llm: the model is off: {checked.off}",
                    "set llm: {provider: anthropic} in config.yaml and the API key",
                )
        settings = dict(store.config.values["llm"])
    report = run_scenarios(Path(directory), progress, model, settings)
    if as_json:
        _emit_json(report)
        return
    _print_scenarios(report)


def _print_scenarios(report: dict[str, Any]) -> None:
    def trio(shares: dict[str, float]) -> str:
        return "/".join(f"{shares[m]:.2f}" for m in ("ccm", "recency", "bm25"))

    rows: list[tuple[str, ...]] = [
        (
            "scenario",
            "turns",
            "Pk",
            "concl P/R/F1",
            "traps",
            "critical c/r/b",
            "end terms c/r/b",
            "checkpoints c/r/b",
            "recall c/r/b",
            "conflicts",
        )
    ]

    def cells(name: str, pk: float, traps: str, item: dict[str, Any]) -> tuple[str, ...]:
        found = item["conclusions"]
        return (
            name,
            str(item["turns"]),
            f"{pk:.3f}",
            f"{found['precision']:.2f}/{found['recall']:.2f}/{found['f1']:.2f}",
            traps,
            trio(item["critical"]["share"]),
            trio(item["end_terms"]["share"]),
            trio(item["checkpoints"]["share"]),
            trio(item["recall"]["score"]),
            f"{item['conflicts']['resolved']}/{item['conflicts']['total']}",
        )

    for item in report["scenarios"]:
        counts = item["conclusions"]["counts"]
        traps = f"{counts['traps']}/{counts['false_conclusions']}"
        rows.append(cells(item["scenario"], item["segmentation"]["pk"], traps, item))
    total = report["totals"]
    traps = f"{total['conclusions']['traps']}/{total['conclusions']['false_conclusions']}"
    rows.append(cells("total", total["pk_mean"], traps, total))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        click.echo(
            "  ".join(
                cell.ljust(width) if i == 0 else cell.rjust(width)
                for i, (cell, width) in enumerate(zip(row, widths, strict=True))
            ).rstrip()
        )
    vault, conclusions = report["vault"], total["conclusions"]
    click.echo(
        f"Pk: mean over scenarios (pooled {total['pk_pooled']:.3f}); conclusions: "
        f"{conclusions['matched']} of {conclusions['predicted']} predicted match "
        f"{conclusions['gold']} gold; traps: accepted/labelled; c/r/b: ccm/recency/bm25; "
        f"recall: mean over {total['recall']['questions']} questions"
    )
    click.echo(
        f"vault: stated {vault['stated']} of {vault['conclusions']} = {vault['stated_share']:.2f}, "
        f"junk titles {vault['junk']} of {vault['notes']}"
    )
    if "llm" in vault:
        click.echo(_model_line(vault["llm"], _distilled(vault["llm"])))
    for item in report["scenarios"]:
        for error in item["errors"]:
            click.echo(f"warning: {item['scenario']}: {error}", err=True)
    click.echo(f"{total['scenarios']} scenarios measured in {report['seconds']:.1f} s")


def _short_ts(ts: str | None) -> str:
    return (ts or "-")[:19].replace("T", " ")


def _parse_range(text: str | None) -> tuple[int, int | None]:
    if not text:
        return 1, None
    start, sep, end = text.partition(":")
    try:
        first = int(start) if start else 1
        last = int(end) if end else None
        if not sep:
            last = first
    except ValueError as exc:
        raise click.BadParameter(f"{text!r} is not A:B, A: or :B (turn numbers)") from exc
    return first, last


@main.command()
@click.argument("session", type=SESSION)
@click.option("--turns", "turn_range", metavar="A:B", help="Only turns A to B (A:, :B, N).")
@click.option("--json", "as_json", is_flag=True, help="Print the raw entries as JSON.")
@click.pass_context
@_errors_as_exit_codes
def show(ctx: click.Context, session: str, turn_range: str | None, as_json: bool) -> None:
    """Print a session's turns verbatim from raw.jsonl."""
    store = _store(ctx)
    store.require_session(session)
    first, last = _parse_range(turn_range)
    turns, bad, _ = store.read_turns(session)
    chosen = [t for t in turns if t["turn"] >= first and (last is None or t["turn"] <= last)]
    if turn_range and not chosen and not bad:
        from ccm.errors import UsageError

        held = f"turns {turns[0]['turn']}-{turns[-1]['turn']}" if turns else "no turns"
        raise UsageError(
            f"--turns {turn_range}: session {session} has {held}", "pass a range inside it"
        )
    if as_json:
        _emit_json(chosen)
    elif chosen:
        from ccm.transcript import readable

        click.echo(readable(chosen, turns))
        click.echo()
    if bad:
        store.quarantine(session, bad)
        _fail([f"{b.describe()}; the line is kept in quarantine.jsonl" for b in bad])


class _JsonLog(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


@main.command()
@click.option("--once", is_flag=True, help="Catch up on every session, then exit (for cron).")
@click.option(
    "--log-file", type=click.Path(dir_okay=False), help="Append the log here, not to stderr."
)
@click.option("--json-log", is_flag=True, help="One JSON object per log line.")
@click.option("--verbose", "-v", is_flag=True, help="Log every update, not only the news.")
@click.option(
    "--debounce",
    type=click.FloatRange(min=0.0, max=10_000.0),
    default=0.0,
    metavar="MS",
    help="Wait this long after a change for more before updating (changes that arrive "
    "during an update are gathered anyway).",
)
@click.pass_context
@_errors_as_exit_codes
def watch(
    ctx: click.Context,
    once: bool,
    log_file: str | None,
    json_log: bool,
    verbose: bool,
    debounce: float,
) -> None:
    """Keep every session's tiers and the index current as its logs grow.

    Watches chats/*/raw.jsonl and events.jsonl (inotify or FSEvents), whoever writes
    them. One daemon per root; SIGTERM or SIGINT stops it after the current batch.
    A restart resumes where it stopped and catches up on what changed meanwhile.
    """
    import signal

    from ccm.daemon import Daemon, RootLock

    store = _store(ctx)
    handler: logging.Handler = (
        logging.FileHandler(log_file, encoding="utf-8") if log_file else logging.StreamHandler()
    )
    handler.setFormatter(
        _JsonLog() if json_log else logging.Formatter("%(asctime)s %(levelname)s %(message)s")
    )
    watch_log = logging.getLogger("ccm")
    watch_log.addHandler(handler)
    watch_log.setLevel(logging.DEBUG if verbose else logging.INFO)
    watch_log.propagate = False
    lock = RootLock(store)
    lock.acquire()
    try:
        daemon = Daemon(store, debounce=debounce / 1000.0)
        if not once:
            for signum in (signal.SIGTERM, signal.SIGINT):
                signal.signal(signum, lambda *_: daemon.stop())
        daemon.run(follow=not once)
    finally:
        lock.release()
        watch_log.removeHandler(handler)
        handler.close()


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON.")
@click.pass_context
@_errors_as_exit_codes
def status(ctx: click.Context, as_json: bool) -> None:
    """Whether a ccm watch daemon runs for the root, and how far behind it is."""
    from ccm import daemon
    from ccm.index import Index

    store = _store(ctx)
    report = daemon.status(store)
    with Index(store) as index:
        report["recall"] = recall = index.recall_state()
    if as_json:
        _emit_json(report)
        return
    if report["running"]:
        click.echo(f"ccm watch is running (pid {report['pid']}, since {report['started']})")
    else:
        click.echo("no ccm watch is running for this root")
    click.echo(
        f"{report['sessions']} sessions; {report['behind_bytes']} bytes of raw.jsonl not yet "
        f"processed"
        + (f" ({', '.join(report['sessions_behind'])})" if report["sessions_behind"] else "")
    )
    if report["sessions_waiting"]:
        click.echo(
            "manifest.yaml and the index wait for appends to pause: "
            + ", ".join(report["sessions_waiting"])
        )
    if report["last_batch"]:
        click.echo(f"last update: {report['last_batch']}")
    if report["last_error"]:
        click.echo(f"last error: {report['last_error']}")
    if recall["unavailable"]:
        click.echo(f"recall: lexical; recall.semantic is on, but {recall['unavailable']}")
    elif not recall["semantic"]:
        click.echo("recall: lexical (recall.semantic: true in config.yaml adds meaning)")
    else:
        waiting = recall.get("turns", 0) - recall.get("embedded", 0)
        click.echo(
            f"recall: hybrid, with {recall['model']}; {recall.get('embedded', 0)} turns embedded"
            + (f", {waiting} waiting (`ccm rebuild` embeds them now)" if waiting > 0 else "")
        )


# ---------------------------------------------------------------- sleep jobs


@main.command()
@click.option(
    "--session",
    "-s",
    "sessions_",
    multiple=True,
    type=SESSION,
    help="Only this session, read again even if unchanged (repeat for several).",
)
@click.option("--since", metavar="DATE", help="Leave out sessions with no turn from DATE on.")
@click.option("--dry-run", is_flag=True, help="Say what would change; write nothing.")
@click.option(
    "--llm/--no-llm",
    "use_llm",
    default=None,
    help="Have the model of config.yaml's llm section state, title and place the "
    "conclusions of the sessions read (default: as config.yaml says).",
)
@_executor_options("the reading of the sessions")
@click.option("--json", "as_json", is_flag=True, help="Print the sleep report as JSON.")
@click.pass_context
@_errors_as_exit_codes
def consolidate(
    ctx: click.Context,
    sessions_: tuple[str, ...],
    since: str | None,
    dry_run: bool,
    use_llm: bool | None,
    as_json: bool,
    executor: Any,
) -> None:
    """Consolidate conclusions into notes, the graph and a sleep report (nightly).

    Reads the sessions whose raw.jsonl or events.jsonl changed since the last run,
    writes artifacts/<type>/<slug>.md for each conclusion, a note per session,
    network/nodes.json and edges.json, and reports/<date>.md. A second run with
    nothing new writes nothing; a note you edited is never overwritten.

    With --executor processes or dask, each changed session is read (its tiers
    brought up to date, its conclusions and their evidence gathered) as a task of its
    own; the graph, the notes and every write of the vault stay in this process, so the
    result is the same wherever the sessions were read.
    """
    from contextlib import ExitStack

    from ccm import llm
    from ccm.dates import bound as day_bound
    from ccm.sleep.consolidate import consolidate as run

    store = _store(ctx)
    bound = day_bound(since, "--since", end=False)
    with ExitStack() as stack:
        bar: Any = None
        model = stack.enter_context(llm.Model(store, use_llm))

        def start(count: int) -> None:
            nonlocal bar
            if not as_json and count >= 10 and sys.stderr.isatty():
                bar = stack.enter_context(
                    click.progressbar(length=count, label="Consolidating", file=sys.stderr)
                )

        def progress(step: int) -> None:
            if bar is not None:
                bar.update(step)

        report = run(
            store,
            list(sessions_) or None,
            bound,
            dry_run,
            progress=progress,
            start=start,
            model=model if model.asked else None,
            executor=executor,
        )
    if as_json:
        _emit_json(report.as_dict())
        return
    _print_consolidation(report)


def _print_consolidation(report: Any) -> None:
    data = report.as_dict()
    found = data["artifacts"]
    prefix = "Dry run: would write" if report.dry_run else "Wrote"
    if not report.changed:
        click.echo("Nothing new since the last consolidation; no file changed.")
    else:
        click.echo(
            f"Consolidated {len(report.consolidated)} session(s), {report.unchanged} unchanged: "
            f"{len(found['new'])} new and {len(found['changed'])} changed artifact(s), "
            f"{len(found['kept_edits'])} of your edits kept."
        )
        click.echo(
            f"Graph: {report.nodes} conclusions, {report.edges} edges, "
            f"{report.conflicts_total} conflicts ({len(report.new_conflicts)} new)."
        )
        click.echo(f"{prefix} {len(report.written)} file(s).")
    for outcome in found["kept_edits"]:
        click.echo(f"  kept your edit: {outcome['path']}: {outcome.get('detail', '')}")
    for skipped in report.skipped:
        click.echo(f"  skipped {skipped['session']}: {skipped['why']}", err=True)
    if report.llm is not None:
        click.echo(_model_line(report.llm, _distilled(report.llm)), err=True)
    if report.report_path:
        click.echo(f"Report: {report.report_path}")


def _model_line(done: dict[str, Any], did: str) -> str:
    """What the model did in a command (`did`, and `llm.Model.report`'s `done`), in a
    line, or why it was off."""
    if done["off"]:
        return f"model: offline ({done['off']})"
    line = (
        f"model: {done['model']} {did}; {done['requests']} request(s), {done['cached']} "
        f"from the cache, {done['input_tokens']} tokens in, {done['output_tokens']} out"
    )
    if done["offline"]:
        line += f"; {len(done['offline'])} kept offline: {done['offline'][0]}"
    return line


def _distilled(done: dict[str, Any]) -> str:
    """What the model did in a consolidation."""
    return (
        f"stated {done.get('distilled', 0)} conclusion(s), "
        f"settled {done.get('judged', 0)} conflict(s)"
    )


@main.command("export")
@click.option(
    "--layer",
    type=click.IntRange(0, 3),
    default=1,
    help="Leave out every conclusion below this abstraction layer.",
)
@click.argument("folder", type=click.Path(file_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print what was written as JSON.")
@click.pass_context
@_errors_as_exit_codes
def export_(ctx: click.Context, layer: int, folder: str, as_json: bool) -> None:
    """Write a shareable vault: the conclusions on --layer or above, private detail removed.

    From layer 1 up every text goes through redaction (paths, e-mails, keys, hosts,
    identifying numbers); verbatim quotes, summaries and session notes are never
    exported. FOLDER must be empty or hold an earlier export.
    """
    from pathlib import Path

    from ccm.sleep.network import export

    done = export(_store(ctx), layer, Path(folder))
    if as_json:
        _emit_json(
            {
                "folder": str(done.folder),
                "layer": done.layer,
                "notes": done.notes,
                "left_out": done.left_out,
                "removed": done.removed,
            }
        )
        return
    click.echo(
        f"Exported {done.notes} conclusion(s) on layer {done.layer} and up to {done.folder} "
        f"({done.left_out} left out)."
    )


@main.group(invoke_without_command=True)
@click.option("--top", type=click.IntRange(min=1), default=20, help="Conclusions shown.")
@click.option("--json", "as_json", is_flag=True, help="Print the conclusions as JSON.")
@click.pass_context
@_errors_as_exit_codes
def graph(ctx: click.Context, top: int, as_json: bool) -> None:
    """The conclusion graph: the most trusted conclusions, with their edges.

    Built by `ccm consolidate`. Subcommands explain a score or export the graph.
    """
    if ctx.invoked_subcommand is not None:
        return
    from ccm.sleep.network import load

    network = load(_store(ctx))
    ranked = sorted(network.records, key=lambda r: (-float(r["confidence"]), str(r["id"])))[:top]
    edges_of: dict[str, list[Any]] = {}
    for edge in network.edges:
        edges_of.setdefault(edge.source, []).append(("->", edge.type, edge.target, edge))
        edges_of.setdefault(edge.target, []).append(("<-", edge.type, edge.source, edge))
    if as_json:
        _emit_json(
            {
                "nodes": len(network.records),
                "edges": len(network.edges),
                "top": [
                    {
                        **record,
                        "edges": [
                            {
                                "direction": "out" if arrow == "->" else "in",
                                "type": kind,
                                "other": other,
                                "weight": edge.weight,
                                "evidence": edge.evidence,
                            }
                            for arrow, kind, other, edge in edges_of.get(record["id"], [])
                        ],
                    }
                    for record in ranked
                ],
            }
        )
        return
    click.echo(f"{len(network.records)} conclusions, {len(network.edges)} edges")
    for record in ranked:
        text = " ".join(str(record["text"]).split())
        click.echo(
            f"{float(record['confidence']):.2f}  {record['status']:<12} {record['kind']:<12} "
            f"{record['id']}  {text[:80]}"
        )
        for arrow, kind, other, edge in edges_of.get(record["id"], []):
            click.echo(f"      {arrow} {kind} {other} ({edge.weight:.2f})")


@graph.command("explain")
@click.argument("node")
@click.option("--json", "as_json", is_flag=True, help="Print the explanation as JSON.")
@click.pass_context
@_errors_as_exit_codes
def graph_explain(ctx: click.Context, node: str, as_json: bool) -> None:
    """Why a conclusion has its confidence: its supporters, challenges and sessions.

    NODE is an id (ledger-sync/seg_1), an artifact path or its file name.
    """
    from ccm.sleep.network import explained

    found = explained(_store(ctx), node)
    if as_json:
        _emit_json(found)
        return
    click.echo(
        f"{found['id']} · {found['kind']} · {found['status']} · confidence {found['score']:.2f}"
    )
    click.echo(f"  {' '.join(found['text'].split())}")
    click.echo(
        f"  detected with {found['base']:.2f}; status factor {found['factor']:.1f}; "
        f"independent sessions: {', '.join(found['sessions']) or 'none'}"
    )
    click.echo(f"  supported by ({len(found['supporters'])}):")
    for item in found["supporters"]:
        click.echo(
            f"    {item['score']:.2f} x {item['weight']:.2f} {item['id']} via {item['via']} "
            f"(session {item['session']}): {item['evidence']}"
        )
    click.echo(f"  contradictions that failed ({len(found['failed_contradictions'])}):")
    for item in found["failed_contradictions"]:
        click.echo(f"    {item['id']}: {item['evidence']}")
    click.echo(f"  challenged by ({len(found['challenged_by'])}):")
    for item in found["challenged_by"]:
        click.echo(f"    {item['id']} ({item['type']}): {item['evidence']}")


@graph.command("export")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["graphml", "json"]),
    default="graphml",
    help="GraphML (Gephi, yEd, Cytoscape) or one JSON document.",
)
@click.option(
    "--output", "-o", type=click.Path(dir_okay=False), help="Write here (default: stdout)."
)
@click.pass_context
@_errors_as_exit_codes
def graph_export(ctx: click.Context, fmt: str, output: str | None) -> None:
    """Export the conclusion graph with every node's status and confidence."""
    from pathlib import Path

    from ccm.sleep.network import graph_json, load
    from ccm.store import atomic_write

    network = load(_store(ctx))
    if fmt == "json":
        text = json.dumps(graph_json(network), ensure_ascii=False, indent=1) + "\n"
    else:
        import networkx

        from ccm.sleep.graph import to_networkx

        nx_graph = to_networkx(network.nodes, network.edges, network.scores, network.status)
        text = "\n".join(networkx.generate_graphml(nx_graph)) + "\n"
    if output is None:
        click.echo(text, nl=False)
    else:
        atomic_write(Path(output).absolute(), text.encode("utf-8", "surrogatepass"))


if __name__ == "__main__":
    main()
