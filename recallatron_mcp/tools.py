"""The seven tools as MCP calls: JSON arguments (shaped by the schemas in
recallatron/tools.py) become gateway requests; gateway answers become
JSON an agent can read; gRPC errors become messages that say what was wrong
and what to do next (the advice of the shared relay, recallatron/grpcclient.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc
import jsonschema
from google.protobuf import timestamp_pb2

from recallatron.client import Client, aliases, audience, claims, relations
from recallatron.grpcclient import PeerStatus, advice, peer_status
from recallatron.tools import TOOLS
from recallatron.v1 import common_pb2 as cpb
from recallatron.v1 import gateway_pb2 as pb
from recallatron.vocabulary import (
    DEFAULT_PURPOSE,
    DEFAULT_RECALL_LIMIT,
    KIND,
    LINK_KIND,
    MODE,
    ORIGIN,
    PURPOSE,
    REVISION_ACTION,
)

SCHEMAS = {t.name: t.input_schema for t in TOOLS}


class ToolError(Exception):
    """A failure the agent should read: what was wrong and what to do."""


# -- arguments -> requests -------------------------------------------------------

# How much of a caller's own value an error quotes: enough to recognise it;
# a 5 MB argument must not come back as a 5 MB error in the agent's context.
QUOTE_CHARS = 80
# And the most one problem's description may take.
PROBLEM_CHARS = 300


def clip(text: str, limit: int = QUOTE_CHARS) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text)} characters)"


def _problem(err: jsonschema.ValidationError) -> str:
    """A schema violation's message with the offending value quoted short."""
    quoted = repr(err.instance)
    message = str(err.message).replace(quoted, clip(quoted))
    return clip(message, PROBLEM_CHARS)


def check_arguments(name: str, arguments: dict[str, Any]) -> None:
    """The tool's own JSON schema, checked before anything is sent."""
    schema = SCHEMAS.get(name)
    if schema is None:
        raise ToolError(f"unknown tool {clip(repr(name))}; the tools are: {', '.join(SCHEMAS)}")
    validator = jsonschema.Draft202012Validator(schema)
    problems = sorted(validator.iter_errors(arguments), key=lambda err: list(err.path))
    if problems:
        lines = []
        for err in problems[:5]:
            where = ".".join(str(p) for p in err.absolute_path) or "(arguments)"
            lines.append(f"{clip(where)}: {_problem(err)}")
        raise ToolError(
            "INVALID_ARGUMENT (nothing was sent): "
            + "; ".join(lines)
            + f". Fix the arguments to match the {name} tool's input schema and call again."
        )


def _purpose(args: dict[str, Any]) -> cpb.Purpose.ValueType:
    return PURPOSE.value(args.get("purpose", DEFAULT_PURPOSE))


def _mentions(items: list[dict[str, str]]) -> list[cpb.MentionInput]:
    out = []
    for item in items:
        if "entity_id" in item:
            out.append(cpb.MentionInput(entity_id=item["entity_id"]))
        elif "name" in item:
            out.append(cpb.MentionInput(name=item["name"], type=item.get("type", "")))
        else:
            raise ToolError(
                "INVALID_ARGUMENT (nothing was sent): mentions: each item needs an entity_id "
                "or a name. Fix it and call again."
            )
    return out


def _new_memory_fields(req: Any, args: dict[str, Any]) -> None:
    """The fields remember, derive and supersede share."""
    req.kind = KIND.value(args["kind"])
    req.title = args["title"]
    req.body = args.get("body", "")
    if "confidence" in args:
        req.confidence = float(args["confidence"])
    aud = audience(args.get("audience"))
    if aud is not None:
        req.audience.CopyFrom(aud)
    req.purposes.extend(PURPOSE.value(p) for p in args.get("purposes", []))
    req.mentions.extend(_mentions(args.get("mentions", [])))
    _graph_fields(req, args)


