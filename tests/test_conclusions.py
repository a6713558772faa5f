"""Conclusion detection: each kind, and every look-alike that must not count."""

from __future__ import annotations

import pytest

from ccm.engine.conclusions import Conclusion, detect, supersedes, with_reversals

FIX = (
    "assistant",
    "The duplicates came from the missing unique index. I added a UNIQUE constraint on (date, amount, memo).",
)
PLAN = ("assistant", "I suggest we store amounts as integer cents and parse them with Decimal.")
RUNNING = ("assistant", "Pushed the lockfile change. The pipeline is running again.")


@pytest.mark.parametrize(
    ("role", "text", "previous", "kind"),
    [
        (
            "user",
            "Decision: we use SQLite with WAL mode, not Postgres, because there is one writer.",
            None,
            "decision",
        ),
        ("user", "We decided to keep the CLI in click.", None, "decision"),
        ("user", "Let's go with the systemd timer.", None, "decision"),
        (
            "user",
            "Change of plan: we drop the cron job and use a systemd timer instead.",
            None,
            "decision",
        ),
        ("user", "Let's keep it simple: a daily cron job at 02:30.", None, "decision"),
        ("user", "That fixed it, re-import is idempotent now.", FIX, "resolution"),
        ("user", "It works now!", FIX, "resolution"),
        ("user", "All tests pass now.", FIX, "resolution"),
        (
            "user",
            "Postgres doesn't work for us because the box has 512 MB of RAM.",
            None,
            "rejection",
        ),
        ("user", "Option B is ruled out.", None, "rejection"),
        ("user", "Yes, exactly, let's do that.", PLAN, "decision"),
        ("user", "Perfect, thanks.", PLAN, "confirmation"),
        ("user", "Done: the unit file is in place and enabled.", None, "task"),
        ("assistant", "The migration is deployed.", None, "task"),
        ("user", "Ok, so the takeaway is to review at growing intervals.", None, "insight"),
        # how people settle things with an assistant, written for these tests
        ("user", "ok, the night train it is. cheaper and we save a hotel night", PLAN, "decision"),
        ("user", "fine, Lisbon then, the flights are half the price", PLAN, "decision"),
        ("user", "go with the second option, it keeps the API stable", PLAN, "decision"),
        ("user", "ok decided: Hetzner for the staging box, AWS for prod", PLAN, "decision"),
        ("user", "back to python 3.11, the wheels for 3.13 aren't there yet", PLAN, "decision"),
        ("user", "thanks, that answers it. I'll tell the landlord", PLAN, "answer"),
        ("user", "ok makes sense, the cache was stale", PLAN, "answer"),
        ("user", "green on all three runners. the flaky test is dead", FIX, "resolution"),
        ("user", "works now, zero timeouts over the whole night", FIX, "resolution"),
        ("user", "great, migration done \u2714 moving on", None, "task"),
        ("user", "all tickets booked and paid", None, "task"),
        ("user", "the rewrite plan is out, too risky before the launch", PLAN, "rejection"),
        ("assistant", "The root cause was a missing index on the memo column.", None, "insight"),
        (
            "user",
            "Right. Let's decide it then: the oak floor, and the grey grout.",
            PLAN,
            "decision",
        ),
        ("user", "ok lock it in, Tuesday at ten with the plumber", PLAN, "decision"),
        ("user", "Booked both nights at the harbour hotel, breakfast included.", PLAN, "task"),
        ("user", "ordered the replacement valve, it arrives Friday", PLAN, "task"),
        ("user", "12 of 12 checks green now, that's fixed.", FIX, "resolution"),
        ("user", "Fixed the 1/3 rounding bug, tests pass.", FIX, "resolution"),
        ("user", "good, invoices sorted. the accountant owes me a coffee", FIX, "resolution"),
        (
            "user",
            "20 runs, no timeouts. that's the importer fixed, for real this time.",
            FIX,
            "resolution",
        ),
        # the failure named as the thing fixed; a ticket closed; "done ... now"
        ("user", "ok NOW I'm convinced. that's the crash sorted. open the PR", FIX, "resolution"),
        ("user", "the panic is fixed, 50 runs clean", FIX, "resolution"),
        ("user", "merged, SHOP-204 closed", PLAN, "task"),
        ("user", "good, the import's done from my side now. PR please", PLAN, "task"),
        # a rejection said as people say it; a mind changed, said so
        ("user", "Yeah. Moving is off the table, full stop.", PLAN, "rejection"),
        ("user", "No, I'm staying put. Their offer declined.", PLAN, "rejection"),
        ("user", "I've changed my mind. Not the oak. The walnut, oiled.", PLAN, "decision"),
        # a choice reported made, in the past or as a switch
        (
            "user",
            "We went with the fixed-rate one in the end, signed this morning.",
            PLAN,
            "decision",
        ),
        (
            "user",
            "i picked the 16-inch, the battery matters more than the weight",
            PLAN,
            "decision",
        ),
        (
            "user",
            "We're switching. The walnut. Both of us liked it better in daylight.",
            PLAN,
            "decision",
        ),
        ("user", "I've switched to the yearly plan, it's cheaper over 12 months", PLAN, "decision"),
        # a fix called so; an offer turned down or taken; a choice dropped for another
        (
            "user",
            "good, I'll call that one fixed. the cable can wait for the next board",
            FIX,
            "resolution",
        ),
        (
            "user",
            "Nope. We're walking away from the Astra, the seller got cagey.",
            PLAN,
            "rejection",
        ),
        ("user", "we'll pass on the second flat, the stairs alone rule it out", PLAN, "rejection"),
        ("user", "Right. We're buying the Corolla. Sam's already named it.", PLAN, "decision"),
        (
            "user",
            "so 2,100 for the old one, they beat our number. we'll take it.",
            PLAN,
            "decision",
        ),
        ("user", "yeah, forget the loan, we're paying it off from savings.", PLAN, "decision"),
        (
            "user",
            "that'll do. weekly backups plus the monthly copy go into the plan",
            PLAN,
            "confirmation",
        ),
        # a fix the user checked on their own while the assistant's check still runs
        (
            "user",
            "the totals on the dev report match the bank for every month. that's fixed, merge it",
            RUNNING,
            "resolution",
        ),
        # idioms of a fix, a rejection, a decision and a task done
        ("user", "develop's green again. that one cost me a weekend", FIX, "resolution"),
        ("user", "nice. that's the flicker properly dead then", FIX, "resolution"),
        ("user", "fine. the monorepo plan is binned, too much churn", PLAN, "rejection"),
        ("user", "no to the second server, not this year.", PLAN, "rejection"),
        ("user", "the coach option's a no, my knees won't take six hours", PLAN, "rejection"),
        ("user", "scrap the raffle idea. nobody wants to sell tickets", PLAN, "rejection"),
        ("user", "he's right, so encryption stays on. keys rotate yearly.", PLAN, "decision"),
        ("user", "yes to that. the blue ones, 200 of them, invoice to me", PLAN, "decision"),
        (
            "user",
            "stewards at every gate, briefing at nine. that's the stewarding plan",
            PLAN,
            "decision",
        ),
        ("user", "£300 left over, kept aside. that's the budget put to bed", PLAN, "task"),
        # a failure called dead with a contraction; "X: done"; an idiom closing the turn
        (
            "user",
            "three reruns green on the shared runners. race's dead. merging #88",
            FIX,
            "resolution",
        ),
        ("user", "changelog posted, tag pushed. hotfix: done", PLAN, "task"),
        (
            "user",
            "rolled out, dashboards show the new panel on all 4 nodes. squared away",
            PLAN,
            "task",
        ),
        ("user", "Labels printed and stuck on. Done, thanks!", PLAN, "task"),
        # an answer taken as it stands; persuaded
        ("user", "great, that's the summary for the board pack. copying it over", PLAN, "answer"),
        ("user", "alright, you've convinced me. the thicker boards, then", PLAN, "confirmation"),
        # a yes given; the other option taken; an option gone off; a plan called off
        (
            "user",
            "the roofer came down to £4,100 and I've said yes, deposit's paid",
            PLAN,
            "decision",
        ),
        ("user", "rang the agency back. I've told them yes.", PLAN, "decision"),
        ("user", "Dad said yes to the ground-floor room in the end.", PLAN, "decision"),
        ("user", "the gas hob instead, the induction one needs a new circuit", PLAN, "decision"),
        ("user", "after the test drive we've gone off the estate car.", PLAN, "rejection"),
        (
            "user",
            'He read it and said "not a chance". So the Porto trip is off, sadly.',
            PLAN,
            "rejection",
        ),
        # well again, a ticket closed in the saying; a proposal put off in reply
        (
            "user",
            "09:10 and 09:40, both green. the nightly's healthy again, closing the ticket",
            FIX,
            "resolution",
        ),
        (
            "user",
            "nah, not this sprint. pin it at 2.3 and I'll raise it at planning",
            PLAN,
            "rejection",
        ),
        # settled in so many words; taken, if not loved
        (
            "user",
            "done deal: the old van's sold, the new one's ordered, deposit paid",
            PLAN,
            "decision",
        ),
        ("user", "no more haggling, we're signing as is on Monday", PLAN, "decision"),
        ("user", "4,870. the venue list is locked", PLAN, "decision"),
        ("user", "1,940 all in. I can live with that.", PLAN, "confirmation"),
        # a policy named as settled; one option out for another
        ("user", "right, that's our refund policy.", PLAN, "decision"),
        ("user", "fine. Trello's out, we're moving to a plain spreadsheet", PLAN, "rejection"),
        # a move declined; the proposal taken as described; an answer to what was needed;
        # a list called final; a change made, an option dropped; off the list, out; fixed
        # after a colon, a ticket closed by whose it is
        (
            "user",
            "yeah no. not switching to Flutter, the old Androids decide it",
            PLAN,
            "rejection",
        ),
        (
            "user",
            "ok. we build the export button in Settings like you suggested, CSV only",
            PLAN,
            "decision",
        ),
        (
            "user",
            "ok that answers what I wanted to know about the lease. I'll ring them monday",
            PLAN,
            "answer",
        ),
        ("user", "right, final headcount: 52 adults, 9 kids, the band eats too", PLAN, "decision"),
        (
            "user",
            "Hanna says the 14th is free. we're booking it, party is on the 14th",
            PLAN,
            "decision",
        ),
        (
            "user",
            "we're ditching the caterer, 30 a head is silly. doing the buffet ourselves",
            PLAN,
            "rejection",
        ),
        (
            "user",
            "Kim tried it on the tablet, snappy now. shipping it, that's the search page off the list",
            PLAN,
            "task",
        ),
        ("user", "2.8.1 on all servers, Lars knows. the hotfix is out \U0001f44d", PLAN, "task"),
        ("user", "fine by me. search box: fixed, closing Amir's ticket", PLAN, "resolution"),
        # an option binned by name; a choice in the present; "done" closing the turn
        ("user", "no, bin mongo. it's brought the timeouts straight back", PLAN, "rejection"),
        ("user", "ok we go with the monthly plan. 12 a head, 40 minimum", PLAN, "decision"),
        ("user", "uploaded to the portal and emailed the clerk. done", PLAN, "task"),
        # a task reported, then the fix it verifies: the fix is what the turn concludes
        (
            "user",
            "Signed her back in, it synced once and stayed quiet. ok, that is the login loop fixed.",
            FIX,
            "resolution",
        ),
    ],
)
def test_conclusions_are_found(
    role: str, text: str, previous: tuple[str, str] | None, kind: str
) -> None:
    found = detect(7, role, text, previous)
    assert found is not None, text
    assert found.kind == kind and found.turn == 7
    assert 0 < found.confidence <= 1 and found.reason


