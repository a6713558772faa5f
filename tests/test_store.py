"""The store: safe names, locked appends, atomic replaces, incremental reads, schemas."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ccm import config, schemas, store
from ccm.errors import ConfigError, InvalidSessionId, SchemaError, UnknownSession
from ccm.store import Cursor, LockedLog, Store, atomic_write, check_session_id, scan_jsonl


def entry(turn: int, content: str = "hello", role: str = "user") -> dict[str, object]:
    return {"turn": turn, "role": role, "content": content, "ts": "2026-01-01T00:00:00Z"}


# -- the root ---------------------------------------------------------------


def test_root_comes_from_flag_then_env_then_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CCM_HOME", str(tmp_path / "env"))
    assert store.resolve_root(tmp_path / "flag") == tmp_path / "flag"
    assert store.resolve_root(None) == tmp_path / "env"
    monkeypatch.delenv("CCM_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert store.resolve_root(None) == tmp_path / "home" / ".knowledge"


@pytest.mark.parametrize(
    "good", ["a", "chat-1", "5c0375b4-57a5-4f26-b12d-d022ee4e51b7", "x~agent-1", "v1.2_b@c+d=e"]
)
def test_good_session_ids(good: str) -> None:
    assert check_session_id(good) == good


@pytest.mark.parametrize(
    ("bad", "fragment"),
    [
        ("", "empty"),
        ("..", "invalid session id"),
        ("../evil", "invalid session id"),
        ("a/b", "invalid session id"),
        ("a\\b", "invalid session id"),
        ("a..b", "invalid session id"),
        (".hidden", "invalid session id"),
        ("-flag", "invalid session id"),
        ("bad\x01id", "\\x01"),
        ("tab\there", "invalid session id"),
        ("x" * 129, "129 characters"),
        ("/etc/passwd", "invalid session id"),
    ],
)
def test_bad_session_ids_are_refused_and_create_nothing(
    bad: str, fragment: str, tmp_path: Path
) -> None:
    root = tmp_path / "root"
    before = sorted(tmp_path.rglob("*"))
    with pytest.raises(InvalidSessionId) as info:
        Store(root).session_dir(bad)
    assert fragment in str(info.value)
    assert sorted(tmp_path.rglob("*")) == before


def test_slug_session_id_always_gives_a_valid_id() -> None:
    for name in ["my chat (1)", "../../x", "...", "", "é" * 300, "a" * 500]:
        assert check_session_id(store.slug_session_id(name))


def test_init_creates_layout_and_documented_config(ccm_home: Path) -> None:
    created = Store().init()
    assert (ccm_home / "chats").is_dir() and (ccm_home / ".ccm").is_dir()
    assert ccm_home / "config.yaml" in created
    # the written config holds exactly the defaults
    assert config.load(ccm_home / "config.yaml").values == config.DEFAULTS
    assert Store().init() == []


def test_unknown_session_names_the_fix(ccm_home: Path) -> None:
    with pytest.raises(UnknownSession, match="ccm ingest"):
        Store().require_session("nope")


# -- atomic replace -----------------------------------------------------------


def test_atomic_write_replaces_whole_file(tmp_path: Path) -> None:
    target = tmp_path / "d" / "manifest.yaml"
    atomic_write(target, b"one\n")
    atomic_write(target, b"two\n")
    assert target.read_bytes() == b"two\n"
    assert [p.name for p in target.parent.iterdir()] == ["manifest.yaml"]


def test_atomic_write_keeps_old_file_and_no_temp_on_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "working.yaml"
    atomic_write(target, b"old\n")
    seen: list[str] = []

    def broken_replace(src: str, dst: str) -> None:
        seen.append(os.path.basename(src))
        raise OSError("disk on fire")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk on fire"):
        atomic_write(target, b"new\n")
    assert target.read_bytes() == b"old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["working.yaml"]
    assert seen and store.is_temp_file(seen[0]) and seen[0].startswith(".")


@pytest.mark.parametrize("exchange", [True, False], ids=["exchange", "rename"])
def test_a_write_without_fsync_replaces_in_order_and_leaves_no_temp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, exchange: bool
) -> None:
    """durable=False swaps the new file in (renameat2 on Linux) or renames it; either way
    each file is whole, the old one is gone, and the signature returned is the file's."""
    if not exchange:
        monkeypatch.setattr(store, "_renameat2", False)
    folder = tmp_path / "s"
    first = store.atomic_write_many(folder, {"working.yaml": b"w1\n", "manifest.yaml": b"m1\n"})
    renamed: list[str] = []
    real_replace = os.replace
    monkeypatch.setattr(os, "replace", lambda a, b: renamed.append(str(b)) or real_replace(a, b))
    files = {"working.yaml": b"w2\n" * 3, "manifest.yaml": b"m2\n", "open.yaml": b"o\n"}
    second = store.atomic_write_many(folder, files, durable=False)
    assert {name: (folder / name).read_bytes() for name in files} == files
    assert sorted(p.name for p in folder.iterdir()) == sorted(files)
    for name, sig in second.items():
        assert sig == store.signature(os.stat(folder / name)) != first.get(name)
    # only a file that did not exist yet is renamed when the exchange works
    expected = ["open.yaml"] if exchange and sys.platform.startswith("linux") else list(files)
    assert [Path(p).name for p in renamed] == expected


