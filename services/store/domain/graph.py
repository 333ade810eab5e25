"""The memory graph (design §3, §7) as plain domain code: aliases, attribute
claims and relation claims, each stated by one memory (graph_claims); lookup
by exact name or alias, as entity cards (graph_cards), and a bounded walk over
relations (graph_traversal). Writing happens inside the memory tools'
transaction (services/store/domain/memory_writes.py calls `GraphWriter`);
reading inside the caller's, so row-level security makes a claim visible
exactly when its memory is, and an entity only through a visible mention."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from recallatron import errors
from recallatron.vocabulary import (
    MAX_ENTITY_NAME,
    MAX_HOPS,
    MAX_LOOKUP_ENTITIES,
    MAX_QUERY_CHARS,
    MAX_RECALL_ENTITIES,
)
from services.store.domain import graph_rules as rules
from services.store.domain import validation as v
from services.store.domain.graph_cards import (
    EntityCard,
    EntityRelationView,
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
    "ClaimIn",
    "EntityCard",
    "EntityIn",
    "EntityRefView",
    "EntityRelationView",
    "GraphIn",
    "GraphStore",
    "GraphWriter",
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
    key = rules.name_key(name)
    if not key:
        raise errors.InvalidArgument("name", "is required")
    params: dict[str, Any] = {
        "key": key,
        "prefix": _like_escaped(key) + "%",
        "word_prefix": "% " + _like_escaped(key) + "%",
        "at": as_of or datetime.now(UTC),
        "history": include_history,
        "limit": MAX_LOOKUP_ENTITIES,
    }
    # Below MIN_FUZZY_CHARS only exact matches count (a letter or two would
    # match at random).
    fuzzy = partial and len(key) >= MIN_FUZZY_CHARS
    return (gq.LOOKUP_PARTIAL if fuzzy else gq.LOOKUP), params


class GraphStore(InWorkspaces):
    def lookup(
        self,
        caller: Caller,
        name: str,
        as_of: datetime | None,
        include_history: bool = False,
        partial: bool = False,
    ) -> list[EntityCard]:
        """Every entity the caller may see whose name or current alias is
        ``name`` (normalised); ``partial``: then those whose name or alias
        starts with it (or has a word that does), then those alike despite a
        typo. Each with
        its claims current at ``as_of`` (now by default) or, with the history,
        all of them. Two claims that disagree are both returned, newest
        statement first. Below :data:`MIN_FUZZY_CHARS` characters only exact
        matches count (a letter or two would match at random)."""
        statement, params = lookup_statement(name, as_of, include_history, partial)
        pool = self.control.caller_pool(caller)
        with caller_transaction(pool, caller, GENERIC_PLANS) as conn:
            return entity_cards(conn, conn.execute(statement, params).fetchall(), params)

    def named_in(self, caller: Caller, text: str) -> list[EntityCard]:
        """The entities ``text`` names exactly: every run of up to
        MAX_NAME_WORDS words (ends stripped of punctuation) that is the name
        or a current alias of an entity the caller may see, as lookup gives
        it now. For recall's entity cards; a query naming nothing costs one
        probe of the name indexes, beneath no policy (migration 0022)."""
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
        if not 1 <= hops <= MAX_HOPS:
            raise errors.InvalidArgument("hops", f"must lie in [1, {MAX_HOPS}]")
        if len(predicates) > MAX_PREDICATES:
            raise errors.InvalidArgument("predicates", f"at most {MAX_PREDICATES} allowed")
        wanted = [rules.identifier(p, f"predicates[{i}]") for i, p in enumerate(predicates)]
        at = as_of or datetime.now(UTC)
        with self.transaction(caller) as conn:
            return neighborhood(conn, start, hops, wanted, at)