@pytest.mark.parametrize(
    ("text", "previous"),
    [
        ("Did that fix it?", FIX),
        ("That fixed it? No, I still see duplicates.", FIX),
        ("That fixed it? no", FIX),
        ("That didn't fix it, still duplicates.", FIX),
        ("It still doesn't work.", FIX),
        ("Perfect, it broke again.", FIX),
        ("Great, now it crashes on startup.", FIX),
        ("That fixed it, but now the import fails with a KeyError.", FIX),
        ("I'm done for today, we still need to handle currencies.", None),
        ("Not done yet: the timer still needs a test.", None),
        ("Should we decide on Postgres?", None),
        ("Is the migration deployed?", None),
        ("What is the takeaway here?", None),
        ("Once it's done we can deploy.", None),
        ("Every item is now done except a one-off restore test.", None),
        ("If the tests pass we merge.", None),
        ("Yes?", PLAN),
        # traps: questions, hedges, sarcasm, pauses, plans, quotes, one machine
        ("so the night train it is?", PLAN),
        ("so Lisbon then?", PLAN),
        ("probably the cache, but I haven't checked", FIX),
        ("I bet it's the retry that ran twice", None),
        ("should be green now", FIX),
        ("great, it crashed again, love it", FIX),
        ("lovely, timeouts again. wonderful", FIX),
        ("ok that's it for today, the import still fails", None),
        ("let's stop here for today, I'm tired", None),
        ("just revert the commit and we're done", None),
        ('there is a commit "fix the crash" from Monday, did it help?', None),
        ("works on my machine though", None),
        ("FIXED? no wait, it died at the same step", FIX),
        ("We could go with Postgres or SQLite, I'm not sure.", None),
        ("makes sense, but the bug is two years old and only showed up this week. why now?", FIX),
        ("Ordered by price, the cheapest one is the Miele.", PLAN),
        ("ok, I'm off for today. leave everything as it is, we pick it up tomorrow", PLAN),
        ("right, not the cache then. what else changed last week?", FIX),
        ("nothing got merged today, CI was red all afternoon", None),
        # irony marks and counts short of the whole
        ("Wonderful, the venue's sorted then, we'll all sit on the floor \U0001f643", PLAN),
        ("Deploy done. \U0001f644 Only took three tries.", None),
        ("oh sure, fixed /s", FIX),
        ("Deployed and merged, all green /s", FIX),  # what "/s" alone takes back
        ("11 of 12 checks green, that one's fixed", FIX),
        ("Status: 7/9 tests pass now, the rest is done tomorrow.", FIX),
        # a fix called while its check is still running; a wish to have something sorted
        ("Nice. It's fixed then.", RUNNING),
        ("we need to get the visa sorted before March.", PLAN),
        ("can you get the invoices sorted by date?", PLAN),
        # what was done named, not declared
        ("A cover sheet: the totals and what was done, then the detail.", PLAN),
        # a request for the next step, or a version, before "then"; a merge gone red
        ("oh great. show me the config loader then", FIX),
        ("something for 4.2 then, so main is fine here.", PLAN),
        ("merged, but CI went red on main", PLAN),
        ("the crash is fixed, but now the login fails", FIX),
        ("I'm stopping now, the import still fails", None),
        ("is the move off the table now?", PLAN),
        ("card declined again, third time today", None),
        ("I might be changing my mind about the walnut", PLAN),
        # a choice made by someone else's going along, a choice to come
        ("I went with her to the viewing, the flat is small", PLAN),
        ("we're switching off the router at night now, does that matter?", PLAN),
        ("which one would you have picked?", PLAN),
        ("I'll call it fixed once the overnight run is clean", FIX),
        ("don't forget the charger when you go", PLAN),
        # mock delight; a thing that stays somewhere; "that's the plan for" is no plan made
        ("oh good, so the build just flips a coin now. that's that solved then", FIX),
        ("oh brilliant. so it's a triumph then, ship it to everyone why don't we", FIX),
        ("I've unplugged the tablet, it stays on the shelf overnight", PLAN),
        ("what's the packing plan for the move?", PLAN),
        ("forget the tabs thing I said earlier, spaces from now on", PLAN),
        ("we'll take it to the garage on Monday and see", PLAN),
        ("that'll do for tonight, I'm shattered", PLAN),
        # a fix that holds only in practice; a yes still to come; "instead" asked; a
        # plan praised in mockery; "off" as a state; done with something left
        ("it works in practice, but the parser makes the same assumption", FIX),
        ("if she says yes we'll book the ground-floor room", PLAN),
        ("I said yes since she knows the team", PLAN),
        ("the gas hob instead?", PLAN),
        ("Oh, marvellous. Dev has decided. Genius plan, really.", PLAN),
        ("can't think why nobody thought of it before, said nobody", PLAN),
        ("so the heating is off at night, is that a problem?", PLAN),
        ("done, but the second label is still missing", PLAN),
        ("all six PRs are merged or open as described, the tag comes after review.", PLAN),
        # a yes with a condition, a deferral until something happens, a hedged "in the bag"
        ("no, not before legal has actually signed it off", PLAN),
        ("I can live with that if the date moves to May", PLAN),
        ("posted \u2714 that should do the trick, they always answer a letter", PLAN),
        ("v3.2 is out, the changelog went up an hour ago", PLAN),
        ("ok that's the funding basically in the bag \U0001f389", PLAN),
        # a move declined only if; a list still to come; a visit; a date; "gone" of a person
        ("if we're not moving to Kotlin we keep the old build scripts", PLAN),
        ("the final list is due friday, Tom is still collecting names", PLAN),
        ("we're dropping by the shop later, need anything?", PLAN),
        ("I'm not sure we're taking it, the rent is high", PLAN),
        ("the release is out of date, we need a new one", PLAN),
        ("it's gone 5, I'm tired", PLAN),
        ("R3 tomorrow, brain's gone. she sends the last PDF on Thursday", PLAN),
        ("if we go with the monthly plan we pay 40 more", PLAN),
        ("no, not the way I meant it, read it again", PLAN),
        # a step of a plan turned down is no option rejected
        ("no, not the drop. expand now, contract later: the column goes next release", PLAN),
        ("scrap that, I misread the log", PLAN),
        # a claim resting on what someone is sure will happen
        ("perfect. they'll obviously say yes to 70, he said so. salary sorted.", PLAN),
    ],
)
def test_look_alikes_are_rejected(text: str, previous: tuple[str, str] | None) -> None:
    assert detect(3, "user", text, previous) is None, text


