"""Where `recallatron up` looks for the prepared models: where `recallatron
prepare-models` (which its own error message names) writes them, whatever
state directory the stack keeps its data in."""

from __future__ import annotations

import argparse
import signal
from pathlib import Path

import pytest

from recallatron_cli import common, up
from recallatron_devkit import stack
from services.embed import prepare


def _models_dir_up_uses(monkeypatch: pytest.MonkeyPatch) -> Path:
    seen: list[Path | None] = []

    class Stopped(stack.Stack):
        def start(self) -> None:
            seen.append(self.config.models_dir)
            raise RuntimeError("stopped before starting anything")

    monkeypatch.setattr(stack, "Stack", Stopped)
    monkeypatch.setattr(signal, "signal", lambda *_: None)
    with pytest.raises(common.Refused, match="could not start: stopped before starting"):
        up.cmd_up(argparse.Namespace(demo=False))
    [models] = seen
    assert models is not None
    return models


def test_up_in_a_state_directory_of_its_own_finds_the_models_prepare_models_wrote(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RECALLATRON_MODELS_DIR", raising=False)
    monkeypatch.setenv("RECALLATRON_STATE_DIR", str(tmp_path / "state"))
    assert _models_dir_up_uses(monkeypatch) == Path(prepare._default_models_dir())


def test_the_models_setting_wins_for_both(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RECALLATRON_MODELS_DIR", str(tmp_path / "models"))
    monkeypatch.setenv("RECALLATRON_STATE_DIR", str(tmp_path / "state"))
    assert _models_dir_up_uses(monkeypatch) == tmp_path / "models"
    assert Path(prepare._default_models_dir()) == tmp_path / "models"
