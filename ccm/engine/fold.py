"""The incremental engine: a deterministic fold over a session's turns.

``state = fold(state, new_turns, params)`` does the work of one turn in time that
does not grow with the session: each turn updates the open segment, the term
statistics, the critical items and the decision registry; a segment's summary,
keywords and effort are computed once, when it closes. The state is plain JSON
(dicts, lists, strings, numbers), so it can be cached under ``.ccm/`` and resumed:
folding turns 1..n in any number of chunks, with a JSON round trip between chunks,
gives exactly the state of folding them at once. Rendering the derived files from a
state (`ccm.engine.render`) is a separate, cheap step. A closed segment changes only
when a later turn refers to it (``referenced``) or reverses its conclusion; both bump
its ``rev`` and is noted in ``bumped`` (the indices of the latest bumps, ``bumps`` in
all), so a long-lived renderer can tell which segments to look at again without
looking at every one.

Segment boundaries (a new segment starts at a user turn):

* ``time_gap``: the pause before the turn is at least ``segments.time_gap_minutes``;
* ``shift``: an explicit cue ("switching gears", "another thing", "back to the X");
* ``conclusion``: the segment concluded and the new turn is about something else;
* ``cohesion``: TextTiling-like lexical cohesion between the turns before a user turn
  and the user/assistant pair it opens drops well below the session's usual level
  (decided one turn later, when the answer is known);
* ``length``: the segment reached ``segments.max_turns``.
"""

from __future__ import annotations

import logging
import math
import multiprocessing
import os
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ccm import patterns
from ccm import tokens as tokenizer
from ccm.config import Config
from ccm.engine import conclusions, critical
from ccm.engine.text import (
    cosine,
    named_speaker,
    paths,
    prose,
    sentences,
    skipping,
    term_of,
    terms,
    top_terms,
    words,
)

log = logging.getLogger(__name__)

STATE_VERSION = 144
RECENT_TURNS = 30
RECENT_CHARS = 2000
TOOL_TERM_CHARS = 4000
SURFACE_CHARS = 4000  # what of a turn is read first for the words behind a topic's stems
PATH_CHARS = 4000
SEGMENT_TERMS = 40
EFFORT_TERMS = 60
INDEX_TERMS = 8
DECISIONS_KEPT = 200
CONCLUSIONS_KEPT = 500
# the similarity from which a segment joins an effort (idf-weighted cosine with one of its
# segments): on the labelled conversations, segments an effort joins share a topic 0.28 ->
# 0.41 of the time (held out; development set 0.21 -> 0.25) and 0.53 -> 0.50 of a
# topic's pairs are joined (0.50 -> 0.52), where raw counts at 0.3 joined nearly everything
EFFORT_MATCH = 0.25
EFFORT_SEGMENTS = 8  # an effort's latest segments a new one is compared with
COMMON_BUCKET = 64  # index buckets larger than this belong to terms too common to match on
FAILURES_KEPT = 100
CRITICAL_COMPARED = 200  # live rules a new one is compared with, for a change
CRITICAL_REPLACED_KEPT = 20
DENIED_BACK = 100  # turns back an assistant's "not 50" may find the user's 50
SAID_KEPT = 300  # user sentences with a preference or a figure, kept to be named again
BUMPS_KEPT = 512  # indices of the latest segment rev bumps kept in the state

State = dict[str, Any]