def test_a_short_confirmation_names_what_was_fixed() -> None:
    found = detect(9, "user", "That fixed it!", FIX)
    assert found is not None
    assert "UNIQUE constraint" in found.text and "That fixed it" in found.text


def test_an_acceptance_states_what_was_accepted_and_a_rich_one_speaks_for_itself() -> None:
    proposal = (
        "assistant",
        "## Options\nThe **cheapest** fit is the Kestrel K2 at \u20ac89/month: 4 vCPU, 16 GB, "
        "in Frankfurt. The Mira plan costs \u20ac140 for the same.",
    )
    accepted = detect(5, "user", "ok, decided. order it", [proposal])
    assert accepted is not None and accepted.kind == "decision"
    assert accepted.text.startswith("The cheapest fit is the Kestrel K2 at \u20ac89/month")
    assert "**" not in accepted.text and "##" not in accepted.text
    own = detect(
        5, "user", "ok, Kestrel K2 it is: 4 vCPU, 16 GB, Frankfurt, 89 a month", [proposal]
    )
    assert own is not None and own.text == "Kestrel K2 it is: 4 vCPU, 16 GB, Frankfurt, 89 a month"


def test_an_assistant_may_declare_done_but_not_decide_for_the_user() -> None:
    done = detect(4, "assistant", "Done: the nightly job is merged and deployed.", None)
    assert done is not None and done.kind == "task" and done.confidence < 0.7
    assert detect(4, "assistant", "Understood. Lisbon it is.", None) is None


