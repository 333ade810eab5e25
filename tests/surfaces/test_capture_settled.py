"""Capture stores only the speaker's settled fact (docs/agents.md
rules 4 and 6): a best case, a call still someone's to make, a quotation, a
wish or plan of someone else, or two alternatives for one value is not one;
the claims beside those words still store."""

from __future__ import annotations

import pytest

from services.gateway import capture
from tests.surfaces.capture_checks import decided_as

# Each of these was stored as a plain claim.
NOT_SETTLED = [
    "Remember that the deploy is on Friday, at best.",
    "Remember that the deploy is on Friday at best.",
    "Remember that the release date is Bob's call.",
    "Remember that the venue is the client's call, not ours.",
    "Remember that the release date is up to Bob.",
    "Remember that the deploy date is entirely up to the client.",
    "Remember that the deploy is on Friday or Saturday.",
    "Remember that we ship on Friday, or Monday.",
    "Remember that the offsite is in April or May.",
    "Remember that the call is at 3pm or 4pm.",
    "Remember that the launch is tomorrow or Friday.",
]
# Someone else's words or wish: their word, not the speaker's settled fact.
THEIRS = [
    "Remember that, quoting Bob, the deploy is on Friday.",
    "Remember that the deploy is on Friday, quoting Bob.",
    "Remember that, in the words of Bob, the deploy is on Friday.",
    "Remember that Bob wrote, quote, the deploy is Friday, unquote.",
    "Remember that Bob wants the deploy on Friday.",
    "Remember that Bob wants to deploy on Friday.",
    "Remember that the client wanted us to ship on Friday.",
    "Remember that Bob's plan is to deploy Friday.",
    "Remember that Bob's plan: deploy on Friday.",
    "Remember that Bob plans to deploy Friday.",
    "Remember that Ana intends to move the standup to 10.",
]


@pytest.mark.parametrize("turn", NOT_SETTLED)
def test_a_claim_not_settled_stores_nothing(turn: str) -> None:
    """Rule 4: "at best", "Bob's call", "up to Bob" and two days, months or
    times for one value leave the claim unsettled: a hedge, not second-hand."""
    decided_as(capture.HEDGED, [turn], never_says="second-hand")


@pytest.mark.parametrize("turn", THEIRS)
def test_someone_elses_words_wish_or_plan_stores_nothing(turn: str) -> None:
    """Rule 4: a quotation, and another person's wish or plan, are theirs."""
    decided_as(capture.HEDGED, [turn], says="second-hand")


def test_plain_claims_near_those_words_still_store() -> None:
    decided_as(
        capture.STORE,
        [
            ("Remember that the budget is 10k at most.", "The budget is 10k at most"),
            (
                "Remember that the form is due on Friday at the latest.",
                "The form is due on Friday at the latest",
            ),
            ("Remember that the wiki is up to date.", "The wiki is up to date"),
            ("Remember that the room holds up to 12 people.", "The room holds up to 12 people"),
            (
                "Remember that Bob's call with the client is at 3pm.",
                "Bob's call with the client is at 3pm",
            ),
            ("Remember that members can pay by card or cash.", "Members can pay by card or cash"),
            (
                "Remember that the gym is open on Mondays or Tuesdays.",
                "The gym is open on Mondays or Tuesdays",
            ),
            ("Remember that the quote for the roof is 10k.", "The quote for the roof is 10k"),
            ("Remember that Bob quoted 10k for the roof.", "Bob quoted 10k for the roof"),
            ("Remember that we plan to ship on Friday.", "We plan to ship on Friday"),
            ("Remember that I want the deploy on Friday.", "I want the deploy on Friday"),
            ("Remember that our plan is to deploy Friday.", "Our plan is to deploy Friday"),
            (
                "Remember that the client wants his invoices in PDF.",
                "The client wants his invoices in PDF",
            ),
            (
                "Remember that Bob's plan for the garden is in the shed.",
                "Bob's plan for the garden is in the shed",
            ),
            (
                "Remember that the plan to migrate is in the wiki.",
                "The plan to migrate is in the wiki",
            ),
            ("Remember that Bob planned the sprint.", "Bob planned the sprint"),
        ],
    )


def test_a_stated_fact_near_the_words_of_a_view_still_stores() -> None:
    """Rule 4 reads a view in a verb with a clause or a view's object, not in
    a possessive pronoun before a noun ("her reports" read as Ada's relayer),
    a birth awaited, a guess that happened, or "pending" as an adjective."""
    decided_as(
        capture.STORE,
        [
            (
                "Remember that Ada, our new lead, wants her reports on Monday.",
                "Ada, our new lead, wants her reports on Monday",
            ),
            ("Remember that Bob expects a baby in May.", "Bob expects a baby in May"),
            (
                "Remember that Ana and Bob are expecting twins in June.",
                "Ana and Bob are expecting twins in June",
            ),
            ("Remember that Bob guessed the password.", "Bob guessed the password"),
            ("Remember that there are two pending invoices.", "There are two pending invoices"),
            (
                "Remember that there are two pending Acme invoices.",
                "There are two pending Acme invoices",
            ),
            (
                "Remember that the three pending approvals are in the queue.",
                "The three pending approvals are in the queue",
            ),
        ],
    )


