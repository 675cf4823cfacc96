"""The REST verbs of the lab's API server, as pure request → (status code, JSON) functions.

:mod:`rotate_lab.cluster.api.apiserver` owns the wire (TLS, HTTP, auth, watch streaming, the service
proxy); this module owns what a URL means and what each verb does to the :class:`Store`.
Nothing here writes to a socket, so every verb is testable without one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from rotate_lab.cluster.api import protobuf, resources, tables
from rotate_lab.cluster.api.apierrors import ApiError, bad_request, method_not_allowed
from rotate_lab.cluster.api.patch import PatchError, apply_patch
from rotate_lab.cluster.api.resources import Kind
from rotate_lab.cluster.api.selectors import spec_to_query
from rotate_lab.cluster.api.store import Store

Obj = dict[str, Any]

PATCH_TYPES = {
    "application/strategic-merge-patch+json": "strategic",
    "application/merge-patch+json": "merge",
    "application/json-patch+json": "json",
    "application/apply-patch+yaml": "apply",
}
_VERB_BY_METHOD = {"GET": "get", "HEAD": "get", "POST": "create", "PUT": "update",
                   "PATCH": "patch", "DELETE": "delete"}
_SUBRESOURCES = ("status", "scale", "proxy", "log", "token", "portforward")


@dataclass(frozen=True)
class Route:
    """A resource URL: ``/apis/G/V[/namespaces/NS]/PLURAL[/NAME[/SUB[/REST...]]]``."""

    kind: Kind
    version: str
    namespace: str | None
    name: str | None
    sub: str | None
    rest: str  # the path after ``proxy/`` (service proxy only)

    @property
    def resource(self) -> str:
        """As RBAC names it: ``deployments`` or ``deployments/status``."""
        return f"{self.kind.plural}/{self.sub}" if self.sub else self.kind.plural


@dataclass(frozen=True)
class Request:
    method: str
    route: Route
    query: dict[str, str]
    body: bytes
    content_type: str  # media type only, parameters dropped
    accept: str


def not_found_path() -> ApiError:
    return ApiError(404, "NotFound", "the server could not find the requested resource")


def parse_route(path: str) -> Route | None:
    parts = [p for p in path.split("/") if p]
    if len(parts) >= 2 and parts[0] == "api":
        group, version, rest = "", parts[1], parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    namespace: str | None = None
    if (len(rest) >= 3 and rest[0] == "namespaces"
            and resources.by_path(group, version, rest[2]) is not None):
        namespace, rest = unquote(rest[1]), rest[2:]
    if not rest:
        return None
    kind = resources.by_path(group, version, rest[0])
    if kind is None or (namespace is not None and not kind.namespaced):
        return None
    name = unquote(rest[1]) if len(rest) > 1 else None
    sub = rest[2] if len(rest) > 2 else None
    if sub is not None and sub not in _SUBRESOURCES:
        return None
    if len(rest) > 3 and sub != "proxy":
        return None
    tail = "/".join(rest[3:]) + ("/" if path.endswith("/") and len(rest) > 3 else "")
    return Route(kind, version, namespace, name, sub, tail)


def verb_of(method: str, route: Route, query: dict[str, str]) -> str:
    """The RBAC verb of a request; raises 405/404 for what the kind does not serve."""
    k = route.kind
    if route.sub == "proxy":
        if k.kind != "Service" or route.name is None or route.namespace is None:
            raise not_found_path()
        return "get" if method in ("GET", "HEAD") else _VERB_BY_METHOD.get(method, "get")
    if route.name is None:
        if method == "GET":
            verb = "watch" if query.get("watch") in ("true", "1") else "list"
        else:
            verb = {"POST": "create", "DELETE": "deletecollection"}.get(method, "")
    else:
        verb = _VERB_BY_METHOD.get(method, "")
    if route.sub is None and (not verb or verb not in k.verbs):
        raise method_not_allowed()
    served = {"status": k.status, "scale": k.scale, "log": k.kind == "Pod",
              "token": k.kind == "ServiceAccount", "portforward": k.kind == "Pod", None: True}
    if not served.get(route.sub, False):
        raise not_found_path()
    if route.sub == "portforward":  # POST: kubectl's SPDY upgrade; GET: a websocket upgrade
        if verb not in ("create", "get"):
            raise method_not_allowed()
        return verb
    if route.sub == "token":  # TokenRequest: create-only
        if verb != "create":
            raise method_not_allowed()
        return verb
    if route.sub is not None and verb not in ("get", "update", "patch"):
        raise method_not_allowed()
    return verb


def parse_body(raw: bytes, content_type: str) -> Any:
    if content_type == protobuf.MEDIA_TYPE:
        return protobuf.decode(raw)
    try:
        return json.loads(raw or b"null")
    except ValueError:
        if content_type in ("application/yaml", "application/apply-patch+yaml"):
            return _yaml(raw)
        raise bad_request("the request body is not valid JSON") from None


def _yaml(raw: bytes) -> Any:
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    try:
        return YAML(typ="safe").load(raw.decode())
    except (YAMLError, UnicodeDecodeError):
        raise bad_request("the request body is not valid JSON or YAML") from None


def out(route: Route, obj: Obj) -> Obj:
    """An object as served through ``route``'s version (ESO v1beta1 is an alias of v1)."""
    if route.version != route.kind.version:
        obj["apiVersion"] = route.kind.api_version_for(route.version)
    return obj


