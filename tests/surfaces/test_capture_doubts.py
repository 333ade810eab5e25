"""Capture's doubts (docs/agents.md, rules 2 to 5) on turns in words the
labelled turns do not use: each of these was stored as a plain claim."""

from __future__ import annotations

import pytest

from services.gateway import capture
from tests.surfaces.capture_checks import decided_as

# A claim its speaker doubts, hopes, guesses, holds as an opinion or has heard
# second-hand, or one that holds only under a condition.
HEDGED = [
    "Remember that we ship Friday, I'd say.",
    "Remember that we ship Friday, as far as I know.",
    "Remember that we ship Friday, AFAIK.",
    "Remember that we ship Friday, I'm fairly sure.",
    "Remember that we ship Friday, pretty sure.",
    "Remember that we ship Friday, I'm almost certain.",
    "Remember that we ship Friday, I suspect.",
    "Remember that we ship Friday, I hope.",
    "Remember that we ship Friday, I'm guessing.",
    "Remember that we ship Friday, I expect.",
    "Remember that we ship Friday IMO.",
    "Remember that we ship Friday, in my opinion.",
    "Remember that we ship Friday, fingers crossed.",
    "Remember that we ship Friday \U0001f91e",
    "Remember that we ship Friday \U0001f914",
    "Remember that we ship Friday, dunno.",
    "Remember that we ship Friday, idk.",
    "Remember that we ship Friday, prolly.",
    "Remember that we ship Friday, who knows.",
    "Remember that we ship Friday, no idea.",
    "Remember that we ship Friday, last I heard.",
    "Remember that we ship Friday, I was told.",
    "Remember that we ship Friday, as I understand it.",
    "Remember that we ship Friday, from what I gather.",
    "Remember that we ship Friday, don't hold me to it.",
    "Remember that we ship Friday, subject to change.",
    "Remember that we ship Friday, pending confirmation.",
    "Remember that we ship Friday, needs confirming.",
    "Remember that we ship Friday-ish.",
    "Remember that we ship Friday, give or take.",
    "Remember that we ship Friday, or thereabouts.",
    # variants of the above in other words: each was stored
    "Remember that we ship Friday, as far as I'm aware.",
    "Remember that we ship Friday, to my knowledge.",
    "Remember that we ship Friday, to the best of my knowledge.",
    "Remember that we ship Friday, last time I checked.",
    "Remember that we ship Friday, I don't know.",
    "Remember that we ship Friday, or at least it was.",
]
CONDITIONAL = [
    "Remember that we ship Friday provided QA signs off.",
    "Remember that we ship Friday as long as QA signs off.",
    "Remember that we ship Friday, depending on QA.",
    "Remember that we ship Friday, pending QA sign-off.",
    "Remember that we ship Friday on condition that QA signs off.",
]


@pytest.mark.parametrize("turn", HEDGED + CONDITIONAL)
def test_a_hedged_or_conditional_claim_stores_nothing(turn: str) -> None:
    """Rules 3 and 4: a claim its speaker does not plainly state, in any of
    the usual words for it, is a no-op whose reason names the words."""
    decided_as((capture.HEDGED, capture.HYPOTHETICAL), [turn])


def test_plain_claims_near_the_hedges_still_store() -> None:
    decided_as(capture.STORE, [
        ("Remember that the budget is about 10k.", "The budget is about 10k"),
        ("Remember that I understand Portuguese.", "I understand Portuguese"),
        ("Remember that I don't know Portuguese.", "I don't know Portuguese"),
        ("Remember that the knowledge base is in the wiki.", "The knowledge base is in the wiki"),
        ("Remember that Bob has no idea about the surprise party.",
         "Bob has no idea about the surprise party"),
        ("Remember that members can change their display name.",
         "Members can change their display name"),
        ("Remember that the Ishikawa diagram is in the wiki.",
         "The Ishikawa diagram is in the wiki"),
    ])  # fmt: skip


