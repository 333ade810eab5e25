"""Work discovery by change (design §10): the embedding job learns which
workspaces have work from the writes themselves, never by visiting all.

A write that queues memories for embedding marks its workspace in the control
plane (``queries.MARK_WORK``: a row per workspace and a NOTIFY) once it has
committed, before it is acknowledged. The job LISTENs on one connection; each
notification puts the workspace in the :class:`WorkQueue` its workers take
from. On every (re)connect, and every ``refresh_seconds`` after, it reads all
marks again, so a notification missed while its connection was down costs a
delay, never the work. A worker clears a mark when the workspace's queue is
empty, and only the mark it saw (``seq``), so a write landing meanwhile keeps
it. An idle workspace has no mark: it costs no query and no connection."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable

import psycopg

from services.store.infrastructure.listen import Listener

# The channel of services.store.sql.queries.MARK_WORK.
CHANNEL = "recallatron_work"


class WorkQueue:
    """Workspaces with work, each due at a time; a workspace is handed to one
    worker at a time, earliest due first (ties: first marked first), so a
    busy workspace takes its turn after the others that are due."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._cond = threading.Condition()
        self._due: dict[str, float] = {}
        self._taken: set[str] = set()
        # Marked again while taken: due at once when handed back.
        self._again: set[str] = set()

    def mark(self, workspace_id: str, at: float | None = None) -> None:
        when = self.clock() if at is None else at
        with self._cond:
            if workspace_id in self._taken:
                self._again.add(workspace_id)
                return
            self._due[workspace_id] = min(when, self._due.get(workspace_id, when))
            self._cond.notify()

    def mark_all(self, workspace_ids: Iterable[str]) -> None:
        for workspace_id in workspace_ids:
            self.mark(workspace_id)

    def take(self, timeout: float) -> str | None:
        """The workspace due first, once it is due; None after ``timeout``."""
        end = self.clock() + timeout
        with self._cond:
            while True:
                now = self.clock()
                free = [(due, ws) for ws, due in self._due.items() if ws not in self._taken]
                if free:
                    due, workspace_id = min(free)
                    if due <= now:
                        del self._due[workspace_id]
                        self._taken.add(workspace_id)
                        return workspace_id
                    wait = min(due, end) - now
                else:
                    wait = end - now
                if wait <= 0:
                    return None
                self._cond.wait(wait)

    def done(self, workspace_id: str, next_at: float | None) -> None:
        """Hands a workspace back: due again at ``next_at``, or dropped when
        None (unless it was marked again meanwhile)."""
        with self._cond:
            self._taken.discard(workspace_id)
            if workspace_id in self._again:
                self._again.discard(workspace_id)
                next_at = self.clock()
            if next_at is not None:
                self._due[workspace_id] = min(next_at, self._due.get(workspace_id, next_at))
            self._cond.notify_all()

    def __len__(self) -> int:
        with self._cond:
            return len(self._due) + len(self._taken)


class WorkListener(Listener):
    """Feeds a :class:`WorkQueue` from the control plane's work marks: each
    notification, and every mark read again on each (re)connect and every
    ``refresh_seconds``; after a lost connection, ``everything``."""

    def __init__(
        self,
        control_url: str,
        queue: WorkQueue,
        stop: threading.Event,
        marks: Callable[[psycopg.Connection], list[str]],
        refresh_seconds: float = 30.0,
        retry_seconds: float = 1.0,
        everything: Callable[[psycopg.Connection], list[str]] | None = None,
    ) -> None:
        connected = [False]

        def read(conn: psycopg.Connection) -> None:
            queue.mark_all(marks(conn))

        def reconnected(conn: psycopg.Connection) -> None:
            # Connected again after a loss (Postgres may have restarted, and
            # marks are committed without waiting for their flush): every
            # workspace is looked at once, not only the marked ones.
            if connected[0] and everything is not None:
                queue.mark_all(everything(conn))
            connected[0] = True
            read(conn)

        super().__init__(
            "work-listener",
            control_url,
            CHANNEL,
            stop,
            queue.mark,
            on_connect=reconnected,
            every=read,
            every_seconds=refresh_seconds,
            retry_seconds=retry_seconds,
        )
