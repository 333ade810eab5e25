"""The soak's traffic (benchmarks/soak.py): seeded workspaces, mixed calls by
several members of each, a ledger of every acknowledged write, and the audit
of the ledger against the workspaces' databases.

A write (CreateEpisode too) is retried with its own request id after
UNAVAILABLE or DEADLINE_EXCEEDED, as an agent is told to, until it is
acknowledged. A read that fails is
counted and not retried. Each worker corrects, supersedes, derives from and
forgets only memories it wrote itself, so no call races another."""

from __future__ import annotations

import http.client
import random
import threading
import time
import urllib.parse
import uuid
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import grpc
import psycopg

from recallatron.client import Client
from recallatron_devkit.stack import Stack
from services.store.infrastructure.db import with_database

# Statuses that mean "the call may not have happened; send it again".
RETRYABLE = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})
# Statuses (and review page answers) a caller is told to expect while a
# dependency is down or the service sheds load (docs/reliability.md).
DOCUMENTED = frozenset(
    {"UNAVAILABLE", "DEADLINE_EXCEEDED", "RESOURCE_EXHAUSTED", "HTTP 502", "HTTP 503"}
)
# How often each call is made, relatively.
WEIGHTS = {
    "recall": 30,
    "read": 10,
    "remember": 14,
    "derive": 4,
    "correct": 5,
    "supersede": 4,
    "forget": 3,
    "episode": 2,
    "lookup": 6,
    "neighbors": 4,
    "timeline": 4,
    "duplicates": 2,
    "review_page": 2,
}
# A write not acknowledged after this long, once the run is over, is counted
# as unacknowledged instead of holding the run open.
GIVE_UP_SECONDS = 120.0


@dataclass
class Tenant:
    slug: str
    workspace_id: str
    database: str
    owner_token: str
    clients: list[Client]
    entity_id: str
    seed_id: str
    review_cookie: str = ""


@dataclass
class Ledger:
    """What the services acknowledged, and how calls ended, by phase."""

    # (database, title) -> memory or episode id, for every acknowledged create.
    created: dict[tuple[str, str], str] = field(default_factory=dict)
    episodes: dict[tuple[str, str], str] = field(default_factory=dict)
    forgotten: dict[str, set[str]] = field(default_factory=dict)  # database -> ids
    corrected: dict[str, dict[str, int]] = field(default_factory=dict)  # db -> id -> rev
    unacknowledged: int = 0
    replayed: int = 0
    calls: Counter[str] = field(default_factory=Counter)
    # (phase, code) -> failed calls
    errors: Counter[tuple[str, str]] = field(default_factory=Counter)
    phase: str = "warm-up"
    lock: threading.Lock = field(default_factory=threading.Lock)

    def failed(self, code: str) -> None:
        with self.lock:
            self.errors[(self.phase, code)] += 1

    def answered(self, op: str) -> None:
        with self.lock:
            self.calls[op] += 1


@dataclass
class Own:
    """The memories one worker wrote in one workspace: id -> revision."""

    memories: dict[str, int] = field(default_factory=dict)


