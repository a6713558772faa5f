"""``ccm install claude-code`` / ``ccm uninstall claude-code``: wire ccm into Claude Code.

Claude Code learns about ccm from two JSON files that it owns and the user edits: its
settings (``hooks``: ``ccm hook EVENT`` at each point of a session's life) and its MCP
configuration (``mcpServers``: ``ccm mcp``). Editing them by hand is error-prone, so this
module does it, with the care a file someone else owns deserves:

* everything already there stays, in its order; only ccm's own entries are touched, and
  they are recognised by what they run, so reinstalling replaces them instead of adding
  a second copy, and installing twice writes nothing the second time;
* a file ccm cannot read is never overwritten: the error names the line to fix;
* before a file is replaced, its bytes go to ``<name>.ccm-backup``; the replacement is
  atomic and keeps the file's permissions (``~/.claude.json`` holds account details);
* uninstall takes out exactly what install put in, and when what is left is what the
  file held before, it writes back the original bytes, formatting and all.

The hooks and the server name the ``ccm`` executable by its absolute path, so they run
even where Claude Code's PATH lacks the virtualenv ccm was installed into.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import wraps
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import click

from ccm.errors import CCMError, UsageError
from ccm.hook import EVENTS

# Claude Code matches SessionStart on how the session began and PreCompact on what
# triggered the compaction ("" matches both manual and auto); the other three events
# take no matcher.
MATCHERS = {"SessionStart": "startup|resume|clear|compact", "PreCompact": ""}
# Seconds before Claude Code gives up on a hook. UserPromptSubmit runs on every prompt, so
# keep it short; the others may first import a long transcript never seen before (a
# hook stopped midway loses nothing: the next one goes on from what was written).
TIMEOUTS = {"UserPromptSubmit": 10}
DEFAULT_TIMEOUT = 30
SERVER = "ccm"
BACKUP_SUFFIX = ".ccm-backup"

Data = dict[str, Any]
P = ParamSpec("P")
R = TypeVar("R")


# -- where and what ---------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """The two files Claude Code reads ccm's entries from, for one scope."""

    settings: Path  # holds "hooks"
    mcp: Path  # holds "mcpServers"


def user_target() -> Target:
    """Every project of this user: ``~/.claude/settings.json`` and ``~/.claude.json``."""
    home = Path.home()
    return Target(home / ".claude" / "settings.json", home / ".claude.json")


def project_target(folder: Path) -> Target:
    """One project, shared through its repository: ``.claude/settings.json`` and ``.mcp.json``."""
    return Target(folder / ".claude" / "settings.json", folder / ".mcp.json")


def ccm_executable() -> str:
    """The absolute path of the running ccm: the script beside this Python first (the one
    that belongs to this install, even if another ccm comes first on PATH), then PATH,
    then the bare name."""
    beside = Path(sys.executable).parent / ("ccm.exe" if os.name == "nt" else "ccm")
    if beside.is_file():
        return str(beside)
    found = shutil.which("ccm")
    return os.path.abspath(found) if found else "ccm"


def _prefix(ccm: str, root: str | None) -> list[str]:
    return [ccm, "--root", root] if root else [ccm]


def hook_command(event: str, ccm: str, root: str | None = None) -> str:
    """The shell command Claude Code runs for `event`."""
    return shlex.join([*_prefix(ccm, root), "hook", event])


def hook_group(event: str, ccm: str, root: str | None = None) -> Data:
    """The matcher group ccm adds under ``hooks[event]``."""
    hook = {
        "type": "command",
        "command": hook_command(event, ccm, root),
        "timeout": TIMEOUTS.get(event, DEFAULT_TIMEOUT),
    }
    group: Data = {"matcher": MATCHERS[event]} if event in MATCHERS else {}
    group["hooks"] = [hook]
    return group


def server_entry(ccm: str, root: str | None = None) -> Data:
    """The server ccm adds as ``mcpServers["ccm"]``."""
    args = ["--root", root, "mcp"] if root else ["mcp"]
    return {"type": "stdio", "command": ccm, "args": args, "env": {}}


