"""Every "design §n" cited in the code, the SQL, the protos and the documents
names a section of docs/design.md (a heading, or a step of §5's numbered list),
and nothing cites the specification outside the repository."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CITING = ("*.py", "*.md", "*.sql", "*.proto")
SKIP = {".venv", ".git", ".tools", ".recallatron", "node_modules", "test-artifacts"}


def sections() -> set[str]:
    found: set[str] = set()
    current = ""
    for line in (REPO / "docs/design.md").read_text().splitlines():
        heading = re.match(r"#{2,3} (\d+(?:\.\d+)?)[. ]", line)
        if heading:
            current = heading.group(1)
            found.add(current)
        step = re.match(r"(\d+)\. \*\*", line)
        if step and "." not in current:
            found.add(f"{current}.{step.group(1)}")
    return found


def cited() -> list[tuple[str, str]]:
    out = []
    for pattern in CITING:
        for path in REPO.rglob(pattern):
            if SKIP & set(path.relative_to(REPO).parts):
                continue
            text = path.read_text(errors="replace")
            for ref in re.findall(r"design §(\d+(?:\.\d+)?)", text):
                out.append((str(path.relative_to(REPO)), ref))
            for ref in re.findall(r"§(\d+(?:\.\d+)?)", text):
                if path.name == "design.md":
                    out.append((str(path.relative_to(REPO)), ref))
            assert not re.search(r"\bSPEC( §)? ?\d", text), f"{path}: cites SPEC"
    return out


def test_every_design_reference_leads_somewhere() -> None:
    known = sections()
    assert {"3.3", "4", "5.2", "5.5", "5.7", "5.9", "7.1", "8.1"} <= known
    refs = cited()
    assert len(refs) > 30
    dead = [f"{path}: design §{ref}" for path, ref in refs if ref not in known]
    assert dead == []
