"""``ccm bench scenarios``: ccm measured on labelled conversations.

A scenario is a chat ``<name>.jsonl`` (one ``{"turn", "role", "content", "ts"}`` object a
line, turns 1..N) with its labels ``<name>.labels.yaml`` beside it (segments, topics and
their conclusions, critical items, false conclusions, the working state at the end and at
checkpoints, recall questions, conflicts). Each scenario is imported with the JSON lines
importer (``ccm ingest FILE --session NAME``) as its own session, in its own knowledge
root, named after the file stem; its tiers are derived and it is indexed. The importer
numbers turns itself, so the file's turn K must become raw line K: this is checked.

What is measured, per scenario and in total:

* **Segmentation**: Beeferman's Pk between the gold segment starts and the first raw
  line of each segment in the session's ``manifest.yaml``. k is half the mean gold
  segment length (Python's ``round``, at least 1); Pk is the share of turns i in
  1..N-k for which "i and i+k lie in the same segment" differs between gold and
  hypothesis. Reported per scenario, as the mean over scenarios and pooled (all
  disagreements over all comparisons).
* **Conclusions**: the predicted turns are the ``conclusion.turn`` of each manifest
  segment whose status is ``concluded``; the gold turns are the ``concluded_at`` of the
  concluded topics. They are matched one to one within +-2 turns, greedily by distance
  (then by turn). Precision, recall and F1 per scenario and pooled. A false conclusion
  (``false_conclusions``) within +-1 turn of any predicted turn is an accepted trap.
* **Critical items**: the key sentence of a critical item is the sentence of its turn
  that shares most words with the label's text (`tokens`, as sets; ties go to the
  earliest). A turn is split into sentences at line breaks and after ``. ! ?`` followed
  by white space, leading list markers (``- ``, ``* ``, ``1. ``) and surrounding white
  space stripped. The item is kept when its key sentence appears in the context at
  4,000 tokens with no query, white space collapsed and case folded on both sides.
* **End key terms**: each ``working_state_at_end.key_terms`` must appear (any case) in
  the context at 1,000 tokens with no query.
* **Checkpoint key terms**: for each checkpoint K, a separate session holding only turns
  1..K (imported the same way); the share of its key terms in its context at 1,000 tokens
  with no query.
* **Recall questions**: the context at 2,000 tokens with the question as the query; each
  evidence turn's key sentence is the one sharing most words with the answer; a
  question scores the share of its evidence key sentences in the context. Reported as
  the mean over questions.
* **Conflicts**: after ``ccm consolidate`` of the scenario's session alone, what ccm
  derived is gathered with its turn and whether it is marked as replaced:

  - each manifest segment's conclusion (replaced when ``conclusion.superseded_by`` is
    set),
  - each node of the session in ``network/nodes.json`` (replaced when its ``status`` is
    ``superseded`` or ``contradicted``),
  - each critical item the engine detected (replaced when it has ``superseded_by``;
    ``working.yaml`` lists only those that are not).

  A derived item is *from* a conflict turn when it lies within +-1 turn of it and is
  strictly nearer to it than to the conflict's other turns (an item halfway between two
  of them is from neither). A conflict (turns: the earlier statement, then the later
  statements or evidence) is **resolved** when something from its earlier turn is
  marked replaced and nothing from any of its later turns is.
* **The vault**: after all scenarios are measured, every scenario session is imported
  into one root and consolidated. A labelled conclusion is stated when at least 25% of
  its content words (`tokens` minus `STOP` and one-character tokens, as a set) appear in
  one artifact note's (``artifacts/**/*.md``) title and first body paragraph. The title
  is the note's first ``# `` heading (what a reader sees; the frontmatter ``title`` or the
  file name where there is none), the first body paragraph the first block of lines
  after it. A note whose title has fewer than 3 distinct content words is junk.

The context-based measures (critical, end terms, checkpoints, recall) are also measured
on two baselines (`ccm.bench.MeasuredSession`): ``recency``, the latest rendered turns
that fit the budget, and ``bm25``, BM25 over single turns ranked by the query (with no
query, the recency window).
"""

from __future__ import annotations

import bisect
import json
import re
import statistics
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ccm import patterns, yamlio
from ccm.bench import MeasuredSession
from ccm.errors import CCMError, FormatError, SchemaError, UsageError
from ccm.ingest.pipeline import ingest
from ccm.store import Store, check_session_id, slug_session_id

