"""Benchmark ``ccm proxy``: the latency it adds to a Messages API call on a long session.

    .venv/bin/python benchmarks/proxy.py [--sizes 1000,10000] [--runs 200] [--window 200]
        [--full/--no-full] [--own-process] [--seed 0] [--json]

For each size, a conversation of that many turns (``benchmarks.generate``, format
claude-code, read back as Messages API messages: a user prompt, an assistant message
with its text and tool_use blocks, a user message with the tool_result blocks) is
already recorded in a knowledge root in a temporary folder: one session per proxy mode
and history, each written once by ``live.record_request`` with a request that holds the
whole conversation, which is what the proxy records when such a request comes through.
The local fake of the API (``tests/fakeapi.py``) and two proxies (``observe`` and
``manage``) are served by uvicorn on 127.0.0.1 in this process, and the client is the
``anthropic`` SDK; with ``--own-process``, each proxy runs as a user runs it instead,
``ccm proxy`` in a process of its own. Nothing is downloaded and nothing leaves the
machine.

Every request appends one new user message to its conversation, and the answer it gets
is added to the history of the next, as a client does. Each timing is wall-clock around
one SDK call (streamed: until the stream's end, the final message read):

* ``direct``: the fake called directly, with the same history (the floor);
* ``observe``: through ``ccm proxy --mode observe``: the body is recorded and forwarded
  unchanged;
* ``manage``: through ``ccm proxy --mode manage``: the client sends the same history
  (a real client sends its whole history too, the proxy decides what goes upstream);
  ccm's context and the latest exchanges go upstream in its place. The memory tools
  are not offered (the requests have no tools). The budget is the configured one,
  doubled until ccm accepts it (generated sessions hold many critical items); the
  first request of a session builds its engine and index and is reported apart.

Two histories are measured: ``full``, every message of the conversation in every
request; and ``window`` (``--window`` messages, 0 to skip), the latest messages only,
from a user prompt on, as a client whose context window holds only those sends.
Requests alternate streamed and whole, and the three modes take turns, so that at each
step they send histories of the same length. Once a manage request is answered, the
proxy takes the exchange into the session's memory (folds and indexes it, for the next
request to start from). A client reads and thinks before it asks again: each request
waits until the proxy has taken the last exchange in (that time is reported apart: "the
reply taken in"); with ``--own-process``, `THINK` seconds. A request sent before that is
done waits for it. Before the timed requests, each mode gets
`WARMUP` untimed ones. The added latency is the proxy's time minus the direct call's at
the same step, p50 and p95 of those differences.

Target (reported, never enforced): p50 added < 15 ms at 10,000 turns (observe and
manage, each history). Also reported: the ratio of the p50 at the largest size to that
at the smallest. With the defaults it takes about 12 minutes on 2 CPUs, most of it the
10,000-turn full history (about 10 MB a request); ``--runs 40`` gives a rough look in
about 2.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import anthropic  # noqa: E402
from anthropic.types import Message  # noqa: E402

from benchmarks.generate import write_session  # noqa: E402
from benchmarks.timing import progress, ratio, report_json, summary  # noqa: E402
from ccm import live  # noqa: E402
from ccm.proxy import CLIENT_IDLE, Proxy, Settings, configure  # noqa: E402
from ccm.store import Store  # noqa: E402
from tests.fakeapi import FakeAnthropic, Serving  # noqa: E402

TARGET_MS = 15.0  # p50 added by the proxy
TARGET_TURNS = 10_000
MODEL = "claude-bench"
MODES = ("direct", "observe", "manage")
PROXIED = ("observe", "manage")
CALLS = ("stream", "whole")
WARMUP = 3  # untimed requests per mode and history, the first reported apart
SETTLE_TIMEOUT = 60.0  # seconds a proxy may take to take in a reply
THINK = 0.05  # seconds a client takes before its next request (a proxy process)
START_TIMEOUT = 30.0  # seconds a proxy process may take to accept connections
MAX_BUDGET = 512_000


def _progress(message: str) -> None:
    progress("proxy", message)


def conversation(turns: int, seed: int, work: Path) -> list[dict[str, Any]]:
    """A generated conversation of `turns` turns as Messages API messages."""
    path = work / f"generated-{turns}.jsonl"
    write_session(path, turns, seed=seed, fmt="claude-code")
    messages: list[dict[str, Any]] = []
    last_id = None
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            message = record["message"]
            if record["type"] == "assistant":
                if message["id"] == last_id:  # the tool_use block of the same message
                    messages[-1]["content"].extend(message["content"])
                    continue
                last_id = message["id"]
                messages.append({"role": "assistant", "content": list(message["content"])})
            else:
                last_id = None
                messages.append({"role": "user", "content": message["content"]})
    path.unlink()
    return messages


@dataclass
class Client:
    """One mode's conversation: its SDK client, session and history so far."""

    mode: str
    session: str
    sdk: anthropic.Anthropic
    messages: list[dict[str, Any]]
    window: int  # messages sent (0: all)
    prompts: int = 0
    times: dict[str, list[float]] = field(default_factory=lambda: {c: [] for c in CALLS})
    wrong: int = 0  # answers that were not the fake's answer to the prompt

    def sent(self) -> list[dict[str, Any]]:
        if not self.window or len(self.messages) <= self.window:
            return self.messages
        start = len(self.messages) - self.window
        while start < len(self.messages) - 1 and not isinstance(
            self.messages[start]["content"], str
        ):
            start += 1  # from a user prompt on (never a tool result without its call)
        return self.messages[start:]

    def request(self, stream: bool) -> float:
        """One request with a new user message; its wall-clock time."""
        self.prompts += 1
        text = f"{self.mode} {self.session} prompt {self.prompts}: and what about the parser?"
        self.messages.append({"role": "user", "content": text})
        history: Any = self.sent()  # the SDK's message types, as JSON
        headers = {"x-ccm-session": self.session}
        message: Message
        start = time.perf_counter()
        if stream:
            with self.sdk.messages.stream(
                model=MODEL, max_tokens=256, messages=history, extra_headers=headers
            ) as events:
                message = events.get_final_message()
        else:
            message = self.sdk.messages.create(
                model=MODEL, max_tokens=256, messages=history, extra_headers=headers
            )
        elapsed = time.perf_counter() - start
        answer = "".join(b.text for b in message.content if b.type == "text")
        if answer != "ok: " + text[:40]:
            self.wrong += 1
        self.messages.append({"role": "assistant", "content": answer})
        return elapsed


