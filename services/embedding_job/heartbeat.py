"""Liveness of the embedding job (design §6).

Each worker thread of the job records in a small file, in the state directory,
when its loop last completed a step (a claim, an embedded batch, an empty
queue seen, a failed call answered with a backoff). Every step is bounded by a
deadline (the embed call's, the statement and pool timeouts), and a worker
waiting out a backoff beats as it waits, so a worker that keeps working, or
keeps retrying while embed is down however long its backoff, stays fresh;
one that hangs, alive but doing nothing while work waits, goes stale.
The embed-job Deployment's exec probe runs

    python -m services.embedding_job.heartbeat --max-age SECONDS

which exits 1 when the file is missing or any worker's last step is older than
SECONDS, and Kubernetes restarts the container. An embed outage must not fail
it: a restart would not bring embed back, the backoff already waits for it.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

FILE_NAME = "embedding-job.heartbeat"

log = logging.getLogger("recallatron.store.heartbeat")


def default_path() -> Path:
    """The file in the store settings' state directory (an emptyDir in
    Kubernetes: writable under a read-only root)."""
    from services.store.settings import StoreSettings

    return Path(StoreSettings().state_dir) / FILE_NAME


class Heartbeat:
    """Per-thread last-step times, written atomically at most once per
    ``min_interval`` seconds so a busy loop costs one small write a second."""

    def __init__(
        self,
        path: Path,
        min_interval: float = 1.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.path = path
        self.min_interval = min_interval
        self.clock = clock
        self._beats: dict[str, float] = {}
        self._written_at = float("-inf")
        self._lock = threading.Lock()
        # A file left by an earlier container of the same pod (the emptyDir
        # outlives a restart) must not speak for this process.
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.unlink(missing_ok=True)

    def beat(self) -> None:
        now = self.clock()
        with self._lock:
            self._beats[threading.current_thread().name] = now
            if now - self._written_at < self.min_interval:
                return
            self._written_at = now
            # Atomic: the probe never reads a half-written file.
            tmp = self.path.with_name(f".{self.path.name}.tmp")
            try:
                tmp.write_text(json.dumps({"pid": os.getpid(), "workers": self._beats}))
                os.replace(tmp, self.path)
            except OSError:
                # The worker goes on; the file goes stale and the probe says so.
                log.exception("could not write the heartbeat %s", self.path)


def check(path: Path, max_age: float, now: float | None = None) -> tuple[bool, str]:
    """(alive, why) from the heartbeat file."""
    now = time.time() if now is None else now
    try:
        workers = json.loads(path.read_text())["workers"]
    except FileNotFoundError:
        return False, f"no heartbeat yet ({path})"
    except (ValueError, KeyError, TypeError) as exc:
        return False, f"unreadable heartbeat {path}: {exc}"
    if not workers:
        return False, "no worker has reported"
    ages = {name: now - float(at) for name, at in workers.items()}
    stale = {name: age for name, age in ages.items() if age > max_age}
    if stale:
        detail = ", ".join(f"{n} {a:.0f}s" for n, a in sorted(stale.items()))
        return False, f"no progress for over {max_age:g}s: {detail}"
    return True, "ok: " + ", ".join(f"{n} {a:.1f}s ago" for n, a in sorted(ages.items()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m services.embedding_job.heartbeat",
        description="Exit 0 while every embedding-job worker made progress recently.",
    )
    parser.add_argument("--max-age", type=float, required=True, help="seconds")
    parser.add_argument("--file", type=Path, default=None, help="default: in the state dir")
    args = parser.parse_args(argv)
    alive, why = check(args.file or default_path(), args.max_age)
    print(why, file=sys.stdout if alive else sys.stderr)
    return 0 if alive else 1


if __name__ == "__main__":
    sys.exit(main())
