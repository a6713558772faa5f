"""Reading turns ahead in helper processes (`fold.fold` with helpers) folds to exactly the
state of reading them in the fold, whichever way the helpers start and if one dies."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ccm import derive
from ccm.config import from_mapping
from ccm.engine import fold as fold_module
from ccm.engine.fold import Params, fold, new_state, read_all
from ccm.ingest.pipeline import ingest
from ccm.store import Store

HELD_OUT = Path(__file__).parent / "fixtures" / "scenarios_heldout"
# agent and assistant sessions with rules, conclusions, traps and topic changes
SOURCES = [HELD_OUT / f"{name}.jsonl" for name in ("h01", "h02", "h03", "h04")]


def _entries() -> list[dict[str, object]]:
    """The turns of the fixtures as one session, numbered anew."""
    turns = [json.loads(line) for path in SOURCES for line in path.read_text().splitlines()]
    return [{**turn, "turn": number} for number, turn in enumerate(turns, start=1)]


PARAMS = Params.from_config(from_mapping({}))
ENTRIES = _entries()


def _serial() -> dict[str, object]:
    return fold(new_state("s"), ENTRIES, PARAMS, helpers=0)


# other tests leave threads behind; a fork beside them is what is tested here (Python 3.12
# warns of any fork in a process with threads)
FORK_BESIDE_THREADS = pytest.mark.filterwarnings("ignore:.*multi-threaded.*:DeprecationWarning")


def _started(monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    """Helpers forked (nothing else runs here) or spawned (a daemon's threads run), with
    shares of 37 turns (a fold of the fixtures' few hundred takes many)."""
    threads = 1 if how == "fork" else 2
    monkeypatch.setattr(fold_module.threading, "active_count", lambda: threads)
    monkeypatch.setattr(fold_module, "AHEAD_SHARE", 37)


@pytest.mark.parametrize("helpers", [1, 2, 3])
def test_helpers_read_as_much_as_keeps_them_as_busy_as_the_fold(
    helpers: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fold reads the first share and its due of the rest; the helpers the others,
    sent a few at a time as the fold nears them."""
    monkeypatch.setattr(fold_module, "AHEAD_SHARE", 10)
    ahead = fold_module._Ahead(new_state("s"), ENTRIES, 0)  # planned, nothing sent
    assert ahead.ahead == []
    monkeypatch.setattr(fold_module.ProcessPoolExecutor, "submit", lambda *args: None)
    ahead = fold_module._Ahead(new_state("s"), ENTRIES, helpers)
    planned = sorted([*ahead.ahead, *ahead.shares])
    assert 0 not in planned and len(ahead.shares) == fold_module.AHEAD_DEPTH * helpers
    shares = -(-len(ENTRIES) // 10)
    own = (1 - fold_module.STATE_SHARE * helpers) / (helpers + 1)
    assert abs((shares - len(planned)) - own * shares) <= 1
    ahead.shares = {}
    ahead.close()


@FORK_BESIDE_THREADS
@pytest.mark.parametrize(("helpers", "how"), [(1, "fork"), (2, "fork"), (1, "spawn")])
def test_turns_read_ahead_fold_to_the_state_read_in_the_fold(
    helpers: int, how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Spawned, a helper is a fresh interpreter, with a hash seed of its own: it reads
    each turn the same."""
    assert len(ENTRIES) > 300
    _started(monkeypatch, how)
    ahead = fold(new_state("s"), ENTRIES, PARAMS, helpers=helpers)
    serial = _serial()
    assert ahead["conclusions"] and ahead["critical"] and len(ahead["segments"]) > 10
    assert json.dumps(ahead) == json.dumps(serial)


def _dies(*args: object) -> list[object]:
    os._exit(3)  # a helper killed mid-read (out of memory, a signal)


@FORK_BESIDE_THREADS
def test_a_helper_that_dies_costs_only_time(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    _started(monkeypatch, "fork")
    monkeypatch.setattr(fold_module, "read_all", _dies)
    ahead = fold(new_state("s"), ENTRIES, PARAMS, helpers=1)
    assert json.dumps(ahead) == json.dumps(_serial())
    assert "reading here" in caplog.text


def test_read_all_reads_each_turn_with_the_turns_before_it() -> None:
    """A share read from its middle, given the turns before it, reads as the whole."""
    whole = read_all(ENTRIES, [])
    cut = 150
    before = [
        (str(t["role"]), str(t["content"])[: fold_module.RECENT_CHARS]) for t in ENTRIES[:cut]
    ]
    part = read_all(ENTRIES[cut:], before[-fold_module.CONTEXT_TURNS :])
    assert part == whole[cut:]
    assert sum(r.found is not None for r in part) > 5  # conclusions that read the turns before


def test_helpers_only_for_long_folds_outside_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fold_module.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3, 4, 5})
    assert fold_module.helpers_for(fold_module.AHEAD_TURNS - 1) == 0
    assert fold_module.helpers_for(fold_module.AHEAD_TURNS) == fold_module.MAX_HELPERS
    monkeypatch.setattr(fold_module.os, "sched_getaffinity", lambda pid: {0})
    assert fold_module.helpers_for(fold_module.AHEAD_TURNS) == 0  # one core: no helper
    monkeypatch.setattr(fold_module.os, "sched_getaffinity", lambda pid: {0, 1})
    assert fold_module.helpers_for(fold_module.AHEAD_TURNS) == 1
    # a worker of a pool (`ccm rebuild --executor processes`) starts none of its own
    monkeypatch.setattr(fold_module.multiprocessing, "parent_process", lambda: object())
    assert fold_module.helpers_for(fold_module.AHEAD_TURNS * 10) == 0


@FORK_BESIDE_THREADS
def test_a_rebuild_read_ahead_writes_what_updates_wrote(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`ccm rebuild` of a long session (here: long from 100 turns) reads ahead, and its
    tiers are those the turn-by-turn updates wrote."""
    store = Store(tmp_path / "root")
    source = tmp_path / "chat.jsonl"
    lines = [json.dumps(entry) for entry in ENTRIES]
    for bound in (40, 90, len(lines)):  # updates of fewer turns than the bound
        source.write_text("\n".join(lines[:bound]) + "\n")
        ingest(store, [str(source)], derive=True)
    folder = store.session_dir("chat")
    updated = {name: (folder / name).read_bytes() for name, _ in derive.FILES}
    monkeypatch.setattr(fold_module, "AHEAD_TURNS", 100)
    calls: list[int] = []
    real = fold_module._Ahead.__init__

    def counted(self: fold_module._Ahead, state: object, turns: list[object], helpers: int) -> None:
        calls.append(helpers)
        real(self, state, turns, helpers)  # type: ignore[arg-type]

    monkeypatch.setattr(fold_module._Ahead, "__init__", counted)
    monkeypatch.setattr(fold_module.os, "sched_getaffinity", lambda pid: {0, 1})
    derive.update(store, "chat", rebuild=True)
    assert calls == [1]
    assert {name: (folder / name).read_bytes() for name, _ in derive.FILES} == updated


@pytest.mark.parametrize(("setting", "helpers"), [("0", 0), ("2", 2), ("auto", 1)])
def test_the_config_says_how_many_helpers_read_ahead(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, setting: str, helpers: int
) -> None:
    store = Store(tmp_path / "root")
    store.init()
    (store.root / "config.yaml").write_text(f"segments:\n  helpers: {setting}\n")
    source = tmp_path / "chat.jsonl"
    source.write_text("".join(json.dumps(entry) + "\n" for entry in ENTRIES))
    ingest(store, [str(source)])
    monkeypatch.setattr(fold_module, "AHEAD_TURNS", 100)
    monkeypatch.setattr(fold_module.os, "sched_getaffinity", lambda pid: {0, 1})
    asked: list[int] = []
    monkeypatch.setattr(fold_module, "_Ahead", lambda state, turns, n: asked.append(n) or _Off())
    derive.update(store, "chat", rebuild=True)
    assert asked == [helpers]
    asked.clear()
    monkeypatch.setattr(fold_module, "AHEAD_TURNS", len(ENTRIES) + 1)  # a short fold: none
    derive.update(store, "chat", rebuild=True)
    assert asked == [0]


class _Off:
    """No turn read ahead."""

    def reading(self, at: int) -> None:
        return None

    def __enter__(self) -> _Off:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


def test_a_fold_reports_its_progress(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store(tmp_path / "root")
    source = tmp_path / "chat.jsonl"
    source.write_text("".join(json.dumps(entry) + "\n" for entry in ENTRIES))
    ingest(store, [str(source)])
    monkeypatch.setattr(fold_module, "AHEAD_SHARE", 100)
    told: list[tuple[int, int]] = []
    derive.update(store, "chat", rebuild=True, progress=lambda done, of: told.append((done, of)))
    total = len(ENTRIES)
    assert told == [(100, total), (200, total), (300, total), (total, total)]


def test_ccm_rebuild_draws_a_bar_for_a_long_fold_only(capsys: pytest.CaptureFixture[str]) -> None:
    import contextlib

    from ccm.cli import _FoldBar

    with contextlib.ExitStack() as stack:
        short = _FoldBar("short", stack)
        short(367, 367)
        assert short.bar is None  # a fold of a few hundred turns is over at once
        long = _FoldBar("long", stack)
        for done in range(500, 4001, 500):
            long(done, 4000)
        assert long.bar is not None and long.done == 4000
    assert "Folding long" in capsys.readouterr().err
