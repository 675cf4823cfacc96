"""CronJob controller (batch/v1): start a Job from ``spec.jobTemplate`` at each schedule time,
as kube-controller-manager's cronjob controller v2 (``syncCronJob``) does.

Each reconcile reads the CronJob and the Jobs it controls (controller ``ownerReference``), then:

- **bookkeeping**: a finished Job leaves ``status.active`` (event ``SawCompletedJob``), a
  vanished one too (``MissingJob``); the latest ``completionTime`` of a succeeded Job is
  ``status.lastSuccessfulTime``;
- **schedule** (unless ``spec.suspend``): the most recent schedule time not yet started
  (:mod:`rotate_lab.cluster.api.cronschedule`; only the latest of several missed ones,
  ``TooManyMissedTimes`` past 100; none older than ``startingDeadlineSeconds``) becomes Job
  ``<cronjob>-<unix minutes>`` with the template's labels and annotations plus label
  ``batch.kubernetes.io/cronjob-name`` and annotation
  ``batch.kubernetes.io/cronjob-scheduled-timestamp``; ``concurrencyPolicy: Forbid`` skips
  it while a Job is active (``JobAlreadyActive``; that schedule time is then never started),
  ``Replace`` deletes the active Jobs first; ``status.active`` gains the Job and
  ``status.lastScheduleTime`` the schedule time.  The Job's name is the lock: a name that
  already exists is taken as started, never a second Job;
- **history**: finished Jobs beyond ``successfulJobsHistoryLimit`` (default 3) and
  ``failedJobsHistoryLimit`` (default 1) are deleted oldest first (by ``startTime``), their
  pods with them (background cascade);
- it re-queues itself 100 ms after the next schedule time.

The clock is injectable (``clock``): the cluster process reads the wall clock; tests pass a
clock they move, so a schedule fires without waiting for a minute to pass.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rotate_lab.cluster.api import cronschedule as cron
from rotate_lab.cluster.api.store import ApiError
from rotate_lab.cluster.controllers.base import Key, OwnerController
from rotate_lab.cluster.controllers.job import condition_true
from rotate_lab.cluster.controllers.replicaset import parse_time

if TYPE_CHECKING:
    from rotate_lab.cluster.context import LabContext

Obj = dict[str, Any]

NAME_LABEL = "batch.kubernetes.io/cronjob-name"
SCHEDULED_ANNOTATION = "batch.kubernetes.io/cronjob-scheduled-timestamp"


def finished_as(job: Obj) -> str | None:
    """``Complete`` or ``Failed`` once the Job has concluded, else None."""
    return next((c for c in ("Complete", "Failed") if condition_true(job, c)), None)


def rfc3339(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(t)))


class CronJobController(OwnerController):
    name = "cronjob"
    kinds = ("CronJob", "Job")

    def __init__(self, ctx: LabContext, clock: Callable[[], float] = time.time) -> None:
        super().__init__(ctx)
        self.clock = clock

    def reconcile(self, key: Key) -> float | None:
        _, ns, name = key
        try:
            cronjob = self.ctx.store.get("CronJob", ns, name)
        except ApiError as exc:
            if exc.code == 404:
                return None
            raise
        now = self.clock()
        jobs = self.owned("Job", cronjob)
        status: Obj = copy.deepcopy(cronjob.get("status") or {})
        self._account(cronjob, jobs, status)
        wake: float | None = None
        spec = cronjob.get("spec") or {}
        try:
            schedule = cron.of(cronjob)
        except cron.ScheduleError as exc:
            self._event(cronjob, exc.reason, str(exc), "Warning")
        else:
            if not spec.get("suspend"):
                wake = self._schedule(cronjob, schedule, status, now)
        self._clean_up(cronjob, jobs, status)
        self._write_status(cronjob, status)
        return wake

    # -- bookkeeping ------------------------------------------------------------------------

    def _account(self, cronjob: Obj, jobs: list[Obj], status: Obj) -> None:
        active: list[Obj] = list(status.get("active") or [])
        uids = {j["metadata"]["uid"] for j in jobs}
        for job in jobs:
            uid = job["metadata"]["uid"]
            listed = any(ref.get("uid") == uid for ref in active)
            outcome = finished_as(job)
            if listed and outcome:
                active = [ref for ref in active if ref.get("uid") != uid]
                self._event(cronjob, "SawCompletedJob",
                            f"Saw completed job: {job['metadata']['name']}, "
                            f"condition: {outcome}")
            elif not listed and outcome is None:
                self._event(cronjob, "UnexpectedJob", "Saw a job that the controller did not "
                            f"create or forgot: {job['metadata']['name']}", "Warning")
            if outcome == "Complete":
                done = (job.get("status") or {}).get("completionTime")
                if done and (parse_time(done) or 0) > (
                        parse_time(status.get("lastSuccessfulTime")) or 0):
                    status["lastSuccessfulTime"] = done
        for ref in [r for r in active if r.get("uid") not in uids]:
            active.remove(ref)
            self._event(cronjob, "MissingJob", f"Active job went missing: {ref.get('name')}")
        if active:
            status["active"] = active
        else:
            status.pop("active", None)

    # -- the schedule -------------------------------------------------------------------------

    def _schedule(self, cronjob: Obj, schedule: cron.Schedule, status: Obj,
                  now: float) -> float | None:
        spec = cronjob["spec"]
        created = parse_time(cronjob["metadata"].get("creationTimestamp")) or now
        last = parse_time(status.get("lastScheduleTime"))
        deadline = spec.get("startingDeadlineSeconds")
        due = cron.most_recent(schedule, created=created, last_scheduled=last, now=now,
                               deadline_seconds=None if deadline is None else int(deadline))
        wake = cron.wake_after(schedule, created=created, last_scheduled=last, now=now)
        scheduled = due.most_recent
        if scheduled is None or scheduled > now:
            return wake
        if due.many_missed:
            self._event(cronjob, "TooManyMissedTimes", "too many missed start times. Set or "
                        "decrease .spec.startingDeadlineSeconds or check clock skew", "Warning")
        if deadline is not None and scheduled + int(deadline) < now:
            self._event(cronjob, "MissSchedule", "Missed scheduled time to start a job: "
                        f"{rfc3339(scheduled)}", "Warning")
            return wake
        name = cron.job_name(cronjob["metadata"]["name"], scheduled)
        active: list[Obj] = status.get("active") or []
        if any(ref.get("name") == name for ref in active) or last == scheduled:
            return wake
        policy = spec.get("concurrencyPolicy") or "Allow"
        if policy == "Forbid" and active:
            self._event(cronjob, "JobAlreadyActive", "Not starting job because prior "
                        "execution is running and concurrency policy is Forbid")
            return wake
        if policy == "Replace":
            for ref in list(active):
                self._delete_job(cronjob, str(ref.get("name")), status)
        job = self._create_job(cronjob, schedule, scheduled, name)
        status["active"] = [*(status.get("active") or []), {
            "kind": "Job", "apiVersion": "batch/v1", "namespace": job["metadata"]["namespace"],
            "name": name, "uid": job["metadata"]["uid"],
            "resourceVersion": job["metadata"]["resourceVersion"]}]
        status["lastScheduleTime"] = rfc3339(scheduled)
        return wake

    def _create_job(self, cronjob: Obj, schedule: cron.Schedule, scheduled: float,
                    name: str) -> Obj:
        meta = cronjob["metadata"]
        template: Obj = copy.deepcopy(cronjob["spec"].get("jobTemplate") or {})
        tmeta = template.get("metadata") or {}
        job: Obj = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {
            "name": name, "namespace": meta["namespace"],
            "labels": {**(tmeta.get("labels") or {}), NAME_LABEL: meta["name"]},
            "annotations": {**(tmeta.get("annotations") or {}),
                            SCHEDULED_ANNOTATION: schedule.stamp(scheduled)},
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "CronJob",
                                 "name": meta["name"], "uid": meta["uid"],
                                 "controller": True, "blockOwnerDeletion": True}]},
            "spec": template.get("spec") or {}}
        try:
            created = self.ctx.store.create("Job", job)
        except ApiError as exc:
            if exc.code != 409:
                self._event(cronjob, "FailedCreate", f"Error creating job: {exc.reason}",
                            "Warning")
                raise
            return self.ctx.store.get("Job", meta["namespace"], name)  # already started
        self._event(cronjob, "SuccessfulCreate", f"Created job {name}")
        return created

    # -- history ------------------------------------------------------------------------------

    def _clean_up(self, cronjob: Obj, jobs: list[Obj], status: Obj) -> None:
        spec = cronjob.get("spec") or {}
        for outcome, field, default in (("Complete", "successfulJobsHistoryLimit", 3),
                                        ("Failed", "failedJobsHistoryLimit", 1)):
            limit = spec.get(field, default)
            if limit is None:
                continue
            done = [j for j in jobs if finished_as(j) == outcome]
            done.sort(key=lambda j: (parse_time((j.get("status") or {}).get("startTime"))
                                     or float("inf"), j["metadata"]["name"]))
            for job in done[:max(0, len(done) - int(limit))]:
                self._delete_job(cronjob, job["metadata"]["name"], status)

    def _delete_job(self, cronjob: Obj, name: str, status: Obj) -> None:
        try:
            self.ctx.store.delete("Job", cronjob["metadata"]["namespace"], name,
                                  propagation="Background")
        except ApiError as exc:
            if exc.code != 404:
                raise
            return
        left = [ref for ref in status.get("active") or [] if ref.get("name") != name]
        if left:
            status["active"] = left
        else:
            status.pop("active", None)
        self._event(cronjob, "SuccessfulDelete", f"Deleted job {name}")

    # -- writes ---------------------------------------------------------------------------------

    def _event(self, cronjob: Obj, reason: str, message: str, type: str = "Normal") -> None:
        self.ctx.store.record_event(cronjob, reason, message, type)

    def _write_status(self, cronjob: Obj, status: Obj) -> None:
        """An update at the resourceVersion this reconcile read, as upstream's
        ``UpdateStatus``: a client that moved the status meanwhile makes it a 409, and the
        retry reads again (a Job it already created is then found by its name)."""
        if status == (cronjob.get("status") or {}):
            return
        self.ctx.store.update("CronJob", {**cronjob, "status": status}, subresource="status")
