"""The dedup review page end to end in real headless Chromium (Debian's
chromium, driven by Playwright's Python package; no browser download):
sign-in with a member token, pairs side by side, each decision and its
effect through the API, and nothing of another member's ever on the page.
Screenshots are kept under test-artifacts/."""

from __future__ import annotations

import grpc
import pytest
from playwright.sync_api import Page, expect

from recallatron_devkit.stack import Stack
from tests import dbutil
from tests.conftest import Team
from tests.surfaces.browser import ARTIFACTS, browser_page, post_form, sign_in
from tests.surfaces.dedup_data import NEAR_DUPLICATES, wait_embedded

pytestmark = pytest.mark.integration


def pair_with(page: Page, memory_id: str):  # type: ignore[no-untyped-def]
    return page.locator("[data-testid=pair]").filter(has=page.locator(f'[data-id="{memory_id}"]'))


def test_review_page_end_to_end(stack: Stack, team: Team) -> None:
    ada, bob = team.clients["ada"], team.clients["bob"]
    (k1, k2), (f1, f2), (s1, s2), (h1, h2), _ = NEAR_DUPLICATES
    keep = [ada.remember(*k1, audience_to="workspace").memory, ada.remember(*k2).memory]
    forget = [ada.remember(*f1).memory, ada.remember(*f2).memory]
    supersede = [
        ada.remember(*s1, kind="fact").memory,
        ada.remember(*s2, kind="fact", mention_names=["VPN"]).memory,
    ]
    # Bob's private near-duplicates: never on ada's page, and vice versa.
    hidden = [bob.remember(*h1).memory, bob.remember(*h2).memory]
    ada_ids = {m.id for m in keep + forget + supersede}
    wait_embedded(stack, team, [*ada_ids, *(m.id for m in hidden)])

    with browser_page() as (context, page):
        sign_in(page, stack.review_url, "rc_not_a_token")
        expect(page.get_by_role("alert")).to_contain_text("unknown or revoked")

        sign_in(page, stack.review_url, ada.token)
        pairs = page.locator("[data-testid=pair]")
        expect(pairs).to_have_count(3)
        shown = set(page.locator("[data-id]").evaluate_all("els => els.map(e => e.dataset.id)"))
        assert shown == ada_ids
        assert not shown & {m.id for m in hidden}
        # Side by side, with dates, origin, revision and provenance.
        card = pair_with(page, supersede[1].id).locator(f'[data-id="{supersede[1].id}"]')
        for text in (s2[0], "Created", "told", "Revision", "mentions VPN", "Provenance"):
            expect(card).to_contain_text(text)
        page.screenshot(path=str(ARTIFACTS / "review-page.png"), full_page=True)

        # The token stays on the server: the browser holds an HttpOnly session id.
        (cookie,) = context.cookies()
        assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
        assert ada.token not in cookie["value"] and ada.token not in page.content()

        # Keep both: gone from the page and never proposed again.
        pair_with(page, keep[0].id).get_by_role("button", name="Keep both").click()
        expect(page.get_by_test_id("flash")).to_contain_text("Kept both")
        expect(pairs).to_have_count(2)
        listed = {frozenset((p.first.id, p.second.id)) for p in ada.duplicate_pairs().pairs}
        assert frozenset(m.id for m in keep) not in listed

        # Forget one, with a reason: its text is purged.
        target = pair_with(page, forget[0].id)
        victim = target.get_attribute("data-first")
        target.get_by_label("reason to forget A").fill("same as B")
        target.get_by_role("button", name="Forget A").click()
        expect(page.get_by_test_id("flash")).to_contain_text(f"Forgot {victim}")
        with pytest.raises(grpc.RpcError) as err:
            ada.read([victim])  # type: ignore[list-item]
        assert err.value.code() == grpc.StatusCode.NOT_FOUND

        # Supersede one with the other's text: the old one stays readable,
        # points to a new memory carrying the kept one's content.
        target = pair_with(page, supersede[0].id)
        old_id = target.get_attribute("data-first")
        kept = next(m for m in supersede if m.id != old_id)
        target.get_by_role("button", name="Supersede A with B's text").click()
        expect(page.get_by_test_id("flash")).to_contain_text(f"Superseded {old_id}")
        old = ada.read([old_id]).memories[0]  # type: ignore[list-item]
        assert old.superseded_by_id and old.revision == 2
        successor = ada.read([old.superseded_by_id]).memories[0]
        assert (successor.title, successor.body, successor.kind) == (
            kept.title,
            kept.body,
            kept.kind,
        )
        assert [m.name for m in successor.mentions] == [m.name for m in kept.mentions]
        # (The successor and the kept memory may pair up again once embedded.)
        expect(pair_with(page, old_id)).to_have_count(0)  # type: ignore[arg-type]
        page.screenshot(path=str(ARTIFACTS / "review-page-after.png"), full_page=True)

        page.get_by_test_id("signout").click()
        expect(page.get_by_test_id("token")).to_be_visible()
        assert context.cookies() == []

        # Bob sees his own pair only.
        sign_in(page, stack.review_url, bob.token)
        expect(pairs).to_have_count(1)
        shown = set(page.locator("[data-id]").evaluate_all("els => els.map(e => e.dataset.id)"))
        assert shown == {m.id for m in hidden}


def test_review_page_refuses_forged_and_cross_site_posts(stack: Stack, team: Team) -> None:
    """Without a browser: a decision needs the session cookie, the session's
    CSRF token and no foreign Origin; each refusal changes nothing."""
    import http.client

    ada = team.clients["ada"]
    a = ada.remember("Quarterly numbers go to finance on the 3rd").memory
    b = ada.remember("Quarterly numbers are sent to finance on the 3rd").memory

    def post(path: str, form: dict[str, str], headers: dict[str, str]) -> http.client.HTTPResponse:
        return post_form(stack.review_url, path, form, headers)

    signed_in = post("/signin", {"token": ada.token}, {})
    assert signed_in.status == 303
    cookie = signed_in.getheader("Set-Cookie", "")
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    session = {"Cookie": cookie.split(";")[0]}
    keep = {"action": "keep", "first_id": a.id, "second_id": b.id, "purpose": "assist"}

    assert post("/decide", {**keep, "csrf": "forged"}, session).status == 403
    assert post("/decide", {**keep, "csrf": "\u00e9"}, session).status == 403
    foreign = {**session, "Origin": "http://attacker.example"}
    assert post("/decide", {**keep, "csrf": "forged"}, foreign).status == 403
    assert post("/decide", keep, {}).status == 303  # no session: back to sign-in
    rows = dbutil.query(stack, team.database_name, "SELECT count(*) FROM dismissed_pair")
    assert rows == [(0,)]
