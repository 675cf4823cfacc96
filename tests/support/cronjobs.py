"""The lab's CronJob controller on a MiniCluster, with a clock the tests move.

:class:`MovableClock`: ``advance_to_next`` moves it just past the next schedule time, so a
schedule fires without a minute passing; :class:`CronLab` holds the cluster, the controller
and the clock, and ``tick`` wakes the controller for one CronJob (its own re-queue is timed
on the real clock).  Manifests: :func:`cronjob`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from rotate_lab.cluster.api.cronschedule import parse
from rotate_lab.cluster.controllers.cronjob import CronJobController
from rotate_lab.cluster.controllers.job import condition_true

from tests.support.minicluster import MiniCluster
from tests.support.polling import eventually

Obj = dict[str, Any]
NS = "cron"
#: an image the kubelet plays by no program: the pod waits, so its Job stays active
WAITING_IMAGE = "registry.example/never-starts:1"
ROTATE_IMAGE = "ghcr.io/acme/rotate:1.0"


@dataclass
class MovableClock:
    """The wall clock until a test moves it; from then on a fixed time, so what the
    controller computes from it cannot cross a minute boundary under the test's feet."""

    fixed: float | None = None

    def __call__(self) -> float:
        return time.time() if self.fixed is None else self.fixed

    def set(self, at: float) -> None:
        self.fixed = at

    def advance_to_next(self, schedule: str, *, plus: float = 1.0,
                        zone: str | None = None) -> float:
        """Move just past the next schedule time after now; return that schedule time."""
        at = parse(schedule, zone).next_after(self())
        self.fixed = at + plus
        return at

    def advance(self, seconds: float) -> None:
        self.fixed = self() + seconds


@dataclass
class CronLab:
    cluster: MiniCluster
    controller: CronJobController
    clock: MovableClock = field(default_factory=MovableClock)

    def tick(self, name: str) -> None:
        self.controller.enqueue(("CronJob", NS, name))

    def jobs(self, name: str) -> list[Obj]:
        return sorted(self.cluster.store.list(
            "Job", NS, label_selector=f"batch.kubernetes.io/cronjob-name={name}")[0],
            key=lambda j: str(j["metadata"]["name"]))

    def cronjob(self, name: str) -> Obj:
        return self.cluster.get("CronJob", NS, name)

    def events(self, name: str) -> list[str]:
        return [e["reason"] for e in self.cluster.store.list("Event", NS)[0]
                if e["involvedObject"]["kind"] == "CronJob"
                and e["involvedObject"]["name"] == name]

    def wait_jobs(self, name: str, count: int, what: str) -> list[Obj]:
        def counted() -> list[Obj] | None:
            jobs = self.jobs(name)
            return jobs if len(jobs) == count else None
        return eventually(counted, 30, what)

    def wait_finished(self, job_name: str) -> Obj:
        def done() -> Obj | None:
            job = self.cluster.get("Job", NS, job_name)
            return job if condition_true(job, "Complete") or condition_true(job, "Failed") \
                else None
        return eventually(done, 30, f"Job {job_name} to finish")


def cronjob(name: str, schedule: str, *, image: str = ROTATE_IMAGE,
            args: tuple[str, ...] = ("--version",), **spec: Any) -> Obj:
    return {"apiVersion": "batch/v1", "kind": "CronJob",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"schedule": schedule, **spec, "jobTemplate": {
                "metadata": {"labels": {"team": "platform"},
                             "annotations": {"rotate.dev/why": "test"}},
                "spec": {"backoffLimit": 0, "template": {"spec": {
                    "serviceAccountName": "runner", "restartPolicy": "Never",
                    "containers": [{"name": "rotate", "image": image,
                                    "args": list(args)}]}}}}}}