def scale_of(obj: Obj) -> Obj:
    md, spec, status = obj["metadata"], obj.get("spec") or {}, obj.get("status") or {}
    return {"kind": "Scale", "apiVersion": "autoscaling/v1",
            "metadata": {k: md[k] for k in ("name", "namespace", "uid", "resourceVersion",
                                            "creationTimestamp") if k in md},
            "spec": {"replicas": spec.get("replicas", 0)},
            "status": {"replicas": status.get("replicas", 0),
                       "selector": spec_to_query(spec.get("selector"))}}


def serve(store: Store, verb: str, req: Request) -> tuple[int, Any]:
    """Run one non-streaming verb; (HTTP status, JSON document)."""
    route = req.route
    if verb == "list":
        return 200, _list(store, req)
    if verb == "deletecollection":
        return 200, _delete_collection(store, req)
    if verb == "create":
        if route.name is not None:
            raise method_not_allowed()
        return 201, out(route, store.create(route.kind.kind, _body_object(req)))
    assert route.name is not None
    if verb == "get":
        obj = store.get(route.kind.kind, route.namespace, route.name)
        if route.sub == "scale":
            return 200, scale_of(obj)
        obj = out(route, obj)
        if tables.wants_table(req.accept):
            return 200, tables.to_table(route.kind, [obj], store.resource_version,
                                        req.query.get("includeObject"))
        return 200, obj
    if verb == "update":
        body = _body_object(req)
        if route.sub == "scale":
            return 200, scale_of(_set_replicas(store, route, body))
        return 200, out(route, store.update(route.kind.kind, body, subresource=route.sub))
    if verb == "patch":
        return 200, _patch(store, req)
    if verb == "delete":
        return 200, _delete(store, req)
    raise method_not_allowed()


def _list(store: Store, req: Request) -> Obj:
    route = req.route
    items, rv = store.list(route.kind.kind, route.namespace,
                           label_selector=req.query.get("labelSelector"),
                           field_selector=req.query.get("fieldSelector"))
    items = [out(route, o) for o in items]
    if tables.wants_table(req.accept):
        return tables.to_table(route.kind, items, rv, req.query.get("includeObject"))
    return {"kind": route.kind.list_kind, "apiVersion": route.kind.api_version_for(route.version),
            "metadata": {"resourceVersion": rv}, "items": items}