def _graph_fields(req: Any, args: dict[str, Any]) -> None:
    req.claims.extend(claims(args.get("claims", [])))
    req.relations.extend(relations(args.get("relations", [])))
    req.aliases.extend(aliases(args.get("aliases", [])))
    if "replace_claims" in args:
        req.replace_claims = bool(args["replace_claims"])


def _recall(client: Client, args: dict[str, Any]) -> dict[str, Any]:
    req = pb.RecallRequest(
        query=args["query"],
        mode=MODE.value(args["mode"]) if "mode" in args else cpb.RECALL_MODE_UNSPECIFIED,
        limit=int(args.get("limit", DEFAULT_RECALL_LIMIT)),
        purpose=_purpose(args),
        filters=cpb.RecallFilters(
            kinds=[KIND.value(k) for k in args.get("kinds", [])],
            mention_entity_ids=list(args.get("mentions", [])),
            include_superseded=bool(args.get("include_superseded", False)),
        ),
    )
    return outcome_json(client.call(client.memory.Recall, req).outcome)


def _read(client: Client, args: dict[str, Any]) -> dict[str, Any]:
    resp = client.call(
        client.memory.Read, pb.ReadRequest(ids=list(args["ids"]), purpose=_purpose(args))
    )
    return {"memories": [memory_json(m) for m in resp.memories]}


def _remember(client: Client, args: dict[str, Any]) -> dict[str, Any]:
    req = pb.RememberRequest(request_id=args["request_id"], purpose=_purpose(args))
    _new_memory_fields(req, args)
    req.about_ids.extend(args.get("about", []))
    req.episode_id = args.get("episode_id", "")
    resp = client.call(client.memory.Remember, req)
    return {"memory": memory_json(resp.memory), "replayed": resp.replayed}


def _derive(client: Client, args: dict[str, Any]) -> dict[str, Any]:
    req = pb.DeriveRequest(
        request_id=args["request_id"], source_ids=list(args["sources"]), purpose=_purpose(args)
    )
    _new_memory_fields(req, args)
    resp = client.call(client.memory.Derive, req)
    return {"memory": memory_json(resp.memory), "replayed": resp.replayed}


def _correct(client: Client, args: dict[str, Any]) -> dict[str, Any]:
    req = pb.CorrectRequest(
        request_id=args["request_id"],
        id=args["id"],
        expected_revision=int(args["expected_revision"]),
        reason=args["reason"],
        purpose=_purpose(args),
    )
    for key in ("title", "body"):
        if key in args:
            setattr(req, key, args[key])
    if "confidence" in args:
        req.confidence = float(args["confidence"])
    _graph_fields(req, args)
    resp = client.call(client.memory.Correct, req)
    return {"memory": memory_json(resp.memory), "replayed": resp.replayed}


def _supersede(client: Client, args: dict[str, Any]) -> dict[str, Any]:
    req = pb.SupersedeRequest(
        request_id=args["request_id"],
        id=args["id"],
        expected_revision=int(args["expected_revision"]),
        reason=args.get("reason", ""),
        purpose=_purpose(args),
    )
    _new_memory_fields(req, args)
    resp = client.call(client.memory.Supersede, req)
    return {
        "memory": memory_json(resp.memory),
        "superseded": memory_json(resp.superseded),
        "replayed": resp.replayed,
    }


def _forget(client: Client, args: dict[str, Any]) -> dict[str, Any]:
    req = pb.ForgetRequest(
        request_id=args["request_id"], id=args["id"], reason=args["reason"], purpose=_purpose(args)
    )
    resp = client.call(client.memory.Forget, req)
    return {"id": resp.id, "forgotten_at": _time(resp.forgotten_at), "replayed": resp.replayed}


def _lookup(client: Client, args: dict[str, Any]) -> dict[str, Any]:
    resp = client.lookup(
        args["name"],
        as_of=args.get("as_of"),
        purpose=args.get("purpose", DEFAULT_PURPOSE),
        include_history=bool(args.get("include_history", False)),
    )
    return {"entities": [card_json(c) for c in resp.entities]}


