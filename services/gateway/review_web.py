"""The dedup review page (design §8.1): a small HTTP server inside the gateway
process. A person signs in with their member token; every read and every
decision is a call to the gateway's own gRPC API with that token, so the same
authentication, eligibility and validation apply as for any agent.

Sessions: the token is entered once in a form and kept on the server, in
memory; the browser holds only a random session id in an HttpOnly,
SameSite=Strict cookie. Page scripts can never read the token (there are no
scripts at all: plain HTML forms), a cross-site form cannot ride on the
cookie, and every form carries a per-session CSRF token as well. A gateway
restart signs everyone out, which is the safe direction.

Decisions, one pair at a time, nothing automatic:
- keep both: the pair is dismissed and never proposed again;
- supersede one with the other's text: the outdated memory is superseded by
  a new memory carrying the kept memory's kind, title, body, confidence and
  mentions (the supersede tool always writes a new memory); the outdated one
  stays readable and points to it. The new memory is derived from the kept
  one (a derived_from link) and gets the derive rule's trust (design §4):
  the intersection of both memories' audiences and purposes, so the kept
  text never reaches anyone it was not written for;
- forget one, with a reason.

Entity pairs (design §8.5), shown to owners: two entities that may be one,
side by side with what the owner may see of each (attributes, relations,
aliases, mentioning memories) and why they were proposed. The owner merges
(keeping one's name; reversible, nothing rewritten), keeps them apart (never
proposed again), or undoes a merge in force. Nothing merges by itself.

Bounds: a request's head (request line and headers) and form body are
capped and a body is refused by its declared length before any of it is
read; sign-in sessions are capped per token and in all; connections are
capped in number and closed when idle.
"""

from __future__ import annotations

import contextlib
import hashlib
import html
import logging
import os
import secrets
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from http.cookies import SimpleCookie
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import grpc

from recallatron.client import Client
from recallatron.v1 import common_pb2 as cpb
from recallatron.v1 import gateway_pb2 as pb
from recallatron.vocabulary import (
    DEFAULT_PURPOSE,
    KIND,
    LINK_KIND,
    MAX_REASON,
    ORIGIN,
    PURPOSE,
    PURPOSES,
)

log = logging.getLogger("recallatron.gateway.review_web")

COOKIE = "recallatron_review"
SESSION_IDLE_SECONDS = 2 * 3600
SESSION_MAX_SECONDS = 12 * 3600
MAX_FORM_BYTES = 64 * 1024
# The request line and headers together (a browser sends well under 8 KiB).
MAX_HEAD_BYTES = 16 * 1024
# Each session holds a gateway client; a token signing in again and again
# replaces its own oldest session, and past the total nobody new signs in.
MAX_SESSIONS_PER_TOKEN = 8
MAX_SESSIONS = 1024
# Open connections (one thread each), and how long one may sit idle.
MAX_CONNECTIONS = 64
IDLE_SECONDS = 30.0
PAIRS_SHOWN = 50
ENTITY_PAIRS_SHOWN = 20
MERGES_SHOWN = 50
# Titles of the memories an entity card cites, read in one call at most.
CITED_MEMORIES = 100
REASON_TEXT = {
    "same_name": "the same name",
    "same_alias": "a name or alias of one is the other's",
    "name_prefix": "one name begins the other, and they share a co-mentioned entity",
    "close_context": "the memories mentioning them say close things",
}

ClientFactory = Callable[[str], Client]


@dataclass
class Session:
    client: Client
    csrf: str
    created: float
    seen: float
    flash: list[tuple[str, str]] = field(default_factory=list)
    # A digest of the token it signed in with (for the per-token cap).
    owner: str = ""


class TooManySessions(Exception):
    pass


