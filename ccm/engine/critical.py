"""Critical context: the rules a user lays down, however they are phrased.

Critical items are never compressed, never displaced, and always given to the model
first. They come from what the user (or a system prompt) says and from explicit marks
(``ccm critical SESSION --add``). Assistant turns are not scanned: an assistant
explaining that "you must restart" is advice, not a user's rule. Nor are turns whose
source names the person who said them (a conversation between people, as LoCoMo's):
"make sure you take care of yourself" is care between friends, not a rule.

A rule is recognised by what it does, not by a few words: it obliges or forbids
("must", "has to", "can't", "don't", "no X in Y", "leave X alone"), it sets a limit or
a deadline ("hard budget: €4,200", "max one stop", "by Friday 15 May"), it says the
speaker's standing preference or condition ("I prefer", "I'm allergic", "I get motion
sick"), it is flagged as one ("important:", "heads up:", "that's non-negotiable",
"ground rules:", "from now on", "whatever we do"), or it changes an earlier one
("P0 now, not P1", "forget matte black, brushed brass"). Each cue has a weight; a
sentence whose cues weigh enough is a rule, unless it is a question, a hedge or a
guess ("X must be undercounting"). A one-off request ("commit it", "run the tests")
obliges nothing beyond the next step and weighs too little on its own.

The item is the whole statement: the paragraph or list item that holds the rule when
it is short (the rule comes with its reason: "no unwrap() in library code. logq-core
gets embedded by the ingest team..."), else the rule sentence with its neighbours.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Set
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

from ccm import patterns
from ccm.engine.text import is_record, root, sentences, skipping, terms

# -- cues, matched against a lowercased sentence ------------------------------------

# a clause opens at the start of a sentence or after a colon, dash, comma or "so/and"
# a clause opens at the start of a sentence or after a colon, dash, comma or "so/and";
# these are searched just before a cue that must open one
# when something is due: "by Friday", "by the end of May", "by the 6th", "by 1 September"
_BY_WHEN = (
    r"by (?:(?:mon|tues|wednes|thurs|fri|satur|sun)day|tomorrow|tonight|noon|midday|eod|"
    r"end of|the end|the \d|\d)"
)
_OPENS = patterns.compile(
    r"(?:[:;,()\u2014\u2013]\s*|\s-\s|\b(?:so|and|but|also|then|pls|please)\s+|"
    r"(?:^|[:;,()\u2014\u2013]\s*)(?:no[,.!]? )+|"  # "no no don't touch the theme colours"
    r"(?:^|[:;,()\u2014\u2013]\s*)just\s+)$"  # "just don't restart anything" (not "i just don't")
)
_OPENS_STRICT = patterns.compile(
    r"(?:[:;,()\u2014\u2013]\s*|\s-\s|\b(?:so|but|pls|please)\s+|"
    # "and" only where it opens the sentence: "oh and keep your answers short" (not "I
    # restarted it and keep getting 502s")
    r"(?:^|[:;,\u2014]\s*)(?:oh,? |ah,? )?and\s+)$"
)
_OPENS_LIMIT = patterns.compile(
    r"(?:[:;\u2014]\s*|\b(?:so|and|but|also|pls|please|means|meaning)\s+)$"
)


@dataclass(frozen=True)
class Cue:
    """One way of saying something that binds: `pattern`, searched only in a sentence
    holding one of `triggers` (a set intersection costs far less than a regular
    expression scanning the sentence, and most sentences hold none), and, with
    `opens`, only where a clause opens just before it."""

    name: str
    triggers: frozenset[str]
    pattern: re.Pattern[str]
    opens: re.Pattern[str] | None = None
    requires: tuple[str, ...] = ()  # one of these must be in the sentence too

    def found(self, lower: str, held: set[str]) -> bool:
        if held.isdisjoint(self.triggers):
            return False
        if self.requires and not any(part in lower for part in self.requires):
            return False
        for match in self.pattern.finditer(lower):
            start = match.start()
            if self.opens is None or start == 0:
                return True
            if self.opens.search(lower, max(0, start - 14), start):
                return True
        return False


def _cue(
    name: str,
    triggers: str,
    pattern: str,
    opens: re.Pattern[str] | None = None,
    requires: tuple[str, ...] = (),
) -> Cue:
    return Cue(name, frozenset(triggers.split()), skipping(pattern), opens, requires)


# nobody doing something, said as the way things are ("nobody git pulls on those boxes"),
# not what nobody knew or did
# "nobody deploys by hand", "no one git pulls on those boxes" (a verb of two words)
_NOT_DONE = (
    r"(?!(?:knows|cares|noticed|saw|said|told|asked|remembers|else|has|had|was|is|wants|"
    r"likes|uses|reads|really|seems|thinks|believes|understands|gets it)\b)"
)
_NOBODY_DOES = rf"(?:nobody|no one|no-one) (?:{_NOT_DONE}[a-z]+ )?{_NOT_DONE}[a-z]+s\b"
_NOT_NEVER = (
    r"(?! (?:\w+ed|told|said|went|did|had|got|been|forget|made|saw|knew|thought|heard|came|"
    r"took|gave|found|felt|left|ran|wrote|the|a|an|same|so|like|there|here|mind|\w+s)\b)"
)
_NO_WHAT = (
    r"(?!idea|worries|problem|way|rush|luck|clue|thanks|need|one\b|i\b|it\b|not\b|more\b|"
    r"longer\b|doubt|wonder|kidding|joke|change\b|changes\b(?! (?:on|to) )|error|errors|issue|"
    r"issues|nan\b|diff|difference|output|response|reply|answer|news|results?\b|match|"
    r"matches|hits|sign|trace|luck|dice|go\b|big deal|pr\b|\w+ yet|crash(?:es)?\b|leaks?\b)"
)
# what a wish of the speaker's holds ("i want", "we'd want"), looked for before its pattern
_SPEAKER = ("i ", "we ", "i'd", "we'd")
# a limit needs a number to bind ("max one stop", "under 9k")
_NUMBERS = (
    *"0123456789",
    *"\u20ac$\u00a3",
    *["one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"],
    "a day",
    "a week",
)
CUES: tuple[Cue, ...] = (
    # flagged as a rule: the speaker says it is one
    _cue(
        "flag",
        "rule rules requirement requirements",
        # (not a rule applied: "that goes straight to main per the new rule")
        r"\b(?:ground rules?|house rules?|(?<!per )(?<!per the )(?<!under the )(?<!by the )"
        r"(?:the|one|a|new|golden|hard|strict) rule|"
        # "one more rule while I think of it: ...", "and another rule: ..."
        r"(?:one|another|a|and) (?:more|last|extra|other) rule\b|another rule\b|"
        r"(?:make|making) (?:that|this|it) a rule|rule (?:is|of thumb)|"
        r"(?:on|about|re|more|some|two|few|my|our) rules\s*:\s*\w|"
        # whose rule it is, then the rule: "her rule, and honestly mine too: ..."
        r"(?:my|our|her|his|their) rule\b[^.:?]{0,40}:\s*\w|"
        # a rule changed, then the rule as it is now: "change of rule on paging from
        # yesterday: ...", "I'm changing my own rule: lockfile-only PRs ..."
        r"(?:change of|changing (?:my|our|the)(?: own)?) rule\b[^.:?]{0,40}:\s*\w|"
        # a requirement laid down after a colon: "the actual requirement from Maren: ..."
        r"\b(?:the|my|our|her|his|their|one|a|actual|real|main|key|only) (?:\w+ )?"
        r"requirements?\b[^.:?]{0,30}:\s*\w|"
        r"rule change\b[^.:?]{0,40}:\s*\w)",
    ),
    _cue(
        "flag",
        "hard absolute",
        r"\bhard (?:constraint|limit|budget|deadline|requirement|stop|cap|ceiling|floor|"
        r"maximum|max|minimum|rule|no)\b|"
        r"\babsolute (?:limit|max(?:imum)?|minimum|ceiling|must|rule|requirement)\b",
    ),
    _cue(
        "flag",
        "negotiable non-negotiable nonnegotiable discussion debate negotiation",
        r"\bnon[- ]?negotiable|\bnot negotiable|"
        r"\b(?:not|isn'?t|aren'?t) up for (?:discussion|debate|negotiation)\b",
    ),
    _cue("flag", "exception exceptions", r"\bno exceptions?\b"),
    # said as the last word on it: "between 21:00 and 05:00, full stop", "not a penny over"
    _cue(
        "flag",
        "stop story ifs penny cent pound euro dollar minute",
        r"(?<!\bno )(?<!\bwithout )(?<!\bwithout a )(?<!\bwith a )\bfull stop\b|"
        r"\bend of story\b|\bno ifs\b|"
        r"\bnot (?:[a-z]+ ){0,3}?(?:a|one) (?:penny|cent|pound|euro|dollar|minute) "
        r"(?:more|over|above|later)\b",
    ),
    _cue("flag", "mandatory", r"\bmandatory\b"),
    # said with no end to it: "no red and green, ever.", "nothing gets pushed to main, ever"
    _cue(
        "flag",
        "ever",
        r"\b(?:no|not|nothing|nobody|no-one|none|never" + _NOT_NEVER + r"|"
        r"(?:do|does|can|won|is|are|must|should|shall)n'?t)\b[^.!?]*,\s*ever\s*[.!]*$",
    ),
    _cue("flag", "times", r"\bat all times\b"),
    _cue("flag", "circumstances", r"\bunder no circumstances\b"),
    _cue(
        "flag",
        "whatever whichever whoever wherever matter",
        r"\bwhatever (?:else )?(?:happens|the (?:reason|cost|excuse|circumstances|deadline)|"
        r"(?:we|you|i|they) (?:end up )?(?:do|doing|pick|picking|choose|choosing|build|"
        r"building|decide|deciding|go with|paste|post|share|send|show|print|log|commit|write|"
        r"change|changing)|"
        r"[\w']+(?: [\w']+)? (?:says|said|offers|asks|thinks))\b|"
        r"\bwhichever [\w']+(?: [\w']+)? (?:it is|we pick|you pick|i pick|wins|happens)\b|"
        # "a proper employee, W-2, whoever we end up hiring"
        r"\b(?:whoever|wherever|whichever [\w']+) (?:we|you|i|they) end up \w+ing\b|"
        # "never rewind more than 200ms, no matter the ping"
        r"\bno matter (?:what|the|how|who|which|if)\b"
        r"(?!(?: \w+)? (?:i|we|you) (?:try|tried|do|did|say|said)\b)",
    ),
    # someone's position, said as theirs: "His line, and fair enough, is that we stay"
    _cue(
        "flag",
        "line position stance",
        r"\b(?:his|her|their|my|our) (?:line|position|stance)\b(?! managers?\b)[^.;]{0,25}?\bis that\b",
    ),
    # a version kept: "we're on minSdk 24 and we're staying on 24"
    _cue(
        "flag",
        "staying",
        r"\b(?:we'?re|we are|i'?m|i am|it'?s|it is) staying on (?:[a-z][\w.-]* )?v?\d",
    ),
    # all there is to spend: "I've got £200 for kit this summer, that's all there is"
    _cue(
        "flag",
        "all",
        r"\bthat'?s (?:all|everything) (?:there is|i(?:'ve| have) got|we(?:'ve| have) got|i have|"
        r"we have)\b",
        requires=_NUMBERS,
    ),
    _cue(
        "flag",
        "now forward here",
        r"\b(?:from now on|going forward|from here on)\b",
        requires=("from now on", "going forward", "from here on"),
    ),
    _cue("flag", "mean", r"\bi mean it\b"),
    # the way things are done where the work is: "how migrations work here: ..."
    _cue(
        "flag",
        "here repo team project codebase company",
        r"\bhow (?:\w+ ){1,2}(?:work|works|are done|get done|go|goes) (?:here|in this "
        r"(?:repo|team|project|codebase|company))\b",
    ),
    # a window in which nothing may change: "the release freeze starts tomorrow at 16:00"
    _cue(
        "flag",
        "freeze",
        r"\b(?:release|code|change|deploy|deployment|merge|feature) freeze\b|"
        r"\bfreeze (?:window|period)\b",
    ),
    # what must not change because other things rest on it: "that shape is load-bearing"
    _cue("flag", "load-bearing loadbearing", r"\bload-?bearing\b"),
    _cue("flag", "insist insists", r"\binsists? on\b"),
    # a rule held to: "$150 a month for everything. He's pretty firm on that."
    _cue("flag", "firm", r"\bfirm (?:on|about) (?:that|this|it|the)\b"),
    _cue(
        "flag",
        "condition conditions constraint constraints requirement requirements must rule number "
        "figure budget limit cap max maximum",
        r"\b(?:his|her|their|my|our) (?:one |only |main |big )?(?:condition|constraint|requirement)s?\b|"
        # a rule named as one: "that's the other rule: caddy only restarts after 10pm"
        r"\b(?:the|a|one|my|our|other|house|golden) (?:other |one |golden |house )?rule\s*:|"
        # a budget said again: "New number: $250 a month all in"
        r"\bnew (?:number|figure|budget|limit|cap|max(?:imum)?)\s*:\s*[$\u20ac\u00a3\d]|"
        r"\b(?:is|are|it'?s) (?:a )?(?:hard |strict )?(?:constraint|requirement|must)\b",
    ),
    _cue("flag", "moving frozen locked", r"\bnot moving\b|\b(?:is|are|stays?) (?:frozen|locked)\b"),
    # a figure not to pass: "nothing more than 45 mins door to door", "no longer than 4 hours"
    _cue(
        "flag",
        "than",
        r"(?<!\bhad )(?<!\bgot )(?<!\bwas )(?<!\bwere )(?<!\bslept )"  # not what was
        r"\b(?:no|nothing|not) (?:\w+ )?(?:more|longer|further|later|over) than (?:a |an )?"
        r"(?:\d|one|two|three|four|five|six|seven|eight|nine|ten|half|twenty)",
    ),
    _cue("flag", "breaker deal-breaker dealbreaker line", r"\bdeal[- ]?breaker|\bred line\b"),
    _cue(
        "flag",
        "deadline budget curfew cutoff cut-off limit cap floor ceiling",
        r"\b(?:deadline|budget|curfew|cut-?off|limit|cap|"
        # a floor or ceiling someone sets ("new floor, £70k base"), not a building's
        r"(?:(?:my|our|his|her|their|new|hard|salary|price|pay) )(?:floor|ceiling)\b,?)"
        # what it is for, between: "my budget for all the dog stuff is like £200 a month max"
        r"(?: for (?:all )?(?:the |my |our )?[\w' -]{1,30}?(?= is\b))?"
        r"\s*(?:is\b|:|of\b|=|\u2014|-\s|(?<=,))"
        r"\s*(?:\S+\s+){0,3}?(?:[\d\u20ac$\u00a3]|(?:one|two|three|four|five|six|seven|eight|nine|"
        r"ten|twenty|fifty|hundred|thousand|end|eod|tomorrow|today|tonight|noon|midnight|"
        r"mon|tue|wed|thu|fri|sat|sun|jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)\w*)",
    ),
    # a limit named as someone's: "two days a week in an office, that's my ceiling"
    _cue(
        "flag",
        "floor ceiling",
        r"\b(?:is|'s) (?:my|our|his|her|their) (?:absolute |hard )?(?:floor|ceiling)\b",
    ),
    # obliges or forbids; "must" of a guess ("must be undercounting") is left out below
    _cue("deontic", "must mustn't", r"\bmust(?:n'?t| not| never| always| only)?\b"),
    _cue(
        "deontic",
        "has have need needs",
        # not its negation: "you don't need to restart it" lays down nothing; nor what
        # someone had to do ("Callum had to take the door off the crate"): that happened
        r"(?<!don't )(?<!dont )(?<!doesn't )(?<!do not )(?<!didn't )(?<!won't )"
        r"\b(?:has|have|needs?) to\b",
        requires=(" to ",),
    ),
    # what a commit, a pull request or a branch needs, as a convention of the work: "oh and
    # commit msgs need the jira key up front", "every PR needs a changelog fragment"; what
    # every new one of a kind needs
    _cue(
        "deontic",
        "need needs",
        # (of every one: "the branch needs a rebase" is a step of the work at hand)
        r"\b(?:(?:every|each|any) (?:commit|pr|pull request|branch|tag|changeset)(?: [\w'-]+){0,3}"
        # ...and what each new one of a kind needs: "every new key needs the Spanish too"
        r" needs|(?:every|each|any) new [\w-]+(?: [\w-]+)? needs|"
        r"(?:all )?(?:commits|commit (?:msgs|messages)|prs|pr (?:titles|descriptions)|"
        r"pull requests|branches|branch names|tags|changesets)(?: [\w'-]+){0,3} need) "
        r"(?!to\b)(?:an? |the |its |their )?[\w#-]",
    ),
    # not an offer or a question: "shall I", "shall we", "I'll just rebuild it, shall I"
    _cue("deontic", "shall", r"\bshall\b(?! (?:i|we)\b)"),
    _cue(
        "deontic",
        "allowed permitted required",
        r"\bis (?:not )?allowed\b|\bare (?:not )?allowed\b|\bnot permitted\b|"
        r"\b(?:is|are|be|'s|'re) (?:not |also |always |strictly )?required\b|\brequired (?:to|for|by)\b",
    ),
    _cue(
        "deontic",
        "need needs require requires",
        r"\b(?:needs?|requires?) (?:\w+'s |an? |the |my |our |your )?(?:ok|okay|approval|"
        r"sign-?off|review|permission|consent|go-ahead)\b",
    ),
    _cue(
        "deontic",
        "goes go belongs belong lives live",
        r"\b(?:goes|go|belongs?|lives?) (?:in|into|on|to) [^.;]{1,40}, not\b"
        # not "the snubber can go on Dmitri's list, not my problem today"
        r"(?! (?:my|our|your|his|her|their|sure|yet|really|that|now|quite|much|so|too)\b)",
        requires=(", not",),
    ),
    _cue(
        "deontic",
        "can't cannot can may mustn't shouldn't should won't cant",
        # not the generic "you" of a report ("the button is off screen and you can't reach
        # it"): a rule told to the assistant is the cue below
        r"(?<!\byou )\b(?:can'?t|cannot|can not|may not|mustn'?t|shouldn'?t|should not|"
        r"won'?t be able to)\s+(?:\w+\s+)?(?:do|use|touch|write|change|edit|go|exceed|cost|be|"
        r"have|store|show|take|add|merge|deploy|run|push|eat|drink|stand|handle|afford|spend|"
        r"move|fly|drive|leave|miss|break|lose|get|keep|log|send|share|delete|drop|"
        r"install|upgrade|rely|depend|commit|mix|hold|carry|walk|climb|sleep|book|pay|stay|"
        r"lift|bend|kneel|reach|tolerate|digest|travel|ride|sit|risk)\b",
        requires=("n't", "not", "cannot"),
    ),
    _cue(
        "deontic",
        "check clear ask run talk asking checking",
        r"\b(?:check|clear) (?:\w+ )?with (?:me|us) (?:first|before)\b|"
        r"\b(?:ask|talk to) (?:me|us) (?:first|before)\b|\brun (?:\w+ ){0,3}?(?:past|by) (?:me|us)\b|"
        # "nothing destructive on zfs without asking me first"
        r"\bwithout (?:asking|checking with|telling|clearing it with) (?:me|us)\b",
        requires=(" me", " us"),
    ),
    # one way only: "we only use numbers from our own records", "Sundays, and only Sundays"
    _cue(
        "order",
        "only",
        r"\b(?:we|i) only (?:ever )?(?:use|work|deploy|book|buy|fly|eat|drink|write|accept|"
        r"take|quote|cite|ship|release|trust)\b|\b([\w-]+),? and only \1\b",
        requires=("only",),
    ),
    # a step owed before the work leaves: "run the whole suite before pushing", "always
    # rebase before you merge"
    _cue(
        "order",
        "before",
        r"^(?:always |please |pls |and |then )*(?:run|check|lint|test|rebase|squash|build|format|"
        r"update|bump|ask|ping|tell|get)\b[^.?!]{0,80}\bbefore (?:you |we )?(?:push|pushing|"
        r"merge|merging|deploy|deploying|commit|committing|release|releasing|ship|shipping|"
        r"tag|tagging)\b",
    ),
    # an order for every one of a kind: "and put the jira key first in every commit msg"
    _cue(
        "order",
        "every each all",
        r"^(?:and |also |please |pls |then )*(?:put|add|include|use|keep|start|end|prefix|tag|"
        r"write|sign|mention|link|reference|cc|attach)\b[^.?!]{0,80}?\b(?:in|on|to|for|into|with|"
        r"at the (?:start|top|end|bottom) of) (?:every|each|all(?: the| our| my)?) [a-z]",
    ),
    # an order for whatever falls in a scope: "for anything that talks to S3 use the
    # scratch bucket", "for everything in this repo, stick to pnpm"
    _cue(
        "order",
        "anything everything",
        r"(?:^|[,;:]\s*)(?:and |also |but |oh and )?for (?:anything|everything)\b"
        r"[^.;:?!]{0,60}?,?\s+"
        # the order itself, not what someone could do ("for anything bigger we could use
        # a van")
        r"(?<!\bwe )(?<!\bi )(?<!\byou )(?<!\bthey )(?<!\bcould )(?<!\bcan )(?<!\bwould )"
        r"(?<!\bmight )(?<!\bshould )(?<!'d )(?<!'ll )"
        r"(?:use|keep|run|ask|put|stick to|go through|check|send|write|leave|make|stay|"
        r"(?:do not|don'?t|never|always) \w+)\b",
    ),
    # a place kept out of bounds: "dog stays out of Ellie's room" (not "I'll stay out of it")
    _cue(
        "order",
        "stays stay",
        r"\b(?<!'ll )(?<!will )(?<!to )(?<!i )(?<!we )(?<!you )stays? out of (?:the |my |our |her |"
        r"his |their )?(?:[\w-]+'s )?(?:[\w-]+ )?(?:rooms?|bedrooms?|kitchen|office|beds?|nursery|study|"
        r"lounge|garden|car|sofa|couch|repo|codebase|prod|production|database|schema|branch)\b",
    ),
    # whatever fails a test, ruled out: "anything that can't manage stairs is a no-go"
    _cue(
        "bound",
        "no-go dealbreaker deal-breaker non-starter",
        r"\b(?:anything|anyone|anybody|any [\w-]+|everything|whatever)\b[^.;?]{0,60}"
        r"\b(?:is|are|'s) (?:a )?(?:no-go|no go|non-starter|deal-?breaker)\b",
    ),
    # a ceiling said as what the speaker will not go past: "i don't want to go over a
    # tenner for adults", "we won't spend more than that"
    _cue(
        "bound",
        "over above beyond more",
        r"\b(?:i|we) (?:really )?(?:don'?t|do not|won'?t|will not) (?:want to )?"
        r"(?:go|going|spend|pay) (?:over|above|beyond|more than)\b",
        requires=_SPEAKER,
    ),
    # when someone can, and no other time: "my mum can do Tuesdays only", "Rob's weekends
    # only" (not what a place offers: "visits are available on Tuesdays only")
    _cue(
        "bound",
        "only",
        r"\b(?:can (?:only )?(?:do|make|manage|come|help)|(?<=[a-z])'s|works?|stays?|is free)"
        r" (?:on )?(?:(?:mon|tues|wednes|thurs|fri|satur|sun)days?|weekends?|weekdays?|"
        r"mornings?|evenings?|afternoons?)(?:,? (?:and|or) (?:(?:mon|tues|wednes|thurs|fri|"
        r"satur|sun)days?|weekends?|mornings?|evenings?|afternoons?))? only\b",
        requires=("only",),
    ),
    # someone left out: "uncle derek is NOT invited", "the kids aren't invited"
    _cue(
        "bound",
        "invited",
        r"\b(?:is|are) not invited\b|\b(?:isn'?t|aren'?t) invited\b",
    ),
    # an arrangement with others that binds: "prod runs 01:00 to 06:00 only, that's the
    # deal with the BI team"
    _cue("flag", "deal", r"\bthat'?s the deal\b(?! breaker)"),
    # what breaks the build is a rule: "fail the build if jitter goes over 0.15", "eslint
    # fails the build on one"
    _cue(
        "order",
        "fail fails",
        r"^(?:and |also |then |pls |please )*fail (?:the )?(?:build|ci|job|pipeline|run)\b|"
        r"\bfails (?:the )?(?:build|ci|job|pipeline) (?:on|if|when|whenever|for) "
        r"(?:any|a|an|one|every|each)\b",
    ),
    # what must be reviewed, and what is not: "package.json and build config still go
    # through a PR", "it doesn't go through CI"
    _cue(
        "order",
        "go goes",
        r"\b(?:go|goes) through (?:a |the )?(?:pr|prs|review|code review|ci)\b",
    ),
    # a budget with its figure: "physics has a 2.0 ms budget per frame", "a £400 ceiling"
    _cue(
        "bound",
        "budget ceiling cap limit",
        r"\b(?:a|an|the|our|my|his|her|their) [\u00a3$\u20ac]?\d[\d,.]*\s?(?:k|ms|s|mb|gb|kb|%|"
        r"minutes?|hours?)?\s?(?:budget|ceiling|cap|limit)\b",
    ),
    # a window of time set: "the window we announced to customers is 07:00-12:00 CET"
    _cue(
        "bound",
        "window",
        r"\bwindow\b[^.]{0,40}?\b\d{1,2}(?::\d{2})?\s?[-\u2013]\s?\d{1,2}(?::\d{2})?\b",
    ),
    # a deadline said as the last possible: "I need real numbers by wednesday evening at
    # the latest"
    _cue("bound", "latest", r"\bat the (?:very )?latest\b"),
    # whatever the cost: "I don't care what it costs, she's not walking 600 m"
    _cue(
        "flag",
        "care costs cost",
        r"\b(?:i|we) (?:don'?t|do not) care (?:what|how much) it costs\b|\bwhatever it costs\b|"
        r"\bat any cost\b",
    ),
    # insisted on: "her dad's adamant and tbh so am i"
    _cue("flag", "adamant", r"\b(?:'s|is|are|am|'m|'re) adamant\b"),
    # what can never be so: "she can never be off lead outside a fenced area" (not "a
    # scan that can never succeed", "I should never have started")
    _cue("deontic", "never", r"\b(?<!that )(?<!which )(?:can|must|may) never be\b"),
    # a source ruled out, asked nicely: "oh and not from amazon pls."
    _cue(
        "order",
        "pls please",
        r"^(?:oh and |and |also |but )?not (?:from|on|in|at|with|via|through) "
        r"[\w' -]{2,30}?,? (?:pls|please)\b",
    ),
    # a prohibition told to the assistant: "you don't post anything", "you never push"
    _cue(
        "order",
        "don't dont never mustn't cannot can't may",
        r"\byou (?:don'?t|do not|never|must not|mustn'?t|can'?t|cannot|may not) "
        r"(?!need|have to|know|mind|worry|want|remember|see|get it|think|understand|seem|"
        r"really|even|always|care|look|sound|feel|mean|reach|scroll|click|tap|press|find|"
        r"tell|read|log in|sign in)\w+",
        requires=("you ",),
    ),
    # the way things are done there, said as such
    _cue(
        "flag",
        "works work things",
        r"\bthat'?s how (?:it works|we work|we do (?:it|things)|things work|it'?s done)\b",
    ),
    # one way only: "prod deploys go through the release workflow and nothing else"
    _cue(
        "order",
        "else",
        r"\band nothing else\b(?! (?:changed|happened|came|showed|matters|works|helped))|"
        r"\band (?:nowhere|no ?one|nobody) else\b",
        requires=("nothing else", "nowhere else", "one else", "nobody else"),
    ),
    # a deadline someone set: "Aurelio wants the full revision by 1 May"
    _cue(
        "deontic",
        "wants needs expects",
        r"\b(?:wants|needs|expects)\b[^.;!?]{0,50}?\b" + _BY_WHEN,
    ),
    # a deadline the work must meet: "the garage has to be a working studio by 1 September"
    # (a bound, so that "has to be a", which reads as a guess, does not cancel it)
    _cue(
        "bound",
        "has have needs need must",
        r"\b(?:has|have|needs?) to be\b[^.;!?]{0,50}?\b" + _BY_WHEN,
    ),
    # a time ruled out, whatever is done then: "we cannot rehearse on Thursdays"
    _cue(
        "bound",
        "cannot can't cant can",
        r"\b(?:we|i) (?:cannot|can'?t|can not) (?!get|find|see|figure|believe|tell|remember|"
        r"understand|reproduce|think|wait|stop|decide|agree|work out)\w+(?: [\w'-]+){0,3} "
        r"(?:on (?:mon|tues|wednes|thurs|fri|satur|sun)days?|(?:at|on) weekends|"
        r"in the (?:mornings|evenings)|before \d|after \d)",
    ),
    # a figure something keeps under: "tickets stay under a tenner", "rent stays below 1,400"
    _cue(
        "bound",
        "stay stays remain remains",
        r"(?<!\bso )\b(?!(?:i|we|you|they|he|she|it|this|that|which)\b)[\w-]+ (?:stays?|remains?) "
        r"(?:under|below|within) "
        r"(?:a |an |the )?(?:[\d\u20ac$\u00a3]|tenner|fiver|grand|budget\b)",
    ),
    # what goes with a change: "if you touch go.mod, go mod vendor goes in the same commit"
    _cue(
        "deontic",
        "if",
        r"\bif (?:you|we|anyone|someone) (?:ever )?(?:touch|change|edit|modify|add|remove|bump|"
        r"update|upgrade|delete|move|rename|deploy|merge|push)\b(?! (?:your|my) mind)"
        r"[^.?;]{0,100}?\b(?:goes|go|must|needs? to|has to|have to|always|never|don'?t|"
        r"in the same|first)\b",
        requires=("if you", "if we", "if anyone", "if someone"),
    ),
    # nothing the assistant runs may reach it: "nothing you run points at api.example.com"
    _cue(
        "order",
        "nothing",
        r"\bnothing (?:you|of yours|from you)\b[^.;]{0,30}?\b(?:touch\w*|points? (?:at|to)|"
        r"talks? to|hits?|goes (?:to|near)|runs? (?:against|on)|writes? to)\b",
        requires=("nothing",),
    ),
    # what happens to nothing, or is done by nobody, said as the way things are: "nothing
    # migrates on prod between 7am and 7pm", "nobody git pulls on those boxes"; a list of
    # what may not appear: "no names, no email addresses, not in this chat"
    _cue(
        "order",
        "nothing nobody no-one one no none",
        r"\bnothing (?!(?:changed|happened|works|worked|came|showed|matters|helped|else|seems|"
        r"looks)\b)\w+s\b[^.;]{0,40}\b(?:between|before|after|during|until|unless|without|"
        r"on prod|in prod|outside)\b|"
        rf"^(?:\W*(?:and|so|also)\W+)?{_NOBODY_DOES}|"
        # ... or after a comma, bounded: "Guests arrive between 3 and 7, and nobody checks
        # in after 7"
        rf",\s*(?:(?:and|but|so)\s+)?{_NOBODY_DOES}[^.;]{{0,40}}\b(?:after|before|without|until|"
        r"past|unless|anything|ever)\b|"
        r"\bno [\w -]{2,30}, no [\w -]{2,30}, not (?:in|on|at|even)\b|"
        # none of a thing let through: "and this time NONE of it goes on a credit card"
        r"\bnone of (?:it|this|that|them|those) (?:goes|gets|is|are) (?!\w+ed\b)",
        requires=("nothing", "nobody", "no one", "no-one", ", no ", "none of"),
    ),
    # a limit on what is let through as it is: "anything over 300 changed lines gets split"
    _cue(
        "bound",
        "anything",
        r"\banything (?:over|above|more than|bigger than|larger than|longer than|under|below) "
        r"[\d\u20ac$\u00a3][^.;]{0,40}\b(?:gets?|goes|needs?|must|is)\b|"
        # where a kind of change goes: "anything that writes goes to DEV_ANA or through a PR"
        r"\banything (?:that|which) (?:writes|deletes|touches|changes|drops|deploys|migrates|"
        r"costs|spends)\b[^.;]{0,40}\b(?:goes|go|gets|must|needs? to|has to)\b",
    ),
    # a refusal of one's own: "the one thing I will not do is run a cable across the
    # pavement", "we won't buy anything without a report" (not "I won't have time")
    _cue(
        "order",
        "not won't wont refuse",
        r"\bthe (?:one|only) thing (?:i|we)(?:'ll| will)? (?:will not|won'?t|refuse to|don'?t|"
        r"do not|never)\b|\b(?:i|we) (?:will not|won'?t|refuse to) (?:ever )?(?:do|run|use|pay|"
        r"buy|fly|drive|book|accept|sign|eat|drink|allow|let|rent|share|lend|put up with)\b",
        requires=("not", "won", "refuse"),
    ),
    # what may not be touched at all
    _cue(
        "order",
        "limits off-limits bounds read-only readonly",
        r"\boff[- ]limits\b|\b(?:is|are|stays?) (?:strictly )?(?:out of bounds|read-?only)\b",
    ),
    # a budget said as a heading of its own: "Money: ... out of 3,200 euros"
    _cue(
        "flag",
        "money budget cost costs spend spending price prices",
        r"^(?:\W*(?:and|also|oh|so|ok)\W+)?(?:money|budget|costs?|spend(?:ing)?|prices?)\s*:",
        requires=_NUMBERS,
    ),
    # a prohibition or a standing order at the opening of a clause
    # (not "I don't want to find out on black friday": a wish or a worry, weighed as one)
    _cue(
        "order",
        "don't dont do",
        r"\b(?:don'?t|do not)\b(?! (?:want|wanna)\b)",
        _OPENS,
        ("don", "do not"),
    ),
    _cue("order", "never always", r"\b(?:never|always)\b" + _NOT_NEVER, _OPENS_STRICT),
    _cue(
        "order",
        "not",
        r"\b(?:use|write|put|send|call|name|spell|book|answer|reply)\s[^.;]{1,40}?,? not\b",
        _OPENS_STRICT,
        (" not ", " not."),
    ),
    _cue("order", "avoid refrain stop", r"\b(?:avoid|refrain from|stop using)\b", _OPENS_STRICT),
    # a habit to drop, told at a clause's opening: "and stop pasting the whole plan"
    _cue(
        "order",
        "stop",
        r"\bstop (?!(?:by|in|at|over|here|there|it|that|this|and|now|being able)\b)[a-z]+ing\b",
        _OPENS,
    ),
    _cue(
        "order",
        "alone hands nothing leave",
        r"\bleave (?:\S+ ){0,3}alone|\bleave (?:\S+ ){1,5}(?:exactly |just )?as (?:it is|they are)\b|"
        r"\bhands off|\bnothing (?:[\w/.-]+ ){0,2}?(?:under|in|"
        r"inside|with|from|that|outside)\b|\bnothing (?:[\w/.-]+ ){0,5}?(?:gets?|goes) \w",
        _OPENS,
    ),
    _cue(
        "order",
        "keep",
        r"\bkeep (?!going|at it|it up|in mind|me posted|an eye|track|trying|looking|digging|"
        r"(?:it|that|this|them|those|both)\s*(?:[.!,]|$))",
        _OPENS_STRICT,
    ),
    _cue(
        "order",
        "stay stick",
        r"\b(?:we(?:'ll| will)? )?(?:stay (?:on|with|under|below|within|off|away|in|out)|"
        r"stick (?:to|with))",
        _OPENS_STRICT,
    ),
    _cue(
        "order",
        "only",
        r"\bonly (?:ever |use|touch|read|write|run|deploy|push|work|book|buy|pick|edit|log|"
        r"alert|page|retry|merge|ship|release|restart|migrate|email|notify)",
        _OPENS_STRICT,
        tuple(
            f"only {verb}"
            for verb in [
                "ever",
                "use",
                "touch",
                "read",
                "write",
                "run",
                "deploy",
                "push",
                "work",
                "book",
                "buy",
                "pick",
                "edit",
                "log",
                "alert",
                "page",
                "retry",
                "merge",
                "ship",
                "release",
                "restart",
                "migrate",
                "email",
                "notify",
            ]
        ),
    ),
    _cue(
        "order",
        "sure remember forget careful watch mind",
        r"\b(?:make sure|be sure to|remember to|don'?t forget to|be careful|careful with|"
        r"watch out|mind the)\b",
        _OPENS_STRICT,
    ),
    _cue(
        "order",
        "no",
        r"\bno " + _NO_WHAT + r"(?:[\w\"'()*.#/-]+ |\([^()]{1,60}\) ){0,4}(?:in|on|to|into|inside|"
        r"under|for|from|with|without|mixed|anywhere|ever|allowed|pls|please|period|at all|"
        r"through|before|after|during|until)\b",
        _OPENS_STRICT,
    ),
    # a limit that opens a sentence or clause: "max one stop", "no more than 3 changes"
    _cue(
        "bound",
        "max maximum minimum most least more up under below only than nothing",
        r"\b(?:max(?:imum)?|minimum|at most|at least|no more than|not more than|up to|under|"
        r"below|only|no \w+(?: with)? (?:longer|more|later|earlier|shorter|fewer|less) than|"
        r"nothing (?:before|after|over|above|past|earlier than|later than|longer than))\s+"
        r"(?:\S+\s+){0,2}?"
        r"(?:[\d\u20ac$\u00a3]|one|two|three|four|five|six|seven|eight|nine|ten|a (?:day|week))|"
        # a rank: "nothing above first floor unless there's a lift"
        r"\bnothing (?:above|below|over) (?:the )?(?:first|second|third|top|ground)\b",
        _OPENS_LIMIT,
        (*_NUMBERS, "first", "second", "third", "top", "ground"),
    ),
    # a limit named and set: "the ceiling is 9 mA average", "the cap is now £16,500";
    # one kept to: "and we don't go over it"
    _cue(
        "bound",
        "ceiling cap limit budget maximum max floor go spend back in signed submitted "
        "returned paid booked ready sent",
        r"\b(?:the|our|my|his|her|their) (?:ceiling|cap|limit|budget|maximum|max|floor) "
        r"(?:is|stays|remains) (?:now |still )?(?:about |around |roughly )?[\d\u20ac$\u00a3]|"
        r"\b(?:we|i) (?:don'?t|do not|never) (?:go|spend|run) (?:over|above|past|beyond)\b|"
        # what is due, and when: "and forms back by friday 6 march", "reports in by Monday"
        r"^(?:\W*(?:and|also|so|plus)\W+)?(?:the |all |every )?"
        r"(?!(?:[\w-]+ )?(?:was|were|is|are|been|got|has|had|went)\b)[\w-]+(?: [\w-]+)? (?:back|in|"
        r"signed|submitted|returned|paid|booked|ready|sent) " + _BY_WHEN + "|"
        # one moved: "our budget goes from 60 to 96", "the chunk budget goes down to 220 kB"
        r"\b(?:the|our|my|his|her|their) (?:[\w-]+ ){0,2}(?:ceiling|cap|limit|budget|maximum|max|"
        r"floor) (?:goes|went|drops|dropped|comes|came|moves|moved|is going|rises|rose)"
        r"(?: up| down)?(?: from [^.;]{1,20}?)? to (?:about |around )?[\d\u20ac$\u00a3]",
    ),
    # a limit on a change: "increase the mileage by no more than 10% a week"
    _cue(
        "bound",
        "more most",
        r"\bby (?:no more than|not more than|at most)\s+(?:\S+\s+){0,2}?[\d\u20ac$\u00a3]",
        requires=_NUMBERS,
    ),
    # a limit said after what it bounds: "three CI runs today, max", "abstract max 200 words"
    _cue(
        "bound",
        "max maximum tops most",
        r"^(?!.*\b\w+ed\b)(?:[^.;:!?]*\s)?(?:\d[\d,.]*|one|two|three|four|five|six|seven|eight|"
        r"nine|ten)\b[^.;:!?]{0,40},?\s(?:max|maximum|tops|at most)\b(?:\W*$|\s*,)|"
        # (opening the sentence or a clause after a comma: "room for one new circuit,
        # kiln draw max 30A"; a figure with its unit)
        r"^(?:(?!.*\b\w+ed\b)[^.;:!?]*,\s+)?(?:\W*(?:and|also|so)\W+)?(?:the |our |my )?"
        r"[a-z][\w-]*(?: [a-z][\w-]*)? "
        r"(?:max|maximum|at most) (?:\d[\d,.]*(?:[a-z]{1,3}|%)?|one|two|three|four|five|six|seven|"
        r"eight|nine|ten)\b",
        requires=_NUMBERS,
    ),
    # a gate: "anything in drizzle/ doesn't get merged until Hadley has approved it"
    _cue(
        "deontic",
        "until unless without merged deployed shipped released sent published submitted "
        "applied pushed posted hear hears know knows see sees learn learns",
        r"\b(?:doesn'?t|does not|don'?t|do not|won'?t|will not|can'?t|cannot|isn'?t|is not|"
        r"aren'?t|are not|nothing)\s(?:\w+\s)?(?:get |gets |be |go |goes )?"
        r"(?:merged|deployed|shipped|released|sent|published|submitted|applied|pushed|posted|"
        # who is told nothing yet: "Femke doesn't hear a thing about this until I've signed"
        r"(?:hears?|knows?|sees?|learns?) (?:a thing|anything|a word))\b"
        r"[^.;!?]{0,60}?\b(?:until|unless|without)\b",
    ),
    # what is ruled out, listed: "Not muted, not test.fixme, not skipped."
    _cue(
        "order",
        "not",
        r"^(?:\W*(?:and|but|so|also)\W+)?not [^,;.!?]{1,40}(?:,|;|, or| or| nor)\s*not\b",
    ),
)
# a sentence that opens with a flag: "important: ...", "heads up: ...", "rule: ..."
FLAG_OPEN = patterns.compile(
    r"^(?:\W*(?:and|also|oh|so|but|btw|ok|okay|one more thing|one thing|just)\W+)*"
    r"(?:(?:very |super |really )?important|heads[- ]up|fyi|n\.b\.|careful|"
    r"rule|constraint|requirement|reminder|caveat|ps|p\.s\.|remember|before i forget|"
    # "one thing from Joel before I forget: the freezer stays in the garage"
    r"one (?:more |last |other )?thing(?: (?:from|for) [\w']+)?(?: before i forget)?|"
    # "one thing I care about either way: ..."
    r"(?:the )?one thing (?:i|we) (?:really )?(?:care about|insist on|ask|need|want)[\w ]{0,20}(?=:)|"
    r"keep in mind|bear in mind|don'?t forget|for the record|"
    r"(?:the )?usual (?:setup|rules|drill|deal|terms) appl(?:y|ies)|"
    r"to be (?:super |very |really )?clear)\b\s*(?:[:!,\u2014-]|that\b)"
)
# what follows "one more thing:" when it is a request, not a rule: "one more thing: Hannah
# wants a paragraph each on ...", "one more thing: can you ...", "one last thing: draft ..."
_ASKED_AFTER = patterns.compile(
    r"(?:can|could|would) you\b|(?:please |pls )?(?:write|draft|send|check|look|make|add|fix|"
    r"do|find|put|update|run)\b|[\w']+ (?:wants|asked for|needs) (?:a|an|some|you|me|us)\b"
)


def _flag_opens(lower: str) -> bool:
    """Whether a sentence opens with a flag (`FLAG_OPEN`), and a "one more thing:" leads
    into something other than a request."""
    found = FLAG_OPEN.search(lower)
    if found is None:
        return False
    asked = _ASKED_AFTER.match(lower[found.end() :].lstrip()) is not None
    return not ("thing" in found.group() and asked)


# a reminder of how things are, opening a sentence: "and remember service days run
# 04:00 to 03:59 local", "remember the invoices need a PO number" (not "remember when")
REMINDER = patterns.compile(
    r"^(?:\W*(?:and|also|oh|so|but|just|pls|please)\W+)*remember (?:that )?(?:the |our |all |every )?"
    r"(?!(?:when|how|what|why|if|where|who|whether|to|me|us|him|her|them|last|back)\b)"
    r"[a-z-]+(?: [a-z-]+)? (?:run|runs|are|is|stay|stays|go|goes|need|needs|must|have to|has to|"
    r"close|closes|open|opens|start|starts|end|ends)\b"
)
# a flag said not to hold: "not a dealbreaker", "no hard requirement", "isn't a must"
NEGATED_FLAG = patterns.compile(
    r"\b(?:not|isn'?t|aren'?t|no|never) (?:a |an |really a |exactly a |the )?(?:hard |strict )?"
    r"(?:deal[- ]?breaker|must|requirement|constraint|rule|red line|non[- ]?negotiable)\b"
)
# "must" and "have to" of a guess or of the speaker's own next chore, not a rule
GUESS = patterns.compile(
    r"\bmust(?:'ve| have| be \w+ing\b| be (?:wrong|right|it|the|a|an|some|somewhere|"
    r"broken|missing|off|lying|confused|kidding|joking|nice|fun|great|hard|tough|"
    r"tired|exhausting))|\b(?:i|we|you) (?:have|had|need) to (?:admit|say|ask|confess|"
    r"agree|go now|run now|check|look|think|wonder|dash|leave now)\b|"
    r"\bhave to (?:see|wait and see)\b|"
    r"\b(?:has|have) to be (?:the|a|an|it|that|this|something|somewhere|related|because)\b|"
    r"\bcan'?t be (?:it|that|this|the|right|true|wrong|related|a|an)\b|"
    r"\bcan'?t (?:physically|possibly)\b|"  # what cannot happen, not what may not
    # the speaker's own next chore: "need to check with Dario first"
    r"(?:^|[.:,;]\s*|\b(?:i|we|now|so|then|still|just)\s+)(?:actually\s+)?(?:need|have|had) "
    r"to (?:actually )?(?:check|ask|talk|look|figure|find|think|decide|pick|choose|call|email|"
    r"know|understand|learn|"
    r"go|leave|run|get|buy|order|wait|see|sort|do|finish|write|read|send|tell|book|sleep|"
    r"eat|try|fix|debug|test|measure|ping|grab|head|hop|jump|dash)\b"
)
# a limit, a deadline, a budget: weighs with another cue or a number
LIMIT = patterns.compile(
    r"\b(?:budget|deadline|limit|cap|caps|max(?:imum)?|minimum|at most|at least|"
    r"no (?:more|longer|later|earlier) than|not (?:more|longer|later) than|"
    r"(?:less|fewer|shorter|longer|more) than|under|below|within|up to|all in|"
    r"only|until|till|by (?:mon|tue|wed|thu|fri|sat|sun|the end|end of|eod|tomorrow|"
    r"tonight|noon|midnight|midday|lunch|(?:a )?(?:quarter|half) (?:to|past)|\d)|"
    r"before (?:mon|tue|wed|thu|fri|sat|sun|the|we|you|\d)|"
    r"stays? (?:where|as|put|the same|untouched|unchanged|in place)|"
    r"not (?:touching|moving|changing))\b"
)
NUMBER = patterns.compile(r"\d|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|twice)\b")
# the speaker's standing preference or condition
PREFER = patterns.compile(
    r"\b(?:i|we)(?:'d| would)? (?:(?:really|strongly|much|definitely) )?"
    r"(?:prefer|rather|hate|loathe|can'?t stand|don'?t (?:like|do|eat|drink|fly)|"
    r"do not like|never (?:fly|eat|drink|use|take))|"
    r"\bmy preference\b|\bnot a fan of\b|\ballergic\b|\b(?:motion|sea|car|travel)[- ]?sick\b|"
    # a diet, said of a person or of what they eat: "I'm vegetarian", "gluten-free only"
    r"\b(?:i'?m|i am|we'?re|we are|he'?s|she'?s|they'?re|is|are|\w+'s|"
    r"both|all|strictly|fully) (?:\w+ )?(?:vegetarian|vegan|pescatarian|teetotal|coeliac|"
    r"halal|kosher)\b|\b(?:vegetarian|vegan|gluten|lactose|halal|kosher|pescatarian)"
    r"(?:[- ]free)?(?: food| meals?| options?| menus?)? only\b|"
    r"\b(?:no|without|free of) (?:\w+ )?(?:gluten|lactose|meat|pork|fish|dairy|alcohol)\b|"
    r"\bi(?:'m| am) (?:afraid of|scared of|terrified of|diabetic|pregnant|"
    r"on (?:a |my )?(?:wheelchair|crutches|diet))\b|\bi get (?:\w+ )?sick\b|"
    r"\bi (?:can'?t|cannot) (?:eat|drink|stand|do stairs|walk|climb|swim|fly|drive)\b|"
    # "And I don't drive, never learned", "Dennis can't manage the stairs any more"
    r"\b(?:i|we) (?:don'?t|do not) drive\b|"
    r"\b(?:can'?t|cannot) (?:manage|do|climb|use) (?:the |any )?stairs\b|"
    # a condition of the person the work is for: "she's dyslexic", "Margit's colour-blind"
    r"\b(?:i'?m|i am|he'?s|she'?s|he is|she is|they'?re|they are|\w+'s) (?:[\w-]+ )?"
    r"(?:dyslexic|colou?r-?blind|deaf|hard of hearing|epileptic|asthmatic|coeliac|celiac|"
    r"diabetic|allergic|pregnant|a wheelchair user|partially sighted)\b|"
    # a condition a person has or lives with: "she has a grade 2 heart murmur", "my
    # diabetes", "he's on apixaban", "she's 16, hyperthyroid"
    r"\b(?:i|we|he|she|they|\w+) (?:has|have|'s got|'ve got|has got) (?:a |an )?"
    r"(?:grade \d+ |type \d |mild |bad |severe )?(?:heart (?:murmur|condition)|diabetes|asthma|"
    r"epilepsy|arthritis|dvt|angina|copd|dementia)\b|"
    r"\b(?:my|his|her|their) (?:type \d )?(?:diabetes|asthma|epilepsy|arthritis|dvt|"
    r"heart condition)\b|"
    r"\b(?:i'?m|i am|he'?s|she'?s|he is|she is|they'?re|\w+'s) (?:\w+ )?on (?:insulin|warfarin|"
    r"apixaban|blood thinners|metformin)\b|"
    r"\b(?:i'?m|he'?s|she'?s|\w+'s)(?: \d+,)? (?:hyper|hypo)thyroid\b|"
    # the aid a person needs: "for anything over 200 metres he needs his wheelchair"
    r"\b(?:i|we|he|she|they|\w+) needs? (?:a |an |his |her |their |my |our )?(?:[\w-]+ )?"
    r"(?:wheelchair|crutches|walking stick|walking frame|walker|rollator|cane|hearing aid)s?\b"
)
# a wish: weighs with another cue ("I want a proper suite" is a task, not a rule)
WANT = patterns.compile(
    r"\b(?:i|we)(?:'d| would)? (?:(?:really|definitely) )?(?:want|don'?t want|do not want|"
    r"'?d like|like)\b(?! to\b)"
)
# how the work should look: style, tone, format
STYLE = patterns.compile(
    r"\b(?:style|tone|format(?:ting)?|convention(?:al)?s?|casual|formal|concise|verbose|"
    r"short sentences|plain (?:words|english|language)|bullet points?|no emojis?|british|"
    r"american english|spelling|"
    r"naming|lowercase|uppercase|indent\w*|tabs|spaces|in (?:eur|euros?|usd|dollars|chf|gbp|"
    r"pounds|yen|metric|imperial|celsius|fahrenheit|utc|local time|\w+ english|german|"
    r"french|spanish|italian|dutch|japanese))\b"
)
# a contrast that corrects: "results go in the sheet, not Slack", "tabs, not spaces"
CONTRAST = patterns.compile(r", not (?!(?:sure|yet|really|that|bad|quite|much|now|so|too)\b)\w+")
# a polite imperative (a weak cue: "team sheet row pls" is a one-off)
POLITE = patterns.compile(r"\b(?:pls|plz|please)\b")
# a rule said to change, in the words that say only that: "ok change of plan on my rule:
# 10 s cap", "changing the db rule from last week", "I take back the no-progress-bar
# thing", "I've come round on gas", "the budget goes down to 220 kB", "lowering the
# ceiling to 16,500", "sundays are fine now", "no longer", "from now on"
CHANGED = patterns.compile(
    r"\bno longer\b|\bnot \w+ (?:any ?more)\b|\bchange of (?:heart|plan|mind)\b|"
    r"\bi know i said\b|"
    # a limit or a way set anew: "new floor, £70k base", "short and friendly from now on"
    # (not one applied: "so that goes straight to main per the new rule")
    r"(?<!per the )(?<!under the )(?<!by the )(?<!to the )(?<!with the )"
    r"\bnew (?:floor|ceiling|limit|budget|cap|deadline|rule|max(?:imum)?|minimum|target|number|"
    r"figure)\b|"
    r"\bfrom now on\b|"
    r"\bchang(?:e|ed|es|ing)\b (?:of )?(?:my |our |the |that |this )?(?:own )?(?:[\w-]+ )?"
    r"(?:rule|mind|convention|policy|plan)\b|"
    r"\btalked me (?:round|around)\b|\bwon me (?:round|over)\b|"
    r"\b(?:take|taking|took) (?:it |that |this )?back\b|(?:'ve|'s| have| has| had) come round "
    r"(?:on|to)\b|\bcoming round to\b|"
    r"\b(?:goes|went|go|going|moves?|moved|comes|came) (?:down|up) to\b|\bmoved the goalposts\b|"
    r"\b(?:raise|raising|raised|lower|lowering|lowered|bump|bumped|bumping|cut|cutting) "
    r"(?:it|that|the [\w-]+(?: [\w-]+)?) (?:to|from)\b|"
    r"\b(?:is|are|'s|'re) (?:fine|ok|okay|allowed) now\b|"
    # a limit or a sum said to be something now: "so the cat budget is £55 a month now",
    # "£160 a month is the ceiling now"
    r"\b(?:is|are|'s) (?:the )?(?:real )?(?:ceiling|limit|budget|cap|max(?:imum)?|floor|minimum|"
    r"deadline) now\b|"
    r"\b(?:is|are|'s) [\u00a3$\u20ac]\d[\d,.]*k?(?: (?:a|per) (?:day|week|month|year|head|"
    r"person|night))? now\b|"
    # a figure moved: "our budget goes from 60 to 96"
    r"\b(?:goes|went|going|go|moved?|moves|changed?|changes|up|down) from \W?\d[\d,.]*\w* to \W?\d"
)
# a change of an earlier rule: "P0 now, not P1", "forget matte black, brushed brass", or
# the words that also make a choice ("switch to", "drop the"), in a rule
CHANGE = patterns.compile(
    r"\b(?:is|are) now\b|\binstead of\b|\b(?:drop|scrap|ditch) the\b|\buse the new\b|"
    r"\bswitch(?:ing)? to\b|" + CHANGED.pattern
)
# what a change says it changes, by name: "changed my mind about short", "I've come round
# on gas", "change of rule on paging", "changing the db rule", "I take back the
# no-progress-bar thing"
NAMED_CHANGE = patterns.compile(
    r"\b(?:chang(?:e|ed|es|ing)|made up) (?:my|our) mind (?:about|on) (?P<what>[\w' -]{2,30})|"
    # (not a visit: "Graham came round on Saturday")
    r"(?:'ve|'s| have| has| had) come round (?:on|to) (?P<what2>[\w' -]{2,30})|"
    r"\bcoming round to (?P<what7>[\w' -]{2,30})|"
    # talked round, softening: "Amy's talked me round on one thing", "I'm softening on
    # the screens"
    r"\btalked me (?:round|around) on (?P<what8>[\w' -]{2,30})|"
    r"\bsoften(?:ed|ing) on (?P<what9>[\w' -]{2,30})|"
    r"\bchange of (?:rule|plan|heart|policy|mind) (?:on|about|for) (?P<what3>[\w' -]{2,30})|"
    # "forget what I said about uppercase", "scrap what i said about no new dependencies"
    r"\b(?:forget|ignore|scratch|scrap|disregard|drop) what i (?:said|wrote) (?:earlier |before "
    r"|yesterday |last week )?(?:about|on|re) (?P<what11>[\w' -]{2,30})|"
    # a fact the user said, admitted wrong: "ok I was wrong about raw then" (it replaces
    # what was said, no rule: `ADMITS`)
    r"\bi was wrong (?:about|on) (?!(?:that|this|it|one)\b)(?P<what12>[\w' -]{2,30})|"
    # "I know I said flat.", "I know I said print()s yesterday, but ..."
    r"\bi know i said (?!(?:that|this|it|so)\b)(?P<what10>[\w' -]{2,30})|"
    r"\bchang(?:e|ed|es|ing) (?:the|my|our|that|this) (?P<what4>[\w-]+(?: [\w-]+)?) "
    r"(?:rule|convention|policy)\b|"
    r"\b(?:take|taking|took) back (?:the|my|what i said about) (?P<what5>[\w\'\" -]{2,40})|"
    # a thing dropped by its name alone: "forget testify.", "forget biggest-first, ..."
    r"(?:^|[.;:!,]\s*)(?:ok,? |and |so |oh and )?forget (?:about )?(?:the |my )?"
    r"(?!(?:it|that|this|what|about|i|we|you)\b)(?P<what6>[\w'-]+(?: [\w'-]+){0,2})\s*(?:[.,;!]|$)"
)
# the figure a change says a rule had: "10 s cap, not 5", "instead of 20k", "from 60 to 96"
OLD_FIGURE = patterns.compile(
    r"\b(?:instead of|not|rather than|was|from|up from|down from) \W?(?P<was>\d[\d,.]*(?:k|m)?)\b"
)
# a figure said to be wrong: "it's £842, not £480", "notice is 12 weeks, not 8", "the
# allowance isn't 750", "it's NOT 8"
_NOT_SO = r"(?:\bnot|\bisn'?t|\bwasn'?t|\baren'?t|\bweren'?t)\s+"
CORRECTED = patterns.compile(
    _NOT_SO + r"(?:about |around |even |the )?"
    # (not a figure's compound: "it's not 144-specific")
    r"[\u00a3$\u20ac]?(?P<was>\d[\d,.]*\d|\d)(?:k\b)?(?!\s*%|-[^\W\d_])"
)
# an earlier word taken back as such: "forget what I said about console this morning"
RETRACTS = patterns.compile(
    r"\b(?:forget|ignore|scratch|scrap|disregard|drop) what i (?:said|wrote|asked)\b|"
    # ... or by name: "forget the BIKE- prefix thing from yesterday"
    r"\b(?:forget|ignore|scratch|disregard|scrap|drop|ditch) (?:about )?(?:the|my|that) [\w -]{1,40}? "
    r"(?:thing|rule|bit|part)\b"
)
# a rule replaced in so many words: "P0 now, not P1", "forget matte black, brushed brass"
REPLACE = patterns.compile(
    r"\bnow,? not\b|\bforget (?:the |about the |my |(?:[\w-]+ ){0,3}[\w-]+, )|"
    r"\bscratch that\b|\binstead of\b[^.]*\b(?:from now on|use|go with)\b|" + RETRACTS.pattern
)
# not a rule: a question, a guess, a hypothetical, a request for an answer
QUESTION = patterns.compile(
    r"\?\s*(?:\W\s*)?$|"
    # a question tagged on: "kittens adapt to anything, don't they."
    r",\s*(?:don'?t|doesn'?t|isn'?t|aren'?t|won'?t|can'?t|wasn'?t|didn'?t|haven'?t|hasn'?t|"
    r"shouldn'?t|wouldn'?t) (?:they|it|he|she|we|you|i|there)\W*$|"
    r"^(?:\W*(?:and|so|but|ok|okay|hm+|also|wait)\W+)*"
    r"(?:can|could|would|will|should|shall|do(?! not\b| it\b| that\b| this\b)|does|did|is|are|"
    r"was|were|have|has|what|why|"
    r"how(?! (?:\w+ ){1,2}(?:work|works|are done|get done|go|goes) (?:here|in this)\b)|"
    r"which(?! (?:means|is why)\b)|who|"
    # "when/where" asks, unless a clause says when a rule holds: "when you benchmark:
    # -count=10, always", "when a release goes bad, roll back"
    r"(?:where|when)(?! (?:i|you|we|they|he|she|a|an|the|my|our|your|their|his|her|"
    r"this|that|anyone|someone|somebody|anything|something)\b)|any idea|i wonder)\b"
)
# a way of working asked for good: "from now on, can you write everything in minutes?",
# "can we do everything in km from now on?"
_FOR_GOOD = ("from now on", "going forward")  # one of which `STANDING` cannot match without
STANDING = patterns.compile(
    r"\b(?:can|could|would) (?:you|we) (?!be\b)[^?]{0,80}\b(?:from now on|going forward)\b|"
    r"\b(?:from now on|going forward),? (?:can|could|would) (?:you|we) (?!be\b)"
)
HEDGE = patterns.compile(
    r"\b(?:maybe|perhaps|probably|possibly|i think(?! of (?:it|that|this)\b)|i guess|i bet|"
    r"pretty sure|i suppose|might|what if|suppose|imagine|hypothetically|in theory|not sure|"
    r"no idea|i wonder|fun fact|i doubt|don'?t quote me)\b"  # ("while I think of it: ..." is no guess)
    # an order said as an aside: "a covers band in the 80s (don't ask)", "(on the lead,
    # dont worry)"
    r"|\bdon'?t (?:ask|worry|judge me|laugh)\s*\)"
)
# what each kind of cue weighs: a sentence whose cues weigh THRESHOLD states a rule
CUE_WEIGHTS = {
    "flag": 2.0,
    "deontic": 2.0,
    "order": 2.0,
    "bound": 2.0,
    "prefer": 2.0,
    "replace": 2.0,
    "want": 1.0,
    "limit": 1.0,
    "style": 1.5,
    "contrast": 1.0,
    "polite": 0.5,
    "change": 1.0,
}
CUES = (
    *CUES,
    _cue(
        "prefer",
        "prefer rather hate loathe stand like eat drink fly drive preference fan allergic sick "
        "motion-sick seasick carsick travel-sick vegetarian vegan gluten lactose halal "
        "kosher pescatarian gluten-free lactose-free dairy-free meat pork fish dairy alcohol "
        "teetotal afraid scared terrified diabetic pregnant wheelchair "
        "crutches diet stairs walk climb swim dyslexic colour-blind color-blind colourblind "
        "colorblind deaf hearing epileptic asthmatic coeliac celiac user sighted walker "
        "rollator cane walking murmur condition diabetes asthma epilepsy arthritis dvt angina "
        "copd dementia insulin warfarin apixaban thinners metformin hyperthyroid hypothyroid",
        PREFER.pattern,
    ),
    _cue(
        "replace",
        "now forget scratch instead",
        REPLACE.pattern,
        requires=("now,", "now not", "forget ", "scratch that", "instead of"),
    ),
    _cue("want", "want like", WANT.pattern, requires=_SPEAKER),
    # a wish with a figure to meet: "we want it to bring in about £6,000 a year", "we'd
    # want 150 miles on one charge"
    _cue(
        "bound",
        "want",
        r"\b(?:i|we)(?:'d| would)? (?:really )?want\b[^.?!]*"
        r"(?:[\u00a3$\u20ac]\s?\d|\b\d+(?:[.,]\d+)?\s?(?:k|%|km|miles|hours|mins|minutes)\b)",
        requires=_SPEAKER,
    ),
    _cue(
        "limit",
        "budget deadline limit cap caps max maximum minimum most least than under below "
        "within up all only until till by before stays stay touching moving changing",
        LIMIT.pattern,
    ),
    _cue(
        "style",
        "style tone format formatting convention conventions conventional casual formal "
        "concise verbose short plain bullet bullets emoji emojis british american spelling naming "
        "lowercase uppercase indent indents indentation indented tabs spaces eur euro euros "
        "usd dollars chf gbp pounds yen metric imperial celsius fahrenheit utc local english "
        "german french spanish italian dutch japanese",
        STYLE.pattern,
    ),
    _cue("contrast", "not", CONTRAST.pattern, requires=(", not ",)),
    # a standing choice changed, the new one after a colon: "changed my mind: make it a
    # module, one instance per site", "changing my mind on the preset: ..." (a preference
    # that stands whether or not the one it replaces was kept)
    _cue(
        "prefer",
        "mind",
        r"\b(?:changed|changing|change) my mind(?: (?:on|about) [^:.!?]{1,40})?\s*:\s*\w",
    ),
    _cue("polite", "pls plz please", POLITE.pattern),
    _cue(
        "change",
        "now longer instead anymore any change drop use switch switching",
        CHANGE.pattern,
        requires=(
            "is now",
            "are now",
            "no longer",
            "instead of",
            "any more",
            "anymore",
            "change of",
            "drop the",
            "use the new",
            "switch",
        ),
    ),
)
# the order in which cues are tried: by the weight of their kind, strongest first
_PRIORITY = {
    index: (-CUE_WEIGHTS[cue.name], list(CUE_WEIGHTS).index(cue.name), index)
    for index, cue in enumerate(CUES)
}
# which cues a word may bring into play
_BY_WORD: dict[str, tuple[int, ...]] = {}
for _index, _one in enumerate(CUES):
    for _word in _one.triggers:
        _BY_WORD[_word] = (*_BY_WORD.get(_word, ()), _index)
_OPEN_WORDS = frozenset(
    [
        "important",
        "heads",
        "heads-up",
        "fyi",
        "n.b",
        "careful",
        "rule",
        "constraint",
        "requirement",
        "reminder",
        "caveat",
        "one",
        "ps",
        "p.s",
        "remember",
        "keep",
        "bear",
        "don't",
        "record",
        "clear",
        "forget",
        "usual",
    ]
)
# punctuation around words (not the apostrophe of "don't" or the hyphen of "cut-off")
_EDGES = str.maketrans({c: " " for c in '.,;:!?()[]{}"`*'})
_CUE_WORDS = frozenset(_BY_WORD)  # (a set: `&` with it walks the smaller side)


THRESHOLD = 2.0
# the kind `detect` gives a sentence that only says a rule changes: an item only when it
# replaces a rule laid down before, then a preference
REPLACEMENT = "replacement"
_IF_CHANGED = patterns.compile(r"\W*(?:and |but |so )?(?:if|when|unless|in case|once)\b")
LEAD_WORDS = 8  # a change said in fewer words goes on in the sentence after it
KINDS = {  # the kind an item is, by its strongest cue
    "flag": "constraint",
    "deontic": "requirement",
    "order": "instruction",
    "prefer": "preference",
    "style": "preference",
    "limit": "constraint",
    "bound": "constraint",
    "change": "preference",
    "replace": "preference",
    "want": "preference",
    "polite": "instruction",
    "contrast": "instruction",
    "heading": "instruction",
}

SHORT_SENTENCES, SHORT_CHARS = 4, 400
ANAPHOR = patterns.compile(
    r"^(?:\W*(?:and|so|but|also)\W+)?(?:it|that|this|they|these|those|which|then)\b|"
    r"^(?:\W*(?:and|so)\W+)?i (?:really )?mean (?:it|that)\b|"  # "I mean it this time."
    # a fragment that goes on with the rule before it: "Not with a cable protector, ..."
    r"^not (?:with|at|in|on|for|even|a|an|the|one|by|from|until|before|after|\d)|"
    r"\b(?:on|about|with|to) (?:that|this)\W*$|"  # "He's pretty firm on that."
    # a bound on what was just said: "so: £5,500 for everything. and I really don't want
    # to go over"
    r"\b(?:go|going|spend|spending) (?:over|above|beyond)(?=\s*(?:[,.;!]|$))"
)
ITEM_CHARS = 600
# a pronoun that stands for something said before it
POINTS_BACK = patterns.compile(r"\b(?:it|its|them|they|their|he|she|him|her|his)\b")
LEADS_WITH = patterns.compile(r"^[^:]{3,60}:")  # what a sentence is about, said first
_BULLET = patterns.compile(r"^\s*(?:[-*\u2022+]|\d{1,2}[.)])\s+")


def _listed(line: str, bullet: re.Match[str]) -> str:
    """A list item's text: without its bullet or "1." (a list's marks), with its "1)"
    (the way the user numbered what they say: "1) pain up to 3/10 is ok ...")."""
    return (line if bullet.group().rstrip().endswith(")") else line[bullet.end() :]).strip()


_RULES_HEADING = patterns.compile(
    r"(?:\b(?:rules?|constraints?|requirements?|guidelines?|conventions?|preferences?|"
    r"don'?ts|dos and don'?ts|musts?|policy|policies|ground rules|fixed points?|givens|"
    r"non-negotiables|must-haves|limits|boundaries|red lines|conditions)\b|"
    # how a person says what the list under it is: the way things are done there
    r"\bhow (?:things|we|it) (?:work|works|do things|run)\b|\bbefore you (?:start|touch|"
    r"begin|change|do) (?:anything|something|it)\b|\bthings to know\b|\bthe basics\b|"
    r"\b(?:a )?(?:couple|few) (?:of )?things (?:before you (?:start|begin|get going|"
    r"(?:dive|dig|jump|get) (?:in|into it|started))|to know)\b)"
    r"[^:\n]{0,40}:\s*$"
)
_CODE_LINE = patterns.compile(
    r"^\s*(?:\$ |> |>>> |#!|[{}\[\]]|\w+\s*=\s*[\[{(\"'\d]|at [\w.$]+\(|"
    r"(?i:error|warning|fatal|panic|note|info|debug|traceback|exception|caused by)\b\s*[:(\[])"
)
_WORDS = patterns.compile(r"[^\W\d_]{2,}")
_SYMBOLS = patterns.compile(r"[{}\[\]=<>|\\$]")


# a message someone else wrote to the user, pasted or quoted: it opens with a greeting
# ("Hi Ros, ..."); pasted guidance ("Capital costs must not exceed 20%") binds the work
_PASTED = patterns.compile(
    r"^(?:>\s*[\"\u201c\u201e]?|[\"\u201c\u201e])\s*(?:hi|hello|hey|dear|"
    r"good (?:morning|afternoon|evening))\b",
    re.IGNORECASE,
)


def _unquoted(line: str) -> str:
    """A line without the mark that quotes it ("> Word limit: ..."), a command aside."""
    stripped = line.lstrip()
    if stripped.startswith("> ") and not stripped.startswith("> $"):
        return stripped[2:].strip()
    return line


def _is_prose(line: str) -> bool:
    """A line a person wrote (or quoted), not pasted code, a log, command output or a
    listing."""
    stripped = _unquoted(line).strip()
    if not stripped or _CODE_LINE.match(stripped) or is_record(stripped):
        return False
    if not _SYMBOLS.search(stripped):
        return True  # words and punctuation only
    letters = sum(len(w) for w in _WORDS.findall(stripped))
    return letters >= 0.5 * len(stripped)


# a line that names what it is about, as one of a list without bullets: "Office: two days"
_LABELLED = patterns.compile(r"[A-Z][\w'&/-]*(?: [\w'&/-]+){0,2}:\s+\S")


def units(text: str, spec: bool = False, quotes: bool = True) -> list[tuple[str, bool]]:
    """The statements of a turn: each paragraph, or each item of a list, as one text;
    fenced code and pasted output left out (and, without `quotes`, what it quotes with
    "> "). ``(text, under_rules_heading)``: the items of a list introduced by "ground
    rules:" or "constraints:" (in a task brief, by any line ending in a colon) are rules
    as written."""
    found: list[tuple[str, bool]] = []
    fenced = heading = False
    for block in re.split(r"\n\s*\n", text):
        lines: list[str] = []
        output = False  # the lines after a pasted "$ command" are its output
        pasted = _PASTED.match(block.lstrip()) is not None
        conditions = False  # in a pasted message, the list of conditions it sets
        for line in block.split("\n"):
            if line.lstrip().startswith("```"):
                fenced = not fenced
            elif line.lstrip().startswith("$ "):
                output = True
            elif pasted and not (conditions and _BULLET.match(line)):
                # a message someone else wrote, pasted: not the user's rules, but for the
                # conditions it lists ("... subject to the following conditions:", a list;
                # `_RULES_HEADING` ends in its colon)
                conditions = _RULES_HEADING.search(line.lower()) is not None
                if conditions:
                    lines.append(line)
                continue
            elif not fenced and not output and _is_prose(line):
                unquoted = _unquoted(line)
                if quotes or unquoted is line:
                    lines.append(unquoted)
        if not lines:
            continue
        current: list[str] = []
        listed = False
        lead: list[str] = []  # in a brief: a line ending in ":" and the list it leads into
        for line in lines:
            bullet = _BULLET.match(line)
            if bullet and lead:
                lead.append(_listed(line, bullet))
            elif bullet:
                if current:
                    found.append((" ".join(current), heading and listed))
                current, listed = [_listed(line, bullet)], True
            elif line.rstrip().endswith(":") and (spec or _RULES_HEADING.search(line.lower())):
                if current:
                    found.append((" ".join(current), heading and listed))
                if lead:
                    found.append((_led(lead), True))
                # "Return a summary (100-150 words) with:" and its list are one instruction
                lead = [line.strip()] if spec else []
                current, listed, heading = [], False, True
            elif lead and line[:1].isspace():
                lead[-1] += " " + line.strip()  # an item goes on
            elif lead:
                found.append((_led(lead), True))
                lead = []
                current, listed, heading = [line.strip()], False, False
            elif current and (not listed or line[:1].isspace()) and not _LABELLED.match(line):
                current.append(line.strip())  # the paragraph, or an indented list item, goes on
            else:
                if current:
                    found.append((" ".join(current), heading and listed))
                current, listed, heading = [line.strip()], False, False
        if current:
            found.append((" ".join(current), heading and listed))
        if lead:
            found.append((_led(lead), True))
    return [(" ".join(unit.split()), ruled) for unit, ruled in found if unit.strip()]


# a sentence that goes with the rule before it: it points back, gives a reason, or is short
FOLLOWS = patterns.compile(
    r"^(?:\W*(?:and|so|but|also|because|since|otherwise|or else|as|then)\W+)?"
    r"(?:it|that|this|they|these|those|which|there|because|since|otherwise|so|"
    r"non[- ]?negotiable|no exceptions?|last time|we had|the reason)\b|^.{1,60}$"
)


def _another_rule(parts: list[str], rules: list[int], window: list[int], index: int) -> bool:
    """Whether the rule sentence at `index` is a rule of its own, led in by a colon, not
    more of the one in `window`: "... leave deploy.yml alone, Maren's on it. and
    non-negotiable: nothing goes to prod on weekends" is two items (one may be replaced
    while the other stands); "never write 'beneficiaries'. The committee can't stand the
    word" is one (its reason, though a rule's words say it)."""
    if index not in rules or not any(i in rules for i in window):
        return False
    _, colon, stated = parts[index].partition(":")  # "and non-negotiable: <its rule>"
    return bool(colon) and len(terms(stated)) >= 3


