"""The review page's decisions on a form drawn before something changed: each
decision is taken on the text the person read, never on a newer one. Driven
through the page's application with a member's real gateway client, as a
signed-in session would (the browser's part is in test_review_page.py)."""

from __future__ import annotations

import time
from typing import Any

import grpc
import pytest

from recallatron.client import Client
from recallatron.v1 import common_pb2 as cpb
from recallatron.v1 import gateway_pb2 as pb
from recallatron_devkit.stack import Stack
from services.gateway.review_web import ReviewApp, Session
from tests import dbutil
from tests.conftest import Team

pytestmark = pytest.mark.integration


def _session(team: Team, handle: str) -> Session:
    now = time.monotonic()
    return Session(team.clients[handle], "csrf", now, now)


def _keep_form(a: cpb.Memory, b: cpb.Memory) -> dict[str, str]:
    """The page's "Keep both" form for the pair as it showed it."""
    return {
        "action": "keep",
        "first_id": a.id,
        "second_id": b.id,
        "first_revision": str(a.revision),
        "second_revision": str(b.revision),
    }


def _dismissed(stack: Stack, team: Team) -> list[tuple[object, ...]]:
    return dbutil.query(
        stack, team.database_name, "SELECT first_id::text, second_id::text FROM dismissed_pair"
    )


def test_keep_both_on_a_stale_form_changes_nothing(stack: Stack, team: Team) -> None:
    """Keep both is never proposed again: taken on a memory corrected since
    the page was drawn, it dismissed the pair for good on the strength of a
    text the person never read (forget and supersede check the revision
    shown; keep both did not)."""
    ada = team.clients["ada"]
    a = ada.remember("Backups run nightly at 2am", audience_to="workspace").memory
    b = ada.remember("Nightly backups start at 2am", audience_to="workspace").memory
    shown = _keep_form(a, b)
    ada.correct(a.id, a.revision, body="Backups now run hourly.", reason="schedule changed")
    session = _session(team, "ada")
    app = ReviewApp(stack.gateway)
    app.decide(session, shown, "assist")
    assert session.flash and session.flash[-1][0] == "error", session.flash
    assert "changed since" in session.flash[-1][1], session.flash
    assert _dismissed(stack, team) == []
    # Shown afresh, the same decision is taken.
    session.flash.clear()
    app.decide(session, _keep_form(ada.read([a.id]).memories[0], b), "assist")
    assert session.flash == [("ok", "Kept both; this pair will not be proposed again.")]
    assert len(_dismissed(stack, team)) == 1


def test_keep_both_on_a_form_without_its_revisions_is_incomplete(stack: Stack, team: Team) -> None:
    ada = team.clients["ada"]
    a = ada.remember("Standup moved to 10am", audience_to="workspace").memory
    b = ada.remember("Standup is at 10am now", audience_to="workspace").memory
    session = _session(team, "ada")
    for dropped in ("first_revision", "second_revision"):
        form = {k: v for k, v in _keep_form(a, b).items() if k != dropped}
        session.flash.clear()
        ReviewApp(stack.gateway).decide(session, form, "assist")
        assert session.flash == [("error", "The form was incomplete; look again.")], dropped
    assert _dismissed(stack, team) == []


class _CorrectedAfterRead:
    """A member's client whose every read is followed at once by a correct
    of ``target`` by its author: the page's read-then-dismiss, with the
    correct committing between its read and its dismissal."""

    def __init__(self, client: Client, author: Client, target: str) -> None:
        self.client, self.author, self.target = client, author, target

    def read(self, ids: list[str], **kwargs: Any) -> pb.ReadResponse:
        answer = self.client.read(ids, **kwargs)
        (now,) = self.author.read([self.target]).memories
        self.author.correct(self.target, now.revision, body="Changed meanwhile.", reason="race")
        return answer

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)


def test_keep_both_loses_to_a_correct_between_its_check_and_its_dismissal(
    stack: Stack, team: Team
) -> None:
    """The page read the revisions, then dismissed: a correct committed in
    between was not seen, and the pair was dismissed on the old text."""
    ada = team.clients["ada"]
    a = ada.remember("Deploys freeze on Fridays", audience_to="workspace").memory
    b = ada.remember("No deploys on Fridays", audience_to="workspace").memory
    now = time.monotonic()
    session = Session(_CorrectedAfterRead(ada, ada, a.id), "csrf", now, now)  # type: ignore[arg-type]
    ReviewApp(stack.gateway).decide(session, _keep_form(a, b), "assist")
    assert session.flash and session.flash[-1][0] == "error", session.flash
    assert "changed since you looked" in session.flash[-1][1], session.flash
    assert _dismissed(stack, team) == []


def test_dismissal_checks_the_revisions_given_in_its_transaction(team: Team) -> None:
    ada = team.clients["ada"]
    a = ada.remember("The VPN rotates keys monthly", audience_to="workspace").memory
    b = ada.remember("VPN keys rotate every month", audience_to="workspace").memory
    c = ada.remember("VPN keys rotate monthly", audience_to="workspace").memory
    ada.correct(b.id, b.revision, body="VPN keys rotate weekly now.", reason="policy")
    # Changed since read: ABORTED as correct's race loser, naming the memory.
    with pytest.raises(grpc.RpcError) as err:
        ada.dismiss_pair(
            b.id, a.id, first_expected_revision=b.revision, second_expected_revision=a.revision
        )
    assert err.value.code() == grpc.StatusCode.ABORTED
    assert err.value.details() == (
        f"expected_revision: memory {b.id} is at revision {b.revision + 1}, not {b.revision}"
    )
    # Superseded since read: it can no longer change, as correct answers.
    ada.supersede(c.id, c.revision, "VPN keys rotate monthly, by the ops team")
    with pytest.raises(grpc.RpcError) as err:
        ada.dismiss_pair(
            a.id, c.id, first_expected_revision=a.revision, second_expected_revision=c.revision
        )
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert (err.value.details() or "").startswith("second_id: the memory was superseded")
    # Out of range: refused naming the field.
    with pytest.raises(grpc.RpcError) as err:
        ada.dismiss_pair(a.id, b.id, second_expected_revision=-1)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert (err.value.details() or "").startswith("second_expected_revision")
    # The revisions read, each given with its own id whatever their order: kept.
    ada.dismiss_pair(
        b.id, a.id, first_expected_revision=b.revision + 1, second_expected_revision=a.revision
    )
    ada.dismiss_pair(a.id, b.id)  # unchecked, as callers from before: idempotent
