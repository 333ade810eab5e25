"""A refusal of a flag's value names the flag: `error: INVALID_ARGUMENT:
field (--flag): why` when the value fills a request's field, `--flag: why`
when it is the CLI's own (a file it reads), exit 2, nothing sent."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from recallatron_cli import main as cli

# Nothing listens here: every case is refused before a call is made.
NOWHERE = ["--gateway", "127.0.0.1:1", "--token", "t"]


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    try:
        status = cli.main(argv)
    except SystemExit as exc:
        if isinstance(exc.code, str):
            print(exc.code, file=sys.stderr)
            status = 1
        else:
            status = int(exc.code or 0)
    return status, capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        # Each named the request's field only ('from: not an RFC 3339 time'),
        # where list and audit named --from as well.
        (["timeline", "--from", "bad"], "from (--from): not an RFC 3339 time: 'bad'"),
        (["timeline", "--to", "2024-01-01"], "to (--to): an RFC 3339 time needs its offset"),
        (["episode", "t", "--start", "bad"], "started_at (--start): not an RFC 3339 time"),
        (
            ["episode", "t", "--start", "2024-01-01T00:00:00Z", "--end", "bad"],
            "ended_at (--end): not an RFC 3339 time",
        ),
        (
            ["remember", "t", "--claim", "a:b=c", "--valid-from", "bad"],
            "claims[0].valid_from (--valid-from): not an RFC 3339 time",
        ),
        (["lookup", "x", "--as-of", "bad"], "as_of (--as-of): not an RFC 3339 time"),
        (["neighbors", "x", "--as-of", "bad"], "as_of (--as-of): not an RFC 3339 time"),
        (["neighbors", "x", "--hops", "99999999999"], "hops (--hops): Value out of range"),
        (["recall", "q", "--limit", "99999999999"], "limit (--limit): Value out of range"),
        # It named a flag no command has (--page_size).
        (["list", "--page-size", "99999999999"], "page_size (--page-size): Value out of range"),
        (["list", "--from", "bad"], "from (--from): not an RFC 3339 time: 'bad'"),
        (["audit", "--to", "bad"], "to (--to): not an RFC 3339 time: 'bad'"),
    ],
)
def test_a_value_refused_for_its_field_names_the_flag_too(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    status, err = _run([*argv, *NOWHERE], capsys)
    assert err.startswith(f"error: INVALID_ARGUMENT: {said}"), err
    assert len(err.strip().splitlines()) == 1 and status == 2, err


def test_a_graph_file_that_is_not_utf8_is_refused_naming_graph(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It said `INVALID_ARGUMENT: 'utf-8' codec can't decode byte 0xe9 ...`."""
    path = tmp_path / "graph.json"
    path.write_bytes('{"claims": [{"entity": {"name": "Café"}}]}'.encode("latin-1"))
    status, err = _run(["remember", "t", "--graph", str(path), *NOWHERE], capsys)
    assert err.startswith("error: INVALID_ARGUMENT: --graph: not UTF-8 text"), err
    assert len(err.strip().splitlines()) == 1 and status == 2, err


def test_a_graph_file_that_cannot_be_read_is_refused_naming_graph(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It said `No such file or directory: /...` (the path, not the flag)."""
    path = tmp_path / "missing.json"
    status, err = _run(["remember", "t", "--graph", str(path), *NOWHERE], capsys)
    assert err == f"error: INVALID_ARGUMENT: --graph: No such file or directory: {path}\n", err
    assert status == 2


@pytest.mark.parametrize("content", [None, "tôken".encode("latin-1")], ids=["missing", "latin-1"])
def test_a_token_file_that_cannot_be_read_is_refused_naming_token_file(
    content: bytes | None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """It said `No such file or directory: /...`, or `INVALID_ARGUMENT: 'utf-8'
    codec can't decode ...`, naming no flag."""
    path = tmp_path / "token"
    if content is not None:
        path.write_bytes(content)
    argv = ["read", "x", "--gateway", "127.0.0.1:1", "--token-file", str(path)]
    status, err = _run(argv, capsys)
    assert err.startswith("error: --token-file: ") and err.endswith(f": {path}\n"), err
    assert status == 2
    monkeypatch.setenv("RECALLATRON_TOKEN_FILE", str(path))
    monkeypatch.delenv("RECALLATRON_TOKEN", raising=False)
    status, err = _run(argv[:4], capsys)
    assert err.startswith("error: RECALLATRON_TOKEN_FILE: ") and str(path) in err, err
    assert status == 2


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        # Each named only a field no flag is called ('expected_revision: ...').
        (
            ["correct", "x", "--revision", "9" * 20, "--reason", "r"],
            "expected_revision (--revision)",
        ),
        (
            ["forget", "x", "--reason", "r", "--revision", "9" * 20],
            "expected_revision (--revision)",
        ),
        (["remember", "t", "--episode", "e\ud800"], "episode_id (--episode)"),
        (["remember", "t", "--mention", "m\ud800"], "mentions[0].name (--mention)"),
        (["remember", "t", "--about", "a\ud800"], "about_ids[0] (--about)"),
        (["remember", "t", "--claim", "a:b=c\ud800"], "claims[0].value (--claim)"),
        (
            ["remember", "t", "--entity-type", "a=b\ud800", "--claim", "a:b=c"],
            "claims[0].entity.type (--entity-type)",
        ),
        (["timeline", "--entity", "e\ud800"], "entity_id (--entity)"),
        (["timeline", "--episode", "e\ud800"], "episode_id (--episode)"),
    ],
)
def test_a_field_filled_from_a_flag_of_another_name_names_that_flag(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    status, err = _run([*argv, *NOWHERE], capsys)
    assert err.startswith(f"error: INVALID_ARGUMENT: {said}: "), err
    assert status == 2, err


def test_an_item_of_a_graph_file_refused_names_graph(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A --graph item the client cannot send named only `claims[0].value`."""
    path = tmp_path / "graph.json"
    path.write_text('{"claims": [{"entity": {"name": "a"}, "attribute": "b", "value": "\\ud800"}]}')
    status, err = _run(["remember", "t", "--graph", str(path), *NOWHERE], capsys)
    assert err.startswith("error: INVALID_ARGUMENT: claims[0].value (--graph): "), err
    assert status == 2


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["remember", "t", "--audience", "x\udce9"], "--audience"),
        (["admin", *NOWHERE, "create-member", "h", "--workspace", "x\udce9"], "--workspace"),
        (["admin", *NOWHERE, "list-tokens", "--workspace", "x\udce9"], "--workspace"),
    ],
)
def test_an_argument_that_is_not_utf8_is_refused_naming_it(
    argv: list[str], flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Bytes that are not UTF-8 in an argument (as a shell passes them) were
    refused as `INVALID_ARGUMENT: 'utf-8' codec can't encode character
    '\\udce9' ...`, naming neither a field nor the flag."""
    status, err = _run(argv if argv[0] == "admin" else [*argv, *NOWHERE], capsys)
    assert err.startswith(f"error: INVALID_ARGUMENT: {flag}: not UTF-8 text: "), err
    assert status == 2
