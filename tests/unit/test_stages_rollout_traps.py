"""Stage ③ rollouts (kubectl rollout-status rules, OnDelete, Reloader) and preflight traps."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from rotate.core.errors import PermanentError
from rotate.core.refs import ObjectRef
from rotate.core.waiting import Deadline
from rotate.stages import reloader_presence, rollout, traps
from tests.fakes import FakeKube, deployment
from tests.support.polling import eventually

REF = ObjectRef("Deployment", "ns", "app")


def _dep(**status: Any) -> dict[str, Any]:
    d = deployment("ns", "app", replicas=3)
    d["metadata"]["generation"] = 4
    d["status"] = {"observedGeneration": 4, "replicas": 3, "updatedReplicas": 3,
                   "availableReplicas": 3, **status}
    return d


@pytest.mark.parametrize(("status", "done", "words"), [
    ({}, True, "rolled out"),
    ({"observedGeneration": 3}, False, "spec update"),
    ({"updatedReplicas": 2}, False, "2 of 3 new replicas"),
    ({"replicas": 4}, False, "old replicas pending termination"),
    ({"availableReplicas": 1}, False, "1 of 3 updated replicas available"),
])
def test_deployment_rollout_status(status: dict[str, Any], done: bool, words: str) -> None:
    ok, message = rollout.rollout_status(_dep(**status))
    assert ok is done and words in message


def test_rollout_status_requires_our_generation() -> None:
    assert not rollout.rollout_status(_dep(), min_generation=5)[0]


def test_progress_deadline_exceeded_fails() -> None:
    d = _dep(conditions=[{"type": "Progressing", "status": "False",
                          "reason": "ProgressDeadlineExceeded"}])
    with pytest.raises(PermanentError, match="progress deadline"):
        rollout.rollout_status(d)


def test_statefulset_and_daemonset_rules() -> None:
    sts: dict[str, Any] = {
           "kind": "StatefulSet", "metadata": {"name": "s", "namespace": "n", "generation": 2},
           "spec": {"replicas": 2, "updateStrategy": {"type": "RollingUpdate"}},
           "status": {"observedGeneration": 2, "readyReplicas": 2, "updatedReplicas": 2,
                      "currentRevision": "r1", "updateRevision": "r2"}}
    assert not rollout.rollout_status(sts)[0]
    sts["status"] = {**sts["status"], "currentRevision": "r2"}
    assert rollout.rollout_status(sts)[0]
    ds: dict[str, Any] = {
          "kind": "DaemonSet", "metadata": {"name": "d", "namespace": "n", "generation": 1},
          "spec": {}, "status": {"observedGeneration": 1, "desiredNumberScheduled": 3,
                                 "updatedNumberScheduled": 3, "numberAvailable": 2}}
    assert not rollout.rollout_status(ds)[0]
    ds["status"] = {**ds["status"], "numberAvailable": 3}
    assert rollout.rollout_status(ds)[0]


@pytest.fixture
def kube() -> Iterator[FakeKube]:
    k = FakeKube()
    yield k
    k.close()


def test_restart_is_subsecond_and_idempotent_per_run(kube: FakeKube) -> None:
    kube.put(deployment("ns", "app"))
    r1 = rollout.restart(kube, REF, "run-1")
    assert r1.generation == 2 and r1.via == "rotate"
    again = rollout.restart(kube, REF, "run-1")
    assert again.via == "already" and again.generation == 2
    assert len(kube.patches) == 1
    r2 = rollout.restart(kube, REF, "run-2")
    assert r2.generation == 3 and r2.stamp != r1.stamp
    assert "." in r1.stamp


def test_ondelete_statefulset_pods_deleted_in_reverse_order(kube: FakeKube) -> None:
    ref = ObjectRef("StatefulSet", "ns", "db")
    kube.put({"kind": "StatefulSet", "metadata": {"name": "db", "namespace": "ns",
                                                  "generation": 1},
              "spec": {"replicas": 3, "updateStrategy": {"type": "OnDelete"},
                       "template": {"metadata": {}}},
              "status": {"observedGeneration": 1, "updateRevision": "db-1",
                         "currentRevision": "db-1", "readyReplicas": 3, "updatedReplicas": 3}})

    def pod(i: int, rev: str) -> dict[str, Any]:
        return {"kind": "Pod", "metadata": {"name": f"db-{i}", "namespace": "ns",
                                            "labels": {"controller-revision-hash": rev}},
                "status": {"conditions": [{"type": "Ready", "status": "True"}]}}

    for i in range(3):
        kube.put(pod(i, "db-1"))

    def controller(k: FakeKube, kind: str, ns: str, name: str) -> None:
        if kind == "StatefulSet":
            sts = k.raw(kind, ns, name)
            gen = sts["metadata"]["generation"]
            if sts["status"]["observedGeneration"] != gen:
                k.set_status(kind, ns, name, {**sts["status"], "observedGeneration": gen,
                                              "updateRevision": f"db-{gen}",
                                              "updatedReplicas": 0})
        if kind == "Pod" and (kind, ns, name) not in k.objects:  # deleted: recreate
            sts = k.raw("StatefulSet", "ns", "db")
            k.put(pod(int(name.split("-")[1]), sts["status"]["updateRevision"]))
            n = sum(1 for key in k.objects if key[0] == "Pod" and k.objects[key]["metadata"][
                "labels"]["controller-revision-hash"] == sts["status"]["updateRevision"])
            st = copy.deepcopy(sts["status"])
            st["updatedReplicas"] = n
            k.set_status("StatefulSet", "ns", "db", st)

    kube.controllers.append(controller)
    r = rollout.restart(kube, ref, "run-1")
    rollout.roll_ondelete(kube, ref, r.generation, deadline=Deadline.after(5))
    assert [key[2] for key in kube.deleted] == ["db-2", "db-1", "db-0"]
    message = rollout.wait_rollout(kube, ref, r.generation, deadline=Deadline.after(2))
    assert "rolled out" in message
    # idempotent: a second pass deletes nothing
    rollout.roll_ondelete(kube, ref, r.generation, deadline=Deadline.after(5))
    assert len(kube.deleted) == 3


def test_wait_rollout_judges_watched_objects_not_a_get_per_event() -> None:
    import threading

    kube = FakeKube()
    dep = _dep(availableReplicas=0)
    dep["metadata"]["generation"] = 4
    kube.put(dep)
    result: list[str] = []
    waiter = threading.Thread(target=lambda: result.append(rollout.wait_rollout(
        kube, REF, 4, deadline=Deadline.after(10))), daemon=True)
    waiter.start()
    try:
        eventually(lambda: kube.watches_started > 0 and kube.faults.calls.get("get"), 5,
                   "the watch started and the first read")
        for available in (0, 1, 1, 2, 2, 2, 3):
            kube.set_status("Deployment", "ns", "app", {**dep["status"],
                                                        "availableReplicas": available})
        waiter.join(10)
        assert result and "rolled out" in result[0]
        # one GET, maybe one more if the machine stalled the events for _REREAD seconds
        assert kube.faults.calls["get"] <= 2
    finally:
        kube.close()


SECRET = ("ns", "s1")
T0 = datetime(2026, 12, 3, 8, 0, 0, tzinfo=UTC)


def _provider(kube: FakeKube) -> rollout.Baseline:
    dep = deployment("ns", "app", annotations={"secret.reloader.stakater.com/reload": "a,s1"},
                     selector={"matchLabels": {"app": "app"}})
    kube.put(dep)
    return rollout.baseline(kube.get("Deployment", "ns", "app"))


def _pod(kube: FakeKube, name: str, started: datetime) -> None:
    kube.put({"apiVersion": "v1", "kind": "Pod",
              "metadata": {"name": name, "namespace": "ns", "labels": {"app": "app"}},
              "status": {"startTime": started.strftime("%Y-%m-%dT%H:%M:%SZ")}})


def _reloader_roll(kube: FakeKube, secret: str = "s1") -> None:
    record = json.dumps({"type": "SECRET", "name": secret, "namespace": "ns", "hash": "h2"})
    kube.patch("Deployment", "ns", "app", {"spec": {"template": {"metadata": {"annotations": {
        "reloader.stakater.com/last-reloaded-from": record}}}}})
    gen = kube.get("Deployment", "ns", "app")["metadata"]["generation"]
    kube.set_status("Deployment", "ns", "app", {
        "observedGeneration": gen, "replicas": 1, "updatedReplicas": 1, "availableReplicas": 1})


def _wait(kube: FakeKube, before: rollout.Baseline, grace: float) -> rollout.ReloaderVerdict:
    return rollout.wait_for_reloader(kube, REF, before, secret=SECRET, synced_at=T0,
                                     grace=grace, deadline=Deadline.after(5))


def test_reloader_detection_and_grace(kube: FakeKube) -> None:
    dep = deployment("ns", "app", annotations={"secret.reloader.stakater.com/reload": "a,s1"})
    assert rollout.reloader_watches(dep, "s1") is not None
    assert rollout.reloader_watches(dep, "other") is None
    before = _provider(kube)
    assert _wait(kube, before, 0.2).restart is None
    _pod(kube, "app-new", T0 + timedelta(seconds=1))
    _reloader_roll(kube)
    came = _wait(kube, before, 2).restart
    assert came is not None and came.via == "reloader" and came.generation == 2


def test_a_human_rollout_restart_is_not_taken_for_reloaders(kube: FakeKube) -> None:
    """Issue 10 item 1: a `kubectl rollout restart` after the baseline, whose pods started
    before the Secret changed, was accepted as Reloader's roll."""
    before = _provider(kube)
    rollout.restart(kube, REF, "someone-else")  # restartedAt bump, generation 2
    _pod(kube, "app-human", T0 - timedelta(seconds=2))
    verdict = _wait(kube, before, 0.3)
    assert verdict.restart is None and "no roll" in verdict.why


