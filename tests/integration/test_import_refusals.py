"""What an import refuses before it makes anything, through the command an
operator runs (docs/export.md): a hand-edited archive that gives a
forgotten memory its text back or holds a claim about an entity its memory
does not mention, a members file that leaves the copy without an owner.
And what it writes as every other path does: a memory's text in NFC,
whatever form the archive holds it in."""

from __future__ import annotations

import json
import unicodedata
import uuid
from pathlib import Path
from typing import Any

import pytest

from recallatron.vocabulary import MAX_BODY, MAX_CLAIM_VALUE, MAX_ENTITY_NAME, MAX_REASON, MAX_TITLE
from recallatron_devkit.stack import Stack
from tests import dbutil
from tests.clirun import cli
from tests.conftest import Team
from tests.integration.test_export_import import made_database, rewrite, slug_exists

pytestmark = pytest.mark.integration

FORGOTTEN = "OSPREY7160"  # in a memory forgotten before the export


def refused(stack: Stack, archive: Path, *more: str) -> str:
    slug = f"bad-{uuid.uuid4().hex[:10]}"
    done = cli(stack, "import", str(archive), "--as", slug, *more)
    assert done.returncode == 1, done.stdout
    assert "Traceback" not in done.stderr, done.stderr
    assert not slug_exists(stack, slug)
    return done.stderr


def copied(archive: Path, to: Path) -> Path:
    """A copy of ``archive`` at ``to``, to edit."""
    to.mkdir()
    for f in archive.iterdir():
        (to / f.name).write_bytes(f.read_bytes())
    return to


def test_a_tombstone_given_its_text_back_is_refused_and_nothing_is_made(
    stack: Stack, team: Team, tmp_path: Path
) -> None:
    """A forgotten memory's forget reason, edited into an archive, was
    imported: the copy's tombstone held text its source had erased. A title
    or body was refused only by the database, after the workspace was made,
    naming neither the record nor the field and quoting the text."""
    ada = team.clients["ada"]
    gone = ada.remember("The code", f"it opens with {FORGOTTEN}", audience_to="workspace").memory
    ada.forget(gone.id, "recorded by mistake")
    out = tmp_path / "a"
    assert cli(stack, "export", "--workspace", team.slug, "--out", str(out)).returncode == 0
    lines = [json.loads(x) for x in (out / "memories.jsonl").read_text().splitlines()]
    line = 1 + next(i for i, m in enumerate(lines) if m["id"] == gone.id)

    def put_back(field: str, value: str) -> Any:
        def change(rows: list[dict[str, Any]]) -> None:
            next(r for r in rows if r["id"] == gone.id)[field] = value

        return change

    for field in ("title", "body"):
        edited = copied(out, tmp_path / f"edited-{field}")
        rewrite(edited, "memories", put_back(field, f"the safe opens with {FORGOTTEN}"))
        error = refused(stack, edited)
        assert f"memories.jsonl line {line}: {field}" in error and "forgotten" in error, error
        assert FORGOTTEN not in error  # the refusal does not repeat the text either

    revisions = [json.loads(x) for x in (out / "revisions.jsonl").read_text().splitlines()]
    forget = 1 + next(
        i for i, r in enumerate(revisions) if r["memory_id"] == gone.id and r["action"] == "forget"
    )

    def give_reason(rows: list[dict[str, Any]]) -> None:
        rows[forget - 1]["reason"] = f"it said the safe opens with {FORGOTTEN}"

    edited = copied(out, tmp_path / "edited-reason")
    rewrite(edited, "revisions", give_reason)
    error = refused(stack, edited)
    assert f"revisions.jsonl line {forget}: reason" in error and "forgotten" in error, error


def test_a_claim_about_an_entity_its_memory_does_not_mention_gets_that_mention(
    stack: Stack, team: Team, tmp_path: Path
) -> None:
    """An archive without the mention of a relation's end by the memory
    stating it (edited, or exported from a workspace written before every
    write made those mentions) was imported as it was: neighbors from the
    other end then answered INTERNAL in the copy (the walk could not place an
    end nobody could see). The copy now holds the mention every write makes."""
    stated = team.clients["ada"].remember(
        "Robin leads Apollo",
        relations=[
            {"subject": {"name": "Robin Goodwin"}, "predicate": "leads",
             "object": {"name": "Apollo"}},
        ],
        audience_to="workspace",
    ).memory  # fmt: skip
    ids = {m.name: m.entity_id for m in stated.mentions}
    out = tmp_path / "a"
    assert cli(stack, "export", "--workspace", team.slug, "--out", str(out)).returncode == 0
    mentioned = "SELECT entity_id::text FROM mention WHERE memory_id = %s ORDER BY 1"
    for name in ("Apollo", "Robin Goodwin"):
        edited = copied(out, tmp_path / f"without-{name.split()[0]}")

        def drop(rows: list[dict[str, Any]], entity: str = ids[name]) -> None:
            rows[:] = [r for r in rows if r["entity_id"] != entity]

        rewrite(edited, "mentions", drop)
        assert ids[name] not in (edited / "mentions.jsonl").read_text()
        slug = f"copy-{uuid.uuid4().hex[:10]}"
        done = cli(stack, "import", str(edited), "--as", slug, "--json")
        assert done.returncode == 0, done.stderr
        database = made_database(stack, json.loads(done.stdout)["workspace_id"])
        assert dbutil.query(stack, database, mentioned, (stated.id,)) == [
            (e,) for e in sorted(ids.values())
        ], name


