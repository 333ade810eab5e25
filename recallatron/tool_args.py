"""The argument overlays of the tools: what a message's descriptor cannot say
(limits, defaults, descriptions, names an agent sees). The first ones the
memory tools (recallatron/tools.py) and an owner's tools
(recallatron/owner_tools.py) share, so that an id, a purpose or a page token
reads and is limited the same in every tool; then the memory tools' own."""

from __future__ import annotations

from typing import Any

from recallatron.protojson import Arg, Args
from recallatron.v1 import common_pb2 as cpb
from recallatron.vocabulary import (
    DEFAULT_PURPOSE,
    IDENTIFIER_PATTERN,
    MAX_ALIASES,
    MAX_BODY,
    MAX_CLAIM_VALUE,
    MAX_CLAIMS,
    MAX_ENTITY_NAME,
    MAX_FILTER_ENTITIES,
    MAX_IDENTIFIER,
    MAX_MENTIONS,
    MAX_REASON,
    MAX_RELATIONS,
    MAX_REQUEST_ID,
    MAX_TITLE,
)

IDENTIFIER: dict[str, Any] = {"pattern": IDENTIFIER_PATTERN, "maxLength": MAX_IDENTIFIER}
# An identifier or "": a proto3 string left empty is one not given, so the
# servers cannot refuse "" where a value is optional (a mention's type), and an
# agent that fills every property with "" must not be refused for it either.
OPTIONAL_IDENTIFIER: dict[str, Any] = {
    "pattern": f"^({IDENTIFIER_PATTERN.removeprefix('^').removesuffix('$')})?$",
    "maxLength": MAX_IDENTIFIER,
}
UUID: dict[str, Any] = {"format": "uuid"}
# A list of ids: the store refuses one given twice ("contains duplicates").
UNIQUE: dict[str, Any] = {"uniqueItems": True}
PURPOSE = Arg(
    {
        "default": DEFAULT_PURPOSE,
        "description": "Why you are asking; only memories stored for this purpose are visible.",
    }
)
# The longest page token a tool answers with, a lookup's: fewer than
# MAX_LOOKUP_ENTITIES ids answered before, a digest of what was asked and a
# time, as JSON in base64 (about 1,200 characters); twice that, to spare.
PAGE_TOKEN = Arg({"maxLength": 2500})


def window_to(until: str) -> Arg:
    """A window's `to`: the servers refuse one not later than its `from`
    (an empty window), so the agent reads that before it is refused."""
    return Arg(
        {"description": f"{until} this time (RFC 3339, exclusive; must be later than from)."}
    )


# -- the memory tools' arguments: what the descriptors cannot say -------------------

UNIT = {"minimum": 0, "maximum": 1}
REQUEST_ID = Arg(
    {
        "maxLength": MAX_REQUEST_ID,
        "description": "Unique per write; a retry with the same id returns the first result.",
    },
    required=True,
)
REQUIRED = Arg(required=True)
# A memory's id: the gateway refuses any other value ("id: must be a UUID").
REQUIRED_ID = Arg(UUID, required=True)
REASON = Arg({"maxLength": MAX_REASON})
REQUIRED_REASON = Arg(REASON.schema, required=True)
VALIDITY = {
    "valid_from": Arg({"description": "When it starts to hold (RFC 3339); open if left out."}),
    "valid_until": Arg({"description": "When it stops holding (RFC 3339); open if left out."}),
    "confidence": Arg({**UNIT, "default": 1}),
}

# The messages inside requests, wherever they appear.
NESTED: dict[str, Args] = {
    cpb.MentionInput.DESCRIPTOR.full_name: Args(
        {
            "entity_id": Arg(UUID),
            "name": Arg({"maxLength": MAX_ENTITY_NAME}),
            "type": Arg(
                {
                    **OPTIONAL_IDENTIFIER,
                    "description": "A new entity's type, such as person or project; "
                    "empty or left out: none.",
                }
            ),
        },
        {
            "description": "An existing entity by id, or a name that creates a new entity "
            "(within one call the same name, ignoring case and accents, is one new entity)."
        },
    ),
    cpb.ClaimInput.DESCRIPTOR.full_name: Args(
        {
            "entity": REQUIRED,
            "attribute": Arg(IDENTIFIER, required=True),
            "value": Arg({"maxLength": MAX_CLAIM_VALUE}, required=True),
            **VALIDITY,
        }
    ),
    cpb.RelationInput.DESCRIPTOR.full_name: Args(
        {
            "subject": REQUIRED,
            "predicate": Arg(IDENTIFIER, required=True),
            "object": REQUIRED,
            **VALIDITY,
        }
    ),
    cpb.AliasInput.DESCRIPTOR.full_name: Args(
        {"entity": REQUIRED, "alias": Arg({"maxLength": MAX_ENTITY_NAME}, required=True)}
    ),
    # Recall takes its filters as arguments of its own (filters: inline).
    cpb.RecallFilters.DESCRIPTOR.full_name: Args(
        {
            # The bound on the entities a recall may be restricted to (the
            # gateway's check, recallatron.recall_filters).
            "mention_entity_ids": Arg(
                {"maxItems": MAX_FILTER_ENTITIES, **UNIQUE}, name="mentions", items=UUID
            ),
            "include_superseded": Arg({"default": False}),
        }
    ),
}

GRAPH = {
    "claims": Arg(
        {
            "maxItems": MAX_CLAIMS,
            "description": "Attribute claims this memory states: entity, attribute, value.",
        }
    ),
    "relations": Arg(
        {
            "maxItems": MAX_RELATIONS,
            "description": "Relation claims this memory states: subject predicate object.",
        }
    ),
    "aliases": Arg(
        {
            "maxItems": MAX_ALIASES,
            "description": "Other names an entity goes by, stated by this memory.",
        }
    ),
}
REPLACE_CLAIMS = {
    "default": False,
    "description": "Replace the current claims by those given (none given: drop them); the "
    "old ones stay in the history.",
}
TITLE = {"maxLength": MAX_TITLE}
BODY = Arg({"maxLength": MAX_BODY})


def new_memory(audience_default: str) -> dict[str, Arg]:
    """A new memory's arguments; who sees it when no audience is given is each
    write's own (the store's rule for that tool)."""
    return {
        "kind": REQUIRED,
        "title": Arg(TITLE, required=True),
        "body": BODY,
        "confidence": Arg({**UNIT, "default": 1}),
        "audience": Arg(
            {"description": f"Who may see it: 'workspace' or a member id. {audience_default}"}
        ),
        "mentions": Arg({"maxItems": MAX_MENTIONS}),
        **GRAPH,
    }


# A change to one memory, refused when it changed since it was read.
REVISION_CHECKED = {
    "request_id": REQUEST_ID,
    "id": REQUIRED_ID,
    "expected_revision": Arg({"minimum": 1}, required=True),
}
