"""The archive's versions (docs/export.md, "Versions"): format 2 lets a
mention say when a correction made its memory mention the entity
(`mentioned_at`, workspace migration 0046). A release reads the format 1
archives written before, their mentions counting from their memory's
creation; a release reading up to 1 refuses a format 2 archive by its
version, before its records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from recallatron import errors
from services.store.domain import archive_format as fmt
from services.store.domain import archive_plan as plan
from tests.unit.test_archive import ADA, BOB, T, memory, uid, write_archive

LATER = "2026-02-03T04:05:06.5+00:00"
ENTITY = {"id": uid(10), "name": "Heron", "type": None, "created_at": T}


def _set_version(directory: Path, version: int) -> None:
    manifest = json.loads((directory / fmt.MANIFEST).read_text())
    manifest["format_version"] = version
    (directory / fmt.MANIFEST).write_text(json.dumps(manifest))


def test_a_mention_carries_when_a_correction_made_it_and_a_format_1_one_reads_as_before(
    tmp_path: Path,
) -> None:
    records = {
        "memories": [memory(1), memory(2)],
        "entities": [ENTITY],
        "mentions": [
            {"memory_id": uid(1), "entity_id": uid(10)},
            {"memory_id": uid(2), "entity_id": uid(10), "mentioned_at": LATER},
        ],
    }
    write_archive(tmp_path / "a", records)
    chosen = plan.select(plan.read_archive(tmp_path / "a"), {ADA, BOB})
    assert [r.get("mentioned_at") for r in chosen.records["mentions"]] == [None, LATER]

    # An archive written before format 2: its mentions as they were.
    write_archive(tmp_path / "old", {**records, "mentions": records["mentions"][:1]})
    _set_version(tmp_path / "old", 1)
    chosen = plan.select(plan.read_archive(tmp_path / "old"), {ADA, BOB})
    assert chosen.records["mentions"] == [{"memory_id": uid(1), "entity_id": uid(10)}]


def test_a_mentions_time_that_is_no_time_is_refused_naming_it(tmp_path: Path) -> None:
    bad = {"memory_id": uid(1), "entity_id": uid(10), "mentioned_at": "yesterday"}
    write_archive(
        tmp_path / "a", {"memories": [memory(1)], "entities": [ENTITY], "mentions": [bad]}
    )
    with pytest.raises(errors.InvalidArgument) as err:
        plan.read_archive(tmp_path / "a")
    assert err.value.field == "mentions.jsonl line 1: mentioned_at"


def test_a_release_reading_up_to_format_1_refuses_this_ones_archive_by_its_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its mentions' schema has no `mentioned_at`: without the new version it
    would refuse a record by a field it does not know, not say why."""
    assert fmt.FORMAT_VERSION == 2
    write_archive(tmp_path / "a", {"memories": [memory(1)]})
    monkeypatch.setattr(fmt, "FORMAT_VERSION", 1)
    with pytest.raises(errors.FailedPrecondition) as err:
        plan.read_archive(tmp_path / "a")
    assert err.value.message == (
        "format_version: the archive is format version 2, newer than this release reads "
        "(up to 1); import it with a newer recallatron"
    )
