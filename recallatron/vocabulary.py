"""One vocabulary for every layer: the plain names the domain code, the
database, the CLI, the review page and the agent-facing JSON use for the proto
enums (`KIND_NOTE` <-> "note"), derived from the generated enums so a new value
in the .proto reaches them all; and the limits the servers check, which the
tool schemas (recallatron.tools) state from the same constants.

The workspace database declares the same names as Postgres enum types
(migration 0001); tests/unit/test_vocabulary.py checks they agree."""

from __future__ import annotations

from typing import TYPE_CHECKING, Generic, TypeVar, cast

from recallatron import errors
from recallatron.v1 import common_pb2 as cpb

if TYPE_CHECKING:
    # Only in the stubs (types-protobuf): the metaclass of every generated enum,
    # generic in its ValueType (a NewType of int per enum).
    from google.protobuf.internal.enum_type_wrapper import _EnumTypeWrapper

_V = TypeVar("_V", bound=int)


class Terms(Generic[_V]):
    """One proto enum as lowercase names without the prefix, in declaration
    order, UNSPECIFIED left out. ``value`` gives the enum's own ValueType, so a
    message field of that enum takes it as is."""

    def __init__(self, enum: _EnumTypeWrapper[_V], prefix: str) -> None:
        self.enum = enum
        self.prefix = prefix
        self.values: dict[str, _V] = {
            str(name).removeprefix(prefix).lower(): number
            for name, number in enum.items()
            if not str(name).endswith("_UNSPECIFIED")
        }
        self.names: tuple[str, ...] = tuple(self.values)

    def value(self, name: str) -> _V:
        """The enum number of a name of this vocabulary (KeyError otherwise)."""
        return self.values[name]

    def name(self, value: int) -> str:
        """For display: 'unspecified' for 0, the number itself for a value this
        build does not know (a newer peer), never an exception."""
        try:
            # Any int: a number outside the enum is the ValueError below.
            return str(self.enum.Name(cast(_V, value))).removeprefix(self.prefix).lower()
        except ValueError:
            return str(value)

    def parse(self, value: int, field: str) -> str | None:
        """A request's enum field: None for UNSPECIFIED, InvalidArgument naming
        ``field`` for a number outside the enum."""
        if value == 0:
            return None
        for name, number in self.values.items():
            if number == value:
                return name
        raise errors.InvalidArgument(field, f"unknown value {value}")

    def one_of(self) -> str:
        """'a, b or c', for error messages."""
        *rest, last = self.names
        return f"{', '.join(rest)} or {last}" if rest else last


KIND = Terms(cpb.Kind, "KIND_")
ORIGIN = Terms(cpb.Origin, "ORIGIN_")
PURPOSE = Terms(cpb.Purpose, "PURPOSE_")
LINK_KIND = Terms(cpb.LinkKind, "LINK_KIND_")
MODE = Terms(cpb.RecallMode, "RECALL_MODE_")
ROLE = Terms(cpb.Role, "ROLE_")
REVISION_ACTION = Terms(cpb.RevisionAction, "REVISION_ACTION_")

KINDS = KIND.names
PURPOSES = PURPOSE.names
MODES = MODE.names

# A caller that names no purpose acts for this one; a new memory given no
# purposes is stored for it.
DEFAULT_PURPOSE = "assist"
# The purposes the owner's imported conversation turns (history) answer:
# evidence of what was said serves a conversation and its review, not an
# agent acting on systems (automate) or tailoring (personalize).
HISTORY_PURPOSES = ("assist", "audit")
# Recall mode when neither the request nor the workspace settings name one.
DEFAULT_MODE = "hybrid"

# The bi-encoder's vectors (all-MiniLM-L6-v2): what the store's vector columns
# and the dense arm's query take.
VECTOR_DIMENSIONS = 384

# -- limits: checked by the servers, stated in the tool schemas -----------------

MAX_TITLE = 300
MAX_BODY = 20_000
MAX_REASON = 1_000
MAX_REQUEST_ID = 128
MAX_ENTITY_NAME = 200
MAX_MENTIONS = 50
# about_ids of remember, source_ids of derive.
MAX_LINKS = 50
MAX_READ_IDS = 100
# A memory's provenance grows over its life (each correct may add mentions and
# retire claims, each change a revision): an answer lists at most this many
# items of each list per memory, and marks what it left out.
MAX_PROVENANCE_ITEMS = 100
# What the memories of one answer (read, recall) may take on the wire: half the
# default gRPC message limit, room left for the rest of the answer and for
# JSON's growth over HTTP and MCP. Past it, read leaves memories to another
# call (more_ids) and recall leaves out their provenance; one memory is always
# answered whole (its lists capped as above, it stays well under the limit).
ANSWER_BUDGET_BYTES = 4 * 1024 * 1024
# What each part beside recall's memories (the entity cards, the history
# evidence) may take: with the memories' budget the whole answer stays well
# under the message limit. Past it, cards are named for lookup and history
# entries counted as left out.
BESIDE_BUDGET_BYTES = 1024 * 1024
MAX_QUERY_CHARS = 2_000
# Recall's filters.mention_entity_ids: the entities one recall may be
# restricted to.
MAX_FILTER_ENTITIES = 50
MAX_RECALL_LIMIT = 50
DEFAULT_RECALL_LIMIT = 10
# Recall's limit as every surface states it: 0 (the proto's default, a field
# left out) asks for the default, so a refusal must not call 0 out of range.
RECALL_LIMIT_RULE = (
    f"must be 0 (the default, {DEFAULT_RECALL_LIMIT}) or lie in [1, {MAX_RECALL_LIMIT}]"
)
# One captured conversation turn.
MAX_TURN_CHARS = 20_000
# A history turn (an old conversation turn; the legacy migration is history's
# only writer): one whose chat id, role or text is longer is skipped, not cut
# (services/store/legacy/plan_items.py), and an archive holds none longer
# (services/store/domain/archive_history.py, archive_plan.py).
MAX_HISTORY_CHAT_ID = 256
MAX_HISTORY_ROLE = 64
MAX_HISTORY_TEXT = 200_000
# Recall's episode neighbours (docs/recall.md, "Episode neighbours"): a row
# recorded next to one of the first rows (its seed) in its episode gains
# WEIGHT * c ** POWER times an arm's reciprocal rank, at its rank in the list
# of such neighbours, c being the seed's agreement as a share of the most
# there is: a seed both arms place best lends its context the weight of two
# arms' first rank, one the arms half agree on an eighth of that. The walk
# finds neighbours for at most MAX_EPISODE_SEEDS first rows.
EPISODE_NEIGHBOUR_WEIGHT = 2.0
EPISODE_SEED_POWER = 3.0
MAX_EPISODE_SEEDS = 10