def _body_object(req: Request) -> Obj:
    route = req.route
    body = parse_body(req.body, req.content_type)
    if not isinstance(body, dict):
        raise bad_request("the request body must be a JSON object")
    kind = body.get("kind")
    if kind not in (None, "", route.kind.kind) and route.sub != "scale":
        raise bad_request(f"the body kind {kind!r} does not match the URL ({route.kind.kind})")
    md = body.setdefault("metadata", {})
    if not isinstance(md, dict):
        raise bad_request("metadata must be an object")
    if route.kind.namespaced:
        if md.get("namespace") not in (None, "", route.namespace):
            raise bad_request("the namespace of the provided object does not match the "
                              "namespace sent on the request")
        md["namespace"] = route.namespace
    if route.name is not None:
        if md.get("name") not in (None, "", route.name):
            raise bad_request(f"the name of the object ({md.get('name')}) does not match the "
                              f"name on the URL ({route.name})")
        md["name"] = route.name
    return body


def _set_replicas(store: Store, route: Route, scale: Obj) -> Obj:
    assert route.name is not None
    replicas = (scale.get("spec") or {}).get("replicas")
    if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
        raise ApiError(422, "Invalid", "spec.replicas: Invalid value: must be an integer >= 0")
    patch: Obj = {"spec": {"replicas": replicas}}
    rv = (scale.get("metadata") or {}).get("resourceVersion")
    if rv:
        patch["metadata"] = {"resourceVersion": rv}
    return store.patch(route.kind.kind, route.namespace, route.name, patch, "merge")


def _patch(store: Store, req: Request) -> Obj:
    route = req.route
    assert route.name is not None
    patch_type = PATCH_TYPES.get(req.content_type)
    if patch_type is None:
        raise ApiError(415, "UnsupportedMediaType",
                       "the body of the request was in an unknown format - accepted media "
                       f"types include: {', '.join(PATCH_TYPES)}")
    body = parse_body(req.body, req.content_type)
    if route.sub == "scale":
        current = scale_of(store.get(route.kind.kind, route.namespace, route.name))
        try:
            scaled = apply_patch(current, body, patch_type)
        except PatchError as exc:
            raise bad_request(f"invalid patch: {exc}") from None
        return scale_of(_set_replicas(store, route, scaled))
    try:
        obj = store.patch(route.kind.kind, route.namespace, route.name, body, patch_type,
                          subresource=route.sub)
    except ApiError as err:
        # server-side apply creates what is not there yet
        if err.code != 404 or patch_type != "apply" or route.sub is not None:
            raise
        obj = store.create(route.kind.kind, _body_object(req))
    return out(route, obj)


def _delete(store: Store, req: Request) -> Obj:
    route = req.route
    assert route.name is not None
    body = parse_body(req.body, req.content_type) if req.body else None
    propagation = req.query.get("propagationPolicy") or (
        body.get("propagationPolicy") if isinstance(body, dict) else None) or "Background"
    gone = store.delete(route.kind.kind, route.namespace, route.name,
                        propagation=str(propagation))
    if route.kind.kind == "Pod":  # as Kubernetes: pods come back whole, others as a Status
        return out(route, gone)
    details: Obj = {"name": route.name, "kind": route.kind.plural,
                    "uid": (gone.get("metadata") or {}).get("uid")}
    if route.kind.group:
        details["group"] = route.kind.group
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
            "details": details}


def _delete_collection(store: Store, req: Request) -> Obj:
    route = req.route
    items, _ = store.list(route.kind.kind, route.namespace,
                          label_selector=req.query.get("labelSelector"),
                          field_selector=req.query.get("fieldSelector"))
    gone = []
    for obj in items:
        md = obj["metadata"]
        try:
            gone.append(out(route, store.delete(route.kind.kind, md.get("namespace"),
                                                md["name"])))
        except ApiError as err:
            if err.code != 404:
                raise
    return {"kind": route.kind.list_kind, "apiVersion": route.kind.api_version_for(route.version),
            "metadata": {"resourceVersion": store.resource_version}, "items": gone}
