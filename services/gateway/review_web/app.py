"""The review page's application: each page and each decision is a call to the
gateway's own gRPC API with the person's token (design §8.1, §8.5)."""

from __future__ import annotations

import contextlib
import re
import secrets
import uuid
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qs, urlsplit

import grpc

from recallatron.client import Client
from recallatron.v1 import common_pb2 as cpb
from recallatron.v1 import gateway_pb2 as pb
from recallatron.vocabulary import (
    DEFAULT_PURPOSE,
    MAX_READ_IDS,
    MAX_REASON,
    PURPOSE,
    PURPOSES,
)
from services.gateway import forwarded
from services.gateway.review_web.pages import (
    MENTIONS_SHOWN,
    STYLE,
    Response,
    _hidden,
    e,
    entity_pair_section,
    merges_table,
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

# What a token may hold (printable ASCII, no space): anything else is refused
# before a call carries it.
_TOKEN = re.compile(r"[!-~]{1,500}")
PAIRS_SHOWN = 50
ENTITY_PAIRS_SHOWN = 20
MERGES_SHOWN = 50
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


def _status_text(exc: grpc.RpcError) -> str:
    code = exc.code()
    return f"{code.name}: {exc.details()}"


# -- the application -----------------------------------------------------------


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
        method = "GET" if peek else method
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        sid = cookies.get(COOKIE)
        session = self.sessions.get(sid)
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
            return self.review(session, query.get("purpose", DEFAULT_PURPOSE), sid, peek)
        if method == "POST" and path == "/signin":
            return self.signin(form.get("token", ""), client_address, sid)
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
            return redirect(f"/?purpose={purpose if purpose in PURPOSES else DEFAULT_PURPOSE}")
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
        self, session: Session, purpose: str, sid: str | None = None, peek: bool = False
    ) -> Response:
        """The page; ``peek`` (HEAD) keeps the messages for the next view."""
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
        try:
            pairs = list(session.client.duplicate_pairs(purpose=purpose, limit=PAIRS_SHOWN).pairs)
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
        body = "<h2 class=part>Memory pairs</h2>" + body
        if in_scope:
            body += self.entities(session, purpose)
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

    def entities(self, session: Session, purpose: str) -> str:
        """The entity part of the page: owners only (a member is told so)."""
        client = session.client
        try:
            pairs = list(client.entity_pairs(purpose=purpose, limit=ENTITY_PAIRS_SHOWN).pairs)
            merges = list(client.entity_merges(purpose=purpose, limit=MERGES_SHOWN).merges)
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
            + "<h2 class=part>Merged entities</h2>"
            + merges_table(merges, session.csrf, purpose)
        )

    def decide(self, session: Session, form: dict[str, str], purpose: str) -> None:
        """Carries out one decision; its outcome goes to the next page view."""
        if purpose not in PURPOSES:
            session.flash.append(("error", "Unknown purpose."))
            return
        action = form.get("action", "")
        client = session.client
        try:
            if action == "keep":
                self._keep(session, form, purpose)
            elif action == "forget":
                reason = form.get("reason", "").strip()
                if not reason or len(reason) > MAX_REASON:
                    session.flash.append(
                        ("error", f"Forgetting needs a reason (1 to {MAX_REASON} chars).")
                    )
                    return
                target = form.get("target_id", "")
                # The revision shown: a memory changed since is not forgotten
                # on the strength of its old text.
                shown = _revision(form.get("target_revision", ""))
                if shown is None:
                    session.flash.append(("error", "The form was incomplete; look again."))
                    return
                client.forget(
                    target,
                    reason,
                    purpose=purpose,
                    request_id=_request_id(),
                    expected_revision=shown,
                )
                session.flash.append(("ok", f"Forgot {target}."))
            elif action == "supersede":
                self._supersede(session, form, purpose)
            elif action == "merge":
                done = client.merge_entities(
                    form.get("kept_id", ""), form.get("merged_id", ""), purpose
                )
                session.flash.append(
                    (
                        "ok",
                        f"Merged {done.merge.merged.name} into {done.merge.kept.name}."
                        if done.created
                        else "They already answer as one entity; nothing changed.",
                    )
                )
            elif action == "apart":
                client.keep_entities_apart(
                    form.get("first_id", ""), form.get("second_id", ""), purpose
                )
                session.flash.append(("ok", "Kept apart; this pair will not be proposed again."))
            elif action == "undo":
                client.undo_entity_merge(form.get("merge_id", ""), purpose)
                session.flash.append(("ok", "Undid the merge; both answer on their own again."))
            else:
                session.flash.append(("error", "Unknown decision."))
        except grpc.RpcError as exc:
            session.flash.append(("error", _explain(exc)))

    def _keep(self, session: Session, form: dict[str, str], purpose: str) -> None:
        """Keep both, for the revisions shown: the pair is never proposed
        again, so a memory changed since is not kept on the strength of its
        old text (as forget and supersede are not taken on it)."""
        client = session.client
        ids = form.get("first_id", ""), form.get("second_id", "")
        shown = (
            _revision(form.get("first_revision", "")),
            _revision(form.get("second_revision", "")),
        )
        if shown[0] is None or shown[1] is None:
            session.flash.append(("error", "The form was incomplete; look again."))
            return
        keys = _uuid(ids[0]), _uuid(ids[1])
        if keys[0] is not None and keys[1] is not None and keys[0] != keys[1]:
            # Ids the store would refuse are left to it: its refusal names the field.
            now = {
                _uuid(m.id): m.revision for m in client.read(list(ids), purpose=purpose).memories
            }
            for memory_id, key, revision in zip(ids, keys, shown, strict=True):
                if now.get(key, revision) != revision:
                    session.flash.append(
                        (
                            "error",
                            f"{memory_id} changed since you looked (now revision {now[key]}); "
                            "nothing was done.",
                        )
                    )
                    return
        client.dismiss_pair(ids[0], ids[1], purpose)
        session.flash.append(("ok", "Kept both; this pair will not be proposed again."))

    def _supersede(self, session: Session, form: dict[str, str], purpose: str) -> None:
        client = session.client
        retire_id, keep_id = form.get("retire_id", ""), form.get("keep_id", "")
        try:
            revisions = form["retire_revision"], form["keep_revision"]
            # int() also reads other scripts' digits (U+0661 is 1): the page writes 0-9 only.
            if not all(r.isascii() for r in revisions):
                raise ValueError("a revision in other digits")
            retire_rev, keep_rev = int(revisions[0]), int(revisions[1])
            if not (0 < retire_rev < 2**63 and 0 < keep_rev < 2**63):
                raise ValueError("a revision out of range")
        except (KeyError, ValueError):
            session.flash.append(("error", "The form was incomplete; look again."))
            return
        if _same_id(retire_id, keep_id):
            session.flash.append(("error", "A memory cannot replace itself; look again."))
            return
        kept = client.read([keep_id], purpose=purpose).memories[0]
        if kept.revision != keep_rev:
            session.flash.append(
                ("error", f"{keep_id} changed since you looked (now revision {kept.revision}).")
            )
            return
        claims, relations, aliases = _current_graph(kept)
        # The entities the graph names are mentioned by the memory that states
        # it: named again as mentions they counted twice against one write's
        # MAX_MENTIONS, and a text naming many entities could not be kept.
        named = {c.entity.entity_id for c in claims} | {a.entity.entity_id for a in aliases}
        named |= {x for r in relations for x in (r.subject.entity_id, r.object.entity_id)}
        mentioned = len(kept.mentions) + kept.omitted.mentions
        if len(named | {m.entity_id for m in kept.mentions}) < mentioned:
            # The read left out mentions the graph does not name: the
            # successor would mention fewer entities than the kept text does.
            session.flash.append(
                (
                    "error",
                    f"{keep_id} mentions more entities than one read lists "
                    f"({kept.omitted.mentions} left out); nothing was done.",
                )
            )
            return
        request = pb.SupersedeRequest(
            request_id=_request_id(),
            id=retire_id,
            expected_revision=retire_rev,
            kind=kept.kind,
            title=kept.title,
            body=kept.body,
            confidence=kept.confidence,
            mentions=[
                cpb.MentionInput(entity_id=m.entity_id)
                for m in kept.mentions
                if m.entity_id not in named
            ],
            # B's text states B's claims: A's, carried by default, would say
            # on the successor what its text no longer does.
            replace_claims=True,
            claims=claims,
            relations=relations,
            aliases=aliases,
            reason=f"dedup review: replaced with the text of {keep_id}",
            purpose=PURPOSE.value(purpose),
            # Derived from the kept memory: the store gives the successor the
            # intersection of both memories' trust (design §4), never A's alone.
            source_ids=[keep_id],
        )
        resp = client.call(client.memory.Supersede, request)
        session.flash.append(("ok", f"Superseded {retire_id}; its successor is {resp.memory.id}."))


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


