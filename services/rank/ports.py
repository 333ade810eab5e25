"""What the recall pipeline needs from its peers (design §5): the store's two
arms, settings and permission walk, and the embed service's query vector and
cross-encoder, as two small interfaces (:class:`StorePort`,
:class:`EmbedPort`) whose gRPC adapters live in :mod:`services.rank.peers`."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import numpy as np

from recallatron.candidates import Candidate as Candidate
from recallatron.vocabulary import DEFAULT_MODE


@dataclass(frozen=True)
class DenseArm:
    candidates: list[Candidate]
    # False when the workspace holds no vectors of the current model and
    # embed-input version.
    embeddings_available: bool
    # The cosine floor the arm applied: where its scale starts (0 for a store
    # that did not say).
    floor: float = 0.0
    # Memories the caller may see with no vector yet, which the arm cannot
    # find: counted up to MAX_NOT_EMBEDDED_COUNTED (0 for a store that did
    # not say).
    not_embedded: int = 0


@dataclass(frozen=True)
class QueryVector:
    model_id: str
    # Float32, as the embed service answered it: passed on, never a list.
    values: np.ndarray


@dataclass(frozen=True)
class WorkspaceSettings:
    default_recall_mode: str = DEFAULT_MODE
    rerank_depth: int = 20


class Degraded(Exception):
    """A peer could not serve one part of a recall. ``kind`` is a short metric
    label (``unavailable``, ``timeout``, ``absent``, ``failed``); the message
    says why in words an operator understands."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


class Passage(Protocol):
    """A hydrated memory as far as the pipeline cares: its text."""

    @property
    def title(self) -> str: ...

    @property
    def body(self) -> str: ...


@dataclass(frozen=True)
class Beside:
    """A part beside the ranked memories as the store answered it: the items
    that fit the answer's size budget, the entities whose cards were left out
    for it (looked up by name, they answer them) and how many other items
    were."""

    items: Sequence[Any]
    more_entities: Sequence[Any] = ()
    left_out: int = 0


M = TypeVar("M", bound=Passage)
M_co = TypeVar("M_co", bound=Passage, covariant=True)


@dataclass(frozen=True)
class Walked(Generic[M_co]):
    # The admitted ids, in the order given.
    admitted: list[str]
    # The first admitted memories (and the neighbours past them), by id.
    memories: Mapping[str, M_co]
    # Episode neighbours of the first admitted rows (seed id, neighbour id),
    # admitted rows only, seed by seed, the one before first.
    neighbours: Sequence[tuple[str, str]] = ()


class StorePort(Protocol[M_co]):
    """The store calls of one recall. ``caller`` and ``filters`` are passed
    through untouched; ``timeout`` (seconds) caps the call's own deadline when
    the recall's deadline is nearer. Errors other than the dense arm's are the
    caller's problem (a recall cannot answer without the store); the dense arm
    raises :class:`Degraded`."""

    def settings(self, workspace_id: str, timeout: float | None = None) -> WorkspaceSettings: ...

    def lexical(
        self, caller: Any, query: str, limit: int, filters: Any, timeout: float | None = None
    ) -> list[Candidate]: ...

    def dense(
        self,
        caller: Any,
        vector: QueryVector,
        limit: int,
        filters: Any,
        timeout: float | None = None,
        words: str = "",
    ) -> DenseArm:
        """The dense arm; ``words`` (the query, when the lexical arm does not
        run) asks which rows hold every term of it."""
        ...

    def walk(
        self,
        caller: Any,
        ids: Sequence[str],
        hydrate: int,
        filters: Any,
        timeout: float | None = None,
        neighbours_of: int = 0,
    ) -> Walked[M_co]:
        """The permission walk over ``ids``, and the first ``hydrate``
        admitted memories (with provenance), in one snapshot: what it refuses
        (no longer visible, superseded unless ``filters`` ask for those) is
        not answered, whatever the arms saw. With ``neighbours_of`` n, also
        the admitted episode neighbours of the first n admitted rows, read
        with them."""
        ...

    def entity_cards(
        self, caller: Any, text: str, timeout: float | None = None
    ) -> Callable[[], Sequence[Any] | Beside]:
        """Starts reading the cards of the entities ``text`` names, as the
        caller may see them; the callable returned waits for them (with the
        entities left out, when it says) and raises :class:`Degraded` when the
        store cannot give them."""
        ...

    def history(
        self, caller: Any, query: str, limit: int, timeout: float | None = None
    ) -> Callable[[], Sequence[Any] | Beside]:
        """Starts the owner's history search for ``query`` (the store answers
        nobody else); the callable returned waits for its entries (with how
        many were left out, when it says)."""
        ...


class EmbedPort(Protocol):
    """Raise :class:`Degraded` when the embed service cannot answer."""

    def embed_query(self, text: str, timeout: float | None = None) -> QueryVector: ...

    def rerank(
        self, query: str, passages: Sequence[str], timeout: float | None = None
    ) -> list[float]: ...
