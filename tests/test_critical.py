"""Critical items: every rule a user lays down, however it is phrased, and nothing else.

The sentences here were written for these tests (paraphrases of how people state rules
to an assistant), not taken from the development scenarios.
"""

from __future__ import annotations

from typing import Any

import pytest

from ccm.engine.critical import core, detect, replaces, units
from ccm.engine.fold import Params, _denied, fold, new_state

RULES = [
    "Hard budget: €4,200 for both of us.",
    "max one stop, no layover longer than 4 hours",
    "oh and important: I get motion sick on buses",
    "We're flying economy, that's non-negotiable.",
    "heads up: we're on MSRV 1.74",
    "please keep commit messages conventional",
    "whatever we do, the gas line stays",
    "we can look but don't write to prod",
    "Never push directly to main.",
    "I'm vegetarian, so no steakhouses.",
    "The API must stay backwards compatible.",
    "no more than 3 hotel changes",
    "Keep the PR under 400 lines.",
    "Only use the staging database for experiments.",
    "We need to be out of the flat by the 30th.",
    "deadline is Thursday noon, no extensions",
    "my wife can't do long hikes, keep them under 2 hours",
    "from now on, write the tests first",
    "Use pnpm, not npm.",
    "Don't mention the price to the client.",
    "Tabs, not spaces, in this repo.",
    "I'd rather not take night trains.",
    "Leave the legacy folder alone.",
    "nothing in docs/ gets touched without Anna's sign-off",
    # a ceiling as what the speaker will not pass; someone left out; an arrangement kept;
    # what breaks the build; what goes through review; insisted on
    "we really don't want to spend more than £300 on the hall.",
    "and my cousin Bev is NOT invited.",
    "deploys only after 18:00, that's the deal with support.",
    "fail the pipeline if coverage drops below 80%.",
    "heads down: the linter fails the build on any console.log.",
    "schema changes always go through a PR, even the one-liners.",
    "Grandad's adamant about the aisle seat.",
    # a way of working asked for for good
    "from now on, could you give me the times in Lisbon time, not UTC?",
    "can we keep the changelog in one file going forward?",
    # a budget with its figure; the last possible moment; whatever the cost
    "on the handheld the renderer has a 4 ms budget per frame.",
    "the window we gave the tenants is 09:00-13:00, after that the water goes back on.",
    "so I need the final figures by thursday noon at the latest.",
    "I don't care what it costs, he's not sleeping in the car.",
    # a time to meet said in words
    "doors at 6, and I want the hall cleared by half past ten.",
    # what can never be; a person who does not drive or can't manage stairs; a source
    # ruled out
    "oh and he can never be left alone with the cat, he's a chaser",
    "And I don't drive, never learned.",
    "Grandpa can't manage the stairs since his fall.",
    "and not from that Facebook seller pls.",
    "Any schema change needs Maria's approval first.",
    "Stick to the standard library, no new dependencies.",
    "answers in British English please",
    "we only have 2 days in Rome, so max 3 sights a day",
    "the kids must be in bed by 8",
    "Remember: the client is in UTC-5, schedule calls after 3pm our time.",
    "Hotels need to have a pool, the kids insist on it.",
    "make sure every endpoint has a rate limit",
    "all prices in CHF please",
    "Remember to rotate the backup keys monthly.",
    "don't forget to tag the release",
    "The billing database is off limits, even for reads.",
    "Please check with me first before you add any new package.",
    "Run every schema change by me.",
    "Spending: 2,500 dollars for the whole week, flights included.",
    "Nothing after 10pm on weeknights, the neighbours complain.",
    "The contingency fund stays untouched, whatever happens.",
    "Two flights of stairs is her absolute limit.",
    "My back is bad, I can't bend down to the lower cabinets.",
    "Six guests is a hard ceiling for the dinner.",
    "nothing already on the release branch gets rebased",
    "releases go out through the pipeline and nothing else",
    "if you change the schema, the migration goes in the same PR",
    "my manager is colour-blind, so no red and green in the charts",
    "we only use prices from the supplier's own catalogue",
    "Saturdays, and only Saturdays: the van is free then",
    "you don't merge anything yourself, that's how it works here",
    "our treasurer is dyslexic, so plain words and short sentences please",
    "the database is never restored over production, whatever the reason",
    "I have 900 euros for the whole conference trip, that's all there is",
    "and stop adding emoji to the commit messages",
    "No heavy lifting (boxes, furniture, the piano) before the scan.",
    "Raise the dose by no more than 5 mg a week.",
    "No driving after the second glass.",
    "that date format is load-bearing, three finance reports parse it",
    "Gran needs her walking frame for anything past the front door.",
    "two deploys a week, max.",
    "cover letter max 400 words",
    # ... or after a comma, a figure with its unit
    "the old fuse box stays for now, oven draw max 20A",
    "release notes aren't published until legal has read them",
    "Not on Slack, not in email, not in the ticket.",
    "fixtures come from tests/data/ and nowhere else",
    "Sam wants the slides by Thursday noon.",
    "how reviews work here: two approvals, one of them from the module owner.",
    "the release freeze starts on the 14th and runs through the launch",
    "Charts only at district level, and no district with fewer than 5 households shown.",
    "gluten-free only, please",
    "whatever the landlord says at the viewing, we don't sign anything there.",
    "Her position, and I agree, is that the kids stay at their school until June.",
    "we're on Python 3.9 and we're staying on 3.9.",
    "nothing you run talks to the live payments API.",
    "So: new floor, 45k base, nothing less.",
    "Whichever venue it is, the dinner on the 12th is happening.",
    "Three nights away in a row, that's my ceiling.",
    "my sister doesn't hear a word about the party until the invitations are out.",
    "as a general thing: nothing gets deleted on the NAS without asking me first.",
    "so that's the other rule: the router only gets rebooted after 11pm.",
    "the cat never goes in the garden, that's her one condition.",
    "New number: 300 a month all in, the sitter included.",
    # said as the last word on it; a limit named and kept to; a refusal of one's own
    "deliveries come between 8 and 6 on weekdays, full stop.",
    "the deposit is the last of it, not a penny more.",
    "The cap is 23 kg a bag, and we don't go over it.",
    "The one thing I won't do is drive the pass after dark.",
    # what happens to nothing, a list of what may not appear, a limit on what gets through
    "and nothing deploys on Fridays after 2pm, whatever the ticket says.",
    "no names, no phone numbers, not in the notes and not in the tickets.",
    "anything over 200 lines gets split into two reviews.",
    "and while I think of it: every refund over 50 needs Priya's sign-off first.",
    # an order after a parenthesis; "only <verb> when"; rules named; whatever we end up doing
    "check the queue (and as ever with payroll) don't copy salaries into the ticket.",
    "retries stay quiet, only page the on-call when the fallback fails too.",
    "and since we're on rules: I want every invoice approved by two people.",
    "whatever we end up choosing, the old oak in the garden stays.",
    # a limit moved; a deadline the work must meet; a note before it slips the mind
    "the hosting cap goes up from 40 to 55 euros a month.",
    "the image budget goes down to 150 kB per page.",
    "the spare room has to be a usable office by 3 March, my contract starts then.",
    "oh and one thing from Sam before I forget: the bikes stay in the shed.",
    # "no matter the ...", a thing one cares about named, what is due and when
    "design wants the cache to never hold more than 5 minutes of data, no matter the load.",
    "one thing I care about either way: no drive of more than 3 hours without a break.",
    "and reports back by friday 13 march.",
    # where a kind of change goes; whoever we end up hiring; a reminder of how things are
    "anything that deletes goes through a PR before it runs.",
    "so a proper contract, with notice, whoever we end up picking.",
    "and remember trading days run 07:00 to 06:59 — the exchange's definition.",
    # whose rule, then the rule; a step owed before a push; a room kept out of bounds;
    # whatever fails a test, ruled out
    "his rule, and I agree: the cat never goes in the nursery.",
    "run the linter before pushing, CI is slow enough already.",
    # a thing kept however else the plan moves
    "the API keeps its v1 routes until next summer, whatever else we change.",
    # an order after "just"; a limit with the verb between ("won't give us a penny more")
    "reading the logs is fine. just don't restart or scale anything on the live boxes",
    "the landlord will not take a penny more off the rent, so that's that",
    # an order after "do it but", after "no no"; a thing left as it is; a figure not to pass
    "ok do it but keep the old endpoint alive for a month",
    "no no don't rename the columns, the exports read them by name",
    "and leave the invoice template exactly as it is",
    "and drive wise nothing more than 3 hours a day",
    # none of a thing let through
    "and this time none of it goes on the company card",
    # a budget with what it is for between
    "my budget for all the garden stuff is like 600 max this year",
    "the cat stays out of the baby's bedroom.",
    "any flat without a lift is a no-go for us.",
    # a limit a fact implies, by rank; whatever is pasted, kept to a rule
    "her hip means nothing above the second floor unless there's a lift.",
    "whatever you share from the logs, card numbers stay masked.",
    # an order for every one of a kind
    "and put the order number first in every invoice email, accounts search for it.",
    # a time ruled out whatever the verb; a figure kept under; "and" opening an order
    "we cannot meet on Wednesdays, that's choir.",
    "the kids' party stays under £150 all in, presents included.",
    "oh and keep the replies short, I read them on the bus.",
    "deliveries come between 8 and 12, and nobody signs for anything after 12.",
    # one more rule, announced; a no said with no end to it
    "one more rule while we're at it: the photos go to Lena before they go online.",
    "no fireworks at the campsite, ever.",
    "the bot doesn't merge its own PRs, ever.",
    # a standing choice changed, the new one after a colon
    "changed my mind: the invoices go out on the first of the month, one batch.",
    # when a rule holds, said first; nobody doing a thing of two words; "nobody" after a comma
    "when you touch the billing tables: don't run anything without a WHERE clause.",
    "and when a deploy fails, the rollback goes through the pipeline, always.",
    "no one hot fixes the app servers by hand, it all goes through the release.",
    "the ledger is append-only, nobody edits anything in it once it's written.",
    "and that part is not up for discussion: the invoices stay in euros.",
    # a wish with a figure to meet
    "we want the shop to clear about £2,000 a month once the loan is paid.",
    # what every commit or pull request needs, as a convention of the work
    "oh and commit messages need the ticket number first, like OPS-88.",
    "every pull request needs a line in the changelog, Marta reads them.",
    # a requirement laid down after a colon; a limit after what it bounds, mid-sentence
    "the one requirement from the landlord: the bins go out on Thursday night.",
    "a stopover is fine, 2-3 hours max, the baby gets restless.",
    # what every new one of a kind needs
    "and every new recipe card needs the allergens on the back.",
    # changes kept off a thing (not "no changes in the output", an observation)
    "that box is the primary: no changes on it before 18:00.",
    # a condition a person has or lives with
    "our youngest has a heart condition.",
    "and yes, he's on warfarin since the operation.",
    # when someone can, and no other time
    "my dad can do Fridays only, he drives the school bus the rest of the week.",
    "Jo's weekends only, she works shifts.",
    # an order for whatever falls in a scope
    "for anything that touches the calendar api use the sandbox key.",
]
NOT_RULES = [
    "does every new recipe card need the allergens on it?",
    "ran it twice, no changes in the output.",
    "what are the requirements: do you know?",
    "we queued 20 minutes max, then they let us in.",
    "does the travel policy cover a heart condition?",
    "the article said asthma is more common in cities.",
    "the castle tours run on Sundays only, says the website.",
    "the pool is open mornings only in August.",
    "for anything bigger we could use the van from work.",
    # a wish or a worry, not an order: "don't want ..."
    "I don't want to find out from the on-call pager at 3am",
    "don't want them to give the puppy to another family before we visit",
    # a daydream: what the user might do if something happens, then how that would be
    "honestly if the shop takes off we might move to the coast. four days a week, no "
    "emails after six, no weekend markets",
    # what this branch or commit needs is a step of the work at hand
    "the branch needs a rebase onto main before you push it again.",
    "this commit needs a test for the empty case, then push.",
    # "ever" after a past or a question: no rule
    "we never got a reply from them, ever",
    "did anyone ever call back, ever?",
    "I changed my mind about the trip, not sure we'll go.",
    "I restarted the worker and keep getting 502s from the gateway.",
    "we cannot reproduce it on Mondays, only after the weekend deploy",
    "cap it at 9k steps so it stays under 6h",
    "i stay under 2,000 steps most days, which is the problem",
    "we rang the bell twice, and nobody answered after six",
    "what was the budget for the garden last year?",
    "none of them are booked yet, the site was down",
    "we had nothing more than 2 hours of sleep before the flight",
    "ok do it",
    "i just don't get why the nightly fails on tuesdays",
    "Should we use Redis for this?",
    "The landing page needs a hero image.",
    "Does your dad need his wheelchair at the station?",
    "we peaked at 900 requests a second, max.",
    "we measured it twice, flow at most 12L a minute",
    "how does the cache work here?",
    "Nobody else has seen the draft yet.",
    "Someone at the gym said vegan athletes should all take B12.",
    "so Redis it is?",
    "Maybe we should cap it at 3?",
    "what if we skip the layover?",
    "I ran the tests and they all pass now.",
    "The function must be failing on empty input.",
    "that must have been annoying",
    "can you check the logs?",
    "ok commit it",
    "thanks, that works",
    "I need to check with Dario first.",
    "we tried Redis last year and it was slow",
    "done for today",
    "I think it's probably the cache.",
    "no idea why it fails",
    "no errors in the log",
    "run it again with the flag",
    "I want to see the diff",
    "the build takes at least 10 minutes",
    "That's only 20% of users.",
    "He never told anyone.",
    "Always the same error, weird.",
    "it has to be the config, nothing else changed",
    "what did we decide about the handles?",
    "can't wait to see it!",
    "A sea view would be nice, but it's not a dealbreaker.",
    "it crashed with index out of bounds at line 60",
    "I can't reproduce the crash on my machine.",
    "Is the staging database off limits too?",
    "Budget looks fine so far.",
    "I bumped the timeout and nothing else changed.",
    "if you change your mind about the colour, tell me",
    "you don't need to restart the server for that",
    "we only found two copies of the contract",
    "the build stopped failing after the cache was cleared",
    "that's all there is to it, really",
    "the price went up by at most 5 percent last year, I think?",
    "Oh great. I'll just rewrite the whole parser tonight, shall I, it only took a year.",
    "Shall we keep the old endpoint for now?",
    "My line manager is on leave until Monday.",
    "we're staying on the coast for two nights.",
    "nothing you said was wrong, it was just long.",
    "I need to know what broke and get a fix out the door.",
    "the timer fires every 15 minutes, so it can't physically run more than 4 times an hour.",
    "at the biggest font the OK button sits below the sheet and you can't reach it.",
    "2 bed, top floor, three flights of stairs.",
    # what someone had to do; "I won't" of time; a list whose ", not" is about a problem
    "the plumber had to come back twice because the part was wrong.",
    "I won't have time to look at it before Friday.",
    "the snubber can go on Dana's list for rev D, not my problem today.",
    "subject lines end without a full stop.",
    "nothing changed between the two runs, weird.",
    "nobody knows why it started on Tuesday.",
    # a guess about a cause, a budget already spent, "one thing" asked
    "it has to be a DNS problem, nothing else explains it.",
    "the budget went on the new boiler last winter.",
    "one thing: how long does the plaster take to dry?",
    # trying in vain; what was sent by a date
    "no matter what I try, the build still fails on the runner.",
    "the parcel was sent by Tuesday post.",
    # a memory, not a reminder
    "remember when the old server died at Christmas?",
    # staying out of something; a step done, or asked about, before a push; a no-go asked
    "I'll stay out of it, it's their argument.",
    "the rain stays out of the shed now that the roof is done.",
    "I ran the tests before pushing, all green.",
    "did he run the migrations before merging?",
    "is anything over 20 kg a no-go for the landlord?",
    "nothing after the first week was booked, weirdly.",
    # "one more thing:" leading into a request
    "one more thing: Sara wants a summary of the outage for the weekly meeting.",
    "one more thing: draft a short note for the change log, numbers included.",
    "I remember the old server was slow as anything.",
    # a question that asks when or where, with no question mark
    "when does the shop close on Sundays",
    "and where do the backups go after the rotation",
    "when is the new lease supposed to start",
    "nobody really understands the billing code, it's old.",
    "the cron ran at six, nobody noticed anything.",
    # what did not happen, reported
    "nice, no crash on the test phone this time.",
    "so the import is just slow, no leak.",
    "do we want to spend £50 a month on that?",
    # a rule applied, not laid down; a build that failed
    "so the docs fix goes straight in, per the new rule.",
    "will you be around from now on?",
    "a retry that can never succeed just burns CPU.",
    "I should never have agreed to host it.",
    "we stayed in, not from choice, believe me",
    # a question tagged on
    "puppies never mind a crate at that age, don't they.",
    "could you maybe send it in the morning from now on?",
    "the nightly fails the build on the arm runner again, no idea why.",
    # a figure given with a hedge said as an order
    "the plumber reckoned two days for the first fix. don't quote me on that",
    # an order said as an aside
    "my brother drove a hearse for two years in the 90s (don't ask).",
    "the dog met the neighbour's goats today (through the fence, don't worry)",
]


