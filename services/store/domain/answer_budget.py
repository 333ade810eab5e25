"""What one answer's memories may take on the wire (vocabulary.ANSWER_BUDGET_BYTES):
read answers the memories that fit and leaves the rest to another call; recall
keeps its rows and leaves out the provenance of those past the budget. Sizes
are estimated from the text the views hold (UTF-8 bytes) plus a fixed cost per
item for its ids, times and framing, which the text of a large memory dwarfs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


class MemoryView(Protocol):
    """What this module reads of memory_reads.MemoryView (which imports it)."""

    title: str
    body: str
    omitted: dict[str, int]


# Ids, timestamps, enums and protobuf framing of one item (a memory, a link, a
# mention, a claim...): about two UUIDs and two timestamps.
ITEM_BYTES = 128

# Each provenance list of a memory, by its name in the answer.
LISTS = (
    "links",
    "mentions",
    "supersedes",
    "superseded_by",
    "revisions",
    "claims",
    "relations",
    "aliases",
)


def _text(value: object) -> int:
    """The UTF-8 bytes of the strings in ``value`` (a view, a tuple or a str)."""
    if isinstance(value, str):
        return len(value.encode())
    if isinstance(value, tuple):
        return sum(_text(v) for v in value)
    fields = getattr(value, "__dataclass_fields__", None)
    if fields is None:
        return 0
    return sum(_text(getattr(value, name)) for name in fields)


def provenance_bytes(view: MemoryView) -> int:
    return sum(ITEM_BYTES + _text(item) for name in LISTS for item in getattr(view, name))


def memory_bytes(view: MemoryView) -> int:
    return ITEM_BYTES + len(view.title.encode()) + len(view.body.encode()) + provenance_bytes(view)


def fitting(views: Sequence[MemoryView], budget: int) -> int:
    """How many of ``views``, from the first, fit ``budget``: at least one."""
    used = 0
    for n, view in enumerate(views):
        used += memory_bytes(view)
        if used > budget and n > 0:
            return n
    return len(views)


def strip_past(views: Sequence[MemoryView], budget: int) -> None:
    """Leaves out the provenance of the views past ``budget`` (their rows and
    text stay), counting what each left out."""
    used = 0
    for view in views:
        used += memory_bytes(view)
        if used <= budget:
            continue
        used -= provenance_bytes(view)
        for name in LISTS:
            items = getattr(view, name)
            if items:
                view.omitted[name] = view.omitted.get(name, 0) + len(items)
                setattr(view, name, [])
