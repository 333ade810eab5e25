"""A call's body before the library sees it: its media type in the one form
the library reads, and its decoding as the method's request, refused
(:class:`Refused`, ``invalid_argument`` with the field named as the caller
sent it) when it is not one, as a message gRPC cannot decode is."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Sequence
from typing import Any, cast

from google.protobuf import any_pb2, json_format
from google.protobuf.descriptor import Descriptor
from google.protobuf.message import DecodeError
from google.protobuf.message import Message as ProtoMessage
from google.protobuf.message_factory import GetMessageClass

from recallatron.protojson import quoted
from recallatron.wire import decode_refusal

PROTO_TYPE = "application/proto"
_FAILED_FIELD = re.compile(r"Failed to parse (\S+) field: ")
_UNKNOWN_FIELD = re.compile(r'has no field named "([^"]+)"')
# A value's path in the parser's message, past the request's own name; a
# message's path is quoted, a value's is not.
_VALUE_AT = re.compile(r" at [A-Za-z_]\w*\.([\w.\[\]]+?)\.*$")
# Strings, passed over whole, and the constants Python's reader takes.
_CONSTANT = re.compile(r'"(?:[^"\\]|\\.)*"|(-?Infinity|NaN)')
# A byte that is no UTF-8, as ``surrogateescape`` keeps it.
_ESCAPED = re.compile("[\udc80-\udcff]")
# A JSON object's opening, past a UTF-8 byte-order mark (some writers,
# PowerShell and Windows editors, put one first) and white space.
_OBJECT = re.compile(rb"(\xef\xbb\xbf)?\s*\{")
# RFC 3339's date-time (section 5.6), in upper case, with its offset or without.
_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?", re.ASCII)
_OFFSET = re.compile(r"Z|[+-]\d\d:\d\d", re.ASCII)
TIMESTAMP = "google.protobuf.Timestamp"


def media_type(content_type: str) -> str | None:
    """The call's type in the one form the library reads ("application/json"
    or "application/proto"), from any spelling HTTP allows (case, spaces,
    a UTF-8 charset); None for another type."""
    media, _, params = content_type.partition(";")
    media = media.strip().lower()
    charset = ""
    for param in params.split(";"):
        key, _, value = param.partition("=")
        if key.strip().lower() == "charset":
            charset = value.strip().strip('"').lower()
    if media == "application/json" and charset in ("", "utf-8"):
        return "application/json"
    if media == PROTO_TYPE and not charset:
        return PROTO_TYPE
    return None


class Refused(Exception):
    """A call answered here with a Connect error, before the library sees it.
    ``counted``: the gRPC code it is counted under in the method's metric
    ("": not counted); a refusal naming a field is INVALID_ARGUMENT.
    ``headers``: sent with the answer besides its content type."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        field: str = "",
        details: Sequence[any_pb2.Any] = (),
        counted: str = "",
        headers: Sequence[tuple[bytes, bytes]] = (),
    ) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.field = status, code, message, field
        self.details = details
        self.headers = headers
        self.counted = counted or ("INVALID_ARGUMENT" if field else "")


def field_of(parse_error: str) -> str:
    """The field a proto3 JSON parse error is about, dotted ("filters.kinds"),
    as the caller named it; "request" when it is about the whole body. A
    value the parser could not read names its path ("at RememberRequest.
    claims[0].confidence") where the fields it failed in name less."""
    names = _FAILED_FIELD.findall(parse_error)
    unknown = _UNKNOWN_FIELD.search(parse_error)
    if unknown:
        names.append(unknown.group(1))
    else:
        at = _VALUE_AT.search(parse_error.split("\n", 1)[0])
        path = at.group(1) if at else ""
        # A path names as many fields as the parser's failures, and the items
        # of lists of messages (a list of values is named as a whole, as before).
        if path and path.count(".") + 1 >= len(names):
            return re.sub(r"\[\d+\]$", "", path)
    return ".".join(names) or "request"


