"""The lab API server through the official ``kubernetes`` Python client (and raw HTTPS)."""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config, watch
from rotate_lab.cluster.api import kubeconfig, tls
from rotate_lab.cluster.api.apiserver import ApiServer
from rotate_lab.cluster.api.auth import Identity
from rotate_lab.cluster.api.store import Store

from tests.support.apiserver import (
    ADMIN_TOKEN,
    RESTRICTED_TOKEN,
    ApiLab,
    deployment,
)


@pytest.fixture(scope="module")
def api(apiserver: ApiLab) -> Iterator[Any]:
    c = _any(config.new_client_from_config)(config_file=str(apiserver.kubeconfig), context="lab")
    yield c
    c.close()


@pytest.fixture(scope="module")
def restricted(apiserver: ApiLab) -> Iterator[Any]:
    c = _any(config.new_client_from_config)(config_file=str(apiserver.kubeconfig),
                                      context="lab-restricted")
    yield c
    c.close()


#: the generated client's signatures are stricter than the dicts it accepts at runtime
_Watch: Any = watch.Watch


def _any(api: object) -> Any:
    return api


def ns(api: client.ApiClient, name: str) -> str:
    _any(client.CoreV1Api(api)).create_namespace(client.V1Namespace(
        metadata=client.V1ObjectMeta(name=name)))
    return name


def body(exc: client.ApiException) -> dict[str, Any]:
    return json.loads(exc.body or "null")  # type: ignore[no-any-return]


def test_discovery(api: client.ApiClient) -> None:
    assert _any(client.VersionApi(api)).get_code().major == "1"
    assert _any(client.CoreApi(api)).get_api_versions().versions == ["v1"]
    groups = {g.name: g for g in _any(client.ApisApi(api)).get_api_versions().groups}
    assert {"apps", "coordination.k8s.io", "authorization.k8s.io", "external-secrets.io"} <= set(
        groups)
    assert groups["external-secrets.io"].preferred_version.version == "v1"
    names = {r.name for r in _any(client.AppsV1Api(api)).get_api_resources().resources}
    assert {"deployments", "deployments/status", "deployments/scale", "statefulsets"} <= names


def test_core_crud_conflict_and_selectors(api: client.ApiClient) -> None:
    core = _any(client.CoreV1Api(api))
    n = ns(api, "crud")
    cm = core.create_namespaced_config_map(n, client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name="a", labels={"tier": "fe"}), data={"k": "1"}))
    core.create_namespaced_config_map(n, {"metadata": {"name": "b", "labels": {"tier": "be"}}})
    assert cm.metadata.uid and cm.metadata.creation_timestamp
    assert [c.metadata.name for c in core.list_namespaced_config_map(
        n, label_selector="tier in (fe),tier!=be").items] == ["a"]
    assert [c.metadata.name for c in core.list_config_map_for_all_namespaces(
        field_selector="metadata.name=b").items] == ["b"]
    cm.data = {"k": "2"}
    fresh = core.replace_namespaced_config_map("a", n, cm)
    assert int(fresh.metadata.resource_version) > int(cm.metadata.resource_version)
    cm.data = {"k": "3"}  # cm still carries the old resourceVersion
    with pytest.raises(client.ApiException) as e:
        core.replace_namespaced_config_map("a", n, cm)
    assert e.value.status == 409 and body(e.value)["reason"] == "Conflict"
    assert core.read_namespaced_config_map("a", n).data == {"k": "2"}
    with pytest.raises(client.ApiException) as e:
        core.create_namespaced_config_map(n, {"metadata": {"name": "a"}})
    assert e.value.status == 409 and body(e.value)["reason"] == "AlreadyExists"
    core.delete_namespaced_config_map("b", n)
    with pytest.raises(client.ApiException) as e:
        core.read_namespaced_config_map("b", n)
    assert e.value.status == 404 and body(e.value)["details"]["kind"] == "configmaps"
    secret = core.create_namespaced_secret(n, client.V1Secret(
        metadata=client.V1ObjectMeta(name="s"), string_data={"password": "pw"}))
    assert secret.data == {"password": "cHc="} and secret.string_data is None


