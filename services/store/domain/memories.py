"""The memory tools (design §7) as plain domain code. Every query runs inside
`caller_transaction`, so row-level security applies eligibility (design §4) to
each one; not visible answers exactly like not there."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import psycopg
from psycopg.errors import UniqueViolation
from psycopg.types.json import Jsonb

from recallatron import errors
from recallatron.vocabulary import (
    DEFAULT_PURPOSE,
    MAX_BODY,
    MAX_LINKS,
    MAX_MENTIONS,
    MAX_READ_IDS,
    MAX_REASON,
    MAX_TITLE,
    PURPOSES,
)
from services.store.domain import episodes
from services.store.domain import graph as graph_
from services.store.domain import trust as trust_rules
from services.store.domain import validation as v
from services.store.domain.control import ControlPlane
from services.store.domain.erasure import request_key
from services.store.domain.trust import EMPTY, AudienceValue, Trust, _Empty
from services.store.infrastructure.db import Caller, Databases, caller_transaction
from services.store.sql import memory_queries as mq

# A mention names an entity exactly as a claim does.
MentionIn = graph_.EntityIn


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
    graph: graph_.GraphIn = graph_.NO_GRAPH
    # The episode it belongs to (one the caller may see), if any.
    episode_id: str | None = None


@dataclass(frozen=True)
class Ref:
    id: str
    visible: bool
    title: str = ""
    kind: str = ""


@dataclass(frozen=True)
class RevisionView:
    revision: int
    action: str  # create | correct | supersede | forget
    changed_by: str
    reason: str
    changed_at: datetime


@dataclass
class MemoryView:
    id: str
    kind: str
    title: str
    body: str
    confidence: float
    origin: str
    revision: int
    audience: str | None
    purposes: list[str]
    created_by: str
    created_at: datetime
    updated_at: datetime
    superseded_by_id: str | None
    # The memory's episode, when the reader may see it.
    episode_id: str | None = None
    links: list[tuple[str, Ref]] = field(default_factory=list)
    mentions: list[tuple[str, str]] = field(default_factory=list)
    supersedes: list[Ref] = field(default_factory=list)
    superseded_by: list[Ref] = field(default_factory=list)
    revisions: list[RevisionView] = field(default_factory=list)
    claims: list[graph_.AttributeView] = field(default_factory=list)
    relations: list[graph_.RelationView] = field(default_factory=list)
    aliases: list[graph_.AliasView] = field(default_factory=list)


@dataclass(frozen=True)
class WriteResult:
    memory: MemoryView
    replayed: bool
    superseded: MemoryView | None = None


@dataclass(frozen=True)
class ForgetResult:
    id: str
    forgotten_at: datetime
    replayed: bool


def _view(row: Sequence[Any]) -> MemoryView:
    return MemoryView(
        id=str(row[0]),
        kind=row[1],
        title=row[2],
        body=row[3],
        confidence=row[4],
        origin=row[5],
        revision=row[6],
        superseded_by_id=str(row[7]) if row[7] else None,
        audience=str(row[8]) if row[8] else None,
        purposes=sorted(row[9], key=PURPOSES.index),
        created_by=str(row[10]),
        created_at=row[11],
        updated_at=row[12],
        episode_id=str(row[13]) if row[13] else None,
    )


# The permission walk's limit (design §5.5): candidates per walk, each one
# row read (docs/recall.md, "Recall at scale").
MAX_WALK = 500


@dataclass(frozen=True)
class Walk:
    # The admitted candidates, in the order given.
    admitted: list[str]
    # The first of them, read with provenance.
    memories: list[MemoryView]


# The tools whose writes queue memories for the embedding job (by trigger).
QUEUES_EMBEDDING = frozenset({"remember", "derive", "correct", "supersede"})


class MemoryStore:
    def __init__(self, dbs: Databases, control: ControlPlane) -> None:
        self.dbs = dbs
        self.control = control

    # -- plumbing ----------------------------------------------------------

    def _owner_pool(self, caller: Caller) -> Any:
        ws = self.control.workspace(caller.workspace_id)
        return self.dbs.owner_pool(ws.server, ws.database_name)

    def _check_audience(self, caller: Caller, audience: AudienceValue | _Empty) -> None:
        if isinstance(audience, _Empty) or audience is None:
            return
        member = v.uuid_str(audience, "audience.member_id")
        if not self.control.member_in_workspace(caller.workspace_id, member):
            raise errors.InvalidArgument("audience.member_id", "no such member in this workspace")

    def _replay(self, conn: psycopg.Connection, caller: Caller, key: str, tool: str) -> str | None:
        row = conn.execute(mq.REQUEST_KEY, (caller.member_id, key)).fetchone()
        if row is None:
            return None
        if row[0] != tool:
            raise errors.InvalidArgument(
                "request_id", f"already used for a different call ({row[0]})"
            )
        return str(row[1])

    def _own_write(self, caller: Caller, memory_id: str) -> MemoryView:
        """A write the caller made, read back even when the caller's own
        eligibility does not cover it (say, written for another member)."""
        with self._owner_pool(caller).connection() as conn:
            row = conn.execute(mq.OWN_MEMORY, (memory_id, caller.member_id)).fetchone()
        if row is None:
            raise errors.NotFound("memory not found")
        return _view(row)

    def _insert(
        self,
        conn: psycopg.Connection,
        caller: Caller,
        memory_id: str,
        new: NewMemory,
        origin: str,
        trust: Trust,
        links: Sequence[tuple[str, str]],
    ) -> graph_.GraphWriter:
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
        writer = graph_.GraphWriter(conn)
        writer.write(memory_id, new.mentions, new.graph)
        return writer

    def _validate_new(self, new: NewMemory) -> None:
        v.kind(new.kind)
        v.text(new.title, "title", MAX_TITLE)
        v.text(new.body, "body", MAX_BODY, required=False)
        v.confidence(new.confidence)
        v.purposes(new.purposes)
        if len(new.mentions) > MAX_MENTIONS:
            raise errors.InvalidArgument("mentions", f"at most {MAX_MENTIONS} allowed")
        for i, m in enumerate(new.mentions):
            graph_.validate_entity(m, f"mentions[{i}]")
        graph_.validate(new.graph)
        ids = [m.entity_id for m in new.mentions if m.entity_id]
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

    def _idempotent(self, caller: Caller, request_id: str, tool: str, write: Any) -> Any:
        """Runs `write(conn)` once per (member, request id). A retry, or a
        concurrent duplicate, gets the first result's memory id back."""
        # Stored and looked up as a hash only (design §8.6).
        key = request_key(caller.member_id, v.request_id(request_id))
        pool = self.control.caller_pool(caller)
        try:
            with caller_transaction(pool, caller) as conn:
                existing = self._replay(conn, caller, key, tool)
                if existing is None:
                    memory_id = write(conn)
                    conn.execute(mq.INSERT_REQUEST_KEY, (caller.member_id, key, tool, memory_id))
            result = (memory_id, False) if existing is None else (existing, True)
        except UniqueViolation as exc:
            if "request_key" not in str(exc.diag.constraint_name or ""):
                raise
            with caller_transaction(pool, caller) as conn:
                existing = self._replay(conn, caller, key, tool)
            assert existing is not None
            result = (existing, True)
        if tool in QUEUES_EMBEDDING:
            # Committed, not yet acknowledged: the embedding job is woken for
            # this workspace (a retry that replays marks again, in case the
            # first attempt failed between its commit and this mark).
            self.control.mark_work(caller.workspace_id)
        return result

    # -- tools -------------------------------------------------------------

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
        self._check_audience(caller, new.audience)
        # Default audience: the caller alone. Sharing is a deliberate choice.
        audience = caller.member_id if isinstance(new.audience, _Empty) else new.audience
        trust = Trust(audience, v.purposes(new.purposes) or frozenset({DEFAULT_PURPOSE}))
        about = v.uuid_list(list(new.about_ids), "about_ids", MAX_LINKS)

        def write(conn: psycopg.Connection) -> str:
            if about and self._visible_ids(conn, about) != set(about):
                raise errors.NotFound("about_ids: a memory was not found")
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

        memory_id, replayed = self._idempotent(caller, request_id, "remember", write)
        return WriteResult(self._read_back(caller, memory_id), replayed)

    def derive(
        self, caller: Caller, request_id: str, source_ids: Sequence[str], new: NewMemory
    ) -> WriteResult:
        sources = v.uuid_list(list(source_ids), "source_ids", MAX_LINKS, min_items=1)
        self._validate_new(new)
        self._check_audience(caller, new.audience)

        def write(conn: psycopg.Connection) -> str:
            rows = conn.execute(mq.TRUST_OF, (sources,)).fetchall()
            if len(rows) != len(sources):
                raise errors.NotFound("source_ids: a source memory was not found")
            allowed = trust_rules.intersect(
                [Trust(str(r[1]) if r[1] else None, frozenset(r[2])) for r in rows]
            )
            trust = trust_rules.narrow(allowed, new.audience, v.purposes(new.purposes) or None)
            memory_id = str(uuid.uuid4())
            links = [("derived_from", s) for s in sources]
            self._insert(conn, caller, memory_id, new, "derived", trust, links)
            self._audit(conn, caller, "derive", memory_id, request_id)
            return memory_id

        memory_id, replayed = self._idempotent(caller, request_id, "derive", write)
        return WriteResult(self._read_back(caller, memory_id), replayed)

    def _cas_failure(self, conn: psycopg.Connection, memory_id: str, expected: int) -> None:
        row = conn.execute(mq.STATE_OF, (memory_id,)).fetchone()
        if row is None:
            raise errors.NotFound("memory not found")
        revision, superseded_by = row
        if superseded_by is not None:
            raise errors.FailedPrecondition(
                "id: the memory was superseded and can no longer change", subject="id"
            )
        raise errors.RevisionMismatch(memory_id, expected, revision)

    def _may_change(self, conn: psycopg.Connection, caller: Caller, memory_id: str) -> int:
        """Who may change a memory (design §4): its author and the workspace's
        owners; the member a memory is addressed to, who is its only reader
        (its author cannot see it any more, so without this nobody could
        forget it, and the change reaches nobody else); and, with the
        workspace setting ``members_may_edit``, any member who can see a
        memory whose audience is the whole workspace. A memory the caller
        cannot see is not found, as anywhere else; one it can see but may not
        change is PERMISSION_DENIED, before anything is written. Returns its
        revision. Author and audience never change, so the answer holds for
        the rest of the transaction."""
        row = conn.execute(mq.CHANGE_SUBJECT, (memory_id,)).fetchone()
        if row is None:
            raise errors.NotFound("memory not found")
        created_by, audience, revision = str(row[0]), row[1], int(row[2])
        if caller.member_id in (created_by, audience and str(audience)) or caller.role == "owner":
            return revision
        if audience is None and self.control.settings(caller.workspace_id).members_may_edit:
            return revision
        raise errors.PermissionDenied(
            "id: only the memory's author or a workspace owner may change it"
            " (an owner can open workspace memories to every member: members_may_edit)"
        )

    def _revision(
        self,
        conn: psycopg.Connection,
        caller: Caller,
        memory_id: str,
        revision: int,
        action: str,
        reason: str,
    ) -> None:
        conn.execute(mq.INSERT_REVISION, (memory_id, revision, action, caller.member_id, reason))

    def correct(
        self,
        caller: Caller,
        request_id: str,
        memory_id: str,
        expected_revision: int,
        title: str | None,
        body: str | None,
        confidence: float | None,
        reason: str,
        graph: graph_.GraphIn = graph_.NO_GRAPH,
        replace_claims: bool = False,
    ) -> WriteResult:
        """Edits in place. Claims given (or ``replace_claims`` with none)
        replace the memory's current claims, which stay in its history, retired."""
        memory_id = v.uuid_str(memory_id, "id")
        v.revision(expected_revision)
        replace = replace_claims or bool(graph)
        if title is None and body is None and confidence is None and not replace:
            raise errors.InvalidArgument("title", "give a new title, body, confidence or claims")
        graph_.validate(graph)
        if title is not None:
            v.text(title, "title", MAX_TITLE)
        if body is not None:
            v.text(body, "body", MAX_BODY, required=False)
        if confidence is not None:
            v.confidence(confidence)
        v.text(reason, "reason", MAX_REASON)

        def write(conn: psycopg.Connection) -> str:
            self._may_change(conn, caller, memory_id)
            updated = conn.execute(
                mq.CORRECT, (title, body, confidence, memory_id, expected_revision)
            ).rowcount
            if updated != 1:
                self._cas_failure(conn, memory_id, expected_revision)
            if replace:
                # After the update: the row is this transaction's, which the
                # claim tables' policies ask of a change (0008_graph.sql).
                writer = graph_.GraphWriter(conn)
                writer.retire(memory_id)
                writer.write(memory_id, (), graph)
            self._revision(conn, caller, memory_id, expected_revision + 1, "correct", reason)
            self._audit(
                conn,
                caller,
                "correct",
                memory_id,
                request_id,
                {"reason": reason, "revision": expected_revision + 1},
            )
            return memory_id

        result_id, replayed = self._idempotent(caller, request_id, "correct", write)
        return WriteResult(self._read_back(caller, result_id), replayed)

    def supersede(
        self,
        caller: Caller,
        request_id: str,
        memory_id: str,
        expected_revision: int,
        new: NewMemory,
        reason: str,
        replace_claims: bool = False,
        source_ids: Sequence[str] = (),
    ) -> WriteResult:
        """The successor states ``new.graph`` when given (or nothing, with
        ``replace_claims``), else the old memory's current claims again; the
        old memory's claims retire with it and stay in its history."""
        memory_id = v.uuid_str(memory_id, "id")
        v.revision(expected_revision)
        self._validate_new(new)
        self._check_audience(caller, new.audience)
        v.text(reason, "reason", MAX_REASON, required=False)
        sources = v.uuid_list(list(source_ids), "source_ids", MAX_LINKS)

        def write(conn: psycopg.Connection) -> str:
            self._may_change(conn, caller, memory_id)
            old = conn.execute(mq.TRUST_OF, ([memory_id],)).fetchone()
            if old is None:
                raise errors.NotFound("memory not found")
            old_trust = Trust(str(old[1]) if old[1] else None, frozenset(old[2]))
            if sources:
                trust, origin = self._supersede_from(conn, sources, old_trust, new), "derived"
            else:
                # The replacement keeps the old memory's audience and
                # purposes unless the caller sets them.
                audience = old_trust.audience if isinstance(new.audience, _Empty) else new.audience
                purposes = v.purposes(new.purposes) or old_trust.purposes
                trust, origin = Trust(audience, purposes), "told"
            new_id = str(uuid.uuid4())
            links = [("derived_from", s) for s in sources]
            writer = self._insert(conn, caller, new_id, new, origin, trust, links)
            updated = conn.execute(mq.SUPERSEDE, (new_id, memory_id, expected_revision)).rowcount
            if updated != 1:
                self._cas_failure(conn, memory_id, expected_revision)
            if not (replace_claims or new.graph):
                writer.carry(memory_id, new_id)
            writer.retire(memory_id)
            self._revision(conn, caller, memory_id, expected_revision + 1, "supersede", reason)
            self._audit(
                conn,
                caller,
                "supersede",
                new_id,
                request_id,
                {"reason": reason, "superseded_id": memory_id},
            )
            return new_id

        new_id, replayed = self._idempotent(caller, request_id, "supersede", write)
        result = self._read_back(caller, new_id)
        old_view = self.read(caller, [memory_id], with_provenance=True)
        return WriteResult(result, replayed, old_view[0] if old_view else None)

    def _supersede_from(
        self, conn: psycopg.Connection, sources: list[str], old: Trust, new: NewMemory
    ) -> Trust:
        """A replacement whose text comes from other memories (the review
        page's "supersede A with B's text") follows the derive rule (design
        §4): the intersection of the sources' trust and the replaced memory's,
        narrowed as asked, never wider; an empty one is refused."""
        rows = conn.execute(mq.TRUST_OF, (sources,)).fetchall()
        if len(rows) != len(sources):
            raise errors.NotFound("source_ids: a source memory was not found")
        found = [Trust(str(r[1]) if r[1] else None, frozenset(r[2])) for r in rows]
        allowed = trust_rules.intersect([old, *found])
        return trust_rules.narrow(allowed, new.audience, v.purposes(new.purposes) or None)

    def forget(self, caller: Caller, request_id: str, memory_id: str, reason: str) -> ForgetResult:
        memory_id = v.uuid_str(memory_id, "id")
        v.text(reason, "reason", MAX_REASON)

        def write(conn: psycopg.Connection) -> str:
            revision = self._may_change(conn, caller, memory_id)
            row = conn.execute(mq.FORGET, (memory_id, reason)).fetchone()
            if row is None or row[0] is None:
                raise errors.NotFound("memory not found")
            self._revision(conn, caller, memory_id, revision, "forget", reason)
            self._audit(conn, caller, "forget", memory_id, request_id, {"reason": reason})
            return memory_id

        result_id, replayed = self._idempotent(caller, request_id, "forget", write)
        with self._owner_pool(caller).connection() as conn:
            row = conn.execute(mq.TOMBSTONE_TIME, (result_id,)).fetchone()
        return ForgetResult(result_id, row[0], replayed)

    # -- reads -------------------------------------------------------------

    def _read_back(self, caller: Caller, memory_id: str) -> MemoryView:
        found = self.read(caller, [memory_id], with_provenance=True)
        return found[0] if found else self._own_write(caller, memory_id)

    def read(
        self, caller: Caller, ids: Sequence[str], with_provenance: bool = True
    ) -> list[MemoryView]:
        wanted = v.uuid_list(list(ids), "ids", MAX_READ_IDS, min_items=1)
        with caller_transaction(self.control.caller_pool(caller), caller) as conn:
            return self._read(conn, wanted, with_provenance, with_revisions=with_provenance)

    def _read(
        self,
        conn: psycopg.Connection,
        wanted: list[str],
        with_provenance: bool,
        with_revisions: bool = False,
    ) -> list[MemoryView]:
        """The visible memories among ``wanted`` (validated ids), in that order."""
        ids = v.uuid_array(wanted)
        rows = {str(r[0]): _view(r) for r in conn.execute(mq.MEMORIES_BY_ID, (ids,)).fetchall()}
        if with_provenance and rows:
            self._provenance(conn, rows, with_revisions)
        return [rows[i] for i in wanted if i in rows]

    def _provenance(
        self, conn: psycopg.Connection, views: dict[str, MemoryView], with_revisions: bool
    ) -> None:
        ids = v.uuid_array(list(views))
        # Independent queries: one round trip.
        with conn.pipeline():
            links = conn.execute(mq.LINKS_OF, (ids,))
            mentions = conn.execute(mq.MENTIONS_OF, (ids,))
            chains = conn.execute(mq.SUPERSESSION_CHAINS, (ids, ids))
            revisions = conn.execute(mq.REVISIONS_OF, (ids,)) if with_revisions else None
        if with_revisions:
            claims, relations, aliases = graph_.claims_of(conn, ids)
            for memory_id, view in views.items():
                view.claims = claims.get(memory_id, [])
                view.relations = relations.get(memory_id, [])
                view.aliases = aliases.get(memory_id, [])
        if revisions is not None:
            for memory_id, revision, action, changed_by, reason, changed_at in revisions:
                views[str(memory_id)].revisions.append(
                    RevisionView(revision, action, str(changed_by), reason, changed_at)
                )
        for memory_id, kind, target, title, target_kind in links.fetchall():
            ref = (
                Ref(str(target), True, title, target_kind) if title is not None else Ref("", False)
            )
            views[str(memory_id)].links.append((kind, ref))
        for memory_id, entity_id, name in mentions.fetchall():
            views[str(memory_id)].mentions.append((str(entity_id), name))
        for memory_id, direction, depth, ref_id, title, kind in chains.fetchall():
            ref = Ref(str(ref_id), True, title, kind) if ref_id else Ref("", False)
            view = views[str(memory_id)]
            (view.supersedes if direction == "older" else view.superseded_by).append(ref)
            del depth  # ordering is done in SQL

    def walk(
        self, caller: Caller, ids: Sequence[str], hydrate: int, include_superseded: bool = False
    ) -> Walk:
        """The permission walk (design §5.5): keeps, in order, the candidates the
        caller may see whose every linked memory, transitively, the caller may
        also see and is not forgotten; then reads the first ``hydrate`` of them
        with provenance in the same transaction (one snapshot: a memory the walk
        admitted cannot vanish before it is read)."""
        wanted = v.uuid_list(list(ids), "ids", MAX_WALK)
        if not 0 <= hydrate <= MAX_READ_IDS:
            raise errors.InvalidArgument("hydrate_limit", f"must lie in [0, {MAX_READ_IDS}]")
        if not wanted:
            return Walk([], [])
        with caller_transaction(self.control.caller_pool(caller), caller) as conn:
            array = v.uuid_array(wanted)
            params = {"ids": array, "include_superseded": include_superseded}
            admitted = [r[0] for r in conn.execute(mq.ADMIT, params).fetchall()]
            memories = self._read(conn, admitted[:hydrate], True) if hydrate and admitted else []
        return Walk(admitted, memories)
