"""Hypothesis strategies built from protobuf descriptors: any request message,
field by field, with the values that break naive servers (empty, over the
documented limits, NUL and control characters, UUID-shaped and not, integer
boundaries, unknown enum numbers, timestamps out of range, repeated fields
over their limits, nested messages and oneofs to a bounded depth), mixed with
ids that exist so a call gets past its first check some of the time.

Driven by the descriptors alone, so a field or message added to a proto is
fuzzed without a change here."""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass
from hypothesis import strategies as st

from recallatron import vocabulary

# Lengths around every documented limit: at it, and one past it.
_LIMITS = sorted(
    {
        value
        for name, value in vars(vocabulary).items()
        if name.startswith("MAX_") and isinstance(value, int) and value <= 20_000
    }
)
STRING_LENGTHS = sorted({n for limit in _LIMITS for n in (limit, limit + 1)})
# Repeated fields: over the largest count limit a list may have.
LIST_LENGTHS = sorted(
    {n + 1 for n in _LIMITS if n <= vocabulary.MAX_NEIGHBOR_EDGES} | {vocabulary.MAX_READ_IDS}
)
MAX_DEPTH = 3

_ZERO_UUID = "00000000-0000-0000-0000-000000000000"

# Characters that break naive code: SQL and tsquery syntax, NUL, control
# characters, bidi and zero-width marks, a lone combining mark.
_NASTY = [
    *"&|!():*'\\;%_$<->\"\x00\x01\x07\x1b\x7f\n\r\t ",
    "\u202e",
    "\u200b",
    "\ufeff",
    "\u0301",
    "\U0001f600",
]
hostile_text = st.text(
    alphabet=st.one_of(st.sampled_from(_NASTY), st.characters(exclude_categories=("Cs",))),
    max_size=40,
)


def _long_text() -> st.SearchStrategy[str]:
    """A string at or past a documented limit, made of one repeated
    character so it costs nothing to draw."""
    return st.builds(
        lambda ch, n: ch * n,
        st.sampled_from(["a", "é", "\x00", " ", "\U0001f600", "-"]),
        st.sampled_from(STRING_LENGTHS),
    )


_uuid_like = st.one_of(
    st.uuids().map(str),
    st.uuids().map(lambda u: str(u).upper()),
    st.uuids().map(lambda u: "{" + str(u) + "}"),
    st.uuids().map(lambda u: u.hex),
    st.uuids().map(lambda u: str(u)[:-1]),  # one short
    st.uuids().map(lambda u: str(u) + "0"),  # one long
    st.uuids().map(lambda u: str(u).replace("-", "_")),
    st.uuids().map(lambda u: str(u)[:-1] + "g"),  # not hex
    st.just(_ZERO_UUID),
    st.just(str(uuid.UUID(int=2**128 - 1))),
)


@functools.cache
def string_values(pool: tuple[str, ...]) -> st.SearchStrategy[str]:
    choices: list[st.SearchStrategy[str]] = [
        st.just(""),
        hostile_text,
        _long_text(),
        _uuid_like,
        st.sampled_from(["note", "fact", "assist", "workspace", "ada", "a", "A", "0"]),
    ]
    if pool:
        # Real ids weigh as much as everything else together.
        known = st.sampled_from(pool)
        return st.one_of(known, st.one_of(choices))
    return st.one_of(choices)


# (min, max) of each integer type, as the wire carries it.
_INT_RANGES: dict[int, tuple[int, int]] = {
    FieldDescriptor.TYPE_INT32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_SINT32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_SFIXED32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_INT64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_SINT64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_SFIXED64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_UINT32: (0, 2**32 - 1),
    FieldDescriptor.TYPE_FIXED32: (0, 2**32 - 1),
    FieldDescriptor.TYPE_UINT64: (0, 2**64 - 1),
    FieldDescriptor.TYPE_FIXED64: (0, 2**64 - 1),
}


@functools.cache
def int_values(ftype: int) -> st.SearchStrategy[int]:
    lo, hi = _INT_RANGES[ftype]
    edges = sorted(
        {v for v in (lo, lo + 1, -1, 0, 1, 2, 3, 4, 100, 101, 2**31 - 1, 2**31, hi - 1, hi)}
        | set(_LIMITS)
        | {n + 1 for n in _LIMITS}
    )
    edges = [v for v in edges if lo <= v <= hi]
    return st.one_of(
        st.sampled_from(edges), st.integers(-5, 60).filter(lambda v: lo <= v), st.integers(lo, hi)
    )


