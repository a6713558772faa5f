"""The working state: the current task, the next step and the files, as `ccm context`
and `ccm summary` show them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.helpers import ccm_at as ccm


def _session(tmp_path: Path, lines: list[tuple[str, str]]) -> Path:
    """A root whose session "work" holds the (role, content) turns, a minute apart."""
    records: list[dict[str, Any]] = []
    for n, (role, content) in enumerate(lines):
        record: dict[str, Any] = {"role": role, "content": content, "ts": 1_767_000_000 + 60 * n}
        if role == "tool":
            record["tool"] = {"name": "Bash"}
        records.append(record)
    source = tmp_path / "work.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in records))
    root = tmp_path / "root"
    assert ccm(root, "ingest", str(source)).exit_code == 0
    return root


def _state(root: Path) -> dict[str, Any]:
    out = ccm(root, "context", "work", "--budget", "4000", "--format", "json")
    assert out.exit_code == 0, out.output
    block = next(b for b in json.loads(out.stdout)["blocks"] if b["name"] == "state")
    return {
        line.split(": ", 1)[0]: line.split(": ", 1)[1] for line in block["text"].splitlines()[1:]
    }


def test_a_framework_name_is_neither_a_next_step_nor_a_file(tmp_path: Path) -> None:
    root = _session(
        tmp_path,
        [
            ("user", "Examine the package.json files and summarise the stack."),
            ("tool", "/repo/todo-app/package.json"),
            (
                "assistant",
                "## Package.json Analysis\nThe app runs Next.js 15 with React 19. "
                "The structure suggests a complete Next.js implementation in the todo-app "
                "subdirectory.",
            ),
        ],
    )
    state = _state(root)
    assert "Next step" not in state  # nothing says what comes next
    files = state["Open files"].split(", ")
    assert "/repo/todo-app/package.json" in files
    assert not {"Next.js", "Package.json"} & set(files)


def test_the_next_step_is_what_the_answer_labels_next(tmp_path: Path) -> None:
    root = _session(
        tmp_path,
        [
            ("user", "Where do we stand on the regression?"),
            (
                "assistant",
                "Bisected to a41c9e2.\n- **Next**: flamegraph of `count_by_field` on your "
                "laptop, then open the PR.\nThe rest is in the notes for the todo-app team.",
            ),
        ],
    )
    assert "flamegraph of `count_by_field`" in _state(root)["Next step"]


def test_the_current_task_is_a_request_not_an_aside(tmp_path: Path) -> None:
    root = _session(
        tmp_path,
        [
            ("user", "hm."),
            (
                "user",
                "CI. we have github actions but it only runs flake8 on PRs. I want: on merge "
                "to main, test, build and deploy to staging.",
            ),
            ("assistant", "Plan for .github/workflows/deploy.yml: test, build, deploy."),
        ],
    )
    task = _state(root)["Current task"]
    # the request, with what the turn says before it
    assert task.startswith("we have github actions") and task.endswith("deploy to staging.")


def test_an_agent_run_longer_than_the_recent_turns_still_has_its_prompt(tmp_path: Path) -> None:
    """A subagent's session: one prompt, then more steps than the engine keeps as recent."""
    lines = [("user", "Survey the repository and report its layout in detail, please.")]
    for n in range(40):
        lines += [("assistant", f"Listing directory {n}."), ("tool", f"dir{n}/main.py")]
    root = _session(tmp_path, lines)
    summary = ccm(root, "summary", "work").stdout
    assert "No user turns yet." not in summary
    assert "user turns (about 10 words)" in summary
