"""Bases of the domain services that act in workspaces: the control plane
finds each workspace's database; a caller's transaction runs as the caller,
so row-level security shows it what it may see and nothing else."""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager

import psycopg

from services.store.domain.control import ControlPlane
from services.store.infrastructure.db import Caller, Databases, caller_transaction


class InWorkspaces:
    """A service that works inside callers' transactions only."""

    def __init__(self, control: ControlPlane) -> None:
        self.control = control

    def transaction(
        self, caller: Caller, settings: Mapping[str, str] | None = None
    ) -> AbstractContextManager[psycopg.Connection]:
        """A transaction as ``caller`` in its workspace's database (``settings``:
        more transaction-local settings, as caller_transaction takes them)."""
        return caller_transaction(self.control.caller_pool(caller), caller, settings)


class OnWorkspaces(InWorkspaces):
    """One that also opens workspace databases itself (owner role, several
    workspaces, a database's removal)."""

    def __init__(self, dbs: Databases, control: ControlPlane) -> None:
        super().__init__(control)
        self.dbs = dbs
