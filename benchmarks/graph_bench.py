"""Graph latency: `lookup` and 2-hop `neighbors` through the gateway (not part
of `make test`):

    python -m benchmarks.graph_bench --scale 1 --duration 20 [--json]
    python -m benchmarks.graph_bench --scale 10 --duration 20 [--json]

Starts its own stack (embedded Postgres in a fresh state directory, every
service a process on loopback, no embedding job: the graph does not read
vectors), creates a workspace with --members members, and seeds it in SQL as
the database owner (the API would take an hour at scale 10; tests/integration
test_graph*.py prove the API writes the same rows). At scale 1:

  10,000 entities (types person, project, team), each with a profile memory
  stating 10 attribute claims about it (100,000 claims) and mentioning it;
  5,000 relation memories, each stating 10 relation claims (50,000) between
  random entities, a tenth of them touching one of 10 hubs, and mentioning
  every entity they name. Memories alternate between the workspace audience
  (60%) and one member's (40%), authors round robin, purpose assist. Ten
  thousand aliases ("E<n>") are stated by the profile memories.

Scale 10 multiplies every count by 10 (one hub then holds about 5,000
relations). Measured at concurrency 1, --duration seconds each, members in
turn: lookup of a random entity's name (visible or not to that member), by
part of a name (`partial`: a prefix, a typo, a name like none held),
neighbors hops=2 from a random entity the member may see, and the review page's
entity pairs for the owner (the window of its 1,000 newest memories); latency
per call in `recallatron load`'s HdrHistogram recorder."""

from __future__ import annotations

import argparse
import itertools
import json
import random
import shlex
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg

import services
from recallatron.client import Client
from recallatron_devkit.load import models_dir
from recallatron_devkit.loadgen import Recorder, run_closed_loop
from recallatron_devkit.stack import Stack, own_config, running
from services.store.infrastructure.db import with_database

ATTRIBUTES_PER_ENTITY = 10
RELATIONS_PER_MEMORY = 10
HUBS = 10

