"""An export killed part way (SIGKILL: no undo runs) leaves no partial
archive where it was told to write: only its staging directory, clearly
named, which the next export into the same place removes (docs/export.md)."""

from __future__ import annotations

import fcntl
import os
import selectors
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from recallatron_devkit.stack import Stack
from services.store.domain import archive_format as fmt
from services.store.domain.archive_export import STAGING, Exporter
from services.store.domain.control import ControlPlane
from tests import dbutil
from tests.clirun import cli
from tests.conftest import WAIT_SECONDS, Team

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]

# An export that stops, once it has written its first rows, until killed.
HELD_EXPORT = """
import sys
from pathlib import Path

from services.store.domain.archive_export import Exporter
from services.store.domain.control import ControlPlane
from services.store.infrastructure.db import Databases
from services.store.settings import StoreSettings

url, password, workspace_id, out = sys.argv[1:]
dbs = Databases(StoreSettings(database_url=url, app_password=password))
dbs.bootstrap()


def held(_rows: int) -> None:
    print("writing", flush=True)
    sys.stdin.read()


Exporter(dbs, ControlPlane(dbs)).export(workspace_id, Path(out), on_rows=held)
"""


def killed_mid_way(stack: Stack, team: Team, out: Path) -> None:
    """An export into ``out`` killed (SIGKILL) after it wrote rows."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HELD_EXPORT, stack.database_url, stack.app_password,
         team.workspace_id, str(out)],
        cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        ready = sel.select(timeout=WAIT_SECONDS)
    line = proc.stdout.readline() if ready else ""
    proc.send_signal(signal.SIGKILL)
    _, err = proc.communicate(timeout=WAIT_SECONDS)
    assert line == "writing\n", err
    assert proc.returncode == -signal.SIGKILL


def staged(parent: Path) -> list[Path]:
    return [p for p in parent.iterdir() if STAGING in p.name]


@pytest.mark.parametrize("given", [False, True], ids=["new", "given-empty"])
def test_an_export_killed_mid_way_runs_again_into_the_same_directory(
    stack: Stack, team: Team, tmp_path: Path, given: bool
) -> None:
    """Killed after its first rows, an export left `DIR` holding them without
    a manifest, and the same command was then refused (`out: DIR is not
    empty`) until the operator removed it; now `DIR` holds no partial
    archive (a new one is not made, a given one stays empty) and the same
    command removes what the killed one left and writes the archive."""
    team.clients["ada"].remember("Heron count", "Twelve herons on the lake today.")
    out = tmp_path / "archive"
    if given:
        out.mkdir()
    killed_mid_way(stack, team, out)
    assert not out.exists() or list(out.iterdir()) == staged(out)
    left = staged(out if given else tmp_path)
    assert len(left) == 1 and any(left[0].iterdir()), left
    again = cli(stack, "export", "--workspace", team.slug, "--out", str(out))
    assert again.returncode == 0, again.stderr
    assert (out / fmt.MANIFEST).is_file()
    assert staged(out) == [] and staged(tmp_path) == []


def test_an_export_under_way_and_other_files_are_never_removed(
    stack: Stack, team: Team, tmp_path: Path
) -> None:
    """A staging directory another export holds (its lock taken), and one
    holding a file no archive has, are left as they are."""
    out = tmp_path / "archive"
    running = tmp_path / f".archive.{STAGING}running"
    foreign = tmp_path / f".archive.{STAGING}foreign"
    for directory in (running, foreign):
        directory.mkdir()
        (directory / "memories.jsonl").write_text("{}\n")
    (foreign / "notes.txt").write_text("mine\n")
    fd = os.open(running, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with dbutil.store_databases(stack) as dbs:
            Exporter(dbs, ControlPlane(dbs)).export(team.workspace_id, out)
    finally:
        os.close(fd)
    assert (out / fmt.MANIFEST).is_file()
    assert (running / "memories.jsonl").is_file()
    assert (foreign / "notes.txt").is_file() and (foreign / "memories.jsonl").is_file()


# An export into a directory given empty that stops, once it has moved its
# first two files up, until killed.
HELD_MOVE = """
import sys
from pathlib import Path

from services.store.domain import archive_export
from services.store.domain.archive_export import Exporter
from services.store.domain.control import ControlPlane
from services.store.infrastructure.db import Databases
from services.store.settings import StoreSettings

url, password, workspace_id, out = sys.argv[1:]
dbs = Databases(StoreSettings(database_url=url, app_password=password))
dbs.bootstrap()
move = archive_export._move_new
moved = []


def held(src, dst):
    move(src, dst)
    if Path(dst).parent == Path(out):
        moved.append(dst)
        if len(moved) == 2:
            print("moving", flush=True)
            sys.stdin.read()


archive_export._move_new = held
Exporter(dbs, ControlPlane(dbs)).export(workspace_id, Path(out))
"""


def killed_while_moving(stack: Stack, team: Team, out: Path) -> None:
    """An export into ``out`` (given empty) killed after it moved two files up."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HELD_MOVE, stack.database_url, stack.app_password,
         team.workspace_id, str(out)],
        cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        ready = sel.select(timeout=WAIT_SECONDS)
    line = proc.stdout.readline() if ready else ""
    proc.send_signal(signal.SIGKILL)
    _, err = proc.communicate(timeout=WAIT_SECONDS)
    assert line == "moving\n", err
    assert proc.returncode == -signal.SIGKILL


def moved_up(out: Path) -> list[str]:
    return sorted(p.name for p in out.iterdir() if STAGING not in p.name)


def test_an_export_killed_while_moving_its_files_up_runs_again(
    stack: Stack, team: Team, tmp_path: Path
) -> None:
    """Killed between the moves of its files up into a `DIR` given empty, an
    export left `DIR` holding some of them without a manifest, and the same
    command was then refused (`out: DIR is not empty`); now it removes what
    the killed one moved up and left staged, and writes the archive."""
    team.clients["ada"].remember("Heron count", "Twelve herons on the lake today.")
    out = tmp_path / "archive"
    out.mkdir()
    killed_while_moving(stack, team, out)
    first = moved_up(out)
    assert len(first) == 2 and fmt.MANIFEST not in first, first
    assert len(staged(out)) == 1
    again = cli(stack, "export", "--workspace", team.slug, "--out", str(out))
    assert again.returncode == 0, again.stderr
    assert (out / fmt.MANIFEST).is_file()
    assert staged(out) == []


def test_a_file_changed_after_an_export_was_killed_moving_up_is_kept(
    stack: Stack, team: Team, tmp_path: Path
) -> None:
    """A file in `DIR` that is not what the killed export moved there (its
    content changed since) is no export's to remove: `DIR` is not empty."""
    out = tmp_path / "archive"
    out.mkdir()
    killed_while_moving(stack, team, out)
    mine = out / moved_up(out)[0]
    mine.write_text("mine\n")
    again = cli(stack, "export", "--workspace", team.slug, "--out", str(out))
    assert again.returncode != 0
    assert "is not empty" in again.stderr, again.stderr
    assert mine.read_text() == "mine\n"
