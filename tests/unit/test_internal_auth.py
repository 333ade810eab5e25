"""Caller assertions (recallatron/internal_auth.py) without a stack."""

from __future__ import annotations

import time

import pytest

from recallatron import errors, internal_auth
from recallatron.v1 import common_pb2 as cpb

KEY = b"k" * 32
GET = internal_auth.store_method("GetMemories")
CALLER = cpb.Caller(
    workspace_id="w", member_id="m", role=cpb.ROLE_MEMBER, purpose=cpb.PURPOSE_AUDIT
)


def test_a_signed_assertion_verifies_for_its_methods_only() -> None:
    token = internal_auth.Signer(KEY, "test").member(CALLER, [GET])
    claims = internal_auth.verify(KEY, token, GET)
    assert (claims.kind, claims.workspace_id, claims.member_id) == ("member", "w", "m")
    assert (claims.role, claims.purpose) == (cpb.ROLE_MEMBER, cpb.PURPOSE_AUDIT)
    with pytest.raises(errors.Unauthenticated, match="not good for"):
        internal_auth.verify(KEY, token, internal_auth.store_method("CreateToken"))


@pytest.mark.parametrize(
    "token",
    ["", "v1", "v1.a.b.c", "v2.e30.AAAA", "v1.e30.AAAA", "v1.!!!.???", "v1." + "A" * 9000 + ".x"],
)
def test_malformed_or_unsigned_assertions_are_refused(token: str) -> None:
    with pytest.raises(errors.Unauthenticated):
        internal_auth.verify(KEY, token, GET)


def test_another_key_expiry_and_lifetime() -> None:
    token = internal_auth.Signer(b"x" * 32, "test").member(CALLER, [GET])
    with pytest.raises(errors.Unauthenticated, match="signature"):
        internal_auth.verify(KEY, token, GET)
    token = internal_auth.Signer(KEY, "test").member(CALLER, [GET])
    with pytest.raises(errors.Unauthenticated, match="expired"):
        internal_auth.verify(KEY, token, GET, now=time.time() + 60)
    token = internal_auth.Signer(KEY, "test", ttl=600).member(CALLER, [GET])
    with pytest.raises(errors.Unauthenticated, match="too long"):
        internal_auth.verify(KEY, token, GET)


def test_a_remembered_assertion_is_still_checked_on_every_call() -> None:
    token = internal_auth.Signer(KEY, "test").member(CALLER, [GET])
    assert internal_auth.verify(KEY, token, GET).member_id == "m"
    assert (KEY, token) in internal_auth._VERIFIED
    # Remembered, yet expiry, the method and the key count each time.
    with pytest.raises(errors.Unauthenticated, match="expired"):
        internal_auth.verify(KEY, token, GET, now=time.time() + 60)
    with pytest.raises(errors.Unauthenticated, match="not good for"):
        internal_auth.verify(KEY, token, internal_auth.store_method("CreateToken"))
    with pytest.raises(errors.Unauthenticated, match="signature"):
        internal_auth.verify(b"y" * 32, token, GET)
    # One character off is another token: checked from scratch.
    version, payload, signature = token.split(".")
    forged = f"{version}.{payload}.{'A' if signature[0] != 'A' else 'B'}{signature[1:]}"
    with pytest.raises(errors.Unauthenticated, match="signature"):
        internal_auth.verify(KEY, forged, GET)
    assert (KEY, forged) not in internal_auth._VERIFIED


def test_keys_must_be_long_enough() -> None:
    with pytest.raises(ValueError):
        internal_auth.load_key("short")
    with pytest.raises(ValueError):
        internal_auth.Signer(b"", "test")
    assert internal_auth.load_key() == b""
    assert len(internal_auth.load_key(internal_auth.new_key())) >= 32


def test_the_caller_must_be_the_asserted_one() -> None:
    claims = internal_auth.verify(KEY, internal_auth.Signer(KEY, "t").member(CALLER, [GET]), GET)
    leave = internal_auth.enter(claims, "token")
    try:
        internal_auth.check_caller(CALLER)
        for change in ({"member_id": "x"}, {"workspace_id": "x"}, {"role": cpb.ROLE_OWNER}):
            other = cpb.Caller()
            other.CopyFrom(CALLER)
            for k, v in change.items():
                setattr(other, k, v)
            with pytest.raises(errors.Unauthenticated):
                internal_auth.check_caller(other)
        with pytest.raises(errors.PermissionDenied):
            internal_auth.check_admin("w")  # a member is no owner, and no operator
        with pytest.raises(errors.Unauthenticated):
            internal_auth.check_admin("another workspace")
    finally:
        leave()
    with pytest.raises(errors.Unauthenticated):
        internal_auth.asserted()