def test_assistant_claims_count_less_than_user_verification() -> None:
    user = detect(5, "user", "Tests pass now.", None)
    bot = detect(5, "assistant", "Tests pass now.", None)
    assert user is not None and bot is not None and bot.confidence < user.confidence


def test_no_more_errors_is_not_a_failure() -> None:
    found = detect(1, "user", "That fixed it, no more errors.", FIX)
    assert found is not None and found.kind == "resolution"


def test_a_reversed_decision_is_superseded() -> None:
    cron = Conclusion(
        "Decision: nightly backups run from a daily cron job.", 10, "decision", 0.85, ""
    )
    timer = Conclusion(
        "Actually, let's use a systemd timer for the backups instead of cron.",
        13,
        "decision",
        0.85,
        "",
    )
    unrelated = Conclusion("Decision: the service logs to journald.", 14, "decision", 0.85, "")
    assert supersedes(timer, cron)
    assert not supersedes(unrelated, cron)
    assert not supersedes(cron, cron)


def test_a_check_mark_decorates_an_answer_but_declares_a_users_task_done() -> None:
    heading = "### \u2705 **Deployment ready**\nThe image builds and the probes answer."
    assert detect(3, "assistant", heading, None) is None
    done = detect(3, "user", "staging deploy \u2705", [("assistant", "Deployed to staging.")])
    assert done is not None and done.kind == "task"


def test_a_decision_reversed_in_another_sentence_of_its_turn_supersedes() -> None:
    """ "Decided: the night bus." with "Forget the train." in the same turn replaces the
    train decided earlier, though its statement is only the new choice."""
    earlier = Conclusion(
        "Decision: the 7:40 train to Lyon on Friday, 62 euros.", 3, "decision", 0.85, ""
    )
    later = Conclusion("Decided: the night bus on Thursday, 38 euros.", 9, "decision", 0.85, "")
    turn = "Decided: the night bus on Thursday, 38 euros. Forget the train to Lyon."
    assert not supersedes(later, earlier)
    assert supersedes(with_reversals(later, turn), earlier)


def test_a_cue_that_sums_up_the_turn_states_what_the_turn_said_before_it() -> None:
    """Written for this test: "That's the new plan." closes a turn that says the plan."""
    text = (
        "Fair enough. Swimming on Mondays, the gym on Thursdays at seven, yoga on "
        "Saturday mornings. That's the new plan."
    )
    found = detect(9, "user", text, PLAN)
    assert found is not None and found.kind == "decision"
    assert "gym on Thursdays" in found.text and "new plan" in found.text
    assert "integer cents" not in found.text  # not the assistant's words before it


def test_a_statement_keeps_the_names_quoted_in_it() -> None:
    """Quoted spans are not read for cues (a commit message "fix the crash" is no fix),
    but the statement keeps them: code names are what make it reusable."""
    said = "Four unit tests pass (`RetryPolicyTest` with a fake 503), and `lintDebug` is clean."
    found = detect(7, "assistant", said, PLAN)
    assert found is not None
    assert "`RetryPolicyTest`" in found.text and "`lintDebug`" in found.text
    assert detect(7, "user", 'the commit "that fixed it" is from May', PLAN) is None


def test_the_recap_after_a_pause_concludes_nothing_new() -> None:
    """ "that'll do for tonight" is a pause; the assistant's summary after it lists
    what is under way, whatever its words ("script fixed"), and decides nothing."""
    recap = "Night! For the morning:\n- Backups: the script is fixed, and the test run passed."
    paused = [("user", "right I'm wrecked, that'll do for tonight. night!")]
    assert detect(9, "assistant", recap, paused) is None
    assert detect(9, "assistant", recap, [("user", "ok, what's left?")]) is not None
    # a goodnight that opens the turn, and one that closes it
    for said in ("ok. bed. we're nearly there, just the gutters to ask Tom about", "thx, night!"):
        assert detect(9, "assistant", recap, [("user", said)]) is None, said


OPTIONS = (
    "assistant",
    "The image is 99% full. The options:\n\n"
    "1. **Bigger partition**: change the layout, which you ruled out.\n"
    "2. **Drop the shell**: saves 9 KiB but we lose the console.\n"
    "3. **Protobuf instead of JSON**: saves about 14 KiB net. The decoder is generated.",
)


@pytest.mark.parametrize(
    ("reply", "chosen"),
    [
        ("the layout is frozen and I need the console. So protobuf.", "Protobuf instead of JSON"),
        ("Drop the shell. nobody uses it in the field", "Drop the shell"),
        ("ok, protobuf then", "Protobuf instead of JSON"),
        ("Bigger partition is off limits, you know that", None),  # turned down
        # named whole, in a longer reply; named whole, and turned down
        (
            "drop the shell for now, nobody uses it in the field and we need the room",
            "Drop the shell",
        ),
        ("bigger partition is not happening, you know why", None),
        ("protobuf? how big is the decoder", None),  # asked about
        ("hmm, I'm not sure about any of them yet. what does the shell cost us", None),
        # a name said as the start of another word: "Drop the shell's" is no choice
        ("ugh, the console. Drop the shell's only 9 KiB anyway", None),
    ],
)
def test_an_option_the_answer_laid_out_is_chosen_by_naming_it(
    reply: str, chosen: str | None
) -> None:
    """A reply naming one of the options an answer listed in bold decides it; its
    statement says the option as the answer did. (Written for this test.)"""
    found = detect(7, "user", reply, OPTIONS)
    if chosen is None:
        assert found is None or found.kind != "decision" or chosen not in found.text
        assert found is None or "option" not in found.reason
    else:
        assert found is not None and found.kind == "decision", reply
        assert chosen in found.text and found.turn == 7


def test_an_option_named_first_and_decided_after_is_the_one_the_statement_says() -> None:
    """Written for this test: the answer lays out two options in bold; the user names
    the second by a shortened name in the turn's first sentence and decides in a later
    one: the statement says the option named, not the answer's first."""
    laid = (
        "assistant",
        "Both work:\n"
        "- **Kubernetes CronJob**: one manifest, the cluster retries it.\n"
        "- **Temporal workflow**: durable timers and a history of every run.",
    )
    said = "tempo. the retries need a history, I've been burned twice. decided, set it up tomorrow"
    found = detect(7, "user", said, [laid])
    assert found is not None and found.kind == "decision"
    assert "Temporal workflow" in found.text and "CronJob" not in found.text


