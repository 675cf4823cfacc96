"""Kubernetes through the official client's transport, by raw REST path: the
:class:`rotate.clients.seams.Kube` adapter.

Why raw paths: the typed APIs cover only built-in kinds and the dynamic client runs API
discovery on start (seconds on a big cluster).  A small table of the kinds `rotate` touches
(:data:`rotate.clients.kube_kinds.KINDS`) gives every path without a round trip; the
official client still does what it is good at — kubeconfig, TLS, token refresh, connection
pooling.

Invariants:

* ``get``/``list``/``watch`` never hand out Secret payloads: ``data``, ``stringData`` and the
  ``last-applied-configuration`` annotation (which holds a copy of them) are removed.  The
  only way to a value is :meth:`KubeClient.read_secret_key`, which wraps it in Secret.
* Errors are built from the HTTP status and the Status ``reason`` enum, never from a body
  (rotate.clients.kube_transport, which also loads the kubeconfig and sends the requests).
"""

from __future__ import annotations

import base64
import binascii
import builtins
import json
import secrets
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import quote

from rotate.clients.kube_kinds import ESO_GROUP, ESO_VERSIONS, KINDS, SYSTEM, KindInfo, kind_info
from rotate.clients.kube_transport import REASONS, KubeConnection, KubeTransport
from rotate.clients.seams import Endpoint, KubeEvent, PatchType, WatchEvent
from rotate.core.errors import (
    ClientError,
    ForbiddenError,
    PermanentError,
    RejectedError,
    TemporaryError,
    error_for_status,
)
from rotate.core.secret import Secret
from rotate.core.timestamps import rfc3339, utcnow
from rotate.core.urls import display_url

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
#: connections kept to the API server (see KubeClient.__init__)
POOL_SIZE = 32


_PATCH_CONTENT = {
    "merge": "application/merge-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "json": "application/json-patch+json",
}

def _strip_secret(obj: dict[str, Any]) -> dict[str, Any]:
    obj.pop("data", None)
    obj.pop("stringData", None)
    annotations = (obj.get("metadata") or {}).get("annotations")
    if isinstance(annotations, dict):
        annotations.pop(LAST_APPLIED, None)
    return obj


