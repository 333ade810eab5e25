"""The archive's versions (docs/export.md, "Versions"): format 2 lets a
mention say when a correction made its memory mention the entity
(`mentioned_at`, workspace migration 0046). A release reads the format 1
archives written before, their mentions counting from their memory's
creation; a release reading up to 1 refuses a format 2 archive by its
version, before its records."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from recallatron import errors
from recallatron.vocabulary import MAX_HISTORY_CHAT_ID, MAX_HISTORY_TEXT
from services.store.domain import archive_format as fmt
from services.store.domain import archive_plan as plan
from services.store.domain import archive_reading as reading
from services.store.domain.archive_history import history_name
from tests.unit.archive_records import ADA, BOB, T, memory, uid, write_archive

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


# -- a history line as an older release wrote it ------------------------------------

# A terminal's raw output pasted whole: control characters, each written by
# the export's json_build_object as \u001b (6 bytes), as json.dumps writes it.
RAW = "\x1b\x01\x02\x03\x0e\x0f"


def _turn(n: int, chat_id: str, text: str) -> dict[str, Any]:
    return {"id": uid(n), "owner_member": ADA, "chat_id": chat_id, "role": "user",
            "text": text, "occurred_at": T}  # fmt: skip


def test_a_history_line_an_older_release_wrote_past_a_mebibyte_is_read(tmp_path: Path) -> None:
    """A turn of the longest text the migration keeps (200,000 characters) is
    1.2 MB as JSON when it is control characters; a release before chat ids
    had a limit exported a 300,000-character one whole beside it. Its format 1
    archive was refused (`history.jsonl line 2: is longer than 1 MiB`)."""
    text = (RAW * (MAX_HISTORY_TEXT // len(RAW) + 1))[:MAX_HISTORY_TEXT]
    chat = "tg-" + "9" * 300_000
    write_archive(tmp_path / "a", {"history": [_turn(1, "c", "hi"), _turn(2, chat, text)]})
    _set_version(tmp_path / "a", 1)
    line = (tmp_path / "a" / "history.jsonl").read_bytes().splitlines()[1]
    assert len(line) > 1_500_000
    read = plan.read_archive(tmp_path / "a").records["history"]
    assert [(r["chat_id"], r["text"]) for _, r in read] == [
        ("c", "hi"),
        (history_name(chat, MAX_HISTORY_CHAT_ID), text),
    ]


def test_a_history_line_past_what_any_release_wrote_is_refused_naming_it(
    tmp_path: Path,
) -> None:
    limit = reading.LINE_LIMITS["history"]
    chat = "c" * (limit - len(json.dumps(_turn(2, "", "t"))) + 1)
    write_archive(tmp_path / "a", {"history": [_turn(1, "c", "hi"), _turn(2, chat, "t")]})
    with pytest.raises(errors.InvalidArgument) as err:
        plan.read_archive(tmp_path / "a")
    assert err.value.field == "history.jsonl line 2"
    assert err.value.description == f"is longer than {limit >> 20} MiB: no record of the archive is"


class _Endless(io.RawIOBase):
    """A line that never ends, counting what is read of it."""

    def __init__(self) -> None:
        self.read_bytes = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        n = len(buffer)
        buffer[:n] = b"x" * n
        self.read_bytes += n
        return n


@pytest.mark.parametrize("kind", ["history", "memories"])
def test_a_line_is_refused_before_more_than_its_limit_is_read(kind: str) -> None:
    source = _Endless()
    with pytest.raises(errors.InvalidArgument) as err:
        next(reading.lines(io.BufferedReader(source), kind))
    assert err.value.field == f"{kind}.jsonl line 1"
    limit = reading.LINE_LIMITS.get(kind, reading.MAX_LINE_BYTES)
    assert source.read_bytes <= limit + 2 + io.DEFAULT_BUFFER_SIZE
