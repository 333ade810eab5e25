"""Export and import of a workspace holding this round's records (docs/export.md,
"Round trip"): a supersede chain whose middle memory was forgotten, a memory
revived by its successor's forget with its claims, episodes made with request
ids, private memories and a private episode of several members, a public memory
superseded by another member's private one. Every member of the copy reads,
recalls, looks up, walks, lists and sees timelines as in the original; the
same writes after the import answer alike in both (also with a member left
out); and a second export of the copy holds the first archive."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import json_format

from recallatron.client import Client
from recallatron_devkit.archive_check import Calls, Comparison, compare, record
from recallatron_devkit.stack import Stack
from tests import dbutil
from tests.clirun import cli
from tests.conftest import Team, wait_for
from tests.integration.test_export_import import made_database

pytestmark = pytest.mark.integration

EVERYONE = "workspace"
TIME = re.compile(r"20\d\d-\d\d-\d\dT[0-9:.]+Z")


def office(city: str) -> dict[str, Any]:
    return {
        "claims": [
            {"entity": {"name": "Acme Office", "type": "place"}, "attribute": "city", "value": city}
        ],
        "aliases": [{"entity": {"name": "Acme Office"}, "alias": f"Acme {city}"}],
    }


def build(team: Team) -> dict[str, Any]:
    ada, bob, cy = (team.clients[h] for h in ("ada", "bob", "cy"))
    ada.update_settings(members_may_edit=True)
    lyon = ada.remember("Office in Lyon", "The office is in Lyon.", audience_to=EVERYONE,
                        mention_names=["Acme Office"], **office("Lyon")).memory  # fmt: skip
    paris = ada.supersede(lyon.id, lyon.revision, "Office in Paris", "The office is in Paris.",
                          mention_names=["Acme Office"], **office("Paris")).memory  # fmt: skip
    nice = ada.supersede(paris.id, paris.revision, "Office in Nice", "The office is in Nice.",
                         mention_names=["Acme Office"], **office("Nice")).memory  # fmt: skip
    ada.forget(paris.id, "a typo")
    # Revived: superseded, then its successor forgotten.
    tea = bob.remember("Tea", "Bob drinks green tea.", audience_to=EVERYONE,
                       claims=[{"entity": {"name": "Bob Tea"}, "attribute": "kind",
                                "value": "green"}]).memory  # fmt: skip
    tea2 = bob.supersede(tea.id, tea.revision, "Tea", "Bob drinks black tea.",
                         claims=[{"entity": {"name": "Bob Tea"}, "attribute": "kind",
                                  "value": "black"}]).memory  # fmt: skip
    bob.forget(tea2.id, "wrong")
    # Private memories of several members, a private supersede chain.
    bob_p = bob.remember("Bob private", "Bob's locker is 42.").memory
    bob_p2 = bob.supersede(bob_p.id, bob_p.revision, "Bob private", "Bob's locker is 43.").memory
    cy_p = cy.remember("Cy private", "Cy's locker is 7.", mention_names=["Acme Office"]).memory
    # A public memory superseded by a private one of cy's.
    desk = ada.remember("Desk", "Desks are on floor 2.", audience_to=EVERYONE).memory
    desk2 = cy.supersede(desk.id, desk.revision, "Desk", "Cy's desk is on floor 9.",
                         audience_to=team.members["cy"]).memory  # fmt: skip
    ep = ada.create_episode("Standup", "2025-03-01T09:00:00Z", "2025-03-01T09:15:00Z",
                            audience_to=EVERYONE, member_ids=[team.members["bob"]],
                            request_id=str(uuid.uuid4())).episode_id  # fmt: skip
    ep_private = bob.create_episode("Bob's 1:1", "2025-03-02T09:00:00Z",
                                    request_id=str(uuid.uuid4())).episode_id  # fmt: skip
    in_ep = ada.remember("Standup notes", "We talked about the office.", audience_to=EVERYONE,
                         episode_id=ep).memory  # fmt: skip
    in_priv = bob.remember("1:1 notes", "Bob asked for a raise.", episode_id=ep_private).memory
    ids = [lyon.id, paris.id, nice.id, tea.id, tea2.id, bob_p.id, bob_p2.id, cy_p.id, desk.id,
           desk2.id, in_ep.id, in_priv.id]  # fmt: skip
    acme = ada.lookup("Acme Office").entities[0].id
    tea_e = ada.lookup("Bob Tea").entities[0].id
    names = ["Acme Office", "Acme Lyon", "Acme Paris", "Acme Nice", "Bob Tea"]
    return {"memories": ids, "entities": [acme, tea_e], "episodes": [ep, ep_private],
            "names": names}  # fmt: skip


def calls_for(built: dict[str, Any], purpose: str) -> Calls:
    queries = ["office", "Lyon", "Nice", "tea", "locker", "floor", "raise"]
    return Calls(
        recalls=[(q, m, purpose) for q in queries for m in ("lexical", "dense", "hybrid")],
        reads=built["memories"],
        lookups=built["names"],
        neighbors=built["entities"],
        timelines=[("", "")]
        + [("", e) for e in built["episodes"]]
        + [(e, "") for e in built["entities"]],
        purpose=purpose,
    )


def _queue_empty(stack: Stack, database: str) -> bool:
    return dbutil.query(stack, database, "SELECT count(*) FROM embedding_job") == [(0,)]


def listing(client: Client, back: dict[str, str], **filters: Any) -> str:
    text = json_format.MessageToJson(client.list_memories(**filters), sort_keys=True)
    for new, old in back.items():
        text = text.replace(new, old)
    return text


def test_chains_revivals_and_episodes_round_trip(
    stack: Stack, operator: Client, team: Team, tmp_path: Path
) -> None:
    built = build(team)
    wait_for(partial(_queue_empty, stack, team.database_name), "the embedding job")
    out = tmp_path / "archive"
    done = cli(stack, "export", "--workspace", team.slug, "--out", str(out), "--vectors")
    assert done.returncode == 0, done.stderr
    slug = f"copy-{uuid.uuid4().hex[:10]}"
    done = cli(stack, "import", str(out), "--as", slug, "--json")
    assert done.returncode == 0, done.stderr
    made = json.loads(done.stdout)
    new_ids = {m["handle"]: m["id"] for m in made["members"]}
    back = {new_ids[h]: team.members[h] for h in ("ada", "bob", "cy")}
    copies = {
        h: Client(stack.gateway, operator.create_token(new_ids[h], "t").token)
        for h in ("ada", "bob", "cy")
    }
    result = Comparison()
    try:
        for h in ("ada", "bob", "cy"):
            for purpose in ("assist", "audit"):
                compare(team.clients[h], copies[h], calls_for(built, purpose), back, result)
            for filters in (
                {},
                {"include_superseded": True},
                {"episode_id": built["episodes"][0]},
                {"episode_id": built["episodes"][1]},
                {"created_by": team.members["bob"]},
                {"kinds": ["note"]},
            ):
                theirs = dict(filters)
                if "created_by" in theirs:
                    theirs["created_by"] = new_ids["bob"]
                a = listing(team.clients[h], {}, **filters)
                b = listing(copies[h], back, **theirs)
                if a != b:
                    result.differences.append(f"list {h} {filters}:\n{a}\n---\n{b}")
        assert result.identical, "\n".join(result.differences)
    finally:
        for c in copies.values():
            c.close()


def _answer(call: Callable[[], object]) -> str:
    """A write's outcome: its answer's type, or its refusal's code and message."""
    try:
        return type(call()).__name__
    except grpc.RpcError as exc:
        return f"{exc.code()}: {exc.details()}"


