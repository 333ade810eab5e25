"""A word inside an email address, a host name, a path or a word in camel
case, and a number after a hyphen, are found by the lexical arm: Postgres's
parser keeps such a token whole (or reads "-8601" as a signed integer), and
the search vectors hold its parts beside it (workspace migration 0075). A
whole address or path in the query still finds its memory, and only it."""

from __future__ import annotations

import pytest

from tests.recall.conftest import RecallStack
from tests.recall.lexical_words import found, remember_others
from tests.recall.test_recall_stack import ids, remember

pytestmark = pytest.mark.integration


def test_a_word_inside_an_address_or_a_path_is_found(recall_stack: RecallStack) -> None:
    ws = recall_stack.workspace()
    c = ws.owner.client
    access = remember(c, "Access requests", "Mail ops@example.com to ask for an account.")
    proxy = remember(c, "Where the proxy is set up", "Its file is /etc/nginx/nginx.conf on web-1.")
    runbook = remember(c, "The release runbook", "See https://wiki.example.com/runbooks/deploy.")
    code = remember(c, "A helper to reuse", "getUserName in the HTTPServer module.")
    dates = remember(c, "How dates are written", "Always ISO-8601, and COVID-19 leave is 5 days.")
    remember_others(c)

    assert found(c, "ops") == {access}
    assert found(c, "nginx") == {proxy}
    assert found(c, "nginx.conf") == {proxy}
    assert found(c, "runbooks") == {runbook}
    assert found(c, "example.com") == {access, runbook}
    assert found(c, "wiki") == {runbook}
    # The whole token as before, and only its memory.
    assert found(c, "ops@example.com") == {access}
    assert found(c, "/etc/nginx/nginx.conf") == {proxy}
    assert found(c, "wiki.example.com") == {runbook}
    assert found(c, "user name") == {code}
    assert found(c, "server") == {code}
    assert found(c, "getUserName") == {code}
    assert found(c, "8601") == {dates}
    assert found(c, "covid 19") == {dates}
    # A part is a term the memory holds, for the relevance judgement too.
    (hit,) = c.recall("nginx", mode="lexical", limit=5).outcome.results
    assert hit.scores.matches_every_term
    assert found(c, "zephyrine") == set()


def test_a_corrected_memory_is_found_by_its_new_parts_only(recall_stack: RecallStack) -> None:
    ws = recall_stack.workspace()
    c = ws.owner.client
    m = c.remember("Alerts", "Pages go to oncall@example.com.", audience_to="workspace").memory
    assert set(ids(c.recall("oncall", mode="lexical").outcome)) == {m.id}
    c.correct(m.id, m.revision, "new rota", body="Pages go to rota@example.org.")
    assert ids(c.recall("oncall", mode="lexical").outcome) == []
    assert set(ids(c.recall("rota", mode="lexical").outcome)) == {m.id}