SHIFT = patterns.compile(
    r"^(?:(?:ok(?:ay)?|alright|so|right|anyway)[,.!]?\s+)?"
    r"(?:switching gears|changing (?:the )?(?:topic|subject)|"
    r"(?:on\s+)?(?:a\s+)?(?:different|another|unrelated|separate|new)\s+(?:note|topic|thing|question|subject|matter)|"
    r"another thing|new topic|moving on|let'?s move on|unrelated(?: question)?[:,]|"
    r"(?:going\s+|coming\s+|getting\s+)?back to\s+(?:the\s+|our\s+|my\s+)?(?P<resume>[^.,;:!?\n]{2,60}))"
)
# how people open a new topic in a chat with an assistant: "ok now X", "next on my
# list:", "one more thing:", "q: ...", "other q while I have you", "after lunch: X",
# "the scary part.", "meanwhile, ..."
# a topic named alone: "the race.", "Lena's list:"
_TOPIC = r"(?:the|[a-z]+'s) [a-z][\w-]*(?: [a-z][\w-]*)?\s*[.:!](?:\s|$)"
ASIDE_WORDS = 5  # a short sentence before the words that take a topic up again
LABEL_TERMS = 7  # terms a turn opened by a label ("logs. ...") needs to open a topic
NAMED_TERMS = 3  # ... and one opened by a label named after "ok" ("ok. dbt. ...")
_NAMED = r"(?:the |our |my |that )?[a-z][\w'-]*(?: [a-z][\w'-]*)?\s*[.:!](?:\s|$)"
# a topic taken up again by name, also after a short aside: "Sent. OK back to the choice."
RESUMED = patterns.compile(
    r"(?:(?:ok(?:ay)?|so|right|anyway|now)\b[\s,.!]*){0,2}(?:back to " + _NAMED + "|"
    # or a topic taken up by name: "Sent! He's usually quick. Let's do the budget."
    r"let'?s (?:do|look at|move on to|turn to|tackle|get to|switch to)\b(?! (?:it|that|this|so)\b))"
)
_ASIDE = patterns.compile(r"[^.!?]*[.!?]+\s+")  # a sentence of the aside
# the words that change the subject, said after an aside however long: "fine, I'll email
# their events team tomorrow. different thing. timing.", "right. on a different note, ...",
# "while that bakes, different fire 🔥"
SWITCH = patterns.compile(
    r"(?:[.!?]\s+|^while [^.,:]{2,30}[,:]\s*)(?:(?:ok(?:ay)?|so|right|and|oh|also|ugh)[,.]? )*"
    r"(?:(?:a |one )?(?:totally |completely )?(?:different|separate|unrelated|new|another|"
    r"other) (?:thing|topic|subject|question|one|fire|matter|problem|issue|job)|unrelated|"
    r"on (?:an?other|a different) note|changing the subject|change of (?:topic|subject))"
    r"\s*[^\w\s']"  # and a mark: "different fire 🔥", not "other one's £70"
)
OPENER = patterns.compile(
    r"^(?:(?:ok(?:ay)?|so|right|alright|hm+|anyway|oh|ah|and|also|good|great|nice|cool|back|"
    r"(?:good )?(?:morning|afternoon|evening)|hi|hey|wait|sorry|thanks|thx|btw|by the way|"
    r"totally|completely)\b[\s,.!:;-]*){0,3}"
    r"(?:now\b(?! (?:it|that|this|they|we're|i'm|the (?:\w+ )?(?:is|are|works|fails))\b)|"
    r"next\b|"
    # said alone: "btw unrelated, did the corpus end up in the repo?", "on another note"
    r"unrelated\s*[,:.-]|(?:on )?(?:an?other|a different|a separate) (?:note|subject)\b|"
    r"changing the subject\b|"
    r"(?:next|last|final|another|one more|other|different|separate|new|quick|small|big|"
    r"unrelated|random|second|third|fourth)\s+(?:thing|one|topic|question|q|item|step|issue|"
    r"problem|task|part|bit|news|"
    r"big one|request|worry|thought|fire|matter|job)\b|"
    r"(?:q|question|topic|re|update|plan|todo|idea|fyi|agenda)\b(?: from [\w ]{1,20}| for [\w ]{1,20})?\s*:|"
    r"(?:an? |quick |small |big |another )?update\s*[.!](?:\s|$)|"
    # what is on the user's mind, named: "The thing that worries me with Brightwater."
    r"(?:the )?(?:one |other |main |big |only )?(?:thing|part|bit) (?:that )?(?:actually |really )?"
    r"(?:worries|bugs|bothers|scares|annoys|confuses|puzzles) me\b|"
    r"what (?:actually |really )?(?:worries|bugs|bothers|scares) me\b|"
    # ... or has been on it: "one thing's been bugging me since last night", "the thing
    # that's been nagging me", "something's been bothering me"
    r"(?:(?:the|a|one|other|main|big|only|[a-z]+) )?(?:thing|part|bit)(?:'s| (?:that'?s|that has|has)) "
    r"been (?:bugging|bothering|nagging|worrying|niggling)(?: at)? me\b|"
    r"something'?s been (?:bugging|bothering|nagging|worrying|niggling)(?: at)? me\b|"
    # a topic taken up again, named: "back to the actual choice"
    r"back to " + _NAMED + "|"
    r"(?:and )?then the [a-z][\w'-]*(?: [a-z][\w'-]*)?\s*[.:!](?:\s|$)|"
    r"while (?:i have you|that runs|we wait|it runs|we'?re at it)|meanwhile|in the meantime|"
    r"before i forget|after (?:lunch|the break|standup|the meeting)|back from \w+|"
    r"(?:now )?the (?:scary|hard|fun|last|next|other|tricky|boring) (?:part|bit|one|thing)|"
    r"(?:now )?the [a-z]+(?: [a-z]+)? (?:i'?ve|we'?ve) been (?:dreading|avoiding|putting off)\b|"
    r"let'?s (?:do|look at|move (?:on )?to|talk about|turn to|tackle|get to|switch to)\b|"
    r"(?:i )?(?:also )?(?:need|want) (?:you )?to (?:ask|look at|talk about)\b|"
    r"(?:about|as for|regarding)\s+(?:the\s+|our\s+|my\s+)?[a-z][\w'-]*(?:\s+[a-z][\w'-]*){0,2}\s*:|"
    # a topic named after "about", said alone: "About the agent.", "yeah, about that.",
    # "about the retention though." (not "about right.", "about 40.")
    r"(?:(?:yeah|yes|but)\b[\s,.!]*)?about (?:the |that |our |my |this |his |her |their )?"
    r"(?!(?:right|time|it|done|ready|there|now|same|half|as|to|an?)\b)[a-z][\w'-]*"
    r"(?: [a-z][\w'-]*){0,2}(?: though| then| actually)?\s*[.:!](?:\s|$)|"
    # the next of several, news, a question next to the last: "OK problem two, ...", "Now
    # the bad news: ...", "Related question.", "ok, moment of truth."
    r"(?:problem|part|question|issue|item|point|thing|step|topic) (?:two|three|four|five|[2-5])\b|"
    r"(?:now )?(?:the )?(?:bad|good|other|big) news\b|(?:a )?related (?:question|thing|q|one)\b|"
    r"(?:the )?moment of truth\b|"
    # what was at hand put aside, or something else put first: "park that for a sec. ...",
    # "wait, stop, something else first."
    r"(?:park|pause|shelve) (?:that|this|it)(?: for (?:a (?:sec|second|moment|minute|bit)|now))?"
    r"\s*[.,:!]|(?:stop,? )?something else(?: first| quick(?:ly)?| came up)?\s*[.,:!]|"
    r"speaking of\b|that reminds me\b|on the (?:subject|topic) of\b|"
    r"before (?:you|we) (?:go on|dive in|carry on)\b|hold that(?: thought\b|\s*[,.:!])|"
    r"side (?:question|note|quest|thought)\b|"
    # one more of something, named: "one more on the alerts: ..."
    r"(?:one more|another one|another) (?:on|about) (?:the |our |my )?[a-z][\w'-]*"
    r"(?: [a-z][\w'-]*){0,2}\s*:|"
    # what comes first, named: "Before the journals: ..."
    r"before (?:the|those|these|that|our|my) [a-z][\w'-]*(?: [a-z][\w'-]*){0,2}\s*:|"
    # what to do meanwhile, after a lead: "While she reads it: let's finish the branch"
    r"while [a-z][\w' ]{2,30}[:,]\s*(?:let'?s (?:finish|do|look at|get|go|pick up|start)\b|"
    # ... or names what to do meanwhile: "while she reads that: yesterday's migration."
     + _TOPIC + r")|"
    r"while (?:i'?m|we'?re) (?:at it|on (?:it|the subject|that)|in (?:a |the )?[\w-]+ mood)\b|"
    # a topic next to the one at hand: "and while we're on money, the other thing: ..."
    r"while (?:i'?m|we'?re) on (?:the (?:subject|topic) of )?[a-z][\w'-]*(?: [a-z][\w'-]*)?[.,:]|"
    r"oh,? and\b|(?:[a-z][\w-]*(?: [a-z][\w-]*)?),? again\b|while i think of it\b|"
    r"speak of the devil\b|"
    # a topic taken up by its name alone: "ok, the race.", "Right, the split.", "ok, Lena's list."
    r"(?<=[,.] )" + _TOPIC + r"|"
    # a topic named, then the words that open one: "Money, while we're on it."
    r"[a-z][\w'-]*(?: [a-z][\w'-]*)?,? (?:while (?:i'?m|we'?re) (?:at it|on (?:it|the subject|"
    r"that))|while i think of it|before i forget)\b|"
    # a topic named, then put next: "Kyoto hotels next.", "the budget explanation next:"
    r"(?:the |our |my )?(?!(?:it|this|that|them|those|these|you|we|i|do|done)\b)"
    r"[a-z][\w'-]*(?:(?: [a-z0-9][\w'-]*){0,3} next| [a-z][\w'-]* first|\w* first)\s*[.!:]|"
    # news on a topic, named: "Letter news.", "Word count update: ..."
    r"[a-z][\w'-]*(?: [a-z][\w'-]*)? (?:news|update)\s*[.!:])"
)
# a user turn that ends by announcing another topic: "...meanwhile something else came
# up", "one more thing:"; the next user turn raises it
ANNOUNCED = patterns.compile(
    r"\b(?:something else (?:came up|to (?:ask|discuss|look at))|"
    r"(?:one|another|other) (?:more )?(?:thing|topic|question|issue)|"
    r"(?:a )?(?:different|unrelated|separate|new) (?:thing|topic|question|issue|subject))\W*$"
)
# an assistant moving on once the user concluded: "The remaining item is backups."
ASSISTANT_SHIFT = patterns.compile(
    r"(?:^|[.!]\s+)(?:ok(?:ay)?[,.]?\s+|good[,.]?\s+|great[,.]?\s+)?(?:(?:the )?(?:next|remaining|"
    r"last|other|final) (?:item|step|thing|topic|question|task|one|part)s? (?:is|are)\b|next up\b|"
    r"now (?:for|on to)\b|moving on to\b|on to the\b)"
)
# a topic called for after a lead-in: "On that: three agents came round, so let's talk
# house:", "Thanks. Right, let's do the seating plan."
LETS_TALK = patterns.compile(
    r"(?:[.!?:;,\u2014]\s+|\s-\s|\bso\s+)let'?s (?:talk|do|look at|turn to|move on to|get to) "
    r"(?:about )?(?:the )?[\w' -]{2,30}(?:[:.!]|$)"
)
AGAIN = patterns.compile(r"\b(?:again|back)\b")
# a reply to what the assistant just asked
REPLY = patterns.compile(r"^(?:yes|yep|yeah|no|nope|nah|right|correct|exactly|sure)\b")
# a reply that takes part of the answer and asks about more: "closed mondays is fine but
# what about the holiday list?", "ok but what about the cron?"
FOLLOW_UP = patterns.compile(
    r"^(?:[\w' -]{0,40}\b(?:is|are|looks?|sounds?|seems?) )?(?:fine|good|ok(?:ay)?|great|right|"
    r"clear)\b,? but (?:what about|how about|what if|does|do|is|are|can|will|then)\b"
)
# a topic named on its own as the opening words: "logs. sven set up...", "CI: we have..."
LABEL = patterns.compile(
    r"^(?:(?P<lead>(?:ok(?:ay)?|right|now|so|anyway)[,.]?\s+)(?:the )?)?([a-z][\w#/+-]+)(?P<mark>[.:])\s"
)
# a turn that opens by acting on what was just said ("do it.", "ok keep it. but ...",
# "leave it, not today", "ok that one's out"): the topic at hand goes on (not "while
# that runs", which opens one)
ACTS_ON_IT = patterns.compile(
    r"(?<!while )\b(?:do|push|merge|leave|keep|park|add|ship|check|run|fix|write|drop|close|"
    r"move|revert|try|test|hammer|tell|send|bin|scrap|put|make|commit|deploy|apply|open|post|"
    r"print|change|delete|remove|update|pr) (?:it|that|this|them|those)\b|"
    r"^(?:\W*\w+\W+)?that one'?s\b"
)
ACTS_WORDS = 6  # ... in its first words
# "oh and ...": an aside, which opens a topic unless it lays down a rule ("oh and a rule for
# myself: ...", "oh and before I forget: no single-sex schools"), one for the work at hand
OH_AND = patterns.compile(r"^(?:\W*(?:ok(?:ay)?|so|right|also)\W+)*oh,? and\b")
# back from a break: with the pause, a likelier new topic
BACK = patterns.compile(r"^back\b(?! (?:to|on|in)\b)")
# a word that opens a turn alone as a reply, an approval or a word on what was just said
# ("lovely. ...", "go. ...", "meh. ..."): no topic named
NOT_LABEL = frozenset(
    """
    ok okay yes yeah yep no nope nah nice great good cool hm hmm ugh wow sure right thanks
    thx back morning sent done fine perfect lol huh wait pasted better figures so well
    alright oh ah damn hi hey sorry agreed exactly true correct interesting weird green
    fixed merged told found confirmed noted indeed nope pessimist decision decided verdict
    conclusion final bed bedtime night
    go commit meh lovely brilliant amazing marvellous awesome excellent works ouch ohh ohhh
    gotcha understood yay phew sweet grand cheers fair ta superb wonderful fantastic splendid
    """.split()  # noqa: SIM905 - a word list reads better as text
)
PENDING = skipping(
    r"\b(?:still need(?:s)? to|remaining|left to do|to ?do:|not yet|open question|"
    r"except (?:for )?(?:a|an|the|one)\b|unresolved|haven'?t decided|not sure yet|"
    # the other side doubting that it is over: "I wouldn't call it dead on one run"
    r"i wouldn'?t (?:call it|say it'?s|say that'?s)|too (?:early|soon) to (?:call|say|tell)|"
    r"before (?:calling|declaring|we call|you call) (?:it|them|that|th\w+ \w+) (?:done|fixed)|"
    # ... or asking to wait for the proof: "I'd hold off until tomorrow's numbers"
    r"i'?d (?:hold off|wait (?:for|until|till|on))|not so fast)"
)
# words one of `PENDING`'s phrases cannot match without, looked for as plain text first
# (most turns hold none: no pattern is run)
_PENDING_WORDS = (
    "still need", "remaining", "left to do", "todo:", "to do:", "not yet", "open question",
    "except ", "unresolved", "haven", "not sure yet", "i wouldn", "too early", "too soon",
    "before ", "hold off", "d wait ", "not so fast",
)  # fmt: skip


