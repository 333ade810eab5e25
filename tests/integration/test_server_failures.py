"""A server that fails a workspace's life leaves the workspace as it was,
says nothing of a server's password, and answers a status a client can act
on: driven in this process (the store's own ControlPlane, Mover and
WorkspaceDeletion) on two embedded Postgres servers, without the services.
A move between two names of one server (docs/servers.md maps `default` and an
old `url-...` name to one URL), a move target that does not answer, a
subscription the target refuses (its statement lands in the target's server
log); creating or deleting on a server that is down; two creations of one
slug at once."""

from __future__ import annotations

import socket
import threading
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest

from recallatron_devkit.localpg import LocalPostgres
from recallatron_devkit.stack import free_port
from services.store.domain.control import ControlPlane
from services.store.domain.deletion import WorkspaceDeletion
from services.store.domain.moving import Mover
from services.store.infrastructure.db import CONTROL_DATABASE, Databases, with_database
from services.store.settings import StoreSettings
from tests.two_servers import before_step, drop_slots, store_on, take_slots
from tests.two_servers import servers as servers  # the fixture
from tests.two_servers import store as store  # the fixture

pytestmark = pytest.mark.integration


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _move_row(servers: dict[str, LocalPostgres], workspace_id: str) -> Any:
    with psycopg.connect(with_database(servers["default"].url, CONTROL_DATABASE)) as conn:
        return conn.execute(
            "SELECT source, target, state FROM workspace_move WHERE workspace_id = %s",
            (workspace_id,),
        ).fetchone()


def test_a_move_between_two_names_of_one_server_is_refused_and_keeps_the_data(
    servers: dict[str, LocalPostgres],
) -> None:
    """The move's CREATE DATABASE failed on the "target" (the database was
    there: it was the source), and its rollback then dropped that database."""
    from recallatron import errors

    dbs, control = store_on(servers, f"url-0123456789ab={servers['default'].url}")
    try:
        ws = control.create_workspace(f"alias-{uuid.uuid4().hex[:8]}", "url-0123456789ab")
        with pytest.raises(errors.FailedPrecondition) as info:
            Mover(dbs, control, lambda _: None).move(ws.id, "default")
        assert info.value.subject == "to" and "one Postgres server" in info.value.message
        with psycopg.connect(with_database(servers["default"].url, ws.database_name)) as conn:
            assert conn.execute("SELECT count(*) FROM schema_migration").fetchone()[0] > 0  # type: ignore[index]
        assert _move_row(servers, ws.id) is None
        assert control.workspace(ws.id, fresh=True).server == "url-0123456789ab"
    finally:
        dbs.close()


def test_a_move_to_a_server_that_does_not_answer_leaves_nothing_behind(
    servers: dict[str, LocalPostgres],
) -> None:
    """The move row was written before the target was first asked, and the
    rollback asked that target first: the row stayed, and the workspace
    could be neither deleted nor moved anywhere else."""
    dead = f"c=postgresql://postgres:pw1234secret@127.0.0.1:{_closed_port()}/postgres"
    dbs, control = store_on(servers, dead)
    try:
        ws = control.create_workspace(f"dead-{uuid.uuid4().hex[:8]}", "default")
        mover = Mover(dbs, control, lambda _: None)
        with pytest.raises(psycopg.OperationalError) as info:
            mover.move(ws.id, "c")
        assert "pw1234secret" not in str(info.value)
        assert _move_row(servers, ws.id) is None
        mover.move(ws.id, "b")
        assert control.workspace(ws.id, fresh=True).server == "b"
        WorkspaceDeletion(dbs, control).delete(ws.slug, ws.slug)
    finally:
        dbs.close()