@pytest.mark.parametrize("sentence", RULES)
def test_a_rule_is_found_whatever_its_wording(sentence: str) -> None:
    found = detect("user", sentence)
    assert [text for _, text in found] == [sentence]


@pytest.mark.parametrize("sentence", NOT_RULES)
def test_questions_guesses_reports_and_one_off_requests_are_not_rules(sentence: str) -> None:
    assert detect("user", sentence) == []


def test_the_assistants_advice_is_not_a_users_rule() -> None:
    assert detect("assistant", "You must never run this as root.") == []
    assert detect("system", "Never reveal the API key.") != []


def test_the_item_is_the_whole_statement_with_its_reason() -> None:
    text = (
        "found it, thanks.\n\n"
        "one thing though: no print() in the library. it ends up in the customer's logs "
        "and support has to dig through it. scripts are fine."
    )
    found = detect("user", text)
    assert [statement for _, statement in found] == [
        "one thing though: no print() in the library. it ends up in the customer's logs "
        "and support has to dig through it. scripts are fine."
    ]


def test_rules_announced_as_things_not_up_for_debate_are_one_statement() -> None:
    text = (
        "ok, before you start, three things that aren't up for debate. the public API stays "
        "backwards compatible. release notes are written by hand. the staging data comes from "
        "the nightly snapshot. have fun with it"
    )
    [statement] = [statement for _, statement in detect("user", text)]
    assert "the public API stays backwards compatible." in statement
    assert "release notes are written by hand." in statement
    assert "the staging data comes from the nightly snapshot." in statement


