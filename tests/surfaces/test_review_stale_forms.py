"""The review page's decisions on a form drawn before something changed: each
decision is taken on the text the person read, never on a newer one. Driven
through the page's application with a member's real gateway client, as a
signed-in session would (the browser's part is in test_review_page.py)."""

from __future__ import annotations

import time

import pytest

from recallatron.v1 import common_pb2 as cpb
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
