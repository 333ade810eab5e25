"""The review page's application: each page and each decision is a call to the
gateway's own gRPC API with the person's token (design §8.1, §8.5)."""

from __future__ import annotations

import contextlib
import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from http import HTTPStatus
from typing import TypeVar
from urllib.parse import parse_qs, urlencode, urlsplit

import grpc

from recallatron.client import Client
from recallatron.vocabulary import DEFAULT_PURPOSE, MAX_READ_IDS, PURPOSES
from services.gateway import forwarded
from services.gateway.review_web import decisions
from services.gateway.review_web.decisions import _status_text
from services.gateway.review_web.pages import (
    MENTIONS_SHOWN,
    STYLE,
    Response,
    _hidden,
    e,
    entity_pair_section,
    merges_table,
    more_pairs,
    page,
    pair_section,
    redirect,
    signed_in,
    signin_page,
)
from services.gateway.review_web.sessions import (
    COOKIE,
    SESSION_MAX_SECONDS,
    ClientFactory,
    Session,
    Sessions,
    _cookie,
)

T = TypeVar("T")
# What a token may hold (printable ASCII, no space): anything else is refused
# before a call carries it.
_TOKEN = re.compile(r"[!-~]{1,500}")
PAIRS_SHOWN = 50
ENTITY_PAIRS_SHOWN = 20
MERGES_SHOWN = 50
# The most of a merges= value refused that the note about it repeats.
MERGES_VALUE_SHOWN = 80
# Each path and the methods it takes (HEAD answers as GET, without the body);
# OPTIONS is taken everywhere.
ROUTES: dict[str, tuple[str, ...]] = {
    "/": ("GET", "HEAD"),
    "/review.css": ("GET", "HEAD"),
    "/signin": ("POST",),
    "/signout": ("POST",),
    "/decide": ("POST",),
}


def _allow(path: str) -> str:
    methods = ROUTES.get(path) or tuple(dict.fromkeys(m for ms in ROUTES.values() for m in ms))
    return ", ".join((*methods, "OPTIONS"))


# -- the application -----------------------------------------------------------


@dataclass(frozen=True)
class _Request:
    """A request to a path that takes its method, as the routes read it."""

    method: str
    path: str
    query: dict[str, str]
    form: dict[str, str]
    # The person's ("host:port"), for the sign-in's allowance.
    client_address: str
    # The session id the browser sent, if any.
    sid: str | None
    # HEAD: answered as GET, keeping the session's messages.
    peek: bool


