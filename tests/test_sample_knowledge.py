"""The bundled sample knowledge is what ccm itself builds from its sources."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from ccm.cli import main
from ccm.store import scan_jsonl

SAMPLE = Path(__file__).parent.parent / "sample_knowledge"


def test_sample_knowledge_is_rebuilt_byte_for_byte(tmp_path: Path) -> None:
    root = tmp_path / "rebuilt"
    result = CliRunner().invoke(main, ["--root", str(root), "ingest", str(SAMPLE / "sources")])
    assert result.exit_code == 0, result.output
    bundled = sorted(p.relative_to(SAMPLE) for p in SAMPLE.glob("chats/*/raw.jsonl"))
    rebuilt = sorted(p.relative_to(root) for p in root.glob("chats/*/raw.jsonl"))
    assert bundled == rebuilt and len(bundled) == 3
    for relative in bundled:
        assert (root / relative).read_bytes() == (SAMPLE / relative).read_bytes()


def test_sample_knowledge_validates_and_reimports_as_nothing_new(tmp_path: Path) -> None:
    for raw in SAMPLE.glob("chats/*/raw.jsonl"):
        lines = list(scan_jsonl(raw, schema="raw_entry"))
        assert lines and not [line.bad for line in lines if line.bad]
    root = tmp_path / "copy"
    runner = CliRunner()
    runner.invoke(main, ["--root", str(root), "ingest", str(SAMPLE / "sources")])
    again = runner.invoke(main, ["--root", str(root), "ingest", str(SAMPLE / "sources"), "--json"])
    assert again.exit_code == 0
    assert '"turns_added": 0' in again.stdout
