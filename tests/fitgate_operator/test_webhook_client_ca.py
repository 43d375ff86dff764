"""Issue 22: with FITGATE_WEBHOOK_CLIENT_CA the webhook serves only a client with a certificate that CA signed."""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path

import httpx2
from e2e.cluster import CertificateAuthority

from fitgate.operator.runtime.webhook import GuardedWebhookServer
from fitgate.settings import OperatorConfig


async def _fn(*_: object, **__: object) -> dict[str, object]:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": {"uid": "u", "allowed": True}}


def test_the_setting_is_read() -> None:
    assert OperatorConfig.from_env({"FITGATE_WEBHOOK_CLIENT_CA": "/ca.crt"}).webhook_client_ca == "/ca.crt"
    assert OperatorConfig.from_env({}).webhook_client_ca is None


def test_a_client_without_the_cas_certificate_is_refused(tmp_path: Path) -> None:
    ca = CertificateAuthority.create()
    cert, key = ca.issue("fitgate-webhook", ips=("127.0.0.1",))
    client_cert, client_key = ca.issue("kube-apiserver", server=False)
    for name, data in {
        "ca.crt": ca.pem,
        "tls.crt": cert,
        "tls.key": key,
        "c.crt": client_cert,
        "c.key": client_key,
    }.items():
        (tmp_path / name).write_bytes(data)

    async def run() -> tuple[int, str]:
        server = GuardedWebhookServer(
            addr="127.0.0.1",
            port=0,
            host="127.0.0.1",
            certfile=str(tmp_path / "tls.crt"),
            pkeyfile=str(tmp_path / "tls.key"),
            verify_mode=ssl.CERT_REQUIRED,
            verify_cafile=str(tmp_path / "ca.crt"),
        )
        async with server:
            configs = server(_fn)  # type: ignore[arg-type]
            config = await configs.__anext__()
            url = f"{config['url']}/fit"
            try:
                with_cert = ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))
                with_cert.load_cert_chain(str(tmp_path / "c.crt"), str(tmp_path / "c.key"))
                async with httpx2.AsyncClient(verify=with_cert, timeout=10) as client:
                    body = b'{"request": {}}'
                    status = (
                        await client.post(url, content=body, headers={"Content-Type": "application/json"})
                    ).status_code
                without = ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))
                refused = ""
                try:
                    async with httpx2.AsyncClient(verify=without, timeout=10) as client:
                        await client.post(url, content=b"{}", headers={"Content-Type": "application/json"})
                except Exception as exc:  # the TLS handshake (or the read after it) fails
                    refused = type(exc).__name__
                return status, refused
            finally:
                await configs.aclose()

    status, refused = asyncio.run(run())
    assert status == 400  # served: the guard answered the malformed review
    assert refused  # no client certificate: no answer at all