class ReviewApp:
    """Request handling without the HTTP plumbing (and so testable alone)."""

    def __init__(self, gateway_target: str, client_factory: ClientFactory | None = None) -> None:
        self.gateway_target = gateway_target
        self.client_factory = client_factory or (lambda token: Client(gateway_target, token))
        self.sessions = Sessions()

    def handle(
        self,
        method: str,
        target: str,
        cookies: dict[str, str],
        form: dict[str, str],
        client_address: str = "",
    ) -> Response:
        try:
            url = urlsplit(target)
        except ValueError:
            return Response(HTTPStatus.BAD_REQUEST, page("Refused", "<p>Not a request target.</p>"))
        path = url.path
        if path not in ROUTES and not (method == "OPTIONS" and target == "*"):
            return Response(HTTPStatus.NOT_FOUND, page("Not found", "<p>Not found.</p>"))
        if method == "OPTIONS":
            return Response(HTTPStatus.NO_CONTENT, headers=[("Allow", _allow(path))])
        if method not in ROUTES[path]:
            return Response(
                HTTPStatus.METHOD_NOT_ALLOWED,
                page("Not allowed", f"<p>{e(method)} is not taken here.</p>"),
                headers=[("Allow", _allow(path))],
            )
        # HEAD is GET without the body (the HTTP server leaves it out), and
        # leaves the session's messages for the view that shows them.
        peek = method == "HEAD"
        request = _Request(
            method="GET" if peek else method,
            path=path,
            query={k: v[0] for k, v in parse_qs(url.query).items()},
            form=form,
            client_address=client_address,
            sid=cookies.get(COOKIE),
            peek=peek,
        )
        # Held for the whole request: another tab ending the session meanwhile
        # leaves this request's client open until it is done.
        with self.sessions.using(request.sid) as session:
            return self._route(request, session)

    def _route(self, request: _Request, session: Session | None) -> Response:
        """One request to a path that takes its method."""
        method, path, query, form = request.method, request.path, request.query, request.form
        sid = request.sid
        if method == "GET" and path == "/review.css":
            return Response(
                HTTPStatus.OK,
                STYLE.encode(),
                "text/css; charset=utf-8",
                [("Cache-Control", "max-age=3600")],
            )
        if method == "GET" and path == "/":
            if session is None:
                return Response(HTTPStatus.OK, signin_page())
            return self.review(
                session,
                query.get("purpose", DEFAULT_PURPOSE),
                sid,
                request.peek,
                query.get("merges", ""),
            )
        if method == "POST" and path == "/signin":
            return self.signin(form.get("token", ""), request.client_address, sid)
        if method == "POST" and path in ("/signout", "/decide"):
            if session is None:
                return redirect("/")
            if not secrets.compare_digest(form.get("csrf", "").encode(), session.csrf.encode()):
                return Response(HTTPStatus.FORBIDDEN, page("Refused", "<p>Stale form.</p>"))
            if path == "/signout":
                self.sessions.drop(sid)
                return redirect("/", [("Set-Cookie", _cookie("", max_age=0))])
            purpose = form.get("purpose", DEFAULT_PURPOSE)
            self.decide(session, form, purpose)
            back = {"purpose": purpose if purpose in PURPOSES else DEFAULT_PURPOSE}
            if form.get("merges"):
                # The page of merges the decision was taken on.
                back["merges"] = form["merges"]
            return redirect("/?" + urlencode(back))
        return Response(HTTPStatus.NOT_FOUND, page("Not found", "<p>Not found.</p>"))

    def signin(self, token: str, client_address: str = "", held: str | None = None) -> Response:
        """``client_address``: the person's ("host:port"); a token the
        gateway does not know spends that address's allowance of failed
        authentications, not the page's (services/gateway/forwarded.py).
        ``held``: the session id the browser sent, ended once this sign-in
        succeeds (a refused one leaves it as it was)."""
        token = token.strip()
        if not token:
            return Response(HTTPStatus.BAD_REQUEST, signin_page("Enter your member token."))
        if not _TOKEN.fullmatch(token):
            # No token holds it, and gRPC would refuse it as a header value.
            return Response(HTTPStatus.BAD_REQUEST, signin_page("That is not a token."))
        client = forwarded.for_user(self.client_factory(token), client_address)
        # The token is checked by a read for a purpose its scope allows: one
        # scoped to audit only is refused an assist call, not unknown.
        for purpose in PURPOSES:
            try:
                client.duplicate_pairs(purpose=purpose, limit=1)
                break
            except grpc.RpcError as exc:
                if exc.code() == grpc.StatusCode.PERMISSION_DENIED and purpose != PURPOSES[-1]:
                    continue
                client.close()
                if exc.code() == grpc.StatusCode.UNAUTHENTICATED:
                    # The gateway's reason, as gRPC and HTTP/JSON callers hear
                    # it (expired, unknown or revoked, the operator's token);
                    # it never holds the token.
                    why = (exc.details() or "unknown or revoked token").removeprefix(
                        "authorization: "
                    )
                    return Response(
                        HTTPStatus.UNAUTHORIZED, signin_page(f"That token was refused: {why}.")
                    )
                if exc.code() == grpc.StatusCode.RESOURCE_EXHAUSTED:
                    return Response(HTTPStatus.TOO_MANY_REQUESTS, signin_page(_status_text(exc)))
                return Response(HTTPStatus.BAD_GATEWAY, signin_page(_status_text(exc)))
        sid = self.sessions.create(client, token, replaces=held, who=_who(client))
        # The first purpose the token may act for: its page, not a refusal.
        landing = "/" if purpose == DEFAULT_PURPOSE else f"/?purpose={purpose}"
        return redirect(landing, [("Set-Cookie", _cookie(sid, max_age=SESSION_MAX_SECONDS))])

    def review(
        self,
        session: Session,
        purpose: str,
        sid: str | None = None,
        peek: bool = False,
        merges_from: str = "",
    ) -> Response:
        """The page; ``peek`` (HEAD) keeps the messages for the next view;
        ``merges_from``: the merges' page token (empty: the newest)."""
        if purpose not in PURPOSES:
            purpose = DEFAULT_PURPOSE
        flashes = "".join(
            f'<p class="flash {e(level)}" role=status data-testid=flash>{e(text)}</p>'
            for level, text in session.flash
        )
        if not peek:
            session.flash.clear()
        # Whether the token may act for this purpose at all: the refusal is
        # shown once, and not taken for the entity part's owner rule.
        in_scope = True
        more = False
        try:
            # One more than shown: whether others wait beyond the page's count.
            found = session.client.duplicate_pairs(purpose=purpose, limit=PAIRS_SHOWN + 1)
            pairs, more = _shown(found.pairs, found.more, PAIRS_SHOWN)
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.UNAUTHENTICATED:
                return self._signed_out(sid)
            pairs = []
            in_scope = exc.code() != grpc.StatusCode.PERMISSION_DENIED
            flashes += f'<p class="flash error" role=alert>{e(_status_text(exc))}</p>'
        options = "".join(
            f'<option value="{p}"{" selected" if p == purpose else ""}>{p}</option>'
            for p in PURPOSES
        )
        top = (
            signed_in(session.handle, session.workspace)
            + "<form method=get action=/><label>Purpose <select name=purpose>"
            f"{options}</select></label> <button type=submit>Show</button></form>"
            f"<form method=post action=/signout>{_hidden(csrf=session.csrf)}"
            "<button type=submit data-testid=signout>Sign out</button></form>"
        )
        lead = (
            "<p class=lead>Pairs of memories you may see for this purpose, at cosine ≥ 0.80 "
            "among your 500 newest, most alike first. Closeness in meaning is not sameness: "
            "read both, then decide. Nothing changes until you do.</p>"
        )
        body = "".join(pair_section(p, session.csrf, purpose) for p in pairs) or (
            "<p class=empty data-testid=no-pairs>No pairs to review.</p>"
        )
        if more:
            body += more_pairs(
                "more-pairs",
                len(pairs),
                "decide on these (keep both, supersede or forget) and look again",
            )
        body = "<h2 class=part>Memory pairs</h2>" + body
        if in_scope:
            body += self.entities(session, purpose, merges_from)
        return Response(HTTPStatus.OK, page("Dedup review", lead + flashes + body, top))

    def _signed_out(self, sid: str | None) -> Response:
        """The session's token is no longer accepted (revoked, expired): the
        session, and the token it holds, end here rather than serve a page of
        refusals until it idles out."""
        self.sessions.drop(sid)
        return Response(
            HTTPStatus.UNAUTHORIZED,
            signin_page("Your token was revoked or has expired: sign in again."),
            headers=[("Set-Cookie", _cookie("", max_age=0))],
        )

    def entities(self, session: Session, purpose: str, merges_from: str = "") -> str:
        """The entity part of the page: owners only (a member is told so).
        The merges in force a page at a time, from ``merges_from``."""
        client = session.client
        ignored = ""
        try:
            found = client.entity_pairs(purpose=purpose, limit=ENTITY_PAIRS_SHOWN + 1)
            pairs, more = _shown(found.pairs, found.more, ENTITY_PAIRS_SHOWN)
            try:
                merges = client.entity_merges(
                    purpose=purpose, page_size=MERGES_SHOWN, page_token=merges_from
                )
            except grpc.RpcError as exc:
                if not merges_from or exc.code() != grpc.StatusCode.INVALID_ARGUMENT:
                    raise
                # A merges= value edited by hand or cut short when copied: the
                # rest of the part still stands, and the newest merges are shown.
                ignored = _merges_ignored(merges_from, exc)
                merges_from = ""
                merges = client.entity_merges(purpose=purpose, page_size=MERGES_SHOWN)
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.PERMISSION_DENIED:
                return (
                    "<h2 class=part>Entity pairs</h2><p class=empty data-testid=entity-owners>"
                    "Only a workspace owner decides on entity merges.</p>"
                )
            return f'<p class="flash error" role=alert>{e(_status_text(exc))}</p>'
        cited = list(
            dict.fromkeys(
                m
                for p in pairs
                for c in (p.first, p.second)
                for m in c.mentioned_by[:MENTIONS_SHOWN]
            )
        )
        titles = _titles(client, cited, purpose)
        shown = "".join(entity_pair_section(p, titles, session.csrf, purpose) for p in pairs)
        return (
            "<h2 class=part>Entity pairs</h2><p class=lead>Entities you may see for this purpose "
            "that may be one: the same name or alias, a name that begins another with a "
            "co-mentioned entity in common, or close mention contexts. A name is not a "
            "person: read both sides, then decide.</p>"
            + (shown or "<p class=empty data-testid=no-entity-pairs>No entity pairs.</p>")
            + (
                more_pairs(
                    "more-entity-pairs",
                    len(pairs),
                    "merge these or keep them apart and look again",
                )
                if more
                else ""
            )
            + "<h2 class=part>Merged entities</h2>"
            + ignored
            + merges_table(
                list(merges.merges), session.csrf, purpose, merges.next_page_token, merges_from
            )
        )

    def decide(self, session: Session, form: dict[str, str], purpose: str) -> None:
        """Carries out one decision; its outcome goes to the next page view."""
        decisions.decide(session, form, purpose)


