"""What the listing tests (ListMembers, ListTokens, ListWorkspaces) share:
walking a listing's pages, crafting page tokens, refusals, and many tokens
written straight into the control database (faster than the API by far)."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Sequence
from typing import Any

import grpc
import psycopg
import pytest

from recallatron_devkit.stack import Stack


def error(call: Callable[[], Any]) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as info:
        call()
    return info.value


def every_page(read: Callable[[str], Any], items: str, page_size: int) -> list[Any]:
    """Every page of a listing, asked for one at a time: ``read`` answers the
    page a token starts (empty: the first); each holds 1 to ``page_size`` of
    its ``items``."""
    listed: list[Any] = []
    token = ""
    while True:
        page = read(token)
        assert 0 < len(getattr(page, items)) <= page_size
        listed.extend(getattr(page, items))
        token = page.next_page_token
        if not token:
            return listed


def page_token(data: dict[str, Any]) -> str:
    """A page token holding ``data``, as the store spells one."""
    return base64.urlsafe_b64encode(json.dumps(data).encode()).decode()


def _control(stack: Stack) -> psycopg.Connection:
    from services.store.infrastructure.db import CONTROL_DATABASE
    from tests import dbutil

    return psycopg.connect(dbutil.workspace_url(stack, CONTROL_DATABASE))


def add_live_tokens(
    stack: Stack,
    members: Sequence[str],
    count: int,
    sharing: int = 1,
    first_revoked: bool = False,
) -> None:
    """``count`` tokens for each of ``members``, a second apart from a day
    ago on, ``sharing`` at a time made at one instant (the id orders them);
    each member's first revoked when ``first_revoked``, the rest live."""
    with _control(stack) as conn:
        conn.execute(
            "INSERT INTO access_token (id, member_id, token_sha256, label, created_at,"
            " revoked_at) SELECT gen_random_uuid(), m, sha256(gen_random_uuid()::text::bytea),"
            " 'seeded', now() - interval '1 day' + (g / %s) * interval '1 second',"
            " CASE WHEN %s AND g = 0 THEN now() END"
            " FROM unnest(%s::uuid[]) m, generate_series(0, %s - 1) g",
            (sharing, first_revoked, list(members), count),
        )


def add_ended_tokens(stack: Stack, member: str, count: int) -> None:
    """``count`` expired tokens for ``member``, made a minute apart from 30
    days ago on, each expired a day after: older than any live one."""
    with _control(stack) as conn:
        conn.execute(
            "INSERT INTO access_token (id, member_id, token_sha256, label, created_at,"
            " expires_at) SELECT gen_random_uuid(), %s, sha256(gen_random_uuid()::text::bytea),"
            " 'an hour', now() - interval '30 days' + g * interval '1 minute',"
            " now() - interval '29 days' + g * interval '1 minute'"
            " FROM generate_series(1, %s) g",
            (member, count),
        )
