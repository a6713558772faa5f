"""`ccm rebuild` and `ccm consolidate` give the same bytes whatever the hash seed.

Python salts the hashes of strings per process (``PYTHONHASHSEED``), so the order of a
set of strings, and of a dict filled from one, changes from run to run. Whatever the
engine or the sleep job derives must not depend on that order: a float sum over a set
can differ in its last bit and flip a tie (a summary picks another sentence), a pick
of the first of a set picks another item. Here one root is rebuilt and consolidated
in subprocesses under several hash seeds, each on its own copy, and every file they
write is compared byte for byte.

What legitimately differs from run to run: only the sleep report's time of the run.
`ccm consolidate` has no option to freeze the clock, so the report's ``## Run at ...``
line is left out of the comparison, and its file name (``reports/<date>.md``, the date
of the run) is compared as ``reports/<date>.md``. Nothing else is left out. The engine
caches under ``.ccm/`` are not derived files; of those, the folded engine state is
compared too (its content and its dicts' order), since the tiers are rendered from it.

``tests/fixtures/determinism/tied-summaries.jsonl`` holds segments whose summaries
hinge on a tie: two sentences whose term weights sum to the same value, added in
another order (see its ATTRIBUTION.md).
"""

from __future__ import annotations

import marshal
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from click.testing import CliRunner

from ccm.cli import main

HERE = Path(__file__).parent
SOURCES = [
    HERE / "fixtures" / "determinism" / "tied-summaries.jsonl",
    HERE.parent / "sample_knowledge" / "sources",
    HERE / "fixtures" / "claude-code" / "1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl",
]
SEEDS = ("0", "1", "2", "3", "17")
RUN_AT = re.compile(rb"^## Run at [^\n]*\n", re.MULTILINE)


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A root with the inputs imported, nothing derived yet."""
    root = tmp_path_factory.mktemp("determinism") / "base"
    for source in SOURCES:
        result = CliRunner().invoke(
            main, ["--root", str(root), "ingest", "--no-derive", str(source)]
        )
        assert result.exit_code == 0, result.output
    return root


def ccm(root: Path, seed: str, *args: str) -> None:
    env = {**os.environ, "PYTHONHASHSEED": seed}
    env.pop("CCM_LOG_LEVEL", None)
    done = subprocess.run(
        [sys.executable, "-m", "ccm", "--root", str(root), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, f"seed {seed}: ccm {' '.join(args)}\n{done.stderr}"


def derived(root: Path) -> dict[str, bytes]:
    """Every file the commands leave outside ``.ccm/`` (the report without its time of
    the run), and each session's folded engine state, as bytes."""
    found: dict[str, bytes] = {}
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root).as_posix()
        if not path.is_file() or relative.startswith(".ccm/"):
            continue
        data = path.read_bytes()
        if relative.startswith("reports/"):
            relative, data = "reports/<date>.md", RUN_AT.sub(b"", data)
        assert relative not in found, relative
        found[relative] = data
    for path in sorted((root / ".ccm" / "engine").glob("*.state")):
        state = marshal.loads(path.read_bytes())["state"]
        found[f".ccm/engine/{path.name} (state)"] = repr(state).encode()
    return found


def rebuild_and_consolidate(base: Path, copy: Path, seed: str) -> dict[str, bytes]:
    shutil.copytree(base, copy)
    ccm(copy, seed, "rebuild")
    ccm(copy, seed, "consolidate")
    return derived(copy)


def test_rebuild_and_consolidate_do_not_depend_on_the_hash_seed(base: Path, tmp_path: Path) -> None:
    with ThreadPoolExecutor(max_workers=len(SEEDS)) as pool:
        runs = dict(
            zip(
                SEEDS,
                pool.map(
                    lambda seed: rebuild_and_consolidate(base, tmp_path / f"seed-{seed}", seed),
                    SEEDS,
                ),
                strict=True,
            )
        )
    first = runs[SEEDS[0]]
    # the run derived what is compared: the tiers of every session, notes, the graph
    sessions = [p.name for p in (base / "chats").iterdir()]
    for session in sessions:
        for name in ("manifest.yaml", "open.yaml", "working.yaml", f"{session}.md"):
            assert f"chats/{session}/{name}" in first
    assert any(name.startswith("artifacts/") for name in first)
    assert {"network/nodes.json", "network/edges.json", "reports/<date>.md"} <= first.keys()
    for seed in SEEDS[1:]:
        other = runs[seed]
        assert other.keys() == first.keys(), f"seed {seed} wrote other files"
        differ = [name for name in first if first[name] != other[name]]
        assert not differ, f"PYTHONHASHSEED={seed} and ={SEEDS[0]} differ in {differ}"
