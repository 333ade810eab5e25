"""Token lifetimes and rotation graces (issue 34): the bounds the store keeps,
the Duration translation, and the CLI's duration syntax."""

from __future__ import annotations

from datetime import timedelta

import pytest
from google.protobuf.duration_pb2 import Duration

from recallatron import convert, errors
from recallatron_cli.admin import duration
from recallatron_cli.common import Refused
from services.store.domain.tokens import (
    DEFAULT_ROTATION_GRACE,
    rotation_grace,
    token_lifetime,
)


def test_a_lifetime_is_unset_or_positive_and_bounded() -> None:
    assert token_lifetime(None) is None
    assert token_lifetime(timedelta(days=90)) == timedelta(days=90)
    for bad in (timedelta(0), timedelta(seconds=-1), timedelta(days=3651)):
        with pytest.raises(errors.InvalidArgument) as info:
            token_lifetime(bad)
        assert info.value.field == "expires_in"


def test_a_grace_defaults_to_a_day_may_be_zero_and_is_bounded() -> None:
    assert rotation_grace(None) == DEFAULT_ROTATION_GRACE == timedelta(hours=24)
    assert rotation_grace(timedelta(0)) == timedelta(0)
    for bad in (timedelta(seconds=-1), timedelta(days=91)):
        with pytest.raises(errors.InvalidArgument) as info:
            rotation_grace(bad)
        assert info.value.field == "grace"


def test_a_duration_field_is_read_or_refused_by_name() -> None:
    assert convert.duration(Duration(), False, "expires_in") is None
    assert convert.duration(Duration(seconds=90), True, "expires_in") == timedelta(seconds=90)
    for bad in (Duration(seconds=1, nanos=-1), Duration(seconds=10**12)):
        with pytest.raises(errors.InvalidArgument) as info:
            convert.duration(bad, True, "expires_in")
        assert info.value.field == "expires_in"


def test_the_cli_reads_durations_as_operators_write_them() -> None:
    assert duration(None, "expires_in", "--expires-in") is None
    assert duration("90d", "expires_in", "--expires-in") == timedelta(days=90)
    assert duration("1h30m", "grace", "--grace") == timedelta(hours=1, minutes=30)
    assert duration("0", "grace", "--grace") == timedelta(0)
    # A unit twice was read as its last part; one past a time's range crashed.
    for bad in ("", "-1h", "90", "1.5h", "12 h", "1y", "1d1d", "1h2h", "999999999d24h"):
        with pytest.raises(Refused) as info:
            duration(bad, "expires_in", "--expires-in")
        assert info.value.message.startswith("INVALID_ARGUMENT: expires_in")
