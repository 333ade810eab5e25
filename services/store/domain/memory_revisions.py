"""Changing a memory that exists (design §7 `correct`, `supersede`, `forget`):
who may change it (design §4), the compare-and-set on its revision, the
revision history, and the claims a change retires or carries over."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple, NoReturn

import psycopg

from recallatron import errors
from recallatron.vocabulary import MAX_BODY, MAX_LINKS, MAX_REASON, MAX_TITLE
from services.store.domain import graph_claims
from services.store.domain import trust as trust_rules
from services.store.domain import validation as v
from services.store.domain.erasure import fingerprint
from services.store.domain.memory_writes import MemoryWrites, NewMemory, WriteResult, as_asked
from services.store.domain.trust import Trust, _Empty
from services.store.infrastructure.db import Caller
from services.store.sql import memory_queries as mq

# supersede's refusal of a source its successor would replace.
_REPLACED_SOURCE = (
    "a successor is never derived from the memory it supersedes or an older version of it"
)


@dataclass(frozen=True)
class ForgetResult:
    id: str
    forgotten_at: datetime
    replayed: bool


class Subject(NamedTuple):
    """A memory as a change reads it: its revision as the caller numbers it
    (the supersedes hidden from them left out, workspace migration 0076),
    superseded for the caller (a memory along its chain of successors is one
    they may see), a successor it has all the same, hidden from them, its
    successor as stored, and its revision as stored."""

    revision: int
    superseded: bool
    hidden_successor: str | None
    successor: str | None
    stored_revision: int
    # Who may change it (MemoryRevisions._may_change): these never change.
    created_by: str
    audience: str | None


class MemoryRevisions(MemoryWrites):
    """The tools that change an existing memory."""

    @staticmethod
    def _check(memory_id: str, expected: int, seen: Subject, now: Subject) -> None:
        """The compare-and-set of a change: ``now``, the memory as read under
        its lock, still at the revision the caller read and current for them.
        ``seen``: as this call first read it. Superseded already then: it can
        no longer change. Changed by a call that committed meanwhile (a
        correct, or a supersede that won): a race lost, read again.
        Superseded and revisions both as the caller sees them: a successor
        hidden from them never shows in the answer."""
        if now.superseded and (seen.superseded or now.revision == expected):
            raise errors.FailedPrecondition(
                "id: the memory was superseded and can no longer change", subject="id"
            )
        if now.revision != expected:
            raise errors.RevisionMismatch(memory_id, expected, now.revision)

    def _unchanged(
        self, conn: psycopg.Connection, memory_id: str, expected: int, seen: Subject
    ) -> NoReturn:
        """A change's update matched nothing though the check under the lock
        passed: what the caller sees of the memory moved meanwhile without
        touching its row (its successor became one they see, say), so it is
        read and checked again, refused as any change it no longer fits."""
        self._check(memory_id, expected, seen, self._subject(conn, memory_id))
        raise RuntimeError(f"the change of memory {memory_id} matched no row")

    def _may_change(
        self, conn: psycopg.Connection, caller: Caller, memory_id: str, lock: bool = False
    ) -> Subject:
        """Who may change a memory (design §4): its author and the workspace's
        owners; the member a memory is addressed to, who is its only reader
        (its author cannot see it any more, so without this nobody could
        forget it, and the change reaches nobody else); and, with the
        workspace setting ``members_may_edit``, any member who can see a
        memory whose audience is the whole workspace. A memory the caller
        cannot see is not found, as anywhere else; one it can see but may not
        change is PERMISSION_DENIED, before anything is written. Returns its
        revision and whether it was superseded, as read. Author and audience
        never change, so the answer holds for the rest of the transaction;
        with ``lock`` so does the rest."""
        subject = self._subject(conn, memory_id, lock)
        if caller.member_id in (subject.created_by, subject.audience) or caller.role == "owner":
            return subject
        # Read fresh, not from this replica's few seconds of cache: an owner
        # closing the setting closes it at once on every replica. Only this
        # rare case (a member changing another's workspace memory) pays it.
        if (
            subject.audience is None
            and self.control.settings(caller.workspace_id, fresh=True).members_may_edit
        ):
            return subject
        raise errors.PermissionDenied(
            "id: only the memory's author or a workspace owner may change it"
            " (an owner can open workspace memories to every member: members_may_edit)"
        )

    @staticmethod
    def _subject(conn: psycopg.Connection, memory_id: str, lock: bool = False) -> Subject:
        """The memory as the caller reads it, NotFound when they may not;
        with ``lock`` locked first and then read in a statement of its own
        (LOCK_MEMORY), so a change it waited for is seen whole."""
        if lock and conn.execute(mq.LOCK_MEMORY, (memory_id,)).fetchone() is None:
            raise errors.NotFound("id: memory not found")
        row = conn.execute(mq.CHANGE_SUBJECT, (memory_id,)).fetchone()
        if row is None:
            raise errors.NotFound("id: memory not found")
        successor = None if row[4] is None else str(row[4])
        hidden = None if row[3] else successor
        audience = None if row[1] is None else str(row[1])
        return Subject(
            int(row[2]), bool(row[3]), hidden, successor, int(row[5]), str(row[0]), audience
        )

    def _hold(self, conn: psycopg.Connection, caller: Caller, memory_id: str) -> Subject:
        """:meth:`_may_change` with the memory locked, for a change of its
        place in a chain (a supersede's, a forget's). Its successor is held
        first: changes along a chain lock the later memory first, as a
        forget of that successor does (it, then the memories it replaced),
        so neither waits for the other while holding what the other needs;
        and while held it is not forgotten, so nothing is linked to it or
        past it meanwhile (migration 0070). A successor that changed before
        the memory's lock (a supersede of it committed between) is held
        then."""
        row = conn.execute(mq.HOLD_SUCCESSOR, (memory_id,)).fetchone()
        held = None if row is None or row[0] is None else str(row[0])
        subject = self._may_change(conn, caller, memory_id, lock=True)
        if subject.successor not in (None, held):
            conn.execute(mq.HOLD_SUCCESSOR, (memory_id,))
        return subject

    def _revision(
        self,
        conn: psycopg.Connection,
        caller: Caller,
        memory_id: str,
        revision: int,
        action: str,
        reason: str,
        successor: str | None = None,
    ) -> None:
        conn.execute(
            mq.INSERT_REVISION, (memory_id, revision, action, caller.member_id, reason, successor)
        )

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
        graph: graph_claims.GraphIn = graph_claims.NO_GRAPH,
        replace_claims: bool = False,
    ) -> WriteResult:
        """Edits in place. Claims given (or ``replace_claims`` with none)
        replace the memory's current claims, which stay in its history, retired."""
        memory_id = v.uuid_str(memory_id, "id")
        v.revision(expected_revision)
        replace = replace_claims or bool(graph)
        if title is None and body is None and confidence is None and not replace:
            raise errors.InvalidArgument("title", "give a new title, body, confidence or claims")
        graph_claims.validate(graph)
        if title is not None:
            v.memory_text(title, "title", MAX_TITLE)
        if body is not None:
            v.memory_text(body, "body", MAX_BODY, required=False)
        if confidence is not None:
            v.confidence(confidence)
        v.text(reason, "reason", MAX_REASON)

        def write(conn: psycopg.Connection) -> str:
            seen = self._may_change(conn, caller, memory_id)
            # Allowed already: locked, then read again as it now stands.
            now = self._subject(conn, memory_id, lock=True)
            self._check(memory_id, expected_revision, seen, now)
            changed = conn.execute(
                mq.CORRECT, (title, body, confidence, memory_id, now.stored_revision)
            ).fetchone()
            if changed is None:
                self._unchanged(conn, memory_id, expected_revision, seen)
            if replace:
                # After the update: the row is this transaction's, which the
                # claim tables' policies ask of a change (0008_graph.sql).
                writer = graph_claims.GraphWriter(conn)
                # Its successor as the update found it (not ``seen``: a
                # forget of it may have committed between), which a forget
                # of it now waits for the end of this transaction to unlink.
                kept = changed is not None and changed[0] is not None
                writer.retire(memory_id, kept=kept)
                writer.write(memory_id, (), graph)
                if kept:
                    # A caller who reads it as current past a successor
                    # hidden from them: what it now states is current for
                    # whoever reads it so, and retired by its supersede for
                    # whoever sees that successor (which states its own).
                    writer.retire(memory_id, superseded=True)
            revision = now.stored_revision + 1
            self._revision(conn, caller, memory_id, revision, "correct", reason)
            self._audit(
                conn,
                caller,
                "correct",
                memory_id,
                request_id,
                {"reason": reason, "revision": expected_revision + 1},
            )
            return memory_id

        asked = fingerprint(
            "correct", memory_id, expected_revision, title, body, confidence, reason,
            replace, graph,
        )  # fmt: skip
        result_id, replayed = self._idempotent(caller, request_id, "correct", write, asked)
        return WriteResult(self._read_back(caller, result_id, replayed), replayed)

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
        old memory's claims retire with it and stay in its history. The
        successor of a told memory is its author's new claim (any audience and
        purposes, as remember); that of a derived one is never wider than it."""
        memory_id = v.uuid_str(memory_id, "id")
        v.revision(expected_revision)
        self._validate_new(new)
        new = self._audience(caller, new)
        v.text(reason, "reason", MAX_REASON, required=False)
        sources = v.uuid_list(list(source_ids), "source_ids", MAX_LINKS)
        if memory_id in sources:
            raise errors.InvalidArgument("source_ids", _REPLACED_SOURCE)

        def write(conn: psycopg.Connection) -> str:
            seen = self._may_change(conn, caller, memory_id)
            found = self._read(conn, [memory_id], with_provenance=False)
            if not found:
                raise errors.NotFound("id: memory not found")
            old = found[0]
            old_trust = Trust(old.audience, frozenset(old.purposes))
            carried: list[str] = []
            if old.origin == "derived":
                # What was derived from other memories stays within the trust
                # they gave it (design §4): its successor, whatever its text,
                # is capped by that trust and stays derived from the same
                # sources, so its own successors are held to the same bound
                # and forgetting a source takes it out of recall, as it does
                # the memory it replaces.
                carried = [str(r[0]) for r in conn.execute(mq.SOURCES_OF, (memory_id,))]
            if sources:
                trust, origin = self._supersede_from(conn, sources, old_trust, new), "derived"
                # Derived from a version it replaces, it would leave recall
                # when that old version is forgotten (the walk refuses what
                # reaches a forgotten memory), where forgetting an old
                # version leaves the current one current (design §7.1).
                if conn.execute(
                    mq.REPLACED_AMONG, {"sources": sources, "memory": memory_id}
                ).fetchone():
                    raise errors.InvalidArgument("source_ids", _REPLACED_SOURCE)
            elif old.origin == "derived":
                # It may narrow that trust, never widen it.
                trust = trust_rules.narrow(
                    old_trust,
                    new.audience,
                    v.purposes(new.purposes) or None,
                    bound="the superseded derived memory's",
                )
                origin = "derived"
            else:
                # The replacement keeps the old memory's audience and
                # purposes unless the caller sets them.
                audience = old_trust.audience if isinstance(new.audience, _Empty) else new.audience
                purposes = v.purposes(new.purposes) or old_trust.purposes
                trust, origin = Trust(audience, purposes), "told"
            # The replacement stays in the old memory's episode when the
            # caller may see it (a read gives it no other), the rule remember
            # files a memory by.
            placed = dataclasses.replace(new, episode_id=old.episode_id)
            new_id = str(uuid.uuid4())
            links = [("derived_from", s) for s in dict.fromkeys([*carried, *sources])]
            writer = self._insert(conn, caller, new_id, placed, origin, trust, links)
            # Read locked, just before the compare-and-set: a successor hidden
            # from the caller becomes the new memory's (below), and a forget
            # along the chain may have moved it since ``seen``, which answers a
            # lost race as it did. Held, it stays until this commits.
            now = self._hold(conn, caller, memory_id)
            self._check(memory_id, expected_revision, seen, now)
            hidden = now.hidden_successor
            updated = conn.execute(mq.SUPERSEDE, (new_id, memory_id, now.stored_revision)).rowcount
            if updated != 1:
                self._unchanged(conn, memory_id, expected_revision, seen)
            if not (replace_claims or new.graph):
                writer.carry(memory_id, new_id, kept=hidden is not None)
            writer.retire(memory_id, superseded=True)
            if hidden is not None:
                # Superseded by one the caller may not see, the memory reads
                # to them as current, and so a supersede of it may not be
                # refused (that would reveal the successor): the new memory
                # goes where their view of the chain ends, before the hidden
                # one, which stays current for whoever sees it. What the new
                # memory states is retired, for whoever sees that one only, as
                # by its supersede (migration 0068): stated and retired at once
                # (migration 0069).
                conn.execute(mq.CHAIN_BEFORE, (hidden, new_id))
                writer.retire(new_id, superseded=True)
            self._revision(
                conn, caller, memory_id, now.stored_revision + 1, "supersede", reason, new_id
            )
            self._audit(
                conn,
                caller,
                "supersede",
                new_id,
                request_id,
                {"reason": reason, "superseded_id": memory_id},
            )
            return new_id

        asked = fingerprint(
            "supersede", memory_id, expected_revision, as_asked(new), reason, sorted(sources),
            replace_claims,
        )  # fmt: skip
        new_id, replayed = self._idempotent(caller, request_id, "supersede", write, asked)
        result = self._read_back(caller, new_id, replayed)
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
        v.all_found("source_ids", sources, {str(r[0]) for r in rows})
        found = [Trust(str(r[1]) if r[1] else None, frozenset(r[2])) for r in rows]
        allowed = trust_rules.intersect([old, *found])
        return trust_rules.narrow(allowed, new.audience, v.purposes(new.purposes) or None)

    def forget(
        self,
        caller: Caller,
        request_id: str,
        memory_id: str,
        reason: str,
        expected_revision: int = 0,
    ) -> ForgetResult:
        """``expected_revision``: 0, not checked; else the revision the caller
        read, refused as correct's race loser when the memory changed since
        (a page showing its old text must not forget what it now says)."""
        memory_id = v.uuid_str(memory_id, "id")
        v.text(reason, "reason", MAX_REASON)
        if expected_revision:
            v.revision(expected_revision)

        def write(conn: psycopg.Connection) -> str:
            held = self._hold(conn, caller, memory_id)
            if expected_revision and held.revision != expected_revision:
                raise errors.RevisionMismatch(memory_id, expected_revision, held.revision)
            row = conn.execute(mq.FORGET, (memory_id, reason)).fetchone()
            if row is None or row[0] is None:
                raise errors.NotFound("id: memory not found")
            self._revision(conn, caller, memory_id, held.stored_revision, "forget", reason)
            self._audit(conn, caller, "forget", memory_id, request_id, {"reason": reason})
            return memory_id

        # Unchecked, as a request made before the revision could be given:
        # its retry across an upgrade still matches.
        checked = [expected_revision] if expected_revision else []
        asked = fingerprint("forget", memory_id, reason, *checked)
        result_id, replayed = self._idempotent(caller, request_id, "forget", write, asked)
        with self._owner_pool(caller).connection() as conn:
            row = conn.execute(mq.TOMBSTONE_TIME, (result_id,)).fetchone()
        return ForgetResult(result_id, row[0], replayed)
