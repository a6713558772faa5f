"""JSON Schemas for every file ccm reads, loaded from the installed package.

The wheel carries ``schemas/`` as ``ccm/schemas`` (hatch force-include) so that an
installed ``ccm`` validates what it reads; a source checkout (editable install) falls
back to the repository's top-level ``schemas/`` folder.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

import fastjsonschema

NAMES = (
    "raw_entry",
    "event",
    "quarantine",
    "config",
    "manifest",
    "open",
    "working",
    "network_nodes",
    "network_edges",
)

Validator = Callable[[Any], Any]


def _schema_text(name: str) -> str:
    filename = f"{name}.schema.json"
    packaged = resources.files("ccm").joinpath("schemas").joinpath(filename)
    if packaged.is_file():
        return packaged.read_text(encoding="utf-8")
    checkout = Path(__file__).resolve().parent.parent / "schemas" / filename
    return checkout.read_text(encoding="utf-8")


@functools.cache
def schema(name: str) -> dict[str, Any]:
    """The parsed JSON Schema called `name` (one of `NAMES`)."""
    if name not in NAMES:
        raise KeyError(f"no schema named {name!r}; known: {', '.join(NAMES)}")
    loaded: dict[str, Any] = json.loads(_schema_text(name))
    return loaded


@functools.cache
def validator(name: str) -> Validator:
    """A compiled validator: raises `fastjsonschema.JsonSchemaException` on bad data."""
    compiled: Validator = fastjsonschema.compile(schema(name))
    return compiled


def problem(name: str, data: Any) -> str | None:
    """Why `data` does not match schema `name`, or None when it does."""
    try:
        validator(name)(data)
    except fastjsonschema.JsonSchemaException as exc:
        return str(exc)
    return None
