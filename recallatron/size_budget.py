"""The rule an answer's page follows for its size (vocabulary.ANSWER_BUDGET_BYTES):
items are taken in order while their sizes stay within the budget, the first
always (a page always answers something, so its token moves on), and the page
ends at the first that does not fit. Shared here because both the store (its
pages of memories and cards) and the gateway (review's pairs) fill pages so."""

from __future__ import annotations


class Budget:
    """Takes items of the sizes it is given, in order, while they fit."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self.taken = 0
        self.passed = False

    def takes(self, size: int) -> bool:
        """Whether the next item, of ``size``, is taken (counted if so). Once
        one is refused every later one is too: a page does not skip an item
        to take a smaller one after it."""
        if self.passed or (self.taken and self.used + size > self.limit):
            self.passed = True
            return False
        self.used += size
        self.taken += 1
        return True
