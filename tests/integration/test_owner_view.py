"""An owner's view (design §10; issue 34): memories listed newest first by
author, kind, episode and time, paged, only those the caller may see; the
audit log (who did what, when, on which id) for owners only, paged and
filtered by member, action and time, never showing memory text or reasons.
Both read-only (a read-only token may call them), with --json on the command
line, and bad input refused naming the field."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from functools import partial
from typing import Any

import grpc
import pytest

from recallatron.client import Client
from recallatron.v1 import gateway_pb2 as pb
from recallatron_cli.main import main
from recallatron_devkit.stack import Stack
from services.store.domain.owner_view import AuditFilter, MemoryFilter, OwnerView
from services.store.infrastructure.db import Caller
from tests.conftest import Team
from tests.integration import bulk_workspace as bulk

pytestmark = pytest.mark.integration


def error(call: Callable[[], Any]) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as info:
        call()
    return info.value


def every(page: Callable[..., Any], key: str, **filters: Any) -> list[Any]:
    """Every item, page after page."""
    out: list[Any] = []
    token = ""
    while True:
        got = page(page_token=token, **filters)
        out.extend(getattr(got, key))
        token = got.next_page_token
        if not token:
            return out


def seeded(team: Team) -> dict[str, str]:
    ada, bob = team.clients["ada"], team.clients["bob"]
    episode = ada.create_episode(
        "planning", "2026-01-01T00:00:00Z", audience_to="workspace"
    ).episode_id
    ids = {
        "a1": ada.remember("ada one", audience_to="workspace").memory.id,
        "a2": ada.remember("ada decision", kind="decision", audience_to="workspace").memory.id,
        "a3": ada.remember("ada in episode", audience_to="workspace", episode_id=episode).memory.id,
        "b1": bob.remember("bob fact", kind="fact", audience_to="workspace").memory.id,
        "b2": bob.remember("bob private").memory.id,
        "b3": bob.remember("bob shared", audience_to="workspace").memory.id,
        "episode": episode,
    }
    old = ada.read([ids["a1"]]).memories[0]
    ids["a1_new"] = ada.supersede(old.id, old.revision, "ada one, revised").memory.id
    ada.forget(ids["b3"], "the text of bob's secret reason")
    return ids


def test_list_pages_filters_and_shows_only_what_the_caller_may_see(team: Team) -> None:
    ada, bob = team.clients["ada"], team.clients["bob"]
    ids = seeded(team)
    listed = every(ada.list_memories, "memories", page_size=2)
    seen = [m.id for m in listed]
    # Newest first; bob's private memory, the forgotten one and the
    # superseded one are not listed for ada.
    assert seen == [ids[k] for k in ("a1_new", "b1", "a3", "a2")]
    assert [m.created_at.ToDatetime() for m in listed] == sorted(
        (m.created_at.ToDatetime() for m in listed), reverse=True
    )
    with_old = every(ada.list_memories, "memories", include_superseded=True)
    assert ids["a1"] in [m.id for m in with_old]
    # Bob sees his private memory too.
    assert ids["b2"] in [m.id for m in every(bob.list_memories, "memories")]
    by_bob = every(ada.list_memories, "memories", created_by=team.members["bob"])
    assert [m.id for m in by_bob] == [ids["b1"]]
    decisions = every(ada.list_memories, "memories", kinds=["decision", "fact"])
    assert [m.id for m in decisions] == [ids["b1"], ids["a2"]]
    in_episode = every(ada.list_memories, "memories", episode_id=ids["episode"])
    assert [m.id for m in in_episode] == [ids["a3"]]
    # A time span: from a3's creation (inclusive) to b1's (exclusive).
    a3 = next(m for m in listed if m.id == ids["a3"]).created_at.ToJsonString()
    b1 = next(m for m in listed if m.id == ids["b1"]).created_at.ToJsonString()
    span = every(ada.list_memories, "memories", **{"from": a3, "to": b1})
    assert [m.id for m in span] == [ids["a3"]]


def test_a_memory_whose_successor_the_caller_may_not_see_is_listed_as_current(
    team: Team,
) -> None:
    """Bob supersedes a workspace memory by one only he may see, and another by
    one for a purpose Ada lacks: Ada reads each as current (no successor), so
    her list shows them, by every listing (all, by author, by kind), and no
    further than that; Bob, who sees the successors, sees them superseded."""
    ada, bob = team.clients["ada"], team.clients["bob"]
    plan = bob.remember("the shared plan", audience_to="workspace").memory
    mine = bob.supersede(plan.id, plan.revision, "the plan", audience_to=team.members["bob"])
    note = bob.remember("the shared note", kind="decision", audience_to="workspace").memory
    bob.supersede(note.id, note.revision, "the note", kind="decision", purposes=["automate"])
    assert ada.read([plan.id]).memories[0].superseded_by_id == ""
    expected = [note.id, plan.id]
    listings: dict[str, dict[str, Any]] = {
        "all": {},
        "author": {"created_by": team.members["bob"]},
        "kinds": {"kinds": ["note", "decision"]},
    }
    for name, filters in listings.items():
        listed = every(ada.list_memories, "memories", page_size=1, **filters)
        assert [m.id for m in listed] == expected, name
        assert all(m.superseded_by_id == "" for m in listed), name
    by_bob = [m.id for m in every(bob.list_memories, "memories")]
    assert plan.id not in by_bob and mine.memory.id in by_bob


def test_a_chain_hidden_in_the_middle_is_listed_as_read_and_recall_take_it(
    team: Team,
) -> None:
    """Lyon (the workspace's) superseded by Paris (Ada's own draft), Paris by
    Nice (the workspace's): Bob, who may not see Paris, reads Lyon as
    superseded by Nice (migration 0063), so every listing of his shows Nice
    alone, and Lyon, with superseded ones, as superseded by Nice. A chain
    hidden from him all the way still lists as current."""
    ada, bob = team.clients["ada"], team.clients["bob"]
    lyon = ada.remember("Office in Lyon", kind="decision", audience_to="workspace").memory
    draft = ada.supersede(
        lyon.id, 1, "Office in Paris", kind="decision", audience_to=team.members["ada"]
    ).memory
    nice = ada.supersede(
        draft.id, 1, "Office in Nice", kind="decision", audience_to="workspace"
    ).memory
    desk = ada.remember("Desk by the window", kind="decision", audience_to="workspace").memory
    ada.supersede(desk.id, 1, "Desk by the door", audience_to=team.members["ada"])
    assert bob.read([lyon.id]).memories[0].superseded_by_id == nice.id
    listings: dict[str, dict[str, Any]] = {
        "all": {},
        "author": {"created_by": team.members["ada"]},
        "kinds": {"kinds": ["decision"]},
        "kinds and note": {"kinds": ["decision", "note"]},
    }
    for name, filters in listings.items():
        listed = every(bob.list_memories, "memories", page_size=1, **filters)
        assert [m.id for m in listed] == [desk.id, nice.id], name
        with_old = every(bob.list_memories, "memories", include_superseded=True, **filters)
        assert [(m.id, m.superseded_by_id) for m in with_old] == [
            (desk.id, ""),
            (nice.id, ""),
            (lyon.id, nice.id),
        ], name
        # Ada, who sees the draft, lists Nice and her draft of the desk.
        assert nice.id in [m.id for m in every(ada.list_memories, "memories", **filters)], name
        assert lyon.id not in [m.id for m in every(ada.list_memories, "memories", **filters)]


class _OnConnection(bulk.OneConnection, OwnerView):
    """The store's listing run on one connection, so that
    pg_stat_xact_user_tables counts the rows each page read."""


def test_one_authors_few_memories_are_listed_reading_few_rows(stack: Stack, team: Team) -> None:
    """Bob's five memories, older than Ada's 3,000: listed by author, two to a
    page, each page reads a few rows, under the plans the store's statements
    get (custom, and generic once prepared) and the generic plan forced, where
    the listing walked the created_at index through all of Ada's; and the
    listing is one plain ORDER BY's, through the gateway too."""
    bob, ada = team.members["bob"], team.members["ada"]
    with bulk.writing(stack, team, "memory") as conn:
        conn.execute(
            "INSERT INTO memory (id, kind, title, body, confidence, origin, purposes,"
            " created_by, created_at, updated_at)"
            " SELECT gen_random_uuid(), 'note', 'Item ' || i, '', 1, 'told', '{assist}',"
            "  CASE WHEN i <= 5 THEN %(bob)s ELSE %(ada)s END::uuid,"
            "  timestamptz '2025-01-01' + i * interval '1 minute',"
            "  timestamptz '2025-01-01' + i * interval '1 minute'"
            " FROM generate_series(1, 3005) AS i",
            {"bob": bob, "ada": ada},
        )
    caller = Caller(team.workspace_id, ada, "assist")
    for mode in bulk.PLAN_MODES:
        with bulk.as_member(stack, team, "ada", plan_cache_mode=mode) as conn:
            expected = [
                str(r[0])
                for r in conn.execute(
                    "SELECT id FROM memory WHERE created_by = %s AND superseded_by_id IS NULL"
                    " ORDER BY created_at DESC, id DESC",
                    (bob,),
                )
            ]
            listing = partial(_OnConnection(conn).memories, caller, MemoryFilter(created_by=bob), 2)
            # Past the driver's prepare threshold and the server's custom plans.
            for _ in range(8):
                listed, most = bulk.every_page(conn, "memory", listing, "memories")
                assert most <= 20, f"{mode}: a page of bob's read {most} memory rows"
                assert listed == expected and len(expected) == 5, mode
    client = team.clients["ada"]
    by_bob = every(client.list_memories, "memories", created_by=bob, page_size=2)
    assert [m.id for m in by_bob] == expected


def test_a_kinds_few_old_memories_are_listed_reading_few_rows(stack: Stack, team: Team) -> None:
    """Five decisions older than 3,000 notes: listed by kind, two to a page,
    each page reads a few rows under the plans the store's statements get
    (custom, and generic once prepared) and the generic plan forced, where
    the listing walked the created_at index through every note for each
    page; two kinds are merged in the listing's order; the same through the
    gateway."""
    ada = team.members["ada"]
    with bulk.writing(stack, team, "memory") as conn:
        conn.execute(
            "INSERT INTO memory (id, kind, title, body, confidence, origin, purposes,"
            " created_by, created_at, updated_at)"
            " SELECT gen_random_uuid(),"
            "  CASE WHEN i <= 5 THEN 'decision' ELSE 'note' END::memory_kind,"
            "  'Item ' || i, '', 1, 'told', '{assist}', %(ada)s::uuid,"
            "  timestamptz '2025-01-01' + (i / 2) * interval '1 minute',"
            "  timestamptz '2025-01-01' + (i / 2) * interval '1 minute'"
            " FROM generate_series(1, 3005) AS i",
            {"ada": ada},
        )
    caller = Caller(team.workspace_id, ada, "assist")
    newest = "SELECT id FROM memory WHERE kind::text = ANY(%s) ORDER BY created_at DESC, id DESC"
    for mode in bulk.PLAN_MODES:
        with bulk.as_member(stack, team, "ada", plan_cache_mode=mode) as conn:
            decisions = [str(r[0]) for r in conn.execute(newest, (["decision"],))]
            two = [str(r[0]) for r in conn.execute(newest + " LIMIT 2", (["decision", "note"],))]
            view = _OnConnection(conn)
            listing = partial(view.memories, caller, MemoryFilter(kinds=["decision", "fact"]), 2)
            # Past the driver's prepare threshold and the server's custom plans.
            for _ in range(8):
                listed, most = bulk.every_page(conn, "memory", listing, "memories")
                assert most <= 20, f"{mode}: a page of decisions read {most} memory rows"
                assert listed == decisions and len(decisions) == 5, mode
                before = bulk.rows_read(conn, ["memory"])
                page = view.memories(caller, MemoryFilter(kinds=["decision", "note"]), 2)
                assert bulk.rows_read(conn, ["memory"]) - before <= 20, mode
                assert [m.id for m in page.memories] == two, mode
    listed_here = every(team.clients["ada"].list_memories, "memories", kinds=["decision"])
    assert [m.id for m in listed_here] == decisions


def test_the_audit_log_is_for_owners_paged_and_filtered(team: Team) -> None:
    ada, bob = team.clients["ada"], team.clients["bob"]
    ids = seeded(team)
    events = every(ada.audit_events, "events", page_size=2)
    got = [(e.member_handle, e.action, e.memory_id) for e in events]
    assert got[0] == ("ada", "forget", ids["b3"])
    assert ("bob", "remember", ids["b2"]) in got and ("ada", "supersede", ids["a1_new"]) in got
    assert [e.id for e in events] == sorted((e.id for e in events), reverse=True)
    # No free text: the forget's reason is not shown.
    assert all("secret" not in e.detail_json for e in events)
    bobs = every(ada.audit_events, "events", member_id=team.members["bob"])
    assert {e.member_id for e in bobs} == {team.members["bob"]} and len(bobs) == 3
    forgets = every(ada.audit_events, "events", actions=["forget"])
    assert [e.memory_id for e in forgets] == [ids["b3"]]
    first = events[-1].at
    later = every(ada.audit_events, "events", **{"from": first.ToJsonString()})
    assert len(later) == len(events)
    assert every(ada.audit_events, "events", to=first.ToJsonString()) == []
    exc = error(lambda: bob.audit_events())
    assert exc.code() == grpc.StatusCode.PERMISSION_DENIED and "owner" in str(exc.details())


def test_a_read_only_token_may_list_and_read_the_audit(stack: Stack, team: Team) -> None:
    ada = team.clients["ada"]
    ada.remember("for the reader", audience_to="workspace")
    made = ada.create_token(team.members["ada"], "reader", read_only=True)
    reader = Client(stack.gateway, made.token)
    assert [m.title for m in reader.list_memories().memories] == ["for the reader"]
    # Newest first: the reader's token made, after the memory.
    assert [e.action for e in reader.audit_events().events[:2]] == ["create_token", "remember"]
    reader.close()


JAN, FEB = "2026-01-01T00:00:00Z", "2026-02-01T00:00:00Z"


def _token(payload: object) -> str:
    text = payload if isinstance(payload, str) else json.dumps(payload)
    return base64.urlsafe_b64encode(text.encode()).decode()


def test_bad_input_names_the_field(team: Team) -> None:
    ada = team.clients["ada"]
    cases: list[tuple[Callable[[], Any], str]] = [
        (lambda: ada.list_memories(page_size=101), "page_size"),
        (lambda: ada.list_memories(created_by="bob"), "created_by"),
        (lambda: ada.list_memories(episode_id="nope"), "episode_id"),
        (lambda: ada.list_memories(page_token="garbage"), "page_token"),
        (
            lambda: ada.list_memories(
                **{"from": "2026-02-01T00:00:00Z", "to": "2026-01-01T00:00:00Z"}
            ),
            "to",
        ),
        (lambda: ada.audit_events(page_size=201), "page_size"),
        (lambda: ada.audit_events(actions=["DROP TABLE"]), "actions[0]"),
        # A name's pattern holds for the whole value: "$" also matches before a final newline.
        (lambda: ada.audit_events(actions=["remember\n"]), "actions[0]"),
        # JSON nested deeper than the parser goes is no token of ours either.
        (lambda: ada.list_memories(page_token=_token("[" * 100_000)), "page_token"),
        (lambda: ada.audit_events(page_token=_token('{"a":' * 50_000)), "page_token"),
        (lambda: ada.audit_events(member_id="x"), "member_id"),
        (lambda: ada.audit_events(page_token="eyJ3IjogIm1lbW9yaWVzIn0="), "page_token"),
        # An audit page token naming an id past a bigint, or past a float's range.
        (lambda: ada.audit_events(page_token=_token({"w": "audit", "id": 10**30})), "page_token"),
        (lambda: ada.audit_events(page_token=_token('{"w":"audit","id":1e400}')), "page_token"),
        # A token's label is text: no NUL (the database cannot hold one).
        (lambda: ada.create_token(team.members["bob"], "a\x00b"), "label"),
        (  # a kind number no enum value names
            lambda: ada.call(ada.memory.ListMemories, pb.ListMemoriesRequest(kinds=[99])),  # type: ignore[list-item]
            "kinds[0]",
        ),
    ]
    for call, field in cases:
        exc = error(call)
        assert exc.code() == grpc.StatusCode.INVALID_ARGUMENT, (field, exc.details())
        assert field in str(exc.details()), (field, exc.details())


def test_the_commands_answer_in_json_and_refuse_a_bad_time(
    stack: Stack, team: Team, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = seeded(team)
    ada_token = team.clients["ada"].token
    common = ["--gateway", stack.gateway, "--token", ada_token, "--json"]
    assert main(["list", *common, "--author", team.members["bob"], "--all"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [m["id"] for m in listed["memories"]] == [ids["b1"]]
    assert listed["next_page_token"] == ""
    assert main(["audit", *common, "--action", "forget", "--page-size", "1"]) == 0
    audited = json.loads(capsys.readouterr().out)
    assert [e["memory_id"] for e in audited["events"]] == [ids["b3"]]
    assert main(["audit", "--gateway", stack.gateway, "--token", ada_token]) == 0
    text = capsys.readouterr().out
    assert f"ada ({team.members['ada']})  forget  {ids['b3']}" in text
    assert main(["list", *common, "--from", "yesterday"]) == 2
    assert "from (--from)" in capsys.readouterr().err
    # A time its offset carries past the calendar's end (it ended in a traceback).
    assert main(["audit", *common, "--to", "9999-12-31T23:59:59-05:00"]) == 2
    assert "to (--to)" in capsys.readouterr().err


def test_agents_list_and_read_the_audit_through_the_mcp_tools(team: Team) -> None:
    from recallatron_mcp.tools import ToolError
    from recallatron_mcp.tools import call as mcp_call

    ada, bob = team.clients["ada"], team.clients["bob"]
    ids = seeded(team)
    listed = mcp_call(ada, "list_memories", {"created_by": team.members["bob"]})
    assert [m["id"] for m in listed["memories"]] == [ids["b1"]]
    assert listed["next_page_token"] is None
    audited = mcp_call(ada, "audit_log", {"actions": ["forget"], "purpose": "audit"})
    assert [(e["member_handle"], e["memory_id"]) for e in audited["events"]] == [("ada", ids["b3"])]
    with pytest.raises(ToolError, match="PERMISSION_DENIED"):
        mcp_call(bob, "audit_log", {})


def test_a_members_or_actions_few_old_events_are_listed_reading_few_rows(
    stack: Stack, team: Team
) -> None:
    """Bob's five forgets, older than 20,000 of Ada's remembers: the log
    filtered by member, by actions, or both, two to a page, reads a few rows
    a page under the plans the store's statements get (custom, and generic
    once prepared) and the generic plan forced, where each page walked the
    whole log from its newest event; the same through the gateway."""
    bob, ada = team.members["bob"], team.members["ada"]
    with bulk.writing(stack, team, "audit_log") as conn:
        conn.execute(
            "INSERT INTO audit_log (member_id, action, memory_id, detail)"
            " SELECT CASE WHEN i <= 5 THEN %(bob)s ELSE %(ada)s END::uuid,"
            "  CASE WHEN i <= 5 THEN 'forget' ELSE 'remember' END, gen_random_uuid(), '{}'"
            " FROM generate_series(1, 20005) AS i",
            {"bob": bob, "ada": ada},
        )
        expected = [
            int(r[0])
            for r in conn.execute(
                "SELECT id FROM audit_log WHERE member_id = %s AND action = 'forget'"
                " ORDER BY id DESC",
                (bob,),
            )
        ]
    caller = Caller(team.workspace_id, ada, "assist", "owner")
    filters = [
        AuditFilter(member_id=bob),
        AuditFilter(actions=["forget"]),
        AuditFilter(actions=["forget", "correct"]),
        AuditFilter(member_id=bob, actions=["forget", "supersede"]),
    ]
    # Eight times: past the driver's prepare threshold and the server's custom plans.
    for mode, f, listed, most in bulk.audit_listings(stack, team, caller, filters, 8, 2):
        assert most <= 20, f"{mode}, {f}: a page read {most} audit rows"
        assert listed == expected and len(expected) == 5, (mode, f)
    client = team.clients["ada"]
    by_bob = every(client.audit_events, "events", member_id=bob, page_size=2)
    assert [e.id for e in by_bob] == expected
    forgets = every(client.audit_events, "events", actions=["forget", "correct"], page_size=2)
    assert [e.id for e in forgets] == expected
