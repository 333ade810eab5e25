"""The bounds on reading a workspace archive without a database
(docs/export.md): a record line's length, a JSON file's size and its nesting."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from recallatron import errors
from services.store.domain import archive_format as fmt
from services.store.domain import archive_plan as plan
from services.store.domain import archive_reading as reading
from tests.unit.archive_records import fix_digest, memory, pad_to, write_archive


def test_a_record_line_over_a_mebibyte_is_refused_naming_its_line(tmp_path: Path) -> None:
    # A history turn's line has its own bound (tests/unit/test_archive_versions.py).
    def line_of(n: int, size: int) -> dict[str, Any]:
        record = memory(n, body="")
        record["body"] = "\u00e9" * ((m := size - len(json.dumps(record))) // 6) + "x" * (m % 6)
        assert len(json.dumps(record)) == size
        return record

    def read(directory: Path) -> int:
        return len(list(fmt.records(directory, "memories", fmt.read_manifest(directory))))

    write_archive(tmp_path / "a", {"memories": [line_of(1, 500), line_of(2, 2**20)]})
    assert read(tmp_path / "a") == 2
    write_archive(tmp_path / "b", {"memories": [line_of(1, 500), line_of(2, 2**20 + 1)]})
    with pytest.raises(errors.InvalidArgument) as err:
        read(tmp_path / "b")
    assert err.value.field == "memories.jsonl line 2"
    assert "longer than" in err.value.description


def test_a_json_file_over_its_cap_is_refused_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_archive(tmp_path / "a", {"memories": [memory(1)]})
    cap = (tmp_path / "a" / fmt.MANIFEST).stat().st_size + 100
    monkeypatch.setattr(reading, "MAX_JSON_FILE_BYTES", cap)
    pad_to(tmp_path / "a" / fmt.WORKSPACE, cap + 1)
    fix_digest(tmp_path / "a", fmt.WORKSPACE)
    with pytest.raises(errors.InvalidArgument) as err:
        plan.read_archive(tmp_path / "a")
    assert err.value.field == fmt.WORKSPACE and "larger than" in err.value.description

    pad_to(tmp_path / "a" / fmt.MANIFEST, cap + 1)
    with pytest.raises(errors.InvalidArgument) as err:
        plan.read_archive(tmp_path / "a")
    assert err.value.field == fmt.MANIFEST and "larger than" in err.value.description


def test_a_members_file_over_64_mib_is_refused_before_it_is_read(tmp_path: Path) -> None:
    path = tmp_path / "members.json"
    path.write_text('{"members": [{"source": "ada"}]}')
    pad_to(path, 64 * 2**20 + 1)
    with pytest.raises(errors.InvalidArgument) as err:
        plan.read_members_file(path)
    assert err.value.field == "members" and str(path) in err.value.description


DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize("where", ["memories.jsonl line 1", fmt.WORKSPACE, fmt.MANIFEST])
def test_json_nested_deeper_than_the_parser_goes_is_refused_naming_where(
    tmp_path: Path, where: str
) -> None:
    write_archive(tmp_path / "a", {"memories": [memory(1)]})
    directory = tmp_path / "a"
    if where == fmt.MANIFEST:
        (directory / fmt.MANIFEST).write_text('{"format": ' + DEEP + "}")
    elif where == fmt.WORKSPACE:
        (directory / fmt.WORKSPACE).write_text('{"settings": {"x": ' + DEEP + "}}")
        fix_digest(directory, fmt.WORKSPACE)
    else:
        (directory / "memories.jsonl").write_text('{"title": ' + DEEP + "}\n")
        fix_digest(directory, "memories")
    with pytest.raises(errors.InvalidArgument) as err:
        plan.read_archive(directory)
    assert err.value.field == where and "nested" in err.value.description


def test_a_members_file_nested_too_deep_is_refused_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "members.json"
    path.write_text('{"members": ' + DEEP + "}")
    with pytest.raises(errors.InvalidArgument) as err:
        plan.read_members_file(path)
    assert err.value.field == "members" and "nested" in err.value.description


def test_json_nested_deeper_than_the_format_is_refused_though_the_parser_goes(
    tmp_path: Path,
) -> None:
    path = tmp_path / "members.json"
    path.write_text('{"members": [' + "[" * reading.MAX_DEPTH + "]" * reading.MAX_DEPTH + "]}")
    with pytest.raises(errors.InvalidArgument) as err:
        plan.read_members_file(path)
    assert err.value.field == "members" and "nested" in err.value.description
