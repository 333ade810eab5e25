"""The wire-compatibility gate of `make buf-breaking` (docs/kubernetes.md,
"Upgrades"): buf's breaking-change check, with the rules of protos/buf.yaml,
lets additions through (other work adds fields, messages and RPCs all the
time) and stops every change that an older peer would misread during a
rolling upgrade. Each case edits a copy of the current protos and runs the
same buf the Makefile installs."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BUF = REPO / ".tools" / "node_modules" / ".bin" / "buf"
V1 = Path("recallatron") / "v1"


def add_field(files: dict[str, str]) -> None:
    files["memory.proto"] = files["memory.proto"].replace(
        "message RecallResponse {", "message RecallResponse {\n  string wire_test_added = 9999;", 1
    )


def add_message(files: dict[str, str]) -> None:
    files["gateway.proto"] += "\nmessage WireTestAdded {\n  string value = 1;\n}\n"


def add_rpc(files: dict[str, str]) -> None:
    files["gateway.proto"] = files["gateway.proto"].replace(
        "service MemoryService {",
        "service MemoryService {\n  rpc WireTestAdded(ReadRequest) returns (ReadResponse);",
        1,
    )


def add_enum_value(files: dict[str, str]) -> None:
    files["common.proto"] = files["common.proto"].replace(
        "  KIND_NOTE = 1;\n", "  KIND_NOTE = 1;\n  KIND_WIRE_TEST_ADDED = 999;\n", 1
    )


def _first_field(text: str, message: str) -> re.Match[str]:
    m = re.search(rf"message {message} \{{\n(?:\s*//.*\n)*(\s+[\w.]+ \w+ = )(\d+);\n", text)
    assert m, f"no first field in {message}"
    return m


def remove_field(files: dict[str, str]) -> None:
    text = files["memory.proto"]
    m = _first_field(text, "RecallResponse")
    files["memory.proto"] = text[: m.start(1)] + "\n" + text[m.end() :]


def renumber_field(files: dict[str, str]) -> None:
    text = files["memory.proto"]
    m = _first_field(text, "RecallResponse")
    files["memory.proto"] = text[: m.start(2)] + str(int(m.group(2)) + 100) + text[m.end(2) :]


def change_field_type(files: dict[str, str]) -> None:
    files["common.proto"] = files["common.proto"].replace(
        "int32 lexical_rank = 1;", "string lexical_rank = 1;", 1
    )


def remove_rpc(files: dict[str, str]) -> None:
    files["gateway.proto"] = re.sub(
        r"\n\s*rpc Read\(ReadRequest\) returns \(ReadResponse\);", "", files["gateway.proto"]
    )


def remove_store_rpc(files: dict[str, str]) -> None:
    files["store.proto"] = re.sub(
        r"\n\s*rpc SearchHistory\(SearchHistoryRequest\) returns \(SearchHistoryResponse\);",
        "",
        files["store.proto"],
    )


def remove_store_field(files: dict[str, str]) -> None:
    text = files["store.proto"]
    m = _first_field(text, "SearchHistoryRequest")
    files["store.proto"] = text[: m.start(1)] + "\n" + text[m.end() :]


def remove_enum_value(files: dict[str, str]) -> None:
    files["common.proto"] = re.sub(r"\n\s*KIND_DECISION = 3;", "", files["common.proto"])


CASES: dict[str, tuple[Callable[[dict[str, str]], None], bool]] = {
    "a new field": (add_field, True),
    "a new message": (add_message, True),
    "a new rpc": (add_rpc, True),
    "a new enum value": (add_enum_value, True),
    "a removed field": (remove_field, False),
    "a renumbered field": (renumber_field, False),
    "a field's type changed": (change_field_type, False),
    "a removed rpc": (remove_rpc, False),
    # An internal RPC no previous peer calls may go (the rolling-upgrade test
    # holds the previous peers' calls); its fields stay guarded.
    "a removed store rpc": (remove_store_rpc, True),
    "a removed store field": (remove_store_field, False),
    "a removed enum value": (remove_enum_value, False),
}


def buf(new: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BUF), *args],
        cwd=new,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("case", CASES)
def test_buf_breaking_allows_additions_and_stops_breaks(case: str, tmp_path: Path) -> None:
    if not BUF.exists():
        pytest.fail(f"buf is not installed: make {BUF.relative_to(REPO)}")
    old, new = tmp_path / "old", tmp_path / "new"
    shutil.copytree(REPO / "protos", old)
    shutil.copytree(REPO / "protos", new)
    edit, allowed = CASES[case]
    files = {p.name: p.read_text() for p in (new / V1).glob("*.proto")}
    before = dict(files)
    edit(files)
    assert files != before, f"{case}: the edit changed nothing"
    for name, text in files.items():
        (new / V1 / name).write_text(text)
    done = buf(new, "breaking", "--against", str(old), "--error-format=json")
    if allowed:
        assert done.returncode == 0, f"{case} was refused:\n{done.stdout}{done.stderr}"
        return
    assert done.returncode != 0, f"{case} passed the gate"
    # buf names the rule that stopped it; a typo in the edit would be COMPILE.
    rules = {json.loads(line)["type"] for line in done.stdout.splitlines() if line.strip()}
    assert rules and "COMPILE" not in rules, done.stdout + done.stderr
