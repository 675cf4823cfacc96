"""The service proxy subresource: ``/api/v1/namespaces/NS/services/REF/proxy/PATH``.

``REF`` is ``NAME``, ``NAME:PORT`` or ``SCHEME:NAME:PORT`` (as kubectl and real servers
accept).  The service controller supplies the resolver — ``(namespace, name, port) →
(pod_ip, target_port)`` of a Ready endpoint — so this module only forwards one plain-HTTP
request and relays status, body and content type.
"""

from __future__ import annotations

import http.client
from collections.abc import Callable

from rotate_lab.cluster.api.apierrors import ApiError

ProxyResolver = Callable[[str, str, str], "tuple[str, int] | None"]
PROXY_TIMEOUT = 30.0
_HOP_BY_HOP = ("connection", "keep-alive", "transfer-encoding", "upgrade")


def parse_ref(ref: str) -> tuple[str, str, str]:
    """``"http:web:8080"`` → ("http", "web", "8080"); ``"web"`` → ("http", "web", "")."""
    parts = ref.split(":")
    if len(parts) == 3:
        return parts[0] or "http", parts[1], parts[2]
    if len(parts) == 2:
        return "http", parts[0], parts[1]
    return "http", ref, ""


def unavailable(name: str) -> ApiError:
    return ApiError(503, "ServiceUnavailable", f'no endpoints available for service "{name}"')


def forward(resolver: ProxyResolver, namespace: str, ref: str, method: str, path: str,
            query: str, body: bytes, content_type: str | None) -> tuple[int, str, bytes]:
    scheme, name, port = parse_ref(ref)
    if scheme != "http":
        raise ApiError(503, "ServiceUnavailable",
                       f"the lab's service proxy speaks http only, not {scheme}")
    target = resolver(namespace, name, port)
    if target is None:
        raise unavailable(name)
    ip, target_port = target
    conn = http.client.HTTPConnection(ip, target_port, timeout=PROXY_TIMEOUT)
    headers = {"Content-Type": content_type} if content_type else {}
    try:
        conn.request(method, path + (f"?{query}" if query else ""), body=body or None,
                     headers=headers)
        resp = conn.getresponse()
        payload = resp.read()
        return resp.status, resp.getheader("Content-Type") or "text/plain", payload
    except ConnectionRefusedError:
        raise ApiError(503, "ServiceUnavailable",
                       f"error trying to reach service: dial tcp {ip}:{target_port}: "
                       "connect: connection refused") from None
    except (OSError, http.client.HTTPException):
        raise ApiError(503, "ServiceUnavailable",
                       f"error trying to reach service: {ip}:{target_port} did not answer"
                       ) from None
    finally:
        conn.close()
