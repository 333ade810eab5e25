"""`recallatron admin`: the operator's and owners' calls through the gateway:
workspaces, members and tokens."""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import unicodedata
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import grpc

from recallatron.client import Client
from recallatron.v1 import store_pb2
from recallatron.vocabulary import PURPOSE, PURPOSES, ROLE, handle_key
from recallatron_cli import common
from recallatron_cli.common import show


def cmd_admin(args: argparse.Namespace) -> int:
    client = common.client(args, admin=True)
    if args.admin_cmd == "create-workspace":
        made = client.create_workspace(args.slug, args.server or "", args.request_id)
        show(
            args,
            made,
            f"workspace {made.workspace.slug} {made.workspace.id} on server "
            f"{made.workspace.server}",
        )
    elif args.admin_cmd == "create-member":
        workspace_id = workspace_id_of(client, args.workspace, "adds members to")
        member = client.create_member(
            workspace_id, args.handle, owner=args.owner, request_id=args.request_id
        )
        show(args, member, f"member {member.member.handle} {member.member.id}")
    elif args.admin_cmd == "create-token":
        purposes = [p for value in args.purposes or () for p in value.split(",") if p]
        unknown = [p for p in purposes if p not in PURPOSES]
        if unknown:
            raise common.invalid(
                "purposes", "--purposes", f"{unknown[0]!r} is not one of {', '.join(PURPOSES)}"
            )
        expires_in = duration(args.expires_in, "expires_in", "--expires-in")
        token = client.create_token(
            member_id_of(client, args.member, args.workspace, "member_id", "member"),
            args.label,
            purposes,
            args.read_only,
            expires_in=expires_in,
            request_id=args.request_id,
        )
        scope = ", ".join(
            [
                *(["purposes " + "/".join(purposes)] if purposes else []),
                *(["read-only"] if args.read_only else []),
            ]
        )
        show(
            args,
            token,
            f"token {token.token}\n(id {token.token_id}; shown once"
            + (f"; scope: {scope}" if scope else "")
            + f"; {expiry(token)})",
        )
    elif args.admin_cmd == "revoke-token":
        client.revoke_token(args.token_id)
        print(json.dumps({"revoked": args.token_id}) if args.json else "revoked")
    elif args.admin_cmd == "rotate-token":
        grace = duration(args.grace, "grace", "--grace")
        rotated = client.rotate_token(args.token_id, grace, args.request_id)
        old_until = rotated.old_expires_at.ToDatetime(tzinfo=UTC)
        # A grace of 0 ended it at the server's time: a clock here a little
        # behind the server's must not read that as a time still to come.
        stopped = grace == timedelta(0) or old_until <= datetime.now(UTC)
        show(
            args,
            rotated,
            f"token {rotated.token}\n(id {rotated.token_id}; shown once; {expiry(rotated)})\n"
            + (
                f"the old token {args.token_id} stops now"
                if stopped
                else f"the old token {args.token_id} works until {stamp(old_until)}"
            ),
        )
    elif args.admin_cmd == "list-tokens":
        workspace_id = workspace_id_of(client, args.workspace, "lists the tokens of")
        holder = (
            member_id_of(client, args.member, args.workspace, "member_id", "--member")
            if args.member
            else ""
        )
        listed = client.list_tokens(holder, workspace_id)
        show(
            args,
            listed,
            "\n".join(token_line(t) for t in listed.tokens) or "no tokens",
        )
    elif args.admin_cmd == "list-members":
        members = client.list_members(args.workspace or "", args.removed)
        show(args, members, "\n".join(member_line(m) for m in members.members) or "no members")
    elif args.admin_cmd == "list-workspaces":
        every = client.all_workspaces(args.server or "")
        show(args, every, "\n".join(workspace_line(w) for w in every.workspaces) or "no workspaces")
    return 0


