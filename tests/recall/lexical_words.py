"""What the tests of words the lexical arm finds share: memories about
other things, so each query's match is one among several, and the ids a
lexical recall finds."""

from __future__ import annotations

from recallatron.client import Client
from tests.recall.test_recall_stack import ids, remember

OTHER_MEMORIES = [
    ("Office plants", "Water the ferns on Fridays."),
    ("Lunch order", "Soup and bread for the workshop."),
    ("Parking", "Visitors park behind the north building."),
    ("Holiday rota", "Two people stay over the holidays."),
]


def remember_others(client: Client) -> None:
    for title, body in OTHER_MEMORIES:
        remember(client, title, body)


def found(client: Client, query: str) -> set[str]:
    """The memories a lexical recall of ``query`` finds (up to 20)."""
    return set(ids(client.recall(query, mode="lexical", limit=20).outcome))
