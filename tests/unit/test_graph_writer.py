"""What GraphWriter hands its statements for a write's claims and relations:
each row in its statement's column order, the qualifiers as given and an unset
confidence as its default (1), recorded on a stand-in connection."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from services.store.domain import graph
from services.store.sql import graph_queries as gq


class Recorder:
    """A connection that records every executemany, by statement."""

    def __init__(self) -> None:
        self.rows: dict[str, list[Sequence[Any]]] = {}

    @contextmanager
    def cursor(self) -> Iterator[Recorder]:
        yield self

    def executemany(self, statement: str, rows: Sequence[Sequence[Any]]) -> None:
        self.rows.setdefault(statement, []).extend(rows)


def test_claim_and_relation_rows_carry_their_qualifiers_in_column_order() -> None:
    start = datetime(2024, 1, 1, tzinfo=UTC)
    end = datetime(2025, 1, 1, tzinfo=UTC)
    robin, apollo = graph.EntityIn(name="Robin"), graph.EntityIn(name="Apollo")
    conn = Recorder()
    writer = graph.GraphWriter(conn)  # type: ignore[arg-type]
    writer.write(
        "m1",
        (),
        graph.GraphIn(
            claims=[
                graph.ClaimIn(
                    robin, "city", "Lisbon", valid_from=start, valid_until=end, confidence=0.4
                ),
                graph.ClaimIn(apollo, "status", "active"),
            ],
            relations=[
                graph.RelationIn(robin, "leads", apollo, valid_from=start, confidence=0.7),
                graph.RelationIn(apollo, "owned_by", robin, valid_until=end),
            ],
        ),
    )
    ids = {e[1]: e[0] for e in conn.rows[gq.INSERT_ENTITY]}
    r, a = ids["Robin"], ids["Apollo"]
    assert [row[1:] for row in conn.rows[gq.INSERT_ATTRIBUTE]] == [
        ("m1", r, "city", "Lisbon", start, end, 0.4),
        ("m1", a, "status", "active", None, None, 1.0),
    ]
    assert [row[1:] for row in conn.rows[gq.INSERT_RELATION]] == [
        ("m1", r, "leads", a, start, None, 0.7),
        ("m1", a, "owned_by", r, None, end, 1.0),
    ]