class ProxyProcess:
    """``ccm proxy`` in a process of its own, on a free port of 127.0.0.1, as a user runs
    it: `with ProxyProcess(root, settings, log) as url:`; its log goes to `log`."""

    def __init__(self, root: Path, settings: Settings, log: Path) -> None:
        self.root, self.settings, self.log = root, settings, log
        self.process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> str:
        with socket.socket() as probe:  # a free port (nothing else binds it meanwhile here)
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        settings = self.settings
        command = [sys.executable, "-m", "ccm", "--root", str(self.root), "proxy"]
        command += ["--port", str(port), "--upstream", settings.upstream, "--mode", settings.mode]
        if settings.budget is not None:
            command += ["--budget", str(settings.budget)]
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=log, cwd=ROOT)
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return f"http://127.0.0.1:{port}"
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.__exit__()
                    tail = self.log.read_text(errors="replace")[-2000:]
                    raise RuntimeError(f"ccm proxy did not start:\n{tail}") from None
                time.sleep(0.05)

    def __exit__(self, *exc: object) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


class Bench:
    """The fake, the proxies and the store of one size."""

    def __init__(
        self, store: Store, fake: FakeAnthropic, stack: contextlib.ExitStack, in_process: bool
    ) -> None:
        self.store, self.fake, self.stack = store, fake, stack
        self.in_process = in_process
        self.log = store.root.parent / f"{store.root.name}-proxies.log"
        self.urls = {"direct": fake.url}
        self.proxies: dict[str, Proxy] = {}
        self.urls["observe"] = stack.enter_context(self.serve(Settings(upstream=fake.url)))
        self.budget = int(store.config.get("context", "budget_tokens"))
        self.manage: contextlib.ExitStack | None = None
        self.serve_manage()
        self.unmanaged: dict[str, int] = {}  # by history: manage requests sent unchanged

    def serve_manage(self) -> None:
        if self.manage is not None:
            self.manage.close()
        self.manage = self.stack.enter_context(contextlib.ExitStack())
        settings = Settings(upstream=self.fake.url, mode="manage", budget=self.budget)
        self.urls["manage"] = self.manage.enter_context(self.serve(settings))

    def serve(self, settings: Settings) -> contextlib.AbstractContextManager[str]:
        """A proxy with `settings`, serving: its URL."""
        if not self.in_process:
            return ProxyProcess(self.store.root, settings, self.log)
        self.proxies[settings.mode] = proxy = Proxy(self.store, settings)
        return Serving(proxy.app(), name=f"ccm-proxy-{settings.mode}", keep_alive=CLIENT_IDLE)

    def think(self) -> float | None:
        """A client's pause before its next request: `THINK` seconds; in process, until
        no proxy is still taking in a reply, and the seconds that took."""
        if not self.in_process:
            time.sleep(THINK)
            return None
        start = time.perf_counter()
        for proxy in self.proxies.values():
            if not proxy.quiet(SETTLE_TIMEOUT):
                raise RuntimeError("a proxy did not finish taking in its replies")
        return time.perf_counter() - start

    def client(
        self, mode: str, session: str, messages: list[dict[str, Any]], window: int
    ) -> Client:
        sdk = anthropic.Anthropic(
            api_key="sk-bench", base_url=self.urls[mode], max_retries=0, timeout=600.0
        )
        return Client(mode, session, sdk, list(messages), window)

    def managed(self) -> bool:
        """Whether the last request the fake got was ccm's context (not the body as it
        came: the proxy falls back to that when ccm refuses the budget)."""
        last = self.fake.received[-1].json
        system = last.get("system") if isinstance(last, dict) else None
        return isinstance(system, list) and any(
            str(block.get("text", "")).startswith(live.MEMORY_HEADER) for block in system
        )

    def forget(self) -> None:
        """The fake keeps every body it got; the histories are megabytes."""
        self.fake.received.clear()
        self.fake.sent.clear()

    def warm(self, client: Client) -> float:
        """`WARMUP` untimed requests; the first one's time (a whole request, which builds
        the session's engine and index). In manage mode, the budget is doubled until
        ccm's context goes upstream for each of them; a refused request's prompt and
        answer leave the history, which stays as long as the other modes'."""
        first = 0.0
        for number in range(WARMUP):
            stream = number % 2 == 0 and number > 0
            took = client.request(stream=stream)
            first = first or took  # the very first, which builds the engine and index
            while client.mode == "manage" and not self.managed() and self.budget < MAX_BUDGET:
                self.budget *= 2
                _progress(f"ccm refuses this budget; manage proxy restarted with {self.budget}")
                self.serve_manage()
                client.sdk = self.client("manage", client.session, [], 0).sdk
                self.forget()
                del client.messages[-2:]
                client.prompts -= 1
                client.request(stream=stream)
            self.forget()
        return first


