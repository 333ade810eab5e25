"""How the local stack words a service that failed to start: in the service's
own words, from its JSON log (recallatron_cli.stack.last_error)."""

from __future__ import annotations

import json

from recallatron_cli.stack import last_error


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
