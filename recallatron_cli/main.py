"""The `recallatron` command: the local stack, operator commands, and the
tools from a shell."""

from __future__ import annotations

import sys

from recallatron_cli.starting import STOPPED_BEFORE_STARTING, stopped_while_starting

# A Ctrl-C while these load (the first fraction of a second) stops the
# command as any other stop does, not in a traceback.
with stopped_while_starting(__name__):
    import argparse
    import contextlib
    import os
    import re
    import threading

    import grpc

    from recallatron import errors
    from recallatron.v1 import gateway_pb2
    from recallatron.vocabulary import DEFAULT_RECALL_LIMIT, KINDS, MODES, RECALL_LIMIT_RULE
    from recallatron_cli import (
        admin,
        common,
        floor,
        graph,
        operator,
        options_before,
        owners,
        tools,
        up,
        workspace_settings,
    )
    from recallatron_cli.common import client_options

    # Kept importable from here, where the command's callers look for it.
    from recallatron_cli.up import demo
    from services.embed import prepare

__all__ = ["build_parser", "demo", "main"]

# Every subcommand of the core is declared here, the shape of the command line
# in one place; what each one does lives in the module named after what it
# acts on (up, operator, admin, tools). The graph, surfaces, dev kit and
# legacy groups declare their own.


def build_parser() -> argparse.ArgumentParser:
    parser = options_before.Parser(prog="recallatron", description=__doc__)
    sub = parser.add_subparsers(dest="cmd", required=True, parser_class=argparse.ArgumentParser)

    stack = sub.add_parser("up", help="start Postgres and every service locally")
    stack.add_argument("--demo", action="store_true", help="show it working once ready")
    stack.set_defaults(func=up.cmd_up)
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
    migrate_db.set_defaults(func=operator.cmd_migrate_db)
    sub.add_parser("embed-job", help="run the embedding job").set_defaults(
        func=operator.cmd_embed_job
    )
    rb = sub.add_parser("rebuild", help="re-embed a workspace (or all)")
    rb.add_argument("--workspace", help="slug or id; default all")
    rb.add_argument("--force", action="store_true", help="re-embed even current vectors")
    rb.set_defaults(func=operator.cmd_rebuild)
    sc = sub.add_parser(
        "scrub",
        help="rewrite a workspace's tables and cycle the WAL so that no file of the data "
        "directory keeps forgotten text (docs/reliability.md)",
    )
    scrubbed = sc.add_mutually_exclusive_group(required=True)
    scrubbed.add_argument("--workspace", help="slug or id")
    scrubbed.add_argument(
        "--server",
        help="a server's name: cycle its WAL only, after a workspace on it was deleted",
    )
    sc.add_argument("--json", action="store_true", help="the report as JSON (progress on stderr)")
    sc.set_defaults(func=operator.cmd_scrub)
    sv = sub.add_parser(
        "servers",
        help="the named Postgres servers: list, drain, undrain, kept copies (docs/servers.md)",
    )
    sv_sub = sv.add_subparsers(dest="servers_cmd", required=True)
    sv_sub.add_parser("list", help="each server, its workspace count and marks")
    sv_sub.add_parser(
        "drain", help="no new workspace is placed on it, and no move switches onto it"
    ).add_argument("name")
    sv_sub.add_parser("undrain", help="open it for new workspaces again").add_argument("name")
    sv_sub.add_parser("kept", help="the copies moves kept (--keep-source), deleted ones' too")
    sv_sub.add_parser(
        "drop-kept",
        help="drop the kept copies of deleted workspaces whose server did not answer then",
    ).add_argument("--workspace", help="slug or id: drop this live workspace's kept copies")
    sv.set_defaults(func=operator.cmd_servers)
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
    mv.set_defaults(func=operator.cmd_move_workspace)
    # The options of `python -m services.embed.prepare`, shown by --help too.
    pm = sub.add_parser(
        "prepare-models",
        help="export the models to ONNX (cached)",
        parents=[prepare.build_parser()],
        add_help=False,
    )
    pm.set_defaults(func=prepare.run)

    ad = client_options(sub.add_parser("admin", help="operator and owner calls"))
    admin_sub = ad.add_subparsers(dest="admin_cmd", required=True)
    cw = admin_sub.add_parser(
        "create-workspace",
        help="a new workspace by slug, on a server; prints its id (operator token)",
    )
    cw.add_argument("slug")
    cw.add_argument(
        "--server",
        help="the configured Postgres server's name; default: the placement policy "
        "(fewest workspaces among servers not draining; docs/servers.md)",
    )
    common.creation_request_id(cw, "workspace")
    common.group_client_options(cw)
    cm = admin_sub.add_parser(
        "create-member",
        help="a member of a workspace by handle, --owner to manage it; prints its id",
    )
    cm.add_argument(
        "--workspace",
        help="its id or slug; the operator names one, an owner's token adds to their own",
    )
    cm.add_argument("handle")
    cm.add_argument("--owner", action="store_true")
    common.creation_request_id(cm, "member")
    common.group_client_options(cm)
    admin.add_token_parsers(admin_sub)
    lm = admin_sub.add_parser(
        "list-members", help="a workspace's members, by handle: id, handle, role, since"
    )
    lm.add_argument(
        "--workspace", help="its id or slug (the operator token needs it; owners: their own)"
    )
    lm.add_argument("--removed", action="store_true", help="also the members who were removed")
    common.group_client_options(lm)
    lw = admin_sub.add_parser(
        "list-workspaces",
        help="every workspace by slug: id, server, members, created (operator token)",
    )
    lw.add_argument("--server", help="only those on this Postgres server (its name)")
    common.group_client_options(lw)
    owners.add_admin_parsers(admin_sub)
    ad.set_defaults(func=admin.cmd_admin)

    def new_memory_args(p: argparse.ArgumentParser, audience: str = "only you") -> None:
        p.add_argument("title")
        p.add_argument("body", nargs="?", default="")
        p.add_argument("--kind", default="note", choices=KINDS)
        common.audience_options(p, audience)
        p.add_argument("--confidence", type=float)
        graph.graph_arguments(p)

    acting_purpose = common.acting_purpose_option

    r = client_options(sub.add_parser("remember", help="store a new memory (origin told)"))
    new_memory_args(r)
    acting_purpose(r)
    r.add_argument("--mention", action="append")
    r.add_argument("--about", action="append")
    r.add_argument("--request-id")
    r.add_argument("--episode", default="", help="the episode it belongs to")
    common.field_options(r, gateway_pb2.RememberRequest, tools.REMEMBER_OPTIONS)
    r.set_defaults(func=tools.cmd_remember)
    common.renamed_fields(r, episode_id="--episode", mentions="--mention", about_ids="--about")

    rd = client_options(sub.add_parser("read", help="memories by id, with their provenance"))
    rd.add_argument("ids", nargs="+")
    common.purpose_option(rd)
    rd.set_defaults(func=tools.cmd_read)

    rc = client_options(
        sub.add_parser("recall", help="the memories you may see that match a query")
    )
    rc.add_argument("query")
    rc.add_argument("--mode", choices=MODES)
    rc.add_argument(
        "--limit",
        type=int,
        default=DEFAULT_RECALL_LIMIT,
        help=f"how many results: {RECALL_LIMIT_RULE}",
    )
    common.purpose_option(rc)
    rc.add_argument("--no-rerank", action="store_true")
    rc.add_argument(
        "--history", action="store_true", help="owners: also search migrated conversation history"
    )
    rc.set_defaults(func=tools.cmd_recall)

    c = client_options(sub.add_parser("correct", help="edit a memory in place, with a reason"))
    c.add_argument("id")
    c.add_argument("--revision", type=int, required=True)
    c.add_argument("--reason", required=True)
    c.add_argument("--title")
    c.add_argument("--body")
    c.add_argument("--confidence", type=float)
    graph.graph_arguments(c)
    c.add_argument("--replace-claims", action="store_true", help="drop claims not given")
    common.purpose_option(c, help="the purpose the call is made for (the memory's own stay)")
    c.set_defaults(func=tools.cmd_correct)
    common.renamed_fields(c, expected_revision="--revision")

    s = client_options(sub.add_parser("supersede", help="replace a memory with a new one"))
    s.add_argument("id")
    s.add_argument("--revision", type=int, required=True)
    s.add_argument("--reason", default="")
    s.add_argument("title")
    s.add_argument("body", nargs="?", default="")
    s.add_argument("--kind", choices=KINDS, help="default: the old memory's kind")
    s.add_argument(
        "--audience",
        help="narrow who may see the new memory: 'workspace', 'me' or a member id; default: the "
        "old memory's audience (never wider)",
    )
    s.add_argument(
        "--source",
        dest="sources",
        action="append",
        help="a memory the new text comes from (repeatable): the new memory is derived from "
        "them, their trust intersected with the old memory's",
    )
    graph.graph_arguments(s)
    s.add_argument(
        "--replace-claims", action="store_true", help="do not carry the old memory's claims"
    )
    common.purpose_option(s, help="the purpose the call is made for")
    s.set_defaults(func=tools.cmd_supersede)
    common.renamed_fields(s, expected_revision="--revision", source_ids="--source")

    d = client_options(
        sub.add_parser("derive", help="a new memory from sources, their trust intersected")
    )
    d.add_argument("--source", dest="sources", action="append", required=True)
    new_memory_args(d, "the intersection of the sources' audiences (narrow it, never widen)")
    acting_purpose(d)
    d.set_defaults(func=tools.cmd_derive, kind="summary")
    common.renamed_fields(d, source_ids="--source")

    f = client_options(sub.add_parser("forget", help="purge a memory's content, a tombstone kept"))
    f.add_argument("id")
    f.add_argument("--reason", required=True)
    f.add_argument(
        "--revision",
        type=int,
        default=0,
        help="the revision you read: a memory changed since is not forgotten (default: not "
        "checked)",
    )
    common.purpose_option(f, help="the purpose the call is made for")
    f.set_defaults(func=tools.cmd_forget)
    common.renamed_fields(f, expected_revision="--revision")

    graph.add_parser(sub)
    floor.add_parser(sub)
    owners.add_parsers(sub)
    workspace_settings.add_parser(sub)

    from recallatron_devkit import evaluate, load

    load.add_parser(sub)
    evaluate.add_parser(sub)

    from services.store.legacy import cli as legacy_cli

    legacy_cli.add_parser(sub, floor.embed_texts)

    from recallatron_cli import surfaces

    surfaces.add_parser(sub)

    from recallatron_cli import archive

    archive.add_parser(sub)
    say_repeatable(parser)
    return parser