float_values = st.one_of(
    st.sampled_from([0.0, -0.0, 1.0, -1.0, 0.5, 1.0000001, 1e308, -1e308, 5e-324]),
    st.floats(allow_nan=True, allow_infinity=True, width=64),
)


@functools.cache
def enum_values(field: FieldDescriptor) -> st.SearchStrategy[int]:
    defined = [v.number for v in field.enum_type.values]
    unknown = [-1, max(defined) + 1, max(defined) + 100, 2**31 - 1, -(2**31)]
    return st.one_of(st.sampled_from(defined), st.sampled_from(unknown))


# Timestamps: valid, the edges of the range protobuf allows (year 1, year
# 9999), just past them, far past, negative and too large nanos.
_YEAR_1 = -62_135_596_800
_YEAR_9999_END = 253_402_300_799
_NOW = 1_780_000_000
timestamp_values = st.tuples(
    st.one_of(
        st.sampled_from(
            [0, _NOW, _YEAR_1, _YEAR_1 - 1, _YEAR_9999_END, _YEAR_9999_END + 1, -(2**63), 2**63 - 1]
        ),
        st.integers(_NOW - 10**9, _NOW + 10**9),
        st.integers(-(2**63), 2**63 - 1),
    ),
    st.one_of(
        st.sampled_from([0, 1, 999_999_999, 1_000_000_000, -1, -(2**31), 2**31 - 1]),
        st.integers(-(2**31), 2**31 - 1),
    ),
)
# Durations: protobuf's range is about +-10,000 years, nanos of the same sign.
_DURATION_MAX = 315_576_000_000
duration_values = st.tuples(
    st.one_of(
        st.sampled_from([0, 1, -1, 60, 3600, 86_400 * 365, _DURATION_MAX, _DURATION_MAX + 1]),
        st.integers(-(2**63), 2**63 - 1),
    ),
    st.sampled_from([0, 1, -1, 999_999_999, 1_000_000_000, -(2**31)]),
)

_WELL_KNOWN: Mapping[str, st.SearchStrategy[tuple[int, int]]] = {
    "google.protobuf.Timestamp": timestamp_values,
    "google.protobuf.Duration": duration_values,
}


def _is_id_field(name: str) -> bool:
    return name == "id" or name.endswith("_id") or name.endswith("_ids")


def draw_message(
    draw: Callable[[st.SearchStrategy[Any]], Any],
    descriptor: Descriptor,
    pools: Callable[[str], tuple[str, ...]],
    depth: int = 0,
    wild_one_in: int | None = None,
) -> Message:
    """Any message of ``descriptor``. ``pools(field_name)`` gives the known
    ids to mix into a string field of that name (empty for none).

    A third of the messages are wild in every field; the others are plausible
    but for about one field in eight, so a call gets past its first check
    and the later ones are reached too."""
    if wild_one_in is None:
        wild_one_in = draw(st.sampled_from([1, 8, 8]))
    message = GetMessageClass(descriptor)()
    if descriptor.full_name in _WELL_KNOWN:
        tame = _TAME_WELL_KNOWN[descriptor.full_name]
        wild = draw(st.integers(0, wild_one_in - 1)) == 0
        seconds, nanos = draw(_WELL_KNOWN[descriptor.full_name] if wild else tame)
        message.seconds, message.nanos = seconds, nanos  # type: ignore[attr-defined]
        return message
    # One member of each real oneof (or none); proto3 `optional` fields
    # are oneofs of one and are set or left out like any other field.
    chosen: dict[str, str | None] = {}
    for oneof in descriptor.oneofs:
        names = [f.name for f in oneof.fields]
        if len(names) > 1:
            # A plausible message sets one of them, as a caller must.
            options = names if wild_one_in > 1 else [None, *names]
            chosen[oneof.name] = draw(st.sampled_from(options))
    for field in descriptor.fields:
        oneof = field.containing_oneof
        if oneof is not None and oneof.name in chosen:
            if chosen[oneof.name] != field.name:
                continue
        elif not draw(st.integers(0, 3)):  # left at its default a quarter of the time
            continue
        wild = draw(st.integers(0, wild_one_in - 1)) == 0
        _set_field(draw, message, field, pools, depth, wild_one_in, wild)
    return message


