"""When the cross-encoder is worth asking (docs/recall.md, "Degrade, never
refuse").

The cross-encoder runs in the embed service. When that service does not
answer (down, or hung: a frozen process keeps its connections, so each call
waits out its whole deadline), or answers that it has no cross-encoder, asking
it again on every recall only adds its deadline to every answer: 2 s a
recall, in any mode, while the answer is the fused order all the same. So a
failure of that kind closes the gate for ``recheck_seconds``, during which the
fused order stands without a call; the first recall after it asks again. A
query embedding the service answers opens the gate at once when the service
itself had failed (it is back); not when the cross-encoder was late or absent
while the service answered: the query embedding of every hybrid recall would
then ask a slow cross-encoder again and wait out its deadline each time, and
only a restart of the embed service brings a missing one."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from services.rank.ports import Degraded

# The kinds of failure (ports.Degraded.kind) that say the next call would fail
# the same way: no cross-encoder, or no answer from the service at all.
ABSENT = "absent"
NO_ANSWER = frozenset({"unavailable", "timeout"})


class CrossEncoderGate:
    def __init__(self, recheck_seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.recheck_seconds = recheck_seconds
        self.clock = clock
        self._lock = threading.Lock()
        # Closed until this clock time, for this kind, with this reason.
        self._until = 0.0
        self._kind = ""
        self._reason = ""
        # Closed because the service failed a call (not the cross-encoder's
        # own lateness or absence): any answer of the service opens it.
        self._service_failed = False

    def closed(self) -> tuple[str, str]:
        """(kind, why) of the failure that keeps the cross-encoder from being
        asked now; ("", "") when it may be asked."""
        with self._lock:
            if not self._kind or self.clock() >= self._until:
                return "", ""
            return self._kind, self._reason

    def rerank_failed(self, exc: Degraded) -> None:
        """A cross-encoder call failed; closes the gate when the next would too."""
        if exc.kind == ABSENT:
            self._close(exc.kind, exc.message)
        elif exc.kind in NO_ANSWER:
            # Unreachable: the service is down, and its next answer says it is
            # back; late: the cross-encoder itself is, whatever the service says.
            self._close(
                exc.kind,
                f"{exc.message}; asked again {self.recheck_seconds:g} s after",
                service_failed=exc.kind == "unavailable",
            )

    def embed_failed(self, exc: Degraded) -> None:
        """The service failed a query embedding: its cross-encoder would not
        answer either (unless no cross-encoder is the reason already)."""
        if exc.kind in NO_ANSWER:
            self._close(
                exc.kind,
                f"not asked: the embed service, which runs it, failed a query embedding "
                f"({exc.message}); asked again {self.recheck_seconds:g} s after",
                keep_absent=True,
                service_failed=True,
            )

    def answered(self) -> None:
        """The service answered a call: it serves again (a missing or late
        cross-encoder stays so until the gate's time is up)."""
        with self._lock:
            if self._service_failed:
                self._kind, self._reason, self._until = "", "", 0.0
                self._service_failed = False

    def _close(
        self, kind: str, reason: str, keep_absent: bool = False, service_failed: bool = False
    ) -> None:
        if self.recheck_seconds <= 0:
            return
        with self._lock:
            now = self.clock()
            if keep_absent and self._kind == ABSENT and now < self._until:
                return
            self._kind, self._reason = kind, reason
            self._until = now + self.recheck_seconds
            self._service_failed = service_failed