# -- reading ------------------------------------------------------------------


def test_incremental_read_leaves_a_partial_last_line(tmp_path: Path) -> None:
    log = tmp_path / "raw.jsonl"
    lines = [json.dumps(entry(n)) for n in (1, 2, 3)]
    log.write_text("\n".join(lines) + "\n" + json.dumps(entry(4))[:10])
    first = list(scan_jsonl(log, schema="raw_entry"))
    assert [line.record["turn"] for line in first if line.record] == [1, 2, 3]
    cursor = first[-1].cursor
    assert cursor == Cursor(log.stat().st_size - 10, 3)
    # the writer finishes its line and appends another
    with open(log, "a") as handle:
        handle.write(json.dumps(entry(4))[10:] + "\n" + json.dumps(entry(5)) + "\n")
    rest = list(scan_jsonl(log, cursor, schema="raw_entry"))
    assert [(line.number, line.record and line.record["turn"]) for line in rest] == [
        (4, 4),
        (5, 5),
    ]
    assert rest[-1].cursor.offset == log.stat().st_size


def test_invalid_lines_are_reported_with_file_and_line(tmp_path: Path) -> None:
    log = tmp_path / "raw.jsonl"
    log.write_bytes(
        b"\n".join(
            [
                json.dumps(entry(1)).encode(),
                b'{"turn": "x", "role": "user", "content": "a", "ts": "2026-01-01T00:00:00Z"}',
                b"{not json",
                b"\xff\xfe",
                b"[1, 2]",
                json.dumps(entry(2)).encode(),
            ]
        )
        + b"\n"
    )
    lines = list(scan_jsonl(log, schema="raw_entry"))
    bad = [line.bad for line in lines if line.bad]
    assert [b.line for b in bad] == [2, 3, 4, 5]
    assert "raw_entry schema" in bad[0].error and "turn" in bad[0].error
    assert "invalid JSON" in bad[1].error
    assert "invalid UTF-8" in bad[2].error
    assert "found list" in bad[3].error
    assert bad[0].describe().startswith(f"{log}:2: ")
    assert [line.record["turn"] for line in lines if line.record] == [1, 2]


def test_chunk_boundaries_do_not_split_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store, "_READ_CHUNK", 7)
    log = tmp_path / "raw.jsonl"
    records = [entry(n, "x" * n) for n in range(1, 40)]
    log.write_bytes(b"".join(store.dumps_line(r) for r in records))
    assert [line.record for line in scan_jsonl(log)] == records


def test_lone_surrogates_round_trip(tmp_path: Path) -> None:
    log = tmp_path / "raw.jsonl"
    record = entry(1, "broken \ud800 escape")
    with LockedLog(log) as held:
        held.append([record])
    assert [line.record for line in scan_jsonl(log, schema="raw_entry")] == [record]


# -- appending ----------------------------------------------------------------