def is_ccm_hook(hook: object, event: str) -> bool:
    """Whether `hook` is one ccm added for `event`: a command whose executable is named
    ccm and whose arguments, after an optional ``--root X``, are ``hook EVENT``."""
    if not isinstance(hook, dict) or hook.get("type") != "command":
        return False
    command = hook.get("command")
    if not isinstance(command, str):
        return False
    try:
        argv = shlex.split(command)
    except ValueError:  # unbalanced quotes: someone else's shell line
        return False
    if not argv or Path(argv[0]).name not in ("ccm", "ccm.exe"):
        return False
    rest = argv[1:]
    if rest[:1] == ["--root"]:
        rest = rest[2:]
    return rest == ["hook", event]


# -- the edits, over parsed JSON ----------------------------------------------------------


@dataclass
class Edit:
    """What an edit of one file did to ccm's entries (``hooks.Stop``, ``mcpServers.ccm``)."""

    data: Data
    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)


def _object(data: Data, key: str, path: Path) -> Data:
    value = data.get(key, {})
    if not isinstance(value, dict):
        raise UsageError(
            f'{path}: "{key}" is a {_json_type(value)}, not a JSON object',
            f'make "{key}" an object ({{}}) or remove it; ccm changed nothing',
        )
    return value


def _hooks(settings: Data, path: Path) -> Data:
    hooks = _object(settings, "hooks", path)
    for event in EVENTS:
        groups = hooks.get(event, [])
        if not isinstance(groups, list):
            raise UsageError(
                f'{path}: "hooks.{event}" is a {_json_type(groups)}, not a list of matcher groups',
                "make it a list ([]) or remove it; ccm changed nothing",
            )
    return hooks


def _without_ccm(groups: list[Any], event: str) -> tuple[list[Any], int | None]:
    """`groups` with ccm's hooks taken out (a group left empty goes too), and where the
    first group that held one was, so that a reinstall puts ccm's group back there."""
    kept: list[Any] = []
    first: int | None = None
    for group in groups:
        hooks = group.get("hooks") if isinstance(group, dict) else None
        if not isinstance(hooks, list) or not any(is_ccm_hook(h, event) for h in hooks):
            kept.append(group)
            continue
        if first is None:
            first = len(kept)
        others = [h for h in hooks if not is_ccm_hook(h, event)]
        if others:
            kept.append({**group, "hooks": others})
    return kept, first


def add_hooks(settings: Data, path: Path, ccm: str, root: str | None = None) -> Edit:
    """`settings` with ccm's hook group under each event, replacing an older one in place."""
    hooks = dict(_hooks(settings, path))
    edit = Edit({**settings})
    for event in EVENTS:
        groups: list[Any] = hooks.get(event, [])
        kept, at = _without_ccm(groups, event)
        kept.insert(len(kept) if at is None else at, hook_group(event, ccm, root))
        if at is None:
            edit.added.append(f"hooks.{event}")
        elif kept != groups:
            edit.updated.append(f"hooks.{event}")
        hooks[event] = kept
    edit.data["hooks"] = hooks
    return edit


def remove_hooks(settings: Data, path: Path) -> Edit:
    """`settings` without ccm's hooks; an event, or ``hooks`` itself, that only ccm's
    entries filled is dropped."""
    if "hooks" not in settings:
        return Edit(settings)
    hooks = _hooks(settings, path)
    edit = Edit({**settings})
    left: Data = {}
    for event, groups in hooks.items():
        kept, at = (groups, None) if event not in EVENTS else _without_ccm(groups, event)
        if at is not None:
            edit.removed.append(f"hooks.{event}")
        if kept or at is None:
            left[event] = kept
    if left or not edit.removed:
        edit.data["hooks"] = left
    else:
        del edit.data["hooks"]
    return edit