def member_id_of(
    client: Client,
    given: str,
    workspace: str | None,
    field: str,
    flag: str,
    removed: bool = False,
) -> str:
    """The id of the member ``given`` names by id or by handle (one in any
    case, as the control plane finds it), for a request whose field takes an
    id. A handle is found among the members of ``workspace`` (its id or slug;
    none: the caller's own, which the operator must name); with ``removed``
    among those removed too, a current member first (a handle is free again
    once its member is removed), else the one removed member who had it."""
    with contextlib.suppress(ValueError):
        return str(uuid.UUID(given))  # a handle is never a UUID
    key = handle_key(given)
    found = [
        m
        for m in client.list_members(workspace or "", include_removed=removed).members
        if handle_key(m.handle) == key
    ]
    current = [m for m in found if not m.HasField("removed_at")]
    if len(current or found) == 1:
        return str((current or found)[0].id)
    if found:
        raise common.invalid(
            field,
            flag,
            f"{len(found)} removed members had the handle {given!r}: give the id",
            common.EXIT_REFUSED,
        )
    raise common.invalid(
        field, flag, f"no member has the handle {given!r} in the workspace", common.EXIT_REFUSED
    )


def workspace_id_of(client: Client, given: str | None, doing: str) -> str:
    """The id of the workspace ``given`` names by id or slug, for a request
    whose field takes an id. A slug is resolved by the gateway as list-members
    resolves one (with its refusals: NOT_FOUND, an owner naming another
    workspace, the latter in the words of what the command does: an owner
    ``doing`` their own workspace only); a workspace no member ever joined,
    which only the operator sees, is found in the list of workspaces."""
    if not given:
        return ""
    with contextlib.suppress(ValueError):
        return str(uuid.UUID(given))  # a slug is never a UUID
    try:
        page = client.list_members_page(given, include_removed=True, page_size=1)
    except grpc.RpcError as exc:
        # Refused the workspace named (not the caller): list-members' words
        # would speak of listing members, which the user never asked for.
        if exc.code() == grpc.StatusCode.PERMISSION_DENIED and str(exc.details()).startswith(
            "workspace: "
        ):
            raise common.Refused(
                f"PERMISSION_DENIED: workspace_id (--workspace): an owner {doing} their "
                "own workspace only",
                common.EXIT_REFUSED,
            ) from None
        raise
    if page.members:
        return str(page.members[0].workspace_id)
    for listed in client.all_workspaces().workspaces:
        if listed.workspace.slug == given:
            return str(listed.workspace.id)
    # Deleted between the two calls.
    raise common.Refused(f"NOT_FOUND: workspace: no workspace {given!r}", common.EXIT_REFUSED)


def workspace_line(listed: store_pb2.ListedWorkspace) -> str:
    w = listed.workspace
    return (
        f"{w.id}  {w.slug}  server {w.server}  {listed.members} members  "
        f"created {when(w, 'created_at', '-')}"
    )


def member_line(m: store_pb2.Member) -> str:
    """One member: id, handle, role, since when, and when removed if so."""
    removed = f"  removed {when(m, 'removed_at', '')}" if m.HasField("removed_at") else ""
    return f"{m.id}  {m.handle}  {ROLE.name(m.role)}  since {when(m, 'created_at', '-')}{removed}"


# A duration as an operator writes one: parts such as 90d, 12h, 30m, 45s
# (1h30m), or 0.
_DURATION = re.compile(r"^(?:0|(?:\d{1,9}[dhms])+)$")
_UNIT = {"d": "days", "h": "hours", "m": "minutes", "s": "seconds"}


def duration(text: str | None, field: str, flag: str) -> timedelta | None:
    """``text`` as a timedelta (None when not given); a malformed one is
    refused here, naming the request's field, as the gateway would."""
    if text is None:
        return None
    parts = re.findall(r"(\d+)([dhms])", text.strip())
    units = [unit for _, unit in parts]
    try:
        if not _DURATION.match(text.strip()) or len(set(units)) != len(units):
            raise ValueError(text)
        return timedelta(**{_UNIT[unit]: int(n) for n, unit in parts})
    except (ValueError, OverflowError):
        # Malformed, a unit given twice (1d1d), or past what a time can hold.
        raise common.invalid(
            field,
            flag,
            f"{text!r} is not a duration; use a whole number and a unit (d, h, m, s), each "
            "unit once, e.g. 90d, 12h, 30m, 1h30m, or 0",
        ) from None


