"""Export and import (issue 34, docs/export.md) on the real stack: a small
workspace holding every kind of record (memories of three members with
their trust fields, a derivation, a correction, a supersession, a
tombstone, claims, relations, aliases, an episode, a merge and an undone
one, a dismissed pair) is exported with its vectors and imported as
another workspace; recall, read, lookup, neighbors and timeline answer the
same for every member of the copy. A member left out of the members file
brings nothing of theirs that the others could not see, and an archive of a
newer format, a bad record or a bad members file is refused, naming the
field, before anything is made."""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest

from recallatron.client import Client
from recallatron_devkit.archive_check import Calls, Comparison, compare
from recallatron_devkit.stack import Stack
from services.store.domain import archive_format as fmt
from services.store.infrastructure.db import CONTROL_DATABASE, with_database
from tests import dbutil
from tests.clirun import cli
from tests.conftest import Team, wait_for

pytestmark = pytest.mark.integration

SECRET = "PLOVER5512"  # in cy's private memory only
FORGOTTEN = "GANNET3321"  # in a memory forgotten before the export


def build(team: Team) -> dict[str, Any]:
    """Every kind of record; returns what the comparison asks about."""
    ada, bob, cy = (team.clients[h] for h in ("ada", "bob", "cy"))
    everyone = "workspace"
    robin = ada.remember(
        "Robin leads Apollo",
        "Robin Goodwin leads the Apollo project from Lisbon.",
        kind="fact",
        audience_to=everyone,
        purposes=["assist", "audit"],
        confidence=0.9,
        mention_names=["Robin Goodwin"],
        claims=[
            {
                "entity": {"name": "Robin Goodwin", "type": "person"},
                "attribute": "city",
                "value": "Lisbon",
                "valid_from": "2024-01-01T00:00:00Z",
            },
            {"entity": {"name": "Apollo", "type": "project"}, "attribute": "status", "value": "on"},
        ],
        relations=[
            {
                "subject": {"name": "Robin Goodwin"},
                "predicate": "leads",
                "object": {"name": "Apollo"},
            }
        ],
        aliases=[{"entity": {"name": "Robin Goodwin"}, "alias": "Robin"}],
    ).memory
    goodwin = next(m.entity_id for m in robin.mentions if m.name == "Robin Goodwin")
    apollo_row = ada.lookup("Apollo").entities[0]
    apollo = apollo_row.id
    episode = ada.create_episode(
        "Apollo kickoff",
        "2025-03-01T09:00:00Z",
        "2025-03-01T11:00:00Z",
        audience_to=everyone,
        member_ids=[team.members["bob"]],
        entity_ids=[apollo],
    ).episode_id
    kickoff = ada.remember(
        "Kickoff notes",
        "The Apollo kickoff agreed on a Lisbon launch in May.",
        audience_to=everyone,
        mention_ids=[apollo],
        episode_id=episode,
    ).memory
    summary = ada.derive(
        [robin.id, kickoff.id], "Apollo summary", "Robin runs Apollo; launch in May."
    ).memory
    bob_note = bob.remember(
        "Release train",
        "Apollo ships every second Tuesday.",
        audience_to=everyone,
        mention_ids=[apollo],
        relations=[
            {
                "subject": {"name": "Bob Stone"},
                "predicate": "reviews",
                "object": {"entity_id": apollo},
            }
        ],
    ).memory
    bob_note = bob.correct(bob_note.id, bob_note.revision, "it is Wednesday",
                           body="Apollo ships every second Wednesday.").memory  # fmt: skip
    old = ada.remember("Office", "The team sits on floor 3.", audience_to=everyone).memory
    newer = ada.supersede(old.id, old.revision, "Office", "The team moved to floor 5.").memory
    bob_private = bob.remember(
        "Bob's reminder", "Bob prefers the Thursday sync.", purposes=["assist", "personalize"]
    ).memory
    cy_private = cy.remember(
        "Cy's secret",
        f"The vault code is {SECRET}.",
        mention_names=["Plover Vault"],
        claims=[{"entity": {"name": "Plover Vault"}, "attribute": "code", "value": SECRET}],
    ).memory
    cy_public = cy.remember(
        "Cy's public note", "Cy owns the Apollo test plan.", audience_to=everyone
    ).memory
    gone = ada.remember("Temporary", f"Forget {FORGOTTEN} soon.", audience_to=everyone).memory
    ada.forget(gone.id, "recorded by mistake")
    robin2 = ada.remember(
        "Robin reviews",
        "Robin reviews Apollo releases.",
        audience_to=everyone,
        mention_names=["Robin", "Apollo"],
    ).memory
    short_robin = next(m.entity_id for m in robin2.mentions if m.name == "Robin")
    merge = ada.merge_entities(goodwin, short_robin).merge
    stone = ada.lookup("Bob Stone").entities[0].id
    undone = ada.merge_entities(stone, apollo).merge
    ada.undo_entity_merge(undone.id)
    ada.dismiss_pair(robin.id, robin2.id)
    memories = [robin, kickoff, summary, bob_note, old, newer, bob_private, cy_private,
                cy_public, gone, robin2]  # fmt: skip
    return {
        "memories": [m.id for m in memories],
        "names": ["Robin Goodwin", "Robin", "Apollo", "Bob Stone", "Plover Vault", "Nobody"],
        "entities": [goodwin, short_robin, apollo, stone],
        "episode": episode,
        "merge": merge.id,
        "cy_private": cy_private.id,
    }