def _pending(lower: str) -> bool:
    """Whether lower case text says something is still to do or not yet settled."""
    return any(word in lower for word in _PENDING_WORDS) and PENDING.search(lower) is not None


BLOCKER = skipping(
    r"\b(?:still (?:fail\w*|broken|see\w*|get\w*|duplicat\w*|happen\w*|dies|crash\w*)|"
    r"didn'?t (?:fix|work|help)|doesn'?t work|not working|(?:is|are) broken|blocked (?:by|on)|"
    r"can'?t (?:get|make|find)|error:|traceback|exception|stuck|hangs|hung|froze|"
    r"(?:nan|fail\w*|crash\w*|restart\w*|dies|died|dying|broke|broken|errors?|timeouts?|"
    r"timing out|panic\w*|leak\w*) again|(?:came|is|it'?s) back again|oh no|"
    # a fix or a plan that did not hold: "so NOT fixed", "WORSE than before", "back to
    # square one"
    r"(?:so|still|is|it'?s) not (?:fixed|solved|sorted|gone)|worse than (?:before|yesterday)|"
    r"back to square one)\b"
)


@dataclass(frozen=True)
class Params:
    """The config values the fold depends on (part of the cache key)."""

    time_gap_seconds: float = 7200.0
    min_turns: int = 4
    max_turns: int = 60
    summary_tokens: int = 80

    @classmethod
    def from_config(cls, config: Config) -> Params:
        return cls(
            time_gap_seconds=float(config.get("segments", "time_gap_minutes")) * 60.0,
            min_turns=int(config.get("segments", "min_turns")),
            max_turns=int(config.get("segments", "max_turns")),
            summary_tokens=int(config.get("segments", "summary_tokens")),
        )

    def key(self) -> str:
        return (
            f"v{STATE_VERSION}:{self.time_gap_seconds}:{self.min_turns}:"
            f"{self.max_turns}:{self.summary_tokens}:{tokenizer.method_in_use()}"
        )


def new_state(session: str) -> State:
    return {
        "version": STATE_VERSION,
        "session": session,
        "turns": 0,
        "last_turn": 0,
        "tokens": 0,
        "last_ts": None,
        "df": {},
        "docs": 0,
        "segments": [],
        "current": None,
        "recent": [],
        "opening": None,
        "failures": [],
        "critical": [],
        "critical_keys": {},
        "critical_subjects": {},  # the content words of each rule said (see `_add_critical`)
        "critical_replaced": [],  # [turn, replaced at turn, text] of the latest changes
        # [turn, sentence, the sentence before it or ""] of the latest preferences and
        # figures said that are no rule (`SAID_KEPT`): a change or a correction that names
        # one replaces it (`_add_critical`), a reading of the evidence that denies its
        # figure too (`_denied`)
        "said": [],
        "decisions": [],
        "conclusions": [],
        "efforts": [],
        "effort_index": {},
        "segment_index": {},
        "critical_rev": 0,  # bumped when a critical item is superseded
        "bumps": 0,  # segment rev bumps so far
        "bumped": [],  # the closed segments (indices) of the latest `BUMPS_KEPT` bumps
    }


# ---------------------------------------------------------------------------
# helpers


def _seconds(ts: str | None) -> float | None:
    if not ts:
        return None
    try:
        return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _turn_terms(role: str, text: str) -> list[str]:
    """A turn's terms: a tool result's first lines, a person's or a model's words
    without the code and tool payloads they carry."""
    return terms(text[:TOOL_TERM_CHARS] if role == "tool" else prose(text))


def _vector(open_turns: list[list[Any]], only: slice | None = None) -> Counter[str]:
    """Term counts of the user and assistant turns among `open_turns` (each entry
    keeps its terms: no text is re-read): a topic is in words of the conversation,
    not of the tool output it carries."""
    counts: Counter[str] = Counter()
    for entry in open_turns[only] if only else open_turns:
        if entry[1] != "tool":
            counts.update(entry[9])
    return counts


def _idf(state: State, term: str) -> float:
    return math.log((1 + state["docs"]) / (1 + state["df"].get(term, 0))) + 1.0


def _weighted(state: State, counts: Mapping[str, int]) -> dict[str, float]:
    """`counts` weighed by each term's `_idf` (its formula, inline: a hot path)."""
    df, log, top = state["df"].get, math.log, 1 + state["docs"]
    return {t: c * (log(top / (1 + df(t, 0))) + 1.0) for t, c in counts.items()}


def _idf_sum(state: State, found: Iterable[str]) -> float:
    """The idf weights of a set of terms added up: exactly (`math.fsum`), so that the
    total does not depend on the order the set is read in, which changes with the hash
    seed: a plain sum may differ in its last bit and flip a tie between two sentences."""
    return math.fsum([_idf(state, t) for t in found])


def _tfidf_top(state: State, counts: Counter[str], limit: int) -> list[str]:
    return top_terms(_weighted(state, counts), limit)


CENTRAL_TURNS = 4
CONTEXT_TURNS = 6  # turns before a conclusion that its statement may draw on
ECHO_SEGMENTS = 20  # concluded segments a new conclusion is compared with, to tell an echo
COMMON_SHARE = 0.1  # a term in more of the turns than this is the conversation's, not a topic's
COMMON_FLOOR = 8  # ...and in more turns than this: in a short talk every word is its topic's
RETRACT_SEGMENTS = 3  # closed segments a failure report may take a fix back from
RETRACT_TURNS = 6  # a failure this soon after a fix takes it back whatever it names
SHIFT_CHARS = 400  # where an assistant's answer says it moves on
LONG_GAP = 3  # times the time gap: a pause this long always starts a segment
TOPIC_SCORE = 2.0  # how strongly a user turn must open a topic to start a segment
NOVELTY_TURNS = 10  # the latest turns of a segment whose words a new turn is compared with
PAIR_COHESION = 0.1


def central_turns(state: State, open_turns: list[list[Any]], top: list[str]) -> list[list[Any]]:
    """The few user/assistant turns that carry the segment's topic, in turn order.

    Summaries and keywords read only these, so closing a long segment costs the
    same as closing a short one.
    """
    wanted = set(top)
    scored = []
    for position, entry in enumerate(open_turns):
        if entry[1] not in ("user", "assistant") or entry[7]:
            continue
        found = set(entry[9])
        if not found:
            continue
        score = _idf_sum(state, found & wanted) / math.sqrt(len(found))
        if entry[1] == "user":
            score *= 1.2
        if position == 0:
            score *= 1.3
        scored.append((score, entry[0], entry))
    best = sorted(scored, key=lambda item: (-item[0], item[1]))[:CENTRAL_TURNS]
    return [item[2] for item in sorted(best, key=lambda item: item[1])]


def _surface(central: list[list[Any]], stems: list[str], open_turns: list[list[Any]]) -> list[str]:
    """Readable words for stems: the most frequent lowercase word behind each, in the
    first `SURFACE_CHARS` of what the `central` turns said; a stem none of those hold is
    looked for in the rest of what all the `open_turns` said, and then in their tools'
    outputs (as far as their terms were read): a topic is named by a word, never by a
    stem ("execut")."""
    seen: dict[str, Counter[str]] = {s: Counter() for s in stems}

    def read(texts: Iterable[str]) -> None:
        wanted = {s for s in stems if not seen[s]}
        for text in texts:
            for word in words(text.lower()):
                term = term_of(word)
                if term in wanted:
                    seen[term][word.strip("'-")] += 1

    read(str(e[2])[:SURFACE_CHARS] for e in central if e[1] != "tool")
    if not all(seen.values()):
        read(prose(str(e[2])) for e in open_turns if e[1] != "tool")
    if not all(seen.values()):
        read(str(e[2])[:TOOL_TERM_CHARS] for e in open_turns if e[1] == "tool")
    return [top_terms(dict(seen[s]), 1)[0] if seen[s] else s for s in stems]


# ---------------------------------------------------------------------------
# segments


def _new_segment(state: State, cue: str, resume: str | None = None) -> dict[str, Any]:
    number = len(state["segments"]) + 1
    segment: dict[str, Any] = {"id": f"seg_{number}", "cue": cue, "open": []}
    if resume:
        segment["resume"] = resume
    return segment


def segment_conclusion(open_turns: list[list[Any]]) -> dict[str, Any] | None:
    """The segment's conclusion: its latest one, unless an earlier one is much stronger;
    a decision stays it when the work it decided is reported done after it ("decided:
    the DLQ topic" then "merged"): the decision is where the topic was settled, unless
    the report names what it finishes ("Journals then" ... "that's the rec done"): a
    decision on the way, the topic done."""
    chosen: dict[str, Any] | None = None
    for entry in open_turns:
        found = entry[5]
        if found is None:
            continue
        if chosen is not None and found["kind"] == "task" and chosen["kind"] in conclusions.DECIDED:
            said = str(found.get("said") or found["text"])
            if not conclusions.NAMED_DONE.search(said.lower()):
                continue
            if conclusions.specifics(said) < conclusions.RICH:  # "That section's done."
                found = {**found, "text": conclusions.clip(f"{said} \u2014 {chosen['text']}")}
        if chosen is None or found["confidence"] >= chosen["confidence"] - 0.1:
            chosen = found
    return chosen


