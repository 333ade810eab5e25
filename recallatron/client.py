"""A small client of the gateway, so the CLI, the MCP server, the review page,
scripts and tests need not touch raw stubs: the tools here, the review and
admin calls in client_admin.py, the connection under both in
client_connection.py."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, TypedDict, Unpack

import grpc

from recallatron.client_admin import ReviewAndAdmin
from recallatron.client_connection import (
    DEFAULT_GATEWAY,
    Connection,
    Req,
    Resp,
    default_gateway,
    is_status,
)
from recallatron.v1 import gateway_pb2 as pb
from recallatron.vocabulary import DEFAULT_PURPOSE

__all__ = [
    "DEFAULT_GATEWAY",
    "Client",
    "Connection",
    "Content",
    "GraphItems",
    "Revision",
    "Write",
    "default_gateway",
    "is_status",
]

# The graph's claims, relations and aliases in the agents' JSON shape
# (recallatron/tools.py), proto field names.
GraphItems = Sequence[dict[str, Any]]


class Write(TypedDict, total=False):
    """The keyword arguments derive, correct and supersede share (remember
    names them itself, as its ``more`` takes any other field): the purpose
    (DEFAULT_PURPOSE when left out), the request id (a new one when left out
    or None; a retry with the same id replays the first result), and the
    claims, relations and aliases the memory states (none when left out)."""

    purpose: str
    request_id: str | None
    claims: GraphItems
    relations: GraphItems
    aliases: GraphItems


class Revision(Write, total=False):
    """A correction's or supersession's: with replace_claims, only the claims
    given stand (False when left out)."""

    replace_claims: bool


class Content(TypedDict, total=False):
    """The keyword arguments remember, derive and supersede share for the new
    memory: who may see it (``audience_to``: a member id, "workspace"; None
    or left out: the call's default) and for which purposes, the entities it
    mentions by name (new or known) and by id (known), and its confidence."""

    audience_to: str | None
    purposes: Sequence[str]
    mention_names: Sequence[str]
    mention_ids: Sequence[str]
    confidence: float | None


class _Derivation(Write, Content, total=False):
    """derive's keyword arguments."""


class _Succession(Revision, Content, total=False):
    """supersede's keyword arguments (``sources`` aside)."""


class Client(ReviewAndAdmin):
    # -- tools -------------------------------------------------------------

    def remember(
        self,
        title: str,
        body: str = "",
        kind: str = "note",
        *,
        audience_to: str | None = None,
        purposes: Sequence[str] = (),
        mention_names: Sequence[str] = (),
        mention_ids: Sequence[str] = (),
        about: Sequence[str] = (),
        confidence: float | None = None,
        purpose: str = DEFAULT_PURPOSE,
        request_id: str | None = None,
        claims: GraphItems = (),
        relations: GraphItems = (),
        aliases: GraphItems = (),
        episode_id: str = "",
        **more: Any,
    ) -> pb.RememberResponse:
        """``more``: any other field of RememberRequest by its proto name, in
        plain values (recallatron/protojson.py), so a field added to the proto
        needs no change here."""
        write: Write = {
            "purpose": purpose,
            "request_id": request_id,
            "claims": claims,
            "relations": relations,
            "aliases": aliases,
        }
        content: Content = {
            "audience_to": audience_to,
            "purposes": purposes,
            "mention_names": mention_names,
            "mention_ids": mention_ids,
            "confidence": confidence,
        }
        return self._write(
            self.memory.Remember,
            pb.RememberRequest,
            {**write, **content},
            kind=kind,
            title=title,
            body=body,
            about_ids=about,
            episode_id=episode_id,
            **more,
        )

    def read(self, ids: Sequence[str], purpose: str = DEFAULT_PURPOSE) -> pb.ReadResponse:
        return self.ask(self.memory.Read, pb.ReadRequest, ids=ids, purpose=purpose)

    def recall(
        self,
        query: str,
        mode: str | None = None,
        limit: int = 10,
        purpose: str = DEFAULT_PURPOSE,
        kinds: Sequence[str] = (),
        mention_ids: Sequence[str] = (),
        include_superseded: bool = False,
        skip_rerank: bool = False,
        timeout: float | None = None,
        include_history: bool = False,
    ) -> pb.RecallResponse:
        return self.ask(
            self.memory.Recall,
            pb.RecallRequest,
            timeout,
            query=query,
            mode=mode or None,
            limit=limit,
            purpose=purpose,
            filters={
                "kinds": kinds,
                "mention_entity_ids": mention_ids,
                "include_superseded": include_superseded,
            },
            skip_rerank=skip_rerank,
            include_history=include_history,
        )

    def derive(
        self,
        sources: Sequence[str],
        title: str,
        body: str = "",
        kind: str = "summary",
        **write: Unpack[_Derivation],
    ) -> pb.DeriveResponse:
        return self._write(
            self.memory.Derive,
            pb.DeriveRequest,
            write,
            source_ids=sources,
            kind=kind,
            title=title,
            body=body,
        )

    def correct(
        self,
        memory_id: str,
        expected_revision: int,
        reason: str,
        *,
        title: str | None = None,
        body: str | None = None,
        confidence: float | None = None,
        **revision: Unpack[Revision],
    ) -> pb.CorrectResponse:
        return self._write(
            self.memory.Correct,
            pb.CorrectRequest,
            revision,
            id=memory_id,
            expected_revision=expected_revision,
            title=title,
            body=body,
            confidence=confidence,
            reason=reason,
        )

    def supersede(
        self,
        memory_id: str,
        expected_revision: int,
        title: str,
        body: str = "",
        kind: str = "note",
        reason: str = "",
        *,
        sources: Sequence[str] = (),
        **revision: Unpack[_Succession],
    ) -> pb.SupersedeResponse:
        """``audience_to`` and ``purposes`` left out: the old memory's;
        ``sources``: the memories a derived successor is derived from."""
        return self._write(
            self.memory.Supersede,
            pb.SupersedeRequest,
            revision,
            id=memory_id,
            expected_revision=expected_revision,
            kind=kind,
            title=title,
            body=body,
            reason=reason,
            source_ids=sources,
        )

    def lookup(
        self,
        name: str,
        as_of: str | None = None,
        purpose: str = DEFAULT_PURPOSE,
        include_history: bool = False,
        partial: bool = False,
        page_token: str = "",
    ) -> pb.LookupResponse:
        return self.ask(
            self.memory.Lookup,
            pb.LookupRequest,
            name=name,
            as_of=as_of or None,
            purpose=purpose,
            include_history=include_history,
            partial=partial,
            page_token=page_token,
        )

    def neighbors(
        self,
        entity_id: str,
        hops: int = 1,
        predicates: Sequence[str] = (),
        as_of: str | None = None,
        purpose: str = DEFAULT_PURPOSE,
        timeout: float | None = None,
    ) -> pb.NeighborsResponse:
        return self.ask(
            self.memory.Neighbors,
            pb.NeighborsRequest,
            timeout,
            entity_id=entity_id,
            hops=hops,
            predicates=predicates,
            as_of=as_of or None,
            purpose=purpose,
        )

    def forget(
        self,
        memory_id: str,
        reason: str,
        purpose: str = DEFAULT_PURPOSE,
        request_id: str | None = None,
        expected_revision: int = 0,
    ) -> pb.ForgetResponse:
        """``expected_revision``: the revision read (0: not checked); a
        memory changed since is not forgotten (ABORTED)."""
        return self._write(
            self.memory.Forget,
            pb.ForgetRequest,
            {"purpose": purpose, "request_id": request_id},
            id=memory_id,
            reason=reason,
            expected_revision=expected_revision or None,
        )

    def capture(
        self,
        text: str,
        *,
        occurred_at: datetime | None = None,
        speaker_member_id: str = "",
        purpose: str = DEFAULT_PURPOSE,
        request_id: str = "",
        episode_id: str = "",
    ) -> pb.CaptureResponse:
        return self.ask(
            self.memory.Capture,
            pb.CaptureRequest,
            request_id=request_id,
            speaker_member_id=speaker_member_id,
            text=text,
            occurred_at=occurred_at,
            purpose=purpose,
            episode_id=episode_id,
        )

    def create_episode(
        self,
        title: str,
        started_at: str,
        ended_at: str | None = None,
        *,
        audience_to: str | None = None,
        purposes: Sequence[str] = (),
        member_ids: Sequence[str] = (),
        entity_ids: Sequence[str] = (),
        purpose: str = DEFAULT_PURPOSE,
        request_id: str | None = None,
    ) -> pb.CreateEpisodeResponse:
        """``request_id``: a retry with it answers the first attempt's episode
        and makes no second one (None: none is sent, and each call makes one)."""
        return self.ask(
            self.memory.CreateEpisode,
            pb.CreateEpisodeRequest,
            request_id=request_id,
            title=title,
            started_at=started_at,
            ended_at=ended_at or None,
            audience=audience_to,
            purposes=purposes,
            member_ids=member_ids,
            entity_ids=entity_ids,
            purpose=purpose,
        )

    def timeline(
        self,
        entity_id: str = "",
        episode_id: str = "",
        *,
        start: str | None = None,
        end: str | None = None,
        page_token: str = "",
        purpose: str = DEFAULT_PURPOSE,
    ) -> pb.TimelineResponse:
        return self.ask(
            self.memory.Timeline,
            pb.TimelineRequest,
            entity_id=entity_id,
            episode_id=episode_id,
            page_token=page_token,
            purpose=purpose,
            **{"from": start or None, "to": end or None},
        )

    def _write(
        self,
        method: grpc.UnaryUnaryMultiCallable[Req, Resp],
        request: type[Req],
        write: Mapping[str, Any],
        /,
        **fields: Any,
    ) -> Resp:
        """A write's call: its own ``fields`` and the ``write`` arguments with
        their defaults (Write), those of the new memory under their request
        fields' names (Content)."""
        given = dict(write)
        names = given.pop("mention_names", ())
        entity_ids = given.pop("mention_ids", ())
        if names or entity_ids:
            given["mentions"] = _mentions(names, entity_ids)
        if "audience_to" in given:
            given["audience"] = given.pop("audience_to")
        return self.ask(
            method,
            request,
            **fields,
            **{
                **given,
                "purpose": write.get("purpose", DEFAULT_PURPOSE),
                "request_id": write.get("request_id") or str(uuid.uuid4()),
            },
        )


def _mentions(names: Sequence[str], entity_ids: Sequence[str]) -> list[dict[str, str]]:
    """A write's mentions: new or known entities by name, known ones by id."""
    return [{"name": n} for n in names] + [{"entity_id": e} for e in entity_ids]
