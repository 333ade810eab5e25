"""`recallatron prepare-models` takes the options of `python -m
services.embed.prepare` (docs/embeddings.md: "same as"), its own `--help`
shows them, and each reaches the preparation it names."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from recallatron_cli import main as cli
from services.embed import prepare


@pytest.fixture
def prepared(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Any]]:
    """What each preparation was asked for, instead of exporting a model."""
    calls: list[tuple[str, Any]] = []

    def bi_encoder(models_dir: Path, *, force: bool = False) -> None:
        calls.append(("bi-encoder", (models_dir, force)))

    def cross_encoder(source: str, out: Path, model_id: str | None, *, force: bool = False) -> None:
        calls.append(("cross-encoder", (source, out, model_id, force)))

    monkeypatch.setattr(prepare, "prepare_bi_encoder", bi_encoder)
    monkeypatch.setattr(prepare, "prepare_cross_encoder", cross_encoder)
    return calls


def test_the_bi_encoder_options_reach_its_preparation(
    prepared: list[tuple[str, Any]], tmp_path: Path
) -> None:
    assert cli.main(["prepare-models", "--models-dir", str(tmp_path), "--force"]) == 0
    assert cli.main(["prepare-models", "--models-dir", str(tmp_path)]) == 0
    assert prepared == [("bi-encoder", (tmp_path, True)), ("bi-encoder", (tmp_path, False))]


def test_the_cross_encoder_options_reach_its_preparation(
    prepared: list[tuple[str, Any]], tmp_path: Path
) -> None:
    argv = ["prepare-models", "cross-encoder", "--from", "./ce", "--out", str(tmp_path)]
    assert cli.main(argv) == 0
    assert cli.main([*argv, "--force"]) == 0
    assert prepared == [
        ("cross-encoder", ("./ce", tmp_path, None, False)),
        ("cross-encoder", ("./ce", tmp_path, None, True)),
    ]


def test_its_help_shows_its_options(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        cli.main(["prepare-models", "--help"])
    assert done.value.code == 0
    shown = capsys.readouterr().out
    for option in ("--models-dir", "--force", "cross-encoder"):
        assert option in shown, shown
