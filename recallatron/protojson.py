"""Protobuf messages as the JSON agents write, by one walk of the descriptor:
the JSON Schema of a request's arguments and the request from those arguments;
and the plain values and descriptor helpers that the answers' side
(recallatron/protojson_answers.py: an answer's JSON and its JSON Schema)
shares with it.

What a descriptor cannot say (descriptions, limits, defaults, an argument's
public name, fields agents do not see) comes from an overlay keyed by message
type; recallatron/tools.py holds the tools'. Without one, arguments take the
proto field names, so the client library builds its requests the same way.

The plain values: an enum is its vocabulary's lowercase name
(recallatron.vocabulary), a Timestamp an RFC 3339 string, an Audience
"workspace" or a member id."""

from __future__ import annotations

import functools
import re
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar, cast

from google.protobuf.descriptor import Descriptor, EnumDescriptor, FieldDescriptor
from google.protobuf.internal.enum_type_wrapper import EnumTypeWrapper
from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp

from recallatron import vocabulary
from recallatron.v1 import common_pb2 as cpb

M = TypeVar("M", bound=Message)
JSON = dict[str, Any]

TIMESTAMP = Timestamp.DESCRIPTOR.full_name
AUDIENCE = cpb.Audience.DESCRIPTOR.full_name
WORKSPACE = "workspace"

# Protobuf's integer types, by the OpenAPI format each takes (its width and sign).
INTEGER_FORMATS = {
    FieldDescriptor.TYPE_INT32: "int32",
    FieldDescriptor.TYPE_SINT32: "int32",
    FieldDescriptor.TYPE_SFIXED32: "int32",
    FieldDescriptor.TYPE_UINT32: "uint32",
    FieldDescriptor.TYPE_FIXED32: "uint32",
    FieldDescriptor.TYPE_INT64: "int64",
    FieldDescriptor.TYPE_SINT64: "int64",
    FieldDescriptor.TYPE_SFIXED64: "int64",
    FieldDescriptor.TYPE_UINT64: "uint64",
    FieldDescriptor.TYPE_FIXED64: "uint64",
}
JSON_TYPES = {
    FieldDescriptor.TYPE_STRING: "string",
    FieldDescriptor.TYPE_BOOL: "boolean",
    FieldDescriptor.TYPE_DOUBLE: "number",
    FieldDescriptor.TYPE_FLOAT: "number",
    **dict.fromkeys(INTEGER_FORMATS, "integer"),
}


# -- overlays ------------------------------------------------------------------------


@dataclass(frozen=True)
class Arg:
    """What an agent is told about one request field beyond its type."""

    # JSON Schema keywords: description, limits, default (also what the
    # request gets when the argument is left out), format, pattern.
    schema: Mapping[str, Any] = field(default_factory=dict)
    # The same for each item of a repeated field.
    items: Mapping[str, Any] = field(default_factory=dict)
    # The argument's name where it is not the field's.
    name: str = ""
    required: bool = False
    # Not offered to agents: the request keeps the field's proto default.
    hidden: bool = False
    # A message field whose own fields are arguments beside its siblings.
    inline: bool = False


@dataclass(frozen=True)
class Args:
    """The arguments one message type is made of."""

    fields: Mapping[str, Arg] = field(default_factory=dict)
    # Keywords of the object itself, such as its description.
    schema: Mapping[str, Any] = field(default_factory=dict)


ArgTable = Mapping[str, Args]
_NO_ARG = Arg()
_NO_ARGS = Args()
_NOT_EMPTY: JSON = {"minLength": 1}  # a string the servers refuse empty


# How much of a caller's own value a refusal quotes: enough to recognise it;
# a 5 MB argument must not come back as a 5 MB error.
QUOTE_CHARS = 80


def clip(text: str, limit: int = QUOTE_CHARS) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text)} characters)"


def quoted(value: Any) -> str:
    """A caller's value as a refusal quotes it: its repr, clipped."""
    return clip(repr(value))


# -- plain values ----------------------------------------------------------------------


def _upper_snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).upper()


_VOCABULARY: dict[str, vocabulary.Terms[Any]] = {
    terms.enum.DESCRIPTOR.full_name: terms
    for terms in (
        vocabulary.KIND,
        vocabulary.ORIGIN,
        vocabulary.PURPOSE,
        vocabulary.LINK_KIND,
        vocabulary.MODE,
        vocabulary.ROLE,
        vocabulary.REVISION_ACTION,
    )
}


@functools.cache
def terms(enum: EnumDescriptor) -> vocabulary.Terms[Any]:
    """The vocabulary of an enum: recallatron.vocabulary's where it has one,
    else the same rule (values without the enum's own prefix, lowercase)."""
    known = _VOCABULARY.get(enum.full_name)
    if known is not None:
        return known
    return vocabulary.Terms(EnumTypeWrapper(enum), _upper_snake(enum.name) + "_")


