"""The audit actions an owner may filter on (recallatron.vocabulary.AUDIT_ACTIONS)
are exactly those the code writes: every statement inserting into audit_log is
found in the source, and the action each of its callers gives, followed through
the functions that pass an ``action`` on, is a literal of the vocabulary. A new
action written, or a writer whose action cannot be traced, fails here."""

from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass, field
from pathlib import Path

from recallatron.vocabulary import AUDIT_ACTIONS

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("services", "recallatron", "recallatron_cli", "recallatron_mcp", "recallatron_devkit")
INSERT = re.compile(
    r"INSERT\s+INTO\s+audit_log\s*\(([^)]*)\)\s*(?:VALUES\s*\(|SELECT\s)(.*)", re.I | re.S
)
LITERAL = re.compile(r"'([a-z_]+)'")


@dataclass
class Scan:
    """What the source writes: the literal actions, and what could not be traced."""

    actions: set[str] = field(default_factory=set)
    untraced: list[str] = field(default_factory=list)


def _sources() -> dict[str, ast.Module]:
    out = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "/v1/" in path.as_posix():  # generated stubs
                continue
            module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            out[module] = ast.parse(path.read_text(), str(path))
    return out


def _action_in(sql: str) -> tuple[str | None, int | None]:
    """The literal action of an audit insert, or the index of its parameter."""
    m = INSERT.search(sql)
    assert m, sql
    columns = [c.strip() for c in m.group(1).split(",")]
    at = columns.index("action")
    value = m.group(2).split(",")[at].strip()
    if literal := LITERAL.fullmatch(value):
        return literal.group(1), None
    assert value == "%s" and all(v.strip() == "%s" for v in m.group(2).split(",")[:at]), sql
    return None, at


def _imports(tree: ast.Module) -> dict[str, str]:
    """Local names of imported modules and names: the dotted name they stand for."""
    names = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                names[a.asname or a.name] = f"{node.module}.{a.name}"
    return names


def _enclosing(tree: ast.Module) -> dict[ast.AST, ast.FunctionDef]:
    out: dict[ast.AST, ast.FunctionDef] = {}
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef):
            for node in ast.walk(fn):
                out[node] = fn  # inner functions, walked later, win
    return out


def _params(fn: ast.FunctionDef) -> list[str]:
    names = [a.arg for a in fn.args.posonlyargs + fn.args.args]
    return names[1:] if names and names[0] in ("self", "cls") else names


def _argument(call: ast.Call, index: int, name: str) -> ast.expr | None:
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    return call.args[index] if index < len(call.args) else None


def _statements(sources: dict[str, ast.Module], found: Scan) -> dict[str, int]:
    """The literal actions of the audit inserts (into ``found``), and the
    inserts that take the action as a parameter: "module.NAME" -> its index."""
    statements: dict[str, int] = {}
    for module, tree in sources.items():
        held = {
            id(a.value): [t.id for t in a.targets if isinstance(t, ast.Name)]
            for a in tree.body
            if isinstance(a, ast.Assign)
        }
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
                continue
            if not re.search(r"INSERT\s+INTO\s+audit_log", node.value, re.I):
                continue
            literal, index = _action_in(node.value)
            if literal:
                found.actions.add(literal)
            elif not held.get(id(node)) or index is None:
                found.untraced.append(f"{module}: an audit insert not held by a module name")
            else:
                statements.update({f"{module}.{name}": index for name in held[id(node)]})
    for sql in sorted((ROOT / "services").rglob("*.sql")):
        for m in INSERT.finditer(sql.read_text()):
            literal, _ = _action_in(m.group(0))
            if literal:
                found.actions.add(literal)
            else:
                found.untraced.append(f"{sql}: an audit insert with no literal action")
    return statements


def _target(module: str, imports: dict[str, str], arg: ast.expr) -> str | None:
    """The dotted name a module-level name or ``alias.NAME`` argument stands for."""
    if isinstance(arg, ast.Name):
        return imports.get(arg.id, f"{module}.{arg.id}")
    if isinstance(arg, ast.Attribute) and isinstance(arg.value, ast.Name):
        return f"{imports.get(arg.value.id, arg.value.id)}.{arg.attr}"
    return None


def _given(
    found: Scan,
    writers: dict[tuple[str, str], int],
    module: str,
    where: ast.FunctionDef | None,
    value: ast.expr | None,
) -> None:
    """An action given to a writer: a literal, or a parameter of the function
    giving it (which becomes a writer), or what the scan cannot trace."""
    if isinstance(value, ast.Constant) and isinstance(value.value, str):
        found.actions.add(value.value)
    elif isinstance(value, ast.Name) and where and value.id in _params(where):
        writers.setdefault((module, where.name), _params(where).index(value.id))
    else:
        shown = ast.unparse(value) if value is not None else "nothing"
        found.untraced.append(f"{module}: an action given as {shown}")


@functools.cache
def scan() -> Scan:
    sources = _sources()
    base = Scan()
    statements = _statements(sources, base)
    defs = {
        m: {f.name: f for f in ast.walk(t) if isinstance(f, ast.FunctionDef)}
        for m, t in sources.items()
    }
    # The functions that pass the action they are given on to a writer:
    # (module, function) -> the action's index among their parameters.
    writers: dict[tuple[str, str], int] = {}
    calls = {
        m: (_imports(t), _enclosing(t), [n for n in ast.walk(t) if isinstance(n, ast.Call)])
        for m, t in sources.items()
    }
    while True:
        known = dict(writers)
        found = Scan(set(base.actions), list(base.untraced))

        for module, (imports, enclosing, module_calls) in calls.items():
            for call in module_calls:
                for i, arg in enumerate(call.args[:-1]):
                    target = _target(module, imports, arg)
                    if target in statements:
                        values = call.args[i + 1]
                        assert isinstance(values, ast.Tuple), (module, target)
                        _given(
                            found,
                            writers,
                            module,
                            enclosing.get(call),
                            values.elts[statements[target]],
                        )
                func = call.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                # A function of the caller's own module of that name is the one called.
                owner = module if name in defs[module] else None
                owners = [m for (m, f) in known if f == name and owner in (None, m)]
                for m in owners[:1]:
                    index = known[(m, name)]
                    param = _params(defs[m][name])[index]
                    _given(
                        found, writers, module, enclosing.get(call), _argument(call, index, param)
                    )
        if writers == known:
            return found


def test_the_scan_finds_the_writers_it_must() -> None:
    """The scan itself: the memory writes' and the control plane's writers
    are followed (their actions are literals at their callers only)."""
    found = scan()
    assert {"remember", "forget", "create_member", "revoke_token", "migrate"} <= found.actions


def test_every_action_the_code_writes_is_in_the_vocabulary() -> None:
    found = scan()
    assert found.untraced == []
    assert sorted(found.actions - set(AUDIT_ACTIONS)) == [], "add them to AUDIT_ACTIONS"
    assert sorted(set(AUDIT_ACTIONS) - found.actions) == [], "no code writes these"
    assert len(set(AUDIT_ACTIONS)) == len(AUDIT_ACTIONS)
