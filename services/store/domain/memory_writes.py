"""Writing new memories (design §7 `remember`, `derive`): validation, the
audience and purposes a new memory gets (design §4), the insert with its links
and graph statements, the audit row, and idempotency by request id. Every
write runs inside `caller_transaction`, so row-level security applies."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg.errors import UniqueViolation
from psycopg.types.json import Jsonb

from recallatron import errors
from recallatron.vocabulary import DEFAULT_PURPOSE, MAX_BODY, MAX_LINKS, MAX_MENTIONS, MAX_TITLE
from services.store.domain import episodes, graph_claims, request_replay
from services.store.domain import trust as trust_rules
from services.store.domain import validation as v
from services.store.domain.erasure import fingerprint, request_key, request_keys
from services.store.domain.memory_reads import (
    GRAPH,
    LINKS,
    MENTIONS,
    MemoryReads,
    MemoryView,
    Withheld,
)
from services.store.domain.trust import EMPTY, AudienceValue, Trust, _Empty
from services.store.infrastructure.db import Caller, caller_transaction
from services.store.sql import memory_queries as mq

# A mention names an entity exactly as a claim does.
MentionIn = graph_claims.EntityIn


@dataclass(frozen=True)
class NewMemory:
    kind: str | None
    title: str
    body: str
    confidence: float | None = None
    # EMPTY: not given (the tool's default applies).
    audience: AudienceValue | _Empty = EMPTY
    purposes: Sequence[str | None] = ()
    mentions: Sequence[MentionIn] = ()
    about_ids: Sequence[str] = ()
    # The claims, relations and aliases the memory states.
    graph: graph_claims.GraphIn = graph_claims.NO_GRAPH
    # The episode it belongs to (one the caller may see), if any.
    episode_id: str | None = None


@dataclass(frozen=True)
class WriteResult:
    memory: MemoryView | Withheld
    replayed: bool
    superseded: MemoryView | None = None


def as_asked(new: NewMemory, about: Sequence[str] = ()) -> NewMemory:
    """``new`` as its request's fingerprint takes it: its purposes and its
    ``about`` links (``about``: checked, canonical ids) are sets, kept as such
    and read back in an order of their own, so a retry may list them in any
    order (one built from a set in another process does)."""
    return dataclasses.replace(
        new, purposes=sorted(set(new.purposes), key=str), about_ids=sorted(about)
    )


# The tools whose writes queue memories for the embedding job (by trigger;
# forget: the memory its memory replaced, current again,
# 0067_baseline/12_chains.sql).
QUEUES_EMBEDDING = frozenset({"remember", "derive", "correct", "supersede", "forget"})


class MemoryWrites(MemoryReads):
    """The tools that write a new memory, and the plumbing every write shares."""

    def _audience(self, caller: Caller, new: NewMemory) -> NewMemory:
        """``new`` with its audience's member id in canonical form, checked.
        An id is taken in any spelling of a UUID, as everywhere; the database
        takes only some of them, and the derivation rule compares audiences
        as text, so only the canonical form goes on."""
        if isinstance(new.audience, _Empty) or new.audience is None:
            return new
        member = v.uuid_str(new.audience, "audience.member_id")
        # A removed member reads nothing more: a memory for them would be read by nobody.
        if not self.control.member_in_workspace(caller.workspace_id, member, live=True):
            raise errors.InvalidArgument("audience.member_id", "no such member in this workspace")
        return dataclasses.replace(new, audience=member)

    def _replay(
        self,
        conn: psycopg.Connection,
        caller: Caller,
        keys: Sequence[str],
        tool: str,
        asked: bytes,
    ) -> str | None:
        """The memory an earlier attempt under any of ``keys`` (erasure.request_keys) made."""
        return request_replay.earlier(conn, caller.member_id, keys, tool, asked)

    def _insert(
        self,
        conn: psycopg.Connection,
        caller: Caller,
        memory_id: str,
        new: NewMemory,
        origin: str,
        trust: Trust,
        links: Sequence[tuple[str, str]],
    ) -> graph_claims.GraphWriter:
        conn.execute(
            mq.INSERT_MEMORY,
            (
                memory_id,
                new.kind,
                new.title,
                new.body,
                v.confidence(new.confidence),
                origin,
                trust.audience,
                sorted(trust.purposes),
                caller.member_id,
                new.episode_id,
            ),
        )
        if links:
            kinds, targets = zip(*links, strict=True)
            conn.execute(mq.INSERT_LINKS, (memory_id, list(kinds), list(targets)))
        writer = graph_claims.GraphWriter(conn)
        writer.write(memory_id, new.mentions, new.graph)
        return writer

    def _validate_new(self, new: NewMemory) -> None:
        v.kind(new.kind)
        v.memory_text(new.title, "title", MAX_TITLE)
        v.memory_text(new.body, "body", MAX_BODY, required=False)
        v.confidence(new.confidence)
        v.purposes(new.purposes)
        if len(new.mentions) > MAX_MENTIONS:
            raise errors.InvalidArgument("mentions", f"at most {MAX_MENTIONS} allowed")
        for i, m in enumerate(new.mentions):
            graph_claims.validate_entity(m, f"mentions[{i}]")
        graph_claims.validate(new.graph)
        # In canonical form: any spelling of a UUID is the same entity.
        ids = [v.uuid_str(m.entity_id, "mentions") for m in new.mentions if m.entity_id]
        if len(set(ids)) != len(ids):
            raise errors.InvalidArgument("mentions", "an entity is mentioned twice")
        v.uuid_list(list(new.about_ids), "about_ids", MAX_LINKS)

    def _visible_ids(self, conn: psycopg.Connection, ids: Sequence[str]) -> set[str]:
        return {str(r[0]) for r in conn.execute(mq.VISIBLE_IDS, (v.uuid_array(list(ids)),))}

    def _audit(
        self,
        conn: psycopg.Connection,
        caller: Caller,
        action: str,
        memory_id: str,
        request_id: str,
        detail: dict[str, Any] | None = None,
    ) -> None:
        # The request id as its hash, as in request_key (design §8.6).
        key = request_key(caller.member_id, request_id)
        conn.execute(
            mq.INSERT_AUDIT, (caller.member_id, action, memory_id, key, Jsonb(detail or {}))
        )

    def _idempotent(
        self, caller: Caller, request_id: str, tool: str, write: Any, asked: bytes
    ) -> Any:
        """Runs `write(conn)` once per (member, request id). A retry, or a
        concurrent duplicate, of the same request (``asked``: its
        :func:`fingerprint`) gets the first result's memory id back; the same
        request id with another request is refused."""
        # Stored and looked up as a hash only (design §8.6).
        keys = request_keys(caller.member_id, v.request_id(request_id))
        key = keys[0]
        pool = self.control.caller_pool(caller)
        try:
            with caller_transaction(pool, caller) as conn:
                existing = self._replay(conn, caller, keys, tool, asked)
                if existing is None:
                    memory_id = write(conn)
                    conn.execute(
                        mq.INSERT_REQUEST_KEY, (caller.member_id, key, tool, memory_id, asked)
                    )
            result = (memory_id, False) if existing is None else (existing, True)
        except UniqueViolation as exc:
            if "request_key" not in str(exc.diag.constraint_name or ""):
                raise
            with caller_transaction(pool, caller) as conn:
                existing = self._replay(conn, caller, keys, tool, asked)
            assert existing is not None
            result = (existing, True)
        except errors.DomainError:
            # A concurrent attempt of this same request (a retry sent while
            # the first was still committing) may have made the change this
            # one then found made: a revision moved on, a memory already
            # superseded or forgotten. Its answer is this one's.
            with caller_transaction(pool, caller) as conn:
                existing = self._replay(conn, caller, keys, tool, asked)
            if existing is None:
                raise
            result = (existing, True)
        if tool in QUEUES_EMBEDDING:
            # Committed, not yet acknowledged: the embedding job is woken for
            # this workspace (a retry that replays marks again, in case the
            # first attempt failed between its commit and this mark).
            self.control.mark_work(caller.workspace_id)
        return result

    def _write_new(
        self,
        caller: Caller,
        request_id: str,
        tool: str,
        write: Any,
        new: NewMemory,
        linked: bool,
        asked: bytes,
    ) -> WriteResult:
        """:meth:`_idempotent` for a write that makes one new memory, read
        back in the write's own transaction (one transaction, not two, and
        only the provenance the write can have made: its links when
        ``linked``, its mentions and graph when it states any). A replay reads
        the first write's memory as any read does."""
        parts = frozenset(
            ([LINKS] if linked else [])
            + ([MENTIONS, GRAPH] if new.mentions or new.graph != graph_claims.NO_GRAPH else [])
        )
        made: list[MemoryView] = []

        def write_and_read(conn: psycopg.Connection) -> str:
            memory_id: str = write(conn)
            view = self._read_new(conn, memory_id, parts)
            made[:] = [view] if view is not None else []
            return memory_id

        memory_id, replayed = self._idempotent(caller, request_id, tool, write_and_read, asked)
        if not replayed and made:
            return WriteResult(made[0], False)
        return WriteResult(self._read_back(caller, memory_id, replayed), replayed)

    def remember(
        self,
        caller: Caller,
        request_id: str,
        new: NewMemory,
        captured_at: datetime | None = None,
    ) -> WriteResult:
        """A told memory. ``captured_at`` (capture's turn time) puts it, when
        it names no episode, in the speaker's episode open then, or a new one."""
        self._validate_new(new)
        if new.episode_id:
            v.uuid_str(new.episode_id, "episode_id")
        new = self._audience(caller, new)
        # Default audience: the caller alone. Sharing is a deliberate choice.
        audience = caller.member_id if isinstance(new.audience, _Empty) else new.audience
        trust = Trust(audience, v.purposes(new.purposes) or frozenset({DEFAULT_PURPOSE}))
        about = v.uuid_list(list(new.about_ids), "about_ids", MAX_LINKS)

        def write(conn: psycopg.Connection) -> str:
            if about:
                v.all_found("about_ids", about, self._visible_ids(conn, about))
            memory_id = str(uuid.uuid4())
            links = [("about", t) for t in about]
            episode = new.episode_id
            if episode:
                episode = episodes.check_visible(conn, episode)
            elif captured_at is not None:
                # The episode is the speaker's own, for the turn's purpose.
                own = Trust(caller.member_id, frozenset({caller.purpose}))
                episode = episodes.for_capture(conn, caller, captured_at, own)
            placed = dataclasses.replace(new, episode_id=episode or None)
            self._insert(conn, caller, memory_id, placed, "told", trust, links)
            self._audit(conn, caller, "remember", memory_id, request_id)
            return memory_id

        # The turn's time only places the memory (capture sends its own "now"
        # when a turn has none): a retry is the same request without it.
        asked = fingerprint("remember", as_asked(new, about))
        return self._write_new(caller, request_id, "remember", write, new, bool(about), asked)

    def derive(
        self, caller: Caller, request_id: str, source_ids: Sequence[str], new: NewMemory
    ) -> WriteResult:
        sources = v.uuid_list(list(source_ids), "source_ids", MAX_LINKS, min_items=1)
        self._validate_new(new)
        new = self._audience(caller, new)

        def write(conn: psycopg.Connection) -> str:
            rows = conn.execute(mq.TRUST_OF, (sources,)).fetchall()
            v.all_found("source_ids", sources, {str(r[0]) for r in rows})
            allowed = trust_rules.intersect(
                [Trust(str(r[1]) if r[1] else None, frozenset(r[2])) for r in rows]
            )
            trust = trust_rules.narrow(allowed, new.audience, v.purposes(new.purposes) or None)
            memory_id = str(uuid.uuid4())
            links = [("derived_from", s) for s in sources]
            self._insert(conn, caller, memory_id, new, "derived", trust, links)
            self._audit(conn, caller, "derive", memory_id, request_id)
            return memory_id

        asked = fingerprint("derive", sorted(sources), as_asked(new))
        return self._write_new(caller, request_id, "derive", write, new, True, asked)