def test_a_members_file_naming_no_owner_is_refused_and_nothing_is_made(
    stack: Stack, team: Team, tmp_path: Path
) -> None:
    """A members file listing members only (or nobody) made a copy without
    an owner: nobody could add a member, make a token or change a setting
    there but the operator, where a workspace's last owner cannot even be
    removed."""
    out = tmp_path / "a"
    assert cli(stack, "export", "--workspace", team.slug, "--out", str(out)).returncode == 0
    members = tmp_path / "members.json"
    for listed in ([{"source": "bob"}, {"source": "cy"}], [{"source": "ada", "role": "member"}]):
        members.write_text(json.dumps({"members": listed}))
        error = refused(stack, out, "--members", str(members))
        assert "members file: members: gives the copy no owner" in error, error
    members.write_text(json.dumps({"members": [{"source": "bob", "role": "owner"}]}))
    slug = f"copy-{uuid.uuid4().hex[:10]}"
    done = cli(stack, "import", str(out), "--as", slug, "--members", str(members), "--json")
    assert done.returncode == 0, done.stderr
    assert [(m["handle"], m["role"]) for m in json.loads(done.stdout)["members"]] == [
        ("bob", "owner")
    ]


def test_a_memorys_text_is_imported_in_nfc_as_every_write_stores_it(
    stack: Stack, team: Team, tmp_path: Path
) -> None:
    """The import writes its rows with the memory table's triggers off, the
    one that keeps text in NFC among them (migration 0038): an archive
    holding decomposed text (one written by hand, or exported before 0038)
    was imported as it was: its words became other lexemes than the same
    words typed (a query is normalised to NFC), so lexical recall missed them."""
    ada = team.clients["ada"]
    made = ada.remember("Café hours", "the café opens at nine", audience_to="workspace").memory
    out = tmp_path / "a"
    assert cli(stack, "export", "--workspace", team.slug, "--out", str(out)).returncode == 0

    def decompose(rows: list[dict[str, Any]]) -> None:
        row = next(r for r in rows if r["id"] == made.id)
        for field in ("title", "body"):
            row[field] = unicodedata.normalize("NFD", row[field])

    rewrite(out, "memories", decompose)
    assert "cafe\\u0301" in (out / "memories.jsonl").read_text()  # as JSON escapes it
    slug = f"copy-{uuid.uuid4().hex[:10]}"
    done = cli(stack, "import", str(out), "--as", slug, "--json")
    assert done.returncode == 0, done.stderr
    database = made_database(stack, json.loads(done.stdout)["workspace_id"])
    text = "SELECT title, body FROM memory WHERE id = %s"
    # As the store wrote it in the source: composed.
    assert dbutil.query(stack, database, text, (made.id,)) == [(made.title, made.body)]
    assert unicodedata.is_normalized("NFC", made.title + made.body)
    lexemes = "SELECT lexeme FROM term_stat WHERE lexeme LIKE 'caf%%' ORDER BY lexeme"
    assert dbutil.query(stack, database, lexemes) == dbutil.query(
        stack, team.database_name, lexemes
    )


def test_text_past_every_writes_limits_is_refused_naming_the_record_and_field(
    stack: Stack, team: Team, tmp_path: Path
) -> None:
    """An archive edited to hold what no write may store (a title past
    MAX_TITLE, a body past MAX_BODY, an entity name past MAX_ENTITY_NAME, an
    attribute that is no identifier, a claim value or a revision's reason
    past its limit) was imported as it was: the copy held memories and claims
    no tool could have written and that a correct could not write back."""
    ada = team.clients["ada"]
    ada.remember(
        "Robin leads Apollo",
        "Robin Goodwin leads Apollo.",
        audience_to="workspace",
        claims=[{"entity": {"name": "Apollo"}, "attribute": "status", "value": "on"}],
        aliases=[{"entity": {"name": "Apollo"}, "alias": "Apollo project"}],
    )
    out = tmp_path / "a"
    assert cli(stack, "export", "--workspace", team.slug, "--out", str(out)).returncode == 0
    edits: list[tuple[str, str, Any]] = [
        ("memories", "title", "t" * (MAX_TITLE + 1)),
        ("memories", "body", "b" * (MAX_BODY + 1)),
        ("revisions", "reason", "r" * (MAX_REASON + 1)),
        ("entities", "name", "n" * (MAX_ENTITY_NAME + 1)),
        ("entities", "type", "Not An Identifier"),
        ("aliases", "alias", "a" * (MAX_ENTITY_NAME + 1)),
        ("attribute_claims", "attribute", "Status!"),
        ("attribute_claims", "value", "v" * (MAX_CLAIM_VALUE + 1)),
    ]
    for n, (kind, field, value) in enumerate(edits):
        edited = copied(out, tmp_path / f"edited-{n}")

        def change(rows: list[dict[str, Any]], field: str = field, value: Any = value) -> None:
            rows[0][field] = value

        rewrite(edited, kind, change)
        error = refused(stack, edited)
        assert f"{kind}.jsonl line 1: {field}" in error, (kind, field, error)


