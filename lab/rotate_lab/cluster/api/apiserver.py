"""The lab's Kubernetes API server: HTTPS + bearer tokens over the :class:`Store`.

Faithful enough that unmodified kubectl and the official Python client work: discovery,
CRUD at namespaced and all-namespaces paths, status/scale subresources, the three patch
types, ``watch=true`` streams (chunked, one JSON event per line), selectors, Status errors,
SelfSubjectAccessReview, TokenRequest/TokenReview (service-account JWTs, see
:mod:`rotate_lab.cluster.api.tokens`), the service proxy, and pods' port-forward
(:mod:`rotate_lab.cluster.api.portforward`).

This module owns the server's lifecycle (start, stop: every open watch ended), who a bearer
token is, and the request counters; one connection's requests (TLS, body, dispatch, watch
streams) are :mod:`.handler`'s.

Why these choices:

- HTTPS only: kubectl never sends a bearer token over plain HTTP.
- HTTP/1.1 without ALPN ``h2``: the stdlib server does not speak HTTP/2; Go's client then
  stays on HTTP/1.1.  Every non-watch response carries Content-Length so connections are
  kept alive; watches use chunked encoding and close the connection when they end.
- The TLS handshake runs in the request thread (``do_handshake_on_connect=False``) so one slow
  client cannot stall ``accept``.
- Each request is authorised before it touches the store, with the identity of its token;
  nothing changes on any error path.
"""

from __future__ import annotations

import hmac
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rotate_lab.cluster.api import portforward
from rotate_lab.cluster.api.auth import Authorizer, Identity, Withheld
from rotate_lab.cluster.api.handler import LogReader, TlsServer
from rotate_lab.cluster.api.proxy import ProxyResolver
from rotate_lab.cluster.api.rbac import RbacIdentity, ServiceAccountUser
from rotate_lab.cluster.api.store import Store
from rotate_lab.cluster.api.tls import TlsMaterial
from rotate_lab.cluster.api.tokens import TokenIssuer
from rotate_lab.cluster.api.watch import Watch

__all__ = ["ApiServer", "Identity"]