# a rule announced as one, its words to follow: "rule from now on: ...", "new rule: ...",
# "two things that aren't up for debate."
RULE_SAID = patterns.compile(
    r"\b(?:new |house |hard |golden )?rules?(?: from now on| for [\w -]{1,20})?:\s|"
    r"\b(?:two|three|four|a few|a couple of|couple of) (?:things|rules)\b(?! (?:about|to)\b)"
)


def _goes_with(rule: str, after: str) -> bool:
    """Whether the sentence `after` a rule belongs to it: it points back at it, gives its
    reason, or shares what it is about."""
    if FOLLOWS.match(after.lower().strip()):
        return True
    return bool(set(terms(rule)) & set(terms(after)))


def _led(lead: list[str]) -> str:
    """A line ending in ":" with the items of the list under it, as one statement."""
    items = [item.rstrip(";,") for item in lead[1:]]
    return lead[0] + (" " + "; ".join(items) if items else "")


_STRONG = ("flag", "deontic", "order", "bound", "prefer", "replace")


_WHAT_IF = patterns.compile(r"\bif\b[^.!?]{0,60}\b(?:i|we) (?:might|could)\b")


def rule_score(sentence: str) -> tuple[float, str | None]:
    """How strongly `sentence` states a rule (`THRESHOLD` or more is one), and its
    strongest cue (None if none). The kinds of cue are tried strongest first, and only
    as far as they can still change the outcome: one strong cue makes a rule, and weak
    ones are looked for only while together they could."""
    lower = sentence.lower()
    held = set(lower.translate(_EDGES).split())
    wanted: set[int] = set()
    for word in held & _CUE_WORDS:
        wanted.update(_BY_WORD[word])
    chosen = sorted(wanted, key=_PRIORITY.__getitem__)
    score, best = 0.0, None
    for index in chosen:
        cue = CUES[index]
        if cue.name not in _STRONG or best == cue.name or not cue.found(lower, held):
            continue
        if cue.name == "deontic" and GUESS.search(lower) and not _ordered(lower, held):
            continue  # "it must be the cache", "I need to check first"
        if cue.name == "flag" and NEGATED_FLAG.search(lower):
            continue  # "grab rails would be great, not a dealbreaker"
        score, best = CUE_WEIGHTS[cue.name], cue.name
        break
    if (
        not score
        and not held.isdisjoint(_OPEN_WORDS)
        and (_flag_opens(lower) or REMINDER.search(lower))
    ):
        score, best = 2.0, "flag"
    if not score:
        weak = [CUES[i] for i in chosen if CUES[i].name not in _STRONG]
        left = sum(CUE_WEIGHTS[c.name] + (c.name == "limit") * 0.5 for c in weak)
        seen: set[str] = set()
        best_weight = 0.0
        for cue in weak:
            if score >= THRESHOLD or score + left < THRESHOLD:
                break
            weight = CUE_WEIGHTS[cue.name] + (cue.name == "limit") * 0.5
            left -= weight
            if cue.name in seen or not cue.found(lower, held):
                continue
            seen.add(cue.name)
            if cue.name == "limit" and not NUMBER.search(lower):
                weight -= 0.5  # "under 9k", "max one stop", "by Friday 15 May" weigh more
            score += weight
            if weight > best_weight:
                best, best_weight = cue.name, weight
    if (
        any(phrase in lower for phrase in _FOR_GOOD)
        and STANDING.search(lower)
        and not HEDGE.search(lower)
    ):
        return max(score, THRESHOLD), best or "flag"  # asked, but for good
    if score >= THRESHOLD and (QUESTION.search(lower) or HEDGE.search(lower)):
        return 0.0, None  # a question, a guess or a hypothetical lays down nothing
    return score, best


