"""The archive's members without a database (docs/export.md): the members
file's rules, what a left-out member's private records become, and the members
an export writes."""

from __future__ import annotations

from pathlib import Path

import pytest

from recallatron import errors
from services.store.domain import archive_plan as plan
from services.store.domain.archive_members import MemberPlan, plan_members
from tests.unit.archive_records import ADA, BOB, T, memory, uid, write_archive

MEMBERS = [
    {"id": ADA, "handle": "ada", "role": "owner"},
    {"id": BOB, "handle": "bob", "role": "member"},
]


def test_members_come_as_they_were_or_as_the_file_says_and_never_two_as_one() -> None:
    assert [m.handle for m in plan_members(MEMBERS, None)] == ["ada", "bob"]
    given = {"members": [{"source": BOB, "handle": "robert", "role": "owner"}]}
    assert plan_members(MEMBERS, given) == [MemberPlan(BOB, "robert", "owner")]
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
            plan_members(MEMBERS, {"members": members})
        assert err.value.field == field


def test_a_handle_is_one_in_any_case_but_for_the_archives_own_pairs() -> None:
    """A handle the members file gives that another member of the copy has in
    another case is refused at the entry giving it; members the archive holds
    in two cases keep their handles, made oldest first as the archive lists
    them, whatever the file's order."""
    twins = [*MEMBERS, {"id": uid(3), "handle": "Bob", "role": "member"}]
    for members, field in (
        ([{"source": "ada"}, {"source": "bob", "handle": "ADA"}], "members[1].handle"),
        ([{"source": "ada", "handle": "Bob"}, {"source": "bob"}], "members[0].handle"),
        ([{"source": "ada", "handle": "x"}, {"source": "bob", "handle": "X"}], "members[1].handle"),
        ([{"source": "bob"}, {"source": "Bob", "handle": "BOB"}], "members[1].handle"),
    ):
        with pytest.raises(errors.InvalidArgument) as err:
            plan_members(twins, {"members": members})
        assert err.value.field == f"members file: {field}"
        assert "in any case" in err.value.description
    listed = {"members": [{"source": "Bob"}, {"source": "bob"}, {"source": "ada"}]}
    assert [m.handle for m in plan_members(twins, listed)] == ["ada", "bob", "Bob"]
    assert [m.handle for m in plan_members(twins, None)] == ["ada", "bob", "Bob"]


def test_a_source_names_a_handle_in_any_case_as_the_control_plane_finds_it() -> None:
    """A members file's source found a handle only as spelt: 'Bob' was 'the
    archive has no member', though the control plane reads 'Bob' and 'bob'
    as one handle. Now it finds the member spelt so, else the oldest holding
    the handle in another case; two entries naming one member so are refused
    as listing it twice; no other characters fold (the Kelvin sign is no k)."""
    given = {"members": [{"source": "ADA"}, {"source": "Bob", "role": "owner"}]}
    assert plan_members(MEMBERS, given) == [
        MemberPlan(ADA, "ada", "owner"),
        MemberPlan(BOB, "bob", "owner"),
    ]
    twins = [*MEMBERS, {"id": uid(3), "handle": "Bob", "role": "member"}]
    oldest = {"members": [{"source": "BOB", "role": "owner"}]}
    assert [m.source_id for m in plan_members(twins, oldest)] == [BOB]
    for members, source in (
        ([{"source": "bob"}, {"source": "BOB"}], MEMBERS),
        ([{"source": "Ada"}, {"source": "aDa"}], MEMBERS),
        ([{"source": "ada"}, {"source": "bob"}, {"source": "BOB"}], twins),
    ):
        with pytest.raises(errors.InvalidArgument) as err:
            plan_members(source, {"members": members})
        assert err.value.field == f"members file: members[{len(members) - 1}].source"
        assert "listed twice: members[" in err.value.description
    kelvin = [{"id": uid(4), "handle": "k", "role": "owner"}]
    with pytest.raises(errors.InvalidArgument) as err:
        plan_members(kelvin, {"members": [{"source": "\u212a"}]})
    assert err.value.field == "members file: members[0].source"


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
        plan_members(MEMBERS, {"members": members})
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
