"""Rank's settings reach the pipeline it builds: a setting documented but not
passed on would be read at start and then ignored."""

from __future__ import annotations

import pytest

from services.rank.server import build_pipeline
from services.rank.settings import RankSettings


def test_the_cross_encoder_recheck_is_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RECALLATRON_CROSS_ENCODER_RECHECK_SECONDS", "42.5")
    pipeline = build_pipeline(RankSettings())
    assert pipeline.cross_encoder.recheck_seconds == 42.5
    assert pipeline.config.cross_encoder_recheck_seconds == 42.5


def test_the_recheck_defaults_to_ten_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RECALLATRON_CROSS_ENCODER_RECHECK_SECONDS", raising=False)
    assert build_pipeline(RankSettings()).cross_encoder.recheck_seconds == 10.0
