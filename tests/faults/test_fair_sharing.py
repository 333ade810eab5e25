"""Fair sharing (design §9; issue 22) on a stack of its own: work a client
abandoned stops in Postgres (pg_stat_activity) within 100 ms of its deadline
or of its cancel; a workspace whose calls pile up is refused fast with
RESOURCE_EXHAUSTED and a retry hint while another workspace is served; and a
flood of unknown tokens from one address is limited, an address a front of
the project's forwards counting as its own. A workspace's calls are
made to wait by a lock held on its `memory` table, so nothing here depends
on how fast this machine is."""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.parse
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import grpc
import psycopg
import pytest

from recallatron import forwarding
from recallatron.client import Client
from recallatron.v1 import common_pb2 as cpb
from recallatron.v1 import gateway_pb2 as pb
from recallatron_devkit.stack import Stack
from tests import dbutil
from tests.conftest import wait_for
from tests.faults.stackutil import (
    new_stack,
    owner_client,
    plain_client,
    record,
    retry_delay,
    running,
)
from tests.surfaces.httpjson import call

pytestmark = pytest.mark.integration

QUEUE = 8
FORWARDING_SECRET = "a-secret-the-fronts-and-the-gateway-share"
ENV = {
    "RECALLATRON_WORKSPACE_QUEUE": str(QUEUE),
    "RECALLATRON_AUTH_FAILURE_BURST": "5",
    "RECALLATRON_AUTH_FAILURES_PER_SECOND": "0.2",
    "RECALLATRON_FORWARDING_SECRET": FORWARDING_SECRET,
    # Longer than the statement timeout (15 s): a call abandoned by its
    # client must stop on that, not on the gateway's deadline for the store.
    "RECALLATRON_STORE_TIMEOUT_SECONDS": "60",
}
# Backends of the app role busy with a statement in one database.
BUSY = """
SELECT count(*) FROM pg_stat_activity
WHERE datname = %s AND usename = 'recallatron_app' AND state = 'active'
"""


@pytest.fixture(scope="module")
def stack(prepared_models_dir: Path) -> Iterator[Stack]:
    with running(new_stack(prepared_models_dir, ENV)) as started:
        yield started


@contextmanager
def locked(stack: Stack, database: str) -> Iterator[None]:
    """Every statement on the workspace's memories waits while this holds."""
    with psycopg.connect(dbutil.workspace_url(stack, database)) as conn:
        conn.execute("LOCK TABLE memory IN ACCESS EXCLUSIVE MODE")
        try:
            yield
        finally:
            conn.rollback()


def busy(stack: Stack, database: str) -> int:
    return int(dbutil.query(stack, "postgres", BUSY, (database,))[0][0])


def workspace(stack: Stack, slug: str) -> tuple[Client, str, str]:
    client, _, database = owner_client(stack, f"{slug}-{uuid.uuid4().hex[:6]}")
    memory_id = client.remember(
        f"{slug} note", "something to read", mention_names=["Ada"]
    ).memory.id
    return client, database, memory_id


def read_request(memory_id: str) -> pb.ReadRequest:
    return pb.ReadRequest(ids=[memory_id])


def test_a_statement_stops_at_its_calls_deadline(stack: Stack) -> None:
    client, database, memory_id = workspace(stack, "deadline")
    with locked(stack, database):
        outcome: list[grpc.StatusCode] = []
        started = time.monotonic()

        def read() -> None:
            try:
                client.memory.Read(read_request(memory_id), metadata=client._md(), timeout=1.0)
            except grpc.RpcError as exc:
                outcome.append(exc.code())  # type: ignore[attr-defined]

        thread = threading.Thread(target=read)
        thread.start()
        wait_for(lambda: busy(stack, database) >= 1, "the read to wait on the lock", 5)
        thread.join()
        # 100 ms after the client's deadline, nothing of it runs any more.
        time.sleep(max(0.0, started + 1.0 + 0.1 - time.monotonic()))
        left = busy(stack, database)
    assert outcome and outcome[0] in (
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.UNAVAILABLE,
    )
    assert left == 0
    client.close()


def test_a_cancelled_call_stops_its_statement(stack: Stack) -> None:
    client, database, memory_id = workspace(stack, "cancel")
    with locked(stack, database):
        future = client.memory.Read.future(
            read_request(memory_id), metadata=client._md(), timeout=30
        )
        wait_for(lambda: busy(stack, database) >= 1, "the read to wait on the lock", 5)
        future.cancel()
        time.sleep(0.1)
        left = busy(stack, database)
    assert left == 0
    client.close()


