"""At most so many MCP sessions per client address (streamable HTTP).

The SDK's session manager keeps up to 10,000 sessions for the whole server,
each for 30 minutes after its last request, and refuses a new one with 503
while that many are open: anyone who can reach the port, token or not (an
`initialize` needs none), could open them all from one address and shut
every member out for half an hour. Here one address holds at most
RECALLATRON_MCP_SESSIONS_PER_ADDRESS (default 100) at once: its newest
session makes the one it used least recently end (answered 404 from then on,
upon which an MCP client starts a new session), so an address can spend only
its own sessions. Behind a proxy the proxy is the address for all its
clients: raise the limit there to the sessions its clients keep open."""

from __future__ import annotations

import logging
import os
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Collection, Mapping, MutableMapping
from typing import Any

log = logging.getLogger("recallatron.mcp")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

SESSIONS_PER_ADDRESS = 100
SETTING = "RECALLATRON_MCP_SESSIONS_PER_ADDRESS"
SESSION_HEADER = b"mcp-session-id"
# The table is swept of sessions that ended by themselves (idle, DELETE)
# after this many openings, so addresses seen once do not pile up.
SWEEP_EVERY = 1000


def sessions_per_address(env: Mapping[str, str] = os.environ) -> int:
    """The limit from the environment; a value that is no positive whole
    number stops the start, naming the setting."""
    raw = env.get(SETTING, "").strip()
    if not raw:
        return SESSIONS_PER_ADDRESS
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"{SETTING}: {raw[:40]!r} is not a positive whole number of sessions")
    return value


def _header(headers: Any, name: bytes) -> str | None:
    for key, value in headers or ():
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return None


class SessionsPerAddress:
    """ASGI middleware around the SDK's streamable HTTP app. ``live``: the
    ids of the sessions the SDK holds now; ``end``: ends one of them."""

    def __init__(
        self,
        app: App,
        live: Callable[[], Collection[str]],
        end: Callable[[str], Awaitable[None]],
        per_address: int = SESSIONS_PER_ADDRESS,
    ) -> None:
        self.app = app
        self.live = live
        self.end = end
        self.per_address = per_address
        # Address -> its session ids, least recently used first.
        self.by_address: dict[str, OrderedDict[str, None]] = {}
        self.address_of: dict[str, str] = {}
        self._opened = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        session = _header(scope.get("headers"), SESSION_HEADER)
        if session is not None:
            self._used(session)
            await self.app(scope, receive, send)
            return
        client = scope.get("client")
        address = str(client[0]) if client else ""

        async def noting(message: Message) -> None:
            if message.get("type") == "http.response.start":
                opened = _header(message.get("headers"), SESSION_HEADER)
                if opened is not None:
                    await self._opened_by(address, opened)
            await send(message)

        await self.app(scope, receive, noting)

    def _used(self, session: str) -> None:
        address = self.address_of.get(session)
        if address is not None:
            self.by_address[address].move_to_end(session)

    async def _opened_by(self, address: str, session: str) -> None:
        self._opened += 1
        if self._opened % SWEEP_EVERY == 0:
            self._sweep()
        sessions = self.by_address.setdefault(address, OrderedDict())
        sessions[session] = None
        self.address_of[session] = address
        if len(sessions) <= self.per_address:
            return
        live = self.live()
        for gone in [s for s in sessions if s not in live and s != session]:
            self._forget(gone)
        while len(sessions) > self.per_address:
            oldest = next(iter(sessions))
            self._forget(oldest)
            await self.end(oldest)

    def _forget(self, session: str) -> None:
        address = self.address_of.pop(session, None)
        if address is None:
            return
        sessions = self.by_address[address]
        sessions.pop(session, None)
        if not sessions:
            del self.by_address[address]

    def _sweep(self) -> None:
        live = self.live()
        for session in [s for s in self.address_of if s not in live]:
            self._forget(session)


def bounded_sessions(app: App, manager: Any, per_address: int) -> SessionsPerAddress:
    """``app`` (the SDK's, whose session manager is ``manager``) holding at
    most ``per_address`` sessions per client address. The SDK ends a session
    only at its client's DELETE or its idle timeout, so the manager's own
    table and discard are used; an SDK without them stops the start rather
    than go unbounded."""
    table = getattr(manager, "_server_instances", None)
    discard = getattr(manager, "_discard_session", None)
    if not isinstance(table, dict) or discard is None:
        raise RuntimeError("the MCP SDK's session manager has no session table to bound")

    async def end(session_id: str) -> None:
        transport = table.get(session_id)
        if transport is not None:
            log.info("a client address past its sessions: its least recently used one ended")
            await discard(session_id, transport)

    return SessionsPerAddress(app, table.keys, end, per_address)