def _ordered(lower: str, held: set[str]) -> bool:
    """Whether `lower` holds an order ("don't", "never", "keep"...): a rule even where a
    "must" in it reads as a guess."""
    return any(cue.name == "order" and cue.found(lower, held) for cue in CUES)


def detect(
    role: str, text: str, spec: bool = False, quotes: bool = True, replacing: bool = False
) -> list[tuple[str, str]]:
    """``(kind, statement)`` for each rule a user or system turn lays down. `spec`: the
    turn is a task brief (a subagent's prompt), whose instructions ("Use TypeScript",
    "Return a summary of 100-150 words") all bind the work. Without `quotes`, only the
    turn's own words: not what it quotes with "> " (a policy, a colleague's message).
    With `replacing`, also each sentence that only says a rule changes, as a
    `REPLACEMENT` (an item once it replaces a rule laid down before)."""
    if role not in ("user", "system"):
        return []
    replacing = replacing and _may_change(text.lower())
    found: list[tuple[str, str]] = []
    for unit, under_heading in units(text, spec, quotes):
        parts = sentences(unit)
        scored = [_brief_score(s) if spec else rule_score(s) for s in parts]
        rules = [i for i, (score, _) in enumerate(scored) if score >= THRESHOLD]
        # a rule said inside a daydream ("if this takes off i might just quit teaching.
        # 35 quid x 30 hours, no marking, no ofsted") lays nothing down
        rules = [i for i in rules if not (i and _WHAT_IF.search(parts[i - 1].lower()))]
        if under_heading and not rules and len(terms(unit)) >= 2:
            # a bullet under "ground rules:" is a rule whatever its wording
            if not any(QUESTION.search(s.lower()) for s in parts):
                found.append(("instruction", _clip(unit)))
            continue
        if not rules:
            if replacing:
                found += _replacements(parts)
            continue
        # each rule sentence with the sentence after it when that goes with it (its
        # reason or consequence: "no unwrap() in library code. logq-core is embedded
        # by..."; not the next thing the turn goes on to say), and the one
        # before when it leads into it ("...:") or the rule points back at it ("it
        # must never show up..."); questions are no part of a rule
        chosen: set[int] = set()
        if len(parts) <= SHORT_SENTENCES and len(unit) <= SHORT_CHARS:
            # a short paragraph is one statement: the rule, its reason, its scope
            chosen.update(i for i, part in enumerate(parts) if not QUESTION.search(part.lower()))
        for index in rules:
            chosen.add(index)
            after = parts[index + 1] if index + 1 < len(parts) else None
            if after and not QUESTION.search(after.lower()) and _goes_with(parts[index], after):
                chosen.add(index + 1)
            if RULE_SAID.search(parts[index].lower()):
                # "rule from now on: keep the errors customer-safe. no stack traces, no
                # sql. customers get a code and the request id.": all of it, to a question
                for later in range(index + 1, len(parts)):
                    if QUESTION.search(parts[later].lower()):
                        break
                    chosen.add(later)
            if _led_into(parts, index):
                chosen.add(index - 1)
        windows: list[list[int]] = []
        for index in sorted(chosen):
            if (
                windows
                and index == windows[-1][-1] + 1
                and not _another_rule(parts, rules, windows[-1], index)
            ):
                windows[-1].append(index)
            else:
                windows.append([index])
        for window in windows:
            strongest = next((i for i in window if i in rules), rules[0])
            found.append(
                (
                    KINDS[scored[strongest][1] or "heading"],
                    _clip(" ".join(parts[i] for i in window)),
                )
            )
    return found


