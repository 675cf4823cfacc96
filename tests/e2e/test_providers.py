"""StatefulSet (OnDelete) and DaemonSet providers on the lab, checked from outside the tool.

The shop only has a Deployment provider, so this module adds two credentials at test time,
as a user would: a KV path per credential seeded through OpenBao's HTTP API, an
ExternalSecret (through the lab's SecretStore ``dragonfly/openbao``) with its target Secret,
and a provider that reads the Secret into ``--requirepass`` — a 2-replica StatefulSet with
``updateStrategy: OnDelete`` and a DaemonSet — all applied with kubectl.  The chain file
(a temp file) names only these credentials and no services: a provider-only chain.

What is asserted comes from outside ``rotate``: a kubectl watch on the pods (the order in
which StatefulSet pods were replaced), pod uids, and a raw Redis AUTH against every pod IP.
"""

from __future__ import annotations

import json
import secrets
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.labtools import Lab, redis_auth
from tests.support.polling import eventually

pytestmark = pytest.mark.lab

NS = "dragonfly"
STS, DS, DSO = "kv-sts", "kv-ds", "kv-dso"  # DSO: a DaemonSet with OnDelete


def _credential(name: str, kind: str) -> str:
    return f"""
  {name}:
    backend: {{path: test/{name}, key: password}}
    generate: {{length: 32, alphabet: alnum}}
    externalSecret: {{namespace: {NS}, name: {name}}}
    secret: {{namespace: {NS}, name: {name}-secret, key: password}}
    providers: [{{kind: {kind}, namespace: {NS}, name: {name}}}]
    strategy: restart
"""


CREDENTIALS = (_credential(STS, "StatefulSet") + _credential(DS, "DaemonSet")
               + _credential(DSO, "DaemonSet"))
CHAIN = f"""apiVersion: rotate/v1
kind: Chain
backend: {{kvMount: secret, auth: {{method: token}}}}
cluster: {{lockNamespace: rotate-system}}
configCenter: {{urlEnv: CONFIG_CENTER_URL, tokenEnv: CONFIG_CENTER_TOKEN}}
defaults: {{timeout: 30s, maxParallel: 3, reloaderGrace: 2s}}
credentials:{CREDENTIALS}"""


def _external_secret(name: str) -> str:
    return f"""apiVersion: external-secrets.io/v1
kind: ExternalSecret
metadata: {{name: {name}, namespace: {NS}}}
spec:
  refreshInterval: 1h
  refreshPolicy: Periodic
  secretStoreRef: {{name: openbao, kind: SecretStore}}
  target: {{name: {name}-secret, creationPolicy: Owner}}
  data:
    - secretKey: password
      remoteRef: {{key: test/{name}, property: password}}
"""


def _pod_template(name: str) -> str:
    return f"""  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      containers:
        - name: redis
          image: redis:7.2
          args: ["--requirepass", "$(REDIS_PASSWORD)", "--port", "6379"]
          env:
            - name: REDIS_PASSWORD
              valueFrom: {{secretKeyRef: {{name: {name}-secret, key: password}}}}
          ports: [{{name: redis, containerPort: 6379}}]
          readinessProbe: {{tcpSocket: {{port: 6379}}, periodSeconds: 1}}
"""


WORKLOADS = f"""apiVersion: apps/v1
kind: StatefulSet
metadata: {{name: {STS}, namespace: {NS}}}
spec:
  replicas: 2
  serviceName: {STS}
  updateStrategy: {{type: OnDelete}}
{_pod_template(STS)}---
apiVersion: apps/v1
kind: DaemonSet
metadata: {{name: {DS}, namespace: {NS}}}
spec:
{_pod_template(DS)}---
apiVersion: apps/v1
kind: DaemonSet
metadata: {{name: {DSO}, namespace: {NS}}}
spec:
  updateStrategy: {{type: OnDelete}}
{_pod_template(DSO)}"""


@dataclass(frozen=True)
class Providers:
    chain: Path


def pods(lab: Lab, app: str) -> list[dict[str, Any]]:
    return list(lab.kjson("get", "pods", "-n", NS, "-l", f"app={app}")["items"])


def kv_password(lab: Lab, name: str) -> str:
    r = lab.bao("GET", f"secret/data/test/{name}")
    r.raise_for_status()
    return str(r.json()["data"]["data"]["password"])


