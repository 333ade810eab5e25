"""The failed-authentication budget per address (services/gateway/ratelimit.py):
unknown tokens spend it, an empty budget refuses with a retry hint, and the
operator is told once per address, not once per refused call."""

from __future__ import annotations

import logging

import pytest

from recallatron import errors
from services.gateway.ratelimit import FailureLimiter


def test_an_empty_budget_refuses_and_warns_once_per_address(
    caplog: pytest.LogCaptureFixture,
) -> None:
    limiter = FailureLimiter(per_second=0.001, burst=2)
    here, there = "ipv4:10.0.0.1:5000", "ipv4:10.0.0.2:6000"
    for _ in range(2):
        limiter.check(here)
        limiter.failed(here)
    with caplog.at_level(logging.WARNING, logger="recallatron.gateway.ratelimit"):
        for _ in range(5):
            with pytest.raises(errors.ResourceExhausted) as refused:
                limiter.check("ipv4:10.0.0.1:5001")  # another port, the same address
            assert refused.value.retry_after > 0
        limiter.check(there)  # another address keeps its own budget
    warnings = [r for r in caplog.records if r.name == "recallatron.gateway.ratelimit"]
    assert [getattr(r, "address", None) for r in warnings] == ["ipv4:10.0.0.1"]
