"""YAML in and out, with libyaml's C loader and dumper when they are installed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from ccm.errors import SchemaError

# the C implementations (libyaml) are several times faster; pure Python otherwise
_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_Dumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def loads(text: str, source: str = "<string>") -> Any:
    try:
        return yaml.load(text, Loader=_Loader)
    except yaml.YAMLError as exc:
        line = None
        mark = getattr(exc, "problem_mark", None)
        if mark is not None:
            line = mark.line + 1
        raise SchemaError(source, line, f"not valid YAML: {exc}", "fix the syntax") from exc


def load_file(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise SchemaError(path, None, f"not UTF-8 text: {exc}", "save the file as UTF-8") from exc
    return loads(text, str(path))


def dumps(data: Any) -> str:
    """Stable, readable YAML: keys in the order given, unicode kept, block style."""
    text: str = yaml.dump(
        data,
        Dumper=_Dumper,
        sort_keys=False,
        allow_unicode=True,
        default_flow_style=False,
        width=100,
    )
    return text
