"""The store's message conversions: domain values to and from the protobuf
messages, shared by its two gRPC adapters (server.py, tool_server.py)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Collection, Iterable, Sequence
from datetime import datetime
from typing import Any, TypeVar, cast

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp

from recallatron import convert, errors, internal_auth, recall_filters
from recallatron.v1 import common_pb2 as cpb
from recallatron.v1 import gateway_pb2 as gpb
from recallatron.v1 import store_pb2 as pb
from recallatron.vocabulary import (
    DEFAULT_PURPOSE,
    KIND,
    LINK_KIND,
    MODE,
    ORIGIN,
    PURPOSE,
    ROLE,
    Terms,
)
from services.store.api.graph_adapter import (
    alias_msg,
    attribute_msg,
    entity_of,
    graph_of,
    relation_msg,
)
from services.store.domain import control_records as records
from services.store.domain.memories import MemoryView, MentionIn, NewMemory, Ref, Withheld
from services.store.domain.owner_view import AuditEvent
from services.store.domain.recall import DenseResult, Filters, LexicalResult
from services.store.domain.timeline import Event
from services.store.domain.tokens import TokenSummary
from services.store.domain.trust import EMPTY, AudienceValue, _Empty
from services.store.infrastructure.db import Caller

SETTINGS_FIELDS = {
    "default_recall_mode",
    "dense_floor",
    "rerank_depth",
    "expiry_days",
    "members_may_edit",
}
# A setting UpdateWorkspaceSettings may name, by its proto name or its proto3
# JSON name: an HTTP caller names fields by the latter (docs/api.md).
SETTING_NAMES = {
    given: f.name
    for f in pb.WorkspaceSettings.DESCRIPTOR.fields
    if f.name in SETTINGS_FIELDS
    for given in (f.name, f.json_name)
}
SETTINGS_LISTED = ", ".join(
    f.name for f in pb.WorkspaceSettings.DESCRIPTOR.fields if f.name in SETTINGS_FIELDS
)
REVISION_ACTIONS = {
    "create": cpb.REVISION_ACTION_CREATE,
    "correct": cpb.REVISION_ACTION_CORRECT,
    "supersede": cpb.REVISION_ACTION_SUPERSEDE,
    "forget": cpb.REVISION_ACTION_FORGET,
}


def caller_of(msg: cpb.Caller) -> Caller:
    """The request's Caller, which must be exactly the member the call's
    assertion vouches for (recallatron/internal_auth.py)."""
    internal_auth.check_caller(msg)
    caller = caller_named(msg)
    if not msg.workspace_id or not msg.member_id:
        raise errors.InvalidArgument("caller", "workspace_id and member_id are required")
    return caller


def caller_named(who: cpb.Caller | internal_auth.Claims) -> Caller:
    """The Caller a request's Caller or a member's assertion names: the
    purpose it acts for (none named: the default), and owner or member."""
    purpose = PURPOSE.parse(who.purpose, "caller.purpose") or DEFAULT_PURPOSE
    role = "owner" if who.role == cpb.ROLE_OWNER else "member"
    return Caller(who.workspace_id, who.member_id, purpose, role)


def when_of(msg: Message, name: str) -> datetime | None:
    """The time field ``name`` of ``msg``; None when it is not set."""
    return convert.when(getattr(msg, name), msg.HasField(name), name)


def audience_of(msg: cpb.Audience, present: bool) -> AudienceValue | _Empty:
    if not present:
        return EMPTY
    which = msg.WhichOneof("scope")
    if which == "member_id":
        return msg.member_id
    if which == "workspace" and msg.workspace:
        return None
    raise errors.InvalidArgument("audience", "set workspace=true or a member_id")


def mentions_of(items: Sequence[cpb.MentionInput]) -> list[MentionIn]:
    return [entity_of(m, f"mentions[{i}]") for i, m in enumerate(items)]


# NewMemory's fields new_memory reads by hand (enums, audience, lists, the
# graph): any other field of NewMemory is taken from the request's plain
# field of the same name, so a field added to a tool's request and to
# NewMemory needs no line here.
_NEW_MEMORY_BY_HAND = frozenset(
    {
        "kind",
        "title",
        "body",
        "confidence",
        "audience",
        "purposes",
        "mentions",
        "about_ids",
        "graph",
        "episode_id",
    }
)
M = TypeVar("M", bound=Message)
T = TypeVar("T")
_NOT_PLAIN = (FieldDescriptor.TYPE_MESSAGE, FieldDescriptor.TYPE_GROUP, FieldDescriptor.TYPE_ENUM)


def plain_fields(msg: Message, target: type[Any], skip: Collection[str] = ()) -> dict[str, Any]:
    """The values of ``msg``'s plain fields (scalars, not repeated) that the
    dataclass ``target`` has a field of the same name for, ``skip`` aside; an
    optional field left unset is left out (the dataclass's default applies)."""
    wanted = {f.name for f in dataclasses.fields(target)} - set(skip)
    descriptor = cast(Descriptor, msg.DESCRIPTOR)
    out: dict[str, Any] = {}
    for f in descriptor.fields:
        if f.name not in wanted or f.is_repeated or f.type in _NOT_PLAIN:
            continue
        if f.has_presence and not msg.HasField(f.name):
            continue
        out[f.name] = getattr(msg, f.name)
    return out


def message_of(answer: type[M], value: Any, **converted: Any) -> M:
    """The message ``answer`` made of the dataclass ``value``: the plain
    fields (scalars and lists of them) both name, as they are, and
    ``converted`` for the others (times, enums, nested messages). The way back
    of :func:`plain_fields`."""
    names = {f.name for f in dataclasses.fields(value)} - converted.keys()
    descriptor = cast(Descriptor, answer.DESCRIPTOR)
    plain = {
        f.name: getattr(value, f.name)
        for f in descriptor.fields
        if f.name in names and f.type not in _NOT_PLAIN
    }
    return answer(**plain, **converted)


def page_answer(
    answer: type[M], items: Iterable[T], item_msg: Callable[[T], Message], next_page_token: str
) -> M:
    """A listing's answer: its page's items, each made a message by
    ``item_msg``, in the answer's one repeated field (every listing's answer
    holds one, and next_page_token), and the token of the page after them."""
    (field,) = (f.name for f in cast(Descriptor, answer.DESCRIPTOR).fields if f.is_repeated)
    return answer(**{field: [item_msg(i) for i in items], "next_page_token": next_page_token})


def new_memory(req: Message) -> NewMemory:
    r: Any = req  # a request with the NewMemory fields
    return NewMemory(
        kind=KIND.parse(r.kind, "kind"),
        title=r.title,
        body=r.body,
        confidence=r.confidence if r.HasField("confidence") else None,
        audience=audience_of(r.audience, r.HasField("audience")),
        purposes=[PURPOSE.parse(p, f"purposes[{i}]") for i, p in enumerate(r.purposes)],
        mentions=mentions_of(r.mentions),
        about_ids=list(getattr(r, "about_ids", [])),
        graph=graph_of(r),
        episode_id=getattr(r, "episode_id", "") or None,
        **plain_fields(req, NewMemory, _NEW_MEMORY_BY_HAND),
    )


def names_of(terms: Terms[Any], values: Sequence[int], where: str, what: str) -> list[str]:
    """A repeated enum field's names, each one required: InvalidArgument
    naming ``where[i]`` for UNSPECIFIED or an unknown number."""
    names = []
    for i, value in enumerate(values):
        name = terms.parse(value, f"{where}[{i}]")
        if name is None:
            raise errors.InvalidArgument(f"{where}[{i}]", f"must be {what}")
        names.append(name)
    return names


def filters_of(msg: cpb.RecallFilters) -> Filters:
    # The rules the gateway checks first (recallatron.recall_filters).
    kinds = recall_filters.kinds(msg.kinds)
    return Filters(kinds, list(msg.mention_entity_ids), msg.include_superseded)


def candidates_answer(answer: type[M], result: LexicalResult | DenseResult) -> M:
    """A recall arm's answer: its candidates, and what else its result says."""
    candidates = [
        pb.Candidate(id=c.id, rank=c.rank, score=c.score, matches_every_term=c.matches_every_term)
        for c in result.candidates
    ]
    return message_of(answer, result, candidates=candidates)


def ref_msg(ref: Ref) -> cpb.MemoryRef:
    return cpb.MemoryRef(
        id=ref.id,
        visible=ref.visible,
        title=ref.title,
        kind=KIND.value(ref.kind) if ref.kind else cpb.KIND_UNSPECIFIED,
    )


def memory_msg(m: MemoryView | Withheld) -> cpb.Memory:
    if isinstance(m, Withheld):
        return cpb.Memory(id=m.id)
    audience = cpb.Audience(member_id=m.audience) if m.audience else cpb.Audience(workspace=True)
    return cpb.Memory(
        id=m.id,
        kind=KIND.value(m.kind),
        title=m.title,
        body=m.body,
        confidence=m.confidence,
        origin=ORIGIN.value(m.origin),
        revision=m.revision,
        audience=audience,
        purposes=[PURPOSE.value(p) for p in m.purposes],
        created_by=m.created_by,
        created_at=convert.timestamp(m.created_at),
        updated_at=convert.timestamp(m.updated_at),
        superseded_by_id=m.superseded_by_id or "",
        episode_id=m.episode_id or "",
        links=[cpb.Link(kind=LINK_KIND.value(k), target=ref_msg(r)) for k, r in m.links],
        mentions=[cpb.Mention(entity_id=e, name=n) for e, n in m.mentions],
        supersedes=[ref_msg(r) for r in m.supersedes],
        superseded_by=[ref_msg(r) for r in m.superseded_by],
        revisions=[
            cpb.Revision(
                revision=r.revision,
                action=REVISION_ACTIONS[r.action],
                changed_by=r.changed_by,
                changed_at=convert.timestamp(r.changed_at),
                reason=r.reason,
            )
            for r in m.revisions
        ],
        claims=[attribute_msg(a) for a in m.claims],
        relations=[relation_msg(r) for r in m.relations],
        aliases=[alias_msg(a) for a in m.aliases],
        provenance_cut=bool(m.omitted),
        omitted=cpb.ProvenanceOmitted(**m.omitted),
    )


def optional_timestamp(value: datetime | None) -> Timestamp | None:
    """A time a message leaves unset when there is none (a token that never
    expires, a member not removed): an empty Timestamp would read as set."""
    return convert.timestamp(value) if value is not None else None


def member_msg(m: records.Member) -> pb.Member:
    return message_of(
        pb.Member,
        m,
        role=ROLE.value(m.role),
        created_at=convert.timestamp(m.created_at),
        removed_at=optional_timestamp(m.removed_at),
    )


def settings_msg(s: records.WorkspaceSettings) -> pb.WorkspaceSettings:
    return message_of(
        pb.WorkspaceSettings, s, default_recall_mode=MODE.value(s.default_recall_mode)
    )


def workspace_msg(w: records.Workspace) -> pb.Workspace:
    return message_of(
        pb.Workspace,
        w,
        settings=settings_msg(w.settings),
        created_at=convert.timestamp(w.created_at),
    )


def listed_workspace_msg(w: records.ListedWorkspace) -> pb.ListedWorkspace:
    return pb.ListedWorkspace(workspace=workspace_msg(w.workspace), members=w.members)


def token_msg(t: TokenSummary) -> pb.TokenSummary:
    return message_of(
        pb.TokenSummary,
        t,
        purposes=[PURPOSE.value(p) for p in t.purposes],
        created_at=convert.timestamp(t.created_at),
        expires_at=optional_timestamp(t.expires_at),
        last_used_at=optional_timestamp(t.last_used_at),
        revoked_at=optional_timestamp(t.revoked_at),
    )


def timeline_event_msg(e: Event) -> cpb.TimelineEvent:
    return message_of(cpb.TimelineEvent, e, at=convert.timestamp(e.at), entity_id=e.entity_id or "")


def audit_event_msg(e: AuditEvent) -> gpb.AuditEvent:
    return message_of(
        gpb.AuditEvent,
        e,
        at=convert.timestamp(e.at),
        detail_json=json.dumps(e.detail, sort_keys=True, default=str),
    )
