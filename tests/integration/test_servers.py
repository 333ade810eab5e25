"""Several Postgres servers (issue 19, docs/servers.md): a stack with two real
embedded servers, `default` and `b`. Workspaces are placed on both (by name
or by the policy, which skips a draining server), every tool, recall in every
mode, the embedding job and dedup work on each, the control plane records
names only, an unknown name stops the store at start-up, and no URL or
password reaches an answer, an error, a log or a metric."""

from __future__ import annotations

import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import grpc
import psycopg
import pytest

from recallatron.client import Client
from recallatron_devkit.stack import FAST_JOB, Stack, metrics_everywhere, own_config, running
from services.store.infrastructure.db import CONTROL_DATABASE, with_database
from tests.conftest import operator_of
from tests.surfaces.dedup_data import NEAR_DUPLICATES

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def two(tmp_path_factory: pytest.TempPathFactory, prepared_models_dir: Path) -> Iterator[Stack]:
    config = own_config(
        tmp_path_factory.mktemp("two-servers"),
        prepared_models_dir,
        env=FAST_JOB,
        metrics_ports=metrics_everywhere(),
        extra_servers=("b",),
    )
    with running(Stack(config)) as stack:
        yield stack


@pytest.fixture(scope="module")
def operator(two: Stack) -> Iterator[Client]:
    yield from operator_of(two)


# Everything the stack answered, for the secrets check at the end.
ANSWERS: list[str] = []


def keep(resp: object) -> object:
    ANSWERS.append(str(resp))
    return resp


def refused(fn) -> grpc.RpcError:  # type: ignore[no-untyped-def]
    with pytest.raises(grpc.RpcError) as info:
        fn()
    ANSWERS.append(f"{info.value.code()} {info.value.details()}")
    return info.value


def admin_url(stack: Stack, server: str) -> str:
    pg = stack.postgres if server == "default" else stack.extra_postgres[server]
    assert pg is not None
    return pg.url


def databases_on(stack: Stack, server: str) -> set[str]:
    with psycopg.connect(admin_url(stack, server)) as conn:
        return {r[0] for r in conn.execute("SELECT datname FROM pg_database")}


