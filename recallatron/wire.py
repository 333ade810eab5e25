"""Why the protobuf runtime refused to decode a request, so that the client
hears it (INVALID_ARGUMENT), not a server fault: the string field whose bytes
are not UTF-8, or the request as a whole when its bytes are no protobuf
message at all (truncated or malformed)."""

from __future__ import annotations

from google.protobuf.descriptor import Descriptor, FieldDescriptor


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def undecodable_field(descriptor: Descriptor, data: bytes, prefix: str = "") -> str:
    """The dotted name of the first string field that is not valid UTF-8, or
    "" when the fault is elsewhere (truncated or malformed wire data)."""
    pos = 0
    try:
        while pos < len(data):
            tag, pos = _varint(data, pos)
            number, wire_type = tag >> 3, tag & 7
            if wire_type == 0:
                _, pos = _varint(data, pos)
            elif wire_type == 1:
                pos += 8
            elif wire_type == 5:
                pos += 4
            elif wire_type == 2:
                length, pos = _varint(data, pos)
                chunk, pos = data[pos : pos + length], pos + length
                field = descriptor.fields_by_number.get(number)
                if field is None:
                    continue
                name = prefix + field.name
                if field.type == FieldDescriptor.TYPE_STRING:
                    try:
                        chunk.decode("utf-8")
                    except UnicodeDecodeError:
                        return name
                elif field.type == FieldDescriptor.TYPE_MESSAGE and field.message_type is not None:
                    found = undecodable_field(field.message_type, chunk, name + ".")
                    if found:
                        return found
            else:
                return ""
    except (IndexError, ValueError):
        return ""
    return ""


NOT_UTF8 = "could not be decoded: not valid UTF-8 (string fields must be UTF-8)"
MALFORMED = "could not be decoded: not a valid protobuf message (truncated or malformed)"


def decode_refusal(descriptor: Descriptor | None, data: bytes) -> tuple[str, str]:
    """The field and the message of a refusal of ``data``, which the runtime
    would not decode as ``descriptor``'s message: told apart, since only the
    first is about text."""
    field = undecodable_field(descriptor, data) if descriptor is not None else ""
    return (field, NOT_UTF8) if field else ("request", MALFORMED)