def test_the_views_beside_those_facts_are_still_second_hand() -> None:
    decided_as(
        capture.HEDGED,
        [
            "Remember that Bob expects the deploy on Friday.",
            "Remember that Bob expects a delay on Friday.",
            "Remember that Bob guesses the deploy is on Friday.",
            "Remember that Bob guessed the deploy slipped.",
            "Remember that the deploy is on Friday, Bob guessed.",
            "Remember that the deploy is on Friday, her manager reports.",
        ],
        says="second-hand",
    )
    decided_as(
        capture.HEDGED,
        [
            "Remember that we ship Friday pending Legal.",
            "Remember that the invoices are pending.",
        ],
        never_says="second-hand",
    )


def test_a_pronoun_beside_a_name_has_no_referent() -> None:
    """Rule 6: "Ada and he" are two people, and the turn names only one; who
    'he' is is unclear, so nothing is stored ("Ada and her brother" is hers)."""
    decided_as(
        capture.AMBIGUOUS,
        [
            "Remember that Ada and he share a desk.",
            "Remember that Ada or she will open the office.",
            "Remember that the desk is shared by Ada and him.",
        ],
        says="unclear who",
    )
    decided_as(capture.AMBIGUOUS, ["Remember that he and Ada share a desk."])
    decided_as(
        capture.STORE,
        [
            ("Remember that Ada and her brother share a desk.", "Ada and her brother share a desk"),
            ("Remember that Ada and Bob share a desk.", "Ada and Bob share a desk"),
        ],
    )


# A verb of writing or saying and a bare comma before the claim: each stored.
RELAYED_BY_A_COMMA = [
    "Remember that Bob wrote, the deploy is Friday.",
    "Remember that Bob wrote, deploy is Friday.",
    'Remember that Bob wrote, "the deploy is Friday".',
    "Remember that Bob said, deploy is Friday.",
    "Remember that Bob told us, deploy is Friday.",
    "Remember that Bob texted, the deploy is Friday.",
    "Remember that Bob texted me, the deploy moved to Friday.",
    "Remember that Bob emailed, we ship on Friday.",
    "Remember that Bob e-mailed us, the office is closed Monday.",
    "Remember that Bob posted, the deploy is Friday.",
    "Remember that Bob mentioned, deploy is Friday.",
    "Remember that the client wrote, the invoice is due on the 5th.",
]


@pytest.mark.parametrize("turn", RELAYED_BY_A_COMMA)
def test_a_claim_after_a_verb_of_writing_and_a_comma_is_second_hand(turn: str) -> None:
    """Rule 4: "Bob wrote, the deploy is Friday" relays Bob's words as "Bob
    said the deploy is Friday" does; without quotation marks it was stored."""
    decided_as(capture.HEDGED, [turn], says="second-hand")


def test_a_stated_fact_holding_a_verb_of_writing_still_stores() -> None:
    """What the speaker states about writing, saying or sending stays theirs:
    the verb's object, a list of who did what, a verb with no clause after."""
    decided_as(capture.STORE, [
        ("Remember that I wrote the deploy script.", "I wrote the deploy script"),
        ("Remember that Bob wrote the report on Friday.", "Bob wrote the report on Friday"),
        ("Remember that Ana wrote, Bob reviewed and Cy merged the fix.",
         "Ana wrote, Bob reviewed and Cy merged the fix"),
        ("Remember that Ana wrote, tested and shipped the parser.",
         "Ana wrote, tested and shipped the parser"),
        ("Remember that Bob emailed the report, then called the client.",
         "Bob emailed the report, then called the client"),
        ("Remember that Bob wrote the parser, the tests and the docs.",
         "Bob wrote the parser, the tests and the docs"),
    ])  # fmt: skip


# A verb of saying or writing, a phrase put between it and what was said, and
# the claim: each was stored though its plain form ("Bob wrote that ...") is not.
RELAYED_PAST_AN_ASIDE = [
    "Remember that Bob wrote, in Slack, that the deploy moved to Friday.",
    "Remember that Bob said, on the call, that the deploy moved to Friday.",
    "Remember that Bob mentioned \u2014 in passing \u2014 that the deploy moved to Friday.",
    "Remember that Bob mentioned - in passing - that the deploy moved to Friday.",
    "Remember that Bob wrote (in Slack) that the deploy moved to Friday.",
    "Remember that Bob told me, on the call, that the deploy moved to Friday.",
    "Remember that Bob wrote, in Slack, the deploy is Friday.",
    "Remember that Bob said, when we met, the office is closed Monday.",
    "Remember that Bob wrote in Slack that the deploy moved to Friday.",
    "Remember that Bob said on the call that the deploy moved to Friday.",
    "Remember that Bob said yesterday that the deploy moved to Friday.",
    "Remember that the client confirmed by email last week that the invoice is due.",
    "Remember that Bob heard, at lunch, that the office moves in May.",
]


