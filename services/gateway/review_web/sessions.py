"""Sign-in sessions: the token kept on the server, a random id in an HttpOnly,
SameSite=Strict cookie, a CSRF token per session; capped per token and in all."""

from __future__ import annotations

import hashlib
import secrets
import threading
import time
import uuid
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from recallatron.client import Client

COOKIE = "recallatron_review"
SESSION_IDLE_SECONDS = 2 * 3600
SESSION_MAX_SECONDS = 12 * 3600
# Each session holds a gateway client; a token signing in again and again
# replaces its own oldest session, and past the total the session seen least
# recently (anyone's) makes way: refusing sign-ins while full let one owner,
# signing in with token after minted token, keep every other person out.
MAX_SESSIONS_PER_TOKEN = 8
MAX_SESSIONS = 1024

ClientFactory = Callable[[str], Client]

# The messages a session keeps for its next view: decisions posted without a
# view in between must not grow it without end.
MAX_FLASH = 20
# The merges a session undid that it remembers, the latest: enough for the
# forms of the pages it has open.
MAX_UNDONE = 256


class Flash(list[tuple[str, str]]):
    """A session's messages for its next view, the latest MAX_FLASH."""

    def append(self, item: tuple[str, str]) -> None:
        super().append(item)
        del self[:-MAX_FLASH]


@dataclass
class Session:
    client: Client
    csrf: str
    created: float
    seen: float
    flash: list[tuple[str, str]] = field(default_factory=Flash)
    # A digest of the token it signed in with (for the per-token cap).
    owner: str = ""
    # Who signed in, as the page shows it ("" when the gateway did not say).
    handle: str = ""
    workspace: str = ""
    # Requests using it now, and whether it has ended: an ended session's
    # client is closed once the last of them is done (another tab signing
    # out must not cut the page this one is drawing).
    users: int = 0
    ended: bool = False
    # The merges it undid: the Undo form posted again (a double-click posts
    # it twice) is answered as done, not as a merge that is gone.
    undone: deque[uuid.UUID] = field(default_factory=lambda: deque(maxlen=MAX_UNDONE))
    # Its decisions are taken one at a time, so a form posted twice at once
    # is taken by the first post and the second sees what the first did.
    deciding: threading.Lock = field(default_factory=threading.Lock)


class Sessions:
    """Signed-in people, by random session id, the one seen least recently
    first; expired ones are dropped."""

    def __init__(self) -> None:
        self._items: OrderedDict[str, Session] = OrderedDict()
        self._lock = threading.Lock()

    def create(
        self,
        client: Client,
        token: str = "",
        replaces: str | None = None,
        who: tuple[str, str] = ("", ""),
    ) -> str:
        """A new session under a new id: ``replaces``, the session the browser
        held, ends with it (signing in again rotates the id, so no earlier
        cookie stays signed in); the token's own oldest session makes way when
        the token has its share, the one seen least recently when the page is full.
        ``who``: the member's handle and workspace, shown on the page."""
        sid = secrets.token_urlsafe(32)
        now = time.monotonic()
        owner = hashlib.sha256(token.encode()).hexdigest()
        dropped: list[Session] = []
        with self._lock:
            self._expire(now)
            if replaces and (previous := self._items.pop(replaces, None)) is not None:
                dropped.append(previous)
            own = sorted((s.created, k) for k, s in self._items.items() if s.owner == owner)
            for _, k in own[: max(0, len(own) - MAX_SESSIONS_PER_TOKEN + 1)]:
                dropped.append(self._items.pop(k))
            while self._items and len(self._items) >= MAX_SESSIONS:
                dropped.append(self._items.popitem(last=False)[1])
            self._items[sid] = Session(
                client,
                secrets.token_urlsafe(24),
                now,
                now,
                owner=owner,
                handle=who[0],
                workspace=who[1],
            )
        self._close(dropped)
        return sid

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def get(self, sid: str | None) -> Session | None:
        return self._find(sid, use=False)

    def _find(self, sid: str | None, use: bool) -> Session | None:
        """The live session ``sid``, seen now; ``use``: counted as in use
        (in the same hold of the lock, so it cannot end unseen between)."""
        if not sid:
            return None
        now = time.monotonic()
        with self._lock:
            self._expire(now)
            session = self._items.get(sid)
            if session is not None:
                session.seen = now
                self._items.move_to_end(sid)
                session.users += use
            return session

    @contextmanager
    def using(self, sid: str | None) -> Iterator[Session | None]:
        """The session ``sid`` (as :meth:`get`) for one request: ended
        meanwhile, its client stays open until the request is done."""
        session = self._find(sid, use=True)
        if session is None:
            yield None
            return
        try:
            yield session
        finally:
            with self._lock:
                session.users -= 1
                done = session.ended and session.users == 0
            if done:
                session.client.close()

    def drop(self, sid: str | None) -> None:
        with self._lock:
            session = self._items.pop(sid or "", None)
        self._close([session] if session is not None else [])

    def close(self) -> None:
        with self._lock:
            items, self._items = list(self._items.values()), OrderedDict()
        self._close(items)

    def _close(self, sessions: list[Session]) -> None:
        """Ends ``sessions`` (already out of the list): each client is closed
        now, or by the last request still using it."""
        with self._lock:
            idle = []
            for session in sessions:
                session.ended = True
                if session.users == 0:
                    idle.append(session)
        for session in idle:
            session.client.close()

    def _expire(self, now: float) -> None:
        """Drops the sessions past their time (called under the lock): each
        client is closed here, or by the last request still using it."""
        for sid, s in list(self._items.items()):
            if now - s.seen > SESSION_IDLE_SECONDS or now - s.created > SESSION_MAX_SECONDS:
                del self._items[sid]
                s.ended = True
                if s.users == 0:
                    s.client.close()


def _cookie(value: str, max_age: int) -> str:
    return f"{COOKIE}={value}; Path=/; HttpOnly; SameSite=Strict; Max-Age={max_age}"