def test_list_items_after_things_to_know_before_starting_are_rules_as_written() -> None:
    text = (
        "the repo is in ~/src/atlas. a couple of things before you dig in:\n"
        "- the public API stays on version 2\n"
        "- generated clients live in gen/ and come from the spec\n"
    )
    found = [statement for _, statement in detect("user", text)]
    assert found == [
        "the public API stays on version 2",
        "generated clients live in gen/ and come from the spec",
    ]


def test_list_items_under_a_rules_heading_are_rules_as_written() -> None:
    text = (
        "a few house rules before you start:\n"
        "- the changelog is written by hand\n"
        "- feature flags live in flags.toml\n"
        "thanks!"
    )
    found = [statement for _, statement in detect("user", text)]
    assert "the changelog is written by hand" in found
    assert "feature flags live in flags.toml" in found
    assert not any("thanks" in statement for statement in found)


def test_pasted_output_and_code_are_not_read_for_rules() -> None:
    text = (
        "here's what it prints:\n"
        "```\n"
        "WARNING: you must never call this twice\n"
        "```\n"
        "$ make check\n"
        "error: must not be empty"
    )
    assert detect("user", text) == []
    assert units("- one\n- two") == [("one", False), ("two", False)]


def test_a_long_paragraph_gives_the_rule_with_its_neighbour_not_the_whole() -> None:
    filler = "We spent the morning on the report and the numbers looked fine. " * 12
    text = filler + "Don't email the draft to anyone outside the team. It has unreleased figures."
    found = detect("user", text)
    assert [statement for _, statement in found] == [
        "Don't email the draft to anyone outside the team. It has unreleased figures."
    ]


