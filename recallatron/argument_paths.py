"""A request field a refusal names, as a tool's arguments name it: the
servers name their request's fields ("about_ids[0]"), an agent knows them by
the overlay's names ("about[0]", recallatron/tools.py)."""

from __future__ import annotations

import re

from google.protobuf.descriptor import Descriptor, FieldDescriptor

from recallatron.protojson import AUDIENCE, Arg, Args, ArgTable

_SEGMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)((?:\[\d+\])*)")


def argument_path(descriptor: Descriptor, table: ArgTable, field_path: str) -> str:
    """The argument an agent gave for a request field a refusal names
    ("about_ids[0]", "filters.mention_entity_ids[1]", "audience.member_id"),
    as the agent's schema names it ("about[0]", "mentions[1]", "audience");
    a path it does not know comes back as it is."""
    out: list[str] = []
    current: Descriptor | None = descriptor
    segments = field_path.split(".")
    for i, segment in enumerate(segments):
        match = _SEGMENT.fullmatch(segment)
        f = current.fields_by_name.get(match.group(1)) if current and match else None
        if f is None or match is None or current is None:
            return ".".join([*out, *segments[i:]])
        arg = table.get(current.full_name, Args()).fields.get(f.name, Arg())
        nested = f.message_type if f.type == FieldDescriptor.TYPE_MESSAGE else None
        if arg.inline and nested is not None:
            current = nested
            continue
        out.append((arg.name or f.name) + match.group(2))
        if nested is None or nested.full_name == AUDIENCE:
            # An audience is one argument (a string): its fields are not the agent's.
            return ".".join(out)
        current = nested
    return ".".join(out)