def segment_status(open_turns: list[list[Any]], conclusion: dict[str, Any] | None) -> str:
    """Concluded, unless a problem or an open item is raised at or after the conclusion,
    or the conclusion is the assistant's and the user went on with the topic after it
    (a claim the user did not take as the end of it), or it is the assistant's report
    that a fix works, which the user has not confirmed (`conclusions.reported`).
    Superseded when a later conclusion replaced it."""
    if conclusion is None:
        return "open"
    if conclusion.get("superseded_by"):
        return "superseded"
    turn = conclusion["turn"]
    after = [e for e in open_turns if e[0] >= turn]
    # what is left to do after a user's decision, as the assistant lists it ("To do: the
    # registration fee"), carries the decision out; it does not unsettle it (`_work_left`)
    decided = conclusion["kind"] in conclusions.DECIDED and "user turn" in conclusion["reason"]
    if (
        any(e[6] for e in after if e[0] > turn)
        or any(e[8] and e[1] != "assistant" for e in after)
        or (not decided and _work_left(open_turns, turn))
    ):
        return "open"
    said_by = next((e[1] for e in after if e[0] == turn), "user")
    if said_by == "assistant" and (
        conclusions.reported(conclusion) or any(e[1] == "user" and not e[7] for e in after[1:])
    ):
        return "open"
    return "concluded"


def _work_left(open_turns: list[list[Any]], turn: int) -> bool:
    """Whether the assistant lists work left at or after `turn` ("Every item is done
    except a one-off restore test"): after a user's decision, the decision stands and
    its effort stays open for what is left; after anything else, the segment is open."""
    return any(e[8] and e[1] == "assistant" for e in open_turns if e[0] >= turn)


def summarize(
    state: State,
    open_turns: list[list[Any]],
    conclusion: dict[str, Any] | None,
    limit: int,
    top: list[str],
) -> str:
    """Extractive summary: the most central sentences of the most central turns, then
    the conclusion."""
    wanted = set(top)
    candidates: list[tuple[float, int, int, str]] = []
    first_turn = open_turns[0][0] if open_turns else 0
    for entry in central_turns(state, open_turns, top):
        for index, sentence in enumerate(sentences(prose(entry[2][:6000]))):
            if len(sentence) > 400 or sentence.startswith(("[tool_use]", "```")):
                continue
            found = set(terms(sentence))
            if len(found) < 3:
                continue
            score = _idf_sum(state, found & wanted) / math.sqrt(len(found))
            if entry[1] == "user":
                score *= 1.2
            if entry[0] == first_turn and index == 0:
                score *= 1.3
            candidates.append((score, entry[0], index, sentence))
    best = sorted(candidates, key=lambda c: (-c[0], c[1], c[2]))[:2]
    chosen = [c[3] for c in sorted(best, key=lambda c: (c[1], c[2]))]
    if conclusion is not None and conclusion["text"] not in chosen:
        chosen.append("\u2192 " + conclusion["text"])
    if not chosen:
        first = next((e[2] for e in open_turns if e[1] in ("user", "assistant")), "")
        chosen = [" ".join(first.split())[:200]] if first.strip() else []
    summary = ""
    for sentence in chosen:
        text = " ".join(sentence.split())
        candidate = f"{summary} {text}".strip()
        if tokenizer.count_tokens(candidate) <= limit:
            summary = candidate
            continue
        if not summary:  # one long sentence: cut it to the budget by words
            kept: list[str] = []
            for word in text.split():
                if tokenizer.count_tokens(" ".join([*kept, word, "\u2026"])) > limit:
                    break
                kept.append(word)
            summary = " ".join(kept) + "\u2026"
        break
    return summary


def _segment_index(segment_id: str) -> int:
    """Where the closed segment `segment_id` ("seg_3") is in `State["segments"]`."""
    return int(segment_id[4:]) - 1


def _index_add(index: dict[str, list[int]], keys: list[str], value: int) -> None:
    for key in keys:
        bucket = index.setdefault(key, [])
        if value not in bucket:
            bucket.append(value)


def match_effort(
    state: State, counts: Counter[str], resume: str | None
) -> tuple[int | None, float]:
    """The existing effort a segment belongs to (index, similarity), or (None, best):
    the one with a segment most like it (of its latest `EFFORT_SEGMENTS`). Terms weigh by
    how rare they are in the session (idf): the words every topic of a conversation uses
    ("budget", "week") would otherwise join its efforts into a few that hold everything,
    and so would an effort's terms merged over all its segments."""
    vector = _weighted(state, counts)
    probe = set(terms(resume)) if resume else set()
    candidates: set[int] = set()
    for term in vector:
        bucket = state["effort_index"].get(term)
        if bucket and len(bucket) <= COMMON_BUCKET:
            candidates.update(bucket)
    for term in probe:
        candidates.update(state["effort_index"].get(term, ()))
    best, best_score = None, 0.0
    for index in sorted(candidates):
        effort = state["efforts"][index]
        score = max(
            cosine(vector, _weighted(state, state["segments"][_segment_index(sid)]["terms"]))
            for sid in effort["segments"][-EFFORT_SEGMENTS:]
        )
        if probe:
            score = max(score, cosine({t: 1.0 for t in probe}, effort["terms"]) * 1.5)
        if score > best_score:
            best, best_score = index, score
    threshold = 0.15 if resume else EFFORT_MATCH
    return (
        (best, best_score) if best is not None and best_score >= threshold else (None, best_score)
    )


def segment_record(
    state: State, segment: dict[str, Any], summary_tokens: int
) -> tuple[dict[str, Any], Counter[str]]:
    """A segment as the manifest shows it, and its term counts: the same whether the
    segment has just closed or is still open (then it is shown provisionally)."""
    open_turns = segment["open"]
    counts = _vector(open_turns)
    top = _tfidf_top(state, counts, SEGMENT_TERMS)
    conclusion = segment_conclusion(open_turns)
    record: dict[str, Any] = {
        "id": segment["id"],
        "first": open_turns[0][0],
        "last": open_turns[-1][0],
        "start_ts": open_turns[0][3],
        "end_ts": open_turns[-1][3],
        "tokens": sum(e[4] for e in open_turns),
        "cue": segment["cue"],
        "terms": {t: counts[t] for t in top},
        "topic": _surface(central_turns(state, open_turns, top[:12]), top[:5], open_turns),
        "summary": summarize(state, open_turns, conclusion, summary_tokens, top[:12]),
        "conclusion": conclusion,
        "status": segment_status(open_turns, conclusion),
        "referenced": 0,
    }
    if (
        conclusion
        and record["status"] == "concluded"
        and _work_left(open_turns, conclusion["turn"])
    ):
        record["left"] = True  # its effort stays open (`render`) until that is done
    return record, counts


def _close(state: State, params: Params) -> None:
    segment = state["current"]
    state["current"] = None
    if segment is None or not segment["open"]:
        return
    closed, counts = segment_record(state, segment, params.summary_tokens)
    top = list(closed["terms"])
    index = len(state["segments"])
    effort_index, _ = match_effort(state, counts, segment.get("resume"))
    if effort_index is None:
        effort_index = len(state["efforts"])
        state["efforts"].append(
            {
                "id": f"effort_{effort_index + 1}",
                "terms": {},
                "segments": [],
                "first": closed["first"],
                "last": closed["last"],
            }
        )
    effort = state["efforts"][effort_index]
    merged = Counter(effort["terms"])
    merged.update({t: counts[t] for t in top})
    effort["terms"] = {t: merged[t] for t in top_terms(dict(merged), EFFORT_TERMS)}
    effort["segments"].append(closed["id"])
    effort["last"] = closed["last"]
    closed["effort"] = effort["id"]
    _index_add(state["effort_index"], top_terms(effort["terms"], INDEX_TERMS), effort_index)
    _index_add(state["segment_index"], top[:INDEX_TERMS], index)
    state["segments"].append(closed)


def _conclude_effort(state: State, found: dict[str, Any]) -> None:
    """A user's conclusion in the open segment is where its effort now stands when it
    decides again or concludes on the same subject: the latest earlier conclusion of
    the effort that still stood is superseded by it (a decision revised, a premature
    fix followed by the real one, a plan carried out); so is a fix or a task done by one
    said to hold this time ("that's properly fixed now")."""
    index = _effort_standing(state)
    if index is None:
        return
    earlier = state["segments"][index]["conclusion"]
    reverses = found["kind"] in conclusions.DECIDED and earlier["kind"] in conclusions.DECIDED
    common = _common(state)
    # "instead" reverses an earlier decision only one it says something about: two
    # decisions of one trip share the trip's words, not a subject
    about = conclusions.what(_said(found), common) & conclusions.what(_said(earlier), common)
    # "that's properly fixed now", "done, for real this time": the one before was early
    real = found["kind"] in conclusions.DONE and earlier["kind"] in conclusions.DONE
    if (
        (reverses and about and conclusions.REVERSAL.search(_said(found).lower()))
        or conclusions.same_subject(_said(found), _said(earlier), common)
        or (real and conclusions.HOLDS_NOW.search(_said(found).lower()))
    ):
        _supersede(state, index, found["turn"])


def _effort_standing(state: State) -> int | None:
    """The latest concluded segment (its index) of the effort the open segment belongs
    to: where that effort stood before it; None when it has none."""
    current = state["current"]
    effort_index, _ = match_effort(state, _vector(current["open"]), current.get("resume"))
    if effort_index is None:
        return None
    segments = state["segments"]
    for sid in reversed(state["efforts"][effort_index]["segments"]):
        index = _segment_index(sid)
        if segments[index]["status"] == "concluded":
            return index
    return None


