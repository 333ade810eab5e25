"""Domain errors. Domain code raises these; servers map them to gRPC status
codes in one place (:mod:`recallatron.grpcserver`)."""

from __future__ import annotations

from typing import Any


class DomainError(Exception):
    """Base of every error a caller may see. The message never names rows the
    caller may not see."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidArgument(DomainError):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.description = message


class NotFound(DomainError):
    pass


class FailedPrecondition(DomainError):
    """``subject`` names what failed; ``reason`` is the violation's type, the
    one word a client tells refusals apart by."""

    def __init__(self, message: str, subject: str = "", reason: str = "TRUST") -> None:
        super().__init__(message)
        self.subject = subject
        self.reason = reason


class RevisionMismatch(DomainError):
    """The loser of a compare-and-set race (ABORTED)."""

    def __init__(self, memory_id: str, expected: int, current: int) -> None:
        super().__init__(
            f"expected_revision: memory {memory_id} is at revision {current}, not {expected}"
        )
        self.memory_id = memory_id
        self.expected = expected
        self.current = current


class AlreadyExists(DomainError):
    pass


class Unauthenticated(DomainError):
    pass


class PermissionDenied(DomainError):
    pass


# The retry hint of an UNAVAILABLE that names none of its own.
RETRY_AFTER_SECONDS = 1.0


class Unavailable(DomainError):
    """A dependency cannot serve now; ``retry_after`` (seconds) is the hint
    sent as google.rpc.RetryInfo: every UNAVAILABLE says when to try again."""

    def __init__(self, message: str, retry_after: float = RETRY_AFTER_SECONDS) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class ResourceExhausted(DomainError):
    """Over a limit; ``retry_after`` (seconds, 0: none given) is the hint
    sent as google.rpc.RetryInfo."""

    def __init__(self, message: str, retry_after: float = 0.0) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class DeadlineExceeded(DomainError):
    """The call's deadline passed (or its client went away) before the work."""


class Relayed(DomainError):
    """A status from a peer service, passed on to our caller unchanged
    (code, message and rich details)."""

    def __init__(self, code: int, message: str, details: list[Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.details = details or []
