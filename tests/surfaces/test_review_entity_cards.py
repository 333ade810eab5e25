"""The entity cards of the review page (design §8.5) say only what is so: a
memory that mentions an entity is listed with its title, never said to have
changed when it has not, however many memories mention the entity. Driven
through the page's application with the owner's real gateway client, as a
signed-in session would (the browser's part is in test_review_entities.py)."""

from __future__ import annotations

import re
import time

import pytest

from recallatron_devkit.stack import Stack
from services.gateway.review_web import ReviewApp, Session
from tests.conftest import Team
from tests.surfaces.entity_data import write_robins

pytestmark = pytest.mark.integration


def _mentioned_by(html: str, entity_id: str) -> list[str]:
    """The items of the "Mentioned by" list of the card of ``entity_id``."""
    card = html.split(f'data-entity="{entity_id}"', 1)[1].split("</article>", 1)[0]
    listed = card.split("<h4>Mentioned by</h4><ul>", 1)[1].split("</ul>", 1)[0]
    return re.findall(r"<li>(.*?)</li>", listed)


def test_a_much_mentioned_entity_s_memories_are_not_said_to_have_changed(
    stack: Stack, team: Team
) -> None:
    """The page read the titles of the first 100 memories its cards cite and
    labelled every other one "(changed since)": an entity mentioned by more
    memories than that showed unchanged memories as changed."""
    ada = team.clients["ada"]
    robins = write_robins(ada)
    for i in range(110):
        ada.remember(
            f"Robin note {i}", f"Robin said thing number {i}.", mention_ids=[robins["robin"]]
        )
    now = time.monotonic()
    session = Session(ada, "csrf", now, now)
    html = ReviewApp(stack.gateway).review(session, "assist").body.decode()
    items = _mentioned_by(html, robins["robin"])
    assert items, "the pair of Robins is on the page"
    assert not [i for i in items if "changed since" in i], items[-3:]
    # Each memory listed is listed with its title; the rest are counted, so
    # the card stays short however many memories mention the entity.
    *listed, rest = items
    assert listed and all(i.startswith("Robin ") and "<code>" in i for i in listed), listed
    assert rest == f"and {111 - len(listed)} more", rest