def ready(pod: dict[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


def all_accept(lab: Lab, app: str, count: int, password: str) -> list[dict[str, Any]] | None:
    """The app's pods when there are ``count``, all Ready and accepting ``password``."""
    items = pods(lab, app)
    if len(items) != count or not all(ready(p) for p in items):
        return None
    if not all(redis_auth(p["status"]["podIP"], 6379, password) for p in items):
        return None
    return items


@pytest.fixture(scope="module")
def providers(lab: Lab, tmp_path_factory: pytest.TempPathFactory) -> Providers:
    tmp = tmp_path_factory.mktemp("providers")
    initial = {name: secrets.token_hex(16) for name in (STS, DS, DSO)}
    for name, value in initial.items():
        lab.bao("POST", f"secret/data/test/{name}", json={"data": {"password": value}}
                ).raise_for_status()
    manifests = tmp / "external-secrets.yaml"
    manifests.write_text("---\n".join(_external_secret(n) for n in (STS, DS, DSO)))
    lab.kubectl("apply", "-f", str(manifests))
    def synced() -> bool | None:  # the Secrets exist before the pods read them
        return True if all(lab.secret_value(NS, f"{n}-secret", "password") == v
                           for n, v in initial.items()) else None

    eventually(synced, 10, "the ExternalSecrets' target Secrets")
    workloads = tmp / "workloads.yaml"
    workloads.write_text(WORKLOADS)
    lab.kubectl("apply", "-f", str(workloads))
    eventually(lambda: all_accept(lab, STS, 2, initial[STS]), 20, "StatefulSet pods ready")
    eventually(lambda: all_accept(lab, DS, 1, initial[DS]), 20, "DaemonSet pod ready")
    eventually(lambda: all_accept(lab, DSO, 1, initial[DSO]), 20, "OnDelete DaemonSet ready")
    chain = tmp / "rotate.yaml"
    chain.write_text(CHAIN)
    return Providers(chain)


class PodWatch:
    """``kubectl get pods --watch-only``: every pod event, in the API server's order."""

    def __init__(self, lab: Lab, selector: str) -> None:
        self.proc = subprocess.Popen(
            ["kubectl", "get", "pods", "-n", NS, "-l", selector, "--watch-only",
             "--output-watch-events", "-o", "json"],
            env=lab.process_env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.chunks: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.chunks.append(line)

    def seen(self, needle: str) -> bool | None:
        return True if needle in "".join(self.chunks) else None

    def stop(self) -> list[tuple[str, str, str]]:
        """(event type, pod name, uid) for every event seen; stops kubectl (by its pid)."""
        self.proc.terminate()
        self.proc.wait(timeout=10)
        self.reader.join(timeout=10)
        events: list[tuple[str, str, str]] = []
        decoder, text, pos = json.JSONDecoder(), "".join(self.chunks), 0
        while True:
            while pos < len(text) and text[pos].isspace():
                pos += 1
            if pos >= len(text):
                return events
            ev, pos = decoder.raw_decode(text, pos)
            md = ev["object"]["metadata"]
            events.append((ev["type"], md["name"], md["uid"]))


@pytest.fixture
def watch(lab: Lab) -> Iterator[PodWatch]:
    w = PodWatch(lab, f"app in ({STS},{DS})")
    try:
        yield w
    finally:
        if w.proc.poll() is None:
            w.stop()


def test_plan_names_the_ondelete_trap(lab: Lab, providers: Providers) -> None:
    res = lab.rotate(STS, "--chain", str(providers.chain))
    assert res.code == 0, res.output
    assert "OnDelete" in res.output
    assert "delete pods in reverse ordinal order" in res.output


def test_ondelete_statefulset_and_daemonset_providers_rotate(
        lab: Lab, providers: Providers, watch: PodWatch) -> None:
    before = {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods(lab, STS) + pods(lab, DS)}
    old = {name: kv_password(lab, name) for name in (STS, DS)}
    # The watch is live once it reports a change made after it started.
    lab.kubectl("annotate", "pod", "-n", NS, f"{STS}-0", "e2e.rotate.dev/watch=live")
    eventually(lambda: watch.seen("e2e.rotate.dev/watch"), 10, "the pod watch to be live")

    for name in (STS, DS):
        res = lab.rotate(name, "--confirm", "--chain", str(providers.chain), timeout=60)
        assert res.code == 0, res.output
    new = {name: kv_password(lab, name) for name in (STS, DS)}
    assert new[STS] != old[STS] and new[DS] != old[DS]

    sts_pods = eventually(lambda: all_accept(lab, STS, 2, new[STS]), 10, "sts on new password")
    ds_pods = eventually(lambda: all_accept(lab, DS, 1, new[DS]), 10, "ds on new password")
    for p in sts_pods + ds_pods:
        assert not redis_auth(p["status"]["podIP"], 6379, old[p["metadata"]["labels"]["app"]])
    events = watch.stop()

    # Every StatefulSet pod was replaced, kv-sts-1 before kv-sts-0 (reverse ordinal order).
    assert {p["metadata"]["name"] for p in sts_pods} == {f"{STS}-0", f"{STS}-1"}
    assert all(p["metadata"]["uid"] != before[p["metadata"]["name"]] for p in sts_pods)
    sts_deleted = [n for t, n, _ in events if t == "DELETED" and n.startswith(STS)]
    sts_created = [n for t, n, uid in events if t == "ADDED" and n.startswith(STS)
                   and uid not in before.values()]
    assert sts_deleted == [f"{STS}-1", f"{STS}-0"], events
    assert sts_created == [f"{STS}-1", f"{STS}-0"], events

    # The DaemonSet rolled exactly once: one pod gone, one new pod.
    [ds_pod] = ds_pods
    assert ds_pod["metadata"]["uid"] not in before.values()
    ds_deleted = [n for t, n, _ in events if t == "DELETED" and n.startswith(DS)]
    ds_created = {uid for t, n, uid in events if t == "ADDED" and n.startswith(DS)
                  and uid not in before.values()}
    assert len(ds_deleted) == 1 and ds_created == {ds_pod["metadata"]["uid"]}, events
    ds = lab.kjson("get", "daemonset", "-n", NS, DS)
    assert ds["status"]["updatedNumberScheduled"] == ds["status"]["numberAvailable"] == 1


def test_ondelete_daemonset_provider_is_rolled_by_deleting_its_pod(
        lab: Lab, providers: Providers) -> None:
    plan = lab.rotate(DSO, "--chain", str(providers.chain))
    assert plan.code == 0, plan.output
    assert "daemonset-ondelete" in plan.output and "one at a time" in plan.output
    [before] = pods(lab, DSO)
    old = kv_password(lab, DSO)
    res = lab.rotate(DSO, "--confirm", "--chain", str(providers.chain), timeout=60)
    assert res.code == 0, res.output
    new = kv_password(lab, DSO)
    [after] = eventually(lambda: all_accept(lab, DSO, 1, new), 10, "the new DaemonSet pod")
    assert after["metadata"]["uid"] != before["metadata"]["uid"]
    assert not redis_auth(after["status"]["podIP"], 6379, old)
