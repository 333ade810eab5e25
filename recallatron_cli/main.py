"""The `recallatron` command: the local stack, operator commands, and the
tools from a shell."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import uuid
from pathlib import Path
from typing import Any

import grpc

from recallatron.client import Client
from recallatron.progress import Progress
from recallatron.secretfiles import write_private
from recallatron.vocabulary import KINDS, MODES, PURPOSES
from recallatron_cli import common, graph
from recallatron_cli.common import client_options, memory_text, show

# -- the stack ----------------------------------------------------------------


def cmd_up(args: argparse.Namespace) -> int:
    from recallatron_devkit.stack import (
        DEFAULT_PG_PORT,
        DEFAULT_PORTS,
        Stack,
        StackConfig,
        free_port,
    )

    state = common.state_dir()
    # Ports: the defaults, each one movable (RECALLATRON_PG_PORT,
    # RECALLATRON_GATEWAY_PORT, ...; 0 picks a free one).
    ports = {
        name: int(os.environ.get(f"RECALLATRON_{name.upper()}_PORT", port))
        for name, port in DEFAULT_PORTS.items()
    }
    config = StackConfig(
        state_dir=state,
        # Postgres takes no port 0: a free one is chosen here.
        pg_port=int(os.environ.get("RECALLATRON_PG_PORT", DEFAULT_PG_PORT)) or free_port(),
        ports=ports,
        database_url=os.environ.get("RECALLATRON_DATABASE_URL", ""),
        models_dir=Path(os.environ.get("RECALLATRON_MODELS_DIR", state / "models")),
        cross_encoder_dir=os.environ.get("RECALLATRON_CROSS_ENCODER_DIR", ""),
    )
    stack = Stack(config)
    stop = stack.abort  # a signal during start-up abandons it; later, stops serving
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    print(f"starting Postgres and services (state in {state}) ...", flush=True)
    try:
        stack.start()
    except RuntimeError as exc:
        print(f"could not start: {exc}", file=sys.stderr)
        return 1
    try:
        print(f"ready gateway={stack.gateway}", flush=True)
        with contextlib.suppress(OSError):  # the page may be switched off
            print(f"dedup review page: {stack.review_url}", flush=True)
        if args.demo:
            demo(stack.gateway, stack.admin_token, state)
        print("serving; Ctrl-C stops everything", flush=True)
        while not stop.is_set():
            stop.wait(1.0)
            for name, proc in stack.processes.items():
                if proc.poll() is not None:
                    print(f"{name} exited with {proc.returncode}; stopping", file=sys.stderr)
                    stop.set()
    finally:
        print("stopping ...", flush=True)
        stack.stop()
        print("stopped", flush=True)
    return 0


def demo(gateway: str, admin_token: str, state: Path) -> None:
    """Shows the stack working: a workspace, a member, a memory read back. The
    demo member's token is kept in the state directory (0600) and reused; it
    is shown once, when it is made, never again (nor in any log)."""
    creds_path = state / "demo.json"
    token_path = state / "demo-token"
    creds = json.loads(creds_path.read_text()) if creds_path.exists() else None
    if creds is not None:
        if not token_path.exists():
            write_private(token_path, creds["token"])
        client = Client(gateway, creds["token"])
        print(f"workspace {creds['slug']} ({creds['workspace_id']}) reused")
        print(f"its owner token is in {token_path} (mode 0600)")
    else:
        admin = Client(gateway, admin_token)
        slug = f"demo-{uuid.uuid4().hex[:8]}"
        ws = admin.create_workspace(slug).workspace
        member = admin.create_member(ws.id, "ada", owner=True).member
        token = admin.create_token(member.id, "demo").token
        creds = {"slug": slug, "workspace_id": ws.id, "member_id": member.id, "token": token}
        write_private(creds_path, json.dumps(creds))
        write_private(token_path, token)
        print(f"workspace {slug} ({ws.id}) created; member ada ({member.id}), owner")
        print(f"owner token, shown this once (kept in {token_path}, mode 0600):\n  {token}")
        client = Client(gateway, token)
    made = client.remember(
        "The team standup moved to 9:30",
        "From next Monday the daily standup starts at 9:30 instead of 9:00.",
        kind="decision",
        audience_to="workspace",
        mention_names=["standup"],
        claims=[
            {
                "entity": {"name": "standup", "type": "meeting"},
                "attribute": "starts_at",
                "value": "09:30",
            }
        ],
    ).memory
    print(f"remembered {made.id}")
    read = client.read([made.id]).memories[0]
    print("read back:\n" + memory_text(read))
    card = client.lookup("Standup").entities[-1]
    print("the graph knows, stated by that memory:\n" + graph.card_text(card))
    print(f"try: RECALLATRON_TOKEN_FILE={token_path} recallatron read {made.id}")
    print(f"     RECALLATRON_TOKEN_FILE={token_path} recallatron lookup standup")


def cmd_migrate_db(args: argparse.Namespace) -> int:
    """Every workspace database recorded below the current migration level
    (``--all``: every one) and each server's template brought to it,
    ``--parallel`` at once. Each database migrates in its own transactions
    under its own lock and records its level when done, so an interrupted run
    is resumed by running it again: what is done is skipped."""
    from concurrent.futures import ThreadPoolExecutor, as_completed

    from services.store.domain.control import ControlPlane
    from services.store.infrastructure.db import Databases
    from services.store.infrastructure.migrate import latest_version
    from services.store.settings import StoreSettings

    parallel = max(1, args.parallel)
    dbs = Databases(StoreSettings(), admin_connections=parallel)
    dbs.bootstrap()
    control = ControlPlane(dbs)
    everything = control.all_workspace_locations()
    workspaces = everything if args.all else control.below_current()
    failed = 0
    try:
        for server in {ws.server for ws in everything} | {dbs.default_server}:
            dbs.refresh_template(server)
        with (
            Progress("migrating", len(workspaces), "workspaces") as bar,
            ThreadPoolExecutor(parallel, thread_name_prefix="migrate") as pool,
        ):
            futures = {pool.submit(control.migrate, ws): ws for ws in workspaces}
            for future in as_completed(futures):
                ws = futures[future]
                try:
                    applied = future.result()
                except Exception as exc:  # reported, the others go on
                    failed += 1
                    bar.echo(f"{ws.slug}: failed: {dbs.redact(str(exc))}")
                else:
                    if applied or args.verbose:
                        bar.echo(f"{ws.slug}: {', '.join(applied) if applied else 'up to date'}")
                bar.advance()
    finally:
        dbs.close()
    if failed:
        print(f"migrations done, {failed} workspaces failed: run again to retry them")
        return 1
    print(
        f"migrations done: {len(workspaces)} workspaces brought to "
        f"{latest_version('workspace')}, {len(everything) - len(workspaces)} already there"
    )
    return 0


def _job(settings: Any = None) -> Any:
    from services.embedding_job.__main__ import build

    return build(settings)


def cmd_embed_job(args: argparse.Namespace) -> int:
    from services.embedding_job.__main__ import main

    return main()


def cmd_rebuild(args: argparse.Namespace) -> int:
    job = _job()
    workspaces = job.control.all_workspaces()
    if args.workspace:
        workspaces = [w for w in workspaces if job.control.workspace(w).slug == args.workspace]
        if not workspaces:
            sys.exit(f"no workspace {args.workspace!r}")
    for workspace_id in workspaces:
        slug = job.control.workspace(workspace_id).slug
        queued = job.enqueue_rebuild(workspace_id, force=args.force)
        # Marked too: should this command stop, the running job carries on.
        job.control.mark_work(workspace_id)
        print(f"{slug}: {queued} memories queued", flush=True)
        with Progress(f"{slug}: embedding", queued, "memories") as bar:
            # The backlog left; writes meanwhile may keep it above the queued count.
            done = job.drain(workspace_id, lambda left, b=bar, q=queued: b.update(max(0, q - left)))
        dropped = job.drop_stale(workspace_id)
        print(f"{slug}: {done} embedded, {dropped} stale vectors removed", flush=True)
    job.dbs.close()
    return 0


def cmd_scrub(args: argparse.Namespace) -> int:
    from services.store.domain.control import ControlPlane
    from services.store.domain.erasure import scrub
    from services.store.infrastructure.db import Databases
    from services.store.settings import StoreSettings

    dbs = Databases(StoreSettings())
    dbs.bootstrap()
    control = ControlPlane(dbs)
    try:
        found = [
            w for w in control.all_workspaces() if args.workspace in (w, control.workspace(w).slug)
        ]
        if not found:
            sys.exit(f"no workspace {args.workspace!r}")
        report = scrub(dbs, control, found[0], lambda msg: print(msg, flush=True))
    finally:
        dbs.close()
    for warning in report.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    print(
        f"scrubbed {args.workspace}: {len(report.tables)} tables rewritten, "
        f"WAL cycled {report.wal_cycles} times"
    )
    return 0


def cmd_servers(args: argparse.Namespace) -> int:
    """Named Postgres servers: list them, mark one draining or open again.
    Runs with the store's settings (names only are shown; docs/servers.md)."""
    from recallatron import errors
    from services.store.domain.control import ControlPlane
    from services.store.infrastructure.db import Databases
    from services.store.settings import StoreSettings

    dbs = Databases(StoreSettings())
    dbs.bootstrap()
    control = ControlPlane(dbs)
    try:
        if args.servers_cmd in ("drain", "undrain"):
            control.set_draining(args.name, args.servers_cmd == "drain")
        for s in control.servers():
            marks = [m for m, on in (("default", s.default), ("draining", s.draining)) if on]
            print(
                f"{s.name}\t{s.workspaces} workspaces" + (f"\t{', '.join(marks)}" if marks else "")
            )
    except errors.DomainError as exc:
        sys.exit(f"error: {exc.message}")
    finally:
        dbs.close()
    return 0


