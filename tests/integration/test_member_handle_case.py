"""A member's handle is one in any case within a workspace: "bob" and "Bob"
cannot both be members (people and the audit log could not tell them apart);
the second is refused ALREADY_EXISTS naming handle, nothing made. Members an
older database already holds in both cases are left as they were by the
migration (the later ones marked), and no new one joins them."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import grpc
import psycopg
import pytest
from psycopg import sql

from recallatron import errors
from recallatron.client import Client
from recallatron_devkit.stack import Stack
from services.store.domain import archive_format as fmt
from services.store.domain.control import ControlPlane
from services.store.infrastructure import migrate
from services.store.infrastructure.db import CONTROL_DATABASE, with_database
from services.store.legacy.importer import resolve_target
from tests import dbutil
from tests.clirun import cli
from tests.conftest import Team
from tests.integration.test_export_import import _replace
from tests.integration.test_import_refusals import copied, refused
from tests.security.test_member_removal import error

pytestmark = pytest.mark.integration

# The migration that makes handles one in any case.
FOLDING = "0015_member_handle_case"


def test_a_handle_differing_only_in_case_is_refused(operator: Client, team: Team) -> None:
    before = operator.list_members(team.workspace_id, include_removed=True).members
    owner = team.clients["ada"]
    for client, handle in ((operator, "Bob"), (operator, "BOB"), (owner, "bOb")):
        exc = error(lambda c=client, h=handle: c.create_member(team.workspace_id, h))  # type: ignore[misc]
        assert exc.code() == grpc.StatusCode.ALREADY_EXISTS, exc.details()
        assert str(exc.details()).startswith("handle:"), exc.details()
        assert "'bob'" in str(exc.details()), exc.details()
    after = operator.list_members(team.workspace_id, include_removed=True).members
    assert [m.id for m in after] == [m.id for m in before]
    # A removed member's handle stays theirs, in any case.
    operator.remove_member(team.members["cy"], "erase")
    exc = error(lambda: operator.create_member(team.workspace_id, "Cy"))
    assert exc.code() == grpc.StatusCode.ALREADY_EXISTS, exc.details()
    # Another workspace's "Bob" is another member.
    other = operator.create_workspace(f"t-{uuid.uuid4().hex[:12]}").workspace
    assert operator.create_member(other.id, "Bob").member.handle == "Bob"


NEW_MEMBER = "INSERT INTO member (id, workspace_id, handle, role) VALUES (%s, %s, %s, 'member')"


def _add(conn: psycopg.Connection, workspace_id: str, handle: str) -> None:
    conn.execute(NEW_MEMBER, (str(uuid.uuid4()), workspace_id, handle))


def _new_database(stack: Stack) -> str:
    name = f"ctl_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(stack.database_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return with_database(stack.database_url, name)


def test_the_migration_keeps_members_an_older_database_holds_in_both_cases(stack: Stack) -> None:
    url = _new_database(stack)
    assert FOLDING in [v for v, _ in migrate.migration_files("control")]
    migrate.apply_migrations(url, "control", before=FOLDING)
    ws, other = str(uuid.uuid4()), str(uuid.uuid4())
    with psycopg.connect(url, autocommit=True) as conn:
        for wid, slug in ((ws, "old"), (other, "other")):
            conn.execute(
                "INSERT INTO workspace (id, slug, server, database_name)"
                " VALUES (%s, %s, 'default', %s)",
                (wid, slug, f"ws_{slug}"),
            )
        for wid, handle in ((ws, "bob"), (ws, "Bob"), (ws, "BOB"), (ws, "ada"), (other, "Bob")):
            _add(conn, wid, handle)
    assert FOLDING in migrate.apply_migrations(url, "control")
    with psycopg.connect(url, autocommit=True) as conn:
        kept = conn.execute(
            'SELECT handle FROM member WHERE workspace_id = %s ORDER BY handle COLLATE "C"',
            (ws,),
        ).fetchall()
        assert [r[0] for r in kept] == ["BOB", "Bob", "ada", "bob"]
        twins = conn.execute(
            "SELECT handle FROM member WHERE handle_case_twin ORDER BY created_at"
        ).fetchall()
        assert [r[0] for r in twins] == ["Bob", "BOB"]  # the oldest, bob, keeps its place
        # No new member joins them in another case; another handle is free.
        with pytest.raises(psycopg.errors.UniqueViolation):
            _add(conn, ws, "bOB")
        with pytest.raises(psycopg.errors.UniqueViolation):
            _add(conn, ws, "ADA")
        _add(conn, ws, "cy")


def test_a_handle_named_in_any_case_finds_the_member_spelled_so_first(
    stack: Stack, team: Team
) -> None:
    """The old store's migration names its owner by handle (--owner): any
    case finds them; of members an older database holds in two cases (made
    here as the migration marks them), the one spelled so, and a spelling
    that is neither is refused as naming both."""
    twin = str(uuid.uuid4())
    dbutil.query(
        stack,
        CONTROL_DATABASE,
        "INSERT INTO member (id, workspace_id, handle, role, handle_case_twin)"
        " VALUES (%s, %s, 'Ada', 'owner', true) RETURNING id",
        (twin, team.workspace_id),
    )
    with dbutil.store_databases(stack) as dbs:
        control = ControlPlane(dbs)
        assert resolve_target(dbs, control, team.slug, "ada").owner_id == team.members["ada"]
        assert resolve_target(dbs, control, team.slug, "Ada").owner_id == twin
        with pytest.raises(errors.InvalidArgument) as refused:
            resolve_target(dbs, control, team.slug, "ADA")
        assert refused.value.field == "--owner", refused.value
        assert "'ada', 'Ada'" in str(refused.value)


def _imported_members(stack: Stack, archive: Path, *more: str) -> list[tuple[str, bool]]:
    """The copy's members, oldest first, each with its handle_case_twin mark."""
    done = cli(
        stack, "import", str(archive), "--as", f"copy-{uuid.uuid4().hex[:10]}", *more, "--json"
    )
    assert done.returncode == 0, done.stderr
    rows = dbutil.query(
        stack, CONTROL_DATABASE,
        "SELECT handle, handle_case_twin FROM member WHERE workspace_id = %s"
        " ORDER BY created_at, id",
        (json.loads(done.stdout)["workspace_id"],),
    )  # fmt: skip
    return [(str(r[0]), bool(r[1])) for r in rows]