def rfc3339(value: str, where: str) -> datetime:
    """An RFC 3339 time with its offset ("2026-05-01T09:00:00Z"; its "t" and
    "z" may be lowercase, RFC 3339 5.6, which fromisoformat does not take)."""
    try:
        at = datetime.fromisoformat(value.upper())
    except (AttributeError, TypeError, ValueError):
        raise ValueError(f"{where}: not an RFC 3339 time: {quoted(value)}") from None
    if at.tzinfo is None:
        raise ValueError(f"{where}: an RFC 3339 time needs its offset (Z or +hh:mm)")
    return at


def timestamp(value: str | datetime, where: str) -> Timestamp:
    ts = Timestamp()
    at = value if isinstance(value, datetime) else rfc3339(value, where)
    try:
        ts.FromDatetime(at)
    except (OverflowError, ValueError):
        # Near the ends of the calendar an offset carries it past them.
        raise ValueError(f"{where}: out of the range of times: {at.isoformat()}") from None
    return ts


def descriptor_of(message: Message | type[Message]) -> Descriptor:
    """A message's (or message class's) descriptor; the runtime's own
    descriptor class stands for the same type."""
    return cast(Descriptor, message.DESCRIPTOR)


def message_type(f: FieldDescriptor) -> Descriptor:
    assert f.message_type is not None, f.full_name
    return f.message_type


def enum_type(f: FieldDescriptor) -> EnumDescriptor:
    assert f.enum_type is not None, f.full_name
    return f.enum_type


# -- arguments: their schema ---------------------------------------------------------


def input_schema(descriptor: Descriptor, table: ArgTable) -> JSON:
    """The JSON Schema of the arguments that make a ``descriptor`` message."""
    properties, required = _arg_properties(descriptor, table)
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


def _arg_properties(descriptor: Descriptor, table: ArgTable) -> tuple[JSON, list[str]]:
    args = table.get(descriptor.full_name, _NO_ARGS)
    properties: JSON = {}
    required: list[str] = []
    for f in descriptor.fields:
        arg = args.fields.get(f.name, _NO_ARG)
        if arg.hidden:
            continue
        if arg.inline:
            inner, inner_required = _arg_properties(message_type(f), table)
            properties.update(inner)
            required += inner_required
            continue
        name = arg.name or f.name
        one = _arg_value(f, table)
        if f.is_repeated:
            # A list of an enum's names: at most as many as it has (the gateway refuses more).
            bound = {"maxItems": len(one["enum"])} if "enum" in one else {}
            plain = _NOT_EMPTY if one == {"type": "string"} else {}  # an empty item: none
            items = {**one, **plain, **arg.items}
            properties[name] = {"type": "array", "items": items, **bound, **arg.schema}
        else:
            choice = f.containing_oneof  # "" is no choice; `optional` makes a oneof of one
            chosen = arg.required or (choice is not None and len(choice.fields) > 1)
            plain = _NOT_EMPTY if chosen and one == {"type": "string"} else {}
            properties[name] = {**one, **plain, **arg.schema}
        if arg.required:
            required.append(name)
    return properties, required


def _arg_value(f: FieldDescriptor, table: ArgTable) -> JSON:
    if f.type == FieldDescriptor.TYPE_ENUM:
        return {"type": "string", "enum": list(terms(enum_type(f)).names)}
    if f.type != FieldDescriptor.TYPE_MESSAGE:
        return {"type": JSON_TYPES[f.type]}
    message = message_type(f)
    if message.full_name == TIMESTAMP:
        return {"type": "string", "format": "date-time"}
    if message.full_name == AUDIENCE:
        return {"type": "string", **_NOT_EMPTY}
    properties, required = _arg_properties(message, table)
    out: JSON = {"type": "object", "properties": properties}
    if required:
        out["required"] = required
    out["additionalProperties"] = False
    return {**out, **table.get(message.full_name, _NO_ARGS).schema}


# -- arguments: the request ----------------------------------------------------------


def to_message(cls: type[M], args: Mapping[str, Any], table: ArgTable | None = None) -> M:
    """The message the arguments give, by the same walk as input_schema. An
    argument left out or None leaves its field alone (or takes the overlay's
    default); a name the walk does not know is a ValueError naming it, as is a
    value of the wrong kind (an unknown enum name, a time without offset)."""
    message = cls()
    _fill(message, args, table or {}, "")
    return message


