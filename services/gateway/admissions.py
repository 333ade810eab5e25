"""Identities the HTTP/JSON adapter admitted, handed to the one call each
relays to this gateway's gRPC port, so that call is not authenticated again
(one store lookup per HTTP/JSON call without a live auth cache, as a gRPC
call costs).

The hand-over stays in this process: the relayed call carries a ticket, a
random value made here for it alone, under :data:`ADMISSION_KEY`; the
identity stays in this table. A ticket is taken once, only with the token it
was made for, only for a little while, and only while no revocation came
since it was made (the auth cache's generation); a ticket this table does not hold
(one a client made up, one already taken, one too old) is no hand-over, and
the call is authenticated as any other."""

from __future__ import annotations

import hmac
import secrets
import threading
import time
from collections import OrderedDict

from services.gateway.authcache import Identity
from services.gateway.ratelimit import token_key

# The metadata name of the ticket on the relayed gRPC call.
ADMISSION_KEY = "x-recallatron-admission"
# How long a ticket waits for its call: the body is read and decoded between
# the two (a slow upload may take a while; past this the call only asks the
# store again).
TICKET_SECONDS = 60.0
# Tickets held at once at most (the oldest go first): admitted calls whose
# body was then refused never take theirs.
MAX_TICKETS = 10_000


class Admissions:
    def __init__(self, ttl_seconds: float = TICKET_SECONDS, max_tickets: int = MAX_TICKETS) -> None:
        self.ttl = ttl_seconds
        self.max_tickets = max_tickets
        self._lock = threading.Lock()
        # ticket -> (when made, the token's key, the revocations' generation,
        # the identity admitted)
        self._tickets: OrderedDict[str, tuple[float, bytes, int, Identity]] = OrderedDict()

    def issue(self, token: str, identity: Identity, generation: int = 0) -> str:
        """A ticket for the one call that ``token`` was admitted for, at the
        auth cache's ``generation``."""
        ticket = secrets.token_urlsafe(32)
        now = time.monotonic()
        with self._lock:
            while self._tickets:
                made = next(iter(self._tickets.values()))[0]
                if now - made < self.ttl and len(self._tickets) < self.max_tickets:
                    break
                self._tickets.popitem(last=False)
            self._tickets[ticket] = (now, token_key(token), generation, identity)
        return ticket

    def redeem(self, ticket: str, token: str, generation: int = 0) -> Identity | None:
        """The identity ``ticket`` hands over to a call made with ``token``,
        once, while the auth cache is still at the ``generation`` it was made
        at (a revocation since: none); None when there is no such hand-over."""
        with self._lock:
            held = self._tickets.pop(ticket, None)
        if held is None:
            return None
        made, key, issued_at, identity = held
        if time.monotonic() - made >= self.ttl or issued_at != generation:
            return None
        if not hmac.compare_digest(key, token_key(token)):
            return None
        if identity.expires_at is not None and time.time() >= identity.expires_at:
            return None
        return identity

    def __len__(self) -> int:
        with self._lock:
            return len(self._tickets)