# Every backend busy with a statement in one database, whichever role (the
# owner's listings use the owner role), the test's own lock left out.
ANY_BUSY = """
SELECT count(*) FROM pg_stat_activity
WHERE datname = %s AND state = 'active' AND pid <> %s
"""
# Tools whose statements take other paths than Read's: recall through rank's
# fan-out to the store, the graph, an owner's listing, a write.
TOOLS: dict[str, Callable[[Client, float], Any]] = {
    "recall": lambda c, t: c.memory.Recall.future(
        pb.RecallRequest(query="note", limit=5), metadata=c._md(), timeout=t
    ),
    "lookup": lambda c, t: c.memory.Lookup.future(
        pb.LookupRequest(name="Ada"), metadata=c._md(), timeout=t
    ),
    "list_memories": lambda c, t: c.memory.ListMemories.future(
        pb.ListMemoriesRequest(), metadata=c._md(), timeout=t
    ),
    "remember": lambda c, t: c.memory.Remember.future(
        pb.RememberRequest(kind=cpb.KIND_NOTE, title="late", request_id=uuid.uuid4().hex),
        metadata=c._md(),
        timeout=t,
    ),
}


@pytest.mark.parametrize("how", ["deadline", "cancel"])
@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_every_kind_of_call_stops_its_statement(stack: Stack, tool: str, how: str) -> None:
    """Past its deadline or cancelled by its client, a call's statement is
    gone from pg_stat_activity (a generous wait: well before the fixed
    statement timeout of 15 s would end it)."""
    client, database, _ = workspace(stack, f"stop-{how}-{tool.replace('_', '-')}")
    client.wait_embedded(timeout=120)  # the embedding job's statements done
    with psycopg.connect(dbutil.workspace_url(stack, database)) as conn:
        conn.execute("LOCK TABLE memory, entity, entity_alias IN ACCESS EXCLUSIVE MODE")
        mine = conn.info.backend_pid

        def active() -> int:
            return int(dbutil.query(stack, "postgres", ANY_BUSY, (database, mine))[0][0])

        future = TOOLS[tool](client, 1.0 if how == "deadline" else 60.0)
        wait_for(lambda: active() >= 1, "the call's statement to wait on the lock", 10)
        if how == "cancel":
            future.cancel()
        else:
            with pytest.raises(grpc.RpcError) as refused:
                future.result()
            assert refused.value.code() in (
                grpc.StatusCode.DEADLINE_EXCEEDED,
                grpc.StatusCode.UNAVAILABLE,
            )
        wait_for(lambda: active() == 0, "the statement to stop", 8)
        conn.rollback()
    client.close()


def test_a_write_past_its_deadline_is_kept_once_when_sent_again(stack: Stack) -> None:
    """A remember stopped at its deadline changed nothing; sent again with
    its request id it is kept, once."""
    client, database, _ = workspace(stack, "late-write")
    client.wait_embedded(timeout=120)
    request = pb.RememberRequest(kind=cpb.KIND_NOTE, title="late write", request_id="late-1")
    with locked(stack, database):
        with pytest.raises(grpc.RpcError) as refused:
            client.memory.Remember(request, metadata=client._md(), timeout=1.0)
        assert refused.value.code() in (
            grpc.StatusCode.DEADLINE_EXCEEDED,
            grpc.StatusCode.UNAVAILABLE,
        )
    kept = client.memory.Remember(request, metadata=client._md(), timeout=10).memory.id
    rows = dbutil.query(stack, database, "SELECT id FROM memory WHERE title = 'late write'")
    assert [str(r[0]) for r in rows] == [kept]
    client.close()


