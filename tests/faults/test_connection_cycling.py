"""Many callers on one client connection while the servers cycle connections
past their maximum age and hold each connection to a few streams (design §9):
no call fails for the transport's sake (no UNAVAILABLE, no reset stream), and
every acknowledged write exists exactly once.

The gateway limits the calls in flight on one connection; a client respecting
that limit must never see a stream refused (HTTP/2 REFUSED_STREAM) because
the server still counted calls the client had finished."""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from recallatron.client import Client
from recallatron_devkit.stack import Stack
from tests.dbutil import query
from tests.faults.stackutil import new_stack, owner_client, record, running

pytestmark = pytest.mark.integration

# A connection lives half a second, then is cycled (GOAWAY, a new one).
AGE_SECONDS = 0.5
ENV = {
    "RECALLATRON_MAX_CONNECTION_AGE_SECONDS": str(AGE_SECONDS),
    "RECALLATRON_MAX_CONNECTION_AGE_GRACE_SECONDS": "30",
    "RECALLATRON_MAX_STREAMS_PER_CONNECTION": "4",
    "RECALLATRON_SHUTDOWN_GRACE_SECONDS": "1",
}
CALLERS = 24
CALLS_EACH = 30
# The callers run at least this long, so that several connections age out
# under them (a condition to run until, not a bound on any call).
AT_LEAST = 4 * AGE_SECONDS


@pytest.fixture(scope="module")
def cycling_stack(prepared_models_dir: Path) -> Iterator[Stack]:
    with running(new_stack(prepared_models_dir, ENV)) as stack:
        yield stack


def test_many_callers_on_one_connection_across_its_age(cycling_stack: Stack) -> None:
    owner, _, database = owner_client(cycling_stack, "cycling")
    owner.close()
    # The project's own client, one channel shared by every caller.
    token = owner.token
    client = Client(cycling_stack.gateway, token, timeout=60)
    seed = client.remember("cycling seed", "a memory to read and recall", audience_to="workspace")
    codes: Counter[str] = Counter()
    acknowledged: list[str] = []
    lock = threading.Lock()
    started = time.monotonic()

    def caller(n: int) -> None:
        for i in range(CALLS_EACH):
            kind = i % 3
            try:
                if kind == 0:
                    request_id = str(uuid.uuid4())
                    client.remember(f"cycled write {n}-{i}", "body", request_id=request_id)
                    with lock:
                        acknowledged.append(request_id)
                elif kind == 1:
                    client.read([seed.memory.id])
                else:
                    client.recall("cycling seed", mode="lexical")
                with lock:
                    codes["OK"] += 1
            except grpc.RpcError as exc:
                with lock:
                    codes[f"{exc.code().name}: {exc.details()}"] += 1

    rounds = 0
    while rounds == 0 or time.monotonic() - started < AT_LEAST:
        threads = [threading.Thread(target=caller, args=(n,)) for n in range(CALLERS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        rounds += 1
    client.close()

    record("connection_cycling", rounds=rounds, codes=dict(codes))
    assert set(codes) == {"OK"}, codes
    rows = query(
        cycling_stack,
        database,
        "SELECT count(*), count(DISTINCT title) FROM memory WHERE title LIKE %s",
        ("cycled write %",),
    )
    assert rows[0] == (len(acknowledged), len(acknowledged))