def say_repeatable(parser: argparse.ArgumentParser) -> None:
    """Every option taken many times says so in --help, whichever module
    declared it: argparse shows such an option once, as if it took one value."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                say_repeatable(child)
        elif (
            isinstance(action, argparse._AppendAction | argparse._ExtendAction)
            and action.help != argparse.SUPPRESS
            and "repeatable" not in str(action.help or "")
        ):
            action.help = f"{action.help} (repeatable)" if action.help else "repeatable"


# A password in a URL or a conninfo a database error may quote.
_PASSWORDS = (
    (re.compile(r"(password\s*=\s*)('[^']*'|\S+)"), r"\1***"),
    (re.compile(r"(://[^:/@\s]+:)[^@\s]+@"), r"\1***@"),
)


def _database_error(exc: Exception) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    for pattern, replacement in _PASSWORDS:
        text = pattern.sub(replacement, text)
    return text


# A command whose reader stopped reading (`recallatron ... | head`) ends as a
# command killed by SIGPIPE would: quietly, 128 + 13.
EXIT_BROKEN_PIPE = 141


def _failed(message: str, code: int) -> int:
    """A command's failure: one line on stderr, and its exit status."""
    print(f"error: {message}", file=sys.stderr)
    return code


# What a command stopped part way (Ctrl-C, SIGTERM) leaves, and what to do
# then, for those that do not say so themselves (export, import, migrate-db
# and move-workspace know how far they got).
STOPPED = {
    "rebuild": "the memories it queued stay queued for the embedding job, and the "
    "vectors of other models stay until a rebuild ends; run it again to finish",
    "scrub": "forgotten text may still be on disk (the tables rewritten stay so); run it again",
    "up": "nothing of it is left running; run it again",
    "servers": "a change of a server's marks is made whole or not at all, a copy "
    "dropped stays dropped; run it again",
}
# A command calling the gateway may have been answered already.
STOPPED_CALLING = "what it asked the gateway may have been done; look before running it again"
STOPPED_OTHERWISE = "what it finished is kept; run it again"


