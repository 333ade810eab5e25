"""Races of the control plane: a write that loses a race with the
workspace's deletion answers as the workspace's lookup would (not found), not
with an unhandled database error (INTERNAL); and a workspace record read
while a change dropped the cached copy is not cached in its place."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from types import SimpleNamespace
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
    settings = SimpleNamespace(settings_cache_seconds=5.0)

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
    monkeypatch.setattr(control, "workspace", lambda workspace_id: SimpleNamespace(importing=False))
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


class _ChangedWhileRead:
    """The control database, answering a workspace's record as it stood; a
    change to the record commits (and drops the cached copy) while the
    answer is on its way."""

    def __init__(self) -> None:
        self.reads = 0
        self.during_read: Any = None

    def execute(self, statement: str, params: Any = None) -> Any:
        self.reads += 1
        if self.during_read is not None:
            hook, self.during_read = self.during_read, None  # once, even if it reads too
            hook()
        row = (WORKSPACE, "team", "default", "ws_db", {"dense_floor": 0.3}, None, False)

        class Cursor:
            def fetchone(self) -> Any:
                return row

        return Cursor()


def test_a_record_read_while_a_change_dropped_it_is_not_cached() -> None:
    dbs = _Databases()
    dbs.conn = _ChangedWhileRead()  # type: ignore[assignment]
    control = ControlPlane(dbs)  # type: ignore[arg-type]
    # The read began before the change committed; its answer is the old record.
    dbs.conn.during_read = lambda: control.forget_workspace(WORKSPACE)  # type: ignore[attr-defined]
    control.workspace(WORKSPACE)
    control.workspace(WORKSPACE)
    assert dbs.conn.reads == 2  # type: ignore[attr-defined]  # read again, not served stale
    control.workspace(WORKSPACE)
    assert dbs.conn.reads == 2  # type: ignore[attr-defined]  # an undisturbed read is cached


def test_a_fresh_read_is_not_a_drop() -> None:
    dbs = _Databases()
    dbs.conn = _ChangedWhileRead()  # type: ignore[assignment]
    control = ControlPlane(dbs)  # type: ignore[arg-type]
    # A fresh read of another workspace (GetWorkspaceSettings) beside a plain
    # read: the plain one is cached all the same.
    other = "0c4d8e2a-9b1f-4c3d-8e7f-6a5b4c3d2e1f"
    dbs.conn.during_read = lambda: control.settings(other, fresh=True)  # type: ignore[attr-defined]
    control.workspace(WORKSPACE)
    reads = dbs.conn.reads  # type: ignore[attr-defined]
    control.workspace(WORKSPACE)
    assert dbs.conn.reads == reads  # type: ignore[attr-defined]
    control.settings(WORKSPACE, fresh=True)
    assert dbs.conn.reads == reads + 1  # type: ignore[attr-defined]  # fresh: read again


class _Marks:
    """A control database that records work marks made through a connection
    capped, as the real one is, by the current call's deadline."""

    settings = SimpleNamespace(settings_cache_seconds=5.0)

    def __init__(self, failures: int = 0) -> None:
        self.marks: list[Any] = []
        self.failures = failures

    @contextmanager
    def control_conn(self) -> Iterator[Any]:
        from recallatron import deadline

        deadline.capped(5.0)  # DeadlineExceeded once the call's time is up
        if self.failures:
            self.failures -= 1
            raise errors.Unavailable("database unavailable: no connection in time", 1.0)
        yield self

    def execute(self, statement: str, params: Any = None) -> None:
        self.marks.append(params)


def test_a_committed_write_marks_its_work_after_its_call_has_ended() -> None:
    """The job finds work by these marks only: a mark skipped because the
    call's deadline passed as the write committed left its memory unembedded."""
    from recallatron import deadline

    dbs = _Marks()
    control = ControlPlane(dbs)  # type: ignore[arg-type]
    past = deadline.Scope(-1.0)
    leave = deadline.enter(past)
    try:
        with pytest.raises(errors.DeadlineExceeded):
            deadline.remaining()
        control.mark_work(WORKSPACE)
        # The call's own scope is back once the mark is made.
        assert deadline.current() is past
    finally:
        leave()
    assert dbs.marks == [(WORKSPACE,)]


