"""The ``ccm`` command line: it parses arguments, calls the library, prints results.

Exit codes: 0 ok, 1 error (``Error: ...`` on stderr), 2 usage error. Only click is
imported at start-up so that ``ccm --version`` stays instant; each command imports
what it needs.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Callable
from functools import wraps
from typing import TYPE_CHECKING, Any, TypeVar

import click

from ccm import __version__

if TYPE_CHECKING:
    from ccm.store import Store

F = TypeVar("F", bound=Callable[..., Any])
PROGRESS_MIN_BYTES = 8 * 1024 * 1024


def _setup_logging() -> None:
    level = os.environ.get("CCM_LOG_LEVEL", "WARNING").upper()
    logging.basicConfig(
        level=getattr(logging, level, logging.WARNING),
        format="%(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )


def _store(ctx: click.Context) -> Store:
    """The store for ``--root`` (or CCM_HOME, or ~/.knowledge), built on first use."""
    from ccm import tokens
    from ccm.store import Store

    obj = ctx.find_root().ensure_object(dict)
    if "store" not in obj:
        store = Store(obj.get("root"))
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


def _emit_json(data: Any) -> None:
    click.echo(json.dumps(data, ensure_ascii=False, indent=2))


def _fail(messages: list[str]) -> None:
    for message in messages:
        click.echo(f"Error: {message}", err=True)
    sys.exit(1)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="ccm")
@click.option(
    "--root",
    type=click.Path(file_okay=False),
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
    type=click.Choice(["auto", "jsonl", "claude-code", "chatgpt", "anthropic"]),
    default="auto",
    show_default=True,
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
    show_default=True,
    help="Update the manifest, open and working tiers of the sessions that changed.",
)
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
    total = sum(item.size for item in expand_inputs(paths))
    show_bar = not as_json and total >= PROGRESS_MIN_BYTES and sys.stderr.isatty()
    if show_bar:
        with click.progressbar(length=total, label="Importing", file=sys.stderr) as bar:
            report = run_ingest(
                store, paths, fmt, session, thinking, progress=bar.update, derive=derive
            )
    else:
        report = run_ingest(store, paths, fmt, session, thinking, derive=derive)
    if as_json:
        _emit_json(report.as_dict())
    else:
        _print_ingest(report)
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
@click.argument("sessions_", metavar="[SESSION]...", nargs=-1)
@click.option("--json", "as_json", is_flag=True, help="Print what was rebuilt as JSON.")
@click.pass_context
@_errors_as_exit_codes
def rebuild(ctx: click.Context, sessions_: tuple[str, ...], as_json: bool) -> None:
    """Regenerate the derived tiers from raw.jsonl and events.jsonl (all sessions by default).

    The result is byte for byte what the incremental updates produce.
    """
    from ccm import derive

    store = _store(ctx)
    chosen = list(sessions_) or store.sessions()
    results = []
    for session in chosen:
        derived = derive.update(store, session, rebuild=True)
        segments = derived.tiers.manifest["segments"]
        results.append(
            {
                "session": session,
                "turns": derived.turns_folded,
                "segments": len(segments),
                "open_efforts": len(derived.tiers.open["efforts"]),
                "written": derived.written,
            }
        )
    if as_json:
        _emit_json(results)
        return
    for item in results:
        changed = ", ".join(item["written"]) or "unchanged"
        click.echo(
            f"{item['session']}: {item['turns']} turns, {item['segments']} segments, "
            f"{item['open_efforts']} open efforts ({changed})"
        )


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
@click.argument("session")
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
    if as_json:
        _emit_json(chosen)
    else:
        for turn in chosen:
            tool = f" {turn['tool'].get('name', '')}" if turn.get("tool") else ""
            click.echo(f"[{turn['turn']}] {turn['role']}{tool} · {_short_ts(turn['ts'])}")
            click.echo(turn["content"])
            click.echo()
    if bad:
        store.quarantine(session, bad)
        _fail([f"{b.describe()}; the line is kept in quarantine.jsonl" for b in bad])


if __name__ == "__main__":
    main()