class ApiServer:
    """``ApiServer(store, tls=..., identities={token: Identity}, proxy=resolver)``.

    ``proxy(namespace, service, port)`` returns ``(pod_ip, target_port)`` of a Ready endpoint
    (``port`` is the name or number from the URL, "" when absent); it raises
    :class:`ApiError` (503) or returns None when there is none.  ``logs(namespace, pod,
    container)`` serves ``pods/log`` (``kubectl logs``) when given.  ``tokens`` signs and
    reviews service-account JWTs (a fresh in-memory key when not given).  A bearer token that
    is none of ``identities`` but a valid service-account JWT of ``tokens`` (the API server's
    audience, the ServiceAccount still there with the same uid) is that ServiceAccount,
    authorised by the RBAC objects in the store (:mod:`rotate_lab.cluster.api.rbac`).
    """

    def __init__(self, store: Store, *, host: str = "127.0.0.1", port: int = 0,
                 tls: TlsMaterial, identities: dict[str, Identity],
                 proxy: ProxyResolver | None = None, logs: LogReader | None = None,
                 tokens: TokenIssuer | None = None,
                 forwards_dropped: Callable[[], bool] = lambda: False,
                 unreachable: Callable[[str], bool] | None = None,
                 withheld: Callable[[str | None], bool] | None = None) -> None:
        """``unreachable(path)``: whether a request for ``path`` is dropped unanswered (the
        connection closed, as by a network fault) — the lab's ``journal-unreachable``;
        ``withheld(namespace)``: whether listing workloads there is forbidden to every
        caller (auth.Withheld) — the lab's ``list-forbidden``."""
        self.store = store
        #: the lab fault ``portforward-drop``: open port-forward sessions end, new ones fail
        self.forwards_dropped = forwards_dropped
        self.unreachable = unreachable or (lambda _path: False)
        self.withheld = withheld
        self.tokens = tokens or TokenIssuer()
        self.logs = logs
        self.identities = dict(identities)
        self.proxy = proxy
        # the key and certificate are on disk only while the context loads them: a cluster
        # process killed with SIGKILL leaves no key behind in the temporary directory
        with tempfile.TemporaryDirectory(prefix="rotate-lab-tls-") as tmp:
            context = tls.server_context(Path(tmp))
        self._server = TlsServer((host, port), self, context)
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._watches: set[Watch] = set()
        self._watch_lock = threading.Lock()
        self._watches_served = 0
        #: (client, verb, resource) → requests served; the client is the User-Agent's first
        #: product token (``kubectl``, ``rotate``, ``python-httpx``...)
        self._requests: dict[tuple[str, str, str], int] = {}
        #: (user, namespace, pod, port, framing) → port-forward streams opened
        self._forwards: dict[tuple[str, str, str, int, str], int] = {}

    def count(self, agent: str | None, verb: str, resource: str) -> None:
        client = (agent or "unknown").split("/", 1)[0].split(" ", 1)[0] or "unknown"
        with self._watch_lock:
            key = (client, verb, resource)
            self._requests[key] = self._requests.get(key, 0) + 1

    def count_forward(self, user: str, target: portforward.Target, framing: str) -> None:
        with self._watch_lock:
            for port in target.ports:
                key = (user, target.namespace, target.pod, port, framing)
                self._forwards[key] = self._forwards.get(key, 0) + 1

    def request_counts(self) -> dict[str, Any]:
        """What ``GET /lab/api-requests`` answers: every resource request counted by client,
        verb (watch included) and resource, since the server started; and ``port_forwards``:
        the port-forward streams opened, by user, pod, port and framing (``websocket``,
        ``spdy``) — the record of which provider connections came through the API server."""
        with self._watch_lock:
            rows = [{"client": c, "verb": v, "resource": r, "count": n}
                    for (c, v, r), n in sorted(self._requests.items())]
            forwards = [{"user": u, "namespace": ns, "pod": pod, "port": port,
                         "framing": f, "streams": n}
                        for (u, ns, pod, port, f), n in sorted(self._forwards.items())]
            served = self._watches_served
        return {"kind": "ApiRequestCounts", "total": sum(r["count"] for r in rows),
                "watches_served": served, "requests": rows, "port_forwards": forwards}

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"https://{host!s}:{port}"

    @property
    def address(self) -> str:
        host, port = self._server.server_address[:2]
        return f"{host!s}:{port}"

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    def forward_ends(self) -> bool:
        """Whether an open port-forward session must end now: the server stops, or the lab
        fault ``portforward-drop`` is on."""
        return self._stopping.is_set() or self.forwards_dropped()

    def start(self) -> ApiServer:
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.2},
                                        name="lab-apiserver", daemon=True)
        self._thread.start()
        return self

    @property
    def open_watches(self) -> int:
        """Watch streams being served right now (tests wait on a client's watch with it)."""
        with self._watch_lock:
            return len(self._watches)

    @property
    def watches_served(self) -> int:
        """Watch streams started since start (grows only)."""
        with self._watch_lock:
            return self._watches_served

    def track(self, watch: Watch) -> None:
        with self._watch_lock:
            self._watches.add(watch)
            self._watches_served += 1

    def untrack(self, watch: Watch) -> None:
        with self._watch_lock:
            self._watches.discard(watch)

    def stop(self) -> None:
        """Stop accepting, end every open watch stream, release the port."""
        self._stopping.set()
        with self._watch_lock:
            watches = list(self._watches)
        for w in watches:
            w.close()
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(5)

    def identify(self, header: str | None) -> Authorizer | None:
        who = self._identify(header)
        return Withheld(who, self.withheld) if who is not None and self.withheld else who

    def _identify(self, header: str | None) -> Authorizer | None:
        # The scheme is case-insensitive (RFC 7235; kube-apiserver lower-cases it): the Python
        # client's in-cluster config sends "bearer <token>".
        scheme, _, token = (header or "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        token = token.strip()
        for known, identity in self.identities.items():
            if hmac.compare_digest(known.encode(), token.encode()):
                return identity
        return self._service_account(token)

    def _service_account(self, token: str) -> RbacIdentity | None:
        """A ServiceAccount token, reviewed as TokenReview does (audience: this server)."""
        review = self.tokens.review(self.store, {"spec": {"token": token}})
        user = (review.get("status") or {}).get("user") or {}
        parts = str(user.get("username") or "").split(":")
        if len(parts) != 4 or parts[:2] != ["system", "serviceaccount"]:
            return None
        return RbacIdentity(self.store, ServiceAccountUser(parts[2], parts[3]))