def add_server(config: Data, path: Path, ccm: str, root: str | None = None) -> Edit:
    """`config` with ccm's MCP server, replacing an older one in place."""
    servers = dict(_object(config, "mcpServers", path))
    edit = Edit({**config})
    wanted = server_entry(ccm, root)
    if SERVER not in servers:
        edit.added.append(f"mcpServers.{SERVER}")
    elif servers[SERVER] != wanted:
        edit.updated.append(f"mcpServers.{SERVER}")
    servers[SERVER] = wanted
    edit.data["mcpServers"] = servers
    return edit


def remove_server(config: Data, path: Path) -> Edit:
    """`config` without ccm's MCP server; ``mcpServers`` goes too if nothing is left."""
    servers = _object(config, "mcpServers", path)
    if SERVER not in servers:
        return Edit(config)
    edit = Edit({**config}, removed=[f"mcpServers.{SERVER}"])
    left = {name: entry for name, entry in servers.items() if name != SERVER}
    if left:
        edit.data["mcpServers"] = left
    else:
        del edit.data["mcpServers"]
    return edit


# -- the files ----------------------------------------------------------------------------


@dataclass
class FileChange:
    """What happened (or, in a dry run, would happen) to one file."""

    path: Path
    action: str  # created, updated, removed (the file), unchanged
    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    backup: Path | None = None  # written before the file was replaced or removed

    def as_dict(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "action": self.action,
            "added": self.added,
            "updated": self.updated,
            "removed": self.removed,
            "backup": str(self.backup) if self.backup else None,
        }


@dataclass
class Report:
    """What ``ccm install`` / ``ccm uninstall`` did, file by file."""

    files: list[FileChange]
    dry_run: bool = False

    @property
    def changed(self) -> list[FileChange]:
        return [f for f in self.files if f.action != "unchanged"]

    @property
    def backups(self) -> list[Path]:
        return [f.backup for f in self.files if f.backup]

    def as_dict(self) -> dict[str, Any]:
        return {"dry_run": self.dry_run, "files": [f.as_dict() for f in self.files]}


def backup_path(path: Path) -> Path:
    return path.with_name(path.name + BACKUP_SUFFIX)


def _json_type(value: object) -> str:
    names = {dict: "JSON object", list: "list", str: "string", bool: "boolean", type(None): "null"}
    return names.get(type(value), "number")


def _parse(raw: bytes, path: Path) -> Data:
    """The JSON object in `raw`; an empty file counts as an empty object."""
    if not raw.strip():
        return {}
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise UsageError(
            f"{path}:{exc.lineno}:{exc.colno}: not valid JSON ({exc.msg})",
            "fix the file at that line (or move it away) and run the command again; "
            "ccm changed nothing",
        ) from exc
    except UnicodeDecodeError as exc:
        raise UsageError(
            f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})",
            "save it as UTF-8 and run the command again; ccm changed nothing",
        ) from exc
    if not isinstance(data, dict):
        raise UsageError(
            f"{path}: the top level is a {_json_type(data)}, not a JSON object",
            "Claude Code expects an object ({...}); fix it and run the command again; "
            "ccm changed nothing",
        )
    return data


