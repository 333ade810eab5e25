"""An archive from a release before forget took a memory out of its chain
(workspace migrations 0051, 0053 and 0054) holds a memory whose successor is
forgotten: Lyon superseded by Paris, Paris by Nice, Paris forgotten, and
Lyon still naming Paris. The copy holds it as the service does since then
(docs/export.md, "Import"): what the forgotten memory replaced is replaced by
its successor, and a memory left with none is current again, stating its
claims."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from recallatron.client import Client
from recallatron_devkit.stack import Stack
from tests.clirun import cli
from tests.conftest import Team
from tests.integration.test_export_import import rewrite

pytestmark = pytest.mark.integration

EVERYONE = "workspace"


def _claims(city: str) -> dict[str, Any]:
    return {
        "claims": [{"entity": {"name": "Acme Office"}, "attribute": "city", "value": city}],
        "aliases": [{"entity": {"name": "Acme Office"}, "alias": f"Acme {city}"}],
    }


def _forgotten_as_an_older_release_left_it(out: Path, forgotten: set[str], at: str) -> None:
    """The archive as an export before 0051 wrote it: each memory of
    ``forgotten`` a tombstone (its text, claims, aliases, mentions and
    vector gone, a forget revision), the memories it replaced still naming it."""

    def memories(rows: list[dict[str, Any]]) -> None:
        for r in rows:
            if r["id"] in forgotten:
                r.update(title="", body="", forgotten_at=at, forgotten_by=r["created_by"])

    def revisions(rows: list[dict[str, Any]]) -> None:
        last = {r["memory_id"]: r for r in rows if r["memory_id"] in forgotten}
        for r in rows:
            if r["memory_id"] in forgotten:
                r["reason"] = ""
        for r in last.values():
            rows.append({**r, "action": "forget", "reason": "", "changed_at": at})

    def without(rows: list[dict[str, Any]]) -> None:
        rows[:] = [r for r in rows if r["memory_id"] not in forgotten]

    rewrite(out, "memories", memories)
    rewrite(out, "revisions", revisions)
    for kind in ("attribute_claims", "relation_claims", "aliases", "vectors", "mentions"):
        rewrite(out, kind, without)


def test_a_memory_whose_successor_an_older_release_forgot_is_taken_out_of_the_chain(
    stack: Stack, operator: Client, team: Team, tmp_path: Path
) -> None:
    ada = team.clients["ada"]
    lyon = ada.remember("Office in Lyon", "The office is in Lyon.", audience_to=EVERYONE,
                        mention_names=["Acme Office"], **_claims("Lyon")).memory  # fmt: skip
    paris = ada.supersede(lyon.id, lyon.revision, "Office in Paris", "The office is in Paris.",
                          mention_names=["Acme Office"], **_claims("Paris")).memory  # fmt: skip
    nice = ada.supersede(paris.id, paris.revision, "Office in Nice", "The office is in Nice.",
                         mention_names=["Acme Office"], **_claims("Nice")).memory  # fmt: skip
    tea = ada.remember("Tea", "The team drinks green tea.", audience_to=EVERYONE,
                       claims=[{"entity": {"name": "Team Tea"}, "attribute": "kind",
                                "value": "green"}]).memory  # fmt: skip
    tea2 = ada.supersede(tea.id, tea.revision, "Tea", "The team drinks black tea.",
                         claims=[{"entity": {"name": "Team Tea"}, "attribute": "kind",
                                  "value": "black"}]).memory  # fmt: skip
    out = tmp_path / "a"
    done = cli(stack, "export", "--workspace", team.slug, "--out", str(out), "--vectors")
    assert done.returncode == 0, done.stderr
    _forgotten_as_an_older_release_left_it(out, {paris.id, tea2.id}, tea2.updated_at.ToJsonString())
    # What the source answers once it forgets the same two now.
    ada.forget(paris.id, "a typo")
    ada.forget(tea2.id, "wrong")

    slug = f"copy-{uuid.uuid4().hex[:10]}"
    done = cli(stack, "import", str(out), "--as", slug, "--json")
    assert done.returncode == 0, done.stderr
    made = json.loads(done.stdout)
    owner = next(m["id"] for m in made["members"] if m["handle"] == "ada")
    copy = Client(stack.gateway, operator.create_token(owner, "t").token)
    try:
        for client in (ada, copy):
            read = {m.id: m for m in client.read([lyon.id, nice.id, tea.id]).memories}
            # Lyon is replaced by Nice, Paris's successor; Tea by none.
            assert read[lyon.id].superseded_by_id == nice.id, client is copy
            assert read[tea.id].superseded_by_id == "", client is copy
            answer = client.recall("office", mode="lexical").outcome
            recalled = [r.memory.id for r in answer.results]
            assert lyon.id not in recalled and nice.id in recalled, (client is copy, recalled)
            # Tea states its claim again, and can be changed as a current memory.
            claims = [
                (c.attribute, c.value)
                for e in client.lookup("Team Tea").entities
                for c in e.attributes
            ]
            assert claims == [("kind", "green")], (client is copy, claims)
        copy.correct(tea.id, read[tea.id].revision, "oolong now", body="The team drinks oolong.")
    finally:
        copy.close()
