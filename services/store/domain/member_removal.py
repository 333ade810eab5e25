"""A member who leaves (design §10; docs/api.md, "Removing a member").

Their tokens are revoked and published at once, so every gateway refuses
them on the next call (the revocation feed empties each gateway's cache).
The memories only they could see are erased, as forget erases (text,
vectors, search statistics and graph claims purged; a tombstone stays), or
handed to another member of the workspace, and their imported conversation
history with them (deleted, or given to the same member); what they wrote
that others may see stays, still attributed to them; each entity claim
follows the memory that states it. Their member row stays, marked removed,
so that their handle still names what they did (the audit log), and it can
hold no token.

Every check runs before anything changes. A removal interrupted after the
control plane's step is finished by running it again (the workspace's step
changes only what is left). A hand-over whose receiver was removed after
that check (by another call) is refused in the workspace's step, which then
changes nothing; the member stays removed and is finished the same way."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from recallatron import errors
from services.store.domain.validation import uuid_str
from services.store.domain.workspace_services import OnWorkspaces
from services.store.sql import leaving_queries as lq
from services.store.sql import queries as q

ERASE = "erase"
TRANSFER = "transfer"
MODES = (ERASE, TRANSFER)
# Who removed a member when it was the operator, in the audit log (a member
# id is always a random UUID, never this one).
OPERATOR_ID = "00000000-0000-0000-0000-000000000000"
# The tombstone's reason for an erased memory: says why, never what.
ERASED_REASON = "member removed"
# The refusal of a hand-over whose receiver was removed meanwhile (the type
# of its PreconditionFailure).
RECEIVER_REMOVED = "RECEIVER_REMOVED"


# Memories a statement of the workspace's step changes at most (leaving_queries:
# "a batch at a time"): forget's triggers cost a few milliseconds a memory, so
# a batch stays far within the store's statement timeout.
BATCH = 100


def _in_batches(
    conn: psycopg.Connection[Any],
    ids: str,
    statement: str,
    params: dict[str, Any],
    memories: bool = False,
) -> Iterator[list[tuple[Any, ...]]]:
    """The rows ``statement`` returns (none when it returns none) for each
    batch of the ids the query ``ids`` reads, in turn. ``memories``: the
    statement changes those memories, read later first along their chains,
    each batch's successors held before it runs (leaving_queries)."""
    found = [r[0] for r in conn.execute(ids, params).fetchall()]
    for start in range(0, len(found), BATCH):
        batch = found[start : start + BATCH]
        if memories:
            _hold_successors(conn, batch)
        cur = conn.execute(statement, {**params, "ids": batch})
        yield cur.fetchall() if cur.description is not None else []


def _hold_successors(conn: psycopg.Connection[Any], batch: list[Any]) -> None:
    """Holds (FOR SHARE) the successors of the memories of ``batch``, as
    hold_successor does one memory's: a successor being forgotten is waited
    for, and what replaced it then read and held in turn. Each round holds at
    least one memory more, so it ends."""
    held: set[Any] = set()
    while True:
        found = [r[0] for r in conn.execute(lq.SUCCESSORS, {"ids": batch}).fetchall()]
        new = [s for s in dict.fromkeys(found) if s not in held]
        if not new:
            return
        conn.execute(lq.HOLD_LIVE, {"held": new})
        held.update(new)


@dataclass(frozen=True)
class Removal:
    member_id: str
    removed_at: datetime
    tokens_revoked: int
    erased: int
    transferred: int
    kept: int


