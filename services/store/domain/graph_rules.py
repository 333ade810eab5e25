"""Input rules of the graph (design §3, §7): identifiers, values, times, and
the one normalisation by which names and aliases are looked up. Plain
functions; the limits are recallatron.vocabulary's, which the tool schemas
state too."""

from __future__ import annotations

import re
import unicodedata
from datetime import datetime

from recallatron import errors
from recallatron.vocabulary import IDENTIFIER_PATTERN, MAX_IDENTIFIER

_IDENTIFIER = re.compile(IDENTIFIER_PATTERN)
_SPACES = re.compile(r"\s+")


def name_key(name: str) -> str:
    """The lookup key of a name or alias: compatibility-decomposed, accents
    (combining marks) dropped, case folded, inner runs of spaces made one and
    the ends stripped. "  Zoë  Ångström" and "zoe angstrom" share a key."""
    decomposed = unicodedata.normalize("NFKD", name)
    bare = "".join(c for c in decomposed if not unicodedata.combining(c))
    return _SPACES.sub(" ", bare.casefold()).strip()


# Characters that show nothing: controls and format characters (zero-width
# spaces and joiners, the byte-order mark).
_INVISIBLE = frozenset({"Cc", "Cf"})


def shows_something(name: str) -> bool:
    """Whether ``name`` keeps a visible character once folded: one that does
    not (only accents, only zero-width characters) can name no entity."""
    return _shows(name_key(name))


def _shows(key: str) -> bool:
    return not all(unicodedata.category(c) in _INVISIBLE for c in key)


def given_name_key(name: str, field: str) -> str:
    """:func:`name_key` of a name given to write or look up. A name that
    folds to nothing visible (only accents, only zero-width characters) can
    name no entity: refused alike by writes and lookups, naming ``field``."""
    key = name_key(name)
    if not _shows(key):
        raise errors.InvalidArgument(
            field,
            "has nothing visible once folded (accents and other combining marks are dropped;"
            " zero-width characters show nothing)",
        )
    return key


def identifier(value: str, field: str) -> str:
    if not value:
        raise errors.InvalidArgument(field, "is required")
    # fullmatch: the pattern's $ alone also matches before a final newline.
    if len(value) > MAX_IDENTIFIER or not _IDENTIFIER.fullmatch(value):
        raise errors.InvalidArgument(
            field,
            f"must be an identifier: a lowercase letter, then lowercase letters, digits or _,"
            f" at most {MAX_IDENTIFIER} characters",
        )
    return value


def valid_span(
    valid_from: datetime | None, valid_until: datetime | None, field: str
) -> tuple[datetime | None, datetime | None]:
    if valid_from is not None and valid_until is not None and valid_until < valid_from:
        raise errors.InvalidArgument(f"{field}.valid_until", "must not lie before valid_from")
    return valid_from, valid_until
