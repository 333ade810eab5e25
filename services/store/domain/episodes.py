"""Episodes (design §3.3): dated spans of one conversation or event, with
their own audience and purposes under a memory's eligibility (row-level
security, 0067_baseline/13_policies.sql). Plain domain code on the caller's connection."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import psycopg
from psycopg.errors import UniqueViolation

from recallatron import errors
from recallatron.vocabulary import MAX_MENTIONS, MAX_TITLE
from services.store.domain import graph_claims, request_replay
from services.store.domain import validation as v
from services.store.domain.erasure import fingerprint, request_keys
from services.store.domain.trust import Trust
from services.store.domain.workspace_services import InWorkspaces
from services.store.infrastructure.db import Caller

# Captured turns of one speaker share an episode until a silence longer than
# this (the old store's rule); then a new one begins.
CAPTURE_GAP = timedelta(hours=2)

VISIBLE = "SELECT id FROM episode WHERE id = %s"
INSERT = """
INSERT INTO episode (id, title, started_at, ended_at, audience_member_id, purposes,
                     speaker_member_id, created_by)
VALUES (%s, %s, %s, %s, %s, %s::purpose[], %s, %s)
"""
INSERT_PARTICIPANTS = """
INSERT INTO episode_participant (episode_id, member_id, entity_id)
SELECT %s, u.member_id, u.entity_id FROM unnest(%s::uuid[], %s::uuid[]) AS u(member_id, entity_id)
"""
# The speaker's capture episode that was still open at `at`: its last turn
# no more than CAPTURE_GAP before, and it did not start after `at`.
OPEN_CAPTURE = """
SELECT id FROM episode
WHERE speaker_member_id = %(speaker)s AND %(purpose)s::purpose = ANY (purposes)
  AND started_at <= %(at)s AND ended_at >= %(at)s - %(gap)s::interval
ORDER BY ended_at DESC
LIMIT 1
"""
EXTEND = "UPDATE episode SET ended_at = greatest(ended_at, %s) WHERE id = %s"
# A speaker's captured turns find or open their episode one at a time, each
# to the end of its transaction: two at once would each see no open episode
# (the other's new one uncommitted) and open one each. 7415 names the lock's
# use, beside the member write lock's 7404.
CAPTURE_TURN = "SELECT pg_advisory_xact_lock(7415, hashtext(%s::text))"
# A participant's write lock, shared, to the end of the transaction, then
# whether they were removed (0067_baseline/04_memory.sql): their removal holds
# the lock alone while it marks them removed, so the episode commits wholly
# before it or reads the mark after it.
HOLD_PARTICIPANT = "SELECT pg_advisory_xact_lock_shared(7404, hashtext(%s::text))"
PARTICIPANT_REMOVED = "SELECT 1 FROM removed_member WHERE member_id = %s"
# A CreateEpisode's request id, beside the writes'
# (0067_baseline/02_memory_tables.sql).
INSERT_REQUEST_KEY = """
INSERT INTO request_key (member_id, request_id, tool, episode_id, fingerprint)
VALUES (%s, %s, %s, %s, %s)
"""
# The call a request key names, as the memory writes name theirs by tool.
TOOL = "create_episode"


@dataclass(frozen=True)
class NewEpisode:
    title: str
    started_at: datetime
    ended_at: datetime | None
    trust: Trust
    member_ids: Sequence[str] = ()
    entity_ids: Sequence[str] = ()


def check_visible(conn: psycopg.Connection, episode_id: str, field: str = "episode_id") -> str:
    """``episode_id`` in canonical form, when the caller may see it. One the
    caller may not see answers as one that does not exist, NOT_FOUND, as a
    memory named on a write (about_ids, source_ids) or a timeline does."""
    episode_id = v.uuid_str(episode_id, field)
    if conn.execute(VISIBLE, (episode_id,)).fetchone() is None:
        raise errors.NotFound(f"{field}: episode not found")
    return episode_id


def for_capture(conn: psycopg.Connection, caller: Caller, at: datetime, trust: Trust) -> str:
    """The episode a captured turn of ``caller`` at ``at`` falls into: the
    open one (extended to ``at``), else a new one of the caller's own."""
    conn.execute(CAPTURE_TURN, (caller.member_id,))
    row = conn.execute(
        OPEN_CAPTURE,
        {"speaker": caller.member_id, "purpose": caller.purpose, "at": at, "gap": CAPTURE_GAP},
    ).fetchone()
    if row is not None:
        conn.execute(EXTEND, (at, row[0]))
        return str(row[0])
    episode_id = str(uuid.uuid4())
    conn.execute(
        INSERT,
        (
            episode_id,
            f"Conversation of {at:%Y-%m-%d %H:%M} UTC",
            at,
            at,
            trust.audience,
            sorted(trust.purposes),
            caller.member_id,
            caller.member_id,
        ),
    )
    return episode_id


