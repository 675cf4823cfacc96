"""The lab API server through the real, unmodified ``kubectl`` binary."""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.support.apiserver import ApiLab, deployment
from tests.support.polling import eventually

KUBECTL = shutil.which("kubectl")
pytestmark = [pytest.mark.kubectl,
              pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")]


def kubectl(lab: ApiLab, *args: str, context: str = "lab",
            timeout: float = 20) -> subprocess.CompletedProcess[str]:
    assert KUBECTL is not None
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    env["HOME"] = str(lab.kubeconfig.parent)  # discovery cache stays inside the test's tmp
    return subprocess.run([KUBECTL, "--kubeconfig", str(lab.kubeconfig), "--context", context,
                           *args], capture_output=True, text=True, timeout=timeout, env=env)


def ok(lab: ApiLab, *args: str, context: str = "lab") -> str:
    out = kubectl(lab, *args, context=context)
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.fixture(scope="module")
def shop(apiserver: ApiLab) -> str:
    apiserver.store.load_manifests([
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}},
        deployment("web", "shop", tier="fe"),
        deployment("api", "shop", tier="be"),
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db", "namespace": "shop"},
         "stringData": {"password": "pw"}},
        {"apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
         "metadata": {"name": "db", "namespace": "shop"},
         "spec": {"refreshInterval": "1h", "secretStoreRef": {"name": "bao"}}},
    ])
    return "shop"


def test_get_variants(apiserver: ApiLab, shop: str) -> None:
    table = ok(apiserver, "get", "deploy", "-n", shop)
    assert table.splitlines()[0].split() == ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]
    assert {line.split()[0] for line in table.splitlines()[1:]} == {"api", "web"}
    everywhere = ok(apiserver, "get", "deploy", "-A")
    assert everywhere.splitlines()[0].split()[0] == "NAMESPACE"
    assert "shop" in everywhere
    assert ok(apiserver, "get", "deploy", "-A", "-l", "tier=fe", "-o", "name").split() == [
        "deployment.apps/web"]
    doc = json.loads(ok(apiserver, "get", "deploy", "web", "-n", shop, "-o", "json"))
    assert doc["kind"] == "Deployment" and doc["metadata"]["generation"] == 1
    yaml_text = ok(apiserver, "get", "deploy", "web", "-n", shop, "-o", "yaml")
    assert "kind: Deployment" in yaml_text and "name: web" in yaml_text
    assert "No resources found" in kubectl(apiserver, "get", "pods", "-n", shop).stderr
    resources = ok(apiserver, "api-resources")
    for kind in ("ExternalSecret", "SecretStore", "ClusterSecretStore", "Lease", "Deployment"):
        assert kind in resources
    assert "external-secrets.io/v1" in resources


def test_annotate_and_overwrite(apiserver: ApiLab, shop: str) -> None:
    ok(apiserver, "annotate", "externalsecret", "db", "-n", shop, "force-sync=1")
    refused = kubectl(apiserver, "annotate", "externalsecret", "db", "-n", shop, "force-sync=2")
    assert refused.returncode != 0 and "--overwrite" in refused.stderr
    ok(apiserver, "annotate", "externalsecret", "db", "-n", shop, "force-sync=2", "--overwrite")
    es = apiserver.store.get("ExternalSecret", shop, "db")
    assert es["metadata"]["annotations"] == {"force-sync": "2"}
    assert es["metadata"]["generation"] == 1


def _fake_rollout(lab: ApiLab, ns: str, name: str, generation: int, served: int) -> None:
    """Stand-in for the deployment controller: once kubectl is watching, report the
    generation as rolled out."""
    eventually(lambda: lab.server.watches_served > served or None, 10, "kubectl's watch")

    def done(d: dict[str, Any]) -> None:
        replicas = d["spec"]["replicas"]
        d["status"] = {"observedGeneration": generation, "replicas": replicas,
                       "updatedReplicas": replicas, "readyReplicas": replicas,
                       "availableReplicas": replicas}

    lab.store.mutate("Deployment", ns, name, done, subresource="status")


