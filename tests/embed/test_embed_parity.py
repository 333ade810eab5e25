"""The served ONNX embeddings match PyTorch sentence-transformers on varied text."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from recallatron.v1 import embed_pb2
from recallatron_devkit.embed_fixture import EmbedProcess
from services.embed.manifest import BI_ENCODER_DIMENSIONS, BI_ENCODER_ID

pytestmark = pytest.mark.integration

HANDWRITTEN = [
    "",
    " ",
    "   \n\t  ",
    ".",
    "?!",
    "...",
    "—",
    "a",
    "I",
    "ok",
    "42",
    "3.14159",
    "-1e10",
    "0x1F",
    "1,000,000",
    "2024-11-30T06:00:00Z",
    "+44 20 7946 0958",
    "🙂",
    "🚀🔥💯",
    "👩‍💻 pushed the fix at 3am 🎉",
    "!!!???!!!",
    "« quotes » “curly” ‘single’ — dash – en … ellipsis",  # noqa: RUF001
    "Der Kunde möchte die Rechnung bis Freitag.",
    "L'équipe a décidé de migrer la base de données en décembre.",
    "¿Dónde está la documentación del despliegue?",
    "Встреча перенесена на четверг, 15:00.",
    "Η συνάντηση μεταφέρθηκε.",  # noqa: RUF001
    "تم نقل الاجتماع إلى يوم الخميس",
    "הפגישה נדחתה ליום חמישי",
    "会议改到下周三下午三点。",
    "東京オフィスの移転は来年です。",
    "회의는 목요일로 연기되었습니다.",
    "बैठक गुरुवार को होगी।",
    "การประชุมเลื่อนไปวันพฤหัสบดี",
    "naïve café façade coöperate résumé",
    "zero\u200bwidth and non\u00a0breaking spaces",
    "tab\tseparated\tvalues\nand\r\nline breaks",
    "def add(a: int, b: int) -> int:\n    return a + b",
    "SELECT id, title FROM memory WHERE audience = $1 ORDER BY created_at DESC LIMIT 50;",
    '{"kind": "decision", "confidence": 0.9, "purposes": ["assist", "audit"]}',
    "grep -rn 'TODO' src/ | wc -l && git commit -am 'wip'",
    r"^(?P<user>[a-z0-9._%+-]+)@(?P<host>[a-z0-9.-]+\.[a-z]{2,})$",
    '<div class="card"><h1>Title</h1><p>Body &amp; more</p></div>',
    "| name | value |\n| --- | --- |\n| alpha | 1 |",
    "https://example.com/path?query=1&other=two#fragment",
    "alice@example.com wrote to bob+tag@example.org",
    "Staging database\nWe host the staging Postgres on the shared cluster, not on RDS.",
    "Decision: ship v2 on Monday\nAgreed in the planning call; Bob owns the rollout.",
    "Alice prefers morning meetings\nShe is in UTC+1 and blocks afternoons for focus.",
    "Where did we decide to host the staging database?",
    "what's the deploy process",
    "WHY IS THE BUILD RED AGAIN",
    "mIxEd CaSe TeXt",
    "supercalifragilisticexpialidocious antidisestablishmentarianism",
    "x" * 300,
    "ab " * 200,
    "🙂" * 100,
    "1234567890 " * 60,
]

WORDS_TEXT = (
    "the a memory agent team member workspace decision fact note summary database "
    "deploy staging production rollout budget invoice customer meeting Monday Friday "
    "postgres index vector query recall permission audience purpose derive supersede "
    "forget correct remember provenance link entity mention cluster kubernetes service "
    "latency error retry timeout quarterly revenue hiring plan roadmap design review "
    "bug fix release branch merge conflict test flaky green red alert pager incident "
    "Berlin Tokyo London coffee lunch holiday travel visa contract renewal vendor "
    "laptop password rotation token secret audit compliance GDPR retention backup "
    "München Zürich São Paulo naïve café über straße 東京 서울 Москва 🙂 🚀 #42 $19.99 "
    "3.5% 2024-12-01 v1.2.3 foo_bar() x->y a/b C++ C# .NET node.js"
)
WORDS = WORDS_TEXT.split()


def _sentence(rng: random.Random, words: int) -> str:
    text = " ".join(rng.choice(WORDS) for _ in range(words))
    return text[0].upper() + text[1:] + rng.choice([".", "!", "?", "", "..."])


def parity_texts() -> list[str]:
    """Deterministic, varied texts: the handwritten edge cases, short and medium
    random sentences, and long paragraphs well past 256 tokens (so truncation at
    256, not 128, matters)."""
    rng = random.Random(20241130)
    texts = list(HANDWRITTEN)
    texts += [_sentence(rng, rng.randint(1, 6)) for _ in range(50)]
    texts += [_sentence(rng, rng.randint(7, 60)) for _ in range(70)]
    texts += [
        " ".join(_sentence(rng, rng.randint(8, 20)) for _ in range(rng.randint(12, 40)))
        for _ in range(30)
    ]
    texts += [f"{rng.choice(HANDWRITTEN[17:40])}\n{_sentence(rng, 25)}" for _ in range(20)]
    return texts


def _embed_over_grpc(server: EmbedProcess, texts: list[str], queries: bool = False) -> np.ndarray:
    """As the embedding job asks (64 texts a call), or as rank asks for a
    recall's query (``queries``: one text a call, on the query graph)."""
    rows: list[list[float]] = []
    step = 1 if queries else 64
    for start in range(0, len(texts), step):
        request = embed_pb2.EmbedRequest(texts=texts[start : start + step], queries=queries)
        response = server.stub.Embed(request, timeout=120)
        assert response.model_id == BI_ENCODER_ID
        assert response.dimensions == BI_ENCODER_DIMENSIONS
        rows.extend(list(vector.values) for vector in response.vectors)
    return np.asarray(rows, dtype=np.float32)


@pytest.mark.parametrize("queries", [False, True], ids=["memories", "queries"])
def test_served_embeddings_match_pytorch(
    embed_server: EmbedProcess, st_model: Any, queries: bool
) -> None:
    texts = parity_texts()
    assert len(texts) >= 200
    assert max(len(st_model.tokenizer(t)["input_ids"]) for t in texts) > 256

    served = _embed_over_grpc(embed_server, texts, queries)
    reference = st_model.encode(
        texts, batch_size=32, normalize_embeddings=True, convert_to_numpy=True
    )

    assert served.shape == (len(texts), BI_ENCODER_DIMENSIONS)
    np.testing.assert_allclose(np.linalg.norm(served, axis=1), 1.0, atol=1e-4)
    cosine = np.sum(served * reference, axis=1) / (
        np.linalg.norm(served, axis=1) * np.linalg.norm(reference, axis=1)
    )
    worst = int(np.argmin(cosine))
    print(
        f"\nparity over {len(texts)} texts: minimum cosine {cosine[worst]:.7f}, "
        f"mean {cosine.mean():.7f} (worst text: {texts[worst][:60]!r})"
    )
    below = [(round(float(c), 6), t[:60]) for c, t in zip(cosine, texts, strict=True) if c < 0.999]
    assert not below, f"cosine below 0.999 against PyTorch: {below}"