def test_an_option_laid_out_by_label_is_chosen_after_a_question_about_it() -> None:
    """Options labelled "**Option A**:" may be chosen a question later: "option B!! ..."
    after the answer to "do we tell the guests?". (Written for this test.)"""
    laid = (
        "assistant",
        "Two ways to do it:\n"
        "- **Option A**: a separate plate for him. Simple, but he is the odd one out.\n"
        "- **Option B**: make the **whole menu** nut-free, with nuts served on the side. "
        "Nobody is singled out.",
    )
    asked = ("user", "do we tell the others it's nut free or is that weird?")
    answered = ("assistant", "I wouldn't announce it. Put a line on the menu card.")
    found = detect(9, "user", "option B!! love that. whole menu nut free", [laid, asked, answered])
    assert found is not None and found.kind == "decision"
    assert "whole menu nut-free" in found.text
    assert detect(9, "user", "option B? not sure yet", [laid, asked, answered]) is None


def test_the_first_turn_of_all_and_a_message_pasted_in_conclude_nothing() -> None:
    """What the opening turn says was decided is where the talk starts; what a pasted
    message says someone decided is theirs. (Written for this test.)"""
    opening = "we've decided to get a cargo bike for the school run. where do we even start"
    assert detect(1, "user", opening, None) is None
    assert detect(9, "user", opening, PLAN) is not None
    pasted = (
        'the school wrote back, pasting it:\n\n"Thank you for your patience. The governors have '
        'since decided that bikes may be left in the staff shelter, and we agree it is safer."'
    )
    assert detect(9, "user", pasted, PLAN) is None


def test_an_explanation_of_a_failure_still_there_is_a_step_not_a_conclusion() -> None:
    """ "makes sense" to an answer that opens on a failure still there accepts a step of
    the fix; to an explanation of what happened, it accepts the answer. (Written for
    this test.)"""
    failing = (
        "assistant",
        "Still failing, a different error now: the token is read before it is set. "
        "I'd move the read into setUp.",
    )
    explained = (
        "assistant",
        "The token is read before it is set, because setUp runs after the class fixture.",
    )
    assert detect(5, "user", "ok makes sense, go ahead", failing) is None
    found = detect(5, "user", "ok makes sense, go ahead", explained)
    assert found is not None and found.kind == "answer"
    # "that answers it" says the question was answered, whatever failure the answer is about
    answered = detect(5, "user", "good, that answers it", failing)
    assert answered is not None and answered.kind == "answer"


def test_a_pasted_record_concludes_nothing_but_a_date_range_is_no_record() -> None:
    """A record pasted from a service ("Inspection 3 May 2025 — PASS — Odometer
    61,400") holds a cue word and says nothing settled; a booking with a date range
    written with an en dash is the user's own sentence. (Written for this test.)"""
    record = "hold on\n\nInspection 3 May 2025 — PASS — Odometer 61,400 km\n\nhuh, not 40k"
    assert detect(5, "user", record, PLAN) is None
    booked = "Booked both, free cancellation: Hotel Oria 2 – 6 June, Casa Lume 6 – 9 June."
    found = detect(5, "user", booked, PLAN)
    assert found is not None and found.kind == "task"


def test_a_long_answer_is_read_by_whole_lines_not_a_line_cut_in_two() -> None:
    """A long answer is read at its start and end; the cut falls at a line break, so
    "When it's done: tag the release" is not read as "en it's done: ..." (a task
    declared done). (Written for this test.)"""
    steps = "\n".join(
        f"{n}. run the migration check on box {n} and note the time." for n in range(40)
    )
    last = "When it's done: tag v3.1.0 and push the tags."
    for shift in range(len(last)):  # wherever the cut falls in that line
        after = "Still open: the letters to customers, " + "and the review of the next PR, " * 12
        after = after[: 400 - len(last) + shift]
        answer = f"The plan for tonight:\n{steps}\n{last}\n{after}"
        assert detect(9, "assistant", answer, PLAN) is None, answer[-420:]


def test_mostly_done_is_not_done() -> None:
    assert detect(5, "user", "thank you, it's mostly done now", PLAN) is None
    assert detect(5, "user", "the move is largely finished, only the loft left", PLAN) is None


def test_a_cue_that_closes_a_turn_saying_nothing_states_what_came_before_it() -> None:
    """Written for this test: "ticked off" ends a turn that says what was done; an
    acceptance at the end ("sorted, go with that") still says what it accepts."""
    text = "merged, the new alert rules show up in grafana and the cap is 12 on all 3 hosts. ticked off"
    found = detect(9, "user", text, PLAN)
    assert found is not None and found.kind == "task"
    assert "cap is 12 on all 3 hosts" in found.text
    accepted = detect(
        9, "user", "cups from the school, bins from the parish. sorted, go with that", PLAN
    )
    assert accepted is not None
    assert "integer cents" in accepted.text  # what it accepts, the plan before it


def test_a_choice_that_drops_the_earlier_one_by_name_supersedes_it() -> None:
    """Written for this test: "drop hetzner." beside "Fly.io it is" reverses the earlier
    "Hetzner then" though the two statements share only a few words."""
    earlier = detect(2, "user", "ok, Hetzner then. one box in Falkenstein, backups nightly", PLAN)
    text = (
        "drop hetzner. not babysitting a box for one service. Fly.io it is, two machines in "
        "Amsterdam and Paris, deploys from the GitHub action, backups nightly"
    )
    later = detect(9, "user", text, PLAN)
    assert earlier is not None and later is not None
    assert supersedes(with_reversals(later, text), earlier)


def test_a_long_answer_read_at_its_end_starts_at_a_whole_word() -> None:
    """Written for this test: the end of a long answer whose last line is longer than
    what is read of it starts at a word of it, not inside one ("hings stand ...")."""
    padding = "\n".join(
        f"Step {n}: ran the checks for module {n} and wrote the notes down." for n in range(20)
    )
    last = (
        "Where things stand overall after the whole afternoon of work on the billing service: "
        + ", ".join(f"#{n} (module {n} of the refactor, reviewed by Ana)" for n in range(40, 48))
        + " are all merged, and v3.1 is tagged and running on staging"
    )
    answer = padding + "\n\n" + last
    found = detect(5, "assistant", answer, None)
    assert found is not None and found.kind == "task"
    assert found.text.split()[0] in answer.split()


