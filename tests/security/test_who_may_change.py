"""Who may change a memory (design §4; issue 21): by default only its author and
the workspace's owners may correct, supersede or forget it; the workspace
setting members_may_edit opens workspace memories to every member who can see
them. A refused change is PERMISSION_DENIED and changes nothing; every
revision records who made it and why, and `read` shows that history. The
review page goes through the same calls and so the same rule."""

from __future__ import annotations

import http.client
import re
import time
from collections.abc import Iterator
from urllib.parse import urlencode, urlsplit

import grpc
import pytest

from recallatron.client import Client
from recallatron.v1 import common_pb2 as cpb
from recallatron_devkit.stack import Stack
from tests import dbutil
from tests.conftest import Team
from tests.surfaces.dedup_data import NEAR_DUPLICATES, wait_embedded

pytestmark = pytest.mark.integration

DENIED = grpc.StatusCode.PERMISSION_DENIED


def refused(call, code: grpc.StatusCode = DENIED) -> str:  # type: ignore[no-untyped-def]
    with pytest.raises(grpc.RpcError) as info:
        call()
    assert info.value.code() == code, info.value.details()
    return str(info.value.details())


def attempts(client: Client, memory_id: str, revision: int) -> dict[str, object]:
    """The three changes, each a call that would change the memory."""
    return {
        "correct": lambda: client.correct(
            memory_id, revision, "it was $1M", body="The budget is $1M."
        ),
        "supersede": lambda: client.supersede(
            memory_id, revision, "Budget (mine now)", "Only I see this.", "decision", "replaced"
        ),
        "forget": lambda: client.forget(memory_id, "gone"),
    }


@pytest.fixture
def members_may_edit(team: Team) -> Iterator[None]:
    team.clients["ada"].update_settings(members_may_edit=True)
    yield
    team.clients["ada"].update_settings(members_may_edit=False)


def test_by_default_a_member_cannot_change_another_members_workspace_memory(
    stack: Stack, team: Team
) -> None:
    ada, bob, cy = team.clients["ada"], team.clients["bob"], team.clients["cy"]
    budget = ada.remember(
        "Budget", "The budget is $10k.", "decision", audience_to="workspace"
    ).memory
    mine = cy.remember("Cy's note", "cy wrote this", audience_to="workspace").memory
    before = dbutil.checksum(stack, team.database_name)
    for target in (budget, mine):
        for name, call in attempts(bob, target.id, target.revision).items():
            message = refused(call)
            assert "author" in message and "owner" in message, (name, message)
    assert dbutil.checksum(stack, team.database_name) == before
    # Nothing changed for anyone: the owner still reads and recalls it as it was.
    again = ada.read([budget.id]).memories[0]
    assert (again.revision, again.body, again.superseded_by_id) == (1, budget.body, "")
    hits = ada.recall("budget", mode="lexical", skip_rerank=True).outcome.results
    assert budget.id in [r.memory.id for r in hits]


def test_the_author_and_an_owner_may_change_it(team: Team) -> None:
    ada, bob = team.clients["ada"], team.clients["bob"]
    own = bob.remember("Bob's plan", "draft", audience_to="workspace").memory
    fixed = bob.correct(own.id, 1, "typo", body="final").memory
    assert fixed.revision == 2
    # An owner may correct, supersede and forget a member's workspace memory.
    fixed = ada.correct(own.id, 2, "owner's edit", body="owner final").memory
    assert fixed.revision == 3
    other = bob.remember("Bob's other plan", audience_to="workspace").memory
    resp = ada.supersede(other.id, 1, "Owner's plan", "", "note", "replaced by the owner")
    assert resp.superseded.superseded_by_id == resp.memory.id
    third = bob.remember("Bob's third plan", audience_to="workspace").memory
    ada.forget(third.id, "owner cleans up")
    refused(lambda: bob.read([third.id]), grpc.StatusCode.NOT_FOUND)


def test_members_may_edit_opens_workspace_memories_to_every_member(
    team: Team, members_may_edit: None
) -> None:
    ada, bob = team.clients["ada"], team.clients["bob"]
    assert ada.call(ada.admin.GetSettings, _get_settings()).settings.members_may_edit
    # A member cannot change the setting back (owners only).
    refused(lambda: bob.update_settings(members_may_edit=False))
    shared = [
        ada.remember(f"Shared {i}", "workspace text", audience_to="workspace").memory
        for i in range(3)
    ]
    corrected = bob.correct(shared[0].id, 1, "bob knows better", body="bob's text").memory
    assert corrected.revision == 2 and corrected.created_by == team.members["ada"]
    resp = bob.supersede(shared[1].id, 1, "Bob's successor", "", "note", "newer facts")
    assert resp.superseded.superseded_by_id == resp.memory.id
    bob.forget(shared[2].id, "bob forgot it")
    refused(lambda: ada.read([shared[2].id]), grpc.StatusCode.NOT_FOUND)


