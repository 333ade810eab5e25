"""Capture's own request ids (services/gateway/capture.py): a turn replayed
with other whitespace or another Unicode spelling of the same letters is the
same turn."""

from __future__ import annotations

import unicodedata
import uuid
from datetime import UTC, datetime

import pytest

from tests.conftest import Team

SAID = datetime(2026, 3, 2, 14, 5, tzinfo=UTC)


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
def test_a_turn_replayed_with_its_episode_id_spelled_otherwise_stores_once(team: Team) -> None:
    """The episode's id in any spelling of a UUID is the same episode, so the
    same turn in it is the same turn: the id read as spelled made another
    request id, and a second memory."""
    ada = team.clients["ada"]
    episode = ada.create_episode("Standup", "2026-03-02T14:00:00Z").episode_id
    turn = "Remember that the standup moves to 10am."
    for occurred in (None, SAID):
        first = ada.capture(turn, occurred_at=occurred, episode_id=episode)
        assert first.stored and first.memory.episode_id == episode
        for spelled in (episode.upper(), "{" + episode + "}", uuid.UUID(episode).hex):
            again = ada.capture(turn, occurred_at=occurred, episode_id=spelled)
            assert again.stored and again.memory.id == first.memory.id, (spelled, occurred)
