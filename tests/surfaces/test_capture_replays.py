"""Capture's own request ids (services/gateway/capture.py): a turn replayed
with other whitespace or another Unicode spelling of the same letters is the
same turn, and a turn captured under the earlier ids (made from the raw text)
still finds its first memory when replayed."""

from __future__ import annotations

import hashlib
import hmac
import unicodedata
from datetime import UTC, datetime

import pytest

from recallatron.v1 import common_pb2 as cpb
from recallatron_devkit.stack import Stack
from services.gateway import capture
from tests.conftest import Team

SAID = datetime(2026, 3, 2, 14, 5, tzinfo=UTC)


def _earlier_id(stack: Stack, member_id: str, text: str, occurred_at: datetime | None) -> str:
    """The request id capture made from a turn's raw text before ids were
    made from its normalised text."""
    stamp = occurred_at.astimezone(UTC).isoformat() if occurred_at else ""
    turn = f"{member_id}\x00{stamp}\x00{text}\x00{cpb.PURPOSE_ASSIST}\x00"
    key = capture.turn_key(stack.internal_key)
    return "capture-" + hmac.new(key, turn.encode(), hashlib.sha256).hexdigest()[:48]


@pytest.mark.integration
def test_a_turn_replayed_with_other_whitespace_or_spelling_stores_once(team: Team) -> None:
    """A trailing newline, doubled spaces, CRLF or decomposed accents cannot
    change the claim: each stored a second memory."""
    ada = team.clients["ada"]
    turn = "Remember that the café deploy window is Friday."
    for occurred in (None, SAID):
        first = ada.capture(turn, occurred_at=occurred)
        assert first.stored
        for replay in (
            turn + "\n",
            turn.replace(" ", "  "),
            turn.replace("window ", "window\r\n"),
            "  " + turn.replace(" is", "\tis") + "\r\n",
            unicodedata.normalize("NFD", turn),
        ):
            again = ada.capture(replay, occurred_at=occurred)
            assert again.stored and again.memory.id == first.memory.id, (replay, occurred)


@pytest.mark.integration
def test_a_turn_captured_under_the_earlier_ids_finds_its_first_memory(
    stack: Stack, team: Team
) -> None:
    """A turn stored under the id made from its raw text (as capture made ids
    before) is found again by a replay of it, with or without a time, not
    stored a second time; a turn never captured before is stored once."""
    ada = team.clients["ada"]
    ada_id = team.members["ada"]
    for turn in (
        "Remember that the staging database is rebuilt on Sundays.",
        "Remember that  the  staging cache is flushed on Mondays.\n",
        unicodedata.normalize("NFD", "Remember that the résumé template lives in the wiki."),
    ):
        for occurred in (None, SAID):
            earlier = ada.capture(
                turn, occurred_at=occurred, request_id=_earlier_id(stack, ada_id, turn, occurred)
            )
            assert earlier.stored
            replay = ada.capture(turn, occurred_at=occurred)
            assert replay.stored and replay.memory.id == earlier.memory.id, (turn, occurred)
    fresh = "Remember that  the  build cache is kept for a week.\r\n"
    first = ada.capture(fresh)
    assert ada.capture(fresh).memory.id == first.memory.id
    assert ada.capture(" ".join(fresh.split())).memory.id == first.memory.id
