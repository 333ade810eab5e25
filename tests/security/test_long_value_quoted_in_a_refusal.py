"""A refusal that quotes a caller's long value reaches the caller as the
refusal it is: the store's message once carried the whole value, its trailers
outgrew what the gateway accepts, and the caller got INTERNAL. Found by
tests/security/test_fuzz_descriptors.py."""

from __future__ import annotations

import grpc
import pytest

from recallatron.client import Client
from recallatron.grpcclient import peer_status
from recallatron.grpcserver.status import MAX_MESSAGE_BYTES, clip
from recallatron.v1 import gateway_pb2 as pb
from recallatron.v1 import store_pb2
from tests.conftest import Team


def test_clip_keeps_whole_characters_within_the_limit() -> None:
    text = "é" * 5_000
    clipped = clip(text, MAX_MESSAGE_BYTES)
    assert len(clipped.encode()) <= MAX_MESSAGE_BYTES
    assert clipped.startswith("éé") and "5000 characters" in clipped
    assert clip("short", MAX_MESSAGE_BYTES) == "short"


@pytest.mark.integration
def test_an_unknown_settings_field_of_a_thousand_characters(team: Team, operator: Client) -> None:
    ada = team.clients["ada"]
    before = ada.call(ada.admin.GetSettings, pb.GetSettingsRequest())
    with pytest.raises(grpc.RpcError) as caught:
        ada.call(
            ada.admin.UpdateSettings,
            pb.UpdateSettingsRequest(
                settings=store_pb2.WorkspaceSettings(), update_fields=["é" * 1001]
            ),
        )
    status = peer_status(caught.value)
    assert status.code == grpc.StatusCode.INVALID_ARGUMENT, status
    assert any(f.startswith("update_fields") for f in status.fields), status
    assert ada.call(ada.admin.GetSettings, pb.GetSettingsRequest()) == before
