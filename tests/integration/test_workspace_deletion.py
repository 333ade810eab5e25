"""Deleting a workspace (design §10; issue 34): `admin delete-workspace W
--confirm W` refuses its tokens on the next call at every gateway (two here),
drops its database, leaves of its control-plane rows only a tombstone (id and
time), and after the server's scrub (`recallatron scrub --server`) no file
under the server's data directory holds its memories' text. A wrong
confirmation or a caller who is not the operator changes nothing."""

from __future__ import annotations

import json
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from functools import partial

import grpc
import psycopg
import pytest

from recallatron.client import Client
from recallatron_cli.main import main
from recallatron_devkit.stack import Stack
from services.store.infrastructure.db import CONTROL_DATABASE, with_database
from tests import dbutil
from tests.conftest import Team, make_team, wait_for
from tests.integration.test_forget_completely import _grep, _scrub
from tests.integration.test_metrics import scrape
from tests.replicas import second_gateway as second_gateway  # the fixture
from tests.security.test_member_removal import error, refused

pytestmark = pytest.mark.integration


def control(stack: Stack, sql: str, params: tuple[object, ...]) -> list[tuple[object, ...]]:
    return dbutil.query(stack, CONTROL_DATABASE, sql, params)


def test_bad_input_and_other_callers_delete_nothing(
    stack: Stack, operator: Client, team: Team, capsys: pytest.CaptureFixture[str]
) -> None:
    ada = team.clients["ada"]
    memory = ada.remember("still here", audience_to="workspace").memory.id
    before = dbutil.checksum(stack, team.database_name)
    for workspace, confirm, field in (
        (team.slug, "another", "confirm"),
        (team.slug, "", "confirm"),
        ("", "", "workspace"),
        ("x\x00y", "x\x00y", "workspace"),
    ):
        exc = error(partial(operator.delete_workspace, workspace, confirm))
        assert exc.code() == grpc.StatusCode.INVALID_ARGUMENT, exc.details()
        assert field in str(exc.details()), exc.details()
    exc = error(lambda: operator.delete_workspace("t-nowhere", "t-nowhere"))
    assert exc.code() == grpc.StatusCode.NOT_FOUND
    # An owner may not delete their workspace; only the operator may.
    exc = error(lambda: ada.delete_workspace(team.slug, team.slug))
    assert exc.code() == grpc.StatusCode.PERMISSION_DENIED
    # The command line refuses a mismatch before anything is sent.
    with pytest.raises(SystemExit) as stop:
        main(["admin", "--gateway", stack.gateway, "--token", stack.admin_token,
              "delete-workspace", team.slug, "--confirm", team.workspace_id[:8]])  # fmt: skip
    assert stop.value.code == 2 and "confirm" in capsys.readouterr().err
    assert dbutil.checksum(stack, team.database_name) == before
    assert ada.read([memory]).memories[0].id == memory


def test_delete_refuses_tokens_drops_the_database_and_keeps_a_tombstone(
    stack: Stack, operator: Client, second_gateway: str, capsys: pytest.CaptureFixture[str]
) -> None:
    team = make_team(stack, operator, ("ada", "bob"))
    ada, bob = team.clients["ada"], team.clients["bob"]
    tag = uuid.uuid4().hex
    title, body = f"Zqdelete title {tag[:12]}", f"zqdeletebody{tag[12:24]} goes with it"
    entity, value = f"Zqdelentity {tag[24:30]}", f"zqdelvalue{tag[:8]}"
    m = ada.remember(
        title,
        body,
        audience_to="workspace",
        mention_names=[entity],
        claims=[{"entity": {"name": entity}, "attribute": "secret", "value": value}],
    ).memory
    ada.wait_embedded(timeout=120)
    elsewhere = Client(second_gateway, bob.token)
    for client in (bob, elsewhere, bob, elsewhere):  # cached at both gateways
        assert client.read([m.id]).memories[0].title == title
    with psycopg.connect(stack.database_url, autocommit=True) as conn:
        conn.execute("CHECKPOINT")

    common = ["--gateway", stack.gateway, "--token", stack.admin_token]
    started = time.monotonic()
    assert main(["admin", *common, "delete-workspace", team.slug, "--confirm", team.slug,
                 "--json"]) == 0  # fmt: skip
    took = time.monotonic() - started
    answer = json.loads(capsys.readouterr().out)
    assert answer["workspace_id"] == team.workspace_id and answer["tokens_revoked"] == "2"

    # Tokens: refused on the next call here, and at the other gateway as soon
    # as the store's stream tells it.
    assert refused(ada, m.id) and refused(bob, m.id)
    wait_for(lambda: refused(elsewhere, m.id), "the other gateway refusing the token", 30)
    # The database is gone from the server.
    with psycopg.connect(stack.database_url) as conn:
        gone = conn.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", (team.database_name,)
        ).fetchall()
    assert gone == []
    # Its pools are closed: the store's at once, the embedding job's on the
    # deletion's notification (or, unused, when they idle out).
    assert team.database_name not in scrape(stack.config.metrics_ports["store"])
    wait_for(
        lambda: team.database_name not in scrape(stack.config.metrics_ports["embedding-job"]),
        "the embedding job's pools of the database closed",
        30,
    )
    # Of the control plane's rows only the tombstone stays.
    ws = team.workspace_id
    assert control(stack, "SELECT 1 FROM workspace WHERE id = %s", (ws,)) == []
    assert control(stack, "SELECT 1 FROM member WHERE workspace_id = %s", (ws,)) == []
    assert (
        control(
            stack,
            "SELECT 1 FROM access_token WHERE member_id = ANY(%s::uuid[])",
            (list(team.members.values()),),
        )
        == []
    )
    assert control(stack, "SELECT 1 FROM workspace_work WHERE workspace_id = %s", (ws,)) == []
    assert len(control(stack, "SELECT deleted_at FROM workspace_tombstone WHERE id = %s", (ws,)))
    # Deleting again says when it went; its slug may be used again.
    exc = error(lambda: operator.delete_workspace(ws, ws))
    assert exc.code() == grpc.StatusCode.NOT_FOUND and "deleted at" in str(exc.details())
    again = make_team(stack, operator, ("ada",))
    assert operator.delete_workspace(again.workspace_id, again.slug).slug == again.slug
    fresh = operator.create_workspace(team.slug).workspace
    assert fresh.id != ws and fresh.slug == team.slug

    # Its text may still sit in the WAL until the server's scrub; after it, no file.
    data = stack.state_dir / "pgdata"
    needles = [title, body, f"zqdeletebody{tag[12:24]}", entity, value]
    before = _grep(data, needles)
    done = _scrub(stack, "--server", "default", "--json")
    assert done.returncode == 0, done.stderr
    scrubbed = json.loads(done.stdout)
    assert scrubbed["server"] == "default" and scrubbed["wal_cycles"] >= 1
    with capsys.disabled():
        print(f"\ndelete-workspace took {took:.2f} s (reported, not asserted)")
        print(f"scrub --server: WAL cycled {scrubbed['wal_cycles']} times")
    after = _grep(data, needles)
    with capsys.disabled():
        print(f"after the drop: {len(before)} hits", *before, sep="\n  ")
    assert after == []
    # The store serves on: other workspaces and the new one of that slug.
    other = make_team(stack, operator, ("dee",))
    kept = other.clients["dee"].remember("after a deletion").memory.id
    assert other.clients["dee"].read([kept]).memories[0].id == kept
    elsewhere.close()


