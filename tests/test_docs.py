"""The CLI reference in docs/cli.md is what `--help` says."""

from __future__ import annotations

import importlib.util
from pathlib import Path

DOCS = Path(__file__).parent.parent / "docs"


def test_cli_reference_is_current() -> None:
    spec = importlib.util.spec_from_file_location("generate_cli", DOCS / "generate_cli.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    expected = module.render()
    assert "## ccm ingest" in expected and "## ccm undo" in expected
    assert (DOCS / "cli.md").read_text(encoding="utf-8") == expected, "run `make docs`"