# words one of `CHANGED`, `RETRACTS` and `NAMED_CHANGE` cannot match without, looked for
# as plain text first (most paragraphs have none: no regex is run)
_CHANGE_WORDS = (
    "chang", "take back", "took back", "taking back", "take it back", "take that back",
    "take this back", "come round", "coming round", "goalpost", "longer", "anymore",
    "any more", "forget", "ignore what", "ignore the", "ignore my", "ignore that", "scratch",
    "disregard", "i know i said", "was wrong", "talked me", "won me", "soften", "scrap",
    "drop the", "drop my", "drop that", "drop what", "ditch", "down to", "up to",
    "fine now", "ok now", "okay now", "allowed now", "from now", "new floor", "new ceiling",
    "new limit", "new budget", "new cap", "new deadline", "new rule", "new max", "new min",
    "new target", "new number", "new figure",
)  # fmt: skip
# ... and the two that need a pattern: a limit moved, a figure moved
_MOVE_WORDS = ("rais", "lower", "bump", "cut", "from ")
ADMITS = patterns.compile(r"\bi was wrong (?:about|on) ")


def admits(text: str) -> bool:
    """Whether `text` only admits a fact the user said was wrong ("ok I was wrong about
    raw then, it only dedupes within a load"), changing no rule."""
    return change_said(text.lower()).admits


