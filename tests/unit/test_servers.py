"""Named Postgres servers (docs/servers.md): parsing the settings, keeping
URLs and passwords out of text, and the placement policy."""

from __future__ import annotations

from pathlib import Path

import pytest
from psycopg.conninfo import conninfo_to_dict

from services.store.infrastructure.servers import (
    BudgetTooLarge,
    ServerConfigError,
    UnknownServer,
    check_connections,
    demand,
    parse_pairs,
    place,
    redact,
    server_map,
    tcp_watch,
    watched,
    with_inline_password,
)

A = "postgresql://admin:s3cret-a@pg-a.internal:5432/postgres"
B = "postgresql://admin@h1:5432,h2:5432/postgres?passfile=/run/secrets/pgpass-b"


def test_pairs_keep_the_commas_of_a_multi_host_url() -> None:
    assert parse_pairs(f"a={A}, b={B}\n") == {"a": A, "b": B}


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("a=", "without a URL"),
        ("Bad=postgresql://x", "must be 1-63 characters"),
        (f"a={A},a={A}", "named twice"),
        # A URL without its name: refused, and not echoed.
        ("postgresql://admin:s3cret-a@pg-a/postgres?sslmode=require", "not shown"),
    ],
)
def test_bad_pairs_are_refused_with_the_setting_named(text: str, says: str) -> None:
    with pytest.raises(ServerConfigError) as info:
        parse_pairs(text)
    assert "RECALLATRON_POSTGRES_SERVERS" in str(info.value) and says in str(info.value)
    assert "s3cret" not in str(info.value)


def test_the_map_joins_the_default_url_pairs_and_secret_files(tmp_path: Path) -> None:
    (tmp_path / "c").write_text("postgresql://c.internal/postgres\n")
    (tmp_path / "..data").mkdir()  # a Secret volume's own bookkeeping
    servers = server_map("postgresql://d/postgres", "default", f"a={A}", str(tmp_path))
    assert servers.names == ["a", "c", "default"]
    assert servers.url("c") == "postgresql://c.internal/postgres"
    assert servers.url("") == "postgresql://d/postgres"
    with pytest.raises(UnknownServer):
        servers.url("zz")


def test_the_default_server_needs_a_url() -> None:
    with pytest.raises(ServerConfigError) as info:
        server_map("", "default", f"a={A}", "")
    assert "RECALLATRON_DATABASE_URL" in str(info.value)
    assert server_map("", "a", f"a={A}", "").default == "a"


def test_one_name_with_two_urls_is_refused(tmp_path: Path) -> None:
    (tmp_path / "a").write_text("postgresql://elsewhere/postgres")
    with pytest.raises(ServerConfigError) as info:
        server_map("postgresql://d/postgres", "default", f"a={A}", str(tmp_path))
    assert "'a'" in str(info.value) and "elsewhere" not in str(info.value)


def test_redaction_takes_out_urls_passwords_and_password_files() -> None:
    servers = server_map("postgresql://d/postgres", "default", f"a={A},b={B}", "")
    secrets = servers.secrets(["app-password-x"])
    text = f"failed: {A} then password s3cret-a and /run/secrets/pgpass-b and app-password-x"
    out = redact(text, secrets)
    for leaked in (A, "s3cret-a", "/run/secrets/pgpass-b", "app-password-x"):
        assert leaked not in out
    assert out.startswith("failed: ***")


def test_placement_picks_the_fewest_workspaces_skipping_draining() -> None:
    names = ["a", "b", "c"]
    assert place(names, {"a": 3, "b": 1, "c": 1}, []) == "b"  # ties: first name
    assert place(names, {"a": 3, "b": 1, "c": 2}, ["b"]) == "c"
    assert place(names, {}, ["a", "b", "c"]) is None


def test_the_start_up_check_counts_replicas_and_says_both_numbers() -> None:
    store = demand("store", 16, 4, default_server=True)
    job = demand("embedding job", 4, 4, default_server=True)
    # Budget, control pool, listeners (3 each), admin (2; the store's template
    # migration one more).
    assert (store.total, job.total) == (16 + 4 + 3 + 3, 4 + 4 + 3 + 2)
    # Another server: only the budget and the admin connections.
    assert demand("store", 16, 4, default_server=False).total == 16 + 3
    fits = check_connections(
        "default", max_connections=100, reserved=3, reserve=10, processes={"store": (2, store)}
    )
    assert fits == 52
    with pytest.raises(BudgetTooLarge) as refused:
        check_connections(
            "default",
            max_connections=60,
            reserved=3,
            reserve=10,
            processes={"store": (2, store), "embedding job": (1, job)},
        )
    message = str(refused.value)
    assert "store 2 x 26 + embedding job 1 x 13 = 65 connections" in message
    assert "allows 47 (max_connections 60 - 3 reserved by the server - 10 kept" in message


@pytest.mark.parametrize("where", ["default", "pairs"])
def test_a_url_that_does_not_parse_is_refused_naming_its_server_only(where: str) -> None:
    """A password that needs percent-encoding and is not (`s3cr%t`) made
    libpq quote it in its parse error, which reached the store's log (a
    traceback at start-up) and the operator's terminal."""
    bad = "postgresql://admin:Zq9-s3cr%t-pass@pg-b.internal:5432/postgres"
    with pytest.raises(ServerConfigError) as info:
        if where == "default":
            server_map(bad, "default", "", "")
        else:
            server_map("postgresql://d/postgres", "default", f"b={bad}", "")
    said = str(info.value)
    assert ("'default'" if where == "default" else "'b'") in said
    assert "percent-encoded" in said
    assert "s3cr" not in said and "pg-b.internal" not in said