def _said(*turns: tuple[str, str]) -> dict[str, Any]:
    """The engine's state after turns, each (role, text)."""
    return fold(
        new_state("s"),
        [
            {"turn": n, "role": role, "content": text, "ts": None}
            for n, (role, text) in enumerate(turns, 1)
        ],
        Params(),
    )


def _user_says(*texts: str) -> dict[str, Any]:
    """The engine's state after a user's turns, one per text."""
    return _said(*(("user", text) for text in texts))


def test_a_changed_rule_replaces_the_old_one_and_the_change_is_kept() -> None:
    assert replaces("Tone is now casual, no formal phrasing.", "Keep the tone formal, no phrasing.")
    assert replaces("So: new floor, 45k base.", "Money: 40k base is my floor.")
    assert replaces("Scrap the formal letters. Short emails from now on.", "Letters: formal.")
    assert not replaces("Budget is now 5k for the trip.", "Never book night trains.")

    state = _user_says(
        "please write the report in a formal tone, full sentences, no slang",
        "the report goes to Anna first, then the board",
        "change of plan, the board is out: drop the formal tone, casual sentences",
    )
    live = [c["text"] for c in state["critical"] if not c.get("superseded_by")]
    assert live == ["change of plan, the board is out: drop the formal tone, casual sentences"]
    assert state["critical_replaced"] == [
        [1, 3, "please write the report in a formal tone, full sentences, no slang"]
    ]


def test_a_rule_retracted_by_name_is_replaced_by_what_comes_instead() -> None:
    """ "forget the X thing from yesterday, ..." names the rule it takes back, though the
    two share few words. (Written for this test.)"""
    state = _user_says(
        "and put the order number first in every invoice email, accounts search for it",
        "the invoices go out on the 1st",
        "oh and forget the order number thing from yesterday, accounts moved to a new system "
        "that reads the PO field, so the number goes in the PO field now",
    )
    live = [c["text"] for c in state["critical"] if not c.get("superseded_by")]
    assert live[-1].startswith("oh and forget the order number thing")
    assert not any(text.startswith("and put the order number first") for text in live)


def test_a_change_to_one_rule_of_a_paragraph_leaves_its_other_rules_standing() -> None:
    """One paragraph, two rules; a later turn changes one of them: the other stands,
    said at its turn. (Written for this test.)"""
    state = _user_says(
        "the ledger tables are append-only, nobody updates anything in them. and report "
        "every amount in euros please",
        "ok look at last month first",
        "from now on give me every amount in pounds, not euros.",
    )
    live = [(c["turn"], c["text"]) for c in state["critical"] if not c.get("superseded_by")]
    assert (1, "the ledger tables are append-only, nobody updates anything in them.") in live
    assert (3, "from now on give me every amount in pounds, not euros.") in live
    assert not any("in euros please" in text for _, text in live)
    assert [r[:2] for r in state["critical_replaced"]] == [[1, 3]]


@pytest.mark.parametrize(
    ("rule", "change"),
    [
        (
            "keep the newsletter short please, ten lines max, nobody reads past that",
            "changed my mind about short. the committee wants every detail in it, "
            "so as long as it needs",
        ),
        (
            "my rule for the load tests: p99 stays under 40 ms or we don't ship",
            "ok change of plan on my rule: 60 ms is fine, not 40, the new boxes are slower",
        ),
        (
            "the kitchen budget is 12k, total, and not a penny more",
            "we're lowering it to 10,500 for the whole job instead of 12k, we need a cushion",
        ),
        (
            "no deliveries on saturdays, the street market blocks the road",
            "good news, saturdays are fine now, the market moved to the square",
        ),
        (
            "max 5 connections per worker on the pool, it is tiny",
            "the pool goes from 20 to 40 tonight, so 10 connections per worker on the pool",
        ),
    ],
)
def test_a_change_said_in_words_no_rule_is_said_in_replaces_the_rule(
    rule: str, change: str
) -> None:
    """A change that names the rule ("changed my mind about short"), the figure it had
    ("not 40", "instead of 12k") or says it is allowed now ("saturdays are fine now")
    replaces it, though it lays down no rule in the words a rule is said in. (Written
    for this test.)"""
    state = _user_says(rule, "the printer needs toner by friday", change)
    live = [c["text"] for c in state["critical"] if not c.get("superseded_by")]
    assert rule not in live
    assert live and live[-1].endswith(change.split(". ")[-1])
    assert [r[:2] for r in state["critical_replaced"]] == [[1, 3]]


def test_a_change_that_replaces_no_rule_makes_no_item() -> None:
    """ "I changed my mind about the trip" with no rule about the trip laid down, and "if
    you change your mind about the colour" make no item. (Written for this test.)"""
    state = _user_says(
        "never book night trains, I can't sleep on them",
        "I changed my mind about the trip, not sure we'll go at all",
        "if you change your mind about the colour, tell me",
    )
    live = [c["text"] for c in state["critical"] if not c.get("superseded_by")]
    assert live == ["never book night trains, I can't sleep on them"]
    assert state["critical_replaced"] == []


