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

from ccm.engine.text import terms

# -- cues, matched against a lowercased sentence ------------------------------------

# a clause opens at the start of a sentence or after a colon, dash, comma or "so/and"
_OPEN = r"(?:^|[:;,(\u2014\u2013]\s*|\s-\s|\b(?:so|and|but|also|then|pls|please)\s+)"

# flagged as a rule: the speaker says it is one
FLAG = re.compile(
    r"\b(?:ground rules?|house rules?|(?:the|one|a|new|golden|hard|strict) rule|"
    r"(?:make|making) (?:that|this|it) a rule|rule (?:is|of thumb)|"
    r"hard (?:constraint|limit|budget|deadline|requirement|stop|cap|no)|"
    r"non[- ]?negotiable|no exceptions?|mandatory|at all times|under no circumstances|"
    r"whatever (?:we|you|i|they) (?:do|pick|choose|build|decide)|no matter what|"
    r"from now on|going forward|from here on|i mean it|insists? on|"
    r"(?:his|her|their|my|our|one|the) (?:condition|constraint|requirement)s?\b|"
    r"(?:is|are|it'?s) (?:a )?(?:hard |strict )?(?:constraint|requirement|must)\b|"
    r"not moving|not negotiable|(?:is|are|stays?) (?:frozen|locked)\b|"
    r"deal[- ]?breaker|red line|"
    r"\b(?:deadline|budget|curfew|cut-?off|limit|cap)\s*(?:is\b|:|of\b|=|\u2014|-\s))"
)
# a sentence that opens with a flag: "important: ...", "heads up: ...", "rule: ..."
FLAG_OPEN = re.compile(
    r"^(?:\W*(?:and|also|oh|so|but|btw|ok|okay|one more thing|one thing|just)\W+)*"
    r"(?:(?:very |super |really )?important|heads[- ]up|fyi|note|n\.?b\.?|careful|"
    r"rule|constraint|requirement|reminder|caveat|one thing|ps|p\.s\.|remember|"
    r"keep in mind|bear in mind|don'?t forget|for the record|"
    r"to be (?:super |very |really )?clear)\b\s*(?:[:!,\u2014-]|that\b)"
)
# obliges or forbids; "must" of a guess ("must be undercounting", "must have been")
# is left out below
DEONTIC = re.compile(
    r"\bmust(?:n'?t| not| never| always| only)?\b|\b(?:has|have|had) to\b|\bneeds? to\b|"
    r"\bshall\b|\bis (?:not )?allowed\b|\bare (?:not )?allowed\b|\bnot permitted\b|"
    r"\brequired\b|\b(?:needs?|requires?) (?:\w+'s |an? |the |my |our |your )?(?:ok|okay|"
    r"approval|sign-?off|review|permission|consent|go-ahead)\b|"
    r"\b(?:goes|go|belongs?|lives?) (?:in|into|on|to) [^.;]{1,40}, not\b|\b(?:can'?t|cannot|can not|may not|mustn'?t|shouldn'?t|should not|"
    r"won'?t be able to)\s+(?:\w+\s+)?(?:do|use|touch|write|change|edit|go|exceed|cost|be|"
    r"have|store|show|take|add|merge|deploy|run|push|eat|drink|stand|handle|afford|spend|"
    r"move|fly|drive|leave|miss|break|lose|get|keep|log|send|share|delete|drop|"
    r"install|upgrade|rely|depend|commit|mix|hold|carry|walk|climb|sleep|book|pay|stay)\b"
)
GUESS = re.compile(
    r"\bmust(?:'ve| have| be \w+ing\b| be (?:wrong|right|it|the|a|an|some|somewhere|"
    r"broken|missing|off|lying|confused|kidding|joking|nice|fun|great|hard|tough|"
    r"tired|exhausting))|\b(?:i|we|you) (?:have|had|need) to (?:admit|say|ask|confess|"
    r"agree|go now|run now|check|look|think|wonder|dash|leave now)\b|"
    r"\bhave to (?:see|wait and see)\b|"
    r"\b(?:has|have) to be (?:the|a|an|it|that|this|something|somewhere|related|because)\b|\bcan'?t be (?:it|that|this|the|right|true|wrong|"
    r"related|a|an)\b|"
    # the speaker's own next chore, not a rule: "need to check with Dario first"
    r"(?:^|[.:,;]\s*|\b(?:i|we|now|so|then|still|just)\s+)(?:actually\s+)?(?:need|have|had) "
    r"to (?:actually )?(?:check|ask|talk|look|figure|find|think|decide|pick|choose|call|email|"
    r"go|leave|run|get|buy|order|wait|see|sort|do|finish|write|read|send|tell|book|sleep|"
    r"eat|try|fix|debug|test|measure|ping|grab|head|hop|jump|dash)\b"
)
# a prohibition or a standing order at the opening of a clause
ORDER = re.compile(
    r"(?:"
    + _OPEN
    + r"(?:don'?t|do not)|(?:^|[:;,(\u2014\u2013]\s*|\s-\s|\b(?:so|but|pls|please)\s+)"
    r"(?:(?:never|always)(?! (?:\w+ed|told|said|went|did|had|got|been|forget|"
    r"made|saw|knew|thought|heard|came|took|gave|found|felt|left|ran|wrote|the|a|an|same|"
    r"so|like|there|here|mind|\w+s)\b)|"
    r"(?:use|write|put|send|call|name|spell|book|answer|reply)\s[^.;]{1,40}?,? not\b|"
    r"avoid|refrain from|stop using|"
    r"leave (?:\S+ ){0,3}alone|hands off|nothing (?:under|in|inside|with|from|that|outside)|"
    r"keep (?!going|at it|it up|in mind|me posted|an eye|track|trying|looking|digging|"
    r"(?:it|that|this|them|those|both)\s*(?:[.!,]|$))|"
    r"(?:we(?:'ll| will)? )?(?:stay (?:on|with|under|below|within|off|away|in|out)|"
    r"stick (?:to|with))|"
    r"only (?:ever |use|touch|read|write|run|deploy|push|work|book|buy|pick|edit)|"
    r"make sure|be sure to|remember to|don'?t forget to|be careful|careful with|watch out|"
    r"mind the|"
    r"no (?!idea|worries|problem|way|rush|luck|clue|thanks|need|one\b|i\b|it\b|not\b|"
    r"more\b|longer\b|doubt|wonder|kidding|joke|change|error|errors|issue|issues|nan\b|"
    r"diff|difference|output|response|reply|answer|news|results?\b|match|matches|hits|"
    r"sign|trace|luck|dice|go\b|big deal|pr\b|\w+ yet)"
    r"(?:[\w\"'()*.#/-]+ ){0,3}(?:in|on|to|into|inside|under|for|from|with|without|"
    r"mixed|anywhere|ever|allowed|pls|please|period|at all)\b))"
)
# a limit that opens a sentence or clause: "max one stop", "no more than 3 hotel changes"
BOUND = re.compile(
    r"(?:^|[:;\u2014]\s*|\b(?:so|and|but|also|pls|please)\s+)(?:max(?:imum)?|minimum|at most|"
    r"at least|no more than|not more than|up to|under|below|only|no \w+ (?:longer|more|later|"
    r"earlier|shorter) than)\s+(?:\S+\s+){0,2}?(?:[\d\u20ac$\u00a3]|one|two|three|four|five|"
    r"six|seven|eight|nine|ten|a (?:day|week))"
)
# a limit, a deadline, a budget: weighs with another cue or a number
LIMIT = re.compile(
    r"\b(?:budget|deadline|limit|cap|caps|max(?:imum)?|minimum|at most|at least|"
    r"no (?:more|longer|later|earlier) than|not (?:more|longer|later) than|"
    r"(?:less|fewer|shorter|longer|more) than|under|below|within|up to|all in|"
    r"only|until|till|by (?:mon|tue|wed|thu|fri|sat|sun|the end|end of|eod|tomorrow|"
    r"tonight|noon|\d)|before (?:mon|tue|wed|thu|fri|sat|sun|the|we|you|\d)|"
    r"stays?(?: where| as| in| on| out| put)?|not (?:touching|moving|changing))\b"
)
NUMBER = re.compile(r"\d|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|twice)\b")
# the speaker's standing preference or condition
PREFER = re.compile(
    r"\b(?:i|we)(?:'d| would)? (?:(?:really|strongly|much|definitely) )?"
    r"(?:prefer|rather|hate|loathe|can'?t stand|don'?t (?:like|do|eat|drink|fly)|"
    r"do not like|never (?:fly|eat|drink|use|take))|"
    r"\bmy preference\b|\bnot a fan of\b|\ballergic\b|\b(?:motion|sea|car|travel)[- ]?sick\b|"
    r"\b(?:vegetarian|vegan|gluten|lactose|halal|kosher|pescatarian|teetotal)\b|"
    r"\bi(?:'m| am) (?:afraid of|scared of|terrified of|diabetic|pregnant|"
    r"on (?:a |my )?(?:wheelchair|crutches|diet))\b|\bi get (?:\w+ )?sick\b|"
    r"\bi (?:can'?t|cannot) (?:eat|drink|stand|do stairs|walk|climb|swim|fly)\b"
)
# a wish: weighs with another cue ("I want a proper suite" is a task, not a rule)
WANT = re.compile(
    r"\b(?:i|we)(?:'d| would)? (?:(?:really|definitely) )?(?:want|don'?t want|do not want|"
    r"'?d like|like)\b(?! to\b)"
)
# how the work should look: style, tone, format
STYLE = re.compile(
    r"\b(?:style|tone|format(?:ting)?|convention(?:al)?s?|casual|formal|concise|verbose|"
    r"short sentences|bullet points?|no emojis?|british|american english|spelling|"
    r"naming|lowercase|uppercase|indent\w*|tabs|spaces|in (?:eur|euros?|usd|dollars|chf|gbp|"
    r"pounds|yen|metric|imperial|celsius|fahrenheit|utc|local time|\w+ english|german|"
    r"french|spanish|italian|dutch|japanese))\b"
)
# a contrast that corrects: "results go in the sheet, not Slack", "tabs, not spaces"
CONTRAST = re.compile(r", not (?!(?:sure|yet|really|that|bad|quite|much|now|so|too)\b)\w+")
# a polite imperative (a weak cue: "team sheet row pls" is a one-off)
POLITE = re.compile(r"\b(?:pls|plz|please)\b")
# a change of an earlier rule: "P0 now, not P1", "forget matte black, brushed brass"
CHANGE = re.compile(
    r"\b(?:is|are) now\b|\bno longer\b|\binstead of\b|\bnot \w+ (?:any ?more)\b|"
    r"\bchange of (?:heart|plan)\b|\bdrop the\b|\buse the new\b|\bswitch(?:ing)? to\b"
)
# a rule replaced in so many words: "P0 now, not P1", "forget matte black, brushed brass"
REPLACE = re.compile(
    r"\bnow,? not\b|\bforget (?:the |about the |my |(?:[\w-]+ ){0,3}[\w-]+, )|"
    r"\bscratch that\b|\binstead of\b[^.]*\b(?:from now on|use|go with)\b"
)
# not a rule: a question, a guess, a hypothetical, a request for an answer
QUESTION = re.compile(
    r"\?\s*(?:\W\s*)?$|^(?:\W*(?:and|so|but|ok|okay|hm+|also|wait)\W+)*"
    r"(?:can|could|would|will|should|shall|do(?! not\b)|does|did|is|are|was|were|have|has|what|why|"
    r"how|which|who|where|when|any idea|i wonder)\b"
)
HEDGE = re.compile(
    r"\b(?:maybe|perhaps|probably|possibly|i think|i guess|i bet|pretty sure|i suppose|"
    r"might|what if|suppose|imagine|hypothetically|in theory|not sure|no idea|i wonder|"
    r"fun fact|i doubt)\b"
)
# a literal screen: every cue above holds one of these; most turns hold none
_ANY = re.compile(
    r"rule|constraint|requirement|negotiable|exception|mandatory|all times|circumstances|"
    r"whatever|no matter|now on|going forward|here on|mean it|insist|condition|must|"
    r"not moving|frozen|fixed|locked|breaker|red line|important|heads|fyi|note|careful|"
    r"warning|reminder|remember|caveat|one thing|clear|has to|have to|had to|need|shall|allowed|"
    r"permitted|required|can't|cannot|can not|may not|mustn|shouldn|should not|won't|"
    r"don't|do not|never|always|avoid|refrain|stop using|alone|hands off|nothing|keep|"
    r"stay|stick|only|make sure|watch out|mind the|no |budget|deadline|limit|cap|max|min|"
    r"at least|than|under|below|within|up to|all in|until|till|by |before|prefer|rather|"
    r"hate|loathe|stand|like|want|fan of|allergic|sick|vegetarian|vegan|gluten|lactose|"
    r"halal|kosher|pescatarian|teetotal|afraid|scared|terrified|diabetic|pregnant|"
    r"style|tone|format|convention|casual|formal|concise|verbose|bullet|emoji|spelling|"
    r"naming|lowercase|uppercase|indent|tabs|spaces|pls|plz|please|now|forget|scratch|"
    r"change of|drop the|use the new|switch|instead|, not|approval|sign|permission|consent|"
    r"go-ahead|ok first|eur|usd|chf|gbp|dollar|pound|yen|metric|imperial|celsius|fahrenheit|"
    r"utc|local time|english|german|french|spanish|italian|dutch|japanese"
)