def calls_for(built: dict[str, Any], purpose: str) -> Calls:
    queries = ["Apollo", "Lisbon launch", "Robin", "Thursday sync", "vault code", "floor"]
    return Calls(
        recalls=[(q, m, purpose) for q in queries for m in ("lexical", "dense", "hybrid")],
        reads=built["memories"],
        lookups=built["names"],
        neighbors=built["entities"],
        timelines=[("", ""), ("", built["episode"])] + [(e, "") for e in built["entities"]],
        purpose=purpose,
    )


def test_a_copy_answers_as_the_original_and_holds_nothing_a_left_out_member_hid(
    stack: Stack, operator: Client, team: Team, tmp_path: Path
) -> None:
    built = build(team)
    wait_for(
        lambda: (
            dbutil.query(stack, team.database_name, "SELECT count(*) FROM embedding_job") == [(0,)]
        ),
        "the embedding job",
    )
    out = tmp_path / "archive"
    exported = cli(stack, "export", "--workspace", team.slug, "--out", str(out), "--vectors",
                   "--json")  # fmt: skip
    assert exported.returncode == 0, exported.stderr
    report = json.loads(exported.stdout)
    assert report["counts"]["memories"] == len(built["memories"])
    assert report["counts"]["vectors"] > 0 and report["counts"]["merges"] == 2
    # The tombstone's id travels, not its text or its forget reason.
    archive_text = "".join(p.read_text() for p in out.iterdir())
    assert FORGOTTEN not in archive_text and "recorded by mistake" not in archive_text

    members = tmp_path / "members.json"
    members.write_text(
        json.dumps({"members": [{"source": "ada"}, {"source": "bob", "handle": "bob-2"}]})
    )
    slug = f"copy-{uuid.uuid4().hex[:10]}"
    imported = cli(stack, "import", str(out), "--as", slug, "--members", str(members), "--json")
    assert imported.returncode == 0, imported.stderr
    made = json.loads(imported.stdout)
    assert made["left_out"]["private_memories"] == 1 and made["left_out"]["entities"] == 1
    new_ids = {m["handle"]: m["id"] for m in made["members"]}
    assert set(new_ids) == {"ada", "bob-2"}
    # Every vector came along: nothing waits for the embedding job.
    assert made["queued_for_embedding"] == 0

    back = {new_ids["ada"]: team.members["ada"], new_ids["bob-2"]: team.members["bob"]}
    result = Comparison()
    for source, target in (("ada", "ada"), ("bob", "bob-2")):
        copy = Client(stack.gateway, operator.create_token(new_ids[target], "t").token)
        for purpose in ("assist", "audit"):
            compare(team.clients[source], copy, calls_for(built, purpose), back, result)
        copy.close()
    assert result.identical, "\n".join(result.differences)
    assert (
        sum(n for k, n in result.compared.items() if k.startswith("recall")) == 2 * 2 * 18
        and result.compared["lookup"] == 24
    )

    database = made_database(stack, made["workspace_id"])
    # The copy holds its vectors in the order the source's table holds them:
    # the order the source's vector indexes were built in, and the order the
    # copy's are built in (an HNSW graph depends on it, docs/export.md).
    in_table = "SELECT memory_id::text FROM memory_embedding ORDER BY ctid"
    copied = [r[0] for r in dbutil.query(stack, database, in_table)]
    original = [r[0] for r in dbutil.query(stack, team.database_name, in_table)]
    assert len(copied) > 3 and copied == [m for m in original if m in set(copied)]

    # Cy's private memory: a tombstone in the copy, its text nowhere.
    leaks = dbutil.query(
        stack,
        database,
        "SELECT (SELECT count(*) FROM memory WHERE title || body ILIKE %(s)s)"
        " + (SELECT count(*) FROM entity WHERE name ILIKE 'plover%%')"
        " + (SELECT count(*) FROM attribute_claim WHERE value ILIKE %(s)s)"
        " + (SELECT count(*) FROM term_stat WHERE lexeme ILIKE 'plover%%')",
        {"s": f"%{SECRET}%"},  # type: ignore[arg-type]
    )
    assert leaks == [(0,)]
    tomb = dbutil.query(
        stack, database, "SELECT invalidated_at IS NOT NULL FROM memory WHERE id = %s",
        (built["cy_private"],),
    )  # fmt: skip
    assert tomb == [(True,)]


