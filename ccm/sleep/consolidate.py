"""`ccm consolidate`: the nightly sleep job, from sessions to a vault of notes and a graph.

One run:

1. finds the sessions whose raw.jsonl or events.jsonl changed since the last run (size,
   mtime, inode, kept in ``.ccm/sleep.state``), brings their tiers up to date and reads
   what consolidation needs of them (segments, conclusions, the quoted turns); the
   other sessions come from the cache;
2. builds the conclusion graph of every consolidated session (`graph.relink`: only the
   conclusions a change touched are compared again), settles
   its conflicts (`graph.resolve`), lets confidence flow to its fixed point
   (`graph.propagate`) and places each conclusion on the abstraction ladder;
3. renders every note (artifacts, session notes) and writes those whose text changed,
   never over a person's edit: a note whose content hash no longer matches is the
   person's, and only gains the new sources in its frontmatter;
4. writes ``network/nodes.json`` and ``network/edges.json`` when they changed, and a
   report ``reports/<date>.md`` when anything was consolidated.

With nothing new, a run writes nothing at all.
"""

from __future__ import annotations

import logging
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ccm import llm, schemas
from ccm.engine import conclusions
from ccm.errors import CCMError, SchemaError
from ccm.executors import Executor, run_map, store_at, where
from ccm.sleep import artifacts, notes, vault
from ccm.sleep.artifacts import Graph, SegmentRecord, SessionRecord
from ccm.sleep.graph import Edge, Linked, candidates, propagate, relink, resolve
from ccm.store import Store

log = logging.getLogger(__name__)

CHANGES_SHOWN = 10  # confidence changes listed in a report
MIN_CHANGE = 0.005


@dataclass
class Outcome:
    """What happened to one note."""

    path: str  # relative to the root, with .md
    action: str  # new, changed, restored, merged, kept, unreadable, removed
    node: str | None = None
    detail: str = ""

    def as_dict(self) -> dict[str, Any]:
        found: dict[str, Any] = {"path": self.path, "action": self.action}
        if self.node is not None:
            found["id"] = self.node
        if self.detail:
            found["detail"] = self.detail
        return found


@dataclass
class Report:
    """The run, for the sleep report and `--json`."""

    date: str
    run_at: str
    dry_run: bool
    consolidated: list[str] = field(default_factory=list)
    unchanged: int = 0
    removed: list[str] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)
    outcomes: list[Outcome] = field(default_factory=list)
    nodes: int = 0
    edges: int = 0
    edge_types: dict[str, int] = field(default_factory=dict)
    statuses: dict[str, int] = field(default_factory=dict)
    layers: dict[str, int] = field(default_factory=dict)
    sweeps: int = 0
    converged: bool = True
    conflicts_total: int = 0
    new_conflicts: list[dict[str, Any]] = field(default_factory=list)
    confidence_changes: list[dict[str, Any]] = field(default_factory=list)
    network_written: list[str] = field(default_factory=list)
    report_path: str | None = None
    written: list[str] = field(default_factory=list)
    titles: dict[str, str] = field(default_factory=dict)  # node id -> title, for the report
    paths: dict[str, str] = field(default_factory=dict)  # node id -> vault path
    # what the model did, when one was asked (`ccm.llm.Model.report`), with how many
    # conclusions it stated ("distilled") and conflicts it settled ("judged")
    llm: dict[str, Any] | None = None

    @property
    def changed(self) -> bool:
        return bool(self.consolidated or self.removed or self.written)

    def notes_by(self, action: str, artifact: bool | None = None) -> list[Outcome]:
        return [
            o
            for o in self.outcomes
            if o.action == action
            and (artifact is None or o.path.startswith("artifacts/") == artifact)
        ]

    def as_dict(self) -> dict[str, Any]:
        def listed(action: str, artifact: bool) -> list[dict[str, Any]]:
            return [
                {**o.as_dict(), "title": self.titles.get(o.node or "", "")}
                if artifact
                else o.as_dict()
                for o in self.notes_by(action, artifact)
            ]

        return {
            "date": self.date,
            "run_at": self.run_at,
            "dry_run": self.dry_run,
            "sessions": {
                "consolidated": self.consolidated,
                "unchanged": self.unchanged,
                "removed": self.removed,
                "skipped": self.skipped,
            },
            "artifacts": {
                "new": listed("new", True),
                "changed": listed("changed", True) + listed("restored", True),
                "removed": [o.as_dict() for o in self.notes_by("removed", True)],
                "kept_edits": [
                    o.as_dict()
                    for o in self.outcomes
                    if o.action in ("merged", "kept", "unreadable")
                ],
                "total": self.nodes,
            },
            "session_notes": {
                "new": len(self.notes_by("new", False)),
                "changed": len(self.notes_by("changed", False))
                + len(self.notes_by("restored", False)),
            },
            "network": {
                "nodes": self.nodes,
                "edges": self.edges,
                "edge_types": self.edge_types,
                "statuses": self.statuses,
                "layers": self.layers,
                "sweeps": self.sweeps,
                "converged": self.converged,
                "written": self.network_written,
            },
            "conflicts": {"total": self.conflicts_total, "new": self.new_conflicts},
            "confidence_changes": self.confidence_changes,
            "report": self.report_path,
            "files_written": len(self.written),
        } | ({"llm": self.llm} if self.llm is not None else {})