def test_deployment_generation_patch_types_and_status(api: client.ApiClient) -> None:
    apps = _any(client.AppsV1Api(api))
    n = ns(api, "gen")
    d = apps.create_namespaced_deployment(n, deployment("web", n))
    assert d.metadata.generation == 1
    d = apps.patch_namespaced_deployment("web", n, {"metadata": {"annotations": {"a": "b"}}})
    assert d.metadata.generation == 1  # metadata only
    d = apps.patch_namespaced_deployment_status("web", n, {"status": {
        "observedGeneration": 1, "replicas": 1, "readyReplicas": 1}})
    assert d.metadata.generation == 1 and d.status.ready_replicas == 1
    d = apps.patch_namespaced_deployment("web", n, {"spec": {"template": {"metadata": {
        "annotations": {"kubectl.kubernetes.io/restartedAt": "2026-01-01T00:00:00Z"}}}}})
    assert d.metadata.generation == 2
    assert d.spec.template.spec.containers[0].image == "shop:1"  # strategic: list kept
    d.spec.replicas = 3
    d.status.ready_replicas = 99  # the main resource ignores status
    d = apps.replace_namespaced_deployment("web", n, d)
    assert (d.metadata.generation, d.spec.replicas, d.status.ready_replicas) == (3, 3, 1)
    d = apps.patch_namespaced_deployment(
        "web", n, [{"op": "replace", "path": "/spec/replicas", "value": 2}])
    assert (d.metadata.generation, d.spec.replicas) == (4, 2)
    scale = apps.patch_namespaced_deployment_scale("web", n, {"spec": {"replicas": 5}})
    assert scale.spec.replicas == 5 and scale.status.selector == "app=web"


def test_validation_and_malformed_requests_change_nothing(apiserver: ApiLab,
                                                          api: client.ApiClient) -> None:
    apps = _any(client.AppsV1Api(api))
    n = ns(api, "invalid")
    rv = apiserver.store.resource_version
    bad = deployment("web", n)
    bad["spec"]["template"]["metadata"]["labels"] = {"app": "other"}
    with pytest.raises(client.ApiException) as e:
        apps.create_namespaced_deployment(n, bad)
    status = body(e.value)
    assert e.value.status == 422 and status["reason"] == "Invalid"
    assert status["details"]["causes"][0]["field"] == "spec.template.metadata.labels"
    no_selector = deployment("web", n)
    del no_selector["spec"]["selector"]
    code, doc = apiserver.raw(  # the client itself refuses to send this one
        "POST", f"/apis/apps/v1/namespaces/{n}/deployments", json.dumps(no_selector).encode(),
        {"Content-Type": "application/json"})
    assert code == 422 and "spec.selector: Required value" in doc["message"]
    with pytest.raises(client.ApiException) as e:
        _any(client.CoreV1Api(api)).create_namespaced_config_map(n, {"metadata": {}})
    assert e.value.status == 422 and "metadata.name" in body(e.value)["message"]
    code, doc = apiserver.raw("POST", f"/api/v1/namespaces/{n}/configmaps", b"{not json",
                              {"Content-Type": "application/json"})
    assert (code, doc["reason"], doc["kind"]) == (400, "BadRequest", "Status")
    code, doc = apiserver.raw("GET", f"/apis/apps/v1/namespaces/{n}/widgets")
    assert (code, doc["reason"]) == (404, "NotFound")
    code, doc = apiserver.raw("GET", "/apis/nope.io/v1")
    assert code == 404
    assert apiserver.store.resource_version == rv
    assert apps.list_namespaced_deployment(n).items == []