def cmd_move_workspace(args: argparse.Namespace) -> int:
    """Moves a live workspace to another named server (docs/servers.md,
    Moving); a rerun after an interruption finishes or rolls back."""
    from recallatron import errors
    from services.store.domain.control import ControlPlane
    from services.store.domain.moving import Mover
    from services.store.infrastructure.db import Databases
    from services.store.settings import StoreSettings

    dbs = Databases(StoreSettings())
    dbs.bootstrap()
    control = ControlPlane(dbs)
    # SIGTERM ends the move like Ctrl-C: a move not yet sealed rolls back at
    # once (one past the seal is finished by a rerun).
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        found = [
            w for w in control.all_workspaces() if args.workspace in (w, control.workspace(w).slug)
        ]
        if not found:
            sys.exit(f"no workspace {args.workspace!r}")
        mover = Mover(dbs, control, lambda msg: print(msg, flush=True))
        report = mover.move(found[0], args.to, keep_source=args.keep_source)
    except errors.DomainError as exc:
        sys.exit(f"error: {exc.message}")
    finally:
        dbs.close()
    print(
        f"moved {report.workspace} from {report.source} to {report.target} in "
        f"{report.total_seconds:.1f} s (copy {report.copied_seconds:.1f} s, writes held "
        f"{report.fence_seconds * 1000:.0f} ms)"
        + (f"; resumed from {report.resumed_from}" if report.resumed_from else ""),
        flush=True,
    )
    return 0