def _neighbors(client: Client, args: dict[str, Any]) -> dict[str, Any]:
    resp = client.neighbors(
        args["entity_id"],
        hops=int(args.get("hops", 1)),
        predicates=list(args.get("predicates", [])),
        as_of=args.get("as_of"),
        purpose=args.get("purpose", DEFAULT_PURPOSE),
    )
    return {
        "nodes": [
            {**_entity(n.entity), "depth": n.depth, "merged": [_entity(m) for m in n.merged]}
            for n in resp.nodes
        ],
        "edges": [_relation(r) for r in resp.edges],
        "truncated": resp.truncated,
    }


def _timeline(client: Client, args: dict[str, Any]) -> dict[str, Any]:
    resp = client.timeline(
        args.get("entity_id", ""),
        args.get("episode_id", ""),
        start=args.get("from"),
        end=args.get("to"),
        page_token=args.get("page_token", ""),
        purpose=args.get("purpose", DEFAULT_PURPOSE),
    )
    return {
        "events": [
            {
                "at": _time(e.at),
                "kind": e.kind,
                "memory_id": e.memory_id,
                "entity_id": e.entity_id or None,
                "summary": e.summary,
            }
            for e in resp.events
        ],
        "next_page_token": resp.next_page_token or None,
    }


CALLS: dict[str, Callable[[Client, dict[str, Any]], dict[str, Any]]] = {
    "recall": _recall,
    "read": _read,
    "remember": _remember,
    "derive": _derive,
    "correct": _correct,
    "supersede": _supersede,
    "forget": _forget,
    "lookup": _lookup,
    "neighbors": _neighbors,
    "timeline": _timeline,
}
assert set(CALLS) == set(SCHEMAS), "every tool has exactly one call"


