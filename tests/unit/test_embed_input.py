"""The embed input's composition and its stamp (recallatron.embed_input)."""

from __future__ import annotations

from recallatron.embed_input import EMBED_INPUT_VERSION
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
