"""`recallatron settings` and `recallatron settings set`: the workspace's
settings (docs/api.md, AdminService GetSettings and UpdateSettings), read by
any of its members and changed by its owners, as the gateway allows. `set`
has a flag for each field of WorkspaceSettings (one added to the proto is a
flag with no code of its own) and changes only those given (update_fields);
a value refused, here or by the store, names its flag, and nothing changes."""

from __future__ import annotations

import argparse
from datetime import UTC
from typing import Any

import grpc
from google.protobuf.descriptor import FieldDescriptor

from recallatron.client import Client
from recallatron.protojson import enum_type, terms
from recallatron.v1 import gateway_pb2 as pb
from recallatron.v1 import store_pb2
from recallatron_cli import common
from recallatron_cli.admin import stamp
from recallatron_cli.common import client_options, show

SETTINGS = store_pb2.WorkspaceSettings.DESCRIPTOR
# The request's path of a setting, as the store names one it refuses.
FIELD_PREFIX = "settings."
BOOLEANS = {"true": True, "false": False}
_NUMBERS: dict[int, type] = {
    FieldDescriptor.TYPE_DOUBLE: float,
    FieldDescriptor.TYPE_FLOAT: float,
    FieldDescriptor.TYPE_INT32: int,
    FieldDescriptor.TYPE_INT64: int,
    FieldDescriptor.TYPE_UINT32: int,
    FieldDescriptor.TYPE_UINT64: int,
    FieldDescriptor.TYPE_STRING: str,
}


# What each setting does, for --help (a setting not here is named only).
MEANING = {
    "default_recall_mode": "the mode recall uses when a request names none",
    "dense_floor": "the least cosine the dense arm admits, 0 to 1 (default 0.30)",
    "rerank_depth": "how many admitted rows the cross-encoder re-ranks, 0 to 100 (default 20)",
    "expiry_days": "the expiry gate in days, 0 to 36500; 0 turns it off (the default)",
    "members_may_edit": "true: any member may correct, supersede or forget a workspace "
    "memory they can see; false (the default): its author and the owners only",
}


def flag_of(f: FieldDescriptor) -> str:
    return "--" + f.name.replace("_", "-")


def _setting_option(p: argparse.ArgumentParser, f: FieldDescriptor) -> None:
    """The flag of one setting, unset (None) unless given. A boolean takes
    true or false, so that either can be set."""
    help_ = MEANING.get(f.name, f"the workspace's {f.name}")
    if f.type == FieldDescriptor.TYPE_ENUM:
        p.add_argument(flag_of(f), dest=f.name, choices=terms(enum_type(f)).names, help=help_)
    elif f.type == FieldDescriptor.TYPE_BOOL:
        p.add_argument(flag_of(f), dest=f.name, choices=tuple(BOOLEANS), help=help_)
    elif f.type in _NUMBERS and not f.is_repeated:
        p.add_argument(flag_of(f), dest=f.name, type=_NUMBERS[f.type], help=help_)


def add_parser(sub: Any) -> None:
    p = client_options(
        sub.add_parser(
            "settings",
            help="the workspace's settings (any member); `settings set` changes those "
            "named (owners; docs/api.md)",
        )
    )
    p.set_defaults(func=cmd_settings)
    inner = p.add_subparsers(dest="settings_cmd", title="to change them")
    s = inner.add_parser(
        "set", help="change the settings given, and only those (owners); the others stay"
    )
    for f in SETTINGS.fields:
        _setting_option(s, f)
    common.group_client_options(s)
    s.set_defaults(func=cmd_set)


def lines(settings: store_pb2.WorkspaceSettings) -> str:
    """One setting a line: its name, then its value as `set` takes it."""
    width = max(len(f.name) for f in SETTINGS.fields) + 2
    out = []
    for f in SETTINGS.fields:
        value = getattr(settings, f.name)
        if f.type == FieldDescriptor.TYPE_ENUM:
            shown = terms(enum_type(f)).name(value)
        elif f.type == FieldDescriptor.TYPE_BOOL:
            shown = "true" if value else "false"
        else:
            shown = str(value)
        out.append(f"{f.name:<{width}}{shown}")
    return "\n".join(out)


def cmd_settings(args: argparse.Namespace) -> int:
    client: Client = common.client(args)
    got = client.ask(client.admin.GetSettings, pb.GetSettingsRequest)
    show(args, got, lines(got.settings))
    return 0


def changes_given(args: argparse.Namespace) -> dict[str, Any]:
    """The settings given, by field name, in the values the client takes."""
    changes: dict[str, Any] = {}
    for f in SETTINGS.fields:
        value = getattr(args, f.name, None)
        if value is None:
            continue
        changes[f.name] = BOOLEANS[value] if f.type == FieldDescriptor.TYPE_BOOL else value
    return changes


def cmd_set(args: argparse.Namespace) -> int:
    changes = changes_given(args)
    if not changes:
        raise common.Refused(
            "settings set: name at least one setting to change ("
            + ", ".join(flag_of(f) for f in SETTINGS.fields)
            + "); nothing was sent"
        )
    client: Client = common.client(args)
    try:
        # A value the request cannot hold (an integer past its field's
        # range) is a ValueError naming settings.<field>: main() names its flag.
        done = client.update_settings(**changes)
    except grpc.RpcError as exc:
        raise _named(exc) from None
    show(
        args,
        done,
        f"updated {', '.join(changes)} at {stamp(done.updated_at.ToDatetime(tzinfo=UTC))}\n"
        + lines(done.settings),
    )
    return 0


def _named(exc: grpc.RpcError) -> Exception:
    """The store's refusal of a setting's value with its flag named as well,
    as the CLI names a flag whose value it refuses itself; any other failure
    as it is."""
    details = str(exc.details() or "")
    path, sep, why = details.partition(": ")
    name = path.removeprefix(FIELD_PREFIX)
    if exc.code() == grpc.StatusCode.INVALID_ARGUMENT and sep and path.startswith(FIELD_PREFIX):
        known = {f.name: f for f in SETTINGS.fields}
        if name in known:
            return common.invalid(path, flag_of(known[name]), why, common.EXIT_REFUSED)
    return exc
