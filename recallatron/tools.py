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
    KINDS,
    MAX_BODY,
    MAX_ENTITY_NAME,
    MAX_LINKS,
    MAX_MENTIONS,
    MAX_QUERY_CHARS,
    MAX_READ_IDS,
    MAX_REASON,
    MAX_RECALL_LIMIT,
    MAX_REQUEST_ID,
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
_MENTIONS = {
    "type": "array",
    "maxItems": MAX_MENTIONS,
    "items": {
        "type": "object",
        "properties": {
            "entity_id": {"type": "string", "format": "uuid"},
            "name": {"type": "string", "maxLength": MAX_ENTITY_NAME},
        },
        "description": "An existing entity by id, or a name that creates a new entity.",
    },
}
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
        "never refused.",
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
        "for which purposes (default: assist).",
        _schema(
            {
                "request_id": _REQUEST_ID,
                **_NEW_MEMORY,
                "about": {"type": "array", "items": {"type": "string"}, "maxItems": MAX_LINKS},
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
        "someone changed it since, the call is refused with the current revision: read again.",
        _schema(
            {
                **_REVISION_CHECKED,
                "title": _NEW_MEMORY["title"],
                "body": _NEW_MEMORY["body"],
                "confidence": {"type": "number", "minimum": 0, "maximum": 1},
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
        "points to its successor. Pass the revision you read.",
        _schema(
            {
                **_REVISION_CHECKED,
                **_NEW_MEMORY,
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
)