def test_a_change_that_names_the_rule_binds_though_the_rule_was_missed() -> None:
    """ "change of rule on deploys from last week: ..." says a rule binds from now on,
    though the rule it changes was never caught; a change that says only that a mind
    changed makes no item. (Written for this test.)"""
    state = _user_says(
        "deploys on fridays are a bad idea, I've said it before",
        "also change of rule on deploys from last week: friday deploys are fine now "
        "when QA has signed the release off",
        "ok, I've changed my mind on the colour thing.",
    )
    live = [c["text"] for c in state["critical"] if not c.get("superseded_by")]
    assert live == [
        "also change of rule on deploys from last week: friday deploys are fine now "
        "when QA has signed the release off"
    ]


def test_a_change_that_names_its_rule_replaces_that_rule_not_the_latest_to_share_a_word() -> None:
    """Written for this test: "change of rule on paging: ..." changes the rule that
    names paging ("page" and "paging" are one word cut two ways), not the latest rule to
    share the word "change" with it; a change of rule announced so is a rule itself,
    though it grants what the rule forbade."""
    state = _user_says(
        "don't page anyone before 9, half the team starts late",
        "and don't change anything on the load balancer, just read its logs",
        "also change of rule on paging from last week: for outages you can page the "
        "on-call at any hour now",
    )
    replaced = [c["text"] for c in state["critical"] if c.get("superseded_by")]
    assert replaced == ["don't page anyone before 9, half the team starts late"]
    live = [c["text"] for c in state["critical"] if not c.get("superseded_by")]
    assert live[0].startswith("and don't change anything on the load balancer")
    assert live[-1].startswith("also change of rule on paging from last week")


@pytest.mark.parametrize(
    ("preference", "change"),
    [
        (
            "and I want a walnut worktop, the white ones show every stain",
            "ok, I've changed my mind on walnut. oak is cheaper and it's the same look",
        ),
        (
            "tabs for the indentation pls, the old files all use them",
            "forget tabs. the formatter wants spaces and I'm not fighting it",
        ),
        (
            "Sam wants a DJ, he's adamant, the band was too loud last time",
            "Sam has come round to the band. they'll keep it under 90 dB",
        ),
        (
            "and NO late nights on school days, not even fridays",
            "ok I'm softening on the late nights. fridays are fine till 10",
        ),
        (
            "no sweets at the party please, the dentist was very clear",
            "my sister's talked me round on sweets: one bag each, after the cake",
        ),
    ],
)
def test_a_change_that_names_a_preference_said_earlier_replaces_it(
    preference: str, change: str
) -> None:
    """A preference said as no rule ("I want a walnut worktop") and named later by a
    change ("changed my mind on walnut") is recorded as replaced at its own turn, and
    the change stands. (Written for this test.)"""
    state = _user_says(preference, "the fitter comes on the 12th", change)
    replaced = [
        (c["turn"], c["superseded_by"]) for c in state["critical"] if c.get("superseded_by")
    ]
    assert replaced == [(1, 3)]
    live = [c["text"] for c in state["critical"] if not c.get("superseded_by")]
    assert any(text.startswith(change.split(".")[0]) for text in live)
    assert [r[:2] for r in state["critical_replaced"]] == [[1, 3]]


def test_a_visit_is_no_change_of_mind() -> None:
    """ "Graham came round on Saturday" is a visit: nothing is replaced. (Written for
    this test.)"""
    state = _user_says(
        "we want the deposit back in full, no deductions for the carpet",
        "Graham came round on Saturday and looked at the carpet again",
    )
    assert not any(c.get("superseded_by") for c in state["critical"])


def test_a_figure_corrected_later_is_recorded_as_replaced() -> None:
    """A figure said as a fact ("the allowance is £750 a year") and corrected later
    ("it's £500, not £750") is recorded as replaced at its turn, and the correction
    stands; a figure of one digit ("not 8"), a share ("not 100%") and a rule that says
    the figure are left alone. (Written for this test.)"""
    state = _user_says(
        "the home office allowance is £750 a year, so the desk and the chair fit in it",
        "never spend more than £750 of it on one thing though",
        "checked the HR portal: the allowance is £500, not £750. ugh",
        "the desk is 8 kg, I can carry it up myself",
        "it's 9, not 8. and I'm not 100% sure the chair fits",
    )
    replaced = [
        (c["turn"], c["superseded_by"]) for c in state["critical"] if c.get("superseded_by")
    ]
    assert replaced == [(1, 3)]
    live = [c["text"] for c in state["critical"] if not c.get("superseded_by")]
    assert "never spend more than £750 of it on one thing though" in live
    assert any("the allowance is £500, not £750" in text for text in live)


def test_a_figure_is_found_as_said_with_its_ending_but_not_inside_another() -> None:
    from ccm.engine.critical import says_figure

    assert says_figure("they want it by the 20th of april", {"20"})
    assert says_figure("the plot is 200m2, more or less", {"200"})
    assert says_figure("best one was £480 for the year", {"480"})
    assert not says_figure("14,480 rows and 4.80 a head", {"480"})
    assert not says_figure("2000 of them", {"200"})


def test_a_limit_set_anew_replaces_the_old_one_and_a_choice_dropped_is_no_rule() -> None:
    """ "the ceiling is now 9,500" replaces "8,000 is the absolute ceiling" though they
    share one word; "forget the train, we're flying" drops a choice, not a rule, and
    makes no item. (Written for this test.)"""
    state = _user_says(
        "8,000 is the absolute ceiling for the kitchen.",
        "Which means the ceiling is now 9,500, and that is the final number.",
        "forget the train, we're flying to Porto on the 3rd.",
    )
    live = [c["text"] for c in state["critical"] if not c.get("superseded_by")]
    assert live == ["Which means the ceiling is now 9,500, and that is the final number."]
    assert [r[:2] for r in state["critical_replaced"]] == [[1, 2]]


def test_a_pasted_listing_is_no_rule_and_a_fragment_goes_with_its_rule() -> None:
    listing = (
        "here's what the app lists near us:\n\n"
        "Elm St no. 12 — 2 x post charger — Type 2, 7 kW AC — 45p/kWh — max stay 4 h\n"
        "Depot car park — 6 x 22 kW AC — 30p/kWh — max stay 3 h"
    )
    assert detect("user", listing) == []
    item = (
        "The one thing I won't do is park on the verge. Not with the hazards on, not for a minute."
    )
    assert core(item) == item