def stamp(value: datetime) -> str:
    return value.strftime("%Y-%m-%dT%H:%M:%SZ")


def when(message: Any, field: str, never: str) -> str:
    if not message.HasField(field):
        return never
    return stamp(getattr(message, field).ToDatetime(tzinfo=UTC))


def expiry(message: Any) -> str:
    return f"expires {when(message, 'expires_at', 'never')}"


def shown(text: str) -> str:
    """``text`` with control and format characters written as escapes: a
    label kept before they were refused never acts on the terminal."""
    return "".join(
        f"\\u{ord(ch):04x}" if unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp") else ch
        for ch in text
    )


def token_line(t: store_pb2.TokenSummary) -> str:
    """One token: id, label, member, scope, created, expiry, last use, state."""
    now = datetime.now(UTC)
    if t.HasField("revoked_at"):
        state = f"revoked {when(t, 'revoked_at', '')}"
    elif t.HasField("expires_at") and t.expires_at.ToDatetime(tzinfo=UTC) <= now:
        state = "expired"
    else:
        state = "active"
    scope = ", ".join(
        [
            *(["purposes " + "/".join(PURPOSE.name(p) for p in t.purposes)] if t.purposes else []),
            *(["read-only"] if t.read_only else []),
        ]
    )
    return (
        f"{t.id}  {shown(t.label) or '-'}  member {t.member_handle} ({t.member_id})  "
        f"scope {scope or 'all'}  created {when(t, 'created_at', '-')}  "
        f"{expiry(t)}  last used {when(t, 'last_used_at', 'never')}  {state}"
    )


def add_token_parsers(admin_sub: Any) -> None:
    """`admin create-token`, `revoke-token`, `rotate-token` and `list-tokens`."""
    ct = admin_sub.add_parser(
        "create-token",
        help="a token for a member, its scope and lifetime; the secret is shown once",
    )
    ct.add_argument("member", help="the member's id or handle")
    ct.add_argument(
        "--workspace",
        help="the member's workspace, its id or slug, to find a handle in (the operator; "
        "an owner's is their own)",
    )
    ct.add_argument("--label", default="")
    ct.add_argument(
        "--purposes",
        action="append",
        help="limit the token to these purposes (comma-separated or repeated): "
        "assist, automate, personalize, audit; default all",
    )
    ct.add_argument(
        "--read-only",
        action="store_true",
        help="limit the token to the calls that change nothing (recall, read, the graph, "
        "list, audit, the review listings, settings, status)",
    )
    ct.add_argument(
        "--expires-in",
        metavar="DURATION",
        help="the token is refused from then on: e.g. 90d, 12h, 30m (at most 3650d); "
        "default: never expires",
    )
    ct.add_argument(
        "--request-id",
        default="",
        help="your id of this request: a retry with it makes no second token (refused, "
        "naming the token the first attempt made)",
    )
    common.group_client_options(ct)
    rv = admin_sub.add_parser("revoke-token", help="a token refused from now on, by its id")
    rv.add_argument("token_id")
    common.group_client_options(rv)
    rt = admin_sub.add_parser(
        "rotate-token",
        help="a new token for the same member, scope and lifetime; the old one stops "
        "after the grace",
    )
    rt.add_argument("token_id")
    rt.add_argument(
        "--grace",
        metavar="DURATION",
        help="how long the old token keeps working: e.g. 1h, 0 (stops at once); "
        "default 24h, at most 90d",
    )
    rt.add_argument(
        "--request-id",
        default="",
        help="your id of this request: a retry with it makes no second token (refused, "
        "naming the token the first attempt made)",
    )
    common.group_client_options(rt)
    lt = admin_sub.add_parser(
        "list-tokens",
        help="tokens with scope, expiry and last use, by member, oldest first; never a secret",
    )
    lt.add_argument(
        "--member",
        help="the member's id or handle (owners: default every member of the workspace)",
    )
    lt.add_argument(
        "--workspace", help="every token of this workspace (its id or slug; the operator)"
    )
    common.group_client_options(lt)
