"""How a memory becomes the text the bi-encoder embeds, and the stamp of that
composition: one definition for the embedding job (which stores vectors under
the stamp) and the embed service's prepared models (which record it).

Changing :func:`compose` must change :data:`EMBED_INPUT_VERSION`: the dense arm
reads only vectors of the current stamp, and `recallatron rebuild` re-embeds."""

from __future__ import annotations

EMBED_INPUT_VERSION = "title-unless-in-body-v1"


def compose(title: str, body: str) -> str:
    """The title, a newline and the body; the body alone when it already holds
    the title (embedding it twice pulls the vector toward the title's subject:
    on the dev data, where the title is the speaker's name and almost every
    body names the speaker, dense Recall@10 0.613 -> 0.639 and hybrid
    0.748 -> 0.756, docs/recall.md); the title alone when there is no body."""
    if not body:
        return title
    if title.casefold() in body.casefold():
        return body
    return f"{title}\n{body}"