def test_authentication_and_authorization(apiserver: ApiLab, api: client.ApiClient,
                                          restricted: client.ApiClient) -> None:
    n = ns(api, "authz")
    _any(client.CoreV1Api(api)).create_namespaced_secret(n, {"metadata": {"name": "db"}})
    for token in (None, "wrong"):
        code, doc = apiserver.raw("GET", "/api/v1/pods", token=token)
        assert (code, doc["reason"]) == (401, "Unauthorized")
    with pytest.raises(client.ApiException) as e:
        _any(client.CoreV1Api(restricted)).read_namespaced_secret("db", n)
    assert e.value.status == 403 and body(e.value)["message"] == (
        f'secrets "db" is forbidden: User "lab-restricted" cannot get resource "secrets" in '
        f'API group "" in the namespace "{n}"')
    assert _any(client.CoreV1Api(restricted)).list_namespaced_config_map(n).items == []
    lease = {"metadata": {"name": "lock"}, "spec": {"holderIdentity": "me"}}
    with pytest.raises(client.ApiException) as e:
        _any(client.CoordinationV1Api(restricted)).create_namespaced_lease(n, lease)
    assert e.value.status == 403 and body(e.value)["reason"] == "Forbidden"
    held = _any(client.CoordinationV1Api(api)).create_namespaced_lease(n, lease)
    assert held.spec.holder_identity == "me"

    def review(c: client.ApiClient, verb: str, resource: str, group: str = "") -> bool:
        answer = _any(client.AuthorizationV1Api(c)).create_self_subject_access_review(
            client.V1SelfSubjectAccessReview(spec=client.V1SelfSubjectAccessReviewSpec(
                resource_attributes=client.V1ResourceAttributes(
                    verb=verb, resource=resource, group=group, namespace=n))))
        return bool(answer.status.allowed)

    assert review(api, "get", "secrets")
    assert not review(restricted, "get", "secrets")
    assert review(restricted, "get", "pods")
    assert not review(restricted, "patch", "deployments", "apps")
    assert not review(restricted, "create", "leases", "coordination.k8s.io")
    assert review(restricted, "patch", "externalsecrets", "external-secrets.io")
    assert RESTRICTED_TOKEN != ADMIN_TOKEN


def test_eso_custom_objects(api: client.ApiClient) -> None:
    co = _any(client.CustomObjectsApi(api))
    n = ns(api, "eso")
    es = {"apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
          "metadata": {"name": "db"},
          "spec": {"refreshInterval": "1h", "secretStoreRef": {"name": "bao"}}}
    created = co.create_namespaced_custom_object("external-secrets.io", "v1", n,
                                                 "externalsecrets", es)
    assert created["metadata"]["generation"] == 1
    patched = co.patch_namespaced_custom_object(
        "external-secrets.io", "v1", n, "externalsecrets", "db",
        {"metadata": {"annotations": {"force-sync": "1"}}})
    assert patched["metadata"]["generation"] == 1
    status = co.patch_namespaced_custom_object_status(
        "external-secrets.io", "v1", n, "externalsecrets", "db",
        {"status": {"conditions": [{"type": "Ready", "status": "True"}]}})
    assert status["status"]["conditions"][0]["status"] == "True"
    old = co.get_namespaced_custom_object("external-secrets.io", "v1beta1", n,
                                          "externalsecrets", "db")
    assert old["apiVersion"] == "external-secrets.io/v1beta1"
    assert old["metadata"]["annotations"] == {"force-sync": "1"}
    stores = co.list_cluster_custom_object("external-secrets.io", "v1", "clustersecretstores")
    assert stores["items"] == [] and stores["kind"] == "ClusterSecretStoreList"


def test_watch_from_resource_version(api: client.ApiClient) -> None:
    core = _any(client.CoreV1Api(api))
    n = ns(api, "watch")
    core.create_namespaced_config_map(n, {"metadata": {"name": "before"}})
    rv = core.list_namespaced_config_map(n).metadata.resource_version
    core.create_namespaced_config_map(n, {"metadata": {"name": "w", "labels": {"x": "1"}}})
    core.patch_namespaced_config_map("w", n, {"data": {"k": "v"}})
    core.delete_namespaced_config_map("w", n)
    seen: list[tuple[str, str]] = []
    w = _Watch()
    for ev in w.stream(core.list_namespaced_config_map, n, resource_version=rv,
                       timeout_seconds=5):
        seen.append((ev["type"], ev["object"].metadata.name))
        if len(seen) == 3:
            w.stop()
    assert seen == [("ADDED", "w"), ("MODIFIED", "w"), ("DELETED", "w")]

    # a live watch by field selector sees a later change to that object only
    got: list[dict[str, Any]] = []
    started = threading.Event()

    def follow() -> None:
        w2 = _Watch()
        for ev in w2.stream(core.list_namespaced_config_map, n,
                            field_selector="metadata.name=before", timeout_seconds=5):
            started.set()
            if ev["type"] == "MODIFIED":
                got.append(ev)
                w2.stop()

    t = threading.Thread(target=follow, daemon=True)
    t.start()
    assert started.wait(5)  # the initial synthetic ADDED arrived
    core.create_namespaced_config_map(n, {"metadata": {"name": "other"}})
    core.patch_namespaced_config_map("before", n, {"data": {"k": "later"}})
    t.join(5)
    assert got and got[0]["object"].data == {"k": "later"}