def _dump(data: Data) -> bytes:
    return (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode()


def _write(path: Path, data: bytes, mode: int | None) -> None:
    """Replace `path` atomically; with `mode`, the new file never has wider permissions
    than the old one had, not even for a moment."""
    from ccm.store import atomic_write

    if mode is None:
        atomic_write(path, data)
        return
    umask = os.umask(0o077)
    try:
        atomic_write(path, data)
    finally:
        os.umask(umask)
    os.chmod(path, mode)


def _real(path: Path) -> Path:
    """A settings file linked from a dotfiles folder is edited where it lives, so the
    link survives."""
    return path.resolve() if path.is_symlink() else path


@dataclass
class _Plan:
    """One file's change, worked out before anything is written."""

    change: FileChange
    raw: bytes | None  # the file's bytes now; None if it does not exist
    out: bytes | None  # what to write; None to remove the file


def _plan(path: Path, edit: Callable[[Data, Path], Edit], uninstall: bool = False) -> _Plan:
    """Run `edit` on the file at `path`. An uninstall looks for a backup that holds the
    file as it was before ccm (none of ccm's entries, and the same data as the result up
    to empty objects and lists) and writes its bytes back; a file left empty that no such
    backup explains is removed."""
    path = _real(path)
    raw = path.read_bytes() if path.exists() else None
    data = _parse(raw, path) if raw is not None else {}
    done = edit(data, path)
    change = FileChange(path, "unchanged", done.added, done.updated, done.removed)
    out: bytes | None = _dump(done.data)
    if (raw is not None and done.data == data) or (raw is None and uninstall):
        return _Plan(change, raw, raw)
    if uninstall:
        original = _original(path, done.data, edit)
        out = original if original is not None else (out if done.data else None)
    change.action = "created" if raw is None else "updated" if out is not None else "removed"
    return _Plan(change, raw, out)


def _commit(plan: _Plan) -> None:
    """Back the file up, then replace or remove it."""
    path, change = plan.change.path, plan.change
    if change.action == "unchanged":
        return
    mode = None
    if plan.raw is not None:
        mode = path.stat().st_mode & 0o777
        change.backup = backup_path(path)
        _write(change.backup, plan.raw, mode)
    if plan.out is None:
        path.unlink()
    else:
        _write(path, plan.out, mode)


def _run(plans: Callable[[], list[_Plan]], dry_run: bool) -> Report:
    """Write only once every file has been read and checked: an unreadable file stops
    the command before it changes anything."""
    try:
        planned = plans()
        if not dry_run:
            for plan in planned:
                _commit(plan)
    except OSError as exc:
        raise CCMError(
            f"{exc.filename}: {exc.strerror}",
            "check the permissions of that file and its folder, then run the command again",
        ) from exc
    return Report([plan.change for plan in planned], dry_run)


def _original(path: Path, result: Data, undo: Callable[[Data, Path], Edit]) -> bytes | None:
    """The backup's bytes if they hold what `result` holds, from before ccm was added."""
    backup = backup_path(path)
    if not backup.is_file():
        return None
    raw = backup.read_bytes()
    try:
        before = _parse(raw, backup)
        clean = not undo(before, backup).removed
    except UsageError:
        return None
    return raw if clean and _pruned(before) == _pruned(result) else None


def _pruned(data: Data) -> Data:
    """`data` without the empty objects and lists an uninstall drops and cannot tell
    from ones that were there before."""
    out = dict(data)
    hooks = out.get("hooks")
    if isinstance(hooks, dict):
        out["hooks"] = {event: groups for event, groups in hooks.items() if groups != []}
    return {k: v for k, v in out.items() if not (k in ("hooks", "mcpServers") and v == {})}


def install_claude_code(
    target: Target, ccm: str, root: str | None = None, dry_run: bool = False
) -> Report:
    """Add ccm's hooks and MCP server to Claude Code's files for `target`."""
    return _run(
        lambda: [
            _plan(target.settings, lambda d, p: add_hooks(d, p, ccm, root)),
            _plan(target.mcp, lambda d, p: add_server(d, p, ccm, root)),
        ],
        dry_run,
    )


def uninstall_claude_code(target: Target, dry_run: bool = False) -> Report:
    """Take ccm's hooks and MCP server out of Claude Code's files for `target`."""
    return _run(
        lambda: [
            _plan(target.settings, remove_hooks, uninstall=True),
            _plan(target.mcp, remove_server, uninstall=True),
        ],
        dry_run,
    )


# -- the commands -------------------------------------------------------------------------


def _click_errors(func: Callable[P, R]) -> Callable[P, R]:
    """ccm's errors as click's, by the CLI's own converter; imported on call because
    ccm.cli imports this module."""

    @wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        from ccm.cli import _errors_as_exit_codes

        return _errors_as_exit_codes(func)(*args, **kwargs)

    return wrapper


def _scope_options(func: Callable[P, R]) -> Callable[P, R]:
    options = [
        click.option("--user", is_flag=True, help="For every project: ~/.claude/ (the default)."),
        click.option(
            "--project",
            type=click.Path(exists=True, file_okay=False, path_type=Path),
            metavar="DIR",
            help="For one project: DIR/.claude/settings.json and DIR/.mcp.json.",
        ),
        click.option("--dry-run", is_flag=True, help="Say what would change; write nothing."),
        click.option("--json", "as_json", is_flag=True, help="Print the report as JSON."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def _target(user: bool, project: Path | None) -> Target:
    if user and project is not None:
        raise UsageError("--user and --project are exclusive", "pass one of them")
    return project_target(project.absolute()) if project is not None else user_target()


def _root(ctx: click.Context) -> str | None:
    """The main command's ``--root`` (CCM_HOME folded in), made absolute: Claude Code
    runs hooks from the project's folder, not from here."""
    root = (ctx.find_root().obj or {}).get("root")
    return str(Path(root).expanduser().absolute()) if root else None


def _entries(labels: list[str]) -> str:
    """``hooks.Stop``, ``mcpServers.ccm`` as a person reads them."""
    events = [label.removeprefix("hooks.") for label in labels if label.startswith("hooks.")]
    servers = [label.removeprefix("mcpServers.") for label in labels if label.startswith("mcp")]
    parts = [f"hooks {', '.join(events)}"] if events else []
    return "; ".join(parts + [f"MCP server {name}" for name in servers])


def _print(report: Report, as_json: bool, next_step: str) -> None:
    if as_json:
        click.echo(json.dumps(report.as_dict(), ensure_ascii=False, indent=2))
        return
    verbs = (
        ("would add", "would update", "would remove")
        if report.dry_run
        else ("added", "updated", "removed")
    )
    for change in report.files:
        lines = [
            f"{verb} {_entries(labels)}"
            for verb, labels in zip(
                verbs, (change.added, change.updated, change.removed), strict=True
            )
            if labels
        ]
        if change.action == "unchanged":
            lines = ["nothing to change"]
        elif change.action == "created":
            lines.append("would create the file" if report.dry_run else "new file")
        elif change.action == "removed":
            lines.append(
                "would remove the file, nothing else is in it"
                if report.dry_run
                else "file removed, nothing else was in it"
            )
        if change.backup:
            lines.append(f"backup in {change.backup}")
        click.echo(f"{change.path}: {'; '.join(lines)}")
    if report.dry_run:
        click.echo("Dry run: nothing was written.")
    elif report.changed:
        click.echo(next_step)


@click.group()
def install() -> None:
    """Connect ccm to an agent, so that it remembers on its own."""


@install.command("claude-code")
@_scope_options
@click.pass_context
@_click_errors
def _install_claude_code(
    ctx: click.Context, user: bool, project: Path | None, dry_run: bool, as_json: bool
) -> None:
    """Add ccm's hooks and MCP server to Claude Code's settings.

    The hooks run `ccm hook EVENT` at SessionStart, UserPromptSubmit, PreCompact, Stop
    and SessionEnd; the server runs `ccm mcp`. Everything else in the files stays as it
    is; each file is backed up to <name>.ccm-backup first. Running it again changes
    nothing; `ccm uninstall claude-code` takes it all out.
    """
    target = _target(user, project)
    report = install_claude_code(target, ccm_executable(), _root(ctx), dry_run)
    step = "Next: restart Claude Code; inside it, /hooks lists the hooks and /mcp the ccm server."
    if project is not None:
        step += " Claude Code asks once whether to use the servers of .mcp.json."
    _print(report, as_json, step)


@click.group()
def uninstall() -> None:
    """Disconnect ccm from an agent."""


@uninstall.command("claude-code")
@_scope_options
@_click_errors
def _uninstall_claude_code(user: bool, project: Path | None, dry_run: bool, as_json: bool) -> None:
    """Take ccm's hooks and MCP server out of Claude Code's settings.

    Only ccm's own entries go; when the file is then what it was before the install, its
    original bytes are written back. Knowledge under the root is not touched.
    """
    report = uninstall_claude_code(_target(user, project), dry_run)
    _print(report, as_json, "Next: restart Claude Code to stop ccm's hooks and server.")