def test_rollout_restart_status_and_history(apiserver: ApiLab, shop: str) -> None:
    before = apiserver.store.get("Deployment", shop, "api")
    assert "restarted" in ok(apiserver, "rollout", "restart", "deployment/api", "-n", shop)
    after = apiserver.store.get("Deployment", shop, "api")
    assert after["metadata"]["generation"] == before["metadata"]["generation"] + 1
    assert "kubectl.kubernetes.io/restartedAt" in after["spec"]["template"]["metadata"][
        "annotations"]
    assert after["spec"]["template"]["spec"] == before["spec"]["template"]["spec"]

    faker = threading.Thread(target=_fake_rollout, daemon=True,
                             args=(apiserver, shop, "api", after["metadata"]["generation"],
                                   apiserver.server.watches_served))
    faker.start()
    status = kubectl(apiserver, "rollout", "status", "deployment/api", "-n", shop,
                     "--timeout=15s")
    faker.join(5)
    assert status.returncode == 0, status.stderr
    assert "Waiting for deployment spec update to be observed" in status.stdout
    assert 'deployment "api" successfully rolled out' in status.stdout

    owner = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "api",
             "uid": after["metadata"]["uid"], "controller": True}
    for revision in (1, 2):
        rs = deployment(f"api-{revision}", shop)
        rs["kind"] = "ReplicaSet"
        rs["metadata"]["labels"] = {"app": "api"}
        rs["metadata"]["annotations"] = {"deployment.kubernetes.io/revision": str(revision)}
        rs["metadata"]["ownerReferences"] = [owner]
        rs["spec"]["selector"] = {"matchLabels": {"app": "api"}}
        rs["spec"]["template"]["metadata"]["labels"] = {"app": "api"}
        apiserver.store.create("ReplicaSet", rs)
    history = ok(apiserver, "rollout", "history", "deployment/api", "-n", shop)
    revisions = [line.split()[0] for line in history.splitlines()[2:] if line.strip()]
    assert revisions == ["1", "2"]


def test_service_proxy_raw(apiserver: ApiLab) -> None:
    out = json.loads(ok(apiserver, "get", "--raw",
                        "/api/v1/namespaces/default/services/web:80/proxy/readyz"))
    assert out == {"method": "GET", "path": "/readyz", "body": ""}
    down = kubectl(apiserver, "get", "--raw", "/api/v1/namespaces/default/services/down:80/proxy/")
    assert down.returncode == 1 and "ServiceUnavailable" in down.stderr


def test_errors(apiserver: ApiLab, shop: str, tmp_path: Path) -> None:
    missing = kubectl(apiserver, "get", "deploy", "nope", "-n", shop)
    assert missing.returncode == 1 and "NotFound" in missing.stderr
    assert 'deployments.apps "nope" not found' in missing.stderr
    denied = kubectl(apiserver, "get", "secret", "db", "-n", shop, context="lab-restricted")
    assert denied.returncode == 1 and "Forbidden" in denied.stderr
    assert 'User "lab-restricted" cannot get resource "secrets"' in denied.stderr
    denied = kubectl(apiserver, "rollout", "restart", "deployment/web", "-n", shop,
                     context="lab-restricted")
    assert denied.returncode == 1 and "forbidden" in denied.stderr
    assert ok(apiserver, "get", "deploy", "web", "-n", shop, "-o", "name",
              context="lab-restricted").strip() == "deployment.apps/web"
    wrong = kubectl(apiserver, "--token", "wrong", "get", "pods")
    assert wrong.returncode == 1 and "Unauthorized" in wrong.stderr
    bad = deployment("bad", shop)
    bad["spec"]["selector"] = {"matchLabels": {"app": "other"}}
    manifest = tmp_path / "bad.json"
    manifest.write_text(json.dumps(bad))
    invalid = kubectl(apiserver, "create", "-f", str(manifest))
    assert invalid.returncode == 1 and "is invalid" in invalid.stderr
    assert "selector` does not match template `labels`" in invalid.stderr


def test_create_and_apply_files(apiserver: ApiLab, shop: str, tmp_path: Path) -> None:
    manifest = tmp_path / "cm.json"
    manifest.write_text(json.dumps({"apiVersion": "v1", "kind": "ConfigMap",
                                    "metadata": {"name": "settings", "namespace": shop},
                                    "data": {"a": "1"}}))
    ok(apiserver, "create", "-f", str(manifest))
    manifest.write_text(json.dumps({"apiVersion": "v1", "kind": "ConfigMap",
                                    "metadata": {"name": "settings", "namespace": shop},
                                    "data": {"a": "2"}}))
    ok(apiserver, "apply", "-f", str(manifest))
    assert apiserver.store.get("ConfigMap", shop, "settings")["data"] == {"a": "2"}
    ok(apiserver, "delete", "-f", str(manifest))
    assert apiserver.store.list("ConfigMap", shop)[0] == []


