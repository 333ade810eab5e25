"""A hyphenated word is found written whole and the reverse: "oncall" finds
"on-call", "e-mail" finds "email", "followup" finds "follow-up". Postgres's
parser keeps "on-call" as "on-cal" and its halves, so "oncall" (stemmed
"oncal") met nothing, and "e-mail" never met "email" (workspace migration
0077: the search vectors hold a hyphenated word's joined form, and a query's
hyphenated words add theirs)."""

from __future__ import annotations

import pytest

from tests.recall.conftest import RecallStack
from tests.recall.lexical_words import found, remember_others
from tests.recall.test_recall_stack import remember

pytestmark = pytest.mark.integration


def test_a_hyphenated_word_is_found_written_whole_and_the_reverse(
    recall_stack: RecallStack,
) -> None:
    ws = recall_stack.workspace()
    c = ws.owner.client
    rota = remember(c, "Pager rota", "Priya is on-call this week for the payments team.")
    mail = remember(c, "Where to write", "Send an email to the finance desk for refunds.")
    follow = remember(c, "After the review", "The follow-up meeting is on Thursday.")
    model = remember(c, "Which model", "The summaries come from gpt-4o since May.")
    remember_others(c)

    assert found(c, "oncall") == {rota}
    assert found(c, "on-call") == {rota}
    assert found(c, "e-mail") == {mail}
    assert found(c, "email") == {mail}
    assert found(c, "followup") == {follow}
    assert found(c, "gpt4o") == {model}
    # Written whole in the query, the memory's own hyphenated form is a term it holds.
    (hit,) = c.recall("oncall", mode="lexical", limit=5).outcome.results
    assert hit.scores.matches_every_term
