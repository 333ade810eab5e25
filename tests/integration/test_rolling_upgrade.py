"""A rolling upgrade mixes versions: for a while old and new pods of each
Deployment serve side by side (docs/kubernetes.md, "Upgrades"). Here the
previous version's code (the base commit of scripts/wire_base.sh, the same
one `make buf-breaking` compares the protos with) runs next to the current
stack, in both directions:

- the old gateway in front of the current store and rank;
- the current gateway in front of the old rank, which calls the current
  store and embed.

Through each, the tools an agent uses most work end to end, and every peer
method the old gateway, rank and embedding job hold is still served with the
same messages (an internal RPC may go only once no previous peer calls it).
The old code runs from a `git archive` of the base commit, on the current
environment."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import descriptor_pool

from recallatron.client import Client
from recallatron.grpcclient import make_channel, peer_serving
from recallatron_devkit.stack import Stack
from tests.conftest import wait_for

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def old_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = subprocess.run(
        [str(REPO / "scripts" / "wire_base.sh")], capture_output=True, text=True, check=True
    ).stdout.strip()
    tree = tmp_path_factory.mktemp("base") / base[:12]
    tree.mkdir()
    archive = subprocess.run(
        ["git", "archive", base], cwd=REPO, capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    return tree


class Processes:
    """Extra service processes beside the session stack, stopped at the end."""

    def __init__(self, stack: Stack, run_dir: Path) -> None:
        self.stack = stack
        self.run_dir = run_dir
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(
        self, name: str, tree: Path, settings: dict[str, str] | None = None, **targets: str
    ) -> str:
        """Starts services.<name> from ``tree`` on a free port; its address.
        ``settings``: environment variables set last, over the defaults here."""
        env = self.stack.env_for(name)
        port_file = self.run_dir / f"{name}-{uuid.uuid4().hex[:6]}.port"
        env.update(
            {
                f"RECALLATRON_{name.upper()}_LISTEN": "127.0.0.1:0",
                "RECALLATRON_PORT_FILE": str(port_file),
                # The session stack's processes hold these.
                "RECALLATRON_METRICS_PORT": "0",
                "RECALLATRON_REVIEW_LISTEN": "0",
                "RECALLATRON_HTTP_LISTEN": "0",
                # Its own port files: the session stack's (run/http.port,
                # run/review.port) name the stack's gateway to later tests.
                "RECALLATRON_HTTP_PORT_FILE": str(self.run_dir / f"{port_file.stem}.http.port"),
                "RECALLATRON_REVIEW_PORT_FILE": str(self.run_dir / f"{port_file.stem}.review.port"),
                "PYTHONPATH": str(tree),
                **{f"RECALLATRON_{peer.upper()}_TARGET": t for peer, t in targets.items()},
                **(settings or {}),
            }
        )
        env.pop("PYTHONSAFEPATH", None)
        where = subprocess.run(
            [sys.executable, "-c", f"import services.{name} as m; print(m.__file__)"],
            cwd=tree,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        assert where.startswith(str(tree)), f"services.{name} would come from {where}"
        log = (self.run_dir / f"{port_file.stem}.log").open("wb")
        proc = subprocess.Popen(
            [sys.executable, "-m", f"services.{name}"], cwd=tree, env=env, stdout=log, stderr=log
        )
        self.procs.append(proc)
        port = wait_for(
            lambda: (
                (proc.poll() is None or pytest.fail(f"{name} exited: see {log.name}"))
                and port_file.exists()
                and port_file.read_text().strip()
            ),
            f"{name} from {tree} to bind",
        )
        address = f"127.0.0.1:{port}"
        channel = make_channel(address)
        try:
            wait_for(lambda: peer_serving(channel), f"{name} from {tree} to serve")
        finally:
            channel.close()
        return address

    def stop(self) -> None:
        for proc in self.procs:
            proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()


@pytest.fixture(scope="module")
def extra(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Processes]:
    procs = Processes(stack, tmp_path_factory.mktemp("upgrade"))
    yield procs
    procs.stop()


def exercise(gateway: str, operator_token: str) -> None:
    """Admin calls, then the write and read tools and recall in both arms."""
    admin = Client(gateway, operator_token)
    ws = admin.create_workspace(f"upg-{uuid.uuid4().hex[:10]}").workspace
    member = admin.create_member(ws.id, "ada", owner=True).member
    others = [admin.create_member(ws.id, handle).member for handle in ("cy", "bob")]
    client = Client(gateway, admin.create_token(member.id, "upgrade").token)
    try:
        # Members a page at a time (a gateway that knows no paging passes the
        # fields on), and every one in one answer for a request without them.
        first = admin.list_members_page(ws.slug, False, 2)
        rest = admin.list_members_page(ws.slug, False, 2, first.next_page_token)
        assert [m.handle for m in [*first.members, *rest.members]] == ["ada", "bob", "cy"]
        assert not rest.next_page_token
        whole = client.list_members_page()
        assert [m.handle for m in whole.members] == ["ada", "bob", "cy"]
        assert not whole.next_page_token
        # Tokens a page at a time, by member; a gateway that knows no paging
        # drops the page fields and answers the whole list, never a cut one.
        for other in others:
            admin.create_token(other.id, "upgrade")
        listed = client.list_tokens_page()
        assert [t.member_handle for t in listed.tokens] == ["ada", "bob", "cy"]
        assert not listed.next_page_token
        paged: list[Any] = []
        token = ""
        while True:
            page = admin.list_tokens_page("", ws.id, 2, token)
            paged.extend(page.tokens)
            if not (token := page.next_page_token):
                break
        assert paged == list(listed.tokens)
        assert client.list_tokens() == listed
        made = client.remember(
            "The backup window is 02:00 to 03:00 UTC",
            "Nightly database backups run between two and three in the morning.",
            mention_names=["backups"],
        ).memory
        assert made.revision == 1
        fixed = client.correct(
            made.id, 1, "the window moved", body="Backups now run from 01:00 to 02:00 UTC."
        )
        assert fixed.memory.revision == 2
        assert client.read([made.id]).memories[0].body.startswith("Backups now run")
        lexical = client.recall("backup window", mode="lexical").outcome
        assert [r.memory.id for r in lexical.results] == [made.id]
        # The entity cards, and for the owner a history search (this
        # workspace has none), whichever of gateway and rank asks the store.
        named = client.recall("what about the backups?", mode="lexical", include_history=True)
        assert [c.name for c in named.outcome.entities] == ["backups"]
        assert [r.memory.id for r in named.outcome.results] == [made.id]
        assert not named.outcome.history
        client.wait_embedded(timeout=120)
        dense = client.recall("when do the nightly copies of the data happen", mode="dense")
        assert dense.outcome.dense_available, dense.outcome.dense_unavailable_reason
        assert made.id in [r.memory.id for r in dense.outcome.results]
        client.forget(made.id, "superseded by the new schedule")
        deadline = time.monotonic() + 30
        while client.recall("backup window", mode="lexical").outcome.results:
            assert time.monotonic() < deadline, "a forgotten memory is still recalled"
            time.sleep(0.2)
    finally:
        client.close()
        admin.close()


def test_the_previous_gateway_works_against_the_current_store_and_rank(
    stack: Stack, old_tree: Path, extra: Processes
) -> None:
    gateway = extra.start(
        "gateway", old_tree, store=stack.address("store"), rank=stack.address("rank")
    )
    exercise(gateway, stack.admin_token)


def test_the_current_gateway_works_against_the_previous_rank(
    stack: Stack, old_tree: Path, extra: Processes
) -> None:
    rank = extra.start("rank", old_tree, store=stack.address("store"), embed=stack.address("embed"))
    gateway = extra.start("gateway", REPO, store=stack.address("store"), rank=rank)
    exercise(gateway, stack.admin_token)


# Run in the old tree: every peer method its services hold in a module-level
# name or table (recallatron.peer.Method), as (path, request, response).
PEER_METHODS = """
import importlib, json, pkgutil
from recallatron.peer import Method
found = set()
for package in ("services.gateway", "services.rank", "services.embedding_job"):
    for info in pkgutil.walk_packages(importlib.import_module(package).__path__, package + "."):
        if info.name.endswith("__main__"):
            continue
        for value in vars(importlib.import_module(info.name)).values():
            for item in value.values() if isinstance(value, dict) else (value,):
                if isinstance(item, Method):
                    found.add((item.path, item.request_type.DESCRIPTOR.full_name,
                               item.response_type.DESCRIPTOR.full_name))
print(json.dumps(sorted(found)))
"""


def unserved(methods: list[tuple[str, str, str]]) -> list[str]:
    """The methods the current protos do not serve with the same messages."""
    from recallatron.v1 import embed_pb2, gateway_pb2, rank_pb2, store_pb2, tools_pb2  # noqa: F401

    pool = descriptor_pool.Default()
    missing = []
    for path, request, response in methods:
        service, name = path.strip("/").split("/")
        try:
            found = pool.FindServiceByName(service).methods_by_name[name]
        except KeyError:
            missing.append(path)
            continue
        if (found.input_type.full_name, found.output_type.full_name) != (request, response):
            missing.append(f"{path} ({request} -> {response})")
    return missing


def test_every_method_the_previous_peers_call_is_still_served(old_tree: Path) -> None:
    listed = subprocess.run(
        [sys.executable, "-c", PEER_METHODS],
        cwd=old_tree,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(old_tree)},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    methods = [tuple(m) for m in json.loads(listed.stdout)]
    # The old gateway calls the store and rank through this table.
    assert any("/recallatron.v1.StoreService/" in m[0] for m in methods), methods
    assert unserved(methods) == []