class MemberRemoval(OnWorkspaces):
    def remove(
        self,
        member_id: str,
        private_memories: str,
        transfer_to: str = "",
        workspace_id: str | None = None,
        removed_by: str | None = None,
    ) -> Removal:
        """Removes ``member_id``; ``workspace_id`` (an owner's call) must be
        theirs; ``removed_by`` is the owner's member id (None: the operator)."""
        member_id = uuid_str(member_id, "member_id")
        if removed_by is not None and uuid_str(removed_by, "caller") == member_id:
            raise errors.InvalidArgument(
                "member_id", "an owner cannot remove themselves; another owner or the operator can"
            )
        if private_memories not in MODES:
            raise errors.InvalidArgument("private_memories", "must be erase or transfer")
        receiver: str | None = None
        if private_memories == TRANSFER:
            if not transfer_to:
                raise errors.InvalidArgument("transfer_to", "is required with transfer")
            receiver = uuid_str(transfer_to, "transfer_to")
            if receiver == member_id:
                raise errors.InvalidArgument("transfer_to", "must be another member")
        elif transfer_to:
            raise errors.InvalidArgument("transfer_to", "only with transfer")
        with self.dbs.control_conn() as conn:
            conn.execute(q.REMOVAL_TURN, (member_id,))
            row = conn.execute(q.MEMBER_TO_REMOVE, (member_id,)).fetchone()
            if row is None or (workspace_id and row[0] != workspace_id):
                raise errors.NotFound("member_id: member not found")
            ws_id, role, removed_at = str(row[0]), row[1], row[2]
            if receiver and not conn.execute(q.LIVE_RECEIVER, (receiver, ws_id)).fetchone():
                raise errors.InvalidArgument(
                    "transfer_to", "names no current member of the member's workspace"
                )
            if removed_at is None and role == "owner":
                others = conn.execute(q.OTHER_OWNERS, (ws_id, member_id)).fetchone()
                if others is None or int(others[0]) == 0:
                    raise errors.FailedPrecondition(
                        "member_id: the workspace's last owner; make another member an "
                        "owner first (or delete the workspace)",
                        "member_id",
                    )
            revoked = [str(r[0]) for r in conn.execute(q.REVOKE_MEMBER_TOKENS, (member_id,))]
            for token_id in revoked:
                conn.execute(q.NOTIFY_REVOKED, (token_id,))
            if removed_at is None:
                marked = conn.execute(q.MARK_MEMBER_REMOVED, (member_id,)).fetchone()
                assert marked is not None  # the row is locked above
                removed_at = marked[0]
        erased, transferred, kept = self._workspace_step(
            ws_id, member_id, receiver, removed_by or OPERATOR_ID, private_memories, len(revoked)
        )
        return Removal(member_id, removed_at, len(revoked), erased, transferred, kept)

    def _workspace_step(
        self, ws_id: str, member: str, receiver: str | None, by: str, mode: str, revoked: int
    ) -> tuple[int, int, int]:
        """The workspace database's part; ``revoked``: the tokens the control
        plane's part revoked, counted in the audit entry as in the answer
        (no revoke_token entry records them)."""
        ws = self.control.workspace(ws_id)
        params = {
            "member": member,
            "to": receiver,
            "by": by,
            "reason": ERASED_REASON,
        }
        erased = transferred = history = 0
        with self.dbs.owner_pool(ws.server, ws.database_name).connection() as conn:
            conn.execute(lq.REMOVAL_TURN)
            # A write for the member either committed before this or is
            # refused after it (0067_baseline/04_memory.sql).
            conn.execute(lq.HOLD_MEMBER_ALONE, params)
            if receiver is not None:
                self._hold_receiver(conn, ws_id, member, receiver)
            conn.execute(lq.MARK_REMOVED, params)
            found = conn.execute(lq.KEPT, params).fetchone()
            kept = int(found[0]) if found else 0
            if receiver is None:
                erase = _in_batches(conn, lq.PRIVATE_LIVE, lq.ERASE_PRIVATE, params, memories=True)
                for rows in erase:
                    erased += len(rows)
                    if rows:
                        conn.execute(
                            lq.INSERT_ERASED_REVISIONS,
                            {
                                **params,
                                "ids": [r[0] for r in rows],
                                "revisions": [r[1] for r in rows],
                            },
                        )
                conn.execute(lq.ERASE_PRIVATE_EPISODES, params)
                history = conn.execute(lq.ERASE_HISTORY, params).rowcount
            else:
                # Each list is read before its statements run: a memory handed
                # over no longer names the member.
                hand = _in_batches(conn, lq.PRIVATE_ALL, lq.TRANSFER_PRIVATE, params, memories=True)
                for rows in hand:
                    transferred += sum(1 for r in rows if r[0])
                for ids, statement, memories in (
                    (lq.PROVENANCE_OF, lq.TRANSFER_PROVENANCE, True),
                    (lq.VECTORS_OF, lq.TRANSFER_VECTORS, False),
                ):
                    for _ in _in_batches(conn, ids, statement, params, memories):
                        pass
                for statement in (
                    lq.TRANSFER_TERM_STATS,
                    lq.TRANSFER_CORPUS_STATS,
                    lq.TRANSFER_EPISODES,
                ):
                    conn.execute(statement, params)
                history = conn.execute(lq.TRANSFER_HISTORY, params).rowcount
            detail = {
                "removed_member_id": member,
                "private_memories": mode,
                "erased": erased,
                "transferred": transferred,
                "kept": kept,
                "tokens_revoked": revoked,
                "history_erased" if receiver is None else "history_transferred": history,
            }
            if receiver:
                detail["transfer_to"] = receiver
            conn.execute(lq.INSERT_AUDIT, (by, Jsonb(detail)))
        return erased, transferred, kept

    def _hold_receiver(
        self, conn: psycopg.Connection[Any], ws_id: str, member: str, receiver: str
    ) -> None:
        """Holds the receiver's write lock (shared) and checks them again under
        it: the control plane's check came before, and their own removal may
        have run since (its erase would have come before this hand-over)."""
        conn.execute(lq.HOLD_RECEIVER, {"to": receiver})
        removed = conn.execute(lq.RECEIVER_REMOVED, {"to": receiver}).fetchone() is not None
        if not removed:
            # Their removal may have passed the control plane and not yet
            # reached this database; one under way there is waited for.
            with self.dbs.control_conn() as control:
                removed = control.execute(q.LIVE_RECEIVER, (receiver, ws_id)).fetchone() is None
        if removed:
            raise errors.FailedPrecondition(
                f"transfer_to: member {receiver} was removed after this removal checked "
                f"them; nothing was handed over. Member {member} stays removed with their "
                "private memories and history as they were: remove them again with erase "
                "or another transfer_to",
                "transfer_to",
                reason=RECEIVER_REMOVED,
            )