class Sessions:
    """Signed-in people, by random session id; expired ones are dropped."""

    def __init__(self) -> None:
        self._items: dict[str, Session] = {}
        self._lock = threading.Lock()

    def create(self, client: Client, token: str = "") -> str:
        """A new session; TooManySessions when the total is reached (the
        token's own oldest session makes way when the token has its share)."""
        sid = secrets.token_urlsafe(32)
        now = time.monotonic()
        owner = hashlib.sha256(token.encode()).hexdigest()
        dropped: list[Session] = []
        with self._lock:
            self._expire(now)
            own = sorted((s.created, k) for k, s in self._items.items() if s.owner == owner)
            for _, k in own[: max(0, len(own) - MAX_SESSIONS_PER_TOKEN + 1)]:
                dropped.append(self._items.pop(k))
            if len(self._items) >= MAX_SESSIONS:
                raise TooManySessions()
            self._items[sid] = Session(client, secrets.token_urlsafe(24), now, now, owner=owner)
        for session in dropped:
            session.client.close()
        return sid

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def get(self, sid: str | None) -> Session | None:
        if not sid:
            return None
        now = time.monotonic()
        with self._lock:
            self._expire(now)
            session = self._items.get(sid)
            if session is not None:
                session.seen = now
            return session

    def drop(self, sid: str | None) -> None:
        with self._lock:
            session = self._items.pop(sid or "", None)
        if session is not None:
            session.client.close()

    def close(self) -> None:
        with self._lock:
            items, self._items = list(self._items.values()), {}
        for session in items:
            session.client.close()

    def _expire(self, now: float) -> None:
        for sid, s in list(self._items.items()):
            if now - s.seen > SESSION_IDLE_SECONDS or now - s.created > SESSION_MAX_SECONDS:
                del self._items[sid]
                s.client.close()


@dataclass
class Response:
    status: int
    body: bytes = b""
    content_type: str = "text/html; charset=utf-8"
    headers: list[tuple[str, str]] = field(default_factory=list)


def redirect(location: str, headers: list[tuple[str, str]] | None = None) -> Response:
    return Response(HTTPStatus.SEE_OTHER, headers=[("Location", location), *(headers or [])])


# -- rendering ---------------------------------------------------------------

e = html.escape

