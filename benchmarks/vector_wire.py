"""What the query vector costs in Python on its way embed -> rank -> store
(docs/benchmarks.md, "The query vector on the wire"): as `repeated float`
(the services before the packed fields), as built (packed bytes, with the
floats rank still sends for a store of the previous version), and as the next
release may send it (the bytes alone). With --job, the embedding job's
batch instead: embed's answer of 32 vectors, then the job's reading of it up
to the arrays pgvector is given (docs/benchmarks.md, "The write path").

    python -m benchmarks.vector_wire [--rounds 20000] [--before 4b2940f]
    python -m benchmarks.vector_wire --job [--rounds 2000] [--before 01e8d83]

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


class _Stub:
    """The embed stub as the job calls it: the answer embed's servicer
    serialised for the request sent, parsed (the call's own cost left out)."""

    def __init__(self, servicer: EmbedServicer) -> None:
        self.servicer = servicer
        self.answers: dict[bytes, bytes] = {}

    def Embed(self, request: Any, timeout: Any = None) -> Any:
        sent = request.SerializeToString()
        if sent not in self.answers:
            self.answers[sent] = self.servicer.Embed(request, None).SerializeToString()  # type: ignore[arg-type]
        return embed_pb2.EmbedResponse.FromString(self.answers[sent])


def job(rounds: int, batch: int = 32) -> dict[str, Any]:
    """The embedding job's batch with the code importable here: embed's
    answer built and serialised (as the job asks it), and the job's
    Embedder reading it and each vector checked and made pgvector's form."""
    from services.embedding_job.embedder import Embedder
    from services.embedding_job.vectors import binary, unfit

    rows = np.random.default_rng(1).random((batch, VECTOR_DIMENSIONS), dtype=np.float32)
    models = _Models(rows[0])
    models.rows = rows
    servicer = EmbedServicer(models)  # type: ignore[arg-type]
    embedder = Embedder.__new__(Embedder)
    stub = _Stub(servicer)
    embedder.stub = stub  # type: ignore[assignment]
    embedder.timeout = 1.0
    texts = [f"memory {i}" for i in range(batch)]

    def read() -> None:
        for vector in embedder.embed(texts)[1]:
            unfit(vector)
            binary(vector)

    read()
    (sent,) = stub.answers
    request = embed_pb2.EmbedRequest.FromString(sent)
    found: dict[str, Any] = {
        "embed": _per_call(lambda: servicer.Embed(request, None).SerializeToString(), rounds),  # type: ignore[arg-type]
        "job": _per_call(read, rounds),
    }
    found["sum"] = found["embed"] + found["job"]
    found["bytes"] = {"embed answer": len(stub.answers[sent])}
    return found


def before(rev: str, rounds: int, mode: str = "") -> dict[str, Any]:
    """The hops with the code of ``rev``: this file run in a copy of its tree."""
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(
            ["git", "archive", rev], cwd=REPO, capture_output=True, check=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        shutil.copy(Path(__file__), Path(tmp, "benchmarks", "vector_wire.py"))
        out = subprocess.run(
            [
                sys.executable,
                *("-m", "benchmarks.vector_wire", "--rounds", str(rounds), "--here"),
                *((mode,) if mode else ()),
            ],
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
    parser.add_argument("--rounds", type=int, default=0, help="20000; 2000 with --job")
    parser.add_argument("--before", default="", help="the revision before (4b2940f; 01e8d83)")
    parser.add_argument("--here", action="store_true", help="only the code importable here")
    parser.add_argument("--job", action="store_true", help="the embedding job's batch")
    args = parser.parse_args(argv)
    if args.job:
        rounds = args.rounds or 2000
        if args.here:
            print(json.dumps(_rounded(job(rounds))))
            return 0
        # 01e8d83: the job's last revision reading the floats as lists.
        rev = args.before or "01e8d83"
        found = {f"floats ({rev})": _rounded(before(rev, rounds, "--job"))}
        found["as built (packed bytes)"] = _rounded(job(rounds))
        print(json.dumps(found, indent=2))
        return 0
    args.rounds = args.rounds or 20000
    args.before = args.before or "4b2940f"
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
