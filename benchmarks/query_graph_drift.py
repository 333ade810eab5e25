"""What the bi-encoder's query graph (services/embed/export.py,
quantize_for_queries) costs besides time: its drift from the exact graph over
varied texts, and the resident memory it adds. Not a test: prints how many
texts take the query graph and the lowest cosine between the two graphs'
vectors over them, then the resident memory (VmRSS) of a process holding the
bi-encoder with both graphs and with the exact one alone, each read in a fresh
process once its graphs are loaded and a 64-text batch has run.

    python -m benchmarks.query_graph_drift [--queries 400] [--memories 400]

Texts: `recallatron load`'s queries and memories, and the judged questions
and the observations of ../shared/eval/locomo-dev when present.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from recallatron.embed_input import compose
from recallatron.settings import default_state_dir
from recallatron_devkit import synthetic
from recallatron_devkit.beir import load_dataset
from services.embed.manifest import BI_ENCODER_DIRNAME, QUERY_GRAPH_MIN_WORDS, QUERY_MODEL_FILE
from services.embed.models import BiEncoder, word_pieces

EVAL = Path(__file__).resolve().parent.parent.parent / "shared" / "eval" / "locomo-dev"


def texts(queries: int, memories: int) -> list[str]:
    out = synthetic.queries(queries)
    out += [compose(m.title, m.body) for m in synthetic.memories(memories)]
    if EVAL.is_dir():
        for directory in sorted(p for p in EVAL.iterdir() if p.is_dir()):
            data = load_dataset(directory)
            out += [q.text for q in data.queries]
            out += [compose(d.title, d.text) for d in data.documents]
    return out


def exact_only(directory: Path, into: Path) -> Path:
    """The bi-encoder's directory without its query graph: the same files,
    linked, under a manifest that lists no query graph."""
    manifest = json.loads((directory / "manifest.json").read_text())
    manifest["files"].pop(QUERY_MODEL_FILE, None)
    for name in manifest["files"]:
        (into / name).symlink_to(directory / name)
    (into / "manifest.json").write_text(json.dumps(manifest))
    return into


def resident_mb(directory: Path) -> float:
    """VmRSS of this process once ``directory``'s bi-encoder has embedded a batch."""
    model = BiEncoder(directory)
    model.embed(texts(64, 0)[:64])
    status = Path("/proc/self/status").read_text()
    line = next(x for x in status.splitlines() if x.startswith("VmRSS:"))
    return int(line.split()[1]) / 1024


def measured_apart(directory: Path) -> float:
    """:func:`resident_mb` in a fresh process, so that neither reading holds the other's graphs."""
    answer = subprocess.run(
        [sys.executable, "-m", "benchmarks.query_graph_drift", "--resident", str(directory)],
        check=True,
        capture_output=True,
        text=True,
    )
    return float(answer.stdout)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models-dir", type=Path, default=default_state_dir() / "models")
    parser.add_argument("--queries", type=int, default=400)
    parser.add_argument("--memories", type=int, default=400)
    parser.add_argument("--resident", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.resident:
        print(f"{resident_mb(args.resident):.1f}")
        return 0
    directory = args.models_dir / BI_ENCODER_DIRNAME
    model = BiEncoder(directory, threads=1)
    if model.query_session is None:
        raise SystemExit("no query graph: run `recallatron prepare-models`")
    every = texts(args.queries, args.memories)
    routed = [t for t in every if word_pieces(model.tokenize([t])[0]) >= QUERY_GRAPH_MIN_WORDS]
    exact = model.embed(routed)
    fast = np.concatenate([model.embed_queries([t]) for t in routed])
    lowest = float(np.min(np.sum(exact * fast, axis=1)))
    print(f"drift: {len(routed)} of {len(every)} texts take the query graph; ", end="")
    print(f"lowest cosine {lowest:.5f}")
    del model
    both = measured_apart(directory)
    with tempfile.TemporaryDirectory() as tmp:
        alone = measured_apart(exact_only(directory, Path(tmp)))
    print(f"resident: {both:.0f} MB with both graphs, {alone:.0f} MB with the exact one alone")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
