"""Every refusal of the `recallatron` command reads the same: one line on
stderr starting ``error:``, and the exit status of its kind (2 for input the
command refuses before sending anything, as argparse and the other client-side
refusals do). Some left by ``sys.exit(message)``: no prefix, exit 1."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

from recallatron_cli import graph
from recallatron_cli import main as cli

# Nothing listens here: every case is refused before a call is made.
NOWHERE = ["--gateway", "127.0.0.1:1", "--token", "t"]


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """Exit status and stderr as a shell sees them (a ``sys.exit(text)``
    prints the text and exits 1)."""
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
        (
            ["admin", *NOWHERE, "create-token", "m", "--purposes", "gossip"],
            "INVALID_ARGUMENT: purposes (--purposes): 'gossip'",
        ),
        (
            ["admin", *NOWHERE, "create-token", "m", "--expires-in", "ninety days"],
            "INVALID_ARGUMENT: expires_in (--expires-in): 'ninety days'",
        ),
        (
            ["remember", "text", "--claim", "no colon here", *NOWHERE],
            "INVALID_ARGUMENT: --claim: expected",
        ),
        # The option's value as given, not the part after its first separator.
        (
            ["remember", "text", "--claim", "Robin:city", *NOWHERE],
            "INVALID_ARGUMENT: --claim: expected ENTITY:ATTRIBUTE=VALUE, got 'Robin:city'\n",
        ),
        (["read", "00000000-0000-0000-0000-000000000001"], "no token:"),
    ],
    ids=["purpose", "duration", "claim", "claim-without-value", "no-token"],
)
def test_a_refusal_is_one_error_line_and_exit_2(
    argv: list[str],
    said: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for name in ("RECALLATRON_TOKEN", "RECALLATRON_TOKEN_FILE", "RECALLATRON_ADMIN_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("RECALLATRON_STATE_DIR", str(tmp_path))
    status, err = _run(argv, capsys)
    assert err.startswith(f"error: {said}"), err
    assert len(err.strip().splitlines()) == 1, err
    assert status == 2, err


@pytest.mark.parametrize(
    ("graph", "key"),
    [
        ('{"claims": 5}', "claims"),
        ('{"relations": true}', "relations"),
        # A string or an object is no list of items either (not its
        # characters or keys, as items).
        ('{"aliases": "Robin=Rob"}', "aliases"),
        ('{"claims": {"entity": {"name": "Robin"}, "attribute": "city"}}', "claims"),
    ],
    ids=["number", "boolean", "string", "object"],
)
def test_a_graph_file_whose_lists_are_not_lists_is_refused_naming_them(
    graph: str, key: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A --graph file with "claims": 5 ended in a traceback (TypeError), and
    a string's characters were sent as items ("claims[0]: unexpected value")."""
    path = tmp_path / "graph.json"
    path.write_text(graph)
    status, err = _run(["remember", "text", "--graph", str(path), *NOWHERE], capsys)
    assert err == f"error: INVALID_ARGUMENT: --graph: {key}: a JSON array is expected\n", err
    assert status == 2


def test_a_graph_file_may_leave_a_list_out_or_null(monkeypatch: pytest.MonkeyPatch) -> None:
    """As the JSON form of a request reads them: no items ("claims": null
    ended in a traceback)."""
    args = cli.build_parser().parse_args(["remember", "text", "--graph", "-"])
    monkeypatch.setattr(sys, "stdin", io.StringIO('{"claims": null, "aliases": []}'))
    assert graph.graph_items(args) == {"claims": [], "relations": [], "aliases": []}


def test_a_graph_file_with_a_key_it_does_not_read_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A misspelt "claim" was passed over: the memory was written without
    the claims meant, and nothing said so."""
    path = tmp_path / "graph.json"
    path.write_text('{"claim": [{"entity": {"name": "Robin"}, "attribute": "a", "value": "b"}]}')
    status, err = _run(["remember", "text", "--graph", str(path), *NOWHERE], capsys)
    said = "error: INVALID_ARGUMENT: --graph: unknown key 'claim' (claims, relations, aliases)\n"
    assert err == said, err
    assert status == 2