def writes(clients: dict[str, Client], ids: list[str]) -> list[str]:
    """The same writes, each answered, after the export or in the copy."""
    ada, bob = clients["ada"], clients["bob"]
    _lyon, paris, nice, tea, _tea2, _bob_p, bob_p2, cy_p, desk, *_ = ids
    return [
        _answer(partial(ada.forget, nice, "moved again")),
        _answer(partial(ada.correct, desk, 1, "typo", body="Desks are on floor 3.")),
        _answer(partial(ada.supersede, desk, 1, "Desk", "Desks are on floor 4.")),
        _answer(partial(bob.correct, tea, 1, "typo", body="Bob drinks sencha.")),
        _answer(partial(bob.correct, bob_p2, 1, "typo", body="Bob's locker is 44.")),
        _answer(partial(ada.forget, cy_p, "x")),
        _answer(partial(ada.forget, paris, "again")),
    ]


@pytest.mark.parametrize("leave_out_cy", [False, True])
def test_writes_after_the_import_answer_as_in_the_original(
    stack: Stack, operator: Client, team: Team, tmp_path: Path, leave_out_cy: bool
) -> None:
    built = build(team)
    wait_for(partial(_queue_empty, stack, team.database_name), "the embedding job")
    out = tmp_path / "archive"
    done = cli(stack, "export", "--workspace", team.slug, "--out", str(out), "--vectors")
    assert done.returncode == 0, done.stderr
    slug = f"copy-{uuid.uuid4().hex[:10]}"
    extra: list[str] = []
    handles = ("ada", "bob") if leave_out_cy else ("ada", "bob", "cy")
    if leave_out_cy:
        members = tmp_path / "members.json"
        members.write_text(json.dumps({"members": [{"source": h} for h in handles]}))
        extra = ["--members", str(members)]
    done = cli(stack, "import", str(out), "--as", slug, "--json", *extra)
    assert done.returncode == 0, done.stderr
    made = json.loads(done.stdout)
    new_ids = {m["handle"]: m["id"] for m in made["members"]}
    back = {new_ids[h]: team.members[h] for h in handles}
    copies = {
        h: Client(stack.gateway, operator.create_token(new_ids[h], "t").token) for h in handles
    }
    copy_db = made_database(stack, made["workspace_id"])
    cutoff = datetime.now(UTC).isoformat().replace("+00:00", "Z")
    result = Comparison()
    try:
        answered = []
        for clients, db in ((team.clients, team.database_name), (copies, copy_db)):
            answered.append(writes(clients, built["memories"]))
            wait_for(partial(_queue_empty, stack, db), "the embedding job")
        assert answered[0] == answered[1]

        def norm(text: str) -> str:
            text = TIME.sub(lambda m: "<later>" if m.group(0) >= cutoff else m.group(0), text)
            for new, old in back.items():
                text = text.replace(new, old)
            return text

        for h in handles:
            for purpose in ("assist", "audit"):
                calls = calls_for(built, purpose)
                for (kind, key, a), (_, _, b) in zip(
                    record(team.clients[h], calls), record(copies[h], calls), strict=True
                ):
                    result.add(kind, key, norm(a), norm(b))
            for filters in ({}, {"include_superseded": True}):
                a = norm(listing(team.clients[h], {}, **filters))
                b = norm(listing(copies[h], back, **filters))
                if a != b:
                    result.differences.append(f"list {h} {filters}:\n{a}\n---\n{b}")
        assert result.identical, "\n".join(result.differences)
    finally:
        for c in copies.values():
            c.close()


