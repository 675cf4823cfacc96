"""The "staged" predicate (rotate.stages.staged): a prepared rollout's new pods have started.

Pure: a Deployment object, its pods, the stamp our restart wrote.  The count the switch
waits for is what the Deployment controller creates before any new pod is Ready."""

from __future__ import annotations

from typing import Any

import pytest

from rotate.stages.rollout import RESTARTED_AT
from rotate.stages.staged import expected_new_pods, no_startup_probe, pod_started, staged

STAMP = "2026-12-03T12:00:00.123456Z"


def dep(replicas: int = 1, **rolling: Any) -> dict[str, Any]:
    strategy = {"type": "RollingUpdate", "rollingUpdate": rolling} if rolling else {}
    return {"kind": "Deployment", "metadata": {"name": "cart", "namespace": "shop"},
            "spec": {"replicas": replicas, "strategy": strategy, "template": {"spec": {
                "containers": [{"name": "cart"}]}}}}


def pod(name: str, *, stamp: str = STAMP, started: bool = True, ready: bool = False,
        deleting: bool = False, containers: int = 1) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "annotations": {RESTARTED_AT: stamp}}
    if deleting:
        meta["deletionTimestamp"] = "2026-12-03T12:00:01Z"
    return {"metadata": meta,
            "spec": {"containers": [{"name": f"c{i}"} for i in range(containers)]},
            "status": {"phase": "Running", "containerStatuses": [
                {"name": f"c{i}", "started": started, "ready": ready,
                 "state": {"running": {}} if started else {"waiting": {
                     "reason": "ContainerCreating"}}} for i in range(containers)]}}


@pytest.mark.parametrize(("replicas", "rolling", "want"), [
    (1, {}, 1),                                   # 25% surge → 1, 25% unavailable → 0
    (4, {}, 2),                                   # 1 + 1
    (4, {"maxSurge": 1, "maxUnavailable": 0}, 1),
    (3, {"maxSurge": "100%", "maxUnavailable": 0}, 3),
    (2, {"maxSurge": 5, "maxUnavailable": 1}, 2),  # never more than replicas
    (0, {}, 0),
])
def test_new_pods_waited_for_are_what_the_controller_creates_before_one_is_ready(
        replicas: int, rolling: dict[str, Any], want: int) -> None:
    assert expected_new_pods(dep(replicas, **rolling)) == want


def test_staged_only_once_our_new_pods_have_started() -> None:
    obj = dep(1)
    assert not staged(obj, [], STAMP).done
    assert not staged(obj, [pod("new", started=False)], STAMP).done
    # an old pod (another stamp, serving) never counts, nor one being deleted
    assert not staged(obj, [pod("old", stamp="earlier"), pod("x", deleting=True)], STAMP).done
    done = staged(obj, [pod("old", stamp="earlier", ready=True), pod("new")], STAMP)
    assert done.done and done.note == "1 new pod(s) started"
    assert staged(obj, [pod("new", started=False, ready=True)], STAMP).done


def test_every_container_must_have_started_and_the_count_is_the_surge() -> None:
    obj = dep(4)  # 2 new pods before any is Ready
    assert not staged(obj, [pod("a")], STAMP).done
    assert staged(obj, [pod("a"), pod("b")], STAMP).done
    half = pod("c", containers=2)
    half["status"]["containerStatuses"][1]["started"] = False
    assert not pod_started(half)
    assert not pod_started({"spec": {"containers": [{}, {}]}, "status": {
        "containerStatuses": [{"started": True}]}})


def test_what_is_seen_names_the_waiting_reason() -> None:
    verdict = staged(dep(1), [pod("new", started=False)], STAMP)
    assert verdict.note == ("0 of 1 new pod(s) started (1 created); waiting: new: "
                            "ContainerCreating")


def test_other_kinds_are_never_prepared_so_staged_at_once() -> None:
    assert staged({"kind": "StatefulSet", "spec": {"replicas": 3}}, [], STAMP).done


def test_no_startup_probe_is_told() -> None:
    obj = dep(1)
    assert no_startup_probe(obj)
    obj["spec"]["template"]["spec"]["containers"][0]["startupProbe"] = {"httpGet": {}}
    assert not no_startup_probe(obj)


def test_pods_of_a_later_restart_stage_ours_too() -> None:
    """Another run sharing the consumer restarted it after us: its pods replace ours and
    read what we wrote as well, so they count; pods of an earlier restart never do, nor a
    later pod of another workload (its labels differ)."""
    obj = dep(1)
    obj["spec"]["template"].setdefault("metadata", {})["labels"] = {"app": "order"}
    later = "2026-12-03T12:00:01.000001Z"

    def labelled(name: str, app: str, stamp: str) -> dict[str, Any]:
        p = pod(name, stamp=stamp)
        p["metadata"]["labels"] = {"app": app}
        return p

    assert staged(obj, [labelled("theirs", "order", later)], STAMP).done
    assert not staged(obj, [labelled("older", "order", "2026-12-03T11:59:59.999999Z")],
                      STAMP).done
    assert not staged(obj, [labelled("cart", "cart", later)], STAMP).done
    assert not staged(dep(1), [pod("unlabelled", stamp=later)], STAMP).done
