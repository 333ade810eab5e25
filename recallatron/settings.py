"""Settings shared by every service. Each service defines one typed settings
object that extends :class:`CommonSettings` (through the peer groups below
for the services it calls); values come from the environment (prefix
``RECALLATRON_``) with defaults that work locally with no setup."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

REPO_ROOT = Path(__file__).resolve().parent.parent

# Where each server listens by default, and so where its callers find it.
GATEWAY_ADDRESS = "127.0.0.1:7400"
STORE_ADDRESS = "127.0.0.1:7401"
EMBED_ADDRESS = "127.0.0.1:7402"
RANK_ADDRESS = "127.0.0.1:7403"


def default_state_dir() -> Path:
    """Where the local stack keeps its data (Postgres, models, operator token)."""
    return REPO_ROOT / ".recallatron"


def state_dir() -> Path:
    """The local stack's state directory: RECALLATRON_STATE_DIR, else the default."""
    return Path(os.environ.get("RECALLATRON_STATE_DIR", default_state_dir()))


ENV_PREFIX = "RECALLATRON_"

# The longest RECALLATRON_SETTINGS_CACHE_SECONDS: a workspace settings change
# is seen within it.
MAX_SETTINGS_CACHE_SECONDS = 3600.0


class SettingsInvalid(SystemExit):
    """A setting the environment gives that the process cannot run with: it
    stops at start with one line per setting, naming its variable (not a
    traceback, and never later, in the middle of a call)."""


class CommonSettings(BaseSettings):
    # No number may be infinite or NaN: an infinite time never ends (a cache
    # never refreshed, a wait never over), and NaN passes no bound's check.
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore", allow_inf_nan=False)

    def __init__(self, **values: Any) -> None:
        try:
            super().__init__(**values)
        except ValidationError as exc:
            lines = [
                f"{ENV_PREFIX}{'_'.join(str(p) for p in e['loc']).upper() or 'SETTINGS'}: "
                f"{e['msg']}"
                for e in exc.errors()
            ]
            raise SettingsInvalid("invalid settings:\n  " + "\n  ".join(lines)) from None

    log_level: str = "INFO"
    # Port for the Prometheus /metrics endpoint; 0 disables it.
    metrics_port: int = Field(default=0, ge=0, le=65535)
    # Largest gRPC message accepted or sent, in bytes.
    max_message_bytes: int = Field(default=8 * 1024 * 1024, ge=1024)
    # Worker threads of the gRPC server.
    server_threads: int = Field(default=16, ge=1)
    # Fair sharing of those threads (recallatron/fairness.py, design §9): calls
    # of one workspace served at once by this process, and waiting beyond
    # those; more are refused at once with RESOURCE_EXHAUSTED and a retry hint.
    # A waiting call holds no thread, so other workspaces are served meanwhile.
    workspace_concurrency: int = Field(default=4, ge=1)
    # While a workspace is the only one with calls here, it may run this many
    # at once (0: workspace_concurrency): its share must not leave cores idle
    # when nobody else wants them. Another workspace's first call brings it
    # back to its share (new calls wait until it is within it).
    workspace_concurrency_alone: int = Field(default=0, ge=0)
    # ...counting as alone once no other workspace has had a call here for
    # this long, so that a neighbour calling one call after another never
    # meets the lent calls in the gaps between its calls.
    workspace_alone_after_seconds: float = Field(default=2.0, ge=0)
    workspace_queue: int = Field(default=64, ge=0)
    # Calls one token (in the store, rank and embed: one member) may have
    # outstanding, running or waiting; 0: only the workspace's limit.
    token_outstanding: int = Field(default=0, ge=0)
    # Calls in flight on one client connection (HTTP/2 streams); the client
    # holds back the rest, so a flood on one connection costs this server
    # nothing past it. 0: gRPC's default (no limit). Only for servers whose
    # clients do not multiplex many tenants on one connection (the gateway).
    max_streams_per_connection: int = Field(default=0, ge=0)
    # A client connection is cycled (GOAWAY, then a new one) past this age, so
    # round-robin clients find servers added by scaling; calls in flight on it
    # get the grace to finish. 0: never cycled.
    max_connection_age_seconds: float = Field(default=300.0, ge=0)
    max_connection_age_grace_seconds: float = Field(default=30.0, ge=0)
    # Seconds in-flight calls get to finish after SIGTERM.
    shutdown_grace_seconds: float = Field(default=10.0, ge=0)
    # TLS. A server presents tls_cert_file + tls_key_file (PEM) when both are
    # set; clients connect with TLS, verifying peers against tls_ca_file, when
    # it is set. Empty: plaintext (loopback, or a mesh that does mTLS).
    tls_cert_file: str = ""
    tls_key_file: str = ""
    tls_ca_file: str = ""
    # The stack's internal key (recallatron/internal_auth.py): every call to
    # store, rank and embed carries an assertion signed with it. Give the key
    # itself or, better, a file holding it (mode 0600; a Kubernetes Secret).
    # `recallatron up` generates one into the state directory.
    internal_key: str = ""
    internal_key_file: str = ""

    def internal_signing_key(self) -> bytes:
        from recallatron.internal_auth import load_key

        return load_key(self.internal_key, self.internal_key_file)


# Peer groups: a service that calls another extends its group, so the
# setting naming that peer (and its default) is declared once. Each group
# extends CommonSettings, which keeps one model_config (the env prefix) for
# any combination of groups. A call's timeout stays with each caller: its
# default is the caller's own.


class StorePeer(CommonSettings):
    store_target: str = STORE_ADDRESS


class EmbedPeer(CommonSettings):
    embed_target: str = EMBED_ADDRESS


class RankPeer(CommonSettings):
    rank_target: str = RANK_ADDRESS
