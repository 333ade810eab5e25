"""The tools as MCP calls: JSON arguments, checked against the tool's input
schema, become its gateway request and the answer JSON an agent can read, both
by the catalogue's one definition of the tool (recallatron/tools.py); gRPC
errors become messages that say what was wrong and what to do next (the
advice of the shared relay, recallatron/grpcclient.py)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import itertools
import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import anyio
import grpc
import jsonschema
from google.protobuf.message import Message

from recallatron.client import Client
from recallatron.grpcclient import PeerStatus, advice, peer_status
from recallatron.protojson import clip
from recallatron.tools import BY_NAME, TOOLS, Tool

SCHEMAS = {t.name: t.input_schema for t in TOOLS}


class ToolError(Exception):
    """A failure the agent should read: what was wrong and what to do;
    ``status``: the gateway's, when it refused the call."""

    def __init__(self, message: str, status: PeerStatus | None = None) -> None:
        super().__init__(message)
        self.status = status


# -- arguments -> requests -------------------------------------------------------

# The most one problem's description may take (a value in it: protojson.clip).
PROBLEM_CHARS = 300


def _problem(err: jsonschema.ValidationError) -> str:
    """A schema violation's message with the offending value quoted short;
    null, true and false as JSON names them, not as Python's None, True, False."""
    quoted = repr(err.instance)
    plain = err.instance is None or isinstance(err.instance, bool)
    shown = json.dumps(err.instance) if plain else clip(quoted)
    message = str(err.message).replace(quoted, shown)
    return clip(message, PROBLEM_CHARS)


def argument_path(parts: Iterable[str | int]) -> str:
    """Where in the arguments a schema violation is, named as the servers
    name fields and the gateway's refusals reach the agent ("mentions[0].name",
    recallatron/argument_paths.py), not as JSON Schema's path ("mentions.0.name")."""
    path = ""
    for part in parts:
        path += f"[{part}]" if isinstance(part, int) else f".{part}" if path else str(part)
    return path


@functools.cache
def _python_regex(pattern: str) -> re.Pattern[str]:
    """A schema pattern (ECMA-262, as JSON Schema reads it) for Python's re:
    each ``$`` outside a character class becomes ``\\Z``, since Python's ``$``
    also matches before a final newline ("city\\n" would pass
    ``^[a-z][a-z0-9_]*$`` here, and the store refuses it)."""
    out: list[str] = []
    i, in_class = 0, False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            out.append(pattern[i : i + 2])
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
        elif c == "$":
            c = r"\Z"
        out.append(c)
        i += 1
    return re.compile("".join(out))


def _pattern(
    validator: Any, pattern: str, instance: Any, schema: dict[str, Any]
) -> Iterator[jsonschema.ValidationError]:
    if validator.is_type(instance, "string") and not _python_regex(pattern).search(instance):
        yield jsonschema.ValidationError(f"{instance!r} does not match {pattern!r}")


# Draft 2020-12 with its patterns read as JSON Schema reads them.
_Validator = jsonschema.validators.extend(  # type: ignore[no-untyped-call]
    jsonschema.Draft202012Validator, {"pattern": _pattern}
)


# Schema violations looked for before refusing: each costs an error object
# (and its message), so a list of a million bad items must not make a million.
MAX_PROBLEMS = 50


def over_long(
    schema: Mapping[str, Any], value: Any, where: list[str | int]
) -> tuple[list[str | int], int, int] | None:
    """The first list in ``value`` longer than its schema's maxItems (where,
    its length, the limit), found by lengths alone: the schema's own check
    comes after it has validated every item, so a list a thousand times too
    long cost a thousand times the work (and an error object per bad item)."""
    if isinstance(value, list):
        most = schema.get("maxItems")
        if isinstance(most, int) and len(value) > most:
            return where, len(value), most
        items = schema.get("items")
        if isinstance(items, Mapping):
            for i, item in enumerate(value):
                if (found := over_long(items, item, [*where, i])) is not None:
                    return found
    elif isinstance(value, Mapping):
        properties = schema.get("properties")
        if isinstance(properties, Mapping):
            for key, item in value.items():
                inner = properties.get(key)
                if not isinstance(inner, Mapping):
                    continue
                if (found := over_long(inner, item, [*where, key])) is not None:
                    return found
    return None


def without_nulls(schema: Mapping[str, Any], value: Any) -> Any:
    """``value`` with each optional property given as null left out, at any
    depth: many agents fill every property of a schema, null where they mean
    none, and null is how the request reads one not given. A required one,
    an unknown one and a list's item stay, to be refused naming them."""
    if isinstance(value, list):
        items = schema.get("items")
        return [without_nulls(items, v) for v in value] if isinstance(items, Mapping) else value
    properties = schema.get("properties")
    if not isinstance(value, Mapping) or not isinstance(properties, Mapping):
        return value
    required = schema.get("required", ())
    return {
        key: without_nulls(properties.get(key, {}), item)
        for key, item in value.items()
        if item is not None or key in required or key not in properties
    }


