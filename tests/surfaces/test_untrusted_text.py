"""Memory text is anyone's writing: what the CLI prints of it carries no
control character a terminal would act on, and the MCP server's errors quote
a bad argument short instead of echoing it whole. No stack needed."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator
from typing import Any

import pytest

from recallatron.v1 import common_pb2 as cpb
from recallatron.v1 import gateway_pb2 as pb
from recallatron_cli.common import memory_text, show
from recallatron_mcp import tools

# C0 but newline, DEL, C1, and the bidirectional overrides.
ACTIVE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
ESCAPE = "\x1b]0;owned\x07\x1b[2J\x1b[31m"


def _memory() -> cpb.Memory:
    return cpb.Memory(
        id="3f0c6f9e-0000-4000-8000-000000000001",
        kind=cpb.KIND_NOTE,
        title=f"Title {ESCAPE}red\rover",
        body=f"line one\nline two {ESCAPE}\u202eevil\x9b1m",
        audience=cpb.Audience(workspace=True),
        purposes=[cpb.PURPOSE_ASSIST],
        mentions=[cpb.Mention(entity_id="e1", name=f"name{ESCAPE}")],
        revisions=[cpb.Revision(revision=2, reason=f"why{ESCAPE}")],
        links=[
            cpb.Link(
                kind=cpb.LINK_KIND_ABOUT,
                target=cpb.MemoryRef(id="t", visible=True, title=f"linked{ESCAPE}"),
            )
        ],
    )


def test_memory_text_escapes_control_characters() -> None:
    text = memory_text(_memory())
    assert not ACTIVE.search(text), repr(text)
    # Shown, not dropped: a reader sees that something was there.
    assert "\\x1b]0;owned\\x07" in text and "\\u202e" in text
    # The body keeps its own lines; a title keeps to its line.
    assert "  line one\n  line two" in text
    assert "\\x0dover" in text.splitlines()[0]


def test_show_escapes_whatever_it_prints(capsys: pytest.CaptureFixture[str]) -> None:
    args = argparse.Namespace(json=False)
    show(args, pb.RecallResponse(), f"history [chat] {ESCAPE}\x07")
    out = capsys.readouterr().out
    assert not ACTIVE.search(out.removesuffix("\n")), repr(out)
    show(argparse.Namespace(json=True), pb.ReadResponse(memories=[_memory()]), "")
    out = capsys.readouterr().out
    assert not ACTIVE.search(out.replace("\n", "")), repr(out)


@pytest.mark.parametrize(
    "arguments",
    [
        {"query": "x" * 5_000_000},
        {"query": "q", "mode": "z" * 1_000_000},
        {"query": "q", "limit": "y" * 1_000_000},
        {"query": "q", "k" * 1_000_000: 1},
    ],
)
def test_mcp_errors_quote_a_bad_argument_short(arguments: dict[str, object]) -> None:
    with pytest.raises(tools.ToolError) as err:
        tools.check_arguments("recall", arguments)
    message = str(err.value)
    assert message.startswith("INVALID_ARGUMENT") and len(message) < 1_000, len(message)
    assert "characters)" in message  # says how long the value was


def test_mcp_unknown_tool_name_is_quoted_short() -> None:
    with pytest.raises(tools.ToolError) as err:
        tools.check_arguments("n" * 1_000_000, {})
    assert len(str(err.value)) < 1_000


class _Unread(list[object]):
    """A list whose items must not be looked at: its length says enough."""

    def __iter__(self) -> Iterator[object]:
        raise AssertionError("the items of a list past its maxItems were validated one by one")

    def __getitem__(self, index: object) -> Any:
        raise AssertionError("the items of a list past its maxItems were validated one by one")


@pytest.mark.parametrize(
    ("tool", "arguments", "named"),
    [
        ("read", {"ids": _Unread([0] * 400_000)}, "ids: a list of 400000 items"),
        (
            "remember",
            {"request_id": "r", "kind": "fact", "title": "t", "mentions": _Unread([{}] * 1000)},
            "mentions: a list of 1000 items",
        ),
        ("recall", {"query": "q", "kinds": _Unread(["note"] * 10)}, "kinds: a list of 10 items"),
    ],
    ids=["read ids", "remember mentions", "recall kinds"],
)
def test_mcp_refuses_a_list_past_its_limit_by_its_length(
    tool: str, arguments: dict[str, object], named: str
) -> None:
    """A read with 400,000 ids (a body under a megabyte) took 9 s and 1.4 GB
    to refuse, an error object made for every item before the list's length
    was checked; the length is checked first now, the items left unread."""
    with pytest.raises(tools.ToolError) as err:
        tools.check_arguments(tool, arguments)
    message = str(err.value)
    assert message.startswith("INVALID_ARGUMENT (nothing was sent): " + named), message
    assert "too long (at most" in message