class _NotJson(Exception):
    """A constant the JSON reader takes but JSON has not (NaN, Infinity)."""

    def __init__(self, constant: str) -> None:
        super().__init__(constant)
        self.constant = constant


def _not_json(constant: str) -> object:
    raise _NotJson(constant)


def _whole_number(digits: str) -> int | float:
    """A JSON integer; one longer than Python reads as an int (4,300 digits)
    as the float it rounds to, infinite, so the parser refuses it naming its
    field as out of range, as any number too large for the field."""
    try:
        return int(digits)
    except ValueError:
        return float(digits)


def _constant_refused(text: str, constant: str) -> Refused:
    """NaN or Infinity refused as malformed JSON is, saying where: the first
    such constant outside a string, in the text the reader read."""
    found = next((m for m in _CONSTANT.finditer(text) if m.group(1)), None)
    where = json.JSONDecodeError(f"{constant} is not JSON", text, found.start(1) if found else 0)
    return Refused(400, "invalid_argument", str(where), "request")


def _first_path(data: object, hit: Callable[[object, str], str], at: str = "") -> str:
    """The path, as the caller sent it ("filters.kinds", "mentions[1].name"),
    of the first node of loaded JSON that ``hit`` names (its path, or "" for
    none; asked before the node is walked into); "" when none does."""
    found = hit(data, at)
    if found:
        return found
    if isinstance(data, dict):
        inner = [(f"{at}.{k}" if at else k, v) for k, v in data.items()]
    elif isinstance(data, list):
        inner = [(f"{at}[{i}]", v) for i, v in enumerate(data)]
    else:
        return ""
    for where, value in inner:
        found = _first_path(value, hit, where)
        if found:
            return found
    return ""


def _escaped(data: object, at: str) -> str:
    # A byte that was no UTF-8 is kept as a lone surrogate by ``surrogateescape``.
    return at if isinstance(data, str) and _ESCAPED.search(data) else ""


def _escaped_at(data: object) -> str:
    """The path of the first string value holding a byte that was no UTF-8;
    "" when none does."""
    return _first_path(data, _escaped)


def _not_utf8_refused(body: bytes | bytearray, start: int, at: int) -> Refused:
    """A JSON body that is not UTF-8 (JSON's only encoding on this surface, as
    the content type's charset says) refused saying where, naming the string
    field holding the first such byte as a binary body's refusal does; the
    whole request when it is elsewhere (a key, between values). ``start``:
    where the JSON text begins (past a byte-order mark); ``at``: the byte's
    place in the body as sent."""
    try:
        field = _escaped_at(json.loads(str(memoryview(body)[start:], "utf-8", "surrogateescape")))
    except (ValueError, RecursionError):
        field = ""
    if not field or _ESCAPED.search(field):
        field = "request"
    said = f"not valid UTF-8 at byte {at} (a JSON body must be UTF-8)"
    return Refused(400, "invalid_argument", said, field)


class _Repeated:
    """Where a JSON object with a key given twice was: the refusal names the
    key by its path, which the object's own loading does not know."""

    def __init__(self, key: str) -> None:
        self.key = key


def _no_repeated_keys(
    pairs: list[tuple[str, Any]], repeats: list[str]
) -> dict[str, Any] | _Repeated:
    # As the proto3 JSON parser's own loading: a key given twice is refused.
    data: dict[str, Any] = {}
    for key, value in pairs:
        if key in data:
            repeats.append(key)
            return _Repeated(key)
        data[key] = value
    return data


def _repeated(data: object, at: str) -> str:
    if isinstance(data, _Repeated):
        return f"{at}.{data.key}" if at else data.key
    return ""


def repeated_key(data: object) -> str:
    """The path of the first key given twice in loaded JSON, as the caller
    sent it ("filters.kinds", "mentions[1].name"); "" when there is none."""
    return _first_path(data, _repeated)


