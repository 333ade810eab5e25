"""What every command of the `recallatron` CLI shares: where the local state
lives, the client a command talks through, the gateway options, and how a
memory or an answer is printed. Imported by every command module (which
never import each other's internals). A command's refusal of its own input,
``Refused``, is the shared package's (recallatron/refusal.py), so that the dev
kit's commands behind this one raise it too."""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sys
import threading
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypedDict, cast

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.json_format import MessageToDict
from google.protobuf.message import Message

from recallatron.client import Client
from recallatron.client_connection import local_gateway as local_gateway
from recallatron.refusal import EXIT_REFUSED as EXIT_REFUSED
from recallatron.refusal import EXIT_USAGE
from recallatron.refusal import Refused as Refused
from recallatron.secretfiles import TOKEN_HELP, token_from
from recallatron.settings import state_dir as state_dir
from recallatron.vocabulary import (
    DEFAULT_PURPOSE,
    KIND,
    LINK_KIND,
    ORIGIN,
    PURPOSE,
    PURPOSES,
    REVISION_ACTION,
)

# The signal that stopped the command (SIGINT unless SIGTERM came): its exit
# status is 128 + its number, as a shell reports a command a signal ended.
_stopped_by: list[int] = [signal.SIGINT]


@contextmanager
def sigterm_as_ctrl_c() -> Iterator[None]:
    """While inside, SIGTERM stops the command as Ctrl-C does (a
    KeyboardInterrupt, so that its undo runs), remembered for the exit
    status; the previous handler is back on leaving (main() may run inside
    another program). Only the main thread can set a handler."""
    _stopped_by[0] = signal.SIGINT
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, _frame: object) -> None:
        stopped_by(signum)
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def stopped_by(signum: int) -> None:
    """The signal stopping the command, for its exit status (a command
    handling its signals itself, `up`, says which)."""
    _stopped_by[0] = signum


def stopped(message: str) -> int:
    """A command stopped by a signal: one line on stderr, never a traceback;
    returns its exit status. What was printed before comes out first (a
    command may end without the interpreter's own flush, migrate-db)."""
    sys.stdout.flush()
    print(f"error: {message}", file=sys.stderr, flush=True)
    return 128 + _stopped_by[0]


def invalid(field: str, flag: str, why: str, code: int = EXIT_USAGE) -> Refused:
    """Bad input named as the gateway would name it: the request's field (and
    the flag); refused here (``code`` a usage error's), or by the gateway
    (EXIT_REFUSED, as any call it refuses)."""
    return Refused(f"INVALID_ARGUMENT: {field} ({flag}): {why}", code)


def renamed_fields(p: argparse.ArgumentParser, **flags: str | tuple[str, ...]) -> None:
    """The request fields a command's flags fill under another name
    (started_at="--start"), for :func:`naming_flags`; a flag named after its
    field (--as-of for as_of) needs none. A field several flags fill names
    each of them given (claims: --claim, --graph)."""
    known = dict(p.get_default("flags_of_fields") or {})
    known.update({k: (v,) if isinstance(v, str) else v for k, v in flags.items()})
    p.set_defaults(flags_of_fields=known)


# A refusal naming a request's field: `claims[0].valid_from: why`.
_FIELD_PATH = re.compile(r"[A-Za-z_]\w*(\[\d+\])?(\.[A-Za-z_]\w*(\[\d+\])?)*")


def _command_actions(parser: argparse.ArgumentParser, args: argparse.Namespace) -> list[Any]:
    """The arguments of the command ``args`` was parsed for, its parents' too."""
    actions: list[Any] = []
    current: argparse.ArgumentParser | None = parser
    while current is not None:
        # argparse keeps a parser's actions in _actions: no public accessor.
        subs = [a for a in current._actions if isinstance(a, argparse._SubParsersAction)]
        actions.extend(a for a in current._actions if a not in subs)
        current = subs[0].choices.get(str(getattr(args, subs[0].dest, ""))) if subs else None
    return actions


def _flag(action: argparse.Action) -> str:
    """How the user wrote the argument: its long option, or its name."""
    options = action.option_strings
    return next((o for o in options if o.startswith("--")), options[0] if options else action.dest)


