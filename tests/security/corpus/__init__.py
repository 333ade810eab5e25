"""Malformed and hostile requests for every tool and the admin surface, with
the documented answer: the status code and the field its message names.
(tests/integration/test_validation.py holds the first ~50 write rules; these
are others.) A builder gets the fixture ids and returns the request.
The cases live in a module per subject (writes, revisions, reads, admin), the
builders and codes they share in base."""

from __future__ import annotations

from tests.security.corpus import admin, reads, revisions, writes
from tests.security.corpus.base import OK, Case

CASES: list[Case] = [*writes.CASES, *revisions.CASES, *reads.CASES, *admin.CASES]

__all__ = ["CASES", "OK", "Case"]