def test_a_roll_for_another_secret_is_not_taken(kube: FakeKube) -> None:
    before = _provider(kube)
    _pod(kube, "app-new", T0 + timedelta(seconds=1))
    _reloader_roll(kube, secret="dragonfly-acl")
    assert _wait(kube, before, 0.3).restart is None


def test_a_reloader_roll_whose_pods_predate_the_new_value_is_refused(kube: FakeKube) -> None:
    before = _provider(kube)
    _pod(kube, "app-old", T0 - timedelta(seconds=3))
    _reloader_roll(kube)
    verdict = _wait(kube, before, 2)
    assert verdict.restart is None and "before the Secret held the new value" in verdict.why


def _reloader_deployment(available: int = 1, **labels: str) -> dict[str, Any]:
    dep = deployment("reloader", "reloader", selector={"matchLabels": {"app": "reloader"}})
    dep["metadata"]["labels"] = labels
    dep["spec"]["template"]["spec"]["containers"][0]["image"] = "ghcr.io/stakater/reloader:v1"
    dep["status"]["availableReplicas"] = available
    return dep


def _lease(renewed: datetime) -> dict[str, Any]:
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "stakater-reloader-lock", "namespace": "reloader"},
            "spec": {"holderIdentity": "reloader-0", "leaseDurationSeconds": 15,
                     "renewTime": renewed.strftime("%Y-%m-%dT%H:%M:%S.%fZ")}}