# One statement per table, generated in Postgres (setseed makes it repeatable).
SEED_SQL = """
SELECT setseed(0.42);
CREATE TEMP TABLE members AS
    SELECT row_number() OVER () - 1 AS k, m::uuid AS id FROM unnest(%(members)s::text[]) m;
CREATE TEMP TABLE ents AS
    SELECT i, gen_random_uuid() AS id, 'Entity ' || i AS name,
           (ARRAY['person', 'project', 'team'])[1 + i %% 3] AS type
    FROM generate_series(1, %(entities)s) i;
INSERT INTO entity (id, name, type, name_key)
    SELECT id, name, type, lower(name) FROM ents;
-- Trust of memory n: the workspace for 6 of 10, else member n mod M.
CREATE TEMP TABLE profile AS
    SELECT e.i, e.id AS entity_id, gen_random_uuid() AS id,
           CASE WHEN e.i %% 10 < 6 THEN NULL
                ELSE (SELECT id FROM members WHERE k = e.i %% %(m)s) END AS audience,
           (SELECT id FROM members WHERE k = e.i %% %(m)s) AS author
    FROM ents e;
INSERT INTO memory (id, kind, title, body, confidence, origin, audience_member_id, purposes,
                    created_by)
    SELECT id, 'fact', 'Profile of Entity ' || i, 'What is known about Entity ' || i, 1, 'told',
           audience, '{assist}', author FROM profile;
INSERT INTO mention (memory_id, entity_id) SELECT id, entity_id FROM profile;
INSERT INTO attribute_claim (id, memory_id, entity_id, attribute, value, confidence)
    SELECT gen_random_uuid(), p.id, p.entity_id, 'attr_' || j, 'value ' || p.i || '.' || j, 0.9
    FROM profile p CROSS JOIN generate_series(1, %(per_entity)s) j;
INSERT INTO entity_alias (id, memory_id, entity_id, alias, alias_key)
    SELECT gen_random_uuid(), id, entity_id, 'E' || i, 'e' || i FROM profile;
CREATE TEMP TABLE relmem AS
    SELECT r, gen_random_uuid() AS id,
           CASE WHEN r %% 10 < 6 THEN NULL
                ELSE (SELECT id FROM members WHERE k = r %% %(m)s) END AS audience,
           (SELECT id FROM members WHERE k = r %% %(m)s) AS author
    FROM generate_series(1, %(relation_memories)s) r;
INSERT INTO memory (id, kind, title, body, confidence, origin, audience_member_id, purposes,
                    created_by)
    SELECT id, 'fact', 'Relations ' || r, 'Who works with whom, part ' || r, 1, 'told',
           audience, '{assist}', author FROM relmem;
CREATE TEMP TABLE rels AS
    SELECT gen_random_uuid() AS id, m.id AS memory_id,
           CASE WHEN random() < 0.1 THEN 1 + floor(random() * %(hubs)s)::int
                ELSE 1 + floor(random() * %(entities)s)::int END AS s,
           1 + floor(random() * %(entities)s)::int AS o,
           (ARRAY['works_with', 'reports_to', 'member_of', 'owns'])[1 + floor(random() * 4)::int]
               AS predicate
    FROM relmem m CROSS JOIN generate_series(1, %(per_memory)s) j;
INSERT INTO relation_claim (id, memory_id, subject_id, predicate, object_id, confidence)
    SELECT r.id, r.memory_id, s.id, r.predicate, o.id, 0.8
    FROM rels r JOIN ents s ON s.i = r.s JOIN ents o ON o.i = r.o;
INSERT INTO mention (memory_id, entity_id)
    SELECT r.memory_id, e.id FROM rels r JOIN ents e ON e.i = r.s
    UNION SELECT r.memory_id, e.id FROM rels r JOIN ents e ON e.i = r.o
    ON CONFLICT DO NOTHING;
-- No embedding job runs here; its queue is not part of the graph.
DELETE FROM embedding_job;
"""


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def seed(url: str, members: list[str], scale: int) -> dict[str, int]:
    entities = 10_000 * scale
    params = {
        "members": members,
        "m": len(members),
        "entities": entities,
        "per_entity": ATTRIBUTES_PER_ENTITY,
        "relation_memories": 5_000 * scale,
        "per_memory": RELATIONS_PER_MEMORY,
        "hubs": HUBS,
    }
    with psycopg.connect(url) as conn:
        # Triggers that record who wrote a memory read the caller setting.
        conn.execute("SELECT set_config('recallatron.member_id', %s, false)", (members[0],))
        conn.execute("SELECT set_config('recallatron.purpose', 'assist', false)")
        for statement in SEED_SQL.split(";\n"):
            if statement.strip():
                conn.execute(statement, params)  # type: ignore[call-overload]  # trusted text
        conn.commit()
        # As the embedding job's upkeep leaves a workspace filled through the
        # API: vacuumed (the trigram indexes' pending entries merged) and
        # analysed.
        conn.autocommit = True
        conn.execute("VACUUM (ANALYZE)")
        counts = {
            table: conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]  # type: ignore[index]
            for table in ("entity", "attribute_claim", "relation_claim", "entity_alias", "memory")
        }
        hub = conn.execute(
            "SELECT max(c) FROM (SELECT count(*) c FROM relation_claim GROUP BY subject_id) x"
        ).fetchone()
    counts["largest_hub_relations"] = hub[0] if hub else 0
    return counts


