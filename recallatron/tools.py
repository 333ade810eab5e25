"""The tools as agents see them, one definition each: a name, a title, the
description and the gateway method that answers it, whose messages
(protos/recallatron/v1/gateway.proto) are the tool's request and response. The
JSON input schema and the arguments -> request conversion
(recallatron/protojson.py), the answer's JSON and its output schema
(recallatron/protojson_answers.py) all come from those messages and the
overlay below: what a descriptor cannot say. One place, shared by the
gateway's DescribeTools and any agent-facing adapter (MCP). The names and
limits are recallatron.vocabulary's, the ones the servers check."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypedDict

from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass

from recallatron.argument_paths import argument_path
from recallatron.owner_tools import OWNER_SHOWN, OWNER_TOOLS
from recallatron.protojson import (
    JSON,
    Arg,
    Args,
    input_schema,
    to_message,
)
from recallatron.protojson_answers import Shown, output_schema, to_json
from recallatron.tool_args import (
    BODY,
    GRAPH,
    IDENTIFIER,
    NESTED,
    PAGE_TOKEN,
    PURPOSE,
    REASON,
    REPLACE_CLAIMS,
    REQUEST_ID,
    REQUIRED_ID,
    REQUIRED_REASON,
    REVISION_CHECKED,
    TITLE,
    UNIQUE,
    UNIT,
    UUID,
    new_memory,
    window_to,
)
from recallatron.v1 import common_pb2 as cpb
from recallatron.v1 import gateway_pb2 as pb
from recallatron.vocabulary import (
    DEFAULT_RECALL_LIMIT,
    MAX_CARD_ITEMS,
    MAX_ENTITY_NAME,
    MAX_HOPS,
    MAX_LINKS,
    MAX_NEIGHBOR_EDGES,
    MAX_NEIGHBOR_NODES,
    MAX_QUERY_CHARS,
    MAX_READ_IDS,
    MAX_RECALL_LIMIT,
    MAX_TIMELINE_EVENTS,
    RECALL_LIMIT_RULE,
)

# Why a graph answer is to be weighed, not trusted: said once, in every graph tool.
_CLAIM_CAVEAT = (
    "Every attribute, relation and alias is a claim: a dated statement made by one memory "
    "(memory_id), not current truth. Read the stating memory before relying on it; two "
    "claims that disagree are both returned, newest statement first."
)

# -- answers: how they read best ------------------------------------------------------


def _names(*names: str) -> frozenset[str]:
    return frozenset(names)


def _order(names: str) -> tuple[str, ...]:
    return tuple(names.split())


SHOWN: dict[str, Shown] = {
    # Date and provenance first: a memory is someone's dated claim, weighed first.
    cpb.Memory.DESCRIPTOR.full_name: Shown(
        first=_order(
            "id created_at created_by origin confidence revision superseded_by_id episode_id "
            "links supersedes superseded_by mentions audience purposes kind title body updated_at"
        ),
        empty_is_null=_names("superseded_by_id", "episode_id"),
        only_if={"omitted": "provenance_cut"},
    ),
    # A linked memory the caller may not see shows visible: false, no id.
    cpb.MemoryRef.DESCRIPTOR.full_name: Shown(only_if={"title": "visible", "kind": "visible"}),
    cpb.EntityRef.DESCRIPTOR.full_name: Shown(empty_is_null=_names("type")),
    cpb.EntityCard.DESCRIPTOR.full_name: Shown(empty_is_null=_names("type")),
    cpb.GraphNode.DESCRIPTOR.full_name: Shown(inline=_names("entity")),
    cpb.RecallResult.DESCRIPTOR.full_name: Shown(inline=_names("memory")),
    cpb.RecallScores.DESCRIPTOR.full_name: Shown(digits={"fused_score": 6, "agreement_score": 4}),
    cpb.RecallOutcome.DESCRIPTOR.full_name: Shown(
        # Whether the arms took part, then the entities the query names
        # exactly (as lookup gives them), then the memories found.
        first=_order(
            "nothing_relevant mode dense_available dense_unavailable_reason not_embedded "
            "dense_behind_reason reranked rerank_unavailable_reason counts entities "
            "more_entities entities_unavailable_reason"
        ),
        empty_is_null=_names(
            "dense_unavailable_reason",
            "dense_behind_reason",
            "rerank_unavailable_reason",
            "entities_unavailable_reason",
            "history_unavailable_reason",
        ),
    ),
    pb.RecallResponse.DESCRIPTOR.full_name: Shown(inline=_names("outcome")),
    cpb.TimelineEvent.DESCRIPTOR.full_name: Shown(empty_is_null=_names("entity_id")),
    pb.TimelineResponse.DESCRIPTOR.full_name: Shown(empty_is_null=_names("next_page_token")),
    pb.LookupResponse.DESCRIPTOR.full_name: Shown(empty_is_null=_names("next_page_token")),
    **OWNER_SHOWN,
}


# -- the tools -----------------------------------------------------------------------

_MEMORY_SERVICE = pb.DESCRIPTOR.services_by_name["MemoryService"]


class Hints(TypedDict):
    """A tool's annotations by MCP's names, the same in the gateway's
    ToolAnnotations message."""

    read_only_hint: bool
    destructive_hint: bool
    idempotent_hint: bool
    open_world_hint: bool


@dataclass(frozen=True)
class Tool:
    name: str
    # A short human name (MCP's title).
    title: str
    description: str
    # The MemoryService method answering it (its messages: request, response).
    method: str
    # The request's fields as arguments (nested messages: NESTED).
    args: Mapping[str, Arg]
    # What calling it does, for agents (MCP tool annotations): every tool works
    # only on this workspace's memory (a closed world); idempotent, the same
    # arguments again change nothing more (a write's request_id replays it).
    read_only: bool
    destructive: bool
    idempotent: bool = True
    request: type[Message] = field(init=False)
    response: type[Message] = field(init=False)
    input_schema: JSON = field(init=False)
    output_schema: JSON = field(init=False)

    def __post_init__(self) -> None:
        method = _MEMORY_SERVICE.methods_by_name[self.method]
        made = {
            "request": GetMessageClass(method.input_type),
            "response": GetMessageClass(method.output_type),
            "input_schema": input_schema(method.input_type, self.table),
            "output_schema": output_schema(method.output_type, SHOWN),
        }
        for key, value in made.items():
            object.__setattr__(self, key, value)

    @property
    def table(self) -> dict[str, Args]:
        request = _MEMORY_SERVICE.methods_by_name[self.method].input_type
        return {**NESTED, request.full_name: Args(self.args)}

    @property
    def hints(self) -> Hints:
        """What calling it does, as MCP annotates a tool (an unannotated one
        reads as destructive and open-world); no tool reaches past the
        workspace's memory, so none is open-world."""
        return Hints(
            read_only_hint=self.read_only,
            destructive_hint=self.destructive,
            idempotent_hint=self.idempotent,
            open_world_hint=False,
        )

    def schema_json(self) -> str:
        return json.dumps(self.input_schema, sort_keys=True)

    def argument_of(self, field_path: str) -> str:
        """A request field a refusal names, as this tool's arguments name it."""
        request = _MEMORY_SERVICE.methods_by_name[self.method].input_type
        return argument_path(request, self.table, field_path)

    def request_of(self, arguments: Mapping[str, Any]) -> Message:
        """The request the (schema-checked) arguments give; ValueError names
        an argument the schema cannot check, such as a time without offset."""
        return to_message(self.request, arguments, self.table)

    def answer(self, response: Message) -> JSON:
        """The response as the agent reads it (conforms to output_schema)."""
        return to_json(response, SHOWN)


