"""What the query vector costs in Python on its way embed -> rank -> store as
`repeated float` (the messages as they are), against the same 384 float32s
as packed bytes read with numpy (docs/benchmarks.md, "The query vector on the
wire").

    python -m benchmarks.vector_wire [--rounds 20000]

Each hop is timed as the services do it: embed builds and serialises its
answer; rank parses it, takes the values and builds the store's request;
the store parses that and makes the numpy array pgvector is given. Prints
microseconds per recall for each hop and way, and their sum."""

from __future__ import annotations

import argparse
import json
import timeit
from collections.abc import Callable

import numpy as np

from recallatron.v1 import embed_pb2, store_pb2


def _per_call(fn: Callable[[], object], rounds: int) -> float:
    return min(timeit.repeat(fn, number=rounds, repeat=3)) / rounds * 1e6


def measure(rounds: int) -> dict[str, dict[str, float]]:
    vector = np.random.default_rng(1).random(384, dtype=np.float32)
    floats = embed_pb2.EmbedResponse(vectors=[embed_pb2.Vector(values=vector.tolist())])
    embed_answer = floats.SerializeToString()
    store_request = store_pb2.DenseCandidatesRequest(vector=vector.tolist()).SerializeToString()
    packed = vector.tobytes()

    def rank_floats() -> bytes:
        values = list(embed_pb2.EmbedResponse.FromString(embed_answer).vectors[0].values)
        return store_pb2.DenseCandidatesRequest(vector=values).SerializeToString()

    def store_floats() -> object:
        request = store_pb2.DenseCandidatesRequest.FromString(store_request)
        return np.asarray(request.vector, dtype=np.float32)

    hops = {
        "repeated float": {
            "embed": _per_call(
                lambda: embed_pb2.EmbedResponse(
                    vectors=[embed_pb2.Vector(values=vector.tolist())]
                ).SerializeToString(),
                rounds,
            ),
            "rank": _per_call(rank_floats, rounds),
            "store": _per_call(store_floats, rounds),
        },
        # Bytes pass through rank untouched; only the ends convert.
        "packed bytes": {
            "embed": _per_call(lambda: vector.astype("<f4").tobytes(), rounds),
            "rank": 0.0,
            "store": _per_call(lambda: np.frombuffer(packed, dtype="<f4"), rounds),
        },
    }
    for way in hops.values():
        way["sum"] = sum(way.values())
    return hops


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20000)
    args = parser.parse_args(argv)
    result = {
        way: {hop: round(us, 2) for hop, us in hops.items()}
        for way, hops in measure(args.rounds).items()
    }
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