def naming_flags(parser: argparse.ArgumentParser, args: argparse.Namespace, exc: ValueError) -> str:
    """A refusal of a request's field (`from: why`) naming the flag the value
    came from as well (`from (--from): why`), as :func:`invalid` does; from
    the innermost name of the field's path outwards (a pair of names before
    each alone: entity.type is --entity-type), the first with a flag given.
    Text that is not UTF-8 (bytes passed as given) refused naming no field is
    named by the argument holding it. Anything else is left as it is."""
    message = str(exc)
    actions = _command_actions(parser, args)

    def given(action: argparse.Action) -> bool:
        return getattr(args, action.dest, None) not in (None, "", [])

    path, sep, why = message.partition(": ")
    if sep and _FIELD_PATH.fullmatch(path):
        renamed: dict[str, tuple[str, ...]] = getattr(args, "flags_of_fields", None) or {}
        names = re.findall(r"[A-Za-z_]\w*", path)
        candidates: list[str] = []
        for i in reversed(range(len(names))):
            candidates.extend([f"{names[i - 1]}_{names[i]}"] if i else [])
            candidates.append(names[i])
        for name in candidates:
            wanted = {*renamed.get(name, ()), "--" + name.replace("_", "-")}
            flags = [
                _flag(a)
                for a in actions
                if a.option_strings
                and (a.dest in (name, FIELD_DEST + name) or wanted & set(a.option_strings))
                and given(a)
            ]
            if flags:
                return f"{path} ({', '.join(dict.fromkeys(flags))}): {why}"
        return message
    if isinstance(exc, UnicodeEncodeError):
        # Found by the characters refused: what was encoded may be more than
        # the argument.
        bad = exc.object[exc.start : exc.end]
        for a in actions:
            value = getattr(args, a.dest, None)
            for v in value if isinstance(value, list) else [value]:
                if isinstance(v, str) and bad in v:
                    return f"{_flag(a)}: not UTF-8 text: {v!r:.60}"
    return message


def admin_token() -> str:
    token = token_from(env="RECALLATRON_ADMIN_TOKEN")
    path = state_dir() / "admin-token"
    if not token and path.exists():
        token = path.read_text().strip()
    return token


TOKEN_FILE_HELP = "a file holding the token (mode 0600)"
# Said beside --gateway: which gateway a command calls when not told.
GATEWAY_HELP = (
    "host:port of the gateway to call (default: RECALLATRON_GATEWAY, else the local "
    "stack's in RECALLATRON_STATE_DIR, else 127.0.0.1:7400)"
)
JSON_HELP = "print the answer as JSON"


def add_token_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--token", default="", help=f"the token itself: {TOKEN_HELP}")
    p.add_argument("--token-file", default="", help=TOKEN_FILE_HELP)


# The options of every command that calls the gateway: (flag, dest, help).
GATEWAY_OPTIONS = (
    ("--gateway", "gateway", GATEWAY_HELP),
    ("--token", "token", f"the token itself: {TOKEN_HELP}"),
    ("--token-file", "token_file", TOKEN_FILE_HELP),
    ("--json", "json", JSON_HELP),
)


def option_kind(dest: str) -> dict[str, Any]:
    """How argparse takes one of GATEWAY_OPTIONS: --json a switch, the others a value."""
    return {"action": "store_true"} if dest == "json" else {}


def group_client_options(p: argparse.ArgumentParser) -> None:
    """--gateway, --token, --token-file and --json after a subcommand of a
    group that takes them (`admin create-member ... --token-file F`, `settings
    set ... --json`): left unset unless given there, so as not to undo the
    same option given before it."""
    for flag, dest, help_ in GATEWAY_OPTIONS:
        p.add_argument(flag, default=argparse.SUPPRESS, help=help_, **option_kind(dest))


