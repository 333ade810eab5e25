from __future__ import annotations

from recallatron.settings import CommonSettings


class GatewaySettings(CommonSettings):
    gateway_listen: str = "127.0.0.1:7400"
    store_target: str = "127.0.0.1:7401"
    rank_target: str = "127.0.0.1:7403"
    store_timeout_seconds: float = 5.0
    rank_timeout_seconds: float = 5.0
    # Operator token for workspace creation; empty disables the admin surface
    # for everything but owners. `recallatron up` generates one locally.
    admin_token: str = ""
