"""A copy answers `lookup` and `neighbors` as of a time as its original
(docs/export.md, "Round trip"): a mention a `correct` added to an older
memory counts from the correction (docs/graph.md, "Time"), in the copy too,
the archive carrying when (the mention's `mentioned_at`, format 2), or, for
a mention the archive lacks and the import adds, from the claim naming it."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import grpc
import pytest

from recallatron.client import Client
from recallatron_devkit.stack import Stack
from services.store.domain import archive_format as fmt
from tests.clirun import cli
from tests.conftest import Team
from tests.integration.corrected_mention import Corrected, correct_an_old_note
from tests.integration.test_export_import import rewrite

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


def _correct_an_old_note(team: Team) -> Corrected:
    ada = team.clients["ada"]
    made = correct_an_old_note(ada)
    # The original as the correction made it (tests/integration/test_graph_as_of.py).
    assert _lookup(ada, "Newcomer", made.before) == []
    assert _lookup(ada, "Kai", made.before) == [(made.kai_id, "Kai", [made.kai])]
    return made


def _import_and_compare(
    stack: Stack, operator: Client, team: Team, archive: Path, made: Corrected
) -> None:
    slug = f"copy-{uuid.uuid4().hex[:10]}"
    imported = cli(stack, "import", str(archive), "--as", slug, "--json")
    assert imported.returncode == 0, imported.stderr
    members = {m["handle"]: m["id"] for m in json.loads(imported.stdout)["members"]}
    ada = team.clients["ada"]
    copy = Client(stack.gateway, operator.create_token(members["ada"], "t").token)
    try:
        for name in ("Newcomer", "Kai"):
            for at in (made.before, ""):
                original, copied = _lookup(ada, name, at), _lookup(copy, name, at)
                assert copied == original, (
                    f"lookup({name!r}, as_of={at or 'now'}): the copy answered {copied}, "
                    f"the original {original}"
                )
        for entity in (made.newcomer, made.kai_id):
            original_walk = _neighbors(ada, entity, made.before)
            copied_walk = _neighbors(copy, entity, made.before)
            assert copied_walk == original_walk, (entity, copied_walk, original_walk)
    finally:
        copy.close()


def test_a_mention_a_correction_added_counts_from_the_correction_in_the_copy(
    stack: Stack, operator: Client, team: Team, tmp_path: Path
) -> None:
    made = _correct_an_old_note(team)
    out = tmp_path / "archive"
    exported = cli(stack, "export", "--workspace", team.slug, "--out", str(out))
    assert exported.returncode == 0, exported.stderr
    assert json.loads((out / fmt.MANIFEST).read_text())["format_version"] == fmt.FORMAT_VERSION
    lines = [json.loads(x) for x in (out / "mentions.jsonl").read_text().splitlines()]
    timed = {(r["memory_id"], r["entity_id"]) for r in lines if r.get("mentioned_at")}
    assert timed == {(made.plain, made.newcomer), (made.plain, made.kai_id)}
    _import_and_compare(stack, operator, team, out, made)


def test_a_mention_the_import_adds_for_a_corrections_claim_counts_from_the_claim(
    stack: Stack, operator: Client, team: Team, tmp_path: Path
) -> None:
    """An archive without the correction's mentions (edited, or exported from
    a workspace written before every write made them) gets them on import,
    as the write makes them: counting from the claim's statement, not from
    the older memory's creation."""
    made = _correct_an_old_note(team)
    out = tmp_path / "archive"
    exported = cli(stack, "export", "--workspace", team.slug, "--out", str(out))
    assert exported.returncode == 0, exported.stderr

    def drop_the_corrections(rows: list[dict[str, Any]]) -> None:
        rows[:] = [r for r in rows if r["memory_id"] != made.plain]

    rewrite(out, "mentions", drop_the_corrections)
    assert made.plain not in (out / "mentions.jsonl").read_text()
    _import_and_compare(stack, operator, team, out, made)
