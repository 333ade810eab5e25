"""`recallatron up`: the whole stack on this machine (embedded Postgres and
every service), and `--demo`, which shows it working once it is ready."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import shutil
import signal
import sys
import uuid
from pathlib import Path

from recallatron.client import Client
from recallatron.secretfiles import write_private
from recallatron.settings import GATEWAY_ADDRESS
from recallatron_cli import common, graph
from recallatron_cli.common import memory_text


def cmd_up(args: argparse.Namespace) -> int:
    from recallatron_devkit.load import models_dir
    from recallatron_devkit.ports import PortTaken
    from recallatron_devkit.stack import (
        DEFAULT_PG_PORT,
        DEFAULT_PORTS,
        Stack,
        StackConfig,
        free_port,
    )

    state = common.state_dir()
    # Ports: the defaults, each one movable (RECALLATRON_PG_PORT,
    # RECALLATRON_GATEWAY_PORT, ...; 0 picks a free one).
    ports = {
        name: int(os.environ.get(f"RECALLATRON_{name.upper()}_PORT", port))
        for name, port in DEFAULT_PORTS.items()
    }
    config = StackConfig(
        state_dir=state,
        # Postgres takes no port 0: a free one is chosen here.
        pg_port=int(os.environ.get("RECALLATRON_PG_PORT", DEFAULT_PG_PORT)) or free_port(),
        ports=ports,
        database_url=os.environ.get("RECALLATRON_DATABASE_URL", ""),
        # Where `recallatron prepare-models` writes them (RECALLATRON_MODELS_DIR,
        # else the checkout's), not the state directory's own: a stack in a
        # state directory of its own uses the models already prepared.
        models_dir=models_dir(),
        cross_encoder_dir=os.environ.get("RECALLATRON_CROSS_ENCODER_DIR", ""),
    )
    stack = Stack(config)
    stop = stack.abort  # a signal during start-up abandons it; later, stops serving

    def on_signal(signum: int, _frame: object) -> None:
        common.stopped_by(signum)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    print(f"starting Postgres and services (state in {state}) ...", flush=True)
    try:
        stack.start()
    except PortTaken as exc:
        # The setting that moves it, as this command reads it.
        side = exc.what in ("review", "http")
        name = "PG" if exc.what == "postgres" else exc.what.upper()
        variable = f"RECALLATRON_{name}_" + ("LISTEN" if side else "PORT")
        free = "host:0" if side else "0"
        raise common.Refused(
            f"could not start: {exc}: stop that process, or move this one with "
            f"{variable} ({free}: a free one)",
            1,
        ) from None
    except RuntimeError as exc:
        if stop.is_set():
            # Abandoned (Ctrl-C, SIGTERM), what it had started stopped: a
            # stop, not a failure (main says so).
            raise KeyboardInterrupt from None
        raise common.Refused(f"could not start: {exc}", 1) from None
    status = 0
    try:
        print(f"ready gateway={stack.gateway}", flush=True)
        with contextlib.suppress(OSError):  # the page may be switched off
            print(f"dedup review page: {stack.review_url}", flush=True)
        with contextlib.suppress(OSError):  # HTTP/JSON may be switched off
            print(f"HTTP/JSON (Connect): {stack.http_url}", flush=True)
        if args.demo:
            demo(stack.gateway, stack.admin_token, state)
        print("serving; Ctrl-C stops everything", flush=True)
        while not stop.is_set():
            stop.wait(1.0)
            ended = stack.exited()
            if ended is not None:
                # A stack with a part gone serves errors: stop it all, and fail.
                print(f"{ended}; stopping", file=sys.stderr, flush=True)
                status = 1
                stop.set()
    finally:
        print("stopping ...", flush=True)
        stack.stop()
        print("stopped", flush=True)
    return status


def command_name() -> str:
    """This `recallatron` as another shell can run it: its name when PATH finds
    this one (an activated or installed environment), else its path (after
    `make run` the virtualenv's bin/ is on no PATH)."""
    beside = Path(sys.executable).parent / "recallatron"
    found = shutil.which("recallatron")
    if not beside.exists() or (found is not None and Path(found).resolve() == beside.resolve()):
        return "recallatron"
    return shlex.quote(str(beside))


def demo(gateway: str, admin_token: str, state: Path) -> None:
    """Shows the stack working: a workspace, a member, a memory read back. The
    demo member's token is kept in the state directory (0600) and reused; the
    output says where it is, never the token itself (standard output ends up
    in scrollback and CI logs)."""
    creds_path = state / "demo.json"
    token_path = state / "demo-token"
    creds = json.loads(creds_path.read_text()) if creds_path.exists() else None
    if creds is not None:
        if not token_path.exists():
            write_private(token_path, creds["token"])
        client = Client(gateway, creds["token"])
        print(f"workspace {creds['slug']} ({creds['workspace_id']}) reused")
        print(f"its owner token is in {token_path} (mode 0600)")
    else:
        admin = Client(gateway, admin_token)
        slug = f"demo-{uuid.uuid4().hex[:8]}"
        ws = admin.create_workspace(slug).workspace
        member = admin.create_member(ws.id, "ada", owner=True).member
        token = admin.create_token(member.id, "demo").token
        creds = {"slug": slug, "workspace_id": ws.id, "member_id": member.id, "token": token}
        write_private(creds_path, json.dumps(creds))
        write_private(token_path, token)
        print(f"workspace {slug} ({ws.id}) created; member ada ({member.id}), owner")
        print(f"its owner token is in {token_path} (mode 0600)")
        client = Client(gateway, token)
    made = client.remember(
        "The team standup moved to 9:30",
        "From next Monday the daily standup starts at 9:30 instead of 9:00.",
        kind="decision",
        audience_to="workspace",
        mention_names=["standup"],
        claims=[
            {
                "entity": {"name": "standup", "type": "meeting"},
                "attribute": "starts_at",
                "value": "09:30",
            }
        ],
    ).memory
    print(f"remembered {made.id}")
    read = client.read([made.id]).memories[0]
    print("read back:\n" + memory_text(read))
    card = client.lookup("Standup").entities[-1]
    print("the graph knows, stated by that memory:\n" + graph.card_text(card))
    run = f"RECALLATRON_TOKEN_FILE={shlex.quote(str(token_path))} {command_name()}"
    if gateway != GATEWAY_ADDRESS:
        # Another shell finds by itself only a stack at the default address
        # or in the default state directory.
        run = f"RECALLATRON_GATEWAY={shlex.quote(gateway)} {run}"
    print(f"try: {run} read {made.id}")
    print(f"     {run} lookup standup")
