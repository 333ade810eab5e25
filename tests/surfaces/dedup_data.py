"""Shared by the dedup tests: near-duplicate texts (cosine well above 0.80
with all-MiniLM-L6-v2) and a wait for the embedding job."""

from __future__ import annotations

import time
from collections.abc import Sequence

from recallatron_devkit.stack import Stack
from tests import dbutil
from tests.conftest import Team

# (title, body) pairs that say the same thing in other words.
NEAR_DUPLICATES = [
    (
        ("The staging database is read-only on weekends", "No writes to staging on Sat or Sun."),
        ("Staging database is read only at weekends", "Staging takes no writes at the weekend."),
    ),
    (
        ("Ada prefers code reviews in the morning", "Send Ada review requests before noon."),
        ("Ada likes to review code in the mornings", "Ask Ada for reviews before midday."),
    ),
    (
        ("The VPN certificate expires on 3 March", "Renew the VPN certificate before 3 March."),
        ("VPN certificate expiry is 3 March", "The VPN cert must be renewed by 3 March."),
    ),
    (
        ("Bob's dentist appointment is Thursday at 4pm", "Bob is away Thursday afternoon."),
        ("Bob has a dentist appointment on Thursday at 4pm", "Bob is out Thursday afternoon."),
    ),
    (
        ("Cy is allergic to peanuts", "No peanuts at team lunches Cy attends."),
        ("Cy has a peanut allergy", "Team lunches with Cy must avoid peanuts."),
    ),
]
UNRELATED = [
    ("The printer on floor two jams with thick paper", ""),
    ("Invoices are paid on the 15th of each month", ""),
]


def wait_embedded(stack: Stack, team: Team, ids: Sequence[str], timeout: float = 90) -> None:
    """Until the embedding job has written a vector for every id."""
    deadline = time.monotonic() + timeout
    while True:
        rows = dbutil.query(
            stack,
            team.database_name,
            "SELECT count(DISTINCT memory_id) FROM memory_embedding"
            " WHERE memory_id = ANY(%s::uuid[])",
            (list(ids),),
        )
        if rows[0][0] == len(set(ids)):
            return
        assert time.monotonic() < deadline, f"only {rows[0][0]} of {len(ids)} embedded"
        time.sleep(0.2)