# A claim not settled yet, or a likelihood or a wish rather than a fact: each
# was stored as a plain claim, and "..., to be announced" was called
# second-hand (an announcement still to come is no one's word yet).
UNSETTLED = [
    "Remember that the release date is not decided yet.",
    "Remember that the release date hasn't been decided.",
    "Remember that the venue is still undecided.",
    "Remember that the venue is yet to be decided.",
    "Remember that the venue is under discussion.",
    "Remember that the budget is under consideration.",
    "Remember that the venue is TBA.",
    "Remember that the venue is T.B.D.",
    "Remember that the venue is Hall B, to be announced.",
    "Remember that the venue is to be determined.",
    "Remember that we ship Friday, we'll see.",
    "Remember that we ship Friday, time will tell.",
    "Remember that whether we ship Friday remains to be seen.",
    "Remember that chances are we ship Friday.",
    "Remember that odds are we ship Friday.",
    "Remember that in all likelihood we ship Friday.",
    "Remember that in all probability we ship Friday.",
    "Remember that ideally we ship Friday.",
    "Remember that we ship Friday, ideally.",
    "Remember that in an ideal world we ship Friday.",
    # tentative or hoped for: each was stored too
    "Remember that the deploy is supposed to be on Friday.",
    "Remember that the deploy is expected to land on Friday.",
    "Remember that the deploy is provisionally on Friday.",
    "Remember that the deploy is pencilled in for Friday.",
    "Remember that the deploy is penciled in for Friday.",
    "Remember that the deploy is on Friday, all being well.",
    "Remember that the deploy is on Friday, with any luck.",
    "Remember that the deploy is on Friday, at least that's the plan.",
]


@pytest.mark.parametrize("turn", UNSETTLED)
def test_a_claim_not_settled_yet_or_only_likely_stores_nothing(turn: str) -> None:
    """Rule 4: "not decided yet", "under discussion", "TBA", "we'll see",
    "chances are", "ideally" are hedges: a no-op whose reason names the words,
    never calling an announcement still to come second-hand."""
    decided_as((capture.HEDGED, capture.HYPOTHETICAL), [turn], never_says="second-hand")


def test_plain_claims_near_the_unsettled_words_still_store() -> None:
    decided_as(capture.STORE, [
        ("Remember that we'll see Bob in Lisbon on Friday.", "We'll see Bob in Lisbon on Friday"),
        ("Remember that the office is ideally located near the station.",
         "The office is ideally located near the station"),
        ("Remember that the board decided the budget on Monday.",
         "The board decided the budget on Monday"),
        ("Remember that the discussion is on Friday at 3pm.", "The discussion is on Friday at 3pm"),
        ("Remember that the chances of rain are tracked in the ops sheet.",
         "The chances of rain are tracked in the ops sheet"),
        ("Remember that the plan is in the wiki, at least the draft.",
         "The plan is in the wiki, at least the draft"),
        ("Remember that the pencils are in the top drawer.", "The pencils are in the top drawer"),
    ])  # fmt: skip


# What the speaker, alone or with others, believes, guesses or supposes: a
# belief is not a stated fact. Each was stored ("We think the deploy is on
# Friday"), or, "I suppose", called hypothetical.
BELIEVED = [
    "Remember that we think the deploy is on Friday.",
    "Remember that we believe the deploy is on Friday.",
    "Remember that we thought the deploy was on Friday.",
    "Remember that we guess the deploy is on Friday.",
    "Remember that we suppose the deploy is on Friday.",
    "Remember that we assume the deploy is on Friday.",
    "Remember that we reckon the deploy is on Friday.",
    "Remember that we suspect the deploy is on Friday.",
    "Remember that we feel that the deploy should be on Friday.",
    "Remember that we're guessing the deploy is on Friday.",
    "Remember that we'd say the deploy is on Friday.",
    "Remember that in our opinion the deploy should be on Friday.",
    "Remember that our hunch is that the deploy is on Friday.",
    "Remember that I guess the deploy is on Friday.",
    "Remember that I suppose the deploy is on Friday.",
    "I suppose we use Kafka for events, remember that.",
]


@pytest.mark.parametrize("turn", BELIEVED)
def test_a_belief_stores_nothing_as_a_hedge(turn: str) -> None:
    """Rule 4: "we think", "we believe", "I guess", "I suppose" say what the
    speaker holds likely, not what is so: hedged, whoever holds it."""
    decided_as(capture.HEDGED, [turn])


def test_suppose_opening_an_imagined_case_is_still_hypothetical() -> None:
    decided_as(capture.HYPOTHETICAL, [
        "Suppose the client says no, note that we fall back to plan B.",
        "Remember that, supposing the client says no, we fall back to plan B.",
        "Let's suppose the client says no: note that we fall back to plan B.",
    ])  # fmt: skip


