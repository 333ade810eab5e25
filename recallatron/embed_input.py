"""How a memory becomes the text the bi-encoder embeds, and the stamp of that
composition: one definition for the embedding job (which stores vectors under
the stamp) and the embed service's prepared models (which record it).

Changing :func:`compose` must change :data:`EMBED_INPUT_VERSION`: the dense arm
reads only vectors of the current stamp, and `recallatron rebuild` re-embeds."""

from __future__ import annotations

EMBED_INPUT_VERSION = "title-unless-in-body-v1"

# The most characters sent to the embed service per text, and the least it
# accepts: the bi-encoder reads 256 tokens, which ordinary text fills within
# about 1,500 characters, so what lies beyond 8,000 is never read (tests/embed
# checks the tokens agree). The store accepts longer bodies (up to
# vocabulary.MAX_BODY); only what the model reads is sent. No stored vector
# changes: before this limit, longer texts were refused, never embedded.
MAX_INPUT_CHARS = 8_000


def compose(title: str, body: str) -> str:
    """The title, a newline and the body; the body alone when it already holds
    the title (embedding it twice pulls the vector toward the title's subject:
    on the dev data, where the title is the speaker's name and almost every
    body names the speaker, dense Recall@10 0.613 -> 0.639 and hybrid
    0.748 -> 0.756, docs/recall.md); the title alone when there is no body.
    At most :data:`MAX_INPUT_CHARS`."""
    if not body:
        return title[:MAX_INPUT_CHARS]
    if title.casefold() in body.casefold():
        return body[:MAX_INPUT_CHARS]
    return f"{title}\n{body}"[:MAX_INPUT_CHARS]
