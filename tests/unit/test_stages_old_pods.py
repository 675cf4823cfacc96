"""Overlap waits for the previous revision's Terminating pods to exit before the old value is
retired (rollout.wait_old_pods_gone, called by consumer.wait)."""

from __future__ import annotations

from typing import Any

import pytest

from rotate.core.errors import ForbiddenError
from rotate.core.refs import ObjectRef
from rotate.core.waiting import Deadline, WaitTimeout
from rotate.stages import rollout
from tests.fakes import FakeKube, deployment

REF = ObjectRef("Deployment", "ns", "app")


def _pod(name: str, *, terminating: bool, app: str = "app") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "labels": {"app": app}}
    if terminating:
        meta.update(deletionTimestamp="2026-01-01T00:00:00Z", deletionGracePeriodSeconds=30)
    return {"kind": "Pod", "metadata": meta, "status": {"phase": "Running"}}


@pytest.fixture
def kube() -> FakeKube:
    k = FakeKube()
    k.put(deployment("ns", "app", selector={"matchLabels": {"app": "app"}}))
    k.put(_pod("app-new-1", terminating=False))
    return k


def test_returns_at_once_without_terminating_pods(kube: FakeKube) -> None:
    kube.put(_pod("other-old", terminating=True, app="other"))  # not this workload's
    assert rollout.wait_old_pods_gone(kube, REF, deadline=Deadline.after(5)) == \
        "no old pod left"


def test_waits_until_the_terminating_pod_is_gone(kube: FakeKube) -> None:
    kube.put(_pod("app-old-1", terminating=True))
    lists = []

    def exits(kind: str) -> None:
        lists.append(kind)
        if len(lists) == 3:
            kube.delete("Pod", "ns", "app-old-1")

    kube.before_list.append(exits)
    assert rollout.wait_old_pods_gone(kube, REF, deadline=Deadline.after(10)) == \
        "no old pod left"
    assert len(lists) == 3  # it looked until the pod was gone, then stopped


def test_times_out_naming_the_pods_still_terminating(kube: FakeKube) -> None:
    kube.put(_pod("app-old-1", terminating=True))
    kube.put(_pod("app-old-2", terminating=True))
    with pytest.raises(WaitTimeout, match="2 old pods terminating"):
        rollout.wait_old_pods_gone(kube, REF, deadline=Deadline.after(0.2))


def test_without_permission_to_list_pods_it_says_they_were_not_checked(kube: FakeKube
                                                                        ) -> None:
    kube.put(_pod("app-old-1", terminating=True))
    kube.faults.arm("list", ForbiddenError("kubernetes", "list pods", "forbidden", status=403))
    assert "old pods not checked" in rollout.wait_old_pods_gone(
        kube, REF, deadline=Deadline.after(5))