# The same doubts in other scripts' marks or in letters a keyboard, a font or a
# copy from the web spells differently: each was stored as a plain claim.
OTHER_SPELLINGS = [
    ("Remember that we ship on Friday\uff1f", capture.QUESTION),  # fullwidth '?'
    ("Remember that we ship on Friday\u061f", capture.QUESTION),  # Arabic
    ("Remember that \u00bfwe ship on Friday", capture.QUESTION),  # Spanish, opening
    ("Remember that we ship on Friday \u2753", capture.QUESTION),  # the emoji
    ("Remember that we ship on Friday\u2049", capture.QUESTION),  # '!?'
    ("Remember that we ship on Friday, \uff4d\uff41\uff59\uff42\uff45.", capture.HEDGED),
    ("Remember that we ship on Friday, \U0001d429\U0001d42b\U0001d428\U0001d41b\U0001d41a"
     "\U0001d41b\U0001d425\U0001d432.", capture.HEDGED),  # mathematical bold
    ("Remember that we ship on Friday, may\u200bbe.", capture.HEDGED),  # zero-width space
    ("Remember that we ship on Friday, prob\u00adably.", capture.HEDGED),  # soft hyphen
    ("Remember that we ship Friday \uff49\uff46 QA signs off.", capture.HYPOTHETICAL),
    ("Remember that the deadline is Friday. \uff2e\uff4f, Monday.", capture.NO_REQUEST),
]  # fmt: skip


@pytest.mark.parametrize(("turn", "category"), OTHER_SPELLINGS)
def test_doubts_in_other_marks_and_letter_forms_store_nothing(turn: str, category: str) -> None:
    """Rules 2 to 5 read a turn's compatibility forms as their plain letters
    (fullwidth, mathematical, ligatures), ignore invisible marks inside words
    and know the question marks of other scripts."""
    decided_as(category, [turn])


def test_a_claim_in_other_letter_forms_is_stored_as_written() -> None:
    decided_as(capture.STORE, [
        ("Remember that the caf\u00e9 opens at 8 on weekdays.",
         "The caf\u00e9 opens at 8 on weekdays"),
        ("Remember that the \uff32\uff06\uff24 budget is 10k this year.",
         "The \uff32\uff06\uff24 budget is 10k this year"),
        ("Remember that the r\u00e9sum\u00e9 template is in the \ufb01nance folder.",
         "The r\u00e9sum\u00e9 template is in the \ufb01nance folder"),
    ])  # fmt: skip


# A claim the turn itself corrects or updates in a later clause, in words the
# rule did not know: each stored its first version (titled "We ship Friday").
CORRECTED = [
    "Remember that we ship Friday. Update: we ship Monday.",
    "Remember that we ship Friday. Edit: Monday.",
    "Remember that we ship Friday. EDIT - it's Monday.",
    "Remember that we ship Friday. Make that Monday.",
    "Remember that we ship Friday, make it Monday.",
    "Remember that we ship Friday. Sorry, Monday.",
    "Remember that we ship Friday. Monday, sorry.",
    "Remember that we ship Friday. Oh wait, Monday.",
    "Remember that we ship Friday. Hold on, Monday.",
    "Remember that we ship Friday. Instead, Monday.",
    "Remember that we ship Friday. Wrong, Monday.",
    "Remember that we ship Friday. Typo: Monday.",
    "Remember that we ship Friday. Changed to Monday.",
    "Remember that we ship Friday. Now it's Monday.",
    "Remember that we ship Friday. Let me rephrase: Monday.",
    "Remember that we ship Friday. *Monday",
    "Remember that we ship Friday. s/Friday/Monday/",
]


@pytest.mark.parametrize("turn", CORRECTED)
def test_a_claim_the_turn_corrects_or_updates_stores_nothing(turn: str) -> None:
    """Rule 5: a claim the turn corrects or gives a second version of in a
    later clause is a no-op: which version holds is not plainly said."""
    decided_as(capture.NO_REQUEST, [turn])


def test_later_clauses_that_only_go_on_still_store() -> None:
    decided_as(capture.STORE, [
        ("Remember that we ship Monday, instead of Friday.", "We ship Monday, instead of Friday"),
        ("Remember that we ship Friday, sorry for the short notice.",
         "We ship Friday, sorry for the short notice"),
        ("Remember that we ship Friday. Update the changelog before it.", "We ship Friday"),
        ("Remember that the build waits for QA, then ships.",
         "The build waits for QA, then ships"),
        ("Remember that the deploy is on *Friday*.", "The deploy is on *Friday*"),
    ])  # fmt: skip


