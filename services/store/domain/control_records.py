"""The control plane's records (design §3): a workspace with its settings and
where its database lives, a named server's state, a member, a page of
workspaces, and the identity a token authenticates. Plain values; the
control plane (control.py, token_records.py) reads and writes them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from recallatron.vocabulary import DEFAULT_MODE


@dataclass(frozen=True)
class WorkspaceSettings:
    default_recall_mode: str = DEFAULT_MODE
    dense_floor: float = 0.30
    rerank_depth: int = 20
    expiry_days: int = 0  # off
    # Who may change a memory: False, its author and the owners; True, also
    # any member who can see it when its audience is the workspace.
    members_may_edit: bool = False

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> WorkspaceSettings:
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        return cls(**known)

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Workspace:
    id: str
    slug: str
    server: str
    database_name: str
    settings: WorkspaceSettings
    created_at: datetime
    # Being made by an import that has not ended (or was killed): served to
    # nobody (docs/export.md).
    importing: bool = False


@dataclass(frozen=True)
class ServerStatus:
    name: str
    workspaces: int
    draining: bool
    default: bool
    # False: workspaces are recorded on a server the settings no longer
    # name (the store refuses to start until they do).
    configured: bool = True


@dataclass(frozen=True)
class Member:
    id: str
    workspace_id: str
    handle: str
    role: str
    created_at: datetime
    removed_at: datetime | None = None


@dataclass(frozen=True)
class ListedWorkspace:
    workspace: Workspace
    # Members not removed.
    members: int


@dataclass(frozen=True)
class WorkspacePage:
    workspaces: list[ListedWorkspace]
    # Empty after the last page.
    next_page_token: str


@dataclass(frozen=True)
class Identity:
    workspace_id: str
    workspace_slug: str
    member_id: str
    role: str
    # The token's scope: its purposes (empty: all) and read-only.
    purposes: tuple[str, ...] = ()
    read_only: bool = False
    # None: the token never expires.
    expires_at: datetime | None = None
    member_handle: str = ""
