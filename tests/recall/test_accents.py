"""A word is found with or without its accents: "Zoe" finds a memory about
Zoë, "cafe" one about the Café Nero, "résumé" one that says "resume". An agent
types a name as it heard it, a person as their keyboard lets them; Postgres's
English configuration keeps "zoë" and "zoe" apart, so the lexical arm found
nothing (workspace migration 0077: the search vectors and the query's terms
are read with their accents folded)."""

from __future__ import annotations

import uuid

import pytest

from recallatron_devkit.stack import Stack
from tests import dbutil
from tests.conftest import Team
from tests.recall.conftest import RecallStack
from tests.recall.lexical_words import found, remember_others
from tests.recall.test_recall_stack import ids, remember

pytestmark = pytest.mark.integration


def test_a_word_is_found_with_or_without_its_accents(recall_stack: RecallStack) -> None:
    ws = recall_stack.workspace()
    c = ws.owner.client
    zoe = remember(c, "Zoë's tea", "Zoë drinks green tea, never coffee.")
    cafe = remember(c, "Friday lunch", "We meet at the Café Nero on Friday.")
    sao = remember(c, "New office", "José opens the São Paulo office in March.")
    resume = remember(c, "Hiring", "Send the resume to the hiring channel.")
    decomposed = remember(c, "Naming", "The file is called nai\u0308ve-bayes.")
    remember_others(c)

    assert found(c, "Zoe") == {zoe}
    assert found(c, "zoë") == {zoe}
    assert found(c, "cafe nero") == {cafe}
    assert found(c, "CAFÉ") == {cafe}
    assert found(c, "jose") == {sao}
    assert found(c, "sao paulo") == {sao}
    assert found(c, "résumé") == {resume}
    assert found(c, "naïve") == {decomposed}
    assert found(c, "naive") == {decomposed}
    # Folding marks only: other letters stay themselves.
    assert found(c, "zoo") == set()
    (hit,) = c.recall("Zoe", mode="lexical", limit=5).outcome.results
    assert hit.scores.matches_every_term


def test_a_corrected_memory_is_found_by_its_new_words_only(recall_stack: RecallStack) -> None:
    ws = recall_stack.workspace()
    c = ws.owner.client
    m = c.remember("Host", "Renée hosts the retro.", audience_to="workspace").memory
    assert set(ids(c.recall("renee", mode="lexical").outcome)) == {m.id}
    c.correct(m.id, m.revision, "swap", body="Chloé hosts the retro.")
    assert ids(c.recall("renee", mode="lexical").outcome) == []
    assert set(ids(c.recall("chloe", mode="lexical").outcome)) == {m.id}


def test_a_history_turn_is_found_with_or_without_its_accents(stack: Stack, team: Team) -> None:
    """The owner's imported turns are searched as memories are."""
    dbutil.query(
        stack,
        team.database_name,
        "INSERT INTO history_entry (id, owner_member_id, chat_id, role, text, occurred_at)"
        " VALUES (%s, %s, 'c1', 'user', 'Chloë booked the chalet in Zermatt', now())"
        " RETURNING id",
        (str(uuid.uuid4()), team.members["ada"]),
    )
    ada = team.clients["ada"]
    for query in ("chloe", "Chloë", "CHLOË"):
        got = ada.recall(query, include_history=True).outcome.history
        assert [h.text for h in got] == ["Chloë booked the chalet in Zermatt"], query
