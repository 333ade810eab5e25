"""The review page's "supersede A with B's text" never widens B's text
(design §4): the successor is derived from B, with the intersection of both
memories' audiences and purposes and a derived_from link. Driven through the
page's application (services/gateway/review_web.ReviewApp) with a member's
real gateway client, as a signed-in session would; the browser's part is in
test_review_page.py."""

from __future__ import annotations

import html
import re
import time

import grpc
import pytest

from recallatron.v1 import common_pb2 as cpb
from recallatron.v1 import gateway_pb2 as pb
from recallatron_devkit.stack import Stack
from services.gateway.review_web import ReviewApp, Session
from services.gateway.review_web.pages import pair_section
from tests import dbutil
from tests.conftest import Team

pytestmark = pytest.mark.integration


def _session(team: Team, handle: str) -> Session:
    now = time.monotonic()
    return Session(team.clients[handle], "csrf", now, now)


def _supersede_on_the_page(stack: Stack, team: Team, retire: cpb.Memory, keep: cpb.Memory) -> None:
    """ada's "supersede the first with the second's text", as the page sends it."""
    session = _session(team, "ada")
    form = {
        "action": "supersede",
        "retire_id": retire.id,
        "retire_revision": str(retire.revision),
        "keep_id": keep.id,
        "keep_revision": str(keep.revision),
    }
    ReviewApp(stack.gateway).decide(session, form, "assist")
    assert session.flash and session.flash[-1][0] == "ok", session.flash


def test_supersede_with_the_other_text_takes_the_intersection(stack: Stack, team: Team) -> None:
    ada, cy = team.clients["ada"], team.clients["cy"]
    # A: for the whole workspace, to assist. B: written for ada alone, to
    # assist and to personalize: its text was never meant for cy.
    a = ada.remember("Standup is at 9:30", audience_to="workspace", purposes=["assist"]).memory
    b = ada.remember(
        "Standup is at 9:30; Ada joins late on Mondays (therapy)",
        purposes=["assist", "personalize"],
    ).memory
    assert b.audience.member_id == team.members["ada"]
    _supersede_on_the_page(stack, team, a, b)
    old = ada.read([a.id]).memories[0]
    successor = ada.read([old.superseded_by_id]).memories[0]
    assert successor.body == b.body
    # workspace ∩ ada = ada; {assist} ∩ {assist, personalize} = {assist}
    assert successor.audience.member_id == team.members["ada"]
    assert list(successor.purposes) == [cpb.PURPOSE_ASSIST]
    assert successor.origin == cpb.ORIGIN_DERIVED
    assert [(link.kind, link.target.id) for link in successor.links] == [
        (cpb.LINK_KIND_DERIVED_FROM, b.id)
    ]
    # cy, who could read A, cannot read B's text through its successor.
    with pytest.raises(grpc.RpcError) as err:
        cy.read([successor.id])
    assert err.value.code() == grpc.StatusCode.NOT_FOUND  # type: ignore[attr-defined]
    recalled = cy.recall("Ada joins late on Mondays therapy", mode="lexical").outcome.results
    assert successor.id not in [r.memory.id for r in recalled]


def test_supersede_from_sources_refuses_a_wider_trust(team: Team) -> None:
    """The store's rule, as the page relies on it: asking for more than the
    intersection is refused, and nothing is written."""
    ada = team.clients["ada"]
    a = ada.remember("Release train leaves Friday", audience_to="workspace").memory
    b = ada.remember("Release train leaves Friday (Ada's notes)").memory
    request = pb.SupersedeRequest(
        request_id="widen-through-supersede",
        id=a.id,
        expected_revision=a.revision,
        kind=cpb.KIND_NOTE,
        title=b.title,
        audience=cpb.Audience(workspace=True),
        source_ids=[b.id],
    )
    with pytest.raises(grpc.RpcError) as err:
        ada.call(ada.memory.Supersede, request)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT  # type: ignore[attr-defined]
    assert "audience" in err.value.details()  # type: ignore[attr-defined]
    assert ada.read([a.id]).memories[0].revision == a.revision


