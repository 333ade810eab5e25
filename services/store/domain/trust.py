"""The derivation rules of design §4, as plain functions: a derived memory gets
the intersection of its sources' audiences and purposes, never the union, and
a caller may narrow that, never widen it."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from recallatron import errors

# None stands for the whole workspace; a string is one member id.
AudienceValue = str | None


@dataclass(frozen=True)
class Trust:
    audience: AudienceValue
    purposes: frozenset[str]


class _Empty:
    pass


EMPTY = _Empty()


def intersect_audiences(audiences: Iterable[AudienceValue]) -> AudienceValue | _Empty:
    """workspace ∩ X = X; X ∩ X = X; X ∩ Y = empty."""
    members = {a for a in audiences if a is not None}
    if not members:
        return None
    if len(members) == 1:
        return next(iter(members))
    return EMPTY


def intersect(sources: Sequence[Trust]) -> Trust:
    """The trust of a memory derived from these sources. FAILED_PRECONDITION
    naming what came out empty."""
    if not sources:
        raise errors.InvalidArgument("source_ids", "at least one source is required")
    audience = intersect_audiences(s.audience for s in sources)
    if isinstance(audience, _Empty):
        raise errors.FailedPrecondition(
            "audience: the sources' audiences do not intersect (they are private to "
            "different members)",
            subject="audience",
        )
    purposes = frozenset.intersection(*(s.purposes for s in sources))
    if not purposes:
        raise errors.FailedPrecondition(
            "purposes: the sources share no purpose", subject="purposes"
        )
    return Trust(audience, purposes)


def narrow(
    allowed: Trust,
    audience: AudienceValue | _Empty = EMPTY,
    purposes: frozenset[str] | None = None,
    bound: str = "the sources'",
) -> Trust:
    """Applies a caller's requested audience/purposes (EMPTY / None: keep the
    allowed value). Narrowing is fine; anything wider is refused, its message
    naming whose trust (``bound``) it would exceed."""
    result_audience = allowed.audience
    if not isinstance(audience, _Empty):
        if allowed.audience is not None and audience != allowed.audience:
            raise errors.InvalidArgument(
                "audience", f"would widen {bound} audience; a derivation may only narrow it"
            )
        result_audience = audience
    result_purposes = allowed.purposes
    if purposes:
        extra = purposes - allowed.purposes
        if extra:
            raise errors.InvalidArgument(
                "purposes",
                f"{', '.join(sorted(extra))} not among {bound} purposes; a derivation may "
                "only narrow them",
            )
        result_purposes = purposes
    return Trust(result_audience, result_purposes)


def eligible(trust: Trust, forgotten: bool, member_id: str, purpose: str) -> bool:
    """design §4 eligibility, as the row-level security policy states it in SQL.
    Used by tests as the oracle the database is checked against."""
    return (
        not forgotten
        and (trust.audience is None or trust.audience == member_id)
        and purpose in trust.purposes
    )