def check_arguments(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """The tool's own JSON schema, checked before anything is sent; returns
    the arguments to send (:func:`without_nulls`)."""
    schema = SCHEMAS.get(name)
    if schema is None:
        # As gRPC answers an unknown method, and the gateway's HTTP/JSON an unknown path.
        raise ToolError(
            f"UNIMPLEMENTED (nothing was sent): unknown tool {clip(repr(name))}; the tools "
            f"are: {', '.join(SCHEMAS)}. Call one of these by its exact name."
        )
    refuse = f". Fix the arguments to match the {name} tool's input schema and call again."
    if (long_list := over_long(schema, arguments, [])) is not None:
        path, given, most = long_list
        raise ToolError(
            f"INVALID_ARGUMENT (nothing was sent): {clip(argument_path(path))}: "
            f"a list of {given} items is too long (at most {most})" + refuse
        )
    arguments = without_nulls(schema, arguments)
    validator = _Validator(schema)
    found = itertools.islice(validator.iter_errors(arguments), MAX_PROBLEMS)
    problems = sorted(found, key=lambda err: list(err.path))
    if problems:
        lines = []
        for err in problems[:5]:
            where = argument_path(err.absolute_path) or "(arguments)"
            lines.append(f"{clip(where)}: {_problem(err)}")
        raise ToolError("INVALID_ARGUMENT (nothing was sent): " + "; ".join(lines) + refuse)
    return arguments


def prepare(name: str, arguments: dict[str, Any]) -> tuple[Tool, Message]:
    """The tool and its gateway request, its arguments checked. Raises
    ToolError with an actionable message when they are wrong."""
    arguments = check_arguments(name, arguments)
    tool = BY_NAME[name]
    try:
        return tool, tool.request_of(arguments)
    except ValueError as exc:  # what a schema cannot check, such as a time's offset
        raise ToolError(
            f"INVALID_ARGUMENT (nothing was sent): {clip(str(exc), PROBLEM_CHARS)}. "
            "Fix it and call again."
        ) from None


def answered(tool: Tool, response: Callable[[], Message]) -> dict[str, Any]:
    """The gateway's answer (``response()``) as the tool's output schema says;
    its refusal a ToolError."""
    try:
        return tool.answer(response())
    except grpc.RpcError as exc:
        status = as_arguments(peer_status(exc), tool)
        raise ToolError(failure(status), status) from None


def call(client: Client, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """Runs one tool: its arguments checked and made its request, the gateway
    method named in the catalogue called, the answer as the tool's output
    schema says. Raises ToolError with an actionable message on failure."""
    tool, request = prepare(name, arguments)
    return answered(tool, lambda: client.call(getattr(client.memory, tool.method), request))


async def call_cancellable(client: Client, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """:func:`call` for the event loop: cancelling the task (the client's
    notifications/cancelled) cancels the gateway call at once, so the gateway
    stops its work and the request is answered and its id freed, instead of a
    thread waiting the call out to its deadline."""
    # The arguments' check is CPU work: off the event loop.
    tool, request = await anyio.to_thread.run_sync(prepare, name, arguments)
    future = client.start(getattr(client.memory, tool.method), request)
    try:
        await _finished(future)
    finally:
        # A no-op once it is done; otherwise the task was cancelled.
        future.cancel()
    return answered(tool, future.result)


async def _finished(future: grpc.Future[Any]) -> None:
    """Waits for a gRPC call without holding a thread. Its done callback runs
    on a gRPC thread, or in this one when it is done already."""
    loop = asyncio.get_running_loop()
    done = loop.create_future()

    def wake() -> None:
        if not done.done():
            done.set_result(None)

    def on_done(_: grpc.Future[Any]) -> None:
        # RuntimeError: the loop is closed, so nobody waits any more.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(wake)

    future.add_done_callback(on_done)
    await done


# A field path as the servers name one ("claims[0].entity.entity_id").
_FIELD_PATH = re.compile(r"[a-z_][a-z0-9_]*(?:\[\d+\])*(?:\.[a-z_][a-z0-9_]*(?:\[\d+\])*)*")


def as_arguments(status: PeerStatus, tool: Tool) -> PeerStatus:
    """The status with each field it names as the tool's arguments name it
    (the gateway names its request's fields: about_ids for about)."""

    def named(text: str) -> str:
        name, sep, rest = text.partition(": ")
        if not sep or not _FIELD_PATH.fullmatch(name):
            return text
        return f"{tool.argument_of(name)}{sep}{rest}"

    return dataclasses.replace(
        status, message=named(status.message), fields=tuple(named(f) for f in status.fields)
    )


# -- errors -> what to do ------------------------------------------------------------


# What an OAuth caller is told when the gateway refuses the token this server
# made for its sign-in: it has no member token to set (the shared advice).
SIGN_IN_AGAIN = (
    "The access given to this connection's sign-in was revoked (an owner revoked it, or "
    "the member was removed). Ask the person to sign in again (reconnect this MCP server); "
    "if that is refused too, ask a workspace owner to restore their access."
)

# How the gateway's refusal of a call outside a token's scope begins
# (services/gateway/scopes.py).
SCOPE = "token scope"


def wider_sign_in(granted: Iterable[str]) -> str:
    """What an OAuth caller is told when its sign-in's scopes (``granted``)
    do not reach the call: only the person can approve more, at sign-in."""
    return (
        f"This connection's sign-in approved only {' '.join(sorted(granted))}. If the person "
        "means this agent to do it, ask them to reconnect this MCP server and approve the "
        "scope it needs (recallatron:write to change memories, recallatron:purpose:<purpose> "
        "for another purpose); do not retry as is."
    )


def failure(status: PeerStatus, todo: str | None = None) -> str:
    """STATUS: what was wrong (with the field when known). What to do: ``todo``,
    else the shared plumbing's advice (recallatron/grpcclient.py)."""
    return f"{status.code.name}: {clip(status.problem, PROBLEM_CHARS)}. {todo or advice(status)}"
