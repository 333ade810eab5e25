"""HTTP/JSON beside the gateway's gRPC server: the Connect protocol's unary
calls (POST /<package>.<Service>/<Method>, JSON or binary protobuf), served
by connect-python from the same protos, and their OpenAPI document.

A thin adapter: each call's token is checked by the gateway's own
authentication before its body is read (app.py), then the call is relayed to
the gateway's own gRPC port (relay.py), so authentication, scopes, limits,
validation, errors and metrics are the gRPC path's, with no handler of its
own. docs/api.md, "HTTP/JSON"."""

from services.gateway.httpjson.app import HttpJsonApp
from services.gateway.httpjson.serve import HttpJsonServer

__all__ = ["HttpJsonApp", "HttpJsonServer"]
