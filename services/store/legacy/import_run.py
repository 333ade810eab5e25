"""One migration run's writing: its batches of history entries, the memories
of entity records (stating their claims, superseded as the old graph was) and
the memories of curated items, each batch one transaction with its rows and
ledger entries, counted in the report once committed."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg

from services.store.domain.graph_rules import name_key
from services.store.infrastructure.db import Caller, caller_transaction
from services.store.legacy import plan
from services.store.legacy import queries as q
from services.store.legacy.batching import bounded_batches, text_bytes
from services.store.legacy.oldgraph import Graph
from services.store.legacy.oldstore import OldStoreError, SqliteStore
from services.store.legacy.report import Report, Section


def columns(rows: Sequence[Any], *fields: str) -> list[list[Any]]:
    """One list per field of ``rows``: the arrays an unnest insert takes."""
    return [[getattr(r, f) for r in rows] for f in fields]


Claim = plan.AttributeRow | plan.RelationRow


def claim_columns(
    claims: Sequence[tuple[plan.RecordRow, Claim]], new_id: Callable[[str], str]
) -> list[list[Any]]:
    """The arrays a claim insert takes: each claim's id and its record's
    memory, its own three columns (entities by ``new_id`` of their old ids),
    then those every claim takes from its record: valid time and confidence,
    stated at the record's time, retired with it."""
    own = [c.own_columns(new_id) for _, c in claims]
    return [
        [c.id for _, c in claims],
        [r.id for r, _ in claims],
        *([row[i] for row in own] for i in range(3)),
        [r.valid_from for r, _ in claims],
        [r.valid_until for r, _ in claims],
        [r.confidence for r, _ in claims],
        [r.created_at for r, _ in claims],
        [r.supersession.at if r.supersession is not None else None for r, _ in claims],
    ]


def _memory_bytes(row: plan.MemoryRow | plan.RecordRow) -> int:
    """What a memory weighs in a batch: its title and body."""
    return text_bytes(row.title, row.body)


# A supersede patch appended after its record was imported: a rerun does not
# revise what an earlier run imported (docs/migration.md).
NOT_REVISED = "the record was imported before this patch (a rerun does not revise it)"


@dataclass(frozen=True)
class BatchDone:
    number: int
    source: str  # "turn", "entity_record" or "memory_item"
    rows: int
    imported: int
    dry_run: bool