class EpisodeStore(InWorkspaces):
    def create(self, caller: Caller, new: NewEpisode, request_id: str = "") -> str:
        """A new episode's id; its participants are members of the workspace
        and entities the caller may see. With ``request_id`` (the caller's
        own, one set with their writes' ids) a retry of the same request
        answers the first attempt's episode and makes no second one; the same
        id with another request is refused, as a write's is."""
        v.text(new.title, "title", MAX_TITLE)
        # In canonical form: the database takes only some spellings of a UUID.
        audience = new.trust.audience
        if audience is not None:
            audience = v.uuid_str(audience, "audience.member_id")
            if not self.control.member_in_workspace(caller.workspace_id, audience, live=True):
                raise errors.InvalidArgument(
                    "audience.member_id", "no such member in this workspace"
                )
        ended = new.ended_at or new.started_at
        if ended < new.started_at:
            raise errors.InvalidArgument("ended_at", "must not lie before started_at")
        members = v.uuid_list(list(new.member_ids), "member_ids", MAX_MENTIONS)
        for i, member in enumerate(members):
            # A removed member takes part in nothing more, as they read nothing more.
            if not self.control.member_in_workspace(caller.workspace_id, member, live=True):
                raise errors.InvalidArgument(f"member_ids[{i}]", "no such member in this workspace")
        entities = v.uuid_list(list(new.entity_ids), "entity_ids", MAX_MENTIONS)
        checked = NewEpisode(
            new.title,
            new.started_at,
            ended,
            Trust(audience, new.trust.purposes),
            members,
            entities,
        )
        if not request_id:
            with self.transaction(caller) as conn:
                return self._insert(conn, caller, checked)
        keys = request_keys(caller.member_id, v.request_id(request_id))
        # Participants and purposes are sets: a retry may list them in any order.
        asked = fingerprint(
            TOOL,
            dataclasses.replace(
                checked,
                ended_at=new.ended_at,
                member_ids=sorted(members),
                entity_ids=sorted(entities),
            ),
        )
        try:
            with self.transaction(caller) as conn:
                # A retry answers the first attempt's episode, writing nothing.
                made = request_replay.earlier(conn, caller.member_id, keys, TOOL, asked)
                if made is None:
                    made = self._insert(conn, caller, checked)
                    conn.execute(INSERT_REQUEST_KEY, (caller.member_id, keys[0], TOOL, made, asked))
                return made
        except UniqueViolation as exc:
            if "request_key" not in str(exc.diag.constraint_name or ""):
                raise
            # An attempt of this request at once committed first: its answer.
            with self.transaction(caller) as conn:
                made = request_replay.earlier(conn, caller.member_id, keys, TOOL, asked)
            assert made is not None
            return made

    def _insert(self, conn: psycopg.Connection, caller: Caller, new: NewEpisode) -> str:
        """Inserts ``new`` (checked: canonical ids, its end set) in ``conn``'s
        transaction; its id."""
        episode_id = str(uuid.uuid4())
        members, entities = list(new.member_ids), list(new.entity_ids)
        # Asked again under each member's lock: a removal may have passed
        # between the control plane's check and this transaction.
        for i, member in enumerate(members):
            conn.execute(HOLD_PARTICIPANT, (member,))
            if conn.execute(PARTICIPANT_REMOVED, (member,)).fetchone() is not None:
                raise errors.InvalidArgument(f"member_ids[{i}]", "no such member in this workspace")
        for i, entity in enumerate(entities):
            graph_claims.check_visible(conn, entity, f"entity_ids[{i}]")
        conn.execute(
            INSERT,
            (
                episode_id,
                new.title,
                new.started_at,
                new.ended_at,
                new.trust.audience,
                sorted(new.trust.purposes),
                None,
                caller.member_id,
            ),
        )
        if members or entities:
            conn.execute(
                INSERT_PARTICIPANTS,
                (
                    episode_id,
                    members + [None] * len(entities),
                    [None] * len(members) + entities,
                ),
            )
        return episode_id
