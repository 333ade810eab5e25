"""The memory graph (design §3, §7) as plain domain code: aliases, attribute
claims and relation claims, each stated by one memory (graph_claims); lookup
by exact name or alias, as entity cards (graph_cards), and a bounded walk over
relations (graph_traversal). Writing happens inside the memory tools'
transaction (services/store/domain/memory_writes.py calls `GraphWriter`);
reading inside the caller's, so row-level security makes a claim visible
exactly when its memory is, and an entity only through a visible mention."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import psycopg

from recallatron import errors
from recallatron.vocabulary import (
    ANSWER_BUDGET_BYTES,
    BESIDE_BUDGET_BYTES,
    MAX_ENTITY_NAME,
    MAX_HOPS,
    MAX_LOOKUP_ENTITIES,
    MAX_QUERY_CHARS,
    MAX_RECALL_ENTITIES,
)
from services.store.domain import answer_budget, entity_groups, page_tokens
from services.store.domain import graph_rules as rules
from services.store.domain import validation as v
from services.store.domain.graph_cards import (
    EntityCard,
    EntityRelationView,
    card_page,
    cards_by_id,
    entity_cards,
    name_keys,
)
from services.store.domain.graph_claims import (
    NO_GRAPH,
    AliasIn,
    AliasView,
    AttributeView,
    ClaimIn,
    EntityIn,
    EntityRefView,
    GraphIn,
    GraphWriter,
    Qualified,
    QualifiersIn,
    RelationIn,
    RelationView,
    Stated,
    claims_of,
    validate,
    validate_entity,
)
from services.store.domain.graph_traversal import Neighborhood, neighborhood
from services.store.domain.workspace_services import InWorkspaces
from services.store.infrastructure.db import GENERIC_PLANS, Caller, caller_transaction
from services.store.sql import graph_queries as gq

__all__ = [
    "MAX_PREDICATES",
    "NO_GRAPH",
    "AliasIn",
    "AliasView",
    "AttributeView",
    "CardPage",
    "ClaimIn",
    "EntityCard",
    "EntityIn",
    "EntityRefView",
    "EntityRelationView",
    "GraphIn",
    "GraphStore",
    "GraphWriter",
    "NamedCards",
    "Neighborhood",
    "Qualified",
    "QualifiersIn",
    "RelationIn",
    "RelationView",
    "Stated",
    "cards_by_id",
    "claims_of",
    "validate",
    "validate_entity",
]

# Predicates one neighbors call may filter on.
MAX_PREDICATES = 20


# Shorter names are looked up exactly only.
MIN_FUZZY_CHARS = 3


def _like_escaped(key: str) -> str:
    """``key`` as a literal in a LIKE pattern (backslash is LIKE's escape)."""
    return key.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def lookup_statement(
    name: str, as_of: datetime | None, include_history: bool, partial: bool
) -> tuple[str, dict[str, Any]]:
    """The lookup's statement and its parameters for ``name``."""
    v.text(name, "name", MAX_ENTITY_NAME)
    key = rules.given_name_key(name, "name")
    params: dict[str, Any] = {
        "key": key,
        "prefix": _like_escaped(key) + "%",
        "word_prefix": "% " + _like_escaped(key) + "%",
        "at": as_of or datetime.now(UTC),
        "history": include_history,
        # As of a time, only entities known by then (the history has them all).
        "known_by": None if include_history else as_of,
        "limit": MAX_LOOKUP_ENTITIES,
    }
    # Below MIN_FUZZY_CHARS only exact matches count (a letter or two would
    # match at random).
    fuzzy = partial and len(key) >= MIN_FUZZY_CHARS
    return (gq.LOOKUP_PARTIAL if fuzzy else gq.LOOKUP), params


@dataclass(frozen=True)
class CardPage:
    """A lookup's answer: the cards that fit its size budget and the token of
    the page after them ("" after the last)."""

    cards: list[EntityCard]
    next_page_token: str


@dataclass(frozen=True)
class NamedCards:
    """Recall's entity cards: those that fit beside its memories, and the
    entities left out (looked up by name, they answer their cards)."""

    cards: list[EntityCard]
    left_out: list[EntityRefView]


def _asked(asked: dict[str, Any]) -> str:
    """What a lookup asked, as its page token holds it: a digest, so that the
    token stays short however long the name (JSON escapes a CJK character in
    six characters, and folding makes some names longer), within the tools'
    page_token limit (recallatron/tool_args.py)."""
    return hashlib.sha256(json.dumps(asked, sort_keys=True).encode()).hexdigest()[:32]


def _page_of(token: str, asked: dict[str, Any]) -> tuple[list[str], datetime | None]:
    """The entities a lookup's page token says were answered before it and
    the time its first page answered as of; ([], None) without one."""
    if not token:
        return [], None
    try:
        data = page_tokens.decode(token)
        answered, at = data["seen"], datetime.fromisoformat(str(data["at"]))
        # A token of a store from before the digest holds what was asked itself.
        same = data["w"] == "lookup" and (
            data["q"] == _asked(asked) if "q" in data else all(data[k] == asked[k] for k in asked)
        )
        if (
            not isinstance(answered, list)
            or not 0 < len(answered) < MAX_LOOKUP_ENTITIES
            or not all(isinstance(e, str) and v.is_canonical_uuid(e) for e in answered)
            or at.tzinfo is None
        ):
            raise ValueError(data)
    except (KeyError, ValueError, TypeError, OverflowError):
        raise errors.InvalidArgument("page_token", page_tokens.NOT_OURS) from None
    if not same:
        raise errors.InvalidArgument("page_token", "belongs to another lookup")
    return answered, at


def _unanswered(
    conn: psycopg.Connection,
    found: Sequence[Sequence[Any]],
    answered: set[str],
    known_by: datetime | None,
) -> list[Sequence[Any]]:
    """The entities of ``found`` whose group (as it stands now) holds none of
    ``answered``: what a later page has left to answer, however the list
    moved since (an entity forgotten, a merge decided or undone)."""
    rest = [r for r in found if str(r[0]) not in answered]
    grouped = entity_groups.groups(conn, [str(r[0]) for r in rest], known_by)
    return [
        r
        for r in rest
        if (g := grouped.get(str(r[0]))) is not None and not answered.intersection(g.ids)
    ]


class GraphStore(InWorkspaces):
    def lookup(
        self,
        caller: Caller,
        name: str,
        as_of: datetime | None,
        include_history: bool = False,
        partial: bool = False,
        page_token: str = "",
    ) -> CardPage:
        """Every entity the caller may see whose name or current alias is
        ``name`` (normalised); ``partial``: then those whose name or alias
        starts with it (or has a word that does), then those alike despite a
        typo. Each with
        its claims current at ``as_of`` (now by default) or, with the history,
        all of them. Two claims that disagree are both returned, newest
        statement first. Below :data:`MIN_FUZZY_CHARS` characters only exact
        matches count (a letter or two would match at random).

        As many cards as fit the answer's size budget (ANSWER_BUDGET_BYTES, at
        least one); ``next_page_token`` goes on from there, as of the first
        page's time."""
        statement, params = lookup_statement(name, as_of, include_history, partial)
        asked = {
            "k": params["key"],
            "a": as_of.isoformat() if as_of else "",
            "h": include_history,
            "p": partial,
        }
        answered, first_at = _page_of(page_token, asked)
        if first_at is not None:
            params["at"] = first_at
        pool = self.control.caller_pool(caller)
        with caller_transaction(pool, caller, GENERIC_PLANS) as conn:
            found = conn.execute(statement, params).fetchall()
            # Pages go on after the entities answered, not after a count of
            # cards: one forgotten or merged between pages shifts none out.
            rest = (
                _unanswered(conn, found, set(answered), params["known_by"]) if answered else found
            )
            cards, more = card_page(conn, rest, params, 0, ANSWER_BUDGET_BYTES)
        token = ""
        if more:
            shown = {c.entity.id for c in cards} | {m.id for c in cards for m in c.merged}
            # Of the entities found now (at most MAX_LOOKUP_ENTITIES), those
            # answered on this page or before.
            seen = [str(r[0]) for r in found if str(r[0]) in shown or str(r[0]) in answered]
            at = params["at"].isoformat()
            token = page_tokens.encode({"w": "lookup", "q": _asked(asked), "at": at, "seen": seen})
        return CardPage(cards, token)

    def named_in(self, caller: Caller, text: str) -> list[EntityCard]:
        """The entities ``text`` names exactly: every run of up to
        MAX_NAME_WORDS words (ends stripped of punctuation) that is the name
        or a current alias of an entity the caller may see, as lookup gives
        it now. For recall's entity cards; a query naming nothing costs one
        probe of the name indexes, beneath no policy (0067_baseline/09_graph.sql)."""
        # The query's own rule (the arms check it too): no NUL, not past its length.
        v.text(text, "text", MAX_QUERY_CHARS, required=False)
        keys = name_keys(text)
        if not keys:
            return []
        params: dict[str, Any] = {
            "keys": sorted(keys),
            "at": datetime.now(UTC),
            "history": False,
            "limit": MAX_RECALL_ENTITIES,
        }
        pool = self.control.caller_pool(caller)
        with caller_transaction(pool, caller, GENERIC_PLANS) as conn:
            held = conn.execute(gq.KEYS_HELD, params).fetchone()
            if not (held and held[0]):
                return []
            return entity_cards(conn, conn.execute(gq.NAMED, params).fetchall(), params)

    def named_cards(self, caller: Caller, text: str) -> NamedCards:
        """:meth:`named_in`'s cards that fit beside recall's memories
        (BESIDE_BUDGET_BYTES), each in turn; the entities of the others."""
        cards, left = answer_budget.each_fitting(
            self.named_in(caller, text), answer_budget.card_bytes, BESIDE_BUDGET_BYTES
        )
        return NamedCards(cards, [c.entity for c in left])

    def neighbors(
        self,
        caller: Caller,
        entity_id: str,
        hops: int,
        predicates: Sequence[str],
        as_of: datetime | None,
    ) -> Neighborhood:
        """Breadth first from ``entity_id`` over the relations the caller may
        see that are current at ``as_of``, both directions, up to ``hops``;
        at most MAX_NEIGHBOR_NODES nodes and MAX_NEIGHBOR_EDGES edges (the
        newest statements first at each hop), ``truncated`` when a cap cut."""
        start = v.uuid_str(entity_id, "entity_id")
        # 0 is the wire's "not given" (a JSON body or a client leaving it
        # out): one hop, the default every client and tool schema states.
        hops = hops or 1
        if not 1 <= hops <= MAX_HOPS:
            raise errors.InvalidArgument("hops", f"must lie in [1, {MAX_HOPS}]")
        if len(predicates) > MAX_PREDICATES:
            raise errors.InvalidArgument("predicates", f"at most {MAX_PREDICATES} allowed")
        wanted = [rules.identifier(p, f"predicates[{i}]") for i, p in enumerate(predicates)]
        at = as_of or datetime.now(UTC)
        with self.transaction(caller) as conn:
            return neighborhood(conn, start, hops, wanted, at, known_by=as_of)
