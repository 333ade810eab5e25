"""What an edited archive may not hold in its times and ids (docs/export.md,
"The schema"), refused naming its file, line and field before anything is
made, rather than by the database once the import has begun making the
workspace: a time no calendar has in any record. And what it may: ids in
any case, read as one id."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from recallatron_devkit.stack import Stack
from services.store.domain import archive_format as fmt
from tests import dbutil
from tests.clirun import cli
from tests.conftest import Team, wait_for
from tests.integration.test_export_import import build, made_database, rewrite, slug_exists
from tests.integration.test_import_refusals import copied

pytestmark = pytest.mark.integration

AT = "2026-12-01T10:00:00+00:00"
# Each passes the schema's pattern; Postgres refuses each.
NO_TIMES = (
    ("no such day", "2026-02-30T10:00:00+00:00"),
    ("no such hour", "2026-12-01T25:00:00+00:00"),
    ("no such offset", "2026-12-01T10:00:00+16:00"),
)
# Every time field of every record file but merges.jsonl (test_import_merges).
TIME_FIELDS = (
    ("memories", "created_at"),
    ("memories", "updated_at"),
    ("memories", "forgotten_at"),
    ("revisions", "changed_at"),
    ("entities", "created_at"),
    ("mentions", "mentioned_at"),
    ("aliases", "stated_at"),
    ("aliases", "retired_at"),
    ("attribute_claims", "valid_from"),
    ("attribute_claims", "valid_until"),
    ("attribute_claims", "stated_at"),
    ("attribute_claims", "retired_at"),
    ("relation_claims", "valid_from"),
    ("relation_claims", "valid_until"),
    ("relation_claims", "stated_at"),
    ("relation_claims", "retired_at"),
    ("episodes", "started_at"),
    ("episodes", "ended_at"),
    ("episodes", "created_at"),
    ("pairs_apart", "decided_at"),
    ("dismissed_pairs", "dismissed_at"),
    ("history", "occurred_at"),
    ("vectors", "created_at"),
)


def imported(stack: Stack, archive: Path) -> dict[str, Any]:
    done = cli(stack, "import", str(archive), "--as", f"copy-{uuid.uuid4().hex[:10]}", "--json")
    assert done.returncode == 0, done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def attempt(stack: Stack, archive: Path, said: str) -> str | None:
    """None when the import is refused saying ``said`` and makes nothing;
    else what it did."""
    slug = f"bad-{uuid.uuid4().hex[:10]}"
    done = cli(stack, "import", str(archive), "--as", slug)
    if done.returncode != 1 or said not in done.stderr:
        return f"exit {done.returncode}: {done.stderr.strip()[-300:]}"
    if slug_exists(stack, slug):
        return "the workspace was made"
    return None


def every_record(stack: Stack, team: Team, tmp_path: Path) -> Path:
    """An archive holding a record of every file (a kept-apart pair and a
    history turn added as an export writes them), which imports."""
    build(team)
    wait_for(
        lambda: (
            dbutil.query(stack, team.database_name, "SELECT count(*) FROM embedding_job") == [(0,)]
        ),
        "the embedding job",
    )
    out = tmp_path / "every"
    done = cli(stack, "export", "--workspace", team.slug, "--out", str(out), "--vectors")
    assert done.returncode == 0, done.stderr
    entities = [json.loads(x)["id"] for x in (out / "entities.jsonl").read_text().splitlines()]
    first, second = sorted(entities)[:2]
    ada = team.members["ada"]
    apart = {"first_id": first, "second_id": second, "decided_by": ada, "decided_at": AT}
    turn = {"id": str(uuid.uuid4()), "owner_member": ada, "chat_id": "c1", "role": "user",
            "text": "hello", "occurred_at": AT}  # fmt: skip
    rewrite(out, "pairs_apart", lambda rows: rows.append(apart))
    rewrite(out, "history", lambda rows: rows.append(turn))
    return out


def test_a_time_no_calendar_has_is_refused_in_every_file_naming_its_field(
    stack: Stack, team: Team, tmp_path: Path
) -> None:
    """Only merges.jsonl's times were checked: 30 February, a 25th hour or an
    offset from UTC past 15:59 elsewhere (a memory's, a revision's, a claim's
    valid_from, a vector's, ...) was refused by the database after the
    workspace was made, naming no record, or failed reading the archive with
    a traceback (a claim's stated_at, a memory's created_at)."""
    out = every_record(stack, team, tmp_path)
    counts = imported(stack, out)["counts"]
    assert all(counts[kind] for kind, _ in TIME_FIELDS), counts
    wrong: dict[str, str] = {}
    for n, (kind, field) in enumerate(TIME_FIELDS):
        shape, value = NO_TIMES[n % len(NO_TIMES)]
        edited = copied(out, tmp_path / f"{kind}-{field}")

        def change(rows: list[dict[str, Any]], field: str = field, value: str = value) -> None:
            rows[0][field] = value

        rewrite(edited, kind, change)
        said = attempt(stack, edited, f"{kind}.jsonl line 1: {field}: is no time")
        if said is not None:
            wrong[f"{kind}.{field} ({shape})"] = said
    edited = copied(out, tmp_path / "manifest")
    manifest = json.loads((edited / fmt.MANIFEST).read_text())
    manifest["exported_at"] = NO_TIMES[0][1]
    (edited / fmt.MANIFEST).write_text(json.dumps(manifest))
    said = attempt(stack, edited, "manifest.json: exported_at: is no time")
    if said is not None:
        wrong["manifest.exported_at"] = said
    assert not wrong, "\n".join(f"{name}: {said}" for name, said in wrong.items())


def _set_member_id(archive: Path, handle: str, spelled: str) -> None:
    """workspace.json's member ``handle`` given the id ``spelled``, its
    digest in the manifest fixed."""
    path = archive / fmt.WORKSPACE
    workspace = json.loads(path.read_text())
    next(m for m in workspace["members"] if m["handle"] == handle)["id"] = spelled
    path.write_text(json.dumps(workspace))
    manifest = json.loads((archive / fmt.MANIFEST).read_text())
    manifest["files"][fmt.WORKSPACE]["sha256"] = fmt.sha256_of(path)
    (archive / fmt.MANIFEST).write_text(json.dumps(manifest))


def test_an_id_in_any_case_is_one_id_and_given_twice_so_is_refused(
    stack: Stack, team: Team, tmp_path: Path
) -> None:
    """The schema takes a UUID in upper case, but the import compared ids as
    written: a memory's or an entity's id in upper case, which the records
    naming it spell in lower case, was refused as naming nothing ('names no
    memory of the archive'); a member's id so spelt was not mapped, the copy
    attributing the memory to nobody it has; one entity given twice, spelt
    two ways, was refused only by the database once the workspace was made;
    a merge of an entity into itself spelt two ways passed as two entities."""
    ada, bob = team.clients["ada"], team.clients["bob"]
    mine = ada.remember(
        "Apollo status", "Apollo is on.", audience_to="workspace",
        claims=[{"entity": {"name": "Apollo"}, "attribute": "status", "value": "on"}],
    ).memory  # fmt: skip
    apollo = mine.mentions[0].entity_id
    theirs = bob.remember("Bob's note", "About Apollo.", audience_to="workspace").memory
    out = tmp_path / "a"
    assert cli(stack, "export", "--workspace", team.slug, "--out", str(out)).returncode == 0
    ada_id, bob_id = team.members["ada"], team.members["bob"]

    def upper(kind: str, key: str, value: str, fields: tuple[str, ...]) -> Any:
        def change(rows: list[dict[str, Any]]) -> None:
            row = next(r for r in rows if r[key] == value)
            for f in fields:
                row[f] = row[f].upper()

        return change

    edited = copied(out, tmp_path / "spelt")
    rewrite(edited, "memories", upper("memories", "id", mine.id, ("id", "created_by")))
    rewrite(edited, "entities", upper("entities", "id", apollo, ("id",)))
    _set_member_id(edited, "bob", bob_id.upper())
    members = tmp_path / "members.json"
    members.write_text(json.dumps({"members": [{"source": ada_id.upper()}, {"source": "bob"}]}))
    done = cli(stack, "import", str(edited), "--as", f"copy-{uuid.uuid4().hex[:10]}",
               "--members", str(members), "--json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    new = {m["handle"]: m["id"] for m in report["members"]}
    database = made_database(stack, report["workspace_id"])
    by = "SELECT id::text, created_by::text FROM memory WHERE id = ANY(%s) ORDER BY created_at"
    assert dbutil.query(stack, database, by, ([mine.id, theirs.id],)) == [
        (mine.id, new["ada"]),
        (theirs.id, new["bob"]),
    ]
    joined = (
        "SELECT (SELECT count(*) FROM memory_revision WHERE memory_id = %s)"
        ", (SELECT count(*) FROM attribute_claim WHERE memory_id = %s AND entity_id = %s)"
        ", (SELECT count(*) FROM mention WHERE memory_id = %s AND entity_id = %s)"
    )
    asked = (mine.id, mine.id, apollo, mine.id, apollo)
    assert dbutil.query(stack, database, joined, asked) == [(1, 1, 1)]

    entities = len((out / "entities.jsonl").read_text().splitlines())
    twice = copied(out, tmp_path / "twice")

    def again(rows: list[dict[str, Any]]) -> None:
        rows.append({**next(r for r in rows if r["id"] == apollo), "id": apollo.upper()})

    rewrite(twice, "entities", again)
    said = attempt(stack, twice, f"entities.jsonl line {entities + 1}: id: is not unique")
    assert said is None, said
    itself = copied(out, tmp_path / "itself")
    merge = {
        "id": str(uuid.uuid4()), "kept_id": apollo, "merged_id": apollo.upper(),
        "decided_by": ada_id, "decided_at": AT, "undone_by": None, "undone_at": None,
    }  # fmt: skip
    rewrite(itself, "merges", lambda rows: rows.append(merge))
    said = attempt(stack, itself, "merges.jsonl line 1: merged_id: names the kept entity")
    assert said is None, said


def test_a_pair_out_of_order_of_itself_or_given_twice_is_refused_naming_it(
    stack: Stack, team: Team, tmp_path: Path
) -> None:
    """A kept-apart or dismissed pair is written with its lower id first, once
    (the tables' check and key): one edited the other way round, pairing an
    entity (or memory) with itself, or given twice in either order was refused
    by the database after the workspace was made, naming no record."""
    ada = team.clients["ada"]
    first, second = sorted(
        m.entity_id
        for m in ada.remember("Two", "two entities", mention_names=["Ann", "Bea"]).memory.mentions
    )
    notes = sorted(
        ada.remember(title, title, audience_to="workspace").memory.id for title in ("One", "Two")
    )
    out = tmp_path / "a"
    assert cli(stack, "export", "--workspace", team.slug, "--out", str(out)).returncode == 0
    who = team.members["ada"]
    kinds = {
        "pairs_apart": ((first, second), {"decided_by": who, "decided_at": AT}),
        "dismissed_pairs": (tuple(notes), {"dismissed_by": who, "dismissed_at": AT}),
    }
    wrong: dict[str, str] = {}
    for kind, ((low, high), by) in kinds.items():

        def pair(a: str, b: str, by: dict[str, str] = by) -> dict[str, str]:
            return {"first_id": a, "second_id": b, **by}

        shapes = {
            "reversed": ([pair(high, low)], "line 1: first_id: is after second_id"),
            "itself": ([pair(low, low.upper())], "line 1: second_id: is first_id"),
            "twice": ([pair(low, high), pair(low, high)], "line 2: second_id: the pair is"),
            "twice reversed": ([pair(low, high), pair(high, low)], "line 2: first_id: is after"),
        }
        for shape, (pairs, said) in shapes.items():
            edited = copied(out, tmp_path / f"{kind}-{shape.replace(' ', '-')}")
            rewrite(edited, kind, lambda rows, pairs=pairs: rows.extend(pairs))
            what = attempt(stack, edited, f"{kind}.jsonl {said}")
            if what is not None:
                wrong[f"{kind} {shape}"] = what
        edited = copied(out, tmp_path / f"{kind}-once")
        rewrite(edited, kind, lambda rows, low=low, high=high: rows.append(pair(low, high)))
        assert imported(stack, edited)["counts"][kind] == 1
    assert not wrong, "\n".join(f"{name}: {said}" for name, said in wrong.items())


def test_times_later_than_the_clock_are_copied_as_they_are_and_counted(
    stack: Stack, team: Team, tmp_path: Path
) -> None:
    """A source whose clock ran ahead wrote times later than the import's
    clock (a memory's created_at, a revision's, a merge's decided_at): the
    copy holds them as the source did, and the report counts the records
    holding such a time the service writes as it happens, so the operator
    knows; a claim's valid_until, which a caller gives, is no such time. The
    import said nothing of them."""
    ada = team.clients["ada"]
    made = ada.remember(
        "Apollo status", "Apollo is on.", audience_to="workspace",
        mention_names=["Ann", "Bea"],
        claims=[{"entity": {"name": "Apollo"}, "attribute": "status", "value": "on"}],
    ).memory  # fmt: skip
    ann, bea = sorted(m.entity_id for m in made.mentions if m.name in ("Ann", "Bea"))
    out = tmp_path / "a"
    assert cli(stack, "export", "--workspace", team.slug, "--out", str(out)).returncode == 0
    ahead = "2099-01-01T10:00:00+00:00"

    def later(key: str, value: str, fields: tuple[str, ...]) -> Any:
        def change(rows: list[dict[str, Any]]) -> None:
            for f in fields:
                next(r for r in rows if r[key] == value)[f] = ahead

        return change

    rewrite(out, "memories", later("id", made.id, ("created_at", "updated_at")))
    rewrite(out, "revisions", later("memory_id", made.id, ("changed_at",)))
    rewrite(out, "attribute_claims", later("memory_id", made.id, ("valid_until",)))
    merge = {
        "id": str(uuid.uuid4()), "kept_id": ann, "merged_id": bea,
        "decided_by": team.members["ada"], "decided_at": ahead,
        "undone_by": None, "undone_at": None,
    }  # fmt: skip
    rewrite(out, "merges", lambda rows: rows.append(merge))
    done = cli(stack, "import", str(out), "--as", f"copy-{uuid.uuid4().hex[:10]}", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["times_ahead"] == {"memories": 1, "revisions": 1, "merges": 1}
    again = tmp_path / "again"
    assert cli(stack, "export", "--workspace", report["slug"], "--out", str(again)).returncode == 0

    def times(archive: Path, kind: str, *fields: str) -> list[tuple[str, ...]]:
        rows = [json.loads(x) for x in (archive / f"{kind}.jsonl").read_text().splitlines()]
        return sorted(tuple(r[f] for f in fields) for r in rows)

    for kind, fields in (
        ("memories", ("id", "created_at", "updated_at")),
        ("revisions", ("memory_id", "changed_at")),
        ("attribute_claims", ("id", "valid_until")),
        ("merges", ("id", "decided_at")),
    ):
        assert times(again, kind, *fields) == times(out, kind, *fields), kind
    said = cli(stack, "import", str(out), "--as", f"copy-{uuid.uuid4().hex[:10]}")
    assert said.returncode == 0, said.stderr
    assert "3 records hold a time later than this host's clock" in said.stderr, said.stderr


def test_a_span_that_ends_before_it_begins_is_refused_naming_its_end(
    stack: Stack, team: Team, tmp_path: Path
) -> None:
    """A claim's valid_until before its valid_from, or an episode's ended_at
    before its started_at (each refused by every write, and by the tables'
    checks) was refused by the database after the workspace was made,
    naming no record. An alias's, a claim's or a relation's retired_at
    before its stated_at is imported as it stands: two readings of the
    server's clock at two writes, which a clock stepped back between them
    leaves so in a database no write refused (test_clock_step_archive.py)."""
    ada = team.clients["ada"]
    ada.remember(
        "Robin leads Apollo", "Robin leads Apollo.", audience_to="workspace",
        claims=[{"entity": {"name": "Apollo"}, "attribute": "status", "value": "on"}],
        relations=[{"subject": {"name": "Robin"}, "predicate": "leads",
                    "object": {"name": "Apollo"}}],
        aliases=[{"entity": {"name": "Apollo"}, "alias": "the moonshot"}],
    )  # fmt: skip
    ada.create_episode("Kickoff", "2025-03-01T09:00:00Z", "2025-03-01T11:00:00Z")
    out = tmp_path / "a"
    assert cli(stack, "export", "--workspace", team.slug, "--out", str(out)).returncode == 0
    spans = (
        ("attribute_claims", "valid_from", "valid_until", True),
        ("relation_claims", "valid_from", "valid_until", True),
        ("episodes", "started_at", "ended_at", True),
        ("aliases", "stated_at", "retired_at", False),
        ("attribute_claims", "stated_at", "retired_at", False),
        ("relation_claims", "stated_at", "retired_at", False),
    )
    wrong: dict[str, str] = {}
    for kind, begins, ends, refused in spans:
        edited = copied(out, tmp_path / f"{kind}-{ends}")

        def change(rows: list[dict[str, Any]], begins: str = begins, ends: str = ends) -> None:
            rows[0][begins], rows[0][ends] = "2025-03-01T11:00:00+00:00", "2025-03-01T10:00:00Z"

        rewrite(edited, kind, change)
        if refused:
            said = attempt(stack, edited, f"{kind}.jsonl line 1: {ends}: is before {begins}")
        else:
            done = cli(stack, "import", str(edited), "--as", f"ok-{uuid.uuid4().hex[:10]}")
            said = None if done.returncode == 0 else f"exit {done.returncode}: {done.stderr}"
        if said is not None:
            wrong[f"{kind}.{ends}"] = said
    assert not wrong, "\n".join(f"{name}: {said}" for name, said in wrong.items())


def test_a_link_mention_or_history_turn_given_twice_is_refused_naming_it(
    stack: Stack, team: Team, tmp_path: Path
) -> None:
    """A link or a mention line given twice (their tables' keys), or a
    history turn repeating another's id (in another case, too), was refused
    by the database after the workspace was made, naming no record."""
    ada = team.clients["ada"]
    source = ada.remember("Source", "about Apollo", audience_to="workspace",
                          mention_names=["Apollo"]).memory  # fmt: skip
    ada.derive([source.id], "Derived", "from the source")
    out = tmp_path / "a"
    assert cli(stack, "export", "--workspace", team.slug, "--out", str(out)).returncode == 0
    turn = {"id": str(uuid.uuid4()), "owner_member": team.members["ada"], "chat_id": "c1",
            "role": "user", "text": "hello", "occurred_at": AT}  # fmt: skip
    again = {**turn, "id": turn["id"].upper(), "text": "hello again"}
    shapes: dict[str, tuple[str, Any, str]] = {
        "links": ("links", lambda rows: rows.append(dict(rows[0])), "target_id: the link is"),
        "mentions": ("mentions", lambda rows: rows.append(dict(rows[0])), "entity_id: the"),
        "history": ("history", lambda rows: rows.extend([turn, again]), "id: is not unique"),
    }
    wrong: dict[str, str] = {}
    for name, (kind, change, said) in shapes.items():
        edited = copied(out, tmp_path / name)
        rewrite(edited, kind, change)
        line = len((edited / f"{kind}.jsonl").read_text().splitlines())
        what = attempt(stack, edited, f"{kind}.jsonl line {line}: {said}")
        if what is not None:
            wrong[name] = what
    assert not wrong, "\n".join(f"{name}: {said}" for name, said in wrong.items())