def measure(
    turns: int, runs: int, window: int, seed: int, work: Path, full: bool, in_process: bool
) -> dict[str, Any]:
    _progress(f"{turns} turns: generating the conversation")
    messages = conversation(turns, seed, work)
    full_mb = len(json.dumps(messages).encode("utf-8")) / 1e6
    store = Store(work / f"root-{turns}")
    store.init()
    configure(store)  # as `ccm proxy` runs
    histories = {**({"full": 0} if full else {}), **({"window": window} if window else {})}
    start = time.perf_counter()
    for history in histories:
        for mode in PROXIED:
            body = {"model": MODEL, "max_tokens": 256, "messages": messages}
            live.record_request(store, f"{mode}-{history}", body)
    recorded = time.perf_counter() - start
    _progress(
        f"{turns} turns: {len(messages)} messages, {full_mb:.1f} MB, recorded in {recorded:.1f} s"
    )
    results: dict[str, Any] = {"turns": turns, "messages": len(messages), "history_mb": {}}
    with contextlib.ExitStack() as stack:
        fake = stack.enter_context(FakeAnthropic())
        bench = Bench(store, fake, stack, in_process)
        for history, size in histories.items():
            clients = [bench.client(mode, f"{mode}-{history}", messages, size) for mode in MODES]
            _progress(f"{turns} turns, {history} history: warming up")
            first = {c.mode: round(bench.warm(c) * 1000, 1) for c in clients}
            results["history_mb"][history] = round(
                len(json.dumps(clients[0].sent()).encode("utf-8")) / 1e6, 2
            )
            _progress(f"{turns} turns, {history} history: {runs} requests per mode")
            settled: list[float] = []
            for number in range(runs):
                call = CALLS[number % 2]
                for client in clients:
                    client.times[call].append(client.request(stream=call == "stream"))
                    waited = bench.think()
                    if client.mode == "manage" and waited is not None:
                        settled.append(waited)
                    if client.mode == "manage" and not bench.managed():
                        bench.unmanaged[history] = bench.unmanaged.get(history, 0) + 1
                    bench.forget()
            direct = clients[0]
            entry: dict[str, Any] = {
                "first_ms": first,
                "modes": {},
                "added": {},
                "settle": summary(settled) if settled else None,
            }
            for client in clients:
                entry["modes"][client.mode] = {
                    call: summary(client.times[call]) for call in CALLS if client.times[call]
                }
                entry["modes"][client.mode]["wrong_answers"] = client.wrong
                if client.mode == "direct":
                    continue
                entry["added"][client.mode] = {
                    call: summary(
                        [p - d for p, d in zip(client.times[call], direct.times[call], strict=True)]
                    )
                    for call in CALLS
                    if client.times[call]
                }
            results[history] = entry
        results["manage_budget"] = bench.budget
        results["unmanaged"] = bench.unmanaged
    results["full_mb"] = round(full_mb, 2)
    return results


