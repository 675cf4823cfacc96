"""One pod's processes, probes and status — the work horse of the kubelet (:class:`Node`).

A :class:`PodRuntime` owns one thread that ticks every :data:`TICK` seconds: it starts or
restarts containers, runs due readiness probes, refreshes volume files, and writes the Pod's
status through the status subresource *only when it changed* (so the store, and every
controller watching pods, sees one event per real transition).

Back-off: ``base * 2**n`` capped at ``30 * base`` where ``base`` is the profile's readiness
period (0.2 s fast, 1 s realistic) — Kubernetes' 10 s → 5 min curve, scaled to the lab.
"""

from __future__ import annotations

import base64
import contextlib
import os
import signal
import subprocess
import threading
import time
from typing import IO, TYPE_CHECKING, Any, Protocol

from rotate_lab.cluster.api.store import ApiError
from rotate_lab.cluster.node.containers import (
    ConfigError,
    Launch,
    UnknownImage,
    container_env,
    volume_mounts,
)
from rotate_lab.cluster.node.images import launch_for
from rotate_lab.cluster.node.incluster import (
    SERVICEACCOUNT_PATH,
    automounts,
    is_rotate_image,
    mount_service_account,
    rotate_launch,
)
from rotate_lab.cluster.node.probes import Probe
from rotate_lab.host import priority

if TYPE_CHECKING:
    import logging
    from pathlib import Path

    from rotate_lab.cluster.context import LabContext

Obj = dict[str, Any]

TICK = 0.05
GRACE = 2.0  # SIGTERM → SIGKILL; short, pods here are local processes
VOLUME_CHECK = 0.25
#: A liveness failure kills the container, so its period is capped less hard than
#: readiness': with the fast profile's 0.2 s, three failures would kill a pod still starting
#: (Python start-up, bootstrap fetch) within 0.6 s on a loaded machine — a crash loop no real
#: cluster has (there, 3 x 5 s).  1 s keeps a hung container's restart within seconds.
LIVENESS_PERIOD_FLOOR = 1.0


class Node(Protocol):
    """What a pod's runtime needs from its kubelet (:class:`~.kubelet.Kubelet`)."""

    @property
    def ctx(self) -> LabContext: ...

    @property
    def log(self) -> logging.Logger: ...

    def record_pid(self, key: str, pid: int | None, *, exited: int | None = None) -> None: ...

    def pod_dir(self, ns: str, name: str) -> Path: ...

    def log_file(self, ns: str, name: str) -> Path: ...

    def now(self) -> str: ...


CRASH_ARGV = ["/bin/sh", "-c", "echo 'lab fault: container exits at start (crashloop)' >&2; "
              "exit 1"]


def _is_provider(image: str) -> bool:
    lowered = image.lower()
    return "dragonfly" in lowered or "redis" in lowered