def client_options(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """--gateway, --token / --token-file and --json, for a command that calls
    the gateway."""
    p.add_argument("--gateway", default=local_gateway(), help=GATEWAY_HELP)
    add_token_arguments(p)
    p.add_argument("--json", action="store_true", help=JSON_HELP)
    return p


# A request's plain fields that a command takes as --flags made from the
# descriptor (the value's Python type), so a field added to the proto is an
# option with no code of its own.
_FLAG_TYPES: dict[int, type] = {
    FieldDescriptor.TYPE_STRING: str,
    FieldDescriptor.TYPE_INT32: int,
    FieldDescriptor.TYPE_INT64: int,
    FieldDescriptor.TYPE_UINT32: int,
    FieldDescriptor.TYPE_UINT64: int,
    FieldDescriptor.TYPE_DOUBLE: float,
    FieldDescriptor.TYPE_FLOAT: float,
}
FIELD_DEST = "field_"


def _plain_fields(request: type[Message], covered: Collection[str]) -> list[FieldDescriptor]:
    descriptor = cast(Descriptor, request.DESCRIPTOR)
    return [
        f
        for f in descriptor.fields
        if f.name not in covered
        and not f.is_repeated
        and (f.type in _FLAG_TYPES or f.type == FieldDescriptor.TYPE_BOOL)
    ]


def field_options(
    p: argparse.ArgumentParser, request: type[Message], covered: Collection[str]
) -> None:
    """A --flag for each plain (scalar, not repeated) field of ``request`` the
    command's own options do not cover: --some-field for some_field."""
    for f in _plain_fields(request, covered):
        flag = "--" + f.name.replace("_", "-")
        if f.type == FieldDescriptor.TYPE_BOOL:
            p.add_argument(flag, dest=FIELD_DEST + f.name, action="store_true", default=None)
        else:
            p.add_argument(flag, dest=FIELD_DEST + f.name, type=_FLAG_TYPES[f.type])


def field_values(args: argparse.Namespace) -> dict[str, Any]:
    """The fields :func:`field_options` made flags for, as given (unset ones left out)."""
    return {
        key[len(FIELD_DEST) :]: value
        for key, value in vars(args).items()
        if key.startswith(FIELD_DEST) and value is not None
    }


def purpose_option(p: argparse.ArgumentParser, help: str | None = None) -> None:
    """--purpose: the one purpose a call is made for."""
    p.add_argument("--purpose", choices=PURPOSES, default=DEFAULT_PURPOSE, help=help)


def audience_options(p: argparse.ArgumentParser, default: str = "only you") -> None:
    """--audience and --purpose (repeatable): who may see what the command
    stores (``default``: who, when not given), and for which purposes."""
    p.add_argument("--audience", help=f"'workspace', 'me' or a member id; default: {default}")
    p.add_argument("--purpose", dest="purposes", action="append", choices=PURPOSES)


def acting_purpose_option(p: argparse.ArgumentParser) -> None:
    """--as-purpose: --purpose names what the memory (or episode) is for; the
    call itself acts for one."""
    p.add_argument(
        "--as-purpose",
        dest="call_purpose",
        choices=PURPOSES,
        help="the purpose this call is made for (default: the first --purpose, else "
        f"{DEFAULT_PURPOSE}); a token scoped to purposes acts only for them",
    )


def creation_request_id(p: argparse.ArgumentParser, made: str) -> None:
    """--request-id of a command that makes a workspace or a member."""
    p.add_argument(
        "--request-id",
        help=f"your id of this request: a retry with it answers the {made} the first "
        "attempt made (default: a new one, with which the call is sent again if the "
        "gateway is unavailable)",
    )


def call_purpose(args: argparse.Namespace) -> str:
    """The purpose a write acts for: --as-purpose, else the first purpose the
    memory is given, else the default."""
    chosen: str | None = getattr(args, "call_purpose", None)
    return chosen or next(iter(getattr(args, "purposes", None) or ()), DEFAULT_PURPOSE)


class Audience(TypedDict):
    """The client's keyword arguments :func:`audience_options` gives."""

    audience_to: str | None
    purposes: Sequence[str]


# Names the token's own member where an option takes a member id: a member
# who is not an owner may not list members to learn their id.
ME = "me"


def own_member_or(client: Client, given: str | None) -> str | None:
    """``given``, but "me" (any case): the token's own member id (WhoAmI)."""
    if given is not None and given.strip().lower() == ME:
        return str(client.who_am_i().member_id)
    return given


def audience(args: argparse.Namespace, client: Client) -> Audience:
    return {"audience_to": own_member_or(client, args.audience), "purposes": args.purposes or ()}


def client(args: argparse.Namespace, admin: bool = False) -> Client:
    """A client with the token from --token, --token-file, RECALLATRON_TOKEN or
    RECALLATRON_TOKEN_FILE (admin: else the operator token of the local stack)."""
    token_file = getattr(args, "token_file", "") or ""
    try:
        token = token_from(args.token, token_file)
    except (OSError, UnicodeDecodeError) as exc:
        source = "--token-file" if token_file else "RECALLATRON_TOKEN_FILE"
        why = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise Refused(f"{source}: {why or exc}: {token_file or os.environ.get(source)}") from None
    if not token and admin:
        token = admin_token()
    if not token:
        raise Refused(
            "no token: set RECALLATRON_TOKEN or RECALLATRON_TOKEN_FILE, or pass --token-file"
        )
    return Client(args.gateway, token)


# What a terminal would act on rather than show: C0 controls but newline and
# tab, DEL, C1 controls (ESC and CSI start escape sequences), and the
# bidirectional overrides that reorder what is shown.
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str, newlines: bool = True) -> str:
    """``text`` safe to print: memory text is anyone's writing, and a
    terminal escape in it must show as text, never run (``\\x1b``)."""
    text = _CONTROLS.sub(_escape, text)
    return text if newlines else text.replace("\n", "\\n").replace("\t", "\\t")


