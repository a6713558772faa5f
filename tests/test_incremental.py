"""The incremental invariant: any chunking of a session's turns gives the same tiers
as one rebuild, byte for byte."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ccm import derive
from ccm.config import from_mapping
from ccm.engine.fold import Params, fold, new_state
from ccm.index import Index
from ccm.ingest.pipeline import ingest
from ccm.store import Store
from tests.helpers import wait_for

SAMPLE = Path(__file__).parent.parent / "sample_knowledge" / "sources"
LINES = [
    json.loads(line)
    for name in ("ledger-sync.jsonl", "deploy-checklist.jsonl", "reading-notes.jsonl")
    for line in (SAMPLE / name).read_text().splitlines()
]
EXTRA = [
    "Switching gears: can we look at the report layout?",
    "That didn't fix it, still duplicates.",
    "That fixed it!",
    "Decision: we keep the CLI in click.",
    "Actually, let's use typer instead of click for the CLI.",
    "Back to the currency conversion: which rate source?",
    "Never commit the .env file.",
    "Done: the backup timer is enabled.",
    "ok",
]


@st.composite
def sessions(draw: st.DrawFn) -> list[dict[str, str]]:
    picks = draw(st.lists(st.integers(0, len(LINES) + len(EXTRA) - 1), min_size=1, max_size=60))
    gaps = draw(
        st.lists(st.sampled_from([30, 90, 600, 4 * 3600]), min_size=len(picks), max_size=len(picks))
    )
    turns = []
    clock = 1_767_000_000
    for index, (pick, gap) in enumerate(zip(picks, gaps, strict=True)):
        clock += gap
        content = LINES[pick]["content"] if pick < len(LINES) else EXTRA[pick - len(LINES)]
        role = "user" if index % 2 == 0 else "assistant"
        turns.append({"role": role, "content": content, "ts": f"{clock}"})
    return turns


def _write(path: Path, turns: list[dict[str, str]]) -> None:
    path.write_text("".join(json.dumps({**t, "ts": int(t["ts"])}) + "\n" for t in turns))


SETTINGS = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@SETTINGS
@given(turns=sessions(), cuts=st.lists(st.integers(1, 59), max_size=5), data=st.data())
def test_chunked_ingest_equals_one_rebuild(
    tmp_path_factory,
    turns: list[dict[str, str]],
    cuts: list[int],
    data: st.DataObject,  # type: ignore[no-untyped-def]
) -> None:
    base = tmp_path_factory.mktemp("inc")
    store = Store(base / "root")
    source = base / "chat.jsonl"
    bounds = sorted({c for c in cuts if c < len(turns)} | {len(turns)})
    events_at = data.draw(st.sets(st.sampled_from(bounds)))
    for bound in bounds:
        _write(source, turns[:bound])  # a longer version of the session each time
        ingest(store, [str(source)], derive=True)
        if bound in events_at:
            store.append_events(
                "chat", [{"who": "user", "kind": "pin", "args": {"targets": ["seg_1"]}}]
            )
            derive.update(store, "chat")
    folder = store.session_dir("chat")
    incremental = {name: (folder / name).read_bytes() for name, _ in derive.FILES}
    shutil.rmtree(store.cache)
    derive.update(store, "chat", rebuild=True)
    rebuilt = {name: (folder / name).read_bytes() for name, _ in derive.FILES}
    assert incremental == rebuilt


@SETTINGS
@given(turns=sessions(), cut=st.integers(0, 60))
def test_state_survives_a_json_round_trip_between_chunks(
    turns: list[dict[str, str]], cut: int
) -> None:
    params = Params.from_config(from_mapping({}))
    entries = [
        {
            "turn": n,
            "role": t["role"],
            "content": t["content"],
            "ts": f"2026-01-01T00:00:{n % 60:02d}Z",
        }
        for n, t in enumerate(turns, start=1)
    ]
    whole = fold(new_state("s"), entries, params)
    part = json.loads(json.dumps(fold(new_state("s"), entries[:cut], params)))
    assert fold(part, entries[cut:], params) == json.loads(json.dumps(whole))


EVENTS = [
    {"kind": "pin", "args": {"targets": ["seg_1"]}},
    {"kind": "unpin", "args": {"targets": ["seg_1"]}},
    {"kind": "archive", "args": {"targets": ["seg_2"]}},
    {"kind": "compress", "args": {"targets": ["seg_1"], "text": "trimmed"}},
    {"kind": "expand", "args": {"targets": ["seg_1", "seg_2"]}},
    {"kind": "update", "args": {"targets": ["seg_2"], "text": "revised summary"}},
    {"kind": "focus", "args": {"targets": ["seg_3"]}},
    {"kind": "critical", "args": {"text": "Never force-push to main."}},
    {"kind": "undo", "args": {}},
]


def _rebuilt_elsewhere(store: Store, mirror: Path) -> dict[str, str]:
    """What `ccm rebuild` makes of the session's logs, rebuilt in a copy of the root (the
    files of `store` are left as they are)."""
    shutil.rmtree(mirror, ignore_errors=True)
    derived_files = [name for name, _ in derive.FILES]
    shutil.copytree(store.root, mirror, ignore=shutil.ignore_patterns(".ccm", *derived_files))
    return derive.tiers_yaml(derive.Engine(Store(mirror), "chat").update(rebuild=True).tiers)


def _live_equals_rebuild(
    base: Path,
    turns: list[dict[str, str]],
    bounds: list[int],
    picks: list[int],
    fast: bool = True,
    later: list[int] | None = None,
) -> None:
    """`later[step]`: 0, the engine writes every file; 1, it leaves the manifest for
    later; 2, it leaves it and then writes it (`Engine.write_later`)."""
    (base / "root").mkdir()
    if fast:
        (base / "root" / "config.yaml").write_text(  # short segments, a fast lifecycle
            "segments: {max_turns: 3, min_turns: 2}\n"
            "lifecycle: {fresh_turns: 2, stale_turns: 6, compress_turns: 12, archive_turns: 24}\n"
        )
    store = Store(base / "root")
    source = base / "chat.jsonl"
    folder = store.session_dir("chat")
    engine: derive.Engine | None = None
    index = Index(store)
    manifest_written: bytes | None = None
    for step, bound in enumerate(bounds):
        _write(source, turns[:bound])
        ingest(store, [str(source)], derive=False)
        if step < len(picks) and picks[step] >= 0:  # -1: no event at this step
            event = dict(EVENTS[picks[step]])
            earlier = store.read_events("chat")[0]
            if event["kind"] == "undo" and earlier:
                event["reverts"] = earlier[-1]["id"]
            if event["kind"] != "undo" or earlier:
                store.append_events("chat", [{"who": "user", **event}])
        engine = engine or derive.Engine(store, "chat")
        mode = later[step] if later and step < len(later) else 0
        derived = engine.update(save=False, durable=False, later=mode > 0)
        if mode == 2:
            engine.write_later(durable=False)
        live = derive.tiers_yaml(derived.tiers)
        written = {name: (folder / name).read_bytes() for name, _ in derive.FILES}
        fresh = _rebuilt_elsewhere(store, base / "mirror")
        assert live == fresh
        # what the long-lived engine wrote (encoded in runs, compared with what it
        # remembered) is what a rebuild writes; a manifest left for later is the one
        # written before, untouched
        expected = {name: text.encode() for name, text in fresh.items()}
        if engine.manifest_due is not None:
            expected["manifest.yaml"] = manifest_written  # type: ignore[assignment]
        assert written == expected
        manifest_written = written["manifest.yaml"]
        index.update("chat", derived.tiers.manifest)  # the daemon's long-lived index
    assert engine is not None
    engine.write_later(durable=False)
    assert {name: (folder / name).read_bytes() for name, _ in derive.FILES} == {
        name: text.encode() for name, text in _rebuilt_elsewhere(store, base / "mirror").items()
    }
    kept = _units(index)
    index.close()
    with Index(Store(base / "root")) as rebuilt:  # the same file, from scratch
        rebuilt.drop("chat")
        rebuilt.update("chat", derive.update(store, "chat", rebuild=True).tiers.manifest)
        assert _units(rebuilt) == kept


def _units(index: Index) -> list[object]:
    """Everything the index knows of the session: its units, and its turn postings
    (each term's whole list: blocks depend on how the turns arrived, lists must not)."""
    units: list[object] = index.db.execute(
        "SELECT kind, key, first_turn, last_turn, ts, tokens, text FROM units "
        "WHERE session='chat' ORDER BY kind, key"
    ).fetchall()
    terms = [row[0] for row in index.db.execute("SELECT DISTINCT term FROM postings")]
    lists = index.postings.lists("chat", terms).get("chat", {})
    return [
        *units,
        sorted((term, array.tobytes()) for term, array in lists.items()),
        index.postings.stats("chat"),
        index.postings.firsts("chat").tolist(),
    ]


@SETTINGS
@given(
    turns=sessions(),
    cuts=st.lists(st.integers(1, 59), max_size=6),
    picks=st.lists(st.integers(0, len(EVENTS) - 1), max_size=6),
    later=st.lists(st.integers(0, 2), max_size=7),
)
def test_a_long_lived_engine_renders_what_a_rebuild_renders(
    tmp_path_factory,
    turns: list[dict[str, str]],
    cuts: list[int],
    picks: list[int],
    later: list[int],
) -> None:
    """The daemon's path: one Engine kept in memory, reusing the manifest entries of
    closed segments between updates, while turns and events arrive; the manifest is
    now and then left for later, as while appends keep coming, and written after."""
    bounds = sorted({c for c in cuts if c < len(turns)} | {len(turns)})
    _live_equals_rebuild(tmp_path_factory.mktemp("live"), turns, bounds, picks, later=later)


@pytest.mark.parametrize("fast", [True, False], ids=["fast-lifecycle", "default-config"])
def test_a_long_lived_engine_follows_every_event_kind(tmp_path: Path, fast: bool) -> None:
    """Every event kind, each arriving after closed segments exist, with a reversed
    decision (a superseded critical item inside a closed segment) along the way."""
    turns = [
        {"role": "user" if n % 2 == 0 else "assistant", "content": line["content"], "ts": "0"}
        for n, line in enumerate(LINES * 2)
    ]
    turns[30:30] = [
        {"role": "user", "content": "Decision: we keep the CLI in click.", "ts": "0"},
        {"role": "assistant", "content": "Noted.", "ts": "0"},
    ]
    turns[80:80] = [
        {"role": "user", "content": "Actually, let's use typer instead of click.", "ts": "0"},
        {"role": "assistant", "content": "Switching the CLI to typer.", "ts": "0"},
    ]
    clock = 1_767_000_000
    for n, turn in enumerate(turns):
        clock += 3 * 3600 if n in (34, 60) else 60  # pauses close the segments before them
        turn["ts"] = str(clock)
    bounds = [*range(20, len(turns), 2), len(turns)]
    picks = [n // 3 % len(EVENTS) if n % 3 == 0 else -1 for n in range(len(bounds))]
    later = [n % 4 % 3 for n in range(len(bounds))]  # now, later, later and written, now
    _live_equals_rebuild(tmp_path, turns, bounds, picks, fast, later)


def test_render_cache_sees_a_superseded_critical_item(tmp_path: Path) -> None:
    """A critical item superseded inside a closed segment whose own conclusion stays
    (the fold bumps ``critical_rev``): the cached manifest entry is not reused."""
    from ccm.engine.render import RenderCache, render

    store = Store(tmp_path / "root")
    source = tmp_path / "chat.jsonl"
    _write(source, [{**t, "ts": str(1_767_000_000 + 60 * n)} for n, t in enumerate(LINES)])
    ingest(store, [str(source)], derive=False)
    state = derive.update(store, "chat").state
    cache = RenderCache()
    config = store.config
    before = render(state, [], config, cache)
    target = next(
        item
        for item in state["critical"]
        if any(item["text"] in s["critical"] for s in before.manifest["segments"][:-1])
    )
    assert render(state, [], config, cache).manifest == before.manifest  # reused as is
    target["superseded_by"] = state["last_turn"]
    state["critical_rev"] += 1
    after = render(state, [], config, cache)
    assert after.manifest == render(state, [], config).manifest
    assert after.manifest != before.manifest


def test_a_long_lived_engine_rewrites_a_derived_file_changed_behind_its_back(
    tmp_path: Path,
) -> None:
    """The engine compares with what it remembers only while the file is the one it
    saw (same inode, size and mtime): a file deleted, replaced or edited in place is
    read again and rewritten, even when nothing new arrived."""
    store = Store(tmp_path / "root")
    source = tmp_path / "chat.jsonl"
    _write(source, [{**t, "ts": str(1_767_000_000 + 60 * n)} for n, t in enumerate(LINES)])
    ingest(store, [str(source)], derive=False)
    engine = derive.Engine(store, "chat")
    engine.update(save=False)
    folder = store.session_dir("chat")
    good = {name: (folder / name).read_bytes() for name, _ in derive.FILES}
    assert engine.update(save=False).written == []  # nothing changed: nothing written

    (folder / "open.yaml").unlink()
    (folder / "manifest.yaml").write_bytes(b"session: edited\n")  # replaced
    with open(folder / "working.yaml", "ab") as handle:  # edited in place
        handle.write(b"# a note\n")
    assert sorted(engine.update(save=False).written) == sorted(good)
    assert {name: (folder / name).read_bytes() for name in good} == good


@given(st.lists(st.lists(st.integers(1, 30), max_size=6), max_size=6))
def test_detected_critical_items_stay_sorted_by_turn_as_they_grow(chunks: list[list[int]]) -> None:
    """Critical items arrive in turn order, except in a log whose turn numbers go back:
    the (turn, position) pairs a segment's items are found by stay sorted either way."""
    from ccm.engine.render import _detected_critical

    detected = _detected_critical([])
    items: list[dict[str, object]] = []
    for chunk in chunks:
        found = [
            {"id": f"crit_{len(items) + n}", "text": f"t{turn}", "turn": turn, "kind": "rule"}
            | {"tokens": 1, "forbid": []}
            for n, turn in enumerate(chunk)
        ]
        items += found
        _detected_critical(found, detected)
    assert detected.placed == sorted((item["turn"], n) for n, item in enumerate(items))
    assert detected.turns == [turn for turn, _ in detected.placed]
    assert detected.texts == [item["text"] for item in items]


@given(
    count=st.integers(0, 300),
    bumps=st.lists(st.integers(0, 299), max_size=8),
    expiries=st.lists(st.integers(1, 40), min_size=300, max_size=300),
    last_turn=st.integers(0, 50),
)
def test_the_render_cache_finds_every_changed_segment(
    count: int, bumps: list[int], expiries: list[int], last_turn: int
) -> None:
    """`RenderCache.changed` (revs compared block by block, expiries from a heap) names
    exactly the segments whose rev moved or whose lifecycle may have moved on."""
    from ccm.engine.render import RenderCache
    from ccm.yamlio import Frozen

    caches = [RenderCache(), RenderCache()]
    segments = [{"id": f"seg_{n + 1}", "rev": 0} for n in range(count)]
    for cache in caches:
        for n in range(count):
            cache.record(n, (0, expiries[n], (), Frozen()))
    for n in bumps:
        if n < count:
            segments[n]["rev"] += 1
    expected = {n for n in bumps if n < count} | {
        n for n in range(count) if expiries[n] <= last_turn
    }
    assert caches[0].changed(segments, last_turn) == sorted(expected)
    # told which revs the fold bumped (a segment closed since the last render too)
    closed = [*segments, {"id": "seg_new", "rev": 0}]
    assert caches[1].changed(closed, last_turn, [*bumps, count]) == sorted(expected)


def test_the_render_cache_reads_the_bumps_the_fold_noted() -> None:
    """The fold notes the segments whose rev it bumped; a renderer that saw `bumps` of
    them learns the newer ones, or that it must compare every rev when the note does not
    reach back so far."""
    from ccm.engine.fold import BUMPS_KEPT, _bump
    from ccm.engine.render import RenderCache

    state = new_state("s")
    state["segments"] = [{"id": f"seg_{n + 1}", "rev": 0} for n in range(4)]
    cache = RenderCache()
    assert cache.bumped_since(state) is None  # never rendered
    cache.bumps = state["bumps"]
    assert cache.bumped_since(state) == []
    _bump(state, 2)
    _bump(state, 0)
    assert cache.bumped_since(state) == [2, 0]
    assert [s["rev"] for s in state["segments"]] == [1, 0, 1, 0]
    for _ in range(BUMPS_KEPT):
        _bump(state, 1)
    assert len(state["bumped"]) == BUMPS_KEPT and cache.bumped_since(state) is None
    cache.bumps = state["bumps"] - 3
    assert cache.bumped_since(state) == [1, 1, 1]


def test_the_render_cache_keeps_each_efforts_segments_as_a_growing_frozen_list() -> None:
    """An effort's segment list only grows at its end: its FrozenList is extended (its
    YAML reused), and made anew when the list is not the one it knew (a rebuilt state)."""
    from ccm.engine.render import RenderCache
    from ccm.yamlio import FrozenList

    cache = RenderCache()
    effort = {"id": "effort_1", "segments": ["seg_1", "seg_2"]}
    first = cache.refs(effort)
    assert type(first) is FrozenList and first == ["seg_1", "seg_2"]
    assert cache.refs(effort) is first  # unchanged: the same list
    effort["segments"].append("seg_5")
    longer = cache.refs(effort)
    assert longer == ["seg_1", "seg_2", "seg_5"] and longer._base is first
    assert cache.refs({"id": "effort_1", "segments": ["seg_1", "seg_3", "seg_4"]}) == [
        "seg_1",
        "seg_3",
        "seg_4",
    ]
    assert cache.refs({"id": "effort_1", "segments": ["seg_1"]}) == ["seg_1"]


@given(
    count=st.integers(0, 200),
    more=st.integers(0, 70),
    replaced=st.lists(st.integers(0, 269), max_size=8),
)
def test_the_index_finds_the_manifest_entries_that_are_not_the_ones_it_saw(
    count: int, more: int, replaced: list[int]
) -> None:
    """The daemon's index skips the entries that are the very objects it saw at the same
    place: compared a block at a time, it names the others, in order."""
    from ccm.index import _not_the_same

    old = [{"id": f"seg_{n + 1}"} for n in range(count)]
    new = [*old, *({"id": f"seg_{n + 1}"} for n in range(count, count + more))]
    for n in replaced:
        if n < len(new):
            new[n] = dict(new[n])
    expected = [s for n, s in enumerate(new) if n >= len(old) or old[n] is not s]
    assert _not_the_same(new, old) == expected


def test_a_long_lived_engine_with_nothing_new_renders_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An update that folds no turn, with the same events and config, and finds its
    files as it wrote them, reuses the last render (the daemon is told of every append
    more than once). A new event, a file changed behind its back or a write that failed
    mean a render and a write again."""
    store = Store(tmp_path / "root")
    source = tmp_path / "chat.jsonl"
    _write(source, [{**t, "ts": str(1_767_000_000 + 60 * n)} for n, t in enumerate(LINES)])
    ingest(store, [str(source)], derive=False)
    renders = []
    real_render = derive.render
    monkeypatch.setattr(derive, "render", lambda *a: renders.append(1) or real_render(*a))
    engine = derive.Engine(store, "chat")
    first = engine.update(save=False)
    again = engine.update(save=False)
    assert len(renders) == 1 and again.written == [] and again.tiers is first.tiers

    store.append_events("chat", [{"who": "user", "kind": "pin", "args": {"targets": ["seg_1"]}}])
    assert engine.update(save=False).written and len(renders) == 2
    engine.update(save=False, later=True)
    assert len(renders) == 2

    folder = store.session_dir("chat")
    (folder / "open.yaml").unlink()
    assert engine.update(save=False).written == ["open.yaml"] and len(renders) == 3

    def refuse(*args: object, **kwargs: object) -> list[str]:
        raise OSError("disk full")

    with monkeypatch.context() as patched:
        patched.setattr(store, "write_derived_files", refuse)
        more = [*LINES, {"role": "user", "content": "Never log the API keys."}]
        _write(source, [{**t, "ts": str(1_767_000_000 + 60 * n)} for n, t in enumerate(more)])
        ingest(store, [str(source)], derive=False)
        with pytest.raises(OSError):
            engine.update(save=False)  # the turn is folded, the files stay as they were
    assert engine.update(save=False).written  # the failed write is made now
    assert {name: (folder / name).read_bytes() for name, _ in derive.FILES} == {
        name: text.encode() for name, text in _rebuilt_elsewhere(store, tmp_path / "mirror").items()
    }


def _chat(tmp_path: Path, name: str, count: int) -> Path:
    """The first `count` sample lines ingested as session `name`, without tiers."""
    source = tmp_path / f"{name}.jsonl"
    _write(source, [{**t, "ts": str(1_767_000_000 + 60 * n)} for n, t in enumerate(LINES[:count])])
    return source


def test_a_keeper_writes_the_manifest_and_cache_a_moment_later(tmp_path: Path) -> None:
    """A server's keeper (`later`) returns current tiers at once and writes what grows
    with the session (the manifest, the engine cache) after a pause, once a burst; what
    it writes is what a rebuild writes."""
    store = Store(tmp_path / "root")
    ingest(store, [str(_chat(tmp_path, "chat", 10))], derive=False)
    keeper = derive.Keeper(4, later=1.0)  # long enough for the checks that it waits
    keeper(store, "chat")  # the first update renders from scratch: written at once
    manifest = store.session_dir("chat") / "manifest.yaml"
    assert "turns: 10\n" in manifest.read_text()
    ingest(store, [str(_chat(tmp_path, "chat", len(LINES)))], derive=False)
    derived = keeper(store, "chat")
    assert derived.tiers.manifest["turns"] == len(LINES)  # the tiers are current
    assert "turns: 10\n" in manifest.read_text()  # the file waits
    assert list(keeper.due) == [(store.root, "chat")]
    wait_for(lambda: "turns: 10\n" not in manifest.read_text(), "the manifest written later")
    assert manifest.read_text() == _rebuilt_elsewhere(store, tmp_path / "mirror")["manifest.yaml"]
    engine = derive.Engine(store, "chat")
    assert engine.update().rebuilt is False  # from the cache it saved
    assert engine.cursor.offset == store.raw_path("chat").stat().st_size


def test_a_keeper_writes_what_waits_on_flush_and_when_an_engine_leaves(tmp_path: Path) -> None:
    store = Store(tmp_path / "root")
    for name in ("one", "two"):
        ingest(store, [str(_chat(tmp_path, name, 8))], derive=False)
    keeper = derive.Keeper(1, later=600.0)  # never by the timer here
    keeper(store, "one")
    ingest(store, [str(_chat(tmp_path, "one", 20))], derive=False)
    keeper(store, "one")
    one = store.session_dir("one") / "manifest.yaml"
    assert "turns: 8\n" in one.read_text()
    keeper(store, "two")  # "one" leaves memory: what waited is written
    assert "turns: 20\n" in one.read_text()
    ingest(store, [str(_chat(tmp_path, "two", 20))], derive=False)
    keeper(store, "two")
    two = store.session_dir("two") / "manifest.yaml"
    assert "turns: 8\n" in two.read_text()
    keeper.flush()
    assert "turns: 20\n" in two.read_text() and keeper.due == {} and keeper.timer is None


def _index_content(index: Index, session: str) -> dict[str, object]:
    """What an index holds of `session`, without row ids."""
    db = index.db
    lists = index.postings.lists(session, sorted(_terms(db, session))).get(session, {})
    return {
        "units": db.execute(
            "SELECT kind, key, first_turn, last_turn, ts, tokens, shown, text, tag, speaker, "
            "pair, role FROM units WHERE session=? ORDER BY kind, key",
            (session,),
        ).fetchall(),
        "progress": db.execute(
            "SELECT offset, line, tools FROM progress WHERE session=?", (session,)
        ).fetchall(),
        "speakers": db.execute("SELECT name FROM speakers WHERE session=?", (session,)).fetchall(),
        "lists": {term: sorted(array.tolist()) for term, array in lists.items()},
    }


def _terms(db: object, session: str) -> set[str]:
    rows = db.execute(  # type: ignore[attr-defined]
        "SELECT term FROM postings WHERE session=? UNION SELECT term FROM pending WHERE session=?",
        (session, session),
    )
    return {row[0] for row in rows}


@SETTINGS
@given(turns=sessions(), tools=st.sets(st.integers(0, 59)), batch=st.integers(1, 12))
def test_an_index_built_a_batch_at_a_time_holds_what_one_built_whole_holds(
    tmp_path_factory,
    monkeypatch: pytest.MonkeyPatch,
    turns: list[dict[str, str]],
    tools: set[int],
    batch: int,  # type: ignore[no-untyped-def]
) -> None:
    from ccm import index as index_module

    turns = [{**t, "role": "tool"} if n in tools and n else t for n, t in enumerate(turns)]
    base = tmp_path_factory.mktemp("batches")
    store = Store(base / "root")
    source = base / "chat.jsonl"
    _write(source, turns)
    ingest(store, [str(source)])
    held = {}
    for size in (10**9, batch):
        monkeypatch.setattr(index_module, "INDEX_BATCH", size)
        with Index(store) as index:
            index.drop("chat")
            index.update("chat")
            held[size] = _index_content(index, "chat")
    assert held[batch] == held[10**9]