STYLE = """
:root { --ink: #1d2430; --muted: #5b6576; --line: #d8dde6; --accent: #2456a6; --warn: #a62424; }
* { box-sizing: border-box; }
body { font: 15px/1.45 system-ui, sans-serif; color: var(--ink); margin: 0; background: #f5f6f8; }
header.top { display: flex; gap: 1rem; align-items: center; padding: .8rem 1.5rem;
  background: #fff; border-bottom: 1px solid var(--line); }
header.top h1 { font-size: 1.1rem; margin: 0 auto 0 0; }
main { max-width: 1200px; margin: 0 auto; padding: 1rem 1.5rem 3rem; }
.lead { color: var(--muted); }
.flash { padding: .6rem .9rem; border-radius: 6px; margin: .5rem 0; background: #e7f0ff; }
.flash.error { background: #fde8e8; color: var(--warn); }
section.pair { background: #fff; border: 1px solid var(--line); border-radius: 8px;
  padding: 1rem; margin: 1rem 0; }
section.pair h2 { font-size: 1rem; margin: 0 0 .6rem; }
.sides { display: grid; grid-template-columns: 1fr 1fr; gap: 1rem; }
article.memory { border: 1px solid var(--line); border-radius: 6px; padding: .8rem; }
article.memory h3 { margin: .2rem 0 .4rem; font-size: 1.05rem; }
.label { display: inline-block; min-width: 1.6rem; text-align: center; font-weight: 700;
  background: var(--accent); color: #fff; border-radius: 4px; margin-right: .4rem; }
.kind { color: var(--muted); text-transform: uppercase; font-size: .75rem; letter-spacing: .05em; }
.body { white-space: pre-wrap; margin: .4rem 0 .8rem; }
dl.meta { display: grid; grid-template-columns: max-content 1fr; gap: .1rem .8rem; margin: 0;
  font-size: .85rem; }
dl.meta dt { color: var(--muted); }
dl.meta dd { margin: 0; overflow-wrap: anywhere; }
.provenance { font-size: .85rem; margin-top: .6rem; }
.provenance h4 { margin: .2rem 0; font-size: .85rem; color: var(--muted); }
.provenance ul { margin: 0; padding-left: 1.1rem; }
.decisions { display: flex; flex-wrap: wrap; gap: .6rem; margin-top: .9rem; align-items: end; }
.decisions form { display: flex; gap: .4rem; align-items: center; }
.decisions .hint { flex-basis: 100%; color: var(--muted); font-size: .8rem; margin: 0; }
button { font: inherit; padding: .35rem .8rem; border-radius: 5px; border: 1px solid var(--accent);
  background: #fff; color: var(--accent); cursor: pointer; }
button.danger { border-color: var(--warn); color: var(--warn); }
input[type=text], input[type=password], select { font: inherit; padding: .3rem .5rem;
  border: 1px solid var(--line); border-radius: 5px; }
.decisions input[type=text] { width: 11rem; }
form.signin { max-width: 28rem; margin: 4rem auto; background: #fff; padding: 1.5rem;
  border: 1px solid var(--line); border-radius: 8px; display: grid; gap: .8rem; }
.empty { color: var(--muted); padding: 2rem 0; }
h2.part { font-size: 1.05rem; margin: 2rem 0 .3rem; }
article.entity { border: 1px solid var(--line); border-radius: 6px; padding: .8rem; }
article.entity h3 { margin: .2rem 0 .4rem; font-size: 1.05rem; }
article.entity ul { margin: .2rem 0 .6rem; padding-left: 1.1rem; font-size: .9rem; }
article.entity h4 { margin: .5rem 0 .1rem; font-size: .85rem; color: var(--muted); }
.reasons { color: var(--muted); font-size: .9rem; margin: 0 0 .6rem; }
table.merges { border-collapse: collapse; width: 100%; background: #fff; font-size: .9rem; }
table.merges td, table.merges th { border-bottom: 1px solid var(--line); padding: .4rem;
  text-align: left; }
"""


def page(title: str, content: str, top: str = "") -> bytes:
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        '<meta name=viewport content="width=device-width, initial-scale=1">'
        f"<title>{e(title)}</title><link rel=stylesheet href=/review.css></head><body>"
        f"<header class=top><h1>Recallatron · review</h1>{top}</header>"
        f"<main>{content}</main></body></html>"
    ).encode()


def _when(ts: Any) -> str:
    return f"{ts.ToDatetime():%Y-%m-%d %H:%M} UTC" if ts.seconds else "-"


def _audience(m: cpb.Memory) -> str:
    if m.audience.workspace:
        return "the workspace"
    return f"one member ({m.audience.member_id})"


def _ref(ref: cpb.MemoryRef) -> str:
    text = e(ref.title) if ref.visible else "<em>not visible to you</em>"
    return f"{text} <code>{e(ref.id)}</code>"


def memory_card(label: str, m: cpb.Memory) -> str:
    purposes = ", ".join(PURPOSE.name(p) for p in m.purposes)
    rows = [
        ("Created", _when(m.created_at)),
        ("Updated", _when(m.updated_at)),
        ("Origin", ORIGIN.name(m.origin)),
        ("Revision", str(m.revision)),
        ("Confidence", f"{m.confidence:.2f}"),
        ("Audience", _audience(m)),
        ("Purposes", purposes),
        ("Created by", m.created_by),
        ("Id", m.id),
    ]
    meta = "".join(f"<dt>{e(k)}</dt><dd>{e(v)}</dd>" for k, v in rows)
    items = [f"<li>{e(LINK_KIND.name(link.kind))} → {_ref(link.target)}</li>" for link in m.links]
    items += [f"<li>supersedes → {_ref(r)}</li>" for r in m.supersedes]
    items += [f"<li>superseded by → {_ref(r)}</li>" for r in m.superseded_by]
    items += [f"<li>mentions {e(x.name)} <code>{e(x.entity_id)}</code></li>" for x in m.mentions]
    provenance = "".join(items) or "<li>none: told directly, no links or mentions</li>"
    return (
        f'<article class=memory data-testid="memory-{e(label)}" data-id="{e(m.id)}">'
        f"<span class=label>{e(label)}</span>"
        f"<span class=kind>{e(KIND.name(m.kind))}</span>"
        f"<h3>{e(m.title)}</h3><p class=body>{e(m.body)}</p><dl class=meta>{meta}</dl>"
        f"<div class=provenance><h4>Provenance</h4><ul>{provenance}</ul></div></article>"
    )


