"""A control-plane write that loses a race with the workspace's deletion
answers as the workspace's lookup would (not found), not with an unhandled
database error (INTERNAL)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from psycopg.errors import ForeignKeyViolation

from recallatron import errors
from services.store.domain.control import ControlPlane

WORKSPACE = "7a0d6c55-5b8e-4f3c-9d6b-0f1e2a3b4c5d"


class _DeletedMeanwhile:
    """The control database after the workspace's rows went: every insert
    that names it breaks its foreign key."""

    def __init__(self) -> None:
        self.statements: list[str] = []

    def execute(self, statement: str, params: Any = None) -> Any:
        self.statements.append(statement)
        raise ForeignKeyViolation("insert or update on table violates foreign key constraint")


class _Databases:
    def __init__(self) -> None:
        self.conn = _DeletedMeanwhile()

    @contextmanager
    def control_conn(self) -> Iterator[_DeletedMeanwhile]:
        yield self.conn


def test_a_member_added_to_a_workspace_deleted_meanwhile_is_not_found(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    dbs = _Databases()
    control = ControlPlane(dbs)  # type: ignore[arg-type]
    forgotten: list[str] = []
    # The lookup still finds it: cached, or read before the delete committed.
    monkeypatch.setattr(control, "workspace", lambda workspace_id: object())
    monkeypatch.setattr(control, "forget_workspace", forgotten.append)
    with pytest.raises(errors.NotFound):
        control.create_member(WORKSPACE, "ada", "member")
    assert len(dbs.conn.statements) == 1
    assert forgotten == [WORKSPACE]


def test_a_token_for_a_member_of_a_workspace_deleted_meanwhile_is_not_found(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    dbs = _Databases()
    control = ControlPlane(dbs)  # type: ignore[arg-type]

    class Member:
        workspace_id = WORKSPACE

    # The checks before the insert still saw the member, live.
    monkeypatch.setattr(control, "member", lambda member_id: Member())
    monkeypatch.setattr(control, "member_in_workspace", lambda *args, **kwargs: True)
    with pytest.raises(errors.NotFound):
        control.create_token("2b9f0c1e-4d3a-4e5f-8a7b-6c5d4e3f2a1b", "agent")
    assert len(dbs.conn.statements) == 1
