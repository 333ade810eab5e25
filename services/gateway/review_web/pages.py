"""The review page's HTML: memory and entity cards, the decision forms, the
sign-in page. Plain HTML forms, no scripts."""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any
from urllib.parse import urlencode

from recallatron.v1 import common_pb2 as cpb
from recallatron.v1 import gateway_pb2 as pb
from recallatron.vocabulary import (
    KIND,
    LINK_KIND,
    MAX_REASON,
    ORIGIN,
    PURPOSE,
)
from services.gateway.review_web.decisions import new_request_id

# The memories an entity card lists by title, newest first (the rest are
# counted): the page reads each one's title, and a card may cite hundreds.
MENTIONS_SHOWN = 5

REASON_TEXT = {
    "same_name": "the same name",
    "same_alias": "a name or alias of one is the other's",
    "name_prefix": "one name begins the other, and they share a co-mentioned entity",
    "close_context": "the memories mentioning them say close things",
}


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
.who { margin: 0; color: var(--muted); }
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
            # One id per drawn form: posted twice, the store answers it once.
            request_id=new_request_id(),
        )

    def forget(m: cpb.Memory, label: str) -> str:
        reason = (
            f"<input type=text name=reason required maxlength={MAX_REASON} "
            f'placeholder="why forget {e(label)}" aria-label="reason to forget {e(label)}">'
        )
        return form(
            f"forget:{label}",
            f"Forget {label}",
            "danger",
            reason,
            target_id=m.id,
            target_revision=str(m.revision),
            request_id=new_request_id(),
        )

    # The revisions shown: a memory changed since is not kept on its old text.
    keep = form(
        "keep", "Keep both", first_revision=str(a.revision), second_revision=str(b.revision)
    )
    return (
        f'<section class=pair data-testid=pair data-first="{e(a.id)}" data-second="{e(b.id)}">'
        f"<h2>cosine {pair.cosine:.3f}</h2>"
        f"<div class=sides>{memory_card('A', a)}{memory_card('B', b)}</div>"
        "<div class=decisions>"
        f"{keep}"
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
    listed = card.mentioned_by[:MENTIONS_SHOWN]
    cited = "".join(
        f"<li>{e(titles[m])} <code>{e(m)}</code></li>"
        if m in titles
        else f"<li><code>{e(m)}</code></li>"
        for m in listed
    )
    if len(card.mentioned_by) > len(listed):
        cited += f"<li>and {len(card.mentioned_by) - len(listed)} more</li>"
    more = "<p class=hint>Lists cut at their cap.</p>" if card.truncated else ""
    return (
        f'<article class=entity data-testid="entity-{e(label)}" data-entity="{e(card.id)}">'
        f"<span class=label>{e(label)}</span><span class=kind>entity</span>"
        f"<h3>{e(card.name)}</h3><dl class=meta>{meta}</dl>"
        f"<h4>Attributes</h4><ul>{attributes}</ul>"
        f"<h4>Relations</h4><ul>{relations}</ul>"
        f"<h4>Mentioned by</h4><ul>{cited or '<li>none</li>'}</ul>{more}</article>"
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


def more_pairs(testid: str, shown: int, how: str) -> str:
    """Said under a pair list that shows fewer pairs than wait: the lists
    are not paged, so deciding on those shown makes way for the next."""
    return (
        f"<p class=hint data-testid={e(testid)}>More pairs wait than the {shown} shown: "
        f"{e(how)}, and the next ones take their places.</p>"
    )


def merges_table(
    merges: list[cpb.EntityMerge], csrf: str, purpose: str, older: str = "", since: str = ""
) -> str:
    """A page of the merges in force; ``older``: the next page's token (a
    link to it), ``since``: this page's (a link back to the newest)."""
    links = ""
    if since:
        links += f'<a data-testid=newest-merges href="{e(_view_url(purpose))}">Newest merges</a> '
    if older:
        links += (
            f'<a data-testid=more-merges href="{e(_view_url(purpose, merges=older))}">'
            "Older merges</a>"
        )
    links = f"<p class=pages>{links}</p>" if links else ""
    if not merges:
        none = "No older merges in force." if since else "No merges in force."
        return f"<p class=empty data-testid=no-merges>{none}</p>{links}"
    # An undo comes back to this page of merges (``since``), not the newest.
    at = {"merges": since} if since else {}
    rows = "".join(
        f'<tr data-testid=merge data-merge="{e(m.id)}"><td>{e(m.merged.name)} '
        f"<code>{e(m.merged.id)}</code></td><td>{e(m.kept.name)} <code>{e(m.kept.id)}</code>"
        f"</td><td>{e(_when(m.decided_at))}</td><td>"
        + decision_form("undo", "Undo", {"csrf": csrf, "purpose": purpose, "merge_id": m.id, **at})
        + "</td></tr>"
        for m in merges
    )
    return (
        "<table class=merges><tr><th>Merged</th><th>Into</th><th>Decided</th><th></th></tr>"
        f"{rows}</table>{links}"
    )


def _view_url(purpose: str, **query: str) -> str:
    """The page's own address for ``purpose`` and more ``query``."""
    return "/?" + urlencode({"purpose": purpose, **query})


def signed_in(handle: str, workspace: str) -> str:
    """Who the page acts as (nothing when the gateway did not say)."""
    if not handle:
        return ""
    where = f" in <b data-testid=workspace>{e(workspace)}</b>" if workspace else ""
    return (
        f"<p class=who data-testid=signed-in>Signed in as "
        f"<b data-testid=handle>{e(handle)}</b>{where}</p>"
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
