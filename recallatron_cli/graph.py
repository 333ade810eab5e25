"""The graph on the command line: `lookup` and `neighbors`, and the claim
options of remember, derive, correct and supersede.

    --claim "Robin Goodwin:city=Lisbon"     an attribute claim
    --relation "Robin Goodwin:leads:Apollo" a relation claim
    --alias "Robin Goodwin=Robin"           an alias
    --entity-type "Robin Goodwin=person"    a new entity's type
    --graph FILE                            claims, relations and aliases as JSON
                                            (the agents' shape; - for stdin)

An entity is a name (a new entity; the same name within one call is one
entity) or @ENTITY_ID (an existing one)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, TypedDict

from recallatron.v1 import common_pb2 as cpb
from recallatron_cli import common


def graph_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("graph claims stated by the memory")
    g.add_argument("--claim", action="append", default=[], metavar="ENTITY:ATTRIBUTE=VALUE")
    g.add_argument("--relation", action="append", default=[], metavar="SUBJECT:PREDICATE:OBJECT")
    g.add_argument("--alias", action="append", default=[], metavar="ENTITY=ALIAS")
    g.add_argument("--entity-type", action="append", default=[], metavar="NAME=TYPE")
    g.add_argument("--valid-from", help="RFC 3339; for every claim and relation of this call")
    g.add_argument("--valid-until", help="RFC 3339; for every claim and relation of this call")
    g.add_argument("--graph", metavar="FILE", help="JSON {claims, relations, aliases}; - stdin")
    # A refused item names both flags that give items, of those given.
    common.renamed_fields(
        p,
        claims=("--claim", "--graph"),
        relations=("--relation", "--graph"),
        aliases=("--alias", "--graph"),
    )


# Each option's form, as its help shows it.
_FORMS = {
    "--claim": "ENTITY:ATTRIBUTE=VALUE",
    "--relation": "SUBJECT:PREDICATE:OBJECT",
    "--alias": "ENTITY=ALIAS",
    "--entity-type": "NAME=TYPE",
}


def _split(text: str, sep: str, option: str, parts: int, given: str = "") -> list[str]:
    """``text`` in ``parts`` non-blank pieces; refused naming the option and
    its value as ``given`` (when ``text`` is a part of it)."""
    pieces = text.split(sep, parts - 1)
    if len(pieces) != parts or not all(p.strip() for p in pieces):
        shown = given or text
        raise common.Refused(
            f"INVALID_ARGUMENT: {option}: expected {_FORMS[option]}, got {shown!r}"
        )
    return [p.strip() for p in pieces]


class GraphItems(TypedDict):
    """The graph keyword arguments of the client's remember, derive, correct
    and supersede."""

    claims: list[dict[str, Any]]
    relations: list[dict[str, Any]]
    aliases: list[dict[str, Any]]


def _listed(given: dict[str, Any], key: str) -> list[Any]:
    """The items under ``key`` of a --graph file: a JSON array (null or left
    out: none, as the JSON form of a request reads them)."""
    value = given.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValueError(f"--graph: {key}: a JSON array is expected")
    return value


def graph_items(args: argparse.Namespace) -> GraphItems:
    """The claims, relations and aliases the options give, in the agents' shape."""
    types = dict(_split(t, "=", "--entity-type", 2) for t in args.entity_type)

    def entity(text: str) -> dict[str, Any]:
        if text.startswith("@"):
            return {"entity_id": text[1:]}
        out: dict[str, Any] = {"name": text}
        if text in types:
            out["type"] = types[text]
        return out

    span = {k: v for k, v in (("valid_from", args.valid_from), ("valid_until", args.valid_until))}
    span = {k: v for k, v in span.items() if v}
    given: dict[str, Any] = {}
    if args.graph:
        try:
            handle = sys.stdin if args.graph == "-" else open(args.graph)  # noqa: SIM115
            with handle:
                given = json.load(handle)
        except json.JSONDecodeError as exc:
            raise ValueError(f"--graph: not JSON ({exc})") from None
        except UnicodeDecodeError as exc:
            raise ValueError(
                f"--graph: not UTF-8 text ({exc.reason} at byte {exc.start})"
            ) from None
        except OSError as exc:
            raise ValueError(f"--graph: {exc.strerror or exc}: {args.graph}") from None
        if not isinstance(given, dict):
            raise ValueError(
                '--graph: a JSON object is expected: {"claims": [...], "relations": [...], '
                '"aliases": [...]}'
            )
    # A key it does not read would be a list meant and silently not sent.
    unknown = sorted(set(given) - set(GraphItems.__required_keys__))
    if unknown:
        raise ValueError(f"--graph: unknown key {unknown[0]!r:.60} (claims, relations, aliases)")
    items: GraphItems = {
        "claims": _listed(given, "claims"),
        "relations": _listed(given, "relations"),
        "aliases": _listed(given, "aliases"),
    }
    for text in args.claim:
        name, rest = _split(text, ":", "--claim", 2)
        attribute, value = _split(rest, "=", "--claim", 2, given=text)
        items["claims"].append(
            {"entity": entity(name), "attribute": attribute, "value": value, **span}
        )
    for text in args.relation:
        subject, predicate, obj = _split(text, ":", "--relation", 3)
        items["relations"].append(
            {"subject": entity(subject), "predicate": predicate, "object": entity(obj), **span}
        )
    for text in args.alias:
        name, alias = _split(text, "=", "--alias", 2)
        items["aliases"].append({"entity": entity(name), "alias": alias})
    return items


