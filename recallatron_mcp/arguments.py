"""A `tools/call` whose `arguments` is not a JSON object, refused naming
`arguments`: the SDK's own check answers -32602 "Invalid request parameters"
naming nothing, where every other bad argument is named
(recallatron_mcp/tools.py). A middleware, so stdio and streamable HTTP
answer alike, before the SDK validates the call."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import mcp_types as types
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError

# JSON's names for what a JSON-RPC message may carry instead of an object.
_JSON_TYPES: tuple[tuple[type, str], ...] = (
    (bool, "boolean"),
    (int, "number"),
    (float, "number"),
    (str, "string"),
    (list, "array"),
)


def json_type(value: Any) -> str:
    return next((name for kind, name in _JSON_TYPES if isinstance(value, kind)), "value")


def arguments_refusal(params: Any) -> MCPError | None:
    """The refusal of a `tools/call` whose ``params`` carry `arguments` that
    are not an object (absent or null are none: the tool then takes none)."""
    if not isinstance(params, Mapping):
        return None  # no params to speak of: the SDK names what is missing
    given = params.get("arguments")
    if given is None or isinstance(given, Mapping):
        return None
    kind = json_type(given)
    return MCPError(
        code=types.INVALID_PARAMS,
        message=(
            f"Invalid params: arguments: a JSON {kind} was given; a JSON object is "
            'expected, of the tool\'s argument names and values (as {"query": "..."}, '
            "or {} for none)"
        ),
        data={"argument": "arguments", "expected": "object", "given": kind},
    )


class ArgumentsAnObject:
    """Server middleware: a `tools/call` with `arguments` not an object is
    refused with the field named; everything else passes on."""

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        if ctx.method == "tools/call" and (refusal := arguments_refusal(ctx.params)):
            raise refusal
        return await call_next(ctx)
