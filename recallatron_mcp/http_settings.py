"""What the MCP server's streamable HTTP transport starts with, read whole
before anything starts, so that a setting it cannot run with stops the start
naming it rather than failing later with a traceback."""

from __future__ import annotations

from dataclasses import dataclass

from recallatron_mcp import options
from recallatron_mcp.oauth import OAuthSettings
from recallatron_mcp.sessions import sessions_per_address


class CannotStart(ValueError):
    """A setting the server cannot start with, named (not a traceback)."""


@dataclass(frozen=True)
class HttpSettings:
    """What the streamable HTTP server is started with, all read before it
    starts: a setting it cannot run with stops it at once, naming it."""

    host: str
    port: int
    oauth: OAuthSettings | None
    per_address: int

    @classmethod
    def read(cls, listen: str, gateway: str) -> HttpSettings:
        try:
            host, port = options.listen_address(listen)
            return cls(host, port, OAuthSettings.from_env(gateway), sessions_per_address())
        except ValueError as exc:
            raise CannotStart(str(exc)) from None