# ---------------------------------------------------------------- reading sessions


def _read_session(
    root: Store | str, session: str, dry_run: bool, asking: bool = False
) -> tuple[SessionRecord, dict[int, str]] | str:
    """The map of a run, one task per session (see `ccm.executors`): the session's tiers
    brought up to date (written under its lock, as every writer of a session's tiers
    does) and its record; with `asking`, also its concluded segments' turns as a model
    reads them (`llm.as_read`), for `llm.distil`, which runs where the run does. Or why
    the session was skipped. A worker is given the root's path and opens it itself."""
    from ccm import derive

    store = store_at(root)
    if not store.raw_path(session).exists():
        return "no raw.jsonl"
    if dry_run:
        if not (store.session_dir(session) / "manifest.yaml").exists():
            return "not derived yet (a run without --dry-run derives it)"
        manifest = store.read_derived(session, "manifest.yaml", "manifest")
    else:
        manifest = derive.update(store, session).tiers.manifest
    wanted = artifacts.evidence_turns(manifest)
    read = _concluded_turns(manifest) if asking and not dry_run else set()  # what a model reads
    said: dict[int, str] = {}
    turns: dict[int, dict[str, Any]] = {}
    first_ts = last_ts = title = source = parent = opening = None
    for line in store.scan_turns(session):
        turn = line.record
        if turn is None:
            continue
        first_ts = first_ts or turn["ts"]
        last_ts = turn["ts"]
        meta = turn.get("meta") or {}
        title = title or meta.get("title")
        parent = parent or meta.get("parent_session")
        if opening is None and turn["role"] == "user" and not meta.get("injected"):
            opening = str(turn["content"])
        source = source or turn.get("source")
        if turn["turn"] in wanted:
            turns[turn["turn"]] = turn
        if turn["turn"] in read:
            said[turn["turn"]] = llm.as_read(turn)
    # a session with no title of its own (Claude Code, a subagent) is named after what
    # it was asked first
    title = title or (artifacts.request_title(opening) if opening else None)
    record = artifacts.session_record(
        manifest, turns, title, source, first_ts, last_ts, str(parent) if parent else None
    )
    return record, said


def _noted(segment: Mapping[str, Any]) -> bool:
    """Whether a segment's conclusion gets a note: it concluded (also when superseded
    since), or it ends on an agent's report of a fix (`conclusions.reported`)."""
    found = segment.get("conclusion")
    if not found:
        return False
    status = segment.get("status")
    return status in ("concluded", "superseded") or (
        status == "open" and not found.get("retracted_by") and conclusions.reported(found)
    )


