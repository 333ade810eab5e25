"""Reading the old store's `graph.jsonl` (docs/migration.md describes the
format): an append-only file of entity records plus confirm and supersede
patch lines, folded here at read time the way the old store's loader did.
Plain Python, no database of ours."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from recallatron.vocabulary import MAX_ENTITY_NAME
from services.store.domain.graph_rules import shows_something
from services.store.legacy.oldstore import OldStoreError, readable

# A lone UTF-16 surrogate: valid in JSON's escapes, not text Postgres takes.
_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass
class Entity:
    id: str
    name: str
    type: str
    properties: dict[str, Any]
    source: str
    # None: the record gave none.
    confidence: float | None
    valid_from: str | None
    valid_until: str | None
    superseded_by: str | None
    confirmed: bool = False
    confirmed_at: str | None = None
    # The time of the supersede patch that set superseded_by, as written.
    superseded_at: str | None = None

    @property
    def row_name(self) -> str:
        """The name its entity row takes: its name, or its id when the name
        shows nothing once folded (none given, or only accents or zero-width
        characters, which name no entity); "" when neither does, a record
        the fold takes for a malformed line."""
        return _row_name(self.name) or _row_name(self.id)

    def relations(self) -> list[tuple[str, str]]:
        """(verb, entity id) pairs kept sparsely in properties.relations."""
        rel = self.properties.get("relations")
        if not isinstance(rel, dict):
            return []
        out: list[tuple[str, str]] = []
        for verb, targets in rel.items():
            if isinstance(targets, str):
                targets = [targets]
            if isinstance(targets, list):
                out.extend((str(verb), str(t)) for t in targets if isinstance(t, str | int))
        return out


def clean_text(text: str) -> str:
    """``text`` without NUL characters, each run of spaces one, the ends stripped."""
    return " ".join(text.replace("\x00", "").split())


def _row_name(text: str) -> str:
    # Cut first: what shows may lie past the cut.
    name = clean_text(text)[:MAX_ENTITY_NAME]
    return name if shows_something(name) else ""


def _without_surrogates(value: Any) -> Any:
    """``value`` (a JSON value) with each lone surrogate replaced by U+FFFD."""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_without_surrogates(v) for v in value]
    if isinstance(value, dict):
        return {_without_surrogates(k): _without_surrogates(v) for k, v in value.items()}
    return value


def _is_true(value: object) -> bool:
    """A flag as written: true, or the text "true" (not "false", not 1.0)."""
    return value is True or (isinstance(value, str) and value.strip().lower() == "true")


def _confidence(value: object) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


@dataclass
class FoldStats:
    lines: int = 0
    records: int = 0
    # A record for an id already seen: the later one stands.
    restated: int = 0
    patches: Counter[str] = field(default_factory=Counter)
    # Patches for an id with no record before them.
    orphan_patches: int = 0
    unknown_ops: int = 0
    # Lines that are not JSON objects of either shape (a torn last write).
    malformed: int = 0


@dataclass(frozen=True)
class Resolution:
    entity_id: str | None
    # "self", "replaced", or why there is no usable entity / replacement.
    how: str


@dataclass
class Graph:
    entities: dict[str, Entity]
    stats: FoldStats

    def resolve(self, entity_id: str) -> Resolution:
        """The entity that stands for `entity_id` now: itself, or the end of
        its supersession chain. A chain that loops or leads to an id with no
        record stops at the last entity that has one."""
        if entity_id not in self.entities:
            return Resolution(None, "unknown entity")
        seen = {entity_id}
        current = entity_id
        while True:
            nxt = self.entities[current].superseded_by
            if not nxt:
                break
            if nxt in seen:
                return Resolution(current, "replacement chain loops")
            if nxt not in self.entities:
                return Resolution(current, "replacement missing")
            seen.add(nxt)
            current = nxt
        return Resolution(current, "self" if current == entity_id else "replaced")

    def entity_edges(self) -> int:
        return sum(len(e.relations()) for e in self.entities.values())


def _scalar(value: object) -> bool:
    """A value a text field may hold: text or a number (read as its digits).
    An object, a list or a flag would become Python's text of it, never what
    was written: the line is malformed."""
    return isinstance(value, str | int | float) and not isinstance(value, bool)


def _usable_id(value: object) -> bool:
    """An id a row can be keyed by: given, text or a number, and free of NUL
    characters, which Postgres text cannot hold (the ledger keeps old ids as
    text)."""
    return _scalar(value) and bool(value) and "\x00" not in str(value)


def _time_given(value: object) -> Any:
    """A time as written (text or Unix seconds); an object, a list or a flag
    gives none, as an unreadable time does (its end left open), rather than
    Python's text of it in the record's memory."""
    return value if _scalar(value) else None


# An entity record's text fields: absent or null, else text or a number.
_RECORD_TEXT = ("name", "type", "source")


def _record_shaped(obj: dict[str, Any]) -> bool:
    """A name or a type given, and every text field text or a number."""
    given = [obj.get(k) for k in _RECORD_TEXT]
    return bool(obj.get("name") or obj.get("type")) and all(v is None or _scalar(v) for v in given)


def _entity(obj: dict[str, Any]) -> Entity:
    props = obj.get("properties")
    confidence = obj.get("confidence")
    return Entity(
        id=str(obj["id"]),
        name=str(obj.get("name") or ""),
        type=str(obj.get("type") or ""),
        properties=props if isinstance(props, dict) else {},
        source=str(obj.get("source") or ""),
        confidence=_confidence(confidence),
        valid_from=_time_given(obj.get("valid_from")),
        valid_until=_time_given(obj.get("valid_until")),
        superseded_by=str(obj["superseded_by"]) if obj.get("superseded_by") else None,
        confirmed=_is_true(obj.get("confirmed")),
    )


def _lines(path: Path, flag: str) -> Iterator[bytes]:
    """The file's lines; a read that fails partway is the file's fault."""
    try:
        with path.open("rb") as f:
            yield from f
    except OSError as exc:
        raise OldStoreError(f"{flag}: {path} cannot be read ({exc.strerror or exc})") from None


def fold_graph(path: Path) -> Graph:
    """Reads graph.jsonl in file order: entity records add (or restate) an
    entity, patch lines change the state of one already recorded."""
    readable(path, "--graph")
    entities: dict[str, Entity] = {}
    stats = FoldStats()
    for raw in _lines(path, "--graph"):
        if not raw.strip():
            continue
        stats.lines += 1
        try:
            obj = _without_surrogates(json.loads(raw))
        except (json.JSONDecodeError, UnicodeDecodeError):
            stats.malformed += 1
            continue
        if not isinstance(obj, dict) or not _usable_id(obj.get("id")):
            stats.malformed += 1
            continue
        if "patch" in obj and not isinstance(obj["patch"], str):
            # A patch names its kind; null or an object names none, and
            # the line is no record either.
            stats.malformed += 1
            continue
        op = obj.get("patch")
        if op is None:
            if not _record_shaped(obj):
                stats.malformed += 1
                continue
            entity = _entity(obj)
            if not entity.row_name:
                stats.malformed += 1
                continue
            stats.records += 1
            if entity.id in entities:
                stats.restated += 1
            entities[entity.id] = entity
            continue
        if op not in ("confirm", "supersede"):
            stats.unknown_ops += 1
            continue
        by = obj.get("superseded_by")
        if op == "supersede" and (not _usable_id(by) or str(by) == str(obj["id"])):
            stats.malformed += 1
            continue
        stats.patches[op] += 1
        target = entities.get(str(obj["id"]))
        if target is None:
            stats.orphan_patches += 1
            continue
        if op == "confirm":
            target.confirmed = True
            target.confirmed_at = _time_given(obj.get("at"))
            if _confidence(obj.get("confidence")) is not None:
                target.confidence = _confidence(obj.get("confidence"))
        else:
            target.superseded_by = str(by)
            target.superseded_at = _time_given(obj.get("at"))
            target.valid_until = target.superseded_at or target.valid_until
    if stats.lines and stats.malformed == stats.lines:
        # Another file given by mistake (the SQLite file, say): run on, the
        # items would come over without their mentions, which no rerun adds.
        raise OldStoreError(
            f"--graph: {path} is not a graph.jsonl: none of its {stats.lines} lines is an "
            "entity record or a patch; nothing was imported (an old store with no graph "
            "has an empty graph.jsonl)"
        )
    return Graph(entities, stats)