class ContainerRuntime:
    def __init__(self, pod: PodRuntime, spec: Obj) -> None:
        self.pod = pod
        self.spec = spec
        self.name = str(spec.get("name") or "main")
        self.image = str(spec.get("image") or "")
        self.proc: subprocess.Popen[bytes] | None = None
        self.env: dict[str, str] = {}
        self.restart_count = 0
        self.ever_started = False
        self.started_at = ""
        self.waiting: tuple[str, str] = ("ContainerCreating", "")
        self.last_state: Obj = {}
        self.next_start = 0.0
        self.backoff = pod.backoff_base
        self.run_since = 0.0
        self.image_failures = 0
        probe = spec.get("readinessProbe")
        self.probe = Probe(probe, pod.period_cap) if isinstance(probe, dict) else None
        live = spec.get("livenessProbe")
        self.liveness = (Probe(live, max(pod.period_cap, LIVENESS_PERIOD_FLOOR))
                         if isinstance(live, dict) else None)
        boot = spec.get("startupProbe")
        self.startup = Probe(boot, pod.period_cap) if isinstance(boot, dict) else None
        #: the startup probe succeeded since the container (re)started
        self.startup_passed = False
        self.kill_at: float | None = None  # liveness failed: SIGKILL if still alive then
        #: exited for good (restartPolicy Never, or OnFailure with exit 0): never restarted
        self.terminated: Obj | None = None

    @property
    def pid_key(self) -> str:
        base = f"{self.pod.ns}/{self.pod.name}"
        return base if self.pod.containers[0] is self else f"{base}/{self.name}"

    @property
    def started(self) -> bool:
        """containerStatuses[].started: running, and its startup probe (if any) passed."""
        return self.proc is not None and (self.startup is None or self.startup_passed)

    @property
    def ready(self) -> bool:
        if not self.started:
            return False
        return True if self.probe is None else self.probe.ready

    def step(self, now: float) -> None:
        if self.terminated is not None:
            return
        if self.proc is None:
            if now >= self.next_start:
                self._start(now)
        elif self.proc.poll() is not None:
            self._exited(now)
        else:
            self._check_probes(now)

    def _check_probes(self, now: float) -> None:
        if self.kill_at is not None:
            if now >= self.kill_at:
                self.kill(signal.SIGKILL)
            return
        if not self.started:
            self._check_startup(now)
            return
        if self.probe is not None and now >= self.probe.next_at:
            was_ready = self.probe.ready
            self.probe.record(self._probe(self.probe), time.monotonic())
            if was_ready and not self.probe.ready:
                self.pod.event("Unhealthy", f"Readiness probe of container {self.name} failed",
                               "Warning")
        live = self.liveness
        if live is not None and now >= live.next_at:
            live.record(self._probe(live), time.monotonic())
            if live.failures >= live.failure_threshold:
                # As the kubelet does: a failed liveness probe restarts the container.
                with self.pod.open_log() as log:
                    log.write(f"--- lab kubelet: container {self.name} failed liveness probe, "
                              "will be restarted\n".encode())
                self.pod.event("Killing", f"Container {self.name} failed liveness probe, "
                               "will be restarted")
                self.kill(signal.SIGTERM)
                self.kill_at = now + GRACE

    def _check_startup(self, now: float) -> None:
        """As the kubelet: readiness and liveness wait for the startup probe; it failing
        ``failureThreshold`` times in a row restarts the container.  The lab caps the probe's
        period (the profile), so the failure count is scaled to keep the spec's time budget
        (``periodSeconds`` x ``failureThreshold``) — a slow start is not killed sooner."""
        boot = self.startup
        if boot is None or now < boot.next_at:
            return
        boot.record(self._probe(boot), time.monotonic())
        if boot.ready:
            self.startup_passed = True
            return
        spec_period = float(boot.spec.get("periodSeconds") or 10)
        budget = boot.failure_threshold * max(1, round(spec_period / boot.period))
        if boot.failures >= budget:
            with self.pod.open_log() as log:
                log.write(f"--- lab kubelet: container {self.name} failed startup probe, "
                          "will be restarted\n".encode())
            self.pod.event("Unhealthy", f"Startup probe of container {self.name} failed",
                           "Warning")
            self.pod.event("Killing", f"Container {self.name} failed startup probe, will be "
                           "restarted")
            self.kill(signal.SIGTERM)
            self.kill_at = now + GRACE

    def _start(self, now: float) -> None:
        pod = self.pod
        if pod.crashing():
            launch = Launch(list(CRASH_ARGV), dict(pod.base_env), None, "crash")
        else:
            try:
                self.env = container_env(pod.store, pod.current, self.spec)
                launch = self._launch()
            except UnknownImage as exc:
                self.image_failures += 1
                if self.image_failures == 1:
                    self.pod.event("Failed", f"Failed to pull image \"{self.image}\": {exc}",
                                   "Warning")
                self.waiting = (("ErrImagePull", str(exc)) if self.image_failures == 1 else
                                ("ImagePullBackOff", f'Back-off pulling image "{self.image}"'))
                self.next_start = now + min(self.backoff * 2 ** self.image_failures, 30.0)
                return
            except ConfigError as exc:
                if self.waiting != ("CreateContainerConfigError", str(exc)):
                    self.pod.event("Failed", f"Error: {exc}", "Warning")
                self.waiting = ("CreateContainerConfigError", str(exc))
                self.next_start = now + 0.5
                return
        log = pod.open_log()
        try:
            log.write(f"--- lab kubelet: starting container {self.name} "
                      f"({launch.program or self.image})\n".encode())
            for note in launch.notes:
                log.write(f"--- lab kubelet: {note}\n".encode())
            log.flush()
            proc = subprocess.Popen(
                launch.argv, env=launch.env, cwd=pod.dir, stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.PIPE if launch.stdin is not None else subprocess.DEVNULL,
                start_new_session=True)
            # the pod's own session: as lab-yielding as this kubelet thread (host/priority.py)
            priority.set_session(proc.pid, priority.current())
        except OSError as exc:
            self.waiting = ("RunContainerError", f"cannot start {launch.argv[0]}: "
                            f"{exc.strerror or 'error'}")
            self.next_start = now + self.backoff
            return
        finally:
            log.close()
        if launch.stdin is not None and proc.stdin is not None:
            try:
                proc.stdin.write(launch.stdin)
                proc.stdin.close()
            except OSError:
                pass
        if self.ever_started:
            self.restart_count += 1
        self.ever_started = True
        self.proc = proc
        self.started_at = pod.kubelet.now()
        self.run_since = now
        self.kill_at = None
        self.startup_passed = False
        for probe in (self.probe, self.liveness, self.startup):
            if probe is not None:
                probe.reset(time.monotonic())
        pod.kubelet.record_pid(self.pid_key, proc.pid)
        pod.event("Started", f"Started container {self.name}")

    def _launch(self) -> Launch:
        """The process for this container: its image's program, the API server's address in
        the environment and, unless disabled, the ServiceAccount token mounted."""
        pod = self.pod
        mounts = volume_mounts(pod.current, self.spec, pod.dir, pod.lab_dir)
        ctx = pod.kubelet.ctx
        base_env = dict(pod.base_env)
        sa_dir = None
        if ctx.api is not None:
            base_env.update(ctx.api.env())
            if ctx.tokens is not None and automounts(pod.current, pod.store):
                sa_dir = mount_service_account(pod.current, pod.store, ctx.tokens, ctx.api,
                                               pod.dir)
                mounts.setdefault(SERVICEACCOUNT_PATH, sa_dir)
        if is_rotate_image(self.image):
            return rotate_launch(self.spec, self.env, base_env=base_env, mounts=mounts,
                                 sa_dir=sa_dir)
        return launch_for(self.spec, self.env, pod_ip=pod.ip, pod_dir=pod.dir,
                          service_name=pod.service_name, lab_dir=pod.lab_dir,
                          base_env=base_env, mounts=mounts, runtime_dir=ctx.runtime_dir)

    def _exited(self, now: float) -> None:
        assert self.proc is not None
        code = self.proc.returncode
        pod = self.pod
        pod.kubelet.record_pid(self.pid_key, None, exited=self.proc.pid)
        self.last_state = {"terminated": {
            "exitCode": code if code >= 0 else 128 - code,
            "reason": "Completed" if code == 0 else "Error",
            "startedAt": self.started_at, "finishedAt": pod.kubelet.now(),
            "containerID": f"lab://{self.proc.pid}"}}
        self.proc = None
        policy = pod.restart_policy
        if policy == "Never" or (policy == "OnFailure" and code == 0):
            self.terminated, self.last_state = self.last_state["terminated"], {}
            pod.event("Completed" if code == 0 else "Failed",
                      f"Container {self.name} exited with code {code}",
                      "Normal" if code == 0 else "Warning")
            return
        if now - self.run_since > 60 * pod.backoff_base:
            self.backoff = pod.backoff_base  # ran long enough: forget earlier crashes
        self.next_start = now + self.backoff
        self.waiting = ("CrashLoopBackOff",
                        f"back-off {self.backoff:g}s restarting failed container={self.name} "
                        f"pod={pod.name}_{pod.ns}({pod.uid})")
        self.backoff = min(self.backoff * 2, 30 * pod.backoff_base)
        pod.event("BackOff", f"Back-off restarting failed container {self.name} in pod "
                  f"{pod.name}_{pod.ns}({pod.uid})", "Warning")

    def _probe(self, probe: Probe) -> bool:
        return probe.run(self.spec, self.pod.ip, {**self.pod.base_env, **self.env}, self.pod.dir)

    def kill(self, sig: int) -> None:
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, sig)

    def status(self) -> Obj:
        state: Obj
        if self.terminated is not None:
            state = {"terminated": dict(self.terminated)}
        elif self.proc is not None:
            state = {"running": {"startedAt": self.started_at}}
        else:
            reason, message = self.waiting
            state = {"waiting": {"reason": reason, **({"message": message} if message else {})}}
        out: Obj = {"name": self.name, "image": self.image, "imageID": "",
                    "ready": self.ready, "started": self.started,
                    "restartCount": self.restart_count, "state": state,
                    "lastState": self.last_state}
        if self.proc is not None:
            out["containerID"] = f"lab://{self.proc.pid}"
        return out


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