def test_service_proxy(apiserver: ApiLab, api: client.ApiClient) -> None:
    core = _any(client.CoreV1Api(api))
    text = core.connect_get_namespaced_service_proxy_with_path("web:80", "default", "readyz")
    assert json.loads(text.replace("'", '"'))["path"] == "/readyz"
    code, doc = apiserver.raw("GET", "/api/v1/namespaces/default/services/http:web:80/proxy/"
                              "a/b?x=1")
    assert (code, doc["path"], doc["method"]) == (200, "/a/b?x=1", "GET")
    code, doc = apiserver.raw("POST", "/api/v1/namespaces/default/services/web/proxy/p",
                              b"hello", {"Content-Type": "text/plain"})
    assert (code, doc["body"]) == (200, "hello")
    code, doc = apiserver.raw("GET", "/api/v1/namespaces/default/services/web:80/proxy/fail")
    assert code == 500
    code, doc = apiserver.raw("GET", "/api/v1/namespaces/default/services/down:80/proxy/")
    assert (code, doc["reason"]) == (503, "ServiceUnavailable")


def test_watch_from_an_expired_resource_version_is_410(tmp_path: Path) -> None:
    small = Store()
    small._history = deque(maxlen=2)  # so that history runs out quickly
    for i in range(4):
        small.create("ConfigMap", {"metadata": {"name": f"c{i}"}})
    material = tls.generate()
    server = ApiServer(small, tls=material, identities={ADMIN_TOKEN: Identity.admin()}).start()
    try:
        path = kubeconfig.write(tmp_path / "kubeconfig", server.url, material.ca_pem,
                                ADMIN_TOKEN, "unused")
        c = _any(config.new_client_from_config)(config_file=str(path))
        with pytest.raises(client.ApiException) as e:
            for _ in _Watch().stream(_any(client.CoreV1Api(c)).list_namespaced_config_map,
                                     "default", resource_version="1", timeout_seconds=2):
                pass
        assert e.value.status == 410 and "Expired" in str(e.value.reason)
        c.close()
    finally:
        server.stop()


def test_requests_are_counted_by_client_verb_and_resource(apiserver: ApiLab) -> None:
    """Issue 8 item 4: the lab API server counts what each client asks (lab status, bench)."""
    def rotate_counts() -> dict[str, int]:
        code, doc = apiserver.raw("GET", "/lab/api-requests")
        assert code == 200 and doc["kind"] == "ApiRequestCounts"
        return {f"{r['verb']} {r['resource']}": r["count"] for r in doc["requests"]
                if r["client"] == "rotate"}

    before = rotate_counts()
    agent = {"User-Agent": "rotate/0.1.0"}
    apiserver.raw("GET", "/api/v1/namespaces/default/secrets", headers=agent)
    apiserver.raw("GET", "/api/v1/namespaces/default/secrets/nope", headers=agent)
    apiserver.raw("GET", "/api/v1/namespaces/default/secrets?watch=true&timeoutSeconds=0",
                  headers=agent)
    after = rotate_counts()
    for key in ("list secrets", "get secrets", "watch secrets"):
        assert after.get(key, 0) == before.get(key, 0) + 1, key
    code, _ = apiserver.raw("GET", "/lab/api-requests", token=None)
    assert code == 401
