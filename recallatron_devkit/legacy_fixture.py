"""A realistic old store, generated deterministically from a seed: the SQLite
file (turns over many chats and sessions with their FTS5 index, session
digests, curated memory items in varied statuses, memory-to-entity edges) and
graph.jsonl (entity records with sparse relations and properties of every
shape, later restatements, confirm and supersede patches, an orphan patch and
a torn last line).

Alongside the files it returns what a correct migration must produce, worked
out from the generator's own bookkeeping rather than by reading the files,
so that tests compare the importer against an independent answer
(`legacy_truth`). What the store is made of is in `legacy_corpus`.

    python -m recallatron_devkit.legacy_fixture OUT_DIR [--seed N] [--turns N] [--items N]
        [--entities N]
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from recallatron_devkit.legacy_corpus import (
    ASSISTANT_LINES,
    ENTITY_TYPES,
    FIRST,
    KIND_TO_NEW,
    LAST,
    NEEDLES,
    OLD_KINDS,
    ORGS,
    PLACES,
    PROJECTS,
    RELATION_VERBS,
    SESSION_GAP,
    START,
    STATUS_WEIGHTS,
    THINGS,
    TOOLS,
    USER_LINES,
    VARIED_PROPERTIES,
    VERBS,
    WHEN,
    size_problem,
)
from recallatron_devkit.legacy_truth import Truth

SCHEMA = """
CREATE TABLE turns (
    id       INTEGER PRIMARY KEY,
    chat_id  TEXT NOT NULL,
    role     TEXT NOT NULL,
    text     TEXT NOT NULL,
    ts       TEXT NOT NULL
);
CREATE INDEX turns_chat_ts ON turns (chat_id, ts);
CREATE VIRTUAL TABLE turns_fts USING fts5 (text, content='turns', content_rowid='id');
CREATE TABLE session_digests (
    id          INTEGER PRIMARY KEY,
    chat_id     TEXT NOT NULL,
    started_at  TEXT NOT NULL,
    ended_at    TEXT NOT NULL,
    turn_count  INTEGER NOT NULL,
    digest      TEXT NOT NULL,
    created_at  TEXT NOT NULL
);
CREATE TABLE memory_items (
    id            INTEGER PRIMARY KEY,
    kind          TEXT NOT NULL,
    title         TEXT NOT NULL,
    body          TEXT NOT NULL,
    confidence    REAL NOT NULL,
    status        TEXT NOT NULL,
    scope         TEXT,
    source_chat_id TEXT,
    created_at    TEXT NOT NULL,
    updated_at    TEXT,
    confirmed_at  TEXT
);
CREATE TABLE memory_item_entities (
    memory_id  INTEGER NOT NULL REFERENCES memory_items (id),
    entity_id  TEXT NOT NULL,
    PRIMARY KEY (memory_id, entity_id)
);
"""


def iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


class _Gen:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.truth = Truth(seed=seed)

    def person(self) -> str:
        return f"{self.rng.choice(FIRST)} {self.rng.choice(LAST)}"

    def fill(self, template: str) -> str:
        r = self.rng
        return template.format(
            person=self.person() if r.random() < 0.5 else r.choice(FIRST),
            project=r.choice(PROJECTS),
            place=r.choice(PLACES),
            org=r.choice(ORGS),
            tool=r.choice(TOOLS),
            verb=r.choice(VERBS),
            thing=r.choice(THINGS),
            when=r.choice(WHEN),
        )

    # -- the conversation ledger ---------------------------------------------

    def turns(
        self, n_turns: int, n_chats: int
    ) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
        r = self.rng
        chats = [f"tg-{1000 + i}" for i in range(n_chats - 2)] + ["cli-main", "desktop"]
        clocks = {c: START + timedelta(hours=r.randint(0, 72)) for c in chats}
        turns: list[tuple[Any, ...]] = []
        digests: list[tuple[Any, ...]] = []
        # Needles clear of the first and last 200 turns, or what a small ledger spares.
        margin = min(200, (n_turns - len(NEEDLES)) // 2)
        needle_at = set(r.sample(range(margin, n_turns - margin), len(NEEDLES)))
        needles = iter(NEEDLES)
        while len(turns) < n_turns:
            chat = r.choice(chats)
            # A new session: more than two hours after the chat's last turn.
            t = clocks[chat] + SESSION_GAP + timedelta(minutes=r.randint(5, 60 * 24 * 6))
            started = t
            size = min(r.randint(4, 22), n_turns - len(turns))
            topic = r.choice(PROJECTS)
            for k in range(size):
                turn_id = len(turns) + 1
                if k:
                    t += timedelta(seconds=r.randint(20, 900))
                role = "user" if k % 2 == 0 else "assistant"
                if turn_id - 1 in needle_at:
                    word, text = next(needles)
                    self.truth.needles[word] = (turn_id, text)
                elif role == "assistant" and r.random() < 0.02:
                    # Tool-call placeholders: a turn with no text at all.
                    role, text = "tool", ""
                    self.truth.turns_empty += 1
                else:
                    lines = USER_LINES if role == "user" else ASSISTANT_LINES
                    text = " ".join(self.fill(r.choice(lines)) for _ in range(r.randint(1, 3)))
                turns.append((turn_id, chat, role, text, iso(t)))
            clocks[chat] = t
            digests.append(
                (
                    len(digests) + 1,
                    chat,
                    iso(started),
                    iso(t),
                    size,
                    f"Session about the {topic}: {size} turns. " + self.fill(r.choice(USER_LINES)),
                    iso(t + timedelta(minutes=1)),
                )
            )
        self.truth.turns = len(turns)
        self.truth.history_entries = len(turns) - self.truth.turns_empty
        self.truth.chats = len({t[1] for t in turns})
        self.truth.sessions = self.truth.session_digests = len(digests)
        return turns, digests

    # -- the graph -------------------------------------------------------------

    def graph(self, n_entities: int) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
        """Lines of graph.jsonl, and the final record of every id."""
        r = self.rng
        lines: list[dict[str, Any]] = []
        final: dict[str, dict[str, Any]] = {}
        names_used: set[str] = set()
        spent: set[str] = set()  # kinds whose names ran out: no more redrawing

        def numbered(name: str) -> str:
            """name if it is free, else name with the least free number from 100."""
            k, free = 100, name
            while free in names_used:
                free, k = f"{name} {k}", k + 1
            names_used.add(free)
            return free

        def name_for(kind: str) -> str:
            name = ""
            for _ in range(1 if kind in spent else 1000):
                name = {
                    "person": self.person(),
                    "project": r.choice(PROJECTS).title(),
                    "place": r.choice(PLACES),
                    "organisation": r.choice(ORGS),
                    "tool": r.choice(TOOLS),
                }[kind]
                if kind != "person":
                    name = f"{name} {r.randint(2, 99)}" if name in names_used else name
                if name not in names_used:
                    names_used.add(name)
                    return name
            # The lists are spent (a large graph): number the last name drawn.
            spent.add(kind)
            return numbered(name)

        def record(eid: str, kind: str, name: str, t: datetime) -> dict[str, Any]:
            rec: dict[str, Any] = {
                "id": eid,
                "name": name,
                "type": kind,
                "properties": {},
                "source": f"chat:{r.choice(['tg-1000', 'cli-main', 'desktop'])}",
                "confidence": round(r.uniform(0.5, 0.9), 2),
                "valid_from": iso(t),
                "valid_until": None,
                "superseded_by": None,
            }
            if kind == "person" and r.random() < 0.5:
                roles = ["designer", "engineer", "accountant", "coach"]
                rec["properties"]["role"] = r.choice(roles)
            return rec

        base = n_entities - n_entities // 10
        ids = [f"ent_{i:04d}" for i in range(1, base + 1)]
        for i, eid in enumerate(ids):
            kind = ENTITY_TYPES[i % len(ENTITY_TYPES)]
            rec = record(eid, kind, name_for(kind), START + timedelta(hours=7 * i))
            lines.append(rec)
            final[eid] = rec
        # Sparse relations between existing entities.
        for eid in ids:
            rec = final[eid]
            if r.random() < 0.45:
                verbs = RELATION_VERBS[rec["type"]]
                rec["properties"]["relations"] = {
                    v: sorted(r.sample(ids, r.randint(1, 2))) for v in r.sample(verbs, 1)
                }
        # Restatements: a full record appended again for an id (later wins).
        for eid in r.sample(ids, min(6, len(ids))):
            again = json.loads(json.dumps(final[eid]))
            again["properties"]["note"] = "restated"
            again["properties"].pop("relations", None)
            lines.append(again)
            final[eid] = again
            self.truth.entities_restated += 1
        # Confirmations.
        for eid in r.sample(ids, len(ids) * 2 // 5):
            c = round(r.uniform(0.9, 1.0), 2)
            lines.append({"patch": "confirm", "id": eid, "at": iso(START), "confidence": c})
            self.truth.confirm_patches += 1
            self.truth.entity_confidence[eid] = c
        # Duplicates resolved later: a replacement record, then a supersede
        # patch; a few replacements are themselves superseded again (chains).
        replaced = r.sample([e for e in ids if final[e]["type"] == "person"], n_entities // 10)
        replacements: list[str] = []
        for k, old in enumerate(replaced):
            new_id = f"ent_{base + k + 1:04d}"
            # The fuller name the duplicate turned out to mean.
            first = final[old]["name"].split()[0]
            name = f"{first} {LAST[k % len(LAST)]}"
            for _ in range(1000):
                if name not in names_used:
                    break
                name = f"{first} {r.choice('ABCDEFGHJKLMNPRSTVW')}. {r.choice(LAST)}"
            name = numbered(name)
            rec = record(new_id, "person", name, START)
            rec["valid_from"] = iso(START + timedelta(days=120 + k))
            lines.append(rec)
            final[new_id] = rec
            replacements.append(new_id)

        def supersede(old: str, new_id: str, day: int) -> None:
            at = iso(START + timedelta(days=day))
            lines.append({"patch": "supersede", "id": old, "superseded_by": new_id, "at": at})
            final[old]["superseded_by"] = new_id
            self.truth.superseded_at[old] = at
            self.truth.supersede_patches += 1

        for old, new_id in zip(replaced, replacements, strict=True):
            supersede(old, new_id, 121)
        chains = min(3, len(replacements) // 2)
        for k in range(chains):
            supersede(replacements[k], replacements[k + chains], 150)
        # A patch for an id that never had a record.
        lines.append({"patch": "confirm", "id": "ent_9001", "at": iso(START)})
        self.truth.orphan_patches += 1
        self.truth.confirm_patches += 1
        self.truth.entity_records = sum(1 for line in lines if "patch" not in line)
        self.truth.entities = len(final)
        self.truth.entities_superseded = sum(1 for f in final.values() if f["superseded_by"])
        self.truth.entity_edges = sum(
            len(ts) for f in final.values() for ts in f["properties"].get("relations", {}).values()
        )
        for eid in final:
            end = eid
            while final[end]["superseded_by"]:
                end = final[end]["superseded_by"]
            self.truth.final_entity[eid] = end
            self.truth.entity_names[eid] = final[eid]["name"]
        # Planted last, drawing nothing from the generator's random stream, so
        # every other figure stays as it was.
        varied = next(e for e in ids if final[e]["type"] == "organisation")
        final[varied]["properties"].update({k: v for k, v, _, _ in VARIED_PROPERTIES})
        self.truth.varied_entity = varied
        self._claims(final)
        return lines, final

    def _claims(self, final: dict[str, dict[str, Any]]) -> None:
        t = self.truth
        expected = {k: (name, text) for k, _, name, text in VARIED_PROPERTIES}
        for eid, rec in final.items():
            t.record_memories += 1
            t.entity_confidence.setdefault(eid, rec["confidence"])
            t.entity_types[eid] = rec["type"]
            t.record_valid_from[eid] = rec["valid_from"]
            retired = rec["superseded_by"] is not None
            t.supersessions += retired
            if retired:
                t.superseded_by[eid] = rec["superseded_by"]
            subject = t.final_entity[eid]
            attributes: list[tuple[str, str]] = []
            for key, value in rec["properties"].items():
                if key == "relations":
                    continue
                name, text = expected.get(key, (key, value))
                if name is None:
                    t.attribute_claims_skipped[text] = t.attribute_claims_skipped.get(text, 0) + 1
                    continue
                attributes.append((name, text))
            t.entity_attributes[eid] = attributes
            t.attribute_claims += len(attributes)
            t.attribute_claims_retired += len(attributes) if retired else 0
            named = {subject}
            for verb, targets in rec["properties"].get("relations", {}).items():
                for target in targets:
                    t.relations.append((eid, subject, verb, t.final_entity[target]))
                    named.add(t.final_entity[target])
                    t.relation_claims += 1
                    t.relation_claims_retired += retired
            t.record_mentions += len(named)

    # -- curated memory items ---------------------------------------------------

    def items(
        self, n_items: int, entity_ids: list[str]
    ) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
        r = self.rng
        t = self.truth
        statuses = list(STATUS_WEIGHTS)
        weights = list(STATUS_WEIGHTS.values())
        superseded_olds = [e for e in entity_ids if t.final_entity[e] != e]
        items: list[tuple[Any, ...]] = []
        edges: list[tuple[Any, ...]] = []
        used_final: set[str] = set()
        for i in range(1, n_items + 1):
            status = r.choices(statuses, weights)[0]
            kind = r.choice(OLD_KINDS)
            created = START + timedelta(hours=r.randint(0, 24 * 200), minutes=r.randint(0, 59))
            updated = created + timedelta(days=r.randint(0, 40)) if r.random() < 0.6 else None
            body = " ".join(self.fill(r.choice(USER_LINES)) for _ in range(r.randint(1, 3)))
            title = f"{r.choice(VERBS).title()} {r.choice(THINGS)} for the {r.choice(PROJECTS)}"
            if i % 97 == 0:
                title = ""  # the old store allowed it; the body's first line stands in
            scope = "shared" if r.random() < 0.15 else None
            items.append(
                (
                    i,
                    kind,
                    title,
                    body,
                    round(r.uniform(0.55, 1.0), 2),
                    status,
                    scope,
                    r.choice(["tg-1000", "cli-main", "desktop"]),
                    iso(created),
                    iso(updated) if updated else None,
                    iso(created + timedelta(hours=1)) if status == "confirmed" else None,
                )
            )
            mentioned = set(r.sample(entity_ids, r.randint(0, 3)))
            if i % 9 == 0 and superseded_olds:
                mentioned.add(r.choice(superseded_olds))
            if i % 61 == 0 and superseded_olds:
                # The duplicate and its replacement both linked: one mention.
                old = r.choice(superseded_olds)
                mentioned |= {old, t.final_entity[old]}
            if i % 131 == 0:
                mentioned.add("ent_8888")  # no such record in the graph
            for eid in sorted(mentioned):
                edges.append((i, eid))
            t.edges += len(mentioned)
            if status != "confirmed":
                continue
            t.memories += 1
            t.memories_shared += scope is not None
            t.memories_titled_from_body += title == ""
            if kind in KIND_TO_NEW:
                key = f"{kind} -> {KIND_TO_NEW[kind]}"
                t.kinds_mapped[key] = t.kinds_mapped.get(key, 0) + 1
            finals: list[str] = []
            for eid in sorted(mentioned):
                if eid not in t.final_entity:
                    t.mentions_unknown_entity += 1
                    continue
                end = t.final_entity[eid]
                if end in finals:
                    t.mentions_same_after_supersession += 1
                    continue
                finals.append(end)
                t.mentions_redirected += end != eid
            t.mentions += len(finals)
            t.item_mentions[i] = finals
            used_final.update(finals)
        t.memory_items = len(items)
        t.statuses = {s: sum(1 for it in items if it[5] == s) for s in statuses}
        # The record memories mention every final entity besides.
        used_final.update(t.final_entity.values())
        t.entities_created = len(used_final)
        t.entities_typed = len(used_final)
        return items, edges


def generate(
    out_dir: Path, seed: int = 7, turns: int = 4_200, items: int = 523, entities: int = 300
) -> Truth:
    """Writes old-store.sqlite and graph.jsonl into out_dir (replacing them).
    Sizes below legacy_corpus.LEAST raise ValueError before anything is written."""
    problem = size_problem(turns, items, entities)
    if problem:
        raise ValueError(problem)
    out_dir.mkdir(parents=True, exist_ok=True)
    gen = _Gen(seed)
    turn_rows, digests = gen.turns(turns, n_chats=9)
    graph_lines, final = gen.graph(entities)
    item_rows, edges = gen.items(items, sorted(final))

    db_path = out_dir / "old-store.sqlite"
    db_path.unlink(missing_ok=True)
    conn = sqlite3.connect(db_path)
    with conn:
        conn.executescript(SCHEMA)
        conn.executemany("INSERT INTO turns VALUES (?, ?, ?, ?, ?)", turn_rows)
        conn.execute("INSERT INTO turns_fts (turns_fts) VALUES ('rebuild')")
        conn.executemany("INSERT INTO session_digests VALUES (?, ?, ?, ?, ?, ?, ?)", digests)
        conn.executemany(
            "INSERT INTO memory_items VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", item_rows
        )
        conn.executemany("INSERT INTO memory_item_entities VALUES (?, ?)", edges)
    conn.close()

    with (out_dir / "graph.jsonl").open("w") as f:
        for line in graph_lines:
            f.write(json.dumps(line) + "\n")
        # The write that was cut off when the old process died.
        f.write('{"id": "ent_0007", "patch": "confi')
    gen.truth.malformed_lines = 1
    return gen.truth


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--turns", type=int, default=4_200)
    parser.add_argument("--items", type=int, default=523)
    parser.add_argument("--entities", type=int, default=300)
    parser.add_argument("--truth", action="store_true", help="print every expected figure")
    args = parser.parse_args(argv)
    problem = size_problem(args.turns, args.items, args.entities, prefix="--")
    if problem:
        parser.error(problem)
    truth = generate(args.out_dir, args.seed, args.turns, args.items, args.entities)
    data = truth.to_json()
    if not args.truth:
        for key in (
            "needles",
            "final_entity",
            "entity_names",
            "item_mentions",
            "entity_confidence",
            "entity_types",
            "entity_attributes",
            "relations",
            "superseded_by",
            "superseded_at",
            "record_valid_from",
        ):
            data.pop(key)
    print(json.dumps(data, indent=2))
    print(f"wrote {args.out_dir / 'old-store.sqlite'} and {args.out_dir / 'graph.jsonl'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