def _second_of_a_oneof(descriptor: Descriptor, data: dict[str, Any]) -> tuple[str, str] | None:
    """The key, in the order sent, of the second member of a oneof given a
    value (null is no value, as the parser has it), and the oneof's name;
    None when each oneof has one at most. The parser refused naming only the
    message field holding the oneof."""
    for oneof in descriptor.oneofs:
        member_of = {n: f for f in oneof.fields for n in (f.json_name, f.name)}
        first = None
        for key, value in data.items():
            field = member_of.get(key)
            if field is None or value is None:
                continue
            if first is None:
                first = field
            elif field.number != first.number:
                return key, oneof.name
    return None


def checked(descriptor: Descriptor, data: object, prefix: str = "") -> None:
    """Refuses, naming the field as it was sent, what the proto3 JSON parser
    takes but a request must not have: one field given by both its names
    (``skipRerank`` and ``skip_rerank``; the parser kept the last, where a
    key given twice is refused), a oneof given two members (the parser named
    only the field holding it), and an enum given as a number with a
    fraction (proto3 JSON takes an enum's name or its number, and the parser
    read 1.5 as 1: a remember with "kind": 1.5 stored a note), a message
    given something other than a JSON object, and a time that is no RFC 3339
    time (:func:`rfc3339`, which reads one in lower case)."""
    if not isinstance(data, dict):
        return
    keys = list(data)
    second = _second_of_a_oneof(descriptor, data)
    if second:
        key, oneof = second
        raise Refused(
            400, "invalid_argument", f"only one member of {oneof} may be given", prefix + key
        )
    for field in descriptor.fields:
        given = [k for k in dict.fromkeys((field.json_name, field.name)) if k in data]
        if not given:
            continue
        if len(given) > 1:
            later = prefix + max(given, key=keys.index)
            raise Refused(400, "invalid_argument", "given twice (by both its names)", later)
        value = data[given[0]]
        if value is None:
            continue
        name = prefix + given[0]
        if field.enum_type is not None:
            items = value if isinstance(value, list) else [value]
            numbers = [v for v in items if isinstance(v, float)]
            # An infinite one (1e400, or thousands of digits) the parser failed on.
            if any(not math.isfinite(v) for v in numbers):
                raise Refused(400, "invalid_argument", "an enum's number is out of range", name)
            if any(not v.is_integer() for v in numbers):
                raise Refused(400, "invalid_argument", "an enum's number is whole", name)
        elif field.message_type is not None and field.message_type.full_name == TIMESTAMP:
            if isinstance(value, str) and not field.is_repeated:
                data[given[0]] = rfc3339(value, name)
        elif field.message_type is not None and not field.message_type.GetOptions().map_entry:
            if not field.is_repeated:
                _message(field.message_type, value, name)
            elif isinstance(value, list):
                for index, item in enumerate(value):
                    _message(field.message_type, item, f"{name}[{index}]")


def rfc3339(value: str, name: str) -> str:
    """A Timestamp's JSON as the parser reads it: RFC 3339 lets "t" and "z" be
    lower case, which the parser refused; a time without its offset, or no
    RFC 3339 time at all, is refused saying so, where the parser said it
    could not read the first seven characters ("2026-01")."""
    upper = value.upper()
    time = _TIME.match(upper)
    if time is None:
        raise Refused(400, "invalid_argument", f"not an RFC 3339 time: {quoted(value)}", name)
    offset = upper[time.end() :]
    if not offset:
        raise Refused(
            400, "invalid_argument", "an RFC 3339 time needs its offset (Z or +hh:mm)", name
        )
    if not _OFFSET.fullmatch(offset):
        raise Refused(400, "invalid_argument", f"not an RFC 3339 time: {quoted(value)}", name)
    return upper


