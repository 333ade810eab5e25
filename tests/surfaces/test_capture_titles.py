"""A captured memory's title and body (docs/agents.md, Capture): quotes around
the whole claim are not part of it, a quote inside it is, and either way the
title's quotes come in pairs."""

from __future__ import annotations

import pytest

from services.gateway import capture

# (turn, title, body): each title came out with one mark of a pair.
QUOTED = [
    # A quote opening the claim: part of it, both its marks kept.
    ('Remember that "we ship Friday," read the banner.', '"We ship Friday," read the banner', ""),
    ("Remember that \u201cwe ship Friday,\u201d read the banner.",
     "\u201cWe ship Friday,\u201d read the banner", ""),
    ("Remember that 'we ship Friday,' read the banner.", "'We ship Friday,' read the banner", ""),
    ("Remember that \u2018we ship Friday,\u2019 read the banner.",
     "'We ship Friday,' read the banner", ""),
    ('Remember that "we ship Friday" is the plan.', '"We ship Friday" is the plan', ""),
    ("Remember that \u00abwe ship Friday\u00bb is the motto.",
     "\u00abWe ship Friday\u00bb is the motto", ""),
    # A quote closing the claim, opened inside it.
    ('Remember that the sign says "Exit".', 'The sign says "Exit"', ""),
    ('Remember that the banner read "we ship Friday."', 'The banner read "we ship Friday."', ""),
    # The whole claim quoted: the pair is dropped, whichever side the stop is on.
    ('Remember that "we ship Friday".', "We ship Friday", ""),
    ('Remember: "the deploy window is Tuesday."', "The deploy window is Tuesday", ""),
    ("Remember that \u201cthe deploy window is Tuesday\u201d", "The deploy window is Tuesday", ""),
    ('Remember that "the banner read \'we ship Friday\' to everyone."',
     "The banner read 'we ship Friday' to everyone", ""),
    # A mark with no partner is not part of the claim; an inch mark or an
    # apostrophe is not a quote.
    ('Remember that we ship Friday".', "We ship Friday", ""),
    ('Remember that "we ship Friday.', "We ship Friday", ""),
    ('Remember that the 12" pizza costs ten euros.', 'The 12" pizza costs ten euros', ""),
    ("Remember that the students' lounge is on floor 2.",
     "The students' lounge is on floor 2", ""),
    ("Remember that 'Bob's car' is the red one.", "'Bob's car' is the red one", ""),
    # A sentence ending inside a quote does not end the title there.
    ('Remember that "we ship Friday. No slips," read the banner. It stays up.',
     '"We ship Friday. No slips," read the banner',
     '"We ship Friday. No slips," read the banner. It stays up.'),
]  # fmt: skip


@pytest.mark.parametrize(("turn", "title", "body"), QUOTED)
def test_quotes_in_a_title_come_in_pairs(turn: str, title: str, body: str) -> None:
    decided = capture.decide(turn)
    assert (decided.store, decided.title, decided.body) == (True, title, body), decided


def test_a_title_cut_inside_a_quote_closes_it() -> None:
    """A claim longer than a title, cut inside its quote: the title closes the
    quote after the cut."""
    turn = (
        'Remember that the plan reads "the billing migration moves every customer in the '
        'European region to the new invoicing system by the end of March" since May.'
    )
    decided = capture.decide(turn)
    assert decided.store
    assert len(decided.title) <= capture.MAX_TITLE_CHARS, decided.title
    assert decided.title.startswith('The plan reads "the billing migration')
    assert decided.title.endswith('\u2026"'), decided.title


# (turn, title): an apostrophe standing for left-out letters or a century at
# the claim's start has no partner and is no quote; each was dropped ("Tis",
# "90s"). A stray opening quote still is.
ELIDED = [
    ("Remember that 'tis the season for code freezes.", "'Tis the season for code freezes"),
    ("Remember that 'twas Ana who wrote the runbook.", "'Twas Ana who wrote the runbook"),
    ("Remember that '90s hardware runs the billing box.", "'90s hardware runs the billing box"),
    ("Remember that \u201999 was the first release year.", "'99 was the first release year"),
    ("Remember: 'cause of the audit, deploys stop on Friday.",
     "'Cause of the audit, deploys stop on Friday"),
    ("Remember that 'tis Bob's 'big day' on Friday.", "'Tis Bob's 'big day' on Friday"),
    ("Remember that '24 roadmap' is the final name.", "'24 roadmap' is the final name"),
    ("Remember that 'we ship Friday.", "We ship Friday"),
]  # fmt: skip


@pytest.mark.parametrize(("turn", "title"), ELIDED)
def test_an_elision_apostrophe_opening_the_claim_is_kept(turn: str, title: str) -> None:
    decided = capture.decide(turn)
    assert (decided.store, decided.title) == (True, title), decided


