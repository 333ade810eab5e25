"""No product file past 500 lines (issue 31): a file that long holds more than
one thing a reader looks for. Tests, benchmarks, docs and generated stubs
aside; a file is counted as git tracks it, so a new file counts at once."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MOST_LINES = 500
SOURCE = re.compile(r"\.(py|pyi|sql|proto|ts|js|cjs|sh|html|css)$")
# Generated from the protos (make protos, npm run generate): not written by hand.
GENERATED = re.compile(r"_pb2(_grpc)?\.pyi?$|^clients/typescript/src/gen/")
ASIDE = ("tests/", "benchmarks/", "docs/")


def product_files() -> list[str]:
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=REPO, check=True, capture_output=True, text=True
    ).stdout.splitlines()
    return [
        path
        for path in tracked
        if SOURCE.search(path) and not GENERATED.search(path) and not path.startswith(ASIDE)
    ]


def test_the_product_files_are_found() -> None:
    files = product_files()
    assert "services/store/domain/control.py" in files
    assert "protos/recallatron/v1/gateway.proto" in files
    assert not [f for f in files if f.endswith("_pb2.py") or f.startswith("tests/")]


def test_no_product_file_is_over_500_lines() -> None:
    long = {}
    for path in product_files():
        file = REPO / path
        if file.is_file():
            lines = len(file.read_text(encoding="utf-8", errors="replace").splitlines())
            if lines > MOST_LINES:
                long[path] = lines
    assert not long, f"over {MOST_LINES} lines: {long}"
