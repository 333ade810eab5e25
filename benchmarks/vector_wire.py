"""What the query vector costs in Python on its way embed -> rank -> store
(docs/benchmarks.md, "The query vector on the wire"): as `repeated float`
(the services before the packed fields), as built (packed bytes, with the
floats rank still sends for a store of the previous version), and as the next
release may send it (the bytes alone).

    python -m benchmarks.vector_wire [--rounds 20000] [--before 4b2940f]

Each hop runs the services' own code where it can and counts each
message's parsing and serialising: embed builds and serialises its answer
(its servicer, with the model's output given); rank parses it, reads the
vector and builds and serialises the store's request (its peer adapters,
the call itself left out); the store parses that and makes the numpy array
pgvector is given. The `repeated float` way is the code of --before, this
file run in a `git archive` of it. Prints microseconds per recall for each
hop and way, their sum, and the bytes of the two messages."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import timeit
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

import grpc
import numpy as np

from recallatron.v1 import common_pb2, embed_pb2, store_pb2
from recallatron.vocabulary import VECTOR_DIMENSIONS
from services.embed.server import EmbedServicer
from services.rank import peers

REPO = Path(__file__).resolve().parents[1]


def _per_call(fn: Callable[[], object], rounds: int) -> float:
    return min(timeit.repeat(fn, number=rounds, repeat=5)) / rounds * 1e6


@dataclass
class _Model:
    model_id: str = "bench-model"
    dimensions: int = VECTOR_DIMENSIONS


class _Models:
    """The embed servicer's models, answering a fixed vector."""

    def __init__(self, vector: np.ndarray) -> None:
        self.rows = vector.reshape(1, -1)

    def embed(self, texts: Any, queries: bool = False) -> tuple[_Model, np.ndarray]:
        return _Model(), self.rows


class _Wire:
    """A peer whose call serialises the request (kept as what went out) and
    answers ``answer``'s bytes parsed: the call's own cost left out."""

    def __init__(self, answer: bytes = b"") -> None:
        self.answer = answer
        self.sent = b""

    def raw(self, m: Any, request: Any, assertion: str = "", timeout: Any = None) -> Any:
        self.sent = request.SerializeToString()
        return m.response_type.FromString(self.answer)

    def limit(self, timeout: float | None) -> float:
        return 1.0


def _packed_fields() -> bool:
    return "packed" in embed_pb2.EmbedRequest.DESCRIPTOR.fields_by_name


def _store_reads(sent: bytes) -> Callable[[], object]:
    """The store's servicer and arm, up to the array pgvector is given."""
    if not _packed_fields():
        # Before the packed fields: a list, then the arm's array.
        return lambda: np.asarray(
            list(store_pb2.DenseCandidatesRequest.FromString(sent).vector), dtype=np.float32
        )
    from recallatron import packed_vectors

    def read() -> object:
        request = store_pb2.DenseCandidatesRequest.FromString(sent)
        return packed_vectors.unpack(request.vector_packed, request.vector, "vector_packed")

    return read


def hops(rounds: int, older_caller: bool = False) -> dict[str, Any]:
    """The three hops with the code importable here; ``older_caller``:
    embed's answer as a caller that does not ask packed gets it."""
    vector = np.random.default_rng(1).random(VECTOR_DIMENSIONS, dtype=np.float32)
    servicer = EmbedServicer(_Models(vector))  # type: ignore[arg-type]
    request = embed_pb2.EmbedRequest(texts=["q"], queries=True)
    if _packed_fields() and not older_caller:
        request.packed = True  # as the rank here asks
    answer = servicer.Embed(request, None).SerializeToString()  # type: ignore[arg-type]
    channel = grpc.insecure_channel("127.0.0.1:9")
    embed = peers.EmbedClient(channel, 1.0, 1.0)
    embed.embedder = _Wire(answer)  # type: ignore[assignment]
    store = peers.StoreClient(channel, 1.0)
    wire = _Wire(store_pb2.DenseCandidatesResponse().SerializeToString())
    store.peer = wire  # type: ignore[assignment]
    caller, filters = common_pb2.Caller(), common_pb2.RecallFilters()

    def rank() -> None:
        store.dense(caller, embed.embed_query("q"), 50, filters)

    rank()
    found: dict[str, Any] = {
        "embed": _per_call(lambda: servicer.Embed(request, None).SerializeToString(), rounds),  # type: ignore[arg-type]
        "rank": _per_call(rank, rounds),
        "store": _per_call(_store_reads(wire.sent), rounds),
    }
    found["sum"] = found["embed"] + found["rank"] + found["store"]
    found["bytes"] = {"embed answer": len(answer), "store request": len(wire.sent)}
    return found


def before(rev: str, rounds: int) -> dict[str, Any]:
    """The hops with the code of ``rev``: this file run in a copy of its tree."""
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(
            ["git", "archive", rev], cwd=REPO, capture_output=True, check=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        shutil.copy(Path(__file__), Path(tmp, "benchmarks", "vector_wire.py"))
        out = subprocess.run(
            [sys.executable, "-m", "benchmarks.vector_wire", "--rounds", str(rounds), "--here"],
            cwd=tmp,
            env={**os.environ, "PYTHONPATH": tmp},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    found: dict[str, Any] = json.loads(out)
    return found


def _rounded(found: dict[str, Any]) -> dict[str, Any]:
    return {k: v if k == "bytes" else round(v, 2) for k, v in found.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20000)
    parser.add_argument("--before", default="4b2940f", help="the revision before the fields")
    parser.add_argument("--here", action="store_true", help="only the code importable here")
    args = parser.parse_args(argv)
    if args.here:
        print(json.dumps(_rounded(hops(args.rounds))))
        return 0
    from recallatron import packed_vectors

    result = {f"repeated float ({args.before})": _rounded(before(args.before, args.rounds))}
    result["as built (bytes; the floats beside them to the store)"] = _rounded(hops(args.rounds))
    # The next release: no floats for a store of the previous version.
    with mock.patch.object(packed_vectors, "fill_floats", lambda *a: None):
        result["bytes alone (the next release)"] = _rounded(hops(args.rounds))
    result["as built, embed asked for the floats (as an older caller asks)"] = _rounded(
        hops(args.rounds, older_caller=True)
    )
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