def test_a_briefs_list_is_one_instruction_with_the_line_that_leads_into_it() -> None:
    brief = (
        "Audit the billing service in ~/work/billing. Check:\n"
        "1. Which endpoints lack rate limits\n"
        "2. Where secrets are read from,\n"
        "   including the env files\n"
        "\n"
        "Write a report (under 300 words) with:\n"
        "- Findings by severity\n"
        "- A fix for each\n"
        "Do not change any code."
    )
    found = [text for _, text in detect("user", brief, spec=True)]
    assert found == [
        "Audit the billing service in ~/work/billing. Check: Which endpoints lack rate "
        "limits; Where secrets are read from, including the env files",
        "Write a report (under 300 words) with: Findings by severity; A fix for each",
        "Do not change any code.",
    ]
    # in what a user writes, a list under a colon line is not one statement: each bullet
    # under "ground rules:" is a rule of its own
    rules = [t for _, t in detect("user", "ground rules:\n- no force pushes\n- squash merges")]
    assert rules == ["no force pushes", "squash merges"]


def test_a_rule_said_again_in_the_same_words_is_one_item() -> None:
    state = _user_says(
        "never push straight to main",
        "always keep the changelog short",
        "again: never push straight to main!",
        "don't push to staging on fridays",  # about other things: a rule of its own
    )
    live = [c["text"] for c in state["critical"] if not c.get("superseded_by")]
    assert live == [
        "always keep the changelog short",
        "again: never push straight to main!",
        "don't push to staging on fridays",
    ]


def test_a_rule_of_its_own_after_another_is_a_second_item() -> None:
    """A rule led in by its flag ("and non-negotiable: ...") after another is an item of
    its own: the first may be replaced while it stands. (Written for this test.)"""
    text = (
        "leave the deploy script alone for now, Maren is fixing it. and non-negotiable, "
        "for the record: nothing ships on a friday after 15:00."
    )
    assert [found for _, found in detect("user", text)] == [
        "leave the deploy script alone for now, Maren is fixing it.",
        "and non-negotiable, for the record: nothing ships on a friday after 15:00.",
    ]


@pytest.mark.parametrize(
    ("text", "item"),
    [
        (  # its reason, pointed back at
            "Never deploy on Fridays. That's when nobody is around to roll back a bad release.",
            "Never deploy on Fridays. That's when nobody is around to roll back a bad release.",
        ),
        (  # its subject again
            "Keep the invoices in the shared drive. Invoices on laptops got lost twice last year.",
            "Keep the invoices in the shared drive. Invoices on laptops got lost twice last year.",
        ),
        (  # the next thing the turn goes on to say, about something else
            "Never deploy on Fridays. Separately, I booked the team offsite for the second week "
            "of June at the lake house, with the usual caterer and a bus from the office. "
            "The agenda has a morning on the roadmap and an afternoon of hiking for whoever "
            "wants it, and the evening is a barbecue by the water with the partners invited. "
            "Bring a warm jacket, the evenings there are cold even in June. "
            "Anyway, more on that later, let me know what you think of the draft and the plan.",
            "Never deploy on Fridays.",
        ),
    ],
)
def test_the_sentence_after_a_rule_joins_it_only_when_it_goes_with_it(text: str, item: str) -> None:
    assert [found for _, found in detect("user", text)] == [item]


@pytest.mark.parametrize(
    ("heading", "items"),
    [
        (
            "quick context, how things work here before you touch anything:",
            [
                "the billing service is owned by the payments team, changes go through their "
                "review",
                "staging gets reset every night at 2am",
            ],
        ),
        (  # written for this test: however plainly each item is put
            "a few things before you start:",
            [
                "branches are named after the ticket, like ABC-123-short-title",
                "we squash on merge, the PR title becomes the commit",
            ],
        ),
    ],
)
def test_the_items_under_a_heading_of_how_things_are_done_are_rules_as_written(
    heading: str, items: list[str]
) -> None:
    text = "\n".join([heading, *(f"- {item}" for item in items)])
    assert [item for _, item in detect("user", text)] == items


def test_a_message_someone_else_wrote_pasted_in_lays_down_no_rule_of_the_users() -> None:
    """A landlord's email pasted in makes demands of the user, not rules for the work; a
    funder's guidance pasted in does bind it. (Written for this test.)"""
    email = (
        "he replied this morning:\n\n"
        '"Hi Sam, as agreed you must have the windows professionally cleaned before you '
        'leave, and the deposit will only be returned after my inspection."'
    )
    guidance = (
        "here's the funder's guidance:\n\n"
        '"Equipment costs must not exceed 15% of the total amount requested."'
    )
    assert detect("user", email) == []
    assert [item for _, item in detect("user", guidance)] == [
        '"Equipment costs must not exceed 15% of the total amount requested."'
    ]


def test_the_conditions_a_pasted_message_lists_bind_the_work() -> None:
    """Written for this test: a permission granted on conditions, pasted in: the
    conditions it lists are what the work must keep to; the rest of the message (its
    greeting, what it says of itself, its sign-off) is not."""
    letter = (
        "the council wrote back, pasting:\n\n"
        '"Dear Mr Vance,\n'
        "We are pleased to confirm that the street party may go ahead on Saturday 12 July, "
        "subject to the following conditions:\n"
        "1. The road must be reopened to traffic by 8pm.\n"
        "2. No amplified music after 6pm.\n"
        "3. A named steward must stay at each barrier at all times.\n"
        'Yours sincerely, the Highways Team"'
    )
    assert [item for _, item in detect("user", letter)] == [
        "The road must be reopened to traffic by 8pm.",
        "No amplified music after 6pm.",
        "A named steward must stay at each barrier at all times.",
    ]


@pytest.mark.parametrize(
    ("item", "rule"),
    [
        (  # the reason goes
            "Never rebase a shared branch. Last spring it cost us two days of lost commits.",
            "Never rebase a shared branch.",
        ),
        (  # the scope said before it goes too, the rule and its wording stay
            "The client signs off on Monday. Nothing goes out without her approval, ever. "
            "She reads it all on paper.",
            "Nothing goes out without her approval, ever.",
        ),
        (  # a rule that points back keeps what it points at
            "The export holds home addresses. It must never leave the EU servers, not even "
            "in a log line.",
            "The export holds home addresses. It must never leave the EU servers, not even "
            "in a log line.",
        ),
        (  # a line that leads into it keeps its place
            "One thing before you start: don't touch the billing tables.",
            "One thing before you start: don't touch the billing tables.",
        ),
        (  # a rule that points back further keeps the words that lead the item in
            "About the invoices table: it feeds billing every night. Never truncate it, not "
            "even on staging.",
            "About the invoices table: Never truncate it, not even on staging.",
        ),
        ("Keep the PR under 400 lines.", "Keep the PR under 400 lines."),  # one sentence
        (  # no sentence a rule on its own (an item listed under "ground rules:")
            "Tabs for indentation. Eight wide.",
            "Tabs for indentation. Eight wide.",
        ),
    ],
)
def test_an_items_core_is_its_rule_without_its_reasons(item: str, rule: str) -> None:
    assert core(item) == rule


