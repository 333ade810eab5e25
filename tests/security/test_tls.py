"""TLS on every hop: a stack whose servers present a certificate and whose
clients verify it, against a CA the test makes with openssl."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from recallatron.client import Client
from recallatron.grpcclient import make_channel
from recallatron_devkit.stack import Stack, StackConfig
from tests.conftest import free_port

pytestmark = pytest.mark.integration


def make_certificates(directory: Path) -> dict[str, Path]:
    """A CA, and a server certificate it signs for 127.0.0.1 and localhost."""
    ca_key, ca_crt = directory / "ca.key", directory / "ca.crt"
    key, csr, crt = directory / "server.key", directory / "server.csr", directory / "server.crt"
    ext = directory / "san.ext"
    ext.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")

    def run(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True)

    run(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        str(ca_key),
        "-out",
        str(ca_crt),
        "-days",
        "2",
        "-subj",
        "/CN=recallatron test CA",
    )
    run(
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        str(key),
        "-out",
        str(csr),
        "-subj",
        "/CN=localhost",
    )
    run(
        "x509",
        "-req",
        "-in",
        str(csr),
        "-CA",
        str(ca_crt),
        "-CAkey",
        str(ca_key),
        "-CAcreateserial",
        "-out",
        str(crt),
        "-days",
        "2",
        "-extfile",
        str(ext),
    )
    return {"ca": ca_crt, "cert": crt, "key": key}


@pytest.fixture(scope="module")
def tls_stack(prepared_models_dir: Path) -> Iterator[tuple[Stack, dict[str, Path]]]:
    if shutil.which("openssl") is None:
        pytest.fail("openssl is needed to make the test certificates")
    state = Path(tempfile.mkdtemp(prefix="recallatron-tls-"))
    certs = make_certificates(state)
    stack = Stack(
        StackConfig(
            state_dir=state / "stack",
            pg_port=free_port(),
            ports={"gateway": 0, "store": 0, "embed": 0, "rank": 0},
            models_dir=prepared_models_dir,
            env={
                "RECALLATRON_TLS_CERT_FILE": str(certs["cert"]),
                "RECALLATRON_TLS_KEY_FILE": str(certs["key"]),
                "RECALLATRON_TLS_CA_FILE": str(certs["ca"]),
                "RECALLATRON_REVIEW_LISTEN": "0",
            },
        )
    )
    stack.start()
    yield stack, certs
    stack.stop()
    shutil.rmtree(state, ignore_errors=True)


def test_every_hop_speaks_tls(tls_stack: tuple[Stack, dict[str, Path]]) -> None:
    stack, certs = tls_stack
    admin = Client(stack.gateway, stack.admin_token, ca_file=str(certs["ca"]))
    ws = admin.create_workspace("tls").workspace
    member = admin.create_member(ws.id, "ada", owner=True).member
    ada = Client(stack.gateway, admin.create_token(member.id).token, ca_file=str(certs["ca"]))
    made = ada.remember("Certificates rotate every ninety days", audience_to="workspace").memory
    assert ada.read([made.id]).memories[0].title == made.title
    # Gateway -> rank -> store and embed, all over TLS: recall answers with
    # both arms once the job (also over TLS) has embedded the memory.
    ada.wait_embedded(timeout=120, poll=0.2)
    outcome = ada.recall("how often do certificates rotate", mode="hybrid").outcome
    assert outcome.dense_available and outcome.results[0].memory.id == made.id


def test_plaintext_and_unverified_clients_are_refused(
    tls_stack: tuple[Stack, dict[str, Path]], tmp_path: Path
) -> None:
    stack, _ = tls_stack
    for name in ("gateway", "store", "embed", "rank"):
        plaintext = grpc.insecure_channel(stack.address(name))
        with pytest.raises(grpc.FutureTimeoutError):
            grpc.channel_ready_future(plaintext).result(timeout=3)
        plaintext.close()
    # A certificate from another CA is not trusted.
    other = make_certificates(tmp_path)
    channel = make_channel(stack.gateway, ca_file=str(other["ca"]))
    with pytest.raises(grpc.FutureTimeoutError):
        grpc.channel_ready_future(channel).result(timeout=3)
    channel.close()
