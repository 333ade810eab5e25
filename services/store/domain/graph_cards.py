"""Entity cards (design §7 `lookup`, recall's entity cards): each entity the
caller may see with its attributes, relations, aliases and the memories that
mention it, as of a time or with their history; an entity merged with others
answers as one card for its group (design §8.5). Read inside the caller's
transaction, so row-level security shows an entity only through a visible
mention."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import psycopg

from recallatron.size_budget import Budget
from recallatron.vocabulary import MAX_CARD_ITEMS, MAX_NAME_WORDS
from services.store.domain import answer_budget, entity_groups
from services.store.domain import graph_rules as rules
from services.store.domain import validation as v
from services.store.domain.graph_claims import (
    AliasView,
    AttributeView,
    EntityRefView,
    Qualified,
    entity_ref,
    qualified_fields,
    stated_fields,
)
from services.store.sql import graph_queries as gq


@dataclass(frozen=True)
class EntityRelationView(Qualified):
    predicate: str
    direction: str  # outgoing | incoming
    other: EntityRefView


@dataclass
class EntityCard:
    entity: EntityRefView
    attributes: list[AttributeView] = field(default_factory=list)
    relations: list[EntityRelationView] = field(default_factory=list)
    aliases: list[AliasView] = field(default_factory=list)
    mentioned_by: list[str] = field(default_factory=list)
    truncated: bool = False
    # The entities a person merged into this one (design §8.5), oldest first.
    merged: list[EntityRefView] = field(default_factory=list)


# Characters a query's words shed at their ends before they are compared
# with names ("Robin?" names Robin).
_PUNCTUATION = "\"'`.,;:!?()[]{}<>«»“”\u2018\u2019"
# Words of a recall query looked at for names.
_MAX_QUERY_WORDS = 64
# Cards a page reads at once (a card may take a few MB).
CARDS_AT_ONCE = 4


def name_keys(text: str) -> set[str]:
    """Every run of up to MAX_NAME_WORDS words of ``text`` (ends stripped of
    punctuation), normalised as names are: the keys a text may name an entity by."""
    words = [w.strip(_PUNCTUATION) for w in rules.name_key(text).split(" ")]
    words = [w for w in words if w][:_MAX_QUERY_WORDS]
    return {
        " ".join(words[i : i + n])
        for n in range(1, MAX_NAME_WORDS + 1)
        for i in range(len(words) - n + 1)
    }


def entity_cards(
    conn: psycopg.Connection, found: Sequence[Sequence[Any]], params: dict[str, Any]
) -> list[EntityCard]:
    """Each found entity (id, name, type) with its lists, as of params["at"]
    (or everything, with params["history"]), each cut at MAX_CARD_ITEMS. An
    entity merged with others answers as one card for its whole group, under
    the group's head, with every member's lists (design §8.5)."""
    cards = _grouped(conn, found, params.get("known_by"))
    _fill(conn, cards, params)
    return cards


def card_page(
    conn: psycopg.Connection,
    found: Sequence[Sequence[Any]],
    params: dict[str, Any],
    skip: int,
    budget: int,
) -> tuple[list[EntityCard], bool]:
    """The cards of ``found`` (as :func:`entity_cards` gives them) from the
    ``skip``-th, as many as fit ``budget`` (at least one), and whether any
    are left after them. Read a few at a time, so a page of large cards
    reads little past what it answers."""
    cards = _grouped(conn, found, params.get("known_by"))[skip:]
    page: list[EntityCard] = []
    fits = Budget(budget)
    for start in range(0, len(cards), CARDS_AT_ONCE):
        chunk = cards[start : start + CARDS_AT_ONCE]
        _fill(conn, chunk, params)
        for card in chunk:
            if not fits.takes(answer_budget.card_bytes(card)):
                return page, True
            page.append(card)
    return page, False


def _grouped(
    conn: psycopg.Connection, found: Sequence[Sequence[Any]], known_by: datetime | None
) -> list[EntityCard]:
    """An empty card for each group among ``found``, in their order, each once
    (as of ``known_by``, of the members known by then)."""
    if not found:
        return []
    grouped = entity_groups.groups(conn, [str(r[0]) for r in found], known_by)
    cards: dict[str, EntityCard] = {}
    for row in found:
        group = grouped.get(str(row[0]))
        if group is not None and group.head.id not in cards:
            cards[group.head.id] = EntityCard(group.head, merged=list(group.merged))
    return list(cards.values())


def _fill(conn: psycopg.Connection, cards: Sequence[EntityCard], params: dict[str, Any]) -> None:
    """Reads the lists of ``cards`` (empty, from :func:`_grouped`)."""
    if not cards:
        return
    card_of = {m.id: card for card in cards for m in (card.entity, *card.merged)}
    # Every list is cut per entity in its statement (one more than a card
    # shows, to tell that it was cut), so an entity's thousands of aliases or
    # claims are never read; a merged group's lists are cut again below.
    params = {**params, "ids": v.uuid_array(list(card_of)), "cap": MAX_CARD_ITEMS + 1}
    with held_to_walks(conn), conn.pipeline():
        attrs = conn.execute(gq.CARD_ATTRIBUTES, params)
        rels = conn.execute(gq.CARD_RELATIONS, params)
        aliases = conn.execute(gq.CARD_ALIASES, params)
        mentions = conn.execute(gq.CARD_MENTIONED_BY, params)
    for eid, attr, value, *qualified in attrs.fetchall():
        card = card_of[str(eid)]
        card.attributes.append(
            AttributeView(card.entity, attr, value, **qualified_fields(*qualified))
        )
    relation_rows = rels.fetchall()
    # The other end of a relation answers through its own group too.
    others = entity_groups.groups(
        conn, [str(row[2]) for row in relation_rows], params.get("known_by")
    )
    per_member = Counter(str(row[0]) for row in relation_rows)
    for member, count in per_member.items():
        if count > MAX_CARD_ITEMS:
            # A member's list was cut: the card is, whatever is left out below.
            card_of[member].truncated = True
    for row in relation_rows:
        card = card_of[str(row[0])]
        if row[1] == "incoming" and card_of.get(str(row[2])) is card:
            # Between two members of one group: listed once, as the
            # outgoing relation of its subject (a member of this card too).
            continue
        other = others.get(str(row[2]))
        card.relations.append(
            EntityRelationView(
                row[5],
                row[1],
                other.head if other else entity_ref(row[2], row[3], row[4]),
                **qualified_fields(*row[6:12]),
            )
        )
    for eid, alias, *stated in aliases.fetchall():
        card = card_of[str(eid)]
        card.aliases.append(AliasView(card.entity, alias, **stated_fields(*stated)))
    mentioned: dict[int, list[tuple[datetime, str]]] = {}
    for eid, mid, created in mentions.fetchall():
        mentioned.setdefault(id(card_of[str(eid)]), []).append((created, str(mid)))
    for card in cards:
        if card.merged:
            # Several members' lists: one order again, newest statement first.
            card.attributes.sort(key=lambda a: a.stated_at, reverse=True)
            card.relations.sort(key=lambda r: r.stated_at, reverse=True)
            card.aliases.sort(key=lambda a: a.stated_at, reverse=True)
        by_memory = sorted(mentioned.get(id(card), []), key=lambda m: (-m[0].timestamp(), m[1]))
        card.mentioned_by = list(dict.fromkeys(mid for _, mid in by_memory))
        for name_ in ("attributes", "relations", "aliases", "mentioned_by"):
            items = getattr(card, name_)
            if len(items) > MAX_CARD_ITEMS:
                del items[MAX_CARD_ITEMS:]
                card.truncated = True


@contextmanager
def held_to_walks(conn: psycopg.Connection) -> Iterator[None]:
    """The statements inside read their lists as walks of their indexes
    (graph_queries.HOLD_TO_WALKS); the planner's setting is put back after
    (a statement that failed ends the transaction, and the setting with it)."""
    row = conn.execute(gq.HOLD_TO_WALKS).fetchone()
    yield
    conn.execute(gq.LET_GO, (row[0] if row else "on",))


def cards_by_id(conn: psycopg.Connection, ids: Sequence[str]) -> dict[str, EntityCard]:
    """The current card of each id the caller may see, keyed by that id (the
    members of one merged group share their group's card)."""
    found = conn.execute(gq.ENTITIES, (v.uuid_array(list(ids)),)).fetchall()
    cards = entity_cards(conn, found, {"at": datetime.now(UTC), "history": False})
    by_member = {m.id: c for c in cards for m in (c.entity, *c.merged)}
    return {i: by_member[i] for i in ids if i in by_member}
