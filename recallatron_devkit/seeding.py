"""The workspace `recallatron load` and the benchmarks recall from: synthetic
memories written by several members through the gateway, reused when a run
before already wrote them, and the wait until the embedding job has caught up."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from recallatron.client import Client
from recallatron.progress import Progress
from recallatron_devkit import synthetic


def seed_workspace(
    admin: Client,
    gateway: str,
    memories: int,
    seed: int,
    creds_dir: Path,
    log: Callable[[str], None],
    members: int = 1,
) -> list[Client]:
    """A workspace holding `memories` synthetic memories written by `members`
    members (the first an owner); reused when already seeded (the members'
    tokens are kept in creds_dir). Returns one client per member."""
    slug = f"load-{memories}-{seed}" + (f"-m{members}" if members > 1 else "")
    creds_path = creds_dir / f"{slug}.json"
    if creds_path.exists():
        creds = json.loads(creds_path.read_text())
        clients = [Client(gateway, t, timeout=30) for t in creds["tokens"]]
        # The owner's status counts only what the owner may see (not the
        # other members' private memories): the seed records its own count.
        if creds.get("seeded", 0) >= memories or clients[0].status().memories >= memories:
            log(f"reusing seeded workspace {slug}")
            return clients
    else:
        ws = admin.create_workspace(slug).workspace
        tokens = []
        for k in range(members):
            member = admin.create_member(ws.id, f"loader{k}", owner=k == 0).member
            tokens.append(admin.create_token(member.id, "load").token)
        creds_dir.mkdir(parents=True, exist_ok=True)
        creds_path.write_text(json.dumps({"workspace_id": ws.id, "tokens": tokens}))
        clients = [Client(gateway, t, timeout=30) for t in tokens]
    _seed(clients, memories, seed)
    creds = json.loads(creds_path.read_text())
    creds_path.write_text(json.dumps({**creds, "seeded": memories}))
    return clients


def _seed(clients: list[Client], count: int, seed: int) -> None:
    items = list(synthetic.memories(count, seed, members=len(clients)))
    ids: list[str | None] = [None] * count
    # Set when a memory's write has ended (written or failed): a derivation
    # waits for its sources, which are earlier and so already submitted.
    ended = [threading.Event() for _ in range(count)]

    def write(i: int) -> None:
        try:
            _write(i)
        finally:
            ended[i].set()

    def _write(i: int) -> None:
        m = items[i]
        client = clients[m.author]
        # Deterministic request ids: a rerun after an interruption resumes,
        # and makes the same call for each id (a derivation is always one:
        # never a told memory because its sources were still being written).
        rid = f"load-{seed}-{i}"
        for j in m.derived_from:
            ended[j].wait()
        sources = [s for s in (ids[j] for j in m.derived_from) if s]
        if m.derived_from:
            if len(sources) != len(m.derived_from):
                raise RuntimeError(f"memory {i}: a source could not be written")
            ids[i] = client.derive(
                sources,
                m.title,
                m.body,
                m.kind,
                purposes=m.purposes,
                purpose=m.purposes[0],
                request_id=rid,
            ).memory.id
        else:
            ids[i] = client.remember(
                m.title,
                m.body,
                m.kind,
                audience_to=None if m.private else "workspace",
                purposes=m.purposes,
                purpose=m.purposes[0],
                mention_names=m.mentions,
                request_id=rid,
            ).memory.id

    # Chunks keep derivations' sources (the 10 before) written first.
    chunk = 200
    with (
        Progress("seeding", total=count, unit="memories") as bar,
        ThreadPoolExecutor(max_workers=8) as pool,
    ):
        for begin in range(0, count, chunk):
            for _ in pool.map(write, range(begin, min(begin + chunk, count))):
                bar.advance()


def wait_embedded(client: Client, timeout: float) -> Any:
    """Waits until the job has embedded every memory of the client's
    workspace, showing how far it is; returns the last status."""
    with Progress("embedding", unit="memories") as bar:
        return client.wait_embedded(
            timeout=timeout, on_status=lambda s: bar.update(s.embedded, s.memories)
        )