WEIGHTS = (
    ("flag", FLAG, 2.0),
    ("deontic", DEONTIC, 2.0),
    ("order", ORDER, 2.0),
    ("prefer", PREFER, 2.0),
    ("replace", REPLACE, 2.0),
    ("want", WANT, 1.0),
    ("bound", BOUND, 2.0),
    ("limit", LIMIT, 1.0),
    ("style", STYLE, 1.5),
    ("contrast", CONTRAST, 1.0),
    ("polite", POLITE, 0.5),
    ("change", CHANGE, 1.0),
)
THRESHOLD = 2.0
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
ANAPHOR = re.compile(
    r"^(?:\W*(?:and|so|but|also)\W+)?(?:it|that|this|they|these|those|which|then)\b"
)
ITEM_CHARS = 600
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=\S)")
_BULLET = re.compile(r"^\s*(?:[-*\u2022+]|\d{1,2}[.)])\s+")
_RULES_HEADING = re.compile(
    r"\b(?:rules?|constraints?|requirements?|guidelines?|conventions?|preferences?|"
    r"don'?ts|dos and don'?ts|musts?|policy|policies|ground rules)\b[^:\n]{0,40}:\s*$"
)
_CODE_LINE = re.compile(
    r"^\s*(?:\$ |> |>>> |#!|[{}\[\]]|\w+\s*=\s*[\[{(\"'\d]|at [\w.$]+\(|"
    r"(?i:error|warning|fatal|panic|note|info|debug|traceback|exception|caused by)\b\s*[:(\[])"
)
_WORDS = re.compile(r"[^\W\d_]{2,}")


