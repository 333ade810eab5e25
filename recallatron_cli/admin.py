"""`recallatron admin`: the operator's and owners' calls through the gateway:
workspaces, members and tokens."""

from __future__ import annotations

import argparse
import sys

from recallatron.vocabulary import PURPOSES
from recallatron_cli import common
from recallatron_cli.common import show


def cmd_admin(args: argparse.Namespace) -> int:
    client = common.client(args, admin=True)
    if args.admin_cmd == "create-workspace":
        made = client.create_workspace(args.slug, args.server or "")
        show(
            args,
            made,
            f"workspace {made.workspace.slug} {made.workspace.id} on server "
            f"{made.workspace.server}",
        )
    elif args.admin_cmd == "create-member":
        member = client.create_member(args.workspace, args.handle, owner=args.owner)
        show(args, member, f"member {member.member.handle} {member.member.id}")
    elif args.admin_cmd == "create-token":
        purposes = [p for value in args.purposes or () for p in value.split(",") if p]
        unknown = [p for p in purposes if p not in PURPOSES]
        if unknown:
            sys.exit(f"unknown purpose {unknown[0]!r}: one of {', '.join(PURPOSES)}")
        token = client.create_token(args.member, args.label, purposes, args.read_only)
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
            + ")",
        )
    elif args.admin_cmd == "revoke-token":
        client.revoke_token(args.token_id)
        print("revoked")
    return 0
