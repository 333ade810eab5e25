"""The CLI's list of entity merges in force: a page at a time, as
ListEntityMerges answers them, and every merge reachable to be undone."""

from __future__ import annotations

import pytest

from recallatron_cli.main import main
from recallatron_devkit.stack import Stack
from tests.conftest import Team
from tests.surfaces.entity_data import entity

pytestmark = pytest.mark.integration


def test_merges_past_the_first_page_are_reachable(
    stack: Stack, team: Team, capsys: pytest.CaptureFixture[str]
) -> None:
    """51 merges in force: the first page (50) says more wait and how to go
    on, and the page after it lists the oldest, which can then be undone."""
    ada = team.clients["ada"]
    merges: list[str] = []
    for batch in range(3):
        names = [f"Person {batch}-{i}" for i in range(34)]
        memory = ada.remember(f"Roster {batch}", "The roster.", mention_names=names).memory
        ids = [entity(memory, n) for n in names]
        for kept, merged in zip(ids[0::2], ids[1::2], strict=True):
            if len(merges) < 51:
                merges.append(ada.merge_entities(kept, merged).merge.id)
    common = ["--gateway", stack.gateway, "--token", ada.token]

    assert main(["merges", *common]) == 0
    first = capsys.readouterr().out.splitlines()
    assert first[-1].startswith("more: --page-token "), first[-3:]
    assert [line.split()[0] for line in first[:-1]] == merges[:0:-1]
    token = first[-1].removeprefix("more: --page-token ")

    assert main(["merges", "--page-token", token, *common]) == 0
    rest = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in rest] == [merges[0]]
    assert main(["undo-merge", merges[0], *common]) == 0
    capsys.readouterr()
    assert main(["merges", "--page-token", token, *common]) == 0
    assert capsys.readouterr().out.strip() == "no older merges in force"