def _set_field(
    draw: Callable[[st.SearchStrategy[Any]], Any],
    message: Message,
    field: FieldDescriptor,
    pools: Callable[[str], tuple[str, ...]],
    depth: int,
    wild_one_in: int,
    wild: bool,
) -> None:
    is_message = field.type == FieldDescriptor.TYPE_MESSAGE
    if is_message and depth >= MAX_DEPTH:
        return
    if field.is_repeated:
        if is_message and field.message_type.GetOptions().map_entry:
            return  # no map fields in the public protos
        shape = draw(st.sampled_from(["empty", "one", "few", "over"] if wild else ["one", "few"]))
        if shape == "empty":
            return
        count = {"one": 1, "few": draw(st.integers(2, 4))}.get(shape)
        if count is None:
            # Over a limit: one drawn value repeated, cheap to draw.
            value = _value(draw, field, pools, depth, wild_one_in, wild)
            values = [value] * draw(st.sampled_from(LIST_LENGTHS))
        else:
            values = [_value(draw, field, pools, depth, wild_one_in, wild) for _ in range(count)]
        target = getattr(message, field.name)
        if is_message:
            for v in values:
                target.add().CopyFrom(v)
        else:
            target.extend(values)
        return
    value = _value(draw, field, pools, depth, wild_one_in, wild)
    if is_message:
        getattr(message, field.name).CopyFrom(value)
    else:
        setattr(message, field.name, value)


def _value(
    draw: Callable[[st.SearchStrategy[Any]], Any],
    field: FieldDescriptor,
    pools: Callable[[str], tuple[str, ...]],
    depth: int,
    wild_one_in: int,
    wild: bool,
) -> Any:
    t = field.type
    if field.message_type is not None:
        return draw_message(draw, field.message_type, pools, depth + 1, wild_one_in)
    if not wild:
        return draw(_tame(field, pools(field.name) if _is_id_field(field.name) else ()))
    if t == FieldDescriptor.TYPE_STRING:
        pool = pools(field.name) if _is_id_field(field.name) else ()
        return draw(string_values(pool))
    if t == FieldDescriptor.TYPE_BYTES:
        return draw(st.one_of(st.binary(max_size=40), st.just(b"\x00" * 20_001)))
    if t == FieldDescriptor.TYPE_BOOL:
        return draw(st.booleans())
    if t == FieldDescriptor.TYPE_ENUM:
        return draw(enum_values(field))
    if t in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
        value = draw(float_values)
        if t == FieldDescriptor.TYPE_FLOAT and abs(value) > 3.4e38 and value == value:
            return float("inf") if value > 0 else float("-inf")
        return value
    return draw(int_values(t))


# -- plausible values: what a well-behaved caller sends -------------------------

_TAME_WELL_KNOWN: Mapping[str, st.SearchStrategy[tuple[int, int]]] = {
    "google.protobuf.Timestamp": st.tuples(
        st.integers(_NOW - 10**8, _NOW), st.integers(0, 999_999_999)
    ),
    "google.protobuf.Duration": st.tuples(st.integers(0, 86_400 * 30), st.just(0)),
}
_TAME_TEXT = st.sampled_from(
    ["Acme", "Carol", "works_at", "note", "fuzz text about Acme", "person", "fz-" + "a" * 8]
)


@functools.cache
def _tame(field: FieldDescriptor, pool: tuple[str, ...]) -> st.SearchStrategy[Any]:
    t = field.type
    if t == FieldDescriptor.TYPE_STRING:
        if field.name == "request_id" or (_is_id_field(field.name) and not pool):
            return st.uuids().map(str)
        return st.sampled_from(pool) if pool else _TAME_TEXT
    if t == FieldDescriptor.TYPE_BYTES:
        return st.binary(max_size=8)
    if t == FieldDescriptor.TYPE_BOOL:
        return st.booleans()
    if t == FieldDescriptor.TYPE_ENUM:
        return st.sampled_from([v.number for v in field.enum_type.values if v.number] or [0])
    if t in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
        return st.floats(0, 1)
    return st.integers(0, 5)