def test_find_reloader_by_deployment_and_lease(kube: FakeKube) -> None:
    now = T0
    assert reloader_presence.find_reloader(kube, now).state == "absent"
    kube.put(_reloader_deployment(available=0))
    assert reloader_presence.find_reloader(kube, now).state == "absent"
    kube.put(_reloader_deployment())
    seen = reloader_presence.find_reloader(kube, now)
    assert seen.state == "running" and "without HA" in seen.detail
    kube.put(_lease(now - timedelta(seconds=3)))
    seen = reloader_presence.find_reloader(kube, now)
    assert seen.state == "running" and "renewed 3s ago" in seen.detail
    kube.put(_lease(now - timedelta(seconds=40)))
    seen = reloader_presence.find_reloader(kube, now)
    assert seen.state == "absent" and "no leader" in seen.detail


def test_wait_phrase_names_every_fixed_wait() -> None:
    unknown = reloader_presence.Sighting("unknown", "cannot list Deployments")
    assert "fixed wait up to 5s" in reloader_presence.wait_phrase("Wave (x)", unknown, "5s")
    absent = reloader_presence.Sighting("absent", "no Deployment")
    assert "no wait" in reloader_presence.wait_phrase("Reloader (x)", absent, "5s")


# --------------------------------------------------------------------------- traps

ES = ObjectRef("ExternalSecret", "ns", "es")


@pytest.mark.parametrize(("spec", "name"), [
    ({"refreshPolicy": "CreatedOnce"}, "refresh-created-once"),
    ({"refreshInterval": "0"}, "refresh-interval-zero"),
    ({"refreshInterval": "0s", "refreshPolicy": "Periodic"}, "refresh-interval-zero"),
    ({"refreshInterval": 0}, "refresh-interval-zero"),
])
def test_external_secret_traps(spec: dict[str, Any], name: str) -> None:
    found = traps.external_secret_traps({"spec": spec}, ES)
    assert [t.name for t in found] == [name] and found[0].blocking


def test_external_secret_without_trap() -> None:
    assert traps.external_secret_traps({"spec": {"refreshInterval": "1h"}}, ES) == []
    assert traps.external_secret_traps(
        {"spec": {"refreshInterval": "0", "refreshPolicy": "OnChange"}}, ES) == []


def _names(obj: dict[str, Any], role: str, kind: str = "Deployment") -> dict[str, bool]:
    ref = ObjectRef(kind, "ns", "app")
    return {t.name: t.blocking for t in traps.workload_traps(obj, ref, role=role,
                                                             secret_name="s1", grace=5)}


def test_workload_traps() -> None:
    assert _names(deployment("ns", "app"), "consumer") == {}
    assert _names(deployment("ns", "app", paused=True), "provider") == {"paused-deployment": True}
    owned = deployment("ns", "app")
    owned["metadata"]["ownerReferences"] = [{"kind": "Dragonfly", "name": "df"}]
    assert _names(owned, "provider") == {"operator-owned": True}
    assert _names(deployment("ns", "app", probe=False), "consumer") == {
        "no-readiness-probe": True}
    assert _names(deployment("ns", "app", probe=False), "provider") == {}
    rel = deployment("ns", "app", annotations={"reloader.stakater.com/auto": "true"})
    assert _names(rel, "provider") == {"other-reloader": False}
    assert _names(rel, "consumer") == {"other-reloader": True}
    wave = deployment("ns", "app", annotations={"wave.pusher.com/update-on-config-change": "true"})
    assert _names(wave, "provider") == {"other-reloader": False}
    sts = {"kind": "StatefulSet", "metadata": {"name": "app"},
           "spec": {"updateStrategy": {"type": "OnDelete"}}}
    assert _names(sts, "provider", "StatefulSet") == {"statefulset-ondelete": False}
    found = traps.workload_traps(rel, REF, role="provider", secret_name="s1", grace=5)
    assert "watch up to 5.0s for its rollout" in found[0].action
    assert "roll only if it does not come" in found[0].action
