"""How the local stack words a service that failed to start: in the service's
own words, from its JSON log (recallatron_devkit.stack.last_error); and the
ports it picks for its processes."""

from __future__ import annotations

import json
import socket

from recallatron_devkit.stack import last_error


def record(level: str, message: str, **extra: str) -> str:
    return json.dumps({"level": level, "message": message, "service": "embed", **extra})


def test_the_last_error_record_is_the_reason() -> None:
    log = "\n".join(
        [
            record("INFO", "listening"),
            record("ERROR", "an older problem"),
            record("ERROR", "bi-encoder not loaded; run `recallatron prepare-models`", error="x"),
            record("INFO", "stopped"),
            "",
        ]
    )
    assert last_error(log) == "bi-encoder not loaded; run `recallatron prepare-models` (x)"


def test_no_error_record_or_a_trailing_traceback_gives_none() -> None:
    assert last_error(record("INFO", "listening")) is None
    assert last_error("") is None
    traceback = "Traceback (most recent call last):\n  ...\nRuntimeError: could not bind"
    assert last_error(record("ERROR", "earlier") + "\n" + traceback) is None


def test_free_ports_lie_below_the_ephemeral_range_and_never_repeat() -> None:
    """A stack's ports are picked where no outgoing connection takes them
    between the pick and the bind (the embedding job once failed to start
    its metrics endpoint with "Address already in use"), and picks made one
    after another are distinct even before any of them is bound."""
    from recallatron_devkit.ports import _ephemeral_start, free_port

    ports = [free_port() for _ in range(50)]
    assert len(set(ports)) == len(ports)
    assert all(10_000 <= p < _ephemeral_start() for p in ports)
    for port in ports[:5]:
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))  # free indeed
