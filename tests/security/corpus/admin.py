"""The bad-input corpus's cases for the admin surface."""

from __future__ import annotations

import uuid

from recallatron.v1 import common_pb2 as cpb
from recallatron.v1 import gateway_pb2 as pb
from tests.security.corpus.base import (
    DENIED,
    EXISTS,
    INVALID,
    NOT_FOUND,
    SQL,
    UNAUTH,
    Case,
    settings,
)

CASES: list[Case] = []


def add(*cases: Case) -> None:
    CASES.extend(cases)


# -- admin ---------------------------------------------------------------------
for label, slug in {
    "empty": "",
    "upper": "Acme",
    "leading dash": "-acme",
    "64 chars": "a" * 64,
    "space": "a b",
    "sql": SQL,
    "NUL": "ac\x00me",
    "unicode": "ácme",
}.items():
    add(
        Case(
            f"create workspace slug {label}",
            "admin",
            "CreateWorkspace",
            lambda i, s=slug: pb.AdminServiceCreateWorkspaceRequest(slug=s),
            INVALID,
            "slug",
            who="operator",
        )
    )
add(
    Case(
        "create workspace slug taken",
        "admin",
        "CreateWorkspace",
        lambda i: pb.AdminServiceCreateWorkspaceRequest(slug=i["slug"]),
        EXISTS,
        "slug",
        who="operator",
    ),
    Case(
        "create workspace by owner",
        "admin",
        "CreateWorkspace",
        lambda i: pb.AdminServiceCreateWorkspaceRequest(slug="never"),
        DENIED,
        "operator",
    ),
    Case(
        "create member bad handle",
        "admin",
        "CreateMember",
        lambda i: pb.AdminServiceCreateMemberRequest(handle="a b", role=cpb.ROLE_MEMBER),
        INVALID,
        "handle",
    ),
    Case(
        "create member handle sql",
        "admin",
        "CreateMember",
        lambda i: pb.AdminServiceCreateMemberRequest(handle=SQL, role=cpb.ROLE_MEMBER),
        INVALID,
        "handle",
    ),
    Case(
        "create member handle 64",
        "admin",
        "CreateMember",
        lambda i: pb.AdminServiceCreateMemberRequest(handle="h" * 64, role=cpb.ROLE_MEMBER),
        INVALID,
        "handle",
    ),
    Case(
        "create member handle NUL",
        "admin",
        "CreateMember",
        lambda i: pb.AdminServiceCreateMemberRequest(handle="a\x00", role=cpb.ROLE_MEMBER),
        INVALID,
        "handle",
    ),
    Case(
        "create member role unknown",
        "admin",
        "CreateMember",
        lambda i: pb.AdminServiceCreateMemberRequest(handle="newbie", role=7),
        INVALID,
        "role",
    ),
    Case(
        "create member other workspace",
        "admin",
        "CreateMember",
        lambda i: pb.AdminServiceCreateMemberRequest(
            workspace_id=i["foreign_ws"], handle="spy", role=cpb.ROLE_MEMBER
        ),
        NOT_FOUND,
        "workspace_id",
    ),
    Case(
        "create member by member",
        "admin",
        "CreateMember",
        lambda i: pb.AdminServiceCreateMemberRequest(handle="x", role=cpb.ROLE_MEMBER),
        DENIED,
        "owner",
        who="bob",
    ),
    Case(
        "create member operator bad workspace",
        "admin",
        "CreateMember",
        lambda i: pb.AdminServiceCreateMemberRequest(
            workspace_id="x", handle="x", role=cpb.ROLE_MEMBER
        ),
        INVALID,
        "workspace_id",
        who="operator",
    ),
    Case(
        "create member operator unknown workspace",
        "admin",
        "CreateMember",
        lambda i: pb.AdminServiceCreateMemberRequest(
            workspace_id=str(uuid.uuid4()), handle="x", role=cpb.ROLE_MEMBER
        ),
        NOT_FOUND,
        "workspace_id",
        who="operator",
    ),
    Case(
        "create token bad member",
        "admin",
        "CreateToken",
        lambda i: pb.AdminServiceCreateTokenRequest(member_id="x"),
        INVALID,
        "member_id",
    ),
    Case(
        "create token other workspace member",
        "admin",
        "CreateToken",
        lambda i: pb.AdminServiceCreateTokenRequest(member_id=i["stranger"]),
        NOT_FOUND,
        "member",
    ),
    Case(
        "create token label 201",
        "admin",
        "CreateToken",
        lambda i: pb.AdminServiceCreateTokenRequest(member_id=i["bob"], label="l" * 201),
        INVALID,
        "label",
    ),
    Case(
        "create token by member",
        "admin",
        "CreateToken",
        lambda i: pb.AdminServiceCreateTokenRequest(member_id=i["bob"]),
        DENIED,
        "owner",
        who="bob",
    ),
    Case(
        "revoke token bad uuid",
        "admin",
        "RevokeToken",
        lambda i: pb.AdminServiceRevokeTokenRequest(token_id=SQL),
        INVALID,
        "token_id",
    ),
    Case(
        "revoke token unknown",
        "admin",
        "RevokeToken",
        lambda i: pb.AdminServiceRevokeTokenRequest(token_id=str(uuid.uuid4())),
        NOT_FOUND,
        "token",
    ),
    Case(
        "revoke token of other workspace",
        "admin",
        "RevokeToken",
        lambda i: pb.AdminServiceRevokeTokenRequest(token_id=i["foreign_token"]),
        NOT_FOUND,
        "token",
    ),
    Case(
        "revoke token by member",
        "admin",
        "RevokeToken",
        lambda i: pb.AdminServiceRevokeTokenRequest(token_id=i["ada_token"]),
        DENIED,
        "owner",
        who="bob",
    ),
    Case(
        "settings dense_floor 1.5",
        "admin",
        "UpdateSettings",
        lambda i: settings(["dense_floor"], dense_floor=1.5),
        INVALID,
        "settings.dense_floor",
    ),
    Case(
        "settings dense_floor -0.1",
        "admin",
        "UpdateSettings",
        lambda i: settings(["dense_floor"], dense_floor=-0.1),
        INVALID,
        "settings.dense_floor",
    ),
    Case(
        "settings dense_floor NaN",
        "admin",
        "UpdateSettings",
        lambda i: settings(["dense_floor"], dense_floor=float("nan")),
        INVALID,
        "settings.dense_floor",
    ),
    Case(
        "settings rerank_depth 101",
        "admin",
        "UpdateSettings",
        lambda i: settings(["rerank_depth"], rerank_depth=101),
        INVALID,
        "settings.rerank_depth",
    ),
    Case(
        "settings rerank_depth -1",
        "admin",
        "UpdateSettings",
        lambda i: settings(["rerank_depth"], rerank_depth=-1),
        INVALID,
        "settings.rerank_depth",
    ),
    Case(
        "settings expiry -1",
        "admin",
        "UpdateSettings",
        lambda i: settings(["expiry_days"], expiry_days=-1),
        INVALID,
        "settings.expiry_days",
    ),
    Case(
        "settings expiry 36501",
        "admin",
        "UpdateSettings",
        lambda i: settings(["expiry_days"], expiry_days=36501),
        INVALID,
        "settings.expiry_days",
    ),
    Case(
        "settings mode unknown",
        "admin",
        "UpdateSettings",
        lambda i: settings(["default_recall_mode"], default_recall_mode=9),
        INVALID,
        "settings.default_recall_mode",
    ),
    Case(
        "settings mode unspecified",
        "admin",
        "UpdateSettings",
        lambda i: settings(["default_recall_mode"]),
        INVALID,
        "settings.default_recall_mode",
    ),
    Case(
        "settings field unknown",
        "admin",
        "UpdateSettings",
        lambda i: settings(["nope"]),
        INVALID,
        "update_fields",
    ),
    Case(
        "settings no fields",
        "admin",
        "UpdateSettings",
        lambda i: settings([]),
        INVALID,
        "update_fields",
    ),
    Case(
        "settings field sql",
        "admin",
        "UpdateSettings",
        lambda i: settings([SQL]),
        INVALID,
        "update_fields",
    ),
    Case(
        "settings by member",
        "admin",
        "UpdateSettings",
        lambda i: settings(["rerank_depth"], rerank_depth=5),
        DENIED,
        "owner",
        who="bob",
    ),
    Case(
        "status by member",
        "admin",
        "GetStatus",
        lambda i: pb.GetStatusRequest(),
        DENIED,
        "owner",
        who="bob",
    ),
    Case(
        "settings read by operator",
        "admin",
        "GetSettings",
        lambda i: pb.GetSettingsRequest(),
        UNAUTH,
        "authorization",
        who="operator",
    ),
)
