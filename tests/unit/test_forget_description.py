"""The forget tool tells the agent what the tombstone keeps (design §8.6):
the reason, exactly as given, so the content must not go into it."""

from __future__ import annotations

from recallatron.tools import TOOLS


def test_forget_says_the_tombstone_keeps_the_reason() -> None:
    forget = next(t for t in TOOLS if t.name == "forget")
    text = forget.description.lower()
    assert "tombstone keeps the reason" in text
    assert "never repeat the forgotten content" in text
