"""A request id's earlier attempt (design §7): what a write under the same
(member, request id) made, when it was this same request; the same id used
for another call or another request is refused. One set of ids per member
across the memory writes and CreateEpisode (request_key, 0067_baseline/02_memory_tables.sql)."""

from __future__ import annotations

from collections.abc import Sequence

import psycopg

from recallatron import errors
from services.store.sql import memory_queries as mq


def earlier(
    conn: psycopg.Connection, member_id: str, keys: Sequence[str], tool: str, asked: bytes
) -> str | None:
    """The id of what an earlier attempt under any of ``keys``
    (erasure.request_keys) made (a memory, or an episode for CreateEpisode),
    None when there was none. ``asked``: this request's fingerprint."""
    for key in keys:
        row = conn.execute(mq.REQUEST_KEY, (member_id, key)).fetchone()
        if row is not None:
            break
    else:
        return None
    if row[0] != tool:
        raise errors.InvalidArgument("request_id", f"already used for a different call ({row[0]})")
    if row[2] is not None and bytes(row[2]) != asked:
        # Answering with the first request's result would acknowledge a
        # write that was never made.
        raise errors.InvalidArgument(
            "request_id",
            f"already used for another {tool} request; a retry repeats its request exactly",
        )
    return str(row[1])