METHODS = ("ccm", "recency", "bm25")
CRITICAL_BUDGET = 4000
STATE_BUDGET = 1000
RECALL_BUDGET = 2000
CONCLUSION_WINDOW = 2  # a predicted conclusion matches a gold one this many turns away
TRAP_WINDOW = 1  # a false conclusion this near a predicted one was accepted
CONFLICT_WINDOW = 1  # a derived item this near a conflict turn is from that turn
STATED_SHARE = 0.25  # of a conclusion's content words, in one note's title and paragraph
JUNK_TITLE_WORDS = 3  # a title with fewer content words is junk
REPLACED = frozenset({"superseded", "contradicted"})

# the labels' own definitions (check_labels.py beside the scenarios)
_STOP_WORDS = """a an and are as at be been but by can did do does for from had has have he her his
    how i if in into is it its me my no not of on or our she so than that the their them
    then there these they this to up us was we were what when where which who why will
    with you your yes did done just also only"""
STOP = frozenset(_STOP_WORDS.split())
_TOKEN = patterns.compile(r"[a-z0-9]+")
_SENTENCE_END = patterns.compile(r"(?<=[.!?])\s+")
_LIST_MARKER = patterns.compile(r"^(?:[-*]|\d+\.)\s+")
_FRONTMATTER = patterns.compile(r"\A---\n(.*?)\n---\n", re.S)
LABELS_HINT = "fix the labels file (see check_labels.py beside the scenarios)"


# ---------------------------------------------------------------- words and sentences


def tokens(text: str) -> list[str]:
    """Lowercase runs of letters and digits (the labels' tokenizer)."""
    return _TOKEN.findall(text.lower())


def content_words(text: str) -> set[str]:
    """The words of `text` that carry content: not in `STOP`, longer than one character."""
    return {t for t in tokens(text) if t not in STOP and len(t) > 1}


def sentences(text: str) -> list[str]:
    """`text` split at line breaks and after . ! ? followed by white space, each piece
    without a leading list marker or surrounding white space; empty pieces dropped."""
    found: list[str] = []
    for line in text.splitlines():
        line = _LIST_MARKER.sub("", line.strip())
        for piece in _SENTENCE_END.split(line):
            piece = _LIST_MARKER.sub("", piece.strip()).strip()
            if piece:
                found.append(piece)
    return found


def key_sentence(content: str, text: str) -> str:
    """The sentence of `content` sharing most words with `text` (ties: the earliest);
    the whole content, stripped, when it has no sentence."""
    wanted = set(tokens(text))
    best, best_shared = "", -1
    for sentence in sentences(content):
        shared = len(wanted & set(tokens(sentence)))
        if shared > best_shared:
            best, best_shared = sentence, shared
    return best or content.strip()


def normalise(text: str) -> str:
    """White space collapsed to one space, case folded."""
    return " ".join(text.split()).casefold()


def contains(context: str, sentence: str) -> bool:
    """Whether `sentence` appears in `context`, white space and case aside."""
    wanted = normalise(sentence)
    return bool(wanted) and wanted in normalise(context)


# ---------------------------------------------------------------- segmentation


def pk_window(gold_starts: Sequence[int], turns: int) -> int:
    """k: half the mean gold segment length, rounded, at least 1."""
    segments = max(1, len(set(gold_starts)))
    return max(1, round(turns / segments / 2))


def _segment_index(starts: Sequence[int], turn: int) -> int:
    """Which segment holds `turn`: the number of starts at or before it."""
    return bisect.bisect_right(starts, turn)


def pk_counts(
    gold_starts: Iterable[int], hyp_starts: Iterable[int], turns: int, k: int
) -> tuple[int, int]:
    """(disagreements, comparisons) of Pk over turns 1..`turns` with window `k`."""
    gold = sorted(set(gold_starts))
    hyp = sorted(set(hyp_starts))
    disagree = 0
    compared = max(0, turns - k)
    for i in range(1, compared + 1):
        same_gold = _segment_index(gold, i) == _segment_index(gold, i + k)
        same_hyp = _segment_index(hyp, i) == _segment_index(hyp, i + k)
        disagree += same_gold != same_hyp
    return disagree, compared


def pk(
    gold_starts: Iterable[int], hyp_starts: Iterable[int], turns: int, k: int | None = None
) -> float:
    """Beeferman's Pk (0 is perfect): the share of turns i in 1..turns-k for which "i
    and i+k are in the same segment" differs between gold and hypothesis. Segments are
    given by the turns they start at; k defaults to `pk_window` of the gold."""
    gold = list(gold_starts)
    window = k if k is not None else pk_window(gold, turns)
    disagree, compared = pk_counts(gold, hyp_starts, turns, window)
    return disagree / compared if compared else 0.0


# ---------------------------------------------------------------- conclusions