@pytest.mark.parametrize(
    ("reply", "chosen"),
    [
        ("B and C, and 40 off the ticket price.", "Packed lunches"),
        ("2. checked with the venue already, they have the extra tables", "Two extra tables"),
    ],
)
def test_an_option_the_answer_labelled_is_chosen_by_its_label(reply: str, chosen: str) -> None:
    """Written for this test: options laid out with a letter or a number ("**A. ...**",
    "2. **...**") are chosen by naming the label first; "a" alone is an article."""
    answer = (
        "Options:\n\n**A. Drop the boat trip:** -12\n**B. Packed lunches** instead of cafes: -8\n"
        "**C. Smaller contingency:** -6\n\nOr for the seating:\n\n1. **One long table**: no\n"
        "2. **Two extra tables** in the side room: fits everyone\n"
    )
    found = detect(4, "user", reply, ("assistant", answer))
    assert found is not None and found.kind == "decision"
    assert chosen in found.text
    assert detect(4, "user", "a quick one: is that per person?", ("assistant", answer)) is None


# Written for these tests: ways of saying that something is settled (what held-out
# conversations showed past the cue words), each with its kind, and the same words in
# turns that settle nothing.
SETTLED = [
    ("fine. £26k, four days a week, starting in June. that's the offer.", "decision"),
    # a figure chosen with "then"; a gap closed by what was just done
    ("ok, 1,800 for the boiler in the spreadsheet then", "decision"),
    ("£12 and £7 then. students get the £7.", "decision"),
    ("great. that closes the missing-invoices gap, march finally adds up", "resolution"),
    # a thing kept, said alone as the turn opens
    ("the old boiler stays. it's four years old and the engineer says it's fine", "decision"),
    ("ok, 3.11 stays, the upgrade waits for the next quarter", "decision"),
    ("he signed the contract this morning. ok well that's the bathroom sorted then", "resolution"),
    # a word of certainty between: "finally done", "properly fixed this time"
    ("right, the migration is finally done, that's a weight off", "task"),
    ("ran it twice on the big tenant. the export's properly fixed this time", "resolution"),
    ("the invoices are actually sorted now, Priya signed them off", "resolution"),
    ("5 of 20 before, 20 of 20 after. ok THIS one's finally gone. merge it", "resolution"),
    ("brilliant, the timeout is finally gone. ship it", "resolution"),
    # an option taken in other words
    ("scrap the lease. we're going for the second unit on Dock Road", "decision"),
    ("ok fine, we'll do it your way. no flat-pack, the oak shelves", "decision"),
    ("good. that's what we do: one queue per tenant, retries capped at 3", "decision"),
    ("cheap and ugly vs dear and pretty. ugly wins. order the steel ones", "decision"),
    ("hmm. well that's that then. the loft stays a loft", "decision"),
    ("right, decision: we keep the monolith for v3, services can wait", "decision"),
    # figures called final; what was put together called the one
    ("argh, so close. Final: venue 2,100, catering 1,340, total 3,440.", "decision"),
    ("Kim added two more, so final headcount is 48. booking the coach", "decision"),
    ("soup, the lamb, lemon tart. that's the menu", "decision"),
    ("fine, Jo pays 40 and we do 30 each. that's our split.", "decision"),
    ("£300 on the hall, £200 on food and that's the party budget.", "decision"),
    ("hm. change of plan: no new car until the loan's paid off.", "decision"),
    ("right, this time for real: the blue van. ringing them now.", "decision"),
    ("so 4.8k with the fence. that's the budget, we're writing it on the fridge", "decision"),
    # a fix or a thing in hand called so
    ("two runs, both clean, and the totals agree. that's nailed. open the PR", "resolution"),
    ("none stuck since the deploy. ok THIS is the real fix, locks gone for good", "resolution"),
    ("zero timeouts since noon. that's the dns fix, for real this time", "resolution"),
    ("so scrap carpets for now. we sand the boards and see", "rejection"),
    ("fine. scrap the hire van. we borrow Tom's trailer", "rejection"),
    (
        "boiler service engineer sorted, my neighbour's brother does them. so that's covered",
        "resolution",
    ),
    ("no, forget overnight trains entirely. we fly to Vienna and rest there", "rejection"),
    ("right, forget marquees. the barn, whatever the weather", "rejection"),
    ("the import took all 9,200 rows this time. good, that sync's sorted", "resolution"),
    ("nice. memory spikes sorted, merging #77 and it goes in the patch too", "resolution"),
    ("pushed, tagged 3.2.1, the mirror has it. done with that one", "task"),
    ("done, sam moved his shift and friday works. both visits are in the diary", "task"),
    # an answer taken
    ("ran the audit, nothing found. ok that answers OPS-88.", "answer"),
    ("oh this is great, exactly the checklist we needed for the auditors", "answer"),
    ("ok that's clear. the permit first, then the survey. thanks", "answer"),
    # a recovery called so; a matter taken care of; a plan owned; an option thrown out
    ("all four regions report in again. ops is calling it recovered as of 14:20", "resolution"),
    ("ok calling it fixed, the queue drained overnight", "resolution"),
    ("mirror audit notes dealt with, the reply goes to legal tomorrow", "resolution"),
    ("good. the flaky login bug's dealt with then", "resolution"),
    (
        "the stall moves to the car park and Jan runs the raffle. that's what we're doing",
        "decision",
    ),
    ("the noise thing settles it, she'd never sleep next to the boiler. the back room", "answer"),
    ("forty runs and none wobbled. that's fixed \U0001f44d merge it", "resolution"),
    ("ok, the upload timeout is actually fixed: chunking plus the retry", "resolution"),
    ("good. the logo swap and the favicons, done", "task"),
    ("zero gaps overnight. ok, I'm calling the importer thing fixed", "resolution"),
    # a choice with "then" and its specifics after a colon; a booking ordered
    ("hm, fair. the overnight ferry then: one cabin, the kids on the top bunks", "decision"),
    ("Yes. Book him. I'll send the deposit on Monday.", "decision"),
    ("ok, right, book the Lakeside. Friday the 9th, 40 people", "decision"),
    # closed for good, in so many words; "that's that" after "and"; a list or a
    # programme called the one; a change taken back
    ("no raffle, a bucket at the door. decided, not discussing it again", "decision"),
    ("fine. the spare room gets the desk and the sofa bed goes, and that's that", "decision"),
    ("right. the van's £40 a day. locked in, no more quotes", "decision"),
    ("drop the quiz, keep the ceilidh. that's the programme", "decision"),
    ("the twins, Nan, Uncle Joe and the neighbours. yes, that's our list", "decision"),
    ("nope. we're reverting that, the old header goes back in", "decision"),
    ("£90 a year isn't worth a new contract. we're staying put", "rejection"),
    # an answer taken, with a word between
    ("ah, that makes perfect sense, the cache was holding the old one", "answer"),
    ("ok that's really reassuring. so it's the sensor, not the boiler", "answer"),
    ("right, that's nice and clear, I'll file the form in March", "answer"),
]
NOT_SETTLED = [
    "for real: is this the last change to the plan?",
    "is that the budget, or only what the hall costs?",
    "that's the budget for the kitchen, not for the whole flat, right?",
    # a matter still to take care of, a stop, a question, a habit, an ironic fix
    "it'll be dealt with next sprint, nobody has time now",
    "the complaints need to be dealt with before friday",
    "ok I'm calling it. night",
    "is that what we're doing? nobody told me",
    "that's what we do every spring and it never works",
    "that's fixed \U0001f643 half the rows still vanish",
    "I'll get four marshals on the gate and hire the clock, done",
    # it works where the user tried it; an idiom; how a thing is done
    "hm, I ran it on my own laptop with the flag off and it's perfectly smooth. solved",
    "on my machine the page is instant now, so the slow page is fixed",
    "fine. two swims a week, and burpees are dead to me.",
    # "dead" that makes the next word stronger; money or photos lost, not a bug gone
    "my sister says the campsite is dead quiet in june, so we could just turn up",
    "ok. the €400 deposit is gone as far as the trip budget goes, I'll live",
    "the scanned receipts are gone after the app update, every single one",
    # when it is done, as a plan or a rule
    "7:15 works, the backup job is done by 6:40 every morning",
    "fine, as long as the migration is finished by friday",
    # taken back, or the consequence of a case that may come
    "bad news, the export hangs again on the big account. so much for sorted.",
    "ugh, so much for done, the pdf is blank again",
    "I'll ask Ravi on monday. if he can't, we drop the encore, ten minutes saved, problem solved",
    # a topic named with "then" and asked about: taken up, not chosen
    "the van hire then. never hired one before. what do they check, what do I bring",
    "ok, the seating plan then. who sits next to Gran?",
    "venues then. don't pick one for me, just list them with prices",
    # a rule that nothing is settled yet; a date gone back to, not a choice
    "I'll ask the bank on monday. nothing gets decided till the survey's back",
    "the ledger goes back to March 2019, the old system has the rest",
    "the renewal is done online through the council portal, it takes ten minutes",
    # what a release will show, said ahead of it
    "once it's deployed, the log should show no more timeouts",
    # a time, not a choice; a check still to make
    "nobody's chasing, the invoices can sit till then",
    "tomorrow: check the night runs were cheap and that the old cron is really dead",
    # thanks said as a goodnight
    "perfect, thank you so much. night x",
    # everything called done at once
    "so hall booked, band booked, flowers sorted, cake done. ALL SORTED!! can't believe it",
    "wow. food sorted, drinks sorted, music sorted. everything's confirmed!!",
    # whichever it is: a condition on the choice, not the choice
    "whoever it is has to be fine with early starts, that's the job",
    "whatever flat it is needs a lift, my knee won't do stairs",
    "and honestly: so whichever nursery it is has to take her at 7:30, I start at 8",
    "so £12 then? or is that too much for a village hall",
    "the cafe that closes the square on market days is the one I mean",
    "so what stays, the sofa or the armchair?",
    "it stays. for now. no idea what else to do with it",
    "ok so now I need a fridge. and a hob, the old one has a dodgy burner. the oven stays",
    # a mock conclusion after a setback
    "the plumber can't come till march. well, that's the bathroom sorted then",
    "a letter from next door this afternoon. Oh brilliant, that's that sorted then.",
    "still 502 on every third request. Well. that's fixed then",
    "is the migration really done? the dashboard still says 80%",
    "it's not actually fixed, the export still drops the accents",
    "we're going for a walk, back in an hour",
    "is that what we do: wait for them to call?",
    "the final is on sunday, can we finish before then?",
    "is the final headcount due friday?",
    "the final total is still anyone's guess",
    "what's the menu looking like so far?",
    # "there it is" shows a thing; a fix that works where the user tried it
    "and there it is. the nightly went red again, same test",
    "ok here it is, the full log from last night",
    "but I just ran it in a fresh folder and it works fine for me, must be his cache",
    "weird, it works locally. CI must have a stale image",
    # set aside, asked, mocked, a fix still to try, a recap while stopping
    "that's that, for now. the council says 8 to 10 weeks",
    "who wins if they both bid the same?",
    "we really nailed that one didn't we. texts went out at 7 again",
    "is that the fix you meant, or the one from yesterday?",
    "that is the fix we should try first, then the index",
    "the fixed bed or the rock and roll one, what do you think?",
    "the timeout is gone from the logs? all of them?",
    "ok I think that's it for tonight. layout's sorted, quote's sorted",
    "are we done with that one? there's still the cron",
    "what exactly do they need from us?",
    "that's clear as mud, what does the form want?",
    "is the login flow sorted?",
    "done, but it still fails on safari",
    "done, now what?",
    # an option weighed, a thing not to overlook, a word dropped
    "if we scrap the hire van, who brings the chairs?",
    "don't forget the receipts. the accountant wants them all",
    "ok, forget it. not worth the argument",
    "I always forget passwords.",
    # a plan to book, a booking asked about, a time before a colon
    "I'll book the flights tomorrow, my eyes are going",
    "should we book a table somewhere near the station?",
    "the coach leaves at 7, and then: nothing till Lyon",
    # failure and doubt around the same words
    "decided? not really, I'm still torn between the two",
    "it hung again on the big upload, so not locked in yet",
    "can you make a list of the jobs left? the shopping list can wait.",
    "that's reassuring, but the quote still has no VAT line",
    "is that clear to you? it isn't to me",
    "the heater broke again. I'm never buying that brand again",
    "I'll get proper quotes once I know who it is then",
]
BEFORE_SETTLED = [
    ("assistant", "The two options: the lease on unit 4, or the second unit, 300 more.")
]