def _hidden(**values: str) -> str:
    return "".join(f'<input type=hidden name="{e(k)}" value="{e(v)}">' for k, v in values.items())


def decision_form(
    action: str, button: str, fields: dict[str, str], css: str = "", extra: str = ""
) -> str:
    """One decision, posted to /decide: its action is the part of ``action``
    before a colon (the whole names the form for tests); ``fields`` carry the
    session's CSRF token, the purpose and what the decision is about."""
    return (
        f'<form method=post action=/decide data-testid="{e(action)}">'
        f"{_hidden(**fields, action=action.split(':')[0])}{extra}"
        f'<button type=submit class="{css}">{e(button)}</button></form>'
    )


def pair_section(pair: pb.DuplicatePair, csrf: str, purpose: str) -> str:
    a, b = pair.first, pair.second
    common = {"csrf": csrf, "purpose": purpose, "first_id": a.id, "second_id": b.id}

    def form(action: str, button: str, css: str = "", extra: str = "", **fields: str) -> str:
        return decision_form(action, button, {**common, **fields}, css, extra)

    def supersede(old: cpb.Memory, new: cpb.Memory, old_label: str, new_label: str) -> str:
        return form(
            f"supersede:{old_label}",
            f"Supersede {old_label} with {new_label}'s text",
            retire_id=old.id,
            retire_revision=str(old.revision),
            keep_id=new.id,
            keep_revision=str(new.revision),
        )

    def forget(m: cpb.Memory, label: str) -> str:
        reason = (
            f"<input type=text name=reason required maxlength={MAX_REASON} "
            f'placeholder="why forget {e(label)}" aria-label="reason to forget {e(label)}">'
        )
        return form(f"forget:{label}", f"Forget {label}", "danger", reason, target_id=m.id)

    return (
        f'<section class=pair data-testid=pair data-first="{e(a.id)}" data-second="{e(b.id)}">'
        f"<h2>cosine {pair.cosine:.3f}</h2>"
        f"<div class=sides>{memory_card('A', a)}{memory_card('B', b)}</div>"
        "<div class=decisions>"
        f"{form('keep', 'Keep both')}"
        f"{supersede(a, b, 'A', 'B')}{supersede(b, a, 'B', 'A')}"
        f"{forget(a, 'A')}{forget(b, 'B')}"
        "<p class=hint>Keep both: never proposed again. Supersede: the outdated one is "
        "replaced by a new memory with the other's text and stays readable, pointing to it; "
        "the new memory is derived from the kept one and reaches only the audience and "
        "purposes both share. "
        "Forget: its text and embedding are purged; a tombstone keeps links valid.</p>"
        "</div></section>"
    )


def _relation(r: cpb.EntityRelation) -> str:
    arrow = "→" if r.direction == cpb.RELATION_DIRECTION_OUTGOING else "←"
    return f"<li>{e(r.predicate)} {arrow} {e(r.other.name)} <code>{e(r.other.id)}</code></li>"


