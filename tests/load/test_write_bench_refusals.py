"""`benchmarks.write_bench` refusing sizes that measure nothing as
`recallatron load` does: `error:` and one line naming the option, exit 2,
before any stack starts."""

from __future__ import annotations

import argparse

import pytest

from benchmarks import write_bench


@pytest.fixture
def no_stack(monkeypatch: pytest.MonkeyPatch) -> None:
    """A refusal must come before the stack is started."""

    def reached(args: argparse.Namespace) -> None:
        raise AssertionError("the stack was started")

    monkeypatch.setattr(write_bench, "run", reached)


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        # Each started the stack and its Postgres first: --members 0 then
        # crashed (ZeroDivisionError: no member to write as), --writers 0 too
        # (IndexError: no client), --texts 0 counted every call a failure.
        (["--members", "0"], "--members 0: must be at least 1"),
        (["--members", "-2"], "--members -2: must be at least 1"),
        (["--writers", "0"], "--writers 0: must be at least 1"),
        (["--writers", "-1"], "--writers -1: must be at least 1"),
        (["--texts", "0"], "--texts 0: must be at least 1"),
        (["--duration", "0"], "--duration 0.0: must be a number of seconds more than 0"),
        (["--duration", "-5"], "--duration -5.0: must be a number of seconds more than 0"),
        (["--duration", "nan"], "--duration nan: must be a number of seconds more than 0"),
        (["--duration", "inf"], "--duration inf: must be a number of seconds more than 0"),
        (["--warmup", "-1"], "--warmup -1.0: must be a number of seconds, 0 or more"),
        (["--warmup", "nan"], "--warmup nan: must be a number of seconds, 0 or more"),
    ],
)
def test_a_size_that_measures_nothing_is_refused_before_the_stack_starts(
    argv: list[str], says: str, no_stack: None, capsys: pytest.CaptureFixture[str]
) -> None:
    code = write_bench.main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith("error: ") and says in err, err


def test_no_warmup_and_the_same_member_are_sizes_that_measure(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    reached: list[argparse.Namespace] = []

    def run(args: argparse.Namespace) -> dict[str, object]:
        reached.append(args)
        raise SystemExit(0)

    monkeypatch.setattr(write_bench, "run", run)
    with pytest.raises(SystemExit):
        write_bench.main(["--warmup", "0", "--writers", "1", "--same-member"])
    assert len(reached) == 1 and capsys.readouterr().err == ""
