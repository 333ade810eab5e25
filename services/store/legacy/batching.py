"""Cutting the migration's rows into batches bounded by rows and by bytes."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

Row = TypeVar("Row")

# A batch's text (turns' chat ids, roles and texts; memories' titles and
# bodies) ends here too, whatever its row count: each column goes to Postgres
# as one array parameter, which may not pass 1 GB (escaping may double text),
# and a batch is held in memory whole.
MAX_BATCH_BYTES = 64 << 20


def text_bytes(*texts: str) -> int:
    """The UTF-8 size of ``texts``, as they go to Postgres."""
    return sum(len(t.encode("utf-8", errors="replace")) for t in texts)


def bounded_batches(
    rows: Iterable[Row], size: int, max_bytes: int, weight: Callable[[Row], int]
) -> Iterator[list[Row]]:
    """``rows`` in order, at most ``size`` a batch and, past a batch's first
    row, at most ``max_bytes`` of ``weight``: a batch's texts go to Postgres
    as one array parameter each, which may not pass 1 GB, whatever the row
    count asked for."""
    batch: list[Row] = []
    held = 0
    for row in rows:
        w = weight(row)
        if batch and (len(batch) >= size or held + w > max_bytes):
            yield batch
            batch, held = [], 0
        batch.append(row)
        held += w
    if batch:
        yield batch
