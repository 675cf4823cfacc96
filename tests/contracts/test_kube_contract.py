"""The Kube seam: FakeKube and KubeClient against the lab's API server (TLS, kubeconfig), as
in tests/adapters/test_kube_adapter.py.

What only the real adapter can show (strategic and JSON patches, a restricted identity,
service proxy, an expired watch, a broken kubeconfig, error texts) stays in the adapter test.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from rotate_lab.cluster.api import tls

from rotate.clients.seams import Kube, KubeEvent
from rotate.core.errors import ConflictError, NotFoundError
from rotate.core.refs import ObjectRef
from rotate.core.secret import Secret
from tests.fakes import FakeKube
from tests.support.kube_apiserver import deployment, start_lab

PASSWORD = "Kube-Contract-Value-0123456789"


@pytest.fixture(scope="module")
def material() -> tls.TlsMaterial:
    return tls.generate()


@pytest.fixture(params=["fake", "real"])
def kube(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Kube]:
    if request.param == "fake":
        fake = FakeKube()
        for ns in ("shop", "dragonfly"):
            fake.put({"kind": "Namespace", "metadata": {"name": ns, "namespace": ""}})
        yield fake
        fake.close()
        return
    lab = start_lab(tmp_path, request.getfixturevalue("material"), port=9)
    try:
        yield lab.client()
    finally:
        lab.api.stop()


def _secret(kube: Kube) -> dict[str, Any]:
    return kube.create("Secret", "dragonfly", {
        "metadata": {"name": "dragonfly-password-secret"},
        "data": {"password": base64.b64encode(PASSWORD.encode()).decode()}, "type": "Opaque"})


def test_objects_are_created_read_listed_and_deleted(kube: Kube) -> None:
    created = kube.create("Deployment", "shop", deployment("cart"))
    assert created["metadata"]["generation"] == 1
    assert kube.get("Deployment", "shop", "cart")["spec"]["replicas"] == 1
    kube.create("Deployment", "shop", deployment("order"))
    assert sorted(d["metadata"]["name"] for d in kube.list("Deployment", "shop")) == [
        "cart", "order"]
    assert [d["metadata"]["name"] for d in kube.list("Deployment", "shop",
                                                     label_selector="app=order")] == ["order"]
    assert kube.list("Deployment", "dragonfly") == []
    with pytest.raises(ConflictError):  # already exists
        kube.create("Deployment", "shop", deployment("cart"))
    kube.delete("Deployment", "shop", "order")
    with pytest.raises(NotFoundError):
        kube.get("Deployment", "shop", "order")
    with pytest.raises(NotFoundError):
        kube.delete("Deployment", "shop", "order")


def test_a_spec_change_bumps_the_generation_and_metadata_does_not(kube: Kube) -> None:
    kube.create("Deployment", "shop", deployment("cart"))
    restarted = kube.patch("Deployment", "shop", "cart", {"spec": {"template": {"metadata": {
        "annotations": {"kubectl.kubernetes.io/restartedAt": "2026-12-02T14:00:00.123Z"}}}}},
        patch_type="merge")
    assert restarted["metadata"]["generation"] == 2
    assert restarted["spec"]["template"]["spec"]["containers"][0]["image"] == "shop:1"
    marked = kube.patch("Deployment", "shop", "cart",
                        {"metadata": {"annotations": {"rotate/run-id": "r1"}}})
    assert marked["metadata"]["annotations"]["rotate/run-id"] == "r1"
    assert marked["metadata"]["generation"] == 2


def test_a_replace_with_a_stale_resource_version_is_a_conflict(kube: Kube) -> None:
    kube.create("Deployment", "shop", deployment("cart"))
    current = kube.get("Deployment", "shop", "cart")
    current["spec"]["replicas"] = 2
    assert kube.replace("Deployment", "shop", "cart", current)["spec"]["replicas"] == 2
    with pytest.raises(ConflictError):
        kube.replace("Deployment", "shop", "cart", current)
    assert kube.get("Deployment", "shop", "cart")["spec"]["replicas"] == 2


def test_secret_data_is_never_returned_and_read_one_key_at_a_time(kube: Kube) -> None:
    created = _secret(kube)
    assert "data" not in created
    got = kube.get("Secret", "dragonfly", "dragonfly-password-secret")
    for obj in (got, *kube.list("Secret", "dragonfly")):
        assert "data" not in obj and "stringData" not in obj
    value = kube.read_secret_key("dragonfly", "dragonfly-password-secret", "password")
    assert isinstance(value, Secret) and value.reveal() == PASSWORD
    assert kube.read_secret_key("dragonfly", "dragonfly-password-secret", "absent") is None
    rv = kube.write_secret_key("dragonfly", "dragonfly-password-secret", "password",
                               Secret("new-" + PASSWORD))
    assert int(rv) > int(got["metadata"]["resourceVersion"])
    assert kube.read_secret_key("dragonfly", "dragonfly-password-secret",
                                "password") == Secret("new-" + PASSWORD)


def test_a_secret_key_written_with_annotations_only_if_unchanged(kube: Kube) -> None:
    """A token delivery: the key and an annotation in one patch, conditional on the
    resourceVersion read (409 → ConflictError when the Secret changed since)."""
    got = _secret(kube)
    rv = kube.write_secret_key("dragonfly", "dragonfly-password-secret", "password",
                               Secret("a-" + PASSWORD), annotations={"rotate.dev/token-id": "t1"},
                               resource_version=got["metadata"]["resourceVersion"])
    now = kube.get("Secret", "dragonfly", "dragonfly-password-secret")
    assert now["metadata"]["annotations"]["rotate.dev/token-id"] == "t1"
    assert now["metadata"]["resourceVersion"] == rv
    with pytest.raises(ConflictError):
        kube.write_secret_key("dragonfly", "dragonfly-password-secret", "password",
                              Secret("b-" + PASSWORD), annotations={"rotate.dev/token-id": "t2"},
                              resource_version=got["metadata"]["resourceVersion"])
    assert kube.read_secret_key("dragonfly", "dragonfly-password-secret",
                                "password") == Secret("a-" + PASSWORD)


def test_secret_keys_name_the_keys_never_the_values(kube: Kube) -> None:
    kube.create("Secret", "dragonfly", {
        "metadata": {"name": "two-keys"}, "type": "Opaque",
        "data": {k: base64.b64encode(PASSWORD.encode()).decode() for k in ("user", "password")}})
    keys = kube.secret_keys("dragonfly", "two-keys")
    assert keys == ["password", "user"]
    assert PASSWORD not in repr(keys)
    with pytest.raises(NotFoundError):
        kube.secret_keys("dragonfly", "absent")


def test_a_namespaced_kind_lists_across_namespaces(kube: Kube) -> None:
    kube.create("Deployment", "shop", deployment("cart"))
    kube.create("Deployment", "dragonfly", deployment("dragonfly"))
    seen = {(o["metadata"]["namespace"], o["metadata"]["name"])
            for o in kube.list("Deployment", None)}
    assert {("shop", "cart"), ("dragonfly", "dragonfly")} <= seen


def test_a_watch_replays_changes_after_a_version_without_secret_data(kube: Kube) -> None:
    start = _secret(kube)["metadata"]["resourceVersion"]
    kube.write_secret_key("dragonfly", "dragonfly-password-secret", "password", Secret("v2-x"))
    kube.create("Deployment", "dragonfly", deployment("dragonfly"))
    events = list(kube.watch("Secret", "dragonfly", name="dragonfly-password-secret",
                             resource_version=start, timeout_seconds=1))
    changes = [e for e in events if e.type != "BOOKMARK"]
    assert [e.type for e in changes] == ["MODIFIED"]
    assert "data" not in changes[0].object
    assert changes[0].object["metadata"]["name"] == "dragonfly-password-secret"


def test_a_versioned_list_is_the_start_of_a_watch_that_misses_nothing(kube: Kube) -> None:
    kube.create("Deployment", "shop", deployment("cart"))
    items, rv = kube.list_versioned("Deployment", "shop")
    assert [d["metadata"]["name"] for d in items] == ["cart"] and items[0]["kind"] == "Deployment"
    kube.create("Deployment", "shop", deployment("order"))
    kube.delete("Deployment", "shop", "cart")
    events = [e for e in kube.watch("Deployment", "shop", resource_version=rv, timeout_seconds=1)
              if e.type != "BOOKMARK"]
    assert [(e.type, e.object["metadata"]["name"]) for e in events][:2] == [
        ("ADDED", "order"), ("DELETED", "cart")]


def test_an_event_is_listed_with_its_object_reason_and_run(kube: Kube) -> None:
    created = kube.create("Deployment", "shop", deployment("cart"))
    uid = created["metadata"]["uid"]
    kube.create_event(KubeEvent(involved=ObjectRef("Deployment", "shop", "cart"), uid=uid,
                                type="Warning", reason="RotationFailed",
                                message="step 9 failed (rotate run r-1)", action="rotate",
                                instance="r-1"))
    events = kube.list("Event", "shop")
    assert len(events) == 1
    ev = events[0]
    assert ev["involvedObject"]["kind"] == "Deployment"
    assert ev["involvedObject"]["name"] == "cart"
    assert ev["involvedObject"]["uid"] == uid
    assert (ev["type"], ev["reason"]) == ("Warning", "RotationFailed")
    assert ev["message"] == "step 9 failed (rotate run r-1)"
    assert ev["source"]["component"] == "rotate" and ev["reportingInstance"] == "r-1"
    assert kube.list("Event", "dragonfly") == []


def test_an_event_carries_the_time_it_happened_not_the_time_it_was_sent(kube: Kube) -> None:
    # a queued event is sent later than it happened (rotate.engine.events): its timestamps
    # must be when it happened, or `kubectl describe` would order a run's story by send time
    kube.create("Deployment", "shop", deployment("cart"))
    happened = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    kube.create_event(KubeEvent(involved=ObjectRef("Deployment", "shop", "cart"), uid="",
                                type="Normal", reason="Ready", message="step 7 (run r-2)",
                                action="rotate", instance="r-2", at=happened))
    kube.create_event(KubeEvent(involved=ObjectRef("Deployment", "shop", "cart"), uid="",
                                type="Normal", reason="Now", message="sent now (run r-2)",
                                action="rotate", instance="r-2"))
    stamps = {e["reason"]: (e["firstTimestamp"], e["lastTimestamp"])
              for e in kube.list("Event", "shop")}
    assert stamps["Ready"] == ("2026-01-02T03:04:05Z", "2026-01-02T03:04:05Z")
    assert stamps["Now"][0] >= datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")[:13]
