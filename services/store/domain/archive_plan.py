"""What an import brings over (docs/export.md, "What the copy holds"): the
archive read and checked record by record, its references checked, and
what no member of the copy may see left out (the source's members are mapped
onto the members the import creates in archive_members.py).

A memory whose audience is a member the copy does not have (left out of the
members file, or gone from the source before the export) becomes a tombstone
in the copy: its id stays so that links keep their target, its text, graph
claims, mentions and vector do not come. Episodes and history of such a
member do not come either, nor an entity that only those memories named."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from recallatron import errors
from recallatron.vocabulary import (
    MAX_BODY,
    MAX_CLAIM_VALUE,
    MAX_ENTITY_NAME,
    MAX_HISTORY_CHAT_ID,
    MAX_HISTORY_ROLE,
    MAX_HISTORY_TEXT,
    MAX_REASON,
    MAX_TITLE,
)
from services.store.domain import archive_format as fmt
from services.store.domain import validation as v
from services.store.domain.archive_chains import check_chains, take_out_forgotten
from services.store.domain.archive_history import history_name
from services.store.domain.archive_keys import check_keys
from services.store.domain.archive_merges import check_merges
from services.store.domain.archive_reading import add_once
from services.store.domain.archive_vectors import check_vectors
from services.store.domain.control import validate_settings
from services.store.domain.control_names import HANDLE_RE, HANDLE_RULE
from services.store.domain.control_records import WorkspaceSettings
from services.store.domain.graph_rules import identifier

NOT_MAPPED_REASON = "not imported: its audience member is not a member of the copy"

Record = dict[str, Any]
# A record and where it came from ("memories.jsonl line 12").
Placed = tuple[str, Record]


@dataclass
class Archive:
    directory: Path
    manifest: dict[str, Any]
    settings: WorkspaceSettings
    members: list[Record]
    records: dict[str, list[Placed]] = field(default_factory=dict)

    def count(self, kind: str) -> int:
        return len(self.records.get(kind, []))


def read_archive(
    directory: Path,
    on_total: Callable[[str, int], None] = lambda _phase, _n: None,
    on_rows: Callable[[int], None] = lambda _n: None,
) -> Archive:
    """Every file read and checked (schema, digests, counts); nothing written."""
    manifest = fmt.read_manifest(directory)
    # Every export lists each record file, even an empty one: one not listed
    # would be read as holding nothing, and the copy made without its records.
    missing = [
        fmt.file_name(k)
        for k in fmt.RECORD_FILES
        if k not in manifest["files"] and (k != "vectors" or manifest["vectors_included"])
    ]
    if missing:
        raise errors.InvalidArgument(
            f"{fmt.MANIFEST}: files",
            f"does not list {', '.join(missing)}: every archive lists each of its record "
            "files; the manifest was changed or is incomplete",
        )
    listed = [manifest["files"][k]["records"] for k in fmt.RECORD_FILES if k in manifest["files"]]
    on_total("reading", sum(listed))
    workspace = _read_workspace(directory, manifest)
    # from_json passes over a key it does not know: the copy would have the
    # default in place of a setting misspelt or of a release this one is not.
    known = WorkspaceSettings.__dataclass_fields__
    for key in workspace["settings"]:
        if key not in known:
            raise errors.InvalidArgument(
                f"{fmt.WORKSPACE}: settings.{key}",
                f"is no setting this release knows ({', '.join(known)})",
            )
    settings = WorkspaceSettings.from_json(workspace["settings"])
    try:
        validate_settings(settings)
    except errors.InvalidArgument as exc:
        raise errors.InvalidArgument(f"{fmt.WORKSPACE}: {exc.field}", exc.description) from None
    archive = Archive(directory, manifest, settings, workspace["members"])
    for kind in fmt.RECORD_FILES:
        placed: list[Placed] = []
        for place, record in fmt.records(directory, kind, manifest):
            if kind == "history":
                _shorten_names(record)
            placed.append((place, record))
            if len(placed) % 1000 == 0:
                on_rows(1000)
        on_rows(len(placed) % 1000)
        archive.records[kind] = placed
    _check_limits(archive)
    _check_references(archive)
    check_keys(archive.records)
    check_chains(archive.records.get("memories", []))
    check_merges(archive.records.get("merges", []))
    check_vectors(archive.records.get("vectors", []))
    _check_tombstones(archive)
    _mention_what_claims_name(archive)
    return archive


def _read_workspace(directory: Path, manifest: dict[str, Any]) -> Record:
    listed = manifest["files"].get(fmt.WORKSPACE)
    path = directory / fmt.WORKSPACE
    if listed is None or not path.is_file():
        raise errors.InvalidArgument(fmt.WORKSPACE, "is missing from the archive")
    if fmt.sha256_of(path) != listed["sha256"]:
        raise errors.InvalidArgument(fmt.WORKSPACE, "does not match the manifest's digest")
    workspace = fmt.read_json_file(path, fmt.WORKSPACE)
    fmt.check("workspace", workspace, fmt.WORKSPACE)
    fmt.canonical_ids("workspace", workspace)
    ids = [m["id"] for m in workspace["members"]]
    if len(set(ids)) != len(ids):
        raise errors.InvalidArgument(f"{fmt.WORKSPACE}: members", "name a member twice")
    # Checked with the archive, not when the import creates each member (the
    # workspace made by then): each becomes a member of the copy by this handle.
    # Two in different cases pass: a store holding such members from before
    # handles were one in any case exports them so (archive_members.py).
    handles: set[str] = set()
    for i, m in enumerate(workspace["members"]):
        where = f"{fmt.WORKSPACE}: members[{i}].handle"
        if not HANDLE_RE.match(m["handle"]):
            raise errors.InvalidArgument(where, HANDLE_RULE)
        if m["handle"] in handles:
            raise errors.InvalidArgument(where, f"{m['handle']!r} is another member's handle too")
        handles.add(m["handle"])
    result: Record = workspace
    return result


# Each text field's rule as every write checks it (validation, graph_rules):
# the copy holds nothing a tool could not have written, nor a correct write
# back. A length, or None for an identifier (a type may be absent).
_LIMITS: dict[str, tuple[tuple[str, int | None], ...]] = {
    "memories": (("title", MAX_TITLE), ("body", MAX_BODY)),
    "revisions": (("reason", MAX_REASON),),
    "entities": (("name", MAX_ENTITY_NAME), ("type", None)),
    "aliases": (("alias", MAX_ENTITY_NAME),),
    "attribute_claims": (("attribute", None), ("value", MAX_CLAIM_VALUE)),
    "relation_claims": (("predicate", None),),
    "episodes": (("title", MAX_TITLE),),
    "history": (
        ("chat_id", MAX_HISTORY_CHAT_ID),
        ("role", MAX_HISTORY_ROLE),
        ("text", MAX_HISTORY_TEXT),
    ),
}


def _shorten_names(record: Record) -> None:
    """A history turn's chat id or role past its limit, as an export before
    archive_history wrote one a workspace kept from before that limit, is
    shortened as an export now writes it, as it is read: the archive's
    records are held, and such a name may be megabytes."""
    for key, most in (("chat_id", MAX_HISTORY_CHAT_ID), ("role", MAX_HISTORY_ROLE)):
        if isinstance(record[key], str):
            record[key] = history_name(record[key], most)


def _check_limits(archive: Archive) -> None:
    """No text past the limits every write keeps (an archive edited by hand)."""
    for kind, fields in _LIMITS.items():
        for place, record in archive.records.get(kind, []):
            for key, limit in fields:
                value = record[key]
                try:
                    if limit is None:
                        if value is not None:
                            identifier(value, key)
                    elif kind == "memories":
                        v.memory_text(value, key, limit, required=False)
                    else:
                        v.text(value, key, limit, required=False)
                except errors.InvalidArgument as exc:
                    raise errors.InvalidArgument(f"{place}: {key}", exc.description) from None


def _check_references(archive: Archive) -> None:
    """Every id a record refers to names a record of the archive."""
    memories = _unique(archive, "memories", "id")
    entities = _unique(archive, "entities", "id")
    episodes = _unique(archive, "episodes", "id")
    _unique(archive, "aliases", "id")
    _unique(archive, "attribute_claims", "id")
    _unique(archive, "relation_claims", "id")
    _unique(archive, "history", "id")
    refs = {
        "memories": (("superseded_by", memories, True), ("episode_id", episodes, True)),
        "revisions": (("memory_id", memories, False),),
        "links": (("memory_id", memories, False), ("target_id", memories, False)),
        "mentions": (("memory_id", memories, False), ("entity_id", entities, False)),
        "aliases": (("memory_id", memories, False), ("entity_id", entities, False)),
        "attribute_claims": (("memory_id", memories, False), ("entity_id", entities, False)),
        "relation_claims": (
            ("memory_id", memories, False),
            ("subject_id", entities, False),
            ("object_id", entities, False),
        ),
        "merges": (("kept_id", entities, False), ("merged_id", entities, False)),
        "pairs_apart": (("first_id", entities, False), ("second_id", entities, False)),
        "dismissed_pairs": (("first_id", memories, False), ("second_id", memories, False)),
        "vectors": (("memory_id", memories, False),),
    }
    names = {id(memories): "memory", id(entities): "entity", id(episodes): "episode"}
    for kind, checks in refs.items():
        for place, record in archive.records.get(kind, []):
            for key, known, nullable in checks:
                value = record[key]
                if value is None and nullable:
                    continue
                if value not in known:
                    raise errors.InvalidArgument(
                        f"{place}: {key}", f"names no {names[id(known)]} of the archive"
                    )
    for place, record in archive.records.get("episodes", []):
        for i, p in enumerate(record["participants"]):
            if p["entity_id"] is not None and p["entity_id"] not in entities:
                raise errors.InvalidArgument(
                    f"{place}: participants[{i}].entity_id", "names no entity of the archive"
                )


# What of a tombstone's the source never holds, and so no archive does: forget
# empties the text, deletes the claims, aliases and vector, and the export
# leaves out the reasons. Its mentions are not here: one forgotten before
# forget purged the graph may still hold them (select() leaves them behind).
_NOT_OF_A_TOMBSTONE = (
    ("attribute_claims", "claims"),
    ("relation_claims", "relations"),
    ("aliases", "aliases"),
    ("vectors", "vector"),
)


def _check_tombstones(archive: Archive) -> None:
    """A forgotten memory travels without its text (docs/export.md): one
    given a title, a body, a revision's reason, a claim or a vector was
    changed by hand, and is refused rather than brought back."""
    forgotten: set[str] = set()
    for place, record in archive.records.get("memories", []):
        if record["forgotten_at"] is None:
            continue
        forgotten.add(record["id"])
        for key in ("title", "body"):
            if record[key]:
                raise errors.InvalidArgument(
                    f"{place}: {key}", "must be empty: the memory is forgotten, its text gone"
                )
    for place, record in archive.records.get("revisions", []):
        if record["memory_id"] in forgotten and record["reason"]:
            raise errors.InvalidArgument(
                f"{place}: reason",
                "must be empty: its memory is forgotten, and a reason may quote its text",
            )
    for kind, what in _NOT_OF_A_TOMBSTONE:
        for place, record in archive.records.get(kind, []):
            if record["memory_id"] in forgotten:
                raise errors.InvalidArgument(
                    f"{place}: memory_id",
                    f"names a forgotten memory: forget removed its {what}",
                )


# The entity ids each kind of claim names. Every write mentions them from
# the memory that states the claim (graph_claims.GraphWriter.write, carry):
# an entity is visible only through a mention, and the graph's reads place
# a visible claim's entities by it.
_NAMED_BY_CLAIMS = (
    ("attribute_claims", ("entity_id",)),
    ("aliases", ("entity_id",)),
    ("relation_claims", ("subject_id", "object_id")),
)


def _mention_what_claims_name(archive: Archive) -> None:
    """Every entity a claim, relation or alias names is mentioned by the
    memory that states it, as every write makes it: otherwise those who may
    see the claim might not see its entity (the walk could not place such a
    relation's end). A mention the archive lacks is added rather than the
    archive refused: workspaces written before every write made these
    mentions export without them, and the claim already names the entity to
    whoever may see its memory, so the mention shows no one anything more.
    As a write makes it, it counts from the first claim naming the entity
    when that was stated after the memory (a correction's): `as_of` a time
    before, the memory did not name it (mention.mentioned_at,
    0067_baseline/02_memory_tables.sql)."""
    mentions = archive.records.setdefault("mentions", [])
    mentioned = {(r["memory_id"], r["entity_id"]) for _, r in mentions}
    created = {
        r["id"]: fmt.time_of(r["created_at"], f"{place}: created_at")
        for place, r in archive.records.get("memories", [])
    }
    added: dict[tuple[str, str], tuple[str, datetime]] = {}
    for kind, keys in _NAMED_BY_CLAIMS:
        for place, record in archive.records.get(kind, []):
            stated = fmt.time_of(record["stated_at"], f"{place}: stated_at")
            for key in keys:
                pair = (record["memory_id"], record[key])
                if pair in mentioned or (pair in added and added[pair][1] <= stated):
                    continue
                added[pair] = (added[pair][0] if pair in added else f"{place}: {key}", stated)
    for (memory_id, entity_id), (place, stated) in added.items():
        mention: Record = {"memory_id": memory_id, "entity_id": entity_id}
        if stated > created[memory_id]:
            mention["mentioned_at"] = stated.isoformat()
        mentions.append((place, mention))


def _unique(archive: Archive, kind: str, key: str) -> set[str]:
    seen: set[str] = set()
    for place, record in archive.records.get(kind, []):
        add_once(seen, record[key], f"{place}: {key}", "is not unique in the archive")
    return seen


# -- members -------------------------------------------------------------------


def read_members_file(path: Path) -> Record:
    value = fmt.read_json_file(path, "members")
    fmt.check("members_file", value, "members file")
    result: Record = value
    return result


# -- what the copy holds -----------------------------------------------------------


@dataclass
class Selection:
    """The archive's records as the copy holds them: member ids still the
    source's (mapped when written), tombstones made, what nobody may see out."""

    records: dict[str, list[Record]]
    # Memories the import made tombstones of (their audience member is not mapped).
    hidden: set[str]
    left_out: dict[str, int]


def select(archive: Archive, mapped: set[str]) -> Selection:
    def sees(member: str | None) -> bool:
        return member is None or member in mapped

    out: dict[str, list[Record]] = {}
    left_out: dict[str, int] = {}
    rows = take_out_forgotten({k: [r for _, r in v] for k, v in archive.records.items()})
    episodes = [e for e in rows.get("episodes", []) if sees(e["audience_member"])]
    kept_episodes = {e["id"] for e in episodes}
    hidden: set[str] = set()
    memories: list[Record] = []
    for m in rows.get("memories", []):
        if m["forgotten_at"] is None and not sees(m["audience_member"]):
            hidden.add(m["id"])
            m = {**m, "title": "", "body": "", "forgotten_by": None}
        if m["episode_id"] is not None and m["episode_id"] not in kept_episodes:
            m = {**m, "episode_id": None}
        memories.append(m)
    out["memories"] = memories
    gone = hidden | {m["id"] for m in memories if m["forgotten_at"] is not None}
    for kind in ("mentions", "aliases", "attribute_claims", "relation_claims", "vectors"):
        out[kind] = [r for r in rows.get(kind, []) if r["memory_id"] not in gone]
    out["revisions"] = [
        {**r, "reason": ""} if r["memory_id"] in hidden else r for r in rows.get("revisions", [])
    ]
    out["links"] = rows.get("links", [])
    out["dismissed_pairs"] = rows.get("dismissed_pairs", [])
    # An entity only the hidden memories named goes with them (its name is
    # their text); one nothing named in the source either stays.
    before = _named(rows)
    after = _named(out)
    dropped = before - after
    out["entities"] = [e for e in rows.get("entities", []) if e["id"] not in dropped]
    out["episodes"] = [
        {**e, "participants": [p for p in e["participants"] if p["entity_id"] not in dropped]}
        for e in episodes
    ]
    out["merges"] = [
        r
        for r in rows.get("merges", [])
        if r["kept_id"] not in dropped and r["merged_id"] not in dropped
    ]
    out["pairs_apart"] = [
        r
        for r in rows.get("pairs_apart", [])
        if r["first_id"] not in dropped and r["second_id"] not in dropped
    ]
    out["history"] = [h for h in rows.get("history", []) if h["owner_member"] in mapped]
    left_out["private_memories"] = len(hidden)
    left_out["episodes"] = len(rows.get("episodes", [])) - len(episodes)
    left_out["entities"] = len(dropped)
    left_out["history"] = len(rows.get("history", [])) - len(out["history"])
    return Selection(out, hidden, left_out)


def _named(rows: dict[str, list[Record]]) -> set[str]:
    named = {
        r["entity_id"] for k in ("mentions", "aliases", "attribute_claims") for r in rows.get(k, [])
    }
    for r in rows.get("relation_claims", []):
        named.add(r["subject_id"])
        named.add(r["object_id"])
    return named
