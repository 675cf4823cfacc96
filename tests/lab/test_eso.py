"""The lab's ExternalSecret controller against the real store and a real OpenBao, and Reloader.

ESO reads OpenBao through ``ctx.endpoints["openbao"]`` here (the store's server is the
cluster DNS name, which no Service controller resolves in these tests) — the same fallback
the cluster process has before its Service controller has published the ClusterIP.
"""

from __future__ import annotations

import base64
import itertools
import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import pytest
from rotate_lab.cluster.api.store import ApiError, Store
from rotate_lab.cluster.context import LabContext, Network, Profile, Resolver
from rotate_lab.cluster.controllers.eso import ExternalSecretController
from rotate_lab.cluster.controllers.reloader import (
    LAST_RELOADED_FROM,
    ReloaderController,
    data_hash,
)
from rotate_lab.faults import Faults
from rotate_lab.systems import openbao

from rotate.stages import reloader_presence
from tests.support.polling import eventually, holds

pytestmark = pytest.mark.bao

T = TypeVar("T")
NS = "dragonfly"
_names = itertools.count()


@pytest.fixture(scope="module")
def bao(tmp_path_factory: pytest.TempPathFactory) -> Iterator[openbao.BaoProcess]:
    proc = openbao.start(tmp_path_factory.mktemp("bao"))
    try:
        yield proc
    finally:
        proc.stop()


class Env:
    def __init__(self, tmp: Path, bao: openbao.BaoProcess) -> None:
        self.bao = bao
        self.store = Store()
        self.ctx = LabContext(store=self.store, dir=tmp, profile=Profile.named("fast"),
                              faults=Faults(tmp / "faults.json"), network=Network(77),
                              resolver=Resolver(tmp / "hosts"))
        self.ctx.endpoints["openbao"] = bao.addr
        self.store.create("Namespace", {"metadata": {"name": NS}})
        self.store.create("Secret", {"metadata": {"name": "openbao-token", "namespace": NS},
                                     "stringData": {"token": bao.root_token}})
        self.store.create("SecretStore", {
            "apiVersion": "external-secrets.io/v1", "kind": "SecretStore",
            "metadata": {"name": "openbao", "namespace": NS},
            "spec": {"provider": {"vault": {
                "server": "http://openbao.openbao.svc.cluster.local:8200", "path": "secret",
                "version": "v2",
                "auth": {"tokenSecretRef": {"name": "openbao-token", "key": "token"}}}}}})
        self.eso = ExternalSecretController(self.ctx)
        self.eso.start()
        self.path = f"infra/test-{next(_names)}"

    def put(self, value: str) -> None:
        openbao.put_secret(self.bao.addr, self.bao.root_token, self.path, {"password": value})

    def external_secret(self, name: str = "pw", **spec: Any) -> dict[str, Any]:
        body = {"refreshInterval": "1h", "refreshPolicy": "Periodic",
                "secretStoreRef": {"name": "openbao", "kind": "SecretStore"},
                "target": {"name": f"{name}-secret", "creationPolicy": "Owner"},
                "data": [{"secretKey": "password",
                          "remoteRef": {"key": self.path, "property": "password"}}]}
        body.update(spec)
        return self.store.create("ExternalSecret", {
            "apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
            "metadata": {"name": name, "namespace": NS}, "spec": body})

    def es(self, name: str = "pw") -> dict[str, Any]:
        return self.store.get("ExternalSecret", NS, name)

    def value(self, name: str = "pw") -> str | None:
        try:
            s = self.store.get("Secret", NS, f"{name}-secret")
        except ApiError:
            return None
        return base64.b64decode(s["data"]["password"]).decode()

    def ready(self, name: str = "pw") -> dict[str, Any]:
        conds = (self.es(name).get("status") or {}).get("conditions") or []
        return next((c for c in conds if c["type"] == "Ready"), {})

    def force_sync(self, name: str = "pw") -> None:
        self.store.mutate("ExternalSecret", NS, name, lambda o: o["metadata"].setdefault(
            "annotations", {}).update({"force-sync": str(time.time_ns())}))

    def fault(self, **on: bool) -> None:
        Faults.write(self.ctx.dir / "faults.json", {k.replace("_", "-"): v for k, v in
                                                    on.items() if v})


@pytest.fixture
def env(tmp_path: Path, bao: openbao.BaoProcess) -> Iterator[Env]:
    e = Env(tmp_path, bao)
    try:
        yield e
    finally:
        e.eso.stop()