def test_a_refused_subscription_leaves_no_password_in_the_target_server_log(
    servers: dict[str, LocalPostgres],
    store: tuple[Databases, ControlPlane],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The subscription's connection string holds the source's password;
    Postgres logs a statement that fails, and so wrote it to the target's log
    (here the source has no free replication slot: taken by others after the
    move found two, move_copy.check_replication_room)."""
    source = servers["default"]
    dbs, control = store
    taken: list[str] = []
    before_step(monkeypatch, "recorded", lambda: taken.extend(take_slots(source.url, "taken")))
    try:
        ws = control.create_workspace(f"slot-{uuid.uuid4().hex[:8]}", "default")
        with pytest.raises(psycopg.Error):
            Mover(dbs, control, lambda _: None).move(ws.id, "b")
        assert taken
        assert _move_row(servers, ws.id) is None
        log = Path(servers["b"].data_dir / "server.log").read_text(errors="replace")
        assert "CREATE SUBSCRIPTION" not in log or source.superuser_password not in log
        assert source.superuser_password not in log
    finally:
        drop_slots(source.url, taken)


def _workspace_databases(url: str) -> set[str]:
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT datname FROM pg_database WHERE datname LIKE 'ws%%'")
        return {r[0] for r in rows}


def test_creating_or_deleting_on_a_server_that_is_down_is_unavailable(
    servers: dict[str, LocalPostgres],
) -> None:
    """A bare connection error left the domain code: the client heard
    INTERNAL and did not retry (a deletion is finished by deleting again)."""
    from recallatron import errors

    dbs, control = store_on(servers)
    ws = control.create_workspace(f"down-{uuid.uuid4().hex[:8]}", "b")
    dbs.close()
    down = f"postgresql://postgres:pw1234secret@127.0.0.1:{_closed_port()}/postgres"
    settings = StoreSettings(
        database_url=servers["default"].url,
        app_password=servers["default"].app_password,
        postgres_servers=f"b={down}",
    )
    dbs = Databases(settings)
    dbs.bootstrap()
    control = ControlPlane(dbs)
    try:
        with pytest.raises(errors.Unavailable) as created:
            control.create_workspace(f"down-{uuid.uuid4().hex[:8]}", "b")
        with pytest.raises(errors.Unavailable) as deleted:
            WorkspaceDeletion(dbs, control).delete(ws.slug, ws.slug)
        for refused in (created.value, deleted.value):
            assert refused.retry_after > 0 and "pw1234secret" not in refused.message
    finally:
        dbs.close()


def test_two_creations_of_one_slug_leave_one_database(
    servers: dict[str, LocalPostgres], store: tuple[Databases, ControlPlane]
) -> None:
    """Both passed the slug check and made a database; the loser answered
    ALREADY_EXISTS and left its database behind, counted by nobody."""
    _, control = store
    before = _workspace_databases(servers["default"].url)
    slug = f"race-{uuid.uuid4().hex[:8]}"
    answers: list[str] = []
    together = threading.Barrier(2)

    def create() -> None:
        together.wait()
        try:
            answers.append(control.create_workspace(slug, "default").database_name)
        except Exception as exc:  # the loser's refusal, kept for the assertion
            answers.append(type(exc).__name__)

    threads = [threading.Thread(target=create) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    made = _workspace_databases(servers["default"].url) - before
    assert sorted(a == "AlreadyExists" for a in answers) == [False, True], answers
    assert made == {a for a in answers if a != "AlreadyExists"}


@pytest.mark.parametrize("to", ["", "B!", "nowhere"])
def test_a_move_to_no_configured_server_is_refused_naming_to(
    servers: dict[str, LocalPostgres], store: tuple[Databases, ControlPlane], to: str
) -> None:
    """`--to ''` meant the default server and ended in a database constraint's
    error; other bad names were refused naming `server`, not the option."""
    from recallatron import errors

    dbs, control = store
    ws = control.create_workspace(f"to-{uuid.uuid4().hex[:8]}", "b")
    with pytest.raises(errors.InvalidArgument) as info:
        Mover(dbs, control, lambda _: None).move(ws.id, to)
    assert info.value.field == "to"
    assert _move_row(servers, ws.id) is None


def test_two_spellings_of_one_server_share_one_connection_budget(
    servers: dict[str, LocalPostgres],
) -> None:
    """Budgets were shared only by names whose URLs spelled the same host and
    port: `localhost` beside `127.0.0.1` gave one server two budgets, and the
    process could hold twice what the start-up check had passed there."""
    pg = servers["default"]
    spelled = f"postgresql://postgres:{pg.superuser_password}@localhost:{pg.port}/postgres"
    dbs, _ = store_on(servers, f"other={spelled}", f"url-0123456789ab={pg.url}")
    try:
        dbs.ensure_all_servers()
        assert dbs.budget("other") is dbs.budget("default")
        assert dbs.budget("url-0123456789ab") is dbs.budget("default")
        assert dbs.budget("b") is not dbs.budget("default")
        assert len(dbs.budgets()) == 2
    finally:
        dbs.close()


def test_a_server_down_at_start_is_checked_against_its_budget_when_first_reached(
    servers: dict[str, LocalPostgres], tmp_path: Path
) -> None:
    """The start-up check ran only for servers up at the start: one that came
    up later served its workspaces over a budget it could not hold."""
    from recallatron import errors

    late = LocalPostgres(tmp_path / "late", free_port(), secrets_dir=tmp_path / "late-secrets")
    late.start()
    try:
        dbs, control = store_on(servers, f"late={late.url}")
        try:
            ws = control.create_workspace(f"late-{uuid.uuid4().hex[:8]}", "late")
        finally:
            dbs.close()
        late.stop()
        # Room for 25 - 3 reserved - 10 for operators = 12, where the store
        # and the job need 19 + 6 on a server other than the default.
        late.max_connections = 25
        dbs, control = store_on(servers, f"late={late.url}")
        try:
            dbs.ensure_all_servers()  # late is down: logged, not fatal
            late.start()
            for attempt in (
                lambda: dbs.app_pool("late", ws.database_name),
                lambda: control.create_workspace(f"late-{uuid.uuid4().hex[:8]}", "late"),
            ):
                with pytest.raises(errors.Unavailable) as info:
                    attempt()
                said = info.value.message
                assert "connection budget: server 'late'" in said, said
                assert "max_connections 25" in said and "\n" not in said
                assert late.superuser_password not in said
            with psycopg.connect(late.url) as conn:
                assert conn.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = %s",
                    (ws.database_name,),
                ).fetchone() == (0,)
        finally:
            dbs.close()
    finally:
        late.stop()


def test_a_server_that_never_answers_holds_neither_the_start_nor_a_call(
    servers: dict[str, LocalPostgres],
) -> None:
    """Admin connections had no connect timeout: a server whose port accepts
    and never answers (a hung host, a proxy with no backend) held the start
    (the app role set on every server) for ever, and, since a server is
    checked when first reached, each call for one of its workspaces held
    one of the process's two admin connections with it."""
    from recallatron import errors

    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(64)  # the kernel accepts; nobody ever answers
        port = silent.getsockname()[1]
        dbs, _ = store_on(
            servers, f"c=postgresql://postgres:pw1234secret@127.0.0.1:{port}/postgres"
        )
        try:
            done = threading.Event()
            errors_seen: list[BaseException] = []

            def start_then_call() -> None:
                try:
                    dbs.ensure_all_servers()  # c does not answer: logged, not fatal
                    with pytest.raises(errors.Unavailable):
                        dbs.app_pool("c", "ws_" + uuid.uuid4().hex)
                except BaseException as exc:  # kept for the assertion below
                    errors_seen.append(exc)
                finally:
                    done.set()

            threading.Thread(target=start_then_call, daemon=True).start()
            assert done.wait(120), "the start or the call still waits for the silent server"
            assert not errors_seen, errors_seen
        finally:
            dbs.close()


def test_servers_list_says_whether_each_server_answers(
    servers: dict[str, LocalPostgres],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`servers list` named each server with its workspaces and marks only:
    one stopped, or one whose port accepts and never answers, read as one
    that serves. Each is asked now, within a short limit, so the listing
    never waits on a silent one."""
    from recallatron_cli.main import main

    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(64)  # the kernel accepts; nobody ever answers
        quiet = f"postgresql://postgres:pw1234secret@127.0.0.1:{silent.getsockname()[1]}/postgres"
        monkeypatch.setenv("RECALLATRON_DATABASE_URL", servers["default"].url)
        monkeypatch.setenv("RECALLATRON_APP_PASSWORD", servers["default"].app_password)
        monkeypatch.setenv("RECALLATRON_APP_PASSWORD_SCRAM_ITERATIONS", "1")
        monkeypatch.setenv("RECALLATRON_POSTGRES_SERVERS", f"b={servers['b'].url},c={quiet}")
        servers["b"].stop()
        try:
            done = threading.Event()
            status: list[int] = []

            def listed() -> None:
                try:
                    status.append(main(["servers", "list"]))
                finally:
                    done.set()

            threading.Thread(target=listed, daemon=True).start()
            assert done.wait(120), "servers list still waits for a server that does not answer"
        finally:
            servers["b"].start()
    out, err = capsys.readouterr()
    assert status == [0], err
    rows = {line.split("\t")[0]: line.split("\t")[1:] for line in out.splitlines()}
    assert rows["default"][1:] == ["answers", "default"], out
    assert rows["b"][1:] == ["not answering"] and rows["c"][1:] == ["not answering"], out
    # Why, on stderr, and never a password.
    assert "server b does not answer" in err and "server c does not answer" in err, err
    assert "pw1234secret" not in out + err
