"""An operator command whose database cannot be reached says so in one line,
the server's own words with no password, instead of a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_an_unreachable_database_is_one_line_without_its_password(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "RECALLATRON_DATABASE_URL": "postgresql://postgres:s3cret-pw@127.0.0.1:1/postgres",
        "RECALLATRON_APP_PASSWORD": "app-s3cret",
        "RECALLATRON_STATE_DIR": str(tmp_path),
    }
    done = subprocess.run(
        [sys.executable, "-m", "recallatron_cli.main", "servers", "list"],
        env=env, cwd=REPO, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert "error: the database:" in done.stderr and "127.0.0.1" in done.stderr
    assert "s3cret" not in done.stderr + done.stdout
