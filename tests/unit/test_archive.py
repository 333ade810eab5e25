"""The workspace archive's format and the import's plan, without a database
(docs/export.md): the version check, the schema naming the bad field, the
members file's rules, what a left-out member's private records become, and
vectors travelling exactly."""

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

ADA = "00000000-0000-4000-8000-00000000000a"
BOB = "00000000-0000-4000-8000-00000000000b"
T = "2026-01-02T03:04:05.123456+00:00"


def uid(n: int) -> str:
    return f"00000000-0000-4000-8000-{n:012d}"


def memory(n: int, audience: str | None = None, **more: Any) -> dict[str, Any]:
    return {
        "id": uid(n),
        "kind": "note",
        "title": f"title {n}",
        "body": f"body {n}",
        "confidence": 1.0,
        "origin": "told",
        "revision": 1,
        "superseded_by": None,
        "forgotten_at": None,
        "forgotten_by": None,
        "audience_member": audience,
        "purposes": ["assist"],
        "created_by": audience or ADA,
        "created_at": T,
        "updated_at": T,
        "episode_id": None,
        **more,
    }


def write_archive(directory: Path, records: dict[str, list[dict[str, Any]]]) -> None:
    directory.mkdir()
    files: dict[str, Any] = {}
    for kind in fmt.RECORD_FILES:
        rows = records.get(kind, [])
        path = directory / fmt.file_name(kind)
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        files[kind] = {"name": path.name, "records": len(rows), "sha256": fmt.sha256_of(path)}
    workspace = {
        "settings": {"dense_floor": 0.3},
        "members": [
            {"id": ADA, "handle": "ada", "role": "owner"},
            {"id": BOB, "handle": "bob", "role": "member"},
        ],
    }
    (directory / fmt.WORKSPACE).write_text(json.dumps(workspace))
    files[fmt.WORKSPACE] = {
        "name": fmt.WORKSPACE,
        "records": 2,
        "sha256": fmt.sha256_of(directory / fmt.WORKSPACE),
    }
    manifest = {
        "format": fmt.FORMAT_NAME,
        "format_version": fmt.FORMAT_VERSION,
        "exported_at": T,
        "source": {"workspace_id": uid(999), "slug": "src", "schema_level": "0014"},
        "vectors_included": False,
        "files": files,
    }
    (directory / fmt.MANIFEST).write_text(json.dumps(manifest))


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


MEMBERS = [
    {"id": ADA, "handle": "ada", "role": "owner"},
    {"id": BOB, "handle": "bob", "role": "member"},
]


def test_members_come_as_they_were_or_as_the_file_says_and_never_two_as_one() -> None:
    assert [m.handle for m in plan.plan_members(MEMBERS, None)] == ["ada", "bob"]
    given = {"members": [{"source": BOB, "handle": "robert", "role": "owner"}]}
    assert plan.plan_members(MEMBERS, given) == [plan.MemberPlan(BOB, "robert", "owner")]
    refusals = [
        ([{"source": "zed"}], "members file: members[0].source"),
        ([{"source": "ada"}, {"source": ADA}], "members file: members[1].source"),
        (
            [{"source": "ada"}, {"source": "bob", "handle": "ada"}],
            "members file: members[1].handle",
        ),
        ([{"source": "ada", "handle": "no spaces"}], "members file: members[0].handle"),
    ]
    for members, field in refusals:
        with pytest.raises(errors.InvalidArgument) as err:
            plan.plan_members(MEMBERS, {"members": members})
        assert err.value.field == field


@pytest.mark.parametrize(
    "members",
    [[{"source": "bob"}], [{"source": "ada", "role": "member"}, {"source": "bob"}], []],
)
def test_a_members_file_that_gives_the_copy_no_owner_is_refused(
    members: list[dict[str, str]],
) -> None:
    """A workspace keeps an owner (its last one cannot be removed): a members
    file naming none would make a copy that no member of it can manage."""
    with pytest.raises(errors.InvalidArgument) as err:
        plan.plan_members(MEMBERS, {"members": members})
    assert err.value.field == "members file: members"
    assert "owner" in err.value.description


