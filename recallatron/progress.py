"""Progress of long operator work (seeding, waiting for embeddings, eval,
rebuild, migrations), always on stderr so that stdout stays the command's
answer (`--json` included).

On a terminal: a bar with the count, rate, time spent and time left (rich).
Elsewhere (CI logs, files): one plain line every RECALLATRON_PROGRESS_SECONDS
(default 10) and one when the work ends, so a log shows how far a run got
without a line per item. RECALLATRON_PROGRESS=bar|lines|off overrides the
choice."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any, TextIO

DEFAULT_INTERVAL_SECONDS = 10.0
MODES = ("bar", "lines", "off")


def choose_mode(stream: TextIO, setting: str | None = None) -> str:
    """bar on a terminal, lines elsewhere; RECALLATRON_PROGRESS (or
    ``setting``) overrides when it names a mode."""
    if setting is None:
        setting = os.environ.get("RECALLATRON_PROGRESS", "")
    chosen = setting.lower()
    if chosen in MODES:
        return chosen
    isatty = getattr(stream, "isatty", None)
    terminal = bool(isatty and isatty()) and os.environ.get("TERM", "") != "dumb"
    return "bar" if terminal else "lines"


def _interval() -> float:
    try:
        return max(0.0, float(os.environ.get("RECALLATRON_PROGRESS_SECONDS", "")))
    except ValueError:
        return DEFAULT_INTERVAL_SECONDS


def duration(seconds: float) -> str:
    """12s, 4m05s, 2h03m."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    minutes, secs = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


class Progress:
    """One piece of work of ``total`` items (None: not known). Thread-safe:
    workers may call :meth:`advance` concurrently.

        with Progress("seeding", total=n, unit="memories") as bar:
            ...
            bar.advance()
    """

    def __init__(
        self,
        description: str,
        total: float | None = None,
        unit: str = "",
        stream: TextIO | None = None,
        mode: str | None = None,
        interval: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.description = description
        self.total = total
        self.unit = unit
        self.stream = stream if stream is not None else sys.stderr
        self.mode = mode if mode in MODES else choose_mode(self.stream)
        self.interval = _interval() if interval is None else interval
        self.clock = clock
        self.completed = 0.0
        # The count first set by update(): a wait that starts part-way (say,
        # most memories already embedded) has its rate from there.
        self._base: float | None = None
        self._lock = threading.Lock()
        self._started = clock()
        self._last_line = self._started
        self._closed = False
        self._bar: Any = None
        self._task: Any = None
        if self.mode == "bar":
            self._start_bar()

    # -- the two renderings ---------------------------------------------------

    def _start_bar(self) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            ProgressColumn,
            TaskProgressColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )
        from rich.progress import Progress as RichProgress
        from rich.text import Text

        class Rate(ProgressColumn):
            def render(self, task: Any) -> Text:
                speed = task.finished_speed or task.speed
                return Text(f"{speed:,.1f}/s" if speed else "-/s", style="cyan")

        console = Console(file=self.stream)
        self._bar = RichProgress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TaskProgressColumn(),
            Rate(),
            TimeElapsedColumn(),
            TextColumn("left"),
            TimeRemainingColumn(),
            console=console,
            # Our own stderr lines go above the bar; stdout is left alone.
            redirect_stdout=False,
            redirect_stderr=True,
        )
        self._bar.start()
        self._task = self._bar.add_task(self.description, total=self.total)

    def line(self, final: bool = False, stopped: bool = False) -> str:
        """The plain line for the current state (the last one: ``final``;
        of work cut short: ``stopped``)."""
        elapsed = self.clock() - self._started
        unit = f" {self.unit}" if self.unit else ""
        done = _count(self.completed)
        progressed = self.completed - (self._base or 0.0)
        rate = progressed / elapsed if elapsed > 0 else 0.0
        if self.total:
            head = f"{self.description}: {done}/{_count(self.total)}{unit}"
            head += f" ({100.0 * self.completed / self.total:.0f}%)"
        else:
            head = f"{self.description}: {done}{unit}"
        if final:
            ending = "stopped after" if stopped else "done in"
            return f"{head}, {ending} {duration(elapsed)}" + (
                f" ({rate:,.1f}/s)" if rate and progressed > 1 else ""
            )
        parts = [head, f"{rate:,.1f}/s" if rate else "-/s", f"{duration(elapsed)} so far"]
        if self.total and rate > 0 and self.completed < self.total:
            parts.append(f"~{duration((self.total - self.completed) / rate)} left")
        return ", ".join(parts)

    def _emit(self, text: str) -> None:
        print(text, file=self.stream, flush=True)

    # -- the interface ----------------------------------------------------------

    def echo(self, text: str) -> None:
        """A line of the command's answer (stdout) while the work goes on:
        above the bar when both share the terminal, else straight to stdout."""
        out = sys.stdout
        if self.mode == "bar" and not self._closed and getattr(out, "isatty", lambda: False)():
            self._bar.console.print(text, markup=False, highlight=False)
        else:
            print(text, file=out, flush=True)

    def advance(self, amount: float = 1) -> None:
        with self._lock:
            if self._base is None:
                self._base = 0.0
            self._set(self.completed + amount, None)

    def update(self, completed: float, total: float | None = None) -> None:
        """Sets the count (and the total, when it becomes known or changes)."""
        with self._lock:
            if self._base is None:
                self._base = completed
            self._set(completed, total)

    def _set(self, completed: float, total: float | None) -> None:
        if self._closed:
            return
        self.completed = completed
        if total is not None:
            self.total = total
        if self.mode == "bar":
            self._bar.update(self._task, completed=completed, total=self.total)
        elif self.mode == "lines":
            now = self.clock()
            if now - self._last_line >= self.interval:
                self._last_line = now
                self._emit(self.line())

    def close(self, stopped: bool = False) -> None:
        """Ends the display; ``stopped``: the work did not finish."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self.mode == "bar":
                self._bar.update(self._task, completed=self.completed, total=self.total)
                self._bar.stop()
            elif self.mode == "lines":
                self._emit(self.line(final=True, stopped=stopped))

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close(stopped=kind is not None)


def _count(value: float) -> str:
    return f"{int(value):,}" if float(value).is_integer() else f"{value:,.1f}"
