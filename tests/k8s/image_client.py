"""Run by tests/k8s/test_image.py inside a container of the image (`podman exec
-i ... python - COMMAND ...` with this file on stdin), so it sees the stack
on the pod network's loopback and uses the image's own client library. Prints
one JSON document."""

from __future__ import annotations

import json
import sys
import uuid

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from recallatron.client import Client


def health(ports: list[str]) -> dict[str, str]:
    """Overall health (the empty service name, as the manifests' gRPC probes ask)."""
    out = {}
    for port in ports:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            try:
                resp = stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=2)
                out[port] = health_pb2.HealthCheckResponse.ServingStatus.Name(resp.status)
            except grpc.RpcError as exc:
                out[port] = f"error {exc.code().name}"  # type: ignore[attr-defined]
    return out


def setup(gateway: str, admin_token: str) -> dict[str, str]:
    admin = Client(gateway, admin_token)
    ws = admin.create_workspace(f"smoke-{uuid.uuid4().hex[:8]}").workspace
    member = admin.create_member(ws.id, "ada", owner=True).member
    token = admin.create_token(member.id, "smoke").token
    return {"workspace_id": ws.id, "token": token}


def remember(gateway: str, token: str, title: str, body: str) -> dict[str, str]:
    made = Client(gateway, token).remember(title, body, audience_to="workspace").memory
    return {"id": made.id}


def recall(gateway: str, token: str, query: str, mode: str) -> dict[str, object]:
    outcome = Client(gateway, token).recall(query, mode=mode).outcome
    return {
        "dense_available": outcome.dense_available,
        "dense_unavailable_reason": outcome.dense_unavailable_reason,
        "results": [
            {
                "id": r.memory.id,
                "title": r.memory.title,
                "dense_rank": r.scores.dense_rank,
                "dense_cosine": round(r.scores.dense_cosine, 4),
            }
            for r in outcome.results
        ],
    }


def status(gateway: str, token: str) -> dict[str, int]:
    s = Client(gateway, token).status()
    return {"memories": s.memories, "embedded": s.embedded, "pending": s.pending}


COMMANDS = {"setup": setup, "remember": remember, "recall": recall, "status": status}

if __name__ == "__main__":
    command, *args = sys.argv[1:]
    result = health(args) if command == "health" else COMMANDS[command](*args)
    print(json.dumps(result))