def _inlined(tmp_path: Path, lines: list[str], url: str) -> str | None:
    passfile = tmp_path / "pgpass"
    passfile.write_text("\n".join(lines) + "\n")
    params = conninfo_to_dict(with_inline_password(f"{url}?passfile={passfile}"))
    found = params.get("password")
    return None if found is None else str(found)


def test_a_password_file_is_read_as_libpq_reads_it(tmp_path: Path) -> None:
    """Fields were split at every ':' and kept their escapes: a password
    holding ':' or '\\' (written '\\:' and '\\\\', as libpq asks) reached the
    move's subscription cut or with its backslashes, and the copy failed."""
    url = "postgresql://admin@127.0.0.1:5433/postgres"
    escaped = r"127.0.0.1:5433:*:admin:pa\:ss\\wo\rd"
    assert _inlined(tmp_path, [escaped], url) == "pa:ss\\word"
    # The first line that matches wins; '*' matches a whole field only; a
    # comment is no entry; an escaped ':' in a host (IPv6) matches it.
    lines = [
        "# 127.0.0.1:5433:*:admin:from-a-comment",
        r"127.0.0.1:5433:postgre\*:admin:not-this-one",
        "127.0.0.1:5433:*:someone-else:nor-this",
        "127.0.0.1:5433:*:admin:this-one:and-not-this-part",
        "*:*:*:*:too-late",
    ]
    assert _inlined(tmp_path, lines, url) == "this-one"
    v6 = r"\:\:1:5433:postgres:admin:over-v6"
    assert _inlined(tmp_path, [v6], "postgresql://admin@[::1]:5433/postgres") == "over-v6"
    # No database named: libpq matches the user's name in its place.
    assert _inlined(
        tmp_path, ["127.0.0.1:5433:admin:admin:db-is-user"], url[: url.rindex("/")] + "/"
    ) == ("db-is-user")


def test_a_password_libpq_takes_from_the_environment_reaches_the_subscription(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only a `passfile` named in the URL was read: a store that reached its
    servers with PGPASSWORD, PGPASSFILE or ~/.pgpass (as libpq does) handed
    the move's subscription no password, and the target could not connect."""
    for name in ("PGPASSWORD", "PGPASSFILE", "PGHOST", "PGPORT", "PGUSER", "PGDATABASE"):
        monkeypatch.delenv(name, raising=False)
    url = "postgresql://admin@127.0.0.1:5433/postgres"

    def inlined() -> object:
        return conninfo_to_dict(with_inline_password(url)).get("password")

    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".pgpass").write_text("127.0.0.1:5433:*:admin:from-home\n")
    assert inlined() == "from-home"
    named = tmp_path / "named"
    named.write_text("127.0.0.1:5433:*:admin:from-pgpassfile\n")
    monkeypatch.setenv("PGPASSFILE", str(named))
    assert inlined() == "from-pgpassfile"
    monkeypatch.setenv("PGPASSWORD", "from-pgpassword")
    assert inlined() == "from-pgpassword"


def test_passwords_libpq_takes_from_the_environment_are_redacted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only passwords and password files named in the URLs were redacted: a
    password from PGPASSWORD, PGPASSFILE or ~/.pgpass (which libpq, and so
    the store and a move's subscription, use) could reach a log in an error
    that quotes the DSN or the subscription's conninfo."""
    for name in ("PGPASSWORD", "PGPASSFILE", "PGHOST", "PGPORT", "PGUSER", "PGDATABASE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".pgpass").write_text(
        "h1:5432:*:admin:from-home-h1\nh2:5433:*:admin:from-home-h2\n"
    )
    named = tmp_path / "named-pgpass"
    named.write_text("pg-c:5432:*:admin:from-pgpassfile\n")
    servers = server_map(
        "postgresql://admin@h1:5432,h2:5433/postgres",
        "default",
        "c=postgresql://admin@pg-c:5432/postgres",
        "",
    )
    text = "failed: from-home-h1 from-home-h2"
    # Every host of a multi-host URL: libpq looks each one up.
    assert redact(text, servers.secrets()) == "failed: *** ***"
    monkeypatch.setenv("PGPASSFILE", str(named))
    said = redact(f"conninfo password=from-pgpassfile passfile={named}", servers.secrets())
    assert "from-pgpassfile" not in said and str(named) not in said
    monkeypatch.setenv("PGPASSWORD", "from-pgpassword")
    said = redact("host=pg-c password=from-pgpassword", servers.secrets())
    assert said == "host=pg-c password=***"


def test_every_server_url_watches_for_a_silent_server_unless_it_says_otherwise() -> None:
    """RECALLATRON_POSTGRES_SILENCE_SECONDS in libpq's TCP options: the
    keepalives and the user timeout both end a silent connection within the
    setting; a URL's own options win; 0 adds nothing."""
    for seconds in (4, 10, 30, 120):
        watch = {k: int(v) for k, v in tcp_watch(seconds).items()}
        bound = watch["keepalives_idle"] + watch["keepalives_count"] * watch["keepalives_interval"]
        assert watch["keepalives"] == 1 and bound == seconds, watch
        assert watch["tcp_user_timeout"] == seconds * 1000, watch
    given = conninfo_to_dict(
        watched("postgresql://u@h:5432/db?keepalives_idle=60&tcp_user_timeout=0", 10)
    )
    assert given["keepalives_idle"] == "60" and given["tcp_user_timeout"] == "0"
    assert given["keepalives_count"] == "3" and given["host"] == "h"
    assert watched("postgresql://u@h/db", 0) == "postgresql://u@h/db"