def _concluded_turns(manifest: dict[str, Any]) -> set[int]:
    """The turns of the segments whose conclusions a model states (`llm.distil`)."""
    return {
        n
        for s in manifest.get("segments", [])
        if _noted(s)
        for n in range(int(s["raw_lines"][0]), int(s["raw_lines"][1]) + 1)
    }


def _last_ts(store: Store, session: str) -> str:
    tail = store.tail_turns(session, 1)
    return str(tail[0]["ts"]) if tail else ""


# ---------------------------------------------------------------- the run


def consolidate(
    store: Store,
    sessions: Sequence[str] | None = None,
    since: str | None = None,
    dry_run: bool = False,
    progress: Callable[[int], None] | None = None,
    start: Callable[[int], None] | None = None,
    now: datetime | None = None,
    model: llm.Model | None = None,
    executor: Executor | None = None,
) -> Report:
    """Consolidate what changed since the last run; see the module docstring.

    `model`: the model asked (`llm.Model.asked`); where it is on, it states, titles
    and places the conclusions of the sessions read (`llm.distil`) and settles the
    conflicts (`llm.judge`); the report says what it did and cost, or why it was off.

    `sessions` forces those sessions to be read again (and only those, but for any
    the last run's state does not hold: a lost state costs one full run); `since`
    (an ISO date or time) leaves out sessions whose last turn is older. `start` is
    called with the number of sessions to read, `progress` after each one.

    `executor`: where the sessions are read (`ccm.executors`; here by default). The
    graph, the notes and every write stay in this process, so the vault is the same
    wherever they were read.
    """
    if dry_run:
        return _run(store, sessions, since, True, progress, start, now, model, executor)
    with vault.run_lock(store):
        return _run(store, sessions, since, False, progress, start, now, model, executor)


