"""A memory's title and body are counted as they are kept, in Unicode NFC
(docs/api.md, "Limits"): text written decomposed (NFD, as macOS file names
and some input methods give it: "é" as "e" and a combining accent, a Hangul
syllable as two or three jamo) is kept composed, so a title of 200 such "é"
is 200 characters, not 400. It was refused "at most 300 characters"."""

from __future__ import annotations

import unicodedata
import uuid

import grpc
import pytest

from recallatron.client import Client
from recallatron_devkit.stack import Stack

pytestmark = pytest.mark.integration

E_ACUTE = "e\u0301"  # two code points, one in NFC
GA = "\u1100\u1161"  # Hangul jamo: one syllable, U+AC00, in NFC


@pytest.fixture()
def owner(stack: Stack, operator: Client) -> Client:
    ws = operator.create_workspace(f"nfd-{uuid.uuid4().hex[:12]}").workspace
    member = operator.create_member(ws.id, "ada", owner=True).member
    return Client(stack.gateway, operator.create_token(member.id, "nfd").token)


def test_decomposed_text_within_the_limits_as_kept_is_written(owner: Client) -> None:
    title, body = E_ACUTE * 200, GA * 12000  # 400 and 24,000 code points as sent
    made = owner.remember(title, body, kind="note").memory
    assert (made.title, made.body) == ("\u00e9" * 200, "\uac00" * 12000)
    fixed = owner.correct(made.id, 1, "accents", title=E_ACUTE * 300).memory
    assert fixed.title == unicodedata.normalize("NFC", E_ACUTE * 300)
    newer = owner.supersede(made.id, 2, "Caf" + E_ACUTE, GA * 20000, kind="note").memory
    assert (newer.title, len(newer.body)) == ("Caf\u00e9", 20000)
    derived = owner.derive([newer.id], "Summary " + E_ACUTE * 290).memory
    assert len(derived.title) == 298
    assert [m.title for m in owner.read([made.id, derived.id]).memories] == [
        fixed.title,
        derived.title,
    ]


def test_decomposed_text_past_the_limits_as_kept_is_refused(owner: Client) -> None:
    before = owner.list_memories().memories
    for title, body, field in (
        (E_ACUTE * 301, "", "title"),
        ("Hangul", GA * 20001, "body"),
    ):
        with pytest.raises(grpc.RpcError) as refused:
            owner.remember(title, body, kind="note")
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        said = refused.value.details() or ""
        assert said.startswith(f"{field}: at most"), said
    assert owner.list_memories().memories == before