def cmd_prepare_models(args: argparse.Namespace) -> int:
    from services.embed import prepare

    return int(prepare.main(args.rest))


# -- admin ----------------------------------------------------------------------


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


# -- tools -------------------------------------------------------------------------


def cmd_remember(args: argparse.Namespace) -> int:
    resp = common.client(args).remember(
        args.title,
        args.body,
        args.kind,
        audience_to=args.audience,
        purposes=args.purposes or (),
        mention_names=args.mention or (),
        about=args.about or (),
        confidence=args.confidence,
        request_id=args.request_id,
        episode_id=args.episode,
        **graph.graph_items(args),
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
        f"dense_available={o.dense_available} reranked={o.reranked} counts: lexical "
        f"{o.counts.lexical}, dense {o.counts.dense}, fused {o.counts.fused}, admitted "
        f"{o.counts.admitted}"
    )
    if not o.dense_available:
        head += f"\n(dense arm: {o.dense_unavailable_reason})"
    items = [f"entity {graph.card_text(c)}" for c in o.entities]
    items += [f"{i + 1}. {memory_text(r.memory)}" for i, r in enumerate(o.results)]
    items += [
        f"history {h.occurred_at.ToDatetime():%Y-%m-%d %H:%M} [{h.chat_id} {h.role}] {h.text}"
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
        replace_claims=args.replace_claims,
        **graph.graph_items(args),
    )
    show(args, resp, memory_text(resp.memory))
    return 0