def _stopped_note(args: argparse.Namespace | None) -> str:
    """The line for a command stopped part way: its name, what it left, what to do."""
    if args is None:
        return STOPPED_BEFORE_STARTING
    if args.cmd in STOPPED:
        note = STOPPED[args.cmd]
    elif hasattr(args, "gateway"):
        note = STOPPED_CALLING
    else:
        note = STOPPED_OTHERWISE
    return f"{args.cmd} stopped: {note}"


def main(argv: list[str] | None = None) -> int:
    """The command line ``argv`` (None: this process's own) run: its exit
    status. Ctrl-C or SIGTERM stops any command with one line (the command's
    own when it has one) and exit 128 + the signal, never a traceback."""
    args: argparse.Namespace | None = None
    with common.sigterm_as_ctrl_c():
        try:
            parser = build_parser()
            args = parser.parse_args(argv)
            return _run(parser, args)
        except KeyboardInterrupt:
            code = common.stopped(_stopped_note(args))
    if argv is None and _still_working():
        # The interpreter's exit would wait for the command's threads (load's
        # workers until its duration is over): the process is the command, so
        # it ends now, its undo having run as the stop unwound.
        os._exit(code)
    return code


def _still_working() -> bool:
    """True while a thread the interpreter's exit waits for is alive."""
    main_thread = threading.main_thread()
    return any(
        t.is_alive() and not t.daemon and t is not main_thread for t in threading.enumerate()
    )