_SET_NOW = patterns.compile(r"\b(?:is|are|'s) (?:the |real |[\u00a3$\u20ac]\d)[^.;!?]{0,30} now\b")
_CHANGE_MOVES = patterns.compile(r"\b(?:rais|lower|bump|cut)\w* (?:it|that|the)\b|\bfrom \W?\d")


def _may_change(lower: str) -> bool:
    """Whether lower case text may say a rule changes (`CHANGED`, `RETRACTS`,
    `NAMED_CHANGE`): plain text looked for first, a pattern only where it can match."""
    return (
        any(word in lower for word in _CHANGE_WORDS)
        or (any(word in lower for word in _MOVE_WORDS) and _CHANGE_MOVES.search(lower) is not None)
        or (" now" in lower and _SET_NOW.search(lower) is not None)
        or (("not" in lower or "n't" in lower) and CORRECTED.search(lower) is not None)
    )


def _replacements(parts: list[str]) -> list[tuple[str, str]]:
    """The sentences of a paragraph that lays down no rule that say a rule changes, in
    words no rule is said in ("ok change of plan on my rule: 10 s cap, not 5", "sundays
    are fine now, 11 till 3"), each a `REPLACEMENT`; one said in few words ("and change
    of plan on nights.") with the sentence after it, which says what the change is."""
    found: list[tuple[str, str]] = []
    for index, part in enumerate(parts):
        lower = part.lower()
        if not _may_change(lower):
            continue
        said = CHANGED.search(lower) or RETRACTS.search(lower) or NAMED_CHANGE.search(lower)
        if not (said or CORRECTED.search(lower)) or (
            QUESTION.search(lower) or _IF_CHANGED.match(lower)
        ):
            continue
        after = parts[index + 1] if index + 1 < len(parts) else ""
        # (its words after what leads it in: "and while you're in there: I changed my
        # mind about tests." is a change said in six)
        said_in = part.rsplit(": ", 1)[-1]
        if after and len(said_in.split()) < LEAD_WORDS and not QUESTION.search(after.lower()):
            part = f"{part} {after}"
        found.append((REPLACEMENT, _clip(part)))
    return found


