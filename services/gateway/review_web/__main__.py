"""`python -m services.gateway.review_web`: the review page on its own, in front
of a gateway (RECALLATRON_GATEWAY_TARGET, default the local one), with the
gateway's settings (RECALLATRON_REVIEW_LISTEN)."""

from __future__ import annotations

import os
import signal
import threading

from recallatron.logs import configure_logging
from services.gateway import forwarded
from services.gateway.review_web.http import ReviewWeb
from services.gateway.settings import GatewaySettings


def main() -> None:
    settings = GatewaySettings()
    log = configure_logging("review", settings.log_level)
    # The gateway believes the people's addresses the page forwards only with
    # a secret it knows: RECALLATRON_FORWARDING_SECRET, the same as its own.
    forwarded.configure(settings.forwarding_secret)
    target = os.environ.get("RECALLATRON_GATEWAY_TARGET", "127.0.0.1:7400")
    web = ReviewWeb(
        settings.review_listen or "127.0.0.1:7410", target, settings.review_public_origins
    )
    port = web.start(os.environ.get("RECALLATRON_REVIEW_PORT_FILE", ""))
    log.info("review page", extra={"port": port, "gateway": target})
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    stop.wait()
    web.stop()


if __name__ == "__main__":
    main()