def entity_card(label: str, card: cpb.EntityCard, titles: dict[str, str]) -> str:
    """One side of an entity pair: what the owner may see of it."""
    rows = [("Type", card.type or "-"), ("Id", card.id)]
    if card.merged:
        rows.append(("Merged with", ", ".join(f"{m.name} ({m.id})" for m in card.merged)))
    if card.aliases:
        rows.append(("Aliases", ", ".join(card.aliases)))
    meta = "".join(f"<dt>{e(k)}</dt><dd>{e(v)}</dd>" for k, v in rows)
    attributes = (
        "".join(f"<li>{e(a.attribute)} = {e(a.value)}</li>" for a in card.attributes)
        or "<li>none</li>"
    )
    relations = "".join(_relation(r) for r in card.relations) or "<li>none</li>"
    cited = (
        "".join(
            f"<li>{e(titles.get(m, '(changed since)'))} <code>{e(m)}</code></li>"
            for m in card.mentioned_by
        )
        or "<li>none</li>"
    )
    more = "<p class=hint>Lists cut at their cap.</p>" if card.truncated else ""
    return (
        f'<article class=entity data-testid="entity-{e(label)}" data-entity="{e(card.id)}">'
        f"<span class=label>{e(label)}</span><span class=kind>entity</span>"
        f"<h3>{e(card.name)}</h3><dl class=meta>{meta}</dl>"
        f"<h4>Attributes</h4><ul>{attributes}</ul>"
        f"<h4>Relations</h4><ul>{relations}</ul>"
        f"<h4>Mentioned by</h4><ul>{cited}</ul>{more}</article>"
    )


def entity_pair_section(
    pair: cpb.EntityPair, titles: dict[str, str], csrf: str, purpose: str
) -> str:
    a, b = pair.first, pair.second

    def form(action: str, button: str, **fields: str) -> str:
        return decision_form(action, button, {"csrf": csrf, "purpose": purpose, **fields})

    why = "; ".join(REASON_TEXT.get(r, r) for r in pair.reasons)
    if pair.HasField("context_cosine"):
        why += f" (mention contexts at cosine {pair.context_cosine:.3f})"
    return (
        f'<section class=pair data-testid=entity-pair data-first="{e(a.id)}" '
        f'data-second="{e(b.id)}"><h2>{e(a.name)} · {e(b.name)}</h2>'
        f"<p class=reasons>Proposed because: {e(why)}.</p>"
        f"<div class=sides>{entity_card('A', a, titles)}{entity_card('B', b, titles)}</div>"
        "<div class=decisions>"
        f"{form('merge:A', 'Merge, keep the name of A', kept_id=a.id, merged_id=b.id)}"
        f"{form('merge:B', 'Merge, keep the name of B', kept_id=b.id, merged_id=a.id)}"
        f"{form('apart', 'Keep apart', first_id=a.id, second_id=b.id)}"
        "<p class=hint>Merge: lookup, neighbors, timelines and recall answer through one "
        "entity with both names, for everyone who can see both; nothing is rewritten, and "
        "the merge can be undone below. Keep apart: never proposed again.</p>"
        "</div></section>"
    )


def merges_table(merges: list[cpb.EntityMerge], csrf: str, purpose: str) -> str:
    if not merges:
        return "<p class=empty data-testid=no-merges>No merges in force.</p>"
    rows = "".join(
        f'<tr data-testid=merge data-merge="{e(m.id)}"><td>{e(m.merged.name)} '
        f"<code>{e(m.merged.id)}</code></td><td>{e(m.kept.name)} <code>{e(m.kept.id)}</code>"
        f"</td><td>{e(_when(m.decided_at))}</td><td>"
        + decision_form("undo", "Undo", {"csrf": csrf, "purpose": purpose, "merge_id": m.id})
        + "</td></tr>"
        for m in merges
    )
    return (
        "<table class=merges><tr><th>Merged</th><th>Into</th><th>Decided</th><th></th></tr>"
        f"{rows}</table>"
    )