@pytest.mark.parametrize(("said", "kind"), SETTLED)
def test_settled_in_the_words_people_use(said: str, kind: str) -> None:
    found = detect(6, "user", said, BEFORE_SETTLED)
    assert found is not None and found.kind == kind


@pytest.mark.parametrize("said", NOT_SETTLED)
def test_not_settled_in_those_words(said: str) -> None:
    assert detect(6, "user", said, BEFORE_SETTLED) is None


def test_a_failure_word_naming_a_part_or_asked_about_after_does_not_undo_it() -> None:
    """Written for this test: "the error handler's done" (the failure word names the part
    done), and "it's fixed, for real this time." followed by a question that names a
    failure ("what was the commit for the timeout again?") still conclude; a failure
    reported after it ("tests done, but the error is back") still vetoes."""
    before = [("assistant", "500 of 500 delivered after the kill; the handler returns codes now.")]
    done = detect(6, "user", "nice, the error handler's done then. open the PR", before)
    assert done is not None and done.kind == "task"
    fixed = detect(
        6,
        "user",
        "ok NOW it's fixed, for real this time. for the write-up: what was the commit for "
        "the timeout error again?",
        before,
    )
    assert fixed is not None and fixed.kind == "resolution"
    assert detect(6, "user", "tests done, but the error is back", before) is None
    assert detect(6, "user", "the run finished. still red, different error", before) is None


