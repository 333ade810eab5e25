"""The derivation rules of design §4 as properties."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from recallatron import errors
from recallatron.vocabulary import PURPOSES
from services.store.domain.trust import EMPTY, Trust, eligible, intersect, narrow

MEMBERS = ["m1", "m2", "m3"]
audiences = st.one_of(st.none(), st.sampled_from(MEMBERS))
purpose_sets = st.frozensets(st.sampled_from(PURPOSES), min_size=1)
trusts = st.builds(Trust, audiences, purpose_sets)


@given(st.lists(trusts, min_size=1, max_size=6))
def test_intersection_is_never_wider_than_any_source(sources: list[Trust]) -> None:
    members = {s.audience for s in sources if s.audience is not None}
    common = frozenset.intersection(*(s.purposes for s in sources))
    if len(members) > 1 or not common:
        with pytest.raises(errors.FailedPrecondition) as err:
            intersect(sources)
        assert ("audience" if len(members) > 1 else "purposes") in err.value.message
        return
    result = intersect(sources)
    assert result.purposes == common
    assert result.audience == (next(iter(members)) if members else None)
    # Whoever may see the result (for any purpose) may see every source.
    for member in MEMBERS:
        for purpose in PURPOSES:
            if eligible(result, False, member, purpose):
                assert all(eligible(s, False, member, purpose) for s in sources)


@given(trusts, st.one_of(st.just(EMPTY), audiences), st.one_of(st.none(), purpose_sets))
def test_narrowing_never_widens(allowed: Trust, audience: object, purposes: object) -> None:
    try:
        result = narrow(allowed, audience, purposes)  # type: ignore[arg-type]
    except errors.InvalidArgument as err:
        assert err.field in ("audience", "purposes")
        widened_audience = (
            audience is not EMPTY and allowed.audience is not None and audience != allowed.audience
        )
        widened_purposes = bool(purposes) and not purposes <= allowed.purposes  # type: ignore[operator]
        assert widened_audience or widened_purposes
        return
    assert result.purposes <= allowed.purposes
    for member in MEMBERS:
        for purpose in PURPOSES:
            if eligible(result, False, member, purpose):
                assert eligible(allowed, False, member, purpose)


def test_examples_from_the_spec() -> None:
    assert intersect([Trust(None, frozenset({"assist"})), Trust("x", frozenset({"assist"}))]) == (
        Trust("x", frozenset({"assist"}))
    )
    with pytest.raises(errors.FailedPrecondition, match="audience"):
        intersect([Trust("x", frozenset({"assist"})), Trust("y", frozenset({"assist"}))])
    with pytest.raises(errors.FailedPrecondition, match="purposes"):
        intersect([Trust(None, frozenset({"assist"})), Trust(None, frozenset({"audit"}))])
    assert not eligible(Trust(None, frozenset({"assist"})), True, "x", "assist")