def test_an_import_gives_no_member_a_handle_another_has_in_another_case(
    stack: Stack, team: Team, tmp_path: Path
) -> None:
    """A members file giving a member of the copy a handle another one has in
    another case was imported, the later marked a twin as if an older
    database had held both: refused, naming the entry that gives it, nothing
    made. An archive's own members in two cases (a store's that holds them
    so) are kept as the migration keeps them: the oldest keeps the handle,
    whatever order a members file lists them in."""
    out = tmp_path / "a"
    assert cli(stack, "export", "--workspace", team.slug, "--out", str(out)).returncode == 0
    members = tmp_path / "members.json"
    for listed, field in (
        ([{"source": "ada"}, {"source": "bob", "handle": "Ada"}], "members[1].handle"),
        ([{"source": "ada", "handle": "BOB"}, {"source": "bob"}], "members[0].handle"),
        (
            [{"source": "ada"}, {"source": "bob", "handle": "x"}, {"source": "cy", "handle": "X"}],
            "members[2].handle",
        ),
    ):
        members.write_text(json.dumps({"members": listed}))
        error = refused(stack, out, "--members", str(members))
        assert f"members file: {field}: " in error and "in any case" in error, error

    # Cy as 'Bob', later than 'bob' (the archive lists its members oldest first).
    twins = copied(out, tmp_path / "twins")
    workspace = json.loads((twins / fmt.WORKSPACE).read_text())
    assert [m["handle"] for m in workspace["members"]] == ["ada", "bob", "cy"]
    workspace["members"][2]["handle"] = "Bob"
    _replace(twins, fmt.WORKSPACE, json.dumps(workspace).encode())
    kept = [("ada", False), ("bob", False), ("Bob", True)]
    assert _imported_members(stack, twins) == kept
    members.write_text(json.dumps({"members": [{"source": s} for s in ("Bob", "bob", "ada")]}))
    assert _imported_members(stack, twins, "--members", str(members)) == kept
    # Neither of them takes the handle in yet another case beside the other.
    listed = [{"source": "ada"}, {"source": "bob"}, {"source": "Bob", "handle": "BOB"}]
    members.write_text(json.dumps({"members": listed}))
    error = refused(stack, twins, "--members", str(members))
    assert "members file: members[2].handle: " in error and "in any case" in error, error


def test_a_members_files_source_names_a_handle_in_any_case(
    stack: Stack, team: Team, tmp_path: Path
) -> None:
    """A members file's source found a handle only as spelt ('ADA' was 'the
    archive has no member'), though the control plane finds a handle in any
    case: now the member spelt so, else the oldest holding it in another
    case; an entry naming a member another entry names in another case is
    refused as listing it twice, nothing made."""
    out = tmp_path / "a"
    assert cli(stack, "export", "--workspace", team.slug, "--out", str(out)).returncode == 0
    members = tmp_path / "members.json"
    members.write_text(json.dumps({"members": [{"source": "ADA"}, {"source": "Cy"}]}))
    assert _imported_members(stack, out, "--members", str(members)) == [
        ("ada", False),
        ("cy", False),
    ]
    members.write_text(json.dumps({"members": [{"source": "ada"}, {"source": "Ada"}]}))
    error = refused(stack, out, "--members", str(members))
    assert "members file: members[1].source: member 'ada' is listed twice" in error, error

    # Cy as 'Bob', later than 'bob': 'BOB' names bob, the oldest.
    twins = copied(out, tmp_path / "twins")
    workspace = json.loads((twins / fmt.WORKSPACE).read_text())
    workspace["members"][2]["handle"] = "Bob"
    _replace(twins, fmt.WORKSPACE, json.dumps(workspace).encode())
    members.write_text(json.dumps({"members": [{"source": "ada"}, {"source": "BOB"}]}))
    assert _imported_members(stack, twins, "--members", str(members)) == [
        ("ada", False),
        ("bob", False),
    ]