def _merges_ignored(value: str, exc: grpc.RpcError) -> str:
    """The note that the address's merges= value was no page of merges (the
    gateway's refusal said why) and the newest are shown instead."""
    shown = value if len(value) <= MERGES_VALUE_SHOWN else value[:MERGES_VALUE_SHOWN] + "…"
    return (
        '<p class="flash error" role=status data-testid=merges-ignored>'
        f"The address's merges={e(shown)} is not a page of merges this page gave "
        f"({e(_status_text(exc))}): it was ignored, and the newest merges are shown.</p>"
    )


def _shown(pairs: Sequence[T], more: bool, count: int) -> tuple[list[T], bool]:
    """The first ``count`` of an answer's pairs, and whether others wait:
    left out of the answer (its size budget, ``more``) or past ``count``."""
    return list(pairs[:count]), more or len(pairs) > count


def _titles(client: Client, ids: list[str], purpose: str) -> dict[str, str]:
    """The titles of the memories ``ids`` (at most MENTIONS_SHOWN per card
    shown), by id. A memory whose title was not read (gone since, or a read
    refused) is shown by its id alone."""
    titles: dict[str, str] = {}
    for start in range(0, len(ids), MAX_READ_IDS):
        with contextlib.suppress(grpc.RpcError):
            read = client.read(ids[start : start + MAX_READ_IDS], purpose=purpose)
            titles.update((m.id, m.title) for m in read.memories)
    return titles


def _who(client: Client) -> tuple[str, str]:
    """The member's handle and workspace slug, asked once at sign-in (neither
    changes for a token); a gateway that cannot say (one from before WhoAmI)
    leaves them unshown rather than refusing the sign-in."""
    try:
        me = client.who_am_i()
    except grpc.RpcError:
        return "", ""
    return me.member_handle or me.member_id, me.workspace_slug or me.workspace_id