def _is_prose(line: str) -> bool:
    """A line a person wrote, not pasted code, a log or command output."""
    stripped = line.strip()
    if not stripped or _CODE_LINE.match(stripped):
        return False
    letters = sum(len(w) for w in _WORDS.findall(stripped))
    return letters >= 0.5 * len(stripped)


def units(text: str, spec: bool = False) -> list[tuple[str, bool]]:
    """The statements of a turn: each paragraph, or each item of a list, as one text;
    fenced code and pasted output left out. ``(text, under_rules_heading)``: the items
    of a list introduced by "ground rules:" or "constraints:" (in a task brief, by any
    line ending in a colon) are rules as written."""
    found: list[tuple[str, bool]] = []
    fenced = heading = False
    for block in re.split(r"\n\s*\n", text):
        lines: list[str] = []
        output = False  # the lines after a pasted "$ command" are its output
        for line in block.split("\n"):
            if line.lstrip().startswith("```"):
                fenced = not fenced
            elif line.lstrip().startswith("$ "):
                output = True
            elif not fenced and not output and _is_prose(line):
                lines.append(line)
        if not lines:
            continue
        current: list[str] = []
        listed = False
        for line in lines:
            bullet = _BULLET.match(line)
            if bullet:
                if current:
                    found.append((" ".join(current), heading and listed))
                current, listed = [line[bullet.end() :].strip()], True
            elif _RULES_HEADING.search(line.lower()) or (spec and line.rstrip().endswith(":")):
                if current:
                    found.append((" ".join(current), heading and listed))
                if spec:  # "Return a summary (100-150 words) with:" binds by itself
                    found.append((line.strip(), False))
                current, listed, heading = [], False, True
            elif current and (not listed or line[:1].isspace()):
                current.append(line.strip())  # the paragraph, or an indented list item, goes on
            else:
                if current:
                    found.append((" ".join(current), heading and listed))
                current, listed, heading = [line.strip()], False, False
        if current:
            found.append((" ".join(current), heading and listed))
    return [(" ".join(unit.split()), ruled) for unit, ruled in found if unit.strip()]


