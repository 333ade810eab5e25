"""What an MCP tool's failure tells the agent comes from the shared relay
(recallatron/grpcclient.py): every error a service answers with, carried
through the gateway's relay as a client receives it, reaches the agent with
the relay's advice, and the MCP layer keeps no table of its own. No stack
needed: the statuses are the servers' own (``status_for``) in fake calls."""

from __future__ import annotations

import ast
import re
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_status import rpc_status

from recallatron import errors, grpcclient
from recallatron.grpcserver import status_for
from recallatron_mcp import server, tools
from services.gateway.ratelimit import FailureLimiter, RateLimiter

MCP = Path(__file__).resolve().parents[2] / "recallatron_mcp"

# One of every error a service raises, as the store or the gateway raises it.
RAISED: list[errors.DomainError] = [
    errors.InvalidArgument("title", "must not be empty"),
    errors.NotFound("memory: not found"),
    errors.FailedPrecondition("sources share no audience", "derive"),
    errors.RevisionMismatch("3f0c6f9e-0000-4000-8000-000000000001", 1, 3),
    errors.AlreadyExists("slug: a workspace named 'x' exists"),
    errors.Unauthenticated("authorization: unknown token"),
    errors.PermissionDenied("this token is read-only"),
    errors.Unavailable("embed is unavailable; retry shortly"),
    errors.ResourceExhausted("overloaded; retry in 0.25 s", 0.25),
    errors.DeadlineExceeded("abandoned by its caller"),
]


class Failed(grpc.RpcError):
    """A failed call as a client receives it: the status a server sends for
    ``error``, rich details in the trailers."""

    def __init__(self, error: errors.DomainError) -> None:
        self.status = rpc_status.to_status(status_for(error))

    def code(self) -> grpc.StatusCode:
        code: grpc.StatusCode = self.status.code
        return code

    def details(self) -> str:
        return str(self.status.details)

    def trailing_metadata(self) -> Any:
        return self.status.trailing_metadata


class Bare(grpc.RpcError):
    """A failure gRPC itself makes (no rich status), e.g. a message too large."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        self._code, self._details = code, details

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details

    def trailing_metadata(self) -> Any:
        return ()


def through_gateway(error: errors.DomainError) -> Failed:
    """Raised by the store, relayed by the gateway, received by the MCP server."""
    return Failed(grpcclient.relay(Failed(error), "the store"))


class FailingClient:
    """Stands in for the gateway client: every call fails with ``exc``."""

    class memory:
        Read = "Read"

    def __init__(self, exc: grpc.RpcError) -> None:
        self.exc = exc

    def call(self, method: Any, request: Any) -> Any:
        raise self.exc


def tool_failure(exc: grpc.RpcError) -> str:
    with pytest.raises(tools.ToolError) as err:
        tools.call(FailingClient(exc), "read", {"ids": [str(uuid.uuid4())]})  # type: ignore[arg-type]
    return str(err.value)


def assert_waits(message: str, retry_after: float) -> None:
    """The advice waits the server's delay, rounded up to a tenth of a second."""
    found = re.search(r"wait (\d+\.\d) s", message)
    assert found, message
    assert retry_after <= float(found[1]) < retry_after + 0.1


def test_every_error_a_service_raises_has_its_own_advice() -> None:
    kinds = {type(e) for e in RAISED}
    assert kinds == set(errors.DomainError.__subclasses__()) - {errors.Relayed}, (
        "a new error kind: add it to RAISED, and its advice to grpcclient.HINTS"
    )
    for error in RAISED:
        status = grpcclient.peer_status(Failed(error))
        assert status.code in grpcclient.HINTS, status.code
        assert grpcclient.advice(status) != grpcclient.UNEXPECTED


@pytest.mark.parametrize("error", RAISED, ids=lambda e: type(e).__name__)
def test_the_agent_reads_the_relays_advice(error: errors.DomainError) -> None:
    received = through_gateway(error)
    status = grpcclient.peer_status(received)
    message = tool_failure(received)
    assert message == f"{status.code.name}: {status.problem}. {grpcclient.advice(status)}"


def test_a_peer_that_is_gone_or_late_is_retried_as_is() -> None:
    for code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
        message = tool_failure(Failed(grpcclient.relay(Bare(code, "connection refused"))))
        assert message.startswith("UNAVAILABLE: a backing service is unavailable")
        assert "retry in a few seconds with the same request_id" in message