def _common(state: State) -> Callable[[str], bool]:
    """Whether a term is one the whole conversation uses (in more than a tenth of its
    turns): the product a PRD is about says nothing about which of its parts."""
    df, limit = state["df"], _common_limit(state)
    return lambda term: df.get(term, 0) > limit


def _common_limit(state: State) -> float:
    return max(float(COMMON_FLOOR), COMMON_SHARE * int(state["docs"]))


def _said(found: dict[str, Any]) -> str:
    return str(found.get("said") or found["text"])


# a claim taken back by its own words: "so much for signed and sealed", "so much for fixed"
SO_MUCH_FOR = patterns.compile(
    r"\bso much for ['\"\u2018\u201c]?([a-z][\w' -]{1,40}?)['\"\u2019\u201d]?\s*(?:[.,;:!?)]|$)"
)
# ...or by what it was said of: "you said ordering was fixed", "I thought the leak was
# gone" (not "you said the wifi was fixed, and it was")
SAID_TO_HOLD = patterns.compile(
    r"\b(?:you said|i thought)\s+(?:that\s+)?([a-z][\w' -]{1,40}?)"
    r"(?:['\u2019]s| (?:was|is|were|had been))\s+(?:fixed|sorted|solved|done|gone|working)\b"
    r"(?![,;]?\s*and (?:it|they|that|so it)(?:['\u2019]s| (?:was|were|is|are|did|has|have))\b)"
)
CLAIM_QUOTED = (conclusions.TAKEN_BACK, "you said", "i thought")  # what may open either
RETRACT_BACK = 20  # closed segments a claim taken back by its words may reach


# a failure supposed, not reported: "stop if anything hangs", "in case it's stuck again"
SUPPOSED = patterns.compile(
    r"\b(?:if|in case|unless|whenever|should)\b[^,;:]*$|"
    # what is not wanted, what a change is for: "I don't want this blocked on him", "so
    # they can kick stuck ones"
    r"\b(?:don'?t|do not) want\b[^,;:]*$|\bso (?:that )?(?:they|we|you|i|he|she) can\b[^,;:]*$"
)


def _failure_said(lower: str) -> bool:
    """Whether a user's turn reports something failing: a sentence says so, not a question
    asks about it ("and the stuck orders? anything new?" asks; "orders are stuck again"
    reports) nor a condition supposes it ("go through the rest, stop if anything hangs")."""
    if not BLOCKER.search(lower):
        return False
    for sentence in sentences(lower):
        if sentence.rstrip().endswith("?"):
            continue
        for match in BLOCKER.finditer(sentence):
            if not SUPPOSED.search(sentence, 0, match.start()):
                return True
    return False


def _taken_back(state: State, turn: int, lower: str) -> None:
    """A user quoting a conclusion to say it did not hold ("so much for signed and
    sealed", "so much for 'should stop the crash'") reopens the latest segment, however
    far back, whose conclusion said those words; one naming what a conclusion was said
    of ("you said ordering was fixed"), the latest whose conclusion names it (`lower`:
    the turn, lowercased)."""
    match = SO_MUCH_FOR.search(lower)
    words = named = None
    if match is not None:
        words = " ".join(match.group(1).split())
    elif (match := SAID_TO_HOLD.search(lower)) is not None:
        named = set(terms(match.group(1)))  # none in "you said it was fixed"
    if not (words or named):
        return
    segments = state["segments"]
    for index in range(len(segments) - 1, max(-1, len(segments) - 1 - RETRACT_BACK), -1):
        segment = segments[index]
        found = segment["conclusion"]
        if segment["status"] != "concluded" or found is None:
            continue
        said = _said(found).lower()
        if (words and words in " ".join(said.split())) or (named and named <= set(terms(said))):
            _reopen(state, index, turn)
            return


def _retract(state: State, turn: int, turn_terms: list[str], opened: bool = False) -> None:
    """A user reporting that something fails again takes back the latest fix or task
    a recent closed segment concluded on it (a premature "FIXED"): that segment is open
    again. The open segment sees it itself (`segment_status`). A failure soon after the
    fix takes it back whatever it names, unless the turn `opened` a topic of its own
    ("next fire. every webhook fails"): then only one on the fix's subject does."""
    mine = set(turn_terms)
    segments = state["segments"]
    current = state["current"]
    if current and any(e[5] and e[5]["kind"] in conclusions.DONE for e in current["open"]):
        return  # the fix the failure takes back is the one at hand (`segment_status`)
    for index in range(len(segments) - 1, max(-1, len(segments) - 1 - RETRACT_SEGMENTS), -1):
        segment = segments[index]
        found = segment["conclusion"]
        if segment["status"] != "concluded" or found["kind"] not in conclusions.DONE:
            continue
        near = not opened and turn - found["turn"] <= RETRACT_TURNS
        if near or len(mine & set(terms(_said(found)))) >= 2:
            _reopen(state, index, turn)
        return


def _retract_resumed(state: State, turn: int) -> None:
    """A user reporting a failure in a segment that takes up an earlier effort again
    ("ok back to the desync. ... it's WORSE than before") takes back that effort's
    latest fix or task, however long ago it was concluded."""
    if state["current"] is None or state["current"]["cue"] != "resume":
        return
    index = _effort_standing(state)
    if index is not None and state["segments"][index]["conclusion"]["kind"] in conclusions.DONE:
        _reopen(state, index, turn)


def _reopen(state: State, index: int, turn: int) -> None:
    """The segment at `index` is open again: `turn` took its conclusion back."""
    segment = state["segments"][index]
    segment["conclusion"] = {**segment["conclusion"], "retracted_by": turn}
    segment["status"] = "open"
    _bump(state, index)


def _supersede(state: State, index: int, turn: int) -> None:
    segment = state["segments"][index]
    segment["conclusion"] = {**segment["conclusion"], "superseded_by": turn}
    segment["status"] = "superseded"
    _bump(state, index)


# ---------------------------------------------------------------------------
# one turn


def _register_conclusion(
    state: State, found: conclusions.Conclusion, segment_id: str, text: str = ""
) -> None:
    if found.kind not in (*conclusions.DECIDED, "rejection"):
        return
    # the earlier decision it reverses: of those it may, the one it shares most with
    best, best_shared = None, -1
    reading = conclusions.with_reversals(found, text)
    mine = conclusions.subject(reading.text)
    for earlier in reversed(state["decisions"]):
        if earlier.get("superseded_by"):
            continue
        old = conclusions.Conclusion(
            earlier["text"],
            earlier["turn"],
            earlier["kind"],
            earlier["confidence"],
            "",
            said=str(earlier.get("said", "")),
        )
        if conclusions.supersedes(reading, old):
            shared = len(mine & conclusions.subject(old.text))
            if shared > best_shared:
                best, best_shared = earlier, shared
    if best is not None:
        best["superseded_by"] = found.turn
        _mark_superseded(state, best, found.turn)
    if found.kind not in conclusions.DECIDED:
        return  # a rejection may reverse a decision; it decides nothing a later one reverses
    state["decisions"].append(
        {
            "segment": segment_id,
            "turn": found.turn,
            "text": found.text,
            "kind": found.kind,
            "confidence": found.confidence,
            "said": found.said,
        }
    )
    del state["decisions"][:-DECISIONS_KEPT]


def _mark_superseded(state: State, earlier: dict[str, Any], turn: int) -> None:
    current = state["current"]
    holders = [current["open"]] if current else []
    for entry_list in holders:
        for entry in entry_list:
            if entry[0] == earlier["turn"] and entry[5] is not None:
                entry[5]["superseded_by"] = turn
    segments = state["segments"]
    for index in range(len(segments) - 1, -1, -1):
        segment = segments[index]
        found = segment["conclusion"]
        if found is not None and found["turn"] == earlier["turn"]:
            if found.get("superseded_by") is None:
                _supersede(state, index, turn)
            break
        if segment["last"] < earlier["turn"]:
            break


def _critical_key(text: str) -> str:
    """What a critical item says, as `critical_keys` holds it: an item said again is none."""
    return " ".join(text.lower().split())


