"""A call whose HTTP client goes away stops: once the body is read, nothing
else reads the connection while the call runs, so its ``http.disconnect``
would reach no one and the relayed call would run on to its deadline (the
gateway's own for the store when the caller gave none). Here the call runs
as a task while the connection is watched; the client gone before the
answer began, the task is cancelled, which cancels the relayed gRPC call
(relay.py) and with it the statement in Postgres."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine, MutableMapping
from typing import Any

Event = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Event]]
Send = Callable[[Event], Awaitable[None]]


async def _gone(receive: Receive) -> bool:
    """Whether the connection's next event is ``http.disconnect`` (a server
    has no other to give once the body is read: a kept-alive connection's
    next request is not read while this one is served). The server sends
    one too once the answer is complete (uvicorn, httpx's transport): the
    caller tells them apart by whether the answer had begun."""
    return bool((await receive())["type"] == "http.disconnect")


async def stopped_when_gone(
    run: Callable[[Send], Coroutine[Any, Any, None]], receive: Receive, send: Send
) -> None:
    """Runs ``run(send)`` (its body already read from ``receive``) until it
    ends, or until the client goes away before its answer began: then it is
    cancelled and nothing is sent."""
    answering = False

    async def watched(event: Event) -> None:
        nonlocal answering
        answering = True
        await send(event)

    call = asyncio.ensure_future(run(watched))
    gone = asyncio.ensure_future(_gone(receive))
    try:
        await asyncio.wait({call, gone}, return_when=asyncio.FIRST_COMPLETED)
        went = gone.done() and not gone.cancelled() and gone.exception() is None and gone.result()
        if went and not call.done() and not answering:
            call.cancel()  # the client went away: the work stops too
        await asyncio.wait({call})
    finally:
        # This task cancelled (the server stopping): the call with it.
        call.cancel()
        gone.cancel()
    if not call.cancelled():
        call.result()  # its error, as the server would have seen it
