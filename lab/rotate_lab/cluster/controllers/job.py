"""Job controller (batch/v1): run a pod template to completion.

A Job wants ``spec.completions`` pods to succeed, at most ``spec.parallelism`` running at
once.  The controller creates pods from the template (``<job>-<5 chars>``, a controller
``ownerReference``, the selector's labels that defaulting put on the template), counts its
pods by phase — the kubelet gives a pod of ``restartPolicy: Never`` the phase ``Succeeded`` or
``Failed`` when its container exits — and writes the status upstream writes:

- ``active``, ``ready``, ``succeeded``, ``failed``, ``startTime``, ``completionTime``;
- condition ``Complete`` (reason ``Completed``, with ``SuccessCriteriaMet`` before it, as
  1.31+) once ``succeeded >= completions`` — what ``kubectl wait --for=condition=complete``
  watches;
- condition ``Failed`` (reason ``BackoffLimitExceeded``, with ``FailureTarget``) once more
  pods failed than ``backoffLimit`` allows, or ``DeadlineExceeded`` after
  ``activeDeadlineSeconds``; the active pods are deleted then.  With ``restartPolicy:
  OnFailure`` container restarts count as failures too, as upstream;
- ``suspend: true`` runs nothing (condition ``Suspended``).

A finished Job is never touched again (its conditions are final).  Events on the Job:
``SuccessfulCreate``, ``SuccessfulDelete``, ``Completed``, ``BackoffLimitExceeded``,
``DeadlineExceeded`` — what ``kubectl describe job`` shows.  Not played: indexed completion,
pod failure policies, ``ttlSecondsAfterFinished`` and the retry back-off delay (a failed pod
is replaced at once).  A CronJob's Jobs are created by the CronJob controller
(:mod:`rotate_lab.cluster.controllers.cronjob`) and run here like any other.
"""

from __future__ import annotations

import time
from typing import Any

from rotate_lab.cluster.api.store import ApiError, now_rfc3339
from rotate_lab.cluster.controllers.base import Key, OwnerController
from rotate_lab.cluster.controllers.replicaset import parse_time, pod_from_template

Obj = dict[str, Any]

_FINAL = ("Complete", "Failed")


def condition_true(job: Obj, ctype: str) -> bool:
    return any(c.get("type") == ctype and c.get("status") == "True"
               for c in (job.get("status") or {}).get("conditions") or [])


def _condition(ctype: str, reason: str, message: str, now: str) -> Obj:
    return {"type": ctype, "status": "True", "reason": reason, "message": message,
            "lastProbeTime": now, "lastTransitionTime": now}


def _restarts(pod: Obj) -> int:
    return sum(int(s.get("restartCount") or 0)
               for s in (pod.get("status") or {}).get("containerStatuses") or [])


class JobController(OwnerController):
    name = "job"
    kinds = ("Job", "Pod")

    def owned_pods(self, job: Obj) -> list[Obj]:
        return self.owned("Pod", job)

    def reconcile(self, key: Key) -> float | None:
        _, ns, name = key
        try:
            job = self.ctx.store.get("Job", ns, name)
        except ApiError as exc:
            if exc.code == 404:
                return None
            raise
        if any(condition_true(job, c) for c in _FINAL):
            return None
        spec = job.get("spec") or {}
        pods = self.owned_pods(job)
        phase = [(p.get("status") or {}).get("phase") for p in pods]
        active = [p for p, ph in zip(pods, phase, strict=True)
                  if ph not in ("Succeeded", "Failed")
                  and not p["metadata"].get("deletionTimestamp")]
        succeeded = phase.count("Succeeded")
        failed = phase.count("Failed")
        if (spec.get("template") or {}).get("spec", {}).get("restartPolicy") == "OnFailure":
            failed += sum(_restarts(p) for p in active)
        status: Obj = {"active": len(active), "succeeded": succeeded, "failed": failed,
                       "ready": sum(1 for p in active if _ready(p))}
        now = now_rfc3339()
        conditions: list[Obj] = []
        wake: float | None = None
        if spec.get("suspend"):
            conditions.append(_condition("Suspended", "JobSuspended", "Job suspended", now))
            self._delete(job, active)
            status["active"] = 0
        elif succeeded >= int(spec.get("completions") or 1):
            conditions += [_condition("SuccessCriteriaMet", "CompletionsReached",
                                      "Reached expected number of succeeded pods", now),
                           _condition("Complete", "CompletionsReached",
                                      "Reached expected number of succeeded pods", now)]
            status["completionTime"] = now
            self._event(job, "Completed", "Job completed")
        elif failed > int(spec.get("backoffLimit", 6)):
            conditions += self._fail(job, active, "BackoffLimitExceeded",
                                     "Job has reached the specified backoff limit", now)
            status["active"] = 0
        elif (left := self._deadline_left(job)) is not None and left <= 0:
            conditions += self._fail(job, active, "DeadlineExceeded",
                                     "Job was active longer than specified deadline", now)
            status["active"] = 0
        else:
            wake = left
            missing = min(int(spec.get("parallelism") or 1),
                          int(spec.get("completions") or 1) - succeeded) - len(active)
            for _ in range(max(0, missing)):
                pod = self.ctx.store.create("Pod", pod_from_template(job, spec["template"]))
                self._event(job, "SuccessfulCreate", f"Created pod: {pod['metadata']['name']}")
                status["active"] += 1
        self._write_status(job, status, conditions)
        return wake

    def _deadline_left(self, job: Obj) -> float | None:
        deadline = (job.get("spec") or {}).get("activeDeadlineSeconds")
        start = parse_time((job.get("status") or {}).get("startTime"))
        if deadline is None or start is None:
            return None
        return start + int(deadline) - time.time()

    def _fail(self, job: Obj, active: list[Obj], reason: str, message: str,
              now: str) -> list[Obj]:
        self._delete(job, active)
        self._event(job, reason, message, "Warning")
        return [_condition("FailureTarget", reason, message, now),
                _condition("Failed", reason, message, now)]

    def _delete(self, job: Obj, pods: list[Obj]) -> None:
        for pod in pods:
            try:
                self.ctx.store.delete("Pod", pod["metadata"]["namespace"],
                                      pod["metadata"]["name"])
            except ApiError as exc:
                if exc.code != 404:
                    raise
                continue
            self._event(job, "SuccessfulDelete", f"Deleted pod: {pod['metadata']['name']}")

    def _event(self, job: Obj, reason: str, message: str, type: str = "Normal") -> None:
        self.ctx.store.record_event(job, reason, message, type)

    def _write_status(self, job: Obj, status: Obj, conditions: list[Obj]) -> None:
        old = job.get("status") or {}
        kept = [c for c in old.get("conditions") or []
                if c.get("type") not in {n["type"] for n in conditions}]
        if not (job.get("spec") or {}).get("suspend"):
            kept = [c for c in kept if c.get("type") != "Suspended"]
        new: Obj = {**old, **status, "conditions": kept + conditions}
        new.setdefault("startTime", old.get("startTime") or now_rfc3339())
        if not new["conditions"]:
            new.pop("conditions")
        if new == old:
            return

        def put(obj: Obj) -> None:
            if obj["metadata"].get("uid") == job["metadata"].get("uid"):
                obj["status"] = new

        self.ctx.store.mutate("Job", job["metadata"]["namespace"], job["metadata"]["name"],
                              put, subresource="status")


def _ready(pod: Obj) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])