def test_a_rule_quoted_from_someone_else_binds_the_work_without_its_quote_marks() -> None:
    """Written for this test: a policy pasted as a "> " quote is a rule; a pasted shell
    command is not prose."""
    text = (
        "pasting the policy:\n\n> Contractors must not access production data from "
        "personal laptops.\n\n> $ ls /srv/prod"
    )
    assert [item for _, item in detect("user", text)] == [
        "Contractors must not access production data from personal laptops."
    ]


def test_labelled_lines_without_bullets_are_rules_of_their_own() -> None:
    said = (
        "Money: 40k base is my floor. Under that I'd rather stay.\n"
        "Office: two days a week, that's my ceiling.\n"
        "Boss: my manager doesn't hear a thing until I've signed."
    )
    assert [text for _, text in detect("user", said)] == [
        "Money: 40k base is my floor. Under that I'd rather stay.",
        "Office: two days a week, that's my ceiling.",
        "Boss: my manager doesn't hear a thing until I've signed.",
    ]


def test_a_rule_held_to_takes_the_sentence_it_points_back_at() -> None:
    said = (
        "Money. We agreed 200 a month for the car, all in: loan, insurance, fuel, whatever. "
        "She's pretty firm on that. Insurance is about 40 a month, right? Her brother pays 38 "
        "for his hatchback, and he drives a lot more than we will."
    )
    assert [text for _, text in detect("user", said)] == [
        "We agreed 200 a month for the car, all in: loan, insurance, fuel, whatever. "
        "She's pretty firm on that."
    ]


def test_the_items_listed_under_the_fixed_points_are_rules() -> None:
    """Written for this test: "the fixed points so far:" heads a list of what must hold."""
    text = (
        "planning the choir tour. the fixed points so far:\n"
        "1. home by 7pm on the sunday, parents collect\n"
        "2. two adults per coach, whatever happens"
    )
    found = [item for _, item in detect("user", text)]
    assert any(item.startswith("home by 7pm on the sunday") for item in found)


def test_a_rule_announced_as_one_keeps_every_sentence_that_follows_it() -> None:
    """Written for this test: "house rule from now on: ..." then the sentences that spell
    it out are one item, to the end of the paragraph or a question."""
    text = (
        "right. house rule from now on: invoices go out on the 1st. no line items without a "
        "PO number, no handwritten totals. clients get the PDF and a one-line summary. "
        "anything unusual comes to me first. does that cover the retainer too?"
    )
    [(_, item)] = detect("user", text)
    assert item.startswith("house rule from now on: invoices go out on the 1st.")
    assert "clients get the PDF and a one-line summary." in item
    assert "anything unusual comes to me first" in item
    assert "retainer" not in item


def test_a_change_that_names_its_rule_replaces_that_one_not_a_later_one() -> None:
    """ "changing my mind on the preset: ..." replaces the house rules that have the
    preset, not the later rule that only shares two words with it ("build", "goes"); a
    change that names a thing a later rule has in passing ("the output format") but
    shares more with an earlier one still replaces the earlier one. (Written for this
    test.)"""
    state = _user_says(
        "house rules before you touch anything: vendor/ is third-party code and stays "
        "untouched, release builds use the fast preset with LTO on, the beta branch gets "
        "the same preset, every commit message starts with the module name, and nobody "
        "bumps the toolchain without asking me",
        "fail the build if the frame time goes over 2 ms",
        "ok, changing my mind on the preset: from now on every build goes out with the "
        "debug preset, beta branch included",
    )
    assert [r[:2] for r in state["critical_replaced"]] == [[1, 3]]
    live = [c["text"] for c in state["critical"] if not c.get("superseded_by")]
    assert "fail the build if the frame time goes over 2 ms" in live
    state = _user_says(
        "for the numbers that go to Lena: keep them to 1 decimal on the slides",
        "wire the new model into the weekly job and keep the old output format",
        "change of plan on the format: Lena wants no decimals on the slides, whole numbers",
    )
    assert [r[:2] for r in state["critical_replaced"]] == [[1, 3]]


def test_a_figure_the_evidence_denies_is_recorded_as_replaced() -> None:
    """The assistant's reading of a document or a log that says a figure the user gave
    is not so ("40 persons, not 50") records the user's sentence as replaced at the
    reading's turn, and makes no item of the reading; the user's own correction ("£150
    not £99") is no figure to deny, a figure's compound ("not 144-specific") denies
    nothing, and "not £14k" denies 14k, not the 14 of "14 days". (Written for this
    test.)"""
    state = _said(
        ("user", "the barn takes 60 for a sit-down meal so we're fine on space."),
        ("assistant", "Clause 4.2 of their terms: seated dinners are 45 people max, not 60."),
    )
    assert [r[:2] for r in state["critical_replaced"]] == [[1, 2]]
    assert [c["turn"] for c in state["critical"]] == [1]
    assert state["critical"][0]["superseded_by"] == 2
    state = _said(  # a name with a figure in it
        ("user", "probably nothing, the pool's raidz2 so we've a disk to spare either way"),
        ("assistant", "`zpool status` says the pool is raidz1 (raidz1-0), not raidz2."),
    )
    assert [r[:2] for r in state["critical_replaced"]] == [[1, 2]]
    for turns in (
        (
            ("user", "update: the excess is £150 not £99, I misread it."),
            ("assistant", "Noted: £150, not £99."),
        ),
        (
            ("user", "my old monitor runs at 144 Hz, the shake is obvious on it."),
            ("assistant", "It's not 144-specific: it shows at 60 Hz too."),
        ),
        (
            ("user", "if they don't pay in 14 days I'm going to the small claims court."),
            ("assistant", "Insure the kit at its real value, £17.5k (not £14k)."),
        ),
    ):
        assert _said(*turns)["critical_replaced"] == []


def test_a_users_own_correction_is_no_figure_the_evidence_denies() -> None:
    """When the user corrected the figure ("the excess is £150 not £99!!"), the
    assistant's "£150, not £99" denies what the user said before it ("the excess is £99
    I think"), not the correction. (Written for this test.)"""
    state = new_state("s")
    state["said"] = [[1, "the excess is £99 I think", ""], [2, "the excess is £150 not £99!!", ""]]
    _denied(state, 3, frozenset({"99"}))
    assert [r[:2] for r in state["critical_replaced"]] == [[1, 3]]


