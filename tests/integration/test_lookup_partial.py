"""Lookup by part of a name (design §7), with ``partial``: a prefix of a
name, of one of its words or of an alias, and a name with a typo find the
entity; exact matches come first; what the caller may not see answers as what
does not exist."""

from __future__ import annotations

import functools

import grpc
import psycopg
import pytest

from recallatron.client import Client
from recallatron_devkit.stack import Stack
from services.store.domain.graph import lookup_statement
from services.store.infrastructure.db import APP_ROLE, SET_LOCALS
from tests.conftest import Team
from tests.dbutil import workspace_url
from tests.listings import error

pytestmark = pytest.mark.integration


def names(client: Client, name: str, purpose: str = "assist", partial: bool = True) -> list[str]:
    found = client.lookup(name, purpose=purpose, partial=partial).entities
    return [card.name for card in found]


def entity(client: Client, name: str, alias: str = "", audience_to: str | None = None) -> None:
    aliases = [{"entity": {"name": name}, "alias": alias}] if alias else []
    client.remember(f"About {name}", mention_names=[name], aliases=aliases, audience_to=audience_to)


def test_prefixes_and_typos_find_entities_exact_first(team: Team) -> None:
    ada = team.clients["ada"]
    for name in ("Robin Goodwin", "Roberta Lindqvist", "Rob", "Apollo"):
        entity(ada, name, audience_to="workspace")
    entity(ada, "Margaret Oyelaran", alias="Maggie", audience_to="workspace")

    # The exact name first, then the names it begins, shortest first; without
    # partial, the exact name only.
    assert names(ada, "rob") == ["Rob", "Robin Goodwin", "Roberta Lindqvist"]
    assert names(ada, "rob", partial=False) == ["Rob"]
    assert names(ada, "goodw", partial=False) == []
    # A prefix before a name alike despite a typo ("Rob" is one letter off).
    assert names(ada, "Robe")[:2] == ["Roberta Lindqvist", "Rob"]
    # A word of the name, and an alias, by their beginnings.
    assert names(ada, "goodw") == ["Robin Goodwin"]
    assert names(ada, "magg") == ["Margaret Oyelaran"]
    assert names(ada, "Oyel") == ["Margaret Oyelaran"]
    # A typo, in the name or in one of its words.
    assert names(ada, "Robin Godwin")[0] == "Robin Goodwin"
    assert names(ada, "Lindquist") == ["Roberta Lindqvist"]
    assert names(ada, "Apolo") == ["Apollo"]
    # Exact still wins over a longer name it prefixes.
    entity(ada, "Robin", audience_to="workspace")
    assert names(ada, "robin")[:2] == ["Robin", "Robin Goodwin"]
    # Short or wildcard-only names match exactly only.
    assert names(ada, "Ro") == []
    assert names(ada, "%%%") == []
    assert names(ada, "r_b") == []


def test_hidden_names_answer_like_names_that_do_not_exist(team: Team) -> None:
    ada, bob = team.clients["ada"], team.clients["bob"]
    entity(ada, "Zephyrine Quartermaine", alias="Zeph")  # private to ada
    assert names(ada, "Zephyr") == ["Zephyrine Quartermaine"]
    assert names(ada, "Quartermane") == ["Zephyrine Quartermaine"]
    hidden = [
        bob.lookup(n, partial=True)
        for n in ("Zephyr", "Quartermane", "zeph", "Zephyrine Quartermaine")
    ]
    missing = [
        bob.lookup(n, partial=True) for n in ("Xanthippe", "Quillfeather", "xant", "Xanthippe Orr")
    ]
    assert all(r.entities == [] for r in hidden + missing)
    assert [r.SerializeToString() for r in hidden] == [r.SerializeToString() for r in missing]
    # A purpose the memory was not stored for sees nothing by any route either.
    assert names(ada, "Zephyr", purpose="audit") == []


# Sequential scans of the name tables in this transaction (pg_stat_xact_*
# counts the backend's own work, SECURITY DEFINER functions included).
SEQ_SCANS = """
SELECT relname, seq_scan FROM pg_stat_xact_user_tables
WHERE relname IN ('entity', 'entity_alias') ORDER BY relname
"""


def test_a_partial_lookup_reads_the_name_indexes_not_every_entity(stack: Stack, team: Team) -> None:
    """The prefix and typo routes use the trigram indexes (migration 0016)
    beneath row-level security: their operators are not leakproof, so run
    plainly under the policies they were checked on every entity and alias
    the caller may see, a lookup costing the workspace's size rather than its
    matches. With sequential scans off the statement must still find its
    rows without one, and the same rows as the gateway's answer."""
    ada = team.clients["ada"]
    for name in ("Wilhelmina Blackwood", "Wilbur Stone", "Orla Wendt"):
        entity(ada, name, alias=name.split()[0][:4] + "y", audience_to="workspace")
    asked = (("wilhel", True), ("Blakwood", True), ("Wilhy", True), ("orla wendt", False))
    for name, partial in asked:
        statement, params = lookup_statement(name, None, False, partial)
        with psycopg.connect(workspace_url(stack, team.database_name), user=APP_ROLE) as conn:
            conn.execute(
                SET_LOCALS,
                (
                    ["recallatron.member_id", "recallatron.purpose", "enable_seqscan"],
                    [team.members["ada"], "assist", "off"],
                ),
            )
            found = [row[1] for row in conn.execute(statement, params)]
            scans = dict(conn.execute(SEQ_SCANS).fetchall())
        assert found == names(ada, name, partial=partial), name
        assert found, name
        assert scans == {"entity": 0, "entity_alias": 0}, (name, scans)


def test_a_name_that_folds_to_nothing_visible_is_refused_by_writes_and_lookups(
    team: Team,
) -> None:
    """Accents are dropped by the fold and zero-width characters show nothing:
    such a name was given yet names no entity, and both a lookup and a write
    say so, naming the field (not "is required")."""
    ada = team.clients["ada"]
    for name in ("\u0301\u0301", "\u200b", " \u200d\ufeff ", "\u0301\u200b"):
        for fuzzy in (False, True):
            exc = error(functools.partial(ada.lookup, name, partial=fuzzy))
            assert exc.code() == grpc.StatusCode.INVALID_ARGUMENT, (name, exc.details())
            assert str(exc.details()).startswith("name: has nothing visible"), exc.details()
        exc = error(functools.partial(ada.remember, "About nobody", mention_names=[name]))
        assert exc.code() == grpc.StatusCode.INVALID_ARGUMENT, (name, exc.details())
        assert "mentions[0].name: has nothing visible" in str(exc.details()), exc.details()
        aliases = [{"entity": {"name": "Rob"}, "alias": name}]
        exc = error(
            functools.partial(ada.remember, "About Rob", mention_names=["Rob"], aliases=aliases)
        )
        assert "aliases[0].alias: has nothing visible" in str(exc.details()), exc.details()
    # Nothing was written; a name with a letter beside the marks still works.
    assert ada.list_memories().memories == []
    entity(ada, "Zoe\u0301")
    assert names(ada, "zoe", partial=False) == ["Zoe\u0301"]
