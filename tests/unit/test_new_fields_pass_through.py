"""A plain field added to a tool's request reaches the store's domain and the
CLI with no code of its own: the store adapter takes a request's plain field
into the domain dataclass field of the same name, and the CLI makes a --flag
for each plain request field its own options do not cover (design §7, "One
definition per tool"). No stack: the real messages, a stand-in dataclass."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from recallatron.v1 import gateway_pb2 as pb
from recallatron_cli import common
from recallatron_cli import tools as cli_tools
from recallatron_cli.main import build_parser
from services.store.api.messages import plain_fields


@dataclass(frozen=True)
class _Domain:
    title: str = ""
    label: str = ""
    confidence: float | None = None
    read_only: bool = False
    kind: str | None = None  # an enum in the request: never copied as a number


def test_a_requests_plain_fields_reach_the_dataclass_fields_of_the_same_name() -> None:
    req = pb.RememberRequest(title="t", body="b", kind=1)
    taken = plain_fields(req, _Domain)
    # body has no field in _Domain, kind is an enum, confidence is optional and unset.
    assert taken == {"title": "t"}
    req.confidence = 0.5
    assert plain_fields(req, _Domain) == {"title": "t", "confidence": 0.5}
    assert plain_fields(req, _Domain, skip={"title"}) == {"confidence": 0.5}
    token = pb.AdminServiceCreateTokenRequest(label="ci", read_only=True, purposes=[1])
    assert plain_fields(token, _Domain) == {"label": "ci", "read_only": True}


def test_the_cli_makes_a_flag_for_each_plain_field_its_options_do_not_cover() -> None:
    p = argparse.ArgumentParser()
    common.field_options(p, pb.AdminServiceCreateTokenRequest, covered={"member_id"})
    # purposes is repeated: no flag; label and read_only are plain.
    assert common.field_values(p.parse_args([])) == {}
    given = p.parse_args(["--label", "ci", "--read-only"])
    assert common.field_values(given) == {"label": "ci", "read_only": True}


def test_remember_has_no_field_without_an_option() -> None:
    # Every plain field of RememberRequest today has a hand-made option; one
    # added to the proto becomes --its-name (and this set shows it).
    args = build_parser().parse_args(["remember", "a title"])
    made = {k for k in vars(args) if k.startswith(common.FIELD_DEST)}
    plain = {
        f.name
        for f in pb.RememberRequest.DESCRIPTOR.fields
        if not f.is_repeated
        and f.type not in (f.TYPE_MESSAGE, f.TYPE_ENUM, f.TYPE_GROUP)
        and f.name not in cli_tools.REMEMBER_OPTIONS
    }
    assert made == {common.FIELD_DEST + name for name in plain}