def _when(ts: Any) -> str:
    return f"{ts.ToDatetime():%Y-%m-%d}" if ts.seconds else "…"


def _claim_line(c: Any, what: str) -> str:
    said = f"stated {c.stated_at.ToDatetime():%Y-%m-%d %H:%M} UTC by memory {c.memory_id}"
    if c.retired_at.seconds:
        said += f", retired {c.retired_at.ToDatetime():%Y-%m-%d %H:%M} UTC"
    valid = ""
    if c.valid_from.seconds or c.valid_until.seconds:
        valid = f" (valid {_when(c.valid_from)} to {_when(c.valid_until)})"
    return f"  {what}{valid} · confidence {c.confidence:.2f} · {said}"


def card_text(card: cpb.EntityCard) -> str:
    head = f"{card.id}  {card.name}" + (f" [{card.type}]" if card.type else "")
    lines = [head]
    if card.merged:
        lines.append("  merged with " + ", ".join(f"{m.name} ({m.id})" for m in card.merged))
    if card.aliases:
        lines.append("  also known as " + ", ".join(card.aliases))
    for a in card.attributes:
        lines.append(_claim_line(a, f"{a.attribute} = {a.value}"))
    for r in card.relations:
        arrow = (
            f"-{r.predicate}-> {r.other.name}"
            if r.direction == cpb.RELATION_DIRECTION_OUTGOING
            else f"<-{r.predicate}- {r.other.name}"
        )
        lines.append(_claim_line(r, arrow))
    if card.mentioned_by:
        lines.append("  mentioned by " + ", ".join(card.mentioned_by))
    if card.truncated:
        lines.append("  (lists cut at their cap)")
    return "\n".join(lines)


def cmd_lookup(args: argparse.Namespace) -> int:
    resp = common.client(args).lookup(
        args.name,
        as_of=args.as_of,
        purpose=args.purpose,
        include_history=args.history,
        partial=args.partial,
        page_token=args.page_token,
    )
    text = "\n\n".join(card_text(c) for c in resp.entities) or f"no entity named {args.name!r}"
    if resp.next_page_token:
        text += f"\nmore: --page-token {resp.next_page_token}"
    common.show(args, resp, text)
    return 0


