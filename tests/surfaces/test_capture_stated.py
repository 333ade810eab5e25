"""Capture of what the speaker states as their own (docs/agents.md): preferences,
standing instructions to the assistant and plans, stored when asked for and
only then; and claims the rules refused though nothing in them was unclear or
second-hand: a person named by a noun before the pronoun for them."""

from __future__ import annotations

from services.gateway import capture
from tests.surfaces.capture_checks import decided_as


def test_a_preference_instruction_or_plan_asked_for_is_stored_as_said() -> None:
    """A standing instruction or a plan the speaker asks to remember is their
    own word: exactly what a person wants kept. It is stored as said, a plan
    as a plan (not as done)."""
    decisions = decided_as(capture.STORE, [
        ("Remember that you should always answer in French.",
         "You should always answer in French"),
        ("Remember that from now on you reply in English.", "From now on you reply in English"),
        ("Remember: always answer in French.", "Always answer in French"),
        ("Remember that I prefer short answers without emoji.",
         "I prefer short answers without emoji"),
        ("Remember that we plan to ship on Friday.", "We plan to ship on Friday"),
        ("Note that we're planning to move the office in June.",
         "We're planning to move the office in June"),
    ])  # fmt: skip
    assert all(decided.kind in ("fact", "note") for decided in decisions), decisions


def test_an_instruction_or_plan_not_asked_for_is_a_no_op() -> None:
    """Without a request to remember, an instruction is for the conversation
    at hand, and a plan is talk: neither is stored."""
    decided_as(capture.NO_REQUEST, [
        "From now on reply in English.",
        "You should always answer in French.",
        "We plan to ship on Friday.",
    ])  # fmt: skip


def test_a_person_named_by_a_noun_before_their_pronoun_is_named() -> None:
    """Rule 6: "the client wants his invoices" names whose invoices: a person
    noun ("the client", "my landlord", "our new hire") before a pronoun that
    stands for a subject or an owner ("she needs", "his invoices") is its
    referent, as a name is. Each was refused as unclear who 'his' is."""
    decided_as(capture.STORE, [
        ("Remember that the client wants his invoices by email.",
         "The client wants his invoices by email"),
        ("Remember that my landlord wants her deposit paid by the 1st.",
         "My landlord wants her deposit paid by the 1st"),
        ("Remember that our new hire starts next week and she needs a laptop.",
         "Our new hire starts next week and she needs a laptop"),
        ("Remember that the contractor sends his hours every Friday.",
         "The contractor sends his hours every Friday"),
        ("Remember that my wife's birthday is in spring and she loves tulips.",
         "My wife's birthday is in spring and she loves tulips"),
    ])  # fmt: skip


def test_a_pronoun_no_person_noun_can_stand_for_is_still_unclear() -> None:
    """An object or a predicate ("called him", "is her", "with him", "gave her
    the keys") is someone other than the subject, and a thing ("the deploy")
    is no one: who is meant still lies outside the turn."""
    decided_as(capture.AMBIGUOUS, [
        "Remember that the client called him about the invoice.",
        "Remember that the new lead for the client is her.",
        "Remember that the client gave her the keys.",
        "Remember that the client's account belongs to her.",
        "Remember that the deploy needs her approval.",
        "Remember that the release waits until he is back.",
        "Remember that the manager's laptop is his now.",
    ])  # fmt: skip


def test_a_sound_heard_is_a_claim_and_a_claim_heard_is_second_hand() -> None:
    """Rule 4: hearing a sound is what the hearer perceived ("we heard the
    alarm at 3am"), not a claim heard from someone; each was refused as
    second-hand. Hearing a claim ("we heard the deploy is on Friday") still is."""
    decided_as(capture.STORE, [
        ("Remember that we heard the alarm at 3am.", "We heard the alarm at 3am"),
        ("Remember that I heard the smoke alarm go off twice last night.",
         "I heard the smoke alarm go off twice last night"),
        ("Remember that we heard a loud bang from the server room.",
         "We heard a loud bang from the server room"),
        ("Remember that Ana heard the fire alarm in the lab.",
         "Ana heard the fire alarm in the lab"),
    ])  # fmt: skip
    decided_as(capture.HEDGED, [
        "Remember that we heard the deploy is on Friday.",
        "Remember that we heard the deploy moved to Friday.",
        "Remember that we heard that the deploy is on Friday.",
        "Remember that we heard from Bob the deploy is on Friday.",
        "Remember that I heard about the reorg from Bob.",
        "Remember that Bob heard the client is unhappy.",
        "Remember that the deploy is on Friday, we heard.",
    ], says="second-hand")  # fmt: skip