def as_json(message: Any) -> Any:
    """An answer as --json prints it: every field, false, zero and empty ones
    too (a script reading ``reranked`` or ``pairs`` finds them in the
    degraded or empty case it looks for)."""
    return MessageToDict(
        message, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )


def show(args: argparse.Namespace, message: Any, text: str) -> None:
    """The answer as JSON with --json (control characters escaped by the
    encoder), else as text with control characters escaped."""
    if args.json:
        print(json.dumps(as_json(message), indent=2))
    else:
        print(printable(text))


def memory_text(m: Any) -> str:
    """A memory as text; every field from the memory is made printable (a
    title or name keeps to its line)."""

    def one(value: str) -> str:
        return printable(value, newlines=False)

    audience = "workspace" if m.audience.workspace else f"member {one(m.audience.member_id)}"
    lines = [
        f"{one(m.id)}  [{KIND.name(m.kind)}] {one(m.title)}",
        f"  revision {m.revision} · {ORIGIN.name(m.origin)}"
        f" · confidence {m.confidence:.2f} · {m.created_at.ToDatetime():%Y-%m-%d %H:%M} UTC",
        f"  audience {audience} · purposes " + ", ".join(PURPOSE.name(p) for p in m.purposes),
    ]
    if m.body:
        lines.append("  " + printable(m.body).replace("\n", "\n  "))
    for link in m.links:
        kind = LINK_KIND.name(link.kind)
        target = one(link.target.title) if link.target.visible else "(not visible to you)"
        lines.append(f"  {kind} -> {one(link.target.id)} {target}")
    if m.superseded_by_id:
        lines.append(f"  superseded by {one(m.superseded_by_id)}")
    for mention in m.mentions:
        lines.append(f"  mentions {one(mention.name)} ({one(mention.entity_id)})")
    for c in m.claims:
        retired = " (retired)" if c.retired_at.seconds else ""
        lines.append(f"  states {one(c.entity.name)}: {one(c.attribute)} = {one(c.value)}{retired}")
    for r in m.relations:
        retired = " (retired)" if r.retired_at.seconds else ""
        lines.append(
            f"  states {one(r.subject.name)} {one(r.predicate)} {one(r.object.name)}{retired}"
        )
    for a in m.aliases:
        lines.append(f"  states {one(a.entity.name)} is also {one(a.alias)}")
    for r in m.revisions:
        action = REVISION_ACTION.name(r.action)
        lines.append(
            f"  revision {r.revision} {action} by {one(r.changed_by)}"
            f" at {r.changed_at.ToDatetime():%Y-%m-%d %H:%M} UTC"
            + (f": {one(r.reason)}" if r.reason else "")
        )
    return "\n".join(lines)
