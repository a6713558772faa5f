"""Conclusion detection (whitepaper section 4.1): when a line of reasoning resolves.

A conclusion is the moment its owner settles something, and the cue is mostly in what
the user says back:

================  ====================================================  ==========
kind              cue                                                   confidence
================  ====================================================  ==========
decision          "flate2 it is", "go with the 45 then", "decided",     0.85
                  "Decision: ...", "let's go with", "back to bf16"
resolution        "that one's fixed", "that did it", "the bug is dead",  0.9
                  "numbers match... confirmed", "zero NaN"
rejection         "ruled out", "X is out", "not an option because"       0.75
answer            "that answers it", "makes sense", "that explains it"   0.8
task              "dockerfile done \u2714", "that's done then", "merged"     0.8
confirmation      "yes, exactly", "perfect, thanks" after a proposal     0.75
insight           "the takeaway is", "the root cause was"                0.7
================  ====================================================  ==========

An assistant saying the same counts for less (x0.7): a claim is not a verification,
and the user's answer to it usually says more.

Look-alikes are rejected: questions ("so Redis it is?", "that did it? no wait"),
negations ("that didn't fix it", "nan not fixed"), hedges and guesses ("should be
green now", "probably the LR", "I bet it's the retry"), sarcasm ("great, NaN again,
love it"), pauses ("done for today", "let's stop here"), plans ("revert it and we're
done"), quoted commit messages ("fix nan"), "works on my machine". A decision reversed
later is handled by `supersedes`: the later one stands and the earlier is superseded.

The conclusion's text is a statement a person can reuse later: the cue sentence with
what it settles, and, when the user only accepts ("ok decided", "that answers it"),
the lead of what was accepted (the assistant's proposal or finding just before).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache

from ccm import patterns
from ccm.engine.text import any_of, is_record, sentences, skipping, terms

CONFIDENCE = {
    "decision": 0.85,
    "resolution": 0.9,
    "rejection": 0.75,
    "answer": 0.8,
    "confirmation": 0.75,
    "task": 0.8,
    "insight": 0.7,
}
ASSISTANT_FACTOR = 0.7
# what an assistant can conclude by saying so: a fix verified, a task done, a finding;
# a decision or an accepted answer is the user's to make ("Understood." is not one)
ASSISTANT_KINDS = frozenset({"resolution", "task", "insight"})
LONG_TURN = 3000
LONG_ANSWER = 800
STATEMENT_CHARS = 320
RICH = 6  # specifics (`specifics`) a statement needs to say what it settles on its own
DECIDED = ("decision", "confirmation")  # the kinds that decide: one may reverse another
DONE = ("resolution", "task")  # the kinds that report work done: a failure may take one back


@dataclass(frozen=True)
class Conclusion:
    text: str
    turn: int
    kind: str
    confidence: float
    reason: str
    role: str = "user"
    said: str = ""  # what the turn itself says (the statement may add what it accepts)

    def as_dict(self) -> dict[str, object]:
        found: dict[str, object] = {
            "text": self.text,
            "turn": self.turn,
            "kind": self.kind,
            "confidence": self.confidence,
            "reason": self.reason,
        }
        if self.said:
            found["said"] = self.said
        return found


def _rx(*patterns: str) -> re.Pattern[str]:
    """One pattern from several; matched against lowercased text (IGNORECASE is 10x slower)."""
    return skipping("|".join(f"(?:{p})" for p in patterns))


_WORD = r"[\w.+/#'&-]+"  # a word, a name ("R&P", "M&S"), a path
# not one of whichever it is: "whoever it is has to be good with nervous dogs", "so
# whatever school it is has to be serious about that"
_ANY_ONE = r"(?!(?:whoever|whatever|whichever|wherever|however)\b)"
_SAID = rf"(?:[\u00a3$\u20ac]?\d[\d,.]*\d|[\u00a3$\u20ac]\d|{_WORD})"  # a word or a figure: "£9", "2,500"
# said as settled: "backups are properly done now", "certs are finally fixed"
_CERTAINLY = r"(?:properly|finally|really|actually|officially|definitely|truly|well and truly)"
_SURELY = rf"(?:{_CERTAINLY}\s+)?"
# said of a fix or a task to say it holds now, as the one before did not: "that's
# properly fixed now", "done, for real this time" (`fold._conclude_effort`)
HOLDS_NOW = patterns.compile(rf"\b(?:{_CERTAINLY}|for real|this time)\b")
# "dead" as a word that makes the next one stronger ("dead quiet", "dead on arrival")
_NOT_DEAD = (
    r"(?! (?:quiet|easy|simple|cheap|serious|set|slow|busy|still|silent|calm|boring|keen|"
    r"tired|certain|sure|right|wrong|on arrival|in the water)\b)"
)
# a thing kept, said alone as a turn opens (`OPENING_ONLY`): "8.5 stays.", "Bruges stays,
# they'd mutiny" (not "... and the hob. oven stays")
_KEPT = _rx(
    r"(?:^|[.;:]\s*|\b(?:so|ok|okay|fine|right)[,.]?\s+)(?:the |our )?"
    r"(?!(?:it|he|she|they|that|this|what|who|which)\b)[\w.'-]+(?: [\w.'-]+)? stays"
    r"(?=\s*(?:[,.;!]|$))"
)
# Each cue: its kind, the anchors one of which a sentence must hold for it to match (a
# substring test costs far less than a pattern scanning the sentence, and most
# sentences hold no anchor of most cues), and the pattern.
CUES: list[tuple[str, tuple[str, ...], re.Pattern[str]]] = [
    # resolution: a fix confirmed
    (
        "resolution",
        ("fixed", "solved", "resolved"),
        _rx(
            r"\b(?:that|this|it|which)(?:'s| is| has)? (?:fixed|solved|resolved) (?:it|that|the)\b",
            r"(?<!needed )(?<!need )(?<!get )(?<!be )(?<!have )(?:^|\b(?:is|'s|are|now|all|got|"
            r"been|one'?s|bug'?s)\s+"
            + _SURELY
            # then the sentence ends, or what it is ("is actually fixed: headers split"), or
            # an emoji ("that's fixed 👍"; an ironic one is `IRONY`)
            + r")(?:fixed|solved|resolved)(?=\s*(?:[,.;:!\u2014-]|$|"
            r"then|now|for real|this time|too|as well|\w*\s*[\U0001f300-\U0001faff\u2705\u2714]))",
            r"\b(?:problem|issue|bug|mystery|crash loop|leak|panic|error)s? (?:is |are )?"
            r"(?:fixed|solved|resolved)\b",
            r"\bproblem solved\b",
            # what was fixed, then "fixed" after a colon: "fixtures page: fixed, closing ..."
            r"^(?:[\w-]+ ){0,2}[\w-]+:\s*(?:fixed|solved|resolved)\b(?=\s*(?:[,.;!\u2714\u2705]|$))",
        ),
    ),
    (  # "that's the flake fixed, for real this time", "preview sorted.", "all sorted"
        "resolution",
        ("fixed", "sorted", "solved"),
        _rx(
            r"\bthat(?:'?s| is) (?:the |our |my )?[\w-]+(?: [\w-]+)?"
            r"(?: (?:properly|finally|really|well and truly|officially))? (?:fixed|sorted|solved)\b",
            r"(?:^|[,.;:!]\s+|\b(?:and|so|ok|okay|good|great|nice)\s+)(?:the |my |our )?"
            r"(?:[a-z][\w-]*(?: [a-z][\w-]*){0,2}|that'?s|it'?s) sorted(?=\s*(?:[,.;!\u2014-]|$|then|"
            r"now|for real|"
            r"\w*\s*[\U0001f389\u2705\u2714]))",
            # the one thing in hand, named: "good, that job's sorted" (not a recap of several,
            # "layout's sorted, quote's sorted")
            r"\b(?:that|this) [a-z][\w-]*(?:'s| is) sorted(?=\s*(?:[.;!\u2014-]|$|then|now|"
            r"for real))",
            # "the invoices are actually sorted now" (not "sorted by date")
            r"\b(?:is|are|'s|'re)\s+" + _CERTAINLY + r" sorted(?=\s*(?:[,.;!\u2014-]|$|then|now|"
            r"for real|this time))",
        ),
    ),
    # a gap or a ticket closed by what was just done: "that closes the late-event hole"
    (
        "resolution",
        ("closes",),
        _rx(
            r"(?:^|[,.;:!]\s*|\b(?:so|and|ok|okay|great|good|brilliant|nice|perfect)\s+)"
            r"that closes (?:the|it|this|that|our)\b"
        ),
    ),
    # a fix called so: "I'll call that one fixed", "call it solved"
    (
        "resolution",
        ("call",),
        _rx(
            r"\bcall(?:ing)? (?:it|that|this|that one|this one|the [\w-]+(?: [\w-]+)?) "
            r"(?:fixed|sorted|solved|resolved|recovered)\b"
            r"(?![^.;!?]{0,30}\b(?:once|when|if|after|as soon as|until)\b)"  # not yet
        ),
    ),
    # a matter taken care of: "review notes dealt with, the reply goes in with the next
    # build", "timezone bug's dealt with then" (not "it'll be dealt with", "to be dealt with")
    (
        "resolution",
        ("dealt with",),
        _rx(
            r"(?<!\bbe )(?<!\bto )(?<!\bget )\bdealt with(?=\s*(?:[,.;!\u2014-]|$|then\b|now\b|"
            r"for good\b))"
        ),
    ),
    (
        "resolution",
        ("did it", "did the trick", "was it"),
        _rx(r"\b(?:that|this|it) (?:did it|did the trick|was it)\b"),
    ),
    # "ok THAT is the real fix, race closed for good" (not "that is the fix we'll try")
    (
        "resolution",
        ("fix",),  # (not " fix": the scan would take " fix" of " fixed" and miss "fixed")
        _rx(
            # "that's the keepalive fix, for real this time"
            r"\b(?:that|this)(?:'s| is| was) (?:the |our )?(?:real |actual |proper )?"
            r"(?:[a-z][\w-]* )?fix\b"
            r"(?!\s+(?:we|i|you|to|for|if|that|would|will|could|might|should)\b)"
        ),
    ),
    # "both sets of answers survive. that's nailed. commit it" (not "nailed down by")
    (
        "resolution",
        ("nailed",),
        _rx(
            r"(?:^|[.;!,]\s*)(?:ok(?:ay)?,? |right,? |yes,? )?(?:that'?s|it'?s) nailed\s*(?:[.,;!]|$)"
        ),
    ),
    (
        "resolution",
        ("dead", "gone"),
        _rx(
            r"\bthat(?:'?s| is) (?:the |our |my )?[\w-]+(?: [\w-]+)?"
            r"(?: (?:properly|finally|really|well and truly|officially))? (?:dead|gone)\b",
            r"\b(?:problem|issue|bug|mystery|crash loop|leak|panic|error|flake|race|crash|"
            r"deadlock|regression)s?(?:'s| is| are)? (?:gone|dead)\b",
            # (not "clamshells are dead to me": done with, not fixed; not "the roads are dead
            # quiet": "dead" that makes a word stronger)
            r"\b(?:is|are) " + _SURELY + r"dead\b(?! to (?:me|us|him|her|them)\b)" + _NOT_DEAD + "|"
            # (not "£600 is gone as far as the budget goes", "the photos are gone after the
            # update": a loss)
            r"\b(?:is|are) " + _SURELY + r"gone\b(?! as far as\b| after\b)|"
            r"^(?:\w+ ){0,2}gone\b",
            # "ok THAT one's actually dead", "this one's finally gone"
            r"\b(?:that|this) one(?:'s| is) " + _SURELY + r"(?:dead|gone)\b",
        ),
    ),
    (
        "resolution",
        ("works", "working"),
        _rx(
            r"\b(?:works|working) (?:now|again|for real|fine now)\b|(?<!how )\bit works\b(?! on my)"
            # it works where the user tried it, not where it failed: "it works fine for me"
            r"(?!(?: fine| ok(?:ay)?| just fine)? (?:for me|here|locally)\b)"
        ),
    ),
    (
        "resolution",
        ("no more",),
        _rx(r"\bno more (?:errors?|crash\w*|fail\w*|dup\w*|nans?|panic\w*|restarts?|timeouts?)\b"),
    ),
    # well again: "CI's healthy again", "the nightly is green again"
    (
        "resolution",
        ("again",),
        _rx(r"\b(?:is|'s|are|'re) (?:healthy|green|stable|passing|happy) again\b"),
    ),
    (
        "resolution",
        ("zero", "restart"),
        _rx(r"\bzero (?:nans?|errors?|restarts?|failures?|dup\w*|crash\w*)\b|\brestarts? 0\b"),
    ),
    (
        "resolution",
        ("green", "pass"),
        _rx(
            r"^(?:all |both |\d+/\d+ )?green\b|"
            r"\b(?:main|master|trunk|develop)(?:'s| is)(?: all| back| finally)? green\b|"
            r"\b(?:tests?|ci|checks?|build|suite|pipeline|jobs?|"
            r"runs?|everything|all|both)\b[^.;?]{0,30}\b(?:green|pass(?:es|ed|ing)?)\b"
            r"(?! (?:on my|locally|it\b))"
        ),
    ),
    (
        "resolution",
        ("confirmed", "match"),
        _rx(r"\bconfirmed\b|\b(?:numbers|totals|counts) (?:all )?match\b"),
    ),
    (
        "resolution",
        ("cause", "all along"),
        _rx(r"\bthat'?s the (?:root )?cause\b|\bit was (?:the|a) [\w ]{2,30} all along\b"),
    ),
    ("resolution", ("lesson",), _rx(r"\blesson learned\b")),
    # answer: an answer accepted
    (
        "answer",
        ("answers",),
        _rx(
            r"\bthat answers (?:it|my question|the question|that|"
            r"what (?:i|we) (?:needed|wanted|asked|was asking|were asking)\b|"
            r"#?[a-z]*-?\d+\b)"  # a ticket answered: "ok that answers #214"
        ),
    ),
    # "this is really helpful, exactly the list I needed", "that's exactly what she needs"
    (
        "answer",
        ("exactly",),
        _rx(
            r"\bexactly (?:the [\w-]+(?: [\w-]+)?|what) (?:i|we|she|he|they) "
            r"(?:needed|wanted|was after|were after|need|needs|want|wants)\b"
        ),
    ),
    (
        "answer",
        ("sense", "reassuring"),
        _rx(
            r"\b(?:makes|made) (?:(?:total|perfect|complete|so much|a lot of) )?sense\b"
            r"(?!,? (?:to|if|but|though|except)\b)",
            # "ok that's actually reassuring. so it's a weak bum, not a broken knee"
            r"\bthat'?s (?:(?:actually|really|very|so|quite) )?reassuring\b(?!,? (?:but|though)\b)",
        ),
    ),
    ("answer", ("explains",), _rx(r"\bthat explains (?:it|a lot|everything|the)\b")),
    (  # an answer taken as it stands: "perfect, that's the paragraph for the postmortem"
        "answer",
        ("that's the",),
        _rx(
            r"\bthat'?s (?:the|my|our|exactly the) (?:answer|explanation|paragraph|wording|"
            r"reason|summary)\b(?=\s*(?:[,.;!]|$|for\b|i\b|we\b))"
        ),
    ),
    (
        "answer",
        ("good to know", "solved", "settles"),
        # "that settles it", "the deaf thing settles it, he'd never hear her coming"
        _rx(
            r"\bgood to know\b|\bmystery solved\b|"
            r"\b(?:that|this|which|the [\w'-]+(?: [\w'-]+)?) settles it\b"
        ),
    ),
    (
        "answer",
        ("clear", "got it", "understood"),
        _rx(
            r"^(?:ok(?:ay)?|right)?[, ]*(?:that'?s )?(?:clear|got it|understood)\b(?! as mud)",
            # "brilliant, that's nice and clear, I'll do both in december"
            r"\bthat'?s (?:nice and|really|very|perfectly|super|crystal) clear\b"
            r"(?! (?:to|that|if|from|of|enough)\b)",
        ),
    ),
    # rejection: an option ruled out
    ("rejection", ("ruled",), _rx(r"\bruled\s+out\b")),
    (
        "rejection",
        ("because",),
        _rx(
            r"\b(?:doesn'?t|does not|won'?t|will not|can'?t|cannot)\s+(?:work|scale|fit)\b"
            r"[^.?!]*\bbecause\b",
            r"\b(?:rejected|dropped|abandoned)\b[^.?!]*\bbecause\b",
        ),
    ),
    ("rejection", ("option",), _rx(r"\bnot\s+(?:an\s+)?option\b")),
    (
        "rejection",
        ("viable", "feasible", "no-go", "no go"),
        _rx(r"\bnot\s+(?:viable|feasible)\b|\bno[- ]go\b"),
    ),
    ("rejection", (" is out",), _rx(r"\b(?:hack|idea|approach|option|plan) is out\b")),
    # a proposal put off, in reply: "nope, not this week. pin it", "no, not in 2.4"
    (
        "rejection",
        ("no,", "nope", "nah"),
        _rx(r"^(?:no|nope|nah)\b[,.!]*\s+not (?:this|in|for|into|now|right now|today|on)\b"),
    ),
    # one option out for another: "Ledgerly's out, I'm moving to Fakturo"
    (
        "rejection",
        ("'s out", " is out"),
        _rx(
            r"\b[\w-]+(?:'s| is) out,? (?:and )?(?:i'?m|we'?re|i am|we are) (?:moving|switching|going|"
            r"changing) (?:over )?(?:to|with)\b"
        ),
    ),
    # an option dropped in so many words: "we're dropping Clodagh, sad but ..."
    (
        "rejection",
        ("dropping", "ditching", "scrapping", "cancelling", "canceling"),
        _rx(
            r"(?:^|[.;!,]\s*)(?:so |ok(?:ay)?,? |then )?(?:we'?re|i'?m|we are|i am) "
            r"(?:dropping|ditching|scrapping|cancell?ing) (?!(?:off|by|in|out)\b)[\w-]+"
        ),
    ),
    # an option thrown out by its name: "no, scrap caffeine. I pushed for it and ...",
    # "right. scrap the passes, we're doing ...", "no, forget native checksums entirely."
    (
        "rejection",
        ("scrap", "ditch", "bin ", "forget "),
        _rx(
            r"(?:^|[.;!,]\s*)(?:no,? |ok,? |right,? |so |then )?(?:scrap|ditch|bin) (?:the )?"
            r"(?!it\b|that\b|this\b|them\b|those\b|idea\b|plan\b|option\b)[\w.-]+(?: [\w.-]+)?"
            r"(?: for now| then| too)?\s*(?:[.,;!]|$)",
            r"(?:^|[.;!,]\s*)(?:no,? |ok,? |right,? |so |then )?forget "
            r"(?!(?:it|that|this|them|those|the|to|about|what|i|we|you)\b)[\w.-]+(?: [\w.-]+)?"
            r"(?: entirely| completely| then| for now)?\s*(?:[.,;!]|$)",
        ),
    ),
    # a move declined in so many words: "yeah, no. not moving to SwiftData, the iPads
    # decide it", "we're not switching to pnpm" (not "if we're not moving to ...")
    (
        "rejection",
        (
            "not moving",
            "not switching",
            "not migrating",
            "not porting",
            "not upgrading",
            "staying put",
        ),
        _rx(
            r"(?:^|[.;!,]\s*)(?:so |then |ok(?:ay)?,? )?(?:we'?re |we are |i'?m |i am )?not "
            r"(?:moving|switching|migrating|porting|upgrading) (?:over |it |us )?(?:to|onto)\b",
            # a move turned down for what is: "not worth it for £72, we're staying put"
            r"\b(?:we'?re|i'?m|we are|i am) staying put\b",
        ),
    ),
    # gone off an option: "I've gone off them"; a plan called off: "So Leeds is off"
    (
        "rejection",
        ("gone off",),
        _rx(
            r"\b(?:i|we|she|he|they)(?:'ve| have| has|'s) gone off (?:it|them|that|this|those|the)\b"
        ),
    ),
    (  # (its triggers end in a mark: " off" would hide "off the table" from the scan)
        "rejection",
        ("off,", "off.", "off!", "off;"),
        _rx(r"(?:^|[^\w\s,]\s*)so (?:the )?[\w-]+(?: [\w-]+)? (?:is|'s) off[,.!;]"),
    ),
    # "relocation is off the table", "counter-offer declined"
    (
        "rejection",
        ("off the table", "declined"),
        _rx(
            r"\b(?:is|are|'s|'re|that'?s|it'?s|now|then) (?:\w+ )?off the table\b",
            r"\b(?!(?:card|payment|transaction|charge|call|invite)s?\b)[\w-]+ declined\s*(?:[.!]|$)",
        ),
    ),
    # an offer turned down: "we're walking away from the Kona", "we'll pass on that one"
    (
        "rejection",
        ("walk", "pass on", "passing on"),
        _rx(
            r"\b(?:we|i)(?:'re| are|'m| am|'ll| will|'ve| have)? (?:just )?"
            r"(?:walk(?:ing|ed)? away from|pass(?:ing)? on)\b"
        ),
    ),
    # an option thrown out or turned down in so many words: "pt-osc is binned", "no to the
    # new box", "river's a no", "cancel the clock idea"
    (
        "rejection",
        (
            "binned",
            "ditched",
            "scrapped",
            "shelved",
            "canned",
            "no to",
            "a no",
            "non-starter",
            " idea",
            " plan",
            " option",
        ),
        _rx(
            r"\b[\w.-]+(?: [\w.-]+)? (?:is|'s|are|'re|gets?) (?:binned|ditched|scrapped|shelved|canned)\b",
            r"(?:^|[.;!]\s*)(?:so |then |ok(?:ay)?,? |and )?no to (?:the|a|an|that|this|both)\b",
            r"\b[\w-]+(?:'s| is) a (?:no|hard no|non-starter)\b",
            r"\b(?:cancel|scrap|bin|ditch|drop|forget) the [\w -]{1,20}? (?:idea|plan|option)\b",
        ),
    ),
    # an option dropped for now: "no carbon shoe this time", "no new laptop this year"
    (
        "rejection",
        ("this time", "this year", "this round", "this trip", "this season"),
        _rx(
            r"^(?:so |then |ok(?:ay)?,? )?no (?!(?:worries|problem|rush|idea|way|luck|one|need)\b)"
            r"[\w' -]{1,30}? this (?:time|year|round|trip|season)\b"
        ),
    ),
    # task: a task declared done
    (
        "task",
        ("done", "finished", "complete", "shipped", "merged", "deployed", "in place"),
        _rx(
            r"^(?:done|finished|completed|shipped|merged|deployed)\s*(?:[:.!\-\u2014\u2705\u2714]|$|"
            r",\s*(?:thanks?|thank you|cheers|ta)\b|"
            # what was done, reported after it: "done, priya swapped the tuesday"
            r",\s+(?!but\b|except\b|apart\b|mostly\b|almost\b|nearly\b|now\b|what\b|or\b|if\b)"
            r"[a-z]+ (?:swapped|moved|booked|sent|said|signed|paid|added|agreed|confirmed|replied))",
            # what was done, then "done" after a colon: "release cut: done", "docs: done."
            r"^(?:[\w-]+ ){0,2}[\w-]+:\s*(?:done|finished|complete)\b(?=\s*(?:[,.;!\u2714\u2705]|$))",
            r"\b(?:is|are|'s|has been|have been|now|all|that'?s)\s+"
            + _SURELY
            + r"(?:done|finished|"
            # (not done with something, nor how a thing is done: "it's done online")
            r"completed|complete|merged|deployed|shipped|in place)\b"
            r"(?! (?:with|online|through|via|manually|automatically|in person|using)\b)",
            r"\b\w+ (?:done|finished|complete)\b(?=\s*(?:[,.;:!\u2714\u2705]|$))",
            # what was done, then "done" closing the sentence: "redirects and index pages, done"
            # (not a promise: "I'll get four marshals and hire the clock, done")
            r"^(?![^.!?]*\b(?:\w+'ll|will)\b)[^.!?]*\b[a-z]\w*, (?:done|finished)\s*"
            r"(?:[.!\u2714\u2705]|$)",
            r"\bapproved,? (?:and )?merged\b|\bmerged it\b",
            # "deployed, 9d24be0 on the box. done with that one"
            r"\bdone with (?:that|this)(?: one)?\s*(?:[.!]|$)",
        ),
    ),
    # done, said with an idiom: "that's the budget put to bed", "the venue's in the bag"
    (
        "task",
        ("put to bed", "squared away", "nailed down", "ticked off", "in the bag", "wrapped up"),
        _rx(
            r"\b(?:is|are|'s|'re|that'?s (?:the |our |my )?[\w-]+(?: [\w-]+)?) "
            r"(?:put to bed|squared away|nailed down|ticked off|in the bag|wrapped up)\b",
            # the idiom alone, closing the turn: "... and 16 is live on all 6 pods. ticked off"
            r"(?:^|[.;!]\s+)(?:and |so )?(?:ticked off|squared away|put to bed|wrapped up)"
            r"\s*[.!]?$",
        ),
    ),
    # off the list, or out of the door: "merging it, that's the admin page off the list",
    # "security patch is out 👍" (not "the release is out of date")
    (
        "task",
        ("off the list", "off my list", "off our list", " is out", "'s out", "gone out"),
        _rx(
            r"\b(?:is|are|'s|'re|that'?s (?:the |our |my )?[\w-]+(?: [\w-]+)?) off "
            r"(?:the|my|our) (?:list|board)\b",
            r"\b(?:patch|release|fix|hotfix|update|version|build|announcement|newsletter|"
            r"notice|invoice)(?:'s| is| has gone) (?:now )?out\b(?!\s*(?:of|for|to|on|there|yet)\b)",
        ),
    ),
    # a ticket closed: "merged, PLOT-511 closed", "closed the ticket"
    (
        "task",
        ("closed", "closing"),
        _rx(
            r"\b[a-z][a-z0-9]*-\d+ (?:is |now |all )?closed\b(?! (?:as|because|without)\b)",
            r"\b(?:closed|closing) (?:the |that |this |[\w-]+'s )?(?:ticket|issue)\b",
        ),
    ),
    (
        "task",
        ("ordered", "booked", "paid", "sent", "done", "merged"),
        _rx(r"\b(?:everything|all) (?:\w+ )?(?:ordered|booked|paid|sent|done|merged)\b"),
    ),
    # what was done, said first: "Booked all three, free cancellation: ..."
    (
        "task",
        ("booked", "ordered", "paid", "submitted", "reserved", "bought", "signed"),
        _rx(
            r"^(?:(?:ok(?:ay)?|so|and|right|done)[, ]+)?(?:(?:i|we)(?:'ve| have)?\s+)?"
            r"(?:just\s+)?(?:booked|ordered|paid|submitted|reserved|bought|signed)\b"
            r"(?! (?:by|for|out|off|attention|up)\b)"
        ),
    ),
    ("task", ("\u2705", "\u2714", "\u2611"), _rx("[\u2705\u2714\u2611]")),
    # decision: a choice made by its owner
    (
        "decision",
        ("it is",),
        _rx(
            rf"\b(?<!\bas )(?<!\bhow )(?<!\bwhat )(?<!\bwhere )(?<!\bway )"
            rf"(?<!\bwhoever )(?<!\bwhatever )(?<!\bwhichever )"
            rf"{_ANY_ONE}{_WORD}(?: {_ANY_ONE}{_WORD}){{0,3}}(?<!\bas)(?<!\bhow)(?<!\bwhat)(?<!\bwhere)"
            # not "and there it is.", "once I know who it is"
            rf"(?<!\bway)(?<!\bthere)(?<!\bhere)(?<!\bwho) it is\b"
            r"(?! (?:not|a|an|the|what|that|to|in|on|for|\w+ing)\b)"
        ),
    ),
    (
        "decision",
        ("decision", "decided", "verdict", "for real"),
        _rx(
            r"^(?:(?:ok(?:ay)?|right|so|fine)[,.]?\s+)?(?:final\s+)?(?:decision|decided|verdict)"
            r"\s*[:\-\u2014]",
            # the choice made again, and this one holds: "ok. this time for real: calgary."
            r"^(?:(?:ok(?:ay)?|right|so|fine)[,.]?\s+)?(?:this time )?for real(?: this time)?"
            r"\s*[:\u2014]\s*\w",
            r"\b(?:(?:we|i)\s*(?:'ve|have)?\s+)?decided\b(?! (?:to wait|not yet|later))",
            r"\b(?:the|our|final)\s+decision\s+is\b",
        ),
    ),
    # a plan taken by saying it back, after a colon that opens the sentence: "so: four runs
    # and the sunday spin, intervals only once Declan says so", "fine: gel every 25 min from
    # 40 min", "ok so: ask for mqxliff + tmx and a test file"
    (
        "decision",
        ("so:", "fine:", "ok:", "okay:", "right:"),
        # (not a rule said so: "so: don't touch anything else in prod before the report")
        _rx(
            r"^(?:(?:ok(?:ay)?|right)[.,]? )?(?:so|fine|ok(?:ay)?|right):\s*(?=\S)"
            r"(?!(?:don'?t|do not|never|nobody|no one|nothing)\b)"
        ),
    ),
    (
        "decision",
        ("go with", "going with", "stick with", "go for", "going for", "settle on"),
        _rx(
            r"\b(?:let'?s|we'?ll|we will|we're going to|i'?ll|i will)\s+"
            r"(?:go with|stick with|go for|settle on)\b",
            # said as done now: "ok we go with the per-loaf price" (not "if we go with")
            r"(?:^|[,.;:!]\s*)(?:ok(?:ay)?|fine|right|so|then)?[, ]*(?:we|i) (?:go with|stick with|"
            r"settle on)\b",
            r"(?:^|[,.;:!]\s*)(?:ok(?:ay)?|great|fine|good|alright|right|perfect|nice|yes|so)?[, ]*"
            r"(?:go|going) with\b",
            # "forget renting. we're going for the flat" (not "going for a walk")
            r"\b(?:we'?re|i'?m|we are|i am) going for (?:the|option|plan)\b",
        ),
    ),
    # a choice reported made: "we went with Plan B", "I picked the 45", "we're switching. Otis."
    (
        "decision",
        ("went with", "picked", "chose", "opted", "switching", "switched"),
        _rx(
            r"\b(?:we|i)(?:'ve| have)? (?:(?:just |finally )?(?:went|ended up going) with|"
            r"picked|chose|opted for)\b(?! (?:him|her|them|me|us|my|his|their|our|up|out)\b)",
            r"\b(?:we'?re|we are|i'?m|i am) switching\b(?! (?:off|on|over to check)\b)",
            r"\b(?:we|i)(?:'ve| have)? switched to\b",
        ),
    ),
    # a booking ordered: "Yes. Book it.", "ok, right, book Aled, 2 June" (not "I'll
    # book the flights tomorrow": a plan)
    (
        "decision",
        ("book",),
        _rx(
            r"(?:^|[.!?]\s+)(?:(?:yes|ok(?:ay)?|right|fine|so|then)[,.]?\s+){0,2}book "
            r"(?!(?:a|an|some|any|me|us|in|into|now|soon|early|later|tomorrow|online|for|"
            r"with)\b)(?:it|him|her|them|that|this|the \w+|\w+)\b"
        ),
    ),
    (
        "decision",
        ("decide", "lock"),
        _rx(
            r"\blet'?s decide (?:it|that|this|on it)?\s*(?:then|now)?\s*[:\-\u2014]",
            r"\b(?:let'?s )?lock(?:ing)? (?:it|that|this) in\b",
        ),
    ),
    (
        "decision",
        ("let's", "lets"),
        _rx(
            r"\blet'?s (?:do|take|use|keep) (?:that|this|it|option|plan|the (?:first|second|third|"
            r"last|cheaper|simpler|faster|safer))\b"
        ),
    ),
    (
        "decision",
        ("settled", "agreed", "final", "locked", "new rule"),
        _rx(
            r"\bsettled on\b|\bwe agreed\b|\bagreed on\b",
            r"\b(?:layout|plan|setup|choice|design|scope|decision)(?:'s| is)? "
            r"(?:final|settled|locked)\b",
            r"\b(?:new rule|it'?s settled)\b",
        ),
    ),
    ("decision", ("change of plan",), _rx(r"^change of plan\b")),
    # a plan laid out, then owned: "...his edging boards come back by May. that's what
    # we're doing", "that's what we do: worker-scoped fixtures" (not "that's what we do
    # every year", "is that what we're doing?")
    (
        "decision",
        ("that's what", "thats what", "that is what"),
        _rx(
            r"\bthat(?:'?s| is) what (?:we|i)(?:'re| are|'m| am|'ll| will)? ?(?:doing|do|going with)"
            r"(?=\s*(?:[.,;!:\u2014-]|$|then\b|now\b))"
        ),
    ),
    # a matter closed in so many words: "yeah. that's that then, bertie's out"; one side
    # of a trade-off taken: "instagram cosy vs pip having somewhere to lie. pip wins."
    (
        "decision",
        ("that's that", "thats that", "that is that", " wins"),
        _rx(
            r"(?:^|[.;!,]\s*|\band\s+)(?:(?:ok(?:ay)?|right|well|so|yeah)[,.]?\s+)?that(?:'?s| is) that"
            r"(?: then)?\s*(?:[.,;!]|$)(?!,? for now)",
            r"(?:^|[.;!?]\s+)[\w-]+(?: [\w-]+)? wins\s*[.!]",
        ),
    ),
    # a list, a plan or a figure called final: "ok FINAL list: 37 guests, ...", "final
    # answer: the 14:05 train" (not "the final list is due friday")
    (
        "decision",
        ("final ", "final:"),
        _rx(
            r"(?:^|[.;!]\s*)(?:ok(?:ay)?,? |so,? |right,? )?final(?: (?:list|plan|answer|version|"
            r"numbers?|budget|call|decision|line-?up|menu|order|figures?|headcount))?\s*[:\u2014-]",
            # "so final list is 52. locked", "final total comes to £1,834"
            r"\bfinal (?:list|numbers?|budget|headcount|count|total|price|figure|bill)s? "
            r"(?:is|are|=|comes to|came to) (?:at |now )?[\u00a3$\u20ac]?\d",
        ),
    ),
    # a change made in so many words: "we're moving it, wedding is Saturday 3 October",
    # "we're dropping Clodagh, sad but ..." (not "if we're moving it")
    (
        "decision",
        (
            "moving it",
            "doing it",
            "taking it",
            "booking it",
            "reverting",
            "rolling back",
        ),
        _rx(
            r"(?:^|[.;!,]\s*)(?:so |ok(?:ay)?,? |then )?(?:we'?re|i'?m|we are|i am) "
            r"(?:moving|doing|taking|booking) it(?:\s*[.,;!]|$)",
            # a change taken back: "yeah no. we're reverting that. ToneFilter stays"
            r"(?:^|[.;!,]\s*)(?:so |ok(?:ay)?,? |then |no,? )?(?:we'?re|i'?m|we are|i am) "
            r"(?:reverting|rolling back) (?:that|it|this|the [\w-]+(?: [\w-]+)?)(?:\s*[.,;!]|$)",
        ),
    ),
    # a yes given to an offer or a proposal: "I've said yes and sent him the deposit",
    # "I've told her yes", "she said yes to room 14" (not "if she says yes")
    (
        "decision",
        ("said yes", "told him yes", "told her yes", "told them yes"),
        _rx(
            r"\b(?:i|we)(?:'ve| have) (?:said|told (?:him|her|them)) yes\b(?! (?:but|if|when|once)\b)",
            r"(?<!\bif )(?<!\bwhen )(?<!\bonce )(?<!\bunless )\b(?!(?:have|has|had|would|could|might|never|not)\b)[a-z]+ "
            r"said yes to\b",
        ),
    ),
    # the other one, taken: "high window instead, the solid wall version you listed"
    (
        "decision",
        ("instead",),
        _rx(
            r"^(?:(?:ok(?:ay)?|so|fine|right)[, ]+)?(?:the |a |an )?[\w-]+(?: [\w-]+){0,2} instead"
            r"(?=\s*(?:[,.;!\u2014]|$))"
        ),
    ),
    # settled in so many words: "done deal: refund requested, HK-2327 ordered", "we're
    # signing as is", "budget's locked"
    (
        "decision",
        ("done deal", "signing", "locked"),
        _rx(
            r"^(?:it'?s a |a )?done deal\b",
            r"\b(?:we'?re|i'?m|we are|i am) signing\b(?! (?:up|in|off|out)\b)",
            r"\b(?:is|'s|are) (?:now )?locked(?: in)?(?=\s*(?:[,.;!]|$))",
            # said alone: "THAT is the budget. locked in for real this time"
            r"^(?:(?:ok(?:ay)?|right|so|and)[,.]?\s+)?locked(?: in)?(?=\s*(?:[,.;!]|$|now\b|then\b|"
            r"for real\b|for good\b))",
        ),
    ),
    # the proposal taken, in the owner's words: "we add the deletion request in
    # Settings like you described", "let's do it the way you laid out"
    (
        "decision",
        ("you described", "you suggested", "you proposed", "you laid out", "you outlined"),
        _rx(
            r"(?:^|[.;!,]\s*)(?:ok(?:ay)?,? |fine,? |so |then )?(?:we|let'?s|i'?ll|we'?ll) "
            r"[^.?!]{0,80}?\b(?:like|as|the way) you (?:described|suggested|proposed|laid out|"
            r"outlined)\b"
        ),
    ),
    # the proposal taken whole: "fine, we'll do it your way. no kits.", "good. that's what
    # we do: worker-scoped bakery from factories, ..."
    (
        "decision",
        ("your way", "what we do", "what we'll do"),
        _rx(
            r"\b(?:we'?ll|we will|let'?s|i'?ll|we) (?:do it|go) your way\b",
            r"\bthat'?s what we(?:'ll| will)? do\s*[:.!]",
        ),
    ),
    # taken, if not loved: "16,315. I can live with that."
    (
        "confirmation",
        ("live with",),
        _rx(
            r"\b(?:i|we) can live with (?:that|it|this)\b(?!,? (?:if|as long as|provided|once|when)\b)"
        ),
    ),
    # persuaded: "ok you've convinced me", "I'm sold"
    (
        "confirmation",
        ("convinced", "persuaded", "sold"),
        _rx(
            r"\byou'?ve (?:convinced|persuaded) (?:me|us)\b|\b(?:i'?m|we'?re) sold\b(?! (?:on|that)\b)"
        ),
    ),
    (
        "decision",
        (
            "the plan",
            "new plan",
            "final plan",
            "our plan",
            "revised plan",
            " plan",
            "policy",
            "process",
            "routine",
        ),
        _rx(
            r"\bthat'?s (?:the|our) (?:new |final |revised )?plan\b(?! (?:for|to|if|b)\b)",
            # a plan named, said last: "... briefing at the hospice. that's the marshal plan"
            r"\bthat'?s (?:the|our) (?:[\w-]+ ){1,2}plan\s*[.!]?$",
            # a policy named as settled: "ok yes, that's my invoicing policy."
            r"\bthat'?s (?:the|our|my) (?:[\w-]+ ){0,2}(?:policy|process|routine)\s*[.!]?$",
        ),
    ),
    # what was put together, called the one: "GCSE both tiers + KS3. that's the menu",
    # "perfect, that's our split." (not "that's the menu for tonight?")
    (
        "decision",
        (
            "menu",
            "split",
            "schedule",
            "route",
            "itinerary",
            "layout",
            "timetable",
            "rota",
            "line-up",
            "lineup",
            "offer",
            "deal",
            "budget",
            # (not " list" or "list." alone: a word that common would open the way to a
            # confirmation for any "yes." that mentions one)
            "our list",
            "my list",
            "programme",
            "running order",
        ),
        _rx(
            r"\bthat'?s (?:the|our|my) (?:new |final )?(?:menu|split|schedule|route|itinerary|layout|"
            r"timetable|rota|line-?up|offer|deal)\s*[.!]?$",
            # "£500 for drinks and that's the drinks budget", "that's the budget, I'm putting
            # it in the spreadsheet"
            r"\bthat'?s (?:the|our|my) (?:new |final )?(?:[\w-]+ )?budget"
            r"(?:\s*[.!]?$|,\s+(?:i'?m|we'?re|i'?ll|we'?ll)\b)",
            # "rest of it, yes. that's our list", "stephen can keep his halves, thats the
            # programme", "That's it. That's the running order."
            r"\bthat'?s (?:the|our|my) (?:new |final )?(?:[\w-]+ )?(?:list|programme|program|"
            r"running order)\s*[.!]?$",
        ),
    ),
    # (not a date gone back to: "the dashboards go back to January 2024")
    (
        "decision",
        ("back to",),
        _rx(
            r"\bback to (?!(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\b|"
            r"(?:19|20)\d\d\b)(?:[\w.+-]+ )?[\w.+-]*\d"
        ),
    ),
    ("decision", (" out",), _rx(rf"\b{_WORD}(?: back)? in,\s*{_WORD}(?: {_WORD}){{0,2}} out\b")),
    # a setting kept, as a consequence: "so versioning stays on"
    (
        "decision",
        ("stays",),
        _rx(
            r"(?:^|[,.;:]\s*|\b(?:so|then|ok|fine)\s+)(?:the )?(?!(?:it|he|she|they)\b)[\w-]+"
            r"(?: [\w-]+)? stays (?:on|off|in|out|as (?:it )?is|put|where it is)(?=\s*(?:[,.;!]|$))"
        ),
    ),
    ("decision", ("stays",), _KEPT),
    # a proposal taken up in so many words: "yes to that", "yes to the second one"
    (
        "decision",
        ("yes to",),
        _rx(r"(?:^|[.;!]\s*)(?:ok(?:ay)?,? |so )?yes to (?:that|this|the|option|both)\b"),
    ),
    # an offer taken: "We're buying the e-Niro", "4,400? we'll take it"
    (
        "decision",
        ("buying", "take"),
        _rx(
            r"\b(?:we|i)(?:'re| are|'m| am) buying (?:it|them|that|this|the)\b",
            r"\b(?:we|i)(?:'ll| will) take (?:it|them|that|that one|this one|the (?:offer|deal))"
            r"\b(?! (?:to|from|with|out|off|back|up|easy|slow|as|if|into)\b)",
        ),
    ),
    # an earlier choice dropped and another said: "forget the finance, we're paying cash"
    (
        "decision",
        ("forget",),
        _rx(
            r"(?:^|[.;!]\s*|,\s*(?:so|ok(?:ay)?|yeah|right)?\s*)forget (?:about )?(?:the|that)\b"
            # a rule changed ("forget the lowercase thing I said, ... from now on") is an
            # item of the critical block, not a decision
            r"(?![^.;!?]*\b(?:from now on|i said|i asked|i wrote|earlier)\b)"
        ),
    ),
    # a mind changed, said so: "I'm changing my mind. Not Tessel. Brightwater: ..."
    (
        "decision",
        ("my mind",),
        _rx(r"\b(?:i'?m|i'?ve|i have|i am|i) (?:just )?chang(?:ed|ing) my mind\b(?! about\b)"),
    ),
    # a short clause ending on "then": "libdeflater then", "ordering the Orla ones then"
    (
        "decision",
        ("then",),
        _rx(
            rf"(?:^|[,.;:!](?!\d)\s*)(?:(?:ok(?:ay)?|fine|great|right|alright|so|good)\b)?[, ]*"
            rf"(?!(?:and|since|until|till|by|back|what|if|even|but|just|only|ok|okay|i|we|you|"
            rf"it|he|she|they|that|this|there|was|is|not|no|"
            # a request for the next step ("show me the cache code then") decides nothing
            rf"show|tell|give|send|check|look|explain|walk|read|open|find|grep|something|"
            rf"anything|nothing)\b)"
            # (not a time: "152 can sit till then", "it won't have 540 by then")
            rf"{_SAID}(?: {_SAID}){{0,6}}(?<!\btill)(?<!\buntil)(?<!\bby)(?<!\bsince)"
            rf"(?<!\bbefore)(?<!\bafter)(?<!\bfrom) then(?=\s*(?:[,.;!]|$)|: \w)"
        ),
    ),
    # insight: a finding stated
    (
        "insight",
        ("takeaway", "root cause", "answer is", "conclusion is"),
        _rx(
            r"\b(?:so\s+)?the\s+(?:key\s+)?takeaway\s+is\b",
            r"\bthe\s+root\s+cause\s+(?:is|was)\b",
            r"\b(?:so|in short|in summary|to sum up),?\s+the\s+(?:answer|conclusion)\s+is\b",
        ),
    ),
]
# the cues each anchor brings into play
_CUES_OF: dict[str, tuple[int, ...]] = {}
for _index, (_kind, _anchors, _pattern) in enumerate(CUES):
    for _anchor in _anchors:
        _CUES_OF[_anchor] = (*_CUES_OF.get(_anchor, ()), _index)
# an anchor holds every shorter one inside it (" option" holds "option", "final " holds
# "final"): where the scan finds it, the cues of those are tried too
_CUES_OF = {
    anchor: tuple(sorted({i for other, cues in _CUES_OF.items() if other in anchor for i in cues}))
    for anchor in _CUES_OF
}
# in an assistant's answer a check mark decorates a heading or a list; a user's says done
_DECORATION = frozenset("\u2705\u2714\u2611")
# one scan of a turn finds the anchors it holds (an assistant's: of its kinds only, and
# not its decoration), the longest where several start at one place. No anchor may
# start inside another without being inside it (" fix" would hide "fixed"): see the tests
_SCAN = {
    role: any_of(
        {
            a
            for kind, anchors, _ in CUES
            for a in anchors
            if role == "user" or (kind in ASSISTANT_KINDS and a not in _DECORATION)
        }
    )
    for role in ("user", "assistant")
}

CONFIRMATION = _rx(
    r"^(?:yes|yep|yeah|exactly|correct|agreed|confirmed|perfect|lgtm)\b[\s,.!]+"
    r"(?:exactly|thanks|thank you|that'?s (?:it|right)|let'?s do (?:that|it)|do (?:that|it)|"
    r"go ahead|sounds good|perfect|correct)\b",
    r"^(?:yes|yep|exactly|correct|agreed|lgtm)[.!]?$",
    r"^(?:sounds|looks)\s+(?:good|great|right)\b[^?]*$",
    r"^that'?s\s+(?:right|correct|exactly it|exactly right)\b",
    r"^that'?ll do\b(?!\s*(?:for|it)\b)",
)
QUESTION_START = _rx(
    r"^(?:did|does|do|is|are|has|have|should|could|would|can|will|was|were|why|how|what|which|"
    r"shall|isn'?t|aren'?t|doesn'?t)\b"
)
NEGATION_BEFORE = patterns.compile(
    r"\b(?:not|never|no longer|hardly|barely|if|unless|whether|until|once|when|almost|nearly|"
    r"half|isn'?t|aren'?t|wasn'?t)\s+(?:\w+\s+){0,3}$|n't\s+(?:\w+\s+){0,2}$|"
    # "nothing gets agreed on the phone": a rule that nothing is
    r"\b(?:nothing|nobody|no one|none)\s+(?:\w+\s+){0,2}$|"
    # the consequence of a case that may come: "if she says no we cut it, problem solved"
    r"^\W*(?:(?:and|so|but|ok(?:ay)?)\W+)?(?:if|unless|in case)\b[^.!?]*$"
)
# what is not done again about a matter closed for good: "decided, not discussing it again"
_NOT_AGAIN = r"(?:thinking|talking|arguing|discussing|revisiting|going back)\b"
NEGATED_AFTER = patterns.compile(
    # (not "decided, not thinking about it again": `CLOSED_FOR_GOOD`)
    rf"^\W*(?:not(?! {_NOT_AGAIN})|nope|isn'?t|yet)\b|"
    r"^\W*no\b(?!\s+(?:more|errors?|failures?|crash\w*|problems?|issues?|dup\w*|nans?)\b)"
)
FAILURE = patterns.compile(
    r"\b(?:broke|broken|breaks|crash(?:es|ed|ing)?|fail(?:s|ed|ing|ure)?|errors?|exceptions?|"
    r"worse|regress\w*|again|dies|died|dead run|panick?\w*|(?:went|turned|goes|is|came back) red|"
    r"still\s+(?:fail\w*|broken|red|there|"
    r"happening|duplicat\w*|see\w*|get\w*|dies|restart\w*))\b"
)
NO_FAILURE = patterns.compile(
    r"\b(?:no|zero|without|any|never)\s+(?:more\s+)?$|"
    r"\b(?:works?|working|green|passing|passes|running|up|back|fine|healthy|stable|happy)\s+$"
)
# what follows a failure word that names it as the thing fixed: "crash (loop) is fixed"
# ("the error handler's done": a failure word naming a part, the part done)
FIXED_AFTER = patterns.compile(
    r"(?: loops?| [a-z][\w-]*)?(?:'s| (?:is|are|was|were|has been|have been|'s))?"
    r"(?: now| finally| all| properly| actually)? (?:fixed|sorted|solved|resolved|gone|done)\b"
)
HEDGE = _rx(
    r"\b(?:probably|maybe|perhaps|possibly|might|i think|i guess|i bet|i suspect|pretty sure|"
    r"should be|should fix|should work|hopefully|fingers crossed|not celebrating|let'?s see|"
    r"seems to|in theory|in practice|my bet|if (?:so|that)|we'?ll see|i hope|basically|"
    r"practically|as good as|more or less|should do it|should do the trick)\b",
)
# what someone expects to happen, said as sure: a claim resting on it is premature
PREDICTION = _rx(
    r"\b(?:'ll|will|would) (?:obviously|surely|definitely|certainly|clearly) \w+",
    r"\b(?:is|are|'s|'re) bound to\b",
)
PAUSE = _rx(
    r"\b(?:done|that'?s it|that'?ll do|(?<!good )enough|finished|stop(?:ping)?|call it|"
    r"wrap(?:ping)? (?:it )?up)\b"
    r"[^.?!]{0,25}\b(?:(?:for )?(?:today|tonight|the day|the week|this week)|for now)\b",
    # "now" alone pauses only a stop ("stopping now"): "the migration's done now" is done
    r"\b(?:stop(?:ping)?|call it|wrap(?:ping)? (?:it )?up)\b[^.?!]{0,25}\bnow\b",
    # (not "calling it fixed": a fix called so)
    r"\b(?:call it a day|stop here|let'?s stop|calling it(?! (?:fixed|sorted|solved|resolved|"
    r"recovered)\b))\b",
)
# everything called done at once: a roll-call of three things or more ("venue booked, caterer
# booked, cake sorted"), or all of it with a cheer ("ALL SORTED!!", "everything's
# confirmed!!"), celebrates; it closes no one line of work
ROLL_CALL = patterns.compile(
    r"(?:\b[\w']+(?: [\w']+)? (?:sorted|booked|done|confirmed|paid|sent|fixed)[,.!;]+\s*"
    r"(?:and\s+)?){3,}|"
    r"\b(?:all|everything(?:'s| is)?) (?:sorted|done|confirmed|booked)\s*!{2,}"
)
# what a roll-call cannot do without: an item called done (three of them), or a double bang
_ROLL_ITEM = patterns.compile(r" (?:sorted|booked|done|confirmed|paid|sent|fixed)[,.!;]")


def roll_call(lower: str) -> bool:
    """Whether `ROLL_CALL` finds a roll-call in `lower`, tried only where one can be: at
    every word it costs a lookahead over what follows (a tenth of a long turn's fold)."""
    if "!!" not in lower and len(_ROLL_ITEM.findall(lower)) < 3:
        return False
    return ROLL_CALL.search(lower) is not None


# thanks said as a goodnight, not a yes to what was proposed: "perfect, thank you. night x"
GOODNIGHT = patterns.compile(r"[.!,]\s*(?:good ?)?(?:night(?: night)?|nite|bye|bed)\W*(?:x+\W*)?$")
GOODNIGHT_CHARS = 60  # the end of a turn a goodnight is looked for in ("... night!")
# a sign-off that opens a turn ("ok. bed. we're basically sorted now, ...", "night!"):
# what follows it is what is left for next time, not a topic taken up
SIGN_OFF = patterns.compile(
    r"^\W*(?:(?:ok(?:ay)?|right|anyway|right then|and)[,.]?\s+)?(?:bed|bedtime|night|nite|"
    r"good ?night|night night|off to bed|going to bed|i'?m off)\b\s*[.!,]"
)
STOP_HEAD = 200  # the start of a turn a pause is looked for in ("that's it for today, ...")


def stops(text: str) -> bool:
    """Whether a user turn stops for now: it opens with a pause or a sign-off ("that'll
    do for tonight", "ok. bed. ..."), or closes with a goodnight ("... night!")."""
    lower = text.lstrip().lower()
    return bool(
        SIGN_OFF.match(lower)
        or PAUSE.search(lower[:STOP_HEAD])
        or GOODNIGHT.search(lower[-GOODNIGHT_CHARS:])
    )


# a check still to make: "tomorrow: check the later runs were cheap and the job is really dead"
TO_CHECK = patterns.compile(
    r"(?:(?:tomorrow|later|next|monday|first thing|to ?do)\s*:\s*)?(?:pls |please )?"
    r"(?:check|verify|make sure|double[- ]check|see if|find out)\b"
)
# a check still under way: "CI is running again", "the run has started", "checks pending"
RUNNING = patterns.compile(
    r"\b(?:is|are) (?:still )?(?:running|in progress|queued|pending)\b|\brunning again\b|"
    r"\b(?:run|build|job|check|checks|pipeline|ci) (?:has |have )?(?:just )?started\b"
)
NOT_DONE = _rx(
    r"\b(?:not|almost|nearly|half|mostly|partly|largely|isn'?t|aren'?t|once|when|if|until|till)"
    r"\s+(?:[\w']+\s+)?"
    r"(?:done|finished|fixed|merged)\b",
    # what follows a release, said ahead of it: "Once it's deployed, the log should show ..."
    r"\b(?:once|when|if|until|till)\s+(?:it|this|that|the \w+)(?:'s| is| gets| has been) "
    r"(?:deployed|shipped|released|live)\b",
    r"\b(?:done|fixed|merged)\s*,?\s+(?:except|apart from|but|save for)\b",
    # when it is done, as a rule or a plan: "the nightly run is done by 02:30"
    r"\b(?:done|finished|merged|fixed) by (?:\d|(?:mon|tues|wednes|thurs|fri|satur|sun)day\b|"
    r"tomorrow|tonight|noon|midday|midnight|lunch(?:time)?\b|(?:the )?end of|next\b|eod\b)",
    # a status of several things, some of them still open: "merged or open as described"
    r"\b(?:done|finished|fixed|merged|deployed) or (?:open|not|pending|in progress|in review)\b",
    r"\band (?:we'?re|we are|i'?m|it'?s) done\b",
    r"\b(?:nothing|none|neither)\b[^.;]{0,30}\b(?:done|finished|fixed|merged|deployed|shipped)\b",
    # what was done, named rather than declared: "the figures and what was done"
    r"\b(?:what|whatever|which|how much)\s+(?:was|were|is|are|has been|have been|had been|got)\s+"
    r"(?:done|finished|fixed|merged|deployed|shipped)\b",
)
# a task declared done that names what it finishes: "that's the rec done", "the need
# section's done", "PLOT-511 closed" (not "merged it", "all done", "Done: ...")
NAMED_DONE = patterns.compile(
    r"(?<![\w'-])(?:the |this |that |my |our )?(?!(?:it|that|this|these|those|which|what|all|"
    r"everything|both|one|we|i|you|they|he|she)\b)[a-z][\w-]*(?:'s| is| are)? "
    r"(?:done|finished|complete|closed)\b|"
    # the thing in hand, as a whole: "ok that one's done for real: dev push on time, ..."
    r"\b(?:that|this) one(?:'s| is) (?:done|finished|closed)\b"
)
# a turn that opens in mock delight: "oh brilliant. so the harmless bump broke it", "oh
# good, so CI just rolls dice now"; or says so: "what could possibly go wrong"
IRONIC_TURN = _rx(
    r"^(?:oh|ah) (?:good|great|brilliant|wonderful|lovely|perfect|fantastic|joy|marvellous|"
    r"super)\b[,.!]*\s+(?:so|now)\b",
    r"\bwhat could possibly go wrong\b",
    # praise that mocks: "Brilliant plan, really", "can't think why nobody else thought of it"
    r"\b(?:brilliant|great|genius|wonderful|lovely|fantastic|marvellous) (?:plan|idea|move|"
    r"thinking),? (?:really|there|as always)\b",
    r"\bcan'?t (?:think|imagine|see) why (?:nobody|no one) (?:else )?(?:thought of|came up with)\b",
)
# what each way of `IRONIC_TURN` cannot do without (a turn holding none is read no further)
_IRONIC_WORDS = ("wrong", "plan", "idea", "move", "thinking", "why")


def ironic_turn(lower: str) -> bool:
    """Whether `IRONIC_TURN` finds mock delight in `lower`, tried only where it can: its
    praise words are common, and the pattern is tried at each of them."""
    if not lower.startswith(("oh ", "ah ")) and not any(w in lower for w in _IRONIC_WORDS):
        return False
    return IRONIC_TURN.search(lower) is not None


# an ironic mark: the emoji people roll their eyes with, or "/s"
IRONY = patterns.compile(
    "[\U0001f643\U0001f644\U0001f612\U0001f611\U0001f926\U0001f937]|(?<!\\w)/s\\b"
)
# cues that decide only in a turn's first `OPENING_SENTENCES` ("X stays.")
OPENING_ONLY = frozenset({_KEPT})
OPENING_SENTENCES = 2
# a setback met with a mock conclusion: "Well, that's the venue solved then", "Oh brilliant,
# that's that sorted then" (a "well" or an "oh" and praise before "that's ... then")
MOCKED = patterns.compile(
    r"^(?:oh|ah|well)\W+(?:(?:brilliant|great|wonderful|lovely|perfect|fantastic|marvellous|"
    r"super|good)\W+)?that'?s [^.!?]{0,30}\b(?:sorted|solved|done|fixed|settled)\b[^.!?]{0,6}"
    r"\bthen\b"
)
COUNTED = patterns.compile(
    r"\b(\d{1,5})\s*(?:/|of|out of)\s*(\d{1,5})\b(?![.,]\d)(?=\s+(?:[\w-]+\s+)?(?:tests?|checks?|"
    r"green|pass\w*|jobs?|suites?|cases?|specs?|succeed\w*|done|fixed|migrated|merged)\b)"
)
SUMS_UP = patterns.compile(
    r"(?:so |and |ok(?:ay)?,? )?(?:that'?s|that is|this is|those are|these are) "
)
# "works on my machine", and the same said the other way round: "I tried it on my own box
# with vsync off and it's completely smooth", "on my machine it's instant though"
_MINE = r"\bon my (?:own )?(?:machine|laptop|box|computer|pc|mac|desktop)\b"
_FINE = r"\b(?:works?|working|worked|fine|smooth(?:ly)?|instant|perfect(?:ly)?|no problem)\b"
OWN_MACHINE = patterns.compile(rf"{_FINE}[^.!?\n]{{0,40}}{_MINE}|{_MINE}[^.!?\n]{{0,80}}{_FINE}")
QUOTED = skipping(
    r"\"[^\"\n]{1,80}\"|'[^'\n]{2,80}'(?!\w)|`[^`\n]{1,120}`|\u201c[^\u201d]{1,80}\u201d|"
    # a message someone else wrote, pasted in after a colon or on a line of its own:
    # "pasting the important bit:\n\n\"... Hillside have since decided ...\""
    r"(?:(?<=: )|(?<=:\n)|(?<=\n)|^)(?:\"[^\"]{81,4000}\"|\u201c[^\u201d]{81,4000}\u201d)"
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
    r"\bswap(?:ping|ped)?\b",
    r"\brevers\w+\b",
    r"\breplac\w+\b",
    r"\bforget\b",
    r"\bback to\b",
    r"\b(?:drop|dropped|ditch|ditched|scrap|scrapped|abandon|abandoned)\b",
)
ACTION = _rx(
    r"\b(?:fix|fixed|change|changed|add|added|use|set|replace|replaced|switch|remove|removed|"
    r"update|updated|move|moved|wrap|call|store|stored|drop|dropped|keep|compute|hash|create|"
    r"created|rename|delete|patch|patched|install|enable|configure|run|make|made|put|wrote|"
    r"match|matches|is|are|was|were)\b"
)
# words that only say that something concluded, not what: a statement needs more
CUE_WORDS = frozenset(
    terms(
        "ok okay great good nice fine perfect cool yes yep sure thanks thank sorry ugh hm so "
        "then done decided decision fixed solved resolved confirmed answers answer sense "
        "clear it is that this one real least commit push merged ship go with let's lets "
        "tell send sending back lunch call later tomorrow now"
    )
)
# markdown marks: a heading, bullet or quote opener, emphasis around words (not the
# underscores inside an identifier such as fct_order_revenue) and code ticks
_MARKDOWN = patterns.compile(
    r"^\s*(?:#{1,6}\s+|[-*+]\s+|\d+[.)]\s+|>\s*)|`+|(?<!\w)[*_]{1,3}(?=\S)|(?<=\S)[*_]{1,3}(?!\w)"
)
# a turn that only accepts what came before it: the statement leads with what it accepts
ACCEPTS = patterns.compile(
    r"\b(?:answers|makes sense|explains|confirmed|decided|agreed|let'?s do (?:that|it|this)|"
    r"go with (?:that|it|this|your)|sounds good|that'?s (?:it|the (?:root )?cause)|"
    r"numbers match|got it|clear)\b"
)
_FILLER_START = patterns.compile(
    r"^(?:(?:ok(?:ay)?|so|great|nice|good|perfect|right|alright|well|ugh|hm+|ah+|oh|yes(?! to\b)|yep|"
    r"yeah|sorry|cool|wow|fine)\b[\s,.!:;-]*)+"
)


TAKEN_UP_WORDS = 5  # "the night baker then." names a topic in this many words at most
_ASKS = patterns.compile(
    r"\?\s*$|^(?:what|how|why|which|who|where|when|do|does|did|can|could|should|any)\b|"
    # ... or asks for what to choose from: "options then. just list them"
    r"(?:^|\b(?:just|please|pls)\s+)(?:list|show|tell|give|walk|compare|explain)\b"
)


def _takes_up(parts: Sequence[str]) -> bool:
    """Whether a turn opens by naming a topic with "then" and goes on to ask about it
    ("the night baker then. never hired anyone for nights. what do I pay", "options then.
    don't decide for me, just list them"): the topic is taken up, not an option chosen."""
    head = parts[0].rstrip(" .!")
    return (
        len(head.split()) <= TAKEN_UP_WORDS
        and head.endswith(" then")
        and any(_ASKS.search(part) for part in parts[1:])
    )


# a check the user made and reports: "jan-apr all match", "the export is green on my side"
CHECKED = patterns.compile(
    r"\b(?:match|matches|matched|green|passe[sd]|passing|works|worked|identical|same as)\b"
)


def _still_running(said: str) -> bool:
    """Whether the end of `said` (the assistant's turn before) says a check is still
    under way: a fix called then is called before its evidence is in."""
    return bool(RUNNING.search(said[-200:].lower()))


# an answer accepted as the answer, in so many words (not "makes sense", "got it")
NAMES_ANSWERED = patterns.compile(
    r"\bthat answers\b|\bthat explains\b|\bmystery solved\b|\bsettles it\b|"
    r"\bthat'?s (?:the|my|exactly the) (?:answer|explanation)\b"
)


def _partial(text: str) -> bool:
    """Some of a whole, counted: "13 of 14 tests green", "9/10 pass" is not all of it."""
    return any(int(part) < int(whole) for part, whole in COUNTED.findall(text))


# a matter closed for good, before its "again" (no failure): "decided, not discussing it
# again", "fixed, never again"
CLOSED_FOR_GOOD = patterns.compile(rf"\b(?:(?:not|never) {_NOT_AGAIN}[^.!?]{{0,30}}|never )$")


def _has_failure(text: str) -> bool:
    """A failure word in `text` that is not negated ("no more errors" is not a failure)
    nor the thing said to be fixed ("that's the crash sorted", "the panic is fixed"),
    nor the "again" of a matter closed for good (`CLOSED_FOR_GOOD`)."""
    return any(
        not NO_FAILURE.search(text[: match.start()])
        and not FIXED_AFTER.match(text, match.end())
        and not (match.group() == "again" and CLOSED_FOR_GOOD.search(text[: match.start()]))
        for match in FAILURE.finditer(text)
    )


def _reports_failure(answer: str) -> bool:
    """Whether an answer opens on a failure still there ("Still crashing, different
    error though: ...", "The failure isn't a timeout at all."): what it explains is a
    step towards a fix, not the end of a line of reasoning."""
    first = sentences(answer[:400])
    return bool(first) and _has_failure(plain(first[0]).lower())


def _is_question(sentence: str, cue_end: int) -> bool:
    if sentence.rstrip().endswith("?"):
        return True
    if sentence[cue_end : cue_end + 3].lstrip().startswith("?"):
        return True
    return bool(QUESTION_START.match(sentence))


TAKEN_BACK = "so much for"  # said of a conclusion to take it back ("so much for sorted")


def _negated(sentence: str, cue_start: int, cue_end: int) -> bool:
    """Whether a cue is negated, supposed or taken back where it stands: "not fixed",
    "if it's merged", "so much for sorted" (the cue read may begin with those words)."""
    after = sentence[cue_end:]
    return (
        bool(NEGATION_BEFORE.search(sentence[:cue_start]))
        # (what follows a colon is what was decided: "change of plan: no overpaying")
        or (not after.lstrip().startswith(":") and bool(NEGATED_AFTER.match(after)))
        or TAKEN_BACK in sentence[max(0, cue_start - len(TAKEN_BACK) - 1) : cue_end]
    )


def plain(text: str) -> str:
    """A sentence without markdown marks (headings, bullets, emphasis, code ticks)."""
    return " ".join(_MARKDOWN.sub("", text).split())


def specifics(text: str) -> int:
    """How many terms of `text` say what, beyond the words that only conclude."""
    return sum(1 for t in set(terms(text)) if t not in CUE_WORDS) + sum(
        1 for w in text.split() if any(c.isdigit() for c in w)
    )


# an option an answer lays out as an item of a list, led by its name in bold:
# "1. **Roll them back to 1.3.2**: put the manifest back ..."
_OPTION = patterns.compile(
    r"^\s*(?:\d{1,2}[.)]|[-*\u2022])\s+\*\*([^*\n]{2,80})\*\*([^\n]*)", re.MULTILINE
)
_CHOOSING = patterns.compile(
    r"^(?:(?:so|ok(?:ay)?|then|right|fine|yes|yeah|go with|do|let'?s do)\b[\s,]*)*"
)
_NOT_CHOSEN = patterns.compile(
    r"\b(?:not|no|never|without|off[- ]limits|out|frozen|nope|won'?t|can'?t|isn'?t|doesn'?t|"
    r"don'?t|rather not)\b|n't\b|"
    # put off, not chosen: "ok, drift is tomorrow's job", "the cache can wait till monday"
    r"\b(?:tomorrow'?s|next week'?s|monday'?s) (?:job|problem|thing)\b|\bcan wait\b|"
    r"\b(?:later|another day|next week)\s*[.!]?$"
)
OPTION_NAME = 60  # characters: a labelled option's name, set apart by a colon ...
OPTION_NAME_WORDS = 3  # ... said alone when it has this many words (else with what follows)
OPTION_CHARS = 160  # ... else its first sentence, cut to this
LABELS_BACK = 4  # the turns back in which options laid out by label may be chosen
CHOSEN_WORDS = 5  # a choice named alone: "So CBOR.", "Roll them back."
_WORD_GOES_ON = patterns.compile(r"[\w']")  # a word, or its "'s", goes on here
SHORTENED = 4  # letters an option's first word is named by at least ("noda", "NodaTime")


def option_chosen(sentence: str, answer: str) -> str | None:
    """The option of those `answer` lays out (two or more, each a list item led by its
    name in bold) that `sentence`, a short reply, names by the first word of its name
    (a word no other option's name starts with): "So CBOR." after "3. **CBOR instead of
    JSON**: saves about 15 KiB". The option as the answer says it (its name and the
    first sentence after it); None when it names none, or turns one down ("Bigger slot
    is off limits")."""
    lower = sentence.lower().strip().rstrip(".!")
    said = _CHOOSING.sub("", lower)
    labelled = _by_label(sentence.strip()[len(lower) - len(said) :], answer)
    if labelled is not None and not _NOT_CHOSEN.search(said) and not lower.endswith("?"):
        return labelled
    words = said.split()
    if not words or lower.endswith("?"):
        return None
    options = _OPTION.findall(answer)
    if len(options) < 2:
        return None
    for name, rest in options:  # named whole, two words or more: "final notice for the rest"
        named = plain(name).lower().strip(" :.,")
        if (
            len(named.split()) >= 2
            and said.startswith(named)
            # a name whole: "the drive", not "the drive's too small"
            and not _WORD_GOES_ON.match(said, len(named))
            and not _NOT_CHOSEN.search(re.split(r"[,.;!]", said[len(named) :])[0])
        ):
            return _option(name, rest)
    if len(words) > CHOSEN_WORDS or _NOT_CHOSEN.search(said):
        return None
    firsts = [name.lower().split()[0].strip(",.:;") for name, _ in options]
    named = words[0].strip(",.:;")
    if firsts.count(named) != 1:  # none, or more than one, start with it: then the one
        # whose first word it shortens ("noda" for "NodaTime"), if only one
        short = [i for i, first in enumerate(firsts) if first.startswith(named)]
        if len(named) < SHORTENED or len(short) != 1:
            return None
        return _option(*options[short[0]])
    return _option(*options[firsts.index(named)])


def _option(name: str, rest: str) -> str:
    """An option as the answer says it: its name and the first sentence after it."""
    after = sentences(rest)[0] if rest.strip() else ""
    joint = " " if after and rest[:1].isspace() else ""
    return plain(" ".join(name.split()) + joint + after)


# an option an answer labels with a letter or a number: "**A. Drop the workshop:** -£9",
# "2. **Two fifth beds**: ...", "- **Option B** - packed lunches"
_LABELLED = patterns.compile(
    r"^\s*(?:[-*\u2022]\s+)?(?:\*\*)?(?:[Oo]ption\s+)?([A-H]|\d{1,2})"
    r"(?:[.):](?:\*\*)?|\*\*\s*[.):\-\u2013\u2014])\s+"
    r"(?:\*\*)?([^\n]{2,240})",
    re.MULTILINE,
)
# a reply that chooses by label: "2.", "B and C, and £330 to parents", "#3 please"
_LABEL_REPLY = patterns.compile(
    r"^(?:option\s+|#)?([A-H]|\d{1,2})(?:\s*(?:and|&|\+|,)\s*(?:option\s+|#)?([A-H]|\d{1,2}))?"
    r"(?=[.,:;)]?!*(?:\s|$))"
)


def _by_label(reply: str, answer: str) -> str | None:
    """The options of those `answer` labels (two or more, "A." or "2.") that `reply`
    opens by naming their labels ("B and C, ..."), as the answer says them; None when
    it names none of them (a capital letter alone is a label; "a" is an article)."""
    found = _LABEL_REPLY.match(reply)
    if found is None:
        return None
    options = {label.lower(): _option_text(text) for label, text in _LABELLED.findall(answer)}
    if len(options) < 2:
        return None
    chosen = [label.lower() for label in found.groups() if label]
    if not all(label in options for label in chosen):
        return None
    return "; ".join(options[label] for label in chosen)


def _option_text(line: str) -> str:
    """What a labelled option says: its name when one of a few words is set apart ("Drop
    the workshop: -£9"), else its first sentence, a name of a word with what follows
    ("Brightwater: remote from Leeds, ...", "make the whole dinner gluten-free, ...")."""
    said = plain(line)
    name, colon, rest = said.partition(":")
    if (
        colon
        and len(name) <= OPTION_NAME
        and (len(name.split()) >= OPTION_NAME_WORDS or not rest.strip())
    ):
        return name.strip()
    first = sentences(said)
    return clip(first[0] if first else said, OPTION_CHARS)


# a sentence that opens on a label ("option B!! ...", "2. checked with the hostel"): only
# then are the answers before the last read for labelled options (`_laid_out`)
_LABEL_NEAR = patterns.compile(
    r"(?:^|[.!?]\s+)(?:option\s+|#)?(?:[A-H]|\d{1,2})(?=[.,:;)]?!*(?:\s|$))"
)


def _laid_out(before: Sequence[tuple[str, str]]) -> str | None:
    """The answer before the last that labels options ("**Option A**: ..."), when the
    user asked about them since: "option B!! I love that" answers the options after a
    question about one of them was answered."""
    answers = [text for role, text in before[-LABELS_BACK:-1] if role == "assistant"]
    for text in reversed(answers):
        if len(_LABELLED.findall(text)) >= 2:
            return text
    return None


def lead(text: str, limit: int = 2) -> str:
    """What a proposal or finding says: its first sentences that state something (a
    heading, a question or a line of code is skipped), markdown removed."""
    return " ".join(lead_sentences(text, limit))


def lead_sentences(text: str, limit: int = 2) -> list[str]:
    """The sentences of `lead`."""
    chosen: list[str] = []
    for sentence in sentences(text[:LONG_ANSWER]):
        if sentence.startswith(("```", "$ ", "|", "[tool_use]")) or sentence.endswith("?"):
            continue
        cleaned = plain(sentence)
        if len(terms(cleaned)) < 3 or cleaned.endswith(":"):
            continue
        chosen.append(cleaned)
        if len(chosen) >= limit:
            break
    return chosen


def clip(text: str, limit: int = STATEMENT_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "\u2026"


def own_words(originals: list[str], index: int) -> str:
    """The cue sentence, and while what is kept says little, up to two after it,
    without greetings, fillers, questions and pauses: what the turn itself settles."""
    own: list[str] = []
    for sentence in originals[index : index + 3]:
        if own and specifics(" ".join(own)) >= RICH:
            break
        cleaned = _settling(sentence)
        if cleaned:
            own.append(cleaned)
    # a cue that sums up what the turn just said ("...3 hours on the 16th. That's the
    # new plan."): the sentences before it say what
    sums_up = SUMS_UP.match(_FILLER_START.sub("", plain(originals[index])).lower())
    # ...or a cue that closes the turn saying nothing itself ("... live on all 6 pods.
    # ticked off")
    cue = originals[index]
    closing = (
        index == len(originals) - 1
        and specifics(cue) < 2
        and not ACCEPTS.search(cue.lower())  # "sorted, go with that" says what it accepts
    )
    for sentence in reversed(originals[max(0, index - 2) : index] if sums_up or closing else []):
        if specifics(" ".join(own)) >= RICH:
            break
        cleaned = _settling(sentence)
        if not cleaned or (closing and not sums_up and specifics(cleaned) < 2):
            break
        own.insert(0, cleaned)
    return clip(" ".join(own) or plain(originals[index]))


def _settling(sentence: str) -> str:
    """A sentence of a turn without its greeting or filler, or "" when it settles
    nothing (a question, a pause)."""
    cleaned = _FILLER_START.sub("", plain(sentence)).strip()
    if not cleaned or sentence.rstrip().endswith("?") or PAUSE.search(cleaned.lower()):
        return ""
    return cleaned


def statement(
    said: str, before: Sequence[tuple[str, str]], kind: str = "", opening: Sequence[str] = ()
) -> str:
    """The conclusion as a reusable statement: what the turn says, led by what it
    accepts (the latest assistant turn before it) when it accepts an answer or a
    finding ("that answers it", "confirmed", "decided") or says little itself. Of an
    answer that laid out options, what is accepted is the one the turn names, in what
    it said or in its `opening` sentences ("noda. ... decided, wire it in tomorrow")."""
    rich = specifics(said) >= RICH
    accepting = kind in ("answer", "confirmation") or (
        not rich and bool(ACCEPTS.search(said.lower()))
    )
    if rich and not accepting:
        return said
    accepted = next((t for role, t in reversed(before) if role == "assistant"), None)
    # of an answer that laid out options, the one the turn names ("ok, protobuf then")
    named = (
        next(
            filter(None, (option_chosen(s, accepted) for s in [*sentences(said)[:3], *opening])),
            None,
        )
        if accepted and "**" in accepted
        else None
    )
    found = named or (lead(accepted) if accepted else "")
    if not found or not said:
        return clip(found or said)
    if accepting:  # what is accepted says what; the acceptance follows
        return clip(f"{found} ({said})")
    return clip(f"{said} \u2014 {found}")  # what was settled, then its context


def _before(previous: tuple[str, str] | Sequence[tuple[str, str]] | None) -> list[tuple[str, str]]:
    if previous is None:
        return []
    if isinstance(previous, tuple) and len(previous) == 2 and isinstance(previous[0], str):
        return [previous]
    return list(previous)


_MARK = 0xE000  # a quoted span stands as one private-use character while cues are read
_MARKS = patterns.compile("[\ue000-\uf8ff]")


def _masked(text: str) -> tuple[str, list[str]]:
    """`text` with each quoted span (`QUOTED`) as one mark that no cue reads, and the
    spans, in order; a text that holds such characters itself has its spans blanked."""
    if not text.isascii() and _MARKS.search(text):
        return QUOTED.sub(" ", text), []
    spans: list[str] = []

    def mark(match: re.Match[str]) -> str:
        if len(spans) > 0xF8FF - _MARK:
            return " "
        spans.append(match.group())
        return chr(_MARK + len(spans) - 1)

    return QUOTED.sub(mark, text), spans


def _unmasked(text: str, spans: list[str]) -> str:
    """`text` with its marks (`_masked`) back as the spans they stand for."""
    return _MARKS.sub(lambda m: spans[ord(m.group()) - _MARK], text) if spans else text


_SENTENCE_START = patterns.compile(r"[.!?]\s+(?=\S)")
_WORD_START = patterns.compile(r"\s+(?=\S)")


def _from_sentence(tail: str) -> str:
    """The end of a long line from its first whole sentence (or word): a line cut
    anywhere reads "hings stand overall: ..." for "Where things stand overall: ..."."""
    found = _SENTENCE_START.search(tail) or _WORD_START.search(tail)
    return tail[found.end() :] if found else tail


def detect(
    turn: int,
    role: str,
    text: str,
    previous: tuple[str, str] | Sequence[tuple[str, str]] | None = None,
) -> Conclusion | None:
    """The conclusion `text` states, or None. `previous`: the (role, text) turns before
    it, oldest first (or just the one before)."""
    if role not in ("user", "assistant") or not text.strip():
        return None
    before = _before(previous)
    if not before and turn <= 1:
        return None  # what the first turn of all says decided is where the talk starts
        # ("we've decided to adopt a dog. where do we even start"), no line concluded
    limit = LONG_TURN if role == "user" else LONG_ANSWER
    if len(text) > limit:
        # conclusions open or close a long turn; its middle is code, logs or detail. Cut
        # at line breaks: a line cut in two reads wrong ("When it's done:" as "en it's done:")
        head, tail = text[: limit // 2], text[-limit // 2 :]
        head = head[: head.rindex("\n")] if "\n" in head else head
        tail = tail[tail.index("\n") + 1 :] if "\n" in tail else _from_sentence(tail)
        text = head + "\n" + tail
    # what is quoted (a commit message, a command) is not said by the speaker; it is
    # kept for the statement ("Six tests pass (`WorkerTest` with a fake 401)")
    spoken, spans = _masked(text)
    lower = spoken.lower()
    last_role = before[-1][0] if before else None
    confirming = role == "user" and last_role == "assistant"
    if "on my " in lower and OWN_MACHINE.search(lower):
        return None
    if role == "user" and (ironic_turn(lower) or roll_call(lower)):
        return None
    hits = set(_SCAN[role].findall(lower))
    offered = confirming and "**" in before[-1][1]  # options laid out, one may be named
    # options laid out a question or two back, read only when the turn opens on a label
    laid_out = _laid_out(before) if confirming and _LABEL_NEAR.search(text[:400]) else None
    if (
        not hits
        and not offered
        and not laid_out
        and not (confirming and CONFIRMATION.search(lower[:80]))
    ):
        return None
    if role == "assistant" and last_role == "user" and stops(before[-1][1]):
        return None  # the recap that answers "that'll do for tonight" settles nothing new
    factor = 1.0 if role == "user" else ASSISTANT_FACTOR
    originals = sentences(spoken)
    parts = [s.lower() for s in originals]
    done: Conclusion | None = None  # a task done or an option thrown out, unless a later
    # sentence verifies a fix or takes an option
    for index, sentence in enumerate(parts):
        wanted: set[int] = set()
        for hit in hits:
            if hit in sentence:
                wanted.update(_CUES_OF[hit])
        cues = [
            CUES[i][::2] for i in sorted(wanted) if role == "user" or CUES[i][0] in ASSISTANT_KINDS
        ]
        if not cues or HEDGE.search(sentence) or is_record(sentence) or TO_CHECK.match(sentence):
            continue  # (a pasted record: "MOT test 14 October 2025 — PASS — ...")
        if index and PREDICTION.search(parts[index - 1]):
            continue  # "they'll obviously go to 70. salary sorted.": not yet
        following = parts[index + 1] if index + 1 < len(parts) else ""
        if following.startswith(("no wait", "wait", "no,", "nope", "not really", "not quite")):
            continue
        if IRONY.search(sentence) or IRONY.search(following[:12]):
            continue  # "budget sorted then, we'll fix the toasters with our teeth 🙃"
        opening = parts[index - 1] + " " if index and len(parts[index - 1]) <= 12 else ""
        if role == "user" and MOCKED.search(opening + sentence):
            continue  # "Well. that's fixed then", after news that it is not
        for kind, pattern in cues:
            match = pattern.search(sentence)
            if match is None:
                continue
            if index >= OPENING_SENTENCES and pattern in OPENING_ONLY:
                continue
            if _is_question(sentence, match.end()) or _negated(
                sentence, match.start(), match.end()
            ):
                continue
            if kind != "answer" and _has_failure(sentence):
                continue  # "great, NaN again, love it", "that fixed it, but now it crashes"
            if (
                kind == "answer"
                and confirming
                and not NAMES_ANSWERED.search(sentence)
                and _reports_failure(before[-1][1])
            ):
                continue  # "makes sense. do it" to "Still failing, another error: ...": a
                # step of a fix (the fix concludes when it is seen to work); "that answers
                # it" says the question was, whatever failure the answer explains
            if (
                kind == "resolution"
                and confirming
                and _still_running(before[-1][1])
                and not CHECKED.search(" ".join(parts[:index]))
            ):
                continue  # "CI is running again." / "Nice. That's CI fixed then." (not
                # after a check of the user's own: "jan-apr all match. that's fixed")
            if kind in DONE and _has_failure(following) and not following.rstrip().endswith("?"):
                continue  # "the run finished. still red, different error" (a question
                # after it, "what was the commit for that error again?", reports none)
            if kind in DONE and _partial(sentence):
                continue  # "13 of 14 tests green": not yet
            if kind in ("task", "resolution", "decision") and (
                PAUSE.search(sentence) or NOT_DONE.search(sentence)
            ):
                continue
            if kind == "task" and specifics(sentence) < 2 and PAUSE.search(lower):
                continue  # "that's it for today" with nothing else done
            if kind == "decision" and index == 0 and _takes_up(parts):
                continue  # "the night baker then. what do I pay?": a topic taken up
            said = _unmasked(own_words(originals, index), spans)
            article = "an" if role == "assistant" else "a"
            reason = f"{kind} cue '{match.group().strip()}' in {article} {role} turn"
            confidence = round(CONFIDENCE[kind] * factor, 3)
            found = Conclusion(
                statement(
                    said,
                    before,
                    kind,
                    [_unmasked(o, spans) for o in originals[: min(index, OPENING_SENTENCES)]],
                ),
                turn,
                kind,
                confidence,
                reason,
                role,
                said,
            )
            if kind in ("task", "rejection") and done is None:
                # a fix the turn goes on to verify is what it concludes: "signed it back
                # in, it synced once. ok, THAT is the battery thing fixed"; so is the option
                # taken after one thrown out: "scrap the lease. we're going for unit 2"
                done = found
                break
            if (
                done is None
                or kind == "resolution"
                or (done.kind == "rejection" and kind == "decision")
            ):
                return found
            return done
    if done is not None:
        return done
    # one of the options the answer laid out, named: "So CBOR." (not a stop: "done for now"
    # after a recap of what is **Done:** and what is **Open:**)
    if (offered or laid_out) and not PAUSE.search(lower):
        for index, sentence in enumerate(originals[:4]):
            option = option_chosen(_unmasked(sentence, spans), before[-1][1]) if offered else None
            if option is None and laid_out:  # by its label, a question or two later
                option = _by_label(_unmasked(sentence, spans).strip(), laid_out)
            if option is not None and not HEDGE.search(sentence.lower()):
                said = _unmasked(own_words(originals, index), spans)
                return Conclusion(
                    clip(f"{said} \u2014 {option}"),
                    turn,
                    "decision",
                    CONFIDENCE["decision"],
                    f"user chose the option '{option}' the answer before laid out",
                    role,
                    said,
                )
    if confirming and (hits or CONFIRMATION.search(lower[:80])):
        match = CONFIRMATION.search(parts[0] if parts else "")
        if (
            match
            and not text.rstrip().endswith("?")
            and not _has_failure(lower)
            and not PAUSE.search(lower)
            and not GOODNIGHT.search(lower)
        ):
            confidence = CONFIDENCE["confirmation"]
            accepted = before[-1][1]
            if accepted.rstrip().endswith("?"):
                confidence -= 0.1  # a yes to a question decides less than a yes to a plan
            return Conclusion(
                clip(lead(accepted) or plain(accepted)),
                turn,
                "confirmation",
                round(confidence, 3),
                f"user confirmed the proposal before it ('{match.group().strip(' ,.!')}')",
            )
    return None


def reported(found: Mapping[str, object]) -> bool:
    """Whether a conclusion is an agent's report that a fix works ("All green: 5c0e8f3 is
    built and rolled out"): a fix concludes when its user confirms it, so a segment that
    ends on such a report is open; the report is kept, and the vault writes it down."""
    return found.get("kind") == "resolution" and str(found.get("reason", "")).endswith(
        " assistant turn"
    )


def subject(text: str) -> set[str]:
    """The content terms of a conclusion, for matching it with later ones."""
    return set(terms(text))


def with_reversals(found: Conclusion, turn: str) -> Conclusion:
    """`found` with the sentences of its turn that reverse something ("Forget Two Lads.")
    added to its text, as `supersedes` reads it: the statement is the decision
    ("Decided: Kingsdown, Friday"), what it drops may be said beside it."""
    dropped = [s for s in sentences(turn) if REVERSAL.search(s.lower())]
    if not dropped:
        return found
    said = " ".join([found.said, *dropped]) if found.said else ""
    return replace(found, text=" ".join([found.text, *dropped]), said=said)


# what a turn drops by name: "yeah scrap FCM.", "Not Tessel.", "bin sidekiq-unique-jobs"
DROPPED = patterns.compile(
    r"\b(?:scrap|scrapped|ditch|ditched|drop|dropped|bin|binned|forget|abandon|abandoned|not|no)"
    r"\s+(?:the |that |those |this |my |our |any )?([a-z][\w.+-]*)"
)


@lru_cache(maxsize=256)  # asked of one turn once for every decision it may reverse
def dropped(text: str) -> frozenset[str]:
    """The terms of the things `text` drops by name ("scrap FCM" -> {"fcm"})."""
    return frozenset(t for match in DROPPED.finditer(text.lower()) for t in terms(match.group(1)))


def supersedes(later: Conclusion, earlier: Conclusion) -> bool:
    """True when `later` reverses `earlier`: both decide, on the same subject, or `later`
    drops by name what `earlier` chose ("push it is, FCM" then "yeah scrap FCM.
    workmanager it is"), a rejection too."""
    if later.kind not in (*DECIDED, "rejection") or earlier.kind not in DECIDED:
        return False
    a, b = subject(later.text), subject(earlier.text)
    if not a or not b:
        return False
    if dropped(later.said or later.text) & subject(earlier.said or earlier.text):
        return True
    if later.kind == "rejection":
        return False
    shared = len(a & b)
    overlap = shared / min(len(a), len(b))
    if REVERSAL.search(later.text.lower()):
        return shared >= 2 or (shared >= 1 and min(len(a), len(b)) <= 4)
    return overlap >= 0.5 and a != b


def same_subject(later: str, earlier: str, common: Callable[[str], bool] | None = None) -> bool:
    """Whether two conclusions are about the same thing: they share at least two of the
    terms that say what (not the words that only conclude, nor, by `common`, the words
    the whole conversation uses), a good part of the shorter."""
    a, b = what(later, common), what(earlier, common)
    shared = len(a & b)
    return shared >= 2 and shared >= 0.2 * min(len(a), len(b))


def what(text: str, common: Callable[[str], bool] | None = None) -> set[str]:
    """The terms of a conclusion that say what it concludes: not the words that only
    conclude ("done", "fixed"), nor, by `common`, the words of the whole conversation."""
    return {t for t in subject(text) if t not in CUE_WORDS and not (common and common(t))}


def echoes(later: Conclusion, earlier: dict[str, object]) -> bool:
    """Whether `later` only says again what `earlier` concluded (the nightly run green
    after the fix, "merged" after "done"): the same kind, mostly the same terms."""
    if later.kind != earlier.get("kind") or later.kind in ("decision", "confirmation"):
        return False
    a = what(later.said or later.text)
    b = what(str(earlier.get("said") or earlier.get("text", "")))
    if not a or not b:
        return False
    shared = len(a & b)
    return shared >= 3 and shared >= 0.4 * min(len(a), len(b))
