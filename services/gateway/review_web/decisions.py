"""The review page's decisions (design §8.1, §8.5): each one a call to the
gateway's own gRPC API with the person's token, taken on the revisions the
page showed; its outcome goes to the session's next page view."""

from __future__ import annotations

import uuid
from typing import Any

import grpc

from recallatron.v1 import common_pb2 as cpb
from recallatron.v1 import gateway_pb2 as pb
from recallatron.vocabulary import MAX_REASON, PURPOSE, PURPOSES
from services.gateway.review_web.sessions import Session


def _status_text(exc: grpc.RpcError) -> str:
    code = exc.code()
    return f"{code.name}: {exc.details()}"


def decide(session: Session, form: dict[str, str], purpose: str) -> None:
    """Carries out one decision; its outcome goes to the next page view."""
    if purpose not in PURPOSES:
        session.flash.append(("error", "Unknown purpose."))
        return
    with session.deciding:
        _decide(session, form, purpose)


def _decide(session: Session, form: dict[str, str], purpose: str) -> None:
    action = form.get("action", "")
    client = session.client
    try:
        if action == "keep":
            _keep(session, form, purpose)
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
                request_id=_form_request_id(form),
                expected_revision=shown,
            )
            _tell(session, ("ok", f"Forgot {target}."))
        elif action == "supersede":
            _supersede(session, form, purpose)
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
            client.keep_entities_apart(form.get("first_id", ""), form.get("second_id", ""), purpose)
            session.flash.append(("ok", "Kept apart; this pair will not be proposed again."))
        elif action == "undo":
            _undo(session, form.get("merge_id", ""), purpose)
        else:
            session.flash.append(("error", "Unknown decision."))
    except grpc.RpcError as exc:
        session.flash.append(("error", _explain(exc)))


UNDONE = ("ok", "Undid the merge; both answer on their own again.")
ALREADY_UNDONE = ("ok", "That merge is already undone; nothing changed.")


def _undo(session: Session, merge_id: str, purpose: str) -> None:
    """Undoes a merge in force. One this session undid already is answered
    as done: the store knows it only as no merge in force, as it knows one
    that is gone or hidden, and the second post of a double-click would have
    the page say both that it was undone and that nothing was done."""
    key = _uuid(merge_id)
    if key is not None and key in session.undone:
        # An undone merge stays undone (merging again makes a new one).
        if UNDONE not in session.flash:
            session.flash.append(ALREADY_UNDONE)
        return
    session.client.undo_entity_merge(merge_id, purpose)
    if key is not None:
        session.undone.append(key)
    session.flash.append(UNDONE)


def _keep(session: Session, form: dict[str, str], purpose: str) -> None:
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
        now = {_uuid(m.id): m.revision for m in client.read(list(ids), purpose=purpose).memories}
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
    # The store checks the revisions again as it writes: a change committed
    # since the read above is not kept on the strength of its old text.
    client.dismiss_pair(
        ids[0],
        ids[1],
        purpose,
        first_expected_revision=shown[0],
        second_expected_revision=shown[1],
    )
    session.flash.append(("ok", "Kept both; this pair will not be proposed again."))


def _supersede(session: Session, form: dict[str, str], purpose: str) -> None:
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
        request_id=_form_request_id(form),
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
    _tell(session, ("ok", f"Superseded {retire_id}; its successor is {resp.memory.id}."))


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


REQUEST_ID_PREFIX = "review-"


def new_request_id() -> str:
    """A request id for one drawn form of a write (forget, supersede)."""
    return f"{REQUEST_ID_PREFIX}{uuid.uuid4()}"


def _form_request_id(form: dict[str, str]) -> str:
    """The request id the page drew into the form: the two posts of a
    double-click carry the same one, and the store answers the second as it
    answered the first (a retry), not as a change to a memory the first
    already forgot or superseded. A form without one gets a new one."""
    value = form.get("request_id", "")
    drawn = value.startswith(REQUEST_ID_PREFIX)
    ok = drawn and _uuid(value[len(REQUEST_ID_PREFIX) :]) is not None
    return value if ok else new_request_id()


def _tell(session: Session, message: tuple[str, str]) -> None:
    """``message`` for the next view, unless it already waits there (a
    decision posted twice is answered once)."""
    if message not in session.flash:
        session.flash.append(message)


def _explain(exc: grpc.RpcError) -> str:
    code = exc.code()
    if code == grpc.StatusCode.ABORTED:
        return f"It changed since you looked; nothing was done. ({_status_text(exc)})"
    if code == grpc.StatusCode.NOT_FOUND:
        return f"It is gone or no longer visible to you; nothing was done. ({_status_text(exc)})"
    return _status_text(exc)