def split_sentences(unit: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(unit) if s.strip()]


def rule_score(sentence: str) -> tuple[float, str | None]:
    """How strongly `sentence` states a rule, and its strongest cue (None if none)."""
    lower = sentence.lower()
    if not _ANY.search(lower):
        return 0.0, None
    if QUESTION.search(lower) or HEDGE.search(lower):
        return 0.0, None
    score, best, best_weight = 0.0, None, 0.0
    for name, pattern, weight in WEIGHTS:
        match = pattern.search(lower)
        if match is None:
            continue
        if name == "deontic" and GUESS.search(lower) and not ORDER.search(lower):
            continue
        if name == "limit" and NUMBER.search(lower):
            weight += 0.5  # "under 9k", "max one stop", "by Friday 15 May"
        score += weight
        if weight > best_weight:
            best, best_weight = name, weight
    if FLAG_OPEN.search(lower):
        score += 2.0
        best = best or "flag"
    return score, best


def detect(role: str, text: str, spec: bool = False) -> list[tuple[str, str]]:
    """``(kind, statement)`` for each rule a user or system turn lays down. `spec`: the
    turn is a task brief (a subagent's prompt), whose instructions ("Use TypeScript",
    "Return a summary of 100-150 words") all bind the work."""
    if role not in ("user", "system"):
        return []
    if not spec and not _ANY.search(text.lower()):
        return []
    found: list[tuple[str, str]] = []
    for unit, under_heading in units(text, spec):
        parts = split_sentences(unit)
        scored = [_brief_score(s) if spec else rule_score(s) for s in parts]
        rules = [i for i, (score, _) in enumerate(scored) if score >= THRESHOLD]
        if under_heading and not rules and len(terms(unit)) >= 2:
            # a bullet under "ground rules:" is a rule whatever its wording
            if not any(QUESTION.search(s.lower()) for s in parts):
                found.append(("instruction", _clip(unit)))
            continue
        if not rules:
            continue
        # each rule sentence with the sentence after it (its reason or consequence:
        # "no unwrap() in library code. logq-core is embedded by..."), and the one
        # before when it leads into it ("...:") or the rule points back at it ("it
        # must never show up..."); questions are no part of a rule
        chosen: set[int] = set()
        if len(parts) <= SHORT_SENTENCES and len(unit) <= SHORT_CHARS:
            # a short paragraph is one statement: the rule, its reason, its scope
            chosen.update(i for i, part in enumerate(parts) if not QUESTION.search(part.lower()))
        for index in rules:
            chosen.add(index)
            if index + 1 < len(parts) and not QUESTION.search(parts[index + 1].lower()):
                chosen.add(index + 1)
            if (
                index
                and not QUESTION.search(parts[index - 1].lower())
                and (parts[index - 1].endswith(":") or ANAPHOR.match(parts[index].lower()))
            ):
                chosen.add(index - 1)
        windows: list[list[int]] = []
        for index in sorted(chosen):
            if windows and index == windows[-1][-1] + 1:
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


