"""ccm watch: real watchdog observers on real files, daemons in threads and processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from ccm import daemon as ccm_daemon
from ccm import derive
from ccm.cli import main
from ccm.daemon import Daemon, session_of
from ccm.ingest.pipeline import ingest
from ccm.store import Store
from tests.helpers import WAIT, wait_for

SAMPLE = Path(__file__).parent.parent / "sample_knowledge" / "sources"


def derived(root: Path, session: str) -> dict[str, bytes]:
    folder = root / "chats" / session
    return {name: (folder / name).read_bytes() for name, _ in derive.FILES}


def equals_rebuild(root: Path, session: str) -> bool:
    """The files as they are equal what `ccm rebuild` makes (rebuilt into a copy)."""
    before = derived(root, session)
    derive.update(Store(root), session, rebuild=True)
    return derived(root, session) == before


def append(store: Store, session: str, texts: list[str], start_ts: int = 1_767_100_000) -> None:
    with store.lock_raw(session) as raw:
        last = raw.last_record()
        turn = last["turn"] if last else 0
        records = []
        for n, text in enumerate(texts, start=1):
            records.append(
                {
                    "turn": turn + n,
                    "role": "user" if (turn + n) % 2 else "assistant",
                    "content": text,
                    "ts": time.strftime(
                        "%Y-%m-%dT%H:%M:%SZ", time.gmtime(start_ts + 60 * (turn + n))
                    ),
                    "source": "test",
                }
            )
        raw.append(records, fsync=False)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "root"
    path.mkdir()
    (path / "config.yaml").write_text("ingest: {fsync: false}\n")
    ingest(Store(path), [str(SAMPLE)], derive=True)
    return path


@pytest.fixture
def running(root: Path) -> Iterator[Daemon]:
    """A daemon on `root` in a thread of this process."""
    daemon = Daemon(Store(root), debounce=0.02)
    thread = threading.Thread(target=daemon.run, daemon=True)
    thread.start()
    wait_for(lambda: daemon.last_batch is not None or daemon.updates >= 3, "the catch-up")
    yield daemon
    daemon.stop()
    thread.join(timeout=WAIT)
    assert not thread.is_alive()


def test_paths_that_matter(tmp_path: Path) -> None:
    root = tmp_path
    chats = root / "chats"
    assert session_of(root, str(chats / "s1" / "raw.jsonl")) == "s1"
    assert session_of(root, str(chats / "s1" / "events.jsonl")) == "s1"
    assert session_of(root, str(chats / "s1")) == "s1"
    assert session_of(root, str(chats / "s1" / "manifest.yaml")) is None  # its own output
    assert session_of(root, str(chats / "s1" / ".manifest.yaml.ccm-tmp-1")) is None
    assert session_of(root, str(chats / "s1" / "raw.jsonl.ccm-tmp-9")) is None
    assert session_of(root, str(root / ".ccm" / "index.sqlite")) is None
    assert session_of(root, str(tmp_path.parent / "elsewhere")) is None


def test_an_appended_turn_updates_the_tiers(root: Path, running: Daemon) -> None:
    store = Store(root)
    append(store, "ledger-sync", ["Never run migrations on a Friday afternoon."])
    working = root / "chats" / "ledger-sync" / "working.yaml"
    wait_for(lambda: "Friday afternoon" in working.read_text(), "the new critical item")
    running.stop()
    time.sleep(0.2)
    assert equals_rebuild(root, "ledger-sync")


def test_an_event_updates_the_tiers(root: Path, running: Daemon) -> None:
    store = Store(root)
    store.append_events(
        "deploy-checklist", [{"who": "user", "kind": "pin", "args": {"targets": ["seg_1"]}}]
    )
    manifest = root / "chats" / "deploy-checklist" / "manifest.yaml"
    wait_for(lambda: "pinned: true" in manifest.read_text(), "the pin")


def test_a_new_session_folder_is_picked_up(root: Path, running: Daemon, tmp_path: Path) -> None:
    source = tmp_path / "fresh-chat.jsonl"
    source.write_text(
        json.dumps({"role": "user", "content": "Which port does the proxy use?", "ts": 1})
        + "\n"
        + json.dumps({"role": "assistant", "content": "It listens on 8443.", "ts": 2})
        + "\n"
    )
    ingest(Store(root), [str(source)], derive=False)  # no tiers: the daemon makes them
    manifest = root / "chats" / "fresh-chat" / "manifest.yaml"
    wait_for(manifest.exists, "the new session's manifest")
    wait_for(lambda: "turns: 2" in manifest.read_text(), "both turns")
    from ccm.index import Index

    with Index(Store(root)) as index:  # indexed as well
        wait_for(lambda: index.search("proxy port", session="fresh-chat"), "the index")


@pytest.mark.parametrize("how", ["replaced", "truncated"])
def test_a_replaced_or_truncated_log_rebuilds_its_session(
    root: Path, running: Daemon, how: str
) -> None:
    raw = root / "chats" / "reading-notes" / "raw.jsonl"
    lines = raw.read_bytes().splitlines(keepends=True)[:4]
    if how == "replaced":
        replacement = raw.with_name("raw.jsonl.new")
        replacement.write_bytes(b"".join(lines))
        os.replace(replacement, raw)  # a new inode, shorter: not an append
    else:
        with raw.open("r+b") as handle:  # the same inode, cut short
            handle.truncate(len(b"".join(lines)))
    manifest = root / "chats" / "reading-notes" / "manifest.yaml"
    wait_for(lambda: "turns: 4\n" in manifest.read_text(), "the rebuilt tiers")
    running.stop()
    time.sleep(0.2)
    assert equals_rebuild(root, "reading-notes")


def test_a_deleted_session_is_dropped_and_the_daemon_goes_on(root: Path, running: Daemon) -> None:
    import shutil

    from ccm.index import Index

    shutil.rmtree(root / "chats" / "reading-notes")
    with Index(Store(root)) as index:
        wait_for(lambda: not index.count("reading-notes"), "the index to forget it")
    append(Store(root), "ledger-sync", ["Please keep the changelog in British English."])
    working = root / "chats" / "ledger-sync" / "working.yaml"
    wait_for(lambda: "British English" in working.read_text(), "the next update")


def test_a_bad_line_is_quarantined_and_the_daemon_goes_on(root: Path, running: Daemon) -> None:
    raw = root / "chats" / "ledger-sync" / "raw.jsonl"
    with raw.open("ab") as handle:
        handle.write(b'{"turn": "not a number", "role": 3}\n')
    quarantine = root / "chats" / "ledger-sync" / "quarantine.jsonl"
    wait_for(quarantine.exists, "the quarantined line")
    append(Store(root), "ledger-sync", ["Also: always tag releases with the date."])
    working = root / "chats" / "ledger-sync" / "working.yaml"
    wait_for(lambda: "tag releases" in working.read_text(), "the turn after the bad line")


def test_once_catches_up_and_status_reports(root: Path) -> None:
    store = Store(root)
    append(store, "deploy-checklist", ["Remember to rotate the backup keys monthly."])
    runner = CliRunner()
    before = json.loads(runner.invoke(main, ["--root", str(root), "status", "--json"]).stdout)
    assert before["running"] is False and before["behind_bytes"] > 0
    result = runner.invoke(main, ["--root", str(root), "watch", "--once"])
    assert result.exit_code == 0, result.output
    working = (root / "chats" / "deploy-checklist" / "working.yaml").read_text()
    assert "rotate the backup keys" in working
    after = json.loads(runner.invoke(main, ["--root", str(root), "status", "--json"]).stdout)
    assert after["behind_bytes"] == 0 and after["sessions"] == 3
    assert equals_rebuild(root, "deploy-checklist")


def test_a_session_deleted_while_no_daemon_ran_leaves_the_index(root: Path) -> None:
    import shutil

    from ccm.index import Index

    with Index(Store(root)) as index:
        assert "reading-notes" in index.sessions()
    shutil.rmtree(root / "chats" / "reading-notes")
    assert CliRunner().invoke(main, ["--root", str(root), "watch", "--once"]).exit_code == 0
    with Index(Store(root)) as index:
        assert index.sessions() == ["deploy-checklist", "ledger-sync"]
        assert not index.search("reading", session="reading-notes")


def test_json_log_to_a_file(root: Path, tmp_path: Path) -> None:
    log_file = tmp_path / "watch.log"
    result = CliRunner().invoke(
        main, ["--root", str(root), "watch", "--once", "--json-log", "--log-file", str(log_file)]
    )
    assert result.exit_code == 0, result.output
    entries = [json.loads(line) for line in log_file.read_text().splitlines()]
    assert {"ts", "level", "logger", "msg"} <= set(entries[-1])
    assert entries[-1]["msg"] == "caught up on 3 sessions"


# -- daemons as processes ----------------------------------------------------------


def start(root: Path, *extra: str) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(
        [sys.executable, "-m", "ccm", "--root", str(root), "watch", "--debounce", "20", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    wait_for(lambda: ccm_daemon.running(Store(root)) == process.pid, "the daemon's lock")
    return process


def test_a_second_daemon_is_refused_and_sigterm_stops_cleanly(root: Path) -> None:
    first = start(root)
    try:
        second = subprocess.run(
            [sys.executable, "-m", "ccm", "--root", str(root), "watch"],
            capture_output=True,
            text=True,
            timeout=WAIT,
        )
        assert second.returncode != 0
        assert f"pid {first.pid}" in second.stderr
        status = json.loads(
            CliRunner().invoke(main, ["--root", str(root), "status", "--json"]).stdout
        )
        assert status["running"] and status["pid"] == first.pid
    finally:
        first.send_signal(signal.SIGTERM)
        _, err = first.communicate(timeout=WAIT)
    assert first.returncode == 0, err
    assert b"stopped" in err
    assert ccm_daemon.running(Store(root)) is None


def test_a_daemon_killed_mid_update_recovers_to_a_rebuild(root: Path) -> None:
    store = Store(root)
    process = start(root)
    for n in range(40):
        append(store, "ledger-sync", [f"Step {n}: the importer must keep integer cents."])
        time.sleep(0.005)
    process.kill()  # SIGKILL: no clean-up of any kind
    process.communicate(timeout=WAIT)
    for n in range(40, 60):
        append(store, "ledger-sync", [f"Step {n}: we decided to retry twice."])
    restarted = start(root)
    try:
        total = 60 + len((SAMPLE / "ledger-sync.jsonl").read_text().splitlines())
        manifest = root / "chats" / "ledger-sync" / "manifest.yaml"
        wait_for(lambda: f"turns: {total}\n" in manifest.read_text(), "the catch-up")
    finally:
        restarted.send_signal(signal.SIGTERM)
        restarted.communicate(timeout=WAIT)
    for session in Store(root).sessions():
        assert equals_rebuild(root, session), session


def test_the_daemon_and_four_concurrent_ingests_lose_nothing(root: Path, tmp_path: Path) -> None:
    process = start(root)
    try:
        sources = []
        for writer in range(4):
            source = tmp_path / f"part-{writer}.jsonl"
            source.write_text(
                "".join(
                    json.dumps(
                        {
                            "role": "user" if n % 2 == 0 else "assistant",
                            "content": f"writer {writer} line {n}: keep the audit log",
                            "ts": 1_767_200_000 + n,
                        }
                    )
                    + "\n"
                    for n in range(50)
                )
            )
            sources.append(source)
        ingests = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "ccm",
                    "--root",
                    str(root),
                    "ingest",
                    str(source),
                    "--session",
                    "shared",
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
            for source in sources
        ]
        for child in ingests:
            _, err = child.communicate(timeout=120)
            assert child.returncode == 0, err
        turns, bad, _ = Store(root).read_turns("shared")
        assert not bad
        assert [t["turn"] for t in turns] == list(range(1, 201))
        assert sorted(t["content"] for t in turns) == sorted(
            f"writer {w} line {n}: keep the audit log" for w in range(4) for n in range(50)
        )

        def caught_up() -> bool:
            report = ccm_daemon.status(Store(root))
            return bool(report["behind_bytes"] == 0 and report["last_batch"])

        wait_for(caught_up, "the daemon to process every line")
        manifest = root / "chats" / "shared" / "manifest.yaml"
        wait_for(lambda: "turns: 200\n" in manifest.read_text(), "all 200 turns in the tiers")
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=WAIT)
    assert equals_rebuild(root, "shared")


def test_the_service_definitions_run_ccm_watch() -> None:
    import configparser
    import plistlib

    jobs = Path(__file__).parent.parent / "jobs"
    unit = configparser.ConfigParser(strict=True, interpolation=None)
    unit.read_string((jobs / "ccm-watch.service").read_text())
    assert {"Unit", "Service", "Install"} <= set(unit.sections())
    assert unit["Service"]["ExecStart"].split()[1:2] == ["watch"]
    agent = plistlib.loads((jobs / "com.ccm.watch.plist").read_bytes())
    assert agent["Label"] == "com.ccm.watch" and agent["ProgramArguments"][1] == "watch"


def test_the_index_waits_while_appends_keep_coming_but_not_for_long(
    root: Path, running: Daemon
) -> None:
    """Tiers first: while turns keep arriving the index update waits for a pause, or
    for `INDEX_LAG_SECONDS` at most, so a steady stream still reaches the index before
    it ends; after the pause everything is indexed and the tiers equal a rebuild."""
    from ccm.index import Index

    store = Store(root)
    manifest = root / "chats" / "ledger-sync" / "manifest.yaml"
    append(store, "ledger-sync", ["The zebrafish ledger closes on Fridays."])
    with Index(Store(root)) as index:
        stream_end = time.monotonic() + ccm_daemon.INDEX_LAG_SECONDS * 3
        indexed_during_stream = False
        n = 0
        while time.monotonic() < stream_end:
            n += 1
            append(store, "ledger-sync", [f"Stream line {n} about the quarterly totals."])
            time.sleep(0.002)
            if not indexed_during_stream and index.search("zebrafish", session="ledger-sync"):
                indexed_during_stream = True
        assert indexed_during_stream
        turns = store.read_turns("ledger-sync")[0][-1]["turn"]
        wait_for(lambda: f"turns: {turns}" in manifest.read_text(), "the last turn")
        wait_for(lambda: index.search("stream line", session="ledger-sync"), "the index")
        wait_for(lambda: not running.index_due, "the index to catch up")
        last = f"Stream line {n} about"
        wait_for(
            lambda: any(last in hit.text for hit in index.search(last, session="ledger-sync")),
            "the last line in the index",
        )
    assert equals_rebuild(root, "ledger-sync")


def test_while_following_the_manifest_waits_for_the_index_and_is_then_written(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An update while following writes working.yaml and open.yaml (their size does not
    grow with the session) and leaves the manifest, which grows, to the index's turn
    (`index_pending`, once appends pause); an engine dropped from memory (past
    `MAX_ENGINES`) writes its manifest first. Every file then equals a rebuild."""
    monkeypatch.setattr(ccm_daemon, "MAX_ENGINES", 2)
    store = Store(root)
    daemon = Daemon(store)
    daemon.catch_up()
    daemon.index_later = True
    folder = root / "chats" / "ledger-sync"
    manifest = (folder / "manifest.yaml").read_bytes()
    append(store, "ledger-sync", ["Never run migrations on a Friday afternoon."])
    daemon.update("ledger-sync")
    assert "Friday afternoon" in (folder / "working.yaml").read_text()
    assert (folder / "manifest.yaml").read_bytes() == manifest  # waits
    assert set(daemon.index_due) == {"ledger-sync"}
    daemon._status()  # what `ccm status` reads: the sessions that wait
    recorded = store.cache / ccm_daemon.STATUS_NAME
    assert json.loads(recorded.read_text())["waiting"] == ["ledger-sync"]
    daemon.index_pending()
    daemon._status()
    assert not daemon.index_due and json.loads(recorded.read_text())["waiting"] == []
    assert (folder / "manifest.yaml").read_bytes() != manifest
    assert equals_rebuild(root, "ledger-sync")

    append(store, "ledger-sync", ["Always tag releases from main."])
    daemon.update("ledger-sync")  # waits, then three sessions in memory: it is dropped
    daemon.update("deploy-checklist")
    daemon.update("reading-notes")
    assert "ledger-sync" not in daemon.engines
    assert equals_rebuild(root, "ledger-sync")
    daemon.index_pending()
    for session in store.sessions():
        assert equals_rebuild(root, session), session