def _add_critical(state: State, turn: int, kind: str, text: str) -> None:
    key = _critical_key(text)
    if key in state["critical_keys"]:
        return
    # a rule the user changes ("P0 now, not P1") replaces the latest live one it
    # restates; the change is kept in the state (working.yaml shows the latest ones). A
    # rule said again in the very same content words ("cents, keep them" after "keep
    # the cents") stands in place of the earlier one
    about = critical.subject(text)
    same = " ".join(sorted(about))
    again = len(about) >= 2 and same in state["critical_subjects"]
    change = critical.changes(text)
    replaced = None
    compared = state["critical"][-CRITICAL_COMPARED:] if change or again else []
    live = [item for item in compared if not item.get("superseded_by") and item["turn"] != turn]
    # the latest rule it is about, else the latest it names (`critical.replaces`)
    for named in (False, True) if change else (False,):
        for item in reversed(live):
            if (again and not named and critical.subject(item["text"]) == about) or (
                change and critical.replaces(text, item["text"], about, named)
            ):
                replaced = item
                break
        if replaced is not None:
            break
    if replaced is not None and change:
        replaced = _named_rather(text, about, live, replaced)
    if replaced is None and change:
        replaced = _said_named(state, turn, text)
    if replaced is None and (
        (kind == critical.REPLACEMENT and not critical.names_the_change(text))
        or critical.only_replaces(text)
    ):
        return  # "forget the finance, we're paying cash": a choice, no rule changed
    if kind == critical.REPLACEMENT and critical.admits(text):
        # a fact admitted wrong ("ok I was wrong about raw then"): what it takes back goes
        # whole, and no item comes of it
        if replaced is not None:
            _mark_replaced(state, replaced, turn)
        return
    if kind == critical.REPLACEMENT:  # what it changes: a preference, a figure, a rule
        kind = replaced["kind"] if replaced is not None else "preference"
    state["critical_keys"][key] = turn  # (an item that is made: what it says, its subject)
    state["critical_subjects"][same] = turn
    if replaced is not None:
        _mark_replaced(state, replaced, turn)
        # the rules of the replaced item that this one does not touch stand, said when
        # they were said
        standing = critical.left_standing(replaced["text"], text)
        if standing:
            state["critical_keys"][_critical_key(standing)] = replaced["turn"]
            _append_critical(state, replaced["turn"], replaced["kind"], standing)
    _append_critical(state, turn, kind, text)


def _mark_replaced(state: State, item: dict[str, Any], turn: int) -> None:
    """`item` replaced by what `turn` says: no longer live, and the change recorded (the
    latest `CRITICAL_REPLACED_KEPT`, which ``working.yaml`` shows)."""
    item["superseded_by"] = turn
    state["critical_rev"] += 1
    state["critical_replaced"].append([item["turn"], turn, item["text"]])
    del state["critical_replaced"][:-CRITICAL_REPLACED_KEPT]


def _named_rather(
    text: str, about: set[str], live: list[dict[str, Any]], found: dict[str, Any]
) -> dict[str, Any]:
    """The rule a change replaces: `found`, unless it lacks what the change names ("on
    the preset") and a live rule that has it shares as much with the change ("build
    everything with relwdi" changes the house rules that name the preset, not "fail the
    build if jitter goes over 0.15")."""
    names = critical.change_said(text.lower()).named
    if not names or critical.names_any(names, critical.subject(found["text"])):
        return found
    # (the words that say a change is one say nothing of what it is about: "change of
    # rule on paging" is not about "don't change anything on the pods")
    about = about - critical.CHANGE_TERMS
    least = len(about & critical.subject(found["text"]))
    return next(
        (
            item
            for item in reversed(live)
            if critical.names_any(names, has := critical.subject(item["text"]))
            and len(about & has) >= least
            and critical.replaces(text, item["text"], about, True)
        ),
        found,
    )


def _said_named(state: State, turn: int, text: str) -> dict[str, Any] | None:
    """The latest preference or figure said before `turn` as no rule ("I want an
    untethered one", "notice is 8 weeks") that the change or correction `text` names
    ("I've changed my mind on tethered", "it's 12 weeks, not 8"), as a critical item of
    its turn, to be replaced; None when it names none."""
    said = critical.change_said(text.lower())
    named, figures = said.named, said.figures
    if not named and not figures:
        return None
    earlier = [entry for entry in reversed(state["said"]) if entry[0] < turn]
    # what it names in a sentence itself, the latest; else in the sentence before one
    # ("an alert on the runners' disks. Warn at 80%, ..." for "a change of mind on the alert")
    found = next(
        (
            (entry, kind)
            for with_lead in (False, True)
            for entry in earlier
            if (kind := _names_said(entry[1], entry[2] if with_lead else "", named, figures))
        ),
        None,
    )
    if found is None:
        return None
    (said_at, sentence, lead), kind = found
    _append_critical(state, said_at, kind, f"{lead} {sentence}" if lead else sentence)
    item: dict[str, Any] = state["critical"][-1]
    return item


def _names_said(sentence: str, lead: str, named: frozenset[str], figures: frozenset[str]) -> str:
    """The kind of critical item a sentence kept (`State["said"]`) is when a change names
    it (with the sentence before it, `lead`: what it is about) or says its figure, else
    ""."""
    if named & set(terms(f"{lead} {sentence}" if lead else sentence)):
        return "preference"
    if figures and not lead and critical.says_figure(sentence.lower(), figures):
        return "constraint"
    return ""


def _denied(state: State, turn: int, figures: frozenset[str]) -> None:
    """A figure the user gave, said to be wrong by the assistant's reading of the
    evidence ("seated dinner in the hall: 40 persons, not 50", after "the venue takes 50
    for dinner"): the user's sentence that says it (the latest, `DENIED_BACK` turns back
    at most) is recorded as a critical item of its turn, replaced by this one at once;
    the reading makes no item (what the user lays down is the user's)."""
    for said_at, sentence, _ in reversed(state["said"]):
        if said_at >= turn:
            continue
        if turn - said_at > DENIED_BACK:
            return
        lower = sentence.lower()
        if not critical.says_figure(lower, figures):
            continue
        if critical.figures_denied(lower) & figures:
            continue  # the user's own correction ("£150 not £99"): what it corrects is older
        key = _critical_key(sentence)
        if key in state["critical_keys"]:
            return  # an item already, live or replaced: a rule stands until the user changes it
        _append_critical(state, said_at, "constraint", sentence)
        state["critical_keys"][key] = said_at
        _mark_replaced(state, state["critical"][-1], turn)
        return


def _append_critical(state: State, turn: int, kind: str, text: str) -> None:
    state["critical"].append(
        {
            "id": f"crit_{len(state['critical']) + 1}",
            "text": text,
            "turn": turn,
            "kind": kind,
            "source": "pattern",
            "tokens": tokenizer.count_tokens(text),
            "forbid": critical.forbidden_terms(text),
        }
    )


def _boundary(
    state: State,
    params: Params,
    role: str,
    text: str,
    turn_terms: list[str],
    ts: float | None,
    injected: bool,
    found: conclusions.Conclusion | None,
    rules: bool,
) -> tuple[str | None, str | None]:
    """Whether a new segment starts at this turn: (cue, resumed topic)."""
    current = state["current"]
    if current is None:
        return "start", None
    open_turns = current["open"]
    if len(open_turns) >= 2 * params.max_turns:
        return "length", None
    if role == "tool" or injected:
        return None, None
    # a long pause (overnight) starts a new segment whoever speaks next (two people may
    # alternate); a shorter one makes a new topic likelier (`_topic_score`)
    last = _seconds(state["last_ts"])
    if ts is not None and last is not None and ts - last >= LONG_GAP * params.time_gap_seconds:
        return "time_gap", None
    head = text.lstrip().lower()[:160]
    shift = SHIFT.match(head)
    if shift:
        resume = shift.group("resume")
        return ("resume", resume.strip()) if resume else ("shift", None)
    if role == "assistant":
        concluded = segment_conclusion(open_turns)
        if (
            concluded is not None
            and "user turn" in concluded["reason"]
            and segment_status(open_turns, concluded) == "concluded"
            and ASSISTANT_SHIFT.search(text[:SHIFT_CHARS].lower())
        ):
            return "shift", None
    if role != "user":
        return None, None
    if len(open_turns) >= params.max_turns:
        return "length", None
    gap = ts - last if ts is not None and last is not None else None
    score, cue = _topic_score(state, params, text, turn_terms, gap, found, rules)
    if score >= TOPIC_SCORE:
        return cue, None
    if score >= TOPIC_SCORE - 1.0 and found is None:
        current["maybe"] = [score, cue]  # the answer decides (see `_cohesion_split`)
    return None, None