def _rfc3339(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def test_sync_on_create_then_force_sync_follows_bao(env: Env) -> None:
    env.put("first-password-0123456789")
    created = env.external_secret()
    assert eventually(env.value, 3, "first sync") == "first-password-0123456789"
    secret = env.store.get("Secret", NS, "pw-secret")
    assert secret["metadata"]["labels"]["reconcile.external-secrets.io/managed"] == "true"
    [owner] = secret["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
        "ExternalSecret", "pw", created["metadata"]["uid"], True)
    status = eventually(lambda: env.es()["status"] if env.ready().get("status") == "True"
                        else None, 3, "Ready")
    assert env.ready()["reason"] == "SecretSynced"
    assert status["binding"] == {"name": "pw-secret"}
    assert status["syncedResourceVersion"].startswith("1-")
    first_refresh = status["refreshTime"]
    assert len(first_refresh) == 20 and first_refresh.endswith("Z")  # second precision

    # A new value in bao alone does not move the Secret before refreshInterval (1h)...
    env.put("second-password-0123456789")
    holds(lambda: env.value() == "first-password-0123456789", 0.3, "synced without trigger")
    # ...force-sync does, within about a second in the fast profile.
    trigger = time.time()
    env.force_sync()
    eventually(lambda: env.value() == "second-password-0123456789", 1.5, "force-sync")
    assert time.time() - trigger < 1.5
    # the controller writes the Secret, then the ExternalSecret's status: wait for both
    status = eventually(lambda: st if (st := env.es().get("status", {})).get(
        "refreshTime", "") >= _rfc3339(trigger) else None, 1.5, "status after force-sync")
    assert status["syncedResourceVersion"] != "" and env.ready()["status"] == "True"
    events, _ = env.store.list("Event", NS)
    reasons = {e["reason"] for e in events if e["involvedObject"]["name"] == "pw"}
    assert "Updated" in reasons
    assert not any("password-0123456789" in json.dumps(e) for e in events)


def test_periodic_refresh_interval(env: Env) -> None:
    env.put("periodic-one-0123456789")
    env.external_secret(refreshInterval="1s")
    eventually(lambda: env.value() == "periodic-one-0123456789", 3, "first sync")
    env.put("periodic-two-0123456789")
    eventually(lambda: env.value() == "periodic-two-0123456789", 4, "periodic refresh")


@pytest.mark.parametrize("spec", [{"refreshPolicy": "CreatedOnce"},
                                  {"refreshPolicy": "Periodic", "refreshInterval": "0"}],
                         ids=["CreatedOnce", "interval-0"])
def test_force_sync_is_ignored_by_the_traps(env: Env, spec: dict[str, str]) -> None:
    env.put("trap-one-0123456789")
    env.external_secret(**spec)
    eventually(lambda: env.value() == "trap-one-0123456789", 3, "first sync")
    # the Secret is written before the ExternalSecret's status: wait for the status too
    synced = eventually(lambda: env.es().get("status", {}).get("syncedResourceVersion"), 3,
                        "status of the first sync")
    env.put("trap-two-0123456789")
    env.force_sync()
    holds(lambda: env.value() == "trap-one-0123456789"
          and env.es()["status"]["syncedResourceVersion"] == synced, 1.0,
          "force-sync must be ignored")
    assert env.ready()["status"] == "True"  # Ready says nothing about the new value
    # The controller is alive: a deleted target Secret is re-created (ESO's isSecretValid).
    env.store.delete("Secret", NS, "pw-secret")
    eventually(lambda: env.value() == "trap-two-0123456789", 3, "re-creation")


def test_on_change_policy_follows_annotations(env: Env) -> None:
    env.put("onchange-one-0123456789")
    env.external_secret(refreshPolicy="OnChange", refreshInterval="1s")
    eventually(lambda: env.value() == "onchange-one-0123456789", 3, "first sync")
    env.put("onchange-two-0123456789")
    holds(lambda: env.value() == "onchange-one-0123456789", 1.5, "OnChange has no timer")
    env.force_sync()
    eventually(lambda: env.value() == "onchange-two-0123456789", 2, "annotation change")


def test_eso_stall_fault_freezes_until_cleared(env: Env) -> None:
    env.put("stall-one-0123456789")
    env.external_secret()
    eventually(lambda: env.value() == "stall-one-0123456789", 3, "first sync")
    env.fault(eso_stall=True)
    before = env.es()["status"]
    env.put("stall-two-0123456789")
    env.force_sync()
    holds(lambda: env.value() == "stall-one-0123456789" and env.es()["status"] == before,
          1.0, "a stalled ESO changes nothing")
    env.fault()
    eventually(lambda: env.value() == "stall-two-0123456789", 2, "sync after clearing")
    assert env.es()["status"]["refreshTime"] >= before["refreshTime"]


def test_eso_error_fault_reports_and_recovers(env: Env) -> None:
    env.put("error-one-0123456789")
    env.external_secret()
    eventually(lambda: env.value() == "error-one-0123456789", 3, "first sync")
    env.fault(eso_error=True)
    env.put("error-two-0123456789")
    env.force_sync()
    cond = eventually(lambda: env.ready() if env.ready().get("status") == "False" else None,
                      2, "Ready=False")
    assert cond["reason"] == "SecretSyncedError"
    assert cond["message"] == "lab fault: provider error"
    assert env.value() == "error-one-0123456789"  # the old Secret is kept
    env.fault()
    eventually(lambda: env.value() == "error-two-0123456789", 2, "sync after clearing")
    eventually(lambda: env.ready().get("status") == "True", 2, "Ready again")
    events, _ = env.store.list("Event", NS)
    failed = [e for e in events if e["reason"] == "UpdateFailed"]
    assert failed and failed[0]["type"] == "Warning"


def test_backend_error_is_reported_without_values(env: Env) -> None:
    env.put("backend-one-0123456789")
    env.external_secret()
    eventually(lambda: env.value() == "backend-one-0123456789", 3, "first sync")
    env.store.mutate("Secret", NS, "openbao-token", lambda s: s.update(
        data={"token": base64.b64encode(b"not-a-valid-token").decode()}))
    env.force_sync()
    cond = eventually(lambda: env.ready() if env.ready().get("status") == "False" else None,
                      3, "Ready=False")
    assert cond["reason"] == "SecretSyncedError"
    assert "403" in cond["message"] or "permission denied" in cond["message"]
    assert "not-a-valid-token" not in json.dumps(env.es())
    assert env.value() == "backend-one-0123456789"


# -- Reloader -------------------------------------------------------------------------------


def _deployment(name: str, annotations: dict[str, str], env_secret: str | None) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": "example/app:1"}
    if env_secret:
        container["env"] = [{"name": "PASSWORD", "valueFrom": {"secretKeyRef": {
            "name": env_secret, "key": "password"}}}]
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": NS, "annotations": annotations},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [container]}}}}


def _reloaded(store: Store, name: str) -> dict[str, Any] | None:
    d = store.get("Deployment", NS, name)
    raw = (d["spec"]["template"]["metadata"].get("annotations") or {}).get(LAST_RELOADED_FROM)
    return json.loads(raw) if raw else None


def test_reloader_rolls_annotated_workloads_once_per_change(env: Env) -> None:
    store = env.store
    store.create("Secret", {"metadata": {"name": "db", "namespace": NS},
                            "stringData": {"password": "reloader-one-0123456789"}})
    store.create("Deployment", _deployment(
        "named", {"secret.reloader.stakater.com/reload": "other, db"}, None))
    store.create("Deployment", _deployment("auto", {"reloader.stakater.com/auto": "true"}, "db"))
    store.create("Deployment", _deployment(
        "auto-unrelated", {"reloader.stakater.com/auto": "true"}, "something-else"))
    store.create("Deployment", _deployment("plain", {}, "db"))
    reloader = ReloaderController(env.ctx)
    reloader.start()
    try:
        # it shows as rotate looks for it: its Deployment and a fresh leader Lease
        dep = store.get("Deployment", "reloader", "reloader")
        assert reloader_presence.is_reloader(dep)
        lease = store.get("Lease", "reloader", "stakater-reloader-lock")
        aged = reloader_presence.lease_age(lease, datetime.now(UTC))
        assert aged is not None and aged[0] < aged[1]
        holds(lambda: _reloaded(store, "named") is None, 0.3, "start-up rolls nothing")
        store.mutate("Secret", NS, "db", lambda s: s.update(
            data={"password": base64.b64encode(b"reloader-two-0123456789").decode()}))
        digest = data_hash(store.get("Secret", NS, "db"))
        first = eventually(lambda: _reloaded(store, "named"), 2, "named roll")
        assert first["hash"] == digest
        assert (first["type"], first["name"], first["namespace"]) == ("SECRET", "db", NS)
        assert isinstance(first["observedAt"], int)
        auto = eventually(lambda: _reloaded(store, "auto"), 2, "auto roll")
        assert auto["containerRefs"] == ["main"]
        assert "reloader-two" not in json.dumps(store.get("Deployment", NS, "auto"))
        gen = store.get("Deployment", NS, "named")["metadata"]["generation"]
        # A write that leaves the data alone (a label) rolls nothing again.
        store.mutate("Secret", NS, "db", lambda s: s["metadata"].setdefault(
            "labels", {}).update(touched="yes"))
        holds(lambda: store.get("Deployment", NS, "named")["metadata"]["generation"] == gen
              and _reloaded(store, "plain") is None
              and _reloaded(store, "auto-unrelated") is None, 0.5, "one roll per change")
        # The next data change rolls again, once.
        store.mutate("Secret", NS, "db", lambda s: s.update(
            data={"password": base64.b64encode(b"reloader-three-012345678").decode()}))
        eventually(lambda: (_reloaded(store, "named") or {}).get("hash") != digest, 2,
                   "second roll")
        assert store.get("Deployment", NS, "named")["metadata"]["generation"] == gen + 1
    finally:
        reloader.stop()
