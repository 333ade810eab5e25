"""The one mapping from domain errors (recallatron/errors.py) to gRPC status
codes with rich details: BadRequest naming the field, ErrorInfo with the
current revision, PreconditionFailure for trust rules (and the few other
preconditions, each with its own type), RetryInfo."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from google.protobuf import any_pb2, duration_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2

from recallatron import errors


def _pack(message: Any) -> any_pb2.Any:
    packed = any_pb2.Any()
    packed.Pack(message)
    return packed


# The most bytes (UTF-8) of a status message, and of each text of its
# details, that a status carries. A message quoting a caller's long value
# would otherwise outgrow the trailers a peer accepts (16 KiB by default,
# percent-encoded) and reach the caller as a transport error instead of the
# refusal it is.
MAX_MESSAGE_BYTES = 1024
MAX_DETAIL_BYTES = 512


def clip(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` UTF-8 bytes (and a note of its
    length), whole characters only."""
    raw = text.encode()
    if len(raw) <= limit:
        return text
    note = f"… ({len(text)} characters)"
    head = raw[: max(0, limit - len(note.encode()))].decode(errors="ignore")
    return head + note


def status_for(error: errors.DomainError) -> status_pb2.Status:
    """The one mapping from domain errors to gRPC status with rich details."""
    details: list[any_pb2.Any] = []
    if isinstance(error, errors.Relayed):
        return status_pb2.Status(
            code=error.code, message=clip(error.message, MAX_MESSAGE_BYTES), details=error.details
        )
    if isinstance(error, errors.InvalidArgument):
        code = code_pb2.INVALID_ARGUMENT
        details.append(
            _pack(
                error_details_pb2.BadRequest(
                    field_violations=[
                        error_details_pb2.BadRequest.FieldViolation(
                            field=clip(error.field, MAX_DETAIL_BYTES),
                            description=clip(error.description, MAX_DETAIL_BYTES),
                        )
                    ]
                )
            )
        )
    elif isinstance(error, errors.RevisionMismatch):
        code = code_pb2.ABORTED
        details.append(
            _pack(
                error_details_pb2.ErrorInfo(
                    reason="REVISION_MISMATCH",
                    domain="recallatron",
                    metadata={
                        "memory_id": error.memory_id,
                        "expected_revision": str(error.expected),
                        "current_revision": str(error.current),
                    },
                )
            )
        )
    elif isinstance(error, errors.FailedPrecondition):
        code = code_pb2.FAILED_PRECONDITION
        if error.subject:
            details.append(
                _pack(
                    error_details_pb2.PreconditionFailure(
                        violations=[
                            error_details_pb2.PreconditionFailure.Violation(
                                type=error.reason,
                                subject=clip(error.subject, MAX_DETAIL_BYTES),
                                description=clip(error.message, MAX_DETAIL_BYTES),
                            )
                        ]
                    )
                )
            )
    elif isinstance(error, errors.NotFound):
        code = code_pb2.NOT_FOUND
    elif isinstance(error, errors.AlreadyExists):
        code = code_pb2.ALREADY_EXISTS
    elif isinstance(error, errors.Unauthenticated):
        code = code_pb2.UNAUTHENTICATED
    elif isinstance(error, errors.PermissionDenied):
        code = code_pb2.PERMISSION_DENIED
    elif isinstance(error, errors.Unavailable | errors.ResourceExhausted):
        code = (
            code_pb2.UNAVAILABLE
            if isinstance(error, errors.Unavailable)
            else code_pb2.RESOURCE_EXHAUSTED
        )
        if error.retry_after > 0:
            delay = duration_pb2.Duration()
            delay.FromTimedelta(timedelta(seconds=error.retry_after))
            details.append(_pack(error_details_pb2.RetryInfo(retry_delay=delay)))
    elif isinstance(error, errors.DeadlineExceeded):
        code = code_pb2.DEADLINE_EXCEEDED
    else:
        code = code_pb2.INTERNAL
    return status_pb2.Status(
        code=code, message=clip(error.message, MAX_MESSAGE_BYTES), details=details
    )