def _fill(message: Message, args: Mapping[str, Any], table: ArgTable, where: str) -> None:
    used = _fill_fields(message, args, table, where)
    unknown = sorted(set(args) - used)
    if unknown:
        raise ValueError(f"{where or '(arguments)'}: unknown argument {quoted(unknown[0])}")


def _fill_fields(
    message: Message, args: Mapping[str, Any], table: ArgTable, where: str
) -> set[str]:
    """Sets the fields the arguments give; returns the argument names used."""
    spec = table.get(descriptor_of(message).full_name, _NO_ARGS)
    used: set[str] = set()
    # Per oneof: the member set, and whether the arguments gave it (not a default).
    oneofs: dict[str, tuple[str, bool]] = {}
    for f in descriptor_of(message).fields:
        arg = spec.fields.get(f.name, _NO_ARG)
        if arg.hidden:
            continue
        if arg.inline:
            used |= _fill_fields(getattr(message, f.name), args, table, where)
            continue
        name = arg.name or f.name
        used.add(name)
        value = args.get(name)
        given = value is not None
        if value is None:
            value = arg.schema.get("default")
        if value is None:
            continue
        path = f"{where}.{name}" if where else name
        group = f.containing_oneof
        if group is not None:
            if value == "":
                continue  # an empty member is no choice
            chosen = oneofs.get(group.name)
            if chosen is not None:
                if not given:
                    continue  # a default gives way to what was given
                if chosen[1]:
                    raise ValueError(f"{path}: give one of {chosen[0]} and {name}, not both")
            # Setting one member of a oneof clears the other.
            oneofs[group.name] = (name, given)
        if f.is_repeated:
            if isinstance(value, str | bytes | Mapping) or not isinstance(value, Sequence):
                raise ValueError(f"{path}: a list is expected")
            items = getattr(message, f.name)
            for i, item in enumerate(value):
                if f.type == FieldDescriptor.TYPE_MESSAGE:
                    _set_message(items.add(), item, table, f"{path}[{i}]")
                else:
                    with _named(f"{path}[{i}]"):
                        items.append(_scalar(f, item, f"{path}[{i}]"))
        elif f.type == FieldDescriptor.TYPE_MESSAGE:
            _set_message(getattr(message, f.name), value, table, path)
        else:
            with _named(path):
                setattr(message, f.name, _scalar(f, value, path))
    return used


@contextmanager
def _named(path: str) -> Iterator[None]:
    """protobuf's own refusal of a value (an integer past its field's range,
    a float where an integer goes) with the argument named."""
    try:
        yield
    except (TypeError, ValueError) as exc:
        text = str(exc)
        raise ValueError(text if text.startswith(f"{path}:") else f"{path}: {text}") from None


def audience(value: str, where: str) -> cpb.Audience:
    """The audience a word names: the workspace, or a member by id. Another
    word ("everyone") is refused as neither, not sent as a member id that the
    gateway would refuse for not being a UUID."""
    if value == WORKSPACE:
        return cpb.Audience(workspace=True)
    # Text that is no UTF-8 is refused as the encoder refuses any field's.
    value.encode()
    try:
        uuid.UUID(value)
    except ValueError:
        raise ValueError(f"{where}: 'workspace' or a member id, not {quoted(value)}") from None
    return cpb.Audience(member_id=value)


def _set_message(message: Message, value: Any, table: ArgTable, where: str) -> None:
    name = message.DESCRIPTOR.full_name
    if name == TIMESTAMP and isinstance(value, str | datetime):
        message.CopyFrom(timestamp(value, where))
    elif name == AUDIENCE and isinstance(value, str):
        message.CopyFrom(audience(value, where))
    elif isinstance(value, Mapping) and name not in (TIMESTAMP, AUDIENCE):
        # Given, even empty: the receiver sees the field as set.
        message.SetInParent()
        _fill(message, value, table, where)
    else:
        raise ValueError(f"{where}: unexpected value {quoted(value)}")


def _scalar(f: FieldDescriptor, value: Any, where: str) -> Any:
    if f.type == FieldDescriptor.TYPE_ENUM:
        vocab = terms(enum_type(f))
        if value not in vocab.values:
            raise ValueError(f"{where}: {quoted(value)} is not one of {vocab.one_of()}")
        return vocab.value(value)
    kind = JSON_TYPES.get(f.type)
    if kind == "string" and isinstance(value, str):
        return value
    if kind == "boolean" and isinstance(value, bool):
        return value
    if kind == "integer" and isinstance(value, int) and not isinstance(value, bool):
        return value
    if kind == "integer" and isinstance(value, float) and value.is_integer():
        # JSON Schema's "integer" is any number with no fraction: 5.0 is 5.
        return int(value)
    if kind == "number" and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    raise ValueError(f"{where}: {quoted(value)} is not a {kind}")
