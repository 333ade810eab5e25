"""An export into a directory given empty moves its staged files up at its
end (docs/export.md): a file someone put into that directory while the
export ran is never replaced nor lost; the export is refused naming the
directory, and leaves no partial archive beside that file."""

from __future__ import annotations

from pathlib import Path

import pytest

from recallatron import errors
from services.store.domain import archive_export
from services.store.domain import archive_format as fmt
from services.store.domain.archive_export import STAGING, stage

ARCHIVE = {"memories.jsonl": b"{}\n", "workspace.json": b"{}\n", fmt.MANIFEST: b"{}\n"}


@pytest.mark.parametrize("renameat2", [True, False], ids=["renameat2", "link"])
@pytest.mark.parametrize("name", ["memories.jsonl", fmt.MANIFEST, "notes.txt"])
def test_a_file_put_into_the_directory_given_while_the_export_ran_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, renameat2: bool
) -> None:
    """Before, a file of an archive's name put there meanwhile was replaced
    by the export's (its bytes lost): the final step renamed over it. Where
    the filesystem has no RENAME_NOREPLACE, a hard link keeps it too."""
    if not renameat2:
        monkeypatch.setattr(archive_export, "_RENAMEAT2", None)
    out = tmp_path / "given"
    out.mkdir()
    staging = stage(out)
    for archive_name, data in ARCHIVE.items():
        (staging.directory / archive_name).write_bytes(data)
    (out / name).write_bytes(b"mine\n")  # after the export checked `out` empty
    try:
        with pytest.raises(errors.InvalidArgument) as err:
            staging.finish()
        staging.abandon()
    finally:
        staging.release()
    assert err.value.field == "out" and str(out) in err.value.description
    assert (out / name).read_bytes() == b"mine\n"
    assert sorted(p.name for p in out.iterdir()) == [name]  # no partial archive, no staging


@pytest.mark.parametrize("holding", [False, True], ids=["empty", "holding a file"])
def test_a_directory_made_where_a_new_one_was_to_go_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, holding: bool
) -> None:
    """``out`` new at the start, someone's directory there at the end. Where
    the filesystem has no RENAME_NOREPLACE, a plain rename replaces at most
    an empty directory: one holding a file is kept all the same."""
    if holding:
        monkeypatch.setattr(archive_export, "_RENAMEAT2", None)
    out = tmp_path / "new"
    staging = stage(out)
    (staging.directory / fmt.MANIFEST).write_bytes(b"{}\n")
    out.mkdir()
    if holding:
        (out / "notes.txt").write_bytes(b"mine\n")
    try:
        with pytest.raises(errors.InvalidArgument) as err:
            staging.finish()
        staging.abandon()
    finally:
        staging.release()
    assert str(out) in err.value.description
    assert [p.name for p in out.iterdir()] == (["notes.txt"] if holding else [])
    assert [p for p in tmp_path.iterdir() if STAGING in p.name] == []


def test_an_export_into_a_directory_given_empty_moves_every_file_up(tmp_path: Path) -> None:
    out = tmp_path / "given"
    out.mkdir()
    staging = stage(out)
    for name, data in ARCHIVE.items():
        (staging.directory / name).write_bytes(data)
    try:
        staging.finish()
    finally:
        staging.release()
    assert sorted(p.name for p in out.iterdir()) == sorted(ARCHIVE)