def test_supersede_with_the_other_text_states_the_other_s_claims(stack: Stack, team: Team) -> None:
    """The successor holds B's text, so it states B's current claims (graph
    included), not A's: A's outdated claim was carried onto a memory whose text
    says otherwise, and lookup showed it as current."""
    ada = team.clients["ada"]
    a = ada.remember(
        "Robin lives in Lisbon", "Robin Goodwin lives in Lisbon.",
        mention_names=["Robin Goodwin"],
        claims=[{"entity": {"name": "Robin Goodwin"}, "attribute": "city", "value": "Lisbon"}],
    ).memory  # fmt: skip
    robin = a.mentions[0].entity_id
    b = ada.remember(
        "Robin lives in Porto", "Robin Goodwin lives in Porto, with Kit.",
        mention_ids=[robin],
        claims=[{"entity": {"entity_id": robin}, "attribute": "city", "value": "Porto",
                 "valid_from": "2024-01-01T00:00:00Z"}],
        relations=[{"subject": {"entity_id": robin}, "predicate": "lives_with",
                    "object": {"name": "Kit Ames"}}],
        aliases=[{"entity": {"entity_id": robin}, "alias": "Rob G"}],
    ).memory  # fmt: skip
    _supersede_on_the_page(stack, team, a, b)
    successor = ada.read([ada.read([a.id]).memories[0].superseded_by_id]).memories[0]
    current = [c for c in successor.claims if not c.HasField("retired_at")]
    assert [(c.attribute, c.value, c.valid_from.ToJsonString()) for c in current] == [
        ("city", "Porto", "2024-01-01T00:00:00Z")
    ]
    assert [(r.predicate, r.object.name) for r in successor.relations] == [
        ("lives_with", "Kit Ames")
    ]
    assert [al.alias for al in successor.aliases] == ["Rob G"]
    card = ada.lookup("Robin Goodwin").entities[0]
    assert sorted((at.value, at.memory_id) for at in card.attributes) == sorted(
        [("Porto", b.id), ("Porto", successor.id)]
    )


def _mentioned(memory: cpb.Memory) -> int:
    return len(memory.mentions) + memory.omitted.mentions


@pytest.mark.parametrize("services", [60, 100])
def test_supersede_with_the_text_of_a_memory_naming_many_entities(
    stack: Stack, team: Team, services: int
) -> None:
    """B names 61 entities through its relations (one remember may state 100):
    the page sent each of them again as a mention beside the relations that
    name them, past what one write may mention, and "supersede A with B's
    text" was refused ('mentions: at most 50 allowed'), a field the person
    never filled. With 101, one more than a read lists, none is lost."""
    ada = team.clients["ada"]
    a = ada.remember("Apollo depends on many services", audience_to="workspace").memory
    relations = [
        {"subject": {"name": "Apollo"}, "predicate": "depends_on", "object": {"name": f"svc{i}"}}
        for i in range(services)
    ]
    b = ada.remember("Apollo depends on its services", relations=relations).memory
    assert _mentioned(b) == services + 1
    _supersede_on_the_page(stack, team, a, b)
    successor = ada.read([ada.read([a.id]).memories[0].superseded_by_id]).memories[0]
    assert _mentioned(successor) == services + 1
    assert {m.entity_id for m in b.mentions} <= {
        x for r in successor.relations for x in (r.subject.id, r.object.id)
    }
    assert len(successor.relations) == services


def test_forget_on_the_page_checks_the_revision_it_showed(stack: Stack, team: Team) -> None:
    """The page's forget names the revision it showed, as its supersede does:
    a memory corrected since the page was drawn is not forgotten on the
    strength of its old text (ABORTED from the store, a flash on the page)."""
    ada = team.clients["ada"]
    shown = ada.remember("Deploys freeze on Fridays", audience_to="workspace").memory
    ada.correct(shown.id, shown.revision, body="Unless a fix is urgent.", reason="exception")
    session = _session(team, "ada")
    form = {
        "action": "forget",
        "target_id": shown.id,
        "target_revision": str(shown.revision),
        "reason": "duplicate",
    }
    ReviewApp(stack.gateway).decide(session, form, "assist")
    assert session.flash and session.flash[-1][0] == "error", session.flash
    assert "changed since" in session.flash[-1][1], session.flash
    # Not forgotten: it still reads, as corrected.
    still = ada.read([shown.id]).memories[0]
    assert still.revision == shown.revision + 1
    # Shown afresh, the same form forgets it.
    form["target_revision"] = str(still.revision)
    ReviewApp(stack.gateway).decide(session, form, "assist")
    assert session.flash[-1][0] == "ok", session.flash
    with pytest.raises(grpc.RpcError) as err:
        ada.read([shown.id])
    assert err.value.code() == grpc.StatusCode.NOT_FOUND


