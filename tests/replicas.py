"""A second gateway replica beside the session stack's, for the tests of what
every gateway must refuse at once (test_token_expiry, test_member_removal): a
test module imports the fixture `second_gateway` (as itself: `import
second_gateway as second_gateway`)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from recallatron_devkit.stack import Stack
from tests.integration.test_rolling_upgrade import REPO, Processes


@pytest.fixture(scope="module")
def second_gateway(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Another gateway replica on the same store, with its own auth cache
    (gRPC only: Processes leaves the HTTP/JSON port to the stack's gateway)."""
    procs = Processes(stack, tmp_path_factory.mktemp("second-gateway"))
    try:
        yield procs.start("gateway", REPO, store=stack.address("store"), rank=stack.address("rank"))
    finally:
        procs.stop()