def _ratios(results: list[dict[str, Any]]) -> dict[str, float | None]:
    small, large = results[0], results[-1]
    ratios: dict[str, float | None] = {}
    for history in ("full", "window"):
        if history not in small or history not in large:
            continue
        for mode in MODES:
            for call in CALLS:
                ratios[f"{history} {mode} {call}"] = ratio(
                    large[history]["modes"][mode][call]["p50_ms"],
                    small[history]["modes"][mode][call]["p50_ms"],
                )
    return ratios


def _verdicts(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The target, at 10,000 turns (or the largest size measured)."""
    at = next((r for r in results if r["turns"] == TARGET_TURNS), results[-1])
    found = []
    for history in ("full", "window"):
        if history not in at:
            continue
        for mode in PROXIED:
            for call in CALLS:
                p50 = at[history]["added"][mode][call]["p50_ms"]
                found.append(
                    {
                        "turns": at["turns"],
                        "history": history,
                        "mode": mode,
                        "call": call,
                        "added_p50_ms": p50,
                        "met": p50 < TARGET_MS,
                    }
                )
    return found


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000", help="comma-separated session sizes")
    parser.add_argument("--runs", type=int, default=200, help="timed requests per mode and history")
    parser.add_argument(
        "--window", type=int, default=200, help="messages of the window history (0: skip it)"
    )
    parser.add_argument(
        "--full",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="measure the full history too (most of the time at 10,000 turns)",
    )
    parser.add_argument(
        "--own-process",
        action="store_true",
        help="run each proxy as `ccm proxy` in a process of its own",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    runs = max(2, args.runs)
    logging.getLogger("ccm.proxy").setLevel(logging.CRITICAL)  # a refused budget is counted
    with tempfile.TemporaryDirectory(prefix="ccm-proxy-bench-") as tmp:
        os.environ["CCM_HOME"] = str(Path(tmp) / "home")  # nothing of the user's is touched
        results = [
            measure(
                size,
                runs,
                max(0, args.window),
                args.seed,
                Path(tmp),
                args.full,
                not args.own_process,
            )
            for size in sizes
        ]
    ratios = _ratios(results) if len(sizes) > 1 else {}
    verdicts = _verdicts(results)
    cpus = os.cpu_count()
    where = "each in its own process" if args.own_process else "in this process"
    if args.json:
        report_json(
            results,
            ratios,
            sizes,
            target_added_p50_ms=TARGET_MS,
            target=verdicts,
            proxies=where,
        )
        return
    print(
        f"ccm proxy benchmark (loopback, fake upstream, {runs} requests per mode and history, "
        f"half streamed; proxies {where}; {cpus} CPUs; target p50 added < {TARGET_MS:.0f} ms "
        f"at {TARGET_TURNS:,} turns)"
    )
    print(
        f"  {'turns':>6} {'history':<8} {'MB':>6}  {'mode':<8} {'call':<7} {'p50 ms':>8} "
        f"{'p95 ms':>8} {'max ms':>8} {'added p50':>10} {'added p95':>10} {'first ms':>9}"
    )
    for r in results:
        for history in ("full", "window"):
            if history not in r:
                continue
            entry = r[history]
            for mode in MODES:
                for call in CALLS:
                    e = entry["modes"][mode][call]
                    added = entry["added"].get(mode, {}).get(call)
                    first = entry["first_ms"][mode] if call == "whole" else ""
                    print(
                        f"  {r['turns']:>6} {history:<8} {r['history_mb'][history]:>6}  "
                        f"{mode:<8} {call:<7} {e['p50_ms']:>8} {e['p95_ms']:>8} {e['max_ms']:>8} "
                        f"{added['p50_ms'] if added else '':>10} "
                        f"{added['p95_ms'] if added else '':>10} {first:>9}"
                    )
    for r in results:
        wrong = {
            f"{h} {m}": r[h]["modes"][m]["wrong_answers"]
            for h in ("full", "window")
            if h in r
            for m in MODES
            if r[h]["modes"][m]["wrong_answers"]
        }
        line = f"  {r['turns']} turns: manage budget {r['manage_budget']} tokens"
        for history, count in r["unmanaged"].items():
            line += (
                f"; {count} {history}-history manage requests went upstream unchanged (ccm refused)"
            )
        if wrong:
            line += f"; wrong answers: {wrong}"
        print(line)
        for history in ("full", "window"):
            if history in r and r[history]["settle"] is not None:
                settle = r[history]["settle"]
                print(
                    f"  {r['turns']} turns, {history} history, manage: the reply taken in "
                    f"{settle['p50_ms']} ms after it (p50; p95 {settle['p95_ms']})"
                )
    if ratios:
        pairs = ", ".join(f"{k} {v}" for k, v in ratios.items())
        print(f"  p50 ratio {sizes[-1]}/{sizes[0]}: {pairs}")
    for v in verdicts:
        verdict = "met" if v["met"] else "NOT met"
        print(
            f"  {v['turns']} turns, {v['history']} history, {v['mode']} {v['call']}: "
            f"added p50 {v['added_p50_ms']} ms: target {verdict}"
        )


if __name__ == "__main__":
    main()
