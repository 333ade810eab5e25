"""Capture: the rules on labelled turns (precision must be 1.0: no no-op turn
is ever stored), and the Capture RPC against the real stack (origin told,
audience the speaker unless the turn names the team, no-ops change nothing,
a replayed turn stores once)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import grpc
import pytest

from recallatron.v1 import common_pb2 as cpb
from recallatron_devkit.stack import Stack
from services.gateway import capture
from tests import dbutil
from tests.conftest import Team
from tests.surfaces.capture_turns import NO_OPS, STORE

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
ORIGIN_TOLD = 1
PURPOSE_AUDIT = 4
KIND = {"note": 1, "fact": 2, "decision": 3}


def test_a_team_phrase_inside_the_claim_is_not_an_audience() -> None:
    """Only a team phrase set apart from the claim, or in the request, shares
    it: "mandatory for everyone" is what the claim says (it was cut off the
    title and the memory shared with the workspace)."""
    inside = capture.decide("Remember that the new VPN is mandatory for everyone.")
    assert inside.store and inside.audience == capture.SPEAKER
    assert inside.title == "The new VPN is mandatory for everyone"
    apart = capture.decide("Remember that the office closes at 5pm on Friday, for everyone.")
    assert apart.store and apart.audience == capture.WORKSPACE
    assert apart.title == "The office closes at 5pm on Friday"
    # "Don't forget" asks to store; it is not "forget it", a retraction.
    kept = capture.decide("Please don't forget that the badge readers reset at midnight.")
    assert kept.store and kept.title == "The badge readers reset at midnight"


def test_marks_before_the_claim_are_not_its_title() -> None:
    """Dots or dashes between the request and the claim are not part of it (the
    title was empty, the body the marks); a word's own mark stays (".NET")."""
    dots = capture.decide("Remember that... the build server moved to rack B4.")
    assert dots.store and dots.title == "The build server moved to rack B4" and not dots.body
    # A reminder behind marks is still a reminder, not a claim to store.
    assert not capture.decide("Remember . . . to call Bob tomorrow morning").store
    net = capture.decide("Note that .NET 8 is our runtime for all services.")
    assert net.store and net.title == ".NET 8 is our runtime for all services"


def test_labelled_turns_precision_is_one() -> None:
    counts: dict[str, dict[str, int]] = {}
    stored = [capture.decide(turn) for turn, _, _ in STORE]
    counts["store"] = {
        "turns": len(STORE),
        "stored": sum(d.store for d in stored),
        "no_op": sum(not d.store for d in stored),
    }
    for (turn, kind, audience), d in zip(STORE, stored, strict=True):
        if d.store:
            assert (d.kind, d.audience) == (kind, audience), turn
            assert d.title and len(d.title) <= capture.MAX_TITLE_CHARS + 1
    false_positives = []
    for label, turns in NO_OPS.items():
        decisions = [capture.decide(t) for t in turns]
        false_positives += [t for t, d in zip(turns, decisions, strict=True) if d.store]
        counts[label] = {
            "turns": len(turns),
            "stored": sum(d.store for d in decisions),
            "no_op": sum(not d.store for d in decisions),
            "same_reason_class": sum(d.category == label for d in decisions),
        }
        assert all(d.reason for d in decisions)
    true_positives = counts["store"]["stored"]
    precision = true_positives / (true_positives + len(false_positives))
    recall = true_positives / len(STORE)
    ARTIFACTS.mkdir(exist_ok=True)
    report = {"precision": precision, "recall": recall, "classes": counts}
    (ARTIFACTS / "capture-confusion.json").write_text(json.dumps(report, indent=1))
    print("\ncapture confusion:", json.dumps(report))

    assert all(c["turns"] >= 40 for c in counts.values())
    assert false_positives == []
    assert precision == 1.0
    # Conservative by design, but not useless: explicit requests get through.
    assert recall >= 0.9


def test_reasons_say_why() -> None:
    assert "hedged ('maybe')" in capture.decide("Remember that maybe we ship Friday").reason
    assert "question" in capture.decide("Can you remember that the code is 44?").reason
    assert "Bob" in capture.decide("Remember for Bob that the key rotated.").reason
    assert capture.decide("   ").reason.startswith("empty")