class Worker:
    def __init__(
        self, index: int, tenants: list[Tenant], ledger: Ledger, stop: threading.Event, review: str
    ) -> None:
        self.rng = random.Random(index)
        self.index = index
        self.tenants = tenants
        self.ledger = ledger
        self.stop = stop
        self.review = urllib.parse.urlsplit(review)
        self.own: dict[tuple[int, int], Own] = {}
        self.ops: dict[str, Callable[[Tenant, Client, Own], None]] = {
            "recall": self.recall,
            "read": self.read,
            "remember": self.remember,
            "derive": self.derive,
            "correct": self.correct,
            "supersede": self.supersede,
            "forget": self.forget,
            "episode": self.episode,
            "lookup": self.lookup,
            "neighbors": self.neighbors,
            "timeline": self.timeline,
            "duplicates": self.duplicates,
            "review_page": self.review_page,
        }
        self.names = list(WEIGHTS)
        self.weights = [WEIGHTS[n] for n in self.names]

    def run(self) -> None:
        while not self.stop.is_set():
            t = self.rng.randrange(len(self.tenants))
            tenant = self.tenants[t]
            c = self.rng.randrange(len(tenant.clients))
            own = self.own.setdefault((t, c), Own())
            op = self.rng.choices(self.names, self.weights)[0]
            try:
                self.ops[op](tenant, tenant.clients[c], own)
                self.ledger.answered(op)
            except grpc.RpcError as exc:
                self.ledger.failed(exc.code().name)
            except ReviewError as exc:
                self.ledger.failed(f"HTTP {exc.status}")
            except OSError as exc:
                self.ledger.failed(f"HTTP {type(exc).__name__}")

    # -- writes: retried with their request id until acknowledged ----------

    def _write(self, call: Callable[[str], Any]) -> Any:
        request_id = str(uuid.uuid4())
        deadline: float | None = None
        while True:
            try:
                return call(request_id)
            except grpc.RpcError as exc:
                code = exc.code()
                if code not in RETRYABLE:
                    raise
                self.ledger.failed(code.name)
            if self.stop.is_set():
                deadline = deadline or time.monotonic() + GIVE_UP_SECONDS
                if time.monotonic() > deadline:
                    with self.ledger.lock:
                        self.ledger.unacknowledged += 1
                    return None
            time.sleep(0.2)

    def _acked(self, resp: Any) -> None:
        if resp is not None and getattr(resp, "replayed", False):
            with self.ledger.lock:
                self.ledger.replayed += 1

    def remember(self, tenant: Tenant, client: Client, own: Own) -> None:
        title = f"soak {uuid.uuid4().hex}"
        # Drawn once: a retry repeats its request whole (the same request id
        # with another body is refused INVALID_ARGUMENT, as it should be, when
        # the first attempt committed but its answer was lost).
        body = f"harbour ledger entry {self.rng.randrange(1000)} from worker {self.index}"
        resp = self._write(
            lambda rid: client.remember(
                title,
                body,
                mention_ids=[tenant.entity_id],
                request_id=rid,
            )
        )
        if resp is not None:
            self._created(tenant, title, resp.memory.id, own)
        self._acked(resp)

    def _created(self, tenant: Tenant, title: str, memory_id: str, own: Own) -> None:
        with self.ledger.lock:
            self.ledger.created[(tenant.database, title)] = memory_id
        own.memories[memory_id] = 1

    def _pick(self, own: Own) -> str | None:
        return self.rng.choice(list(own.memories)) if own.memories else None

    def derive(self, tenant: Tenant, client: Client, own: Own) -> None:
        source = self._pick(own)
        if source is None:
            return self.remember(tenant, client, own)
        title = f"soak {uuid.uuid4().hex}"
        resp = self._write(lambda rid: client.derive([source], title, "a summary", request_id=rid))
        if resp is not None:
            self._created(tenant, title, resp.memory.id, own)
        self._acked(resp)
        return None

    def correct(self, tenant: Tenant, client: Client, own: Own) -> None:
        memory_id = self._pick(own)
        if memory_id is None:
            return self.remember(tenant, client, own)
        revision = own.memories[memory_id]
        resp = self._write(
            lambda rid: client.correct(
                memory_id, revision, "soak", body=f"corrected by {rid}", request_id=rid
            )
        )
        if resp is not None:
            own.memories[memory_id] = resp.memory.revision
            with self.ledger.lock:
                self.ledger.corrected.setdefault(tenant.database, {})[memory_id] = (
                    resp.memory.revision
                )
        self._acked(resp)
        return None

    def supersede(self, tenant: Tenant, client: Client, own: Own) -> None:
        memory_id = self._pick(own)
        if memory_id is None:
            return self.remember(tenant, client, own)
        revision = own.memories[memory_id]
        title = f"soak {uuid.uuid4().hex}"
        resp = self._write(
            lambda rid: client.supersede(memory_id, revision, title, "newer", request_id=rid)
        )
        if resp is not None:
            own.memories.pop(memory_id, None)
            self._created(tenant, title, resp.memory.id, own)
        self._acked(resp)
        return None

    def forget(self, tenant: Tenant, client: Client, own: Own) -> None:
        memory_id = self._pick(own)
        if memory_id is None:
            return self.remember(tenant, client, own)
        resp = self._write(lambda rid: client.forget(memory_id, "soak", request_id=rid))
        if resp is not None:
            own.memories.pop(memory_id, None)
            with self.ledger.lock:
                self.ledger.forgotten.setdefault(tenant.database, set()).add(memory_id)
        self._acked(resp)
        return None

    def episode(self, tenant: Tenant, client: Client, own: Own) -> None:
        title = f"soak {uuid.uuid4().hex}"
        resp = self._write(
            lambda rid: client.create_episode(title, "2026-01-01T00:00:00Z", request_id=rid)
        )
        if resp is not None:
            with self.ledger.lock:
                self.ledger.episodes[(tenant.database, title)] = resp.episode_id

    # -- reads --------------------------------------------------------------

    def recall(self, tenant: Tenant, client: Client, own: Own) -> None:
        client.recall("harbour ledger entry", limit=5)

    def read(self, tenant: Tenant, client: Client, own: Own) -> None:
        client.read([self._pick(own) or tenant.seed_id])

    def lookup(self, tenant: Tenant, client: Client, own: Own) -> None:
        client.lookup(f"Atlas {tenant.slug}")

    def neighbors(self, tenant: Tenant, client: Client, own: Own) -> None:
        client.neighbors(tenant.entity_id)

    def timeline(self, tenant: Tenant, client: Client, own: Own) -> None:
        client.timeline(entity_id=tenant.entity_id)

    def duplicates(self, tenant: Tenant, client: Client, own: Own) -> None:
        client.duplicate_pairs()

    def review_page(self, tenant: Tenant, client: Client, own: Own) -> None:
        if not tenant.review_cookie:
            tenant.review_cookie = review_signin(self.review, tenant.owner_token)
        status = review_get(self.review, tenant.review_cookie)
        if status != 200:
            tenant.review_cookie = ""
            raise ReviewError(status)