@dataclass
class Matching:
    """Predicted conclusion turns matched to gold ones, and the traps accepted."""

    pairs: list[tuple[int, str, int]]  # (predicted turn, gold topic, gold turn)
    unmatched: list[int]  # predicted turns matching no gold conclusion
    missed: list[tuple[str, int]]  # gold (topic, turn) no prediction matched
    traps: list[tuple[int, int]]  # (false conclusion turn, the predicted turn near it)
    predicted: int
    gold: int

    @property
    def matched(self) -> int:
        return len(self.pairs)


def match_conclusions(
    predicted: Sequence[int],
    gold: Sequence[tuple[str, int]],
    false_turns: Sequence[int] = (),
    window: int = CONCLUSION_WINDOW,
    trap_window: int = TRAP_WINDOW,
) -> Matching:
    """Match predicted turns to gold (topic, turn) pairs one to one within `window`
    turns, greedily: the nearest pairs first (then the earliest turns). A false
    conclusion within `trap_window` turns of any predicted turn is an accepted trap."""
    candidates = sorted(
        (abs(p - g), p, g, pi, gi)
        for pi, p in enumerate(predicted)
        for gi, (_, g) in enumerate(gold)
        if abs(p - g) <= window
    )
    used_p: set[int] = set()
    used_g: set[int] = set()
    pairs: list[tuple[int, str, int]] = []
    for _, p, g, pi, gi in candidates:
        if pi in used_p or gi in used_g:
            continue
        used_p.add(pi)
        used_g.add(gi)
        pairs.append((p, gold[gi][0], g))
    pairs.sort()
    traps = []
    for f in sorted(set(false_turns)):
        near = [p for p in predicted if abs(p - f) <= trap_window]
        if near:
            traps.append((f, min(near, key=lambda p: (abs(p - f), p))))
    return Matching(
        pairs=pairs,
        unmatched=sorted(p for pi, p in enumerate(predicted) if pi not in used_p),
        missed=[item for gi, item in enumerate(gold) if gi not in used_g],
        traps=traps,
        predicted=len(predicted),
        gold=len(gold),
    )


def prf(matched: int, predicted: int, gold: int) -> dict[str, float]:
    """Precision, recall and F1 (0 where a denominator is 0)."""
    precision = matched / predicted if predicted else 0.0
    recall = matched / gold if gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": round(precision, 4), "recall": round(recall, 4), "f1": round(f1, 4)}


# ---------------------------------------------------------------- conflicts


@dataclass(frozen=True)
class Mark:
    """Something ccm derived from a turn, and whether it is marked as replaced."""

    source: str  # manifest, graph or critical
    turn: int
    replaced: bool
    text: str


def _owner(turn: int, conflict_turns: Sequence[int], window: int) -> int | None:
    """The conflict turn `turn` is from: within `window`, strictly nearest."""
    near = sorted((abs(turn - c), c) for c in conflict_turns if abs(turn - c) <= window)
    if not near or (len(near) > 1 and near[0][0] == near[1][0]):
        return None
    return near[0][1]


def conflict_resolved(
    conflict_turns: Sequence[int], marks: Iterable[Mark], window: int = CONFLICT_WINDOW
) -> tuple[bool, list[Mark], list[Mark]]:
    """Whether the conflict is resolved (see the module docstring), with the derived
    items from its earlier turn and those from its later turns."""
    earlier_turn = conflict_turns[0]
    earlier: list[Mark] = []
    later: list[Mark] = []
    for mark in marks:
        owner = _owner(mark.turn, conflict_turns, window)
        if owner is None:
            continue
        (earlier if owner == earlier_turn else later).append(mark)
    resolved = any(m.replaced for m in earlier) and not any(m.replaced for m in later)
    return resolved, earlier, later


# ---------------------------------------------------------------- the vault


def front_field(text: str, key: str) -> str | None:
    """One plain ``key: value`` line of a note's frontmatter, or None."""
    found = _FRONTMATTER.match(text.replace("\r\n", "\n"))
    if not found:
        return None
    for line in found.group(1).splitlines():
        if line.startswith(f"{key}:"):
            return line[len(key) + 1 :].strip().strip("\"'")
    return None


def note_parts(text: str, fallback: str = "") -> tuple[str, str]:
    """A note's title (its first ``# `` heading; else the frontmatter's ``title``; else
    `fallback`) and its first body paragraph (the first block of lines after the
    heading, or after the frontmatter where there is no heading)."""
    body = text.replace("\r\n", "\n")
    front_title = front_field(body, "title") or ""
    found = _FRONTMATTER.match(body)
    if found:
        body = body[found.end() :]
    lines = body.split("\n")
    title = ""
    start = 0
    for number, line in enumerate(lines):
        if line.startswith("# "):
            title = line[2:].strip()
            start = number + 1
            break
    paragraph: list[str] = []
    for line in lines[start:]:
        if not line.strip():
            if paragraph:
                break
            continue
        if line.startswith("#") and not paragraph:
            continue  # a sub-heading before any text
        paragraph.append(line.strip())
    return title or front_title or fallback, " ".join(paragraph)