def test_no_token_is_made_while_a_deletion_is_under_way(
    stack: Stack, operator: Client, team: Team
) -> None:
    """A token made in the middle of a deletion lived, unannounced, until the
    deletion's last step (the database already dropped): it is refused now.
    So is a member, which was answered and then deleted with the rest."""
    bob = team.members["bob"]
    with psycopg.connect(with_database(stack.database_url, CONTROL_DATABASE)) as deleting:
        # What a deletion holds for its whole course (queries.DELETION_LOCK).
        deleting.execute("SELECT pg_advisory_lock(7402, hashtext(%s::text))", (team.workspace_id,))
        for call in (
            partial(operator.create_token, bob, "during"),
            partial(team.clients["ada"].create_token, bob, "during"),
            partial(operator.create_member, team.workspace_id, "during"),
            partial(team.clients["ada"].create_member, team.workspace_id, "during"),
        ):
            exc = error(call)
            assert exc.code() == grpc.StatusCode.FAILED_PRECONDITION, exc.details()
            assert "being deleted" in str(exc.details())
        deleting.execute(
            "SELECT pg_advisory_unlock(7402, hashtext(%s::text))", (team.workspace_id,)
        )
    assert operator.create_token(bob, "after").token
    assert operator.create_member(team.workspace_id, "after").member.handle == "after"


def test_a_write_under_way_when_its_database_is_dropped_is_not_found(
    stack: Stack, operator: Client
) -> None:
    """A write past the gateway's token check and waiting in the workspace's
    database when the deletion drops it (its session ended by the drop) ends
    NOT_FOUND, as a call naming a deleted workspace does: never INTERNAL."""
    team = make_team(stack, operator, ("ada", "bob"))
    bob = team.members["bob"]
    team.clients["ada"].remember("before", audience_to="workspace")
    with psycopg.connect(dbutil.workspace_url(stack, team.database_name), autocommit=True) as conn:
        # Bob's write lock (migration 0035), held alone: his write waits for it.
        conn.execute("SELECT pg_advisory_lock(7404, hashtext(%s::text))", (bob,))
        with ThreadPoolExecutor(1) as pool:
            writing = pool.submit(team.clients["bob"].remember, "under way")
            wait_for(
                lambda: control(
                    stack,
                    "SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
                    " AND database = (SELECT oid FROM pg_database WHERE datname = %s)",
                    (team.database_name,),
                ),
                "bob's write waiting for his lock",
                60,
            )
            operator.delete_workspace(team.workspace_id, team.slug)
            exc = error(lambda: writing.result(timeout=120))
    assert exc.code() == grpc.StatusCode.NOT_FOUND, exc.details()


def test_a_workspace_named_by_its_id_in_another_spelling_is_deleted(
    stack: Stack, operator: Client
) -> None:
    """An id in upper case or without hyphens is the same id, as every field
    that takes only an id reads one (CreateMember took it): DeleteWorkspace
    said "no workspace" for it, and a second delete so spelled did not say
    when it was deleted."""
    team = make_team(stack, operator, ("ada",))
    upper, bare = team.workspace_id.upper(), uuid.UUID(team.workspace_id).hex
    exc = error(lambda: operator.delete_workspace(upper, "another"))
    assert exc.code() == grpc.StatusCode.INVALID_ARGUMENT and "confirm" in str(exc.details())
    done = operator.delete_workspace(upper, bare)
    assert (done.workspace_id, done.slug) == (team.workspace_id, team.slug)
    exc = error(lambda: operator.delete_workspace(bare, bare))
    assert exc.code() == grpc.StatusCode.NOT_FOUND and "deleted at" in str(exc.details())
