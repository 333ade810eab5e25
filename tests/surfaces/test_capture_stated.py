"""Capture of what the speaker states as their own (docs/agents.md, after
the rules): preferences, standing instructions to the assistant and plans are
the speaker's claims, stored when asked for and only then."""

from __future__ import annotations

from services.gateway import capture


def test_a_preference_instruction_or_plan_asked_for_is_stored_as_said() -> None:
    """A standing instruction or a plan the speaker asks to remember is their
    own word: exactly what a person wants kept. It is stored as said, a plan
    as a plan (not as done)."""
    for turn, title in (
        ("Remember that you should always answer in French.",
         "You should always answer in French"),
        ("Remember that from now on you reply in English.", "From now on you reply in English"),
        ("Remember: always answer in French.", "Always answer in French"),
        ("Remember that I prefer short answers without emoji.",
         "I prefer short answers without emoji"),
        ("Remember that we plan to ship on Friday.", "We plan to ship on Friday"),
        ("Note that we're planning to move the office in June.",
         "We're planning to move the office in June"),
    ):  # fmt: skip
        decided = capture.decide(turn)
        assert decided.store and decided.title == title, (turn, decided)
        assert decided.kind in ("fact", "note"), decided


def test_an_instruction_or_plan_not_asked_for_is_a_no_op() -> None:
    """Without a request to remember, an instruction is for the conversation
    at hand, and a plan is talk: neither is stored."""
    for turn in (
        "From now on reply in English.",
        "You should always answer in French.",
        "We plan to ship on Friday.",
    ):
        decided = capture.decide(turn)
        assert not decided.store and decided.category == capture.NO_REQUEST, (turn, decided)