def statement_share(conclusion: str, title: str, paragraph: str) -> float:
    """The share of the conclusion's content words in the note's title and paragraph."""
    wanted = content_words(conclusion)
    if not wanted:
        return 0.0
    return len(wanted & set(tokens(f"{title} {paragraph}"))) / len(wanted)


def is_junk(title: str) -> bool:
    """A note title with fewer than 3 distinct content words."""
    return len(content_words(title)) < JUNK_TITLE_WORDS


# ---------------------------------------------------------------- reading scenarios


@dataclass
class Scenario:
    name: str  # the file stem
    session: str
    chat: Path
    labels_path: Path
    labels: dict[str, Any]
    lines: list[bytes] = field(default_factory=list)  # the chat's non-empty lines


def _labels(path: Path) -> dict[str, Any]:
    try:
        data = yamlio.load_file(path)
    except SchemaError as exc:
        raise FormatError(str(exc), LABELS_HINT) from exc
    except OSError as exc:
        raise FormatError(f"{path}: cannot read ({exc})", LABELS_HINT) from exc
    if not isinstance(data, dict):
        raise FormatError(f"{path}: the labels are not a mapping", LABELS_HINT)

    def need(key: str, kind: type, required: bool = False) -> None:
        value = data.get(key)
        if value is None and not required:
            data[key] = kind()
            return
        if not isinstance(value, kind) or (required and not value):
            raise FormatError(
                f"{path}: '{key}' must be a {'non-empty ' if required else ''}"
                f"{'list' if kind is list else 'mapping'}",
                LABELS_HINT,
            )

    need("segments", list, required=True)
    need("topics", dict)
    for key in ("critical", "false_conclusions", "recall_questions", "conflicts", "checkpoints"):
        need(key, list)
    need("working_state_at_end", dict)
    try:
        _check_labels(data)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise FormatError(
            f"{path}: a label misses a field or has a wrong one ({exc!r})", LABELS_HINT
        ) from exc
    return data


def _check_labels(data: dict[str, Any]) -> None:
    """Raise KeyError/TypeError/ValueError where a field the measures read is wrong."""
    numbers: list[Any] = [s["start"] for s in data["segments"]]
    for topic in data["topics"].values():
        if topic.get("status") == "concluded" and topic.get("concluded_at") is not None:
            numbers.append(topic["concluded_at"])
    texts: list[Any] = []
    for item in data["critical"]:
        numbers.append(item["turn"])
        texts.append(item["text"])
    numbers.extend(data["false_conclusions"])
    for question in data["recall_questions"]:
        texts += [question["q"], question["answer"]]
        numbers.extend(question["evidence"])
    for conflict in data["conflicts"]:
        if len(conflict["turns"]) < 2:
            raise ValueError("a conflict needs two turns")
        numbers.extend(conflict["turns"])
    terms: list[Any] = [data["working_state_at_end"].get("key_terms") or []]
    for checkpoint in data["checkpoints"]:
        numbers.append(checkpoint["turn"])
        terms.append(checkpoint["key_terms"])
    for number in numbers:
        if not isinstance(number, int) or isinstance(number, bool):
            raise ValueError(f"turn {number!r} is not a number")
    for text in texts:
        if not isinstance(text, str):
            raise TypeError(f"{text!r} is not text")
    for listed in terms:
        if not isinstance(listed, list):
            raise TypeError(f"key terms {listed!r} are not a list")


def load_scenarios(directory: Path) -> list[Scenario]:
    """Every ``<name>.jsonl`` in `directory` with its ``<name>.labels.yaml``, by name."""
    if not directory.is_dir():
        raise FormatError(f"{directory}: not a folder", "pass the folder of the scenarios")
    chats = sorted(directory.glob("*.jsonl"))
    labelled = sorted(directory.glob("*.labels.yaml"))
    if not chats and not labelled:
        raise FormatError(
            f"{directory}: no scenarios (<name>.jsonl with <name>.labels.yaml) inside",
            "pass the folder that holds the scenario files",
        )
    names = {p.name[: -len(".jsonl")] for p in chats}
    for labels in labelled:
        name = labels.name[: -len(".labels.yaml")]
        if name not in names:
            raise FormatError(
                f"{labels}: no chat {name}.jsonl beside it",
                f"add {name}.jsonl or remove the labels",
            )
    scenarios = []
    sessions: dict[str, str] = {}
    for chat in chats:
        name = chat.name[: -len(".jsonl")]
        labels = chat.with_name(f"{name}.labels.yaml")
        if not labels.is_file():
            raise FormatError(
                f"{chat}: no labels file {labels.name} beside it",
                f"write {labels.name} (see check_labels.py) or move {chat.name} away",
            )
        try:
            session = check_session_id(name)
        except CCMError:
            session = slug_session_id(name)
        if session in sessions:
            raise FormatError(
                f"{chat}: gives the same session name as {sessions[session]}", "rename one of them"
            )
        sessions[session] = chat.name
        lines = [line for line in chat.read_bytes().split(b"\n") if line.strip()]
        if not lines:
            raise FormatError(f"{chat}: the chat is empty", "write one JSON object a line")
        scenarios.append(Scenario(name, session, chat, labels, _labels(labels), lines))
    return scenarios


