"""The migration report: what was read, imported, already there from an
earlier run, skipped and why, and what was deliberately not carried. The
graph's part: entity records -> memories, their properties -> attribute
claims, their edges -> relation claims, supersede patches -> supersession."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

DIGESTS_REASON = "session digests summarise turns that are imported as history themselves"


@dataclass
class Section:
    read: int = 0
    # New rows written now (in a dry run: that would be written).
    imported: int = 0
    # Present from an earlier run: left as they are.
    already_present: int = 0
    skipped: Counter[str] = field(default_factory=Counter)

    def to_json(self) -> dict[str, Any]:
        return {
            "read": self.read,
            "imported": self.imported,
            "already_present": self.already_present,
            "skipped": dict(sorted(self.skipped.items())),
        }

    def line(self, name: str) -> str:
        text = (
            f"{name}: read {self.read}, imported {self.imported}, "
            f"already present {self.already_present}, skipped {sum(self.skipped.values())}"
        )
        for reason, n in sorted(self.skipped.items()):
            text += f"\n    {n:>6}  {reason}"
        return text


@dataclass
class Report:
    workspace: str = ""
    owner: str = ""
    dry_run: bool = False
    turns: Section = field(default_factory=Section)
    memory_items: Section = field(default_factory=Section)
    # Old kind -> new kind, for kinds that have no namesake.
    kinds_mapped: Counter[str] = field(default_factory=Counter)
    entities: Section = field(default_factory=Section)
    # Entity rows written with a type (their record's, made an identifier).
    entities_typed: int = 0
    mentions: Section = field(default_factory=Section)
    # Mentions of a superseded entity that now name its replacement.
    mentions_redirected: int = 0
    records: Section = field(default_factory=Section)
    # Mentions the imported record memories carry (every entity they name).
    record_mentions: int = 0
    attributes: Section = field(default_factory=Section)
    relations: Section = field(default_factory=Section)
    # Of the imported claims: stated by a superseded record, so retired.
    attributes_retired: int = 0
    relations_retired: int = 0
    supersessions: Section = field(default_factory=Section)
    graph: dict[str, Any] = field(default_factory=dict)
    session_digests_read: int = 0
    # The dense floor's rule on the migrated corpus (legacy/floor_check.py).
    floor: dict[str, Any] = field(default_factory=dict)
    batches: int = 0
    seconds: float = 0.0
    complete: bool = False

    def changed_anything(self) -> bool:
        return any(part.section.imported for part in self._parts())

    def _parts(self) -> tuple[Part, ...]:
        """The sections in the report's order, each with its one count beside."""
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(self.kinds_mapped.items())) or "none"
        retired = "retired (stated by a superseded record)"
        return (
            Part("turns", "turns -> history entries", self.turns),
            Part(
                "memory_items",
                "memory items -> memories (origin migrated)",
                self.memory_items,
                ("kinds_mapped", dict(sorted(self.kinds_mapped.items()))),
                f"kinds mapped: {kinds}",
            ),
            Part(
                "entities",
                "entities",
                self.entities,
                ("typed", self.entities_typed),
                f"imported with a type: {self.entities_typed}",
            ),
            Part(
                "mentions",
                "memory-to-entity edges -> mentions",
                self.mentions,
                ("redirected", self.mentions_redirected),
                f"redirected to a replacement entity: {self.mentions_redirected}",
            ),
            Part(
                "entity_records",
                "entity records -> memories (origin migrated)",
                self.records,
                ("mentions", self.record_mentions),
                f"mentioning the entities their claims name: {self.record_mentions} mentions",
            ),
            Part(
                "attribute_claims",
                "entity properties -> attribute claims",
                self.attributes,
                ("retired", self.attributes_retired),
                f"{retired}: {self.attributes_retired}",
            ),
            Part(
                "relation_claims",
                "entity-to-entity edges -> relation claims",
                self.relations,
                ("retired", self.relations_retired),
                f"{retired}: {self.relations_retired}",
            ),
            Part("supersessions", "supersede patches -> supersessions", self.supersessions),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "workspace": self.workspace,
            "owner": self.owner,
            "dry_run": self.dry_run,
            "complete": self.complete,
            **{part.key: part.to_json() for part in self._parts()},
            "graph": self.graph,
            "not_carried": {
                "session_digests": {"read": self.session_digests_read, "reason": DIGESTS_REASON},
            },
            "dense_floor": self.floor or {"computed": False, "reason": "not checked"},
            "batches": self.batches,
            "seconds": round(self.seconds, 3),
        }

    def to_text(self) -> str:
        head = "dry run: nothing written" if self.dry_run else "migration"
        state = "complete" if self.complete else "INCOMPLETE (rerun to finish)"
        g = self.graph
        lines = [
            f"{head} into workspace {self.workspace} for owner {self.owner}: {state}",
            *(line for part in self._parts() for line in part.lines()),
            (
                f"graph.jsonl: {g.get('lines', 0)} lines, {g.get('records', 0)} records "
                f"({g.get('restated', 0)} restated), patches {g.get('patches', {})}, "
                f"{g.get('orphan_patches', 0)} orphan patches, {g.get('malformed', 0)} "
                f"malformed lines; {g.get('superseded', 0)} entities superseded, "
                f"{g.get('confirmed', 0)} confirmed"
            ),
            f"not carried: {self.session_digests_read} session digests: {DIGESTS_REASON}",
            f"{self.batches} batches in {self.seconds:.2f} s",
            floor_line(self.floor),
        ]
        return "\n".join(lines)


@dataclass(frozen=True)
class Part:
    """One section of the report: its JSON key and its line's label, and the
    count shown beside it (in its JSON object, and as a line of its own)."""

    key: str
    label: str
    section: Section
    extra: tuple[str, Any] | None = None
    extra_line: str = ""

    def to_json(self) -> dict[str, Any]:
        out = self.section.to_json()
        if self.extra is not None:
            out[self.extra[0]] = self.extra[1]
        return out

    def lines(self) -> list[str]:
        head = self.section.line(self.label)
        return [head, f"    {self.extra_line}"] if self.extra_line else [head]


def floor_line(section: dict[str, Any]) -> str:
    if not section:
        return "dense floor on the migrated corpus: not checked"
    if not section.get("computed"):
        return f"dense floor on the migrated corpus: not computed: {section.get('reason', '')}"
    return (
        f"dense floor on the migrated corpus ({section['memories']} memories): "
        f"{section['line']}; the workspace's floor is {section['current_floor']:.2f} "
        "(`recallatron calibrate-floor --apply` sets it)"
    )
