"""The import layers, read from every .py file's syntax tree (nothing is
imported). A layer may import only what ALLOWED lists for it:

    recallatron/            the shared package: settings, logging, gRPC plumbing,
                            stubs, the client library, the tool catalogue, the
                            vocabulary
      <- services/<name>    each service: the shared package and itself only;
                            services never import each other
        <- recallatron_mcp/ the MCP server: the shared package only
        <- recallatron_cli/ the command: services (the stack, migrations, the
                            embedding job) and recallatron_mcp (`recallatron mcp`)
        <- benchmarks/      services and recallatron_cli (the stack, the load tool)
          <- tests/         anything

and no modules of ours import each other in a circle, at any depth.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SERVICES = ("embed", "gateway", "rank", "store")
OURS = ("recallatron", "services", "recallatron_cli", "recallatron_mcp", "benchmarks", "tests")

_EVERY_SERVICE = {f"services.{s}" for s in SERVICES}
ALLOWED: dict[str, set[str]] = {
    "recallatron": {"recallatron"},
    "services": {"recallatron", "services"},
    **{f"services.{s}": {"recallatron", "services", f"services.{s}"} for s in SERVICES},
    "recallatron_mcp": {"recallatron", "recallatron_mcp"},
    "recallatron_cli": {
        "recallatron",
        "services",
        *_EVERY_SERVICE,
        "recallatron_cli",
        "recallatron_mcp",
    },
    "benchmarks": {"recallatron", "services", *_EVERY_SERVICE, "recallatron_cli", "benchmarks"},
    "tests": {"recallatron", "services", *_EVERY_SERVICE, "recallatron_cli", "recallatron_mcp"}
    | {"benchmarks", "tests"},
}


def layer(module: str) -> str | None:
    """'services.store.db' -> 'services.store'; 'recallatron.v1.x' -> 'recallatron';
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
        ("services.store", "tests"),
    ]:
        assert target not in ALLOWED[own], (own, target)
