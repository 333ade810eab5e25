"""What one answer's memories may take on the wire (vocabulary.ANSWER_BUDGET_BYTES):
read answers the memories that fit and leaves the rest to another call; recall
keeps its rows and leaves out the provenance of those past the budget. Sizes
are estimated from the text the views hold (UTF-8 bytes) plus a fixed cost per
item for its ids, times and framing, which the text of a large memory dwarfs.

The other answers that carry what members wrote are held to a budget the same
way: a page of memories or of entity cards ends where the budget is spent (a
page token continues), and what sits beside recall's memories (entity cards,
history evidence) keeps what fits and names or counts the rest."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

from recallatron.size_budget import Budget

T = TypeVar("T")


class MemoryView(Protocol):
    """What this module reads of memory_reads.MemoryView (which imports it)."""

    title: str
    body: str
    omitted: dict[str, int]


class Alias(Protocol):
    """What this module reads of an alias claim on a card."""

    @property
    def alias(self) -> str: ...


class EntityCard(Protocol):
    """What this module reads of graph_cards.EntityCard (which imports it)."""

    @property
    def entity(self) -> object: ...
    @property
    def attributes(self) -> Sequence[object]: ...
    @property
    def relations(self) -> Sequence[object]: ...
    @property
    def aliases(self) -> Sequence[Alias]: ...
    @property
    def merged(self) -> Sequence[object]: ...
    @property
    def mentioned_by(self) -> Sequence[str]: ...


# Ids, timestamps, enums and protobuf framing of one item (a memory, a link, a
# mention, a claim...): about two UUIDs and two timestamps.
ITEM_BYTES = 128
# One id in a list of ids (a card's mentioning memories): a UUID and its framing.
ID_BYTES = 40

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
    return fitting_sizes([memory_bytes(v) for v in views], budget)


def keep_within(views: Sequence[MemoryView], budget: int) -> int:
    """How many of ``views``, in rank order, an answer keeps within ``budget``
    (at least one): as many as fit without their provenance; then the
    provenance of the kept views is left out (counted) from the last back until
    they fit with it, so the higher-ranked keep theirs first and a lower-ranked
    view never keeps provenance a higher-ranked one lost."""
    kept = fitting_sizes([memory_bytes(v) - provenance_bytes(v) for v in views], budget)
    used = sum(memory_bytes(v) for v in views[:kept])
    for view in reversed(views[:kept]):
        if used <= budget:
            break
        used -= provenance_bytes(view)
        _leave_out_provenance(view)
    return kept


def _leave_out_provenance(view: MemoryView) -> None:
    for name in LISTS:
        items = getattr(view, name)
        if items:
            view.omitted[name] = view.omitted.get(name, 0) + len(items)
            setattr(view, name, [])


def fitting_sizes(sizes: Sequence[int], budget: int) -> int:
    """How many items of these ``sizes``, from the first, fit ``budget``: at
    least one (a page always answers something, so its token moves on)."""
    page = Budget(budget)
    for size in sizes:
        if not page.takes(size):
            break
    return page.taken


def each_fitting(
    items: Sequence[T], size: Callable[[T], int], budget: int
) -> tuple[list[T], list[T]]:
    """The items an answer keeps within ``budget``, in order: each one that
    fits what those kept before it left (a large one left out does not keep
    a small one after it out); and those left out."""
    kept: list[T] = []
    left: list[T] = []
    used = 0
    for item in items:
        took = size(item)
        if used + took <= budget:
            used += took
            kept.append(item)
        else:
            left.append(item)
    return kept, left


def card_bytes(card: EntityCard) -> int:
    """What an entity card takes in an answer: its lists' text (an alias twice,
    as a name and as a claim), a fixed cost per item and the ids of the
    memories mentioning it."""
    lists: tuple[Sequence[object], ...] = (
        card.attributes,
        card.relations,
        card.aliases,
        card.merged,
    )
    return (
        ITEM_BYTES
        + _text(card.entity)
        + sum(ITEM_BYTES + _text(item) for items in lists for item in items)
        + sum(len(a.alias.encode()) for a in card.aliases)
        + ID_BYTES * len(card.mentioned_by)
    )


def text_bytes(value: object) -> int:
    """What an item of plain fields takes in an answer (a history entry): its
    UTF-8 text and its fixed cost."""
    return ITEM_BYTES + _text(value)
