"""What a careless or hostile root cannot do to ccm: a symlink that leads out of the root,
a damaged index, an ingest killed between its append and its tiers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ccm import derive
from ccm import store as store_module
from ccm.errors import OutsideRoot
from ccm.index import Index
from ccm.ingest.model import ParseOptions
from ccm.ingest.pipeline import append_session, importer
from ccm.store import Store
from tests.helpers import ccm_at as ccm

SAMPLE = Path(__file__).parent.parent / "sample_knowledge" / "sources"


def lines(count: int, start: int = 0) -> bytes:
    """A JSON-lines conversation with fixed timestamps (so two imports are equal)."""
    out = []
    for number in range(start, start + count):
        role = "user" if number % 2 == 0 else "assistant"
        words = f"message {number} about the cache layer, the deploy and item {number % 7}"
        ts = f"2026-01-01T00:{number // 60 % 60:02d}:{number % 60:02d}Z"
        out.append(json.dumps({"role": role, "content": words, "ts": ts}))
    return ("\n".join(out) + "\n").encode()


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "root"
    source = tmp_path / "start.jsonl"
    source.write_bytes(lines(6))
    assert ccm(path, "ingest", str(source), "-s", "good").exit_code == 0
    return path


# ---------------------------------------------------------------------------
# symlinks


def test_a_raw_file_linked_out_of_the_root_is_refused(root: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"not yours\n")
    (root / "chats" / "evil").mkdir()
    (root / "chats" / "evil" / "raw.jsonl").symlink_to(outside)
    source = tmp_path / "in.jsonl"
    source.write_bytes(lines(2))
    result = ccm(root, "ingest", str(source), "-s", "evil")
    assert result.exit_code != 0
    assert "leads out of the knowledge root" in result.output
    assert "evil/raw.jsonl" in result.output
    assert outside.read_bytes() == b"not yours\n"
    shown = ccm(root, "show", "evil")
    assert shown.exit_code != 0 and "leads out" in shown.output


def test_a_session_folder_linked_out_of_the_root_is_refused(root: Path, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (root / "chats" / "evil").symlink_to(outside, target_is_directory=True)
    source = tmp_path / "in.jsonl"
    source.write_bytes(lines(2))
    result = ccm(root, "ingest", str(source), "-s", "evil")
    assert result.exit_code != 0
    assert "leads out of the knowledge root" in result.output
    assert list(outside.iterdir()) == []
    with pytest.raises(OutsideRoot):
        Store(root).raw_path("evil")


def test_commands_over_every_session_leave_a_linked_one_out(root: Path, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "raw.jsonl").write_bytes(lines(2))
    (root / "chats" / "evil").symlink_to(outside, target_is_directory=True)
    assert Store(root).sessions() == ["good"]
    listed = ccm(root, "sessions", "--json")
    assert listed.exit_code == 0, listed.output
    assert "evil" not in listed.stdout
    consolidated = ccm(root, "consolidate")
    assert consolidated.exit_code == 0, consolidated.output
    assert sorted(p.name for p in outside.iterdir()) == ["raw.jsonl"]
    # a raw.jsonl linked out of a plain folder is left out too, and so is every
    # session when the chats folder itself leads out
    (root / "chats" / "evil").unlink()
    (root / "chats" / "evil").mkdir()
    (root / "chats" / "evil" / "raw.jsonl").symlink_to(outside / "raw.jsonl")
    assert Store(root).sessions() == ["good"]
    (root / "chats" / "evil" / "raw.jsonl").unlink()
    far = tmp_path / "far"
    (root / "chats").rename(far)
    (root / "chats").symlink_to(far, target_is_directory=True)
    assert Store(root).sessions() == []


def test_a_vault_folder_linked_out_of_the_root_is_refused(root: Path, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (root / "network").symlink_to(outside, target_is_directory=True)
    result = ccm(root, "consolidate")
    assert result.exit_code != 0
    assert "network leads out of the knowledge root" in result.output
    assert list(outside.iterdir()) == []


def test_links_that_stay_inside_the_root_are_fine(tmp_path: Path) -> None:
    real = tmp_path / "real-root"
    source = tmp_path / "in.jsonl"
    source.write_bytes(lines(4))
    assert ccm(real, "ingest", str(source), "-s", "a").exit_code == 0
    link = tmp_path / "linked-root"
    link.symlink_to(real, target_is_directory=True)  # the root itself may be a link
    (real / "chats" / "b").symlink_to(real / "chats" / "a", target_is_directory=True)
    assert Store(link).sessions() == ["a", "b"]
    shown = ccm(link, "show", "b")
    assert shown.exit_code == 0, shown.output


@pytest.mark.parametrize("root_linked", [False, True])
def test_what_is_inside_is_what_resolving_every_link_says(
    tmp_path: Path, root_linked: bool
) -> None:
    real = tmp_path / "real"
    outside = tmp_path / "outside"
    for folder in (real / "chats" / "a", outside / "x"):
        folder.mkdir(parents=True)
    (real / "chats" / "a" / "raw.jsonl").write_text("")
    (real / "chats" / "in").symlink_to(real / "chats" / "a", target_is_directory=True)
    (real / "chats" / "out").symlink_to(outside, target_is_directory=True)
    (real / "chats" / "a" / "far.jsonl").symlink_to(outside / "x")
    (real / "chats" / "a" / "near.jsonl").symlink_to(real / "chats" / "a" / "raw.jsonl")
    (real / "chats" / "dangling").symlink_to(outside / "none")
    (real / "up").symlink_to(tmp_path, target_is_directory=True)
    root = real
    if root_linked:
        root = tmp_path / "link"
        root.symlink_to(real, target_is_directory=True)
    paths = [
        Path("chats/a/raw.jsonl"),
        Path("chats/a/new.jsonl"),
        Path("chats/none/raw.jsonl"),
        Path("chats/in/raw.jsonl"),
        Path("chats/out/raw.jsonl"),
        Path("chats/out"),
        Path("chats/a/far.jsonl"),
        Path("chats/a/near.jsonl"),
        Path("chats/dangling"),
        Path("chats/dangling/raw.jsonl"),
        Path("up/real/chats"),
        Path("up/outside"),
        Path("chats/../../outside"),
        Path("chats/a/../../chats"),
        Path("."),
    ]
    home = os.path.realpath(root)
    for relative in paths:
        path = root / relative
        real_path = os.path.realpath(path)
        expected = real_path == home or real_path.startswith(home + os.sep)
        assert store_module.is_inside(root, path) is expected, relative
    assert store_module.is_inside(root, tmp_path / "outside" / "x") is False
    assert store_module.is_inside(root, Path(home) / "chats") is True


def test_an_export_through_a_link_into_the_root_is_refused(root: Path, tmp_path: Path) -> None:
    assert ccm(root, "consolidate").exit_code == 0
    sneaky = tmp_path / "sneaky"
    sneaky.symlink_to(root / "chats", target_is_directory=True)
    result = ccm(root, "export", "--layer", "0", str(sneaky / "out"))
    assert result.exit_code != 0
    assert "inside the knowledge root" in result.output


# ---------------------------------------------------------------------------
# a damaged index


def damage(path: Path, how: str) -> None:
    data = path.read_bytes()
    if how == "noise":
        path.write_bytes(os.urandom(8192))
    elif how == "truncated":
        path.write_bytes(data[: len(data) // 3])
    else:  # pages overwritten after the header
        spoiled = bytearray(data)
        for at in range(4096, len(spoiled), 7):
            spoiled[at] = (spoiled[at] + 101) % 256
        path.write_bytes(bytes(spoiled))


@pytest.mark.parametrize("how", ["noise", "truncated", "pages"])
def test_a_damaged_index_is_set_aside_and_rebuilt(
    tmp_path: Path, how: str, caplog: pytest.LogCaptureFixture
) -> None:
    root = tmp_path / "root"
    assert ccm(root, "ingest", str(SAMPLE)).exit_code == 0
    query = "systemd journald restart"
    before = ccm(root, "recall", query, "--json")
    assert before.exit_code == 0 and json.loads(before.stdout)
    index = root / ".ccm" / "index.sqlite"
    damage(index, how)
    after = ccm(root, "recall", query, "--json")
    assert after.exit_code == 0, after.output
    assert json.loads(after.stdout) == json.loads(before.stdout)
    assert "index.sqlite is damaged" in caplog.text and "set aside" in caplog.text
    assert (root / ".ccm" / "index.sqlite.damaged").exists()
    damage(index, how)
    rebuilt = ccm(root, "rebuild")
    assert rebuilt.exit_code == 0, rebuilt.output
    damage(index, how)
    source = tmp_path / "more.jsonl"
    source.write_bytes(lines(4))
    ingested = ccm(root, "ingest", str(source), "-s", "more")
    assert ingested.exit_code == 0, ingested.output
    assert ccm(root, "recall", "cache layer deploy", "-s", "more").exit_code == 0


def test_first_opens_of_a_new_index_do_not_race(tmp_path: Path) -> None:
    """Threads (or processes) that open a root's index for the first time together all
    get it, and none mistakes another's half-made schema for damage."""
    for trial in range(12):
        store = Store(tmp_path / f"root-{trial}")
        store.init()
        failures: list[BaseException] = []

        def open_it(store: Store = store, failures: list[BaseException] = failures) -> None:
            try:
                with Index(store) as index:
                    index.db.execute("SELECT count(*) FROM units").fetchone()
            except BaseException as exc:
                failures.append(exc)

        threads = [threading.Thread(target=open_it) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert failures == []
        assert not (store.cache / "index.sqlite.damaged").exists()


# ---------------------------------------------------------------------------
# an ingest killed between its append and its tiers


def test_tiers_left_behind_by_a_killed_ingest_are_brought_up_to_date(
    root: Path, tmp_path: Path
) -> None:
    store = Store(root)
    source = tmp_path / "big.jsonl"
    source.write_bytes(lines(6) + lines(10, start=6))
    parsed = importer("jsonl")(source.read_bytes(), source.name, ParseOptions(session="good"))
    (session,) = parsed.sessions
    time.sleep(0.01)  # the append comes after the engine last read the log
    added = append_session(store, session, "2026-01-01T00:00:00Z")  # the append, no tiers
    assert added.added == 10
    again = ccm(root, "ingest", str(source), "-s", "good", "--json")
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["turns_added"] == 0
    manifest = (root / "chats" / "good" / "manifest.yaml").read_text()
    assert "turns: 16" in manifest


def test_an_ingest_with_nothing_new_does_not_derive_again(root: Path, tmp_path: Path) -> None:
    source = tmp_path / "start.jsonl"
    result = ccm(root, "ingest", str(source), "-s", "good", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["derived"] == []


def _started(root: Path, first: Path) -> Path:
    """A root whose session already has tiers: the first part of the conversation."""
    result = ccm(root, "ingest", str(first), "-s", "s")
    assert result.exit_code == 0, result.output
    return root


def _state(root: Path) -> tuple[list[dict[str, object]], dict[str, bytes]]:
    store = Store(root)
    turns, _, _ = store.read_turns("s")
    tiers = {name: (root / "chats" / "s" / name).read_bytes() for name, _ in derive.FILES}
    return turns, tiers


def _ingest_command(root: Path, source: Path) -> list[str]:
    return [sys.executable, "-m", "ccm", "--root", str(root), "ingest", str(source), "-s", "s"]


@settings(
    max_examples=5,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(when=st.floats(min_value=0.0, max_value=0.95))
def test_an_ingest_killed_at_any_point_then_run_again_equals_one_run(
    tmp_path: Path, when: float
) -> None:
    """The kill lands at `when` of the time an uninterrupted run takes here (measured
    once, interpreter start included), so it falls inside the work, wherever."""
    first, source = tmp_path / "first.jsonl", tmp_path / "big.jsonl"
    took = tmp_path / "uninterrupted-seconds"
    if not source.exists():
        first.write_bytes(lines(500))
        source.write_bytes(lines(3000))  # the same 500, then more
        done = _started(tmp_path / "uninterrupted", first)
        started = time.monotonic()
        subprocess.run(_ingest_command(done, source), capture_output=True, check=True)
        took.write_text(str(time.monotonic() - started))
    expected = _state(tmp_path / "uninterrupted")
    root = _started(tmp_path / f"killed-{time.monotonic_ns()}", first)
    command = _ingest_command(root, source)
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(when * float(took.read_text()))
    process.send_signal(signal.SIGKILL)
    process.wait()
    rerun = subprocess.run(command, capture_output=True, text=True, check=False)
    assert rerun.returncode == 0, rerun.stderr
    assert _state(root) == expected


# ---------------------------------------------------------------------------
# a copied or restored root


def _said(index: Index) -> int:
    """How many units of session "good" hold its turns (one per turn, one per exchange)."""
    query = "SELECT count(*) FROM units WHERE session='good' AND kind IN ('turn', 'pair')"
    return int(index.db.execute(query).fetchone()[0])


def _copied(root: Path, tmp_path: Path) -> Path:
    """`root` after a recall and a consolidate (every cache made), copied: new inodes
    and times, the same bytes."""
    import shutil

    assert ccm(root, "recall", "cache layer").exit_code == 0
    assert ccm(root, "consolidate").exit_code == 0
    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    assert (copy / "chats/good/raw.jsonl").stat().st_ino != (
        root / "chats/good/raw.jsonl"
    ).stat().st_ino
    return copy


def test_a_copied_root_reads_on_where_it_was(
    root: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    copy = _copied(root, tmp_path)
    caplog.set_level("INFO")
    with Index(Store(copy)) as index:
        assert _said(index) == 9
        # the last exchange is read again, and its units are the ones held: none written
        assert index.update("good") == 0
    assert derive.Engine(Store(copy), "good").update().rebuilt is False
    assert ccm(copy, "recall", "cache layer").exit_code == 0
    consolidated = ccm(copy, "consolidate", "--json")
    assert consolidated.exit_code == 0, consolidated.output
    assert json.loads(consolidated.stdout)["sessions"]["consolidated"] == []
    assert "truncated or replaced" not in caplog.text
    assert "moved or restored" in caplog.text
    for name, _ in derive.FILES:
        assert (copy / "chats/good" / name).read_bytes() == (
            root / "chats/good" / name
        ).read_bytes()


def test_a_copy_whose_log_was_written_again_is_rebuilt(
    root: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The same size and a new inode, but other bytes: not a copy of what was read."""
    copy = _copied(root, tmp_path)
    raw = copy / "chats/good/raw.jsonl"
    changed = raw.with_name("raw.jsonl.new")
    changed.write_bytes(raw.read_bytes().replace(b"cache layer", b"queue layer"))
    os.replace(changed, raw)
    with Index(Store(copy)) as index:
        assert index.update("good") == _said(index)  # all of it, read again
    assert derive.Engine(Store(copy), "good").update().rebuilt is True
    assert "truncated or replaced" in caplog.text
    consolidated = ccm(copy, "consolidate", "--json")
    assert json.loads(consolidated.stdout)["sessions"]["consolidated"] == ["good"]
    store = Store(copy)
    assert store.session_stats("good").turns == 6


@given(data=st.binary(max_size=300_000), cut=st.floats(0.0, 1.0))
@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_a_probe_tells_a_copy_from_other_bytes(tmp_path: Path, data: bytes, cut: float) -> None:
    from ccm.store import probe

    offset = int(len(data) * cut)
    original, copy = tmp_path / "original", tmp_path / "copy"
    original.write_bytes(data)
    copy.write_bytes(data + b"appended later")
    assert probe(original, offset) == probe(copy, offset) != ""
    assert probe(original, len(data) + 1) == ""  # shorter than what was read
    if offset:
        flipped = bytearray(data)
        flipped[offset - 1] ^= 1  # the last byte read
        copy.write_bytes(bytes(flipped))
        assert probe(copy, offset) != probe(original, offset)