class ReviewError(Exception):
    """A review page that did not answer 200, counted as "HTTP <status>"."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


def review_signin(url: urllib.parse.SplitResult, token: str) -> str:
    conn = http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port, timeout=30)
    try:
        body = urllib.parse.urlencode({"token": token})
        conn.request("POST", "/signin", body, {"Content-Type": "application/x-www-form-urlencoded"})
        resp = conn.getresponse()
        resp.read()
        cookie = resp.getheader("Set-Cookie") or ""
        if not cookie:
            raise ReviewError(resp.status)
        return cookie.split(";", 1)[0]
    finally:
        conn.close()


def review_get(url: urllib.parse.SplitResult, cookie: str) -> int:
    conn = http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port, timeout=30)
    try:
        conn.request("GET", "/", headers={"Cookie": cookie})
        resp = conn.getresponse()
        resp.read()
        return resp.status
    finally:
        conn.close()


def _until_answered(call: Callable[[], Any], limit: float = 120.0) -> Any:
    """Seeding: a call sent again while the stack is busy starting up."""
    deadline = time.monotonic() + limit
    while True:
        try:
            return call()
        except grpc.RpcError as exc:
            if exc.code() not in RETRYABLE or time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def seed(stack: Stack, workspaces: int, members: int, log: Callable[[str], None]) -> list[Tenant]:
    """``workspaces`` workspaces, each with an owner and ``members`` - 1 more
    members, one token each, and a first memory mentioning an entity (four
    at a time)."""
    operator = Client(stack.gateway, stack.admin_token, timeout=60)
    done = [0]
    lock = threading.Lock()

    def one(n: int) -> Tenant:
        # A workspace whose creation timed out may exist all the same: the
        # next attempt takes another slug.
        attempt = [0]

        def create() -> Any:
            attempt[0] += 1
            return operator.create_workspace(f"soak-{n:03d}-{attempt[0]}").workspace

        ws = _until_answered(create)
        slug = f"soak-{n:03d}"
        tokens = []
        for m in range(members):
            member = _until_answered(
                partial(operator.create_member, ws.id, f"m{m}", owner=m == 0)
            ).member
            tokens.append(_until_answered(partial(operator.create_token, member.id, "soak")).token)
        clients = [Client(stack.gateway, t, timeout=30) for t in tokens]
        rid = str(uuid.uuid4())
        first = _until_answered(
            lambda: clients[0].remember(
                f"Atlas {slug} harbour",
                "the harbour ledger starts here",
                audience_to="workspace",
                mention_names=[f"Atlas {slug}"],
                request_id=rid,
            )
        )
        with lock:
            done[0] += 1
            if done[0] % 25 == 0:
                log(f"seeded {done[0]} workspaces")
        entity_id = first.memory.mentions[0].entity_id
        return Tenant(slug, ws.id, ws.database_name, tokens[0], clients, entity_id, first.memory.id)

    with ThreadPoolExecutor(4) as pool:
        tenants = list(pool.map(one, range(workspaces)))
    operator.close()
    return tenants


def prime(tenants: list[Tenant], review: str, threads: int) -> None:
    """Every member of every workspace recalls once and every workspace's
    owner signs in to the review page and reads it, before the warm-up: the
    state the services keep per token and per workspace (a review session
    with its gateway client, the auth cache and rate-limit buckets, each
    database's pool and types) is then there at the baseline. Left to the
    random traffic, the review sessions alone (2 calls in 72 are a review
    page) take some 460 visits to reach all 100 workspaces, a quarter of an
    hour, well past the warm-up."""
    url = urllib.parse.urlsplit(review)

    def signed_in(tenant: Tenant) -> None:
        tenant.review_cookie = review_signin(url, tenant.owner_token)
        status = review_get(url, tenant.review_cookie)
        if status != 200:
            raise ReviewError(status)

    def one(tenant: Tenant) -> None:
        for client in tenant.clients:
            _until_answered(partial(client.recall, "harbour ledger"))
        deadline = time.monotonic() + 120.0
        while True:
            try:
                return signed_in(tenant)
            except ReviewError as exc:
                # 503: the page's connections per address are all taken.
                if exc.status not in (502, 503) or time.monotonic() > deadline:
                    raise
            time.sleep(0.5)

    with ThreadPoolExecutor(max(1, threads)) as pool:
        list(pool.map(one, tenants))


@dataclass
class Audit:
    acknowledged: int
    lost: int
    doubled: int
    episodes_acknowledged: int
    episodes_lost: int
    episodes_doubled: int
    forgets_lost: int
    corrections_lost: int


def audit(stack: Stack, tenants: list[Tenant], ledger: Ledger) -> Audit:
    """Every acknowledged write against the rows: a create is there once
    under its title (or forgotten, by its id, when a forget was acknowledged),
    a forget left its memory invalidated, a correction its revision or a later
    one. A title held by more than one row is a doubled write."""
    lost = doubled = e_lost = e_doubled = f_lost = c_lost = 0
    for tenant in tenants:
        db = tenant.database
        url = with_database(stack.database_url, db)
        with psycopg.connect(url) as conn:
            titles: dict[str, list[str]] = dict(
                conn.execute(
                    "SELECT title, array_agg(id::text) FROM memory"
                    " WHERE starts_with(title, 'soak ') GROUP BY title"
                ).fetchall()
            )
            episodes: dict[str, list[str]] = dict(
                conn.execute(
                    "SELECT title, array_agg(id::text) FROM episode"
                    " WHERE starts_with(title, 'soak ') GROUP BY title"
                ).fetchall()
            )
            gone = ledger.forgotten.get(db, set())
            invalidated = {
                r[0]
                for r in conn.execute(
                    "SELECT id::text FROM memory WHERE id::text = ANY(%s)"
                    " AND invalidated_at IS NOT NULL",
                    (list(gone),),
                )
            }
            revisions: dict[str, int] = dict(
                conn.execute(
                    "SELECT id::text, revision FROM memory WHERE id::text = ANY(%s)",
                    (list(ledger.corrected.get(db, {})),),
                ).fetchall()
            )
        doubled += sum(len(ids) - 1 for ids in titles.values())
        e_doubled += sum(len(ids) - 1 for ids in episodes.values())
        for (where, title), memory_id in ledger.created.items():
            if where != db:
                continue
            if memory_id in gone:
                lost += int(memory_id not in invalidated)
            elif memory_id not in titles.get(title, []):
                lost += 1
        for (where, title), episode_id in ledger.episodes.items():
            if where == db and episode_id not in episodes.get(title, []):
                e_lost += 1
        f_lost += len(gone - invalidated)
        for memory_id, revision in ledger.corrected.get(db, {}).items():
            if memory_id not in gone and revisions.get(memory_id, 0) < revision:
                c_lost += 1
    return Audit(
        len(ledger.created), lost, doubled, len(ledger.episodes), e_lost, e_doubled, f_lost, c_lost
    )
