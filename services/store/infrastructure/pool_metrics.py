"""Pool saturation as Prometheus metrics, read from the pools' own stats at
scrape time (size, idle connections, callers waiting, timeouts), and each
server's connection budget (open against the limit, waiting, timeouts)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import REGISTRY, Collector
from psycopg_pool import ConnectionPool

from services.store.infrastructure.budget import DatabasePool, ServerBudget


class PoolCollector(Collector):
    def __init__(
        self,
        pools: Callable[[], dict[str, ConnectionPool | DatabasePool]],
        budgets: Callable[[], list[ServerBudget]],
    ) -> None:
        self.pools = pools
        self.budgets = budgets

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
        yield from self._budgets()

    def _budgets(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        families: dict[str, GaugeMetricFamily | CounterMetricFamily] = {
            "open": GaugeMetricFamily(
                "recallatron_budget_connections",
                "Connections open on the server under this process's budget.",
                labels=["server"],
            ),
            "limit": GaugeMetricFamily(
                "recallatron_budget_limit",
                "The process's connection budget on the server.",
                labels=["server"],
            ),
            "waiting": GaugeMetricFamily(
                "recallatron_budget_waiting",
                "Callers waiting for a connection under the budget.",
                labels=["server"],
            ),
            "timeouts": CounterMetricFamily(
                "recallatron_budget_timeouts",
                "Callers that gave up waiting under the budget (answered UNAVAILABLE).",
                labels=["server"],
            ),
        }
        for budget in self.budgets():
            stats = budget.stats()
            for key, family in families.items():
                family.add_metric([budget.server], stats[key])
        yield from families.values()


def register(
    pools: Callable[[], dict[str, ConnectionPool | DatabasePool]],
    budgets: Callable[[], list[ServerBudget]],
) -> None:
    REGISTRY.register(PoolCollector(pools, budgets))