# Turns that take back, correct or doubt their own claim in a later clause,
# in words the labelled turns do not use: each stored its first version.
SELF_REVISED = [
    "Remember that the deadline is Friday. No, Monday.",
    "Remember that the server is at 10.0.0.1 \u2014 no, 10.0.0.2.",
    "Remember that the deadline is Friday, I mean Monday.",
    "Remember that the deadline is Friday. Correction: Monday.",
    "Remember that the deadline is Friday, er, Monday.",
    "Remember that the deploy window is Tuesday. Actually it's Wednesday.",
    "Remember that the release is on Friday. Or Monday.",
    "Remember that the deadline is Friday... or was it Monday.",
    "Remember that the deadline is Friday. Or not.",
    "Remember that the deadline is Friday (or Monday).",
    "Remember that the deadline is Friday, hmm, or Monday.",
    "Remember that Bob doesn't like coffee, or does he.",
    "Remember that lorem ipsum dolor (not really).",
    "Remember that the deadline is Friday. Don't.",
    "Remember that the deadline is Friday. Actually don't.",
    "Remember that the deadline is Friday. On second thought, don't.",
    "Remember that the deadline is Friday. Cancel that.",
    "Remember that the deadline is Friday. Strike that.",
    "Remember that the deadline is Friday. Disregard.",
    "Remember that the deadline is Friday. Undo that.",
    "Remember that the deadline is Friday. Forget about it.",
    "Remember that the deadline is Friday. Forget I said that.",
    "Remember that the deadline is Friday. Ignore the above.",
    "Remember that the deadline is Friday. Oops, wrong chat.",
    "Remember that the deadline is Friday. I was wrong.",
    "Remember that the deadline is Friday. My mistake.",
    "Remember that the deadline is Friday. jk",
    "Remember that the deadline is Friday, lol jk",
    "Remember that the deadline is Friday. Kidding!",
    "Remember that the deadline is Friday. Not!",
    "Remember that the deadline is Friday. Ha, no.",
    "The deadline is Friday. No, Monday. Please remember that.",
    "Remember that the meeting is at 3pm, I'm not 100% certain.",
    "Remember that the meeting is at 3pm, don't quote me on that.",
]


@pytest.mark.parametrize("turn", SELF_REVISED)
def test_a_turn_that_takes_back_or_corrects_its_claim_stores_nothing(turn: str) -> None:
    """Docs/agents.md, rules 4 and 5: a claim the turn itself takes back,
    corrects or doubts anywhere in it is not stored (precision first: which
    version to keep is not the turn's to say plainly)."""
    decided = capture.decide(turn)
    assert not decided.store, (turn, decided.title)
    assert decided.category in (capture.NO_REQUEST, capture.HEDGED), decided


def test_a_later_clause_that_merely_continues_the_claim_is_still_stored() -> None:
    """What the rule for corrections must not take: lists, "not X" inside the
    claim, "no" qualifying a noun."""
    for turn, title in (
        ("Remember that we accept Visa, Mastercard, or Amex.",
         "We accept Visa, Mastercard, or Amex"),
        ("Remember that the deploy is on Friday, not Thursday.",
         "The deploy is on Friday, not Thursday"),
        ("Remember that refunds need approval, no exceptions.",
         "Refunds need approval, no exceptions"),
        ("Please don't forget that the badge readers reset at midnight.",
         "The badge readers reset at midnight"),
    ):  # fmt: skip
        decided = capture.decide(turn)
        assert decided.store and decided.title == title, (turn, decided)


# Turns that name particular people as the audience, or narrow the team, in
# words the labelled turns do not use: each was stored for the speaker alone,
# with the audience left in its title ("For Bob and Alice that the ...").
OTHER_AUDIENCES = [
    ("Remember for Bob and Alice that the deadline is Friday.", "Bob and Alice"),
    ("Remember for Bob Smith Jones that the deadline is Friday.", "Bob Smith Jones"),
    ("Remember for Bob, the deadline is Friday.", "Bob"),
    ("Remember that the deadline is Friday -- share with Bob.", "Bob"),
    ("Remember that the deadline is Friday \u2014 tell Bob.", "Bob"),
    ("Remember that the deadline is Friday: tell Bob.", "Bob"),
    ("Remember that the deadline is Friday, and send it to Bob.", "Bob"),
    ("Remember that the deadline is Friday, and pass it on to Bob.", "Bob"),
    ("Remember that the deadline is Friday, for Bob.", "Bob"),
    ("Remember that the deadline is Friday, for Bob and Dana.", "Bob and Dana"),
    ("Remember that the deadline is Friday, just for Bob.", "Bob"),
    ("Remember that the deadline is Friday, for me and Bob.", "me and Bob"),
    ("Remember that the deadline is Friday for everyone but Bob.", "but"),
    ("Remember that the deadline is Friday, for everyone besides Bob.", "besides"),
    ("Remember that the deadline is Friday, for all but Bob.", "but"),
]


