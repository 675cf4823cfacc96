"""Which ``rotate watch`` replica acts: the holder of Lease ``rotate-watch`` in the lock
namespace (``coordination.k8s.io/v1``), as Kubernetes' own controllers elect a leader.

Invariants:

* one step, :meth:`Leadership.step`, called by the watch loop every ``duration/3`` seconds:
  create the Lease when absent; renew it when ours; take it over when its holder stopped
  renewing for longer than its duration (``leaseTransitions`` + 1).  Every write is
  conditional on the resourceVersion read, so two replicas cannot both win.
* a replica that fails to renew for a whole duration stops counting itself leader at once
  (:attr:`Leadership.leading` false), before another could have taken over: two leaders never
  act at the same time as long as clocks advance at the same rate.
* on SIGTERM the leader releases the Lease (holder cleared), so the next replica leads at
  its next step instead of after the duration.
* the holder identity is the pod's name (``HOSTNAME``) and pid: a replica restarted in the
  same pod is another holder.
"""

from __future__ import annotations

import os
import socket
import time
from datetime import timedelta
from typing import Any

from rotate.clients.seams import Kube
from rotate.core.errors import ClientError, ConflictError, NotFoundError
from rotate.core.timestamps import parse_rfc3339, rfc3339, utcnow

LEASE_NAME = "rotate-watch"


def identity() -> str:
    return f"{os.environ.get('HOSTNAME') or socket.gethostname()}/{os.getpid()}"


def expired(lease: dict[str, Any], now: float | None = None) -> bool:
    """Whether ``lease``'s holder stopped renewing more than its duration ago (or holds
    nothing)."""
    spec = lease.get("spec") or {}
    if not spec.get("holderIdentity"):
        return True
    renewed = str(spec.get("renewTime") or spec.get("acquireTime") or "")
    try:
        until = parse_rfc3339(renewed) + timedelta(
            seconds=int(spec.get("leaseDurationSeconds") or 0))
    except ValueError:
        return True
    return until.timestamp() < (time.time() if now is None else now)


class Leadership:
    def __init__(self, kube: Kube, namespace: str, *, duration: int = 15,
                 holder: str | None = None, name: str = LEASE_NAME) -> None:
        self.kube = kube
        self.namespace = namespace
        self.name = name
        self.duration = max(2, duration)
        self.holder = holder or identity()
        self._renewed: float | None = None  # monotonic time of our last successful write
        #: who leads, as last read ("" unknown)
        self.leader = ""

    @property
    def leading(self) -> bool:
        return self._renewed is not None and \
            time.monotonic() - self._renewed < self.duration

    def _body(self, transitions: int, acquired: str | None,
              version: str | None) -> dict[str, Any]:
        now = rfc3339(utcnow())
        meta: dict[str, Any] = {"name": self.name, "namespace": self.namespace,
                                "labels": {"app.kubernetes.io/managed-by": "rotate"}}
        if version:
            meta["resourceVersion"] = version
        return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta,
                "spec": {"holderIdentity": self.holder, "leaseDurationSeconds": self.duration,
                         "acquireTime": acquired or now, "renewTime": now,
                         "leaseTransitions": transitions}}

    def step(self) -> bool:
        """One election round; whether this replica leads now.  API trouble keeps the
        current belief until it runs out (:attr:`leading`)."""
        try:
            try:
                current = self.kube.get("Lease", self.namespace, self.name)
            except NotFoundError:
                self.kube.create("Lease", self.namespace, self._body(0, None, None))
                return self._won()
            spec = current.get("spec") or {}
            holder = str(spec.get("holderIdentity") or "")
            version = (current.get("metadata") or {}).get("resourceVersion")
            transitions = int(spec.get("leaseTransitions") or 0)
            if holder == self.holder:
                self.kube.replace("Lease", self.namespace, self.name, self._body(
                    transitions, str(spec.get("acquireTime") or ""), version))
                return self._won()
            if expired(current):
                self.kube.replace("Lease", self.namespace, self.name,
                                  self._body(transitions + 1, None, version))
                return self._won()
            self.leader, self._renewed = holder, None
            return False
        except ConflictError:
            self._renewed = None  # someone else wrote it first
            return False
        except ClientError:
            return self.leading

    def _won(self) -> bool:
        self._renewed = time.monotonic()
        self.leader = self.holder
        return True

    def release(self) -> None:
        """Give the Lease up (holder cleared) if ours, so the next replica leads at once."""
        if self._renewed is None:
            return
        self._renewed = None
        try:
            current = self.kube.get("Lease", self.namespace, self.name)
            spec = dict(current.get("spec") or {})
            if spec.get("holderIdentity") != self.holder:
                return
            spec.pop("holderIdentity", None)
            self.kube.replace("Lease", self.namespace, self.name, {**current, "spec": spec})
        except ClientError:
            pass  # it expires on its own