def test_a_left_out_members_private_records_stay_behind(tmp_path: Path) -> None:
    episode = {
        "id": uid(50),
        "title": "bob's day",
        "started_at": T,
        "ended_at": T,
        "audience_member": BOB,
        "purposes": ["assist"],
        "speaker_member": BOB,
        "created_by": BOB,
        "created_at": T,
        "participants": [],
    }
    records = {
        "episodes": [episode],
        "memories": [
            memory(1),
            memory(2, BOB, episode_id=uid(50)),
            memory(3, episode_id=uid(50)),
        ],
        "entities": [
            {"id": uid(10), "name": "Secret", "type": None, "created_at": T},
            {"id": uid(11), "name": "Shared", "type": None, "created_at": T},
            {"id": uid(12), "name": "Unnamed", "type": None, "created_at": T},
        ],
        "mentions": [
            {"memory_id": uid(2), "entity_id": uid(10)},
            {"memory_id": uid(2), "entity_id": uid(11)},
            {"memory_id": uid(1), "entity_id": uid(11)},
        ],
        "links": [{"memory_id": uid(3), "kind": "about", "target_id": uid(2)}],
        "history": [
            {
                "id": uid(60),
                "owner_member": BOB,
                "chat_id": "c",
                "role": "user",
                "text": "hello",
                "occurred_at": T,
            }
        ],
    }
    write_archive(tmp_path / "a", records)
    archive = plan.read_archive(tmp_path / "a")
    chosen = plan.select(archive, {ADA})
    by_id = {m["id"]: m for m in chosen.records["memories"]}
    assert chosen.hidden == {uid(2)}
    assert by_id[uid(2)]["title"] == "" and by_id[uid(2)]["body"] == ""
    assert by_id[uid(3)]["episode_id"] is None and by_id[uid(1)]["title"] == "title 1"
    assert chosen.records["mentions"] == [{"memory_id": uid(1), "entity_id": uid(11)}]
    assert [e["name"] for e in chosen.records["entities"]] == ["Shared", "Unnamed"]
    assert chosen.records["episodes"] == [] and chosen.records["history"] == []
    assert chosen.records["links"] == records["links"]  # the tombstone keeps its target
    assert chosen.left_out == {"private_memories": 1, "episodes": 1, "entities": 1, "history": 1}
    # With bob mapped, everything comes as it was.
    everything = plan.select(archive, {ADA, BOB})
    assert not everything.hidden and len(everything.records["entities"]) == 3


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


# -- bounds on reading an archive --------------------------------------------------


def _pad_to(path: Path, size: int) -> None:
    """``path``'s JSON followed by spaces up to ``size`` bytes (still JSON)."""
    data = path.read_bytes().rstrip()
    path.write_bytes(data + b" " * (size - len(data)))


def _fix_digest(directory: Path, kind: str) -> None:
    name = kind if kind == fmt.WORKSPACE else fmt.file_name(kind)
    manifest = json.loads((directory / fmt.MANIFEST).read_text())
    manifest["files"][kind]["sha256"] = fmt.sha256_of(directory / name)
    (directory / fmt.MANIFEST).write_text(json.dumps(manifest))


