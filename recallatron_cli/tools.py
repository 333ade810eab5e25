"""The seven tools from a shell: `remember`, `read`, `recall`, `correct`,
`supersede`, `derive` and `forget`, each one call to the gateway with the
caller's token, its answer shown as text or, with --json, as the message."""

from __future__ import annotations

import argparse

from recallatron.client import Client
from recallatron.vocabulary import KIND
from recallatron_cli import common, graph
from recallatron_cli.common import memory_text, show

# RememberRequest's fields the remember command's own options give; any
# other plain field is a --flag made from the descriptor (common.field_options).
REMEMBER_OPTIONS = frozenset(
    {"request_id", "kind", "title", "body", "confidence", "episode_id", "occurred_at"}
)


class NewMemory(common.Audience, graph.GraphItems):
    """The client's keyword arguments the options of main.py's
    new_memory_args give (remember and derive), with the purpose acted for."""

    title: str
    body: str
    kind: str
    confidence: float | None
    purpose: str


def new_memory(args: argparse.Namespace, client: Client) -> NewMemory:
    return {
        "title": args.title,
        "body": args.body,
        "kind": args.kind,
        **common.audience(args, client),
        "confidence": args.confidence,
        "purpose": common.call_purpose(args),
        **graph.graph_items(args),
    }


class Revised(graph.GraphItems):
    """The client's keyword arguments correct and supersede take from the
    same options (--replace-claims, --purpose and the graph's)."""

    replace_claims: bool
    purpose: str


def revised(args: argparse.Namespace) -> Revised:
    return {
        "replace_claims": args.replace_claims,
        "purpose": args.purpose,
        **graph.graph_items(args),
    }


def cmd_remember(args: argparse.Namespace) -> int:
    client = common.client(args)
    resp = client.remember(
        **new_memory(args, client),
        mention_names=args.mention or (),
        about=args.about or (),
        request_id=args.request_id,
        episode_id=args.episode,
        **common.field_values(args),
    )
    show(args, resp, ("(replayed) " if resp.replayed else "") + memory_text(resp.memory))
    return 0


def cmd_read(args: argparse.Namespace) -> int:
    resp = common.client(args).read(args.ids, purpose=args.purpose)
    show(args, resp, "\n\n".join(memory_text(m) for m in resp.memories))
    return 0


def cmd_recall(args: argparse.Namespace) -> int:
    resp = common.client(args).recall(
        args.query,
        mode=args.mode,
        limit=args.limit,
        purpose=args.purpose,
        skip_rerank=args.no_rerank,
        include_history=args.history,
    )
    o = resp.outcome
    head = (
        f"nothing_relevant={o.nothing_relevant} dense_available={o.dense_available} "
        f"reranked={o.reranked} counts: lexical {o.counts.lexical}, dense {o.counts.dense}, "
        f"fused {o.counts.fused}, admitted {o.counts.admitted}"
    )
    if o.nothing_relevant and o.results:
        head += "\n(nothing here was judged relevant: these are only the nearest rows)"
    if not o.dense_available and o.dense_unavailable_reason:
        head += f"\n(dense arm: {o.dense_unavailable_reason})"
    if o.dense_behind_reason:
        head += f"\n(dense arm behind: {o.dense_behind_reason})"
    items = [f"entity {graph.card_text(c)}" for c in o.entities]
    items += [f"{i + 1}. {memory_text(r.memory)}" for i, r in enumerate(o.results)]
    items += [
        f"history {h.occurred_at.ToDatetime():%Y-%m-%d %H:%M} UTC [{h.chat_id} {h.role}] {h.text}"
        for h in o.history
    ]
    show(args, resp, "\n".join([head, *items]))
    return 0


def cmd_correct(args: argparse.Namespace) -> int:
    resp = common.client(args).correct(
        args.id,
        args.revision,
        args.reason,
        title=args.title,
        body=args.body,
        confidence=args.confidence,
        **revised(args),
    )
    show(args, resp, memory_text(resp.memory))
    return 0


def cmd_supersede(args: argparse.Namespace) -> int:
    client = common.client(args)
    # The successor keeps the old memory's kind unless told (a decision
    # superseded stays a decision), as it keeps its audience and purposes.
    kind = args.kind or KIND.name(client.read([args.id], purpose=args.purpose).memories[0].kind)
    resp = client.supersede(
        args.id,
        args.revision,
        args.title,
        args.body,
        kind,
        args.reason,
        sources=args.sources or (),
        **revised(args),
        audience_to=common.own_member_or(client, args.audience),
    )
    show(args, resp, memory_text(resp.memory))
    return 0


def cmd_derive(args: argparse.Namespace) -> int:
    client = common.client(args)
    resp = client.derive(args.sources, **new_memory(args, client))
    show(args, resp, memory_text(resp.memory))
    return 0


def cmd_forget(args: argparse.Namespace) -> int:
    resp = common.client(args).forget(
        args.id, args.reason, purpose=args.purpose, expected_revision=args.revision
    )
    show(args, resp, f"forgotten {resp.id}")
    return 0