@pytest.mark.parametrize("turn", RELAYED_PAST_AN_ASIDE)
def test_a_claim_relayed_past_an_aside_is_second_hand(turn: str) -> None:
    """Rule 4: a phrase between the verb and the claim, set apart by commas,
    dashes or brackets, or a plain when or where, relays the claim as the
    plain form does."""
    decided_as(capture.HEDGED, [turn], says="second-hand")


# The same with the phrase between the teller and the verb: each was stored.
RELAYED_PAST_AN_ASIDE_AFTER_THE_TELLER = [
    "Remember that Bob, in Slack, wrote that the deploy moved to Friday.",
    "Remember that Bob, on the call, said the deploy moved to Friday.",
    "Remember that Bob \u2014 on the call \u2014 said that the deploy moved to Friday.",
    "Remember that Bob, our lead, wrote that the deploy moved to Friday.",
    "Remember that Bob (our lead) confirmed the deploy is on Friday.",
    "Remember that the client, in an email, told us the invoice is due on the 5th.",
]


@pytest.mark.parametrize("turn", RELAYED_PAST_AN_ASIDE_AFTER_THE_TELLER)
def test_a_claim_relayed_past_an_aside_after_its_teller_is_second_hand(turn: str) -> None:
    """Rule 4: a phrase set apart between the teller and the verb relays the
    claim as "Bob wrote that ..." does."""
    decided_as(capture.HEDGED, [turn], says="second-hand")


def test_an_aside_before_a_verbs_object_still_stores() -> None:
    """What was written past an aside is still the verb's object, not a claim."""
    decided_as(capture.STORE, [
        ("Remember that Ana wrote, in 2019, the parser that billing uses.",
         "Ana wrote, in 2019, the parser that billing uses"),
        ("Remember that Bob emailed, on Friday, the report to the client.",
         "Bob emailed, on Friday, the report to the client"),
        ("Remember that Ana wrote, with Bob, the tests and the docs.",
         "Ana wrote, with Bob, the tests and the docs"),
        ("Remember that Bob posted in Slack the link to the runbook.",
         "Bob posted in Slack the link to the runbook"),
        ("Remember that Ada, our new lead, owns the billing service.",
         "Ada, our new lead, owns the billing service"),
        ("Remember that I, for one, said that the deploy moved to Friday.",
         "I, for one, said that the deploy moved to Friday"),
    ])  # fmt: skip


def test_another_persons_want_of_a_thing_is_a_preference_stated() -> None:
    """Rule 4: wanting a thing for oneself ("Bob wants a window seat", as
    "Bob wants tea" or "the client wants his invoices") is a preference the
    speaker states, not a wish about a shared matter ("Bob wants the deploy on
    Friday"); it was second-hand ('Bob wants a')."""
    decided_as(capture.STORE, [
        ("Remember that Bob wants a window seat.", "Bob wants a window seat"),
        ("Remember that Ana wants a vegetarian meal at the offsite.",
         "Ana wants a vegetarian meal at the offsite"),
        ("Remember that the client wants an invoice in PDF.",
         "The client wants an invoice in PDF"),
    ])  # fmt: skip
    decided_as(
        capture.HEDGED,
        [
            "Remember that Bob wants the window seat for Ana.",
            "Remember that Bob wants us to book a window seat.",
            "Remember that Bob wants a window seat, Ana said.",
        ],
        says="second-hand",
    )


def test_a_verb_after_its_subjects_aside_is_no_teller_put_after_a_claim() -> None:
    """Rule 4: in "Ada, our lead, confirmed the booking" the verb has its
    subject, Ada, before the aside; it is no "..., says the client" closing a
    claim (each was second-hand, 'confirmed the booking'), and that form stays
    second-hand."""
    decided_as(capture.STORE, [
        ("Remember that Ada, our lead, confirmed the booking.",
         "Ada, our lead, confirmed the booking"),
        ("Remember that Bob, in 2019, wrote the parser.", "Bob, in 2019, wrote the parser"),
        ("Remember that the client, as usual, posted the invoice.",
         "The client, as usual, posted the invoice"),
    ])  # fmt: skip
    decided_as(
        capture.HEDGED,
        [
            "Remember that the deploy is on Friday, said the client.",
            "Remember that the deploy, in the end, moved to Friday, said the client.",
            "Remember that the deploy moved to Friday, as planned, said the client.",
        ],
        says="second-hand",
    )