def made_database(stack: Stack, workspace_id: str) -> str:
    with psycopg.connect(with_database(stack.database_url, CONTROL_DATABASE)) as conn:
        row = conn.execute(
            "SELECT database_name FROM workspace WHERE id = %s", (workspace_id,)
        ).fetchone()
    assert row is not None
    return str(row[0])


def slug_exists(stack: Stack, slug: str) -> bool:
    with psycopg.connect(with_database(stack.database_url, CONTROL_DATABASE)) as conn:
        return (
            conn.execute("SELECT 1 FROM workspace WHERE slug = %s", (slug,)).fetchone() is not None
        )


def _replace(directory: Path, kind: str, content: bytes) -> None:
    """One file's bytes replaced, the manifest's digest (and count) fixed."""
    name = kind if kind == fmt.WORKSPACE else fmt.file_name(kind)
    (directory / name).write_bytes(content)
    manifest = json.loads((directory / fmt.MANIFEST).read_text())
    manifest["files"][kind]["sha256"] = fmt.sha256_of(directory / name)
    if kind != fmt.WORKSPACE:
        manifest["files"][kind]["records"] = 1
    (directory / fmt.MANIFEST).write_text(json.dumps(manifest))


def rewrite(directory: Path, kind: str, change: Any) -> None:
    """Changes one file's records and fixes the manifest's digest (a
    well-formed archive with a bad record, not a damaged one)."""
    path = directory / fmt.file_name(kind)
    lines = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    change(lines)
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    manifest = json.loads((directory / fmt.MANIFEST).read_text())
    manifest["files"][kind]["sha256"] = fmt.sha256_of(path)
    manifest["files"][kind]["records"] = len(lines)
    (directory / fmt.MANIFEST).write_text(json.dumps(manifest))


def test_newer_formats_bad_records_and_bad_members_are_refused_before_anything_is_made(
    stack: Stack, team: Team, tmp_path: Path
) -> None:
    team.clients["ada"].remember("One note", "about the heron ledger", audience_to="workspace")
    out = tmp_path / "a"
    assert cli(stack, "export", "--workspace", team.slug, "--out", str(out)).returncode == 0
    again = cli(stack, "export", "--workspace", team.slug, "--out", str(out), "--json")
    assert again.returncode == 1 and "out:" in json.loads(again.stdout)["error"]

    def refused(archive: Path, *more: str) -> str:
        slug = f"bad-{uuid.uuid4().hex[:10]}"
        done = cli(stack, "import", str(archive), "--as", slug, *more)
        assert done.returncode == 1, done.stdout
        assert "Traceback" not in done.stderr, done.stderr
        assert not slug_exists(stack, slug)
        return done.stderr

    newer = tmp_path / "newer"
    subprocess.run(["cp", "-r", str(out), str(newer)], check=True)
    manifest = json.loads((newer / fmt.MANIFEST).read_text())
    manifest["format_version"] = fmt.FORMAT_VERSION + 1
    (newer / fmt.MANIFEST).write_text(json.dumps(manifest))
    error = refused(newer)
    assert "format_version" in error and "newer" in error

    bad = tmp_path / "bad"
    subprocess.run(["cp", "-r", str(out), str(bad)], check=True)
    rewrite(bad, "memories", lambda rows: rows[0].update(purposes=["gossip"]))
    assert "memories.jsonl line 1: purposes[0]" in refused(bad)

    # A newer version written as a float (the schema's "integer" takes 2.0).
    manifest["format_version"] = float(fmt.FORMAT_VERSION + 1)
    (newer / fmt.MANIFEST).write_text(json.dumps(manifest))
    assert "newer" in refused(newer)

    # Settings of the wrong type (they crashed the check), bytes that are not
    # UTF-8 and a lone surrogate (no text to store): each named, nothing made.
    typed = tmp_path / "typed"
    subprocess.run(["cp", "-r", str(out), str(typed)], check=True)
    workspace = json.loads((typed / fmt.WORKSPACE).read_text())
    workspace["settings"]["dense_floor"] = "0.3"
    _replace(typed, fmt.WORKSPACE, json.dumps(workspace).encode())
    assert "settings.dense_floor" in refused(typed)
    workspace["settings"].update(dense_floor=0.3, rerank_depth=5.5)
    _replace(typed, fmt.WORKSPACE, json.dumps(workspace).encode())
    assert "settings.rerank_depth" in refused(typed)
    # A memory superseded by itself: refused naming the record and field.
    looped = tmp_path / "looped"
    subprocess.run(["cp", "-r", str(out), str(looped)], check=True)
    rewrite(looped, "memories", lambda rows: rows[0].update(superseded_by=rows[0]["id"]))
    error = refused(looped)
    assert "memories.jsonl line 1: superseded_by: names the memory itself" in error, error
    for broken in (b'{"title": "\xff\xfe"}\n', b'{"title": "\\ud800"}\n'):
        damaged = tmp_path / f"damaged-{len(broken)}"
        subprocess.run(["cp", "-r", str(out), str(damaged)], check=True)
        _replace(damaged, "memories", broken)
        assert "memories.jsonl line 1" in refused(damaged)

    members = tmp_path / "members.json"
    members.write_text(json.dumps({"members": [{"source": "zed"}]}))
    assert "members file: members[0].source" in refused(out, "--members", str(members))
    members.write_text(
        json.dumps({"members": [{"source": "ada"}, {"source": "bob", "handle": "ada"}]})
    )
    assert "members file: members[1].handle" in refused(out, "--members", str(members))


