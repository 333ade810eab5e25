"""The embed input's composition and its stamp (recallatron.embed_input)."""

from __future__ import annotations

from recallatron.embed_input import EMBED_INPUT_VERSION, MAX_INPUT_CHARS
from recallatron.embed_input import compose as compose_embed_input


def test_embed_input_composition() -> None:
    assert compose_embed_input("Staging DB", "On the shared cluster.") == (
        "Staging DB\nOn the shared cluster."
    )
    assert compose_embed_input("Staging DB", "") == "Staging DB"
    # A body that already names its title is embedded alone (any case).
    assert compose_embed_input("Caroline", "caroline went to the LGBTQ support group.") == (
        "caroline went to the LGBTQ support group."
    )
    assert EMBED_INPUT_VERSION == "title-unless-in-body-v1"


def test_the_store_and_the_embed_service_agree_on_length() -> None:
    """The store takes longer bodies than the embed service: the job sends
    what the model reads, and the embed service accepts that much."""
    from recallatron.vocabulary import MAX_BODY, MAX_TITLE
    from services.embed.settings import EmbedSettings

    assert EmbedSettings().max_text_chars >= MAX_INPUT_CHARS
    longest = compose_embed_input("t" * MAX_TITLE, "b" * MAX_BODY)
    assert len(longest) == MAX_INPUT_CHARS
    assert longest == ("t" * MAX_TITLE + "\n" + "b" * MAX_BODY)[:MAX_INPUT_CHARS]
