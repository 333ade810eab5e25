"""The vocabulary: derived from the proto enums, the same as the database's
enum types, and the source of the limits the tool schemas state."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from recallatron import errors, vocabulary
from recallatron.tools import TOOLS
from recallatron.v1 import common_pb2 as cpb
from recallatron.vocabulary import KIND, MODE, PURPOSE

REPO = Path(__file__).resolve().parents[2]
# The workspace baseline's part that declares the enum types.
(TYPES,) = (REPO / "services/store/sql/migrations/workspace").glob("*_baseline/01_types.sql")


def test_names_come_from_the_proto_enums() -> None:
    assert vocabulary.KINDS == ("note", "fact", "decision", "summary")
    assert vocabulary.PURPOSES == ("assist", "automate", "personalize", "audit")
    assert vocabulary.MODES == ("lexical", "dense", "hybrid")
    assert KIND.value("decision") == cpb.KIND_DECISION
    assert MODE.name(cpb.RECALL_MODE_DENSE) == "dense"
    assert vocabulary.DEFAULT_PURPOSE in vocabulary.PURPOSES
    assert vocabulary.DEFAULT_MODE in vocabulary.MODES


def test_parse_and_name() -> None:
    assert PURPOSE.parse(0, "purpose") is None
    assert PURPOSE.parse(cpb.PURPOSE_AUDIT, "purpose") == "audit"
    with pytest.raises(errors.InvalidArgument, match="unknown value 99"):
        PURPOSE.parse(99, "purpose")
    # For display a value from a newer peer is shown, never raised.
    assert KIND.name(99) == "99"
    assert MODE.one_of() == "lexical, dense or hybrid"


@pytest.mark.parametrize(
    ("sql_type", "terms"),
    [
        ("memory_kind", vocabulary.KIND),
        ("memory_origin", vocabulary.ORIGIN),
        ("purpose", vocabulary.PURPOSE),
        ("link_kind", vocabulary.LINK_KIND),
    ],
)
def test_the_database_enums_say_the_same(sql_type: str, terms: vocabulary.Terms[Any]) -> None:
    declared = re.search(rf"CREATE TYPE {sql_type} AS ENUM \(([^)]*)\)", TYPES.read_text())
    assert declared is not None
    assert tuple(re.findall(r"'([a-z_]+)'", declared.group(1))) == terms.names


def test_tool_schemas_state_the_checked_limits() -> None:
    tools = {t.name: t.input_schema["properties"] for t in TOOLS}
    recall, remember = tools["recall"], tools["remember"]
    assert recall["query"]["maxLength"] == vocabulary.MAX_QUERY_CHARS
    assert recall["limit"]["maximum"] == vocabulary.MAX_RECALL_LIMIT
    assert recall["limit"]["default"] == vocabulary.DEFAULT_RECALL_LIMIT
    assert recall["mode"]["enum"] == list(vocabulary.MODES)
    assert recall["mentions"]["maxItems"] == vocabulary.MAX_FILTER_ENTITIES
    assert remember["kind"]["enum"] == list(vocabulary.KINDS)
    assert remember["title"]["maxLength"] == vocabulary.MAX_TITLE
    assert remember["body"]["maxLength"] == vocabulary.MAX_BODY
    assert remember["mentions"]["maxItems"] == vocabulary.MAX_MENTIONS
    assert remember["about"]["maxItems"] == vocabulary.MAX_LINKS
    assert remember["request_id"]["maxLength"] == vocabulary.MAX_REQUEST_ID
    assert tools["derive"]["sources"]["maxItems"] == vocabulary.MAX_LINKS
    assert tools["read"]["ids"]["maxItems"] == vocabulary.MAX_READ_IDS
    assert tools["forget"]["reason"]["maxLength"] == vocabulary.MAX_REASON
    claim = remember["claims"]["items"]["properties"]
    assert remember["claims"]["maxItems"] == vocabulary.MAX_CLAIMS
    assert remember["relations"]["maxItems"] == vocabulary.MAX_RELATIONS
    assert remember["aliases"]["maxItems"] == vocabulary.MAX_ALIASES
    assert claim["value"]["maxLength"] == vocabulary.MAX_CLAIM_VALUE
    assert claim["attribute"]["pattern"] == vocabulary.IDENTIFIER_PATTERN
    assert claim["attribute"]["maxLength"] == vocabulary.MAX_IDENTIFIER
    assert claim["entity"]["properties"]["name"]["maxLength"] == vocabulary.MAX_ENTITY_NAME
    assert tools["neighbors"]["hops"]["maximum"] == vocabulary.MAX_HOPS
    assert tools["lookup"]["name"]["maxLength"] == vocabulary.MAX_ENTITY_NAME
    # The store refuses any other action: the schema lists those it takes.
    audit = tools["audit_log"]["actions"]
    assert audit["items"]["enum"] == list(vocabulary.AUDIT_ACTIONS)
    assert audit["maxItems"] == vocabulary.MAX_AUDIT_ACTIONS
    for props in tools.values():
        assert props["purpose"]["enum"] == list(vocabulary.PURPOSES)
        assert props["purpose"]["default"] == vocabulary.DEFAULT_PURPOSE


def test_the_api_document_states_the_same_limits() -> None:
    api = (REPO / "docs/api.md").read_text()
    rows = re.findall(r"^\| `([A-Z_]+)`[^|]*\| (\d+) \|$", api, re.MULTILINE)
    assert len(rows) >= 10
    for name, value in rows:
        assert getattr(vocabulary, name) == int(value), name
    # And every limit is in it: a bound an agent or a client meets must not be
    # one only the tool schema or the code states.
    limits = {
        name
        for name, value in vars(vocabulary).items()
        if isinstance(value, int) and (name.startswith("MAX_") or name.endswith("_BUDGET_BYTES"))
    }
    missing = sorted(limits - {name for name, _ in rows})
    assert not missing, f"docs/api.md's Limits table lacks {missing}"
