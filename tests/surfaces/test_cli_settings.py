"""`recallatron settings` and `recallatron settings set` against the real stack:
an owner reads the workspace's settings and changes the ones named, a bad value
is refused naming its flag with nothing changed, and a member is answered as
the gateway answers them (GetSettings: any member; UpdateSettings: owners)."""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest

from recallatron.client import Client
from recallatron.v1 import gateway_pb2 as pb
from recallatron.v1 import store_pb2
from recallatron.vocabulary import MODE
from recallatron_cli.main import build_parser, main
from recallatron_devkit.stack import Stack
from tests.conftest import Team


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """The command's exit status, stdout and stderr; argparse's own refusal
    (a value its flag's type refuses) counted as the exit it makes."""
    try:
        status = main(argv)
    except SystemExit as exc:
        if isinstance(exc.code, str):
            print(exc.code, file=sys.stderr)
            status = 1
        else:
            status = int(exc.code or 0)
    out = capsys.readouterr()
    return status, out.out, out.err


def settings_of(client: Client) -> dict[str, Any]:
    got = client.ask(client.admin.GetSettings, pb.GetSettingsRequest).settings
    return {
        "default_recall_mode": got.default_recall_mode,
        "dense_floor": got.dense_floor,
        "rerank_depth": got.rerank_depth,
        "expiry_days": got.expiry_days,
        "members_may_edit": got.members_may_edit,
    }


def test_every_setting_has_a_flag() -> None:
    """A setting added to WorkspaceSettings is an option of `settings set` with
    no code of its own."""
    parser = build_parser()
    for f in store_pb2.WorkspaceSettings.DESCRIPTOR.fields:
        flag = "--" + f.name.replace("_", "-")
        args = parser.parse_args(["settings", "set", flag, _a_value(f.name)])
        assert getattr(args, f.name) is not None, flag


def _a_value(name: str) -> str:
    return {"default_recall_mode": "lexical", "members_may_edit": "true"}.get(name, "1")


@pytest.mark.integration
def test_an_owner_reads_and_changes_the_settings_named(
    stack: Stack, team: Team, capsys: pytest.CaptureFixture[str]
) -> None:
    ada = team.clients["ada"]
    common = ["--gateway", stack.gateway, "--token", ada.token]
    status, out, err = run(["settings", "--json", *common], capsys)
    assert status == 0, err
    assert json.loads(out)["settings"] == {
        "default_recall_mode": "RECALL_MODE_HYBRID",
        "dense_floor": 0.3,
        "rerank_depth": 20,
        "expiry_days": 0,
        "members_may_edit": False,
    }

    status, out, err = run(
        ["settings", "set", "--dense-floor", "0.4", "--expiry-days", "30", *common], capsys
    )
    assert status == 0, err
    assert "dense_floor" in out and "0.4" in out and "expiry_days" in out
    # Only those named changed.
    assert settings_of(ada) == {
        "default_recall_mode": MODE.value("hybrid"),
        "dense_floor": pytest.approx(0.4),
        "rerank_depth": 20,
        "expiry_days": 30,
        "members_may_edit": False,
    }

    # The options before `set` as well as after it; false set as false.
    status, _, err = run(
        ["settings", *common, "set", "--members-may-edit", "true", "--default-recall-mode",
         "lexical"],
        capsys,
    )  # fmt: skip
    assert status == 0, err
    assert settings_of(ada)["members_may_edit"] is True
    status, out, err = run(["settings", "set", "--members-may-edit", "false", *common], capsys)
    assert status == 0, err
    now = settings_of(ada)
    assert now["members_may_edit"] is False
    assert now["default_recall_mode"] == MODE.value("lexical")
    assert now["dense_floor"] == pytest.approx(0.4)

    status, out, err = run(["settings", *common], capsys)
    assert status == 0, err
    lines = out.splitlines()
    for line in ("default_recall_mode  lexical", "dense_floor          0.4",
                 "rerank_depth         20", "expiry_days          30",
                 "members_may_edit     false"):  # fmt: skip
        assert line in lines, out


@pytest.mark.integration
def test_a_bad_value_is_refused_naming_its_flag_and_nothing_changes(
    stack: Stack, team: Team, capsys: pytest.CaptureFixture[str]
) -> None:
    ada = team.clients["ada"]
    common = ["--gateway", stack.gateway, "--token", ada.token]
    before = settings_of(ada)
    # The exit status: 1 for the gateway's refusal, as every command's; 2 for
    # one made before anything is sent, as argparse's.
    cases: list[tuple[list[str], str, int]] = [
        # Refused by the store's rule.
        (["--dense-floor", "1.5"], "settings.dense_floor (--dense-floor): must lie in [0, 1]", 1),
        (["--dense-floor", ".5", "--rerank-depth", "500"], "rerank_depth (--rerank-depth)", 1),
        (["--expiry-days", "-1"], "settings.expiry_days (--expiry-days)", 1),
        # Past what the field holds, refused before anything is sent.
        (["--expiry-days", "9" * 11], "settings.expiry_days (--expiry-days): Value out of range",
         2),
        # Not a value of the flag's type at all (argparse's own refusal).
        (["--dense-floor", "high"], "--dense-floor", 2),
        (["--members-may-edit", "maybe"], "--members-may-edit", 2),
        (["--default-recall-mode", "fuzzy"], "--default-recall-mode", 2),
        # Nothing named to change.
        ([], "settings set: name at least one setting", 2),
    ]  # fmt: skip
    for given, said, exits in cases:
        status, out, err = run(["settings", "set", *given, *common], capsys)
        assert status == exits, (given, status, err)
        assert said in err, (given, err)
        assert out == "", (given, out)
        assert settings_of(ada) == before, given


@pytest.mark.integration
def test_a_member_reads_the_settings_and_is_refused_a_change(
    stack: Stack, team: Team, capsys: pytest.CaptureFixture[str]
) -> None:
    bob = team.clients["bob"]
    common = ["--gateway", stack.gateway, "--token", bob.token]
    before = settings_of(team.clients["ada"])
    status, out, err = run(["settings", "--json", *common], capsys)
    assert status == 0, err
    assert json.loads(out)["settings"]["dense_floor"] == pytest.approx(0.3)
    status, out, err = run(["settings", "set", "--dense-floor", "0.6", *common], capsys)
    assert status == 1 and out == ""
    assert err.startswith("error: PERMISSION_DENIED: "), err
    assert settings_of(team.clients["ada"]) == before