def test_the_scan_finds_every_cue_word_where_it_stands() -> None:
    """A turn is first scanned for the cue words of every cue at once: a cue word found
    must not hide another one that starts inside it (" fix" in " fixed"), nor one inside
    it (" option" holds "option", whose cue "not an option" must still be tried)."""
    from ccm.engine.conclusions import _CUES_OF, _SCAN

    for anchor in _CUES_OF:
        hits = set(_SCAN["user"].findall(f"x {anchor} x"))
        assert any(anchor in hit for hit in hits), anchor
        assert all(set(_CUES_OF[anchor]) <= set(_CUES_OF[hit]) for hit in hits if anchor in hit)
    before = [("assistant", "We could self-host the runner, or rent one.")]
    found = detect(6, "user", "self-hosting is not an option for us.", before)
    assert found is not None and found.kind == "rejection"


def test_a_choice_dropped_by_name_is_superseded() -> None:
    """Written for this test: "push it is, FCM" then "yeah scrap FCM. workmanager it is"
    share no word but the one dropped; the later one still reverses the earlier. A
    rejection that names the choice does too; one that names something else does not."""
    earlier = detect(10, "user", "push it is, FCM. joel sends the message from the handler", None)
    turn = "yeah scrap FCM. workmanager it is: every 15 min plus a sync after each save"
    later = detect(20, "user", turn, None)
    assert earlier is not None and later is not None
    assert not supersedes(later, earlier)
    assert supersedes(with_reversals(later, turn), earlier)
    binned = detect(20, "user", "no, bin FCM for now.", None)
    assert binned is not None and binned.kind == "rejection"
    assert supersedes(with_reversals(binned, "no, bin FCM for now."), earlier)
    other = detect(20, "user", "no, bin the polling idea.", None)
    assert other is not None and not supersedes(
        with_reversals(other, "no, bin the polling idea."), earlier
    )


def test_an_option_put_off_is_not_chosen() -> None:
    """Written for this test: options laid out, then "ok, spread is tomorrow's job" or
    "the cache can wait" puts the option off; naming it alone still chooses it."""
    answer = (
        "Two ways to go:\n\n1. **Spread**: widen the stereo field with the delay taps.\n"
        "2. **Cache**: keep the last preset in memory for instant recall.\n"
    )
    before = ("assistant", answer)
    assert (
        detect(6, "user", "ok, spread is tomorrow's job. doing the forum reply now", before) is None
    )
    assert detect(6, "user", "cache can wait", before) is None
    chosen = detect(6, "user", "spread.", before)
    assert chosen is not None and chosen.kind == "decision"


def test_a_stop_after_a_recap_chooses_none_of_its_headings() -> None:
    """Written for this test: the answer recaps what is **Done:** and what is **Open:**;
    "done for now" stops the session, it does not choose the "Done" heading as an option."""
    recap = (
        "Parked. Where things stand:\n"
        "- **Done:** the cache is on its own instance; the retries are capped at 3.\n"
        "- **Open:** alerting, waiting for Dana."
    )
    before = [("user", "park the alerting until Dana answers"), ("assistant", recap)]
    assert detect(40, "user", "cheers. done for now", before) is None
    assert detect(40, "user", "thanks, that's me done for tonight", before) is None


def test_a_plan_said_back_after_a_colon_is_taken() -> None:
    """Written for this test: after an answer that lays out a plan, the user says it back
    in their own words after "so:", "fine:", "ok so:" or "right:", which takes it; a rule
    said that way, a question, and an assistant's own "So:" take nothing."""
    plan = (
        "assistant",
        "I'd service the boiler in March, before the warranty runs out, and leave the "
        "radiators until the autumn when the heating is off anyway.",
    )
    for said in (
        "the warranty thing I'd forgotten. so: boiler serviced in March, radiators in the autumn",
        "fine: two coats of primer, then the sage green, skirting stays white",
        "ok so: Monday the migration, Tuesday the backfill",
        "right: 40 a session, cash or transfer, first one free",
    ):
        found = detect(9, "user", said, plan)
        assert found is not None and found.kind == "decision", said
    taken = detect(9, "user", "fine: two coats of primer, then the sage green", plan)
    assert taken is not None and taken.said == "two coats of primer, then the sage green"
    assert detect(9, "user", "so: don't deploy on fridays any more", plan) is None
    assert detect(9, "user", "so: what do we do about the landlord?", plan) is None
    assert detect(9, "user", "also: the plumber called back", plan) is None
    before = [("user", "where are we with the cache?")]
    assert detect(9, "assistant", "So: the cache is warm and the job restarted.", before) is None


def test_a_name_with_an_ampersand_is_one_word_of_a_choice() -> None:
    """Written for this test: "M&S then, ..." and "B&Q it is" choose what the answer
    compared, as "Waitrose then" would."""
    before = ("assistant", "M&S is closer and open till ten; Waitrose has the better bakery.")
    for said in ("M&S then, the other one's miles away", "ok, B&Q it is. going saturday"):
        found = detect(7, "user", said, before)
        assert found is not None and found.kind == "decision", said


def test_quoted_spans_are_masked_unless_the_text_holds_marks_itself() -> None:
    """A quoted span stands as one private-use mark while cues are read; a text that
    holds such a character itself (an icon font's glyph pasted in) has its spans blanked,
    so that no mark of its own is taken for a span."""
    from ccm.engine import conclusions as found

    spoken, spans = found._masked('merged `fix: retry` and "ship it" after')
    assert spans == ["`fix: retry`", '"ship it"']
    assert "fix: retry" not in spoken and found._unmasked(spoken, spans) == (
        'merged `fix: retry` and "ship it" after'
    )
    spoken, spans = found._masked("the \ue000 icon, `fix: retry` merged")
    assert spans == [] and "fix: retry" not in spoken and "\ue000" in spoken
