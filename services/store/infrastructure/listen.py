"""One dedicated LISTEN connection to the control database, kept open: the
shape every control-plane feed here shares (moves followed, work marks).
On each (re)connect it LISTENs, then calls ``on_connect`` (to read what may
have been missed while it was down); every notification's payload goes to
``on_notify``; ``every`` runs each ``every_seconds`` while connected."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import psycopg
from psycopg import sql

log = logging.getLogger("recallatron.store.listen")

# How often the loop looks up from waiting, to notice a stop.
POLL_SECONDS = 0.5


class Listener:
    def __init__(
        self,
        name: str,
        control_url: str,
        channel: str,
        stop: threading.Event,
        on_notify: Callable[[str], None],
        on_connect: Callable[[psycopg.Connection], None] = lambda _conn: None,
        every: Callable[[psycopg.Connection], None] | None = None,
        every_seconds: float = 0.0,
        retry_seconds: float = 1.0,
    ) -> None:
        self.name = name
        self.control_url = control_url
        self.channel = channel
        self.stop = stop
        self.on_notify = on_notify
        self.on_connect = on_connect
        self.every = every
        self.every_seconds = every_seconds
        self.retry_seconds = retry_seconds
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                with psycopg.connect(self.control_url, autocommit=True) as conn:
                    # Listening first: what happens while on_connect reads is
                    # then either read or notified.
                    conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self.channel)))
                    self.on_connect(conn)
                    last = time.monotonic()
                    while not self.stop.is_set():
                        for notify in conn.notifies(timeout=POLL_SECONDS):
                            self.on_notify(notify.payload)
                        if self.every and time.monotonic() - last >= self.every_seconds:
                            self.every(conn)
                            last = time.monotonic()
            except psycopg.Error as exc:
                log.warning(
                    "listener lost its connection; retrying",
                    extra={"listener": self.name, "error": type(exc).__name__},
                )
            self.stop.wait(self.retry_seconds)