def _message(descriptor: Descriptor, value: object, name: str) -> None:
    """A message's value checked: a JSON object (the parser took an array
    for an empty message, and named a field that is not there for a string),
    but for the well-known types, which have JSON forms of their own (a
    Timestamp is a string); null is the parser's to judge."""
    if value is None:
        return
    if not isinstance(value, dict) and not descriptor.full_name.startswith("google.protobuf."):
        raise Refused(400, "invalid_argument", "must be a JSON object", name)
    checked(descriptor, value, name + ".")


def _indexed(descriptor: Descriptor, data: object, field: str) -> str:
    """``field`` ("claims.attribute") with the index of the item of each list
    of messages along it that the parser fails on ("claims[1].attribute"),
    where its failure named none."""
    named: list[str] = []
    for name in field.split("."):
        found = descriptor.fields_by_camelcase_name.get(name) or descriptor.fields_by_name.get(name)
        if found is None or not isinstance(data, dict) or found.message_type is None:
            return ".".join([*named, name]) if found is not None else field
        descriptor, data = found.message_type, data.get(name)
        if found.is_repeated and isinstance(data, list):
            item_class = GetMessageClass(descriptor)
            index = next((i for i, item in enumerate(data) if not _parses(item, item_class)), -1)
            if index < 0:
                return field
            name, data = f"{name}[{index}]", data[index]
        named.append(name)
    return ".".join(named)


def _parses(data: Any, cls: type[ProtoMessage]) -> bool:
    try:
        json_format.ParseDict(data, cls())
    except (json_format.ParseError, ValueError, TypeError, RecursionError):
        return False
    return True


def decode(cls: type[ProtoMessage], body: bytes | bytearray, content_type: str) -> ProtoMessage:
    """``body`` as a ``cls``; raises :class:`Refused` naming the field when it
    is not one. Read where it is (an inflated body is a ``bytearray``), never
    copied whole."""
    data: Any = None
    try:
        if content_type == PROTO_TYPE:
            # The runtime reads any buffer; the stubs name bytes only.
            return cls.FromString(cast(bytes, body))
        opening = _OBJECT.match(body)
        if opening is None:
            raise Refused(400, "invalid_argument", "must be a JSON object", "request")
        # A UTF-8 byte-order mark first is ignored (RFC 8259 lets a parser).
        start = len(opening.group(1) or b"")
        try:
            # Read as UTF-8 only: json.loads would take UTF-16 and UTF-32 too.
            text = str(memoryview(body)[start:], "utf-8")
        except UnicodeDecodeError as exc:
            raise _not_utf8_refused(body, start, start + exc.start) from None
        repeats: list[str] = []
        try:
            data = json.loads(
                text,
                object_pairs_hook=lambda p: _no_repeated_keys(p, repeats),
                parse_constant=_not_json,
                parse_int=_whole_number,
            )
        except _NotJson as exc:
            raise _constant_refused(text, exc.constant) from None
        if repeats:  # only then is the body walked for where
            raise Refused(400, "invalid_argument", "given twice", repeated_key(data) or repeats[0])
        checked(cast(Descriptor, cls.DESCRIPTOR), data)
        return json_format.ParseDict(data, cls())
    except DecodeError:
        # Worded as gRPC's refusal of the same bytes: the string that is not
        # UTF-8, or the request that is no message.
        # A copy on this path only: the call ends with the refusal.
        field, said = decode_refusal(cast(Descriptor, cls.DESCRIPTOR), bytes(body))
        raise Refused(400, "invalid_argument", said, field) from None
    except (json_format.ParseError, ValueError, TypeError, RecursionError) as exc:
        # The parser's first line; the next ones list every field the message has.
        said = str(exc).split("\n", 1)[0]
        field = field_of(str(exc))
        if "[" not in field and "." in field:
            field = _indexed(cast(Descriptor, cls.DESCRIPTOR), data, field)
        raise Refused(400, "invalid_argument", said, field) from None