# an instruction of a task brief: what to use, produce or keep to
BRIEF = patterns.compile(
    r"^(?:\W*(?:and|also|then|please|pls)\W+)?(?:use|return|write|produce|output|format|"
    r"respond|answer|keep|include|exclude|follow|avoid|ensure|limit|stick|prefer|only|do not|"
    r"don'?t|never|always|make sure|must)\b|\(\s*\d+\s*(?:-|\u2013|to)\s*\d+\s*words?\s*\)"
)


def _brief_score(sentence: str) -> tuple[float, str | None]:
    score, cue = rule_score(sentence)
    if (
        score < THRESHOLD
        and BRIEF.search(sentence.lower())
        and not QUESTION.search(sentence.lower())
    ):
        return THRESHOLD, "order"
    return score, cue


@lru_cache(maxsize=4096)
def core(text: str) -> str:
    """What of an item states its rule: its rule sentences, each with the sentence that
    leads into it (`_led_into`), and after the words that lead the item in when a rule
    points back further ("Heads up on the old bucket: it stays. ... Don't delete it");
    the whole item when no sentence of it is a rule on its own (a list's item under
    "ground rules:", a short paragraph taken whole). A context short of room shows items
    so (see `ccm.context`): a rule's reason and its scope are its first words to go."""
    parts = sentences(text)
    if len(parts) < 2:
        return text
    rules = [i for i, part in enumerate(parts) if rule_score(part)[0] >= THRESHOLD]
    if not rules:
        return text
    chosen = set(rules) | {i - 1 for i in rules if _led_into(parts, i)}
    said = [parts[i] for i in sorted(chosen)]
    lead = LEADS_WITH.match(parts[0])
    if lead and 0 not in chosen and any(POINTS_BACK.search(parts[i].lower()) for i in rules):
        said.insert(0, lead.group())  # "Heads up on the old bucket:" says what "it" is
    return " ".join(said)


