"""The OpenAPI 3.1 document of the HTTP/JSON API, made from the service
descriptors at start-up: a POST path per method (the Connect unary protocol,
/<package>.<Service>/<Method>), its request and response in the proto3 JSON
mapping (field json names; 64-bit integers may be strings; enums by name; the
well-known types in their JSON forms), the bearer token and the Connect error
body. A method or field added to the protos is in the document the next time
the gateway starts."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from google.protobuf.descriptor import Descriptor, FieldDescriptor, ServiceDescriptor

from recallatron.protojson import INTEGER_FORMATS
from services.gateway.httpjson.relay import path

JSON = dict[str, Any]
ERROR = "connect.error"

# proto3 JSON writes 64-bit integers as strings (and reads either).
_INT64 = {t for t, name in INTEGER_FORMATS.items() if name.endswith("64")}
_WRAPPED: dict[str, JSON] = {
    "google.protobuf.DoubleValue": {"type": "number"},
    "google.protobuf.FloatValue": {"type": "number"},
    "google.protobuf.Int64Value": {"type": ["integer", "string"], "format": "int64"},
    "google.protobuf.UInt64Value": {"type": ["integer", "string"], "format": "uint64"},
    "google.protobuf.Int32Value": {"type": "integer", "format": "int32"},
    "google.protobuf.UInt32Value": {"type": "integer", "format": "uint32"},
    "google.protobuf.BoolValue": {"type": "boolean"},
    "google.protobuf.StringValue": {"type": "string"},
    "google.protobuf.BytesValue": {"type": "string", "format": "byte"},
}
WELL_KNOWN: dict[str, JSON] = {
    "google.protobuf.Timestamp": {"type": "string", "format": "date-time"},
    "google.protobuf.Duration": {
        "type": "string",
        "pattern": r"^-?[0-9]+(\.[0-9]{1,9})?s$",
        "description": 'seconds with an "s": "3600s", "0.5s"',
    },
    "google.protobuf.FieldMask": {
        "type": "string",
        "description": "field paths in lowerCamelCase, separated by commas",
    },
    "google.protobuf.Struct": {"type": "object"},
    "google.protobuf.Value": {},
    "google.protobuf.ListValue": {"type": "array"},
    "google.protobuf.Empty": {"type": "object"},
    "google.protobuf.Any": {
        "type": "object",
        "properties": {"@type": {"type": "string"}},
        "required": ["@type"],
    },
    **_WRAPPED,
}
CONNECT_ERROR: JSON = {
    "type": "object",
    "description": "A Connect error: the gRPC status code's name, its message and details "
    "(google.rpc.BadRequest naming the field, ErrorInfo, PreconditionFailure, RetryInfo).",
    "properties": {
        "code": {"type": "string", "examples": ["invalid_argument", "not_found"]},
        "message": {"type": "string"},
        "details": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "type": {"type": "string", "examples": ["google.rpc.BadRequest"]},
                    "value": {"type": "string", "format": "byte"},
                    "debug": {"type": "object"},
                },
            },
        },
    },
    "required": ["code"],
}


def _ref(name: str) -> JSON:
    return {"$ref": f"#/components/schemas/{name}"}


class _Schemas:
    def __init__(self) -> None:
        self.found: dict[str, JSON] = {}

    def message(self, d: Descriptor) -> JSON:
        """A reference to ``d``'s schema (its value schema for the well-known types)."""
        if d.full_name in WELL_KNOWN:
            return dict(WELL_KNOWN[d.full_name])
        if d.full_name not in self.found:
            self.found[d.full_name] = {}  # taken before the fields: messages may recur
            self.found[d.full_name] = {
                "type": "object",
                # json names; the parser takes the proto field names as well.
                "properties": {f.json_name: self.field(f) for f in d.fields},
            }
        return _ref(d.full_name)

    def field(self, f: FieldDescriptor) -> JSON:
        if f.message_type is not None and f.message_type.GetOptions().map_entry:
            value = f.message_type.fields_by_name["value"]
            return {"type": "object", "additionalProperties": self.single(value)}
        if f.is_repeated:
            return {"type": "array", "items": self.single(f)}
        return self.single(f)

    def single(self, f: FieldDescriptor) -> JSON:
        if f.message_type is not None:
            return self.message(f.message_type)
        if f.enum_type is not None:
            return {"type": "string", "enum": [v.name for v in f.enum_type.values]}
        if f.type in _INT64:
            return {"type": ["integer", "string"], "format": INTEGER_FORMATS[f.type]}
        if f.type in INTEGER_FORMATS:
            return {"type": "integer", "format": INTEGER_FORMATS[f.type]}
        if f.type in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
            return {"type": "number"}
        if f.type == FieldDescriptor.TYPE_BOOL:
            return {"type": "boolean"}
        if f.type == FieldDescriptor.TYPE_BYTES:
            return {"type": "string", "format": "byte"}
        return {"type": "string"}


def document(
    services: Iterable[ServiceDescriptor], version: str, open_calls: Iterable[str] = ()
) -> JSON:
    """The OpenAPI document of ``services``; ``open_calls`` (paths) need no token."""
    opened = frozenset(open_calls)
    schemas = _Schemas()
    paths: JSON = {}
    tags = []
    for service in services:
        tags.append({"name": service.full_name})
        for m in service.methods:
            if m.client_streaming or m.server_streaming:
                continue
            paths[path(m)] = {
                "post": {
                    "operationId": f"{service.name}.{m.name}",
                    "tags": [service.full_name],
                    "requestBody": {
                        "required": True,
                        "content": {"application/json": {"schema": schemas.message(m.input_type)}},
                    },
                    "responses": {
                        "200": {
                            "description": "OK",
                            "content": {
                                "application/json": {"schema": schemas.message(m.output_type)}
                            },
                        },
                        "default": {
                            "description": "A Connect error (the HTTP status follows its code)",
                            "content": {"application/json": {"schema": _ref(ERROR)}},
                        },
                    },
                    # An empty list overrides the document's bearer requirement.
                    **({"security": []} if path(m) in opened else {}),
                }
            }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Recallatron HTTP/JSON API (Connect protocol)",
            "version": version,
            "description": "The gateway's gRPC services over HTTP/JSON: POST the request "
            "as JSON to /<package>.<Service>/<Method> with `Authorization: Bearer <token>`; "
            "optionally `Connect-Timeout-Ms`. docs/api.md.",
        },
        "tags": tags,
        "paths": paths,
        "components": {
            "schemas": {**dict(sorted(schemas.found.items())), ERROR: CONNECT_ERROR},
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}],
    }