def test_an_instrument_reading_is_a_claim() -> None:
    """Rule 4: what an instrument shows ("the thermometer says 20 degrees") is
    a reading anyone can take again, like a written source; each was refused
    as second-hand. What a person says still is second-hand."""
    decided_as(capture.STORE, [
        ("Remember that the thermometer says 20 degrees.", "The thermometer says 20 degrees"),
        ("Remember that the bathroom scale says 82 kg.", "The bathroom scale says 82 kg"),
        ("Remember that the kitchen clock says 9:15 when it is 9:00.",
         "The kitchen clock says 9:15 when it is 9:00"),
        ("Remember that the pressure gauge says 40 psi.", "The pressure gauge says 40 psi"),
        ("Remember that the odometer says 120,000 km.", "The odometer says 120,000 km"),
        ("Remember that the humidity sensor says 40% in the lab.",
         "The humidity sensor says 40% in the lab"),
    ])  # fmt: skip
    decided_as(
        capture.HEDGED, ["Remember that the plumber says the boiler is fine."], says="second-hand"
    )


def test_a_day_a_month_or_an_acronym_is_no_name_for_a_pronoun() -> None:
    """Rule 6: a capitalised word before the pronoun counted as the name it
    stands for, so a weekday, a month or a product's acronym ("on Monday the
    keys are with him", "the API keys are with him") let an unnamed person
    through: each was stored. A role's acronym ("the CEO wants his ...") and
    a name still name them."""
    decided_as(capture.AMBIGUOUS, [
        "Remember that on Monday the keys are with him.",
        "Remember that every Friday the on-call phone stays with her.",
        "Remember that from January the billing service is his.",
        "Remember that in Q3 the budget is his.",
        "Remember that the API keys are with him.",
        "Remember that the VPN token is hers until March.",
    ])  # fmt: skip
    decided_as(capture.STORE, [
        ("Remember that the CEO wants his reports on Monday.",
         "The CEO wants his reports on Monday"),
        ("Remember that our CFO sends her numbers every Friday.",
         "Our CFO sends her numbers every Friday"),
        ("Remember that on Monday Dana hands her keys to facilities.",
         "On Monday Dana hands her keys to facilities"),
    ])  # fmt: skip


def test_another_persons_view_is_second_hand() -> None:
    """Rule 4: someone else's view, take, estimate or guess, and a claim
    credited to them ("..., via Bob", "... per Bob"), is their word, not
    evidence the speaker states; each was stored as a plain claim."""
    decided_as(capture.HEDGED, [
        "Remember that Bob's take is that the deploy is on Friday.",
        "Remember that Bob's view: the deploy is on Friday.",
        "Remember that Bob's opinion is that we ship Friday.",
        "Remember that in Bob's view the deploy is on Friday.",
        "Remember that the client's position is that we pay in May.",
        "Remember that Bob's estimate is two hours.",
        "Remember that the deploy is on Friday, via Bob.",
        "Remember that the deploy is on Friday per Bob.",
        "Remember that the deploy is on Friday (Bob's words).",
        "Remember that Bob figures the deploy is on Friday.",
        "Remember that Bob suspects the deploy is on Friday.",
        "Remember that Bob expects the deploy on Friday.",
        "Remember that Bob feels the deploy should be on Friday.",
        "Remember that Bob suggested we ship Friday.",
        "Remember that Bob is convinced we ship Friday.",
        "Remember that Bob is of the view that we ship Friday.",
    ], says="second-hand")  # fmt: skip
    decided_as(capture.STORE, [
        ("Remember that Bob's view of the harbour is blocked.",
         "Bob's view of the harbour is blocked"),
        ("Remember that the fee is 10 euros per person.", "The fee is 10 euros per person"),
        ("Remember that the deploy is on Friday, per the schedule.",
         "The deploy is on Friday, per the schedule"),
        ("Remember that deploys go out via Jenkins at noon.",
         "Deploys go out via Jenkins at noon"),
        ("Remember that Bob feels the cold in the server room.",
         "Bob feels the cold in the server room"),
        ("Remember that Bob suggested a fix for the login bug.",
         "Bob suggested a fix for the login bug"),
        ("Remember that I'm convinced we ship Friday.", "I'm convinced we ship Friday"),
    ])  # fmt: skip


