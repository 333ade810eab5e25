"""A write's fingerprint (services/store/domain/erasure.py) is the same for the
same request in every process: store replicas and restarts must agree, or a
retry sent to another replica would be refused as another request."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone

from services.store.domain import graph_claims
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


def test_ids_count_in_canonical_form_and_text_as_written() -> None:
    """The tools take an id in any spelling of a UUID, so a retry may spell it
    otherwise; text that reads like a UUID is still text."""
    ids = [str(uuid.uuid4()) for _ in range(4)]

    def asked(spell: Callable[[str], str], title: str = "t") -> NewMemory:
        entity = graph_claims.EntityIn(entity_id=spell(ids[0]))
        claim = graph_claims.ClaimIn(entity=entity, attribute="role", value=ids[3])
        return NewMemory(
            "note", title, "b", audience=spell(ids[1]), mentions=[entity],
            about_ids=[spell(ids[2])], graph=graph_claims.GraphIn(claims=[claim]),
            episode_id=spell(ids[3]),
        )  # fmt: skip

    canonical = fingerprint("remember", asked(str))
    for spell in (str.upper, lambda i: "{" + i + "}", lambda i: uuid.UUID(i).hex):
        assert fingerprint("remember", asked(spell)) == canonical
    # What a request in canonical form was fingerprinted as before stays so:
    # a retry across an upgrade still matches.
    plain = json.dumps(["remember", dataclasses.asdict(asked(str))], sort_keys=True, default=str)
    assert canonical == hashlib.sha256(plain.encode()).digest()
    assert fingerprint("remember", asked(str, ids[0])) != fingerprint(
        "remember", asked(str, ids[0].upper())
    )
    value = dataclasses.replace(
        asked(str),
        graph=graph_claims.GraphIn(
            claims=[graph_claims.ClaimIn(entity=graph_claims.EntityIn(name="x"), attribute="a",
                                         value=ids[0].upper())]
        ),
    )  # fmt: skip
    assert fingerprint("remember", value) != fingerprint(
        "remember",
        dataclasses.replace(
            value,
            graph=graph_claims.GraphIn(
                claims=[dataclasses.replace(value.graph.claims[0], value=ids[0])]
            ),
        ),
    )