# A claim someone else made, relayed by the speaker, in several tenses, word
# orders and with quotes: it is the other person's word, not a claim the
# speaker states; each was stored as a plain fact ("Alice said the deploy is
# on Friday").
REPORTED = [
    "Remember that Alice said the deploy is on Friday.",
    "Remember that Alice says the deploy is on Friday.",
    "Remember that Alice has said that the deploy is on Friday.",
    "Remember that Bob told me that the deploy is on Friday.",
    "Remember that Bob told the client the deploy is on Friday.",
    "Remember that Bob tells everyone the deploy is on Friday.",
    "Remember that the vendor claims the deploy is on Friday.",
    "Note that Ana mentioned the office closes at 6.",
    "Record that Bob reported that the build is green.",
    "Remember that Dana confirmed that the contract renews in May.",
    "Remember that the CFO announced that bonuses are paid in March.",
    "Remember that Bob insists the deploy is on Friday.",
    "Remember that Bob thinks the deploy is on Friday.",
    "Remember that people say the deploy is on Friday.",
    "Remember that they say the deploy is on Friday.",
    "Remember that Bob let us know that the deploy is on Friday.",
    "Remember that Bob told us to deploy on Friday.",
    "Remember that according to Bob, the deploy is on Friday.",
    "Remember that the deploy is on Friday, according to Bob.",
    "Remember that per Bob the deploy is on Friday.",
    "Remember that, as Bob put it, the deploy is on Friday.",
    "Remember that the deploy is on Friday, Alice said.",
    "Remember that the deploy is on Friday, says Bob.",
    "Remember that the deploy is on Friday, as Bob said at standup.",
    "Remember that the deploy is on Friday. Bob said so.",
    'Remember: "the deploy is on Friday," Alice said.',
    "Remember that \u201cthe deploy is on Friday,\u201d said Alice.",
    'Remember that Alice said: "the deploy is on Friday."',
    "Remember that we were told the deploy is on Friday.",
    "Remember that I've been told the deploy is on Friday.",
    "Remember that I heard from Bob that the deploy is on Friday.",
    "Remember that reportedly the deploy is on Friday.",
    "Remember that word is the deploy is on Friday.",
    "Alice said the deploy is on Friday, please remember that.",
]


@pytest.mark.parametrize("turn", REPORTED)
def test_a_claim_relayed_from_someone_else_stores_nothing(turn: str) -> None:
    """Rule 4: a claim the speaker relays from someone else ("Alice said",
    "according to Bob", "..., says Bob") is second-hand, not one the
    speaker states: a no-op whose reason names the words."""
    decided_as(capture.HEDGED, [turn], says="second-hand")


# The same relayed claims without "that": a verb of confirming, reporting or
# writing followed by a clause of its own (a subject and its verb) relays it as
# surely as "Bob confirmed that ..." does. Each was stored ("Bob confirmed the
# deploy is on Friday").
REPORTED_WITHOUT_THAT = [
    "Remember that Bob confirmed the deploy is on Friday.",
    "Remember that Bob confirmed the deploy will be on Friday.",
    "Remember that Bob has confirmed the dates of the offsite are fixed.",
    "Remember that Bob confirmed we ship on Friday.",
    "Remember that Dana reported the build is green.",
    "Remember that the CFO announced bonuses are paid in March.",
    "Remember that Bob admitted the backup failed.",
    "Remember that Ana wrote the API is frozen until May.",
    "Remember that Ana posted the office is closed on Monday.",
    "Remember that Bob emailed us the deploy is on Friday.",
    "Remember that Bob texted me the deploy moved to Friday.",
    "Remember that Bob warned the deploy can't wait.",
    "Remember that Bob promised the fix will ship on Friday.",
]


@pytest.mark.parametrize("turn", REPORTED_WITHOUT_THAT)
def test_a_claim_relayed_without_that_is_second_hand_too(turn: str) -> None:
    """Rule 4: "Bob confirmed the deploy is on Friday" relays Bob's claim as
    "Bob confirmed that the deploy is on Friday" does: second-hand."""
    decided_as(capture.HEDGED, [turn], says="second-hand")


def test_a_thing_confirmed_or_written_is_still_a_claim() -> None:
    decided_as(capture.STORE, [
        ("Remember that Bob confirmed the booking for Friday.",
         "Bob confirmed the booking for Friday"),
        ("Remember that Bob confirmed it yesterday.", "Bob confirmed it yesterday"),
        ("Remember that Ana wrote the parser used by billing.",
         "Ana wrote the parser used by billing"),
        ("Remember that Ana posted the shared drive link in Slack.",
         "Ana posted the shared drive link in Slack"),
        ("Remember that Ana posted the photos from the offsite.",
         "Ana posted the photos from the offsite"),
        ("Remember that Bob emailed us the signed contract.", "Bob emailed us the signed contract"),
        ("Remember that I confirmed the deploy is on Friday.",
         "I confirmed the deploy is on Friday"),
    ])  # fmt: skip


