"""Vectors on a new workspace connection (services/store/infrastructure/transactions.py):
numpy arrays and pgvector's Vector go out in binary with the database's vector
type, and a new connection adds no class that the process keeps forever
(psycopg remembers every dumper class it is given; pgvector's own
register_vector_info makes two new ones per call)."""

from __future__ import annotations

import numpy as np
import psycopg
from pgvector import Vector
from psycopg.adapt import AdaptersMap, PyFormat, Transformer
from psycopg.types import TypeInfo

from services.store.infrastructure.transactions import configure_workspace_connection

VECTOR = TypeInfo("vector", 91_234, 91_233)


class FakeConnection:
    """What the configuration touches of a connection: its adapters."""

    def __init__(self) -> None:
        self.adapters = AdaptersMap(psycopg.adapters)
        self.connection = None


def test_vectors_are_dumped_in_binary_with_the_databases_type() -> None:
    conn = FakeConnection()
    configure_workspace_connection(conn, VECTOR)  # type: ignore[arg-type]
    for value in (np.array([1.0, 2.0, 3.0], dtype=np.float32), Vector([1.0, 2.0, 3.0])):
        dumper = Transformer(conn).get_dumper(value, PyFormat.BINARY)
        assert dumper.oid == VECTOR.oid
        dumped = dumper.dump(value)
        assert dumped is not None and bytes(dumped) == Vector([1.0, 2.0, 3.0]).to_binary()
    assert conn.adapters.types["vector"].oid == VECTOR.oid
    assert conn.adapters.get_loader(VECTOR.oid, psycopg.pq.Format.BINARY) is not None


def test_new_connections_add_no_dumper_classes() -> None:
    configure_workspace_connection(FakeConnection(), VECTOR)  # type: ignore[arg-type]
    remembered = len(AdaptersMap._optimised)
    for _ in range(50):
        configure_workspace_connection(FakeConnection(), VECTOR)  # type: ignore[arg-type]
    assert len(AdaptersMap._optimised) == remembered
