"""Shared fixtures: every test gets its own knowledge root; no test touches ~/.knowledge."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from hypothesis import HealthCheck, settings

# the compiled patterns of a test run (ccm/patterns.py) go to a folder of its own, not
# to the developer's ~/.cache (set before ccm is imported: its modules compile them)
os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="ccm-test-cache-")

from ccm import derive, tokens
from ccm.store import Store

if TYPE_CHECKING:
    from tests.fakeapi import FakeAnthropic

# The machine that runs the suite may be busy: never fail a property because generating
# its examples was slow (the examples, not their speed, are what is tested).
settings.register_profile("ccm", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ccm")

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(autouse=True)
def ccm_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point CCM_HOME at a fresh folder, and keep the BPE tokenizer as configured."""
    home = tmp_path / "knowledge"
    monkeypatch.setenv("CCM_HOME", str(home))
    monkeypatch.delenv("CCM_LOG_LEVEL", raising=False)
    # a key or an API address in the developer's environment never reaches a test
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    tokens.set_method("bpe")
    return home


@pytest.fixture
def fixtures() -> Path:
    return FIXTURES


@pytest.fixture
def copy_fixture(tmp_path: Path):  # type: ignore[no-untyped-def]
    """Copy a file or folder from tests/fixtures into tmp_path and return the copy."""

    def copy(relative: str) -> Path:
        source = FIXTURES / relative
        target = tmp_path / "inputs" / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target)
        else:
            shutil.copy2(source, target)
        return target

    return copy


@pytest.fixture
def store() -> Store:
    """The knowledge root of CCM_HOME, created."""
    root = Store()
    root.init()
    return root


@pytest.fixture
def fake() -> Iterator[FakeAnthropic]:
    """The local fake of the Anthropic API, served on 127.0.0.1 (`tests/fakeapi.py`)."""
    from tests.fakeapi import FakeAnthropic

    with FakeAnthropic() as running:
        yield running


@pytest.fixture
def kept_engines(monkeypatch: pytest.MonkeyPatch) -> Iterator[derive.Keeper]:
    """Engines kept in memory between requests, as `ccm proxy` keeps them: the manifest
    and engine cache written a moment after a burst of requests (here 0.2 s)."""
    keeper = derive.Keeper(16, later=0.2)
    monkeypatch.setattr(derive, "keeper", keeper)
    yield keeper
    keeper.flush()