class KubeClient:
    """The Kube seam over one API server (rotate.clients.kube_transport.KubeTransport: the
    kubeconfig or in-cluster service account, the pool, the requests and their errors)."""

    def __init__(self, kubeconfig: str | None = None, context: str | None = None,
                 serviceaccount_dir: str | None = None) -> None:
        self._http = KubeTransport(kubeconfig, context, serviceaccount_dir)
        self._server = self._http.server
        self._kinds = dict(KINDS)
        self._eso_version: str | None = None  # discovered on first use of an ESO kind
        self._forwards: Any = None  # rotate.clients.portforward.PortForwards, on first use

    def __repr__(self) -> str:
        return f"KubeClient({display_url(self._server)!r})"

    @property
    def server(self) -> str:
        return self._server

    def connection(self) -> KubeConnection:
        """Where and as whom this client talks to the API server (KubeTransport.connection)."""
        return self._http.connection()

    def close(self) -> None:
        self.close_forwards()
        self._http.close()

    def port_forward(self, namespace: str, pod: str, port: int) -> Endpoint:
        from rotate.clients.portforward import PortForwards

        if self._forwards is None:
            self._forwards = PortForwards(self._http.api)
        found: Endpoint = self._forwards.endpoint(namespace, pod, port)
        return found

    def close_forwards(self) -> None:
        forwards, self._forwards = self._forwards, None
        if forwards is not None:
            forwards.close()

    # ------------------------------------------------------------------ kinds

    def _info(self, kind: str) -> KindInfo:
        """The kind's path data; ESO kinds in the version the server serves (discovered once:
        ``v1`` if served, else ``v1beta1``)."""
        info = self._kinds.get(kind) or kind_info(kind)
        if info.group == ESO_GROUP and self._eso_version is None:
            self._eso_version = self._discover_eso()
            for name, known in KINDS.items():
                if known.group == ESO_GROUP:
                    self._kinds[name] = KindInfo(ESO_GROUP, self._eso_version, known.plural,
                                                 known.namespaced)
            info = self._kinds[kind]
        return info

    def _discover_eso(self) -> str:
        """``GET /apis/external-secrets.io``: the first of :data:`ESO_VERSIONS` served.
        A group the server does not serve (404) or a refused discovery keeps ``v1``: the
        request that follows then fails with its own, clearer error."""
        try:
            doc = self._http.request("GET", f"/apis/{ESO_GROUP}", "discover external-secrets.io")
        except ClientError:
            return ESO_VERSIONS[0]
        served = {str(v.get("version")) for v in (doc or {}).get("versions") or []
                  if isinstance(v, dict)}
        return next((v for v in ESO_VERSIONS if v in served), ESO_VERSIONS[0])

    def api_version(self, kind: str) -> str:
        """``apps/v1``, ``external-secrets.io/v1beta1`` … as this server serves the kind."""
        return self._info(kind).api_version

    # ------------------------------------------------------------------ paths

    def _path(self, kind: str, namespace: str | None, name: str | None = None,
              sub: str | None = None) -> str:
        info = self._info(kind)
        path = info.prefix
        if info.namespaced and namespace is not None:
            path += f"/namespaces/{quote(namespace, safe='')}"
        path += f"/{info.plural}"
        if name is not None:
            path += f"/{quote(name, safe='')}"
        if sub is not None:
            path += f"/{sub}"
        return path

    @staticmethod
    def _op(verb: str, kind: str, namespace: str | None, name: str | None = None) -> str:
        where = "/".join(p for p in (namespace, name) if p)
        return f"{verb} {kind.lower()}" + (f" {where}" if where else "")

    # ------------------------------------------------------------------ Kube protocol

    def get(self, kind: str, namespace: str | None, name: str) -> dict[str, Any]:
        obj = self._http.request("GET", self._path(kind, namespace, name),
                                 self._op("get", kind, namespace, name))
        return _strip_secret(obj) if kind == "Secret" else dict(obj)

    def list(
        self, kind: str, namespace: str | None, *, label_selector: str | None = None
    ) -> list[dict[str, Any]]:
        return self._list(kind, namespace, label_selector)[0]

    def list_versioned(
        self, kind: str, namespace: str | None
    ) -> tuple[builtins.list[dict[str, Any]], str]:
        return self._list(kind, namespace, None)

    def _list(
        self, kind: str, namespace: str | None, label_selector: str | None
    ) -> tuple[builtins.list[dict[str, Any]], str]:
        query = {"labelSelector": label_selector} if label_selector else None
        doc = self._http.request("GET", self._path(kind, namespace),
                                 self._op("list", kind, namespace), query=query) or {}
        info = self._info(kind)
        items = []
        for item in doc.get("items") or []:
            # List items come without kind/apiVersion; callers treat each as a full object.
            item.setdefault("kind", kind)
            item.setdefault("apiVersion", info.api_version)
            items.append(_strip_secret(item) if kind == "Secret" else item)
        return items, str((doc.get("metadata") or {}).get("resourceVersion") or "")

    def create(self, kind: str, namespace: str | None, body: Mapping[str, Any]) -> dict[str, Any]:
        name = (body.get("metadata") or {}).get("name")
        full = {"apiVersion": self._info(kind).api_version, "kind": kind, **body}
        obj = self._http.request("POST", self._path(kind, namespace),
                                 self._op("create", kind, namespace, name), body=full)
        return _strip_secret(obj) if kind == "Secret" else dict(obj)

    def replace(
        self, kind: str, namespace: str | None, name: str, body: Mapping[str, Any]
    ) -> dict[str, Any]:
        full = {"apiVersion": self._info(kind).api_version, "kind": kind, **body}
        obj = self._http.request("PUT", self._path(kind, namespace, name),
                                 self._op("replace", kind, namespace, name), body=full)
        return _strip_secret(obj) if kind == "Secret" else dict(obj)

    def patch(
        self, kind: str, namespace: str | None, name: str, body: Any, *,
        patch_type: PatchType = "merge",
    ) -> dict[str, Any]:
        if patch_type == "json" and not isinstance(body, list):
            raise RejectedError(SYSTEM, self._op("patch", kind, namespace, name),
                                "a JSON patch is a list of operations")
        obj = self._http.request("PATCH", self._path(kind, namespace, name),
                                 self._op("patch", kind, namespace, name), body=body,
                                 content_type=_PATCH_CONTENT[patch_type])
        return _strip_secret(obj) if kind == "Secret" else dict(obj)

    def delete(self, kind: str, namespace: str | None, name: str) -> None:
        self._http.request("DELETE", self._path(kind, namespace, name),
                           self._op("delete", kind, namespace, name))

    def watch(
        self, kind: str, namespace: str | None, *, name: str | None = None,
        resource_version: str | None = None, timeout_seconds: float = 30,
    ) -> Iterator[WatchEvent]:
        op = self._op("watch", kind, namespace, name)
        query = {"watch": "true", "timeoutSeconds": str(max(1, int(timeout_seconds))),
                 "allowWatchBookmarks": "true"}
        if resource_version:
            query["resourceVersion"] = resource_version
        if name:
            query["fieldSelector"] = f"metadata.name={name}"
        # Read deadline a little past the server's own end of stream.
        response = self._http.send("GET", self._path(kind, namespace), op, query=query,
                                   timeout=(10, timeout_seconds + 10))
        return self._events(response, kind, op)

    def _events(self, response: Any, kind: str, op: str) -> Iterator[WatchEvent]:
        try:
            if response.status >= 400:
                raise self._http.error(int(response.status), response.data, op)
            buffer = b""
            try:
                for chunk in response.stream(4096, decode_content=True):
                    buffer += chunk
                    while b"\n" in buffer:
                        line, buffer = buffer.split(b"\n", 1)
                        event = self._event(line, kind, op)
                        if event is not None:
                            yield event
            except self._http.read_errors:
                return  # stream cut or read deadline: the watch just ends; callers re-watch
            event = self._event(buffer, kind, op)
            if event is not None:
                yield event
        finally:
            # A watch left early has an unread stream: close the connection rather than
            # return it to the pool half-read.
            response.close()
            response.release_conn()

    @staticmethod
    def _event(line: bytes, kind: str, op: str) -> WatchEvent | None:
        if not line.strip():
            return None
        try:
            doc = json.loads(line)
        except ValueError:
            raise PermanentError(SYSTEM, op, "malformed watch event") from None
        etype, obj = doc.get("type"), doc.get("object") or {}
        if etype == "ERROR":
            code = int(obj.get("code") or 500) if isinstance(obj, dict) else 500
            if code == 410 or code >= 500:
                raise TemporaryError(SYSTEM, op, REASONS.get(str(obj.get("reason")),
                                                              "watch failed"), status=code)
            raise error_for_status(code, SYSTEM, op)
        if etype not in ("ADDED", "MODIFIED", "DELETED", "BOOKMARK") or not isinstance(obj, dict):
            raise PermanentError(SYSTEM, op, "unexpected watch event")
        return WatchEvent(etype, _strip_secret(obj) if kind == "Secret" else obj)

    def read_secret_key(self, namespace: str, name: str, key: str) -> Secret | None:
        op = self._op("read", "Secret", namespace, name) + f" key {key}"
        obj = self._http.request("GET", self._path("Secret", namespace, name), op)
        encoded = (obj.get("data") or {}).get(key)
        if encoded is None:
            return None
        try:
            return Secret(base64.b64decode(encoded, validate=True).decode("utf-8"))
        except (binascii.Error, UnicodeDecodeError, TypeError):
            raise PermanentError(SYSTEM, op, "the key is not base64-encoded UTF-8 text") from None

    def secret_keys(self, namespace: str, name: str) -> builtins.list[str]:
        op = self._op("read", "Secret", namespace, name)
        obj = self._http.request("GET", self._path("Secret", namespace, name), op) or {}
        return sorted(obj.get("data") or {})

    def write_secret_key(
        self, namespace: str, name: str, key: str, value: Secret, *,
        annotations: Mapping[str, str] | None = None, resource_version: str | None = None,
    ) -> str:
        op = self._op("write", "Secret", namespace, name) + f" key {key}"
        encoded = base64.b64encode(value.reveal().encode("utf-8")).decode("ascii")
        body: dict[str, Any] = {"data": {key: encoded}}
        meta: dict[str, Any] = {}
        if annotations:
            meta["annotations"] = dict(annotations)
        if resource_version:
            meta["resourceVersion"] = resource_version  # the API server answers 409 if moved
        if meta:
            body["metadata"] = meta
        obj = self._http.request("PATCH", self._path("Secret", namespace, name), op,
                                 body=body, content_type=_PATCH_CONTENT["merge"])
        return str((obj.get("metadata") or {}).get("resourceVersion", ""))

    def create_secret(self, namespace: str, name: str, values: Mapping[str, Secret], *,
                      labels: Mapping[str, str] | None = None) -> None:
        data = {k: base64.b64encode(v.reveal().encode("utf-8")).decode("ascii")
                for k, v in values.items()}
        body = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "data": data,
                "metadata": {"name": name, "labels": dict(labels or {})}}
        self._http.request("POST", self._path("Secret", namespace),
                           self._op("create", "Secret", namespace, name), body=body)

    def pod_log_tail(self, namespace: str, pod: str, lines: int) -> str:
        op = self._op("read log of", "Pod", namespace, pod)
        response = self._http.send("GET", self._path("Pod", namespace, pod, sub="log"), op,
                                   query={"tailLines": str(max(0, lines))}, timeout=10)
        try:
            status, raw = int(response.status), response.data
        except self._http.read_errors:
            raise TemporaryError(SYSTEM, op, "connection lost") from None
        finally:
            response.release_conn()
        if status >= 400:
            raise self._http.error(status, raw, op)
        return bytes(raw).decode("utf-8", "replace")

    def can_i(
        self, verb: str, kind: str, namespace: str | None, *, subresource: str | None = None,
        name: str | None = None,
    ) -> bool:
        info = kind_info(kind)
        attrs: dict[str, str] = {"verb": verb, "group": info.group, "resource": info.plural}
        if namespace and info.namespaced:
            attrs["namespace"] = namespace
        if subresource:
            attrs["subresource"] = subresource
        if name:
            attrs["name"] = name
        body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                "spec": {"resourceAttributes": attrs}}
        doc = self._http.request("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                                 f"can-i {verb} {info.plural}", body=body)
        return bool(((doc or {}).get("status") or {}).get("allowed"))

    def proxy_get(
        self, namespace: str, service: str, port: str | int, path: str, *, timeout: float = 5
    ) -> int:
        op = f"GET service/{namespace}/{service}:{port}{path}"
        ref = quote(f"{service}:{port}", safe=":")
        url = (f"/api/v1/namespaces/{quote(namespace, safe='')}/services/{ref}/proxy/"
               + path.lstrip("/"))
        response = self._http.send("GET", url, op, timeout=timeout)
        try:
            status = int(response.status)
            raw = response.data  # read whole: an unread body would poison the pooled connection
        except self._http.read_errors:
            raise TemporaryError(SYSTEM, op, "connection lost") from None
        finally:
            response.release_conn()
        if status in (401, 403):
            # The API server refusing *us* is not the service's answer.
            try:
                doc = json.loads(raw)
            except ValueError:
                doc = None
            if isinstance(doc, dict) and doc.get("kind") == "Status":
                raise ForbiddenError(SYSTEM, op, "not allowed to use the service proxy",
                                     status=status)
        return status

    def create_event(self, event: KubeEvent) -> None:
        ref = event.involved
        now = rfc3339(event.at or utcnow(), micro=False)
        involved = {"apiVersion": self._info(ref.kind).api_version, "kind": ref.kind,
                    "name": ref.name, "namespace": ref.namespace}
        if event.uid:
            involved["uid"] = event.uid
        body = {
            "apiVersion": "v1", "kind": "Event",
            # the name scheme of client-go's recorder: object name + a unique suffix
            "metadata": {"name": f"{ref.name}.{secrets.token_hex(8)}",
                         "namespace": ref.namespace},
            "involvedObject": involved, "type": event.type, "reason": event.reason,
            "message": event.message[:1024], "action": event.action,
            "source": {"component": "rotate"}, "reportingComponent": "rotate",
            "reportingInstance": event.instance[:128],
            "firstTimestamp": now, "lastTimestamp": now, "count": 1,
        }
        # a short deadline: an event is best effort and must not hold a run up for long
        self._http.request("POST", self._path("Event", ref.namespace),
                           self._op("create", "Event", ref.namespace, ref.name), body=body,
                           timeout=5)