def _led_into(parts: list[str], index: int) -> bool:
    """Whether the sentence before `parts[index]` (a rule) goes with it: it leads into
    it ("...:"), or the rule points back at it ("it must never show up..."); a question
    never does."""
    return bool(
        index
        and not QUESTION.search(parts[index - 1].lower())
        and (parts[index - 1].endswith(":") or ANAPHOR.search(parts[index].lower()))
    )


def _clip(text: str) -> str:
    return text if len(text) <= ITEM_CHARS else text[: ITEM_CHARS - 1].rstrip() + "\u2026"


def subject(text: str) -> set[str]:
    """The content terms of an item, for finding the earlier rule a new one replaces."""
    return set(terms(text))


def only_replaces(text: str) -> bool:
    """Whether all `text` says as a rule is that something earlier is dropped ("forget
    the finance, we're paying cash"): a rule only when it replaces one."""
    cues = {cue for score, cue in map(rule_score, sentences(text)) if score >= THRESHOLD}
    return cues == {"replace"}


class _Said(NamedTuple):
    """What a text says of a change, read once however many rules it is compared with."""

    change: bool  # it says a rule changes ("now", "forget", "instead", "no longer")
    corrects: bool  # it says a figure was wrong ("£500, not £750")
    explicit: bool  # it takes an earlier word back as such (`RETRACTS`)
    named: frozenset[str]  # the terms of what it says it changes (`named_in`)
    figures: frozenset[str]  # the figures it says something had (`old_figures`)
    admits: bool  # it only admits a fact said was wrong (`ADMITS`), changing no rule