def test_append_terminates_a_torn_tail_instead_of_gluing(tmp_path: Path) -> None:
    log = tmp_path / "raw.jsonl"
    log.write_bytes(store.dumps_line(entry(1)) + b'{"turn": 2, "ro')  # a writer died here
    with LockedLog(log, "raw_entry") as held:
        assert held.last_record() == entry(1)
        held.append([entry(2)])
    lines = list(scan_jsonl(log, schema="raw_entry"))
    assert [line.record for line in lines if line.record] == [entry(1), entry(2)]
    assert [line.number for line in lines if line.bad] == [2]


def test_last_record_reads_backwards_across_blocks(tmp_path: Path) -> None:
    log = tmp_path / "raw.jsonl"
    log.write_bytes(
        store.dumps_line(entry(1, "a" * 200_000)) + store.dumps_line(entry(2, "b" * 100_000))
    )
    with LockedLog(log, "raw_entry") as held:
        last = held.last_record()
    assert last is not None and last["turn"] == 2


WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from ccm.store import LockedLog
    path, name, count, fsync = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1"
    for n in range(count):
        with LockedLog(path) as log:
            last = log.last_record()
            log.append([{"writer": name, "n": n, "seq": (last["seq"] + 1) if last else 1,
                         "pad": "x" * (n % 300)}], fsync=fsync)
        if count > 1_000_000:
            print(n, flush=True)
    """
)


def test_four_processes_appending_lose_duplicate_and_interleave_nothing(tmp_path: Path) -> None:
    log = tmp_path / "raw.jsonl"
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(log), f"w{i}", "2000", "0"])
        for i in range(4)
    ]
    assert [p.wait(timeout=240) for p in procs] == [0, 0, 0, 0]
    records = [json.loads(line) for line in log.read_bytes().splitlines()]
    assert len(records) == 8000
    for i in range(4):
        assert [r["n"] for r in records if r["writer"] == f"w{i}"] == list(range(2000))
    # the read-then-append under the lock saw every earlier line: a gapless sequence
    assert [r["seq"] for r in records] == list(range(1, 8001))


def test_a_writer_killed_mid_stream_leaves_no_torn_or_lost_line(tmp_path: Path) -> None:
    log = tmp_path / "raw.jsonl"
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(log), "k", "100000000", "1"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert writer.stdout is not None
    acknowledged = -1
    deadline = time.monotonic() + 60
    while acknowledged < 300 and time.monotonic() < deadline:
        acknowledged = int(writer.stdout.readline())
    os.kill(writer.pid, signal.SIGKILL)
    writer.wait()
    writer.stdout.close()
    data = log.read_bytes()
    assert data.endswith(b"\n")
    records = [json.loads(line) for line in data.splitlines()]
    numbers = [r["n"] for r in records]
    assert numbers == list(range(len(numbers)))  # nothing torn, nothing skipped
    assert len(numbers) > acknowledged  # every acknowledged (fsynced) line is there
    # and the next writer goes on cleanly
    with LockedLog(log) as held:
        held.append([{"after": True}])
    assert json.loads(log.read_bytes().splitlines()[-1]) == {"after": True}


# -- events, quarantine, derived files ------------------------------------------


def test_events_get_sequential_ids(ccm_home: Path) -> None:
    s = Store()
    s.session_dir("chat").mkdir(parents=True)
    first = s.append_events("chat", [{"who": "cli", "kind": "pin", "args": {"segment": "seg_1"}}])
    second = s.append_events(
        "chat", [{"who": "user", "kind": "note"}, {"who": "user", "kind": "note"}]
    )
    assert [e["id"] for e in first + second] == ["evt_1", "evt_2", "evt_3"]
    events, bad, _ = s.read_events("chat")
    assert [e["kind"] for e in events] == ["pin", "note", "note"] and bad == []
    with pytest.raises(SchemaError, match="bad event"):
        s.append_events("chat", [{"who": "cli", "kind": "Not A Kind"}])


def test_quarantine_keeps_raw_bytes_once(ccm_home: Path) -> None:
    s = Store()
    bad = [
        store.BadLine("in.jsonl", 3, 40, "invalid JSON", b"{nope"),
        store.BadLine("in.jsonl", 4, 46, "invalid UTF-8", b"\xff\x00"),
    ]
    assert s.quarantine("chat", bad) == 2
    assert s.quarantine("chat", bad) == 0
    kept = [line.record for line in scan_jsonl(s.quarantine_path("chat"), schema="quarantine")]
    assert [(k["line"], k["raw"], k["encoding"]) for k in kept] == [
        (3, "{nope", "utf-8"),
        (4, "/wA=", "base64"),
    ]


def test_derived_files_are_validated_both_ways(ccm_home: Path) -> None:
    s = Store()
    good = {"session": "chat", "capacity": 4, "active": []}
    path = s.write_derived("chat", "working.yaml", good, "working")
    assert s.read_derived("chat", "working.yaml", "working") == good
    with pytest.raises(SchemaError, match="refusing to write"):
        s.write_derived("chat", "working.yaml", {"session": "chat"}, "working")
    path.write_text("session: chat\ncapacity: four\nactive: []\n")
    with pytest.raises(SchemaError, match="ccm rebuild"):
        s.read_derived("chat", "working.yaml", "working")
    path.write_text("session: [unclosed\n")
    with pytest.raises(SchemaError, match=r"working.yaml:\d+: not valid YAML"):
        s.read_derived("chat", "working.yaml", "working")


# -- config and schemas ---------------------------------------------------------


def test_config_is_optional_and_overlays_defaults(ccm_home: Path) -> None:
    ccm_home.mkdir()
    assert Store().config.values == config.DEFAULTS
    (ccm_home / "config.yaml").write_text("working:\n  capacity: 6\n")
    loaded = Store().config
    assert loaded.get("working", "capacity") == 6
    assert loaded.get("context", "budget_tokens") == 8000


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("wroking:\n  capacity: 6\n", "wroking"),
        ("working:\n  capacity: lots\n", "capacity"),
        ("tokens:\n  method: magic\n", "method"),
        ("ingest: [1\n", "config.yaml:2: not valid YAML"),
    ],
)
def test_bad_config_is_an_error_naming_the_file(ccm_home: Path, text: str, fragment: str) -> None:
    ccm_home.mkdir()
    (ccm_home / "config.yaml").write_text(text)
    with pytest.raises((ConfigError, SchemaError)) as info:
        _ = Store().config
    assert "config.yaml" in str(info.value) and fragment in str(info.value)


@pytest.mark.parametrize("name", schemas.NAMES)
def test_every_schema_loads_from_the_package_and_matches_the_repository(name: str) -> None:
    on_disk = Path(__file__).parent.parent / "schemas" / f"{name}.schema.json"
    assert schemas.schema(name) == json.loads(on_disk.read_text())
    assert callable(schemas.validator(name))


def test_wheel_ships_the_schemas(tmp_path: Path) -> None:
    repo = Path(__file__).parent.parent
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(tmp_path),
            str(repo),
        ],
        check=True,
        capture_output=True,
    )
    import zipfile

    (wheel,) = tmp_path.glob("ccm-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for name in schemas.NAMES:
        assert f"ccm/schemas/{name}.schema.json" in names


def test_a_damaged_stats_cache_is_recounted_not_fatal(ccm_home: Path) -> None:
    s = Store()
    with s.lock_raw("chat") as raw:
        raw.append([entry(1, "one two three"), entry(2, "four")])
    good = s.session_stats("chat")
    cache = s.cache / "stats" / "chat.json"
    damaged = json.loads(cache.read_text())
    damaged["stats"] = {"session": "chat", "bogus": 1}
    cache.write_text(json.dumps(damaged))
    assert s.session_stats("chat") == good


# -- the tail of a raw log -------------------------------------------------


def _expected_tail(path: Path, count: int) -> list[dict[str, object]]:
    """The last `count` valid turns of the complete lines of `path`, read the plain way."""
    data = path.read_bytes()
    complete = data[: data.rfind(b"\n") + 1]
    turns = []
    for raw in complete.split(b"\n"):
        try:
            record = json.loads(raw)
        except ValueError:
            continue
        if isinstance(record, dict) and not schemas.problem("raw_entry", record):
            turns.append(record)
    return turns[-count:] if count > 0 else []


_STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(1, 40), st.integers(0, 300)),
        st.tuples(st.just("partial"), st.integers(1, 3), st.integers(0, 300)),
        st.tuples(st.just("bad"), st.integers(1, 3), st.integers(0, 300)),
        st.tuples(st.just("rewrite"), st.integers(0, 30), st.integers(0, 300)),
        st.tuples(st.just("replace"), st.integers(0, 30), st.integers(0, 300)),
    ),
    min_size=1,
    max_size=12,
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps=_STEPS, counts=st.lists(st.integers(1, 300), min_size=12, max_size=12))
# a log written again in place, one line longer, whose lines end alike for more than a
# line's last 256 bytes: only a check reaching back to the turn numbers tells it apart
@example(
    steps=[("append", 1, 0), ("append", 1, 0), ("rewrite", 7, 218), ("rewrite", 7, 218)],
    counts=[1, 1, 1, 2, 1, 1, 1, 1, 1, 1, 1, 1],
)
def test_the_tail_kept_between_reads_is_the_tail_read_afresh(
    ccm_home: Path, steps: list[tuple[str, int, int]], counts: list[int]
) -> None:
    kept = Store(ccm_home)
    kept.init()
    folder = ccm_home / "chats" / "tailed"
    folder.mkdir(parents=True, exist_ok=True)
    raw = folder / "raw.jsonl"
    raw.write_bytes(b"")
    number = 0

    def lines(count: int, size: int) -> bytes:
        nonlocal number
        out = b""
        for _ in range(count):
            number += 1
            out += json.dumps(entry(number, "w" * (size + number % 7))).encode() + b"\n"
        return out

    for (kind, count, size), asked in zip(steps, counts, strict=False):
        if kind == "append":
            with open(raw, "ab") as handle:
                handle.write(lines(count, size))
        elif kind == "partial":  # a writer mid-append: the rest of its line comes later
            line = lines(1, size)
            with open(raw, "ab") as handle:
                handle.write(line[: len(line) // 2])
            assert kept.tail_turns("tailed", asked) == _expected_tail(raw, asked)
            with open(raw, "ab") as handle:
                handle.write(line[len(line) // 2 :] + lines(count - 1, size))
        elif kind == "bad":
            with open(raw, "ab") as handle:
                handle.write(b"{not json\n" * count + b'{"turn": "x"}\n')
        elif kind == "rewrite":  # the same file written again with another log
            # (of another size: one written again to its very size within the tick of
            # the file clock is not told apart, and ccm never writes a log again)
            number = 1000 * (number // 1000 + 1)
            data = lines(count, size)
            if len(data) == raw.stat().st_size:
                data += lines(1, size)
            with open(raw, "r+b") as handle:
                handle.write(data)
                handle.truncate()
        else:  # another file in its place
            number = 0
            fresh = folder / "raw.jsonl.new"
            fresh.write_bytes(lines(count, size))
            os.replace(fresh, raw)
        assert kept.tail_turns("tailed", asked) == _expected_tail(raw, asked), kind
        assert Store(ccm_home).tail_turns("tailed", asked) == _expected_tail(raw, asked)


@settings(max_examples=200, deadline=None)
@given(
    data=st.binary(max_size=300).map(lambda b: b.replace(b"\x00", b"\n")), block=st.integers(1, 9)
)
def test_lines_read_backwards_are_the_lines_with_where_they_start(data: bytes, block: int) -> None:
    read = lambda length, offset: data[offset : offset + length]  # noqa: E731
    old = store.BACK_BLOCK
    store.BACK_BLOCK = block  # blocks smaller than a line, and lines across blocks
    try:
        found = list(store.lines_backwards(read, len(data)))
    finally:
        store.BACK_BLOCK = old
    starts, at = [], 0
    for line in data.split(b"\n"):
        starts.append((at, line))
        at += len(line) + 1
    assert found == ([] if not data else starts[::-1])
