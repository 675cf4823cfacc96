"""The lab's kubelet: every Pod in the store runs as local processes on its own loopback IP.

One :class:`PodRuntime` thread per pod (keyed by uid, so a pod deleted and recreated under the
same name — a StatefulSet pod — never shares processes with its predecessor):

- it takes a pod IP from the lab's address plan and reports it with ``Pending`` at once,
  waits ``profile.pod_delay()`` (image pull, sandbox), then starts each container;
- a container's environment is resolved when it starts — the running process keeps the
  values it was started with, as in Kubernetes, so a Secret change needs a restart;
- secret/configMap volumes are files under ``DIR/pods/<ns>_<pod>/volumes/<volume>/`` that
  follow their object ``profile.secret_volume_delay`` seconds after it changes;
- readiness probes (httpGet, tcpSocket, exec) run every ``min(periodSeconds,
  profile.readiness_period)`` and drive the container's ``ready`` and the pod's Ready and
  ContainersReady conditions; without a probe a running container is ready; liveness probes
  run every ``min(periodSeconds, max(profile.readiness_period, 1 s))`` (a liveness failure
  kills: see ``pod_runtime.LIVENESS_PERIOD_FLOOR``);
- a container that exits, or fails its liveness probe, is restarted after an exponential
  back-off (state waiting ``CrashLoopBackOff``, ``restartCount`` grows);
- fault switches: a pod created while ``crashloop <app>`` or ``provider-crashloop``
  (Dragonfly/redis images) is on has every container start exit at once while the switch
  stays on — existing pods keep running, new ones never become Ready; once the switch is
  cleared, the crashing pod's next restart succeeds (as a real crash loop heals when its
  cause goes away).

Deletion: when the Pod leaves the store (or gets a ``deletionTimestamp``), its process groups
get SIGTERM, then SIGKILL after a short grace.  Every pid is kept in ``DIR/pods.json`` (key
``ns/pod`` or ``ns/pod/container`` for secondary containers) so ``rotate lab down`` can stop
exactly these processes.  Pod output goes to ``DIR/logs/pods/<ns>_<pod>.log``.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rotate_lab.cluster.api.store import ApiError, now_rfc3339
from rotate_lab.cluster.controllers.base import Controller, Key, key_of
from rotate_lab.cluster.node.pod_runtime import PodRuntime

if TYPE_CHECKING:
    from rotate_lab.cluster.context import LabContext

Obj = dict[str, Any]


class Kubelet(Controller):
    name = "kubelet"
    kinds = ("Pod",)
    resync_period = 5.0

    def __init__(self, ctx: LabContext) -> None:
        super().__init__(ctx)
        self.runtimes: dict[tuple[str, str], PodRuntime] = {}
        #: runtimes told to stop whose processes may still be exiting; joined by on_stop
        self._stopping: set[PodRuntime] = set()
        #: uids of pods being deleted gracefully, whose object goes once their processes did
        self._terminating: set[str] = set()
        self._pids_lock = threading.Lock()
        self._pids: dict[str, int] = {}
        self.pods_file = ctx.dir / "pods.json"
        (ctx.dir / "logs" / "pods").mkdir(parents=True, exist_ok=True)
        (ctx.dir / "pods").mkdir(parents=True, exist_ok=True)

    def keys_for(self, event_type: str, kind: str, obj: Obj) -> list[Key]:
        return [key_of(kind, obj)]

    def reconcile(self, key: Key) -> float | None:
        _, ns, name = key
        try:
            pod: Obj | None = self.ctx.store.get("Pod", ns, name)
        except ApiError as exc:
            if exc.code != 404:
                raise
            pod = None
        runtime = self.runtimes.get((ns, name))
        uid = pod["metadata"].get("uid") if pod else None
        if runtime is not None and (runtime.uid != uid or runtime.finished):
            self.runtimes.pop((ns, name))
            runtime.stop(wait=False)
            self._stopping.add(runtime)
            runtime = None
        self._stopping = {r for r in self._stopping if not r.finished}
        if pod is None:
            return None
        if pod["metadata"].get("deletionTimestamp"):
            # Graceful deletion: stop the processes, then remove the object (once per uid:
            # the pod's own last status writes and resyncs come back here meanwhile).
            if uid in self._terminating:
                return None
            self._terminating.add(str(uid))
            victim = runtime
            self.runtimes.pop((ns, name), None)
            if victim is not None:
                self._stopping.add(victim)
            threading.Thread(target=self._finish_deletion, args=(victim, ns, name, uid),
                             daemon=True, name=f"kubelet-delete-{name}").start()
            return None
        if runtime is None:
            runtime = PodRuntime(self, pod)
            self.runtimes[(ns, name)] = runtime
            runtime.start()
        return None

    def _finish_deletion(self, runtime: PodRuntime | None, ns: str, name: str,
                         uid: str | None) -> None:
        if runtime is not None:
            runtime.stop(wait=True)
        try:
            current = self.ctx.store.get("Pod", ns, name)
            if current["metadata"].get("uid") == uid:
                self.ctx.store.delete("Pod", ns, name)
        except ApiError:
            pass
        finally:
            self._terminating.discard(str(uid))

    def on_stop(self) -> None:
        runtimes = [*self.runtimes.values(), *self._stopping]
        self.runtimes.clear()
        self._stopping.clear()
        for r in runtimes:
            r.stop(wait=False)
        for r in runtimes:
            r.join()

    # -- pids.json ---------------------------------------------------------------------

    def record_pid(self, key: str, pid: int | None, *, exited: int | None = None) -> None:
        """Record ``pid`` under ``key``, or forget it (``pid=None``).  ``exited`` forgets only
        that pid: a pod recreated under the same name (a StatefulSet's) may have recorded its
        new process before its predecessor's finished exiting."""
        with self._pids_lock:
            if pid is None:
                if exited is None or self._pids.get(key) == exited:
                    self._pids.pop(key, None)
            else:
                self._pids[key] = pid
            tmp = self.pods_file.with_suffix(".tmp")
            tmp.write_text(json.dumps(self._pids, sort_keys=True, indent=1))
            os.replace(tmp, self.pods_file)

    def pod_dir(self, ns: str, name: str) -> Path:
        return self.ctx.dir / "pods" / f"{ns}_{name}"

    def log_file(self, ns: str, name: str) -> Path:
        return self.ctx.dir / "logs" / "pods" / f"{ns}_{name}.log"

    @staticmethod
    def now() -> str:
        return now_rfc3339()