def run(args: argparse.Namespace) -> dict[str, Any]:
    own_dir = not args.state_dir
    state_dir = Path(args.state_dir or tempfile.mkdtemp(prefix="recallatron-graph-"))
    stack = Stack(own_config(state_dir, models_dir(), embedding_job=False))
    log(f"code: {Path(services.__file__).parent.parent}; state: {state_dir}")
    with running(stack, remove_state=own_dir):
        admin = Client(stack.gateway, stack.admin_token, timeout=60)
        ws = admin.create_workspace(f"graph-{int(time.time() * 1000)}").workspace
        members, clients = [], []
        for k in range(args.members):
            member = admin.create_member(ws.id, f"member{k}", owner=k == 0).member
            members.append(member.id)
            clients.append(Client(stack.gateway, admin.create_token(member.id, "bench").token))
        started = time.perf_counter()
        counts = seed(with_database(stack.database_url, ws.database_name), members, args.scale)
        seed_s = time.perf_counter() - started
        log(f"seeded in {seed_s:.0f} s: {counts}")
        entities = 10_000 * args.scale
        rng = random.Random(args.seed)
        # Start points for neighbors: entities each member may see (by id,
        # from a lookup), hubs included as they come.
        starts: list[list[str]] = []
        for client in clients:
            ids: list[str] = []
            while len(ids) < 200:
                found = client.lookup(f"Entity {rng.randint(1, entities)}").entities
                ids += [c.id for c in found]
            starts.append(ids)
        turn = itertools.count()

        def lookup(i: int) -> Any:
            k = next(turn) % len(clients)
            return clients[k].lookup(f"Entity {rng.randint(1, entities)}")

        def lookup_prefix(i: int) -> Any:
            # By part of a name: "Entity 482" begins "Entity 482" and 4820-4829.
            k = next(turn) % len(clients)
            return clients[k].lookup(f"Entity {rng.randint(1, entities) // 10}", partial=True)

        def lookup_typo(i: int) -> Any:
            # One digit off: every "Entity <n>" shares most of its trigrams, so
            # the typo route matches nearly every name here (its worst case).
            k = next(turn) % len(clients)
            n = str(rng.randint(100, entities))
            return clients[k].lookup(f"Entity {n[:-1]}{(int(n[-1]) + 1) % 10}x", partial=True)

        def lookup_miss(i: int) -> Any:
            # A name like no other: the partial routes find nothing.
            k = next(turn) % len(clients)
            return clients[k].lookup(f"Zorblax {rng.randint(1, entities)}", partial=True)

        def neighbors(i: int) -> Any:
            k = next(turn) % len(clients)
            return clients[k].neighbors(rng.choice(starts[k]), hops=2)

        def entity_pairs(i: int) -> Any:
            # The review page's proposals, as the owner (member 0) sees them.
            return clients[0].entity_pairs()

        results: dict[str, Any] = {}
        calls = (
            ("lookup", lookup),
            ("lookup_partial_prefix", lookup_prefix),
            ("lookup_partial_typo", lookup_typo),
            ("lookup_partial_miss", lookup_miss),
            ("neighbors_2hop", neighbors),
            ("entity_pairs", entity_pairs),
        )
        for name, call in calls:
            run_closed_loop(call, 1, args.warmup, Recorder())
            recorder = Recorder()
            elapsed = run_closed_loop(call, 1, args.duration, recorder)
            results[name] = recorder.summary(elapsed)
        truncated = sum(clients[0].neighbors(s, hops=2).truncated for s in starts[0][:50])
    return {
        "command": shlex.join([sys.executable, "-m", "benchmarks.graph_bench", *sys.argv[1:]]),
        "code": str(Path(services.__file__).parent.parent),
        "scale": args.scale,
        "counts": counts,
        "seed_s": round(seed_s, 1),
        "results": results,
        "neighbors_truncated_of_50": truncated,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--scale", type=int, default=1, help="1: 10k entities; 10: 100k")
    p.add_argument("--members", type=int, default=4)
    p.add_argument("--duration", type=float, default=20.0, help="seconds measured per call")
    p.add_argument("--warmup", type=float, default=3.0, help="seconds, not recorded")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--state-dir", default="", help="default: a fresh temporary one, removed")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    r = run(args)
    if args.json:
        print(json.dumps(r))
        return 0
    lines = [f"$ {r['command']}", f"code {r['code']}; scale {r['scale']}; seeded {r['counts']}"]
    for name, s in r["results"].items():
        lines.append(
            f"{name}: p50 {s['p50_ms']} ms  p95 {s['p95_ms']} ms  p99 {s['p99_ms']} ms  "
            f"({s['requests']} calls, errors {s['errors'] or 'none'})"
        )
    lines.append(f"neighbors truncated at a cap: {r['neighbors_truncated_of_50']} of 50 starts")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