def _revision(value: str) -> int | None:
    """A revision the page wrote (ASCII digits, 1 to 2**63 - 1), or None."""
    # int() also reads other scripts' digits (U+0661 is 1): the page writes 0-9 only.
    if not value.isascii() or not value.isdigit():
        return None
    revision = int(value)
    return revision if 0 < revision < 2**63 else None


def _uuid(value: str) -> uuid.UUID | None:
    """The UUID ``value`` spells (any spelling), or None."""
    try:
        return uuid.UUID(value)
    except ValueError:
        return None


def _same_id(a: str, b: str) -> bool:
    """Whether two ids name one memory, in any spelling of a UUID."""
    ka, kb = _uuid(a), _uuid(b)
    return ka == kb if ka is not None and kb is not None else a == b


def _current_graph(
    memory: cpb.Memory,
) -> tuple[list[cpb.ClaimInput], list[cpb.RelationInput], list[cpb.AliasInput]]:
    """The claims, relations and aliases ``memory`` states now, as a write
    states them again (by entity id, with their valid times and confidence)."""

    def timed(claim: cpb.AttributeClaim | cpb.RelationClaim) -> dict[str, Any]:
        fields = {f: getattr(claim, f) for f in ("valid_from", "valid_until") if claim.HasField(f)}
        return {**fields, "confidence": claim.confidence}

    return (
        [
            cpb.ClaimInput(
                entity=cpb.MentionInput(entity_id=c.entity.id),
                attribute=c.attribute,
                value=c.value,
                **timed(c),
            )
            for c in memory.claims
            if not c.HasField("retired_at")
        ],
        [
            cpb.RelationInput(
                subject=cpb.MentionInput(entity_id=r.subject.id),
                predicate=r.predicate,
                object=cpb.MentionInput(entity_id=r.object.id),
                **timed(r),
            )
            for r in memory.relations
            if not r.HasField("retired_at")
        ],
        [
            cpb.AliasInput(entity=cpb.MentionInput(entity_id=a.entity.id), alias=a.alias)
            for a in memory.aliases
            if not a.HasField("retired_at")
        ],
    )


def _request_id() -> str:
    return f"review-{uuid.uuid4()}"


def _explain(exc: grpc.RpcError) -> str:
    code = exc.code()
    if code == grpc.StatusCode.ABORTED:
        return f"It changed since you looked; nothing was done. ({_status_text(exc)})"
    if code == grpc.StatusCode.NOT_FOUND:
        return f"It is gone or no longer visible to you; nothing was done. ({_status_text(exc)})"
    return _status_text(exc)
