"""The upkeep of the connection budgets (budget.py): idle connections closed
on a thread of their own."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from services.store.infrastructure.budget import ServerBudget

log = logging.getLogger("recallatron.store.budget")


class Reaper:
    """Closes idle connections of every budget about once a second."""

    def __init__(self, budgets: Callable[[], list[ServerBudget]], interval: float) -> None:
        self.budgets = budgets
        self.interval = interval
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="pg-idle-reaper", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.wait(self.interval):
            for budget in self.budgets():
                try:
                    budget.close_idle()
                except Exception:  # the next round tries again
                    log.exception("closing idle connections failed")