def cmd_supersede(args: argparse.Namespace) -> int:
    resp = common.client(args).supersede(
        args.id,
        args.revision,
        args.title,
        args.body,
        args.kind,
        args.reason,
        replace_claims=args.replace_claims,
        **graph.graph_items(args),
    )
    show(args, resp, memory_text(resp.memory))
    return 0


def cmd_derive(args: argparse.Namespace) -> int:
    resp = common.client(args).derive(
        args.sources,
        args.title,
        args.body,
        args.kind,
        audience_to=args.audience,
        purposes=args.purposes or (),
        **graph.graph_items(args),
    )
    show(args, resp, memory_text(resp.memory))
    return 0


def cmd_forget(args: argparse.Namespace) -> int:
    resp = common.client(args).forget(args.id, args.reason)
    show(args, resp, f"forgotten {resp.id}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="recallatron", description=__doc__)
    sub = parser.add_subparsers(dest="cmd", required=True)

    up = sub.add_parser("up", help="start Postgres and every service locally")
    up.add_argument("--demo", action="store_true", help="show it working once ready")
    up.set_defaults(func=cmd_up)
    migrate_db = sub.add_parser("migrate-db", help="bootstrap and migrate every database")
    migrate_db.add_argument(
        "--parallel", type=int, default=4, help="databases migrated at once (default 4)"
    )
    migrate_db.add_argument(
        "--verbose", action="store_true", help="name every workspace, not only those changed"
    )
    migrate_db.add_argument(
        "--all", action="store_true", help="visit every workspace, not only those recorded behind"
    )
    migrate_db.set_defaults(func=cmd_migrate_db)
    sub.add_parser("embed-job", help="run the embedding job").set_defaults(func=cmd_embed_job)
    rb = sub.add_parser("rebuild", help="re-embed a workspace (or all)")
    rb.add_argument("--workspace", help="slug; default all")
    rb.add_argument("--force", action="store_true", help="re-embed even current vectors")
    rb.set_defaults(func=cmd_rebuild)
    sc = sub.add_parser(
        "scrub",
        help="rewrite a workspace's tables and cycle the WAL so that no file of the data "
        "directory keeps forgotten text (docs/reliability.md)",
    )
    sc.add_argument("--workspace", required=True, help="slug or id")
    sc.set_defaults(func=cmd_scrub)
    sv = sub.add_parser(
        "servers", help="the named Postgres servers: list, drain, undrain (docs/servers.md)"
    )
    sv_sub = sv.add_subparsers(dest="servers_cmd", required=True)
    sv_sub.add_parser("list", help="each server, its workspace count and marks")
    sv_sub.add_parser("drain", help="new workspaces are no longer placed on it").add_argument(
        "name"
    )
    sv_sub.add_parser("undrain", help="open it for new workspaces again").add_argument("name")
    sv.set_defaults(func=cmd_servers)
    mv = sub.add_parser(
        "move-workspace",
        help="move a live workspace to another named server (docs/servers.md, Moving)",
    )
    mv.add_argument("workspace", help="slug or id")
    mv.add_argument("--to", required=True, help="the target server's name")
    mv.add_argument(
        "--keep-source",
        action="store_true",
        help="keep the old database (renamed, closed to connections) instead of dropping it",
    )
    mv.set_defaults(func=cmd_move_workspace)
    pm = sub.add_parser("prepare-models", help="export the models to ONNX (cached)")
    pm.add_argument("rest", nargs=argparse.REMAINDER)
    pm.set_defaults(func=cmd_prepare_models)

    admin = client_options(sub.add_parser("admin", help="operator and owner calls"))
    admin_sub = admin.add_subparsers(dest="admin_cmd", required=True)
    cw = admin_sub.add_parser("create-workspace")
    cw.add_argument("slug")
    cw.add_argument(
        "--server",
        help="the configured Postgres server's name; default: the placement policy "
        "(fewest workspaces among servers not draining; docs/servers.md)",
    )
    cm = admin_sub.add_parser("create-member")
    cm.add_argument("--workspace", required=True)
    cm.add_argument("handle")
    cm.add_argument("--owner", action="store_true")
    ct = admin_sub.add_parser("create-token")
    ct.add_argument("member")
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
        help="limit the token to the read-only calls (recall, read, review listing)",
    )
    admin_sub.add_parser("revoke-token").add_argument("token_id")
    admin.set_defaults(func=cmd_admin)

    def new_memory_args(p: argparse.ArgumentParser) -> None:
        p.add_argument("title")
        p.add_argument("body", nargs="?", default="")
        p.add_argument("--kind", default="note", choices=KINDS)
        p.add_argument("--audience", help="'workspace' or a member id; default: only you")
        p.add_argument("--purpose", dest="purposes", action="append", choices=PURPOSES)
        p.add_argument("--confidence", type=float)
        graph.graph_arguments(p)

    r = client_options(sub.add_parser("remember"))
    new_memory_args(r)
    r.add_argument("--mention", action="append")
    r.add_argument("--about", action="append")
    r.add_argument("--request-id")
    r.add_argument("--episode", default="", help="the episode it belongs to")
    r.set_defaults(func=cmd_remember)

    rd = client_options(sub.add_parser("read"))
    rd.add_argument("ids", nargs="+")
    common.purpose_option(rd)
    rd.set_defaults(func=cmd_read)

    rc = client_options(sub.add_parser("recall"))
    rc.add_argument("query")
    rc.add_argument("--mode", choices=MODES)
    rc.add_argument("--limit", type=int, default=10)
    common.purpose_option(rc)
    rc.add_argument("--no-rerank", action="store_true")
    rc.add_argument(
        "--history", action="store_true", help="owners: also search migrated conversation history"
    )
    rc.set_defaults(func=cmd_recall)

    c = client_options(sub.add_parser("correct"))
    c.add_argument("id")
    c.add_argument("--revision", type=int, required=True)
    c.add_argument("--reason", required=True)
    c.add_argument("--title")
    c.add_argument("--body")
    c.add_argument("--confidence", type=float)
    graph.graph_arguments(c)
    c.add_argument("--replace-claims", action="store_true", help="drop claims not given")
    c.set_defaults(func=cmd_correct)

    s = client_options(sub.add_parser("supersede"))
    s.add_argument("id")
    s.add_argument("--revision", type=int, required=True)
    s.add_argument("--reason", default="")
    s.add_argument("title")
    s.add_argument("body", nargs="?", default="")
    s.add_argument("--kind", default="note", choices=KINDS)
    graph.graph_arguments(s)
    s.add_argument(
        "--replace-claims", action="store_true", help="do not carry the old memory's claims"
    )
    s.set_defaults(func=cmd_supersede)

    d = client_options(sub.add_parser("derive"))
    d.add_argument("--source", dest="sources", action="append", required=True)
    new_memory_args(d)
    d.set_defaults(func=cmd_derive, kind="summary")

    f = client_options(sub.add_parser("forget"))
    f.add_argument("id")
    f.add_argument("--reason", required=True)
    f.set_defaults(func=cmd_forget)

    graph.add_parser(sub)

    from recallatron_devkit import evaluate, load

    load.add_parser(sub)
    evaluate.add_parser(sub)

    from services.store.legacy import cli as legacy_cli

    legacy_cli.add_parser(sub)

    from recallatron_cli import surfaces

    surfaces.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except grpc.RpcError as exc:
        print(f"error: {exc.code().name}: {exc.details()}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
