"""The workspace archive's format (docs/export.md): a directory of JSON Lines
files, one per kind of record, and a manifest naming the format's version,
the files, their record counts and SHA-256 digests. Every record is checked
against the JSON Schema below before anything is written, and a bad one is
named by file, line and field. The bounds on reading the files (a file's
size, a line's length, a value's nesting) are in archive_reading.

    python -m services.store.domain.archive_format   # prints the schema
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

from recallatron import errors
from recallatron.vocabulary import KINDS, PURPOSES

# Reading files within their bounds is archive_reading's; what callers of the
# format use of it stays reachable from here.
from services.store.domain.archive_reading import file_name as file_name
from services.store.domain.archive_reading import lines, load_json
from services.store.domain.archive_reading import read_json_file as read_json_file
from services.store.domain.archive_reading import sha256_of as sha256_of
from services.store.domain.archive_times import time_of as time_of

FORMAT_NAME = "recallatron-workspace-archive"
FORMAT_VERSION = 2  # 2: a mention's mentioned_at (docs/export.md, "Versions")
MANIFEST = "manifest.json"
WORKSPACE = "workspace.json"

# The record files, in the order an import writes them (each after what it refers to).
RECORD_FILES = (
    "episodes",
    "entities",
    "memories",
    "revisions",
    "links",
    "mentions",
    "aliases",
    "attribute_claims",
    "relation_claims",
    "merges",
    "pairs_apart",
    "dismissed_pairs",
    "history",
    "vectors",
)

_UUID = {
    "type": "string",
    "pattern": "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$",
}
_UUID_OR_NULL = {"anyOf": [_UUID, {"type": "null"}]}
# ISO 8601 with a date, a time and an offset (as Postgres writes timestamptz in JSON).
_TIME = {
    "type": "string",
    "pattern": r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?([+-]\d{2}(:\d{2})?|Z)$",
}
_TIME_OR_NULL = {"anyOf": [_TIME, {"type": "null"}]}
_PURPOSES = {
    "type": "array",
    "items": {"enum": list(PURPOSES)},
    "minItems": 1,
    "uniqueItems": True,
}
_CONFIDENCE = {"type": "number", "minimum": 0, "maximum": 1}


def _record(properties: dict[str, Any], optional: tuple[str, ...] = ()) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": [k for k in properties if k not in optional],
        "additionalProperties": False,
    }


_CLAIM_TIMES = {
    "valid_from": _TIME_OR_NULL,
    "valid_until": _TIME_OR_NULL,
    "confidence": _CONFIDENCE,
    "stated_at": _TIME,
    "retired_at": _TIME_OR_NULL,
}

# mentioned_at: when a correction made the memory name it; absent, since the memory.
_MENTION = {"memory_id": _UUID, "entity_id": _UUID, "mentioned_at": _TIME_OR_NULL}

RECORD_SCHEMAS: dict[str, dict[str, Any]] = {
    "memories": _record(
        {
            "id": _UUID,
            "kind": {"enum": list(KINDS)},
            "title": {"type": "string"},
            "body": {"type": "string"},
            "confidence": _CONFIDENCE,
            "origin": {"enum": ["told", "derived", "migrated"]},
            "revision": {"type": "integer", "minimum": 1},
            "superseded_by": _UUID_OR_NULL,
            "forgotten_at": _TIME_OR_NULL,
            "forgotten_by": _UUID_OR_NULL,
            "audience_member": _UUID_OR_NULL,
            "purposes": _PURPOSES,
            "created_by": _UUID,
            "created_at": _TIME,
            "updated_at": _TIME,
            "episode_id": _UUID_OR_NULL,
        }
    ),
    "revisions": _record(
        {
            "memory_id": _UUID,
            "revision": {"type": "integer", "minimum": 1},
            "action": {"enum": ["create", "correct", "supersede", "forget"]},
            "changed_by": _UUID,
            "reason": {"type": "string"},
            "changed_at": _TIME,
        }
    ),
    "links": _record(
        {"memory_id": _UUID, "kind": {"enum": ["derived_from", "about"]}, "target_id": _UUID}
    ),
    "entities": _record(
        {
            "id": _UUID,
            "name": {"type": "string", "minLength": 1},
            "type": {"type": ["string", "null"]},
            "created_at": _TIME,
        }
    ),
    "mentions": _record(_MENTION, optional=("mentioned_at",)),
    "aliases": _record(
        {
            "id": _UUID,
            "memory_id": _UUID,
            "entity_id": _UUID,
            "alias": {"type": "string", "minLength": 1},
            "stated_at": _TIME,
            "retired_at": _TIME_OR_NULL,
        }
    ),
    "attribute_claims": _record(
        {
            "id": _UUID,
            "memory_id": _UUID,
            "entity_id": _UUID,
            "attribute": {"type": "string", "minLength": 1},
            "value": {"type": "string"},
            **_CLAIM_TIMES,
        }
    ),
    "relation_claims": _record(
        {
            "id": _UUID,
            "memory_id": _UUID,
            "subject_id": _UUID,
            "predicate": {"type": "string", "minLength": 1},
            "object_id": _UUID,
            **_CLAIM_TIMES,
        }
    ),
    "episodes": _record(
        {
            "id": _UUID,
            "title": {"type": "string"},
            "started_at": _TIME,
            "ended_at": _TIME,
            "audience_member": _UUID_OR_NULL,
            "purposes": _PURPOSES,
            "speaker_member": _UUID_OR_NULL,
            "created_by": _UUID,
            "created_at": _TIME,
            "participants": {
                "type": "array",
                "items": {
                    "oneOf": [
                        _record({"member_id": _UUID, "entity_id": {"type": "null"}}),
                        _record({"member_id": {"type": "null"}, "entity_id": _UUID}),
                    ]
                },
            },
        }
    ),
    "merges": _record(
        {
            "id": _UUID,
            "kept_id": _UUID,
            "merged_id": _UUID,
            "decided_by": _UUID,
            "decided_at": _TIME,
            "undone_by": _UUID_OR_NULL,
            "undone_at": _TIME_OR_NULL,
        }
    ),
    "pairs_apart": _record(
        {"first_id": _UUID, "second_id": _UUID, "decided_by": _UUID, "decided_at": _TIME}
    ),
    "dismissed_pairs": _record(
        {"first_id": _UUID, "second_id": _UUID, "dismissed_by": _UUID, "dismissed_at": _TIME}
    ),
    "history": _record(
        {
            "id": _UUID,
            "owner_member": _UUID,
            "chat_id": {"type": "string"},
            "role": {"type": "string"},
            "text": {"type": "string"},
            "occurred_at": _TIME,
        }
    ),
    "vectors": _record(
        {
            "memory_id": _UUID,
            "model_id": {"type": "string", "minLength": 1},
            "input_version": {"type": "string", "minLength": 1},
            "created_at": _TIME,
            # 384 big-endian float32s, base64: 1,536 bytes, 2,048 characters.
            "vector": {"type": "string", "pattern": "^[A-Za-z0-9+/]{2048}$"},
        }
    ),
}

MANIFEST_SCHEMA: dict[str, Any] = _record(
    {
        "format": {"const": FORMAT_NAME},
        "format_version": {"type": "integer", "minimum": 1},
        "exported_at": _TIME,
        "source": _record(
            {
                "workspace_id": _UUID,
                "slug": {"type": "string"},
                "schema_level": {"type": "string"},
            }
        ),
        "vectors_included": {"type": "boolean"},
        "files": {
            "type": "object",
            "propertyNames": {"enum": [*RECORD_FILES, WORKSPACE]},
            "additionalProperties": _record(
                {
                    "name": {"type": "string"},
                    "records": {"type": "integer", "minimum": 0},
                    "sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
                }
            ),
        },
    }
)

WORKSPACE_SCHEMA: dict[str, Any] = _record(
    {
        "settings": {"type": "object"},
        "members": {
            "type": "array",
            "items": _record(
                {
                    "id": _UUID,
                    "handle": {"type": "string", "minLength": 1},
                    "role": {"enum": ["owner", "member"]},
                }
            ),
        },
    }
)

MEMBERS_FILE_SCHEMA: dict[str, Any] = _record(
    {
        "members": {
            "type": "array",
            "items": _record(
                {
                    "source": {"type": "string", "minLength": 1},
                    "handle": {"type": "string", "minLength": 1},
                    "role": {"enum": ["owner", "member"]},
                },
                optional=("handle", "role"),
            ),
        }
    }
)


def schema() -> dict[str, Any]:
    """The whole format as one JSON Schema document (docs/export.md)."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": f"{FORMAT_NAME} version {FORMAT_VERSION}",
        "$defs": {
            "manifest": MANIFEST_SCHEMA,
            "workspace": WORKSPACE_SCHEMA,
            "members_file": MEMBERS_FILE_SCHEMA,
            **{name: RECORD_SCHEMAS[name] for name in RECORD_FILES},
        },
    }


