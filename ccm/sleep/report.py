"""The sleep report: what a consolidation run did, as a note of the vault.

``reports/<date>.md`` holds the runs of that day, one section each; every conclusion it
names is a wikilink to its artifact, so the report is a way into the vault.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ccm.sleep import artifacts, notes

if TYPE_CHECKING:
    from ccm.sleep.consolidate import Report

LISTED = 100  # items of one kind listed in full; the rest are counted


def _node(report: Report, node_id: str) -> str:
    path = report.paths.get(node_id)
    if path is None:
        return f"`{node_id}` (a segment still open)"
    return notes.wikilink(path, report.titles.get(node_id) or node_id)


def _capped(lines: list[str]) -> list[str]:
    if len(lines) <= LISTED:
        return lines
    return [*lines[:LISTED], f"- \u2026 and {len(lines) - LISTED} more (`--json` lists them)"]


def markdown(report: Report) -> str:
    """The report of one run: a title line, a blank line, then the run's section."""
    out = [f"# Sleep report {report.date}", "", f"## Run at {report.run_at}", ""]
    sessions = [notes.wikilink(artifacts.session_path(s), s) for s in report.consolidated]
    out.append(
        f"Consolidated {len(report.consolidated)} session(s)"
        + (": " + ", ".join(sessions[:LISTED]) if sessions else "")
        + (" \u2026" if len(sessions) > LISTED else "")
        + f"; {report.unchanged} unchanged."
    )
    if report.removed:
        out.append(f"Gone from chats/ (their notes are kept): {', '.join(report.removed)}.")
    for skipped in report.skipped:
        out.append(f"Skipped {skipped['session']}: {skipped['why']}.")
    if report.llm is not None and report.llm["on"]:
        done = report.llm
        out.append(
            f"The model ({done['model']}) stated {done['distilled']} conclusion(s) and "
            f"settled {done['judged']} conflict(s): "
            f"{done['requests']} request(s), {done['cached']} answer(s) from the cache, "
            f"{done['input_tokens']} tokens in and {done['output_tokens']} out"
            + (
                f"; {len(done['offline'])} kept their offline form ({done['offline'][0]})."
                if done["offline"]
                else "."
            )
        )
    out.append("")

    def section(heading: str, lines: list[str], count: str | None = None) -> None:
        out.extend([f"### {heading} ({count or len(lines)})", ""])
        out.extend(_capped(lines) or ["(none)"])
        out.append("")

    section(
        "New artifacts",
        [
            f"- {_node(report, o.node or '')}"
            for o in report.notes_by("new", artifact=True)
            if o.node
        ],
    )
    section(
        "Changed artifacts",
        [
            f"- {_node(report, o.node or '')}" + (" (restored)" if o.action == "restored" else "")
            for o in report.outcomes
            if o.path.startswith("artifacts/") and o.action in ("changed", "restored") and o.node
        ],
    )
    removed = [f"- `{o.path}` ({o.node})" for o in report.notes_by("removed", artifact=True)]
    if removed:
        section("Removed artifacts: their conclusion is gone or changed kind", removed)
    section(
        "Your edits, kept",
        [
            f"- `{o.path}`: {notes.inline(o.detail)}"
            for o in report.outcomes
            if o.action in ("merged", "kept", "unreadable")
        ],
    )
    conflicts = [
        f"- {_node(report, c['loser'])} is {c['loser_status']}, "
        f"{_node(report, c['winner'])} stands ({c['rule']}): {notes.inline(c['reason'])}"
        for c in report.new_conflicts
    ]
    section("New conflicts", conflicts, f"{len(conflicts)} of {report.conflicts_total}")
    section(
        "Largest confidence changes",
        [
            f"- {_node(report, c['id'])}: {c['before']:.2f} \u2192 {c['after']:.2f} "
            f"({c['delta']:+.2f})"
            for c in report.confidence_changes
        ],
    )
    types = ", ".join(f"{n} {t}" for t, n in report.edge_types.items()) or "none"
    statuses = ", ".join(f"{n} {s}" for s, n in report.statuses.items()) or "none"
    layers = ", ".join(f"layer {k}: {n}" for k, n in report.layers.items()) or "none"
    out += [
        "### The network",
        "",
        f"{report.nodes} conclusions ({statuses}); {report.edges} edges ({types}); {layers}.",
        f"Confidence {'converged' if report.converged else 'did NOT converge'} in "
        f"{report.sweeps} sweeps.",
        "",
    ]
    return "\n".join(out)
