"""A bare admission webhook: aiohttp over TLS answering every AdmissionReview ``allowed: true``.

The floor `benchmarks/admission.py` measures fitgate against (issue 23): the same machine, client,
certificate and TLS, no decision at all. Usage: python benchmarks/bare_webhook.py CERT KEY PORT
"""

from __future__ import annotations

import ssl
import sys
from typing import Any

from aiohttp import web


async def review(request: web.Request) -> web.Response:
    body: dict[str, Any] = await request.json()
    uid = body["request"]["uid"]
    return web.json_response(
        {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": {"uid": uid, "allowed": True}}
    )


def main() -> int:
    cert, key, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    app = web.Application()
    app.router.add_post("/{path:.*}", review)
    web.run_app(app, host="127.0.0.1", port=port, ssl_context=context, print=None, access_log=None)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