def _run(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    """The command ``args`` names, its failures each one line on stderr."""
    import psycopg

    try:
        if args.cmd in operator.DATABASE_COMMANDS:
            operator.find_database()
        return int(args.func(args))
    except grpc.RpcError as exc:
        return _failed(f"{exc.code().name}: {exc.details()}", common.EXIT_REFUSED)
    except common.Refused as exc:
        # The command's own refusal of its input or settings.
        return _failed(exc.message, exc.code)
    except errors.DomainError as exc:
        # An operator command refused by the store's own rules (a workspace
        # being imported): its message, one line.
        return _failed(exc.message, 1)
    except ValueError as exc:
        # A value the client could not send (a time without its offset, a
        # number out of range), named as the service would name it, and by
        # the flag it came from: the one place a field is matched to its flag.
        return _failed(f"INVALID_ARGUMENT: {common.naming_flags(parser, args, exc)}", 2)
    except psycopg.Error as exc:
        # An operator command's database (unreachable, refusing the role):
        # one line, the server's own words, no password.
        return _failed(f"the database: {_database_error(exc)}", 1)
    except BrokenPipeError:
        # Nothing more can be written: stdout goes nowhere so that the
        # interpreter's own flush at exit does not complain either.
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 (for the rest of the process)
        return EXIT_BROKEN_PIPE
    except OSError as exc:
        # A file the command reads that cannot be read (each file a flag
        # names is refused naming the flag before this).
        return _failed(f"{exc.strerror or exc}: {exc.filename or ''}".rstrip(": "), 2)


if __name__ == "__main__":
    sys.exit(main())
