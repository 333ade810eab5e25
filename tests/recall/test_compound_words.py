"""A word inside an email address, a host name, a path or a word in camel
case, and a number after a hyphen, are found by the lexical arm: Postgres's
parser keeps such a token whole (or reads "-8601" as a signed integer), and
the search vectors hold its parts beside it (workspace migration 0075). A
whole address or path in the query still finds its memory, and only it."""

from __future__ import annotations

import pytest

from tests.recall.conftest import RecallStack
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
    for title, body in [
        ("Office plants", "Water the ferns on Fridays."),
        ("Lunch order", "Soup and bread for the workshop."),
        ("Parking", "Visitors park behind the north building."),
        ("Holiday rota", "Two people stay on call over the holidays."),
    ]:
        remember(c, title, body)

    def found(query: str) -> set[str]:
        return set(ids(c.recall(query, mode="lexical", limit=20).outcome))

    assert found("ops") == {access}
    assert found("nginx") == {proxy}
    assert found("nginx.conf") == {proxy}
    assert found("runbooks") == {runbook}
    assert found("example.com") == {access, runbook}
    assert found("wiki") == {runbook}
    # The whole token as before, and only its memory.
    assert found("ops@example.com") == {access}
    assert found("/etc/nginx/nginx.conf") == {proxy}
    assert found("wiki.example.com") == {runbook}
    assert found("user name") == {code}
    assert found("server") == {code}
    assert found("getUserName") == {code}
    assert found("8601") == {dates}
    assert found("covid 19") == {dates}
    # A part is a term the memory holds, for the relevance judgement too.
    (hit,) = c.recall("nginx", mode="lexical", limit=5).outcome.results
    assert hit.scores.matches_every_term
    assert found("zephyrine") == set()


def test_a_corrected_memory_is_found_by_its_new_parts_only(recall_stack: RecallStack) -> None:
    ws = recall_stack.workspace()
    c = ws.owner.client
    m = c.remember("Alerts", "Pages go to oncall@example.com.", audience_to="workspace").memory
    assert set(ids(c.recall("oncall", mode="lexical").outcome)) == {m.id}
    c.correct(m.id, m.revision, "new rota", body="Pages go to rota@example.org.")
    assert ids(c.recall("oncall", mode="lexical").outcome) == []
    assert set(ids(c.recall("rota", mode="lexical").outcome)) == {m.id}
