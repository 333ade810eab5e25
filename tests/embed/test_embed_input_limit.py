"""The embed input's length limit (recallatron.embed_input.MAX_INPUT_CHARS)
cuts nothing the bi-encoder reads: for long texts of several shapes, the
tokens of the clipped text are the tokens of the whole one, and so is the
vector. The embed service accepts what the job sends."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from recallatron.embed_input import MAX_INPUT_CHARS, compose
from recallatron.vocabulary import MAX_BODY
from services.embed.models import BiEncoder

pytestmark = pytest.mark.integration

CORPUS = Path(__file__).resolve().parent.parent / "data" / "mini-beir" / "corpus.jsonl"


def _long_texts() -> list[str]:
    rows = [json.loads(line) for line in CORPUS.read_text().splitlines() if line.strip()]
    prose = " ".join(f"{r['title']}. {r['text']}" for r in rows)
    return [
        (prose * 20)[:MAX_BODY],
        " ".join(str(n * 7919) for n in range(5_000))[:MAX_BODY],  # numbers
        ("a-b;c/d " * 5_000)[:MAX_BODY],  # punctuation: one token per character
        ("Grüße, naïve café — 東京 " * 2_000)[:MAX_BODY],
        # Long identifiers and URLs: several wordpieces each.
        " ".join(f"https://example.org/{w}_{w}/index" for w in prose.split()[:3_000])[:MAX_BODY],
    ]


def test_clipping_keeps_every_token_the_model_reads(bi_encoder_dir: Path) -> None:
    model = BiEncoder(bi_encoder_dir)
    for text in _long_texts():
        assert len(text) > MAX_INPUT_CHARS
        whole, clipped = model.tokenize([text, compose("", text)])
        assert len(whole.ids) == model.manifest.max_length  # the model reads no further
        assert whole.ids == clipped.ids
    vectors = model.embed([text := _long_texts()[0], compose("", text)])
    assert float(np.dot(vectors[0], vectors[1])) > 0.99999