def test_a_work_mark_is_tried_again_when_the_control_database_is_busy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from services.store.domain import control as control_module

    monkeypatch.setattr(control_module, "MARK_BACKOFF_SECONDS", 0.0)
    dbs = _Marks(failures=2)
    ControlPlane(dbs).mark_work(WORKSPACE)  # type: ignore[arg-type]
    assert dbs.marks == [(WORKSPACE,)]
    dbs = _Marks(failures=3)
    with pytest.raises(errors.Unavailable):
        ControlPlane(dbs).mark_work(WORKSPACE)  # type: ignore[arg-type]
    assert dbs.marks == []


def test_a_foreign_key_broken_beside_a_workspace_call_is_a_race_to_retry() -> None:
    from services.store.infrastructure.transactions import translate_race_errors

    with pytest.raises(errors.Unavailable) as info, translate_race_errors():
        raise ForeignKeyViolation("insert or update on table mention violates foreign key")
    assert info.value.retry_after == 0.2


def test_a_slug_or_handle_is_checked_to_its_end_and_a_slug_is_no_uuid() -> None:
    """A trailing newline passed `$` and reached the database's own check (an
    INTERNAL error, after the workspace's database was made); a slug that is
    another workspace's id made commands that take either name both."""
    from services.store.domain.control_names import HANDLE_RE, slug_ok

    assert slug_ok("acme") and slug_ok("team-42")
    for bad in ("acme\n", "", "-acme", "Acme", "7a0d6c55-5b8e-4f3c-9d6b-0f1e2a3b4c5d"):
        assert not slug_ok(bad), repr(bad)
    assert HANDLE_RE.match("ada.lovelace") and not HANDLE_RE.match("ada\n")
    with pytest.raises(errors.InvalidArgument) as info:
        ControlPlane(_Databases()).create_workspace("acme\n")  # type: ignore[arg-type]
    assert info.value.field == "slug"


def test_a_slug_is_no_uuid_in_any_spelling() -> None:
    """A slug of 32 hex digits (a hash, another system's id), with or without
    hyphens anywhere, was taken although it reads as a UUID, and `recallatron
    admin create-member --workspace` and `list-tokens --workspace`, which read
    a name that parses as a UUID as an id, answered NOT_FOUND for the
    workspace it names; such a slug is refused, as the rule says."""
    from services.store.domain.control_names import slug_ok

    for bad in (
        "7a0d6c555b8e4f3c9d6b0f1e2a3b4c5d",
        "7a0d6c55-5b8e4f3c-9d6b0f1e-2a3b4c5d",
        "7a0d-6c55-5b8e-4f3c-9d6b-0f1e-2a3b-4c5d",
    ):
        assert not slug_ok(bad), bad
    # Hex that is not 32 digits is a slug like any other.
    assert slug_ok("7a0d6c555b8e4f3c9d6b0f1e2a3b4c5") and slug_ok("cafe-babe")


def test_a_call_waits_for_an_admin_connection_no_longer_than_its_deadline() -> None:
    """A workspace migrated on its first use waits for one of the few admin
    connections: inside a call, never past the call's deadline (it waited a
    minute, holding the call's thread)."""
    from recallatron import deadline
    from services.store.infrastructure.db import Databases
    from services.store.settings import StoreSettings

    dbs = Databases(
        StoreSettings(database_url="postgresql://nobody@127.0.0.1:1/postgres", app_password="x")
    )
    while dbs._admin_slots.acquire(blocking=False):
        pass  # every admin connection taken
    leave = deadline.enter(deadline.Scope(-1.0))
    try:
        with pytest.raises(errors.DeadlineExceeded), dbs.admin_slot():
            pass
    finally:
        leave()
