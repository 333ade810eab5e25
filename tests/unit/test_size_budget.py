"""The page size rule (recallatron/size_budget.py): the first item always, then
items while their total stays within the budget, and none after the first that
does not fit. The pages that follow it, through the stack:
tests/integration/test_answer_sizes.py and tests/surfaces/test_dedup.py."""

from __future__ import annotations

from recallatron.size_budget import Budget


def taken(sizes: list[int], limit: int) -> list[int]:
    page = Budget(limit)
    return [size for size in sizes if page.takes(size)]


def test_items_are_taken_while_their_total_stays_within_the_budget() -> None:
    assert taken([3, 4, 3, 1], 10) == [3, 4, 3]
    assert taken([5, 5], 10) == [5, 5]


def test_the_first_item_is_taken_whatever_its_size() -> None:
    assert taken([25, 1], 10) == [25]
    assert taken([0, 11], 10) == [0]


def test_nothing_is_taken_after_the_first_that_does_not_fit() -> None:
    # The 1 would fit what the 9 left, but a page does not skip an item.
    assert taken([4, 9, 1, 1], 10) == [4]


def test_the_budget_counts_what_it_took() -> None:
    page = Budget(10)
    assert [page.takes(s) for s in (6, 3, 2)] == [True, True, False]
    assert (page.used, page.taken) == (9, 2)