def signin_page(error: str = "") -> bytes:
    message = f'<p class="flash error" role=alert>{e(error)}</p>' if error else ""
    return page(
        "Sign in · dedup review",
        "<form class=signin method=post action=/signin>"
        "<h2>Sign in</h2><p class=lead>With your member token (the one your agents use). It "
        "stays on the server for this session; the browser keeps only a session cookie.</p>"
        f"{message}<label>Member token <input type=password name=token required "
        "autocomplete=off autofocus data-testid=token></label>"
        "<button type=submit data-testid=signin>Sign in</button></form>",
    )


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
        self, method: str, target: str, cookies: dict[str, str], form: dict[str, str]
    ) -> Response:
        url = urlsplit(target)
        path = url.path
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
            return self.review(session, query.get("purpose", DEFAULT_PURPOSE))
        if method == "POST" and path == "/signin":
            return self.signin(form.get("token", ""))
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

    def signin(self, token: str) -> Response:
        token = token.strip()
        if not token:
            return Response(HTTPStatus.BAD_REQUEST, signin_page("Enter your member token."))
        client = self.client_factory(token)
        try:
            client.duplicate_pairs(limit=1)
        except grpc.RpcError as exc:
            client.close()
            if exc.code() == grpc.StatusCode.UNAUTHENTICATED:
                return Response(
                    HTTPStatus.UNAUTHORIZED, signin_page("That token is unknown or revoked.")
                )
            return Response(HTTPStatus.BAD_GATEWAY, signin_page(_status_text(exc)))
        try:
            sid = self.sessions.create(client, token)
        except TooManySessions:
            client.close()
            return Response(
                HTTPStatus.SERVICE_UNAVAILABLE,
                signin_page("Too many people are signed in; try again later."),
            )
        return redirect("/", [("Set-Cookie", _cookie(sid, max_age=SESSION_MAX_SECONDS))])

    def review(self, session: Session, purpose: str) -> Response:
        if purpose not in PURPOSES:
            purpose = DEFAULT_PURPOSE
        flashes = "".join(
            f'<p class="flash {e(level)}" role=status data-testid=flash>{e(text)}</p>'
            for level, text in session.flash
        )
        session.flash.clear()
        try:
            pairs = list(session.client.duplicate_pairs(purpose=purpose, limit=PAIRS_SHOWN).pairs)
        except grpc.RpcError as exc:
            pairs = []
            flashes += f'<p class="flash error" role=alert>{e(_status_text(exc))}</p>'
        options = "".join(
            f'<option value="{p}"{" selected" if p == purpose else ""}>{p}</option>'
            for p in PURPOSES
        )
        top = (
            "<form method=get action=/><label>Purpose <select name=purpose>"
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
        body = "<h2 class=part>Memory pairs</h2>" + body + self.entities(session, purpose)
        return Response(HTTPStatus.OK, page("Dedup review", lead + flashes + body, top))

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
            dict.fromkeys(m for p in pairs for c in (p.first, p.second) for m in c.mentioned_by)
        )[:CITED_MEMORIES]
        titles: dict[str, str] = {}
        if cited:
            with contextlib.suppress(grpc.RpcError):
                # A memory changed since is shown by id alone.
                titles = {m.id: m.title for m in client.read(cited, purpose=purpose).memories}
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
                client.dismiss_pair(form.get("first_id", ""), form.get("second_id", ""), purpose)
                session.flash.append(("ok", "Kept both; this pair will not be proposed again."))
            elif action == "forget":
                reason = form.get("reason", "").strip()
                if not reason or len(reason) > MAX_REASON:
                    session.flash.append(
                        ("error", f"Forgetting needs a reason (1 to {MAX_REASON} chars).")
                    )
                    return
                target = form.get("target_id", "")
                client.forget(target, reason, purpose=purpose, request_id=_request_id())
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

    def _supersede(self, session: Session, form: dict[str, str], purpose: str) -> None:
        client = session.client
        retire_id, keep_id = form.get("retire_id", ""), form.get("keep_id", "")
        try:
            retire_rev, keep_rev = int(form["retire_revision"]), int(form["keep_revision"])
        except (KeyError, ValueError):
            session.flash.append(("error", "The form was incomplete; look again."))
            return
        kept = client.read([keep_id], purpose=purpose).memories[0]
        if kept.revision != keep_rev:
            session.flash.append(
                ("error", f"{keep_id} changed since you looked (now revision {kept.revision}).")
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
            mentions=[cpb.MentionInput(entity_id=m.entity_id) for m in kept.mentions],
            reason=f"dedup review: replaced with the text of {keep_id}",
            purpose=PURPOSE.value(purpose),
            # Derived from the kept memory: the store gives the successor the
            # intersection of both memories' trust (design §4), never A's alone.
            source_ids=[keep_id],
        )
        resp = client.call(client.memory.Supersede, request)
        session.flash.append(("ok", f"Superseded {retire_id}; its successor is {resp.memory.id}."))


