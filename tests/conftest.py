"""Session fixtures shared by the integration tests: prepared models and one
real stack (embedded Postgres in a temporary directory, the four services and
the embedding job as separate processes on free ports)."""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest

from recallatron.client import Client
from recallatron_devkit.stack import FAST_JOB, Stack, metrics_everywhere, own_config, running

# Tests that start processes of their own take their ports from here.
from recallatron_devkit.stack import free_port as free_port

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

# Ctrl-C as at a terminal, for this run and every process it starts. A run
# started in the background of a non-interactive shell (a CI script's `... &`)
# ignores SIGINT, children inherit an ignored signal, and Python installs its
# Ctrl-C handler only when SIGINT is not ignored: every test that stops a
# command or a load with SIGINT then waited for ever. A handled signal is back
# to its default in a child (exec), so one handler here serves them all.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


# Which services the session stack runs (all unless narrowed for debugging).
TEST_SERVICES = tuple(
    os.environ.get("RECALLATRON_TEST_SERVICES", "store,embed,rank,gateway").split(",")
)


# Fixtures that start something beyond the test's own process (Postgres and the
# services, model preparation, PyTorch, an embed process): a test that uses one,
# directly or through another fixture, must carry the `integration` marker
# (tests/README.md), so `make test-fast` never waits for a stack.
STACK_FIXTURES = frozenset(
    {"stack", "prepared_models_dir", "models_dir", "st_model", "start_embed"}
)


# Every run's temporary files in a directory of its own under the system's temp
# directory, not in pytest's shared /tmp/pytest-of-<user>: each pytest that
# starts resets that shared directory to 0700, and a Postgres of a run already
# going (its own user, as root runs it) then loses its way to its data
# directory mid-run. Removed after a run that passed; kept after a failure.
KEEP_TEMP_ENV = "RECALLATRON_KEEP_TEST_TEMP"
_OWN_BASETEMP = pytest.StashKey[Path]()


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    if config.option.basetemp is None:
        own = Path(tempfile.mkdtemp(prefix="recallatron-tests-"))
        config.option.basetemp = str(own)
        config.stash[_OWN_BASETEMP] = own


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    own = session.config.stash.get(_OWN_BASETEMP, None)
    if own is None:
        return
    if exitstatus == 0 and not os.environ.get(KEEP_TEMP_ENV):
        shutil.rmtree(own, ignore_errors=True)
    elif not own.is_dir():
        # Then every later use of tmp_path failed, and Postgres lost its data
        # directory: say so, rather than leave a run of unrelated errors.
        session.config.get_terminal_writer().line(
            f"the run's temporary directory {own} was removed while the tests ran"
        )
    else:
        # Free space too: a disk filled by other work fails tests at random.
        free = shutil.disk_usage(own).free / 2**30
        session.config.get_terminal_writer().line(
            f"temporary files kept in {own} ({free:.1f} GiB free on its disk)"
        )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    unmarked = [
        item.nodeid
        for item in items
        if STACK_FIXTURES & set(getattr(item, "fixturenames", ()))
        and item.get_closest_marker("integration") is None
    ]
    if unmarked:
        raise pytest.UsageError(
            "these tests use a stack fixture without the integration marker "
            "(tests/README.md): " + ", ".join(unmarked)
        )


# Generous: the machine is shared; nothing waited for here is a timing check.
WAIT_SECONDS = 120.0

T = TypeVar("T")


def wait_for(
    probe: Callable[[], T | None], what: str = "a condition", timeout: float = WAIT_SECONDS
) -> T:
    """Polls until ``probe`` returns something other than None or False."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value is not None and value is not False:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


@pytest.fixture(scope="session")
def prepared_models_dir() -> Path:
    """The bi-encoder exported to ONNX once (a no-op when already cached)."""
    from services.embed.prepare import prepare_bi_encoder
    from services.embed.settings import EmbedSettings

    directory = Path(EmbedSettings().models_dir)
    prepare_bi_encoder(directory, log=lambda _msg: None)
    return directory


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory, prepared_models_dir: Path) -> Iterator[Stack]:
    config = own_config(
        tmp_path_factory.mktemp("stack"),
        prepared_models_dir,
        env=FAST_JOB,
        services=TEST_SERVICES,
        metrics_ports=metrics_everywhere(TEST_SERVICES),
    )
    with running(Stack(config)) as started:
        yield started


def operator_of(stack: Stack) -> Iterator[Client]:
    """The body of an `operator` fixture: a client with the stack's operator token."""
    client = Client(stack.gateway, stack.admin_token)
    yield client
    client.close()


@pytest.fixture(scope="session")
def operator(stack: Stack) -> Iterator[Client]:
    yield from operator_of(stack)


@dataclass
class Team:
    """A fresh workspace with members, each with a client holding its token."""

    workspace_id: str
    database_name: str
    slug: str
    members: dict[str, str] = field(default_factory=dict)  # handle -> member id
    clients: dict[str, Client] = field(default_factory=dict)  # handle -> client
    token_ids: dict[str, str] = field(default_factory=dict)


def make_team(stack: Stack, operator: Client, handles: tuple[str, ...]) -> Team:
    slug = f"t-{uuid.uuid4().hex[:12]}"
    ws = operator.create_workspace(slug).workspace
    team = Team(ws.id, ws.database_name, slug)
    for i, handle in enumerate(handles):
        member = operator.create_member(ws.id, handle, owner=(i == 0)).member
        token = operator.create_token(member.id, "test")
        team.members[handle] = member.id
        team.clients[handle] = Client(stack.gateway, token.token)
        team.token_ids[handle] = token.token_id
    return team


@pytest.fixture
def team(stack: Stack, operator: Client) -> Iterator[Team]:
    """Owner `ada`, members `bob` and `cy`, in a workspace of their own."""
    t = make_team(stack, operator, ("ada", "bob", "cy"))
    yield t
    for client in t.clients.values():
        client.close()


# What the graph tests' favourite memory states: a mention, a claim, a
# relation and an alias of Robin Goodwin.
ROBIN_LEADS_APOLLO: dict[str, Any] = {
    "claims": [{"entity": {"name": "Robin Goodwin"}, "attribute": "city", "value": "Lisbon"}],
    "relations": [
        {"subject": {"name": "Robin Goodwin"}, "predicate": "leads", "object": {"name": "Apollo"}}
    ],
    "aliases": [{"entity": {"name": "Robin Goodwin"}, "alias": "Robin"}],
}


def remember_robin(client: Client, body: str, **more: Any) -> Any:
    """Remembers "Robin leads Apollo" with ``body``, stating
    ROBIN_LEADS_APOLLO; ``more`` adds or overrides remember's arguments."""
    args: dict[str, Any] = {"mention_names": ["Robin Goodwin"], **ROBIN_LEADS_APOLLO, **more}
    return client.remember("Robin leads Apollo", body, **args)
