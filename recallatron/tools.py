"""The seven tools as agents see them: names, descriptions and JSON input
schemas. One place, shared by the gateway's DescribeTools and any agent-facing
adapter (MCP). The names and limits are recallatron.vocabulary's, the ones the
servers check."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from recallatron.vocabulary import (
    DEFAULT_PURPOSE,
    DEFAULT_RECALL_LIMIT,
    IDENTIFIER_PATTERN,
    KINDS,
    MAX_ALIASES,
    MAX_BODY,
    MAX_CARD_ITEMS,
    MAX_CLAIM_VALUE,
    MAX_CLAIMS,
    MAX_ENTITY_NAME,
    MAX_HOPS,
    MAX_IDENTIFIER,
    MAX_LINKS,
    MAX_MENTIONS,
    MAX_NEIGHBOR_EDGES,
    MAX_NEIGHBOR_NODES,
    MAX_QUERY_CHARS,
    MAX_READ_IDS,
    MAX_REASON,
    MAX_RECALL_LIMIT,
    MAX_RELATIONS,
    MAX_REQUEST_ID,
    MAX_TIMELINE_EVENTS,
    MAX_TITLE,
    MODES,
    PURPOSES,
)

_PURPOSE_PARAM = {
    "type": "string",
    "enum": list(PURPOSES),
    "default": DEFAULT_PURPOSE,
    "description": "Why you are asking; only memories stored for this purpose are visible.",
}
_AUDIENCE = {
    "description": "Who may see it: 'workspace' or a member id. Default: only you.",
    "type": "string",
}
_IDENTIFIER = {"type": "string", "pattern": IDENTIFIER_PATTERN, "maxLength": MAX_IDENTIFIER}
_ENTITY = {
    "type": "object",
    "properties": {
        "entity_id": {"type": "string", "format": "uuid"},
        "name": {"type": "string", "maxLength": MAX_ENTITY_NAME},
        "type": {**_IDENTIFIER, "description": "A new entity's type, such as person or project."},
    },
    "additionalProperties": False,
    "description": "An existing entity by id, or a name that creates a new entity (within one "
    "call the same name, ignoring case and accents, is one new entity).",
}
_MENTIONS = {"type": "array", "maxItems": MAX_MENTIONS, "items": _ENTITY}
_TIME = {
    "type": "string",
    "format": "date-time",
    "description": "RFC 3339 with its offset, such as 2026-05-01T09:00:00Z.",
}
_VALIDITY = {
    "valid_from": {**_TIME, "description": "When it starts to hold (RFC 3339); open if left out."},
    "valid_until": {**_TIME, "description": "When it stops holding (RFC 3339); open if left out."},
    "confidence": {"type": "number", "minimum": 0, "maximum": 1, "default": 1},
}
_CLAIMS = {
    "type": "array",
    "maxItems": MAX_CLAIMS,
    "description": "Attribute claims this memory states: entity, attribute, value.",
    "items": {
        "type": "object",
        "properties": {
            "entity": _ENTITY,
            "attribute": _IDENTIFIER,
            "value": {"type": "string", "maxLength": MAX_CLAIM_VALUE},
            **_VALIDITY,
        },
        "required": ["entity", "attribute", "value"],
        "additionalProperties": False,
    },
}
_RELATIONS = {
    "type": "array",
    "maxItems": MAX_RELATIONS,
    "description": "Relation claims this memory states: subject predicate object.",
    "items": {
        "type": "object",
        "properties": {
            "subject": _ENTITY,
            "predicate": _IDENTIFIER,
            "object": _ENTITY,
            **_VALIDITY,
        },
        "required": ["subject", "predicate", "object"],
        "additionalProperties": False,
    },
}
_ALIASES = {
    "type": "array",
    "maxItems": MAX_ALIASES,
    "description": "Other names an entity goes by, stated by this memory.",
    "items": {
        "type": "object",
        "properties": {
            "entity": _ENTITY,
            "alias": {"type": "string", "maxLength": MAX_ENTITY_NAME},
        },
        "required": ["entity", "alias"],
        "additionalProperties": False,
    },
}
_GRAPH = {"claims": _CLAIMS, "relations": _RELATIONS, "aliases": _ALIASES}
_REPLACE_CLAIMS = {
    "type": "boolean",
    "default": False,
    "description": "Replace the current claims by those given (none given: drop them); the "
    "old ones stay in the history.",
}
# Why a graph answer is to be weighed, not trusted: said once, in every graph tool.
_CLAIM_CAVEAT = (
    "Every attribute, relation and alias is a claim: a dated statement made by one memory "
    "(memory_id), not current truth. Read the stating memory before relying on it; two "
    "claims that disagree are both returned, newest statement first."
)
_REQUEST_ID = {
    "type": "string",
    "maxLength": MAX_REQUEST_ID,
    "description": "Unique per write; a retry with the same id returns the first result.",
}
_REASON = {"type": "string", "maxLength": MAX_REASON}
# A change to one memory, refused when it changed since it was read.
_REVISION_CHECKED = {
    "request_id": _REQUEST_ID,
    "id": {"type": "string"},
    "expected_revision": {"type": "integer", "minimum": 1},
}
_NEW_MEMORY = {
    "kind": {"type": "string", "enum": list(KINDS)},
    "title": {"type": "string", "maxLength": MAX_TITLE},
    "body": {"type": "string", "maxLength": MAX_BODY},
    "confidence": {"type": "number", "minimum": 0, "maximum": 1, "default": 1},
    "audience": _AUDIENCE,
    "purposes": {"type": "array", "items": {"type": "string", "enum": list(PURPOSES)}},
    "mentions": _MENTIONS,
    **_GRAPH,
}


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    input_schema: dict[str, Any]
    # What calling it does, for agents (MCP tool annotations). Every tool works
    # only on this workspace's memory (a closed world). Idempotent: the same
    # arguments again change nothing more (a write's request_id replays it).
    read_only: bool
    destructive: bool
    idempotent: bool = True

    def schema_json(self) -> str:
        return json.dumps(self.input_schema, sort_keys=True)


def _schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


TOOLS: tuple[Tool, ...] = (
    Tool(
        "recall",
        "Search your memories by meaning and by words. Read before you trust: dense search "
        "returns the nearest rows, not the relevant ones, so a result can be close in wording "
        "and still beside the point. Each memory is a dated claim made by someone at a time, "
        "not current truth: check its date, confidence and whether it was superseded. Read the "
        "provenance (derived_from and about links, supersession, mentions) before the items. "
        "The response says whether the dense arm and the re-ranker took part "
        "(dense_available, reranked); when they did not, results are lexical or unranked, "
        "never refused. When the query names an entity exactly, its card (as lookup gives "
        "it) comes beside the results in entities; mentions restricts the results to "
        "memories mentioning the given entity ids.",
        _schema(
            {
                "query": {"type": "string", "maxLength": MAX_QUERY_CHARS},
                "mode": {"type": "string", "enum": list(MODES)},
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_RECALL_LIMIT,
                    "default": DEFAULT_RECALL_LIMIT,
                },
                "purpose": _PURPOSE_PARAM,
                "kinds": {"type": "array", "items": {"type": "string", "enum": list(KINDS)}},
                "mentions": {"type": "array", "items": {"type": "string", "format": "uuid"}},
                "include_superseded": {"type": "boolean", "default": False},
            },
            ["query"],
        ),
        read_only=True,
        destructive=False,
    ),
    Tool(
        "read",
        "Read full memories by id, with provenance: links (with titles of linked memories you "
        "may see), the supersession chain both ways, mentions, revision, origin, confidence, "
        "audience, purposes and times. An id you may not see reads as not found.",
        _schema(
            {
                "ids": {"type": "array", "items": {"type": "string"}, "maxItems": MAX_READ_IDS},
                "purpose": _PURPOSE_PARAM,
            },
            ["ids"],
        ),
        read_only=True,
        destructive=False,
    ),
    Tool(
        "remember",
        "Store a new memory (origin told) that someone plainly told you. Give a kind, a short "
        "title and the body; say who may see it (default: only the member you act for) and "
        "for which purposes (default: assist). It may also state graph claims (attributes, "
        "relations, aliases of entities); every entity they name is mentioned by the memory, "
        "and the claims are visible, change and vanish exactly with it.",
        _schema(
            {
                "request_id": _REQUEST_ID,
                **_NEW_MEMORY,
                "about": {"type": "array", "items": {"type": "string"}, "maxItems": MAX_LINKS},
                "episode_id": {
                    "type": "string",
                    "format": "uuid",
                    "description": "The episode (conversation or event) it belongs to.",
                },
                "purpose": _PURPOSE_PARAM,
            },
            ["request_id", "kind", "title"],
        ),
        read_only=False,
        destructive=False,
    ),
    Tool(
        "derive",
        "Store a conclusion drawn from memories you can see (origin derived). Its audience and "
        "purposes are the intersection of its sources'; you may narrow them, never widen them. "
        "Sources with no common audience or purpose refuse the derivation.",
        _schema(
            {
                "request_id": _REQUEST_ID,
                "sources": {
                    "type": "array",
                    "items": {"type": "string"},
                    "minItems": 1,
                    "maxItems": MAX_LINKS,
                },
                **_NEW_MEMORY,
                "purpose": _PURPOSE_PARAM,
            },
            ["request_id", "sources", "kind", "title"],
        ),
        read_only=False,
        destructive=False,
    ),
    Tool(
        "correct",
        "Fix a memory in place (revision + 1) with a reason. Pass the revision you read; if "
        "someone changed it since, the call is refused with the current revision: read again. "
        "Claims given replace the memory's current claims (the old ones stay in its history).",
        _schema(
            {
                **_REVISION_CHECKED,
                "title": _NEW_MEMORY["title"],
                "body": _NEW_MEMORY["body"],
                "confidence": {"type": "number", "minimum": 0, "maximum": 1},
                **_GRAPH,
                "replace_claims": _REPLACE_CLAIMS,
                "reason": _REASON,
                "purpose": _PURPOSE_PARAM,
            },
            ["request_id", "id", "expected_revision", "reason"],
        ),
        read_only=False,
        # Overwrites title, body or confidence in place.
        destructive=True,
    ),
    Tool(
        "supersede",
        "Replace a memory with a new one when the facts changed; the old one stays readable and "
        "points to its successor. Pass the revision you read. The new memory carries the old "
        "one's current claims unless you give claims (or replace_claims).",
        _schema(
            {
                **_REVISION_CHECKED,
                **_NEW_MEMORY,
                "replace_claims": {
                    **_REPLACE_CLAIMS,
                    "description": "State only the claims given (none given: none); without "
                    "it the new memory carries the old one's current claims.",
                },
                "reason": _REASON,
                "purpose": _PURPOSE_PARAM,
            },
            ["request_id", "id", "expected_revision", "kind", "title"],
        ),
        read_only=False,
        # Nothing is lost: the old memory stays readable and points to its successor.
        destructive=False,
    ),
    Tool(
        "forget",
        "Invalidate a memory with a reason, only when asked: its text and embedding are purged "
        "and a tombstone keeps links valid. The tombstone keeps the reason exactly as you give "
        "it, so say why in general terms and never repeat the forgotten content in it. "
        "Nothing expires by itself.",
        _schema(
            {
                "request_id": _REQUEST_ID,
                "id": {"type": "string"},
                "reason": _REASON,
                "purpose": _PURPOSE_PARAM,
            },
            ["request_id", "id", "reason"],
        ),
        read_only=False,
        # Purges the text and the embedding.
        destructive=True,
    ),
    Tool(
        "lookup",
        "What the memory knows about an entity, by its exact name or alias (case, accents and "
        "surrounding spaces do not matter; a part of a name does not match). Returns every "
        "entity of that name you may see (two may share a name; nothing merges them by "
        "itself), each with its type, aliases, current attributes and relations, and the ids "
        "of the memories that mention it. Entities a workspace owner merged answer as one "
        "card, listing the others under merged. "
        + _CLAIM_CAVEAT
        + " as_of answers for a past time; "
        f"include_history adds claims no longer current. At most {MAX_CARD_ITEMS} items per "
        "list (truncated says so).",
        _schema(
            {
                "name": {"type": "string", "maxLength": MAX_ENTITY_NAME},
                "as_of": {**_TIME, "description": "Answer as of this time (RFC 3339)."},
                "include_history": {"type": "boolean", "default": False},
                "purpose": _PURPOSE_PARAM,
            },
            ["name"],
        ),
        read_only=True,
        destructive=False,
    ),
    Tool(
        "neighbors",
        "The entities related to one entity, 1 to "
        f"{MAX_HOPS} hops away over relations you may see, in both directions, optionally "
        "only some predicates. " + _CLAIM_CAVEAT + f" At most {MAX_NEIGHBOR_NODES} nodes and "
        f"{MAX_NEIGHBOR_EDGES} edges, newest statements first (truncated says a cap cut).",
        _schema(
            {
                "entity_id": {"type": "string", "format": "uuid"},
                "hops": {"type": "integer", "minimum": 1, "maximum": MAX_HOPS, "default": 1},
                "predicates": {"type": "array", "items": _IDENTIFIER, "maxItems": 20},
                "as_of": {**_TIME, "description": "Walk the relations as of this time."},
                "purpose": _PURPOSE_PARAM,
            },
            ["entity_id"],
        ),
        read_only=True,
        destructive=False,
    ),
    Tool(
        "timeline",
        "What happened, in valid-time order: for an entity (entity_id), an episode "
        "(episode_id) or, with neither, the whole workspace, between from and to: memories "
        "written, claims and relations that start or end, corrections and supersessions, "
        "each with the memory that says so. Only what you may see. An event is a dated "
        "statement by a memory, not current truth: read the memory before relying on it. "
        f"At most {MAX_TIMELINE_EVENTS} events per page; pass next_page_token for more.",
        _schema(
            {
                "entity_id": {"type": "string", "format": "uuid"},
                "episode_id": {"type": "string", "format": "uuid"},
                "from": {**_TIME, "description": "From this time (RFC 3339, inclusive)."},
                "to": {**_TIME, "description": "Until this time (RFC 3339, exclusive)."},
                "page_token": {"type": "string", "maxLength": 1000},
                "purpose": _PURPOSE_PARAM,
            },
            [],
        ),
        read_only=True,
        destructive=False,
    ),
)