def test_a_limit_on_a_sum_set_anew_replaces_the_old_limit() -> None:
    """ "so the gym budget is £45 a month now" and "£200 a month is the ceiling now"
    change the limit on a sum for the same span ("I can't go above about £30 a month",
    "£90 a month, all in"), not a quote that gives a sum a month. (Written for this
    test.)"""
    assert replaces(
        "so the gym budget is £45 a month now, that's the real ceiling",
        "I can't go above about £30 a month on the gym, everything in",
    )
    assert replaces(
        "£200 a month is the ceiling now. that's the real one, not moving again",
        "money: we can do £90 a month on the car, all in. not a penny more",
    )
    assert not replaces(
        "so the cat budget is £55 a month now",
        "the cheapest insurer is £17.85 a month, no co-pay until 12",
    )
    state = _user_says(
        "money: we can do £90 a month on the car, all in. not a penny more",
        "the insurer's quote is £17.85 a month, no co-pay until 12",
        "£200 a month is the ceiling now. that's the real one, not moving again",
    )
    assert [r[:2] for r in state["critical_replaced"]] == [[1, 3]]


def test_what_was_said_scrapped_replaces_the_rule_it_names() -> None:
    """ "so scrap what i said about X: ..." takes back the rule about X as "forget what I
    said about X" does, though the two share only a word or two. (Written for this
    test.)"""
    state = _user_says(
        "and rule for now: no new packages please, everything in deps.lock gets baked "
        "into the kiosk image by bake.sh and rebuilding that image takes a whole afternoon",
        "so scrap what i said about no new packages: admin-side libraries are fine from "
        "now on. the terminal list stays frozen though, nothing new is baked in there",
    )
    assert [r[:2] for r in state["critical_replaced"]] == [[1, 2]]


def test_a_change_names_a_preference_by_the_sentence_said_before_it() -> None:
    """What a kept sentence is about is often said just before it ("an alert on the
    backup disks. Warn at 80% ..."): a change that names that ("a change of mind on the
    alert") replaces it, though a sentence that names it itself is taken first. (Written
    for this test.)"""
    state = _user_says(
        "since disk keeps biting us: an alert on the backup disks. warn at 80% and it goes "
        "to #ops-noise.",
        "the fitter comes on the 12th",
        "and a change of mind on the alert. page me at 90%, the warning sat unread for hours",
    )
    assert [(c["turn"], c.get("superseded_by")) for c in state["critical"]][:1] == [(1, 3)]
    assert "an alert on the backup disks. warn at 80%" in state["critical"][0]["text"]
    state = _user_says(
        "oh and taps!! I want brushed nickel mixer taps.",
        "ok Brenner brushed nickel it is. 2 of them",
        "change of heart: forget brushed nickel, matt black taps",
    )
    assert [r[:2] for r in state["critical_replaced"]] == [[1, 3]]


def test_a_change_said_in_few_words_after_a_lead_goes_on_in_the_next_sentence() -> None:
    """ "and while you're at it: I changed my mind about naming." says the change in six
    words after what leads it in: the sentence after it, which says the new rule, is
    part of the item. (Written for this test.)"""
    state = _user_says(
        "module names in camelCase please, it's what the old services use",
        "the fitter comes on the 12th",
        "and while you're at it: I changed my mind about naming. snake_case for every new "
        "module, the old ones too.",
    )
    live = [c["text"] for c in state["critical"] if not c.get("superseded_by")]
    assert any("snake_case for every new module" in text for text in live)
    assert [r[:2] for r in state["critical_replaced"]] == [[1, 3]]


def test_a_bound_on_what_was_just_said_takes_it_in() -> None:
    """ "and I really don't want to go over" bounds the sum said just before it: the
    item starts there. (Written for this test.)"""
    found = detect(
        "user",
        "ok money for the party. the hall is sorted and paid. the band is booked for eight. "
        "raffle prizes are in the church cupboard. so: £900 for the food and drink. and I "
        "really don't want to go over, I'm not asking the committee again. Derek says hi.",
    )
    assert [text for _, text in found] == [
        "so: £900 for the food and drink. and I really don't want to go over, I'm not "
        "asking the committee again. Derek says hi."
    ]


def test_what_i_said_about_x_names_what_a_change_takes_back() -> None:
    """ "forget what I said about uppercase" changes the rule about uppercase: the other
    rules of the item stand, though the change shares a word with them ("config").
    (Written for this test.)"""
    state = _user_says(
        "and put the config back in the model file, not the project file. oh and uppercase "
        "the SQL keywords in that model while you're at it",
        "the fitter comes on the 12th",
        "argh CI enforces it. lowercase then, forget what I said about uppercase. the repo's "
        "lint config wins for everything you write here",
    )
    live = [c["text"] for c in state["critical"] if not c.get("superseded_by")]
    assert any(text.startswith("and put the config back in the model file") for text in live)
    assert [r[:2] for r in state["critical_replaced"]] == [[1, 3]]


def test_a_list_item_keeps_the_users_numbering_but_not_a_bullet() -> None:
    """The items of a list of rules are the user's words: "1)" as numbered stays, a
    bullet or a "1." mark goes. (Written for this test.)"""
    found = detect(
        "user",
        "saw the physio. his rules:\n1) no running on consecutive days.\n"
        "2) pain up to 3/10 is ok if it settles by the next morning.\n- max 4 runs a week\n"
        "3. no hills for a month",
    )
    assert [text for _, text in found] == [
        "1) no running on consecutive days.",
        "2) pain up to 3/10 is ok if it settles by the next morning.",
        "max 4 runs a week",
        "no hills for a month",
    ]


def test_a_fact_admitted_wrong_is_recorded_as_replaced_but_changes_no_rule() -> None:
    """ "ok I was wrong about the importer then" takes back what the user said about it
    as a fact, is no rule itself, and changes no rule about the importer. (Written for
    this test.)"""
    state = _user_says(
        "that can't be the importer though. it has no dups, it dedupes on order_id, I "
        "checked that myself last year",
        "the fitter comes on the 12th",
        "ok I was wrong about the importer then, it only dedupes within a batch",
    )
    assert [r[:2] for r in state["critical_replaced"]] == [[1, 3]]
    assert [c["turn"] for c in state["critical"]] == [1]  # the admission is no rule
    state = _user_says(
        "never touch the importer config without asking me first",
        "ok I was wrong about the importer then, it only dedupes within a batch",
    )
    assert state["critical_replaced"] == []
    assert [c["turn"] for c in state["critical"] if not c.get("superseded_by")][:1] == [1]
