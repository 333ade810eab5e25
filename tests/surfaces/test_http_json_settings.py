"""UpdateSettings over HTTP/JSON, where fields go by their proto3 JSON names
(docs/api.md, "HTTP/JSON"): the settings ``update_fields`` names may be
given so too, as the answer spells them; an unknown one is refused naming
``updateFields`` and the settings there are, and changes nothing."""

from __future__ import annotations

import pytest

from recallatron.client import Client
from recallatron.v1 import gateway_pb2 as pb
from recallatron_devkit.stack import Stack
from tests.conftest import Team
from tests.surfaces.httpjson import call, violations

pytestmark = pytest.mark.integration

UPDATE = "recallatron.v1.AdminService/UpdateSettings"


def settings(client: Client) -> tuple[float, int, bool]:
    s = client.ask(client.admin.GetSettings, pb.GetSettingsRequest).settings
    return round(s.dense_floor, 6), s.rerank_depth, s.members_may_edit


def test_update_fields_may_name_the_settings_as_the_json_names_them(
    stack: Stack, team: Team
) -> None:
    ada = team.clients["ada"]
    changed = {"denseFloor": 0.42, "rerankDepth": 7, "membersMayEdit": True}
    status, answer = call(
        stack.http_url, UPDATE, {"settings": changed, "updateFields": list(changed)}, ada.token
    )
    assert status == 200, answer
    assert {k: answer["settings"][k] for k in changed} == changed
    assert settings(ada) == (0.42, 7, True)
    # The proto names, as before.
    status, answer = call(
        stack.http_url,
        UPDATE,
        {"settings": {"rerankDepth": 9}, "updateFields": ["rerank_depth"]},
        ada.token,
    )
    assert status == 200, answer
    assert settings(ada) == (0.42, 9, True)


def test_an_unknown_setting_names_update_fields_and_the_settings_and_changes_nothing(
    stack: Stack, team: Team
) -> None:
    ada = team.clients["ada"]
    before = settings(ada)
    status, answer = call(
        stack.http_url,
        UPDATE,
        {"settings": {"denseFloor": 0.5}, "updateFields": ["denseFloor", "floor"]},
        ada.token,
    )
    assert status == 400, answer
    assert violations(answer) == ["updateFields"], answer
    assert "'floor'" in answer["message"] and "dense_floor" in answer["message"], answer
    assert settings(ada) == before
