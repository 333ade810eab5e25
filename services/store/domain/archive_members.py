"""Who the copy's members are (docs/export.md, "Members"): every member of
the archive as they were, or those a members file lists, with the handle and
role it gives. A handle is one in any case within a workspace (control
migration 0015): an archive's own members in two cases (a store's that holds
them so) are kept as that migration kept them, the oldest holding the handle;
a handle the file gives that another member of the copy has in another case
is refused, as CreateMember refuses it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from recallatron import errors
from recallatron.vocabulary import handle_key
from services.store.domain.control_names import HANDLE_RE, HANDLE_RULE

Record = dict[str, Any]


@dataclass(frozen=True)
class MemberPlan:
    source_id: str
    handle: str
    role: str


def plan_members(archive_members: list[Record], members_file: Record | None) -> list[MemberPlan]:
    """Who the copy's members are: every source member as they were, or
    those the members file lists (by handle or id), with the handle and
    role it gives, at least one of them an owner. Two source members never
    become one member of the copy: each would see the other's private
    memories. In the archive's order, its oldest member first (the export
    lists them so), which the import makes them in: of members in two cases,
    the one made first keeps the handle."""
    if members_file is None:
        return [MemberPlan(m["id"], m["handle"], m["role"]) for m in archive_members]
    by_id = {m["id"]: m for m in archive_members}
    by_key: dict[str, Record] = {}
    # A handle in any case, as the control plane finds one: the member spelt
    # so first, else the oldest holding it in another case (the archive's
    # order, its oldest member first).
    any_case: dict[str, Record] = {}
    for m in archive_members:
        by_key[m["id"]] = m
        by_key.setdefault(m["handle"], m)
        any_case.setdefault(handle_key(m["handle"]), m)
    plans: list[MemberPlan] = []
    # Each source member's entry, by id.
    sources: dict[str, int] = {}
    # Whether each plan keeps its source's own handle.
    own: list[bool] = []
    for i, entry in enumerate(members_file["members"]):
        where = f"members file: members[{i}]"
        # An id in any case (the archive's are read in lower case, archive_format).
        given = entry["source"]
        source = by_key.get(given) or by_id.get(given.lower()) or any_case.get(handle_key(given))
        if source is None:
            raise errors.InvalidArgument(f"{where}.source", f"the archive has no member {given!r}")
        if source["id"] in sources:
            raise errors.InvalidArgument(
                f"{where}.source",
                f"member {source['handle']!r} is listed twice: members[{sources[source['id']]}] "
                "names them too (by their id, or their handle in any case)",
            )
        handle = entry.get("handle", source["handle"])
        if not HANDLE_RE.match(handle):
            raise errors.InvalidArgument(f"{where}.handle", HANDLE_RULE)
        sources[source["id"]] = i
        plans.append(MemberPlan(source["id"], handle, entry.get("role", source["role"])))
        own.append(handle == source["handle"])
    _one_in_any_case(plans, own)
    # A workspace keeps an owner (its last one cannot be removed): without
    # one, no member of the copy could manage its members or settings.
    if not any(p.role == "owner" for p in plans):
        raise errors.InvalidArgument(
            "members file: members",
            'gives the copy no owner: list a source owner, or give a member "role": "owner"',
        )
    order = {m["id"]: i for i, m in enumerate(archive_members)}
    return sorted(plans, key=lambda p: order[p.source_id])


def _one_in_any_case(plans: list[MemberPlan], own: list[bool]) -> None:
    """No handle the file gives is another member's of the copy in any case.
    Refused at the entry giving it (the later of two that give one): the
    members an archive holds in two cases keep their own handles only."""
    by_key: dict[str, list[int]] = {}
    for i, p in enumerate(plans):
        by_key.setdefault(handle_key(p.handle), []).append(i)
    for i, p in enumerate(plans):
        if own[i]:
            continue
        other = next(
            (j for j in by_key[handle_key(p.handle)] if j != i and (own[j] or j < i)), None
        )
        if other is None:
            continue
        if plans[other].handle == p.handle:
            why = f"{p.handle!r} is given to two members; each source member becomes its own"
        else:
            why = (
                f"{p.handle!r} differs only in case from {plans[other].handle!r}, another "
                "member's handle in the copy; a handle is one in any case"
            )
        raise errors.InvalidArgument(f"members file: members[{i}].handle", why)