TOOLS: tuple[Tool, ...] = (
    Tool(
        "recall",
        "Recall memories",
        "Search your memories by meaning and by words. Read before you trust: dense search "
        "returns the nearest rows, not the relevant ones, so a result can be close in wording "
        "and still beside the point. Each memory is a dated claim made by someone at a time, "
        "not current truth: check its date, confidence and whether it was superseded. Read the "
        "provenance (derived_from and about links, supersession, mentions) before the items. "
        "The response says whether the dense arm and the re-ranker took part "
        "(dense_available, reranked); when they did not, results are lexical or unranked, "
        "never refused. not_embedded above 0 (with dense_behind_reason) counts memories you "
        "may see that search by meaning cannot find yet (just written): an empty dense "
        "answer then means not found yet, not absent. nothing_relevant true means no result "
        "was judged relevant to the "
        "query (none close enough in meaning, none holding every word of it): the nearest "
        "rows still come back, but treat "
        "them as likely beside the point and say you found nothing on it rather than answer "
        "from them; false is no promise that a result answers. A result recorded just "
        "before or after one of the best in the same conversation or event (episode_rank "
        "above 0) was moved up for it, the more so the surer that result: read it as that "
        "result's context. When the "
        "query names an "
        "entity exactly, its card (as lookup gives it) comes beside the results in entities "
        "(cards too large to fit beside them are named in more_entities: look them up); "
        "mentions restricts the results to memories mentioning the given entity ids. "
        "include_history (workspace owners only: for anyone else it adds nothing; for "
        "purposes other than assist and audit it adds nothing and "
        "history_unavailable_reason says why) also "
        "searches old conversation turns brought over by migration, by their words, "
        "returned apart in history (history_left_out counts turns too long to fit): "
        "evidence of what was said, not memories.",
        "Recall",
        {
            "query": Arg({"maxLength": MAX_QUERY_CHARS}, required=True),
            "limit": Arg(
                {
                    "minimum": 0,
                    "maximum": MAX_RECALL_LIMIT,
                    "default": DEFAULT_RECALL_LIMIT,
                    "description": f"How many results: {RECALL_LIMIT_RULE}.",
                }
            ),
            "purpose": PURPOSE,
            "filters": Arg(inline=True),
            "skip_rerank": Arg(hidden=True),
            "include_history": Arg({"default": False}),
        },
        read_only=True,
        destructive=False,
    ),
    Tool(
        "read",
        "Read memories",
        "Read full memories by id, with provenance: links (with titles of linked memories you "
        "may see), the supersession chain both ways, mentions, revision, origin, confidence, "
        "audience, purposes and times. An id you may not see reads as not found. Long "
        "provenance lists are cut (provenance_cut, omitted counts what was left out); "
        "memories past the answer's size are left to another call: read more_ids.",
        "Read",
        {
            "ids": Arg(
                {"minItems": 1, "maxItems": MAX_READ_IDS, **UNIQUE}, items=UUID, required=True
            ),
            "purpose": PURPOSE,
        },
        read_only=True,
        destructive=False,
    ),
    Tool(
        "remember",
        "Store a new memory",
        "Store a new memory (origin told) that someone plainly told you. Give a kind, a short "
        "title and the body; say who may see it (default: only the member you act for) and "
        "for which purposes (default: assist). It may also state graph claims (attributes, "
        "relations, aliases of entities); every entity they name is mentioned by the memory, "
        "and the claims are visible, change and vanish exactly with it.",
        "Remember",
        {
            "request_id": REQUEST_ID,
            **new_memory("Default: only you."),
            "about_ids": Arg({"maxItems": MAX_LINKS, **UNIQUE}, items=UUID, name="about"),
            "episode_id": Arg(
                {**UUID, "description": "The episode (conversation or event) it belongs to."}
            ),
            "purpose": PURPOSE,
            "occurred_at": Arg(hidden=True),
        },
        read_only=False,
        destructive=False,
    ),
    Tool(
        "derive",
        "Derive a conclusion",
        "Store a conclusion drawn from memories you can see (origin derived). Its audience and "
        "purposes are the intersection of its sources'; you may narrow them, never widen them. "
        "Sources with no common audience or purpose refuse the derivation.",
        "Derive",
        {
            "request_id": REQUEST_ID,
            "source_ids": Arg(
                {"minItems": 1, "maxItems": MAX_LINKS, **UNIQUE},
                items=UUID,
                name="sources",
                required=True,
            ),
            **new_memory(
                "Default: the intersection of its sources' audiences; you may narrow it, "
                "never widen it."
            ),
            "purpose": PURPOSE,
        },
        read_only=False,
        destructive=False,
    ),
    Tool(
        "correct",
        "Correct a memory",
        "Fix a memory in place (revision + 1) with a reason. Pass the revision you read; if "
        "someone changed it since, the call is refused with the current revision: read again. "
        "Claims given replace the memory's current claims (the old ones stay in its history).",
        "Correct",
        {
            **REVISION_CHECKED,
            "title": Arg(TITLE),
            "body": BODY,
            "confidence": Arg(UNIT),
            **GRAPH,
            "replace_claims": Arg(REPLACE_CLAIMS),
            "reason": REQUIRED_REASON,
            "purpose": PURPOSE,
        },
        read_only=False,
        # Overwrites title, body or confidence in place.
        destructive=True,
    ),
    Tool(
        "supersede",
        "Supersede a memory",
        "Replace a memory with a new one when the facts changed; the old one stays readable and "
        "points to its successor (if the successor is forgotten, the old one is current again). "
        "Pass the revision you read. The new memory carries the old "
        "one's current claims unless you give claims (or replace_claims). A derived memory's "
        "successor stays derived: you may narrow its audience and purposes, never widen them.",
        "Supersede",
        {
            **REVISION_CHECKED,
            **new_memory(
                "Default: the old memory's audience (and its purposes); for a derived memory "
                "you may narrow them, never widen them."
            ),
            "replace_claims": Arg(
                {
                    **REPLACE_CLAIMS,
                    "description": "State only the claims given (none given: none); without "
                    "it the new memory carries the old one's current claims.",
                }
            ),
            "reason": REASON,
            "purpose": PURPOSE,
            "source_ids": Arg(hidden=True),
        },
        read_only=False,
        # Nothing is lost: the old memory stays readable and points to its successor.
        destructive=False,
    ),
    Tool(
        "forget",
        "Forget a memory",
        "Invalidate a memory with a reason, only when asked: its text and embedding are purged "
        "and a tombstone keeps links valid. The tombstone keeps the reason exactly as you give "
        "it, so say why in general terms and never repeat the forgotten content in it. "
        "Forgetting a memory that superseded another makes the one it replaced current again "
        "(no successor, recalled and changeable): supersede that one too if it no longer "
        "holds. Nothing expires by itself.",
        "Forget",
        {
            "request_id": REQUEST_ID,
            "id": REQUIRED_ID,
            "reason": REQUIRED_REASON,
            "purpose": PURPOSE,
            "expected_revision": Arg(
                {
                    "minimum": 0,
                    "default": 0,
                    "description": "The revision you read; if the memory changed since, nothing "
                    "is forgotten (read it again). 0: not checked.",
                }
            ),
        },
        read_only=False,
        # Purges the text and the embedding.
        destructive=True,
    ),
    Tool(
        "lookup",
        "Look up an entity",
        "What the memory knows about an entity, by its exact name or alias (case, accents and "
        "surrounding spaces do not matter). With partial, also by part of a name or despite "
        "a typo: after the exact matches come names or aliases that begin with it or have a "
        "word that does, then names alike (from three characters). Returns the entities you "
        "may see (two may share a name; nothing merges them by "
        "itself), each with its type, aliases, current attributes and relations, and the ids "
        "of the memories that mention it. Entities a workspace owner merged answer as one "
        "card, listing the others under merged. "
        + _CLAIM_CAVEAT
        + " as_of answers for a past time; "
        f"include_history adds claims no longer current. At most {MAX_CARD_ITEMS} items per "
        "list (truncated says so). Cards past the answer's size come on the next page: pass "
        "next_page_token (with the same arguments) for more.",
        "Lookup",
        {
            "name": Arg({"maxLength": MAX_ENTITY_NAME}, required=True),
            "as_of": Arg({"description": "Answer as of this time (RFC 3339)."}),
            "purpose": PURPOSE,
            "include_history": Arg({"default": False}),
            "partial": Arg({"default": False}),
            "page_token": PAGE_TOKEN,
        },
        read_only=True,
        destructive=False,
    ),
    Tool(
        "neighbors",
        "Related entities",
        "The entities related to one entity, 1 to "
        f"{MAX_HOPS} hops away over relations you may see, in both directions, optionally "
        "only some predicates. " + _CLAIM_CAVEAT + f" At most {MAX_NEIGHBOR_NODES} nodes and "
        f"{MAX_NEIGHBOR_EDGES} edges, newest statements first (truncated says a cap cut).",
        "Neighbors",
        {
            "entity_id": Arg(UUID, required=True),
            "hops": Arg({"minimum": 1, "maximum": MAX_HOPS, "default": 1}),
            "predicates": Arg({"maxItems": 20}, items=IDENTIFIER),
            "as_of": Arg({"description": "Walk the relations as of this time."}),
            "purpose": PURPOSE,
        },
        read_only=True,
        destructive=False,
    ),
    Tool(
        "timeline",
        "Timeline of events",
        "What happened, in valid-time order: for an entity (entity_id), an episode "
        "(episode_id) or, with neither, the whole workspace, between from and to: memories "
        "written, claims and relations that start or end, corrections and supersessions, "
        "each with the memory that says so. Only what you may see. An event is a dated "
        "statement by a memory, not current truth: read the memory before relying on it. "
        f"At most {MAX_TIMELINE_EVENTS} events per page; pass next_page_token for more.",
        "Timeline",
        {
            "entity_id": Arg(UUID),
            "episode_id": Arg(UUID),
            "from": Arg({"description": "From this time (RFC 3339, inclusive)."}),
            "to": window_to("Until"),
            "page_token": PAGE_TOKEN,
            "purpose": PURPOSE,
        },
        read_only=True,
        destructive=False,
    ),
)
TOOLS += tuple(Tool(**fields) for fields in OWNER_TOOLS)
BY_NAME: dict[str, Tool] = {t.name: t for t in TOOLS}
