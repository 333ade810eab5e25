"""The tool catalogue's one definition per tool (recallatron/tools.py, by the
descriptor walk of recallatron/protojson.py), without a stack: each input
schema takes a good argument set and refuses an unknown property; arguments
become the request field by field; answers read as the output schema says."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import grpc
import jsonschema
import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from recallatron import protojson
from recallatron.tools import BY_NAME, TOOLS
from recallatron.v1 import common_pb2 as cpb
from recallatron.v1 import gateway_pb2 as pb

ID = "3f0c6f9e-0000-4000-8000-000000000001"
ENTITY = "3f0c6f9e-0000-4000-8000-0000000000e1"
EPISODE = "3f0c6f9e-0000-4000-8000-0000000000ee"

REMEMBER: dict[str, Any] = {
    "request_id": "r-1",
    "kind": "decision",
    "title": "Standup moves to 9:30",
    "body": "From Monday the daily standup starts at 9:30.",
    "confidence": 0.75,
    "audience": "workspace",
    "purposes": ["assist", "audit"],
    "mentions": [{"name": "standup", "type": "meeting"}, {"entity_id": ENTITY}],
    "about": [ID],
    "episode_id": EPISODE,
    "purpose": "audit",
    "claims": [
        {
            "entity": {"name": "standup"},
            "attribute": "starts_at",
            "value": "09:30",
            "valid_from": "2026-05-04T00:00:00+02:00",
            "confidence": 0.5,
        }
    ],
    "relations": [
        {
            "subject": {"entity_id": ENTITY},
            "predicate": "runs",
            "object": {"name": "standup"},
            "valid_until": "2026-12-31T00:00:00Z",
        }
    ],
    "aliases": [{"entity": {"name": "standup"}, "alias": "daily"}],
}
WRITE = {"request_id": "r-2", "id": ID, "expected_revision": 3}
GOOD: dict[str, dict[str, Any]] = {
    "recall": {
        "query": "standup",
        "mode": "hybrid",
        "limit": 5,
        "purpose": "assist",
        "kinds": ["decision", "fact"],
        "mentions": [ENTITY],
        "include_superseded": True,
    },
    "read": {"ids": [ID], "purpose": "personalize"},
    "remember": REMEMBER,
    "derive": {
        "request_id": "r-3",
        "sources": [ID],
        "kind": "summary",
        "title": "t",
        "audience": ENTITY,
        "claims": REMEMBER["claims"],
    },
    "correct": {
        **WRITE,
        "title": "t",
        "confidence": 0.2,
        "replace_claims": True,
        "aliases": REMEMBER["aliases"],
        "reason": "typo",
    },
    "supersede": {**WRITE, "kind": "fact", "title": "t", "reason": "changed"},
    "forget": {"request_id": "r-4", "id": ID, "reason": "asked"},
    "lookup": {"name": "Robin", "as_of": "2026-01-01T00:00:00Z", "include_history": True},
    "neighbors": {"entity_id": ENTITY, "hops": 2, "predicates": ["leads"]},
    "timeline": {
        "entity_id": ENTITY,
        "from": "2026-01-01T00:00:00Z",
        "to": "2026-02-01T00:00:00Z",
        "page_token": "p",
    },
    "list_memories": {
        "created_by": ENTITY,
        "kinds": ["note", "decision"],
        "episode_id": ID,
        "from": "2026-01-01T00:00:00Z",
        "to": "2026-02-01T00:00:00Z",
        "include_superseded": True,
        "page_size": 100,
        "page_token": "p",
    },
    "audit_log": {
        "member_id": ENTITY,
        "actions": ["forget", "remove_member"],
        "from": "2026-01-01T00:00:00Z",
        "page_size": 200,
        "purpose": "audit",
    },
}


def _problems(name: str, arguments: dict[str, Any]) -> list[str]:
    validator = jsonschema.Draft202012Validator(BY_NAME[name].input_schema)
    return [e.message for e in validator.iter_errors(arguments)]


def _at(value: str) -> Timestamp:
    ts = Timestamp()
    ts.FromJsonString(value)
    return ts


def test_every_tool_has_a_good_example() -> None:
    assert set(GOOD) == set(BY_NAME) and len(TOOLS) == len(BY_NAME)


@pytest.mark.parametrize("name", list(GOOD))
def test_the_input_schema_takes_good_arguments_and_refuses_an_unknown_one(name: str) -> None:
    tool = BY_NAME[name]
    jsonschema.Draft202012Validator.check_schema(tool.input_schema)
    assert _problems(name, GOOD[name]) == []
    refused = _problems(name, {**GOOD[name], "surprise": 1})
    assert len(refused) == 1 and "'surprise' was unexpected" in refused[0]
    # The good arguments make the tool's request, with nothing left unread.
    assert isinstance(tool.request_of(GOOD[name]), tool.request)


@pytest.mark.parametrize("name", ["remember", "derive", "correct"])
def test_nested_objects_refuse_unknown_properties_too(name: str) -> None:
    key = next(k for k in ("claims", "aliases") if k in GOOD[name])
    bad = [{**GOOD[name][key][0], "surprise": 1}]
    assert _problems(name, {**GOOD[name], key: bad}) != []


def test_fields_agents_do_not_see_are_not_arguments() -> None:
    assert _problems("recall", {"query": "q", "skip_rerank": True}) != []
    assert _problems("remember", {**REMEMBER, "occurred_at": "2026-01-01T00:00:00Z"}) != []
    assert _problems("supersede", {**GOOD["supersede"], "sources": [ID]}) != []
    assert _problems("remember", {**REMEMBER, "kind": "opinion"}) != []


def test_recall_takes_include_history_into_the_request() -> None:
    assert _problems("recall", {"query": "q", "include_history": True}) == []
    req = BY_NAME["recall"].request_of({"query": "q", "include_history": True})
    assert isinstance(req, pb.RecallRequest) and req.include_history
    assert "include_history" in BY_NAME["recall"].description


def test_recall_description_says_what_nothing_relevant_means() -> None:
    tool = BY_NAME["recall"]
    assert "nothing_relevant" in tool.description
    assert tool.output_schema["properties"]["nothing_relevant"]["type"] == "boolean"


def test_remember_arguments_round_trip_into_the_request() -> None:
    req = BY_NAME["remember"].request_of(REMEMBER)
    assert isinstance(req, pb.RememberRequest)
    assert (req.request_id, req.title, req.body) == ("r-1", REMEMBER["title"], REMEMBER["body"])
    assert req.kind == cpb.KIND_DECISION and req.HasField("confidence")
    assert req.confidence == 0.75
    assert req.audience == cpb.Audience(workspace=True)
    assert list(req.purposes) == [cpb.PURPOSE_ASSIST, cpb.PURPOSE_AUDIT]
    assert req.purpose == cpb.PURPOSE_AUDIT
    assert list(req.mentions) == [
        cpb.MentionInput(name="standup", type="meeting"),
        cpb.MentionInput(entity_id=ENTITY),
    ]
    assert list(req.about_ids) == [ID] and req.episode_id == EPISODE
    assert list(req.claims) == [
        cpb.ClaimInput(
            entity=cpb.MentionInput(name="standup"),
            attribute="starts_at",
            value="09:30",
            valid_from=_at("2026-05-03T22:00:00Z"),
            confidence=0.5,
        )
    ]
    relation = req.relations[0]
    assert relation.subject == cpb.MentionInput(entity_id=ENTITY)
    assert relation.object == cpb.MentionInput(name="standup")
    assert relation.predicate == "runs" and relation.valid_until == _at("2026-12-31T00:00:00Z")
    assert not relation.HasField("valid_from")
    # The claim's default confidence, as the schema states it.
    assert relation.HasField("confidence") and relation.confidence == 1
    assert list(req.aliases) == [
        cpb.AliasInput(entity=cpb.MentionInput(name="standup"), alias="daily")
    ]
    assert not req.HasField("occurred_at")


def test_a_member_audience_and_the_defaults() -> None:
    req = BY_NAME["remember"].request_of(
        {"request_id": "r", "kind": "note", "title": "t", "audience": ENTITY}
    )
    assert isinstance(req, pb.RememberRequest)
    assert req.audience == cpb.Audience(member_id=ENTITY)
    assert req.purpose == cpb.PURPOSE_ASSIST and req.confidence == 1
    assert list(req.purposes) == [] and list(req.mentions) == []


def test_recall_filters_are_arguments_of_their_own() -> None:
    req = BY_NAME["recall"].request_of(GOOD["recall"])
    assert isinstance(req, pb.RecallRequest)
    assert req.mode == cpb.RECALL_MODE_HYBRID and req.limit == 5
    assert list(req.filters.kinds) == [cpb.KIND_DECISION, cpb.KIND_FACT]
    assert list(req.filters.mention_entity_ids) == [ENTITY]
    assert req.filters.include_superseded and not req.skip_rerank
    bare = BY_NAME["recall"].request_of({"query": "q"})
    assert isinstance(bare, pb.RecallRequest)
    assert bare.limit == 10 and bare.mode == cpb.RECALL_MODE_UNSPECIFIED
    assert bare.purpose == cpb.PURPOSE_ASSIST


def test_timeline_from_and_to_and_a_time_without_offset() -> None:
    req = BY_NAME["timeline"].request_of(GOOD["timeline"])
    assert isinstance(req, pb.TimelineRequest)
    assert getattr(req, "from") == _at("2026-01-01T00:00:00Z")
    assert req.to == _at("2026-02-01T00:00:00Z")
    with pytest.raises(ValueError, match=r"claims\[0\]\.valid_from: .*offset"):
        BY_NAME["remember"].request_of(
            {**REMEMBER, "claims": [{**REMEMBER["claims"][0], "valid_from": "2026-05-04T00:00"}]}
        )


WINDOWS = sorted(
    t.name for t in TOOLS if {"from", "to"} <= t.input_schema.get("properties", {}).keys()
)


def test_the_windows_are_the_timeline_list_and_audit_tools() -> None:
    assert WINDOWS == ["audit_log", "list_memories", "timeline"]


@pytest.mark.parametrize("name", WINDOWS)
def test_each_window_s_to_says_it_must_be_later_than_from(name: str) -> None:
    """The servers refuse a to not later than from (INVALID_ARGUMENT 'to: must
    be later than from'); an agent learns it from the argument, not the refusal."""
    description = BY_NAME[name].input_schema["properties"]["to"]["description"]
    assert "exclusive" in description
    assert "must be later than from" in description


@pytest.mark.parametrize("written", ["2026-01-01t09:30:00z", "2026-01-01T10:30:00+01:00"])
def test_a_time_in_any_spelling_rfc_3339_allows(written: str) -> None:
    """RFC 3339 (5.6) allows "t" and "z" in lowercase; both were refused as
    'not an RFC 3339 time' (Python's fromisoformat takes only capitals)."""
    req = BY_NAME["lookup"].request_of({"name": "Robin", "as_of": written})
    assert isinstance(req, pb.LookupRequest)
    assert req.as_of == _at("2026-01-01T09:30:00Z")


@pytest.mark.parametrize(
    ("request_type", "arguments"),
    [
        (pb.LookupRequest, {"name": "x", "as_of": "9" * 100_000}),
        (pb.RecallRequest, {"query": "x", "mode": "m" * 100_000}),
        (pb.RecallRequest, {"query": "x", "limit": "5" * 100_000}),
        (pb.RecallRequest, {"query": "x", "q" * 100_000: 1}),
    ],
    ids=["time", "enum", "kind", "unknown"],
)
def test_a_long_bad_value_is_quoted_short_with_its_length(
    request_type: type[Any], arguments: dict[str, Any]
) -> None:
    """Such a value was cut at 60 characters, its closing quote and its length
    lost ('as_of: not an RFC 3339 time: '999...'), where docs/agents.md
    promises at most 80 characters of it and its length."""
    with pytest.raises(ValueError) as err:
        protojson.to_message(request_type, arguments)
    message = str(err.value)
    assert "… (100002 characters)" in message and len(message) < 300, message


def test_a_whole_number_written_with_a_point_is_an_integer() -> None:
    """The input schema says "integer", which JSON Schema grants 5.0."""
    assert protojson.to_message(pb.RecallRequest, {"query": "q", "limit": 5.0}).limit == 5
    with pytest.raises(ValueError, match="limit"):
        protojson.to_message(pb.RecallRequest, {"query": "q", "limit": 5.5})


def test_a_oneof_takes_one_member_and_an_empty_one_is_no_choice() -> None:
    """A mention names an entity by id or by name: both is refused (as
    HTTP/JSON refuses it), and an empty id leaves the name standing."""
    with pytest.raises(ValueError, match="not both"):
        protojson.to_message(pb.RememberRequest, {"mentions": [{"entity_id": ID, "name": "Bob"}]})
    made = protojson.to_message(
        pb.RememberRequest, {"mentions": [{"entity_id": "", "name": "Bob"}]}
    )
    assert made.mentions[0].name == "Bob" and not made.mentions[0].entity_id


def test_names_the_walk_does_not_know_are_refused() -> None:
    with pytest.raises(ValueError, match="claims\\[0\\]: unknown argument 'entiy'"):
        protojson.to_message(pb.RememberRequest, {"claims": [{"entiy": {}}]})
    with pytest.raises(ValueError, match="kind: 'opinion' is not one of"):
        protojson.to_message(pb.RememberRequest, {"kind": "opinion"})


def _memory() -> cpb.Memory:
    return cpb.Memory(
        id=ID,
        kind=cpb.KIND_FACT,
        title="t",
        confidence=0.800000011920929,
        origin=cpb.ORIGIN_DERIVED,
        revision=2,
        audience=cpb.Audience(member_id=ENTITY),
        purposes=[cpb.PURPOSE_ASSIST],
        created_at=_at("2026-01-01T09:00:00Z"),
        links=[
            cpb.Link(
                kind=cpb.LINK_KIND_DERIVED_FROM,
                target=cpb.MemoryRef(id=ID, visible=True, title="seen", kind=cpb.KIND_NOTE),
            ),
            cpb.Link(
                kind=cpb.LINK_KIND_ABOUT,
                target=cpb.MemoryRef(visible=False, title="leak", kind=cpb.KIND_NOTE),
            ),
        ],
    )


def test_an_answer_reads_as_its_output_schema_says() -> None:
    tool = BY_NAME["read"]
    answer = tool.answer(pb.ReadResponse(memories=[_memory()]))
    jsonschema.Draft202012Validator(tool.output_schema).validate(answer)
    memory = answer["memories"][0]
    # Date and provenance first.
    assert list(memory)[:4] == ["id", "created_at", "created_by", "origin"]
    assert memory["created_at"] == "2026-01-01T09:00:00Z" and memory["updated_at"] is None
    assert memory["confidence"] == 0.8 and memory["origin"] == "derived"
    assert memory["audience"] == ENTITY and memory["purposes"] == ["assist"]
    assert memory["superseded_by_id"] is None and memory["episode_id"] is None
    seen, hidden = memory["links"]
    assert seen == {
        "kind": "derived_from",
        "target": {"id": ID, "visible": True, "title": "seen", "kind": "note"},
    }
    # A linked memory the caller may not see shows no title or kind.
    assert hidden == {"kind": "about", "target": {"id": "", "visible": False}}


@pytest.mark.parametrize("name", list(GOOD))
def test_an_empty_answer_conforms_too(name: str) -> None:
    tool = BY_NAME[name]
    jsonschema.Draft202012Validator.check_schema(tool.output_schema)
    jsonschema.Draft202012Validator(tool.output_schema).validate(tool.answer(tool.response()))


def test_recall_answers_with_the_outcome_and_memories_flat() -> None:
    tool = BY_NAME["recall"]
    outcome = cpb.RecallOutcome(
        mode=cpb.RECALL_MODE_LEXICAL,
        dense_available=False,
        dense_unavailable_reason="embed service down",
        reranked=False,
        results=[cpb.RecallResult(memory=_memory(), scores=cpb.RecallScores(fused_score=1 / 61))],
        history=[cpb.HistoryEntry(id="h", text="owner only")],
    )
    answer = tool.answer(pb.RecallResponse(outcome=outcome))
    jsonschema.Draft202012Validator(tool.output_schema).validate(answer)
    assert answer["mode"] == "lexical" and answer["dense_available"] is False
    assert answer["dense_unavailable_reason"] == "embed service down"
    assert answer["results"][0]["id"] == ID
    assert answer["results"][0]["scores"]["fused_score"] == 0.016393
    assert answer["history"][0]["text"] == "owner only"
    assert answer["nothing_relevant"] is False
    assert next(iter(answer)) == "nothing_relevant"
    flagged = tool.answer(pb.RecallResponse(outcome=cpb.RecallOutcome(nothing_relevant=True)))
    assert flagged["nothing_relevant"] is True


def test_the_owner_view_tools_are_read_only_and_bounded() -> None:
    for name in ("list_memories", "audit_log"):
        assert BY_NAME[name].read_only and not BY_NAME[name].destructive
    assert _problems("list_memories", {"page_size": 101}) != []
    assert _problems("audit_log", {"page_size": 201}) != []
    assert _problems("audit_log", {"actions": ["Drop table"]}) != []
    req = BY_NAME["audit_log"].request_of(GOOD["audit_log"])
    assert isinstance(req, pb.ListAuditEventsRequest)
    assert list(req.actions) == ["forget", "remove_member"] and req.page_size == 200


@pytest.mark.parametrize(
    ("tool", "field", "argument"),
    [
        ("remember", "about_ids[0]", "about[0]"),
        ("remember", "about_ids", "about"),
        ("derive", "source_ids[2]", "sources[2]"),
        ("recall", "filters.mention_entity_ids[1]", "mentions[1]"),
        ("recall", "filters.kinds[0]", "kinds[0]"),
        ("remember", "audience.member_id", "audience"),
        ("remember", "claims[0].entity.entity_id", "claims[0].entity.entity_id"),
        ("remember", "title", "title"),
        ("remember", "no_such_field", "no_such_field"),
    ],
)
def test_a_refusal_names_the_argument_the_agent_gave(tool: str, field: str, argument: str) -> None:
    """The gateway names its request's fields; an agent was told to fix
    about_ids, source_ids or filters.mention_entity_ids, which its schema has
    not (about, sources, mentions)."""
    from recallatron.grpcclient import PeerStatus
    from recallatron_mcp.tools import as_arguments

    assert BY_NAME[tool].argument_of(field) == argument
    status = PeerStatus(grpc.StatusCode.INVALID_ARGUMENT, "x", fields=(f"{field}: must be a UUID",))
    assert as_arguments(status, BY_NAME[tool]).fields == (f"{argument}: must be a UUID",)
    # A refusal without field details says it in its message (NOT_FOUND).
    found = PeerStatus(grpc.StatusCode.NOT_FOUND, f"{field}: a memory was not found")
    assert as_arguments(found, BY_NAME[tool]).message == f"{argument}: a memory was not found"


@pytest.mark.parametrize("revision", [2**63, 1e30])
def test_a_number_past_its_field_is_refused_naming_the_argument(revision: float) -> None:
    """protobuf refused it ("Value out of range") and the agent was not told
    which argument."""
    from recallatron_mcp import tools as mcp_tools

    args = {"request_id": "r", "id": "7a0d6c55-5b8e-4f3c-9d6b-0f1e2a3b4c5d", "reason": "r",
            "expected_revision": revision}  # fmt: skip
    with pytest.raises(mcp_tools.ToolError) as refused:
        mcp_tools.call(None, "correct", args)  # type: ignore[arg-type]
    assert "expected_revision" in str(refused.value)


@pytest.mark.parametrize(
    ("tool", "default"),
    [
        ("remember", "only you"),
        ("derive", "intersection of its sources"),
        ("supersede", "old memory's audience"),
    ],
)
def test_each_write_tells_the_audience_it_defaults_to(tool: str, default: str) -> None:
    """What a memory written without an audience is shared with, as the
    store decides it: an agent trusting "only you" on derive or supersede
    would share a memory with the workspace believing it private."""
    said = BY_NAME[tool].input_schema["properties"]["audience"]["description"]
    assert default in said, said


def test_supersede_tells_a_derived_memory_is_only_narrowed() -> None:
    """A derived memory's successor may narrow its audience and purposes,
    never widen them (design §4): an agent told only "Default: the old
    memory's audience" would try a wider one and meet a refusal it was never
    warned of."""
    tool = BY_NAME["supersede"]
    for said in (tool.description, tool.input_schema["properties"]["audience"]["description"]):
        assert "derived" in said and "narrow" in said and "never widen" in said, said


def _lists(schema: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """Every array in a schema, with where it is."""
    if isinstance(schema, dict):
        if schema.get("type") == "array":
            yield path, schema
        for key, value in schema.items():
            yield from _lists(value, f"{path}.{key}" if path else key)
    elif isinstance(schema, list):
        for i, value in enumerate(schema):
            yield from _lists(value, f"{path}[{i}]")


@pytest.mark.parametrize("name", list(GOOD))
def test_every_list_argument_says_how_long_it_may_be(name: str) -> None:
    """The gateway refuses a list past its bound (a list of an enum's names
    past as many as the enum has; recall's mentions past 50): an agent reads
    that bound in the schema, not from a refusal after the call."""
    unbounded = [path for path, s in _lists(BY_NAME[name].input_schema) if "maxItems" not in s]
    assert unbounded == []


def test_the_lists_bounds_are_the_gateways() -> None:
    every_kind = ["note", "fact", "decision", "summary"]
    assert _problems("recall", {"query": "q", "kinds": every_kind}) == []
    assert _problems("recall", {"query": "q", "kinds": ["note"] * 5}) != []
    assert _problems("remember", {**REMEMBER, "purposes": ["assist"] * 5}) != []
    # Distinct ids: the store refuses one given twice.
    ids = [f"3f0c6f9e-0000-4000-8000-{i:012d}" for i in range(51)]
    assert _problems("recall", {"query": "q", "mentions": ids[:50]}) == []
    assert _problems("recall", {"query": "q", "mentions": ids}) != []


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("read", {"ids": []}),
        ("read", {"ids": [ID, ID]}),
        ("derive", {**GOOD["derive"], "sources": [ID, ID]}),
        ("remember", {**REMEMBER, "about": [ID, ID]}),
        ("recall", {"query": "q", "mentions": [ENTITY, ENTITY]}),
    ],
)
def test_an_id_list_the_gateway_refuses_the_schema_refuses_too(
    name: str, arguments: dict[str, Any]
) -> None:
    """The store refuses an empty read ("ids: at least 1 required") and an id
    given twice in a list of ids ("ids: contains duplicates"): an agent
    whose arguments pass the schema must not meet that refusal after the call."""
    assert _problems(name, arguments) != []


def test_forget_and_supersede_tell_a_forgotten_successor_revives_what_it_replaced() -> None:
    """Forgetting a memory that superseded another makes that one current
    again (no successor, recalled as current, changeable: design §7.1). An
    agent told only that "the old one stays readable and points to its
    successor" and that forget "keeps links valid" forgets a wrong update
    without knowing the replaced claim comes back as current."""
    forget = BY_NAME["forget"].description
    assert "current again" in forget and "replaced" in forget, forget
    supersede = BY_NAME["supersede"].description
    assert "current again" in supersede, supersede
