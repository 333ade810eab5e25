"""Pool saturation as Prometheus metrics, read from psycopg_pool's own stats
at scrape time (size, idle connections, callers waiting, timeouts)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import REGISTRY, Collector
from psycopg_pool import ConnectionPool


class PoolCollector(Collector):
    def __init__(self, pools: Callable[[], dict[str, ConnectionPool]]) -> None:
        self.pools = pools

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        size = GaugeMetricFamily(
            "recallatron_pool_connections", "Connections open in the pool.", labels=["pool"]
        )
        idle = GaugeMetricFamily(
            "recallatron_pool_idle", "Connections idle in the pool.", labels=["pool"]
        )
        waiting = GaugeMetricFamily(
            "recallatron_pool_waiting", "Callers waiting for a connection.", labels=["pool"]
        )
        maximum = GaugeMetricFamily(
            "recallatron_pool_max", "Largest size the pool may grow to.", labels=["pool"]
        )
        timeouts = CounterMetricFamily(
            "recallatron_pool_timeouts", "Callers that gave up waiting.", labels=["pool"]
        )
        for name, pool in self.pools().items():
            stats = pool.get_stats()
            label = [pool.name or name]
            size.add_metric(label, stats.get("pool_size", 0))
            idle.add_metric(label, stats.get("pool_available", 0))
            waiting.add_metric(label, stats.get("requests_waiting", 0))
            maximum.add_metric(label, pool.max_size)
            timeouts.add_metric(label, stats.get("requests_errors", 0))
        yield from (size, idle, waiting, maximum, timeouts)


def register(pools: Callable[[], dict[str, ConnectionPool]]) -> None:
    REGISTRY.register(PoolCollector(pools))
