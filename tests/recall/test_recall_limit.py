"""Recall's limit: 0 asks for the default, 1 to MAX_RECALL_LIMIT for that many
(recallatron.vocabulary). A refusal says so wherever the field is checked, so a
caller told what is wrong is not told that the 0 they may send is wrong."""

from __future__ import annotations

import argparse

import grpc
import pytest

from recallatron import errors
from recallatron import tools as tool_defs
from recallatron.v1 import common_pb2 as cpb
from recallatron.v1 import rank_pb2
from recallatron.vocabulary import DEFAULT_RECALL_LIMIT, MAX_RECALL_LIMIT
from recallatron_cli import main as cli_main
from services.rank import server as rank_server
from tests.conftest import Team

RULE_WORDS = ("0", "default", str(DEFAULT_RECALL_LIMIT), f"[1, {MAX_RECALL_LIMIT}]")


def _says_the_rule(text: str) -> None:
    for word in RULE_WORDS:
        assert word in text, (word, text)


@pytest.mark.parametrize("limit", [-1, MAX_RECALL_LIMIT + 1])
def test_rank_refuses_a_limit_naming_the_field_the_default_and_the_range(limit: int) -> None:
    msg = rank_pb2.RankRequest(
        caller=cpb.Caller(workspace_id="w", member_id="m"), query="q", limit=limit
    )
    with pytest.raises(errors.InvalidArgument) as err:
        rank_server.request_of(msg)
    text = str(err.value)
    assert text.startswith("limit: "), text
    _says_the_rule(text)


def test_rank_takes_0_as_the_default() -> None:
    msg = rank_pb2.RankRequest(caller=cpb.Caller(workspace_id="w", member_id="m"), query="q")
    assert rank_server.request_of(msg).limit == DEFAULT_RECALL_LIMIT


def test_the_tool_schema_and_the_cli_flag_state_the_same_rule() -> None:
    limit = {t.name: t for t in tool_defs.TOOLS}["recall"].input_schema["properties"]["limit"]
    assert (limit["minimum"], limit["maximum"]) == (0, MAX_RECALL_LIMIT)
    _says_the_rule(limit["description"])
    (sub,) = [
        a for a in cli_main.build_parser()._actions if isinstance(a, argparse._SubParsersAction)
    ]
    (flag,) = [a for a in sub.choices["recall"]._actions if "--limit" in a.option_strings]
    assert flag.help is not None
    _says_the_rule(flag.help)


@pytest.mark.integration
@pytest.mark.parametrize("limit", [-1, MAX_RECALL_LIMIT + 1])
def test_the_gateway_refuses_a_limit_naming_the_field_the_default_and_the_range(
    team: Team, limit: int
) -> None:
    with pytest.raises(grpc.RpcError) as err:
        team.clients["ada"].recall("q", limit=limit)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    text = err.value.details() or ""
    assert text.startswith("limit: "), text
    _says_the_rule(text)
