"""Write docs/cli.md from the CLI's own --help, so the reference never drifts.

    .venv/bin/python docs/generate_cli.py      (make docs)

tests/test_docs.py fails when docs/cli.md differs from what this writes.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click
from click.testing import CliRunner

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from ccm.cli import main  # noqa: E402

TARGET = Path(__file__).with_name("cli.md")


def render() -> str:
    runner = CliRunner()
    parts = ["# ccm command reference\n", "Generated from `--help` by `make docs`; do not edit.\n"]
    commands: list[tuple[str, list[str]]] = [("ccm", [])]
    assert isinstance(main, click.Group)
    for name in sorted(main.commands):
        commands.append((f"ccm {name}", [name]))
        group = main.commands[name]
        if isinstance(group, click.Group):
            commands += [(f"ccm {name} {sub}", [name, sub]) for sub in sorted(group.commands)]
    for title, args in commands:
        result = runner.invoke(main, [*args, "--help"], prog_name="ccm", terminal_width=100)
        parts.append(f"## {title}\n\n```\n{result.output.rstrip()}\n```\n")
    return "\n".join(parts)


if __name__ == "__main__":
    TARGET.write_text(render(), encoding="utf-8")
    print(f"wrote {TARGET}")
