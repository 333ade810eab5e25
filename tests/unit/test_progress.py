"""Progress of long operator work (recallatron/progress.py): a bar on a
terminal, plain periodic lines elsewhere, stderr only."""

from __future__ import annotations

import io
import threading

import pytest

from recallatron.progress import Progress, choose_mode, duration


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_mode_follows_the_stream_and_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RECALLATRON_PROGRESS", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    assert choose_mode(io.StringIO()) == "lines"
    assert choose_mode(FakeTerminal()) == "bar"
    monkeypatch.setenv("TERM", "dumb")
    assert choose_mode(FakeTerminal()) == "lines"
    monkeypatch.setenv("RECALLATRON_PROGRESS", "off")
    assert choose_mode(FakeTerminal()) == "off"
    monkeypatch.setenv("RECALLATRON_PROGRESS", "BAR")
    assert choose_mode(io.StringIO()) == "bar"
    monkeypatch.setenv("RECALLATRON_PROGRESS", "sparkles")  # not a mode: the stream decides
    assert choose_mode(io.StringIO()) == "lines"


def test_plain_lines_come_at_the_interval_with_rate_and_time_left() -> None:
    out, clock = io.StringIO(), Clock()
    with Progress(
        "seeding", 1000, "memories", stream=out, mode="lines", interval=10, clock=clock
    ) as bar:
        for _ in range(10):
            clock.now += 3
            bar.advance(100)
    lines = out.getvalue().splitlines()
    # Updates at 3, 6, ..., 30 s: a line at 12 s and 24 s, and the final one.
    assert lines == [
        "seeding: 400/1,000 memories (40%), 33.3/s, 12s so far, ~18s left",
        "seeding: 800/1,000 memories (80%), 33.3/s, 24s so far, ~6s left",
        "seeding: 1,000/1,000 memories (100%), done in 30s (33.3/s)",
    ]


def test_an_unknown_total_then_a_known_one() -> None:
    """A wait that starts at 50: its rate counts from there."""
    out, clock = io.StringIO(), Clock()
    bar = Progress("embedding", unit="memories", stream=out, mode="lines", interval=0, clock=clock)
    clock.now = 5
    bar.update(50)
    clock.now = 10
    bar.update(100, total=400)
    bar.close()
    bar.close()  # twice is once
    assert out.getvalue().splitlines() == [
        "embedding: 50 memories, -/s, 5s so far",
        "embedding: 100/400 memories (25%), 5.0/s, 10s so far, ~1m00s left",
        "embedding: 100/400 memories (25%), done in 10s (5.0/s)",
    ]


def test_a_wait_already_done_shows_no_rate() -> None:
    """The rate counts from the first count seen, not from zero."""
    out, clock = io.StringIO(), Clock()
    with Progress("embedding", unit="memories", stream=out, mode="lines", clock=clock) as bar:
        bar.update(11_200, total=11_200)
    assert out.getvalue() == "embedding: 11,200/11,200 memories (100%), done in 0s\n"


def test_off_writes_nothing_and_nothing_goes_to_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    with Progress("quiet", 3, mode="off") as bar:
        bar.advance(3)
    with Progress("loud", 3, mode="lines", interval=0) as bar:
        bar.advance(3)
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "quiet" not in captured.err and "loud: 3/3 (100%)" in captured.err


def test_the_bar_on_a_terminal_shows_count_share_and_rate(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RECALLATRON_PROGRESS", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    monkeypatch.setenv("COLUMNS", "160")
    term = FakeTerminal()
    with Progress("rebuild", 200, "memories", stream=term) as bar:
        assert bar.mode == "bar"
        for _ in range(4):
            bar.advance(50)
    shown = term.getvalue()
    assert "rebuild" in shown and "200/200" in shown and "100%" in shown
    assert "/s" in shown and "left" in shown
    assert "\x1b[" in shown  # drawn for a terminal, not printed as lines


def test_echo_is_the_answer_on_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    with Progress("migrating", 1, "workspaces", mode="lines", interval=60) as bar:
        bar.echo("team-a: up to date")
        bar.advance()
    captured = capsys.readouterr()
    assert captured.out == "team-a: up to date\n"
    assert "team-a" not in captured.err and "migrating: 1/1 workspaces" in captured.err


def test_workers_may_advance_at_once() -> None:
    out = io.StringIO()
    bar = Progress("parallel", 8000, stream=out, mode="lines", interval=3600)

    def work() -> None:
        for _ in range(1000):
            bar.advance()

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    bar.close()
    assert bar.completed == 8000
    assert out.getvalue().startswith("parallel: 8,000/8,000 (100%), done in")


def test_work_cut_short_says_so() -> None:
    out, clock = io.StringIO(), Clock()
    with (
        pytest.raises(KeyboardInterrupt),
        Progress("importing turns", 4000, "rows", stream=out, mode="lines", clock=clock) as bar,
    ):
        clock.now = 2
        bar.advance(500)
        raise KeyboardInterrupt
    assert out.getvalue() == "importing turns: 500/4,000 rows (12%), stopped after 2s (250.0/s)\n"


def test_durations_read_well() -> None:
    assert [duration(s) for s in (0, 9.6, 61, 3599, 3600 * 2 + 180)] == [
        "0s",
        "10s",
        "1m01s",
        "59m59s",
        "2h03m",
    ]
