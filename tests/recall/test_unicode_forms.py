"""A word typed in one Unicode form finds a memory written in another: "café"
may come as one code point for "é" (NFC) or as "e" and a combining accent
(NFD, as macOS file names and some keyboards give it). Postgres keeps each
form as a different lexeme, so without normalising both sides a lexical
recall found only the memories written in the query's own form."""

from __future__ import annotations

import unicodedata

import pytest

from recallatron_devkit.stack import Stack
from tests import dbutil
from tests.conftest import Team

pytestmark = pytest.mark.integration


def nfc(text: str) -> str:
    return unicodedata.normalize("NFC", text)


def nfd(text: str) -> str:
    return unicodedata.normalize("NFD", text)


def test_a_word_in_either_unicode_form_finds_the_memory(stack: Stack, team: Team) -> None:
    ada = team.clients["ada"]
    decomposed = ada.remember(
        nfd("Crème brûlée recipe"), nfd("Torch the crème brûlée at the café.")
    ).memory
    composed = ada.remember(nfc("Señora Núñez"), nfc("Señora Núñez runs the pâtisserie.")).memory
    assert nfd("brûlée") != nfc("brûlée")
    for query, wanted in (
        (nfc("brûlée"), decomposed.id),
        (nfd("brûlée"), decomposed.id),
        (nfd("pâtisserie Núñez"), composed.id),
        (nfc("pâtisserie Núñez"), composed.id),
    ):
        found = ada.recall(query, mode="lexical").outcome.results
        assert wanted in [r.memory.id for r in found], ascii(query)
    # The text reads back as written, up to canonical equivalence.
    (read,) = ada.read([decomposed.id]).memories
    assert nfc(read.title) == nfc("Crème brûlée recipe")
    rows = dbutil.query(
        stack,
        team.database_name,
        "SELECT count(*) FROM memory"
        " WHERE NOT (title IS NFC NORMALIZED AND body IS NFC NORMALIZED)",
    )
    assert rows == [(0,)]
