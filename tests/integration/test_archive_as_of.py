"""A copy answers `lookup` and `neighbors` as of a time as its original
(docs/export.md, "Round trip"): a mention a `correct` added to an older
memory counts from the correction (docs/graph.md, "Time"), in the copy too,
the archive carrying when (the mention's `mentioned_at`, format 2)."""

from __future__ import annotations

import json
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import grpc
import pytest

from recallatron.client import Client
from recallatron_devkit.stack import Stack
from services.store.domain import archive_format as fmt
from tests.conftest import Team
from tests.integration.test_export_import import cli

pytestmark = pytest.mark.integration


def _lookup(client: Client, name: str, as_of: str) -> list[tuple[str, str, list[str]]]:
    found = client.lookup(name, as_of=as_of or None).entities
    return [(c.id, c.name, list(c.mentioned_by)) for c in found]


def _neighbors(client: Client, entity_id: str, as_of: str) -> object:
    try:
        walked = client.neighbors(entity_id, hops=1, as_of=as_of)
    except grpc.RpcError as exc:
        return exc.code()
    return [n.entity.id for n in walked.nodes]


def test_a_mention_a_correction_added_counts_from_the_correction_in_the_copy(
    stack: Stack, operator: Client, team: Team, tmp_path: Path
) -> None:
    ada = team.clients["ada"]
    kai = ada.remember("Kai", "Kai is here.", audience_to="workspace", mention_names=["Kai"]).memory
    plain = ada.remember("A note", "Nothing named yet.", audience_to="workspace").memory
    kai_id = ada.lookup("Kai").entities[0].id
    time.sleep(0.05)
    before = datetime.now(UTC).isoformat()
    time.sleep(0.05)
    ada.correct(
        plain.id,
        plain.revision,
        "named them",
        claims=[
            {"entity": {"name": "Newcomer"}, "attribute": "role", "value": "guest"},
            {"entity": {"entity_id": kai_id}, "attribute": "role", "value": "host"},
        ],
    )
    newcomer = ada.lookup("Newcomer").entities[0].id
    # The original as the correction made it (tests/integration/test_graph_as_of.py).
    assert _lookup(ada, "Newcomer", before) == []
    assert _lookup(ada, "Kai", before) == [(kai_id, "Kai", [kai.id])]

    out = tmp_path / "archive"
    exported = cli(stack, "export", "--workspace", team.slug, "--out", str(out))
    assert exported.returncode == 0, exported.stderr
    assert json.loads((out / fmt.MANIFEST).read_text())["format_version"] == fmt.FORMAT_VERSION
    lines = [json.loads(x) for x in (out / "mentions.jsonl").read_text().splitlines()]
    timed = {(r["memory_id"], r["entity_id"]) for r in lines if r.get("mentioned_at")}
    assert timed == {(plain.id, newcomer), (plain.id, kai_id)}
    slug = f"copy-{uuid.uuid4().hex[:10]}"
    imported = cli(stack, "import", str(out), "--as", slug, "--json")
    assert imported.returncode == 0, imported.stderr
    made = {m["handle"]: m["id"] for m in json.loads(imported.stdout)["members"]}
    copy = Client(stack.gateway, operator.create_token(made["ada"], "t").token)
    try:
        for name in ("Newcomer", "Kai"):
            for at in (before, ""):
                original, copied = _lookup(ada, name, at), _lookup(copy, name, at)
                assert copied == original, (
                    f"lookup({name!r}, as_of={at or 'now'}): the copy answered {copied}, "
                    f"the original {original}"
                )
        for entity in (newcomer, kai_id):
            original_walk = _neighbors(ada, entity, before)
            copied_walk = _neighbors(copy, entity, before)
            assert copied_walk == original_walk, (entity, copied_walk, original_walk)
    finally:
        copy.close()
