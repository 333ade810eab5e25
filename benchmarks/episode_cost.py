"""What recall's episode neighbours cost (docs/recall.md, "Episode
neighbours"), not part of `make test`:

    python -m benchmarks.episode_cost [--memories 5000] [--per-episode 25] [--queries 600]

Starts its own stack (embedded Postgres in a fresh temporary state directory,
every service a process on loopback), creates a workspace with one owner and
seeds --memories synthetic memories (`recallatron load`'s seed texts,
workspace audience), remembered with a time so that each run of
--per-episode consecutive memories shares a day and so an episode (design
§3.3), as a conversation's memories do. Once they are embedded, for each
query of the load mix it runs both arms against the store as rank does, fuses
them, and calls the store's walk (AdmitCandidates, hydrating 20) twice, with
and without the episode neighbours of the first two rows, in the order A B B
A from one query to the next, so both see the same machine. Prints the p50,
p90 and p99 of each (ms, HdrHistogram), the p50 difference, and how many
neighbours the walk found per call.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from hdrh.histogram import HdrHistogram

from recallatron import internal_auth, internal_channels
from recallatron.client import Client
from recallatron.grpcclient import make_channel
from recallatron.settings import default_state_dir
from recallatron.v1 import common_pb2 as cpb
from recallatron_devkit import synthetic
from recallatron_devkit.stack import Stack, own_config, running
from services.rank.fusion import rrf
from services.rank.peers import EmbedClient, StoreClient

HYDRATE = 20
SEEDS = 2


def seed(client: Client, count: int, per_episode: int) -> None:
    """Episode by episode in parallel, each one's memories in order."""
    texts = list(synthetic.memories(count))
    start = datetime(2025, 1, 1, 9, tzinfo=UTC)
    groups = [texts[i : i + per_episode] for i in range(0, len(texts), per_episode)]

    def write(day: int) -> None:
        when = (start + timedelta(days=day)).isoformat().replace("+00:00", "Z")
        for m in groups[day]:
            client.remember(m.title, m.body, audience_to="workspace", occurred_at=when)

    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(write, range(len(groups))))


def timed(call: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    value = call()
    return (time.perf_counter() - start) * 1000, value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=5000)
    parser.add_argument("--per-episode", type=int, default=25)
    parser.add_argument("--queries", type=int, default=600)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)

    models = default_state_dir() / "models"
    state = Path(tempfile.mkdtemp(prefix="episode-cost-"))
    with running(Stack(own_config(state, models)), remove_state=True) as stack:
        admin = Client(stack.gateway, stack.admin_token, timeout=60)
        ws = admin.create_workspace("episode-cost").workspace
        owner = admin.create_member(ws.id, "owner", owner=True).member
        client = Client(stack.gateway, admin.create_token(owner.id).token, timeout=60)
        seed(client, args.memories, args.per_episode)
        client.wait_embedded(timeout=3600)

        signer = internal_auth.Signer(stack.internal_key, "benchmark")
        store = StoreClient(
            internal_channels.member_channel(make_channel(stack.address("store")), signer), 10.0
        )
        embed = EmbedClient(
            internal_channels.member_channel(make_channel(stack.address("embed")), signer),
            10.0,
            10.0,
        )
        caller = cpb.Caller(
            workspace_id=ws.id,
            member_id=owner.id,
            role=cpb.ROLE_OWNER,
            purpose=cpb.PURPOSE_ASSIST,
        )
        filters = cpb.RecallFilters()
        hist = {k: HdrHistogram(1, 60_000_000, 3) for k in ("without", "with")}
        found = 0
        queries = synthetic.queries(args.queries)
        for i, query in enumerate(queries):
            lexical = store.lexical(caller, query, 100, filters)
            dense = store.dense(caller, embed.embed_query(query), 100, filters)
            ids = [f.id for f in rrf(lexical, dense.candidates)]
            if not ids:
                continue
            order = ("without", "with", "with", "without")[i % 2 * 2 : i % 2 * 2 + 2]
            for name in order:
                seeds = SEEDS if name == "with" else 0
                ms, walked = timed(
                    lambda ids=ids, seeds=seeds: store.walk(
                        caller, ids, HYDRATE, filters, neighbours_of=seeds
                    )
                )
                hist[name].record_value(max(1, round(ms * 1000)))
                if name == "with":
                    found += len(walked.neighbours)
        client.close()
        admin.close()

    def ms(h: HdrHistogram, q: float) -> float:
        return round(h.get_value_at_percentile(q) / 1000, 3)

    report = {
        "command": "python -m benchmarks.episode_cost " + " ".join(sys.argv[1:] or argv or []),
        "memories": args.memories,
        "per_episode": args.per_episode,
        "walks": {k: h.get_total_count() for k, h in hist.items()},
        "p50_p90_p99_ms": {k: [ms(h, 50), ms(h, 90), ms(h, 99)] for k, h in hist.items()},
        "p50_difference_ms": round(ms(hist["with"], 50) - ms(hist["without"], 50), 3),
        "neighbours_per_walk": round(found / max(1, hist["with"].get_total_count()), 2),
    }
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        for key, value in report.items():
            print(f"{key}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
