"""A repeated DeleteWorkspace says when the workspace was deleted, whether it
names the workspace by id or by slug; a slug a live workspace holds again
deletes that one, and only a slug no live workspace holds is read from the
tombstones (the latest deletion of it)."""

from __future__ import annotations

import uuid

import grpc
import pytest

from recallatron.client import Client
from tests.security.test_member_removal import error

pytestmark = pytest.mark.integration


def test_deleting_again_by_slug_says_when_it_was_deleted(operator: Client) -> None:
    slug = f"t-{uuid.uuid4().hex[:12]}"
    first = operator.create_workspace(slug).workspace
    done = operator.delete_workspace(slug, slug)
    assert done.workspace_id == first.id
    by_slug = error(lambda: operator.delete_workspace(slug, slug))
    by_id = error(lambda: operator.delete_workspace(first.id, first.id))
    for exc in (by_slug, by_id):
        assert exc.code() == grpc.StatusCode.NOT_FOUND, exc.details()
        assert str(exc.details()).startswith("workspace: deleted at "), exc.details()
    assert by_slug.details() == by_id.details()
    # The slug is free again: a new workspace takes it, and deleting by the
    # slug deletes that live one, not the tombstone's.
    second = operator.create_workspace(slug).workspace
    assert second.id != first.id
    again = operator.delete_workspace(slug, slug)
    assert again.workspace_id == second.id
    # Deleted twice: a repeat names the latest deletion.
    latest = error(lambda: operator.delete_workspace(slug, slug))
    assert latest.code() == grpc.StatusCode.NOT_FOUND, latest.details()
    assert latest.details() == error(lambda: operator.delete_workspace(second.id, slug)).details()
    assert latest.details() != by_id.details()
    # A slug never used is still "no workspace".
    never = f"t-{uuid.uuid4().hex[:12]}"
    exc = error(lambda: operator.delete_workspace(never, never))
    assert exc.code() == grpc.StatusCode.NOT_FOUND
    assert "no workspace" in str(exc.details()), exc.details()
