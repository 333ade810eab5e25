"""The soak's judgement of growth (benchmarks/soak_resources.py): a figure
past 10% (plus its slack) is reported, but connections only past the ceiling
their owner has by design, Postgres's children included (its autovacuum and
parallel workers come and go with the load)."""

from __future__ import annotations

from benchmarks.soak_resources import growth

CEILINGS = {"store": 24, "embedding-job": 12, "postgres": 56}


def usage(connections: int, threads: int = 30) -> dict[str, float]:
    return {"rss_mb": 100.0, "threads": threads, "fds": 20, "pg_connections": connections}


def test_connections_filling_up_to_the_ceiling_are_not_growth() -> None:
    start = {"store": usage(18), "embedding-job": usage(7), "postgres": usage(34)}
    end = {"store": usage(24), "embedding-job": usage(12), "postgres": usage(41)}
    assert growth(start, end, CEILINGS) == []


def test_connections_past_the_ceiling_are_reported() -> None:
    start = {"store": usage(18), "postgres": usage(34)}
    end = {"store": usage(26), "postgres": usage(60)}
    assert growth(start, end, CEILINGS) == [
        "store pg_connections: 18 -> 26",
        "postgres pg_connections: 34 -> 60",
    ]


def test_threads_are_judged_by_the_ten_percent_rule() -> None:
    start = {"gateway": usage(0, threads=30)}
    assert growth(start, {"gateway": usage(0, threads=35)}, CEILINGS) == []
    assert growth(start, {"gateway": usage(0, threads=36)}, CEILINGS) == [
        "gateway threads: 30 -> 36"
    ]
