"""What a recall's dense arm came to (services.rank.pipeline): its rows, or
why it did not contribute; and how many memories the caller may see it
cannot find yet, with the words the outcome says it in."""

from __future__ import annotations

from dataclasses import dataclass

from recallatron.vocabulary import MAX_NOT_EMBEDDED_COUNTED
from services.rank.ports import DenseArm


@dataclass
class DenseOutcome:
    arm: DenseArm | None
    reason: str = ""
    kind: str = ""
    # What the store said of the memories without a vector, when it answered.
    not_embedded: int = 0

    def behind_reason(self) -> str:
        """Why the rows of an arm that answered may be missing memories;
        empty when it did not answer (its own reason says why) or is not
        behind."""
        return dense_behind(self.not_embedded) if self.arm is not None else ""


def dense_behind(not_embedded: int) -> str:
    """Why an answering dense arm's rows may be missing memories: the caller
    may see ``not_embedded`` (counted up to MAX_NOT_EMBEDDED_COUNTED) it
    cannot find yet. Empty when there are none."""
    if not_embedded <= 0:
        return ""
    many = (
        f"at least {MAX_NOT_EMBEDDED_COUNTED:,}"
        if not_embedded >= MAX_NOT_EMBEDDED_COUNTED
        else str(not_embedded)
    )
    if not_embedded == 1:
        return f"{many} memory you may see is not embedded yet: the dense arm cannot find it"
    return f"{many} memories you may see are not embedded yet: the dense arm cannot find them"