@pytest.mark.parametrize(("turn", "named"), OTHER_AUDIENCES)
def test_a_turn_naming_other_people_or_narrowing_the_team_stores_nothing(
    turn: str, named: str
) -> None:
    """Docs/agents.md, rule 6: a turn that names a particular person as its
    audience, or negates or narrows a team audience, is ambiguous."""
    decided = capture.decide(turn)
    assert not decided.store, (turn, decided.title)
    assert decided.category == capture.AMBIGUOUS and named in decided.reason, decided


def test_phrases_that_are_not_an_audience_still_store() -> None:
    for turn, title, audience in (
        ("Remember, for the record, the deadline is Friday.",
         "For the record, the deadline is Friday", capture.SPEAKER),
        ("Remember that the office is closed, for the holiday.",
         "The office is closed, for the holiday", capture.SPEAKER),
        ("Remember for everyone, the deadline is Friday.",
         "The deadline is Friday", capture.WORKSPACE),
        ("Remember that the deadline is Friday, just for me.",
         "The deadline is Friday", capture.SPEAKER),
    ):  # fmt: skip
        decided = capture.decide(turn)
        assert (decided.store, decided.title, decided.audience) == (True, title, audience), turn


# Turns of 200,000 characters: a long run of punctuation alone, and followed by
# a claim and a closing request (each a no-op, then a claim stored).
LONG_RUNS = (",", ", ", ". ", "-", ",.;:-! ")
LONG_TURNS_SCRIPT = """
import json, sys
from services.gateway import capture
runs = json.loads(sys.argv[1])
out = []
for run in runs:
    body = run * (200_000 // len(run))
    for turn in (
        body,
        body + " the deploy window closes on Friday, remember that.",
        body + " the deploy window closes on Friday - note that for the team!",
    ):
        d = capture.decide(turn)
        out.append([d.store, d.category, d.kind, d.title, d.audience])
print(json.dumps(out))
"""