def test_a_provisional_claim_is_a_hedge_and_an_approximate_amount_a_claim() -> None:
    """Rule 4: a claim said to hold only for now or still pending is not
    settled, as "provisionally" is not: each was stored. An approximate
    amount ("about 12 herons", "roughly 10k") is a plain claim of an
    estimate, stored with its word, so the memory says it is one."""
    decided_as((capture.HEDGED, capture.HYPOTHETICAL), [
        "Remember that the deploy is on Friday for now.",
        "Remember that for now we use Postgres for events.",
        "Remember that the deploy is on Friday, for the time being.",
        "Remember that the deploy is on Friday for the moment.",
        "Remember that the budget is 10k as things stand.",
        "Remember that the deploy is on Friday, in principle.",
        "Remember that the deploy on Friday is pending.",
        "Remember that the budget is still pending.",
        "Remember that the deploy is on Friday pending QA.",
        "Remember that the deploy is on Friday pending the test results.",
        "Remember that the deploy is tentatively on Friday.",
        "Remember that the deploy is provisionally on Friday.",
        "Remember that the deploy is probably on Friday.",
    ])  # fmt: skip
    decided_as(capture.STORE, [
        ("Remember that we saw about 12 herons at the lake.", "We saw about 12 herons at the lake"),
        ("Remember that the budget is roughly 10k.", "The budget is roughly 10k"),
        ("Remember that the trip takes approximately two hours.",
         "The trip takes approximately two hours"),
        ("Remember that the pending invoices are in the shared folder.",
         "The pending invoices are in the shared folder"),
        ("Remember that the office is temporarily closed until May.",
         "The office is temporarily closed until May"),
        ("Remember that the talk is about Kafka.", "The talk is about Kafka"),
    ])  # fmt: skip


def test_a_pronoun_has_a_referent_only_when_one_person_is_named_as_subject() -> None:
    """Rule 6: a name anywhere before a pronoun was taken for whom it means,
    so "Ada's manager called; she approved ..." stored though "she" may be
    the manager. A pronoun stands for someone only when its sentence names one
    person before it, as a subject; otherwise who is meant is unclear."""
    decided_as(capture.AMBIGUOUS, [
        "Remember that Ada's manager called; she approved the budget.",
        "Remember that Ada's manager approved her budget.",
        "Remember that Ada's brother owns the car and she drives it.",
        "Remember that Ada and Eve share a flat and she pays the rent.",
        "Remember that Ada called Eve and she approved the budget.",
        "Remember that I met Ada at the station and she approved the budget.",
        "Remember that the meeting with Ada is at 3 and he will join.",
        "Remember that Ada leads billing. She approved the budget.",
    ])  # fmt: skip
    decided_as(capture.STORE, [
        ("Remember that Ada approved the budget and she signed it.",
         "Ada approved the budget and she signed it"),
        ("Remember that Ada owns the car and her brother drives it.",
         "Ada owns the car and her brother drives it"),
        ("Remember that when Ada arrives she opens the office.",
         "When Ada arrives she opens the office"),
        ("Remember that Ada, our new lead, wants her laptop by Monday.",
         "Ada, our new lead, wants her laptop by Monday"),
        ("Remember that Dana Lee runs billing and she reports to Sam.",
         "Dana Lee runs billing and she reports to Sam"),
    ])  # fmt: skip


def test_a_claim_others_agree_on_or_credited_to_them_is_second_hand() -> None:
    """Rule 4: others agreeing on a claim ("Bob agrees the deploy is ...")
    hold it, and a claim credited to a person at its end ("..., from Bob.",
    "..., Bob's words, not mine") is theirs: each was stored."""
    decided_as(capture.HEDGED, [
        "Remember that Bob agrees the deploy is on Friday.",
        "Remember that Bob and Ana agree that the deploy is on Friday.",
        "Remember that the deploy is on Friday, Bob and Ana agree.",
        "Remember that the deploy is on Friday, from Bob.",
        "Remember that the deploy is on Friday, Bob's words, not mine.",
    ], says="second-hand")  # fmt: skip
    decided_as(capture.STORE, [
        ("Remember that Bob agreed the budget for Q3.", "Bob agreed the budget for Q3"),
        ("Remember that we agreed the deploy is on Friday.", "We agreed the deploy is on Friday"),
        ("Remember that the office closes at 6, from Monday.",
         "The office closes at 6, from Monday"),
    ])  # fmt: skip