# ---------------------------------------------------------------- measuring


def _root(
    path: Path, model: str | None = None, llm_settings: dict[str, Any] | None = None
) -> Store:
    """A private knowledge root; with `model`, hybrid recall on with that model; with
    `llm_settings`, that ``llm`` section."""
    path.mkdir(parents=True)
    config: dict[str, Any] = {"ingest": {"fsync": False}}
    if model:
        config["recall"] = {"semantic": True, "model": model}
    if llm_settings:
        config["llm"] = dict(llm_settings)
    (path / "config.yaml").write_text(json.dumps(config) + "\n", encoding="utf-8")
    return Store(path)


def _import(store: Store, chat: Path, session: str, derive: bool = True) -> None:
    """`ccm ingest CHAT --session SESSION --format jsonl`; any line it rejects is an error."""
    report = ingest(store, [str(chat)], "jsonl", session, derive=derive)
    problems = [r.describe() for r in report.rejected] + report.errors
    if problems:
        raise FormatError(f"{chat}: {problems[0]}", "fix the chat: one JSON object a line")


def _check_numbering(scenario: Scenario, turns: list[dict[str, Any]]) -> None:
    """The file's turn K must be raw line K (the labels point at the file's turns)."""
    for position, turn in enumerate(turns, 1):
        source = (turn.get("meta") or {}).get("source_turn", position)
        if turn["turn"] != position or source != position:
            raise FormatError(
                f"{scenario.chat}: line {position} holds turn {source}, imported as raw "
                f"line {turn['turn']}",
                "number the turns 1..N in file order",
            )
    if len(turns) != len(scenario.lines):
        raise FormatError(
            f"{scenario.chat}: {len(scenario.lines)} lines but {len(turns)} turns imported",
            "write one turn a line",
        )


def _contexts(
    measured: MeasuredSession, query: str | None, budget: int, errors: list[str]
) -> dict[str, str]:
    """The context of each method; a method that cannot fill the budget gives ''."""
    found: dict[str, str] = {}
    for method in METHODS:
        try:
            found[method] = getattr(measured, method)(query, budget)
        except UsageError as exc:
            errors.append(f"{method} at {budget} tokens: {exc}")
            found[method] = ""
    return found


def _share(hits: int, total: int) -> float:
    return round(hits / total, 4) if total else 0.0