def _run(
    store: Store,
    sessions: Sequence[str] | None,
    since: str | None,
    dry_run: bool,
    progress: Callable[[int], None] | None,
    start: Callable[[int], None] | None,
    now: datetime | None,
    model: llm.Model | None = None,
    executor: Executor | None = None,
) -> Report:
    moment = (now or datetime.now(UTC)).astimezone(UTC)
    report = Report(
        date=moment.strftime("%Y-%m-%d"),
        run_at=moment.isoformat(timespec="seconds").replace("+00:00", "Z"),
        dry_run=dry_run,
    )
    if model is not None:  # filled in again once the graph is settled
        report.llm = {**model.report(), "distilled": 0, "judged": 0}
    distilled = 0
    root = store.root
    state = vault.load_state(store)
    cached: dict[str, Any] = dict(state.get("sessions", {}))  # a copy: `state` is compared
    present = store.sessions()
    for name in sessions or ():
        store.require_session(name)
    # with `sessions`, those are read again, and the others only when the state has
    # nothing of them (it was lost): the graph is always of every session
    forced = set(sessions or ())
    chosen = present if not sessions else [s for s in present if s in forced or s not in cached]
    to_read: list[str] = []
    signatures: dict[str, list[int]] = {}
    moved = False  # a session's sources are the same bytes under a new signature
    for session in chosen:
        signatures[session] = vault.signature(store, session)
        entry = cached.get(session)
        stale = entry is None or (
            not sessions and not vault.same_sources(store, session, entry, signatures[session])
        )
        if entry is not None and not stale and entry.get("signature") != signatures[session]:
            # the same bytes in a moved or restored root: remember the new signature
            cached[session] = {**entry, "signature": signatures[session]}
            moved = True
        if session in forced or stale:
            if since and _last_ts(store, session)[: len(since)] < since:
                report.skipped.append({"session": session, "why": f"no turn since {since}"})
                continue
            to_read.append(session)
    report.removed = sorted(s for s in cached if s not in present)
    records: dict[str, SessionRecord] = {
        s: entry["record"] for s, entry in cached.items() if s in present
    }
    new_cache = {s: cached[s] for s in records}
    if start is not None:
        start(len(to_read))
    judging = model.model if model is not None and model.on else None  # who settles conflicts
    if (
        not to_read
        and not moved
        and not report.removed
        and not sessions
        and state.get("judged_by") == judging
        and _as_left(root, state)
    ):
        # nothing new, and the notes and network files are where the last run left
        # them: the graph would be the same, so it is not built again
        _summarize(report, state["summary"])
        report.unchanged = len(records)
        report.paths = dict(state.get("paths", {}))
        return report
    asking = model is not None and model.on and not dry_run
    calls = [(where(store, executor), session, dry_run, asking) for session in to_read]
    read_all = run_map(_read_session, calls, executor, progress)
    for session, read in zip(to_read, read_all, strict=True):
        if isinstance(read, str):
            report.skipped.append({"session": session, "why": read})
            records.pop(session, None)
            new_cache.pop(session, None)
        else:
            record, said = read
            if asking and model is not None:
                distilled += llm.distil(model, record, said)
            records[session] = record
            new_cache[session] = {
                "signature": signatures[session],
                "probes": vault.probes(store, session, signatures[session]),
                "record": record,
            }
            report.consolidated.append(session)
    report.unchanged = len(records) - len(report.consolidated)

    segments = artifacts.segments_by_node(records.values())
    graph, linked = _settle(store, records, segments, state, model)
    if model is not None:
        judged = sum(c.judged for c in graph.conflicts)
        report.llm = {**model.report(), "distilled": distilled, "judged": judged}
    summary = {
        "nodes": len(graph.nodes),
        "edges": len(graph.edges),
        "edge_types": dict(sorted(Counter(e.type for e in graph.edges).items())),
        "statuses": dict(sorted(Counter(graph.status.values()).items())),
        "layers": {str(k): v for k, v in sorted(Counter(graph.layers.values()).items())},
        "sweeps": graph.sweeps,
        "converged": graph.converged,
    }
    _summarize(report, summary)
    report.paths = dict(graph.paths)

    network = _network(graph, state.get("lines", {}))
    lost = {loser: [c.winner, c.reason] for loser, c in graph.lost_to.items()}
    fresh = set(report.consolidated)
    near = _near_changes(graph, state, network, lost, fresh)
    pending = _notes(records, segments, graph, fresh, near, state.get("notes", {}))
    files: dict[str, bytes] = {}
    note_hashes = _sync(root, pending, state.get("notes", {}), report, files)
    reused = {path + ".md" for path in graph.paths.values()}
    gone = sorted(p + ".md" for p in graph.retired if p + ".md" not in reused)
    for path in gone:
        report.outcomes.append(
            Outcome(path, "removed", graph.retired[path[: -len(".md")]], "its conclusion is gone")
        )
    for relative, (schema, data, encoded, _) in network.items():
        if vault.read_bytes(root / relative) != encoded:
            why = schemas.problem(schema, data)
            if why is not None:
                raise SchemaError(root / relative, None, f"refusing to write: {why}")
            files[relative] = encoded
            report.network_written.append(relative)
    _conflicts(graph, state, report)
    _changes(graph, state, report)
    named = {o.node for o in report.outcomes if o.node in graph.nodes}
    named.update(c["id"] for c in report.confidence_changes)
    named.update(i for c in report.new_conflicts for i in (c["winner"], c["loser"]))
    report.titles = {i: graph.label(i) for i in sorted(named)}
    report.written = sorted([*files, *gone])

    if dry_run:
        return report
    if report.changed:
        report.report_path = f"reports/{report.date}.md"
        from ccm.sleep.report import markdown

        previous = vault.read_text(root, report.report_path)
        text = markdown(report)
        if previous:
            text = previous.rstrip("\n") + "\n\n---\n\n" + text.split("\n", 2)[2]
        files[report.report_path] = text.encode("utf-8", "surrogatepass")
        report.written = sorted([*files, *gone])
    vault.write_files(root, files)
    vault.remove(root, gone)
    new_state = {
        "format": vault.STATE_FORMAT,
        "sessions": new_cache,
        "paths": graph.paths,
        "notes": note_hashes,
        "confidence": {i: round(s, 6) for i, s in graph.scores.items()},
        "conflicts": sorted(_conflict_key(c) for c in graph.conflicts),
        "link": _link_state(linked),
        "summary": summary,
        "network": {relative: vault.stat_signature(root / relative) for relative in network},
        "lines": {relative: found[3] for relative, found in network.items()},
        "lost": lost,
        "judged_by": judging,
    }
    if new_state != state:
        vault.save_state(store, new_state)
    return report