def call(client: Client, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """Runs one tool; raises ToolError with an actionable message on failure."""
    check_arguments(name, arguments)
    try:
        return CALLS[name](client, arguments)
    except ValueError as exc:  # a time that is not RFC 3339
        raise ToolError(
            f"INVALID_ARGUMENT (nothing was sent): {exc}. Fix it and call again."
        ) from None
    except grpc.RpcError as exc:
        raise ToolError(failure(peer_status(exc))) from None


# -- answers -> JSON ---------------------------------------------------------------


def _time(ts: timestamp_pb2.Timestamp) -> str:
    return ts.ToJsonString() if ts.seconds or ts.nanos else ""


def _ref(ref: cpb.MemoryRef) -> dict[str, Any]:
    out: dict[str, Any] = {"id": ref.id, "visible": ref.visible}
    if ref.visible:
        out["title"] = ref.title
        out["kind"] = KIND.name(ref.kind)
    return out


def memory_json(m: cpb.Memory) -> dict[str, Any]:
    """A memory with its date and provenance first: it is a dated claim made by
    someone, to be weighed before it is used."""
    return {
        "id": m.id,
        "created_at": _time(m.created_at),
        "created_by": m.created_by,
        "origin": ORIGIN.name(m.origin),
        "confidence": round(m.confidence, 4),
        "revision": m.revision,
        "superseded_by_id": m.superseded_by_id or None,
        "episode_id": m.episode_id or None,
        "links": [{"kind": LINK_KIND.name(link.kind), **_ref(link.target)} for link in m.links],
        "supersedes": [_ref(r) for r in m.supersedes],
        "superseded_by": [_ref(r) for r in m.superseded_by],
        "mentions": [{"entity_id": x.entity_id, "name": x.name} for x in m.mentions],
        "audience": "workspace" if m.audience.workspace else m.audience.member_id,
        "purposes": [PURPOSE.name(p) for p in m.purposes],
        "kind": KIND.name(m.kind),
        "title": m.title,
        "body": m.body,
        "updated_at": _time(m.updated_at),
        # Who changed it, when and why (read only).
        "revisions": [
            {
                "revision": r.revision,
                "action": REVISION_ACTION.name(r.action),
                "changed_by": r.changed_by,
                "changed_at": _time(r.changed_at),
                "reason": r.reason,
            }
            for r in m.revisions
        ],
        # The graph claims it states (read only).
        "claims": [{"entity": _entity(a.entity), **_attribute(a)} for a in m.claims],
        "relations": [_relation(r) for r in m.relations],
        "aliases": [
            {"entity": _entity(a.entity), "alias": a.alias, "memory_id": a.memory_id}
            for a in m.aliases
        ],
    }


def _entity(e: cpb.EntityRef) -> dict[str, Any]:
    return {"id": e.id, "name": e.name, "type": e.type or None}


def _stated(c: Any) -> dict[str, Any]:
    """When a claim holds (valid time) and when it was said (record time)."""
    return {
        "valid_from": _time(c.valid_from) or None,
        "valid_until": _time(c.valid_until) or None,
        "confidence": round(c.confidence, 4),
        "memory_id": c.memory_id,
        "stated_at": _time(c.stated_at),
        "retired_at": _time(c.retired_at) or None,
    }


def _attribute(a: cpb.AttributeClaim) -> dict[str, Any]:
    return {"attribute": a.attribute, "value": a.value, **_stated(a)}


def _relation(r: cpb.RelationClaim) -> dict[str, Any]:
    return {
        "subject": _entity(r.subject),
        "predicate": r.predicate,
        "object": _entity(r.object),
        **_stated(r),
    }


_DIRECTION = {
    cpb.RELATION_DIRECTION_OUTGOING: "outgoing",
    cpb.RELATION_DIRECTION_INCOMING: "incoming",
}


def card_json(c: cpb.EntityCard) -> dict[str, Any]:
    return {
        "id": c.id,
        "name": c.name,
        "type": c.type or None,
        "aliases": list(c.aliases),
        "attributes": [_attribute(a) for a in c.attributes],
        "relations": [
            {
                "predicate": r.predicate,
                "direction": _DIRECTION.get(r.direction, ""),
                "other": {"id": r.other.id, "name": r.other.name},
                **_stated(r),
            }
            for r in c.relations
        ],
        "mentioned_by": list(c.mentioned_by),
        "truncated": c.truncated,
        # Entities a person merged into this one: the card answers for all.
        "merged": [_entity(m) for m in c.merged],
    }


def outcome_json(o: cpb.RecallOutcome) -> dict[str, Any]:
    out: dict[str, Any] = {
        "mode": MODE.name(o.mode),
        "dense_available": o.dense_available,
        "reranked": o.reranked,
    }
    if not o.dense_available:
        out["dense_unavailable_reason"] = o.dense_unavailable_reason
    if not o.reranked:
        out["rerank_unavailable_reason"] = o.rerank_unavailable_reason
    out["counts"] = {
        "lexical": o.counts.lexical,
        "dense": o.counts.dense,
        "fused": o.counts.fused,
        "admitted": o.counts.admitted,
    }
    # The entities the query names exactly, as lookup gives them.
    out["entities"] = [card_json(c) for c in o.entities]
    out["results"] = [
        {
            **memory_json(r.memory),
            "scores": {
                "lexical_rank": r.scores.lexical_rank,
                "dense_rank": r.scores.dense_rank,
                "dense_cosine": round(r.scores.dense_cosine, 4),
                "fused_score": round(r.scores.fused_score, 6),
                "rerank_score": round(r.scores.rerank_score, 4),
            },
        }
        for r in o.results
    ]
    return out


# -- errors -> what to do ------------------------------------------------------------


def failure(status: PeerStatus) -> str:
    """STATUS: what was wrong (with the field when known). What to do (the
    shared plumbing's advice, recallatron/grpcclient.py)."""
    return f"{status.code.name}: {clip(status.problem, PROBLEM_CHARS)}. {advice(status)}"