# The permission walk's limit (design §5.5): candidates per walk, each one
# row read (docs/recall.md, "Recall at scale"); rank's arms return at most
# half of it each, so the fused list is walked whole.
MAX_WALK = 500

# -- the graph (design §3, §7) ---------------------------------------------------

# Attribute names, predicates and entity types: an open vocabulary of
# identifiers (a lowercase letter, then lowercase letters, digits or "_").
IDENTIFIER_PATTERN = r"^[a-z][a-z0-9_]*$"
MAX_IDENTIFIER = 64
MAX_CLAIM_VALUE = 2_000
# Per write: attribute claims, relation claims, aliases.
MAX_CLAIMS = 100
MAX_RELATIONS = 100
MAX_ALIASES = 20
# Lookup: entities of one name, and items per list of an entity's card.
MAX_LOOKUP_ENTITIES = 20
MAX_CARD_ITEMS = 200
# Recall: entity cards for names a query contains, and the longest name (in
# words) looked for.
MAX_RECALL_ENTITIES = 5
MAX_NAME_WORDS = 6
# Recall: the memories without a vector yet are counted up to this many (a
# count that stops early stays cheap however far the embedding job is behind).
MAX_NOT_EMBEDDED_COUNTED = 1_000
# Neighbors: hops, and the most nodes and edges one answer carries.
MAX_HOPS = 3
MAX_NEIGHBOR_NODES = 200
MAX_NEIGHBOR_EDGES = 500
# Timeline: events per page.
MAX_TIMELINE_EVENTS = 100
# Entity merge (design §8.5): the most entities one merged group may hold,
# and why a pair of entities is proposed.
MAX_ENTITY_GROUP = 20
ENTITY_PAIR_REASONS = ("same_name", "same_alias", "name_prefix", "close_context")
# What the store's authentication says of an expired token, and of a revoked
# one or a removed member's (never whose it was), and what the gateway
# recognises them by.
TOKEN_EXPIRED = "token expired"
TOKEN_REVOKED = "token revoked"

# An owner's view (ListMemories, ListAuditEvents): page sizes, default and most.
DEFAULT_LIST_PAGE = 50
MAX_LIST_PAGE = 100
MAX_AUDIT_PAGE = 200
# The operator's list of workspaces: page sizes, default and most.
DEFAULT_WORKSPACE_PAGE = 100
MAX_WORKSPACE_PAGE = 1000
# A workspace's members (ListMembers): the most a page. A request without a
# page size (a caller from before paging) gets every member in one answer,
# within ANSWER_BUDGET_BYTES, or a refusal naming page_size: never a list cut
# short that the caller could not tell from a whole one.
MAX_MEMBER_PAGE = 1000
# A token listing (ListTokens): the most a page, and a page given a page token
# without a size. A request without either (a caller from before paging) gets
# the whole list, or a refusal naming page_size when its live tokens pass
# 1,000 (never a list that leaves a live token out).
MAX_TOKEN_PAGE = 1000
# Actions named in one audit filter.
MAX_AUDIT_ACTIONS = 20

# The actions a workspace's audit log holds, each written by the store: the
# memory writes, the owners' decisions on pairs and entities, a member's
# removal, the control plane's changes to the workspace, and the legacy
# import. An audit filter names only these (tests/unit/test_audit_actions.py
# checks that every action the code writes is here).
AUDIT_ACTIONS = (
    "remember",
    "derive",
    "correct",
    "supersede",
    "forget",
    "dismiss_pair",
    "merge_entities",
    "keep_entities_apart",
    "undo_entity_merge",
    "remove_member",
    "create_member",
    "create_token",
    "rotate_token",
    "revoke_token",
    "update_settings",
    "migrate",
)


def request_id_fault(value: str) -> str | None:
    """What is wrong with a client's request id, or None: the one rule the
    gateway (capture) and the store (every write) both check. Whether one is
    required is the caller's to say."""
    if len(value) > MAX_REQUEST_ID or not value.isprintable():
        return f"at most {MAX_REQUEST_ID} printable characters"
    return None


def handle_key(handle: str) -> str:
    """What a handle is one by in a workspace, in any case: lower case, as the
    control plane keys and finds it (``lower(handle)``, control migration
    0015). A handle is ASCII, where that and Python's agree; a name with
    other characters is no handle, and none of them folds (the Kelvin sign
    stays no 'k')."""
    return handle.lower() if handle.isascii() else handle