def test_what_queued_up_while_the_daemon_worked_is_one_batch(root: Path) -> None:
    """With no debounce, the events that queued up during the last batch (an append is
    reported more than once: modified, then closed) make one batch, not one each."""
    daemon = Daemon(Store(root), debounce=0.0)
    for session in ("ledger-sync", "ledger-sync", "reading-notes", "ledger-sync"):
        daemon.pending.put(session)
    batches = daemon.batches_from_queue(timeout=0.01)
    assert next(batches) == {"ledger-sync", "reading-notes"}
    assert next(batches) == set()  # nothing left: the wait times out
    daemon.stop()


def test_the_observer_is_told_of_writes_not_of_reads(tmp_path: Path) -> None:
    """Reading a file under chats/ (a reader polling working.yaml, the daemon reading a
    log) reaches the observer not at all; an append does. inotify reports in order, so
    once the append is seen, any report of the reads before it would have been too."""
    from watchdog.events import FileSystemEvent, FileSystemEventHandler
    from watchdog.observers import Observer

    folder = tmp_path / "chats" / "s1"
    folder.mkdir(parents=True)
    (folder / "working.yaml").write_text("session: s1\n")
    (folder / "raw.jsonl").write_text("")
    seen: list[tuple[str, str]] = []

    class Recorder(FileSystemEventHandler):
        def on_any_event(self, event: FileSystemEvent) -> None:
            seen.append((event.event_type, os.path.basename(os.fsdecode(event.src_path))))

    observer = Observer()
    observer.schedule(
        Recorder(), str(tmp_path / "chats"), recursive=True, event_filter=ccm_daemon.event_kinds()
    )
    observer.start()
    try:
        for _ in range(20):
            (folder / "working.yaml").read_text()
        with open(folder / "raw.jsonl", "a") as log:
            log.write('{"turn": 1}\n')
        wait_for(lambda: ("modified", "raw.jsonl") in seen, "the append")
    finally:
        observer.stop()
        observer.join(timeout=WAIT)
    assert {kind for kind, _ in seen} == {"modified"}
    assert {name for _, name in seen} == {"raw.jsonl"}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify's move pairing")
def test_the_observer_does_not_hold_moves_back_to_pair_them(root: Path, running: Daemon) -> None:
    """watchdog's inotify queue sleeps half a second on every IN_MOVED_FROM, even when its
    IN_MOVED_TO comes at once; with the daemon's own atomic writes under chats/, that
    held appends back. The daemon's observer passes moves on unpaired, and a log
    replaced by a rename (an editor's save) is still seen."""
    from watchdog.observers.inotify_move_event_grouper import InotifyMoveEventGrouper

    assert InotifyMoveEventGrouper.delay == 0
    raw = root / "chats" / "reading-notes" / "raw.jsonl"
    replacement = raw.with_name("raw.jsonl.new")
    replacement.write_bytes(b"".join(raw.read_bytes().splitlines(keepends=True)[:6]))
    os.replace(replacement, raw)
    manifest = root / "chats" / "reading-notes" / "manifest.yaml"
    wait_for(lambda: "turns: 6\n" in manifest.read_text(), "the replaced log's tiers")