def test_forget_with_an_expected_revision_loses_the_race_as_correct_does(team: Team) -> None:
    """ForgetRequest.expected_revision: 0 is not checked (as before); another
    is ABORTED with the memory's current revision, nothing forgotten."""
    ada = team.clients["ada"]
    m = ada.remember("Quarterly review moved to Thursday", audience_to="workspace").memory
    ada.correct(m.id, m.revision, body="Thursday at ten.", reason="time")
    with pytest.raises(grpc.RpcError) as err:
        ada.forget(m.id, "outdated", expected_revision=m.revision)
    assert err.value.code() == grpc.StatusCode.ABORTED
    assert "expected_revision" in str(err.value.details())
    assert "revision 2" in str(err.value.details())
    done = ada.forget(m.id, "outdated", expected_revision=m.revision + 1)
    assert not done.replayed
    other = ada.remember("Unchecked forget", audience_to="workspace").memory
    ada.forget(other.id, "no revision given")


def _drawn_form(a: cpb.Memory, b: cpb.Memory, testid: str) -> dict[str, str]:
    """The fields of the pair's form ``testid`` as the page draws it."""
    drawn = pair_section(pb.DuplicatePair(first=a, second=b, cosine=0.97), "csrf", "assist")
    form = re.search(rf'<form [^>]*data-testid="{re.escape(testid)}">(.*?)</form>', drawn)
    assert form is not None, testid
    fields = re.findall(r'<input type=hidden name="([^"]*)" value="([^"]*)">', form.group(1))
    return {html.unescape(k): html.unescape(v) for k, v in fields}


@pytest.mark.parametrize("decision", ["forget", "supersede"])
def test_a_decision_posted_twice_answers_as_done(stack: Stack, team: Team, decision: str) -> None:
    """A double-click posts the form twice: the second found the memory
    forgotten (or superseded) by the first, and the page said "Forgot ..."
    beside "It is gone or no longer visible to you; nothing was done" (or
    "FAILED_PRECONDITION: ... superseded and can no longer change")."""
    ada = team.clients["ada"]
    a = ada.remember("Backups run nightly at 2am", audience_to="workspace").memory
    b = ada.remember("Nightly backups start at 2am", audience_to="workspace").memory
    form = _drawn_form(a, b, f"{decision}:A")
    if decision == "forget":
        form["reason"] = "said twice"
    session = _session(team, "ada")
    app = ReviewApp(stack.gateway)
    app.decide(session, form, "assist")
    app.decide(session, form, "assist")
    assert [level for level, _ in session.flash] == ["ok"], session.flash
    if decision == "forget":
        assert session.flash == [("ok", f"Forgot {a.id}.")]
        forgets = "SELECT count(*) FROM memory_revision WHERE memory_id = %s AND action = 'forget'"
        assert dbutil.query(stack, team.database_name, forgets, (a.id,)) == [(1,)]
    else:
        old = ada.read([a.id]).memories[0]
        assert session.flash == [
            ("ok", f"Superseded {a.id}; its successor is {old.superseded_by_id}.")
        ]
        # One successor, not two.
        same_text = "SELECT count(*) FROM memory WHERE title = %s"
        assert dbutil.query(stack, team.database_name, same_text, (b.title,)) == [(2,)]
    # A form drawn afresh is a decision of its own: the memory is gone or replaced.
    session.flash.clear()
    app.decide(session, _drawn_form(a, b, f"{decision}:A") | {"reason": "again"}, "assist")
    assert [level for level, _ in session.flash] == ["error"], session.flash
