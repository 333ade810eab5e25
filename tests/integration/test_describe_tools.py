"""DescribeTools, the one call that needs no token, tells an agent over gRPC
(and HTTP/JSON) what MCP's tool listing tells it: each tool's title, input
and output schemas and its annotations (every tool an agent sees
carries them, docs/agents.md). It gave only name, description and input schema."""

from __future__ import annotations

import json

import grpc
import pytest

from recallatron.v1 import gateway_pb2, gateway_pb2_grpc
from recallatron_devkit.stack import Stack
from recallatron_mcp.server import listed_tools

pytestmark = pytest.mark.integration


def test_every_tool_described_carries_what_mcp_lists(stack: Stack) -> None:
    with grpc.insecure_channel(stack.gateway) as channel:
        stub = gateway_pb2_grpc.MemoryServiceStub(channel)
        described = stub.DescribeTools(gateway_pb2.DescribeToolsRequest(), timeout=30)
    by_name = {t.name: t for t in described.tools}
    listed = listed_tools()
    assert set(by_name) == {t.name for t in listed}
    for tool in listed:
        got = by_name[tool.name]
        assert got.title == tool.title, tool.name
        assert got.description == tool.description, tool.name
        assert json.loads(got.input_schema_json) == tool.input_schema, tool.name
        assert json.loads(got.output_schema_json) == tool.output_schema, tool.name
        hints = tool.annotations
        assert hints is not None
        assert (
            got.annotations.read_only_hint,
            got.annotations.destructive_hint,
            got.annotations.idempotent_hint,
            got.annotations.open_world_hint,
        ) == (
            hints.read_only_hint,
            hints.destructive_hint,
            hints.idempotent_hint,
            hints.open_world_hint,
        ), tool.name
    # Forget destroys; recall only reads: the hints are not all alike.
    assert by_name["forget"].annotations.destructive_hint
    assert by_name["recall"].annotations.read_only_hint