def _as_left(root: Any, state: dict[str, Any]) -> bool:
    """Whether the last run's notes all exist and its network files are untouched."""
    network = state.get("network")
    if not isinstance(network, dict) or not isinstance(state.get("summary"), dict):
        return False
    if any(vault.stat_signature(root / relative) != sig for relative, sig in network.items()):
        return False
    return all(vault.exists(root, path) for path in state.get("notes", {}))


def _summarize(report: Report, summary: dict[str, Any]) -> None:
    report.nodes, report.edges = summary["nodes"], summary["edges"]
    report.edge_types, report.statuses = summary["edge_types"], summary["statuses"]
    report.layers = summary["layers"]
    report.sweeps, report.converged = summary["sweeps"], summary["converged"]


def _link_memo(state: dict[str, Any]) -> dict[str, Linked]:
    """What the last run's `relink` remembered, as `relink` takes it (empty when the
    state has none or a damaged one: the graph is then linked from scratch)."""
    try:
        return {
            node_id: Linked(
                digest,
                tuple(terms),
                tuple(candidates),
                tuple(Edge(*edge) for edge in edges),
            )
            for node_id, (digest, terms, candidates, edges) in state.get("link", {}).items()
        }
    except (TypeError, ValueError, AttributeError):
        log.info("the remembered conclusion graph is unreadable; linking it from scratch")
        return {}


def _link_state(linked: dict[str, Linked]) -> dict[str, list[Any]]:
    return {
        node_id: [
            memo.digest,
            memo.terms,
            memo.candidates,
            [[e.source, e.target, e.type, e.evidence, e.weight] for e in memo.edges],
        ]
        for node_id, memo in linked.items()
    }


def _settle(
    store: Store,
    records: dict[str, SessionRecord],
    segments: dict[str, SegmentRecord],
    state: dict[str, Any],
    model: llm.Model | None = None,
) -> tuple[Graph, dict[str, Linked]]:
    """The graph of every session's conclusions, its conflicts settled (with `model`'s
    judgement where it gives one) and its confidence propagated."""
    nodes = [node for s in sorted(records) for node in artifacts.nodes_of(records[s])]
    edges, linked = relink(nodes, _link_memo(state))
    judged = llm.judge(model, candidates(nodes, edges)) if model is not None else {}
    settled = resolve(nodes, edges, judged)
    scores = propagate(nodes, edges, settled.status)
    # a note for each conclusion a segment reached, also one a later one superseded, and
    # an agent's report of a fix its user did not confirm (what was done is kept)
    concluded = [n for n in nodes if _noted(segments[n.id])]
    known: dict[str, str] = state.get("paths") or vault.scan_artifacts(store.root)
    retired = _retired(store, known, concluded, records)

    def owner(path: str) -> str | None:
        return None if path in retired else vault.owner(store.root, path)

    titles = artifacts.titles_of(segments)
    paths = artifacts.assign_paths(concluded, known, owner, titles)
    graph = Graph(
        nodes={n.id: n for n in nodes},
        edges=edges,
        status=settled.status,
        scores=scores.score,
        conflicts=settled.conflicts,
        paths=paths,
        sweeps=scores.sweeps,
        converged=scores.converged,
        layers=artifacts.layers_of(segments),
        retired=retired,
        titles=titles,
    )
    return graph, linked