class ImportRun:
    """One run's state: the report it fills and where it writes."""

    def __init__(
        self,
        report: Report,
        pool: Any,
        caller: Caller,
        ids: plan.Ids,
        dry_run: bool,
        batch_size: int,
        on_batch: Callable[[BatchDone], None] | None,
    ) -> None:
        self.report = report
        self.pool = pool
        self.caller = caller
        self.ids = ids
        self.owner = caller.member_id
        self.dry_run = dry_run
        self.batch_size = batch_size
        self.on_batch = on_batch
        # Entity rows (and typed ones) the batch in flight made.
        self._made = 0
        self._typed = 0

    def _present(
        self, conn: psycopg.Connection, source: str, source_ids: Sequence[str]
    ) -> set[str]:
        rows = conn.execute(q.LEDGER_PRESENT, (self.owner, source, list(source_ids)))
        return {r[0] for r in rows}

    def _batch_done(self, source: str, rows: int, imported: int) -> None:
        self.report.batches += 1
        if self.on_batch is not None:
            done = BatchDone(self.report.batches, source, rows, imported, self.dry_run)
            self.on_batch(done)

    # -- turns -> history entries ----------------------------------------------

    def turns(self, sqlite: SqliteStore) -> None:
        section = self.report.turns
        for batch in sqlite.turn_batches(self.batch_size, plan.MAX_BATCH_BYTES):
            section.read += len(batch)
            rows: list[plan.HistoryRow] = []
            for turn in batch:
                planned = plan.plan_turn(turn, self.ids)
                if isinstance(planned, str):
                    section.skipped[planned] += 1
                else:
                    rows.append(planned)
            imported = self._write_turns(rows)
            self._batch_done("turn", len(batch), imported)

    def _write_turns(self, rows: list[plan.HistoryRow]) -> int:
        section = self.report.turns
        if not rows:
            return 0
        with caller_transaction(self.pool, self.caller) as conn:
            present = self._present(conn, "turn", [r.source_id for r in rows])
            self._same_as_imported(conn, [r for r in rows if r.source_id in present])
            new = [r for r in rows if r.source_id not in present]
            if self.dry_run or not new:
                section.already_present += len(present)
                section.imported += len(new)
                return len(new)
            inserted = conn.execute(
                q.INSERT_HISTORY,
                (self.owner, *columns(new, "id", "chat_id", "role", "text", "occurred_at")),
            ).fetchall()
            self._ledger(conn, "turn", new)
        # Counted once committed, so an interrupted batch is not reported.
        section.imported += len(inserted)
        section.already_present += len(present) + len(new) - len(inserted)
        return len(inserted)

    @staticmethod
    def _same_as_imported(conn: psycopg.Connection, rows: list[plan.HistoryRow]) -> None:
        """The old ledger is append-only, so a turn imported earlier reads the
        same on every rerun. One that does not is another old store's (another
        device's), whose rows share the first's ids: taken as already
        present, none of them would come over."""
        if not rows:
            return
        kept = {
            r[0]: tuple(r[1:]) for r in conn.execute(q.HISTORY_AS_IMPORTED, ([r.id for r in rows],))
        }
        for r in rows:
            was = kept.get(r.id)
            if was is not None and was != (r.chat_id, r.role, r.text, r.occurred_at):
                raise OldStoreError(
                    f"--sqlite: turn {r.source_id} is not the turn of that id imported earlier "
                    "for this owner: this is another old store than the one migrated for them "
                    "before, whose rows its rows would be taken for; nothing more was imported "
                    "(one old store per owner)"
                )

    # -- entity records, memory items -----------------------------------------

    def graph_and_items(self, sqlite: SqliteStore, graph: Graph) -> None:
        """Plans everything first (the entity rows and the records' times
        depend on the items), then writes the records' memories, replacements
        before what they supersede, then the items."""
        report = self.report
        items = sqlite.memory_items()
        rows: list[plan.MemoryRow] = []
        for item in items:
            report.memory_items.read += 1
            report.mentions.read += len(item.entity_ids)
            planned = plan.plan_item(item, self.ids, graph)
            if isinstance(planned, str):
                report.memory_items.skipped[planned] += 1
                report.mentions.skipped["memory item not imported"] += len(item.entity_ids)
            else:
                rows.append(planned)
                if planned.mapped_from:
                    report.kinds_mapped[f"{planned.mapped_from} -> {planned.kind}"] += 1
        records, skipped = plan.plan_records(graph, self.ids, plan.item_mention_times(rows))
        self._account_skipped_records(graph, skipped)
        entities = plan.entity_rows(rows, records, graph, self.ids)
        self._account_entities(graph, entities)
        size, max_bytes = self.batch_size, plan.MAX_BATCH_BYTES
        for record_batch in bounded_batches(records, size, max_bytes, _memory_bytes):
            imported = self._write_records(record_batch, entities)
            self._batch_done("entity_record", len(record_batch), imported)
        for batch in bounded_batches(rows, size, max_bytes, _memory_bytes):
            imported = self._write_items(batch, entities)
            self._batch_done("memory_item", len(batch), imported)

    def _account_skipped_records(self, graph: Graph, skipped: dict[str, str]) -> None:
        report = self.report
        report.records.read = len(graph.entities)
        for old_id, why in skipped.items():
            entity = graph.entities[old_id]
            report.records.skipped[why] += 1
            attributes, edges = plan.property_counts(entity)
            report.attributes.read += attributes
            report.attributes.skipped["record not imported"] += attributes
            report.relations.read += edges
            report.relations.skipped["record not imported"] += edges
            if entity.superseded_by:
                report.supersessions.read += 1
                report.supersessions.skipped["record not imported"] += 1

    def _account_entities(self, graph: Graph, used: dict[str, plan.EntityRow]) -> None:
        section = self.report.entities
        section.read = len(graph.entities)
        with caller_transaction(self.pool, self.caller) as conn:
            present = self._present(conn, "entity", list(used))
        section.already_present = len(present)
        if self.dry_run:
            section.imported = len(used) - len(present)
            self.report.entities_typed = sum(
                1 for k, e in used.items() if k not in present and e.type
            )
        for old_id, entity in graph.entities.items():
            if old_id in used:
                continue
            if entity.superseded_by:
                section.skipped["superseded (its replacement is used)"] += 1
            else:
                section.skipped["not mentioned by an imported memory"] += 1

    def _insert_entities(self, conn: psycopg.Connection, entities: list[plan.EntityRow]) -> None:
        """The entity rows a batch needs that no earlier batch made."""
        made = conn.execute(
            q.INSERT_ENTITIES,
            (
                *columns(entities, "id", "name", "type", "created_at"),
                [name_key(e.name) for e in entities],
            ),
        ).fetchall()
        self._ledger(conn, "entity", entities)
        self._made += len(made)
        self._typed += sum(1 for r in made if r[1])

    # -- entity records -> memories stating claims -----------------------------

    def _write_records(
        self, rows: list[plan.RecordRow], entities: dict[str, plan.EntityRow]
    ) -> int:
        self._made = self._typed = 0
        with caller_transaction(self.pool, self.caller) as conn:
            present = self._present(conn, "entity_record", [r.source_id for r in rows])
            new = [r for r in rows if r.source_id not in present]
            patched = [r.id for r in rows if r.source_id in present and r.supersession]
            superseded = (
                {row[0] for row in conn.execute(q.SUPERSEDED_AMONG, (patched,))}
                if patched
                else set()
            )
            inserted: list[Any] = []
            if new and not self.dry_run:
                inserted = self._insert_records(conn, new, entities)
        # Counted once committed, so an interrupted batch is not reported.
        report = self.report
        for r in rows:
            fresh = r.source_id not in present
            report.attributes.read += r.attributes_read
            report.attributes.skipped.update(r.attributes_skipped)
            report.relations.read += r.relations_read
            report.relations.skipped.update(r.relations_skipped)
            if fresh:
                report.attributes.imported += len(r.attributes)
                report.relations.imported += len(r.relations)
                report.record_mentions += len(r.mentions)
                if r.supersession is not None:
                    report.attributes_retired += len(r.attributes)
                    report.relations_retired += len(r.relations)
            else:
                report.attributes.already_present += len(r.attributes)
                report.relations.already_present += len(r.relations)
            if r.supersession is not None:
                report.supersessions.read += 1
                if fresh:
                    report.supersessions.imported += 1
                elif r.id in superseded:
                    report.supersessions.already_present += 1
                else:
                    report.supersessions.skipped[NOT_REVISED] += 1
            elif r.supersession_skipped is not None:
                report.supersessions.read += 1
                report.supersessions.skipped[r.supersession_skipped] += 1
        imported = len(new) if self.dry_run else len(inserted)
        report.records.already_present += len(present)
        report.records.imported += imported
        report.records.already_present += 0 if self.dry_run else len(new) - len(inserted)
        report.entities.imported += self._made
        report.entities_typed += self._typed
        return imported

    def _insert_records(
        self,
        conn: psycopg.Connection,
        new: list[plan.RecordRow],
        entities: dict[str, plan.EntityRow],
    ) -> list[Any]:
        inserted = conn.execute(
            q.INSERT_MEMORIES,
            (
                self.owner,
                [r.id for r in new],
                [plan.RECORD_KIND] * len(new),
                *columns(new, "title", "body", "confidence"),
                # The old graph knew no audience: the owner's alone.
                [self.owner] * len(new),
                *columns(new, "created_at", "updated_at"),
            ),
        ).fetchall()
        needed = dict.fromkeys(old for r in new for old in r.mentions)
        self._insert_entities(conn, [entities[o] for o in needed])
        # Every entity a claim names is mentioned: visibility rests on it.
        pairs = [(r.id, entities[o].id) for r in new for o in r.mentions]
        self._mentions(conn, pairs)
        # Each kind of claim's insert, and its claims with their records.
        claims: dict[str, list[tuple[plan.RecordRow, Claim]]] = {
            q.INSERT_ATTRIBUTE_CLAIMS: [(r, a) for r in new for a in r.attributes],
            q.INSERT_RELATION_CLAIMS: [(r, x) for r in new for x in r.relations],
        }
        for insert, of_kind in claims.items():
            conn.execute(insert, claim_columns(of_kind, lambda old: entities[old].id))
        superseded = [r for r in new if r.supersession is not None]
        if superseded:
            done = conn.execute(
                q.SUPERSEDE,
                (
                    [r.id for r in superseded],
                    [r.supersession.by_memory_id for r in superseded if r.supersession],
                ),
            ).fetchall()
            revision = {str(row[0]): int(row[1]) for row in done}
            at = {r.id: r.supersession.at for r in superseded if r.supersession}
            conn.execute(
                q.INSERT_SUPERSEDE_REVISIONS,
                (
                    self.owner,
                    plan.SUPERSEDE_REASON,
                    list(revision),
                    list(revision.values()),
                    [at[m] for m in revision],
                ),
            )
        self._audit(conn, "entity_record", new)
        self._ledger(conn, "entity_record", new)
        return inserted

    # -- memory items -> memories, edges -> mentions ---------------------------

    def _write_items(self, rows: list[plan.MemoryRow], entities: dict[str, plan.EntityRow]) -> int:
        self._made = self._typed = 0
        mentions = Section()
        redirected = 0
        with caller_transaction(self.pool, self.caller) as conn:
            present = self._present(conn, "memory_item", [r.source_id for r in rows])
            new = [r for r in rows if r.source_id not in present]
            pairs: list[tuple[str, str]] = []
            needed: dict[str, None] = {}
            for r in rows:
                targets: list[str] = []
                for m in r.mentions:
                    if m.resolved_old_id is None:
                        mentions.skipped[m.how] += 1
                    elif m.resolved_old_id in targets:
                        mentions.skipped["same entity as another edge, after supersession"] += 1
                    else:
                        targets.append(m.resolved_old_id)
                        if r.source_id in present:
                            mentions.already_present += 1
                        else:
                            mentions.imported += 1
                            redirected += m.how != "self"
                if r.source_id not in present:
                    pairs.extend((r.id, entities[old].id) for old in targets)
                    needed.update(dict.fromkeys(targets))
            inserted: list[Any] = []
            if new and not self.dry_run:
                inserted = self._insert_items(conn, new, [entities[o] for o in needed], pairs)
        # Counted once committed, so an interrupted batch is not reported.
        report = self.report
        report.memory_items.already_present += len(present)
        report.memory_items.imported += len(new) if self.dry_run else len(inserted)
        report.memory_items.already_present += 0 if self.dry_run else len(new) - len(inserted)
        report.entities.imported += self._made
        report.entities_typed += self._typed
        report.mentions.imported += mentions.imported
        report.mentions.already_present += mentions.already_present
        report.mentions.skipped.update(mentions.skipped)
        report.mentions_redirected += redirected
        return len(new) if self.dry_run else len(inserted)

    def _insert_items(
        self,
        conn: psycopg.Connection,
        new: list[plan.MemoryRow],
        entities: list[plan.EntityRow],
        pairs: list[tuple[str, str]],
    ) -> list[Any]:
        inserted = conn.execute(
            q.INSERT_MEMORIES,
            (
                self.owner,
                *columns(new, "id", "kind", "title", "body", "confidence"),
                [self.owner if r.owner_only else None for r in new],
                *columns(new, "created_at", "updated_at"),
            ),
        ).fetchall()
        self._insert_entities(conn, entities)
        self._mentions(conn, pairs)
        self._audit(conn, "memory_item", new)
        self._ledger(conn, "memory_item", new)
        return inserted

    # -- the rows every kind of batch writes -------------------------------------

    def _ledger(self, conn: psycopg.Connection, source: str, rows: Sequence[Any]) -> None:
        """Which old row each new one came from: a rerun finds them present."""
        conn.execute(q.INSERT_LEDGER, (self.owner, source, *columns(rows, "source_id", "id")))

    def _audit(self, conn: psycopg.Connection, source: str, rows: Sequence[Any]) -> None:
        conn.execute(q.INSERT_AUDIT, (self.owner, source, *columns(rows, "id", "source_id")))

    @staticmethod
    def _mentions(conn: psycopg.Connection, pairs: Sequence[tuple[str, str]]) -> None:
        conn.execute(q.INSERT_MENTIONS, ([p[0] for p in pairs], [p[1] for p in pairs]))