def _topic_score(
    state: State,
    params: Params,
    text: str,
    turn_terms: list[str],
    gap: float | None,
    found: conclusions.Conclusion | None,
    rules: bool,
) -> tuple[float, str]:
    """How strongly a user turn opens a new topic, and the cue that says so most.

    Signals, each a point or two: the words people open a topic with ("ok now X",
    "next on my list:", "q: ...", a topic named alone: "logs. ..."), a pause of a
    quarter of the time gap, many words the segment has not used, and the segment
    having concluded. A turn that itself concludes or accepts something, or says
    almost nothing ("ok go"), belongs to what it answers."""
    open_turns = state["current"]["open"]
    head = text.lstrip().lower()[:200]
    score, cue = 0.0, "cohesion"
    mine = set(turn_terms)
    said = next((e for e in reversed(open_turns) if e[1] != "tool"), None)
    if (
        (OPENER.match(head) and not (rules and OH_AND.match(head)))
        or (said is not None and said[1] == "user" and ANNOUNCED.search(said[2][-80:].lower()))
        or _opens_after_aside(head)
        or SWITCH.search(head)
        or LETS_TALK.search(head[:160])
    ):
        score, cue = 2.0, "shift"
    else:
        label = LABEL.match(head)
        if label and label.group(2) not in NOT_LABEL:
            # "logs. ...", and more so after the words that turn to it: "ok money. ..." (not
            # "ok problems: ...")
            named = label.group("lead") and label.group("mark") == "."
            # a label named after "ok" opens a topic in fewer words: "ok. dbt. our runs
            # went 188 -> 513 TiB, what happened"
            if len(mine) >= (NAMED_TERMS if named else LABEL_TERMS):
                score, cue = (2.0 if named else 1.0), "shift"
    paused = gap is not None and gap >= params.time_gap_seconds / 4
    if gap is not None and gap >= params.time_gap_seconds:
        score, cue = score + 1.5, "time_gap" if cue == "cohesion" else cue
    elif paused:
        score += 1.0
    if paused and BACK.match(head) and not conclusions.PAUSE.search(head):
        score += 1.0  # "back, ..." after a break: what comes next is likely something else
    seen: set[str] = set()
    for entry in open_turns[-NOVELTY_TURNS:]:
        seen.update(entry[9])
    novel = len(mine - seen)
    if novel >= 5 and novel >= 0.6 * len(mine):
        score += 1.0
    concluded = segment_conclusion(open_turns)
    if (
        concluded is not None
        and "user turn" in concluded["reason"]
        and segment_status(open_turns, concluded) == "concluded"
    ):
        score += 1.0
        cue = "conclusion" if cue == "cohesion" else cue
    if found is not None and not _concludes_earlier(state, mine, seen):
        # it concludes what the segment was about; less surely when it opens by taking
        # up a topic ("Schools. ... we'd like to keep them on a British curriculum")
        score -= 1.0 if cue == "shift" else 2.0
    if len(mine) < 3:
        score -= 1.0
    if cue != "shift" and ACTS_ON_IT.search(" ".join(head.split()[:ACTS_WORDS])):
        score -= 1.0  # it acts on what was just said: "do it.", "ok keep it. but ..."
    if conclusions.stops(text):
        # a stop ("that's it for today, brain is mush"), and what is left for tomorrow,
        # listed: no topic taken up (the next one starts when the work does)
        score -= 2.0
    answered = next((e for e in reversed(open_turns) if e[1] == "assistant"), None)
    if answered is not None:
        shared = len(mine & set(answered[9]))
        if shared >= 3 or (shared >= 2 and shared >= 0.3 * len(mine)):
            score -= 1.0  # it takes up what the answer said
        elif (
            answered[2].rstrip().endswith("?") or REPLY.match(head) or FOLLOW_UP.match(head)
        ) and cue != "shift":
            score -= 1.0  # it answers the assistant's question (not by opening a topic)
    if rules and cue != "shift":
        score -= 1.0  # a rule for the work at hand, not a topic named first
    if len(open_turns) < 2:
        score -= 1.0
    return score, cue


EARLIER_SEGMENTS = 6  # closed segments a conclusion may be found to be about


def _concludes_earlier(state: State, mine: set[str], seen: set[str]) -> bool:
    """Whether a concluding turn is about a topic closed before the one at hand ("ines
    with beta2: reaper 7 and live 12, 44.1/48/96 back and forth ... no crash. ok that
    one's actually dead now"): it shares three or more of its words with one of the last
    segments, and more than twice what it shares with the latest turns of this one."""
    here = len(mine & seen)
    best = max(
        (len(mine & segment["terms"].keys()) for segment in state["segments"][-EARLIER_SEGMENTS:]),
        default=0,
    )
    return best >= 3 and best > 2 * here


def _opens_after_aside(head: str) -> bool:
    """A topic taken up after a short aside on the last one: "Sent that to Maren. OK back
    to the actual choice.", "Sent! He's usually quick. Let's do the budget." (the aside is
    one or two sentences of at most `ASIDE_WORDS` words each; other openers after an
    aside, "green. ok, loader's fixed.", mostly go on with it)."""
    at = 0
    for _ in range(2):  # an aside of one or two short sentences
        aside = _ASIDE.match(head, at)
        if aside is None or len(aside.group().split()) > ASIDE_WORDS:
            return False
        at = aside.end()
        if RESUMED.match(head, at):
            return True
    return False


def _cohesion_split(state: State, params: Params, role: str, turn_terms: list[str]) -> bool:
    """At an answer, decide whether the user turn before it opened a new topic: one it
    nearly did (`_topic_score`) does when the user turn and its answer share little
    with the turns before them."""
    current = state["current"]
    if role != "assistant" or current is None:
        return False
    maybe = current.pop("maybe", None)
    open_turns = current["open"]
    if maybe is None or open_turns[-1][1] != "user" or len(open_turns) < 3:
        return False
    before = Counter[str]()
    for entry in open_turns[-1 - NOVELTY_TURNS : -1]:
        if entry[1] != "tool":
            before.update(entry[9])
    after = Counter(open_turns[-1][9])
    after.update(turn_terms)
    return bool(before) and cosine(before, after) < PAIR_COHESION and maybe[0] + 1.0 >= TOPIC_SCORE


@dataclass(frozen=True)
class Reading:
    """What `step` reads in one turn, on its own and with the turns just before it: the
    part of a turn's work that no state changes (about five sixths of it), which can
    therefore be done ahead of the fold, in another process (`_Ahead`)."""

    count: int  # the turn's tokens
    terms: list[str]
    found: conclusions.Conclusion | None  # not yet compared with what segments concluded
    rules: list[tuple[str, str]]  # the critical items it lays down, as said to the model
    own: list[tuple[str, str]]  # ... in its own words (not what it quotes)
    failure: bool
    pending: bool
    files: list[str]
    said: list[tuple[str, str]]  # sentences with a preference or a figure, no rule (and leads)
    denied: frozenset[str]  # of an assistant's: figures it says are not so


def _injected(turn: dict[str, Any]) -> bool:
    meta = turn.get("meta") or {}
    return bool(meta.get("injected") or meta.get("compact_summary"))


def _rules(
    turn: dict[str, Any], brief: bool
) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """The critical items a turn lays down, and those it lays down in its own words."""
    role, text = str(turn["role"]), str(turn["content"])
    # a turn whose source names the person who said it (LoCoMo, a group chat) is one
    # person talking to another: "make sure you rest" is care, not a rule for a model,
    # so patterns mark no critical item there (explicit marks still do)
    if named_speaker(turn) is not None or (role == "system" and _injected(turn)):
        return [], []
    rules = critical.detect(role, text, brief, replacing=True)
    # a rule someone else wrote, quoted ("pasting: > ..."), may bring a topic of its own
    quoted = rules and "> " in text
    own = critical.detect(role, text, brief, quotes=False, replacing=True) if quoted else rules
    return rules, own


def _heard(turn: dict[str, Any]) -> tuple[str, str]:
    """What a later turn's `read` sees of `turn`: its role and its first `RECENT_CHARS`
    (what ``state["recent"]`` keeps of it)."""
    return str(turn["role"]), str(turn["content"])[:RECENT_CHARS]


def _before(state: State) -> list[tuple[str, str]]:
    """`_heard` of the `CONTEXT_TURNS` turns the state folded last, oldest first."""
    return [(str(entry[1]), str(entry[2])) for entry in state["recent"][-CONTEXT_TURNS:]]


def read(turn: dict[str, Any], before: list[tuple[str, str]]) -> Reading:
    """`Reading` of `turn`; `before`: `_heard` of the `CONTEXT_TURNS` turns before it,
    oldest first."""
    role = str(turn["role"])
    text = str(turn["content"])
    found = None
    if not _injected(turn):
        found = conclusions.detect(int(turn["turn"]), role, text, before)
    rules, own = _rules(turn, brief=False)
    lower = text.lower()
    return Reading(
        tokenizer.count_tokens(text),
        _turn_terms(role, text),
        found,
        rules,
        own,
        role == "user" and _failure_said(lower),
        role in ("user", "assistant") and _pending(lower),
        paths(text[:PATH_CHARS]) if role in ("assistant", "tool", "user") else [],
        critical.remembered(text, rules) if role == "user" and named_speaker(turn) is None else [],
        critical.figures_denied(text) if role == "assistant" else frozenset(),
    )


