"""An owner reads who changed their workspace (design §10; issue 34, "an
owner's view"): members added, tokens made, rotated and revoked and settings
changed appear in the workspace's audit log, newest first, with who did it
(the owner by handle, or "operator"), on which member and token, and what
changed, never a token's secret; a change refused writes nothing."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

import grpc
import pytest

from recallatron.client import Client
from recallatron.vocabulary import AUDIT_ACTIONS, MAX_AUDIT_ACTIONS
from services.store.domain.administration import ACTIONS
from tests.conftest import Team

pytestmark = pytest.mark.integration


def events(owner: Client) -> list[Any]:
    return list(owner.audit_events(actions=list(ACTIONS)).events)


def error(call: Callable[[], Any]) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as info:
        call()
    return info.value


def test_admin_changes_are_in_the_audit_log(team: Team, operator: Client) -> None:
    ada = team.clients["ada"]
    # The team's own making: three members and a token each, by the operator.
    made = events(ada)
    assert [e.action for e in made].count("create_member") == 3
    assert [e.action for e in made].count("create_token") == 3
    assert {e.member_handle for e in made} == {"operator"}
    members = [json.loads(e.detail_json) for e in made if e.action == "create_member"]
    assert {(d["handle"], d["role"]) for d in members} == {
        ("ada", "owner"),
        ("bob", "member"),
        ("cy", "member"),
    }

    token = ada.create_token(team.members["bob"], "ci", expires_in=timedelta(days=1))
    rotated = ada.rotate_token(token.token_id, timedelta(0))
    ada.revoke_token(rotated.token_id)
    before = datetime.now(UTC)
    changed = ada.update_settings(dense_floor=0.35)
    # The answer says when it was written (the field was never set).
    assert changed.HasField("updated_at")
    assert changed.updated_at.ToDatetime(UTC) >= before - timedelta(minutes=1)

    newest = events(ada)[:4]
    assert [e.action for e in newest] == [
        "update_settings",
        "revoke_token",
        "rotate_token",
        "create_token",
    ]
    assert {e.member_handle for e in newest} == {"ada"}
    assert {e.member_id for e in newest} == {team.members["ada"]}
    details = [json.loads(e.detail_json) for e in newest]
    assert details[0]["changed"] == {"dense_floor": [0.3, 0.35]}
    assert details[1]["token_id"] == rotated.token_id
    assert details[2]["token_id"] == rotated.token_id
    assert details[2]["replaces"] == token.token_id
    assert details[3]["token_id"] == token.token_id
    assert details[3]["member_id"] == team.members["bob"]
    assert details[3]["label"] == "ci" and details[3]["expires_at"]
    text = str(ada.audit_events())
    assert token.token not in text and rotated.token not in text

    # A refused change writes nothing.
    logged = len(events(ada))
    refused = error(lambda: ada.update_settings(dense_floor=2.0))
    assert refused.code() == grpc.StatusCode.INVALID_ARGUMENT
    refused = error(lambda: ada.revoke_token(str(uuid.uuid4())))
    assert refused.code() == grpc.StatusCode.NOT_FOUND
    assert len(events(ada)) == logged


def test_a_settings_update_that_changes_nothing_writes_no_entry(team: Team) -> None:
    """The log holds the control plane's changes (docs/api.md): a setting
    given its own value is no change, so no entry says nothing changed; of
    several named, only those that changed are in the entry."""
    ada = team.clients["ada"]
    ada.update_settings(rerank_depth=12)
    before = len(events(ada))
    answer = ada.update_settings(rerank_depth=12)
    assert answer.settings.rerank_depth == 12
    assert len(events(ada)) == before, "an entry for a change of nothing"
    ada.update_settings(rerank_depth=12, expiry_days=30)
    newest = events(ada)
    assert len(newest) == before + 1
    assert json.loads(newest[0].detail_json)["changed"] == {"expiry_days": [0, 30]}


def test_a_token_revoked_again_writes_no_second_entry(team: Team) -> None:
    """A revocation retried (its answer lost), or asked by two owners at the
    same moment, answers as the first did, but the log holds one revocation,
    at the time the token stopped: an entry for each call would tell the
    owner it was revoked again, later, by whoever asked last."""
    ada = team.clients["ada"]
    token = ada.create_token(team.members["bob"], "twice")
    ada.revoke_token(token.token_id)
    ada.revoke_token(token.token_id)
    other = ada.create_token(team.members["bob"], "at once")
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda _: ada.revoke_token(other.token_id), range(4)))
    revoked = [
        json.loads(e.detail_json)["token_id"] for e in events(ada) if e.action == "revoke_token"
    ]
    assert sorted(revoked) == sorted([token.token_id, other.token_id])
    listed = {t.id: t for t in ada.list_tokens(team.members["bob"]).tokens}
    assert listed[token.token_id].HasField("revoked_at")
    assert listed[other.token_id].HasField("revoked_at")


def test_no_member_takes_the_name_the_log_gives_the_operator(team: Team, operator: Client) -> None:
    """The log names the operator's changes "operator" (docs/api.md); a member
    of that handle was made, and their entries read as the operator's to
    whoever reads the log by handle (the review page, an agent's audit_log)."""
    ada = team.clients["ada"]
    before = len(events(ada))
    for caller, handle in ((ada, "operator"), (operator, "Operator")):
        refused = error(partial(caller.create_member, team.workspace_id, handle))
        assert refused.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert str(refused.details()).startswith("handle: "), refused.details()
    assert len(events(ada)) == before
    assert ada.create_member(team.workspace_id, "operators").member.handle == "operators"


def test_an_unknown_action_filter_is_refused_naming_the_known_ones(team: Team) -> None:
    """An action the log never holds (a typo, a name of another system) would
    answer an empty page, as if nobody had done it: it is refused, naming the
    field and the actions there are; every known one is taken."""
    ada = team.clients["ada"]
    ada.remember("Something to audit")
    for asked, field in (
        (["remembered"], "actions[0]"),
        (["forget", "Forget"], "actions[1]"),
        (["remember", "delete_memory"], "actions[1]"),
    ):
        exc = error(partial(ada.audit_events, actions=asked))
        assert exc.code() == grpc.StatusCode.INVALID_ARGUMENT, (asked, exc.details())
        details = str(exc.details())
        assert details.startswith(f"{field}: not an audit action"), details
        assert all(a in details for a in AUDIT_ACTIONS), details
    known = list(AUDIT_ACTIONS)
    newest = ada.audit_events(actions=known[:MAX_AUDIT_ACTIONS]).events[0]
    assert newest.action == "remember"
    assert ada.audit_events(actions=["migrate", "update_settings"]).events == []
