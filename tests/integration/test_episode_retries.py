"""CreateEpisode's request id (docs/api.md, docs/graph.md "Episodes and
timelines"): a retry after a lost answer, with the same id, answers the first
episode's id and makes no second one; the same id with another request, or
used before by another write, is refused naming request_id; an id that is a
UUID is the same id in any spelling of it, as a write's is."""

from __future__ import annotations

import json
import threading
import uuid
from typing import Any

import grpc
import pytest

from recallatron.client import Client
from recallatron_cli.main import main
from recallatron_devkit.stack import Stack
from tests import dbutil
from tests.conftest import Team
from tests.surfaces.httpjson import call

pytestmark = pytest.mark.integration

WHEN = "2026-11-30T10:00:00Z"
LATER = "2026-11-30T11:00:00Z"


def _episodes(stack: Stack, team: Team, title: str) -> list[str]:
    rows = dbutil.query(
        stack, team.database_name, "SELECT id::text FROM episode WHERE title = %s", (title,)
    )
    return [r[0] for r in rows]


def test_a_create_episode_retried_with_its_request_id_makes_one_episode(
    stack: Stack, team: Team
) -> None:
    """The retry of a CreateEpisode whose answer was lost, with its request
    id, answers the first episode's id and writes nothing more."""
    ada, bob = team.clients["ada"], team.members["bob"]
    rid = str(uuid.uuid4())

    def create() -> str:
        return ada.create_episode(
            "Retried retro",
            WHEN,
            LATER,
            audience_to="workspace",
            purposes=["assist", "audit"],
            member_ids=[bob, team.members["ada"]],
            request_id=rid,
        ).episode_id

    first = create()
    again = create()
    assert again == first
    assert _episodes(stack, team, "Retried retro") == [first]
    participants = dbutil.query(
        stack,
        team.database_name,
        "SELECT count(*) FROM episode_participant WHERE episode_id = %s",
        (first,),
    )
    assert participants == [(2,)]


def test_a_retry_may_spell_its_ids_and_list_its_sets_otherwise(stack: Stack, team: Team) -> None:
    """Participants and purposes are sets and ids are taken in any spelling of
    a UUID, the request id's own too: the retry is the same request."""
    ada, bob, cy = team.clients["ada"], team.members["bob"], team.members["cy"]
    rid = str(uuid.uuid4())
    first = ada.create_episode(
        "Spelled retro",
        WHEN,
        audience_to=bob,
        purposes=["assist", "audit"],
        member_ids=[bob, cy],
        request_id=rid,
    ).episode_id
    again = ada.create_episode(
        "Spelled retro",
        "2026-11-30T11:00:00+01:00",
        audience_to=bob.upper(),
        purposes=["audit", "assist"],
        member_ids=["{" + cy.upper() + "}", uuid.UUID(bob).hex],
        request_id=rid.upper(),
    ).episode_id
    assert again == first
    assert _episodes(stack, team, "Spelled retro") == [first]


@pytest.mark.parametrize(
    "change",
    [
        {"title": "Another retro"},
        {"ended_at": LATER},
        {"audience_to": "workspace"},
        {"purposes": ["audit"]},
        {"member_ids": []},
    ],
)
def test_the_same_request_id_with_another_request_is_refused(
    stack: Stack, team: Team, change: dict[str, Any]
) -> None:
    """Answering the first episode's id would acknowledge an episode never
    made: the same id with another request is refused naming request_id, and
    nothing is written."""
    ada = team.clients["ada"]
    rid = str(uuid.uuid4())
    asked: dict[str, Any] = {
        "title": "Refused retro",
        "started_at": WHEN,
        "member_ids": [team.members["bob"]],
    }
    first = ada.create_episode(**asked, request_id=rid).episode_id
    with pytest.raises(grpc.RpcError) as refused:
        ada.create_episode(**{**asked, **change}, request_id=rid)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert refused.value.details() == (
        "request_id: already used for another create_episode request;"
        " a retry repeats its request exactly"
    )
    assert _episodes(stack, team, "Refused retro") == [first]
    assert _episodes(stack, team, "Another retro") == []


def test_a_request_id_of_another_write_is_refused_for_an_episode(stack: Stack, team: Team) -> None:
    """One member's request ids are one set across the writes, as between the
    memory tools: an id remember used is refused for CreateEpisode and the
    other way round."""
    ada = team.clients["ada"]
    rid = str(uuid.uuid4())
    ada.remember("Kept note", request_id=rid)
    with pytest.raises(grpc.RpcError) as episode:
        ada.create_episode("Clashing retro", WHEN, request_id=rid)
    assert episode.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert episode.value.details() == "request_id: already used for a different call (remember)"
    assert _episodes(stack, team, "Clashing retro") == []
    other = str(uuid.uuid4())
    ada.create_episode("First retro", WHEN, request_id=other)
    with pytest.raises(grpc.RpcError) as memory:
        ada.remember("Clashing note", request_id=other)
    assert memory.value.details() == (
        "request_id: already used for a different call (create_episode)"
    )