def test_a_member_removed_before_the_export_is_no_member_of_the_copy(
    stack: Stack, operator: Client, team: Team, tmp_path: Path
) -> None:
    ada, bob = team.clients["ada"], team.clients["bob"]
    shared = bob.remember("Bob's handover notes", audience_to="workspace").memory.id
    private = bob.remember("Bob's own reminder").memory.id
    operator.remove_member(team.members["bob"], "transfer", team.members["ada"])
    out = tmp_path / "archive"
    exported = cli(stack, "export", "--workspace", team.slug, "--out", str(out), "--json")
    assert exported.returncode == 0, exported.stderr
    slug = f"copy-{uuid.uuid4().hex[:10]}"
    imported = cli(stack, "import", str(out), "--as", slug, "--json")
    assert imported.returncode == 0, imported.stderr
    made = json.loads(imported.stdout)
    assert sorted(m["handle"] for m in made["members"]) == ["ada", "cy"]
    new_ada = next(m["id"] for m in made["members"] if m["handle"] == "ada")
    copy = Client(stack.gateway, operator.create_token(new_ada, "t").token)
    try:
        # What bob shared stays, attributed to him; what was handed to ada is hers.
        read = {m.id: m for m in copy.read([shared, private]).memories}
        assert read[shared].created_by == team.members["bob"]
        assert read[private].audience.member_id == new_ada
    finally:
        copy.close()
    assert ada.read([private]).memories[0].audience.member_id == team.members["ada"]


