"""Supersede chains an archive holds as a release before forget took a memory
out of its chain left them (workspace migrations 0051, 0054_successor_chain
and 0053_revived_claims; docs/export.md, "Import").

Such a release kept a memory's link to a successor that was forgotten later:
Lyon superseded by Paris, Paris by Nice, Paris forgotten, and Lyon still
naming Paris. The service now never holds that: the forgotten memory leaves
the chain (Lyon is replaced by Nice), and a memory left with no successor is
current again, stating the claims, relations and aliases its supersede had
retired. The import holds such records as the service would, rather than a
memory that reads as current yet is refused every change as superseded and
states nothing. Only memories forgotten in the source count: a tombstone the
import makes of a member's private memory (archive_plan.select) is one the
source's members could not see, and stays the successor it was."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from recallatron import errors

Record = dict[str, Any]
# A record and where it came from ("memories.jsonl line 12").
Placed = tuple[str, Record]
# The statements a supersede retires, by the record files that hold them.
_STATEMENTS = ("attribute_claims", "relation_claims", "aliases")


def _live_successors(forgotten: dict[str, Record]) -> dict[str, str | None]:
    """For each forgotten memory, the first memory along its chain that is
    not forgotten (None: none). Each chain is walked once (what a walk finds
    is kept for every memory it passed), so a long chain costs its length."""
    found: dict[str, str | None] = {}
    for start in forgotten:
        path: dict[str, None] = {}  # the walk's memories, in order
        at: str | None = start
        while at in forgotten and at not in found and at not in path:
            path[at] = None
            at = forgotten[at]["superseded_by"]
        # A circle of forgotten memories (no write makes one) leads to none.
        end: str | None = None if at in forgotten else at
        if at is not None and at in found:
            end = found[at]
        for passed in path:
            found[passed] = end
    return found


def take_out_forgotten(rows: dict[str, list[Record]]) -> dict[str, list[Record]]:
    """``rows`` (records by file) with every memory not forgotten whose
    successor is forgotten replaced by that successor's first live successor,
    and one left with none revived: its statements retired by its latest
    supersede (at that revision's time, as the supersede's transaction
    retired them) stated again. New lists and records; ``rows`` is unchanged."""
    memories = rows.get("memories", [])
    forgotten = {m["id"]: m for m in memories if m["forgotten_at"] is not None}
    if not forgotten:
        return rows
    live = _live_successors(forgotten)
    changed: dict[str, str | None] = {
        # A chain leading round to the memory itself (no write makes one) leaves none.
        m["id"]: None if live[m["superseded_by"]] == m["id"] else live[m["superseded_by"]]
        for m in memories
        if m["forgotten_at"] is None and m["superseded_by"] in forgotten
    }
    if not changed:
        return rows
    out = dict(rows)
    out["memories"] = [
        {**m, "superseded_by": changed[m["id"]]} if m["id"] in changed else m for m in memories
    ]
    revived = {memory_id for memory_id, successor in changed.items() if successor is None}
    superseded_at: dict[str, datetime] = {}
    for r in rows.get("revisions", []):
        if r["memory_id"] in revived and r["action"] == "supersede":
            at = datetime.fromisoformat(r["changed_at"])
            superseded_at[r["memory_id"]] = max(at, superseded_at.get(r["memory_id"], at))

    def retired_by_supersede(record: Record) -> bool:
        at = superseded_at.get(record["memory_id"])
        retired = record["retired_at"]
        return at is not None and retired is not None and datetime.fromisoformat(retired) == at

    for kind in _STATEMENTS:
        out[kind] = [
            {**r, "retired_at": None} if retired_by_supersede(r) else r for r in rows.get(kind, [])
        ]
    return out


def check_chains(memories: list[Placed]) -> None:
    """No supersede chain leads back to a memory it passed: every write
    names a newer memory as the successor (a forget passes the link on to a
    newer one still), so only an edited archive holds a circle, which would
    leave no memory of it current and make a forget in the copy fail.
    Refused naming the first memory of the circle in the file."""
    successor = {r["id"]: r["superseded_by"] for _, r in memories}
    on_circle: set[str] = set()
    done: set[str] = set()
    for _, record in memories:
        path: dict[str, int] = {}  # the walk's memories, by their step
        at: str | None = record["id"]
        while at is not None and at not in done and at not in path:
            path[at] = len(path)
            at = successor.get(at)
        if at is not None and at in path:
            on_circle.update(m for m, step in path.items() if step >= path[at])
        done.update(path)
    for place, record in memories:
        if record["id"] in on_circle:
            raise errors.InvalidArgument(
                f"{place}: superseded_by",
                "names the memory itself"
                if record["superseded_by"] == record["id"]
                else "leads back to this memory: a supersede chain never returns to a memory",
            )