def test_request_ids_are_each_members_own_and_optional(stack: Stack, team: Team) -> None:
    """Another member's same id is theirs; without an id each call makes an
    episode, as before; a malformed id is refused by name."""
    rid = str(uuid.uuid4())
    ada = team.clients["ada"].create_episode("Own retro", WHEN, request_id=rid).episode_id
    bob = team.clients["bob"].create_episode("Own retro", WHEN, request_id=rid).episode_id
    assert ada != bob
    team.clients["ada"].create_episode("Plain retro", WHEN)
    team.clients["ada"].create_episode("Plain retro", WHEN)
    assert len(_episodes(stack, team, "Plain retro")) == 2
    with pytest.raises(grpc.RpcError) as bad:
        team.clients["ada"].create_episode("Bad retro", WHEN, request_id="x" * 129)
    assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert (bad.value.details() or "").startswith("request_id: ")


def test_concurrent_attempts_of_one_request_make_one_episode(stack: Stack, team: Team) -> None:
    """A retry sent while the first attempt is still committing gets its
    answer: of attempts at once, every one answers the same episode."""
    ada: Client = team.clients["ada"]
    rid = str(uuid.uuid4())
    answers: list[str] = []
    failures: list[BaseException] = []
    start = threading.Barrier(6)

    def attempt() -> None:
        start.wait(30)
        try:
            answers.append(ada.create_episode("Raced retro", WHEN, request_id=rid).episode_id)
        except BaseException as exc:  # reported below
            failures.append(exc)

    threads = [threading.Thread(target=attempt) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not failures, failures
    assert len(answers) == 6 and len(set(answers)) == 1
    assert _episodes(stack, team, "Raced retro") == answers[:1]


def test_the_command_line_retries_an_episode_with_its_request_id(
    stack: Stack, team: Team, capsys: pytest.CaptureFixture[str]
) -> None:
    common = ["--gateway", stack.gateway, "--token", team.clients["ada"].token]
    argv = ["episode", *common, "CLI retro", "--start", WHEN, "--request-id", "cli-retro-1"]
    answers = []
    for _ in range(2):
        assert main([*argv, "--json"]) == 0
        answers.append(json.loads(capsys.readouterr().out)["episode_id"])
    assert answers[0] == answers[1]
    assert _episodes(stack, team, "CLI retro") == answers[:1]
    assert main([*argv, "--end", LATER]) == 1
    assert "request_id: already used for another create_episode request" in (
        capsys.readouterr().err
    )


def test_http_retries_an_episode_with_its_request_id(stack: Stack, team: Team) -> None:
    """HTTP/JSON takes the field by its JSON name, with the same answers."""
    method = "recallatron.v1.MemoryService/CreateEpisode"
    token = team.clients["ada"].token
    body = {"title": "HTTP retro", "startedAt": WHEN, "requestId": str(uuid.uuid4())}
    answers = [call(stack.http_url, method, body, token) for _ in range(2)]
    assert [a[0] for a in answers] == [200, 200]
    assert answers[0][1]["episodeId"] == answers[1][1]["episodeId"]
    assert _episodes(stack, team, "HTTP retro") == [answers[0][1]["episodeId"]]
    status, refused = call(stack.http_url, method, {**body, "title": "Other retro"}, token)
    assert status == 400
    # HTTP names the field by its JSON name, as for every refusal.
    assert refused["message"].startswith("requestId: already used for another create_episode")


def test_an_erased_members_private_episode_keeps_no_hash_of_its_title(
    stack: Stack, team: Team, operator: Client
) -> None:
    """The key's fingerprint hashes the title: a removed member's erase,
    which empties their private episodes' titles, clears it with them, as
    forget clears a memory's; the workspace's episodes keep theirs."""
    cy = team.clients["cy"]
    private = cy.create_episode("Cy's therapy", WHEN, request_id=str(uuid.uuid4())).episode_id
    shared = cy.create_episode(
        "Cy's standup", WHEN, audience_to="workspace", request_id=str(uuid.uuid4())
    ).episode_id

    def hashed() -> dict[str, bool]:
        rows = dbutil.query(
            stack,
            team.database_name,
            "SELECT episode_id::text, fingerprint IS NOT NULL FROM request_key"
            " WHERE episode_id = ANY(%s::uuid[])",
            ([private, shared],),
        )
        return dict(rows)

    assert hashed() == {private: True, shared: True}
    operator.remove_member(team.members["cy"], "erase")
    assert hashed() == {private: False, shared: True}