def cmd_neighbors(args: argparse.Namespace) -> int:
    resp = common.client(args).neighbors(
        args.entity_id,
        hops=args.hops,
        predicates=args.predicate,
        as_of=args.as_of,
        purpose=args.purpose,
    )
    names = {n.entity.id: n.entity.name for n in resp.nodes}
    lines = [f"{'  ' * n.depth}{n.entity.name} ({n.entity.id}) depth {n.depth}" for n in resp.nodes]
    lines += [
        _claim_line(e, f"{names[e.subject.id]} -{e.predicate}-> {names[e.object.id]}")
        for e in resp.edges
    ]
    if resp.truncated:
        lines.append("(cut at the node or edge cap)")
    common.show(args, resp, "\n".join(lines))
    return 0


def cmd_timeline(args: argparse.Namespace) -> int:
    resp = common.client(args).timeline(
        args.entity or "",
        args.episode or "",
        start=args.start,
        end=args.end,
        page_token=args.page_token,
        purpose=args.purpose,
    )
    lines = [
        f"{e.at.ToDatetime():%Y-%m-%d %H:%M} UTC  {e.kind:<15} {e.summary}  (memory {e.memory_id})"
        for e in resp.events
    ]
    if resp.next_page_token:
        lines.append(f"more: --page-token {resp.next_page_token}")
    common.show(args, resp, "\n".join(lines) or "no events")
    return 0


def cmd_episode(args: argparse.Namespace) -> int:
    client = common.client(args)
    resp = client.create_episode(
        args.title,
        args.start,
        args.end,
        **common.audience(args, client),
        member_ids=args.member,
        entity_ids=args.entity,
        purpose=common.call_purpose(args),
        request_id=args.request_id,
    )
    common.show(args, resp, f"episode {resp.episode_id}")
    return 0


def add_parser(sub: Any) -> None:
    lk = common.client_options(
        sub.add_parser("lookup", help="entities by name or alias, with their claims")
    )
    lk.add_argument("name")
    lk.add_argument("--as-of", help="RFC 3339: answer as of this time")
    lk.add_argument("--history", action="store_true", help="also claims no longer current")
    lk.add_argument(
        "--partial",
        action="store_true",
        help="also names or aliases it begins (or a word of them), and names alike despite a typo",
    )
    lk.add_argument("--page-token", default="", help="the next_page_token of a page before")
    common.purpose_option(lk)
    lk.set_defaults(func=cmd_lookup)
    nb = common.client_options(
        sub.add_parser("neighbors", help="entities related to one, up to 3 hops")
    )
    nb.add_argument("entity_id")
    nb.add_argument("--hops", type=int, default=1)
    nb.add_argument("--predicate", action="append", default=[])
    nb.add_argument("--as-of", help="RFC 3339: walk the relations as of this time")
    common.purpose_option(nb)
    nb.set_defaults(func=cmd_neighbors)
    tl = common.client_options(
        sub.add_parser("timeline", help="events of an entity, an episode or the workspace")
    )
    tl.add_argument("--entity", help="an entity id")
    tl.add_argument("--episode", help="an episode id")
    tl.add_argument("--from", dest="start", help="RFC 3339, inclusive")
    tl.add_argument("--to", dest="end", help="RFC 3339, exclusive")
    tl.add_argument("--page-token", default="")
    common.purpose_option(tl)
    tl.set_defaults(func=cmd_timeline)
    common.renamed_fields(tl, entity_id="--entity", episode_id="--episode")
    ep = common.client_options(sub.add_parser("episode", help="record an episode"))
    ep.add_argument("title")
    ep.add_argument("--start", required=True, help="RFC 3339")
    ep.add_argument("--end", help="RFC 3339; default: the start")
    common.audience_options(ep)
    common.acting_purpose_option(ep)
    ep.add_argument("--member", action="append", default=[], help="a participant member id")
    ep.add_argument("--entity", action="append", default=[], help="a participant entity id")
    ep.add_argument(
        "--request-id",
        default="",
        help="your id of this request: a retry with it answers the episode the first "
        "attempt made and makes no second one",
    )
    ep.set_defaults(func=cmd_episode)
    common.renamed_fields(
        ep, started_at="--start", ended_at="--end", member_ids="--member", entity_ids="--entity"
    )