class _Measure:
    """The measures of one scenario, in its own knowledge root."""

    def __init__(self, scenario: Scenario, folder: Path, model: str | None = None) -> None:
        self.scenario = scenario
        self.labels = scenario.labels
        self.folder = folder
        self.store = _root(folder / "root", model)
        self.errors: list[str] = []
        _import(self.store, scenario.chat, scenario.session)
        self.measured = MeasuredSession(self.store, scenario.session)
        _check_numbering(scenario, self.measured.turns)
        self.content = {t["turn"]: str(t["content"]) for t in self.measured.turns}
        self.manifest = self.store.read_derived(scenario.session, "manifest.yaml", "manifest")

    def close(self) -> None:
        self.measured.close()

    def turn_text(self, turn: int) -> str:
        return self.content.get(turn, "")

    def run(self) -> dict[str, Any]:
        n = len(self.measured.turns)
        result: dict[str, Any] = {"scenario": self.scenario.name, "turns": n}
        result["segmentation"] = self.segmentation(n)
        result["conclusions"] = self.conclusions()
        result["critical"] = self.critical()
        result["end_terms"] = self.end_terms()
        result["checkpoints"] = self.checkpoints()
        result["recall"] = self.recall()
        result["conflicts"] = self.conflicts()
        result["errors"] = self.errors
        return result

    def segmentation(self, n: int) -> dict[str, Any]:
        gold = sorted({int(s["start"]) for s in self.labels["segments"]})
        hyp = sorted({int(s["raw_lines"][0]) for s in self.manifest.get("segments", [])})
        k = pk_window(gold, n)
        disagree, compared = pk_counts(gold, hyp, n, k)
        return {
            "pk": round(disagree / compared, 4) if compared else 0.0,
            "k": k,
            "disagreements": disagree,
            "comparisons": compared,
            "gold_starts": gold,
            "predicted_starts": hyp,
        }

    def conclusions(self) -> dict[str, Any]:
        segments = [
            s
            for s in self.manifest.get("segments", [])
            if s.get("status") == "concluded" and isinstance(s.get("conclusion"), dict)
        ]
        predicted = [int(s["conclusion"]["turn"]) for s in segments]
        topics = self.labels["topics"]
        gold = sorted(
            (
                (str(tid), int(t["concluded_at"]))
                for tid, t in topics.items()
                if t.get("status") == "concluded" and t.get("concluded_at") is not None
            ),
            key=lambda item: (item[1], item[0]),
        )
        matching = match_conclusions(
            predicted, gold, [int(t) for t in self.labels["false_conclusions"]]
        )
        matched_at = {p: (topic, g) for p, topic, g in matching.pairs}
        rows = []
        for segment, turn in zip(segments, predicted, strict=True):
            topic, gold_turn = matched_at.get(turn, ("unmatched", None))
            rows.append(
                {
                    "turn": turn,
                    "segment": segment.get("id"),
                    "kind": segment["conclusion"].get("kind"),
                    "text": segment["conclusion"].get("text"),
                    "matched": topic,
                    "gold_turn": gold_turn,
                }
            )
        return {
            "predicted": rows,
            "missed": [
                {"topic": topic, "concluded_at": turn, "title": topics[topic].get("title")}
                for topic, turn in matching.missed
            ],
            "traps": [
                {"turn": f, "predicted_turn": p, "text": " ".join(self.turn_text(f).split())[:160]}
                for f, p in matching.traps
            ],
            "counts": {
                "predicted": matching.predicted,
                "gold": matching.gold,
                "matched": matching.matched,
                "traps": len(matching.traps),
                "false_conclusions": len(set(self.labels["false_conclusions"])),
            },
            **prf(matching.matched, matching.predicted, matching.gold),
        }

    def critical(self) -> dict[str, Any]:
        contexts = _contexts(self.measured, None, CRITICAL_BUDGET, self.errors)
        items: list[dict[str, Any]] = []
        kept = dict.fromkeys(METHODS, 0)
        for label in self.labels["critical"]:
            turn = int(label["turn"])
            sentence = key_sentence(self.turn_text(turn), str(label["text"]))
            found = {m: contains(contexts[m], sentence) for m in METHODS}
            for method, hit in found.items():
                kept[method] += hit
            items.append({"turn": turn, "sentence": sentence, "kept": found})
        total = len(items)
        return {
            "total": total,
            "kept": kept,
            "share": {m: _share(kept[m], total) for m in METHODS},
            "missed": [
                {"turn": i["turn"], "sentence": i["sentence"]}
                for i in items
                if not i["kept"]["ccm"]
            ],
            "items": items,
        }

    def end_terms(self) -> dict[str, Any]:
        contexts = _contexts(self.measured, None, STATE_BUDGET, self.errors)
        terms = [str(t) for t in self.labels["working_state_at_end"].get("key_terms") or []]
        return _terms(terms, contexts)

    def checkpoints(self) -> dict[str, Any]:
        rows: list[dict[str, Any]] = []
        for checkpoint in self.labels["checkpoints"]:
            turn = int(checkpoint["turn"])
            session = slug_session_id(f"{self.scenario.session}-at-{turn}")
            part = self.folder / f"{session}.jsonl"
            part.write_bytes(b"\n".join(self.scenario.lines[:turn]) + b"\n")
            _import(self.store, part, session)
            measured = MeasuredSession(self.store, session)
            try:
                contexts = _contexts(measured, None, STATE_BUDGET, self.errors)
            finally:
                measured.close()
            terms = [str(t) for t in checkpoint.get("key_terms") or []]
            rows.append({"turn": turn, **_terms(terms, contexts)})
        total = sum(r["total"] for r in rows)
        present = {m: sum(r["present"][m] for r in rows) for m in METHODS}
        return {
            "total": total,
            "present": present,
            "share": {m: _share(present[m], total) for m in METHODS},
            "checkpoints": rows,
        }

    def recall(self) -> dict[str, Any]:
        rows: list[dict[str, Any]] = []
        for question in self.labels["recall_questions"]:
            query = str(question["q"])
            contexts = _contexts(self.measured, query, RECALL_BUDGET, self.errors)
            evidence: list[dict[str, Any]] = []
            for turn in [int(t) for t in question["evidence"]]:
                sentence = key_sentence(self.turn_text(turn), str(question["answer"]))
                evidence.append(
                    {
                        "turn": turn,
                        "sentence": sentence,
                        "found": {m: contains(contexts[m], sentence) for m in METHODS},
                    }
                )
            score = {
                m: _share(sum(e["found"][m] for e in evidence), len(evidence)) for m in METHODS
            }
            rows.append(
                {
                    "q": query,
                    "score": score,
                    "missed": [
                        {"turn": e["turn"], "sentence": e["sentence"]}
                        for e in evidence
                        if not e["found"]["ccm"]
                    ],
                }
            )
        return {
            "questions": len(rows),
            "score": {
                m: round(statistics.fmean(r["score"][m] for r in rows), 4) if rows else 0.0
                for m in METHODS
            },
            "by_question": rows,
        }

    def marks(self) -> list[Mark]:
        """What ccm derived from each turn, and whether it is marked replaced."""
        from ccm.sleep.consolidate import consolidate

        session = self.scenario.session
        found: list[Mark] = []
        state = self.measured.derived.state
        derived = [
            ("manifest", segment.get("conclusion")) for segment in self.manifest.get("segments", [])
        ] + [("critical", item) for item in state.get("critical", [])]
        for tier, item in derived:
            if isinstance(item, dict) and isinstance(item.get("turn"), int):
                replaced = item.get("superseded_by") is not None
                found.append(Mark(tier, item["turn"], replaced, str(item.get("text") or "")))
        consolidate(self.store, [session])
        nodes_path = self.store.root / "network" / "nodes.json"
        nodes = json.loads(nodes_path.read_text(encoding="utf-8")).get("nodes", [])
        for node in nodes:
            if node.get("session") == session and isinstance(node.get("turn"), int):
                found.append(
                    Mark(
                        "graph",
                        node["turn"],
                        node.get("status") in REPLACED,
                        str(node.get("text") or ""),
                    )
                )
        return found

    def conflicts(self) -> dict[str, Any]:
        labelled = self.labels["conflicts"]
        if not labelled:
            return {"total": 0, "resolved": 0, "conflicts": []}
        marks = self.marks()
        rows: list[dict[str, Any]] = []
        for conflict in labelled:
            turns = [int(t) for t in conflict["turns"]]
            resolved, earlier, later = conflict_resolved(turns, marks)
            rows.append(
                {
                    "kind": conflict.get("kind"),
                    "turns": turns,
                    "resolved": resolved,
                    "earlier": [_mark(m) for m in earlier],
                    "later": [_mark(m) for m in later],
                }
            )
        return {
            "total": len(rows),
            "resolved": sum(r["resolved"] for r in rows),
            "conflicts": rows,
        }


