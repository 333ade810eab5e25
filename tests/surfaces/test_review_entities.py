"""The entity pairs of the review page (design §8.5) in real headless
Chromium: an owner sees two entities side by side with their evidence, merges
them, sees the merge listed and undoes it, keeps a pair apart; a member is
told that only owners decide; and the new forms hold the page's session and
CSRF rules. Screenshots before and after a merge go to test-artifacts/."""

from __future__ import annotations

import http.client
import threading
import time
import uuid

import pytest
from playwright.sync_api import expect

from recallatron_devkit.stack import Stack
from services.gateway.review_web import ReviewApp, Session
from tests import dbutil
from tests.conftest import Team
from tests.surfaces.browser import ARTIFACTS, browser_page, post_form, sign_in
from tests.surfaces.entity_data import write_robins

pytestmark = pytest.mark.integration


def merges_in(stack: Stack, team: Team) -> list[tuple[object, ...]]:
    return dbutil.query(
        stack,
        team.database_name,
        "SELECT kept_id::text, merged_id::text, undone_at FROM entity_merge",
    )


def test_entity_pairs_merge_undo_and_keep_apart_in_a_browser(stack: Stack, team: Team) -> None:
    ada, bob = team.clients["ada"], team.clients["bob"]
    robins = write_robins(ada, audience_to="workspace")

    with browser_page() as (_, page):
        sign_in(page, stack.review_url, ada.token)
        pair = page.locator("[data-testid=entity-pair]").filter(
            has=page.locator(f'[data-entity="{robins["robin"]}"]')
        )
        expect(pair).to_have_count(1)
        expect(pair).to_contain_text("one name begins the other")
        goodwin = pair.locator(f'[data-entity="{robins["goodwin"]}"]')
        for text in (
            "Robin Goodwin",
            "person",
            "city = Lisbon",
            "leads → Apollo",
            "Robin Goodwin leads Apollo",
        ):
            expect(goodwin).to_contain_text(text)
        robin = pair.locator(f'[data-entity="{robins["robin"]}"]')
        for text in ("role = release reviewer", "reviews → Apollo", "Robin on Apollo"):
            expect(robin).to_contain_text(text)
        expect(page.get_by_test_id("no-merges")).to_be_visible()
        assert merges_in(stack, team) == []  # showing a pair decides nothing
        page.screenshot(path=str(ARTIFACTS / "review-entities.png"), full_page=True)

        # Merge, keeping Robin Goodwin's name.
        side = "A" if pair.get_attribute("data-first") == robins["goodwin"] else "B"
        pair.get_by_role("button", name=f"Merge, keep the name of {side}").click()
        expect(page.get_by_test_id("flash")).to_contain_text("Merged Robin into Robin Goodwin")
        expect(pair).to_have_count(0)
        row = page.get_by_test_id("merge")
        expect(row).to_have_count(1)
        expect(row).to_contain_text("Robin")
        page.screenshot(path=str(ARTIFACTS / "review-entities-after.png"), full_page=True)
        (card,) = ada.lookup("Robin").entities
        assert card.id == robins["goodwin"] and [m.name for m in card.merged] == ["Robin"]

        # Undo: both answer on their own and the pair is proposed again.
        row.get_by_role("button", name="Undo").click()
        expect(page.get_by_test_id("flash")).to_contain_text("Undid the merge")
        expect(page.get_by_test_id("no-merges")).to_be_visible()
        assert [c.id for c in ada.lookup("Robin").entities] == [robins["robin"]]
        expect(pair).to_have_count(1)

        # Keep apart: never proposed again, and nothing merged.
        pair.get_by_role("button", name="Keep apart").click()
        expect(page.get_by_test_id("flash")).to_contain_text("Kept apart")
        expect(pair).to_have_count(0)
        assert all(
            {p.first.id, p.second.id} != {robins["goodwin"], robins["robin"]}
            for p in ada.entity_pairs().pairs
        )
        page.get_by_test_id("signout").click()

        # A member sees the same entities but decides nothing.
        sign_in(page, stack.review_url, bob.token)
        expect(page.get_by_test_id("entity-owners")).to_be_visible()
        assert page.locator("[data-entity]").count() == 0
    assert [r[2] is not None for r in merges_in(stack, team)] == [True]


