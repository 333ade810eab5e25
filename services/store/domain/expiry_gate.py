"""The expiry gate's cost in the dense arm (docs/recall.md, "The expiry
gate's cost"): with few of the caller's vectors inside the gate, the
filtered HNSW scan visits vectors to its limit and gives up, so those few
are ranked exactly instead, read from the vectors' update-time index
(0067_baseline/08_embedding.sql), at a cost that follows the rows inside the gate."""

from __future__ import annotations

from collections.abc import Mapping

import psycopg

# At most this many of the caller's vectors inside the gate are ranked
# exactly without walking the graph (about 1 us a vector); counting them
# reads at most this many index entries.
GATE_EXACT_ROWS = 1_000

INSIDE_GATE = """
SELECT vectors_inside_gate(%(model_id)s, %(input_version)s, %(expiry_days)s, %(cap)s)
"""


def few_inside(conn: psycopg.Connection, params: Mapping[str, object]) -> bool:
    """Whether the gate is on and fewer than GATE_EXACT_ROWS of the caller's
    vectors of this model lie inside it (run in the caller's transaction)."""
    expiry_days = params["expiry_days"]
    if not isinstance(expiry_days, int) or expiry_days <= 0:
        return False
    row = conn.execute(
        INSIDE_GATE,
        {
            "model_id": params["model_id"],
            "input_version": params["input_version"],
            "expiry_days": expiry_days,
            "cap": GATE_EXACT_ROWS,
        },
    ).fetchone()
    return row is not None and int(row[0]) < GATE_EXACT_ROWS