def test_logs_and_server_side_apply(apiserver: ApiLab, shop: str, tmp_path: Path) -> None:
    apiserver.store.create("Pod", {"metadata": {"name": "p", "namespace": shop},
                                   "spec": {"containers": [{"name": "c", "image": "x"}]}})
    assert ok(apiserver, "logs", "p", "-n", shop) == f"{shop}/p/c line 1\nline 2\n"
    assert ok(apiserver, "logs", "p", "-n", shop, "--tail=1") == "line 2\n"
    assert "NotFound" in kubectl(apiserver, "logs", "nope", "-n", shop).stderr
    manifest = tmp_path / "ssa.json"
    manifest.write_text(json.dumps({"apiVersion": "v1", "kind": "ConfigMap",
                                    "metadata": {"name": "ssa", "namespace": shop},
                                    "data": {"a": "1"}}))
    ok(apiserver, "apply", "--server-side", "-f", str(manifest))
    assert apiserver.store.get("ConfigMap", shop, "ssa")["data"] == {"a": "1"}


def test_auth_can_i_and_stale_replace(apiserver: ApiLab, shop: str, tmp_path: Path) -> None:
    assert kubectl(apiserver, "auth", "can-i", "get", "secrets", "-n", shop).stdout.strip() == (
        "yes")
    no = kubectl(apiserver, "auth", "can-i", "get", "secrets", "-n", shop,
                 context="lab-restricted")
    assert (no.returncode, no.stdout.strip()) == (1, "no")
    stale = apiserver.store.get("Deployment", shop, "web")
    apiserver.store.patch("Deployment", shop, "web", {"metadata": {"labels": {"v": "2"}}},
                          "merge")
    manifest = tmp_path / "stale.json"
    manifest.write_text(json.dumps(stale))
    conflict = kubectl(apiserver, "replace", "-f", str(manifest))
    assert conflict.returncode == 1 and "Conflict" in conflict.stderr
    assert "the object has been modified" in conflict.stderr


def test_get_watch_prints_table_rows(apiserver: ApiLab, shop: str) -> None:
    assert KUBECTL is not None
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    env["HOME"] = str(apiserver.kubeconfig.parent)
    served = apiserver.server.watches_served
    proc = subprocess.Popen([KUBECTL, "--kubeconfig", str(apiserver.kubeconfig), "get",
                             "deploy", "web", "-n", shop, "-w"], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, env=env)
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:
        for line in proc.stdout or []:
            lines.put(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert lines.get(timeout=10).split()[:2] == ["NAME", "READY"]
        assert lines.get(timeout=10).split()[0] == "web"
        # kubectl drops the first (initial ADDED) event of a single-object watch: change the
        # object only once that watch is open, or the change is what gets dropped
        eventually(lambda: apiserver.server.watches_served > served or None, 10,
                   "kubectl's watch")
        apiserver.store.patch("Deployment", shop, "web", {"spec": {"replicas": 7}}, "merge")
        assert lines.get(timeout=10).split()[:2] == ["web", "0/7"]
    finally:
        proc.kill()
        proc.wait(5)
        reader.join(5)


def test_a_watch_ends_when_its_client_goes_away(apiserver: ApiLab) -> None:
    assert KUBECTL is not None
    before, served = apiserver.server.open_watches, apiserver.server.watches_served
    proc = subprocess.Popen([KUBECTL, "--kubeconfig", str(apiserver.kubeconfig), "get", "cm",
                             "-A", "-w"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "HOME": str(apiserver.kubeconfig.parent)})
    try:
        eventually(lambda: apiserver.server.watches_served > served or None, 10, "the watch")
    finally:
        proc.kill()
        proc.wait(5)
    eventually(lambda: apiserver.server.open_watches <= before or None, 5,
               "the server to notice the client left")


def test_typed_create_commands_speak_protobuf(apiserver: ApiLab) -> None:
    ok(apiserver, "create", "namespace", "typed")
    assert apiserver.store.get("Namespace", None, "typed")["status"] == {"phase": "Active"}
    ok(apiserver, "create", "secret", "generic", "pw", "-n", "typed", "--from-literal=a=b")
    secret = apiserver.store.get("Secret", "typed", "pw")
    assert (secret["data"], secret["type"]) == ({"a": "Yg=="}, "Opaque")
    ok(apiserver, "create", "configmap", "cfg", "-n", "typed", "--from-literal=k=v")
    assert apiserver.store.get("ConfigMap", "typed", "cfg")["data"] == {"k": "v"}
    refused = kubectl(apiserver, "create", "deployment", "d", "-n", "typed", "--image=x")
    assert refused.returncode == 1 and "send Deployment as JSON" in refused.stderr