_VALIDATORS = {
    name: Draft202012Validator(s)
    for name, s in {
        **RECORD_SCHEMAS,
        "manifest": MANIFEST_SCHEMA,
        "workspace": WORKSPACE_SCHEMA,
        "members_file": MEMBERS_FILE_SCHEMA,
    }.items()
}


# Each schema's time fields (the pattern checks a time's shape, time_of that
# it exists, archive_times), found in the schemas so that a time field added
# is checked too.
TIME_FIELDS = {
    name: tuple(k for k, s in v["properties"].items() if s is _TIME or s is _TIME_OR_NULL)
    for name, v in {**RECORD_SCHEMAS, "manifest": MANIFEST_SCHEMA}.items()
}


# Spans a record holds, from its begin to its end: every write refuses an end
# before the begin, as the tables' checks do (a merge's undo, the service).
# Not a statement's record time (an alias's, a claim's, a relation's
# stated_at and retired_at): both are the server's clock at two writes, and a
# clock stepped back between them leaves the retirement first in a database
# no write refused; its archive is copied as it stands.
_VALID = ("valid_from", "valid_until", "a claim holds from before it holds until")
_SPANS = {
    "attribute_claims": (_VALID,),
    "relation_claims": (_VALID,),
    "episodes": (("started_at", "ended_at", "an episode starts before it ends"),),
    "merges": (("decided_at", "undone_at", "a merge is undone only after it was decided"),),
}


