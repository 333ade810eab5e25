"""The import layers, read from every .py file's syntax tree (nothing is
imported). A layer may import only what ALLOWED lists for it:

    recallatron/            the shared package: settings, logging, gRPC plumbing,
                            stubs, the client library, the tool catalogue, the
                            vocabulary
      <- services/<name>    each service: the shared package and itself only;
                            services never import each other
        <- recallatron_mcp/ the MCP server: the shared package only
        <- recallatron_devkit/ the dev kit: the local stack, embedded Postgres,
                            load, synthetic data, evaluation, plots, fixtures;
                            the shared package and services (it prepares their
                            fixtures; it runs them as processes)
          <- recallatron_cli/ the command: services (migrations, the embedding
                            job), the dev kit and recallatron_mcp (`recallatron mcp`)
          <- benchmarks/    services, the dev kit and recallatron_cli
          <- tests/         anything

and no modules of ours import each other in a circle, at any depth.

One edge runs between services, declared: the embedding job is the store's
worker on the store's workspace databases, so it may import the store's
infrastructure, SQL, settings and control plane, and nothing else of it.

Inside a service (ROOMS, ADAPTERS):

    services/store/api/             the gRPC adapters
      <- domain/                    rules and use cases, plain Python
        <- infrastructure/          connections, budget, listeners, migrations run
          <- sql/                   named queries, migrations (imports nothing of ours)
    legacy/ (the migration importer) stands beside api/; settings.py is read by all.

Only the adapter modules (ADAPTERS) import gRPC, the generated stubs or the
gRPC plumbing of the shared package.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SERVICES = ("embed", "embedding_job", "gateway", "rank", "store")
OURS = (
    "recallatron",
    "services",
    "recallatron_devkit",
    "recallatron_cli",
    "recallatron_mcp",
    "benchmarks",
    "tests",
)

_EVERY_SERVICE = {f"services.{s}" for s in SERVICES}
ALLOWED: dict[str, set[str]] = {
    "recallatron": {"recallatron"},
    "services": {"recallatron", "services"},
    **{f"services.{s}": {"recallatron", "services", f"services.{s}"} for s in SERVICES},
    # Declared: the job works on the store's databases (JOB_MAY_IMPORT below).
    "services.embedding_job": {
        "recallatron",
        "services",
        "services.embedding_job",
        "services.store",
    },
    "recallatron_mcp": {"recallatron", "recallatron_mcp"},
    "recallatron_devkit": {"recallatron", "services", *_EVERY_SERVICE, "recallatron_devkit"},
    "recallatron_cli": {
        "recallatron",
        "services",
        *_EVERY_SERVICE,
        "recallatron_devkit",
        "recallatron_cli",
        "recallatron_mcp",
    },
    "benchmarks": {
        "recallatron",
        "services",
        *_EVERY_SERVICE,
        "recallatron_devkit",
        "recallatron_cli",
        "benchmarks",
    },
    "tests": {"recallatron", "services", *_EVERY_SERVICE, "recallatron_devkit", "recallatron_cli"}
    | {"recallatron_mcp", "benchmarks", "tests"},
}


def layer(module: str) -> str | None:
    """'services.store.infrastructure.db' -> 'services.store'; 'recallatron.v1.x' -> 'recallatron';
    None for a module that is not ours."""
    parts = module.split(".")
    if parts[0] not in OURS:
        return None
    if parts[0] == "services" and len(parts) > 1:
        return f"services.{parts[1]}"
    return parts[0]


def imported(source: str, package: str) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in ``source``, at any depth
    (imports inside functions count); ``package`` resolves relative imports."""
    here = package.split(".")
    out: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = here[: len(here) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            # `from services import store` imports services.store.
            out += [(node.lineno, f"{module}.{alias.name}") for alias in node.names]
    return sorted(out)


def python_files() -> list[Path]:
    return sorted(p for top in OURS for p in (REPO / top).rglob("*.py"))


def violations() -> list[str]:
    found = []
    for path in python_files():
        parts = path.relative_to(REPO).with_suffix("").parts
        own = layer(".".join(parts))
        assert own is not None
        for line, module in imported(path.read_text(), ".".join(parts[:-1])):
            target = layer(module)
            if target is not None and target not in ALLOWED[own]:
                found.append(f"{path.relative_to(REPO)}:{line}: {own} imports {module}")
    return found


def test_every_import_runs_down_the_layers() -> None:
    assert python_files(), "no files scanned"
    assert violations() == []


def module_graph() -> dict[str, set[str]]:
    """Our modules, each with the modules of ours it imports."""
    sources = {}
    for path in python_files():
        parts = path.relative_to(REPO).with_suffix("").parts
        package = ".".join(parts[:-1])
        sources[package if parts[-1] == "__init__" else ".".join(parts)] = (path, package)
    graph: dict[str, set[str]] = {}
    for name, (path, package) in sources.items():
        graph[name] = set()
        for _, module in imported(path.read_text(), package):
            while module and module not in sources:  # `from m import name` -> m
                module = module.rpartition(".")[0]
            if module and module != name:
                graph[name].add(module)
    return graph


def test_no_modules_import_each_other_in_a_circle() -> None:
    graph = module_graph()
    done: set[str] = set()

    def visit(name: str, path: list[str]) -> None:
        if name in path:
            raise AssertionError("import cycle: " + " -> ".join([*path[path.index(name) :], name]))
        if name not in done:
            for dep in sorted(graph[name]):
                visit(dep, [*path, name])
            done.add(name)

    for name in sorted(graph):
        visit(name, [])


def test_layers_of_module_names() -> None:
    assert layer("services.gateway.server") == "services.gateway"
    assert layer("recallatron.v1.common_pb2") == "recallatron"
    assert layer("recallatron_cli") == "recallatron_cli"
    assert layer("grpc") is None


def test_relative_and_nested_imports_are_resolved() -> None:
    source = (
        "from . import server\nfrom ..store import db\n\n"
        "def f():\n    import recallatron_cli.main\n"
    )
    assert [m for _, m in imported(source, "services.gateway")] == [
        "services.gateway.server",
        "services.store.db",
        "recallatron_cli.main",
    ]


def test_upward_and_sideways_imports_are_refused() -> None:
    for own, target in [
        ("recallatron", "services.store"),
        ("recallatron", "recallatron_cli"),
        ("services.gateway", "services.store"),
        ("services.gateway", "recallatron_cli"),
        ("services.rank", "recallatron_mcp"),
        ("recallatron_mcp", "recallatron_cli"),
        ("recallatron_mcp", "services.gateway"),
        ("recallatron_cli", "benchmarks"),
        ("services.store", "recallatron_devkit"),
        ("services.embed", "recallatron_devkit"),
        ("recallatron_mcp", "recallatron_devkit"),
        ("recallatron_devkit", "recallatron_cli"),
        ("services.store", "tests"),
    ]:
        assert target not in ALLOWED[own], (own, target)


# -- inside a service --------------------------------------------------------------

STORE_ROOMS = ("api", "domain", "infrastructure", "sql", "legacy")
# What each room of services/store may import of the store.
ROOMS: dict[str, set[str]] = {
    "api": {"api", "domain", "infrastructure", "sql", "settings"},
    "legacy": {"legacy", "domain", "infrastructure", "sql", "settings"},
    "domain": {"domain", "infrastructure", "sql", "settings"},
    "infrastructure": {"infrastructure", "sql", "settings"},
    "sql": {"sql"},
    "settings": set(),
}
# The embedding job's declared edge into the store.
JOB_MAY_IMPORT = {
    "services.store.infrastructure",
    "services.store.sql",
    "services.store.settings",
    "services.store.domain.control",
}
# The modules that speak gRPC: the adapters, the processes' entries and the
# peer adapters. Nothing else imports grpc, the stubs or the gRPC plumbing.
ADAPTERS = {
    "services.embed.server",
    "recallatron_devkit.embed_fixture",
    "services.embed.__main__",
    "services.rank.server",
    "services.rank.peers",
    "services.rank.__main__",
    "services.embedding_job.embedder",
    "services.embedding_job.job",
    "services.embedding_job.__main__",
    "services.store.__main__",
    "services.store.api.server",
    "services.store.api.tool_server",
    "services.store.api.messages",
    "services.store.api.graph_adapter",
}
# The gateway is the public API's adapter throughout, except its capture rules.
GATEWAY_PLAIN = {"services.gateway.capture", "services.gateway.settings"}
GRPC_MODULES = (
    "grpc",
    "grpc_status",
    "grpc_health",
    "grpc_reflection",
    "recallatron.v1",
    "recallatron.grpcclient",
    "recallatron.grpcserver",
    "recallatron.peer",
    "recallatron.internal_auth",
    "recallatron.internal_channels",
)


def store_room(module: str) -> str | None:
    parts = module.split(".")
    if parts[:2] != ["services", "store"] or len(parts) < 3:
        return None
    return parts[2] if parts[2] in (*STORE_ROOMS, "settings") else "__main__"


def service_modules() -> list[tuple[str, Path]]:
    out = []
    for path in sorted((REPO / "services").rglob("*.py")):
        parts = path.relative_to(REPO).with_suffix("").parts
        out.append((".".join(parts), path))
    return out


def _package(module: str, path: Path) -> str:
    return module if path.name == "__init__.py" else module.rpartition(".")[0]


def room_violations(modules: list[tuple[str, Path]] | None = None) -> list[str]:
    found = []
    for module, path in service_modules() if modules is None else modules:
        own = store_room(module)
        for line, target in imported(path.read_text(), _package(module, path)):
            where = f"{path.name}:{line}"
            room = store_room(target)
            inside = own not in (None, "__main__") and room not in (None, "__main__")
            if inside and room not in ROOMS[str(own)]:
                found.append(f"{where}: store {own} imports {target}")
            job = module.startswith("services.embedding_job.")
            declared = any(target.startswith(m) for m in JOB_MAY_IMPORT)
            if job and target.startswith("services.store") and not declared:
                found.append(f"{where}: the embedding job imports {target}")
            speaks_grpc = any(target == m or target.startswith(m + ".") for m in GRPC_MODULES)
            adapter = module in ADAPTERS or (
                module.startswith("services.gateway.") and module not in GATEWAY_PLAIN
            )
            if speaks_grpc and not adapter and not module.endswith("__init__"):
                found.append(f"{where}: {module} is no adapter but imports {target}")
    return found


def test_the_rooms_inside_a_service_keep_their_order() -> None:
    assert {store_room(m) for m, _ in service_modules()} >= {*STORE_ROOMS, "settings"}
    assert room_violations() == []


def test_room_rules_refuse_what_runs_the_wrong_way() -> None:
    assert "api" not in ROOMS["domain"]
    assert "domain" not in ROOMS["infrastructure"]
    assert ROOMS["sql"] == {"sql"}
    assert store_room("services.store.domain.memories") == "domain"
    assert store_room("services.store.__main__") == "__main__"
    assert store_room("services.gateway.server") is None
    assert "services.store.api" not in JOB_MAY_IMPORT
    assert not any(m.startswith("services.store.domain.") for m in ADAPTERS)


def test_a_domain_module_speaking_grpc_or_importing_the_adapter_is_found(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import grpc\nfrom services.store.api import server\n")
    job = tmp_path / "job.py"
    job.write_text("from services.store.api.server import StoreServicer\n")
    found = room_violations(
        [("services.store.domain.bad", bad), ("services.embedding_job.job", job)]
    )
    assert found == [
        "bad.py:1: services.store.domain.bad is no adapter but imports grpc",
        "bad.py:2: store domain imports services.store.api.server",
        "job.py:1: the embedding job imports services.store.api.server.StoreServicer",
    ]
