"""What several test modules need alike: the CLI in-process, waiting for a change a thread
or process makes, a session's turns as said, and ChatGPT exports built by hand."""

from __future__ import annotations

import io
import time
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result
from hypothesis import strategies as st

from ccm.cli import main
from ccm.store import Store

WAIT = 30.0  # seconds a change may take to show (never a speed claim: a liveness bound)


def ccm(*args: str, input: str | bytes | None = None) -> Result:
    """`ccm ARGS` run in this process (the root from CCM_HOME, which a fixture sets)."""
    return CliRunner().invoke(main, list(args), input=input)


def ccm_at(root: Path, *args: str) -> Result:
    """`ccm --root ROOT ARGS` run in this process."""
    return ccm("--root", str(root), *args)


def wait_for(check: Callable[[], object], what: str = "the change", timeout: float = WAIT) -> None:
    """Until `check()` is true; a file mid-replacement or not there yet is not an error."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except (OSError, ValueError):
            pass
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def said(store: Store, session: str) -> list[tuple[str, str]]:
    """The session's turns as (role, content), in order (none of its lines bad)."""
    turns, bad, _ = store.read_turns(session)
    assert bad == []
    return [(t["role"], t["content"]) for t in turns]


# ---------------------------------------------------------------------------
# ChatGPT exports


def chatgpt_message(role: str, content: Any, **extra: Any) -> dict[str, Any]:
    """A message as the export writes it; `content` is parts, or a whole content dict."""
    if not isinstance(content, dict):
        content = {"content_type": "text", "parts": content}
    body: dict[str, Any] = {
        "author": {"role": role, "name": None, "metadata": {}},
        "create_time": 1737000000.0,
        "content": content,
        "metadata": {},
    }
    body.update(extra)
    return body


def chatgpt_conversation(*messages: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """A linear conversation under a `client-created-root` node, current_node at the end."""
    mapping: dict[str, Any] = {
        "client-created-root": {"id": "client-created-root", "parent": None, "children": []}
    }
    parent = "client-created-root"
    for number, body in enumerate(messages, start=1):
        node_id = f"n{number}"
        mapping[parent]["children"].append(node_id)
        mapping[node_id] = {
            "id": node_id,
            "parent": parent,
            "children": [],
            "message": {"id": node_id, **body},
        }
        parent = node_id
    result: dict[str, Any] = {
        "id": "c1",
        "title": "A chat",
        "create_time": 1737000000.0,
        "current_node": parent,
        "mapping": mapping,
    }
    result.update(extra)
    return result


def zipped(members: dict[str, str | bytes]) -> bytes:
    """A ZIP archive of `members` (name -> its text or bytes)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def json_values(infinity: bool = False) -> st.SearchStrategy[Any]:
    """Any JSON value (no NaN; an infinite float only with `infinity`), nested."""
    return st.recursive(
        st.none()
        | st.booleans()
        | st.integers()
        | st.floats(allow_nan=False, allow_infinity=infinity)
        | st.text(),
        lambda children: st.lists(children) | st.dictionaries(st.text(), children),
        max_leaves=30,
    )