def _retired(
    store: Store,
    known: dict[str, str],
    concluded: list[Any],
    records: dict[str, SessionRecord],
) -> dict[str, str]:
    """Artifacts ccm wrote for a conclusion its session no longer has, or has as
    another kind (another folder), and that nobody edited: vault path -> node id.
    They are deleted, so that the vault is the one a first run would write; a
    session gone from chats/ keeps its notes."""
    kinds = {node.id: node.kind for node in concluded}
    found: dict[str, str] = {}
    for node_id, path in known.items():
        kind = kinds.get(node_id)
        if kind is not None and path.startswith(f"artifacts/{kind}/"):
            continue
        if node_id.rpartition("/")[0] not in records:
            continue
        text = vault.read_text(store.root, path + ".md")
        if text is not None and notes.is_pristine(text) and vault.note_id(text) == node_id:
            found[path] = node_id
    return found


@dataclass
class _Note:
    """A note to bring up to date: rendered only when its inputs changed."""

    path: str
    node: str | None
    key: str  # digest of what the note shows of the graph
    fresh: bool  # its session was read in this run
    make: Callable[[], tuple[str, list[dict[str, Any]]]]


def _near_changes(
    graph: Graph,
    state: dict[str, Any],
    network: dict[str, tuple[str, dict[str, Any], bytes, dict[tuple[Any, ...], str]]],
    lost: dict[str, list[str]],
    fresh: set[str],
) -> set[str] | None:
    """The nodes whose notes may show something new: those whose network item (text,
    time, status, confidence, layer, path...) differs from the last run's, that gained
    or lost an edge or whose conflict reads otherwise, those of sessions read again
    (their segments' turns), and every neighbour of these. None when the last run left
    no network items: then every note's inputs are worked out."""
    lines = state.get("lines")
    if not isinstance(lines, dict) or not isinstance(state.get("lost"), dict):
        return None
    before = {item[0]: item for item in lines.get("network/nodes.json", {})}
    touched = {node.id for node in graph.nodes.values() if node.session in fresh}
    touched.update(i for i, item in before.items() if i not in graph.nodes)
    touched.update(
        item[0] for item in network["network/nodes.json"][3] if before.get(item[0]) != item
    )
    edges = set(lines.get("network/edges.json", {}))
    for item in edges.symmetric_difference(network["network/edges.json"][3]):
        touched.update(item[:2])
    earlier: dict[str, list[str]] = state["lost"]
    touched.update(i for i in earlier.keys() | lost.keys() if earlier.get(i) != lost.get(i))
    near = set(touched)
    for node_id in touched:
        near.update(edge.target for edge in graph.outgoing.get(node_id, ()))
        near.update(edge.source for edge in graph.incoming.get(node_id, ()))
    return near


