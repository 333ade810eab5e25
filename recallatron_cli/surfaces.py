"""CLI commands of the agent and operator surfaces: `recallatron mcp` (the MCP
server), `recallatron capture` (one conversation turn), `recallatron pairs`
and `recallatron keep-both` (dedup review from a shell), and the entity
review: `entity-pairs`, `merge`, `keep-apart`, `merges`, `undo-merge` (owners)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from datetime import UTC, datetime

from google.protobuf.message import Message

from recallatron_cli import common
from recallatron_cli.graph import card_text


def cmd_mcp(args: argparse.Namespace) -> int:
    from recallatron_mcp import server

    return server.run(args)


def cmd_capture(args: argparse.Namespace) -> int:
    text = sys.stdin.read() if args.text == "-" else args.text
    try:
        occurred = datetime.fromisoformat(args.at) if args.at else None
    except ValueError:
        raise ValueError(f"--at: {args.at!r} is not an ISO 8601 time") from None
    if occurred is not None and occurred.tzinfo is None:
        occurred = occurred.replace(tzinfo=UTC)
    resp = common.client(args).capture(
        text, occurred_at=occurred, purpose=args.purpose, request_id=args.request_id or ""
    )
    # A stored capture's reason already begins "stored: "; a no-op's is the why alone.
    summary = (
        f"not stored: {resp.reason}"
        if not resp.stored
        else f"{resp.reason}\n{common.memory_text(resp.memory)}"
    )
    common.show(args, resp, summary)
    return 0


def cmd_pairs(args: argparse.Namespace) -> int:
    resp = common.client(args).duplicate_pairs(purpose=args.purpose, limit=args.limit)
    blocks = [
        f"cosine {p.cosine:.3f}\nA {common.memory_text(p.first)}\nB {common.memory_text(p.second)}"
        for p in resp.pairs
    ]
    text = "\n\n".join(blocks) or "no pairs to review"
    if resp.more:
        # Cut by the limit or the answer's size: the list has not ended.
        text += "\n\nmore pairs wait: decide on these (keep-both, supersede, forget) and list again"
    common.show(args, resp, text)
    return 0


def _pair_decided(
    args: argparse.Namespace, decide: Callable[[str, str, str], Message], said: str
) -> int:
    """An owner's decision on a pair a review proposed, sent and confirmed:
    either way the pair is not proposed again."""
    resp = decide(args.first, args.second, args.purpose)
    common.show(args, resp, f"{said}; the pair will not be proposed again")
    return 0


def cmd_keep_both(args: argparse.Namespace) -> int:
    return _pair_decided(args, common.client(args).dismiss_pair, "kept both")


def cmd_entity_pairs(args: argparse.Namespace) -> int:
    resp = common.client(args).entity_pairs(purpose=args.purpose, limit=args.limit)
    blocks = []
    for p in resp.pairs:
        why = ", ".join(p.reasons)
        if p.HasField("context_cosine"):
            why += f" (context cosine {p.context_cosine:.3f})"
        blocks.append(f"{why}\nA {card_text(p.first)}\nB {card_text(p.second)}")
    text = "\n\n".join(blocks) or "no entity pairs to review"
    if resp.more:
        # Cut by the limit or the answer's size: the list has not ended.
        text += "\n\nmore pairs wait: decide on these (merge, keep-apart) and list again"
    common.show(args, resp, text)
    return 0


def cmd_merge(args: argparse.Namespace) -> int:
    resp = common.client(args).merge_entities(args.kept, args.merged, purpose=args.purpose)
    text = (
        f"merged {resp.merge.merged.name} into {resp.merge.kept.name} (merge {resp.merge.id})"
        if resp.created
        else f"already one entity (merge {resp.merge.id}); nothing changed"
    )
    common.show(args, resp, text)
    return 0


def cmd_keep_apart(args: argparse.Namespace) -> int:
    return _pair_decided(args, common.client(args).keep_entities_apart, "kept apart")


def cmd_merges(args: argparse.Namespace) -> int:
    resp = common.client(args).entity_merges(
        purpose=args.purpose,
        limit=args.limit,
        page_size=args.page_size,
        page_token=args.page_token,
    )
    lines = [
        f"{m.id}  {m.merged.name} ({m.merged.id}) -> {m.kept.name} ({m.kept.id})"
        f"  {m.decided_at.ToDatetime():%Y-%m-%d %H:%M} UTC"
        for m in resp.merges
    ]
    if not lines:
        lines.append("no older merges in force" if args.page_token else "no merges in force")
    # Older merges wait past this page: an owner undoing one needs its id.
    if resp.next_page_token:
        lines.append(f"more: --page-token {resp.next_page_token}")
    common.show(args, resp, "\n".join(lines))
    return 0


def cmd_undo_merge(args: argparse.Namespace) -> int:
    resp = common.client(args).undo_entity_merge(args.merge_id, purpose=args.purpose)
    common.show(args, resp, "undone; both entities answer on their own again")
    return 0


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    def with_client(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
        common.purpose_option(common.client_options(p))
        return p

    def review_list(name: str, help: str, func: Callable[[argparse.Namespace], int]) -> None:
        p = with_client(sub.add_parser(name, help=help))
        p.add_argument("--limit", type=int, default=0)
        p.set_defaults(func=func)

    def pair_decision(name: str, help: str, func: Callable[[argparse.Namespace], int]) -> None:
        p = with_client(sub.add_parser(name, help=help))
        p.add_argument("first")
        p.add_argument("second")
        p.set_defaults(func=func)

    from recallatron_mcp import options

    m = sub.add_parser("mcp", help="the MCP server for agents, over stdio or streamable HTTP")
    options.add_arguments(m)
    m.set_defaults(func=cmd_mcp)

    c = with_client(
        sub.add_parser("capture", help="store a memory from one turn, only if it plainly asks")
    )
    c.add_argument("text", help="the turn's text ('-' reads it from stdin)")
    c.add_argument("--at", help="when it was said (ISO 8601; UTC if no zone)")
    c.add_argument("--request-id")
    c.set_defaults(func=cmd_capture)

    review_list("pairs", "near-duplicate pairs to review", cmd_pairs)

    pair_decision("keep-both", "dismiss a pair: never proposed again", cmd_keep_both)

    review_list("entity-pairs", "entity pairs that may be one (owners)", cmd_entity_pairs)
    mg = with_client(sub.add_parser("merge", help="merge two entities, reversibly (owners)"))
    mg.add_argument("kept", help="the entity whose name the two answer with")
    mg.add_argument("merged")
    mg.set_defaults(func=cmd_merge)
    pair_decision("keep-apart", "an entity pair never proposed again", cmd_keep_apart)
    ms = with_client(sub.add_parser("merges", help="entity merges in force, newest first (owners)"))
    ms.add_argument("--limit", type=int, default=0, help="from before paging: as --page-size")
    ms.add_argument("--page-size", type=int, default=0, help="1..200; default 50")
    ms.add_argument("--page-token", default="", help="the next_page_token of a page before")
    ms.set_defaults(func=cmd_merges)
    um = with_client(sub.add_parser("undo-merge", help="undo an entity merge (owners)"))
    um.add_argument("merge_id")
    um.set_defaults(func=cmd_undo_merge)