@pytest.mark.parametrize("moment", ["members", "rows"])
def test_a_member_removed_during_the_export_keeps_what_the_archive_holds_of_theirs(
    stack: Stack,
    operator: Client,
    team: Team,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    moment: str,
) -> None:
    """Bob is removed, his memories handed to ada, while the export runs:
    as it reads the members ("members") or as it writes the rows ("rows").
    Whichever moment the archive shows, each memory's audience is among its
    members, so the copy holds the memories as they were then."""
    from services.store.domain.archive_export import Exporter
    from services.store.domain.control import ControlPlane

    bob = team.clients["bob"]
    private = bob.remember("Bob's reminder", "Bob prefers the Thursday sync.").memory.id
    shared = bob.remember("Bob's release notes", "Apollo ships.", audience_to="workspace")
    removed: list[bool] = []

    def remove_bob() -> None:
        if not removed:
            removed.append(True)
            operator.remove_member(team.members["bob"], "transfer", team.members["ada"])

    out = tmp_path / "archive"
    with dbutil.store_databases(stack) as dbs:
        control = ControlPlane(dbs)
        # The workspace's record read before, so that the export's one read
        # of the control plane is its members'.
        workspace = control.workspace(team.workspace_id)
        monkeypatch.setattr(control, "workspace", lambda *_args, **_kw: workspace)
        read_control = dbs.control_conn

        @contextmanager
        def control_conn() -> Iterator[psycopg.Connection]:
            if moment == "members":
                remove_bob()
            with read_control() as conn:
                yield conn

        monkeypatch.setattr(dbs, "control_conn", control_conn)
        Exporter(dbs, control).export(
            team.workspace_id,
            out,
            on_rows=lambda _n: remove_bob() if moment == "rows" else None,
        )
    assert removed, "the removal did not run during the export"
    members = {m["id"] for m in json.loads((out / fmt.WORKSPACE).read_text())["members"]}
    archived = {
        m["id"]: m for m in map(json.loads, (out / "memories.jsonl").read_text().splitlines())
    }
    audiences = {m["audience_member"] for m in archived.values() if m["forgotten_at"] is None}
    assert audiences - {None} <= members, "a memory's audience is no member of the archive"

    slug = f"copy-{uuid.uuid4().hex[:10]}"
    imported = cli(stack, "import", str(out), "--as", slug, "--json")
    assert imported.returncode == 0, imported.stderr
    made = json.loads(imported.stdout)
    assert made["left_out"]["private_memories"] == 0
    copied = {m["source_id"]: m["id"] for m in made["members"]}
    database = made_database(stack, made["workspace_id"])
    for memory_id, body in ((private, "Bob prefers the Thursday sync."),
                            (shared.memory.id, "Apollo ships.")):  # fmt: skip
        was = archived[memory_id]
        row = dbutil.query(
            stack,
            database,
            "SELECT invalidated_at IS NULL, body, audience_member_id::text, created_by::text"
            " FROM memory WHERE id = %s",
            (memory_id,),
        )
        audience = was["audience_member"]
        assert row == [
            (
                True,
                body,
                None if audience is None else copied[audience],
                copied.get(was["created_by"], was["created_by"]),
            )
        ]


def test_an_import_that_fails_at_its_last_step_leaves_no_workspace(
    stack: Stack, team: Team, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from recallatron import errors
    from services.store.domain.archive_import import Importer
    from services.store.domain.control import ControlPlane

    team.clients["ada"].remember("To be embedded", "queued in the copy", audience_to="workspace")
    out = tmp_path / "archive"
    assert cli(stack, "export", "--workspace", team.slug, "--out", str(out)).returncode == 0
    with dbutil.store_databases(stack) as dbs:
        control = ControlPlane(dbs)

        def unreachable(workspace_id: str) -> None:
            raise errors.Unavailable("control plane unavailable", 1.0)

        monkeypatch.setattr(control, "mark_work", unreachable)
        slug = f"copy-{uuid.uuid4().hex[:10]}"
        with pytest.raises(errors.Unavailable):
            Importer(dbs, control).import_archive(out, slug)
    assert not slug_exists(stack, slug)


def test_an_archives_bad_or_shared_member_handle_is_refused_by_its_record_before_anything_is_made(
    stack: Stack, team: Team, tmp_path: Path
) -> None:
    """workspace.json's member handles were not checked with the archive: a
    handle no member may have, or one handle given to two members, was found
    only when the import created that member, after the workspace and its
    database were made, and refused as 'handle: ...' or ALREADY_EXISTS
    'taken in this workspace', naming neither the file nor the record."""
    from recallatron import errors
    from services.store.domain import archive_plan as plan

    out = tmp_path / "a"
    assert cli(stack, "export", "--workspace", team.slug, "--out", str(out)).returncode == 0
    for i, (field, handle) in enumerate(
        (("members[1].handle", "not a handle!"), ("members[2].handle", "ada"))
    ):
        bad = tmp_path / f"handles-{i}"
        subprocess.run(["cp", "-r", str(out), str(bad)], check=True)
        workspace = json.loads((bad / fmt.WORKSPACE).read_text())
        workspace["members"].sort(key=lambda m: m["handle"])  # ada, bob, cy
        workspace["members"][int(field[8])]["handle"] = handle
        _replace(bad, fmt.WORKSPACE, json.dumps(workspace).encode())
        # The check that reads the archive, before the import makes anything.
        with pytest.raises(errors.InvalidArgument) as info:
            plan.read_archive(bad)
        assert info.value.field == f"{fmt.WORKSPACE}: {field}", info.value.message
        slug = f"bad-{uuid.uuid4().hex[:10]}"
        done = cli(stack, "import", str(bad), "--as", slug)
        assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
        assert f"{fmt.WORKSPACE}: {field}" in done.stderr, done.stderr
        assert not slug_exists(stack, slug)