def test_long_punctuation_turns_are_decided() -> None:
    """A turn of a long run of commas, dots or dashes is decided, and rightly:
    the closing phrases (anchored at the end, tried from every position)
    backtracked quadratically over it, and a 20,000-character turn held the
    interpreter lock for half a minute, so every call of the gateway waited.
    Run in a process of its own: a regular expression holding the lock cannot
    be interrupted, nor a thread running one joined, so only a process can be
    stopped at the (generous) limit."""
    root = Path(__file__).resolve().parents[2]
    try:
        done = subprocess.run(
            [sys.executable, "-c", LONG_TURNS_SCRIPT, json.dumps(LONG_RUNS)],
            cwd=root, capture_output=True, text=True, timeout=60, check=True,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.fail("capture of 200,000-character punctuation turns did not end in 60 s")
    decided = json.loads(done.stdout)
    friday = "The deploy window closes on Friday"
    expected = [
        [False, capture.EMPTY, "", "", capture.SPEAKER],
        [True, capture.STORE, "fact", friday, capture.SPEAKER],
        [True, capture.STORE, "note", friday, capture.WORKSPACE],
    ]
    assert decided == expected * len(LONG_RUNS)


@pytest.mark.integration
def test_capture_rpc(stack: Stack, team: Team) -> None:
    ada, bob = team.clients["ada"], team.clients["bob"]
    said = datetime(2026, 3, 2, 14, 5, tzinfo=UTC)
    turn = "Remember that the release branch is cut every second Wednesday."
    first = ada.capture(turn, occurred_at=said)
    assert first.stored and first.reason.startswith("stored")
    m = first.memory
    assert m.origin == ORIGIN_TOLD and m.kind == KIND["fact"] and m.revision == 1
    assert m.audience.member_id == team.members["ada"]
    assert m.title == "The release branch is cut every second Wednesday"
    assert m.body.endswith("Said on 2026-03-02 at 14:05 UTC.")
    assert [r.id for r in ada.read([m.id]).memories] == [m.id]
    with pytest.raises(grpc.RpcError) as err:
        bob.read([m.id])
    assert err.value.code() == grpc.StatusCode.NOT_FOUND

    # The same turn again (a retry, a replayed transcript): one memory.
    again = ada.capture(turn, occurred_at=said)
    assert again.stored and again.memory.id == m.id
    # The same words for another purpose are another turn: a memory of its own.
    audited = ada.capture(turn, occurred_at=said, purpose="audit")
    assert audited.stored and audited.memory.id != m.id
    assert list(audited.memory.purposes) == [PURPOSE_AUDIT]

    team_turn = ada.capture("Note for the team: the office is closed on Monday.")
    assert team_turn.memory.audience.workspace
    assert team_turn.memory.kind == KIND["note"]
    assert bob.read([team_turn.memory.id]).memories[0].title == "The office is closed on Monday"

    before = dbutil.checksum(stack, team.database_name)
    for no_op in (
        "",
        "Remember that maybe we ship Friday.",
        "What did we decide?",
        "Remember this.",
    ):
        out = ada.capture(no_op)
        assert not out.stored and out.reason and not out.memory.id
    assert dbutil.checksum(stack, team.database_name) == before

    for kwargs, field in (
        ({"speaker_member_id": team.members["bob"]}, "speaker_member_id"),
        ({"occurred_at": datetime.now(UTC) + timedelta(days=1)}, "occurred_at"),
    ):
        with pytest.raises(grpc.RpcError) as err:
            ada.capture(turn, **kwargs)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert (err.value.details() or "").startswith(field)
    with pytest.raises(grpc.RpcError) as err:
        ada.capture("Remember that " + "x" * 20_001)
    assert (err.value.details() or "").startswith("text")
    assert dbutil.checksum(stack, team.database_name) == before


@pytest.mark.integration
def test_a_turn_not_stored_is_still_refused_for_a_bad_field(stack: Stack, team: Team) -> None:
    """Every field is checked whether or not the turn is worth storing (a bad
    episode id or request id answered OK on a question)."""
    ada = team.clients["ada"]
    for turn in ("What did we decide?", "Remember that the backups run nightly."):
        for kwargs, field in (
            ({"episode_id": "not-a-uuid"}, "episode_id"),
            ({"request_id": "x" * 5_000}, "request_id"),
            ({"request_id": "tab\there"}, "request_id"),
        ):
            with pytest.raises(grpc.RpcError) as err:
                ada.capture(turn, **kwargs)  # type: ignore[arg-type]
            assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, (turn, field)
            assert (err.value.details() or "").startswith(field), err.value.details()


@pytest.mark.integration
def test_a_turn_said_again_after_its_memory_was_forgotten_is_stored_again(team: Team) -> None:
    """The same words with no time and no request id are one turn while its
    memory lives (a retry stores once); once that memory was forgotten, saying
    them again is a new statement: it was answered "stored" with nothing kept."""
    ada = team.clients["ada"]
    turn = "Remember that Dana is on call this week."
    first = ada.capture(turn)
    retry = ada.capture(turn)
    assert retry.stored and retry.memory.id == first.memory.id
    ada.forget(first.memory.id, "rota changed")
    again = ada.capture(turn)
    assert again.stored and again.memory.id != first.memory.id
    assert again.memory.title == "Dana is on call this week"
    assert [m.title for m in ada.read([again.memory.id]).memories] == [again.memory.title]
    # And that one, retried, is stored once too.
    assert ada.capture(turn).memory.id == again.memory.id


@pytest.mark.integration
def test_the_speaker_is_named_in_any_spelling_of_their_id(team: Team) -> None:
    """The member a token acts for may name themselves as the speaker by any
    spelling of their id, as every id is taken; another member still may not."""
    ada = team.clients["ada"]
    ada_id = team.members["ada"]
    for spelling in (ada_id.upper(), "{" + ada_id + "}", "urn:uuid:" + ada_id):
        said = ada.capture(
            f"Remember that the {spelling[:6]} standup moved.", speaker_member_id=spelling
        )
        assert said.stored and said.memory.created_by == ada_id, spelling
    with pytest.raises(grpc.RpcError) as err:
        ada.capture(
            "Remember that the standup moved.", speaker_member_id=team.members["bob"].upper()
        )
    assert (err.value.details() or "").startswith("speaker_member_id")


@pytest.mark.integration
def test_a_forgotten_turn_leaves_no_hash_of_its_words_behind(stack: Stack, team: Team) -> None:
    """A capture with no request id of the caller's is keyed by its turn; once
    its memory is forgotten, nothing in the database (or a dump of it) may
    confirm a guess of the words: a plain hash of the member and the text was
    kept as the write's request id (request_key, the audit log)."""
    ada = team.clients["ada"]
    turn = "Remember that the vault code is 4417."
    said = ada.capture(turn)
    ada.forget(said.memory.id, "a secret")
    ada.capture(turn)  # said again: a new memory under an id chained from the gone one
    # What a guess could be checked against: the turn's plain hash as its
    # request id, kept as the store keeps every request id (erasure.request_key).
    ada_id = team.members["ada"]
    said_for = f"{ada_id}\x00\x00{turn}\x00{cpb.PURPOSE_ASSIST}\x00"
    plain = hashlib.sha256(said_for.encode()).hexdigest()
    stored = hashlib.sha256(f"{ada_id}:capture-{plain[:48]}".encode()).hexdigest()
    dump = dbutil.pg_dump(stack, team.database_name)
    assert said.memory.id in dump  # the tombstone and its request key are there
    assert plain[:48] not in dump
    assert stored not in dump


# Turns addressed to other people beside the speaker ("cc Bob", "@bob", "loop
# in Bob"): an audience the speaker did not state for the memory, as "for Bob"
# is. Each was stored for the speaker alone with the addressee in its text.
ADDRESSED = [
    ("Remember that we ship on Friday, cc Bob.", "Bob"),
    ("Note for the team: we ship on Friday, cc: Alice and Bob", "Alice"),
    ("Remember that we ship on Friday. CC Bob", "Bob"),
    ("Remember that we ship on Friday (cc Bob).", "Bob"),
    ("Remember that we ship on Friday, cc'ing Bob.", "Bob"),
    ("Remember that we ship on Friday, bcc Alice.", "Alice"),
    ("Remember that we ship on Friday, cc the team.", "the team"),
    ("Remember that we ship on Friday, loop in Bob.", "Bob"),
    ("Remember that we ship on Friday, looping in Alice and Bob.", "Alice"),
    ("Remember that we ship on Friday and loop Bob in.", "Bob"),
    ("Remember that we ship on Friday, keep Bob in the loop.", "Bob"),
    ("Remember that we ship on Friday @bob", "@bob"),
    ("@Alice remember that we ship on Friday.", "@Alice"),
    ("cc Bob: remember that we ship on Friday.", "Bob"),
]


@pytest.mark.parametrize(("turn", "named"), ADDRESSED)
def test_a_turn_addressed_to_other_people_stores_nothing(turn: str, named: str) -> None:
    """Docs/agents.md, rule 6: a turn copied or addressed to other people is
    ambiguous wherever the addressing comes, like one naming them as audience."""
    decided = capture.decide(turn)
    assert not decided.store, (turn, decided.title)
    assert decided.category == capture.AMBIGUOUS and named in decided.reason, decided


def test_cc_loop_and_at_signs_that_address_no_one_still_store() -> None:
    for turn, title in (
        ("Remember that the engine is 250 cc.", "The engine is 250 cc"),
        ("Remember that the cc list for releases is kept in the wiki.",
         "The cc list for releases is kept in the wiki"),
        ("Remember that the support address is help@example.com for customers.",
         "The support address is help@example.com for customers"),
        ("Remember that the retry loop in the importer runs three times.",
         "The retry loop in the importer runs three times"),
        ("Remember that the stand-up is @ 9:30 in room 4.", "The stand-up is @ 9:30 in room 4"),
    ):  # fmt: skip
        decided = capture.decide(turn)
        assert decided.store and decided.title == title, (turn, decided)


def test_a_claim_opening_with_its_own_capitals_or_marks_is_written_as_given() -> None:
    """The title is the claim's first sentence: only a plain lowercase first
    word is capitalised ("the" -> "The"); "iPhone" became "IPhone", a URL
    "Https://...", changing what the person said."""
    for turn, title in (
        ("Remember that iPhone users get the beta first.", "iPhone users get the beta first"),
        ("Remember that eBay is our biggest client.", "eBay is our biggest client"),
        ("Remember that https://status.example.com/Ops lists outages.",
         "https://status.example.com/Ops lists outages"),
        ("Remember that x86_64 is the only build target.", "x86_64 is the only build target"),
        ("Remember that the staging database is read-only.", "The staging database is read-only"),
        ("Remember that \u00e9lan is the team's word of the year.",
         "\u00c9lan is the team's word of the year"),
    ):  # fmt: skip
        decided = capture.decide(turn)
        assert decided.store and decided.title == title, (turn, decided)


def test_a_directive_followed_by_no_claim_says_nothing_was_stated() -> None:
    """A directive, then only emoji or marks where the claim goes, states
    nothing (rule 1: empty); the reason said 'that' pointed outside the turn.
    "Remember that." alone still points elsewhere (rule 6)."""
    for turn in ("Remember that \U0001f389\U0001f389\U0001f389", "Remember that .",
                 "Note that ---", "Record that \u2026", "\U0001f389, remember that."):  # fmt: skip
        decided = capture.decide(turn)
        assert (decided.category, decided.reason) == (
            capture.EMPTY, "asks to remember but says nothing to store"), turn  # fmt: skip
    for turn in ("Remember that.", "Note that!", "Remember that..."):
        assert capture.decide(turn).category == capture.AMBIGUOUS, turn
