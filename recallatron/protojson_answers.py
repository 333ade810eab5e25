"""Protobuf messages as the answers agents read: a response's JSON and the
JSON Schema it conforms to, by one walk of the descriptor (the request side,
and the plain values both share, are recallatron/protojson.py's).

What a descriptor cannot say (fields agents do not see, which come first,
which stand beside their siblings, where "" means none) comes from an overlay
keyed by message type, a ShownTable; recallatron/tools.py holds the tools'.
The plain values: an enum is its vocabulary's lowercase name (null when
unspecified or newer than this build), a Timestamp an RFC 3339 string (null
when unset), an Audience "workspace" or a member id, a float rounded to
DIGITS decimals."""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from google.protobuf.descriptor import Descriptor, EnumDescriptor, FieldDescriptor
from google.protobuf.message import Message

from recallatron.protojson import (
    AUDIENCE,
    JSON,
    JSON_TYPES,
    TIMESTAMP,
    WORKSPACE,
    descriptor_of,
    enum_type,
    message_type,
    terms,
)

_FLOATS = {FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT}
# Decimals an answer's floats keep: scores and confidences, not float noise.
DIGITS = 4


@dataclass(frozen=True)
class Shown:
    """How one message type reads in an answer beyond its fields."""

    # These come first, in this order; the others follow in the proto's.
    first: tuple[str, ...] = ()
    hidden: frozenset[str] = frozenset()
    # Message fields whose own fields stand beside their siblings.
    inline: frozenset[str] = frozenset()
    # Strings where "" means there is none: null.
    empty_is_null: frozenset[str] = frozenset()
    # A field shown only when a boolean field of the same message is true.
    only_if: Mapping[str, str] = field(default_factory=dict)
    # Decimals of a float field, where not DIGITS.
    digits: Mapping[str, int] = field(default_factory=dict)


ShownTable = Mapping[str, Shown]
_NO_SHOWN = Shown()


@functools.cache
def _enum_names(enum: EnumDescriptor) -> dict[int, str]:
    return {number: name for name, number in terms(enum).values.items()}


def _fields(descriptor: Descriptor, first: Sequence[str] = ()) -> Iterator[FieldDescriptor]:
    by_name = descriptor.fields_by_name
    yield from (by_name[name] for name in first)
    yield from (f for f in descriptor.fields if f.name not in first)


class _Defs:
    """The message types of one answer's schema, each under its own name."""

    def __init__(self, table: ShownTable) -> None:
        self.table = table
        self.schemas: dict[str, JSON] = {}
        self.owners: dict[str, str] = {}

    def ref(self, message: Descriptor) -> JSON:
        owner = self.owners.setdefault(message.name, message.full_name)
        if owner != message.full_name:
            raise ValueError(
                f"two message types named {message.name}: {owner}, {message.full_name}"
            )
        if message.name not in self.schemas:
            self.schemas[message.name] = {}  # taken while it is built
            self.schemas[message.name] = self.object(message)
        return {"$ref": f"#/$defs/{message.name}"}

    def object(self, descriptor: Descriptor) -> JSON:
        properties, required = self.properties(descriptor)
        return {
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": False,
        }

    def properties(self, descriptor: Descriptor) -> tuple[JSON, list[str]]:
        shown = self.table.get(descriptor.full_name, _NO_SHOWN)
        properties: JSON = {}
        required: list[str] = []
        for f in _fields(descriptor, shown.first):
            if f.name in shown.hidden:
                continue
            if f.name in shown.inline:
                inner, inner_required = self.properties(message_type(f))
                properties.update(inner)
                required += inner_required
                continue
            one = self.value(f, shown)
            properties[f.name] = {"type": "array", "items": one} if f.is_repeated else one
            if f.name not in shown.only_if:
                required.append(f.name)
        return properties, required

    def value(self, f: FieldDescriptor, shown: Shown) -> JSON:
        if f.type == FieldDescriptor.TYPE_ENUM:
            # null: unspecified, or a value newer than this build.
            return {"type": ["string", "null"], "enum": [*terms(enum_type(f)).names, None]}
        if f.type == FieldDescriptor.TYPE_MESSAGE:
            message = message_type(f)
            if message.full_name == TIMESTAMP:
                return {"type": ["string", "null"], "format": "date-time"}
            if message.full_name == AUDIENCE:
                return {"type": ["string", "null"], "description": "'workspace' or a member id."}
            return self.ref(message)
        kind = JSON_TYPES[f.type]
        nullable = (f.has_presence and not f.is_repeated) or f.name in shown.empty_is_null
        return {"type": [kind, "null"] if nullable else kind}


def output_schema(descriptor: Descriptor, table: ShownTable) -> JSON:
    """The JSON Schema of what to_json makes of a ``descriptor`` message; the
    message types inside it are under $defs, by name."""
    defs = _Defs(table)
    out = defs.object(descriptor)
    if defs.schemas:
        out["$defs"] = defs.schemas
    return out


def to_json(message: Message, table: ShownTable) -> JSON:
    """A message as an agent reads it, by the same walk as output_schema."""
    fields = descriptor_of(message)
    shown = table.get(fields.full_name, _NO_SHOWN)
    out: JSON = {}
    for f in _fields(fields, shown.first):
        condition = shown.only_if.get(f.name)
        if f.name in shown.hidden or (condition and not getattr(message, condition)):
            continue
        value = getattr(message, f.name)
        if f.name in shown.inline:
            out.update(to_json(value, table))
        elif f.is_repeated:
            out[f.name] = [_plain(f, item, shown, table) for item in value]
        elif (
            f.type != FieldDescriptor.TYPE_MESSAGE
            and f.has_presence
            and not message.HasField(f.name)
        ):
            out[f.name] = None
        else:
            out[f.name] = _plain(f, value, shown, table)
    return out


def _plain(f: FieldDescriptor, value: Any, shown: Shown, table: ShownTable) -> Any:
    if f.type == FieldDescriptor.TYPE_ENUM:
        return _enum_names(enum_type(f)).get(value)
    if f.type == FieldDescriptor.TYPE_MESSAGE:
        name = value.DESCRIPTOR.full_name
        if name == TIMESTAMP:
            # The epoch is how an unset time travels in some answers.
            return value.ToJsonString() if value.seconds or value.nanos else None
        if name == AUDIENCE:
            return WORKSPACE if value.workspace else value.member_id or None
        return to_json(value, table)
    if f.type in _FLOATS:
        return round(value, shown.digits.get(f.name, DIGITS))
    if f.name in shown.empty_is_null and value == "":
        return None
    return value