def _request_id() -> str:
    return f"review-{uuid.uuid4()}"


def _explain(exc: grpc.RpcError) -> str:
    code = exc.code()
    if code == grpc.StatusCode.ABORTED:
        return f"It changed since you looked; nothing was done. ({_status_text(exc)})"
    if code == grpc.StatusCode.NOT_FOUND:
        return f"It is gone or no longer visible to you; nothing was done. ({_status_text(exc)})"
    return _status_text(exc)


def _cookie(value: str, max_age: int) -> str:
    return f"{COOKIE}={value}; Path=/; HttpOnly; SameSite=Strict; Max-Age={max_age}"


# -- HTTP ------------------------------------------------------------------------

SECURITY_HEADERS = [
    (
        "Content-Security-Policy",
        "default-src 'none'; style-src 'self'; form-action 'self'; frame-ancestors 'none'; "
        "base-uri 'none'",
    ),
    ("X-Content-Type-Options", "nosniff"),
    # Not no-referrer: with it, browsers send "Origin: null" on our own forms.
    ("Referrer-Policy", "same-origin"),
    ("Cache-Control", "no-store"),
]


class HeadTooLarge(Exception):
    pass


class _HeadLimit:
    """The connection's reader, counting what the request line and headers
    take (http.server reads both with readline) against MAX_HEAD_BYTES; the
    count starts again with each request. Bodies are read with read()."""

    def __init__(self, raw: Any) -> None:
        self.raw = raw
        self.left = MAX_HEAD_BYTES

    def readline(self, size: int = -1) -> bytes:
        cap = self.left + 1 if size < 0 else min(size, self.left + 1)
        line: bytes = self.raw.readline(cap)
        self.left -= len(line)
        if self.left < 0:
            raise HeadTooLarge()
        return line

    def __getattr__(self, name: str) -> Any:
        return getattr(self.raw, name)


def content_length(value: str | None) -> int | Response:
    """The declared body length, or the answer that refuses it unread."""
    if value is None or not value.strip():
        return 0
    if not value.strip().isdigit():
        return Response(HTTPStatus.BAD_REQUEST, b"Content-Length: not a length", "text/plain")
    length = int(value)
    if length > MAX_FORM_BYTES:
        return Response(
            HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
            f"Content-Length: at most {MAX_FORM_BYTES} bytes".encode(),
            "text/plain",
        )
    return length