def test_a_revision_given_twice_is_refused_naming_it(
    stack: Stack, team: Team, tmp_path: Path
) -> None:
    """A revision line copied in an archive was imported as it was
    (memory_revision has no key of its own): the copy's history of that
    memory held the change twice."""
    ada = team.clients["ada"]
    made = ada.remember("Release day", "Friday", audience_to="workspace").memory
    ada.correct(made.id, made.revision, "moved", body="Monday")
    out = tmp_path / "a"
    assert cli(stack, "export", "--workspace", team.slug, "--out", str(out)).returncode == 0
    edits: list[tuple[str, Any]] = [("doubled", lambda rows: rows.append(dict(rows[-1])))]
    for name, change in edits:
        edited = copied(out, tmp_path / name)
        rewrite(edited, "revisions", change)
        count = len((edited / "revisions.jsonl").read_text().splitlines())
        error = refused(stack, edited)
        assert f"revisions.jsonl line {count}: revision" in error, (name, error)


def test_a_supersede_chain_leading_back_to_a_memory_is_refused_naming_it(
    stack: Stack, team: Team, tmp_path: Path
) -> None:
    """A memory edited to be its own successor was refused only by the
    database, after the workspace was made, quoting the memory's whole row
    (its text too) and naming no record or field; two memories edited to
    supersede each other were imported, and forgetting one of them in the
    copy answered INTERNAL (its successor became the other's, which no
    memory may be of itself)."""
    ada = team.clients["ada"]
    first = ada.remember("Alpha", f"alpha {FORGOTTEN}", audience_to="workspace").memory
    second = ada.remember("Beta", "beta", audience_to="workspace").memory
    third = ada.remember("Gamma", "gamma", audience_to="workspace").memory
    out = tmp_path / "a"
    assert cli(stack, "export", "--workspace", team.slug, "--out", str(out)).returncode == 0
    lines = [json.loads(x)["id"] for x in (out / "memories.jsonl").read_text().splitlines()]
    shapes = {
        "itself": {first.id: first.id},
        "two": {first.id: second.id, second.id: first.id},
        "three": {first.id: second.id, second.id: third.id, third.id: first.id},
    }
    for name, successors in shapes.items():
        edited = copied(out, tmp_path / name)

        def change(rows: list[dict[str, Any]], successors: dict[str, str] = successors) -> None:
            for r in rows:
                r["superseded_by"] = successors.get(r["id"], r["superseded_by"])

        rewrite(edited, "memories", change)
        error = refused(stack, edited)
        line = 1 + min(lines.index(m) for m in successors)
        assert f"memories.jsonl line {line}: superseded_by" in error, (name, error)
        assert FORGOTTEN not in error, (name, error)


def test_a_name_that_folds_to_nothing_visible_is_copied_as_it_was(
    stack: Stack, team: Team, tmp_path: Path
) -> None:
    """Writes and lookups refuse an entity name or alias that folds to
    nothing visible (only accents, only zero-width characters), but a
    workspace written before that rule may hold one: its archive must still
    import, the copy holding what the source held (a refusal left its owner
    editing the archive by hand to move the workspace)."""
    ada = team.clients["ada"]
    ada.remember(
        "Apollo",
        "The Apollo project.",
        audience_to="workspace",
        aliases=[{"entity": {"name": "Apollo"}, "alias": "Apollo project"}],
    )
    out = tmp_path / "a"
    assert cli(stack, "export", "--workspace", team.slug, "--out", str(out)).returncode == 0
    for n, name in enumerate(("\u0301\u0301", " \u200d\ufeff ")):
        for kind, field in (("entities", "name"), ("aliases", "alias")):
            edited = copied(out, tmp_path / f"edited-{kind}-{n}")

            def change(rows: list[dict[str, Any]], field: str = field, name: str = name) -> None:
                rows[0][field] = name

            rewrite(edited, kind, change)
            slug = f"kept-{uuid.uuid4().hex[:10]}"
            done = cli(stack, "import", str(edited), "--as", slug)
            assert done.returncode == 0, done.stderr
            again = tmp_path / f"again-{kind}-{n}"
            assert cli(stack, "export", "--workspace", slug, "--out", str(again)).returncode == 0
            rows = [json.loads(x) for x in (again / f"{kind}.jsonl").read_text().splitlines()]
            assert [r[field] for r in rows] == [name], (kind, rows)