def test_entity_forms_need_the_session_and_its_csrf_token(stack: Stack, team: Team) -> None:
    """Without a browser: merge, keep apart and undo each need the session
    cookie, its CSRF token and no foreign Origin; a refusal changes nothing."""
    ada = team.clients["ada"]
    robins = write_robins(ada)

    def post(path: str, form: dict[str, str], headers: dict[str, str]) -> http.client.HTTPResponse:
        return post_form(stack.review_url, path, form, headers)

    signed_in = post("/signin", {"token": ada.token}, {})
    assert signed_in.status == 303
    session = {"Cookie": signed_in.getheader("Set-Cookie", "").split(";")[0]}
    merge = {
        "action": "merge",
        "kept_id": robins["goodwin"],
        "merged_id": robins["robin"],
        "purpose": "assist",
    }
    apart = {
        "action": "apart",
        "first_id": robins["goodwin"],
        "second_id": robins["robin"],
        "purpose": "assist",
    }
    for form in (merge, apart):
        assert post("/decide", {**form, "csrf": "forged"}, session).status == 403
        foreign = {**session, "Origin": "http://attacker.example"}
        assert post("/decide", {**form, "csrf": "forged"}, foreign).status == 403
        assert post("/decide", form, {}).status == 303  # no session: back to sign-in
    assert merges_in(stack, team) == []
    rows = dbutil.query(stack, team.database_name, "SELECT count(*) FROM entity_pair_apart")
    assert rows == [(0,)]

    done = ada.merge_entities(robins["goodwin"], robins["robin"]).merge
    undo = {"action": "undo", "merge_id": done.id, "purpose": "assist"}
    assert post("/decide", {**undo, "csrf": "forged"}, session).status == 403
    assert post("/decide", undo, {}).status == 303
    assert [r[2] for r in merges_in(stack, team)] == [None]  # still in force


def test_an_undo_posted_twice_answers_as_done(stack: Stack, team: Team) -> None:
    """A double-click posts the Undo form twice: the second found the merge no
    longer in force, and the page said "Undid the merge" beside "It is gone or
    no longer visible to you; nothing was done". Driven through the page's
    application with the owner's gateway client, as her session would."""
    ada = team.clients["ada"]
    robins = write_robins(ada)
    done = ada.merge_entities(robins["goodwin"], robins["robin"]).merge
    now = time.monotonic()
    session = Session(ada, "csrf", now, now)
    app = ReviewApp(stack.gateway)
    undo = {"action": "undo", "merge_id": done.id}
    app.decide(session, undo, "assist")
    app.decide(session, undo, "assist")
    assert session.flash == [("ok", "Undid the merge; both answer on their own again.")]
    # Posted again after the page showed that, it says so again, in its own words.
    session.flash.clear()
    app.decide(session, {**undo, "merge_id": done.id.upper()}, "assist")
    assert session.flash == [("ok", "That merge is already undone; nothing changed.")]
    undos = dbutil.query(
        stack,
        team.database_name,
        "SELECT count(*) FROM audit_log WHERE action = 'undo_entity_merge'",
    )
    assert [r[2] is not None for r in merges_in(stack, team)] == [True] and undos == [(1,)]
    # A merge this session never undid is still refused as the store answers.
    session.flash.clear()
    app.decide(session, {**undo, "merge_id": str(uuid.uuid4())}, "assist")
    assert len(session.flash) == 1 and session.flash[0][0] == "error"
    assert "nothing was done" in session.flash[0][1]


def _post_at_once(app: ReviewApp, session: Session, form: dict[str, str]) -> None:
    """``form`` posted twice at the same moment, as a double-click does."""
    start = threading.Barrier(2)

    def post() -> None:
        start.wait(timeout=30)
        app.decide(session, form, "assist")

    threads = [threading.Thread(target=post) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)


def test_an_undo_posted_twice_at_once_answers_as_done(stack: Stack, team: Team) -> None:
    """The two posts of a double-click may arrive together: whichever the store
    answers second still answers as done, not as a merge that is gone."""
    ada = team.clients["ada"]
    robins = write_robins(ada)
    app = ReviewApp(stack.gateway)
    for _ in range(5):
        done = ada.merge_entities(robins["goodwin"], robins["robin"]).merge
        now = time.monotonic()
        session = Session(ada, "csrf", now, now)
        _post_at_once(app, session, {"action": "undo", "merge_id": done.id})
        assert session.flash == [("ok", "Undid the merge; both answer on their own again.")]
