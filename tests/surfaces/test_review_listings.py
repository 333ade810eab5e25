"""The review page's lists past what one view shows: merges in force page on
("Older merges"), and the memory and entity pair lists say when more pairs
wait than they show. Checked on the page's application with a stand-in
gateway client that answers as the gateway does; nothing here reaches a
gateway."""

from __future__ import annotations

import html
import re
from http import HTTPStatus

import grpc
import pytest

from recallatron.v1 import common_pb2 as cpb
from recallatron.v1 import gateway_pb2 as pb
from services.gateway.review_web import ReviewApp
from services.gateway.review_web.pages import Response
from services.gateway.review_web.sessions import COOKIE

MERGES = [
    cpb.EntityMerge(
        id=f"00000000-0000-4000-8000-{i:012d}",
        kept=cpb.EntityRef(id=f"10000000-0000-4000-8000-{i:012d}", name=f"kept {i}"),
        merged=cpb.EntityRef(id=f"20000000-0000-4000-8000-{i:012d}", name=f"merged {i}"),
    )
    for i in range(120)
]


class _NotOurs(grpc.RpcError):
    """The gateway's answer to a page token it did not give."""

    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.INVALID_ARGUMENT

    def details(self) -> str:
        return "page_token: not a page token this listing gave"


class _Client:
    """A gateway client with MERGES in force (paged as the gateway pages
    them) and no pairs."""

    def __init__(self, token: str) -> None:
        self.token = token

    def for_address(self, client_address: str | None, secret: str) -> _Client:
        return self

    def duplicate_pairs(self, limit: int = 0, **_: object) -> pb.ListDuplicatePairsResponse:
        return pb.ListDuplicatePairsResponse()

    def entity_pairs(self, limit: int = 0, **_: object) -> pb.ListEntityPairsResponse:
        return pb.ListEntityPairsResponse()

    def entity_merges(
        self, purpose: str = "", limit: int = 0, page_size: int = 0, page_token: str = ""
    ) -> pb.ListEntityMergesResponse:
        if not page_token.isdigit() and page_token:
            raise _NotOurs()
        start, size = int(page_token or 0), page_size or limit or 50
        end = start + size
        return pb.ListEntityMergesResponse(
            merges=MERGES[start:end], next_page_token=str(end) if end < len(MERGES) else ""
        )

    def undo_entity_merge(self, merge_id: str, purpose: str = "") -> pb.UndoEntityMergeResponse:
        return pb.UndoEntityMergeResponse()

    def read(self, ids: list[str], purpose: str = "") -> pb.ReadResponse:
        return pb.ReadResponse()

    def who_am_i(self) -> object:
        return type("Me", (), {"member_handle": "ada", "workspace_slug": "team"})()

    def close(self) -> None:
        pass


def _signed_in(app: ReviewApp) -> dict[str, str]:
    answer = app.handle("POST", "/signin", {}, {"token": "rct_ada"})
    assert answer.status == HTTPStatus.SEE_OTHER, answer.body[-300:]
    (cookie,) = [v for k, v in answer.headers if k == "Set-Cookie"]
    return {COOKIE: cookie.split(";", 1)[0].split("=", 1)[1]}


def _view(app: ReviewApp, cookies: dict[str, str], target: str = "/") -> str:
    answer: Response = app.handle("GET", target, cookies, {})
    assert answer.status == HTTPStatus.OK, answer.body[-300:]
    return answer.body.decode()


def _link(body: str, testid: str) -> str | None:
    found = re.search(rf'<a [^>]*data-testid={testid} href="([^"]*)"', body)
    return html.unescape(found.group(1)) if found else None


def test_every_merge_in_force_is_reached_from_the_page() -> None:
    """The page listed the 50 newest merges and no more: one past them could
    never be undone from the page."""
    app = ReviewApp("127.0.0.1:1", client_factory=_Client)  # type: ignore[arg-type]
    cookies = _signed_in(app)
    shown: list[str] = []
    target: str | None = "/?purpose=audit"
    views = 0
    while target is not None:
        body = _view(app, cookies, target)
        views += 1
        rows = re.findall(r'data-testid=merge data-merge="([^"]+)"', body)
        assert rows, target
        shown += rows
        # Each row can be undone, for the purpose shown.
        assert body.count('data-testid="undo"') == len(rows)
        assert 'name="purpose" value="audit"' in body
        target = _link(body, "more-merges")
        assert views <= len(MERGES), "the pages never end"
    assert shown == [m.id for m in MERGES]
    assert views == 3


