"""Deterministic ids for imported rows: the same old record always becomes the
same row, in any workspace the owner's data is imported into."""

from __future__ import annotations

import uuid

# Fixed: the ids of imported rows derive from it, so never change it.
LEGACY_NAMESPACE = uuid.UUID("6f1d2b1e-7c1a-5d43-9a0e-3c52f0d1b7a4")


class Ids:
    """Deterministic ids: the same old record always becomes the same row,
    which is what makes a rerun (or a run after an interruption) a no-op for
    what is already there. Keyed by the owner's handle, not the member id, so
    a rehearsal in another workspace yields the very same ids."""

    def __init__(self, owner_handle: str) -> None:
        self.namespace = uuid.uuid5(LEGACY_NAMESPACE, f"owner:{owner_handle}")

    def turn(self, turn_id: int) -> str:
        return str(uuid.uuid5(self.namespace, f"turn:{turn_id}"))

    def memory_item(self, item_id: int) -> str:
        return str(uuid.uuid5(self.namespace, f"memory_item:{item_id}"))

    def entity(self, old_id: str) -> str:
        return str(uuid.uuid5(self.namespace, f"entity:{old_id}"))

    def entity_record(self, old_id: str) -> str:
        """The memory that states an entity record's claims."""
        return str(uuid.uuid5(self.namespace, f"entity_record:{old_id}"))

    def attribute(self, old_id: str, key: str) -> str:
        # Keyed by the property's name as written: two names that become the
        # same identifier stay two claims.
        return str(uuid.uuid5(self.namespace, f"attribute:{_part(old_id)}:{_part(key)}"))

    def relation(self, old_id: str, verb: str, target: str) -> str:
        name = f"relation:{_part(old_id)}:{_part(verb)}:{_part(target)}"
        return str(uuid.uuid5(self.namespace, name))


def _part(text: str) -> str:
    """One part of a name joined by colons, its colons escaped: verb "x" to
    "y:z" and verb "x:y" to "z" are two claims, not one id. Text without a
    colon or backslash is unchanged, and so are the ids made from it."""
    return text.replace("\\", "\\\\").replace(":", "\\:")
