"""One run per credential: a ``coordination.k8s.io/v1`` Lease ``rotate-<credential>``.

* acquire = create.  409 AlreadyExists → read the holder.  A lease whose
  ``renewTime + leaseDurationSeconds`` is in the past is *stale* (its holder crashed); it
  is taken over only when the operator says so (``--take-over-lock``), with a conditional
  replace so that two takers cannot both win.
* a daemon thread renews every duration/3 with a conditional replace (resourceVersion);
  if the lease was taken from us, :attr:`Lease.lost` is set and the executor stops at the
  next step boundary instead of running on without the lock.
* release = delete, only if we still hold it.
* a resume may reclaim the lease of *its own run* (holder ``…/<run id>``) at once when that
  holder ran on this host and its process is gone (``kill -9``): the Lease carries the
  holder's host and pid as annotations for exactly this check.
* a holder that is gone from this host and whose run journaled its end (killed between
  ``run.end`` and the release) left a lease that protects nothing: it is taken at once.
* a holder gone from this host whose run did not end: refused (exit 4) naming the two ways
  on — resume that run, or ``--take-over-lock``, which then works without waiting for
  staleness.  Another host or a live process: wait, or take over once the lease is stale.

A credential's providers are locked too: one more Lease per provider workload,
``rotate-provider-<kind>-<namespace>-<name>`` (:func:`provider_lease_name`), taken after the
credential's with the same holder and the same rules, so two credentials that share a
provider (``dragonfly`` and ``dragonfly-acl`` both roll Dragonfly) never run at once: the
second exits 4 naming the holder.  :class:`Locks` holds the whole set.

The Leases live in ``cluster.lockNamespace``; rotate creates only the Lease, never the
namespace (preflight checks it exists).
"""

from __future__ import annotations

import math
import os
import socket
import threading
from collections.abc import Callable
from datetime import timedelta
from types import TracebackType
from typing import Any

from rotate.clients.seams import Kube
from rotate.core.errors import ClientError, ConflictError, LockHeld, NotFoundError
from rotate.core.refs import ObjectRef
from rotate.core.timestamps import parse_rfc3339, rfc3339, utcnow

HOST_ANNOTATION = "rotate.dev/host"
PID_ANNOTATION = "rotate.dev/pid"


def lease_name(credential: str) -> str:
    return f"rotate-{credential}"


def provider_lease_name(provider: ObjectRef) -> str:
    """The Lease that serialises every credential rolling ``provider`` (a DNS-1123 name)."""
    raw = f"rotate-provider-{provider.kind}-{provider.namespace}-{provider.name}".lower()
    return "".join(c if c.isalnum() or c in "-." else "-" for c in raw)[:253].rstrip("-.")


def _process_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False  # it exists, owned by someone else
    return False