def _mark(mark: Mark) -> dict[str, Any]:
    return {
        "source": mark.source,
        "turn": mark.turn,
        "replaced": mark.replaced,
        "text": mark.text[:160],
    }


def _terms(terms: list[str], contexts: dict[str, str]) -> dict[str, Any]:
    lowered = {m: text.lower() for m, text in contexts.items()}
    found = {m: [t for t in terms if t.lower() in lowered[m]] for m in METHODS}
    return {
        "total": len(terms),
        "present": {m: len(found[m]) for m in METHODS},
        "share": {m: _share(len(found[m]), len(terms)) for m in METHODS},
        "missing": {m: [t for t in terms if t not in found[m]] for m in METHODS},
    }


def vault(
    scenarios: list[Scenario], folder: Path, llm_settings: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Consolidate every scenario session into one root, then check the notes; with
    `llm_settings` (a config.yaml's ``llm`` section), a model states and titles the
    conclusions (`ccm.llm`), and the report says what it did."""
    from ccm import llm
    from ccm.sleep.consolidate import consolidate

    store = _root(folder, llm_settings=llm_settings)
    for scenario in scenarios:
        _import(store, scenario.chat, scenario.session, derive=False)
    with llm.Model(store) as model:  # asked where `llm_settings` name a provider
        done = consolidate(store, model=model if model.asked else None)
    sessions = {scenario.name: scenario.session for scenario in scenarios}
    notes = []
    session_of: dict[str, str | None] = {}
    for path in sorted((store.root / "artifacts").rglob("*.md")):
        text = path.read_text(encoding="utf-8")
        title, paragraph = note_parts(text, path.stem)
        relative = path.relative_to(store.root).as_posix()
        notes.append((relative, title, paragraph))
        session_of[relative] = (front_field(text, "id") or "").split("/")[0] or None
    conclusions: list[dict[str, Any]] = []
    for scenario in scenarios:
        for tid, topic in scenario.labels["topics"].items():
            text = topic.get("conclusion")
            if not isinstance(text, str) or not text.strip():
                continue
            best_share, best_note = 0.0, None
            for relative, title, paragraph in notes:
                share = statement_share(text, title, paragraph)
                if share > best_share:
                    best_share, best_note = share, relative
            conclusions.append(
                {
                    "scenario": scenario.name,
                    "topic": str(tid),
                    "stated": best_share >= STATED_SHARE,
                    "share": round(best_share, 4),
                    "note": best_note,
                    # a note of another scenario's session may state it by chance
                    "note_session": session_of.get(best_note) if best_note else None,
                }
            )
    junk = [{"note": relative, "title": title} for relative, title, _ in notes if is_junk(title)]
    stated = sum(c["stated"] for c in conclusions)
    elsewhere = sum(
        c["stated"] and c["note_session"] != sessions[c["scenario"]] for c in conclusions
    )
    return {
        "conclusions": len(conclusions),
        "stated": stated,
        "stated_by_another_session": elsewhere,
        "stated_share": _share(stated, len(conclusions)),
        "notes": len(notes),
        "junk": len(junk),
        "junk_titles": junk,
        "by_conclusion": conclusions,
    } | ({"llm": done.llm} if done.llm is not None else {})


def _totals(results: list[dict[str, Any]]) -> dict[str, Any]:
    def summed(key: str, part: str, method: str | None = None) -> int:
        return sum(int(r[key][part][method] if method else r[key][part]) for r in results)

    counts = {
        k: sum(r["conclusions"]["counts"][k] for r in results)
        for k in ("predicted", "gold", "matched", "traps", "false_conclusions")
    }
    disagreements = sum(r["segmentation"]["disagreements"] for r in results)
    comparisons = sum(r["segmentation"]["comparisons"] for r in results)
    questions = [q["score"] for r in results for q in r["recall"]["by_question"]]
    critical_total = sum(r["critical"]["total"] for r in results)
    end_total = sum(r["end_terms"]["total"] for r in results)
    checkpoint_total = sum(r["checkpoints"]["total"] for r in results)
    return {
        "scenarios": len(results),
        "turns": sum(r["turns"] for r in results),
        "pk_mean": round(statistics.fmean(r["segmentation"]["pk"] for r in results), 4)
        if results
        else 0.0,
        "pk_pooled": _share(disagreements, comparisons),
        "conclusions": {**counts, **prf(counts["matched"], counts["predicted"], counts["gold"])},
        "critical": {
            "total": critical_total,
            "share": {m: _share(summed("critical", "kept", m), critical_total) for m in METHODS},
        },
        "end_terms": {
            "total": end_total,
            "share": {m: _share(summed("end_terms", "present", m), end_total) for m in METHODS},
        },
        "checkpoints": {
            "total": checkpoint_total,
            "share": {
                m: _share(summed("checkpoints", "present", m), checkpoint_total) for m in METHODS
            },
        },
        "recall": {
            "questions": len(questions),
            "score": {
                m: round(statistics.fmean(q[m] for q in questions), 4) if questions else 0.0
                for m in METHODS
            },
        },
        "conflicts": {
            "total": sum(r["conflicts"]["total"] for r in results),
            "resolved": sum(r["conflicts"]["resolved"] for r in results),
        },
    }


def run_scenarios(
    directory: Path,
    progress: Callable[[str], None] | None = None,
    model: str | None = None,
    llm_settings: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Measure ccm on every labelled scenario in `directory` (see the module docstring);
    with `model`, ccm's contexts recall by meaning too, with that embedding model; with
    `llm_settings`, the vault is consolidated with that model (`ccm.llm`)."""
    started = time.perf_counter()
    scenarios = load_scenarios(directory)
    results = []
    with tempfile.TemporaryDirectory(prefix="ccm-scenarios-") as tmp:
        for scenario in scenarios:
            measure = _Measure(scenario, Path(tmp) / scenario.session, model)
            try:
                results.append(measure.run())
            finally:
                measure.close()
            if progress:
                progress(scenario.name)
        vault_report = vault(scenarios, Path(tmp) / "vault", llm_settings)
        if progress:
            progress("vault")
    return {
        "directory": str(directory),
        "methods": list(METHODS),
        "budgets": {
            "critical": CRITICAL_BUDGET,
            "state": STATE_BUDGET,
            "recall": RECALL_BUDGET,
        },
        "scenarios": results,
        "totals": _totals(results),
        "vault": vault_report,
        "seconds": round(time.perf_counter() - started, 2),
    }