def _notes(
    records: dict[str, SessionRecord],
    segments: dict[str, SegmentRecord],
    graph: Graph,
    fresh: set[str],
    near: set[str] | None,
    last: dict[str, Any],
) -> list[_Note]:
    """Every note, with the key of its inputs: worked out for the notes `near` a change,
    the last run's for the others (whose inputs are the same)."""
    found = []

    def remembered(path: str, ids: Any) -> str | None:
        before = last.get(path)
        if near is None or not isinstance(before, list) or any(i in near for i in ids):
            return None
        return str(before[1])

    for node_id in sorted(graph.paths):

        def make(node_id: str = node_id) -> tuple[str, list[dict[str, Any]]]:
            return artifacts.artifact_note(graph, node_id, segments)

        path = graph.paths[node_id] + ".md"
        found.append(
            _Note(
                path,
                node_id,
                remembered(path, (node_id,)) or artifacts.artifact_key(graph, node_id, segments),
                graph.nodes[node_id].session in fresh,
                make,
            )
        )
    children: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for session in sorted(records):
        parent = records[session].get("parent")
        if parent in records:
            children[str(parent)].append((session, records[session]["title"] or session))
    for session in sorted(records):
        mine = children.get(session, [])

        def make_session(
            session: str = session, mine: list[tuple[str, str]] = mine
        ) -> tuple[str, list[dict[str, Any]]]:
            return artifacts.session_note(records[session], graph, mine), []

        path = artifacts.session_path(session) + ".md"
        record = records[session]
        ids = [f"{session}/{segment['id']}" for segment in record["segments"]]
        key = None if any(child in fresh for child, _ in mine) else remembered(path, ids)
        found.append(
            _Note(
                path,
                None,
                key or artifacts.session_key(record, graph, mine),
                session in fresh,
                make_session,
            )
        )
    return found


def _sync(
    root: Any,
    pending: list[_Note],
    last: dict[str, Any],
    report: Report,
    files: dict[str, bytes],
) -> dict[str, list[str]]:
    """Decide what to write for each note; returns, for each, [its hash as ccm rendered
    it, the key of its inputs]. A note of a session not read again whose graph inputs
    are the same as last time is not even rendered."""
    done: dict[str, list[str]] = {}
    for note in pending:
        before = last.get(note.path)
        if (
            not note.fresh
            and isinstance(before, list)
            and before[1] == note.key
            and vault.exists(root, note.path)
        ):
            done[note.path] = before
            continue
        text, sources = note.make()
        digest = notes.recorded_hash(text) or ""
        done[note.path] = [digest, note.key]
        if isinstance(before, list) and before[0] == digest and vault.exists(root, note.path):
            continue
        current = vault.read_text(root, note.path)
        if current == text:
            continue
        if current is None:
            action = "restored" if before else "new"
            files[note.path] = text.encode("utf-8", "surrogatepass")
            report.outcomes.append(Outcome(note.path, action, note.node))
        elif notes.is_pristine(current):
            files[note.path] = text.encode("utf-8", "surrogatepass")
            report.outcomes.append(Outcome(note.path, "changed", note.node))
        else:
            report.outcomes.append(_keep_edit(note.path, note.node, sources, current, files))
    return done


def _keep_edit(
    path: str,
    node: str | None,
    sources: list[dict[str, Any]],
    current: str,
    files: dict[str, bytes],
) -> Outcome:
    """A person edited the note: leave it theirs, only add sources it lacks."""
    try:
        fields, body = notes.split(current, path)
    except (SchemaError, CCMError) as exc:
        return Outcome(path, "unreadable", node, f"left as it is: {exc}; ccm's update not applied")
    if fields is None or not sources:
        return Outcome(path, "kept", node, "edited by you; ccm's update not applied")
    have = fields.get("sources")
    have_list = list(have) if isinstance(have, list) else []
    seen = {(s.get("session"), s.get("segment")) for s in have_list if isinstance(s, dict)}
    added = [s for s in sources if (s["session"], s["segment"]) not in seen]
    if not added:
        return Outcome(path, "kept", node, "edited by you; ccm's update not applied")
    fields["sources"] = have_list + added
    files[path] = notes.join(fields, body).encode("utf-8", "surrogatepass")
    names = ", ".join(f"{s['session']}/{s['segment']}" for s in added)
    return Outcome(
        path,
        "merged",
        node,
        f"edited by you; only the new sources were added ({names})",
    )


