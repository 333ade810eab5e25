"""Names the field of a request the protobuf runtime refused to decode, so a
client that sent bytes that are not UTF-8 in a string field hears which one
(INVALID_ARGUMENT), not a server fault."""

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
