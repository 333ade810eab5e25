"""One check for capture's decisions on a list of turns (docs/agents.md,
Capture): the turn tests state turns and the decision expected of them."""

from __future__ import annotations

from collections.abc import Iterable

from services.gateway import capture


def decided_as(
    expected: str | tuple[str, ...],
    turns: Iterable[str | tuple[str, str]],
    *,
    says: str = "",
    never_says: str = "",
) -> list[capture.Capture]:
    """Each turn decided in ``expected`` (a category, or any of several):
    with capture.STORE each is a (turn, title) pair stored under that title,
    else each is a no-op whose reason has ``says`` and not ``never_says``."""
    categories = (expected,) if isinstance(expected, str) else expected
    decisions = []
    for case in turns:
        turn, title = (case, None) if isinstance(case, str) else case
        decided = capture.decide(turn)
        if capture.STORE in categories:
            assert decided.store and decided.title == title, (turn, decided)
        else:
            assert not decided.store, (turn, decided.title)
        assert decided.category in categories, (turn, decided)
        assert says in decided.reason, (turn, decided)
        assert not never_says or never_says not in decided.reason, (turn, decided)
        decisions.append(decided)
    return decisions