def test_a_memory_addressed_to_one_member_is_his_to_change(team: Team) -> None:
    """Its only reader: the author no longer sees it, nobody else is affected."""
    ada, bob = team.clients["ada"], team.clients["bob"]
    for_bob = ada.remember("For bob only", "private", audience_to=team.members["bob"]).memory
    assert bob.correct(for_bob.id, 1, "bob's own view", body="mine").memory.revision == 2
    bob.forget(for_bob.id, "bob does not want it kept")
    refused(lambda: bob.read([for_bob.id]), grpc.StatusCode.NOT_FOUND)


def test_read_shows_who_changed_it_when_and_why(team: Team, members_may_edit: None) -> None:
    ada, bob = team.clients["ada"], team.clients["bob"]
    made = ada.remember("Budget three", "$10k", "decision", audience_to="workspace").memory
    time.sleep(0.01)
    ada.correct(made.id, 1, "finance confirmed $12k", body="$12k")
    time.sleep(0.01)
    bob.correct(made.id, 2, "bob says $1M", body="$1M")
    memory = bob.read([made.id]).memories[0]
    history = [(r.revision, r.action, r.changed_by, r.reason) for r in memory.revisions]
    assert history == [
        (1, cpb.REVISION_ACTION_CREATE, team.members["ada"], ""),
        (2, cpb.REVISION_ACTION_CORRECT, team.members["ada"], "finance confirmed $12k"),
        (3, cpb.REVISION_ACTION_CORRECT, team.members["bob"], "bob says $1M"),
    ]
    times = [r.changed_at.ToDatetime() for r in memory.revisions]
    assert times == sorted(times) and times[0] == memory.created_at.ToDatetime()
    # The superseded memory's history names who replaced it, and why.
    resp = bob.supersede(made.id, 3, "Budget four", "$2M", "decision", "new quarter")
    old = ada.read([made.id]).memories[0]
    assert [(r.revision, r.action, r.changed_by, r.reason) for r in old.revisions][-1] == (
        4,
        cpb.REVISION_ACTION_SUPERSEDE,
        team.members["bob"],
        "new quarter",
    )
    new = ada.read([resp.memory.id]).memories[0]
    assert [(r.action, r.changed_by) for r in new.revisions] == [
        (cpb.REVISION_ACTION_CREATE, team.members["bob"])
    ]


def test_revision_history_is_not_in_recall(team: Team) -> None:
    ada = team.clients["ada"]
    made = ada.remember("Lighthouse keeper rota", "weekly").memory
    ada.correct(made.id, 1, "monthly now", body="monthly")
    hits = ada.recall("lighthouse rota", mode="lexical", skip_rerank=True).outcome.results
    assert [r.memory.id for r in hits] == [made.id]
    assert not hits[0].memory.revisions


def test_review_page_applies_the_same_rule(stack: Stack, team: Team) -> None:
    """Bob sees ada's workspace near-duplicates on his review page, but
    forgetting or superseding one of them is refused, and nothing changes."""
    ada, bob = team.clients["ada"], team.clients["bob"]
    (t1, t2) = NEAR_DUPLICATES[0]
    a = ada.remember(*t1, audience_to="workspace").memory
    b = ada.remember(*t2, audience_to="workspace").memory
    wait_embedded(stack, team, [a.id, b.id])
    host = urlsplit(stack.review_url).netloc

    def request(method: str, path: str, form: dict[str, str] | None, cookie: str = "") -> tuple:
        conn = http.client.HTTPConnection(host, timeout=10)
        headers = {"Content-Type": "application/x-www-form-urlencoded"}
        if cookie:
            headers["Cookie"] = cookie
        conn.request(method, path, urlencode(form) if form is not None else None, headers)
        resp = conn.getresponse()
        return resp.status, resp.getheader("Set-Cookie", ""), resp.read().decode()

    status, set_cookie, _ = request("POST", "/signin", {"token": bob.token})
    assert status == 303
    cookie = set_cookie.split(";")[0]
    _, _, page = request("GET", "/", None, cookie)
    assert a.id in page and b.id in page  # the pair is bob's to see
    csrf = re.search(r'name="csrf" value="([^"]+)"', page)
    assert csrf is not None
    before = dbutil.checksum(stack, team.database_name)
    common = {"csrf": csrf.group(1), "purpose": "assist", "first_id": a.id, "second_id": b.id}
    decisions = [
        {
            **common,
            "action": "forget",
            "target_id": a.id,
            "target_revision": "1",
            "reason": "duplicate",
        },
        {
            **common,
            "action": "supersede",
            "retire_id": a.id,
            "retire_revision": "1",
            "keep_id": b.id,
            "keep_revision": "1",
        },
    ]
    for form in decisions:
        status, _, _ = request("POST", "/decide", form, cookie)
        assert status == 303
        _, _, page = request("GET", "/", None, cookie)
        assert "PERMISSION_DENIED" in page, form["action"]
    assert dbutil.checksum(stack, team.database_name) == before


def _get_settings():  # type: ignore[no-untyped-def]
    from recallatron.v1 import gateway_pb2 as pb

    return pb.GetSettingsRequest()
