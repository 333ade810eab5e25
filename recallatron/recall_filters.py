"""Recall's filters (RecallFilters) checked by one set of rules: the gateway
refuses a bad filter with these before any work (no rank call, no query
embedding, no store call), and the store, which any caller of it may reach,
checks what it is sent with the same rules and words."""

from __future__ import annotations

from collections.abc import Sequence

from recallatron import errors
from recallatron.ids import uuid_list
from recallatron.vocabulary import KIND, MAX_FILTER_ENTITIES

KINDS_FIELD = "filters.kinds"
ENTITIES_FIELD = "filters.mention_entity_ids"


def kinds(values: Sequence[int]) -> list[str]:
    """Each kind's name; UNSPECIFIED or a number outside the enum is refused
    naming ``filters.kinds[i]``."""
    names = []
    for i, value in enumerate(values):
        name = KIND.parse(value, f"{KINDS_FIELD}[{i}]")
        if name is None:
            raise errors.InvalidArgument(f"{KINDS_FIELD}[{i}]", "must be a kind")
        names.append(name)
    return names


def mention_entity_ids(values: Sequence[str]) -> list[str]:
    """At most MAX_FILTER_ENTITIES ids, each a UUID, no duplicates; canonical."""
    return uuid_list(values, ENTITIES_FIELD, MAX_FILTER_ENTITIES)


def check(kind_values: Sequence[int], entity_ids: Sequence[str]) -> None:
    """Every rule of recall's filters (include_superseded, a bool, has none)."""
    kinds(kind_values)
    mention_entity_ids(entity_ids)