def _handler(app: ReviewApp) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "recallatron-review"
        sys_version = ""
        # Each read waits at most this long: an idle connection is closed.
        timeout = IDLE_SECONDS

        def setup(self) -> None:
            super().setup()
            self.rfile = _HeadLimit(self.rfile)  # type: ignore[assignment]

        def handle_one_request(self) -> None:
            self.rfile.left = MAX_HEAD_BYTES  # type: ignore[attr-defined]
            try:
                super().handle_one_request()
            except HeadTooLarge:
                self.close_connection = True
                self.requestline = getattr(self, "requestline", "")
                self.request_version = getattr(self, "request_version", "HTTP/1.0")
                self.command = getattr(self, "command", None) or "GET"
                self._send(
                    Response(
                        HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE,
                        f"request head: at most {MAX_HEAD_BYTES} bytes".encode(),
                        "text/plain",
                    )
                )

        def do_GET(self) -> None:
            self._serve("GET", {})

        def do_POST(self) -> None:
            if self.headers.get("Transfer-Encoding"):
                # Only a declared length is read (and bounded before reading).
                self._refuse(Response(HTTPStatus.LENGTH_REQUIRED, b"send Content-Length"))
                return
            length = content_length(self.headers.get("Content-Length"))
            if isinstance(length, Response):
                self._refuse(length)
                return
            origin = self.headers.get("Origin")
            if origin and urlsplit(origin).netloc != self.headers.get("Host", ""):
                # A form posted from another site: refused before anything runs.
                self._refuse(Response(HTTPStatus.FORBIDDEN, b"cross-site form refused"))
                return
            raw = self.rfile.read(length).decode("utf-8", errors="replace")
            form = {k: v[0] for k, v in parse_qs(raw, keep_blank_values=True).items()}
            self._serve("POST", form)

        def _serve(self, method: str, form: dict[str, str]) -> None:
            jar = SimpleCookie()
            try:
                jar.load(self.headers.get("Cookie", ""))
            except Exception:
                jar = SimpleCookie()
            cookies = {k: m.value for k, m in jar.items()}
            try:
                response = app.handle(method, self.path, cookies, form)
            except Exception:
                log.exception("review page error")
                response = Response(
                    HTTPStatus.INTERNAL_SERVER_ERROR, page("Error", "<p>Error.</p>")
                )
            self._send(response)

        def _refuse(self, response: Response) -> None:
            """Answers without reading the body; the connection then closes, as
            the unread body must not be taken for the next request."""
            self.close_connection = True
            response.headers.append(("Connection", "close"))
            self._send(response)

        def _send(self, response: Response) -> None:
            self.send_response(response.status)
            self.send_header("Content-Type", response.content_type)
            self.send_header("Content-Length", str(len(response.body)))
            own = {k for k, _ in response.headers}
            for key, value in [*SECURITY_HEADERS, *response.headers]:
                if (key, value) in SECURITY_HEADERS and key in own:
                    continue  # the response sets its own (say, caching of the stylesheet)
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(response.body)

        def log_message(self, format: str, *args: Any) -> None:
            log.debug("http " + format, *args)

    return Handler


def _split(listen: str) -> tuple[str, int]:
    host, _, port = listen.rpartition(":")
    return host.strip("[]") or "127.0.0.1", int(port)


class BoundedHTTPServer(ThreadingHTTPServer):
    """A thread per connection, at most MAX_CONNECTIONS of them: one more is
    answered 503 and closed at once."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__(address, handler)
        self.slots = threading.BoundedSemaphore(MAX_CONNECTIONS)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self.slots.acquire(blocking=False):
            with contextlib.suppress(OSError):
                request.sendall(
                    b"HTTP/1.0 503 Service Unavailable\r\nContent-Length: 0\r\n"
                    b"Connection: close\r\nRetry-After: 1\r\n\r\n"
                )
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A peer gone mid-answer is routine; anything else is logged, not printed.
        if isinstance(sys.exc_info()[1], ConnectionError | TimeoutError):
            log.debug("review page: connection ended early")
        else:
            log.exception("review page: connection failed")

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()


class ReviewWeb:
    """The page's HTTP server, in a daemon thread of the gateway process."""

    def __init__(self, listen: str, gateway_target: str) -> None:
        self.app = ReviewApp(gateway_target)
        host, port = _split(listen)
        # Binding a port in use fails here, at start-up, not silently later.
        self.httpd = BoundedHTTPServer((host, port), _handler(self.app))
        self.httpd.daemon_threads = True
        self.port = int(self.httpd.server_address[1])
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, name="review-web", daemon=True
        )

    def start(self, port_file: str = "") -> int:
        self.thread.start()
        if port_file:
            with open(port_file + ".tmp", "w") as f:
                f.write(str(self.port))
            os.replace(port_file + ".tmp", port_file)
        return self.port

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.app.sessions.close()


def gateway_target(gateway_listen: str, port: int) -> str:
    """The gateway's own gRPC address as seen from inside its process."""
    host, _ = _split(gateway_listen)
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