# (turn, title): brackets around the whole claim are not part of it, as a pair
# of quotes is not; each was kept, its first letter left small. Brackets
# inside the claim are its own.
BRACKETED = [
    ("Remember that (the deploy is Friday).", "The deploy is Friday"),
    ("Remember that [the deploy is Friday]", "The deploy is Friday"),
    ("Note: {the deploy is Friday.}", "The deploy is Friday"),
    ('Remember that ("the deploy is Friday").', "The deploy is Friday"),
    ("Remember that (the deploy (and QA) is Friday).", "The deploy (and QA) is Friday"),
    ("Remember that (the deploy) is on Friday.", "(the deploy) is on Friday"),
    ("Remember that (the deploy) and (the freeze) are Friday.",
     "(the deploy) and (the freeze) are Friday"),
    ("Remember that the deploy is Friday (not Thursday).", "The deploy is Friday (not Thursday)"),
]  # fmt: skip


@pytest.mark.parametrize(("turn", "title"), BRACKETED)
def test_brackets_around_the_whole_claim_are_dropped(turn: str, title: str) -> None:
    decided = capture.decide(turn)
    assert (decided.store, decided.title) == (True, title), decided


# (turn, title): a stop ending an abbreviation ("Dr.", "e.g.", "vs.") or an
# initial does not end the title's sentence; each title was cut there ("Dr", "e.g").
ABBREVIATED = [
    ("Remember that Dr. Smith owns the billing service.", "Dr. Smith owns the billing service"),
    ("Remember that e.g. staging resets nightly.", "e.g. staging resets nightly"),
    ("Remember that the standup is at 9 a.m. on Mondays.", "The standup is at 9 a.m. on Mondays"),
    ("Remember that Postgres vs. MySQL was settled in March. We chose Postgres.",
     "Postgres vs. MySQL was settled in March"),
    ("Remember that the API lives at api.example.com. It is behind SSO.",
     "The API lives at api.example.com"),
    ("Remember that v2.1 ships on Friday. QA signs off Thursday.", "v2.1 ships on Friday"),
    # A name's initial and the short forms of companies, months and numbered
    # things: each title was cut there ("J", "Smith Inc", "Invoice no").
    ("Remember that J. Smith owns the billing service. It moved last year.",
     "J. Smith owns the billing service"),
    ("Remember that A. B. Jones owns billing. It moved.", "A. B. Jones owns billing"),
    ("Remember that Dr. J. Smith owns billing. It moved.", "Dr. J. Smith owns billing"),
    ("Remember that billing is owned by J. R. R. Tolkien. Tolkien left.",
     "Billing is owned by J. R. R. Tolkien"),
    ("Remember that Smith Inc. owns billing. It moved.", "Smith Inc. owns billing"),
    ("Remember that Acme Corp. and Beta Ltd. merged. Nobody objected.",
     "Acme Corp. and Beta Ltd. merged"),
    ("Remember that invoice no. 42 is paid. Bob checked.", "Invoice no. 42 is paid"),
    ("Remember that the rule is on p. 12 of the handbook. Read it.",
     "The rule is on p. 12 of the handbook"),
    ("Remember that the audit is due Jan. 5 every year. Plan ahead.",
     "The audit is due Jan. 5 every year"),
    # A capital letter that ends a sentence still ends the title.
    ("Remember that we chose plan A. It is cheaper.", "We chose plan A"),
    ("Remember that the server is in rack B. The key is at reception.",
     "The server is in rack B"),
    ("Remember that the answer was no. We move on.", "The answer was no"),
]  # fmt: skip


@pytest.mark.parametrize(("turn", "title"), ABBREVIATED)
def test_an_abbreviation_does_not_end_the_title(turn: str, title: str) -> None:
    decided = capture.decide(turn)
    assert (decided.store, decided.title) == (True, title), decided


# (turn, title): a space before the closing stop is not part of the claim;
# each kept the quotes or brackets around it and a body of its own ("We ship
# Friday .") beside a title that said the same.
SPACED_STOP = [
    ('Remember that "we ship Friday" .', "We ship Friday"),
    ("Remember that (the deploy is Friday) !", "The deploy is Friday"),
    ('Remember that "we ship Friday" ...', "We ship Friday"),
    ("Remember that we ship Friday .", "We ship Friday"),
]


@pytest.mark.parametrize(("turn", "title"), SPACED_STOP)
def test_a_space_before_the_closing_stop_is_not_part_of_the_claim(turn: str, title: str) -> None:
    decided = capture.decide(turn)
    assert (decided.store, decided.title, decided.body) == (True, title, ""), decided
