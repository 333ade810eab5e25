"""A workspace's and a member's end, and an owner's view, from a shell:
`recallatron admin delete-workspace`, `recallatron admin remove-member`,
`recallatron list` and `recallatron audit` (docs/api.md); and `recallatron
whoami`, the token's own member and workspace. Each has --json; bad input is
refused naming the request's field, before anything is sent."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterator
from typing import Any, NoReturn

from google.protobuf.message import Message

from recallatron.client import Client
from recallatron.vocabulary import KIND, KINDS, MAX_AUDIT_PAGE, MAX_LIST_PAGE, ROLE
from recallatron_cli import common
from recallatron_cli.admin import member_id_of, stamp
from recallatron_cli.common import client_options, printable, show

ERASE = "erase"
TRANSFER_TO = "transfer-to"


def _refuse(field: str, flag: str, why: str) -> NoReturn:
    """As the gateway would answer, naming the field (and the flag)."""
    print(f"error: INVALID_ARGUMENT: {field} ({flag}): {why}", file=sys.stderr)
    sys.exit(2)


# -- recallatron admin delete-workspace / remove-member ----------------------------------


def add_admin_parsers(admin_sub: Any) -> None:
    dw = admin_sub.add_parser(
        "delete-workspace",
        help="delete a workspace: tokens refused at once, its database dropped, a tombstone "
        "(id and time) kept; not undone (operator token; docs/reliability.md)",
    )
    dw.add_argument("workspace", help="the workspace's slug or id")
    dw.add_argument(
        "--confirm", required=True, metavar="WORKSPACE", help="the same slug or id again"
    )
    common.group_client_options(dw)
    dw.set_defaults(func=cmd_delete_workspace)
    rm = admin_sub.add_parser(
        "remove-member",
        help="remove a member: tokens refused at once, private memories erased or handed "
        "over, shared memories kept with their attribution (operator or an owner)",
    )
    rm.add_argument("member", help="the member's id or handle")
    rm.add_argument(
        "--workspace",
        help="the member's workspace, its id or slug, to find a handle in (the operator; "
        "an owner's is their own)",
    )
    rm.add_argument(
        "--private-memories",
        required=True,
        nargs="+",
        metavar="erase|transfer-to",
        help="what becomes of the memories only they could see: 'erase' (as forget) or "
        "'transfer-to MEMBER' (another member's id or handle, e.g. an owner)",
    )
    common.group_client_options(rm)
    rm.set_defaults(func=cmd_remove_member)


def cmd_delete_workspace(args: argparse.Namespace) -> int:
    if args.confirm != args.workspace:
        _refuse("confirm", "--confirm", "must repeat the workspace given; nothing was deleted")
    done = common.client(args, admin=True).delete_workspace(args.workspace, args.confirm)
    show(
        args,
        done,
        f"deleted workspace {done.slug} {done.workspace_id} at "
        f"{stamp(done.deleted_at.ToDatetime())}; {done.tokens_revoked} tokens refused from now on",
    )
    return 0


def private_memories(values: list[str]) -> tuple[str, str]:
    """(mode, receiving member) from --private-memories."""
    if values == [ERASE]:
        return "erase", ""
    if len(values) == 2 and values[0] == TRANSFER_TO:
        return "transfer", values[1]
    if values and values[0] == TRANSFER_TO:
        _refuse("transfer_to", "--private-memories transfer-to", "name exactly one member id")
    _refuse("private_memories", "--private-memories", "'erase' or 'transfer-to MEMBER'")


def cmd_remove_member(args: argparse.Namespace) -> int:
    mode, receiver = private_memories(args.private_memories)
    client = common.client(args, admin=True)
    member = member_id_of(client, args.member, args.workspace, "member_id", "member")
    if receiver:
        receiver = member_id_of(
            client, receiver, args.workspace, "transfer_to", "--private-memories transfer-to"
        )
    done = client.remove_member(member, mode, receiver)
    show(
        args,
        done,
        f"removed member {done.member_id}: {done.tokens_revoked} tokens refused from now on; "
        f"private memories: {done.memories_erased} erased, {done.memories_transferred} "
        f"handed over; {done.memories_kept} shared memories kept with their attribution",
    )
    return 0


# -- recallatron list / audit -------------------------------------------------------------


def cmd_whoami(args: argparse.Namespace) -> int:
    me = common.client(args).who_am_i()
    show(
        args,
        me,
        f"{printable(me.member_handle)} (member {me.member_id}, {ROLE.name(me.role)})"
        f" in {printable(me.workspace_slug)} (workspace {me.workspace_id})",
    )
    return 0


def add_parsers(sub: Any) -> None:
    who = client_options(
        sub.add_parser(
            "whoami", help="the token's member (handle, id, role) and workspace; 'me' names it"
        )
    )
    who.set_defaults(func=cmd_whoami)
    ls = client_options(
        sub.add_parser(
            "list", help="the memories you may see, newest first, by author, kind, episode, time"
        )
    )
    ls.add_argument("--author", help="only memories written by this member (id, or 'me')")
    ls.add_argument("--kind", dest="kinds", action="append", choices=KINDS)
    ls.add_argument("--episode", help="only memories of this episode (id)")
    _span_and_pages(ls, MAX_LIST_PAGE)
    ls.add_argument("--include-superseded", action="store_true")
    common.purpose_option(ls)
    ls.set_defaults(func=cmd_list)
    common.renamed_fields(ls, created_by="--author", episode_id="--episode")
    au = client_options(
        sub.add_parser(
            "audit",
            help="the workspace's audit log, newest first: who did what, when, on which id "
            "(owners)",
        )
    )
    au.add_argument(
        "--member", help="only what this member did (id, or handle: a removed member's too)"
    )
    au.add_argument(
        "--action", dest="actions", action="append", help="only this action (repeatable)"
    )
    _span_and_pages(au, MAX_AUDIT_PAGE)
    common.purpose_option(au)
    au.set_defaults(func=cmd_audit)
    common.renamed_fields(au, member_id="--member")


def _span_and_pages(p: argparse.ArgumentParser, most: int) -> None:
    p.add_argument("--from", dest="start", metavar="TIME", help="from this time (RFC 3339)")
    p.add_argument("--to", dest="end", metavar="TIME", help="before this time (RFC 3339)")
    p.add_argument("--page-size", type=int, default=0, help=f"1..{most}; default 50")
    p.add_argument("--page-token", default="", help="the next_page_token of a page before")
    p.add_argument("--all", action="store_true", help="every page, not only the first")


def _pages(
    args: argparse.Namespace, ask: Callable[..., Any], filters: dict[str, Any]
) -> Iterator[Any]:
    token = args.page_token
    while True:
        # A malformed time is a ValueError naming its field, before anything
        # is sent: the CLI's main() names its flag too.
        page = ask(purpose=args.purpose, page_size=args.page_size, page_token=token, **filters)
        yield page
        token = page.next_page_token
        if not (args.all and token):
            return


def _emit(
    args: argparse.Namespace, pages: Iterator[Any], line: Callable[[Any], str], key: str
) -> None:
    if args.json:
        items: list[Message] = []
        last = ""
        for page in pages:
            items.extend(getattr(page, key))
            last = page.next_page_token
        out = {
            key: [common.as_json(m) for m in items],
            "next_page_token": last,
        }
        print(json.dumps(out, indent=2))
        return
    shown = 0
    last = ""
    for page in pages:
        for item in getattr(page, key):
            print(printable(line(item), newlines=False))
            shown += 1
        last = page.next_page_token
    if not shown:
        print(f"no {key.replace('_', ' ')}")
    if last:
        print(f"more: --page-token {last}")


def _filters(args: argparse.Namespace, **more: Any) -> dict[str, Any]:
    return {"from": args.start, "to": args.end, **more}


def cmd_list(args: argparse.Namespace) -> int:
    client: Client = common.client(args)
    filters = _filters(
        args,
        created_by=common.own_member_or(client, args.author),
        kinds=args.kinds or [],
        episode_id=args.episode,
        include_superseded=args.include_superseded,
    )

    def line(m: Any) -> str:
        return (
            f"{m.id}  {stamp(m.created_at.ToDatetime())}  {KIND.name(m.kind)}  by {m.created_by}  "
            f"{m.title}"
        )

    _emit(args, _pages(args, client.list_memories, filters), line, "memories")
    return 0


def cmd_audit(args: argparse.Namespace) -> int:
    client: Client = common.client(args)
    member = args.member and member_id_of(
        client, args.member, None, "member_id", "--member", removed=True
    )
    filters = _filters(args, member_id=member, actions=args.actions or [])

    def line(e: Any) -> str:
        detail = json.loads(e.detail_json or "{}")
        return (
            f"{stamp(e.at.ToDatetime())}  {e.member_handle or '?'} ({e.member_id})  {e.action}"
            + (f"  {e.memory_id}" if e.memory_id else "")
            + (f"  {json.dumps(detail, sort_keys=True)}" if detail else "")
        )

    _emit(args, _pages(args, client.audit_events, filters), line, "events")
    return 0