class Lease:
    def __init__(
        self, kube: Kube, namespace: str, credential: str, holder: str, *,
        duration: float = 30.0, run_ended: Callable[[str], bool] | None = None,
        name: str | None = None,
    ) -> None:
        """``run_ended(run_id)``: whether that run journaled its end (in this state dir);
        ``name``: the Lease's name when it is not the credential's (a provider's)."""
        self.kube = kube
        self._run_ended = run_ended or (lambda _run_id: False)
        self.namespace = namespace
        self.name = name or lease_name(credential)
        self.holder = holder
        self.duration = max(1, math.ceil(duration))
        self.lost = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ acquire

    def _body(self, transitions: int = 0, acquire_time: str | None = None) -> dict[str, Any]:
        now = rfc3339(utcnow())
        return {
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": self.name, "namespace": self.namespace,
                         "labels": {"app.kubernetes.io/managed-by": "rotate"},
                         "annotations": {HOST_ANNOTATION: socket.gethostname(),
                                         PID_ANNOTATION: str(os.getpid())}},
            "spec": {"holderIdentity": self.holder, "leaseDurationSeconds": self.duration,
                     "acquireTime": acquire_time or now, "renewTime": now,
                     "leaseTransitions": transitions},
        }

    def acquire(
        self, *, take_over: bool = False, renew: bool = True, reclaim_run: str | None = None
    ) -> None:
        """Hold the lease or raise LockHeld (exit 4) naming the holder.

        ``reclaim_run``: the run being resumed; its own dead holder is not a reason to wait.
        """
        try:
            self.kube.create("Lease", self.namespace, self._body())
        except ConflictError:
            self._take_over_or_refuse(take_over, reclaim_run)
        if renew:
            self._thread = threading.Thread(target=self._renew_loop, name=f"lease-{self.name}",
                                            daemon=True)
            self._thread.start()

    @staticmethod
    def _gone_from_here(current: dict[str, Any]) -> int | None:
        """The holder's pid when it ran on this host and that process no longer exists."""
        ann = (current.get("metadata") or {}).get("annotations") or {}
        if ann.get(HOST_ANNOTATION) != socket.gethostname():
            return None
        try:
            pid = int(ann.get(PID_ANNOTATION, ""))
        except ValueError:
            return None
        return pid if _process_gone(pid) else None

    def _take_over_or_refuse(self, take_over: bool, reclaim_run: str | None = None) -> None:
        current = self.kube.get("Lease", self.namespace, self.name)
        spec = current.get("spec") or {}
        holder = str(spec.get("holderIdentity") or "nobody")
        holder_run = holder.rpartition("/")[2]
        renewed = str(spec.get("renewTime") or spec.get("acquireTime") or "")
        duration = int(spec.get("leaseDurationSeconds") or self.duration)
        expires = None
        if renewed:
            try:
                expires = parse_rfc3339(renewed) + timedelta(seconds=duration)
            except ValueError:
                expires = None
        stale = expires is None or expires < utcnow()
        dead_pid = self._gone_from_here(current)
        if dead_pid is not None and (holder_run == reclaim_run
                                     or self._run_ended(holder_run)):
            stale, take_over = True, True  # its own dead holder, or a run that had ended
        elif dead_pid is not None and not take_over:
            raise LockHeld(
                f"Lease {self.namespace}/{self.name} is held by {holder}, whose process "
                f"(pid {dead_pid} on this host, is gone) did not finish its run",
                hint=f"finish that run with `rotate resume {holder_run} --confirm` (it "
                     "reclaims its own lock), or re-run this command with --take-over-lock",
            )
        elif dead_pid is not None:
            stale = True
        if not stale:
            ann = (current.get("metadata") or {}).get("annotations") or {}
            where = ann.get(HOST_ANNOTATION) or "another host"
            at = f"{expires:%H:%M:%S} UTC" if expires is not None else "its expiry"
            raise LockHeld(
                f"another run holds the lock: Lease {self.namespace}/{self.name} is held by "
                f"{holder} (renewed {renewed})",
                hint=f"wait for that run to finish (`rotate runs` on {where}); if its process "
                     f"is gone, the Lease goes stale at {at} — then re-run with "
                     "--take-over-lock",
            )
        if not take_over:
            raise LockHeld(
                f"stale lease held by {holder} since {renewed or 'unknown'} "
                f"(Lease {self.namespace}/{self.name}); re-run with --take-over-lock",
                hint="the holder stopped renewing; make sure it is really gone",
            )
        body = self._body(int(spec.get("leaseTransitions") or 0) + 1)
        body["metadata"]["resourceVersion"] = (current.get("metadata") or {}).get(
            "resourceVersion")
        try:
            self.kube.replace("Lease", self.namespace, self.name, body)
        except ConflictError:
            raise LockHeld(
                f"Lease {self.namespace}/{self.name} changed while taking it over; "
                "someone else took it") from None

    # ------------------------------------------------------------------ renew

    def renew_once(self) -> bool:
        """One conditional renewal; False (and ``lost``) when the lease is no longer ours."""
        try:
            current = self.kube.get("Lease", self.namespace, self.name)
            spec = dict(current.get("spec") or {})
            if spec.get("holderIdentity") != self.holder:
                self.lost = True
                return False
            spec["renewTime"] = rfc3339(utcnow())
            body = dict(current)
            body["spec"] = spec
            self.kube.replace("Lease", self.namespace, self.name, body)
            return True
        except (NotFoundError, ConflictError):
            self.lost = True
            return False
        except ClientError:
            return True  # temporary trouble: the lease stays valid until it expires

    def _renew_loop(self) -> None:
        interval = self.duration / 3
        while not self._stop.wait(interval):
            if not self.renew_once():
                return

    # ------------------------------------------------------------------ release

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self.lost:
            return
        try:
            current = self.kube.get("Lease", self.namespace, self.name)
            if (current.get("spec") or {}).get("holderIdentity") == self.holder:
                self.kube.delete("Lease", self.namespace, self.name)
        except ClientError:
            pass  # it expires on its own; never fail a finished run over its lock

    def __enter__(self) -> Lease:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()


class Locks:
    """The credential's Lease and one per provider, acquired in that order, released all.

    ``lost`` is true when any of them was taken from us: the executor stops at the next step
    boundary.  Acquiring stops at the first Lease held elsewhere (LockHeld, exit 4, naming its
    holder) and releases the ones already taken, so a refused run holds nothing.
    """

    def __init__(self, credential: Lease, providers: list[Lease]) -> None:
        self.credential = credential
        self.providers = providers
        self.namespace = credential.namespace
        self.name = credential.name
        self.holder = credential.holder

    @property
    def all(self) -> list[Lease]:
        return [self.credential, *self.providers]

    @property
    def lost(self) -> bool:
        return any(lease.lost for lease in self.all)

    def acquire(
        self, *, take_over: bool = False, renew: bool = True, reclaim_run: str | None = None
    ) -> None:
        taken: list[Lease] = []
        try:
            for lease in self.all:
                lease.acquire(take_over=take_over, renew=renew, reclaim_run=reclaim_run)
                taken.append(lease)
        except BaseException:
            for lease in reversed(taken):
                lease.release()
            raise

    def release(self) -> None:
        for lease in reversed(self.all):
            lease.release()
