"""The names the control plane gives workspaces and members: a workspace's
slug, a member's handle, and an id in any spelling an id field takes."""

from __future__ import annotations

import re
import uuid

# \Z, not $: "$" lets a trailing newline through, which the database's own
# check then refuses (an INTERNAL error, and a database made for nothing).
SLUG_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}\Z")
HANDLE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}\Z")
HANDLE_RULE = "1-63 characters of letters, digits, '.', '_' and '-'"
# The name the audit log gives the operator's changes (docs/api.md): no new
# member takes it, in any case, so that an entry read by handle is never a
# member's passing for the operator's.
OPERATOR_HANDLE = "operator"
SLUG_RULE = "1-63 characters of a-z, 0-9 and '-', starting with a letter or digit, not a UUID"


def spelled_id(given: str) -> str | None:
    """The id ``given`` spells, in the canonical form, when it reads as a
    UUID in any spelling an id field takes (32 hex digits, hyphens anywhere,
    any case); None otherwise."""
    try:
        return str(uuid.UUID(given))
    except ValueError:
        return None


def slug_ok(slug: str) -> bool:
    """A slug names one workspace: never an id in any spelling (commands
    take either, and read one that parses as a UUID as an id)."""
    return bool(SLUG_RE.match(slug or "")) and spelled_id(slug) is None
