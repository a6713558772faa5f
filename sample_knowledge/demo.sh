#!/usr/bin/env bash
# `make demo`: ccm's main job on the bundled sample knowledge.
# The bundled root (sample_knowledge/) was built by ccm itself from sources/*.jsonl;
# the demo works on a copy so the repository is never modified.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
root="$work/knowledge"
cp -r "$here" "$root"

step() { printf '\n$ %s\n' "$*"; "$@"; }

step ccm --version
echo
echo "# Re-importing the sources adds nothing: ingest is idempotent."
step ccm --root "$root" ingest "$root/sources"
echo
echo "# A longer version of a session appends only its new turns."
cp "$root/sources/reading-notes.jsonl" "$work/reading-notes.jsonl"
printf '%s\n' '{"role": "user", "content": "One more: does interleaving subjects help?", "ts": "2026-03-07T08:20:00Z"}' >> "$work/reading-notes.jsonl"
step ccm --root "$root" ingest "$work/reading-notes.jsonl"
step ccm --root "$root" sessions
step ccm --root "$root" show ledger-sync --turns 7:7
echo
echo "# The derived tiers: segments with conclusions (manifest), open efforts, working context."
step head -n 24 "$root/chats/ledger-sync/manifest.yaml"
step ccm --root "$root" critical ledger-sync
step ccm --root "$root" health ledger-sync
echo
echo "# Memory commands are events: pin a segment, then undo it."
step ccm --root "$root" apply ledger-sync '@recall("duplicate rows") @pin(seg_2)'
step ccm --root "$root" undo ledger-sync
step ccm --root "$root" summary deploy-checklist
echo
echo "# What the model is given for its next turn: recall is gated on the question."
step ccm --root "$root" context ledger-sync --budget 900 --query "Remember the duplicate rows? What was the fix?"