def test_an_undo_on_older_merges_comes_back_to_them() -> None:
    app = ReviewApp("127.0.0.1:1", client_factory=_Client)  # type: ignore[arg-type]
    cookies = _signed_in(app)
    older = _link(_view(app, cookies, "/?purpose=audit"), "more-merges")
    assert older is not None
    body = _view(app, cookies, older)
    form = dict(
        re.findall(
            r'<input type=hidden name="([^"]+)" value="([^"]*)">',
            body.split('data-testid="undo"')[1],
        )
    )
    assert form["merge_id"] == MERGES[50].id
    answer = app.handle("POST", "/decide", cookies, {k: html.unescape(v) for k, v in form.items()})
    assert answer.status == HTTPStatus.SEE_OTHER
    assert ("Location", older) in answer.headers
    assert _link(_view(app, cookies, older), "newest-merges") == "/?purpose=audit"


def test_a_merges_value_that_is_no_page_shows_the_newest_merges_saying_so() -> None:
    """A merges= value edited by hand (or cut short when copied) replaced the
    whole entity part, its pairs too, with the gateway's refusal."""
    app = ReviewApp("127.0.0.1:1", client_factory=_Pairs)  # type: ignore[arg-type]
    cookies = _signed_in(app)
    body = _view(app, cookies, "/?purpose=audit&merges=%3Cnot-ours%3E")
    assert "Entity pairs" in body
    assert "data-testid=no-entity-pairs" in body
    rows = re.findall(r'data-testid=merge data-merge="([^"]+)"', body)
    assert rows == [m.id for m in MERGES[:50]]
    note = re.search(r"<p [^>]*data-testid=merges-ignored>(.*?)</p>", body)
    assert note is not None, body[-2000:]
    assert "merges=" in note.group(1) and "newest" in note.group(1), note.group(1)
    assert "<not-ours>" not in body and "&lt;not-ours&gt;" in note.group(1)
    # An undo from here comes back to the newest merges, not the value refused.
    assert 'name="merges"' not in body.split("data-testid=merges-ignored")[1]


def _memory(i: int) -> cpb.Memory:
    return cpb.Memory(id=f"30000000-0000-4000-8000-{i:012d}", title=f"memory {i}", revision=1)


def _card(i: int) -> cpb.EntityCard:
    return cpb.EntityCard(id=f"40000000-0000-4000-8000-{i:012d}", name=f"entity {i}")


class _Pairs(_Client):
    """``waiting`` pairs of each kind; answers at most ``cut`` of them, with
    `more` set for the rest (as the size budget leaves pairs out), and at
    most the limit asked, as the gateway does."""

    waiting = 0
    cut = 1000

    def duplicate_pairs(self, limit: int = 0, **_: object) -> pb.ListDuplicatePairsResponse:
        answered = min(self.waiting, limit or 50)
        pairs = [
            pb.DuplicatePair(first=_memory(2 * i), second=_memory(2 * i + 1), cosine=0.9)
            for i in range(min(answered, self.cut))
        ]
        return pb.ListDuplicatePairsResponse(pairs=pairs, more=answered > self.cut)

    def entity_pairs(self, limit: int = 0, **_: object) -> pb.ListEntityPairsResponse:
        answered = min(self.waiting, limit or 20)
        pairs = [
            cpb.EntityPair(first=_card(2 * i), second=_card(2 * i + 1), reasons=["same_name"])
            for i in range(min(answered, self.cut))
        ]
        return pb.ListEntityPairsResponse(pairs=pairs, more=answered > self.cut)


@pytest.mark.parametrize(
    ("waiting", "cut", "told"),
    [
        (3, 1000, False),  # every pair shown
        (3, 2, True),  # the answer's size budget left one out
        (300, 1000, True),  # more wait than the page asks for
    ],
)
def test_the_pair_lists_say_when_more_pairs_wait(waiting: int, cut: int, told: bool) -> None:
    """Both lists showed what the answer held and said nothing of the pairs
    left out, by the answer's size budget (`more`) or by the page's count."""
    client = type("Waiting", (_Pairs,), {"waiting": waiting, "cut": cut})
    app = ReviewApp("127.0.0.1:1", client_factory=client)
    body = _view(app, _signed_in(app))
    memory_pairs = body.count("data-testid=pair ")
    entity_pairs = body.count("data-testid=entity-pair ")
    assert 0 < memory_pairs <= 50 and 0 < entity_pairs <= 20
    for testid, shown in (("more-pairs", memory_pairs), ("more-entity-pairs", entity_pairs)):
        note = re.search(rf"<p [^>]*data-testid={testid}>([^<]*)</p>", body)
        if not told:
            assert note is None, testid
            continue
        assert note is not None, testid
        assert f"More pairs wait than the {shown} shown" in note.group(1), note.group(1)
