"""The gateway's authentication cache: caches only while live, never keeps an
answer that a revocation overtook, and forgets on every revocation."""

from __future__ import annotations

import time
import uuid

from recallatron.v1 import common_pb2 as cpb
from services.gateway.authcache import AuthCache, Identity
from services.gateway.ratelimit import token_key

ADA = Identity("ws", "ada", 1)


def live_cache(max_age: float = 30.0, entries: int = 100) -> AuthCache:
    cache = AuthCache(max_age, entries)
    cache.set_live(True)
    return cache


def test_nothing_is_cached_until_the_stream_is_live() -> None:
    cache = AuthCache(30.0, 100)
    cache.put("tok", ADA, cache.generation())
    assert cache.get("tok") is None
    cache.set_live(True)
    cache.put("tok", ADA, cache.generation())
    assert cache.get("tok") == ADA


def test_a_revocation_empties_the_cache() -> None:
    cache = live_cache()
    cache.put("tok", ADA, cache.generation())
    cache.flush()
    assert cache.get("tok") is None


def test_an_answer_overtaken_by_a_revocation_is_not_kept() -> None:
    cache = live_cache()
    generation = cache.generation()  # the lookup starts ...
    cache.flush()  # ... a revocation arrives meanwhile ...
    cache.put("tok", ADA, generation)  # ... and its answer comes back
    assert cache.get("tok") is None


def test_the_stream_going_down_empties_and_stops_the_cache() -> None:
    cache = live_cache()
    cache.put("tok", ADA, cache.generation())
    generation = cache.generation()
    cache.set_live(False)
    assert cache.get("tok") is None
    cache.put("tok", ADA, generation)
    cache.put("tok", ADA, cache.generation())
    assert cache.get("tok") is None


def test_entries_expire_and_the_oldest_go_first() -> None:
    cache = live_cache(max_age=0.05, entries=2)
    cache.put("a", ADA, cache.generation())
    cache.put("b", ADA, cache.generation())
    cache.put("c", ADA, cache.generation())
    assert cache.get("a") is None  # evicted: two entries at most
    assert cache.get("c") == ADA
    time.sleep(0.06)
    assert cache.get("c") is None  # expired


def test_zero_turns_it_off() -> None:
    cache = AuthCache(0, 100)
    cache.set_live(True)
    cache.put("tok", ADA, cache.generation())
    assert cache.get("tok") is None


def test_an_entry_lives_no_longer_than_its_token() -> None:
    cache = live_cache(max_age=30.0)
    soon = Identity("ws", "ada", 1, expires_at=time.time() + 0.3)
    cache.put("tok", soon, cache.generation())
    assert cache.get("tok") == soon
    assert cache.workspace_of(token_key("tok")) == "ws"
    deadline = time.monotonic() + 10
    while cache.get("tok") is not None:
        assert time.monotonic() < deadline, "the entry outlived its token"
        time.sleep(0.05)
    assert cache.workspace_of(token_key("tok")) is None
    # Already expired when the answer comes back: never served.
    cache.put("old", Identity("ws", "ada", 1, expires_at=time.time() - 1), cache.generation())
    assert cache.get("old") is None


def test_an_identity_knows_its_ids_in_any_spelling() -> None:
    ws, member = str(uuid.uuid4()), str(uuid.uuid4())
    me = Identity(ws, member, cpb.ROLE_OWNER)
    for spelling in (ws, ws.upper(), uuid.UUID(ws).hex, "{" + ws + "}"):
        assert me.is_workspace(spelling), spelling
    assert me.is_member(member.upper()) and not me.is_member(ws)
    assert not me.is_workspace(str(uuid.uuid4())) and not me.is_workspace("not-an-id")