@lru_cache(maxsize=256)
def change_said(lower: str) -> _Said:
    """`_Said` of lower case text (a change is compared with many rules, and kept ones)."""
    changed = bool(CHANGE.search(lower) or REPLACE.search(lower))
    return _Said(
        changed or NAMED_CHANGE.search(lower) is not None,
        CORRECTED.search(lower) is not None,
        RETRACTS.search(lower) is not None,
        frozenset(named_in(lower)),
        frozenset(old_figures(lower)),
        not changed and ADMITS.search(lower) is not None,
    )


def changes(text: str) -> bool:
    """Whether `text` says it changes a rule ("now", "forget", "instead", "no longer") or
    corrects a figure ("£500, not £750")."""
    said = change_said(text.lower())
    return said.change or said.corrects


def replaces(
    later: str, earlier: str, later_subject: set[str] | None = None, named: bool = False
) -> bool:
    """True when the rule `later` changes the rule `earlier`: it says it changes one
    (`changes`) and is about the same thing (a good share of the shorter one's terms:
    two rules of one long message share a few words without being about the same
    thing). With `named`, also when it names the rule it changes ("changed my mind about
    short") or the figure the rule had ("10 s cap, not 5"), and `earlier` has it: a
    weaker sign, for when no rule is about the same thing."""
    if later_subject is None:
        if not changes(later):
            return False
        later_subject = subject(later)
    a, b = later_subject, subject(earlier)
    if not a or not b:
        return False
    shared = len(a & b)
    lower = later.lower()
    said = change_said(lower)
    if not said.change:
        # a correction alone ("£4,360, not £3,860") replaces no rule: what it corrects was
        # said as a fact (`ccm.engine.fold` keeps those, and replaces the one it names)
        return False
    if said.admits:
        return False  # a fact admitted wrong ("I was wrong about raw") changes no rule
    # "forget what I said about console" names what it replaces: two terms in common do
    if shared >= 2 and (said.explicit or shared >= 0.3 * min(len(a), len(b))):
        return True
    if not named:
        return _bound_set_anew(lower, earlier)
    # the rule changed named ("changed my mind about short", "change of rule on paging"),
    # or the figure it had ("10 s cap, not 5", "16,500 instead of 20k"): one term does
    if names_any(said.named, b):
        return True
    return bool(shared) and says_figure(earlier.lower(), said.figures)


# the terms of the words a change is said in ("change of rule on ...", "changed my mind")
CHANGE_TERMS = frozenset(terms("change changed changing changes rule rules mind plan"))


def names_any(named: Iterable[str], held: Iterable[str]) -> bool:
    """Whether a term of `named` is one of `held`, the short word and its inflections
    taken as one ("paging" names "page": `text.root`)."""
    return not {root(t) for t in named}.isdisjoint(map(root, held))


def old_figures(lower: str) -> set[str]:
    """The figures a change or a correction says something had ("not 50", "instead of
    20k", "isn't 750"), in lower case text: two digits at least (a "3" or an "8" is in
    too many things said)."""
    found = [match.group("was") for match in OLD_FIGURE.finditer(lower)]
    found += [match.group("was") for match in CORRECTED.finditer(lower)]
    return _of_two_digits(found)


def _of_two_digits(figures: Iterable[str]) -> set[str]:
    """The `figures` with two digits at least (a "3" or an "8" is in too many things
    said to say which one was meant)."""
    return {figure for figure in figures if sum(ch.isdigit() for ch in figure) >= 2}


def figures_denied(text: str) -> frozenset[str]:
    """The figures a reading of the evidence says are not so ("seated dinner: 40
    persons, not 50", "it isn't 1,450, the certificate says 1,540"): two digits at least,
    as `old_figures`."""
    lower = text.lower()
    if "not" not in lower and "n't" not in lower:
        return frozenset()
    # "not £14k" denies 14k, not the 14 of "14 days"
    found = (
        match.group("was") + ("k" if match.group().endswith("k") else "")
        for match in CORRECTED.finditer(lower)
    )
    figures = _of_two_digits(found)
    # a name with a figure in it: "tank is raidz1, not raidz2", "it isn't v2.3"
    figures.update(match.group("was") for match in _NAME_DENIED.finditer(lower))
    return frozenset(figures)


_NAME_DENIED = patterns.compile(
    _NOT_SO + r"(?:the |a |an )?"
    r"(?P<was>[a-z][a-z-]*\d(?:[\w.-]*[a-z\d])?)(?![\w-])"
)


def says_figure(lower: str, figures: Set[str]) -> bool:
    """Whether lower case text says one of `figures` as a figure of its own ("480" in
    "£480 a year", "the 20th", "200m2"; not in "14,480" nor "4.80")."""
    return any(
        re.search(
            rf"(?<![\w.,]){re.escape(f)}(?:st|nd|rd|th|[a-z]{{1,3}}\d?|\u00b2)?(?!\w|[.,]\d)", lower
        )
        for f in figures
    )


def _bound_set_anew(later: str, earlier: str) -> bool:
    """A limit set anew: "the ceiling is now £16,500" replaces "£15,000 is the absolute
    ceiling", whatever else each says (`later` lower case)."""
    bound = set(_BOUND_NOUN.findall(later)) & set(_BOUND_NOUN.findall(earlier.lower()))
    if bound and _DIGIT.search(later) and _DIGIT.search(earlier):
        return True
    # a limit on a sum for the same span set anew: "£160 a month is the ceiling now"
    # after "we can do £80 a month on the dog, all in" (not a quote's "£17.85 a month")
    lower = earlier.lower()
    return bool(set(_SUM_PER.findall(later)) & set(_SUM_PER.findall(lower))) and bool(
        _BOUND_NOUN.search(lower) or _GO_PAST.search(lower)
    )


def names_the_change(text: str) -> bool:
    """Whether a change names what it changes ("change of rule on paging: ...", "I take
    back the no-progress-bar thing", "Priya changed the convention"): the new rule it
    goes on to say binds from now on, whether or not the rule it changes was caught."""
    lower = text.lower()
    if len(subject(text)) < SAYS_TERMS:  # "ok, I've changed my mind on the photo thing."
        return False
    return NAMED_CHANGE.search(lower) is not None or (
        _RULE_WORD.search(lower) is not None and CHANGED.search(lower) is not None
    )


_RULE_WORD = patterns.compile(r"\b(?:rule|convention|policy)\b")
SAYS_TERMS = 6  # ... and says what the new rule is in this many terms at least


def named_in(lower: str) -> set[str]:
    """The terms of what a change says it changes (`NAMED_CHANGE`), in lower case text
    (a compound's words too: "forget biggest-first" names "biggest first")."""
    named = set()
    for found in NAMED_CHANGE.finditer(lower):
        what = next(group for group in found.groups() if group)
        named.update(terms(what))
        named.update(terms(re.sub(r"[-_]", " ", what)))
    return named


PREFERENCE_CHARS = 300  # a preference kept to be named again is a sentence this long at most
LEAD_CHARS = 80  # ... with the sentence before it when that is this long at most


def remembered(text: str, rules: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The sentences of a user turn that sound like a preference (`PREFERS`) or say a
    figure, and are no rule (none of `rules`, its items): kept, so that a change or a
    correction that names one later replaces it ("I want an untethered one", then
    "I've changed my mind on tethered"; "the kit's about £14k", then "more like £17.5k,
    not 14k"). Each with the sentence before it when that is short and kept for nothing
    else, else "": what it is about is often said just before ("flat. one root, no
    modules.", "an alert on the runners' disks. Warn at 80%, and it goes to #ci-noise.")."""
    laid = " ".join(sentence for _, sentence in rules)
    parts = sentences(text)
    kept = [
        at
        for at, sentence in enumerate(parts)
        if len(sentence) <= PREFERENCE_CHARS
        and sentence not in laid
        and (PREFERS.search(sentence.lower()) or _DIGIT.search(sentence))
        and not QUESTION.search(sentence.lower())
    ]
    return [
        (
            parts[at - 1]
            if at
            and at - 1 not in kept
            and len(parts[at - 1]) <= LEAD_CHARS
            and parts[at - 1] not in laid
            and not QUESTION.search(parts[at - 1].lower())
            else "",
            parts[at],
        )
        for at in kept
    ]


# what a person's preference sounds like, kept to be found again when a change names it
# ("I want an untethered one", "warm pls", "table tests pls", "don't bother with a test")
PREFERS = patterns.compile(
    r"\b(?:want|wants|prefer|prefers|need|needs)\b|\b(?:i|we|he|she|they) (?:really )?likes?\b|"
    r"\b(?:pls|please|don'?t|never|no|not|only|always|keep|stays?|just use|rather)\b"
)


def left_standing(earlier: str, later: str) -> str:
    """What of the item `earlier` the rule `later` that replaces it leaves standing: its
    sentences that share no term with `later`, when one of them is a rule ("no exec.
    RAW is append-only, nobody deletes anything in it. and all times in UTC please",
    then "from now on give me times in Oslo time": the first two stand); else ""."""
    # the sentences that say the figure it corrects ("not 3,860"), else those with what it
    # says it changes ("changing my mind on the preset"), else with anything it says
    parts = sentences(earlier)
    said = change_said(later.lower())
    figures: Set[str] = said.figures
    if not any(says_figure(part.lower(), figures) for part in parts):
        figures = set()
    changed = said.named or subject(later)
    kept = [
        part
        for part in parts
        if not (
            says_figure(part.lower(), figures) if figures else not changed.isdisjoint(terms(part))
        )
    ]
    # a rule, or what is not done, said with the rule that changed ("we're not doing
    # viewings ourselves, ... and no viewings on sundays either", then "sundays are fine
    # now": the first stands)
    if not any(rule_score(part)[0] >= THRESHOLD or _NOT_DONE_HERE.search(part) for part in kept):
        return ""
    return " ".join(kept)


_NOT_DONE_HERE = patterns.compile(r"\b(?:not|never|no)\b|n't\b", re.IGNORECASE)


_GO_PAST = patterns.compile(
    r"\b(?:can'?t|cannot|won'?t|will not|not) (?:go|going|spend|pay) (?:above|over|beyond|more)\b|"
    r"\bnot a penny more\b|\ball[ -]in\b|\bat most\b|\bno more than\b|\bmax\b|\btops\b"
)
_SUM_PER = patterns.compile(
    r"[\u00a3$\u20ac]\s?\d[\d,.]*k?\s?(?:a|per|/)\s?(day|week|month|year|night|head|person)\b"
)
_BOUND_NOUN = patterns.compile(r"\b(?:ceiling|cap|budget|floor|limit|maximum|minimum)\b")
_DIGIT = patterns.compile(r"\d")


FORBID = patterns.compile(r"\b(?:never|don'?t|do not|avoid|no)\s+((?:[\w.-]+\s+){0,2}[\w.-]+)")


def forbidden_terms(text: str) -> list[str]:
    """What a "never X" / "don't X" / "avoid X" item forbids, as terms (for drift checks)."""
    found: list[str] = []
    for sentence in sentences(text.lower()):
        for match in FORBID.finditer(sentence):
            found.extend(t for t in terms(match.group(1)) if len(t) > 2 and t not in found)
    return found