def test_the_speakers_own_words_and_written_sources_still_store() -> None:
    decided_as(capture.STORE, [
        ("Remember that I told Bob the deploy is on Friday.",
         "I told Bob the deploy is on Friday"),
        ("Remember that we said the deploy is on Friday.", "We said the deploy is on Friday"),
        ("Remember that the contract says payment is due in 30 days.",
         "The contract says payment is due in 30 days"),
        ('Remember that the sign says "Exit".', 'The sign says "Exit"'),
        ("Remember that according to the schedule, the deploy is on Friday.",
         "According to the schedule, the deploy is on Friday"),
        ("Remember that Ana said no to the offer.", "Ana said no to the offer"),
        ("Remember that Ana tells great jokes.", "Ana tells great jokes"),
        ("Remember that Ana wrote the billing service in Go.",
         "Ana wrote the billing service in Go"),
        ("Remember that the API allows 600 requests per minute.",
         "The API allows 600 requests per minute"),
        ("Remember that Bob told the client about the delay.",
         "Bob told the client about the delay"),
    ])  # fmt: skip


# A claim ending on a question tag without a question mark asks the listener
# to confirm it: the speaker does not state it plainly. Each was stored.
TAGGED = [
    "Remember that the deploy is on Friday, right",
    "Remember that the deploy is on Friday, right.",
    "Remember that the deploy is on Friday, isn't it.",
    "Remember that we ship on Friday, don't we",
    "Remember that Bob owns billing, doesn't he.",
    "Remember that the keys were rotated, weren't they",
    "Remember that we don't ship on Friday, do we.",
    "Remember that the deploy is on Friday, correct.",
    "Remember that the deploy is on Friday, is that right.",
    "Remember that the deploy is on Friday, am I right",
    "Remember that the deploy is on Friday \u2014 innit.",
    "Remember that the deploy is on Friday, eh.",
    "The deploy is on Friday, right, remember that.",
]


@pytest.mark.parametrize("turn", TAGGED)
def test_a_claim_ending_on_a_question_tag_stores_nothing(turn: str) -> None:
    """Rule 2: a question tag at the end ("..., right", "..., isn't it") makes
    the turn a question, with or without its question mark."""
    decided_as(capture.QUESTION, [turn])


def test_the_same_words_inside_a_claim_still_store() -> None:
    decided_as(capture.STORE, [
        ("Remember that the exit is on the right.", "The exit is on the right"),
        ("Remember that the lift is on the left, right next to the stairs.",
         "The lift is on the left, right next to the stairs"),
        ("Remember that the invoice total is correct.", "The invoice total is correct"),
        ("Remember that Bob's answer was right, as usual.", "Bob's answer was right, as usual"),
    ])  # fmt: skip


# A claim naming a person only by "he", "she", "him", "her", "his" or "hers",
# with no one named before it: who is meant lies outside the turn. Each was
# stored ("The new lead for billing is her").
UNNAMED = [
    "Remember that the new lead for billing is her.",
    "Remember that the keys are with him.",
    "Remember that the billing service is his now.",
    "Remember that the deploy waits until she is back.",
    "Record that the client called him about the invoice.",
    "Note that the spare laptop is hers.",
    "Remember that the on-call phone stays with her this week.",
]


@pytest.mark.parametrize("turn", UNNAMED)
def test_a_claim_about_someone_it_does_not_name_stores_nothing(turn: str) -> None:
    """Rule 6: a person the claim points to by a pronoun alone, with no name
    for it in the turn, is ambiguous, wherever the pronoun stands."""
    decided_as(capture.AMBIGUOUS, [turn])


def test_a_pronoun_after_the_name_it_stands_for_still_stores() -> None:
    decided_as(capture.STORE, [
        ("Remember that my manager is Dana Lee and she prefers Slack.",
         "My manager is Dana Lee and she prefers Slack"),
        ("Remember that Ana moved to Lisbon, where she works remotely.",
         "Ana moved to Lisbon, where she works remotely"),
        ("Remember that the CEO wants his reports on Monday.",
         "The CEO wants his reports on Monday"),
        ("Remember that Cy is allergic to peanuts and his EpiPen is in the first-aid box.",
         "Cy is allergic to peanuts and his EpiPen is in the first-aid box"),
        ("Remember that the HERE maps licence renews in May.",
         "The HERE maps licence renews in May"),
    ])  # fmt: skip
