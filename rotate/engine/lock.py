"""One run per credential: a ``coordination.k8s.io/v1`` Lease ``rotate-<credential>``.

* acquire = create.  409 AlreadyExists → read the holder.  A lease whose
  ``renewTime + leaseDurationSeconds`` is in the past is *stale* (its holder crashed); it
  is taken over only when the operator says so (``--take-over-lock``), with a conditional
  replace so that two takers cannot both win.
* a daemon thread renews every duration/3 with a conditional replace (resourceVersion);
  if the lease was taken from us, :attr:`Lease.lost` is set (and :attr:`Lease.taken_by`
  names the new holder) and the executor stops at the next step boundary instead of running
  on without the lock (LockLost, exit 5).  A process frozen longer than the lease's duration
  (SIGSTOP, a suspended VM) cannot trust its renewal thread to have noticed yet:
  :meth:`Lease.still_held` asks the API server itself once the last renewal is older than
  the duration — so a step boundary costs no request while renewals are on time.
* release = delete, only if we still hold it — except a lease this process *took over*
  whose run never started (its preflight refused, nothing was journaled): it is given back,
  the previous holder's record restored, so the run that held it stays locked as before
  (resumable by its own ``resume``) instead of being left unlocked.
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
import time
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


def holder_gone_from_here(current: dict[str, Any]) -> int | None:
    """The holder's pid when the Lease ``current`` was taken on this host and that process
    no longer exists (the annotations :data:`HOST_ANNOTATION`/:data:`PID_ANNOTATION`)."""
    ann = (current.get("metadata") or {}).get("annotations") or {}
    if ann.get(HOST_ANNOTATION) != socket.gethostname():
        return None
    try:
        pid = int(ann.get(PID_ANNOTATION, ""))
    except ValueError:
        return None
    return pid if _process_gone(pid) else None


class Lease:
    def __init__(
        self, kube: Kube, namespace: str, credential: str, holder: str, *,
        duration: float = 30.0, run_ended: Callable[[str], bool] | None = None,
        name: str | None = None, run_started: Callable[[str], bool] | None = None,
    ) -> None:
        """``run_ended(run_id)``: whether that run journaled its end (in this state dir);
        ``run_started(run_id)``: whether that run journaled anything (unknown: assumed so,
        and a taken-over lease is deleted on release, not given back);
        ``name``: the Lease's name when it is not the credential's (a provider's)."""
        self.kube = kube
        self._run_ended = run_ended or (lambda _run_id: False)
        self._run_started = run_started or (lambda _run_id: True)
        self.namespace = namespace
        self.name = name or lease_name(credential)
        self.holder = holder
        self.duration = max(1, math.ceil(duration))
        self.lost = False
        #: who holds the lease since it was taken from us ("" when it was deleted)
        self.taken_by = ""
        #: the lease as it was before this process took it over (None: created it)
        self._previous: dict[str, Any] | None = None
        self._renewed = time.monotonic()
        self._renewing = threading.Lock()  # the renewal thread and still_held() alike
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def run_id(self) -> str:
        """The run this process holds the lease for (the holder identity's last part)."""
        return self.holder.rpartition("/")[2]

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
        self._renewed = time.monotonic()
        if renew:
            self._thread = threading.Thread(target=self._renew_loop, name=f"lease-{self.name}",
                                            daemon=True)
            self._thread.start()

    @staticmethod
    def _gone_from_here(current: dict[str, Any]) -> int | None:
        return holder_gone_from_here(current)

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
        self._previous = current

    # ------------------------------------------------------------------ renew

    def renew_once(self) -> bool:
        """One conditional renewal; False (and ``lost``) when the lease is no longer ours."""
        with self._renewing:
            if self.lost:
                return False
            try:
                current = self.kube.get("Lease", self.namespace, self.name)
                spec = dict(current.get("spec") or {})
                if not self._ours(current):
                    self._lose(str(spec.get("holderIdentity") or ""))
                    return False
                spec["renewTime"] = rfc3339(utcnow())
                body = dict(current)
                body["spec"] = spec
                self.kube.replace("Lease", self.namespace, self.name, body)
                self._renewed = time.monotonic()
                return True
            except NotFoundError:
                self._lose("")
                return False
            except ConflictError:
                self._lose(self._holder_now())
                return False
            except ClientError:
                return True  # temporary trouble: the lease stays valid until it expires

    def _ours(self, current: dict[str, Any]) -> bool:
        """Whether ``current`` is this process's lease: our holder identity *and* our host
        and pid — a resume of the same run (``--take-over-lock``) has the same identity
        (``user@host/<run id>``) but is another process.  A lease without the annotations
        (edited by hand) is judged by its identity alone."""
        if (current.get("spec") or {}).get("holderIdentity") != self.holder:
            return False
        ann = (current.get("metadata") or {}).get("annotations") or {}
        if PID_ANNOTATION not in ann:
            return True
        return (ann.get(PID_ANNOTATION) == str(os.getpid())
                and ann.get(HOST_ANNOTATION) == socket.gethostname())

    def _lose(self, taken_by: str) -> None:
        self.lost = True
        self.taken_by = taken_by

    def _holder_now(self) -> str:
        """Who holds the lease now, best effort ("" when unknown or deleted)."""
        try:
            current = self.kube.get("Lease", self.namespace, self.name)
        except ClientError:
            return ""
        return str((current.get("spec") or {}).get("holderIdentity") or "")

    def still_held(self) -> bool:
        """Whether the lease is still ours, asked of the API server only when the last
        renewal is older than the lease's duration (the process was frozen, or renewals
        failed): until then nobody could have taken it over, and no request is made."""
        if self.lost:
            return False
        if time.monotonic() - self._renewed <= self.duration:
            return True
        return self.renew_once()

    def _renew_loop(self) -> None:
        interval = self.duration / 3
        while not self._stop.wait(interval):
            if not self.renew_once():
                return

    # ------------------------------------------------------------------ release

    def release(self) -> None:
        """Delete the lease if it is still ours; a lease this process took over for a run
        that never started is given back instead (:meth:`_give_back`)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self.lost:
            return
        try:
            current = self.kube.get("Lease", self.namespace, self.name)
            if not self._ours(current):
                return
            if self._previous is not None and not self._run_started(self.run_id):
                self._give_back(current)
            else:
                self.kube.delete("Lease", self.namespace, self.name)
        except ClientError:
            pass  # it expires on its own; never fail a finished run over its lock

    def abandon(self) -> None:
        """Stop renewing and leave the lease to expire (the run's journal is not in the
        cluster yet: another machine must not start on top of it unnoticed)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _give_back(self, current: dict[str, Any]) -> None:
        """Restore the lease as it was before the take-over (holder, times, annotations),
        conditionally on our own version: the run that held it is as locked as before.
        Should that fail, the lease is left to expire — never deleted."""
        previous = self._previous or {}
        meta = dict(previous.get("metadata") or {})
        meta["resourceVersion"] = (current.get("metadata") or {}).get("resourceVersion")
        body = {**previous, "metadata": meta}
        self.kube.replace("Lease", self.namespace, self.name, body)

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

    @property
    def lost_lease(self) -> Lease | None:
        """The first of the leases taken from us, if any."""
        return next((lease for lease in self.all if lease.lost), None)

    def still_held(self) -> bool:
        """Every lease still ours (:meth:`Lease.still_held`: no request while renewals are
        on time)."""
        return all(lease.still_held() for lease in self.all)

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

    def abandon(self) -> None:
        for lease in self.all:
            lease.abandon()