def test_an_http_json_client_that_goes_away_stops_its_statement(stack: Stack) -> None:
    """A Read over HTTP/JSON whose client closes its connection while the
    statement waits: the statement is gone from pg_stat_activity (a generous
    wait, well before the statement timeout of 15 s would end it)."""
    client, database, memory_id = workspace(stack, "http-gone")
    body = json.dumps({"ids": [memory_id]}).encode()
    url = urllib.parse.urlsplit(stack.http_url)
    head = (
        "POST /recallatron.v1.MemoryService/Read HTTP/1.1\r\n"
        f"Host: {url.netloc}\r\nContent-Type: application/json\r\n"
        f"Authorization: Bearer {client.token}\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    with locked(stack, database):
        conn = socket.create_connection((url.hostname, url.port), timeout=30)
        conn.sendall(head.encode() + body)
        wait_for(lambda: busy(stack, database) >= 1, "the read to wait on the lock", 10)
        conn.close()
        wait_for(lambda: busy(stack, database) == 0, "the statement to stop", 10)
    client.close()


def test_a_piled_up_workspace_is_refused_while_another_is_served(stack: Stack) -> None:
    noisy, noisy_db, noisy_id = workspace(stack, "noisy")
    quiet, _, quiet_id = workspace(stack, "quiet")
    codes: Counter[str] = Counter()
    hints: list[float] = []
    lock = threading.Lock()

    def read() -> None:
        try:
            noisy.memory.Read(read_request(noisy_id), metadata=noisy._md(), timeout=5)
            code = "OK"
        except grpc.RpcError as exc:
            code = exc.code().name  # type: ignore[attr-defined]
            if code == "RESOURCE_EXHAUSTED":
                with lock:
                    hints.append(retry_delay(exc))
        with lock:
            codes[code] += 1

    with locked(stack, noisy_db):
        threads = [threading.Thread(target=read) for _ in range(40)]
        for t in threads:
            t.start()
        wait_for(lambda: codes["RESOURCE_EXHAUSTED"] > 0 or None, "a refusal", 10)
        # The noisy workspace's calls wait (or are refused); the quiet one's is served.
        got = quiet.memory.Read(read_request(quiet_id), metadata=quiet._md(), timeout=2)
        assert [m.id for m in got.memories] == [quiet_id]
        still_waiting = 40 - sum(codes.values())
    for t in threads:
        t.join()
    record("fair_refusals", codes=dict(codes), waiting_while_quiet_served=still_waiting)
    # At most its share ran or waited; the rest were told when to come back.
    assert codes["RESOURCE_EXHAUSTED"] >= 40 - (4 + QUEUE) * 2  # gateway and store shares
    assert hints and all(h > 0 for h in hints)
    assert still_waiting > 0
    noisy.close()
    quiet.close()


def test_tokens_once_issued_do_not_spend_the_addresss_failure_budget(stack: Stack) -> None:
    """A revoked, expired, removed member's or deleted workspace's token is a
    stale client, not a guess: however often it calls, a new token from the
    same address (one host running many agents) is still answered. Runs
    before the flood below, which empties this address's budget."""
    operator = Client(stack.gateway, stack.admin_token)
    try:
        ws = operator.create_workspace(f"stale-{uuid.uuid4().hex[:6]}").workspace
        owner = operator.create_member(ws.id, "owner", owner=True).member
        leaver = operator.create_member(ws.id, "leaver").member
        revoked = operator.create_token(owner.id, "revoked")
        expiring = operator.create_token(owner.id, "expiring", expires_in=timedelta(seconds=1))
        removed = operator.create_token(leaver.id, "removed").token
        gone_ws = operator.create_workspace(f"gone-{uuid.uuid4().hex[:6]}").workspace
        gone_owner = operator.create_member(gone_ws.id, "owner", owner=True).member
        gone = operator.create_token(gone_owner.id, "gone").token
        operator.revoke_token(revoked.token_id)
        operator.remove_member(leaver.id, "erase")
        operator.delete_workspace(gone_ws.id, confirm=gone_ws.id)
        stale = [
            plain_client(stack.gateway, t) for t in (revoked.token, expiring.token, removed, gone)
        ]

        def refused_as_expired() -> bool:
            try:
                stale[1].recall("anything")
            except grpc.RpcError as exc:
                return "expired" in (exc.details() or "")  # type: ignore[attr-defined]
            return False

        wait_for(refused_as_expired, "the token to expire", timeout=60)
        codes: Counter[str] = Counter()
        for _ in range(8):  # 32 failed calls, 8 by each token, against a budget of 5
            for client in stale:
                try:
                    client.recall("anything")
                except grpc.RpcError as exc:
                    codes[exc.code().name] += 1  # type: ignore[attr-defined]
        assert codes == {"UNAUTHENTICATED": 32}
        fresh = plain_client(stack.gateway, operator.create_token(owner.id, "fresh").token)
        written = fresh.remember("a neighbour's note", "served all along").memory.id
        assert [m.id for m in fresh.read([written]).memories] == [written]
        for client in [*stale, fresh]:
            client.close()
    finally:
        operator.close()


def test_the_operator_token_on_a_members_method_is_not_a_guess(stack: Stack) -> None:
    """The operator's token sent to a method that needs a member's (a script
    asking for the status or the settings with it) is refused saying so, and
    spends nothing of the address's failed-authentication budget: it is the
    gateway's own token, not a guess. Runs before the flood below."""
    operator = Client(stack.gateway, stack.admin_token)
    try:
        ws = operator.create_workspace(f"op-{uuid.uuid4().hex[:6]}").workspace
        owner = operator.create_member(ws.id, "owner", owner=True).member
        codes: Counter[str] = Counter()
        for _ in range(8):  # against a budget of 5
            for call in (operator.status, lambda: operator.recall("anything")):
                try:
                    call()
                except grpc.RpcError as exc:
                    codes[exc.code().name] += 1  # type: ignore[attr-defined]
                    assert "operator" in (exc.details() or "")  # type: ignore[attr-defined]
        assert codes == {"UNAUTHENTICATED": 16}
        fresh = plain_client(stack.gateway, operator.create_token(owner.id, "fresh").token)
        written = fresh.remember("a neighbour's note", "served all along").memory.id
        assert [m.id for m in fresh.read([written]).memories] == [written]
        fresh.close()
    finally:
        operator.close()


def test_a_flood_of_unknown_tokens_is_limited_per_address(stack: Stack) -> None:
    client, _, memory_id = workspace(stack, "flood")
    client.read([memory_id])  # known to the gateway now
    codes: Counter[str] = Counter()
    for _ in range(30):
        stranger = plain_client(stack.gateway, "rc_" + uuid.uuid4().hex)
        try:
            stranger.read([memory_id])
        except grpc.RpcError as exc:
            codes[exc.code().name] += 1  # type: ignore[attr-defined]
            if exc.code() == grpc.StatusCode.RESOURCE_EXHAUSTED:  # type: ignore[attr-defined]
                assert retry_delay(exc) > 0
        finally:
            stranger.close()
    record("auth_flood", codes=dict(codes))
    assert codes["UNAUTHENTICATED"] <= 6  # the burst (and a refill)
    assert codes["RESOURCE_EXHAUSTED"] >= 24
    # A token the gateway knows is served all along.
    assert [m.id for m in client.read([memory_id]).memories] == [memory_id]
    client.close()


def test_each_user_of_a_front_spends_their_own_failure_allowance(stack: Stack) -> None:
    """The MCP server calls the gateway from one address for all its users: a
    stranger's wrong tokens through it spent the allowance of every user whose
    token was not yet known. With the shared secret it forwards each user's
    address, and the stranger's flood exhausts the stranger's allowance only."""

    def guesses(address: str, count: int) -> Counter[str]:
        codes: Counter[str] = Counter()
        for _ in range(count):
            token = "rc_" + uuid.uuid4().hex
            stranger = plain_client(stack.gateway, token).for_address(address, FORWARDING_SECRET)
            try:
                stranger.read([str(uuid.uuid4())])
            except grpc.RpcError as exc:
                codes[exc.code().name] += 1  # type: ignore[attr-defined]
            finally:
                stranger.close()
        return codes

    flood = guesses("203.0.113.7:51000", 20)
    assert flood["UNAUTHENTICATED"] <= 6 and flood["RESOURCE_EXHAUSTED"] >= 14, flood
    # Another user of the same front, at their own address: their own allowance.
    assert guesses("203.0.113.8:51000", 3) == Counter({"UNAUTHENTICATED": 3})


def test_a_guess_over_http_json_spends_the_allowance_grpc_keeps(stack: Stack) -> None:
    """The HTTP/JSON adapter checks the token with the gateway's own
    authentication before it reads the body: a wrong token spends the
    caller's address's allowance, the address taken as the gRPC path takes
    it (a front's forwarded one, with the shared secret), so a gRPC call for
    that address finds it spent and another address keeps its own."""

    def over_http(address: str, count: int) -> Counter[str]:
        codes: Counter[str] = Counter()
        for _ in range(count):
            status, answer = call(
                stack.http_url,
                "recallatron.v1.MemoryService/Recall",
                {"query": "anything"},
                "rc_" + uuid.uuid4().hex,
                headers=dict(forwarding.metadata(address, FORWARDING_SECRET)),
            )
            codes[answer.get("code", f"HTTP {status}")] += 1
        return codes

    flood = over_http("203.0.113.20:51000", 12)
    assert flood["unauthenticated"] <= 6 and flood["resource_exhausted"] >= 6, flood
    # Over gRPC, for the same address: the same allowance, spent (a guess
    # after a refill spends it again).
    codes: Counter[str] = Counter()
    for _ in range(2):
        guess = plain_client(stack.gateway, "rc_" + uuid.uuid4().hex)
        try:
            guess.for_address("203.0.113.20:52000", FORWARDING_SECRET).read([str(uuid.uuid4())])
        except grpc.RpcError as exc:
            codes[exc.code().name] += 1  # type: ignore[attr-defined]
        finally:
            guess.close()
    assert codes["RESOURCE_EXHAUSTED"] >= 1, codes
    # Another user of the same front: their own allowance.
    assert over_http("203.0.113.21:51000", 3) == Counter({"unauthenticated": 3})