def _check_times(kind: str, value: dict[str, Any], place: str) -> None:
    """Each time of the record exists, and no span it holds ends before it begins."""
    times = {
        key: time_of(value[key], f"{place}: {key}")
        for key in TIME_FIELDS.get(kind, ())
        if value.get(key) is not None
    }
    for begins, ends, why in _SPANS.get(kind, ()):
        if begins in times and ends in times and times[ends] < times[begins]:
            raise errors.InvalidArgument(
                f"{place}: {ends}", f"is before {begins} ({value[begins]}): {why}"
            )


# Each record's id fields, found in the schemas as the time fields are.
_ID_FIELDS = {
    name: tuple(k for k, s in v["properties"].items() if s is _UUID or s is _UUID_OR_NULL)
    for name, v in RECORD_SCHEMAS.items()
}


def canonical_ids(kind: str, value: dict[str, Any]) -> dict[str, Any]:
    """A checked record of ``kind`` (or workspace.json) with each id in its
    canonical form, lower case, as Postgres writes a UUID: the schema takes
    either case, and every id an archive holds is compared and joined as
    one id however it is spelt (the copy holds it so too)."""
    for key in _ID_FIELDS.get(kind, ()):
        if value[key] is not None:
            value[key] = value[key].lower()
    nested = {"episodes": "participants", "workspace": "members"}.get(kind)
    for item in value[nested] if nested else ():
        for key in ("id", "member_id", "entity_id"):
            if item.get(key) is not None:
                item[key] = item[key].lower()
    return value


def _where(error: ValidationError) -> str:
    path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
    return path.lstrip(".")


def check(kind: str, value: Any, place: str) -> None:
    """InvalidArgument naming ``place`` and the field when ``value`` is not a
    valid record of ``kind``, or holds a time that does not exist or a span
    that ends before it begins."""
    error = next(iter(_VALIDATORS[kind].iter_errors(value)), None)
    if error is None:
        _check_times(kind, value, place)
        return
    field = _where(error)
    if error.validator == "required" or error.validator == "additionalProperties":
        field = field or "record"
    text = error.message if len(error.message) <= 200 else error.message[:200] + "..."
    raise errors.InvalidArgument(f"{place}: {field}" if field else place, text)


@dataclass
class FileDigest:
    name: str
    records: int
    sha256: str

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "records": self.records, "sha256": self.sha256}


def read_manifest(directory: Path) -> dict[str, Any]:
    """The manifest, its version checked before anything else: an archive of
    a newer format is refused, saying so, before its records are read."""
    path = directory / MANIFEST
    if not directory.is_dir():
        raise errors.InvalidArgument("archive", f"{directory} is not a directory")
    if not path.is_file():
        raise errors.InvalidArgument(
            "archive", f"{directory} holds no {MANIFEST}: not an archive, or an unfinished export"
        )
    manifest = read_json_file(path, MANIFEST)
    if not isinstance(manifest, dict):
        raise errors.InvalidArgument(MANIFEST, "must be a JSON object")
    if manifest.get("format") != FORMAT_NAME:
        raise errors.InvalidArgument(
            f"{MANIFEST}: format", f"must be {FORMAT_NAME!r}: not a Recallatron workspace archive"
        )
    version = manifest.get("format_version")
    # 2.0 is 2 to the schema's "integer": newer too.
    if (
        isinstance(version, (int, float))
        and not isinstance(version, bool)
        and version > FORMAT_VERSION
    ):
        raise errors.FailedPrecondition(
            f"format_version: the archive is format version {version}, newer than this "
            f"release reads (up to {FORMAT_VERSION}); import it with a newer recallatron",
            "format_version",
        )
    check("manifest", manifest, MANIFEST)
    return manifest


def records(
    directory: Path, kind: str, manifest: dict[str, Any]
) -> Iterator[tuple[str, dict[str, Any]]]:
    """The records of one file, each checked and its ids made canonical, with
    where it is ("memories.jsonl line 12"); the file's digest and count checked
    against the manifest first."""
    listed = manifest["files"].get(kind)
    if listed is None:
        return
    name = file_name(kind)
    path = directory / name
    if not path.is_file():
        raise errors.InvalidArgument(f"{name}", "is listed in the manifest but missing")
    if sha256_of(path) != listed["sha256"]:
        raise errors.InvalidArgument(
            name, "does not match the manifest's digest: the archive was changed or is incomplete"
        )
    count = 0
    with path.open("rb") as f:
        for number, raw in lines(f, kind):
            if not raw.strip():
                continue
            place = f"{name} line {number}"
            value = load_json(raw, place)
            check(kind, value, place)
            count += 1
            yield place, canonical_ids(kind, value)
    if count != listed["records"]:
        raise errors.InvalidArgument(
            name, f"holds {count} records, the manifest says {listed['records']}"
        )


def main() -> int:
    json.dump(schema(), sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