def refusal(refuse: Callable[[], None]) -> str:
    """What the agent reads when ``refuse`` raises the gateway's RESOURCE_EXHAUSTED:
    wait the server's delay and retry, never ask for less."""
    with pytest.raises(errors.ResourceExhausted) as over:
        refuse()
    message = tool_failure(through_gateway(over.value))
    assert_waits(message, over.value.retry_after)
    assert "retry with the same request_id" in message and "less" not in message
    return message


def test_the_rate_limit_says_wait_and_retry_with_the_servers_delay() -> None:
    limit = RateLimiter(per_second=0.5, burst=1)
    limit.check("token")
    message = refusal(lambda: limit.check("token"))
    assert message.startswith("RESOURCE_EXHAUSTED: authorization: rate limit")
    assert ", as the service asks, and retry" in message


def test_failed_authentications_and_overload_say_wait_too() -> None:
    failures = FailureLimiter(per_second=0.1, burst=1)
    failures.failed("ipv4:10.0.0.7:5000")
    refusal(lambda: failures.check("ipv4:10.0.0.7:5001"))
    # The fair scheduler's refusal: its 0.25 s is never told as 0.2 s.
    assert_waits(tool_failure(through_gateway(RAISED[8])), 0.25)
    # Without RetryInfo (no delay given) a wait is still the advice...
    bare = tool_failure(Bare(grpc.StatusCode.RESOURCE_EXHAUSTED, "too many calls"))
    assert "wait a few seconds and retry" in bare
    # ...but not for a message over gRPC's size limit, which waiting cannot fix.
    large = Bare(grpc.StatusCode.RESOURCE_EXHAUSTED, "Received message larger than max (9 vs. 8)")
    assert tool_failure(large).endswith(grpcclient.TOO_LARGE)


def test_a_lost_race_names_the_current_revision() -> None:
    message = tool_failure(through_gateway(RAISED[3]))
    assert message.startswith("ABORTED: expected_revision")
    assert "retry with expected_revision 3 and a new request_id" in message
    assert "3f0c6f9e-0000-4000-8000-000000000001" in message


def test_the_servers_own_failures_use_the_same_advice() -> None:
    assert tools.failure(server.NO_TOKEN) == (
        "UNAUTHENTICATED: no member token. " + grpcclient.HINTS[grpc.StatusCode.UNAUTHENTICATED]
    )
    assert tools.failure(server.FAILED).endswith(grpcclient.UNEXPECTED)


def test_the_mcp_layer_keeps_no_table_of_hints() -> None:
    """No dict keyed by status code anywhere in recallatron_mcp/: the hints
    live in the shared relay only."""
    for path in sorted(MCP.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Dict):
                keys = [ast.unparse(k) for k in node.keys if k is not None]
                assert not any("StatusCode" in k for k in keys), f"{path.name}:{node.lineno}"


# A tool error's head: a gRPC status name, "(nothing was sent)" when the
# server refused it before calling the gateway.
_HEAD = re.compile(r"([A-Z_]+)(?: \(nothing was sent\))?: ")


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("no_such_tool", {}),
        ("read", {"ids": "not a list"}),
        ("read", {"ids": [str(uuid.uuid4())]}),
    ],
    ids=["unknown tool", "schema", "gateway"],
)
def test_every_tool_error_begins_with_its_status(name: str, arguments: dict[str, Any]) -> None:
    client = FailingClient(Failed(errors.NotFound("memory: not found")))
    with pytest.raises(tools.ToolError) as err:
        tools.call(client, name, arguments)  # type: ignore[arg-type]
    message = str(err.value)
    head = _HEAD.match(message)
    assert head is not None and head[1] in grpc.StatusCode.__members__, message


def test_an_unknown_tool_is_unimplemented_as_an_unknown_method_is() -> None:
    with pytest.raises(tools.ToolError) as err:
        tools.call(FailingClient(Bare(grpc.StatusCode.INTERNAL, "")), "no_such_tool", {})  # type: ignore[arg-type]
    message = str(err.value)
    assert message.startswith("UNIMPLEMENTED (nothing was sent): unknown tool 'no_such_tool'")
    assert all(name in message for name in tools.SCHEMAS)