# an instruction of a task brief: what to use, produce or keep to
BRIEF = re.compile(
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


def _clip(text: str) -> str:
    return text if len(text) <= ITEM_CHARS else text[: ITEM_CHARS - 1].rstrip() + "\u2026"


def subject(text: str) -> set[str]:
    """The content terms of an item, for finding the earlier rule a new one replaces."""
    return set(terms(text))


def replaces(later: str, earlier: str) -> bool:
    """True when the rule `later` changes the rule `earlier`: it says it changes one
    ("now", "forget", "instead", "no longer"...) and is about the same thing (a good
    share of the shorter one's terms: two rules of one long message share a few words
    without being about the same thing)."""
    lower = later.lower()
    if not (CHANGE.search(lower) or REPLACE.search(lower)):
        return False
    a, b = subject(later), subject(earlier)
    if not a or not b:
        return False
    shared = len(a & b)
    return shared >= 2 and shared >= 0.3 * min(len(a), len(b))


FORBID = re.compile(r"\b(?:never|don'?t|do not|avoid|no)\s+((?:[\w.-]+\s+){0,2}[\w.-]+)")


def forbidden_terms(text: str) -> list[str]:
    """What a "never X" / "don't X" / "avoid X" item forbids, as terms (for drift checks)."""
    found: list[str] = []
    for sentence in split_sentences(text.lower()):
        for match in FORBID.finditer(sentence):
            found.extend(t for t in terms(match.group(1)) if len(t) > 2 and t not in found)
    return found
