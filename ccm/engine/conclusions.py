"""Conclusion detection (whitepaper section 4.1): when a line of reasoning resolves.

Six kinds, each with a base confidence and a reason:

================  ===================================================  ==========
kind              cue                                                  confidence
================  ===================================================  ==========
decision          "Decision: ...", "we decided", "let's go with"       0.85
resolution        "that fixed it", "works now", "tests pass"           0.90 user
rejection         "option A doesn't work because Z", "ruled out"       0.75
confirmation      "yes, exactly", "perfect, thanks" after a proposal   0.75
task              "done: ...", "is deployed", "completed"              0.80
insight           "the takeaway is", "the root cause was"              0.70
================  ===================================================  ==========

Statements by the assistant count for less (x0.7): a claim is not a verification.

Look-alikes are rejected: questions ("did that fix it?", "that fixed it? no"),
negations ("that didn't fix it"), sarcasm and contradiction in the same turn
("perfect, it broke again"), and pauses ("done for today"). A decision reversed later
is handled by `supersedes`: the later one stands and the earlier is superseded.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ccm.engine.text import sentences, terms

CONFIDENCE = {
    "decision": 0.85,
    "resolution": 0.9,
    "rejection": 0.75,
    "confirmation": 0.75,
    "task": 0.8,
    "insight": 0.7,
}
ASSISTANT_FACTOR = 0.7
LONG_TURN = 3000
LONG_ANSWER = 1200


@dataclass(frozen=True)
class Conclusion:
    text: str
    turn: int
    kind: str
    confidence: float
    reason: str

    def as_dict(self) -> dict[str, object]:
        return {
            "text": self.text,
            "turn": self.turn,
            "kind": self.kind,
            "confidence": self.confidence,
            "reason": self.reason,
        }


def _rx(*patterns: str) -> re.Pattern[str]:
    """One pattern from several; matched against lowercased text (IGNORECASE is 10x slower)."""
    return re.compile("|".join(f"(?:{p})" for p in patterns))


CUES: list[tuple[str, re.Pattern[str]]] = [
    (
        "decision",
        _rx(
            r"^(?:final\s+)?(?:decision|decided|verdict|conclusion)\s*[:\-\u2014]",
            r"\b(?:we|i)\s*(?:'ve|have)?\s+decided\b",
            r"\b(?:we|i)(?:'ll| will| are going to|'re going to)\s+(?:go with|stick with|use|switch to)\b",
            r"\blet'?s\s+(?:go with|stick with|use|switch to)\b",
            r"\b(?:the|our|final)\s+decision\s+is\b",
            r"\bsettled on\b",
            r"\bwe agreed\b",
            r"^change of plan\b",
            r"^let'?s (?:keep it simple|go for)\b",
            r"\b(?:use|using|go with|switch to|move to)\b[^.?!]{0,80}\binstead\b",
        ),
    ),
    (
        "resolution",
        _rx(
            r"\b(?:that|this|it|which|the (?:fix|change|patch))\s+(?:fixed|solved|resolved)\b",
            r"\b(?:fixed|solved|resolved)\s+it\b",
            r"\b(?:works|working|fixed)\s+now\b",
            r"\bit\s+works\b",
            r"\bproblem\s+solved\b",
            r"\b(?:issue|bug|problem)\s+(?:is\s+)?(?:fixed|resolved|gone)\b",
            r"\b(?:tests?|build|ci|pipeline)\s+(?:pass|passes|passed|is green|are green)\b",
            r"\bno\s+more\s+(?:errors?|duplicates|failures|crashes)\b",
            r"\bis\s+idempotent\s+now\b",
        ),
    ),
    (
        "rejection",
        _rx(
            r"\b(?:doesn'?t|does not|won'?t|will not|can'?t|cannot|didn'?t|did not)\s+(?:work|help|scale|fit)\b[^.?!]*\bbecause\b",
            r"\bruled\s+out\b",
            r"\b(?:is|isn'?t|not)\s+(?:an\s+)?option\b[^.?!]*\bbecause\b",
            r"\b(?:rejected|dropped|abandoned)\b[^.?!]*\bbecause\b",
            r"\bnot\s+(?:viable|feasible)\b",
        ),
    ),
    (
        "task",
        _rx(
            r"^(?:done|finished|completed|shipped|merged|deployed)\s*[:.!\-\u2014]",
            r"\b(?:is|are|has been|have been|now)\s+(?:done|finished|completed|merged|deployed|shipped|in place)\b",
            r"\ball\s+(?:tests|tasks|items|steps)\s+(?:are\s+)?(?:done|complete|completed|passing)\b",
            "\u2705",
        ),
    ),
    (
        "insight",
        _rx(
            r"\b(?:so\s+)?the\s+(?:key\s+)?takeaway\s+is\b",
            r"\bthe\s+root\s+cause\s+(?:is|was)\b",
            r"\b(?:so|in short|in summary|to sum up),?\s+the\s+(?:answer|conclusion)\s+is\b",
            r"\bturns\s+out\b",
        ),
    ),
]

# a cheap literal screen over the whole turn decides whether a sentence look is needed
ANY_CUE = re.compile(
    r"decision|decided|verdict|conclusion|go with|stick with|switch to|settled|agreed|fixed|"
    r"solved|resolved|works|working now|pass|green|no more|idempotent|because|ruled out|"
    r"viable|feasible|done|finished|completed|shipped|merged|deployed|in place|takeaway|"
    r"root cause|answer is|turns out|let's use|lets use|ll use|will use|going to use|\u2705|"
    r"change of plan|keep it simple|go for|instead"
)
CONFIRMATION = _rx(
    r"^(?:yes|yep|yeah|exactly|correct|agreed|confirmed|perfect|great|lgtm)\b[\s,.!]",
    r"^(?:yes|yep|exactly|correct|agreed|confirmed|perfect|lgtm)[.!]?$",
    r"^(?:sounds|looks)\s+good\b",
    r"^that'?s\s+(?:it|right|correct|perfect|exactly it)\b",
)
QUESTION_START = _rx(
    r"^(?:did|does|do|is|are|has|have|should|could|would|can|will|was|were|why|how|what|which)\b"
)
NEGATION_BEFORE = re.compile(
    r"\b(?:not|never|no longer|hardly|barely|if|unless|whether|until|once)\s+(?:\w+\s+){0,3}$|n't\s+(?:\w+\s+){0,2}$"
)
FAILURE = re.compile(
    r"\b(?:broke|broken|breaks|crash(?:es|ed|ing)?|fail(?:s|ed|ing|ure)?|errors?|exceptions?|"
    r"worse|regress\w*|again|still\s+(?:fail\w*|broken|there|happening|duplicat\w*|see\w*|get\w*))\b"
)
NO_FAILURE = re.compile(r"\b(?:no|zero|without|any)\s+(?:more\s+)?$")
PAUSE = _rx(
    r"\bdone\s+for\s+(?:today|now|the\s+day|tonight|the\s+week|this\s+week)\b",
    r"\b(?:call it a day|stop here for (?:now|today))\b",
)
NOT_DONE = _rx(
    r"\b(?:not|almost|nearly|half|isn'?t|aren'?t|once|when|if)\s+(?:\w+\s+)?done\b",
    r"\bdone\s+(?:except|apart from|but|save for)\b",
)
REVERSAL = _rx(
    r"\binstead\b",
    r"\bactually\b",
    r"\bchange of plan\b",
    r"\bscratch that\b",
    r"\bon second thought\b",
    r"\brather than\b",
    r"\bno longer\b",
    r"\bswitch(?:ing)? to\b",
    r"\brevers\w+\b",
    r"\breplac\w+\b",
)
ACTION = _rx(
    r"\b(?:fix|fixed|change|changed|add|added|use|set|replace|replaced|switch|remove|removed|"
    r"update|updated|move|moved|wrap|call|store|stored|drop|dropped|keep|compute|hash|create|"
    r"created|rename|delete|patch|patched|install|enable|configure|run|make|made|put|wrote)\b"
)


def _has_failure(text: str) -> bool:
    """A failure word in `text` that is not negated ("no more errors" is not a failure)."""
    return any(not NO_FAILURE.search(text[: match.start()]) for match in FAILURE.finditer(text))


def _is_question(sentence: str, cue_end: int) -> bool:
    if sentence.rstrip().endswith("?"):
        return True
    if sentence[cue_end : cue_end + 3].lstrip().startswith("?"):
        return True
    return bool(QUESTION_START.match(sentence))


def _negated(sentence: str, cue_start: int) -> bool:
    return bool(NEGATION_BEFORE.search(sentence[:cue_start]))


def _lead(text: str) -> str:
    """The sentence of a proposal that says what was done or chosen: the one with the
    most action verbs (the first among equals), else the first sentence."""
    found = [s for s in sentences(text) if not s.endswith("?")]
    best, best_score = None, 0
    for sentence in found:
        score = len(ACTION.findall(sentence.lower()))
        if score > best_score:
            best, best_score = sentence, score
    return best or (found[0] if found else text.strip())


def _clip(text: str, limit: int = 240) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "\u2026"


def detect(
    turn: int, role: str, text: str, previous: tuple[str, str] | None = None
) -> Conclusion | None:
    """The conclusion `text` states, or None; `previous` is the (role, text) before it."""
    if role not in ("user", "assistant") or not text.strip():
        return None
    limit = LONG_TURN if role == "user" else LONG_ANSWER
    if len(text) > limit:
        # conclusions open or close a long turn; its middle is code, logs or detail
        text = text[: limit // 2] + "\n" + text[-limit // 2 :]
    lower = text.lower()
    confirming = role == "user" and previous is not None and previous[0] == "assistant"
    hits = {m.group() for m in ANY_CUE.finditer(lower)}
    if not hits and not (confirming and CONFIRMATION.search(lower[:80])):
        return None
    factor = 1.0 if role == "user" else ASSISTANT_FACTOR
    originals = sentences(text)
    parts = [s.lower() for s in originals]
    for index, sentence in enumerate(parts):
        if not any(hit in sentence for hit in hits):
            continue
        original = originals[index]
        following = parts[index + 1] if index + 1 < len(parts) else ""
        for kind, pattern in CUES:
            match = pattern.search(sentence)
            if match is None:
                continue
            if _is_question(sentence, match.end()) or _negated(sentence, match.start()):
                continue
            if re.match(r"^(?:no|nope|not really|not quite)\b", following):
                continue
            if kind in ("resolution", "task", "decision") and _has_failure(
                sentence[match.end() :] + " " + following
            ):
                continue  # "that fixed it, but now it crashes", "perfect, it broke again"
            if kind == "task" and (PAUSE.search(lower) or NOT_DONE.search(sentence)):
                continue
            body = original
            reason = f"{kind} cue '{match.group().strip()}' in a {role} turn"
            if kind == "resolution" and len(terms(sentence)) <= 3 and previous is not None:
                body = f"{_lead(previous[1])} ({original.strip()})"
                reason += "; confirms the previous turn"
            confidence = round(CONFIDENCE[kind] * factor, 3)
            return Conclusion(_clip(body), turn, kind, confidence, reason)
    if confirming and previous is not None:
        match = CONFIRMATION.search(parts[0] if parts else "")
        if match and not text.rstrip().endswith("?") and not _has_failure(lower):
            if PAUSE.search(lower):
                return None
            confidence = CONFIDENCE["confirmation"]
            if previous[1].rstrip().endswith("?"):
                confidence -= 0.1  # a yes to a question decides less than a yes to a plan
            return Conclusion(
                _clip(_lead(previous[1])),
                turn,
                "confirmation",
                round(confidence, 3),
                f"user confirmed the proposal before it ('{match.group().strip(' ,.!')}')",
            )
    return None


def subject(text: str) -> set[str]:
    """The content terms of a conclusion, for matching it with later ones."""
    return set(terms(text))


def supersedes(later: Conclusion, earlier: Conclusion) -> bool:
    """True when `later` reverses `earlier`: both decide, on the same subject."""
    if later.kind not in ("decision", "confirmation") or earlier.kind not in (
        "decision",
        "confirmation",
    ):
        return False
    a, b = subject(later.text), subject(earlier.text)
    if not a or not b:
        return False
    shared = len(a & b)
    overlap = shared / min(len(a), len(b))
    if REVERSAL.search(later.text.lower()):
        return shared >= 1
    return overlap >= 0.5 and a != b
