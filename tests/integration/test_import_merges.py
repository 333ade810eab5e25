"""Entity merges an edited archive holds that no owner's decisions could
have made (docs/export.md): merges in force that loop (an entity merged into
itself, A into B and B into A, or round three entities) or that join more
entities than a merged entity holds. Each is refused naming its record
before anything is made; a loop through a merge that was undone is what the
service makes (merge, undo, merge back), and imports."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from recallatron.vocabulary import MAX_ENTITY_GROUP
from recallatron_devkit.stack import Stack
from tests.clirun import cli
from tests.conftest import Team
from tests.integration.test_export_import import rewrite, slug_exists
from tests.integration.test_import_refusals import copied, refused

pytestmark = pytest.mark.integration

AT = "2026-12-01T10:00:00+00:00"
LATER = "2026-12-01T11:00:00+00:00"


def test_merges_that_loop_or_join_too_many_are_refused_naming_the_record(
    stack: Stack, team: Team, tmp_path: Path
) -> None:
    """An archive edited so that its merges in force loop was imported as
    it was (a loop of three, or of two undone in the file's order) or
    refused by the database after the workspace was made, naming no record
    (a merge of an entity into itself, A into B beside B into A)."""
    ada = team.clients["ada"]
    names = [f"Entity {n:02d}" for n in range(MAX_ENTITY_GROUP + 1)]
    made = ada.remember("Many", "many entities", mention_names=names, audience_to="workspace")
    ids = {m.name: m.entity_id for m in made.memory.mentions}
    a, b, c = ids[names[0]], ids[names[1]], ids[names[2]]
    out = tmp_path / "a"
    assert cli(stack, "export", "--workspace", team.slug, "--out", str(out)).returncode == 0
    owner = next(
        m["id"] for m in json.loads((out / "workspace.json").read_text())["members"]
        if m["handle"] == "ada"
    )  # fmt: skip

    def merge(kept: str, merged: str, undone: bool = False) -> dict[str, Any]:
        return {
            "id": str(uuid.uuid4()), "kept_id": kept, "merged_id": merged,
            "decided_by": owner, "decided_at": AT,
            "undone_by": owner if undone else None, "undone_at": LATER if undone else None,
        }  # fmt: skip

    chained = [merge(ids[names[i]], ids[names[i + 1]]) for i in range(MAX_ENTITY_GROUP)]
    shapes: dict[str, tuple[list[dict[str, Any]], str]] = {
        "itself": ([merge(a, a)], "line 1: merged_id: names the kept entity"),
        "two": ([merge(a, b), merge(b, a)], "line 2: merged_id: closes a loop"),
        "three": ([merge(a, b), merge(b, c), merge(c, a)], "line 3: merged_id: closes a loop"),
        "twice": ([merge(a, b), merge(a, b)], "line 2: merged_id: closes a loop"),
        "too many": (chained, f"line {MAX_ENTITY_GROUP}: merged_id: makes a merged entity of"),
        "absent": ([merge(a, str(uuid.uuid4()))], "line 1: merged_id: names no entity"),
    }
    for name, (merges, said) in shapes.items():
        edited = copied(out, tmp_path / name)
        rewrite(edited, "merges", lambda rows, merges=merges: rows.extend(merges))
        error = refused(stack, edited)
        assert f"merges.jsonl {said}" in error, (name, error)

    # Merged, undone, merged back the other way: what the service writes.
    edited = copied(out, tmp_path / "undone")
    undone = [merge(a, b, undone=True), merge(b, a), merge(c, a)]
    rewrite(edited, "merges", lambda rows: rows.extend(undone))
    done = cli(stack, "import", str(edited), "--as", f"copy-{uuid.uuid4().hex[:10]}", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["counts"]["merges"] == 3


def test_a_merge_record_half_undone_or_out_of_time_is_refused_naming_its_field(
    stack: Stack, team: Team, tmp_path: Path
) -> None:
    """A merge record edited so that only one of undone_by and undone_at is
    set, with a time no calendar has, or repeating another's id was refused
    only by the database after the workspace was made, naming no record; one
    undone before it was decided was imported as it was."""
    ada = team.clients["ada"]
    made = ada.remember("Two", "two entities", mention_names=["Ann", "Bea"])
    a, b = (m.entity_id for m in made.memory.mentions)
    out = tmp_path / "a"
    assert cli(stack, "export", "--workspace", team.slug, "--out", str(out)).returncode == 0
    who = team.members["ada"]

    def merge(kept: str = a, merged: str = b, **fields: Any) -> dict[str, Any]:
        return {
            "id": str(uuid.uuid4()), "kept_id": kept, "merged_id": merged,
            "decided_by": who, "decided_at": AT, "undone_by": who, "undone_at": LATER,
            **fields,
        }  # fmt: skip

    twin = merge()
    times = {
        "decided_at no day": ("decided_at", "2026-02-30T10:00:00+00:00", "is no time"),
        "undone_at no hour": ("undone_at", "2026-12-01T25:00:00+00:00", "is no time"),
        "undone_at bad offset": ("undone_at", "2026-12-01T11:00:00+24:00", "is no time"),
        "undone before decided": ("undone_at", "2026-12-01T09:59:59+00:00", "is before"),
    }
    shapes: dict[str, tuple[list[dict[str, Any]], str]] = {
        "undone_by alone": ([merge(undone_at=None)], "line 1: undone_at: is null"),
        "undone_at alone": ([merge(undone_by=None)], "line 1: undone_by: is null"),
        "id twice": ([twin, merge(b, a, id=twin["id"])], "line 2: id: is not unique"),
        **{
            name: ([merge(**{key: value})], f"line 1: {key}: {said}")
            for name, (key, value, said) in times.items()
        },
    }
    wrong: dict[str, tuple[int, str]] = {}
    for name, (merges, said) in shapes.items():
        edited = copied(out, tmp_path / name.replace(" ", "-"))
        rewrite(edited, "merges", lambda rows, merges=merges: rows.extend(merges))
        slug = f"bad-{uuid.uuid4().hex[:10]}"
        done = cli(stack, "import", str(edited), "--as", slug)
        if done.returncode != 1 or f"merges.jsonl {said}" not in done.stderr:
            wrong[name] = (done.returncode, done.stderr.strip()[-300:])
        elif slug_exists(stack, slug):
            wrong[name] = (done.returncode, "the workspace was made")
    assert not wrong, "\n".join(f"{name}: {said}" for name, said in wrong.items())
