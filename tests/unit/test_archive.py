"""The workspace archive's format and the import's plan, without a database
(docs/export.md): the version check, the manifest, the schema naming the bad
field, references, digests and settings, and vectors travelling exactly. The
members file and left-out members: test_archive_members.py; the bounds on
reading: test_archive_bounds.py; tombstones: test_archive_tombstones.py."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from recallatron import errors
from recallatron.vocabulary import MAX_HISTORY_CHAT_ID
from services.store.domain import archive_format as fmt
from services.store.domain import archive_plan as plan
from services.store.domain.archive_history import history_name
from services.store.domain.archive_import import vector_text
from tests.unit.archive_records import ADA, T, fix_digest, memory, uid, write_archive


def test_an_archive_of_a_newer_format_is_refused_before_its_records(tmp_path: Path) -> None:
    write_archive(tmp_path / "a", {"memories": [memory(1)]})
    manifest = json.loads((tmp_path / "a" / fmt.MANIFEST).read_text())
    manifest["format_version"] = newer = fmt.FORMAT_VERSION + 1
    manifest["files"] = "whatever a newer format holds"
    (tmp_path / "a" / fmt.MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(errors.FailedPrecondition) as err:
        plan.read_archive(tmp_path / "a")
    assert err.value.message.startswith(f"format_version: the archive is format version {newer}")
    assert "newer" in err.value.message


def test_a_directory_without_a_manifest_is_not_an_archive(tmp_path: Path) -> None:
    with pytest.raises(errors.InvalidArgument) as err:
        plan.read_archive(tmp_path)
    assert err.value.field == "archive"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"purposes": ["gossip"]}, "memories.jsonl line 2: purposes[0]"),
        ({"confidence": 1.5}, "memories.jsonl line 2: confidence"),
        ({"id": "not-a-uuid"}, "memories.jsonl line 2: id"),
        ({"created_at": "yesterday"}, "memories.jsonl line 2: created_at"),
        ({"colour": "red"}, "memories.jsonl line 2: record"),
    ],
)
def test_a_bad_record_is_named_by_file_line_and_field(
    tmp_path: Path, change: dict[str, Any], field: str
) -> None:
    write_archive(tmp_path / "a", {"memories": [memory(1), {**memory(2), **change}]})
    with pytest.raises(errors.InvalidArgument) as err:
        plan.read_archive(tmp_path / "a")
    assert err.value.field == field


def test_an_id_given_twice_is_refused_naming_the_second(tmp_path: Path) -> None:
    write_archive(tmp_path / "a", {"memories": [memory(1), memory(2), memory(1)]})
    with pytest.raises(errors.InvalidArgument) as err:
        plan.read_archive(tmp_path / "a")
    assert err.value.field == "memories.jsonl line 3: id"
    assert err.value.description == "is not unique in the archive"


def test_references_digests_and_settings_are_checked(tmp_path: Path) -> None:
    link = {"memory_id": uid(1), "kind": "about", "target_id": uid(7)}
    write_archive(tmp_path / "a", {"memories": [memory(1)], "links": [link]})
    with pytest.raises(errors.InvalidArgument) as err:
        plan.read_archive(tmp_path / "a")
    assert err.value.field == "links.jsonl line 1: target_id"

    write_archive(tmp_path / "b", {"memories": [memory(1)]})
    with (tmp_path / "b" / "memories.jsonl").open("a") as f:
        f.write(json.dumps(memory(2)) + "\n")
    with pytest.raises(errors.InvalidArgument) as err:
        plan.read_archive(tmp_path / "b")
    assert err.value.field == "memories.jsonl" and "digest" in err.value.message

    write_archive(tmp_path / "c", {})
    workspace = tmp_path / "c" / fmt.WORKSPACE
    workspace.write_text(workspace.read_text().replace("0.3", "7"))
    manifest = json.loads((tmp_path / "c" / fmt.MANIFEST).read_text())
    manifest["files"][fmt.WORKSPACE]["sha256"] = fmt.sha256_of(workspace)
    (tmp_path / "c" / fmt.MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(errors.InvalidArgument) as err:
        plan.read_archive(tmp_path / "c")
    assert err.value.field == "workspace.json: settings.dense_floor"


def test_vectors_travel_exactly() -> None:
    floats = np.random.default_rng(7).standard_normal(384).astype(np.float32)
    encoded = base64.b64encode(floats.astype(">f4").tobytes()).decode()
    fmt.check("vectors", {"memory_id": uid(1), "model_id": "m", "input_version": "v",
                          "created_at": T, "vector": encoded}, "vectors.jsonl line 1")  # fmt: skip
    back = np.array([float(x) for x in vector_text(encoded)[1:-1].split(",")], dtype=np.float32)
    assert np.array_equal(back, floats)


def test_the_schema_is_one_json_schema_document() -> None:
    document = fmt.schema()
    assert set(document["$defs"]) >= {"manifest", "workspace", "members_file", *fmt.RECORD_FILES}
    json.dumps(document)


def test_a_difference_is_shown_where_the_answers_part() -> None:
    """Two long answers that agree for their first thousand characters are
    shown from where they differ, not cut before it."""
    from recallatron_devkit.archive_check import Comparison

    found = Comparison()
    same = '{"outcome": "' + "x" * 1000
    found.add("read", "memory 1", same + 'A"}', same + 'B"}')
    assert not found.identical
    (shown,) = found.differences
    assert "from character 1013" in shown
    assert 'A"}' in shown and 'B"}' in shown


@pytest.mark.parametrize("kind", ["memories", "revisions", "history"])
def test_a_manifest_that_does_not_list_a_record_file_is_refused_naming_it(
    tmp_path: Path, kind: str
) -> None:
    """Every export lists each record file (vectors with --vectors only): a
    manifest without one was damaged, and reading on would import the
    workspace without those records and say it had succeeded."""
    write_archive(tmp_path / "a", {"memories": [memory(1), memory(2)]})
    manifest = json.loads((tmp_path / "a" / fmt.MANIFEST).read_text())
    del manifest["files"][kind]
    (tmp_path / "a" / fmt.MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(errors.InvalidArgument) as err:
        plan.read_archive(tmp_path / "a")
    assert err.value.field == f"{fmt.MANIFEST}: files"
    assert f"{kind}.jsonl" in err.value.description


def test_a_manifest_saying_it_holds_vectors_lists_them(tmp_path: Path) -> None:
    write_archive(tmp_path / "a", {"memories": [memory(1)]})
    manifest = json.loads((tmp_path / "a" / fmt.MANIFEST).read_text())
    manifest["vectors_included"] = True
    del manifest["files"]["vectors"]
    (tmp_path / "a" / fmt.MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(errors.InvalidArgument) as err:
        plan.read_archive(tmp_path / "a")
    assert err.value.field == f"{fmt.MANIFEST}: files"
    assert "vectors.jsonl" in err.value.description


def test_a_setting_the_release_does_not_know_is_refused_naming_it(tmp_path: Path) -> None:
    """A misspelt or unknown setting in workspace.json was dropped without a
    word, the copy made with the default in its place."""
    write_archive(tmp_path / "a", {})
    workspace = tmp_path / "a" / fmt.WORKSPACE
    workspace.write_text(workspace.read_text().replace('"dense_floor"', '"dense_flor"'))
    fix_digest(tmp_path / "a", fmt.WORKSPACE)
    with pytest.raises(errors.InvalidArgument) as err:
        plan.read_archive(tmp_path / "a")
    assert err.value.field == "workspace.json: settings.dense_flor"
    assert "dense_floor" in err.value.description


@pytest.mark.parametrize(
    ("kind", "record", "field"),
    [
        ("memories", memory(1, title="t" * 301), "title"),
        ("memories", memory(1, body="b" * 20_001), "body"),
        # NFC makes U+FB2C three code points: kept, the title is past 300.
        ("memories", memory(1, title="\ufb2c" * 101), "title"),
        ("memories", memory(1, title="a\x00b"), "title"),
    ],
)
def test_text_past_every_writes_limits_is_refused_naming_the_record_and_field(
    tmp_path: Path, kind: str, record: dict[str, Any], field: str
) -> None:
    write_archive(tmp_path / "a", {kind: [record]})
    with pytest.raises(errors.InvalidArgument) as err:
        plan.read_archive(tmp_path / "a")
    assert err.value.field == f"{kind}.jsonl line 1: {field}"


def test_a_revision_given_twice_is_refused(tmp_path: Path) -> None:
    def revision(n: int, action: str) -> dict[str, Any]:
        return {"memory_id": uid(1), "revision": n, "action": action, "changed_by": ADA,
                "reason": "", "changed_at": T}  # fmt: skip

    done = [revision(1, "create"), revision(2, "correct"), revision(2, "forget")]
    write_archive(tmp_path / "a", {"memories": [memory(1, revision=2)], "revisions": done})
    assert plan.read_archive(tmp_path / "a").count("revisions") == 3
    rows = [*done, revision(2, "correct")]
    write_archive(tmp_path / "b", {"memories": [memory(1, revision=2)], "revisions": rows})
    with pytest.raises(errors.InvalidArgument) as err:
        plan.read_archive(tmp_path / "b")
    assert err.value.field == "revisions.jsonl line 4: revision"


def test_a_long_chat_id_or_role_an_older_export_wrote_is_read_shortened(tmp_path: Path) -> None:
    """An export before chat ids and roles were shortened wrote them as an
    older workspace kept them; its import refused its own archive
    (`history.jsonl line 1: chat_id: at most 256 characters`). Now it reads
    them as an export writes them now, two chats cut alike staying two."""
    chats = ["c" * 300 + "-one", "c" * 300 + "-two"]
    turns = [
        {"id": uid(n), "owner_member": ADA, "chat_id": chat, "role": "r" * 65, "text": "t",
         "occurred_at": T}
        for n, chat in enumerate(chats)
    ]  # fmt: skip
    write_archive(tmp_path / "a", {"history": turns})
    read = [r for _, r in plan.read_archive(tmp_path / "a").records["history"]]
    assert [r["chat_id"] for r in read] == [history_name(c, MAX_HISTORY_CHAT_ID) for c in chats]
    assert len({r["chat_id"] for r in read}) == 2
    assert all(len(r["chat_id"]) == 256 and len(r["role"]) == 64 for r in read)
    assert history_name("cli-main", MAX_HISTORY_CHAT_ID) == "cli-main"
