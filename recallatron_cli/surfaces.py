"""CLI commands of the agent and operator surfaces: `recallatron mcp` (the MCP
server), `recallatron capture` (one conversation turn), `recallatron pairs`
and `recallatron keep-both` (dedup review from a shell)."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime

from recallatron_cli import common


def cmd_mcp(args: argparse.Namespace) -> int:
    from recallatron_mcp import server

    return server.run(args)


def cmd_capture(args: argparse.Namespace) -> int:
    text = sys.stdin.read() if args.text == "-" else args.text
    occurred = datetime.fromisoformat(args.at) if args.at else None
    if occurred is not None and occurred.tzinfo is None:
        occurred = occurred.replace(tzinfo=UTC)
    resp = common.client(args).capture(
        text, occurred_at=occurred, purpose=args.purpose, request_id=args.request_id or ""
    )
    summary = (
        resp.reason if not resp.stored else f"{resp.reason}\n{common.memory_text(resp.memory)}"
    )
    common.show(args, resp, ("stored: " if resp.stored else "not stored: ") + summary)
    return 0


def cmd_pairs(args: argparse.Namespace) -> int:
    resp = common.client(args).duplicate_pairs(purpose=args.purpose, limit=args.limit)
    blocks = [
        f"cosine {p.cosine:.3f}\nA {common.memory_text(p.first)}\nB {common.memory_text(p.second)}"
        for p in resp.pairs
    ]
    common.show(args, resp, "\n\n".join(blocks) or "no pairs to review")
    return 0


def cmd_keep_both(args: argparse.Namespace) -> int:
    resp = common.client(args).dismiss_pair(args.first, args.second, purpose=args.purpose)
    common.show(args, resp, "kept both; the pair will not be proposed again")
    return 0


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    def with_client(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
        common.purpose_option(common.client_options(p))
        return p

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

    p = with_client(sub.add_parser("pairs", help="near-duplicate pairs to review"))
    p.add_argument("--limit", type=int, default=0)
    p.set_defaults(func=cmd_pairs)

    k = with_client(sub.add_parser("keep-both", help="dismiss a pair: never proposed again"))
    k.add_argument("first")
    k.add_argument("second")
    k.set_defaults(func=cmd_keep_both)
