"""The conclusion graph as consolidation left it on disk: reading it back, finding a node,
and the shareable export (`ccm export --layer N DIR`).

The export is a vault of its own: one note per artifact on layer N or above, its text
passed through `ladder.redact` from layer 1 up, and nothing a lower layer holds: no
verbatim quote, no segment summary, no session note, no session name. Links between
exported notes stay; links to anything left out are dropped, so every wikilink of the
export resolves inside it.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ccm import schemas
from ccm.errors import CCMError, SchemaError, UsageError
from ccm.sleep import artifacts, notes, vault
from ccm.sleep.graph import Edge, Node
from ccm.sleep.ladder import redact
from ccm.store import Store, is_inside

NODES = "network/nodes.json"
EDGES = "network/edges.json"
MARKER = ".ccm-export.json"
_EDGE_KEYS = ("source", "target", "type", "evidence", "weight")


@dataclass
class Network:
    """nodes.json and edges.json, read back."""

    records: list[dict[str, Any]]
    nodes: list[Node]
    edges: list[Edge]
    status: dict[str, str]
    scores: dict[str, float]

    def find(self, name: str) -> str:
        """A node id from an id, an artifact path or a file name (with or without .md)."""
        wanted = name.removesuffix(".md")
        for record in self.records:
            artifact = (record.get("artifact") or "").removesuffix(".md")
            if wanted in (record["id"], artifact) or (
                artifact and wanted == artifact.rsplit("/", 1)[-1]
            ):
                return str(record["id"])
        raise CCMError(
            f"no conclusion {name!r} in the graph",
            "give an id such as ledger-sync/seg_1 or an artifact's file name; "
            "`ccm graph --top 50` lists them",
        )


def _load(path: Path, key: str, schema: str) -> list[dict[str, Any]]:
    try:
        data = json.loads(path.read_bytes())
    except FileNotFoundError as exc:
        raise CCMError(f"no {path}", "run `ccm consolidate` first") from exc
    except (OSError, ValueError) as exc:
        raise SchemaError(path, None, f"unreadable: {exc}", "run `ccm consolidate`") from exc
    why = schemas.problem(schema, data)
    if why is not None:
        raise SchemaError(path, None, why, "run `ccm consolidate` to rewrite it")
    items: list[dict[str, Any]] = data[key]
    return items


def explained(store: Store, name: str) -> dict[str, Any]:
    """Why the conclusion `name` (an id, an artifact path or its file name) has its
    confidence: its supporters, the challenges it met and its sessions (`graph.explain`)."""
    from ccm.sleep.graph import explain

    network = load(store)
    return explain(network.find(name), network.nodes, network.edges, network.status, network.scores)


def load(store: Store) -> Network:
    records = _load(store.root / NODES, "nodes", "network_nodes")
    edges = _load(store.root / EDGES, "edges", "network_edges")
    nodes = [
        Node(
            id=str(r["id"]),
            session=str(r["session"]),
            segment=str(r["segment"]),
            kind=str(r["kind"]),
            text=str(r["text"]),
            turn=int(r["turn"]),
            ts=str(r["ts"]),
            topic=tuple(r.get("topic") or ()),
            base=float(r["base"]),
            superseded_by=r.get("superseded_by"),
        )
        for r in records
    ]
    return Network(
        records=records,
        nodes=nodes,
        edges=[Edge(*(e[k] for k in _EDGE_KEYS)) for e in edges],
        status={str(r["id"]): str(r["status"]) for r in records},
        scores={str(r["id"]): float(r.get("confidence", 0.0)) for r in records},
    )


def graph_json(network: Network) -> dict[str, Any]:
    """One JSON document: a directed multigraph, as `ccm graph export --format json`."""
    return {
        "directed": True,
        "multigraph": True,
        "nodes": network.records,
        "edges": [{k: getattr(e, k) for k in _EDGE_KEYS} for e in network.edges],
    }


# ---------------------------------------------------------------- export


@dataclass
class Exported:
    folder: Path
    layer: int
    notes: int
    left_out: int
    removed: int


def export(store: Store, layer: int, folder: Path) -> Exported:
    """Write the shareable vault of everything on `layer` or above into `folder`."""
    if not 0 <= layer <= 3:
        raise UsageError(f"--layer {layer}: the layers are 0 to 3")
    folder = folder.absolute()
    if is_inside(store.root, folder):
        raise UsageError(f"{folder} is inside the knowledge root", "export to a folder outside it")
    marker = folder / MARKER
    previous: list[str] = []
    if not vault.is_empty_dir(folder):
        old = vault.read_bytes(marker)
        if old is None:
            raise CCMError(
                f"{folder} is not empty and holds no earlier ccm export",
                "choose an empty or new folder",
            )
        try:
            previous = [str(p) for p in json.loads(old).get("files", [])]
        except (ValueError, AttributeError) as exc:
            raise SchemaError(marker, None, f"unreadable: {exc}", "delete the folder") from exc
    network = load(store)
    chosen = {
        str(r["id"]): r
        for r in network.records
        if r.get("artifact") and int(r.get("layer", 0)) >= layer
    }

    names = frozenset(store.config.get("sleep", "private_names"))

    def clean(text: str) -> str:
        return redact(text, names) if layer >= 1 else text

    # shared ids are paths made from the shared text: no session name, no private name
    shared = [
        dataclasses.replace(node, text=clean(node.text))
        for node in network.nodes
        if node.id in chosen
    ]
    ids = artifacts.assign_paths(shared, {}, lambda path: None)
    edges = [e for e in network.edges if e.source in chosen and e.target in chosen]
    # each node's edges in edge order: (drawn to it, the other node, the edge)
    touching: dict[str, list[tuple[bool, str, Edge]]] = {node_id: [] for node_id in chosen}
    for e in edges:
        touching[e.source].append((False, e.target, e))
        if e.target != e.source:
            touching[e.target].append((True, e.source, e))
    files: dict[str, bytes] = {}
    index = [f"# Shared conclusions (layer {layer} and up)", ""]
    for node_id, record in sorted(chosen.items(), key=lambda item: ids[item[0]]):
        text = clean(str(record["text"]))
        heading = artifacts.title(text)
        related = touching[node_id]
        fields = {
            "id": ids[node_id],
            "type": record["kind"],
            "status": record["status"],
            "confidence": record.get("confidence", 0.0),
            "layer": record.get("layer", 0),
            "sources": [],
            "tags": [record["kind"], f"status/{record['status']}", f"layer/{record['layer']}"],
            "aliases": [notes.link_label(heading, 90)],
            "created": record["ts"],
            "updated": record["ts"],
            "links": [
                {
                    "type": e.type,
                    "direction": "in" if drawn_in else "out",
                    "id": ids[other],
                }
                for drawn_in, other, e in related
            ],
        }
        lines = [f"# {notes.inline(heading)}", "", notes.inline(text), ""]
        lines.append(
            f"*{record['kind']} · {record['status']} · confidence "
            f"{float(record.get('confidence', 0.0)):.2f} · layer {record['layer']}*"
        )
        lines += ["", "## Related", ""]
        for drawn_in, other, edge in related:
            shown = (artifacts.RELATION_IN if drawn_in else artifacts.RELATION_OUT)[edge.type]
            label = artifacts.title(clean(str(chosen[other]["text"])))
            lines.append(
                f"- {shown} {notes.wikilink(ids[other], label)}: {notes.inline(clean(edge.evidence))}"
            )
        if not related:
            lines.append("(none shared)")
        files[ids[node_id] + ".md"] = notes.render(fields, "\n".join(lines) + "\n").encode(
            "utf-8", "surrogatepass"
        )
        index.append(f"- {notes.wikilink(ids[node_id], heading)} ({record['kind']})")
    files["index.md"] = ("\n".join(index) + "\n").encode("utf-8", "surrogatepass")
    shared_nodes = [
        {
            "id": ids[i],
            "kind": r["kind"],
            "text": clean(str(r["text"])),
            "ts": r["ts"],
            "status": r["status"],
            "confidence": r.get("confidence", 0.0),
            "layer": r.get("layer", 0),
            "base": r["base"],
        }
        for i, r in sorted(chosen.items(), key=lambda item: ids[item[0]])
    ]
    shared_edges = [
        {
            "source": ids[e.source],
            "target": ids[e.target],
            "type": e.type,
            "weight": e.weight,
            "evidence": clean(e.evidence),
        }
        for e in edges
    ]
    files[NODES] = (json.dumps({"format": 1, "nodes": shared_nodes}, indent=1) + "\n").encode(
        "utf-8", "surrogatepass"
    )
    files[EDGES] = (json.dumps({"format": 1, "edges": shared_edges}, indent=1) + "\n").encode(
        "utf-8", "surrogatepass"
    )
    stale = sorted(set(previous) - set(files) - {MARKER})
    files[MARKER] = (json.dumps({"layer": layer, "files": sorted(files)}, indent=1) + "\n").encode(
        "utf-8", "surrogatepass"
    )
    vault.write_files(folder, files)
    vault.remove(folder, stale)
    return Exported(folder, layer, len(chosen), len(network.records) - len(chosen), len(stale))