def step(
    state: State, turn: dict[str, Any], params: Params, reading: Reading | None = None
) -> None:
    """Fold one raw turn into `state` (`reading`: the turn's `read`, when done ahead)."""
    number = int(turn["turn"])
    role = str(turn["role"])
    text = str(turn["content"])
    ts_text = turn.get("ts")
    meta = turn.get("meta") or {}
    injected = _injected(turn)
    if reading is None:
        reading = read(turn, _before(state))
    count = reading.count
    tokenizer.note(text, count)  # for the index, which shows it again (as a line)
    ts = _seconds(ts_text)
    turn_terms = reading.terms

    found = reading.found
    if found is not None and any(
        segment["status"] == "concluded" and conclusions.echoes(found, segment["conclusion"])
        for segment in state["segments"][-ECHO_SEGMENTS:]
    ):
        found = None  # a later mention of what a segment already concluded

    rules, own = reading.rules, reading.own
    # a subagent's prompt is its brief: every instruction in it binds the work
    if role == "user" and state["opening"] is None and meta.get("parent_session"):
        rules, own = _rules(turn, brief=True)
    # (a sentence that only says a rule changes is a rule only once it replaces one)
    laid = any(kind != critical.REPLACEMENT for kind, _ in own)
    cue, resume = _boundary(state, params, role, text, turn_terms, ts, injected, found, laid)
    if cue is not None:
        _close(state, params)
        state["current"] = _new_segment(state, cue, resume)
    elif _cohesion_split(state, params, role, turn_terms):
        moved = state["current"]["open"].pop()
        _close(state, params)
        state["current"] = _new_segment(state, "cohesion")
        state["current"]["open"].append(moved)
    lower = text.lower() if role == "user" else ""
    failure, pending = reading.failure, reading.pending
    entry = [
        number,
        role,
        text,
        ts_text,
        count,
        found.as_dict() if found else None,
        failure,
        injected,
        pending,
        turn_terms,
    ]
    state["current"]["open"].append(entry)
    if found is not None:
        state["conclusions"].append({**found.as_dict(), "segment": state["current"]["id"]})
        del state["conclusions"][:-CONCLUSIONS_KEPT]
        if role == "user" and state["segments"]:
            _conclude_effort(state, found.as_dict())
        _register_conclusion(state, found, state["current"]["id"], text)
    for kind, sentence in rules:
        _add_critical(state, number, kind, sentence)
    if reading.said:
        state["said"] += [[number, sentence, lead] for lead, sentence in reading.said]
        del state["said"][:-SAID_KEPT]
    if reading.denied:
        _denied(state, number, reading.denied)
    if role == "user" and any(opener in lower for opener in CLAIM_QUOTED):
        _taken_back(state, number, lower)
    if failure:
        # a topic opened with a failure of its own ("next fire. every webhook fails"), not
        # one that comes back ("great, NaN again"), leaves an earlier fix alone
        # a topic taken up again ("ok back to the desync") is the one the failure is of
        opened = cue == "resume" or (cue == "shift" and not AGAIN.search(lower[:80]))
        _retract(state, number, turn_terms, opened)
        _retract_resumed(state, number)

    # the turn's distinct terms in the order said (not a set's, which changes with the
    # hash seed): the order of `df` and of the reference bumps is part of the state
    unique = dict.fromkeys(turn_terms)
    df = state["df"]
    for term in unique:
        df[term] = df.get(term, 0) + 1
    state["docs"] += 1
    if role == "user" and unique:
        _mark_references(state, unique, number)

    if state["opening"] is None and role == "user" and not injected and text.strip():
        state["opening"] = [number, text[:RECENT_CHARS]]
    if failure:
        first = next((s for s in sentences(text) if BLOCKER.search(s.lower())), text[:200])
        state["failures"].append([number, " ".join(first.split())[:300]])
        del state["failures"][:-FAILURES_KEPT]
    files = reading.files
    recent = state["recent"]
    recent.append([number, role, text[:RECENT_CHARS], ts_text, files, failure])
    del recent[:-RECENT_TURNS]
    state["turns"] += 1
    state["last_turn"] = max(state["last_turn"], number)
    state["tokens"] += count
    state["last_ts"] = ts_text or state["last_ts"]


def _mark_references(state: State, unique: Iterable[str], number: int) -> None:
    """A user turn refers to the closed segments it shares three of their key terms
    with; a term of every topic, or of the whole conversation, tells nothing."""
    hits: Counter[int] = Counter()
    index = state["segment_index"]
    df, common = state["df"], _common_limit(state)
    for term in unique:
        bucket = index.get(term)
        if bucket and len(bucket) <= COMMON_BUCKET and df.get(term, 0) <= common:
            hits.update(bucket)
    segments = state["segments"]
    for segment_index, shared in sorted(hits.items()):  # bumped in segment order
        segment = segments[segment_index]
        if shared >= 3 and segment["last"] < number - 2:
            segment["referenced"] = number
            _bump(state, segment_index)


def _bump(state: State, index: int) -> None:
    """Note that closed segment `index` changed (its ``rev``, and ``bumped``)."""
    segment = state["segments"][index]
    segment["rev"] = segment.get("rev", 0) + 1
    state["bumps"] += 1
    bumped = state["bumped"]
    bumped.append(index)
    if len(bumped) > BUMPS_KEPT:
        del bumped[: len(bumped) - BUMPS_KEPT]


AHEAD_TURNS = 2000  # a fold of fewer turns reads them itself: a helper would cost more
MAX_HELPERS = 3  # past these, the fold's own share (the state's work) is all the time
STATE_SHARE = 0.3  # the fold's work on the state, for that of reading the same turns
AHEAD_SHARE = 500  # turns a helper reads at a time
AHEAD_DEPTH = 3  # shares read ahead, or being read, a helper, at most


def fold(
    state: State,
    turns: list[dict[str, Any]],
    params: Params,
    helpers: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> State:
    """Fold `turns` into `state`, in order. `helpers`: processes that `read` turns ahead
    while this one folds (None: one per core but this one's, up to `MAX_HELPERS`, when
    there are `AHEAD_TURNS` turns or more and this process is not itself a worker). The
    state is the same whoever read the turns. `progress` is told (turns folded, of how
    many) every `AHEAD_SHARE` turns and at the end."""
    if helpers is None:
        helpers = helpers_for(len(turns))
    with _Ahead(state, turns, helpers) as ahead:
        for at, turn in enumerate(turns):
            step(state, turn, params, ahead.reading(at))
            if progress is not None and ((at + 1) % AHEAD_SHARE == 0 or at + 1 == len(turns)):
                progress(at + 1, len(turns))
    return state


def helpers_for(turns: int, most: int | None = None) -> int:
    """The helpers a fold of `turns` turns starts: none for fewer than `AHEAD_TURNS` or
    in a process that is itself a worker, else `most` (config ``segments.helpers``), or
    one per core but this one's, up to `MAX_HELPERS`."""
    if turns < AHEAD_TURNS or multiprocessing.parent_process() is not None:
        return 0
    if most is not None:
        return most
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(0, min((cores or 1) - 1, MAX_HELPERS))


def read_all(
    turns: list[dict[str, Any]], before: list[tuple[str, str]], method: str | None = None
) -> list[Reading]:
    """`read` each of `turns` in order, `before` (as `read` takes it) what came before
    the first; `method`: the token method to count with (a helper process's own is
    its config's default)."""
    if method is not None:
        tokenizer.set_method(method)
    before = list(before)
    readings = []
    for turn in turns:
        readings.append(read(turn, before[-CONTEXT_TURNS:]))
        before.append(_heard(turn))
        del before[:-CONTEXT_TURNS]
    return readings


class _Ahead:
    """The `Reading` of each turn of a fold that helper processes read ahead.

    The turns are taken in shares of `AHEAD_SHARE`: the fold reads the first itself (a
    helper needs the time to start), then of each run of shares, as many as keep this
    process as busy as each helper (`STATE_SHARE`), and the helpers the rest, each share
    sent as the fold nears it (`AHEAD_DEPTH` a helper waiting at most), so what was read
    ahead and not yet folded stays a few shares, however long the fold. A helper that
    fails (killed, out of memory) costs only time: the shares not yet folded are read
    here."""

    def __init__(self, state: State, turns: list[dict[str, Any]], helpers: int) -> None:
        self.shares: dict[int, Future[list[Reading]]] = {}  # sent: share -> its readings
        self.ahead: list[int] = []  # the shares the helpers read, in order, not yet sent
        self.pool: ProcessPoolExecutor | None = None
        self.share = -1  # the share being folded
        self.readings: list[Reading] | None = None  # ... and its readings, if read ahead
        if helpers <= 0 or len(turns) <= AHEAD_SHARE:
            return  # (every update of a session comes here: nothing more to do)
        self.turns = turns
        self.recent = _before(state)
        self.depth = AHEAD_DEPTH * helpers
        self.method = tokenizer.method_in_use()
        # this process's share of the reading, so that it and each helper take as long
        own = max(0.0, (1 - STATE_SHARE * helpers) / (helpers + 1))
        # share 0 is read here; after it, share i here when it brings the shares read
        # here up to their due (`own` of all), the rest by the helpers
        here = 1
        for share in range(1, -(-len(turns) // AHEAD_SHARE)):
            if here < own * (share + 1):
                here += 1
            else:
                self.ahead.append(share)
        # forked when nothing else runs here (a forked thread's locks stay as they were)
        fork = sys.platform == "linux" and threading.active_count() == 1
        try:
            context = multiprocessing.get_context("fork" if fork else "spawn")
            self.pool = ProcessPoolExecutor(max_workers=helpers, mp_context=context)
            self._send()
        except (OSError, RuntimeError) as exc:  # no processes to be had: read them here
            log.debug("reading turns ahead failed to start: %s", exc)
            self.close()

    def _send(self) -> None:
        """Send the helpers' next shares, until `depth` are sent and not yet folded."""
        assert self.pool is not None
        while self.ahead and len(self.shares) < self.depth:
            share = self.ahead.pop(0)
            start = share * AHEAD_SHARE
            before = self.recent + [
                _heard(turn) for turn in self.turns[max(0, start - CONTEXT_TURNS) : start]
            ]
            part = self.turns[start : start + AHEAD_SHARE]
            self.shares[share] = self.pool.submit(
                read_all, part, before[-CONTEXT_TURNS:], self.method
            )

    def reading(self, at: int) -> Reading | None:
        """The reading of the turn at `at`, or None when the fold reads it itself."""
        share, offset = divmod(at, AHEAD_SHARE)
        if share != self.share:
            self.share, self.readings = share, None
            future = self.shares.pop(share, None)
            if future is not None:
                try:
                    self.readings = future.result()
                except Exception as exc:  # whatever went wrong there: read here instead
                    log.warning("a helper reading turns ahead failed (%s); reading here", exc)
                    self.close()  # (a pool that lost a process takes no more)
            if self.pool is not None:
                self._send()
        return self.readings[offset] if self.readings is not None else None

    def close(self) -> None:
        if self.pool is not None:
            for future in self.shares.values():
                future.cancel()
            self.pool.shutdown(wait=True)
            self.pool = None
        self.shares, self.ahead = {}, []

    def __enter__(self) -> _Ahead:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
