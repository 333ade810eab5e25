"""ReviewService: dedup pairs and entity pairs for a person to decide on
(design §8.1, §8.5). For dedup pairs the store
finds the pairs under the caller's eligibility; here they are filled in with
the full memories (read under the same caller), so a pair never carries a
memory the caller may not see. Nothing is merged here: supersede and forget
go through MemoryService."""

from __future__ import annotations

from collections.abc import Sequence

import grpc

from recallatron import errors
from recallatron.size_budget import Budget
from recallatron.v1 import common_pb2 as cpb
from recallatron.v1 import gateway_pb2 as pb
from recallatron.v1 import store_pb2
from recallatron.vocabulary import ANSWER_BUDGET_BYTES
from services.gateway import peers as calls
from services.gateway.server import Forwarding, caller

# design §8.1: pairs at cosine >= 0.80 among at most the 500 newest memories.
WINDOW = 500
MIN_COSINE = 0.80
DEFAULT_PAIRS = 50
MAX_PAIRS = 200
# The store reads at most this many ids per call.
READ_CHUNK = 100


# The decisions and the entity merge (design §8.5): the store decides what the
# caller may see and that only an owner decides; these calls are forwarded.
class ReviewServicer(Forwarding):
    def WhoAmI(self, request: pb.WhoAmIRequest, context: grpc.ServicerContext) -> pb.WhoAmIResponse:
        # What authenticating the token already told: no further store call.
        ident = self.auth.member(context)
        return pb.WhoAmIResponse(
            workspace_id=ident.workspace_id,
            workspace_slug=ident.workspace_slug,
            member_id=ident.member_id,
            member_handle=ident.member_handle,
            role=ident.role,
        )

    def ListDuplicatePairs(
        self, request: pb.ListDuplicatePairsRequest, context: grpc.ServicerContext
    ) -> pb.ListDuplicatePairsResponse:
        ident = self.auth.member(context)
        if not 0 <= request.limit <= MAX_PAIRS:
            raise errors.InvalidArgument(
                "limit", f"must lie in [0, {MAX_PAIRS}]; 0 is the default, {DEFAULT_PAIRS}"
            )
        who = caller(ident, request.purpose)
        found = self.peers.store.call(
            calls.LIST_DUPLICATE_PAIRS,
            store_pb2.StoreServiceListDuplicatePairsRequest(
                caller=who,
                window=WINDOW,
                min_cosine=MIN_COSINE,
                limit=request.limit or DEFAULT_PAIRS,
            ),
            self.peers.member(who, calls.LIST_DUPLICATE_PAIRS.path),
        )
        return self._filled(who, found.pairs, found.more)

    def _filled(
        self, who: cpb.Caller, pairs: Sequence[store_pb2.StoreDuplicatePair], more: bool
    ) -> pb.ListDuplicatePairsResponse:
        """The pairs with their memories, best first, as many as fit the
        answer's size budget (at least one): memories are read in the pairs'
        order, a chunk at a time, and reading stops once the budget is spent.
        ``more``: the store's limit cut the list (said as a budget cut is)."""
        pending = list(dict.fromkeys(i for p in pairs for i in (p.first_id, p.second_id)))
        memories: dict[str, cpb.Memory] = {}
        out = pb.ListDuplicatePairsResponse(more=more)
        page, shown = Budget(ANSWER_BUDGET_BYTES), 0
        while shown < len(pairs):
            if pending:
                resp = self.peers.store.call(
                    calls.GET_MEMORIES,
                    store_pb2.GetMemoriesRequest(
                        caller=who, ids=pending[:READ_CHUNK], with_provenance=True
                    ),
                    self.peers.member(who, calls.GET_MEMORIES.path),
                )
                memories.update((m.id, m) for m in resp.memories)
                pending = list(resp.more_ids) + pending[READ_CHUNK:]
            unread = set(pending)
            for p in pairs[shown:]:
                if p.first_id in unread or p.second_id in unread:
                    break
                shown += 1
                # A memory changed (forgotten, superseded) between the two
                # reads leaves its pair out rather than half-filled.
                if p.first_id not in memories or p.second_id not in memories:
                    continue
                pair = pb.DuplicatePair(
                    first=memories[p.first_id], second=memories[p.second_id], cosine=p.cosine
                )
                if not page.takes(pair.ByteSize()):
                    out.more = True
                    return out
                out.pairs.append(pair)
        return out
