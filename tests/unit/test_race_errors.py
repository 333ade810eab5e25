"""A transaction Postgres rolled back for a collision with another (a deadlock,
a serialization failure) is a race the caller may retry, and says so: it was
answered as "database unavailable", as if the server could not be reached."""

from __future__ import annotations

import psycopg
import pytest

from recallatron import errors
from services.store.infrastructure.transactions import translate_db_errors, translate_race_errors


@pytest.mark.parametrize(
    "collision", [psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure]
)
def test_a_collision_is_a_race_to_retry(collision: type[psycopg.Error]) -> None:
    # Nested as a workspace connection nests them (WorkspacePool.connection).
    with (
        pytest.raises(errors.Unavailable) as raised,
        translate_db_errors(),
        translate_race_errors(),
    ):
        raise collision("deadlock detected")
    assert "at the same moment" in str(raised.value)
    assert "nothing was written" in str(raised.value)


def test_an_unreachable_database_is_still_unavailable_as_before() -> None:
    with (
        pytest.raises(errors.Unavailable) as raised,
        translate_db_errors(),
        translate_race_errors(),
    ):
        raise psycopg.OperationalError("connection refused")
    assert str(raised.value).startswith("database unavailable")
