"""A write naming memories it builds on (remember's about_ids, derive's and
supersede's source_ids) that the caller does not see, or that do not exist,
is NOT_FOUND naming the field and which one ("source_ids[1]: memory not
found"), as read names the ids it could not find: of fifty sources, one
forgotten meanwhile, the caller was told "a source memory was not found" and
had to read each to learn which. Hidden and unknown answer alike."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import grpc
import pytest

from tests.conftest import Team

pytestmark = pytest.mark.integration


def _not_found(call: Callable[..., object], *args: object, **kwargs: object) -> str:
    with pytest.raises(grpc.RpcError) as refused:
        call(*args, **kwargs)
    assert refused.value.code() == grpc.StatusCode.NOT_FOUND, refused.value.details()
    return refused.value.details() or ""


def test_the_missing_one_is_named_by_its_index(team: Team) -> None:
    ada, bob = team.clients["ada"], team.clients["bob"]
    shared = ada.remember("Shared", "For everyone", audience_to="workspace").memory.id
    other = ada.remember("Other", "For everyone too", audience_to="workspace").memory.id
    private = bob.remember("Bob's own", "Only Bob").memory.id
    gone = ada.remember("Gone", "Forgotten", audience_to="workspace").memory.id
    ada.forget(gone, "no longer true")
    before = ada.list_memories().memories
    for hidden in (private, str(uuid.uuid4()), gone):
        said = _not_found(ada.remember, "About", "b", about=[shared, other, hidden])
        assert said == "about_ids[2]: memory not found", said
        said = _not_found(ada.derive, [shared, hidden, other], "A summary")
        assert said == "source_ids[1]: memory not found", said
        said = _not_found(ada.supersede, other, 1, "Newer", sources=[hidden, shared])
        assert said == "source_ids[0]: memory not found", said
    assert ada.list_memories().memories == before
