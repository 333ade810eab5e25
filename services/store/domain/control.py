"""The control plane: workspaces (and where their database lives), members,
hashed tokens, workspace settings."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from psycopg.types.json import Jsonb

from recallatron import deadline, errors
from recallatron.expiring import ExpiringCache
from recallatron.vocabulary import (
    DEFAULT_WORKSPACE_PAGE,
    MAX_WORKSPACE_PAGE,
    MODE,
    MODES,
)
from services.store.domain import page_tokens, validation
from services.store.domain.control_members import MemberRecords, being_imported
from services.store.domain.control_names import spelled_id
from services.store.domain.control_records import (
    ListedWorkspace,
    Member,
    ServerStatus,
    Workspace,
    WorkspacePage,
    WorkspaceSettings,
)
from services.store.domain.control_workspaces import WorkspaceCreation
from services.store.domain.placement import Placement
from services.store.domain.token_records import TokenRecords
from services.store.infrastructure import migrate
from services.store.infrastructure.db import Caller, Databases, WorkspacePool
from services.store.sql import queries as q


def validate_settings(s: WorkspaceSettings) -> None:
    # Types first: settings also come from an archive's JSON, not only a message.
    for name, kinds, what in (("dense_floor", (int, float), "a number"),
                              ("rerank_depth", (int,), "a whole number"),
                              ("expiry_days", (int,), "a whole number")):  # fmt: skip
        value = getattr(s, name)
        if isinstance(value, bool) or not isinstance(value, kinds):
            raise errors.InvalidArgument(f"settings.{name}", f"must be {what}")
    if s.default_recall_mode not in MODES:
        raise errors.InvalidArgument("settings.default_recall_mode", MODE.one_of())
    if not 0.0 <= s.dense_floor <= 1.0:
        raise errors.InvalidArgument("settings.dense_floor", "must lie in [0, 1]")
    if not 0 <= s.rerank_depth <= 100:
        raise errors.InvalidArgument("settings.rerank_depth", "must lie in [0, 100]")
    if not 0 <= s.expiry_days <= 36_500:
        raise errors.InvalidArgument("settings.expiry_days", "must lie in [0, 36500]; 0 is off")
    if not isinstance(s.members_may_edit, bool):
        raise errors.InvalidArgument("settings.members_may_edit", "must be true or false")


def _workspace(row: Any) -> Workspace:
    return Workspace(
        row[0], row[1], row[2], row[3], WorkspaceSettings.from_json(row[4]), row[5], bool(row[6])
    )


# The longest id or slug a call may name a workspace by (a slug is at most 63).
MAX_WORKSPACE_NAMED = 200

# Making a work mark: attempts, and the pause before the next (times the
# attempt), when the control database is busy or unreachable.
MARK_ATTEMPTS = 3
MARK_BACKOFF_SECONDS = 0.2

# Workspace records (location, settings) are cached for the store's
# settings_cache_seconds (RECALLATRON_SETTINGS_CACHE_SECONDS, 5 s), the setting
# that holds rank's copy of the settings too: recall reads dense_floor and
# expiry_days from this record, so a settings change made through another
# store replica is recalled with within that time, as rank's mode and rerank
# depth are.
# The most workspace records one process keeps (a few hundred bytes each);
# beyond it the oldest read are dropped first, and read again when next used.
WORKSPACE_CACHE_ENTRIES = 10_000


@dataclass
class ControlPlane(TokenRecords, MemberRecords, WorkspaceCreation):
    dbs: Databases
    # None: the store's settings_cache_seconds.
    cache_seconds: float | None = None
    _workspaces: ExpiringCache[str, Workspace] = field(init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    # Counts the records dropped: a record read while one was dropped is not
    # cached (it may be the very record a change just made stale).
    _dropped: int = 0

    def __post_init__(self) -> None:
        seconds = self.cache_seconds
        if seconds is None:
            seconds = self.dbs.settings.settings_cache_seconds
        self._workspaces = ExpiringCache(seconds, WORKSPACE_CACHE_ENTRIES)

    # -- named servers (docs/servers.md) ------------------------------------

    def servers(self) -> list[ServerStatus]:
        """Every configured server with its workspace count and drain mark;
        then every server the settings do not name that workspaces are
        still recorded on, marked not configured."""
        with self.dbs.control_conn() as conn:
            counts = {r[0]: int(r[1]) for r in conn.execute(q.WORKSPACES_PER_SERVER)}
            draining = {r[0] for r in conn.execute(q.DRAINING_SERVERS)}
        configured = self.dbs.servers.names
        unknown = sorted(set(counts) - set(configured))
        return [
            ServerStatus(n, counts.get(n, 0), n in draining, n == self.dbs.default_server)
            for n in configured
        ] + [ServerStatus(n, counts[n], n in draining, False, configured=False) for n in unknown]

    def choose_server(self, requested: str) -> str:
        """The named server, checked; or the placement policy's choice now
        (nothing reserved: a creation places itself afresh)."""
        return Placement(self.dbs).check(requested)

    def set_draining(self, server: str, draining: bool) -> None:
        Placement(self.dbs).set_draining(server, draining)

    def check_recorded_servers(self) -> None:
        """Every server a workspace records is named in settings: checked at
        start-up, so an unknown name fails there, not at the first call."""
        with self.dbs.control_conn() as conn:
            counts = {r[0]: int(r[1]) for r in conn.execute(q.WORKSPACES_PER_SERVER)}
        unknown = sorted(set(counts) - set(self.dbs.servers.names))
        if unknown:
            listed = ", ".join(f"{n!r} ({counts[n]} workspaces)" for n in unknown)
            raise RuntimeError(
                f"workspaces are recorded on servers the settings do not name: {listed}; "
                "configured: "
                + ", ".join(self.dbs.servers.names)
                + " (RECALLATRON_POSTGRES_SERVERS or RECALLATRON_POSTGRES_SERVERS_DIR)"
            )

    def caller_pool(self, caller: Caller) -> WorkspacePool:
        """The app role's pool of the caller's workspace database: every
        caller transaction runs on it (row-level security as the caller)."""
        ws = self.workspace(validation.uuid_str(caller.workspace_id, "caller.workspace_id"))
        if ws.importing:
            raise being_imported(ws, "workspace")
        return self.dbs.app_pool(ws.server, ws.database_name)

    def workspace(self, workspace_id: str, fresh: bool = False) -> Workspace:
        """The workspace's record, from the cache unless ``fresh`` (then read
        from the control plane, and cached again)."""
        cached = None if fresh else self._workspaces.get(workspace_id)
        if cached is not None:
            return cached
        with self._lock:
            dropped = self._dropped
        with self.dbs.control_conn() as conn:
            row = conn.execute(q.WORKSPACE_BY_ID, (workspace_id,)).fetchone()
        if row is None:
            self._workspaces.pop(workspace_id)
            raise errors.NotFound("workspace not found")
        ws = _workspace(row)
        with self._lock:
            # One being imported is read afresh until its import has ended.
            if self._dropped == dropped and not ws.importing:
                self._workspaces.put(workspace_id, ws)
        return ws

    def workspace_in_field(self, workspace_id: str, field_name: str) -> Workspace:
        """The record of the workspace a request's field names by id; its
        NOT_FOUND names the field, as every refusal of a field does."""
        try:
            return self.workspace(workspace_id)
        except errors.NotFound:
            raise errors.NotFound(f"{field_name}: workspace not found") from None

    def forget_workspace(self, workspace_id: str) -> None:
        """Drops the cached record (the workspace moved:
        services/store/infrastructure/follow.py)."""
        with self._lock:
            self._workspaces.pop(workspace_id)
            self._dropped += 1

    def follow_move(self, workspace_id: str) -> None:
        """The workspace moved (services/store/infrastructure/follow.py): its
        record goes, and so does what this process holds of its database on
        any server, its pools and its vector type (moved away and back, the
        database on the first server is made anew)."""
        self.forget_workspace(workspace_id)
        try:
            ws = self.workspace(workspace_id, fresh=True)
        except errors.DomainError:
            return  # gone meanwhile: the deletion's own notice closes its pools
        self.dbs.forget_database(ws.database_name)

    # -- work marks (services/store/infrastructure/work_marks.py) ---------------------------

    def mark_work(self, workspace_id: str) -> None:
        """After a write that queued background work has committed: the
        embedding job is woken for this workspace (and only this one). The
        job finds work by these marks only, so the mark is made whatever
        becomes of the call (its deadline passed, its client left), and tried
        again a few times; if it still cannot be made the caller hears
        UNAVAILABLE, and its retry (the same request id) marks again."""
        with deadline.detached():
            for attempt in range(1, MARK_ATTEMPTS + 1):
                try:
                    with self.dbs.control_conn() as conn:
                        conn.execute(q.MARK_WORK, (workspace_id,))
                    return
                except errors.Unavailable:
                    if attempt == MARK_ATTEMPTS:
                        raise
                    time.sleep(MARK_BACKOFF_SECONDS * attempt)

    def work_seq(self, workspace_id: str) -> int | None:
        with self.dbs.control_conn() as conn:
            row = conn.execute(q.WORK_SEQ, (workspace_id,)).fetchone()
        return int(row[0]) if row else None

    def clear_work(self, workspace_id: str, seq: int) -> bool:
        """Clears the mark ``seq``; False when a newer mark stands."""
        with self.dbs.control_conn() as conn:
            return conn.execute(q.CLEAR_WORK, (workspace_id, seq)).rowcount == 1

    # -- migration levels ----------------------------------------------------

    def migrate(self, ws: Workspace) -> list[str]:
        """Brings a workspace database to the current level and records it."""
        applied = self.dbs.migrate_workspace(ws.server, ws.database_name)
        with self.dbs.control_conn() as conn:
            conn.execute(q.SET_SCHEMA_VERSION, (migrate.latest_version("workspace"), ws.id))
        return applied

    def known_current(self) -> None:
        """Tells the databases which workspaces are recorded at the current
        level, so that none of them is visited before its first use."""
        with self.dbs.control_conn() as conn:
            rows = conn.execute(q.WORKSPACES_AT_VERSION, (migrate.latest_version("workspace"),))
            self.dbs.mark_migrated((str(r[0]), str(r[1])) for r in rows)

    def below_current(self) -> list[Workspace]:
        """The workspaces not recorded at the current level (to migrate)."""
        with self.dbs.control_conn() as conn:
            rows = conn.execute(q.WORKSPACES_BELOW_VERSION, (migrate.latest_version("workspace"),))
            return [_workspace(row) for row in rows]

    def all_workspace_locations(self) -> list[Workspace]:
        """Every workspace record, in one query (for a walk over all of them)."""
        with self.dbs.control_conn() as conn:
            return [_workspace(row) for row in conn.execute(q.ALL_WORKSPACES)]

    def all_workspaces(self) -> list[str]:
        with self.dbs.control_conn() as conn:
            return [str(r[0]) for r in conn.execute(q.ALL_WORKSPACE_IDS)]

    def update_settings(self, workspace_id: str, changes: dict[str, Any]) -> WorkspaceSettings:
        return self.change_settings(workspace_id, changes)[1]

    def change_settings(
        self, workspace_id: str, changes: dict[str, Any]
    ) -> tuple[WorkspaceSettings, WorkspaceSettings]:
        """The workspace's settings before and after ``changes``, merged into
        the record as the control plane holds it now, its row locked until the
        write commits: never into this process's cached copy (up to
        settings_cache_seconds old, so a change made through another replica
        would be written back over), and two changes at once are applied one
        after the other. Invalid settings raise before anything is written."""
        with self.dbs.control_conn() as conn:  # one transaction: the lock holds to the write
            row = conn.execute(q.WORKSPACE_SETTINGS_FOR_UPDATE, (workspace_id,)).fetchone()
            if row is None:
                raise errors.NotFound("workspace not found")
            before = WorkspaceSettings.from_json(row[0])
            after = WorkspaceSettings.from_json({**before.to_json(), **changes})
            validate_settings(after)
            conn.execute(q.UPDATE_WORKSPACE_SETTINGS, (Jsonb(after.to_json()), workspace_id))
        self.forget_workspace(workspace_id)
        return before, after

    def settings(self, workspace_id: str, fresh: bool = False) -> WorkspaceSettings:
        # A fresh read is not a drop: it must not keep other reads from caching.
        return self.workspace(workspace_id, fresh).settings

    def member(self, member_id: str) -> Member:
        with self.dbs.control_conn() as conn:
            row = conn.execute(q.MEMBER_BY_ID, (member_id,)).fetchone()
        if row is None:
            raise errors.NotFound("member not found")
        return Member(str(row[0]), str(row[1]), row[2], row[3], row[4])

    def workspace_named(
        self, given: str, field_name: str = "workspace", importing: bool = False
    ) -> Workspace:
        """A workspace by its id or its slug (an operator names either); one
        being imported is refused unless ``importing`` (its removal)."""
        if not given.strip():
            raise errors.InvalidArgument(field_name, "is required: the workspace's id or slug")
        if len(given) > MAX_WORKSPACE_NAMED or "\x00" in given:
            raise errors.InvalidArgument(
                field_name, f"at most {MAX_WORKSPACE_NAMED} characters, no NUL characters"
            )
        with self.dbs.control_conn() as conn:
            row = conn.execute(q.WORKSPACE_BY_ID_OR_SLUG, {"given": given}).fetchone()
            canonical = spelled_id(given)
            if row is None and canonical not in (None, given):
                # An id in another spelling (upper case, no hyphens), as
                # every field that takes only an id reads one.
                row = conn.execute(q.WORKSPACE_BY_ID_OR_SLUG, {"given": canonical}).fetchone()
        if row is None:
            raise errors.NotFound(f"{field_name}: no workspace {given!r}")
        ws = _workspace(row)
        if ws.importing and not importing:
            raise being_imported(ws, field_name)
        return ws

    def list_workspaces(
        self, page_size: int = 0, page_token: str = "", server: str = ""
    ) -> WorkspacePage:
        """Every workspace (or a server's), by slug, a page at a time; not one
        being imported."""
        limit = validation.count(page_size, "page_size", DEFAULT_WORKSPACE_PAGE, MAX_WORKSPACE_PAGE)
        if server and server not in self.dbs.servers.names:
            self.dbs.server_url(server)  # InvalidArgument naming the field
        after = ""
        if page_token:
            data = page_tokens.decode(page_token)
            given = data.get("after")
            if data.get("w") != "workspaces" or not isinstance(given, str) or "\x00" in given:
                raise errors.InvalidArgument("page_token", page_tokens.NOT_OURS)
            after = given
        with self.dbs.control_conn() as conn:
            rows = conn.execute(
                q.WORKSPACES_AFTER, {"after": after, "server": server, "limit": limit + 1}
            ).fetchall()
        listed = [ListedWorkspace(_workspace(r), int(r[7])) for r in rows[:limit]]
        if len(rows) <= limit:
            return WorkspacePage(listed, "")
        return WorkspacePage(
            listed, page_tokens.encode({"w": "workspaces", "after": listed[-1].workspace.slug})
        )

    def members(self, workspace_id: str, include_removed: bool = False) -> list[Member]:
        """The workspace's members, oldest first (removed ones when asked)."""
        with self.dbs.control_conn() as conn:
            rows = conn.execute(
                q.WORKSPACE_MEMBERS,
                {"workspace_id": workspace_id, "include_removed": include_removed},
            ).fetchall()
        return [Member(str(r[0]), str(r[1]), r[2], r[3], r[4], r[5]) for r in rows]

    def member_in_workspace(self, workspace_id: str, member_id: str, live: bool = False) -> bool:
        """Whether the member belongs to the workspace (``live``: and was not removed)."""
        query = q.LIVE_MEMBER if live else q.MEMBER_IN_WORKSPACE
        with self.dbs.control_conn() as conn:
            return conn.execute(query, (member_id, workspace_id)).fetchone() is not None
