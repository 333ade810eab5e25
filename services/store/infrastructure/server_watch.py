"""Each configured Postgres server's state, apart from readiness
(docs/kubernetes.md, 'Probes and termination'). Readiness follows the control
database, on the default server, alone: a store that left its Service
because one of several servers is away would take every workspace on the
others with it. Each server is asked for an answer every ``every_seconds``
on an admin connection (within the admin connections the start-up check
counts); its state goes to ``on_change`` (the store's health, under
``postgres/<server>``) and to the metric ``recallatron_store_postgres_server_up``."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator

import psycopg
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import REGISTRY, Collector

from recallatron import deadline, errors
from services.store.infrastructure.db import Databases

log = logging.getLogger("recallatron.store.servers")

# How often each server is asked, and how long one probe may take (an admin
# slot and the connection): a server that does not answer within it is down.
# Each probe is a new connection (a backend and its authentication): every 5 s
# keeps an idle store's cost small, against an alert that waits 2 minutes.
PROBE_SECONDS = 5.0
PROBE_LIMIT_SECONDS = 5.0


class ServerWatch(Collector):
    def __init__(
        self,
        dbs: Databases,
        stop: threading.Event,
        on_change: Callable[[str, bool], None] = lambda _server, _up: None,
        every_seconds: float = PROBE_SECONDS,
    ) -> None:
        self.dbs = dbs
        self.stop = stop
        self.on_change = on_change
        self.every_seconds = every_seconds
        self._lock = threading.Lock()
        # Server name -> up; a server not asked yet has no entry.
        self._up: dict[str, bool] = {}

    def states(self) -> dict[str, bool]:
        with self._lock:
            return dict(self._up)

    def start(self) -> None:
        # One thread per server: one that does not answer delays no other.
        for name in self.dbs.servers.names:
            threading.Thread(
                target=self._run, args=(name,), name=f"server-watch-{name}", daemon=True
            ).start()

    def probe(self, server: str) -> bool | None:
        """Whether ``server`` answers now; None when no admin slot was free
        in time (migrations under way): nothing learned."""
        scope = deadline.Scope(PROBE_LIMIT_SECONDS)
        leave = deadline.enter(scope)
        try:
            with self.dbs.admin(server) as conn:
                conn.execute("SELECT 1")
            return True
        except errors.Unavailable:
            return None
        except (psycopg.Error, errors.DeadlineExceeded) as exc:
            with self._lock:
                was = self._up.get(server)
            if was is not False:
                log.warning(
                    "postgres server not answering",
                    extra={"server": server, "error": self.dbs.redact(str(exc))},
                )
            return False
        finally:
            leave()

    def _run(self, server: str) -> None:
        while not self.stop.is_set():
            up = self.probe(server)
            if up is not None:
                with self._lock:
                    changed = self._up.get(server) != up
                    self._up[server] = up
                if changed:
                    if up:
                        log.info("postgres server answering", extra={"server": server})
                    self.on_change(server, up)
            self.stop.wait(self.every_seconds)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "recallatron_store_postgres_server_up",
            "1 while the configured Postgres server answers this store, 0 while it does not.",
            labels=["server"],
        )
        for server, up in sorted(self.states().items()):
            family.add_metric([server], 1.0 if up else 0.0)
        yield family

    def register(self) -> None:
        REGISTRY.register(self)
