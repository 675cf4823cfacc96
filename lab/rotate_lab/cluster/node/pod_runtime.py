"""One pod's processes, probes and status — the work horse of the kubelet (:class:`Node`).

A :class:`PodRuntime` owns one thread that ticks every :data:`TICK` seconds: it starts or
restarts containers and runs their due probes (:mod:`.container_runtime`), refreshes volume
files, and writes the Pod's status through the status subresource *only when it changed*
(so the store, and every controller watching pods, sees one event per real transition).

Back-off: ``base * 2**n`` capped at ``30 * base`` where ``base`` is the profile's readiness
period (0.2 s fast, 1 s realistic) — Kubernetes' 10 s → 5 min curve, scaled to the lab.
"""

from __future__ import annotations

import base64
import os
import signal
import subprocess
import threading
import time
from typing import IO, Any

from rotate_lab.cluster.api.store import ApiError
from rotate_lab.cluster.node.container_runtime import GRACE, ContainerRuntime, Node

Obj = dict[str, Any]

TICK = 0.05
VOLUME_CHECK = 0.25


def _is_provider(image: str) -> bool:
    lowered = image.lower()
    return "dragonfly" in lowered or "redis" in lowered


class PodRuntime:
    def __init__(self, kubelet: Node, pod: Obj) -> None:
        self.kubelet = kubelet
        ctx = kubelet.ctx
        self.store = ctx.store
        md = pod["metadata"]
        self.ns, self.name, self.uid = str(md["namespace"]), str(md["name"]), str(md["uid"])
        self.current = pod
        self.labels: dict[str, str] = dict(md.get("labels") or {})
        self.lab_dir = ctx.dir
        self.dir = kubelet.pod_dir(self.ns, self.name)
        self.ip = ""
        self.started = ""
        self.period_cap = ctx.profile.readiness_period
        self.backoff_base = ctx.profile.readiness_period
        spec = pod.get("spec") or {}
        #: Always (the default, every workload's pods), OnFailure or Never (a Job's pods)
        self.restart_policy = str(spec.get("restartPolicy") or "Always")
        self.containers = [ContainerRuntime(self, c) for c in spec.get("containers") or []]
        self.service_name = self.labels.get("app") or (
            self.containers[0].name if self.containers else self.name)
        app = self.labels.get("app")
        #: the fault switch that was on when this pod was created, if any: only new pods
        #: crash, and they stop crashing at their next start once the switch is off again
        self.crash_fault: tuple[str, str | None] | None = None
        if app and ctx.faults.active("crashloop", app):
            self.crash_fault = ("crashloop", app)
        elif any(_is_provider(c.image) for c in self.containers) and \
                ctx.faults.active("provider-crashloop"):
            self.crash_fault = ("provider-crashloop", None)
        self.base_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                         "LANG": os.environ.get("LANG", "C.UTF-8"),
                         "HOME": str(self.dir), "HOSTNAME": self.name}
        self.volumes: dict[str, tuple[str, str]] = {}  # volume → (observed rv, written rv)
        self._volume_changed_at: dict[str, float] = {}
        self._next_volume_check = 0.0
        self._conditions: dict[str, tuple[str, str]] = {}  # type → (status, since)
        self._published: Obj | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name=f"pod-{self.ns}-{self.name}")
        self.finished = False

    def event(self, reason: str, message: str, type: str = "Normal") -> None:
        """A core/v1 Event about this pod (kubectl describe); never carries a value."""
        self.store.record_event(self.current, reason, message, type)

    def crashing(self) -> bool:
        if self.crash_fault is None:
            return False
        kind, target = self.crash_fault
        return self.kubelet.ctx.faults.active(kind, target)

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> None:
        self._thread.start()

    def stop(self, wait: bool) -> None:
        self._stop.set()
        if wait:
            self.join()

    def join(self) -> None:
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=GRACE + 5)

    def open_log(self) -> IO[bytes]:
        return open(self.kubelet.log_file(self.ns, self.name), "ab")

    def _run(self) -> None:
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            self.ip = self.kubelet.ctx.network.pod_ip()
            self.started = self.kubelet.now()
            if self.crash_fault:
                with self.open_log() as log:
                    log.write(b"--- lab kubelet: a crashloop fault is active for this pod\n")
            self._publish()
            if not self._stop.wait(self.kubelet.ctx.profile.pod_delay()):
                self._sync_volumes(time.monotonic(), force=True)
                while not self._stop.is_set():
                    now = time.monotonic()
                    self._sync_volumes(now)
                    if not self._mount_error:
                        for c in self.containers:
                            c.step(now)
                    if not self._publish():
                        break  # the pod is gone
                    self._stop.wait(TICK)
        except Exception:
            self.kubelet.log.exception("pod %s/%s: runtime failed", self.ns, self.name)
        finally:
            self._terminate()
            self.finished = True

    def _terminate(self) -> None:
        for c in self.containers:
            c.kill(signal.SIGTERM)
        deadline = time.monotonic() + GRACE
        for c in self.containers:
            if c.proc is None:
                continue
            try:
                c.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                c.kill(signal.SIGKILL)
                c.proc.wait()
            self.kubelet.record_pid(c.pid_key, None, exited=c.proc.pid)
            c.proc = None

    # -- volumes --------------------------------------------------------------------------

    _mount_error: str | None = None

    def _sync_volumes(self, now: float, force: bool = False) -> None:
        if not force and now < self._next_volume_check:
            return
        self._next_volume_check = now + VOLUME_CHECK
        delay = self.kubelet.ctx.profile.secret_volume_delay
        error = None
        for vol in (self.current.get("spec") or {}).get("volumes") or []:
            kind, src = (("Secret", vol["secret"]) if "secret" in vol else
                         ("ConfigMap", vol["configMap"]) if "configMap" in vol else ("", None))
            if not kind or not isinstance(src, dict):
                continue
            name = str(src.get("secretName") or src.get("name") or "")
            try:
                obj: Obj | None = self.store.get(kind, self.ns, name)
            except ApiError:
                obj = None
            vname = str(vol.get("name"))
            if obj is None:
                if not src.get("optional") and vname not in self.volumes:
                    error = (f'MountVolume.SetUp failed for volume "{vname}" : '
                             f'{kind.lower()} "{name}" not found')
                continue
            rv = str(obj["metadata"].get("resourceVersion"))
            written = self.volumes.get(vname, ("", ""))[1]
            if rv == written:
                continue
            first_seen = self._volume_changed_at.setdefault(vname, now)
            if written and not force and now - first_seen < delay:
                continue
            self._write_volume(vname, kind, obj, src)
            self.volumes[vname] = (rv, rv)
            self._volume_changed_at.pop(vname, None)
        self._mount_error = error
        if error:
            for c in self.containers:
                if not c.ever_started:
                    c.waiting = ("ContainerCreating", error)

    def _write_volume(self, vname: str, kind: str, obj: Obj, src: Obj) -> None:
        target = self.dir / "volumes" / vname
        target.mkdir(parents=True, exist_ok=True)
        data = obj.get("data") or {}
        items = src.get("items") or [{"key": k, "path": k} for k in data]
        mode = int(src.get("defaultMode") or 0o644)
        for item in items:
            key = str(item.get("key"))
            if key not in data:
                continue
            raw = base64.b64decode(str(data[key])) if kind == "Secret" else \
                str(data[key]).encode()
            path = target / str(item.get("path") or key)
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "wb") as fh:
                fh.write(raw)
            os.chmod(tmp, int(item.get("mode") or mode) & 0o777)
            os.replace(tmp, path)

    # -- status ---------------------------------------------------------------------------

    def _condition(self, ctype: str, value: bool) -> Obj:
        status = "True" if value else "False"
        prev = self._conditions.get(ctype)
        if prev is None or prev[0] != status:
            self._conditions[ctype] = (status, self.kubelet.now())
        return {"type": ctype, "status": status, "lastProbeTime": None,
                "lastTransitionTime": self._conditions[ctype][1]}

    def _status(self) -> Obj:
        statuses = [c.status() for c in self.containers]
        all_ready = bool(self.containers) and all(c.ready for c in self.containers)
        phase = "Running" if self.containers and all(c.ever_started
                                                     for c in self.containers) else "Pending"
        finished = [c.terminated for c in self.containers if c.terminated is not None]
        if self.containers and len(finished) == len(self.containers):
            # A pod whose containers all exited for good: its phase is final.
            phase = "Succeeded" if all(t.get("exitCode") == 0 for t in finished) else "Failed"
        out: Obj = {
            "phase": phase,
            "conditions": [
                self._condition("Initialized", True),
                self._condition("Ready", all_ready),
                self._condition("ContainersReady", all_ready),
                self._condition("PodScheduled", True),
            ],
            "hostIP": "127.0.0.1", "hostIPs": [{"ip": "127.0.0.1"}],
            "startTime": self.started, "containerStatuses": statuses,
            "qosClass": "BestEffort",
        }
        if self.ip:
            out["podIP"] = self.ip
            out["podIPs"] = [{"ip": self.ip}]
        return out

    def _publish(self) -> bool:
        """Write the status if it changed; False once the pod (this uid) is gone."""
        status = self._status()
        if status == self._published:
            return True
        uid = self.uid

        def put(obj: Obj) -> None:
            if obj["metadata"].get("uid") == uid:
                obj["status"] = status

        try:
            self.current = self.store.mutate("Pod", self.ns, self.name, put,
                                             subresource="status")
        except ApiError as exc:
            if exc.code == 404:
                return False
            raise
        if self.current["metadata"].get("uid") != uid:
            return False
        self._published = status
        return True