def servers_cli(stack: Stack, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "recallatron_cli.main", "servers", *args],
        env=stack.env_for("store"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    ANSWERS.append(done.stdout + done.stderr)
    assert done.returncode == 0, done.stderr
    return done.stdout


def counts(stack: Stack) -> dict[str, int]:
    out = {}
    for line in servers_cli(stack, "list").splitlines():
        name, count, *_ = line.split("\t")
        out[name] = int(count.split()[0])
    return out


def new_workspace(operator: Client, server: str = "") -> tuple[str, str, str]:
    """(id, database name, recorded server) of a new workspace."""
    ws = keep(operator.create_workspace(f"s-{uuid.uuid4().hex[:10]}", server)).workspace  # type: ignore[attr-defined]
    return ws.id, ws.database_name, ws.server


def owner_client(stack: Stack, operator: Client, workspace_id: str) -> Client:
    member = keep(operator.create_member(workspace_id, "ada", owner=True)).member  # type: ignore[attr-defined]
    token = keep(operator.create_token(member.id, "servers-test")).token  # type: ignore[attr-defined]
    return Client(stack.gateway, token)


def test_named_placement_and_the_policy_use_both_servers(two: Stack, operator: Client) -> None:
    before = counts(two)
    assert set(before) == {"default", "b"}
    on_b = new_workspace(operator, "b")
    assert on_b[2] == "b" and on_b[1] in databases_on(two, "b")
    assert on_b[1] not in databases_on(two, "default")
    # The policy: the fewest workspaces; so two new ones land one on each
    # when the counts are level, and the emptier one gets the next.
    placed = [new_workspace(operator) for _ in range(3)]
    after = counts(two)
    assert sum(after.values()) == sum(before.values()) + 4
    assert abs(after["default"] - after["b"]) <= 1
    assert {p[2] for p in placed} == {"default", "b"}
    for _, database, server in placed:
        assert database in databases_on(two, server)
    # The control plane holds names, nothing else.
    with psycopg.connect(with_database(two.database_url, CONTROL_DATABASE)) as conn:
        recorded = {r[0] for r in conn.execute("SELECT DISTINCT server FROM workspace")}
    assert recorded == {"default", "b"}


def test_a_draining_server_gets_no_new_workspaces(two: Stack, operator: Client) -> None:
    placed_on_b = counts(two).get("b", 0)
    assert "draining" in servers_cli(two, "drain", "b")
    try:
        placed = {new_workspace(operator)[2] for _ in range(3)}
        assert placed == {"default"}
        err = refused(lambda: operator.create_workspace(f"s-{uuid.uuid4().hex[:10]}", "b"))
        assert err.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert err.details().startswith("server: 'b' is draining")
        # Nor is one moved there: draining closes a server to workspaces.
        workspace_id = new_workspace(operator)[0]
        move = ["move-workspace", workspace_id, "--to", "b"]
        moved = subprocess.run(
            [sys.executable, "-m", "recallatron_cli.main", *move],
            env=two.env_for("store"),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert moved.returncode != 0, moved.stdout
        assert "to: 'b' is draining" in moved.stderr, moved.stderr
        assert counts(two).get("b", 0) == placed_on_b
    finally:
        servers_cli(two, "undrain", "b")
    assert new_workspace(operator, "b")[2] == "b"


def test_an_unknown_server_name_is_refused_naming_the_field(two: Stack, operator: Client) -> None:
    err = refused(lambda: operator.create_workspace(f"s-{uuid.uuid4().hex[:10]}", "nowhere"))
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert err.details() == "server: unknown server 'nowhere'; configured: b, default"
    done = subprocess.run(
        [sys.executable, "-m", "recallatron_cli.main", "servers", "drain", "nowhere"],
        env=two.env_for("store"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    ANSWERS.append(done.stdout + done.stderr)
    assert done.returncode == 1
    assert "server: unknown server 'nowhere'" in done.stderr


@pytest.mark.parametrize("server", ["default", "b"])
def test_every_tool_works_on_each_server(two: Stack, operator: Client, server: str) -> None:
    workspace_id, database, recorded = new_workspace(operator, server)
    assert recorded == server
    ada = owner_client(two, operator, workspace_id)
    try:
        first = keep(
            ada.remember(
                "Kestrel deploys need the blue canary",
                "Every Kestrel deploy goes through the blue canary pool first.",
                kind="decision",
                audience_to="workspace",
                mention_names=["Kestrel"],
            )
        ).memory  # type: ignore[attr-defined]
        second = keep(ada.remember("Kestrel runs on the Tuesday train")).memory  # type: ignore[attr-defined]
        derived = keep(ada.derive([first.id, second.id], "Kestrel release notes")).memory  # type: ignore[attr-defined]
        assert [link.target.id for link in derived.links] == [first.id, second.id]
        corrected = keep(
            ada.correct(second.id, 1, "the train moved", body="Kestrel ships on Wednesdays.")
        ).memory  # type: ignore[attr-defined]
        assert corrected.revision == 2
        successor = keep(
            ada.supersede(corrected.id, 2, "Kestrel ships on Thursdays", reason="moved again")
        ).memory  # type: ignore[attr-defined]
        (a, b) = NEAR_DUPLICATES[0]
        dup1 = keep(ada.remember(*a)).memory.id  # type: ignore[attr-defined]
        dup2 = keep(ada.remember(*b)).memory.id  # type: ignore[attr-defined]
        gone = keep(ada.remember("A note to forget about Kestrel")).memory.id  # type: ignore[attr-defined]
        keep(ada.forget(gone, "not needed"))
        read = keep(ada.read([first.id, successor.id])).memories  # type: ignore[attr-defined]
        assert [m.id for m in read] == [first.id, successor.id]
        assert keep(ada.lookup("Kestrel")).entities  # type: ignore[attr-defined]
        # The embedding job serves this server too.
        keep(ada.wait_embedded(timeout=120))
        for mode in ("lexical", "dense", "hybrid"):
            outcome = keep(ada.recall("Kestrel blue canary deploys", mode=mode)).outcome  # type: ignore[attr-defined]
            ids = [r.memory.id for r in outcome.results]
            assert first.id in ids, mode
            assert gone not in ids, mode
            if mode != "lexical":
                assert outcome.dense_available, mode
        pairs = keep(ada.duplicate_pairs()).pairs  # type: ignore[attr-defined]
        assert frozenset((dup1, dup2)) in {frozenset((p.first.id, p.second.id)) for p in pairs}
        # The rows are on this server's database, and on no other.
        with psycopg.connect(with_database(admin_url(two, server), database)) as conn:
            count = conn.execute("SELECT count(*) FROM memory").fetchone()
        assert count is not None and count[0] == 7  # 6 remembered or derived, 1 successor
        other = "b" if server == "default" else "default"
        assert database not in databases_on(two, other)
    finally:
        ada.close()


def test_an_unknown_recorded_server_stops_the_store_at_start_up(
    two: Stack, operator: Client
) -> None:
    new_workspace(operator, "b")
    two.stop_service("store")
    two.config.env["RECALLATRON_POSTGRES_SERVERS"] = ""  # `b` no longer named
    try:
        two.start_service("store")
        proc = two.processes["store"]
        assert proc.wait(60) == 1
        log = (two.log_dir / "store.log").read_text()
        assert "workspaces are recorded on servers the settings do not name: 'b' (" in log
    finally:
        del two.config.env["RECALLATRON_POSTGRES_SERVERS"]
        two.restart_service("store")
    assert counts(two)["b"] >= 1  # served again, `b` included


def secrets_of(stack: Stack) -> list[str]:
    found = [stack.database_url, stack.servers_setting, stack.app_password]
    for pg in [stack.postgres, *stack.extra_postgres.values()]:
        assert pg is not None
        found += [pg.url, pg.superuser_password, pg.app_password, str(pg.passfile)]
    return [s for s in found if s]


def test_no_url_or_password_in_any_answer_log_or_metric(two: Stack) -> None:
    """Runs last in this module: after every call above."""
    assert len(ANSWERS) > 30
    metrics = []
    for port in two.config.metrics_ports.values():
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as page:
                metrics.append(page.read().decode())
        except OSError:
            continue
    assert metrics
    logs = [p.read_text(errors="replace") for p in sorted(two.log_dir.iterdir())]
    assert len(logs) >= 5
    texts = {"answers": "\n".join(ANSWERS), "metrics": "\n".join(metrics), "logs": "\n".join(logs)}
    for where, text in texts.items():
        for secret in secrets_of(two):
            assert secret not in text, f"a secret in the {where}"
