"""A write's fingerprint (services/store/domain/erasure.py) is the same for the
same request in every process: store replicas and restarts must agree, or a
retry sent to another replica would be refused as another request."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta, timezone

from services.store.domain.erasure import fingerprint
from services.store.domain.memory_writes import NewMemory

SCRIPT = (
    "from services.store.domain.erasure import fingerprint;"
    "from services.store.domain.memory_writes import NewMemory;"
    "n = NewMemory('note', 't', 'b', purposes=frozenset({'audit', 'assist', 'automate'}));"
    "print(fingerprint('remember', n, frozenset({'x', 'y', 'z'})).hex())"
)


def test_the_same_request_has_one_fingerprint_in_any_process() -> None:
    digests = {
        subprocess.run(
            [sys.executable, "-c", SCRIPT],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True, text=True, check=True,
        ).stdout.strip()
        for seed in ("1", "2", "3")
    }  # fmt: skip
    assert len(digests) == 1


def test_what_the_request_asks_is_what_the_fingerprint_tells_apart() -> None:
    base = NewMemory("note", "t", "b", purposes=("assist",))
    assert fingerprint("remember", base) == fingerprint(
        "remember", NewMemory("note", "t", "b", purposes=["assist"])
    )
    for other in (
        NewMemory("note", "t", "b2", purposes=("assist",)),
        NewMemory("note", "t", "b", purposes=("audit",)),
        NewMemory("note", "t", "b", purposes=("assist",), audience=None),
    ):
        assert fingerprint("remember", other) != fingerprint("remember", base)
    assert fingerprint("derive", base) != fingerprint("remember", base)
    # One time in two zones is one time.
    at = datetime(2026, 5, 1, 9, tzinfo=UTC)
    there = at.astimezone(timezone(timedelta(hours=2)))
    assert fingerprint("x", at) == fingerprint("x", there)