NODE_FIELDS = (
    "id",
    "session",
    "segment",
    "kind",
    "text",
    "turn",
    "ts",
    "topic",
    "base",
    "superseded_by",
    "status",
    "confidence",
    "layer",
    "artifact",
)
EDGE_FIELDS = ("source", "target", "type", "weight", "evidence")
_Lines = dict[tuple[Any, ...], str]


def _network(
    graph: Graph, known: dict[str, _Lines]
) -> dict[str, tuple[str, dict[str, Any], bytes, _Lines]]:
    """network/nodes.json and network/edges.json, ordered by id (deterministic): for
    each, its schema, the items not encoded by the last run (all that needs checking
    against the schema), its bytes, and each item's line to remember for the next run.

    An item is a tuple of its values; the line the last run encoded for an equal tuple
    is used again, so a run after a small change encodes the few items it changed."""
    import json

    encoder = json.JSONEncoder(ensure_ascii=False)
    nodes = [
        (
            n.id,
            n.session,
            n.segment,
            n.kind,
            n.text,
            n.turn,
            n.ts,
            n.topic,
            n.base,
            n.superseded_by,
            graph.status.get(n.id, "active"),
            graph.score(n.id),
            graph.layers[n.id],
            graph.paths[n.id] + ".md" if n.id in graph.paths else None,
        )
        for n in sorted(graph.nodes.values(), key=lambda n: n.id)
    ]
    edges = [(e.source, e.target, e.type, e.weight, e.evidence) for e in graph.edges]

    def encode(
        relative: str, key: str, fields: tuple[str, ...], items: list[tuple[Any, ...]]
    ) -> tuple[str, dict[str, Any], bytes, _Lines]:
        """One item a line: readable, diffable, and written by the C encoder."""
        before = known.get(relative, {})
        lines: _Lines = {}
        fresh = []
        for item in items:
            line = before.get(item)
            if line is None:
                data = dict(zip(fields, item, strict=True))
                if key == "nodes":
                    data["topic"] = list(data["topic"])
                fresh.append(data)
                line = encoder.encode(data)
            lines[item] = line
        body = ",\n".join(lines[item] for item in items)
        text = (
            f'{{"format": 1, "{key}": [\n{body}\n]}}\n'
            if items
            else f'{{"format": 1, "{key}": []}}\n'
        )
        schema = f"network_{key}"
        return schema, {"format": 1, key: fresh}, text.encode("utf-8", "surrogatepass"), lines

    return {
        "network/nodes.json": encode("network/nodes.json", "nodes", NODE_FIELDS, nodes),
        "network/edges.json": encode("network/edges.json", "edges", EDGE_FIELDS, edges),
    }


def _conflict_key(conflict: Any) -> str:
    return f"{conflict.winner}>{conflict.loser}>{conflict.rule}"


def _conflicts(graph: Graph, state: dict[str, Any], report: Report) -> None:
    seen = set(state.get("conflicts", []))
    report.conflicts_total = len(graph.conflicts)
    for conflict in graph.conflicts:
        if _conflict_key(conflict) in seen:
            continue
        report.new_conflicts.append(
            {
                "winner": conflict.winner,
                "loser": conflict.loser,
                "rule": conflict.rule,
                "loser_status": graph.status.get(conflict.loser, "active"),
                "reason": conflict.reason,
            }
        )


def _changes(graph: Graph, state: dict[str, Any], report: Report) -> None:
    before: dict[str, float] = state.get("confidence", {})
    changes: list[dict[str, Any]] = []
    for node_id, score in graph.scores.items():
        if node_id not in before:
            continue
        delta = score - before[node_id]
        if abs(delta) >= MIN_CHANGE:
            changes.append(
                {
                    "id": node_id,
                    "before": round(before[node_id], 3),
                    "after": round(score, 3),
                    "delta": round(delta, 3),
                }
            )
    changes.sort(key=lambda c: (-abs(c["delta"]), c["id"]))
    report.confidence_changes = changes[:CHANGES_SHOWN]
