"""Helpers of the HTTP/JSON tests: a member with a token of their own in a
workspace of their own, memories that recall finds, and a Connect call made
with nothing but the standard library (as curl would make it)."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass
from typing import Any

from recallatron.client import Client
from recallatron_devkit.stack import Stack

MEMORIES = (
    ("Deploys freeze on Fridays", "No production deploys after noon on Fridays."),
    ("The standup moved to 9:30", "From Monday the daily standup starts at 9:30."),
    ("Billing runs on Postgres 18", "The billing service moved to Postgres 18 in March."),
)
QUERY = "when is the standup"


@dataclass
class Member:
    token: str
    client: Client
    workspace_id: str
    member_id: str


def owner_with_memories(stack: Stack, operator: Client) -> Member:
    """A workspace's owner, its memories remembered and embedded (so that
    every later recall sees the same index)."""
    ws = operator.create_workspace(f"h-{uuid.uuid4().hex[:12]}").workspace
    member = operator.create_member(ws.id, "ada", owner=True).member
    token = operator.create_token(member.id, "http").token
    client = Client(stack.gateway, token)
    for title, body in MEMORIES:
        client.remember(title, body, kind="fact", audience_to="workspace")
    deadline = time.monotonic() + 120
    while client.status().pending and time.monotonic() < deadline:
        time.sleep(0.2)
    assert client.status().pending == 0, "the embedding job did not catch up"
    return Member(token, client, ws.id, member.id)


def call(
    base: str,
    method: str,
    body: bytes | dict[str, Any],
    token: str | None,
    content_type: str = "application/json",
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, Any]]:
    """POST /<method> (``recallatron.v1.Service/Method``): status and JSON answer."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(f"{base}/{method}", data=data, method="POST")
    request.add_header("Content-Type", content_type)
    for key, value in (headers or {}).items():
        request.add_header(key, value)
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=60) as resp:
            raw = resp.read()
            if resp.headers.get("Content-Type") == "application/proto":
                return resp.status, {"proto": raw}
            return resp.status, json.loads(raw or b"{}")
    except urllib.error.HTTPError as exc:
        raw = exc.read()
        return exc.code, json.loads(raw) if raw else {}


def violations(answer: dict[str, Any]) -> list[str]:
    """The fields a Connect error's google.rpc.BadRequest names."""
    return [
        v["field"]
        for d in answer.get("details", [])
        if d.get("type") == "google.rpc.BadRequest"
        for v in d.get("debug", {}).get("fieldViolations", [])
    ]