def test_a_second_export_of_the_copy_holds_the_first(
    stack: Stack, operator: Client, team: Team, tmp_path: Path
) -> None:
    build(team)
    wait_for(partial(_queue_empty, stack, team.database_name), "the embedding job")
    out = tmp_path / "a"
    done = cli(stack, "export", "--workspace", team.slug, "--out", str(out), "--vectors")
    assert done.returncode == 0, done.stderr
    slug = f"copy-{uuid.uuid4().hex[:10]}"
    done = cli(stack, "import", str(out), "--as", slug, "--json")
    assert done.returncode == 0, done.stderr
    made = json.loads(done.stdout)
    back = {m["id"]: m["source_id"] for m in made["members"]}
    out2 = tmp_path / "b"
    done = cli(stack, "export", "--workspace", slug, "--out", str(out2), "--vectors")
    assert done.returncode == 0, done.stderr
    diffs = []
    for f in sorted(out.iterdir()):
        if f.name == "manifest.json":
            continue
        a = f.read_text()
        b = (out2 / f.name).read_text()
        for new, old in back.items():
            b = b.replace(new, old)
        if a != b:
            al, bl = a.splitlines(), b.splitlines()
            diffs.append(f"{f.name}: {len(al)} vs {len(bl)}")
            diffs.extend(f"  - {x}" for x in al if x not in bl)
            diffs.extend(f"  + {x}" for x in bl if x not in al)
    # A new episode with a request id in the copy (request ids do not travel).
    copy = Client(stack.gateway, operator.create_token(made["members"][0]["id"], "t").token)
    ep = copy.create_episode("again", "2025-03-01T09:00:00Z", request_id=str(uuid.uuid4()))
    copy.close()
    assert ep.episode_id
    assert not diffs, "\n".join(diffs)