def test_a_record_line_over_a_mebibyte_is_refused_naming_its_line(tmp_path: Path) -> None:
    # A history turn's line has its own bound (tests/unit/test_archive_versions.py).
    def line_of(n: int, size: int) -> dict[str, Any]:
        record = memory(n, body="")
        record["body"] = "\u00e9" * ((m := size - len(json.dumps(record))) // 6) + "x" * (m % 6)
        assert len(json.dumps(record)) == size
        return record

    def read(directory: Path) -> int:
        return len(list(fmt.records(directory, "memories", fmt.read_manifest(directory))))

    write_archive(tmp_path / "a", {"memories": [line_of(1, 500), line_of(2, 2**20)]})
    assert read(tmp_path / "a") == 2
    write_archive(tmp_path / "b", {"memories": [line_of(1, 500), line_of(2, 2**20 + 1)]})
    with pytest.raises(errors.InvalidArgument) as err:
        read(tmp_path / "b")
    assert err.value.field == "memories.jsonl line 2"
    assert "longer than" in err.value.description


def test_a_json_file_over_its_cap_is_refused_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_archive(tmp_path / "a", {"memories": [memory(1)]})
    cap = (tmp_path / "a" / fmt.MANIFEST).stat().st_size + 100
    monkeypatch.setattr(fmt, "MAX_JSON_FILE_BYTES", cap, raising=False)
    _pad_to(tmp_path / "a" / fmt.WORKSPACE, cap + 1)
    _fix_digest(tmp_path / "a", fmt.WORKSPACE)
    with pytest.raises(errors.InvalidArgument) as err:
        plan.read_archive(tmp_path / "a")
    assert err.value.field == fmt.WORKSPACE and "larger than" in err.value.description

    _pad_to(tmp_path / "a" / fmt.MANIFEST, cap + 1)
    with pytest.raises(errors.InvalidArgument) as err:
        plan.read_archive(tmp_path / "a")
    assert err.value.field == fmt.MANIFEST and "larger than" in err.value.description


def test_a_members_file_over_64_mib_is_refused_before_it_is_read(tmp_path: Path) -> None:
    path = tmp_path / "members.json"
    path.write_text('{"members": [{"source": "ada"}]}')
    _pad_to(path, 64 * 2**20 + 1)
    with pytest.raises(errors.InvalidArgument) as err:
        plan.read_members_file(path)
    assert err.value.field == "members" and str(path) in err.value.description


DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize("where", ["memories.jsonl line 1", fmt.WORKSPACE, fmt.MANIFEST])
def test_json_nested_deeper_than_the_parser_goes_is_refused_naming_where(
    tmp_path: Path, where: str
) -> None:
    write_archive(tmp_path / "a", {"memories": [memory(1)]})
    directory = tmp_path / "a"
    if where == fmt.MANIFEST:
        (directory / fmt.MANIFEST).write_text('{"format": ' + DEEP + "}")
    elif where == fmt.WORKSPACE:
        (directory / fmt.WORKSPACE).write_text('{"settings": {"x": ' + DEEP + "}}")
        _fix_digest(directory, fmt.WORKSPACE)
    else:
        (directory / "memories.jsonl").write_text('{"title": ' + DEEP + "}\n")
        _fix_digest(directory, "memories")
    with pytest.raises(errors.InvalidArgument) as err:
        plan.read_archive(directory)
    assert err.value.field == where and "nested" in err.value.description


def test_a_members_file_nested_too_deep_is_refused_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "members.json"
    path.write_text('{"members": ' + DEEP + "}")
    with pytest.raises(errors.InvalidArgument) as err:
        plan.read_members_file(path)
    assert err.value.field == "members" and "nested" in err.value.description


def test_json_nested_deeper_than_the_format_is_refused_though_the_parser_goes(
    tmp_path: Path,
) -> None:
    path = tmp_path / "members.json"
    path.write_text('{"members": [' + "[" * fmt.MAX_DEPTH + "]" * fmt.MAX_DEPTH + "]}")
    with pytest.raises(errors.InvalidArgument) as err:
        plan.read_members_file(path)
    assert err.value.field == "members" and "nested" in err.value.description


def test_the_members_exported_are_those_of_the_snapshots_moment() -> None:
    from services.store.domain.archive_export import ControlMember, snapshot_members

    live, left, leaving, gone = (uid(n) for n in (1, 2, 3, 4))
    known = [
        ControlMember(live, "ada", "owner", False),
        # Removed, and the snapshot holds the removal.
        ControlMember(left, "bob", "member", True),
        # Removed after the snapshot: it still holds their memories as theirs.
        ControlMember(leaving, "cy", "member", True),
        # Removed long ago: nothing of theirs is left to erase or hand over.
        ControlMember(gone, "dee", "member", True),
    ]
    chosen = snapshot_members(known, removed_here={left}, still_holding={leaving})
    assert [m["handle"] for m in chosen] == ["ada", "cy"]
    assert chosen[0] == {"id": live, "handle": "ada", "role": "owner"}


# -- tombstones carry no text ------------------------------------------------------

GONE = {"title": "", "body": "", "forgotten_at": T, "forgotten_by": ADA}


@pytest.mark.parametrize(
    ("records", "field"),
    [
        ({"memories": [memory(1, **{**GONE, "title": "back"})]}, "memories.jsonl line 1: title"),
        ({"memories": [memory(1, **{**GONE, "body": "back"})]}, "memories.jsonl line 1: body"),
        (
            {
                "memories": [memory(1, **GONE)],
                "revisions": [
                    {"memory_id": uid(1), "revision": 1, "action": "create",
                     "changed_by": ADA, "reason": "", "changed_at": T},
                    {"memory_id": uid(1), "revision": 2, "action": "forget",
                     "changed_by": ADA, "reason": "it said the code was 4711", "changed_at": T},
                ],
            },
            "revisions.jsonl line 2: reason",
        ),
        (
            {
                "memories": [memory(1, **GONE)],
                "entities": [{"id": uid(10), "name": "Heron", "type": None, "created_at": T}],
                "attribute_claims": [
                    {"id": uid(20), "memory_id": uid(1), "entity_id": uid(10),
                     "attribute": "code", "value": "4711", "valid_from": None,
                     "valid_until": None, "confidence": 1.0, "stated_at": T, "retired_at": None},
                ],
            },
            "attribute_claims.jsonl line 1: memory_id",
        ),
        (
            {
                "memories": [memory(1, **GONE)],
                "entities": [{"id": uid(10), "name": "Heron", "type": None, "created_at": T}],
                "aliases": [
                    {"id": uid(21), "memory_id": uid(1), "entity_id": uid(10),
                     "alias": "the code 4711", "stated_at": T, "retired_at": None},
                ],
            },
            "aliases.jsonl line 1: memory_id",
        ),
        (
            {
                "memories": [memory(1, **GONE)],
                "entities": [
                    {"id": uid(10), "name": "Heron", "type": None, "created_at": T},
                    {"id": uid(11), "name": "Egret", "type": None, "created_at": T},
                ],
                "relation_claims": [
                    {"id": uid(22), "memory_id": uid(1), "subject_id": uid(10),
                     "predicate": "owes", "object_id": uid(11), "valid_from": None,
                     "valid_until": None, "confidence": 1.0, "stated_at": T, "retired_at": None},
                ],
            },
            "relation_claims.jsonl line 1: memory_id",
        ),
        (
            {
                "memories": [memory(1, **GONE)],
                "vectors": [
                    {"memory_id": uid(1), "model_id": "m", "input_version": "v",
                     "created_at": T, "vector": "A" * 2048},
                ],
            },
            "vectors.jsonl line 1: memory_id",
        ),
    ],
)  # fmt: skip
def test_a_tombstone_given_text_is_refused_naming_the_record_and_field(
    tmp_path: Path, records: dict[str, list[dict[str, Any]]], field: str
) -> None:
    """A forgotten memory travels without its text (docs/export.md): an
    archive that gives one a title, a body, a reason, a claim or a vector was
    changed by hand, and is refused before anything is made."""
    write_archive(tmp_path / "a", records)
    with pytest.raises(errors.InvalidArgument) as err:
        plan.read_archive(tmp_path / "a")
    assert err.value.field == field
    assert "forgotten" in err.value.description


def test_a_tombstone_as_exported_is_read_and_its_old_mentions_stay_behind(tmp_path: Path) -> None:
    """A memory forgotten before forget purged the graph may still hold a
    mention in its source: it comes as a tombstone, the mention does not."""
    records = {
        "memories": [memory(1, **GONE), memory(2)],
        "entities": [{"id": uid(10), "name": "Heron", "type": None, "created_at": T}],
        "mentions": [{"memory_id": uid(1), "entity_id": uid(10)}],
        "revisions": [
            {"memory_id": uid(1), "revision": 2, "action": "forget",
             "changed_by": ADA, "reason": "", "changed_at": T},
        ],
    }  # fmt: skip
    write_archive(tmp_path / "a", records)
    chosen = plan.select(plan.read_archive(tmp_path / "a"), {ADA, BOB})
    tomb = next(m for m in chosen.records["memories"] if m["id"] == uid(1))
    assert tomb["title"] == "" and tomb["body"] == ""
    assert chosen.records["mentions"] == [] and chosen.records["entities"] == []


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
    _fix_digest(tmp_path / "a", fmt.WORKSPACE)
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
